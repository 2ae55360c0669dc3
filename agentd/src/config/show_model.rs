//! `agentd config show`'s lines for the models: `[model]`, the `[models.NAME]` tables and
//! compaction.

use super::compaction::CompactAt;
use super::effective::Effective;
use super::show::{Lines, optional, quoted, quoted_path, redact_url, show_model_table};
use super::{DEFAULT_MODEL_NAME, Env, Source};
use crate::model::{MaxTokensField, ModelConfig, ProviderKind, SendReasoning};

impl Effective {
    /// The `[model]` table, key by key, or why there is none.
    pub(super) fn show_model(&self, out: &mut Lines, env: Env<'_>) {
        let Some(model) = &self.model else {
            if !self.models.is_empty() {
                out.raw(format!(
                    "model = unset  (the default is [models.{}], see default_model)",
                    self.default_model.value
                ));
                return;
            }
            out.raw(
                "model = not configured  (no [model] table, AGENTD_MODEL, AGENTD_BASE_URL, \
                 AGENTD_API_KEY_ENV or --model-script; see below)"
                    .to_owned(),
            );
            return;
        };
        self.show_model_keys(out, model, env);
        if model.provider.unwrap_or_default() == ProviderKind::Openai {
            self.show_openai_settings(out, model);
        }
    }

    /// The keys of `[model]` the environment and the flags may set too: its provider, its
    /// endpoint, its key variable (and whether that is set) and its script.
    fn show_model_keys(&self, out: &mut Lines, model: &ModelConfig, env: Env<'_>) {
        let sources = &self.model_sources;
        let provider = model.provider.unwrap_or_default();
        let provider_word = match provider {
            ProviderKind::Openai => "openai",
            ProviderKind::Scripted => "scripted",
        };
        out.value("model.provider", quoted(provider_word), &sources.provider);
        let openai = provider == ProviderKind::Openai;
        if openai || model.base_url.is_some() {
            let url = model
                .base_url
                .as_deref()
                .map(|url| quoted(&redact_url(url)));
            out.value("model.base_url", optional(url), &sources.base_url);
        }
        if openai || model.model.is_some() {
            out.value(
                "model.model",
                optional(model.model.as_deref().map(quoted)),
                &sources.model,
            );
        }
        if openai || model.api_key_env.is_some() {
            out.value(
                "model.api_key_env",
                optional(model.api_key_env.as_deref().map(quoted)),
                &sources.api_key_env,
            );
            show_api_key(out, model, env);
        }
        if !openai || model.script.is_some() {
            out.value(
                "model.script",
                optional(model.script.as_deref().map(quoted_path)),
                &sources.script,
            );
        }
    }

    /// The keys of an OpenAI-compatible `[model]` only the file sets: its numbers, and the two
    /// rules that may be automatic with what `auto` means for this endpoint.
    fn show_openai_settings(&self, out: &mut Lines, model: &ModelConfig) {
        let numbers = [
            ("model.max_tokens", model.max_tokens.map(|n| n.to_string())),
            (
                "model.temperature",
                model.temperature.map(|t| t.get().to_string()),
            ),
            (
                "model.timeout_secs",
                model.timeout_secs.map(|n| n.to_string()),
            ),
            (
                "model.max_retries",
                model.max_retries.map(|n| n.to_string()),
            ),
            (
                "model.include_usage",
                model.include_usage.map(|b| b.to_string()),
            ),
        ];
        for (key, value) in numbers {
            let source = self.file_source(value.is_some());
            out.value(key, optional(value), &source);
        }
        let endpoint = model.base_url.as_deref().zip(model.model.as_deref());
        let field = model.max_tokens_field.unwrap_or_default();
        let resolved = endpoint.map(|(url, name)| field.resolve(url, name).as_str());
        out.value(
            "model.max_tokens_field",
            with_auto(field.as_str(), field == MaxTokensField::Auto, resolved),
            &self.file_source(model.max_tokens_field.is_some()),
        );
        let reasoning = model.send_reasoning.unwrap_or_default();
        let resolved = endpoint.map(|(url, name)| reasoning.resolve(url, name).as_str());
        out.value(
            "model.send_reasoning",
            with_auto(
                reasoning.as_str(),
                reasoning == SendReasoning::Auto,
                resolved,
            ),
            &self.file_source(model.send_reasoning.is_some()),
        );
    }

    /// Where a `[model]` key only the file can set came from: the file when it is `set`.
    fn file_source(&self, set: bool) -> Source {
        match (&self.file, set) {
            (Some(path), true) => Source::File(path.clone()),
            _ => Source::Default,
        }
    }

    /// The `[models.NAME]` tables and which model is the default; nothing without named models.
    pub(super) fn show_named_models(&self, out: &mut Lines, env: Env<'_>) {
        if self.models.is_empty() {
            return;
        }
        let default = &self.default_model;
        let names: Vec<&str> = self.models_in_order().iter().map(|(n, _)| *n).collect();
        let choice = if names.len() > 1 {
            "a session may switch between them: the `model` option"
        } else {
            "one model: no `model` option"
        };
        out.raw(format!("models = {}  ({choice})", names.join(", ")));
        let value = if default.value == DEFAULT_MODEL_NAME {
            format!("{} (the [model] table)", quoted(&default.value))
        } else {
            quoted(&default.value)
        };
        out.value("default_model", value, &default.source);
        let source = match &self.file {
            Some(path) => Source::File(path.clone()),
            None => Source::Default,
        };
        for named in &self.models {
            let prefix = format!("models.{}", named.name);
            show_model_table(out, &prefix, &named.model, &source, env);
        }
    }

    /// The context window and when the history is compacted; without a window, that it never is.
    pub(super) fn show_compaction(&self, out: &mut Lines) {
        let named_window = self.models.iter().any(|m| m.model.context_window.is_some());
        let window = match self.context_window.value {
            Some(window) => {
                out.value(
                    "model.context_window",
                    window.to_string(),
                    &self.context_window.source,
                );
                Some(window)
            }
            None if named_window => {
                out.raw(
                    "model.context_window = unset  (default: [model] never compacts; the named \
                     models with a context_window compact as below)"
                        .to_owned(),
                );
                None
            }
            None => {
                out.raw(
                    "model.context_window = unset  (default: the history is never compacted; \
                     set it to the model's context window in tokens to compact long sessions)"
                        .to_owned(),
                );
                return;
            }
        };
        let source = &self.compact_at.source;
        match self.compact_at.value {
            CompactAt::Share(share) => out.value(
                "compaction.threshold",
                match window {
                    Some(window) => format!(
                        "{} (compacts above an estimated {} tokens)",
                        share.get(),
                        self.compact_at.value.tokens(window)
                    ),
                    None => format!("{} (of each model's context_window)", share.get()),
                },
                source,
            ),
            CompactAt::Tokens(tokens) => {
                out.value("compaction.compact_at", tokens.to_string(), source);
            }
        }
        out.value(
            "compaction.keep_turns",
            self.keep_turns.value.to_string(),
            &self.keep_turns.source,
        );
    }
}

/// Whether the variable `[model]` takes its API key from is set, never its value.
fn show_api_key(out: &mut Lines, model: &ModelConfig, env: Env<'_>) {
    match &model.api_key_env {
        Some(var) => {
            let set = env(var).is_some_and(|value| !value.to_string_lossy().trim().is_empty());
            let state = if set { "set" } else { "NOT SET" };
            out.raw(format!("api key: ${var} ({state})"));
        }
        None => out.raw(
            "api key: none (model.api_key_env is unset: only for servers that need no key)"
                .to_owned(),
        ),
    }
}

/// A rule's word, and for `auto` the rule it stands for here when that is known.
fn with_auto(word: &str, auto: bool, resolved: Option<&str>) -> String {
    match resolved {
        Some(rule) if auto => format!("{} (here: {})", quoted(word), quoted(rule)),
        _ => quoted(word),
    }
}
