//! The `[model]` table of agentd's configuration file, and building a provider from it.
//!
//! ```toml
//! [model]
//! base_url = "https://api.deepseek.com/v1"   # any OpenAI-compatible endpoint
//! model = "deepseek-chat"
//! api_key_env = "DEEPSEEK_API_KEY"           # the name of the variable, never the key itself
//! # optional:
//! max_tokens = 4096       # the limit on generated tokens
//! max_tokens_field = "auto"   # or "max_completion_tokens" or "max_tokens": which field carries it
//! send_reasoning = "auto" # or "never", "current_turn", "tool_turns", "always" (see below)
//! temperature = 0.2
//! timeout_secs = 120      # the longest silence tolerated while the model answers
//! max_retries = 3         # on 429, 5xx and failed connections, before any answer arrived
//! include_usage = false   # ask for token usage (stream_options); some servers reject it
//! context_window = 128000 # the tokens the model reads at most: the history is compacted
//!                         # before it outgrows them (see `[compaction]`); never without it
//! ```
//!
//! `send_reasoning` says which earlier assistant messages go back to the server with the
//! reasoning the model showed in them: those after the last user message (`current_turn`, the
//! tool loop in progress), those that called tools plus the current ones (`tool_turns`), all, or
//! none. `auto` follows the provider family's documented rule, and `max_tokens_field = "auto"`
//! the field its reference documents; [`super::family`] has both rules.
//!
//! or, to replay turns from a file (see [`super::scripted`]):
//!
//! ```toml
//! [model]
//! provider = "scripted"
//! script = "demo-turns.toml"   # relative to the configuration file's directory
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::family::{MaxTokensField, SendReasoning};
use super::openai::{OpenAiProvider, OpenAiSettings};
use super::scripted::ScriptedProvider;
use super::{ModelError, Provider};

/// The `[model]` table. Every key is optional in the file; [`build_provider`] says which ones a
/// provider needs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// Which provider answers; `openai` when absent.
    pub provider: Option<ProviderKind>,
    /// The endpoint, up to and excluding `/chat/completions` (e.g. `https://api.openai.com/v1`).
    pub base_url: Option<String>,
    /// The model name the server knows.
    pub model: Option<String>,
    /// The name of the environment variable holding the API key. Absent for servers that need
    /// no key (a local Ollama or llama.cpp server).
    pub api_key_env: Option<String>,
    /// The limit on generated tokens; none is sent when absent.
    pub max_tokens: Option<u32>,
    /// Which request field carries `max_tokens`; `auto` when absent.
    pub max_tokens_field: Option<MaxTokensField>,
    /// Which assistant messages go back with their reasoning; `auto` when absent.
    pub send_reasoning: Option<SendReasoning>,
    pub temperature: Option<Temperature>,
    /// The longest silence tolerated, in seconds, while waiting for the answer to start or
    /// continue (not a limit on the whole answer). 120 when absent.
    pub timeout_secs: Option<u64>,
    /// How often a failed request is tried again. 3 when absent.
    pub max_retries: Option<u32>,
    /// Ask the server to report token usage (`stream_options.include_usage`). Off when absent
    /// because some OpenAI-compatible servers reject the option.
    pub include_usage: Option<bool>,
    /// The turns file of the scripted provider.
    pub script: Option<PathBuf>,
    /// How many tokens the model reads at most. Only the session's compaction reads it (see
    /// `[compaction]` in [`crate::config`]): without it the history is never compacted.
    pub context_window: Option<ContextWindow>,
}

/// A model's context window in tokens, at least 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "u64")]
pub struct ContextWindow(u64);

impl ContextWindow {
    pub fn get(self) -> u64 {
        self.0
    }
}

/// A context window of 0 tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "context_window must be at least 1 (the tokens the model reads at most); drop it to never \
     compact the history"
)]
pub struct ZeroContextWindow;

impl TryFrom<u64> for ContextWindow {
    type Error = ZeroContextWindow;

    fn try_from(value: u64) -> Result<ContextWindow, ZeroContextWindow> {
        if value == 0 {
            Err(ZeroContextWindow)
        } else {
            Ok(ContextWindow(value))
        }
    }
}

/// Which provider `[model]` configures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// An OpenAI-compatible chat-completions server.
    #[default]
    Openai,
    /// Turns replayed from `script`.
    Scripted,
}

/// A sampling temperature, a finite number from 0 to 2.
///
/// Its own type so that [`ModelConfig`] can be `Eq` (and so embed in configuration types that
/// are): NaN, the only value that breaks `Eq` for floats, is refused when read.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(try_from = "f64")]
pub struct Temperature(f64);

impl Eq for Temperature {}

impl Temperature {
    pub fn get(self) -> f64 {
        self.0
    }
}

/// A temperature that is not a number from 0 to 2: the value given.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error("temperature must be between 0 and 2, not {0}")]
pub struct TemperatureOutOfRange(pub f64);

impl TryFrom<f64> for Temperature {
    type Error = TemperatureOutOfRange;

    fn try_from(value: f64) -> Result<Temperature, TemperatureOutOfRange> {
        if (0.0..=2.0).contains(&value) {
            Ok(Temperature(value))
        } else {
            Err(TemperatureOutOfRange(value))
        }
    }
}

/// The table [`ModelError::NotConfigured`] suggests.
const EXAMPLE: &str = "[model]\n\
    base_url = \"https://api.deepseek.com/v1\"   # any OpenAI-compatible endpoint\n\
    model = \"deepseek-chat\"\n\
    api_key_env = \"DEEPSEEK_API_KEY\"           # the name of the variable holding the key\n";

const SCRIPTED_EXAMPLE: &str = "[model]\nprovider = \"scripted\"\nscript = \"turns.toml\"\n";

/// Builds the provider `[model]` describes.
///
/// `config_file` is the configuration file the table came from (or would have: the one error
/// messages should name); a relative `script` is taken relative to its directory. The API key is
/// read from the variable `api_key_env` names, now, so a missing key is reported before the first
/// prompt.
pub fn build_provider(
    config: &ModelConfig,
    config_file: Option<&Path>,
) -> Result<Arc<dyn Provider>, ModelError> {
    build_provider_with_env(config, config_file, &|name| std::env::var(name).ok())
}

pub(crate) fn build_provider_with_env(
    config: &ModelConfig,
    config_file: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Arc<dyn Provider>, ModelError> {
    let file = match config_file {
        Some(path) => path.display().to_string(),
        None => "agentd's configuration file (~/.config/agentd/config.toml)".to_owned(),
    };
    match config.provider.unwrap_or_default() {
        ProviderKind::Scripted => scripted_provider(config, config_file, file),
        ProviderKind::Openai => openai_provider(config, file, env),
    }
}

/// The error of a `[model]` table that says something wrong, in the file named `file`.
fn invalid(file: &str, detail: String) -> ModelError {
    ModelError::InvalidConfig {
        file: file.to_owned(),
        detail,
    }
}

/// A scripted provider: its script, relative to the directory of `config_file`.
fn scripted_provider(
    config: &ModelConfig,
    config_file: Option<&Path>,
    file: String,
) -> Result<Arc<dyn Provider>, ModelError> {
    let Some(script) = &config.script else {
        return Err(ModelError::NotConfigured {
            missing: vec!["model.script"],
            file,
            example: SCRIPTED_EXAMPLE.to_owned(),
        });
    };
    let base = config_file.and_then(Path::parent).unwrap_or(Path::new(""));
    let provider = ScriptedProvider::from_file(&base.join(script))?;
    Ok(Arc::new(provider))
}

/// An OpenAI-compatible provider, its key read from the environment `env`; errors name the
/// configuration file `file`.
fn openai_provider(
    config: &ModelConfig,
    file: String,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Arc<dyn Provider>, ModelError> {
    if config.script.is_some() {
        return Err(invalid(
            &file,
            "model.script is only read with provider = \"scripted\"; drop it or set the \
             provider"
                .to_owned(),
        ));
    }
    let mut missing = Vec::new();
    if config.base_url.is_none() {
        missing.push("model.base_url");
    }
    if config.model.is_none() {
        missing.push("model.model");
    }
    let (Some(base_url), Some(model)) = (&config.base_url, &config.model) else {
        return Err(ModelError::NotConfigured {
            missing,
            file,
            example: EXAMPLE.to_owned(),
        });
    };
    let api_key = api_key(config, &file, env)?;
    if config.timeout_secs == Some(0) {
        return Err(invalid(
            &file,
            "model.timeout_secs must be at least 1 (seconds of silence tolerated)".to_owned(),
        ));
    }
    let settings = openai_settings(config, base_url, model, api_key);
    let provider = OpenAiProvider::new(settings).map_err(|e| invalid(&file, e.to_string()))?;
    Ok(Arc::new(provider))
}

/// The API key, read now from the variable `api_key_env` names; `None` without one.
fn api_key(
    config: &ModelConfig,
    file: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<String>, ModelError> {
    Ok(match &config.api_key_env {
        None => None,
        Some(var) if !confine_protocol::environment::is_variable_name(var) => {
            return Err(invalid(
                file,
                "model.api_key_env must be the name of an environment variable (like \
                 DEEPSEEK_API_KEY), not the key itself; put the key in that variable"
                    .to_owned(),
            ));
        }
        Some(var) => match env(var) {
            Some(key) if !key.trim().is_empty() => Some(key.trim().to_owned()),
            _ => return Err(ModelError::MissingApiKey { var: var.clone() }),
        },
    })
}

/// The settings of the endpoint `base_url` serving `model`, as the table gives them, with the
/// rules that may be automatic resolved for it.
fn openai_settings(
    config: &ModelConfig,
    base_url: &str,
    model: &str,
    api_key: Option<String>,
) -> OpenAiSettings {
    let mut settings = OpenAiSettings::new(base_url.to_owned(), model.to_owned());
    settings.api_key = api_key;
    settings.api_key_env = config.api_key_env.clone();
    settings.max_tokens = config.max_tokens;
    settings.max_tokens_field = config
        .max_tokens_field
        .unwrap_or_default()
        .resolve(base_url, model);
    settings.send_reasoning = config
        .send_reasoning
        .unwrap_or_default()
        .resolve(base_url, model);
    settings.temperature = config.temperature.map(Temperature::get);
    settings.include_usage = config.include_usage.unwrap_or(false);
    if let Some(secs) = config.timeout_secs {
        settings.idle_timeout = Duration::from_secs(secs);
    }
    if let Some(retries) = config.max_retries {
        settings.max_retries = retries;
    }
    settings
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How the configuration file embeds the table.
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        model: ModelConfig,
    }

    fn parse(text: &str) -> Result<ModelConfig, toml::de::Error> {
        toml::from_str::<File>(text).map(|file| file.model)
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn build(config: &ModelConfig) -> Result<Arc<dyn Provider>, ModelError> {
        build_provider_with_env(config, Some(Path::new("/etc/agentd/config.toml")), &no_env)
    }

    #[test]
    fn the_documented_table_is_read() {
        let config = parse(
            "[model]\n\
             base_url = \"https://api.deepseek.com/v1\"   # any OpenAI-compatible endpoint\n\
             model = \"deepseek-chat\"\n\
             api_key_env = \"DEEPSEEK_API_KEY\"           # the name of the variable\n",
        )
        .expect("parses");
        assert_eq!(
            config,
            ModelConfig {
                base_url: Some("https://api.deepseek.com/v1".into()),
                model: Some("deepseek-chat".into()),
                api_key_env: Some("DEEPSEEK_API_KEY".into()),
                ..ModelConfig::default()
            }
        );
    }

    #[test]
    fn every_optional_key_is_read() {
        let config = parse(
            "[model]\nprovider = \"scripted\"\nscript = \"t.toml\"\nmax_tokens = 100\n\
             temperature = 0.5\ntimeout_secs = 9\nmax_retries = 0\ninclude_usage = true\n\
             max_tokens_field = \"max_tokens\"\nsend_reasoning = \"current_turn\"\n\
             context_window = 32768\n",
        )
        .expect("parses");
        assert_eq!(config.context_window.map(ContextWindow::get), Some(32768));
        assert_eq!(config.max_tokens_field, Some(MaxTokensField::MaxTokens));
        assert_eq!(config.send_reasoning, Some(SendReasoning::CurrentTurn));
        assert_eq!(config.provider, Some(ProviderKind::Scripted));
        assert_eq!(config.script, Some(PathBuf::from("t.toml")));
        assert_eq!(config.max_tokens, Some(100));
        assert_eq!(config.temperature.map(Temperature::get), Some(0.5));
        assert_eq!(config.timeout_secs, Some(9));
        assert_eq!(config.max_retries, Some(0));
        assert_eq!(config.include_usage, Some(true));
    }

    #[test]
    fn unknown_keys_and_bad_values_are_rejected() {
        let err = parse("[model]\nmodle = \"x\"\n").expect_err("typo");
        assert!(err.to_string().contains("modle"), "{err}");
        let err = parse("[model]\ntemperature = 7.0\n").expect_err("out of range");
        assert!(err.to_string().contains("between 0 and 2"), "{err}");
        let err = parse("[model]\nprovider = \"anthropic\"\n").expect_err("unknown provider");
        assert!(err.to_string().contains("anthropic"), "{err}");
        let err = parse("[model]\nsend_reasoning = \"sometimes\"\n").expect_err("unknown rule");
        assert!(
            err.to_string().contains("tool_turns"),
            "the choices are named: {err}"
        );
        let err = parse("[model]\nmax_tokens_field = \"n\"\n").expect_err("unknown field");
        assert!(err.to_string().contains("max_completion_tokens"), "{err}");
        let err = parse("[model]\ncontext_window = 0\n").expect_err("no window");
        assert!(
            err.to_string()
                .contains("context_window must be at least 1")
                && err.to_string().contains("line 2"),
            "{err}"
        );
    }

    #[test]
    fn a_missing_base_url_names_the_key_the_file_and_an_example() {
        let config = ModelConfig {
            model: Some("m".into()),
            ..ModelConfig::default()
        };
        let text = build(&config).expect_err("not configured").to_string();
        assert!(text.contains("model.base_url is missing"), "{text}");
        assert!(text.contains("/etc/agentd/config.toml"), "{text}");
        assert!(text.contains("[model]\nbase_url = "), "{text}");
        assert!(!text.contains("model.model"), "{text}");
    }

    #[test]
    fn an_empty_table_names_both_missing_keys() {
        let text = build_provider_with_env(&ModelConfig::default(), None, &no_env)
            .expect_err("not configured")
            .to_string();
        assert!(
            text.contains("model.base_url and model.model are missing"),
            "{text}"
        );
        assert!(text.contains("~/.config/agentd/config.toml"), "{text}");
    }

    #[test]
    fn an_unset_key_variable_is_named() {
        let config = parse(
            "[model]\nbase_url = \"https://x.example/v1\"\nmodel = \"m\"\napi_key_env = \"MY_KEY\"\n",
        )
        .expect("parses");
        let err = build(&config).expect_err("key missing");
        assert!(matches!(&err, ModelError::MissingApiKey { var } if var == "MY_KEY"));
        assert!(err.to_string().contains("MY_KEY"), "{err}");

        let env = |name: &str| (name == "MY_KEY").then(|| "sk-secret".to_owned());
        let provider = build_provider_with_env(&config, None, &env).expect("builds");
        assert!(!provider.describe().contains("sk-secret"));
        assert!(!format!("{provider:?}").contains("sk-secret"));
    }

    #[test]
    fn a_key_in_place_of_the_variable_name_is_refused_without_echoing_it() {
        let config = parse(
            "[model]\nbase_url = \"https://x.example/v1\"\nmodel = \"m\"\n\
             api_key_env = \"sk-abc123-secret\"\n",
        )
        .expect("parses");
        let text = build(&config).expect_err("refused").to_string();
        assert!(text.contains("not the key itself"), "{text}");
        assert!(!text.contains("sk-abc123"), "{text}");
    }

    #[test]
    fn a_base_url_that_is_not_http_is_refused() {
        for url in [
            "ftp://x/v1",
            "api.deepseek.com/v1",
            "https://user:pw@x/v1",
            "http://",
        ] {
            let config = ModelConfig {
                base_url: Some(url.into()),
                model: Some("m".into()),
                ..ModelConfig::default()
            };
            let err = build(&config).expect_err(url);
            assert!(
                matches!(err, ModelError::InvalidConfig { .. }),
                "{url}: {err}"
            );
            assert!(!err.to_string().contains("pw@"), "{err}");
        }
    }

    #[test]
    fn the_scripted_provider_needs_a_readable_script() {
        let config = parse("[model]\nprovider = \"scripted\"\n").expect("parses");
        let text = build(&config).expect_err("no script").to_string();
        assert!(text.contains("model.script is missing"), "{text}");

        let config =
            parse("[model]\nprovider = \"scripted\"\nscript = \"nope.toml\"\n").expect("parses");
        let err = build(&config).expect_err("unreadable");
        assert!(
            err.to_string().contains("/etc/agentd/nope.toml"),
            "relative to the file's directory: {err}"
        );
    }

    #[test]
    fn a_script_without_the_scripted_provider_is_refused() {
        let config = parse(
            "[model]\nbase_url = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"\nscript = \"t.toml\"\n",
        )
        .expect("parses");
        let text = build(&config).expect_err("refused").to_string();
        assert!(text.contains("provider = \"scripted\""), "{text}");
    }

    #[test]
    fn a_zero_timeout_is_refused() {
        let config = ModelConfig {
            base_url: Some("http://127.0.0.1:1/v1".into()),
            model: Some("m".into()),
            timeout_secs: Some(0),
            ..ModelConfig::default()
        };
        let text = build(&config).expect_err("refused").to_string();
        assert!(text.contains("timeout_secs"), "{text}");
    }

    #[test]
    fn a_local_server_needs_no_key() {
        let config =
            parse("[model]\nbase_url = \"http://localhost:11434/v1\"\nmodel = \"qwen3\"\n")
                .expect("parses");
        let provider = build(&config).expect("builds");
        assert!(
            provider.describe().contains("qwen3"),
            "{}",
            provider.describe()
        );
    }
}
