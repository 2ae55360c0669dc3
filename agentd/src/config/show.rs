//! What `agentd config show` prints: every effective value and where it came from.

use std::path::{Path, PathBuf};

use super::effective::{Effective, HelperChoice};
use super::helper::exe_dir;
use super::{Env, MODEL_EXAMPLE, Source, process_env};
use crate::agents::{Persona, PersonaModel};
use crate::helper_client::{LocateError, locate_helper};
use crate::model::{ModelConfig, ProviderKind};
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
        self.show_file(&mut out);

        self.show_model(&mut out, env);
        self.show_named_models(&mut out, env);
        self.show_compaction(&mut out);

        self.show_sandbox(&mut out);
        self.show_approval(&mut out);
        for line in super::mcp::show(&self.mcp_servers.value, &self.mcp_servers.source) {
            out.raw(line);
        }

        self.show_helper(&mut out, env, exe_dir);

        self.show_session(&mut out);
        self.show_limits(&mut out);
        self.show_checkpoints(&mut out);

        for persona in self.personas.iter() {
            self.show_persona(&mut out, persona, env);
        }

        self.show_model_example(&mut out);
        out.0
    }

    /// Which configuration file was consulted, and whether it exists.
    fn show_file(&self, out: &mut Lines) {
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
    }

    /// `[sandbox]`: the mode, the network with its allow-list, the backend and the profile.
    fn show_sandbox(&self, out: &mut Lines) {
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
        self.show_allow_list(out);
        out.value(
            "sandbox.backend",
            quoted(self.backend.value.as_str()),
            &self.backend.source,
        );
        self.show_profile(out);
    }

    /// `[approval]`: the policy and the tools that ask before every call.
    fn show_approval(&self, out: &mut Lines) {
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
    }

    /// `[session]`: where session logs are kept, and the steps of a prompt.
    fn show_session(&self, out: &mut Lines) {
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
    }

    /// `[limits]`: the command timeout and what every command may use.
    fn show_limits(&self, out: &mut Lines) {
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
    }

    /// `[checkpoints]`: whether they are recorded, their cap and their retention.
    fn show_checkpoints(&self, out: &mut Lines) {
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
    }

    /// When no model is configured: how to configure one.
    fn show_model_example(&self, out: &mut Lines) {
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
pub(super) fn show_model_table(
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

/// A value, or `unset`.
pub(super) fn optional(value: Option<String>) -> String {
    value.unwrap_or_else(|| "unset".to_owned())
}

/// `url` without anything that could be a credential: user information and the query.
pub(super) fn redact_url(url: &str) -> String {
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
