//! agentd's configuration: the file `agentd.toml`, the `AGENTD_*` environment variables and the
//! command-line flags, merged into one [`Effective`] configuration that says, for every value,
//! where it came from.
//!
//! Each value is taken from the first of these that sets it: a flag, the environment, the file,
//! the built-in default. [`Effective::load`] is the one place that merges them; the rest of
//! agentd reads its settings from the [`Effective`] it returns.
//!
//! The file is `--config PATH`, else `$XDG_CONFIG_HOME/agentd/agentd.toml` (only if
//! `XDG_CONFIG_HOME` is absolute, as the XDG specification requires), else
//! `$HOME/.config/agentd/agentd.toml`. It is optional: a missing file at the default location
//! means every default. Anything it does contain must be understood exactly, so unknown keys are
//! errors rather than silently ignored (a misspelt `helper.path` must not quietly fall back to
//! some other confine-helper), and every value is checked, with errors naming the file, the line,
//! the key and what is allowed. Relative paths in the file are taken from the file's directory,
//! so it means the same from any working directory; relative paths in flags and variables are
//! taken from the current directory.
//!
//! ```toml
//! [model]                      # see agentd::model::ModelConfig
//! base_url = "https://api.deepseek.com/v1"   # any OpenAI-compatible endpoint
//! model = "deepseek-chat"
//! api_key_env = "DEEPSEEK_API_KEY"           # the name of the variable, never the key itself
//!
//! [sandbox]
//! mode = "workspace-write"     # of new sessions: read-only | workspace-write | danger-full-access
//! network = "deny"             # deny | allow
//! backend = "auto"             # auto | bwrap | landlock | seatbelt
//!
//! [approval]
//! policy = "ask"               # ask | never
//! ask_before = ["write_file"]  # tools that ask the user before every call
//!
//! [helper]                     # how to reach confine-helper
//! path = "/usr/local/bin/confine-helper"     # or: socket = "/run/confine-helper.sock"
//! ceiling = "ceiling.toml"     # embedded helper only
//!
//! [session]
//! state_dir = "/path"          # default: $XDG_STATE_HOME/agentd/sessions
//! max_steps = 50               # model requests per prompt
//!
//! [limits]
//! command_timeout_ms = 120000  # default timeout of a command
//! max_processes = 512          # optional resource limits of every command
//! max_file_size = 1073741824
//! max_address_space = 8589934592
//! ```
//!
//! | Setting | Variable | Flag |
//! |---|---|---|
//! | `model.model` | `AGENTD_MODEL` | |
//! | `model.base_url` | `AGENTD_BASE_URL` | |
//! | `model.api_key_env` | `AGENTD_API_KEY_ENV` | |
//! | `model.provider`, `model.script` | | `--model-script FILE` |
//! | `sandbox.mode` | `AGENTD_SANDBOX_MODE` | |
//! | `approval.policy` | `AGENTD_APPROVAL_POLICY` | |
//! | `session.state_dir` | `AGENTD_STATE_DIR` | `--state-dir DIR` |
//! | `helper.path` | `AGENTD_HELPER` | `--helper PATH` |
//! | `helper.socket` | | `--helper-socket PATH` |
//! | `helper.ceiling` | | `--helper-ceiling PATH` |
//!
//! An empty variable counts as unset.

use std::ffi::OsString;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use confine_protocol::{BackendChoice, Limits, Mode, Network};
use serde::Deserialize;
use toml::Spanned;

use crate::helper_client::{
    ClientError, HelperClient, HelperEndpoint, LocateError, LocateInputs, locate_helper,
};
use crate::model::{
    MaxTokensField, ModelConfig, ModelError, Provider, ProviderKind, SendReasoning, build_provider,
};

/// The configuration file's name, in `$XDG_CONFIG_HOME/agentd/` or `~/.config/agentd/`.
pub const FILE_NAME: &str = "agentd.toml";

/// `sandbox.mode` when nothing sets it.
pub const DEFAULT_SANDBOX_MODE: Mode = Mode::WorkspaceWrite;

/// `session.max_steps` when nothing sets it.
pub const DEFAULT_MAX_STEPS: u32 = 50;

/// `limits.command_timeout_ms` when nothing sets it.
pub const DEFAULT_COMMAND_TIMEOUT_MS: u64 = 120_000;

/// A `[model]` table to copy, shown when no model is configured.
pub const MODEL_EXAMPLE: &str = "[model]\n\
    base_url = \"https://api.deepseek.com/v1\"   # any OpenAI-compatible endpoint\n\
    model = \"deepseek-chat\"\n\
    api_key_env = \"DEEPSEEK_API_KEY\"           # the name of the variable, never the key itself\n";

/// How configuration reads the environment: a variable's value, or `None` when unset.
/// [`process_env`] reads this process's environment; tests pass their own.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<OsString>;

/// This process's environment, as an [`Env`].
pub fn process_env(name: &str) -> Option<OsString> {
    std::env::var_os(name)
}

// ---------------------------------------------------------------------------------------------
// The file
// ---------------------------------------------------------------------------------------------

/// Everything the configuration file may set, checked, with relative paths resolved against the
/// file's directory. `None` means "not in the file".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    /// The `[model]` table, if the file has one.
    pub model: Option<ModelConfig>,
    pub sandbox: SandboxSection,
    pub approval: ApprovalSection,
    pub helper: HelperSection,
    pub session: SessionSection,
    pub limits: LimitsSection,
}

/// The `[sandbox]` table: how far the commands of new sessions may reach.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxSection {
    pub mode: Option<Mode>,
    pub network: Option<Network>,
    pub backend: Option<BackendChoice>,
}

/// The `[approval]` table: when the user is asked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApprovalSection {
    pub policy: Option<ApprovalPolicy>,
    /// Tools that ask the user before every call.
    pub ask_before: Option<Vec<String>>,
}

/// The `[helper]` table: which confine-helper to use.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HelperSection {
    /// The helper binary to spawn (embedded mode).
    pub path: Option<PathBuf>,
    /// The socket of a helper started on its own (service mode).
    pub socket: Option<PathBuf>,
    /// A ceiling file for the helper agentd starts (`confine-helper --fd 3 --ceiling PATH`).
    /// Not for service mode: a service helper reads its own ceiling.
    pub ceiling: Option<PathBuf>,
}

/// The `[session]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionSection {
    /// Where session logs are kept.
    pub state_dir: Option<PathBuf>,
    /// Model requests per prompt before the turn stops with `max_turn_requests`.
    pub max_steps: Option<u32>,
}

/// The `[limits]` table: what every command may use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LimitsSection {
    /// The timeout of a command that does not ask for its own, in milliseconds.
    pub command_timeout_ms: Option<u64>,
    /// RLIMIT_NPROC (confine-helper may lower it to its ceiling).
    pub max_processes: Option<u64>,
    /// RLIMIT_FSIZE, in bytes.
    pub max_file_size: Option<u64>,
    /// RLIMIT_AS, in bytes.
    pub max_address_space: Option<u64>,
}

/// `approval.policy`, and the value of a session's `approval/policy` event (spelt `ask` or
/// `never` in both).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalPolicy {
    /// Ask the user when a command needs more than the sandbox allows, and before every call of
    /// a tool in `approval.ask_before`.
    #[default]
    Ask,
    /// Never ask: every request for approval is rejected without asking anyone, so what the
    /// sandbox denies stays denied and the tools in `approval.ask_before` do not run.
    Never,
}

/// The file as written, before its values are checked.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    model: Option<ModelConfig>,
    #[serde(default)]
    sandbox: RawSandbox,
    #[serde(default)]
    approval: RawApproval,
    #[serde(default)]
    helper: HelperSection,
    #[serde(default)]
    session: RawSession,
    #[serde(default)]
    limits: RawLimits,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSandbox {
    mode: Option<Spanned<String>>,
    network: Option<Spanned<String>>,
    backend: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawApproval {
    policy: Option<Spanned<String>>,
    ask_before: Option<Spanned<Vec<Spanned<String>>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSession {
    state_dir: Option<PathBuf>,
    max_steps: Option<Spanned<u32>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    command_timeout_ms: Option<Spanned<u64>>,
    max_processes: Option<Spanned<u64>>,
    max_file_size: Option<Spanned<u64>>,
    max_address_space: Option<Spanned<u64>>,
}

/// A configuration file and what it says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadedConfig {
    /// The file consulted, whether or not it exists; `None` when neither `--config`,
    /// `$XDG_CONFIG_HOME` nor `$HOME` gives a location. Messages name it so users know where to
    /// put a setting.
    pub path: Option<PathBuf>,
    /// Whether the file exists (when it does not, `config` is every default).
    pub found: bool,
    /// The settings, checked, with relative paths resolved against the file's directory.
    pub config: Config,
}

/// The configuration could not be used. Every message names where the bad value came from.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the configuration file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "the configuration file {} given with --config does not exist; create it or drop --config",
        path.display()
    )]
    ExplicitMissing { path: PathBuf },
    #[error(
        "the configuration file {} is malformed: {}",
        path.display(),
        source.to_string().trim_end()
    )]
    Parse {
        path: PathBuf,
        #[source]
        source: toml::de::Error,
    },
    #[error(
        "the configuration file {}, line {line}: {key} = {value:?} is not allowed; use one of \
         {allowed}",
        path.display()
    )]
    NotAllowed {
        path: PathBuf,
        line: usize,
        key: &'static str,
        value: String,
        allowed: String,
    },
    #[error(
        "the configuration file {}, line {line}: {key} = 0 is not allowed; it must be at least 1",
        path.display()
    )]
    Zero {
        path: PathBuf,
        line: usize,
        key: &'static str,
    },
    #[error(
        "the configuration file {}, line {line}: approval.ask_before lists {name:?}, which is \
         not a tool name (letters, digits, `_` and `-`)",
        path.display()
    )]
    NotAToolName {
        path: PathBuf,
        line: usize,
        name: String,
    },
    #[error(
        "the configuration file {}, line {line}: approval.policy = \"never\" never asks, so \
         every call of a tool in approval.ask_before would be rejected; drop one of them",
        path.display()
    )]
    NeverWithAskBefore { path: PathBuf, line: usize },
    #[error(
        "the configuration file {} sets both helper.path and helper.socket; keep only the one \
         that says how to reach confine-helper",
        path.display()
    )]
    PathAndSocket { path: PathBuf },
    #[error(
        "the configuration file {} sets both helper.ceiling and helper.socket; a service helper \
         reads its own ceiling (`confine-helper serve --ceiling PATH`), so drop helper.ceiling",
        path.display()
    )]
    CeilingAndSocket { path: PathBuf },
    #[error(
        "{origin}: model.api_key_env must be the name of an environment variable (like \
         DEEPSEEK_API_KEY), not the key itself; put the key in that variable"
    )]
    ApiKeyEnvNotAName { origin: String },
    #[error(
        "the environment variable {var}={value:?} is not allowed; use one of {allowed}, or unset it"
    )]
    EnvNotAllowed {
        var: &'static str,
        value: String,
        allowed: String,
    },
    #[error("the environment variable {var} is not valid UTF-8; fix or unset it")]
    EnvNotUnicode { var: &'static str },
    #[error("cannot make {} absolute (given by {origin}): {source}", path.display())]
    Absolute {
        path: PathBuf,
        origin: Source,
        #[source]
        source: io::Error,
    },
    #[error(
        "there is no directory for session logs: neither XDG_STATE_HOME (absolute) nor HOME is \
         set; pass --state-dir DIR, set AGENTD_STATE_DIR or set session.state_dir in {file}"
    )]
    NoStateDir { file: String },
}

/// Where the configuration file is looked for, as the environment says.
///
/// `--config PATH` wins; then `$XDG_CONFIG_HOME/agentd/agentd.toml` (only if absolute, as the
/// XDG specification requires); then `$HOME/.config/agentd/agentd.toml`.
pub fn config_path(
    explicit: Option<&Path>,
    xdg_config_home: Option<OsString>,
    home: Option<OsString>,
) -> Option<PathBuf> {
    if let Some(path) = explicit {
        return Some(path.to_owned());
    }
    let xdg = absolute_dir(xdg_config_home);
    if let Some(dir) = xdg {
        return Some(dir.join("agentd").join(FILE_NAME));
    }
    let home = absolute_dir(home)?;
    Some(home.join(".config").join("agentd").join(FILE_NAME))
}

/// Where session logs go by default: `$XDG_STATE_HOME/agentd/sessions` (only if absolute), else
/// `$HOME/.local/state/agentd/sessions`.
pub fn default_state_dir(
    xdg_state_home: Option<OsString>,
    home: Option<OsString>,
) -> Option<PathBuf> {
    if let Some(dir) = absolute_dir(xdg_state_home) {
        return Some(dir.join("agentd").join("sessions"));
    }
    let home = absolute_dir(home)?;
    Some(
        home.join(".local")
            .join("state")
            .join("agentd")
            .join("sessions"),
    )
}

fn absolute_dir(value: Option<OsString>) -> Option<PathBuf> {
    value.map(PathBuf::from).filter(|dir| dir.is_absolute())
}

impl LoadedConfig {
    /// Loads the configuration file of this process: `--config PATH` if given, else the XDG
    /// location.
    pub fn load(explicit: Option<&Path>) -> Result<LoadedConfig, ConfigError> {
        LoadedConfig::load_with(explicit, &process_env)
    }

    /// Loads the configuration file, finding it with `env`.
    ///
    /// A file given explicitly must exist, because a mistyped `--config` should not silently mean
    /// "defaults"; the default location may be absent.
    pub fn load_with(explicit: Option<&Path>, env: Env<'_>) -> Result<LoadedConfig, ConfigError> {
        let path = config_path(explicit, env("XDG_CONFIG_HOME"), env("HOME"));
        let Some(path) = path else {
            return Ok(LoadedConfig::default());
        };
        // Absolute, so that the paths the file gives and the messages naming it do not depend on
        // where agentd later happens to be.
        let path = std::path::absolute(&path).unwrap_or(path);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if explicit.is_some() {
                    return Err(ConfigError::ExplicitMissing { path });
                }
                return Ok(LoadedConfig {
                    path: Some(path),
                    found: false,
                    config: Config::default(),
                });
            }
            Err(source) => return Err(ConfigError::Read { path, source }),
        };
        Self::parse(path, &text)
    }

    /// Parses and checks the text of the file at `path`.
    pub fn parse(path: PathBuf, text: &str) -> Result<LoadedConfig, ConfigError> {
        let raw: RawFile = match toml::from_str(text) {
            Ok(raw) => raw,
            Err(source) => return Err(ConfigError::Parse { path, source }),
        };
        let checker = Checker { path: &path, text };
        let base = path.parent().unwrap_or(Path::new(""));
        let resolve = |value: PathBuf| base.join(value);

        let mut model = raw.model;
        if let Some(model) = &mut model {
            if let Some(var) = &model.api_key_env
                && !is_variable_name(var)
            {
                return Err(ConfigError::ApiKeyEnvNotAName {
                    origin: format!("the configuration file {}", path.display()),
                });
            }
            model.script = model.script.take().map(resolve);
        }

        let sandbox = SandboxSection {
            mode: checker.word("sandbox.mode", raw.sandbox.mode)?,
            network: checker.word("sandbox.network", raw.sandbox.network)?,
            backend: checker.word("sandbox.backend", raw.sandbox.backend)?,
        };

        let policy = checker.word("approval.policy", raw.approval.policy)?;
        let ask_before = match raw.approval.ask_before {
            None => None,
            Some(list) => {
                let line = checker.line(list.span().start);
                let mut names = Vec::new();
                for name in list.into_inner() {
                    let name_line = checker.line(name.span().start);
                    let name = name.into_inner();
                    if !is_tool_name(&name) {
                        return Err(ConfigError::NotAToolName {
                            path: path.clone(),
                            line: name_line,
                            name,
                        });
                    }
                    names.push(name);
                }
                if policy == Some(ApprovalPolicy::Never) && !names.is_empty() {
                    return Err(ConfigError::NeverWithAskBefore {
                        path: path.clone(),
                        line,
                    });
                }
                Some(names)
            }
        };

        let helper = raw.helper;
        if helper.path.is_some() && helper.socket.is_some() {
            return Err(ConfigError::PathAndSocket { path });
        }
        if helper.ceiling.is_some() && helper.socket.is_some() {
            return Err(ConfigError::CeilingAndSocket { path });
        }
        let helper = HelperSection {
            path: helper.path.map(resolve),
            socket: helper.socket.map(resolve),
            ceiling: helper.ceiling.map(resolve),
        };

        let session = SessionSection {
            state_dir: raw.session.state_dir.map(resolve),
            max_steps: checker.positive("session.max_steps", raw.session.max_steps)?,
        };
        let limits = LimitsSection {
            command_timeout_ms: checker
                .positive("limits.command_timeout_ms", raw.limits.command_timeout_ms)?,
            max_processes: checker.positive("limits.max_processes", raw.limits.max_processes)?,
            max_file_size: checker.positive("limits.max_file_size", raw.limits.max_file_size)?,
            max_address_space: checker
                .positive("limits.max_address_space", raw.limits.max_address_space)?,
        };

        Ok(LoadedConfig {
            path: Some(path.clone()),
            found: true,
            config: Config {
                model,
                sandbox,
                approval: ApprovalSection { policy, ask_before },
                helper,
                session,
                limits,
            },
        })
    }
}

/// Checks values of the file, naming the file and the line in errors.
struct Checker<'a> {
    path: &'a Path,
    text: &'a str,
}

impl Checker<'_> {
    fn line(&self, offset: usize) -> usize {
        let end = offset.min(self.text.len());
        self.text.as_bytes()[..end]
            .iter()
            .filter(|b| **b == b'\n')
            .count()
            + 1
    }

    fn word<T: Vocabulary>(
        &self,
        key: &'static str,
        value: Option<Spanned<String>>,
    ) -> Result<Option<T>, ConfigError> {
        let Some(value) = value else {
            return Ok(None);
        };
        match T::from_word(value.get_ref()) {
            Some(parsed) => Ok(Some(parsed)),
            None => Err(ConfigError::NotAllowed {
                path: self.path.to_owned(),
                line: self.line(value.span().start),
                key,
                value: value.into_inner(),
                allowed: T::allowed(),
            }),
        }
    }

    fn positive<T: Copy + PartialEq + From<u8>>(
        &self,
        key: &'static str,
        value: Option<Spanned<T>>,
    ) -> Result<Option<T>, ConfigError> {
        let Some(value) = value else {
            return Ok(None);
        };
        if *value.get_ref() == T::from(0) {
            return Err(ConfigError::Zero {
                path: self.path.to_owned(),
                line: self.line(value.span().start),
                key,
            });
        }
        Ok(Some(value.into_inner()))
    }
}

/// A setting with a closed set of values, each spelt one way.
pub trait Vocabulary: Copy + PartialEq + Sized + 'static {
    /// Every value and its spelling, in the order messages list them.
    const WORDS: &'static [(&'static str, Self)];

    /// The value spelt `word`, if any.
    fn from_word(word: &str) -> Option<Self> {
        Self::WORDS
            .iter()
            .find(|(w, _)| *w == word)
            .map(|(_, v)| *v)
    }

    /// How this value is spelt.
    fn word(self) -> &'static str {
        Self::WORDS
            .iter()
            .find(|(_, v)| *v == self)
            .map_or("?", |(w, _)| w)
    }

    /// The allowed spellings, for messages: `"a", "b" or "c"`.
    fn allowed() -> String {
        let words: Vec<String> = Self::WORDS.iter().map(|(w, _)| format!("{w:?}")).collect();
        match words.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => words.concat(),
        }
    }
}

impl Vocabulary for Mode {
    const WORDS: &'static [(&'static str, Mode)] = &[
        ("read-only", Mode::ReadOnly),
        ("workspace-write", Mode::WorkspaceWrite),
        ("danger-full-access", Mode::DangerFullAccess),
    ];
}

impl Vocabulary for Network {
    const WORDS: &'static [(&'static str, Network)] =
        &[("deny", Network::Deny), ("allow", Network::Allow)];
}

impl Vocabulary for BackendChoice {
    const WORDS: &'static [(&'static str, BackendChoice)] = &[
        ("auto", BackendChoice::Auto),
        ("bwrap", BackendChoice::Bwrap),
        ("landlock", BackendChoice::Landlock),
        ("seatbelt", BackendChoice::Seatbelt),
    ];
}

impl Vocabulary for ApprovalPolicy {
    const WORDS: &'static [(&'static str, ApprovalPolicy)] = &[
        ("ask", ApprovalPolicy::Ask),
        ("never", ApprovalPolicy::Never),
    ];
}

fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn is_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

// ---------------------------------------------------------------------------------------------
// The effective configuration
// ---------------------------------------------------------------------------------------------

/// Where an effective value came from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Source {
    /// Nothing set it: agentd's built-in default.
    #[default]
    Default,
    /// The configuration file.
    File(PathBuf),
    /// An environment variable.
    Env(&'static str),
    /// A command-line flag.
    Flag(&'static str),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::File(path) => write!(f, "{}", path.display()),
            Source::Env(var) => write!(f, "${var}"),
            Source::Flag(flag) => f.write_str(flag),
        }
    }
}

/// An effective value and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting<T> {
    pub value: T,
    pub source: Source,
}

impl<T> Setting<T> {
    fn new(value: T, source: Source) -> Setting<T> {
        Setting { value, source }
    }

    fn default(value: T) -> Setting<T> {
        Setting::new(value, Source::Default)
    }
}

/// The file's value if it sets one, else `default`.
fn layered<T>(value: Option<T>, default: T, file: &Option<PathBuf>) -> Setting<T> {
    match (value, file) {
        (Some(value), Some(path)) => Setting::new(value, Source::File(path.clone())),
        (Some(value), None) => Setting::default(value),
        (None, _) => Setting::default(default),
    }
}

/// The flags that override the file and the environment; `None` where not given.
/// `cli::AgentArgs` and `cli::HelperArgs` produce it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Flags {
    /// `--config PATH`.
    pub config: Option<PathBuf>,
    /// `--helper PATH`.
    pub helper: Option<PathBuf>,
    /// `--helper-socket PATH`.
    pub helper_socket: Option<PathBuf>,
    /// `--helper-ceiling PATH`.
    pub helper_ceiling: Option<PathBuf>,
    /// `--state-dir DIR`.
    pub state_dir: Option<PathBuf>,
    /// `--model-script FILE`.
    pub model_script: Option<PathBuf>,
}

/// How to reach confine-helper.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HelperChoice {
    /// Start this binary (embedded mode).
    Binary(PathBuf),
    /// Connect to a helper serving on this socket (service mode).
    Socket(PathBuf),
    /// Start the binary found next to agentd or on `PATH`.
    Search,
}

/// Where each `[model]` value came from. Keys not listed here can only come from the file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelSources {
    pub provider: Source,
    pub base_url: Source,
    pub model: Source,
    pub api_key_env: Source,
    pub script: Source,
}

/// agentd's configuration as it applies to this process: defaults, then the file, then the
/// environment, then the flags. Paths are absolute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effective {
    /// The configuration file consulted; `None` when no location is known.
    pub file: Option<PathBuf>,
    /// Whether that file exists.
    pub file_found: bool,
    /// The `[model]` table; `None` when neither the file, the environment nor a flag configures
    /// a model.
    pub model: Option<ModelConfig>,
    pub model_sources: ModelSources,
    /// The sandbox mode of new sessions.
    pub sandbox_mode: Setting<Mode>,
    pub network: Setting<Network>,
    pub backend: Setting<BackendChoice>,
    pub approval_policy: Setting<ApprovalPolicy>,
    /// Tools that ask the user before every call (under [`ApprovalPolicy::Never`], whether set
    /// by a session or here, such a call is rejected without asking).
    pub ask_before: Setting<Vec<String>>,
    pub helper: Setting<HelperChoice>,
    /// The ceiling file of an embedded helper.
    pub helper_ceiling: Setting<Option<PathBuf>>,
    /// Where session logs are kept; `None` when no location is known (see
    /// [`Effective::state_dir`]).
    pub state_dir: Setting<Option<PathBuf>>,
    /// Model requests per prompt before the turn stops with `max_turn_requests`.
    pub max_steps: Setting<u32>,
    /// The timeout of a command that does not ask for its own, in milliseconds.
    pub command_timeout_ms: Setting<u64>,
    pub max_processes: Setting<Option<u64>>,
    pub max_file_size: Setting<Option<u64>>,
    pub max_address_space: Setting<Option<u64>>,
}

/// confine-helper cannot be set up as configured.
#[derive(Debug, thiserror::Error)]
pub enum HelperSetupError {
    #[error(transparent)]
    Locate(#[from] LocateError),
    #[error(transparent)]
    Client(#[from] ClientError),
}

impl Effective {
    /// The configuration of this process: its flags, its environment and the configuration file
    /// they and the defaults point at. The one function the rest of agentd gets its settings from.
    pub fn load(flags: &Flags) -> Result<Effective, ConfigError> {
        Effective::load_with(flags, &process_env)
    }

    /// [`Effective::load`] with the environment `env`.
    pub fn load_with(flags: &Flags, env: Env<'_>) -> Result<Effective, ConfigError> {
        let loaded = LoadedConfig::load_with(flags.config.as_deref(), env)?;
        Effective::merge(flags, loaded, env)
    }

    /// Merges an already loaded file with the environment `env` and the flags.
    pub fn merge(
        flags: &Flags,
        loaded: LoadedConfig,
        env: Env<'_>,
    ) -> Result<Effective, ConfigError> {
        let LoadedConfig {
            path: file,
            found: file_found,
            config,
        } = loaded;
        let from_file = || match &file {
            Some(path) => Source::File(path.clone()),
            None => Source::Default,
        };

        // [model]
        let mut model_sources = ModelSources::default();
        let mut model = config.model;
        if let Some(model) = &model {
            let source = |set: bool| if set { from_file() } else { Source::Default };
            model_sources = ModelSources {
                provider: source(model.provider.is_some()),
                base_url: source(model.base_url.is_some()),
                model: source(model.model.is_some()),
                api_key_env: source(model.api_key_env.is_some()),
                script: source(model.script.is_some()),
            };
        }
        if let Some(value) = env_string(env, "AGENTD_MODEL")? {
            model.get_or_insert_with(ModelConfig::default).model = Some(value);
            model_sources.model = Source::Env("AGENTD_MODEL");
        }
        if let Some(value) = env_string(env, "AGENTD_BASE_URL")? {
            model.get_or_insert_with(ModelConfig::default).base_url = Some(value);
            model_sources.base_url = Source::Env("AGENTD_BASE_URL");
        }
        if let Some(value) = env_string(env, "AGENTD_API_KEY_ENV")? {
            if !is_variable_name(&value) {
                return Err(ConfigError::ApiKeyEnvNotAName {
                    origin: "the environment variable AGENTD_API_KEY_ENV".to_owned(),
                });
            }
            model.get_or_insert_with(ModelConfig::default).api_key_env = Some(value);
            model_sources.api_key_env = Source::Env("AGENTD_API_KEY_ENV");
        }
        if let Some(script) = &flags.model_script {
            let source = Source::Flag("--model-script");
            let script = absolute(script, &source)?;
            let model = model.get_or_insert_with(ModelConfig::default);
            model.provider = Some(ProviderKind::Scripted);
            model.script = Some(script);
            model_sources.provider = source.clone();
            model_sources.script = source;
        }

        // [sandbox]
        let mut sandbox_mode = layered(config.sandbox.mode, DEFAULT_SANDBOX_MODE, &file);
        if let Some(mode) = env_word(env, "AGENTD_SANDBOX_MODE")? {
            sandbox_mode = Setting::new(mode, Source::Env("AGENTD_SANDBOX_MODE"));
        }
        let network = layered(config.sandbox.network, Network::Deny, &file);
        let backend = layered(config.sandbox.backend, BackendChoice::Auto, &file);

        // [approval]
        let mut approval_policy = layered(config.approval.policy, ApprovalPolicy::Ask, &file);
        if let Some(policy) = env_word(env, "AGENTD_APPROVAL_POLICY")? {
            approval_policy = Setting::new(policy, Source::Env("AGENTD_APPROVAL_POLICY"));
        }
        let ask_before = layered(config.approval.ask_before, Vec::new(), &file);

        // [helper]
        let helper = if let Some(socket) = &flags.helper_socket {
            let source = Source::Flag("--helper-socket");
            Setting::new(HelperChoice::Socket(absolute(socket, &source)?), source)
        } else if let Some(path) = &flags.helper {
            let source = Source::Flag("--helper");
            Setting::new(HelperChoice::Binary(absolute(path, &source)?), source)
        } else if let Some(path) = env_path(env, "AGENTD_HELPER")? {
            let source = Source::Env("AGENTD_HELPER");
            Setting::new(HelperChoice::Binary(absolute(&path, &source)?), source)
        } else if let Some(socket) = &config.helper.socket {
            let source = from_file();
            Setting::new(HelperChoice::Socket(absolute(socket, &source)?), source)
        } else if let Some(path) = &config.helper.path {
            let source = from_file();
            Setting::new(HelperChoice::Binary(absolute(path, &source)?), source)
        } else {
            Setting::default(HelperChoice::Search)
        };
        let helper_ceiling = if let Some(path) = &flags.helper_ceiling {
            let source = Source::Flag("--helper-ceiling");
            Setting::new(Some(absolute(path, &source)?), source)
        } else if let Some(path) = &config.helper.ceiling {
            let source = from_file();
            Setting::new(Some(absolute(path, &source)?), source)
        } else {
            Setting::default(None)
        };

        // [session]
        let state_dir = if let Some(dir) = &flags.state_dir {
            let source = Source::Flag("--state-dir");
            Setting::new(Some(absolute(dir, &source)?), source)
        } else if let Some(dir) = env_path(env, "AGENTD_STATE_DIR")? {
            let source = Source::Env("AGENTD_STATE_DIR");
            Setting::new(Some(absolute(&dir, &source)?), source)
        } else if let Some(dir) = &config.session.state_dir {
            let source = from_file();
            Setting::new(Some(absolute(dir, &source)?), source)
        } else {
            Setting::default(default_state_dir(env("XDG_STATE_HOME"), env("HOME")))
        };
        let max_steps = layered(config.session.max_steps, DEFAULT_MAX_STEPS, &file);

        // [limits]
        let limits = config.limits;
        let command_timeout_ms =
            layered(limits.command_timeout_ms, DEFAULT_COMMAND_TIMEOUT_MS, &file);
        let optional = |value: Option<u64>| layered(value.map(Some), None, &file);

        Ok(Effective {
            model,
            model_sources,
            sandbox_mode,
            network,
            backend,
            approval_policy,
            ask_before,
            helper,
            helper_ceiling,
            state_dir,
            max_steps,
            command_timeout_ms,
            max_processes: optional(limits.max_processes),
            max_file_size: optional(limits.max_file_size),
            max_address_space: optional(limits.max_address_space),
            file,
            file_found,
        })
    }

    /// The configuration file as messages should name it.
    fn file_for_messages(&self) -> String {
        match &self.file {
            Some(path) => path.display().to_string(),
            None => {
                format!("a configuration file given with --config (~/.config/agentd/{FILE_NAME})")
            }
        }
    }

    /// Builds the model provider `[model]` describes. Without a `[model]` table this is the
    /// error that says what to add, and where.
    pub fn provider(&self) -> Result<Arc<dyn Provider>, ModelError> {
        let empty = ModelConfig::default();
        build_provider(self.model.as_ref().unwrap_or(&empty), self.file.as_deref())
    }

    /// The directory of session logs, or an error saying how to set one.
    pub fn state_dir(&self) -> Result<&Path, ConfigError> {
        self.state_dir
            .value
            .as_deref()
            .ok_or_else(|| ConfigError::NoStateDir {
                file: self.file_for_messages(),
            })
    }

    /// The default timeout of a command.
    pub fn command_timeout(&self) -> Duration {
        Duration::from_millis(self.command_timeout_ms.value)
    }

    /// Sets the resource limits the configuration gives (`limits.max_*`) in `limits`, leaving
    /// the others as they are.
    pub fn apply_resource_limits(&self, limits: &mut Limits) {
        if let Some(n) = self.max_processes.value {
            limits.max_processes = Some(n);
        }
        if let Some(n) = self.max_file_size.value {
            limits.max_file_size = Some(n);
        }
        if let Some(n) = self.max_address_space.value {
            limits.max_address_space = Some(n);
        }
    }

    /// What the helper search may consult, with this process's executable directory and `PATH`.
    fn locate_inputs(&self, exe_dir: Option<PathBuf>, path_var: Option<OsString>) -> LocateInputs {
        let mut inputs = LocateInputs {
            config_file: self.file.clone(),
            exe_dir,
            path_var,
            ..LocateInputs::default()
        };
        if let HelperChoice::Binary(path) = &self.helper.value {
            match self.helper.source {
                Source::Flag(_) => inputs.flag = Some(path.clone()),
                Source::Env(_) => inputs.env_value = Some(path.clone()),
                Source::File(_) | Source::Default => inputs.config_value = Some(path.clone()),
            }
        }
        inputs
    }

    /// How to reach confine-helper: the socket, or the binary (found as
    /// [`locate_helper`] describes).
    pub fn helper_endpoint(&self) -> Result<HelperEndpoint, LocateError> {
        if let HelperChoice::Socket(socket) = &self.helper.value {
            return Ok(HelperEndpoint::Service(socket.clone()));
        }
        let inputs = self.locate_inputs(exe_dir(), std::env::var_os("PATH"));
        locate_helper(&inputs).map(HelperEndpoint::Embedded)
    }

    /// A client of the configured confine-helper, started with the configured ceiling. Nothing
    /// is started until its first request.
    pub fn helper_client(&self) -> Result<HelperClient, HelperSetupError> {
        let endpoint = self.helper_endpoint()?;
        let ceiling = self.helper_ceiling.value.clone();
        Ok(HelperClient::configured(
            endpoint,
            ceiling,
            self.own_paths(&process_env),
        )?)
    }

    /// agentd's own files, which no command may ever write: a command that could would run
    /// code at agentd's next start (`helper.path`, `[model]`) or rewrite the session logs that
    /// modes and approvals are replayed from. The configuration directory (the default one too,
    /// which a later agentd without `--config` reads), the configuration file in use, the state
    /// directories (the configured one and the default), and agentd's own binary. They need not
    /// exist: a root containing where one would be is refused all the same.
    pub fn own_paths(&self, env: Env<'_>) -> Vec<PathBuf> {
        let mut own: Vec<PathBuf> = Vec::new();
        let default_file = config_path(None, env("XDG_CONFIG_HOME"), env("HOME"));
        own.extend(
            default_file
                .as_deref()
                .and_then(Path::parent)
                .map(Path::to_owned),
        );
        own.extend(self.file.clone());
        let default_state = default_state_dir(env("XDG_STATE_HOME"), env("HOME"));
        own.extend(
            default_state
                .as_deref()
                .and_then(Path::parent)
                .map(Path::to_owned),
        );
        own.extend(self.state_dir.value.clone());
        own.extend(
            std::env::current_exe()
                .ok()
                .map(|exe| exe.canonicalize().unwrap_or(exe)),
        );
        let mut unique = Vec::new();
        for path in own {
            let path = std::path::absolute(&path).unwrap_or(path);
            if !unique.contains(&path) {
                unique.push(path);
            }
        }
        unique
    }

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

        out.value(
            "sandbox.mode",
            quoted(self.sandbox_mode.value.word()),
            &self.sandbox_mode.source,
        );
        out.value(
            "sandbox.network",
            quoted(self.network.value.word()),
            &self.network.source,
        );
        out.value(
            "sandbox.backend",
            quoted(self.backend.value.word()),
            &self.backend.source,
        );
        out.value(
            "approval.policy",
            quoted(self.approval_policy.value.word()),
            &self.approval_policy.source,
        );
        let tools: Vec<String> = self.ask_before.value.iter().map(|t| quoted(t)).collect();
        out.value(
            "approval.ask_before",
            format!("[{}]", tools.join(", ")),
            &self.ask_before.source,
        );

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
        for (key, setting) in [
            ("limits.max_processes", &self.max_processes),
            ("limits.max_file_size", &self.max_file_size),
            ("limits.max_address_space", &self.max_address_space),
        ] {
            out.value(
                key,
                optional(setting.value.map(|n| n.to_string())),
                &setting.source,
            );
        }

        if self.model.is_none() {
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
    }
}

/// The text `config show` builds.
#[derive(Default)]
struct Lines(String);

impl Lines {
    fn raw(&mut self, line: String) {
        self.0.push_str(&line);
        self.0.push('\n');
    }

    fn value(&mut self, key: &str, value: String, source: &Source) {
        self.raw(format!("{key} = {value}  ({source})"));
    }
}

fn quoted(text: &str) -> String {
    format!("{text:?}")
}

fn quoted_path(path: &Path) -> String {
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

fn exe_dir() -> Option<PathBuf> {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_owned))
}

/// The value of `var`, or `None` when unset or empty.
fn env_string(env: Env<'_>, var: &'static str) -> Result<Option<String>, ConfigError> {
    match env(var) {
        None => Ok(None),
        Some(value) if value.is_empty() => Ok(None),
        Some(value) => value
            .into_string()
            .map(Some)
            .map_err(|_| ConfigError::EnvNotUnicode { var }),
    }
}

fn env_path(env: Env<'_>, var: &'static str) -> Result<Option<PathBuf>, ConfigError> {
    Ok(env(var)
        .filter(|value| !value.is_empty())
        .map(PathBuf::from))
}

fn env_word<T: Vocabulary>(env: Env<'_>, var: &'static str) -> Result<Option<T>, ConfigError> {
    let Some(value) = env_string(env, var)? else {
        return Ok(None);
    };
    match T::from_word(&value) {
        Some(word) => Ok(Some(word)),
        None => Err(ConfigError::EnvNotAllowed {
            var,
            value,
            allowed: T::allowed(),
        }),
    }
}

fn absolute(path: &Path, origin: &Source) -> Result<PathBuf, ConfigError> {
    std::path::absolute(path).map_err(|source| ConfigError::Absolute {
        path: path.to_owned(),
        origin: origin.clone(),
        source,
    })
}

#[cfg(test)]
mod tests;
