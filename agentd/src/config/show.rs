//! What `agentd config show` prints: every effective value and where it came from.

use std::path::{Path, PathBuf};

use super::compaction::CompactAt;
use super::effective::{Effective, HelperChoice};
use super::helper::exe_dir;
use super::{DEFAULT_MODEL_NAME, Env, MODEL_EXAMPLE, Source, process_env};
use crate::agents::{Persona, PersonaModel};
use crate::helper_client::{LocateError, locate_helper};
use crate::model::{MaxTokensField, ModelConfig, ProviderKind, SendReasoning};
use crate::tools::{ToolRegistry, ToolScope};

impl Effective {
    /// What `agentd config show` prints: every effective value and where it came from, one per
    /// line. Never a secret: of the API key only the variable's name and whether it is set.
    pub fn show(&self) -> String {
        self.show_with(&process_env, exe_dir())
    }

    /// [`Effective::show`] with the environment `env` (which also gives `PATH`) and agentd's
    /// directory `exe_dir`, for the helper search.
    pub fn show_with(&self, env: Env<'_>, exe_dir: Option<PathBuf>) -> String {
        let mut out = Lines::default();
        match &self.file {
            Some(path) if self.file_found => {
                out.raw(format!("configuration file: {}", path.display()));
            }
            Some(path) => out.raw(format!(
                "configuration file: {} (absent: nothing comes from a file)",
                path.display()
            )),
            None => out.raw(
                "configuration file: none (neither XDG_CONFIG_HOME nor HOME is set; use --config)"
                    .to_owned(),
            ),
        }

        self.show_model(&mut out, env);
        self.show_named_models(&mut out, env);
        self.show_compaction(&mut out);

        out.value(
            "sandbox.mode",
            quoted(self.sandbox_mode.value.as_str()),
            &self.sandbox_mode.source,
        );
        if self.sandbox_mode.configured().is_none() {
            out.raw("  (agentd run without --mode: \"read-only\" unless this is set)".into());
        }
        let network = match &self.allow_list.value {
            Some(_) => crate::config::allow_list::ALLOW_LIST,
            None => self.network.value.as_str(),
        };
        out.value("sandbox.network", quoted(network), &self.network.source);
        self.show_allow_list(&mut out);
        out.value(
            "sandbox.backend",
            quoted(self.backend.value.as_str()),
            &self.backend.source,
        );
        self.show_profile(&mut out);
        out.value(
            "approval.policy",
            quoted(self.approval_policy.value.as_str()),
            &self.approval_policy.source,
        );
        let tools: Vec<String> = self.ask_before.value.iter().map(|t| quoted(t)).collect();
        out.value(
            "approval.ask_before",
            format!("[{}]", tools.join(", ")),
            &self.ask_before.source,
        );
        for line in super::mcp::show(&self.mcp_servers.value, &self.mcp_servers.source) {
            out.raw(line);
        }

        self.show_helper(&mut out, env, exe_dir);

        match &self.state_dir.value {
            Some(dir) => out.value(
                "session.state_dir",
                quoted_path(dir),
                &self.state_dir.source,
            ),
            None => out.raw(
                "session.state_dir = unset  (default; neither XDG_STATE_HOME nor HOME is set)"
                    .to_owned(),
            ),
        }
        out.value(
            "session.max_steps",
            self.max_steps.value.to_string(),
            &self.max_steps.source,
        );
        out.value(
            "limits.command_timeout_ms",
            self.command_timeout_ms.value.to_string(),
            &self.command_timeout_ms.source,
        );
        for (key, setting, unset) in [
            (
                "limits.max_processes",
                &self.max_processes,
                "unset (confine-helper's cap: 2048 tasks at once)",
            ),
            ("limits.max_file_size", &self.max_file_size, "unset"),
            ("limits.max_address_space", &self.max_address_space, "unset"),
            (
                "limits.max_memory",
                &self.max_memory,
                "unset (confine-helper's cap where it can count memory: half the machine's)",
            ),
        ] {
            let value = setting
                .value
                .map_or_else(|| unset.to_owned(), |n| n.to_string());
            out.value(key, value, &setting.source);
        }

        out.value(
            "checkpoints.enabled",
            self.checkpoints_enabled.value.to_string(),
            &self.checkpoints_enabled.source,
        );
        for (key, setting) in [
            ("checkpoints.max_bytes", &self.checkpoint_max_bytes),
            ("checkpoints.max_age_days", &self.checkpoint_max_age_days),
            (
                "checkpoints.max_per_session",
                &self.checkpoint_max_per_session,
            ),
        ] {
            out.value(key, setting.value.to_string(), &setting.source);
        }

        for persona in self.personas.iter() {
            self.show_persona(&mut out, persona, env);
        }

        if self.model.is_none() && self.models.is_empty() {
            let place = match &self.file {
                Some(path) => path.display().to_string(),
                None => "the file given with --config".to_owned(),
            };
            out.raw(String::new());
            out.raw(format!(
                "No model is configured. To use one, add this to {place} (or set AGENTD_BASE_URL, \
                 AGENTD_MODEL and AGENTD_API_KEY_ENV):"
            ));
            out.raw(String::new());
            out.0.push_str(MODEL_EXAMPLE);
        }
        out.0
    }

    fn show_model(&self, out: &mut Lines, env: Env<'_>) {
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
        let sources = &self.model_sources;
        // Keys only the file can set.
        let file_source = |set: bool| match (&self.file, set) {
            (Some(path), true) => Source::File(path.clone()),
            _ => Source::Default,
        };
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
            match &model.api_key_env {
                Some(var) => {
                    let set =
                        env(var).is_some_and(|value| !value.to_string_lossy().trim().is_empty());
                    let state = if set { "set" } else { "NOT SET" };
                    out.raw(format!("api key: ${var} ({state})"));
                }
                None => out.raw(
                    "api key: none (model.api_key_env is unset: only for servers that need no key)"
                        .to_owned(),
                ),
            }
        }
        if !openai || model.script.is_some() {
            out.value(
                "model.script",
                optional(model.script.as_deref().map(quoted_path)),
                &sources.script,
            );
        }
        if openai {
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
                let source = file_source(value.is_some());
                out.value(key, optional(value), &source);
            }
            // The two rules that may be automatic, with what `auto` means for this endpoint.
            let endpoint = model.base_url.as_deref().zip(model.model.as_deref());
            let field = model.max_tokens_field.unwrap_or_default();
            let resolved = endpoint.map(|(url, name)| field.resolve(url, name).as_str());
            out.value(
                "model.max_tokens_field",
                with_auto(field.as_str(), field == MaxTokensField::Auto, resolved),
                &file_source(model.max_tokens_field.is_some()),
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
                &file_source(model.send_reasoning.is_some()),
            );
        }
    }

    /// The `[models.NAME]` tables and which model is the default; nothing without named models.
    fn show_named_models(&self, out: &mut Lines, env: Env<'_>) {
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
    fn show_compaction(&self, out: &mut Lines) {
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

    /// One persona, key by key. Its tools are shown resolved as for a child of the top level.
    fn show_persona(&self, out: &mut Lines, persona: &Persona, env: Env<'_>) {
        let source = self.persona_source(&persona.name);
        let key = |name: &str| format!("agents.{}.{name}", persona.name);
        out.value(&key("description"), quoted(&persona.description), &source);
        out.value(
            &key("instructions"),
            preview(&persona.instructions),
            &source,
        );
        match &persona.model {
            None => out.value(
                &key("model"),
                "unset (the session's model)".to_owned(),
                &source,
            ),
            Some(PersonaModel::Own(model)) => {
                show_model_table(out, &key("model"), model, &source, env);
            }
            Some(PersonaModel::Named(name)) => out.value(
                &key("model"),
                format!("{} (the model [models.{name}])", quoted(name)),
                &source,
            ),
        }
        let set = |value: bool| {
            if value {
                source.clone()
            } else {
                Source::Default
            }
        };
        let registry = ToolRegistry::builtin();
        let tools = match &persona.tools {
            None => "unset (its parent's tools)".to_owned(),
            Some(filter) => {
                let visible = ToolScope::top()
                    .child(Some(filter), false)
                    .resolve(&registry);
                let visible = if visible.is_empty() {
                    "none".to_owned()
                } else {
                    visible.to_string()
                };
                format!("{filter} (under the top level: {visible})")
            }
        };
        out.value(&key("tools"), tools, &set(persona.tools.is_some()));
        out.value(
            &key("max_depth"),
            persona.depth_cap().to_string(),
            &set(persona.max_depth.is_some()),
        );
    }

    fn show_helper(&self, out: &mut Lines, env: Env<'_>, exe_dir: Option<PathBuf>) {
        let source = &self.helper.source;
        match &self.helper.value {
            HelperChoice::Socket(socket) => out.value("helper.socket", quoted_path(socket), source),
            HelperChoice::Binary(path) => {
                out.value("helper.path", quoted_path(path), source);
                let inputs = self.locate_inputs(exe_dir, env("PATH"));
                if let Err(e) = locate_helper(&inputs) {
                    out.raw(format!("  warning: {e}"));
                }
            }
            HelperChoice::Search => {
                let inputs = self.locate_inputs(exe_dir.clone(), env("PATH"));
                match locate_helper(&inputs) {
                    Ok(path) => {
                        let place = if path.parent() == exe_dir.as_deref() {
                            "found next to agentd"
                        } else {
                            "found on PATH"
                        };
                        out.raw(format!("helper.path = {}  ({place})", quoted_path(&path)));
                    }
                    Err(LocateError::NotFound { .. }) => out.raw(
                        "helper.path = not found  (looked next to agentd and on PATH; pass \
                         --helper PATH or set helper.path)"
                            .to_owned(),
                    ),
                    Err(e) => {
                        out.raw("helper.path = not usable  (default search)".to_owned());
                        out.raw(format!("  warning: {e}"));
                    }
                }
            }
        }
        out.value(
            "helper.ceiling",
            optional(self.helper_ceiling.value.as_deref().map(quoted_path)),
            &self.helper_ceiling.source,
        );
        out.value(
            "helper.file_io",
            optional(self.helper_file_io.value.as_deref().map(quoted_path)),
            &self.helper_file_io.source,
        );
    }
}

/// A whole model table (a persona's own, a named model): the keys it sets, and whether its key
/// variable is set.
fn show_model_table(
    out: &mut Lines,
    prefix: &str,
    model: &ModelConfig,
    source: &Source,
    env: Env<'_>,
) {
    let provider = match model.provider.unwrap_or_default() {
        ProviderKind::Openai => "openai",
        ProviderKind::Scripted => "scripted",
    };
    let keys = [
        ("provider", Some(quoted(provider))),
        (
            "base_url",
            model
                .base_url
                .as_deref()
                .map(|url| quoted(&redact_url(url))),
        ),
        ("model", model.model.as_deref().map(quoted)),
        ("api_key_env", model.api_key_env.as_deref().map(quoted)),
        ("script", model.script.as_deref().map(quoted_path)),
        ("max_tokens", model.max_tokens.map(|n| n.to_string())),
        (
            "max_tokens_field",
            model.max_tokens_field.map(|f| quoted(f.as_str())),
        ),
        (
            "send_reasoning",
            model.send_reasoning.map(|r| quoted(r.as_str())),
        ),
        (
            "temperature",
            model.temperature.map(|t| t.get().to_string()),
        ),
        ("timeout_secs", model.timeout_secs.map(|n| n.to_string())),
        ("max_retries", model.max_retries.map(|n| n.to_string())),
        ("include_usage", model.include_usage.map(|b| b.to_string())),
        (
            "context_window",
            model.context_window.map(|w| w.get().to_string()),
        ),
    ];
    for (key, value) in keys {
        if let Some(value) = value {
            out.value(&format!("{prefix}.{key}"), value, source);
        }
    }
    if let Some(var) = &model.api_key_env {
        let set = env(var).is_some_and(|value| !value.to_string_lossy().trim().is_empty());
        let state = if set { "set" } else { "NOT SET" };
        out.raw(format!("{prefix} api key: ${var} ({state})"));
    }
}

/// A long text as `config show` shows it: its first line, cut at 60 characters, and its size.
fn preview(text: &str) -> String {
    const SHOWN: usize = 60;
    let first = text.lines().next().unwrap_or_default();
    let mut shown: String = first.chars().take(SHOWN).collect();
    if first.chars().count() > SHOWN || text.lines().count() > 1 {
        shown.push('…');
    }
    let lines = text.lines().count();
    let plural = if lines == 1 { "" } else { "s" };
    format!(
        "{} ({lines} line{plural}, {} characters)",
        quoted(&shown),
        text.chars().count()
    )
}

/// The text `config show` builds.
#[derive(Default)]
pub(super) struct Lines(String);

impl Lines {
    pub(super) fn raw(&mut self, line: String) {
        self.0.push_str(&line);
        self.0.push('\n');
    }

    pub(super) fn value(&mut self, key: &str, value: String, source: &Source) {
        self.raw(format!("{key} = {value}  ({source})"));
    }
}

pub(super) fn quoted(text: &str) -> String {
    format!("{text:?}")
}

pub(super) fn quoted_path(path: &Path) -> String {
    quoted(&path.display().to_string())
}

/// A rule's word, and for `auto` the rule it stands for here when that is known.
fn with_auto(word: &str, auto: bool, resolved: Option<&str>) -> String {
    match resolved {
        Some(rule) if auto => format!("{} (here: {})", quoted(word), quoted(rule)),
        _ => quoted(word),
    }
}

fn optional(value: Option<String>) -> String {
    value.unwrap_or_else(|| "unset".to_owned())
}

/// `url` without anything that could be a credential: user information and the query.
fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), url),
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((_, host)) => format!("***@{host}"),
        None => authority.to_owned(),
    };
    let path = match path.split_once('?') {
        Some((path, _)) => format!("{path}?***"),
        None => path.to_owned(),
    };
    format!("{scheme}{authority}{path}")
}
