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
//! [model]                      # see agentd::model::ModelConfig; "default" in the editor
//! base_url = "https://api.deepseek.com/v1"   # any OpenAI-compatible endpoint
//! model = "deepseek-chat"
//! api_key_env = "DEEPSEEK_API_KEY"           # the name of the variable, never the key itself
//!
//! [models.fast]                # a named model (see models.rs): a session may switch to it,
//! base_url = "http://localhost:11434/v1"     # a persona may name it; a whole [model] table
//! model = "qwen3"
//! # default_model = "fast"     # top level: the default when there is no [model]
//!
//! [sandbox]
//! mode = "workspace-write"     # of new sessions: read-only | workspace-write | danger-full-access
//! network = "deny"             # deny | allow
//! backend = "auto"             # auto | bwrap | landlock | seatbelt | namespaces
//! writable_roots = ["~/scratch"]   # workspace-write also writes these (absolute, or ~/…)
//! cache = ["pip", "cargo"]     # and these tools' caches: pip | npm | cargo | go
//! protected = ["secrets"]      # relative subpaths read-only inside every writable root
//!
//! [approval]
//! policy = "ask"               # ask | never
//! ask_before = ["write_file"]  # tools that ask the user before every call; an MCP tool as
//!                              # "mcp__notes__write_note", all of a server's as "mcp__notes__*"
//!
//! [helper]                     # how to reach confine-helper
//! path = "/usr/local/bin/confine-helper"     # or: socket = "/run/confine-helper.sock"
//! ceiling = "ceiling.toml"     # embedded helper only
//! file_io = "/usr/local/bin/confine-file-io"  # default: beside the helper, else beside agentd
//!
//! [session]
//! state_dir = "/path"          # default: $XDG_STATE_HOME/agentd/sessions
//! max_steps = 50               # model requests per prompt
//!
//! [compaction]                 # needs model.context_window (tokens); see agentd::config's
//! threshold = 0.8              # compaction.rs: compact a history whose estimate exceeds this
//! # compact_at = 100000        # share of the window, or this many tokens (not both)
//! keep_turns = 2               # the latest turns that stay verbatim
//!
//! [checkpoints]                # the state before and after every turn, for /undo (checkpoints.rs)
//! enabled = true
//! max_bytes = 536870912        # content one checkpoint takes; larger files are left out, said
//! max_age_days = 30            # pruned when older
//! max_per_session = 100        # and all but the newest this many of a session
//!
//! [limits]
//! command_timeout_ms = 120000  # default timeout of a command
//! max_processes = 512          # optional resource limits of every command
//! max_file_size = 1073741824
//! max_address_space = 8589934592
//! max_memory = 8589934592
//!
//! [[mcp.servers]]              # an MCP server every session starts, confined (see mcp.rs)
//! name = "notes"               # its tools are mcp__notes__TOOL
//! command = ["python3", "notes.py"]          # its program and arguments
//! env = { NOTES_FORMAT = "md" }              # optional: its own variables
//!
//! [agents.reviewer]            # a persona a child agent may be (see agentd::agents)
//! description = "Reviews a change and reports problems"   # required: the model reads it
//! instructions = "You review the change you are given."    # required: the child's instructions
//! tools = { deny = ["bash"] }  # optional: allow, then deny; names checked against the tools
//! max_depth = 2                # optional: the deepest it may run (top level 0); default 1
//! model = { base_url = "http://localhost:11434/v1", model = "qwen3" }  # optional, a whole
//!                              # [model] table (no inheritance from [model]), or "fast"
//! ```
//!
//! The personas are the `[agents.NAME]` tables plus a built-in `general` (a general-purpose
//! helper for a delegated sub-task), which a table of that name replaces; only the file sets
//! them, and `config show` prints each with its source.
//!
//! The variables and flags that override a key are in [`KEYS`], with every key's type and
//! default (generated into `docs/contracts/agentd-toml.md`).
//!
//! An empty variable counts as unset.
//!
//! The sandbox profile's keys (`writable_roots`, `cache`, `protected`) are the file's only
//! (`agentd run --writable-root` and `--protect` add to them); a project's
//! `.agentd/config.toml` may add protected paths (`project.rs`).
//!
//! `file.rs` is the file format and its checks ([`LoadedConfig`]), `models.rs` its
//! `[models.NAME]` tables and `default_model`, `agents.rs` its `[agents.NAME]` tables,
//! `compaction.rs` its `[compaction]` table, `mcp.rs` its `[[mcp.servers]]`, `sandbox.rs` the profile's keys of `[sandbox]`,
//! `sandbox_env.rs` its `[sandbox.env]` and `cache.rs` the cache presets, `project.rs` a project's own file, `checks.rs` what they share,
//! `effective.rs` the layering into [`Effective`] (and the models built from it; `setting.rs`
//! a value with where it came from, `effective_sandbox.rs` the `[sandbox]` part), `helper.rs`
//! how the effective configuration reaches confine-helper, `show.rs` what `agentd config
//! show` prints (`show_model.rs` its models, `show_sandbox.rs` its sandbox profile), and
//! `keys.rs` every key in one table ([`KEYS`]).

mod agents;
pub mod allow_list;
mod built_models;
mod cache;
mod checkpoints;
mod checks;
mod compaction;
mod effective;
mod effective_sandbox;
mod file;
mod from_env;
mod helper;
mod keys;
mod mcp;
mod models;
mod project;
mod sandbox;
mod sandbox_env;
mod setting;
mod show;
mod show_model;
mod show_sandbox;

use std::ffi::OsString;
use std::fmt;
use std::io;
use std::path::PathBuf;

use confine_protocol::Mode;

pub use agents::PersonaError;
pub use built_models::{BuiltModel, PersonaProviders};
pub use cache::CacheError;
#[cfg(test)]
pub(crate) use cache::CachePreset;
pub use checkpoints::Checkpoints;
pub use compaction::CompactionPolicy;
pub use effective::{Effective, Flags};
#[cfg(test)]
pub(crate) use effective::{HelperChoice, default_state_dir};
#[cfg(test)]
pub(crate) use file::{
    ApprovalSection, Config, LimitsSection, LoadedConfig, SandboxSection, SessionSection,
    config_path,
};
pub use helper::HelperSetupError;
pub use keys::{ConfigKey, KEYS};
pub use mcp::McpServerConfig;
pub use models::{DEFAULT_MODEL_NAME, ModelsError};
pub use project::{protect_project, read_project};
#[cfg(test)]
pub(crate) use sandbox::ProfileSection;
pub use sandbox::{FileKind, SocketEntryError, absolute_or_home, expand_home};
pub use sandbox_env::process_lookup;
#[cfg(test)]
pub(crate) use setting::Setting;

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
        "the configuration file {}, line {line}: {key} lists {name:?}, which is not a variable \
         name (letters, digits and `_`, not starting with a digit)",
        path.display()
    )]
    NotAVariableName {
        path: PathBuf,
        line: usize,
        key: &'static str,
        name: String,
    },
    #[error(
        "the configuration file {}, line {line}: approval.ask_before lists {name:?}, which is \
         not one of agentd's tools ({known}) nor an MCP server's (mcp__SERVER__TOOL, or \
         mcp__SERVER__* for every tool of one server)",
        path.display()
    )]
    UnknownAskBefore {
        path: PathBuf,
        line: usize,
        name: String,
        known: String,
    },
    #[error(
        "the configuration file {}, line {line}: approval.policy = \"never\" never asks, so \
         every call of a tool in approval.ask_before would be rejected; drop one of them",
        path.display()
    )]
    NeverWithAskBefore { path: PathBuf, line: usize },
    #[error(
        "the configuration file {}, line {line}: {key} = {value} is not allowed; {why}",
        path.display()
    )]
    Compaction {
        path: PathBuf,
        line: usize,
        key: &'static str,
        value: String,
        why: String,
    },
    #[error(
        "the configuration file {}, line {line}: [compaction] is set but model.context_window is \
         not, and without a context window the history is never compacted; set \
         model.context_window = TOKENS in [model] or drop [compaction] (a [models.NAME] table \
         may set its own context_window too)",
        path.display()
    )]
    CompactionWithoutWindow { path: PathBuf, line: usize },
    #[error(
        "the configuration file {} sets both helper.path and helper.socket; keep only the one \
         that says how to reach confine-helper",
        path.display()
    )]
    PathAndSocket { path: PathBuf },
    #[error(
        "the configuration file {} sets both helper.ceiling and helper.socket; a service helper \
         reads its own ceiling (`confine-service --ceiling PATH`), so drop helper.ceiling",
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
        "the configuration file {}, line {line}: sandbox.writable_roots lists {value:?}, which is \
         not an absolute path; write it as /absolute/path, or ~/path from your home directory",
        path.display()
    )]
    RootNotAbsolute {
        path: PathBuf,
        line: usize,
        value: String,
    },
    #[error("the configuration file {}, line {line}: {message}", path.display())]
    AllowList {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error(
        "the configuration file {}, line {line}: sandbox.deny_read lists {value:?}, which {reason}",
        path.display()
    )]
    DenyRead {
        path: PathBuf,
        line: usize,
        value: String,
        reason: crate::deny_read::EntryError,
    },
    #[error(
        "the configuration file {}, line {line}: sandbox.lift_deny_read lists {value:?}, which \
         is not a built-in denied read; name one exactly as listed: {known}",
        path.display()
    )]
    LiftDenyRead {
        path: PathBuf,
        line: usize,
        value: String,
        known: String,
    },
    #[error(
        "the configuration file {}, line {line}: sandbox.{key} lists {value:?}, and {} so it is \
         not an absolute path; set HOME to your home directory or write the {what} as an \
         absolute path",
        path.display(),
        match home { Some(home) => format!("HOME is {home:?}"), None => "HOME is not set".to_owned() }
    )]
    NeedsHome {
        path: PathBuf,
        line: usize,
        /// `writable_roots` or `unix_sockets`.
        key: &'static str,
        /// What one entry is, as the message names it: `root`, `socket`.
        what: &'static str,
        value: String,
        home: Option<String>,
    },
    #[error(
        "the configuration file {}, line {line}: sandbox.unix_sockets lists {value:?}, which \
         {reason}; write each as the absolute path a program connects to (such as \
         /var/run/docker.sock), or as ~/path from your home directory",
        path.display()
    )]
    UnixSocket {
        path: PathBuf,
        line: usize,
        value: String,
        reason: SocketEntryError,
    },
    #[error(
        "the configuration file {}, line {line}: sandbox.cache preset {preset:?} cannot be \
         used: {source}",
        path.display()
    )]
    Cache {
        path: PathBuf,
        line: usize,
        preset: &'static str,
        #[source]
        source: CacheError,
    },
    #[error(
        "{kind} {}, line {line}: sandbox.protected lists {value:?}, which is not a relative path \
         inside the writable roots; give one such as secrets or deploy/keys, without a leading \
         /, . or .. components",
        path.display()
    )]
    NotASubpath {
        kind: FileKind,
        path: PathBuf,
        line: usize,
        value: String,
    },
    #[error(
        "the project file {} is malformed: {}",
        path.display(),
        source.to_string().trim_end()
    )]
    ProjectParse {
        path: PathBuf,
        #[source]
        source: toml::de::Error,
    },
    #[error(
        "the project file {}, line {line}: {key} is not read from a project file; only \
         [sandbox] protected is (a project file may only add protected paths): remove it, or \
         set it in agentd.toml",
        path.display()
    )]
    ProjectKey {
        path: PathBuf,
        line: usize,
        key: String,
    },
    #[error(
        "the project file {} cannot be read (it is read confined, as a command could read it): \
         {why}; fix it or remove it",
        path.display()
    )]
    ProjectUnread { path: PathBuf, why: String },
    #[error("the configuration file {}, line {line}: [[mcp.servers]] {why}", path.display())]
    Mcp {
        path: PathBuf,
        line: usize,
        why: String,
    },
    #[error(transparent)]
    Persona(#[from] PersonaError),
    #[error(transparent)]
    Models(#[from] ModelsError),
    #[error(
        "there is no directory for session logs: neither XDG_STATE_HOME (absolute) nor HOME is \
         set; pass --state-dir DIR, set AGENTD_STATE_DIR or set session.state_dir in {file}"
    )]
    NoStateDir { file: String },
}

#[cfg(test)]
mod tests;
