//! The configuration file `agentd.toml`: where it is, what it may say, and the checks that turn
//! its text into a [`Config`] (see the module documentation of [`crate::config`]).

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use confine_protocol::{BackendChoice, Mode, Network, UnknownWord};
use serde::Deserialize;
use toml::Spanned;

use super::agents::{RawAgents, personas};
use super::allow_list::{self, AllowList, RawAllowList};
use super::checkpoints::{CheckpointsSection, RawCheckpoints};
use super::checks::{is_variable_name, line_at};
use super::compaction::{CompactionSection, RawCompaction, section};
use super::mcp::{McpServerConfig, RawMcp, servers};
use super::models::{NamedModel, RawModels, default_model, named_models};
use super::sandbox::{ProfileSection, RawList, RawProfile};
use super::sandbox_env::{EnvSection, RawEnv};
use super::{ConfigError, Env, FILE_NAME, process_env};
use crate::agents::Personas;
use crate::mcp::names::is_ask_entry;
use crate::model::ModelConfig;
use crate::tools::{NAMES, TASK, is_tool_name};
use crate::words::{ApprovalPolicy, allowed};

/// Everything the configuration file may set, checked, with relative paths resolved against the
/// file's directory. `None` means "not in the file".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    /// The `[model]` table, if the file has one (and, beside `default_model`, sets a key).
    pub model: Option<ModelConfig>,
    /// The `[models.NAME]` tables, sorted by name.
    pub models: Vec<NamedModel>,
    /// `default_model`: which of `models` is the default when `[model]` sets nothing.
    pub default_model: Option<String>,
    pub sandbox: SandboxSection,
    pub approval: ApprovalSection,
    pub helper: HelperSection,
    pub session: SessionSection,
    pub limits: LimitsSection,
    /// The `[compaction]` table (checked against `model.context_window`).
    pub compaction: CompactionSection,
    /// The `[checkpoints]` table.
    pub checkpoints: CheckpointsSection,
    /// The `[agents.NAME]` tables, with the built-in `general` unless one is configured.
    pub agents: Personas,
    /// The `[[mcp.servers]]` tables, in the file's order.
    pub mcp: Vec<McpServerConfig>,
}

/// The `[sandbox]` table: how far the commands of new sessions may reach.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxSection {
    pub mode: Option<Mode>,
    pub network: Option<Network>,
    pub backend: Option<BackendChoice>,
    /// `writable_roots`, `cache`, `protected`, `local_binding`, `deny_read` and
    /// `unix_sockets`: the sandbox profile.
    pub profile: ProfileSection,
    /// `[sandbox.env]`: the variables every command gets besides the inherited ones.
    pub env: EnvSection,
    /// `network = "allow-list"`: the proxy's lists (`network` itself is then `deny`).
    pub allow_list: Option<AllowList>,
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
    /// A ceiling file for the helper agentd starts (`confine-helper --fd 0 --ceiling PATH`).
    /// Not for service mode: a service helper reads its own ceiling.
    pub ceiling: Option<PathBuf>,
    /// The file reader and writer agentd runs confined (`confine-file-io`); unset, the one
    /// beside the helper, else beside agentd.
    pub file_io: Option<PathBuf>,
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
    /// The most tasks a command's tree may have at once (confine-helper's default and ceiling
    /// otherwise).
    pub max_processes: Option<u64>,
    /// RLIMIT_FSIZE, in bytes.
    pub max_file_size: Option<u64>,
    /// RLIMIT_AS, in bytes.
    pub max_address_space: Option<u64>,
    /// The most memory a command's tree may use at once, in bytes, where confine-helper can
    /// count it (its default and ceiling otherwise).
    pub max_memory: Option<u64>,
}

/// The file as written, before its values are checked.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFile {
    model: Option<ModelConfig>,
    #[serde(default)]
    models: RawModels,
    default_model: Option<Spanned<String>>,
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
    compaction: Option<Spanned<RawCompaction>>,
    #[serde(default)]
    checkpoints: RawCheckpoints,
    #[serde(default)]
    agents: RawAgents,
    mcp: Option<RawMcp>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSandbox {
    mode: Option<Spanned<String>>,
    network: Option<Spanned<String>>,
    backend: Option<Spanned<String>>,
    writable_roots: RawList,
    cache: RawList,
    protected: RawList,
    local_binding: Option<bool>,
    deny_read: RawList,
    lift_deny_read: RawList,
    unix_sockets: RawList,
    allowed_domains: RawList,
    denied_domains: RawList,
    allow_local_addresses: Option<bool>,
    env: Option<RawEnv>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawApproval {
    policy: Option<Spanned<String>>,
    ask_before: Option<Spanned<Vec<Spanned<String>>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSession {
    state_dir: Option<PathBuf>,
    max_steps: Option<Spanned<u32>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimits {
    command_timeout_ms: Option<Spanned<u64>>,
    max_processes: Option<Spanned<u64>>,
    max_file_size: Option<Spanned<u64>>,
    max_address_space: Option<Spanned<u64>>,
    max_memory: Option<Spanned<u64>>,
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

pub(super) fn absolute_dir(value: Option<OsString>) -> Option<PathBuf> {
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
        let mut model = checker.model(raw.model)?;
        let sandbox = checker.sandbox(raw.sandbox)?;
        let policy = checker.word("approval.policy", raw.approval.policy)?;
        let ask_before = checker.ask_before(raw.approval.ask_before, policy)?;
        let helper = checker.helper(raw.helper)?;
        let session = checker.session(raw.session)?;
        let limits = checker.limits(raw.limits)?;
        let checkpoints = checker.checkpoints(raw.checkpoints)?;

        let models = named_models(raw.models, &path, text)?;
        let default_model = default_model(raw.default_model, model.as_ref(), &models, &path, text)?;
        if default_model.is_some() {
            // An empty `[model]` beside it sets nothing: the named model is the default.
            model = None;
        }

        // Compaction follows the model in use, so its limits must hold for every window.
        let window = model
            .iter()
            .chain(models.iter().map(|m| &m.model))
            .filter_map(|m| m.context_window)
            .map(|w| w.get())
            .min();
        let compaction = section(raw.compaction, window, &path, text)?;

        let agents = personas(raw.agents, &models, &path, text)?;
        let mcp = servers(raw.mcp, &path, text)?;

        Ok(LoadedConfig {
            path: Some(path.clone()),
            found: true,
            config: Config {
                model,
                models,
                default_model,
                sandbox,
                approval: ApprovalSection { policy, ask_before },
                helper,
                session,
                limits,
                compaction,
                checkpoints,
                agents,
                mcp,
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
        line_at(self.text, offset)
    }

    fn word<T: FromStr<Err = UnknownWord>>(
        &self,
        key: &'static str,
        value: Option<Spanned<String>>,
    ) -> Result<Option<T>, ConfigError> {
        let Some(value) = value else {
            return Ok(None);
        };
        match value.get_ref().parse() {
            Ok(parsed) => Ok(Some(parsed)),
            Err(unknown) => Err(ConfigError::NotAllowed {
                path: self.path.to_owned(),
                line: self.line(value.span().start),
                key,
                value: value.into_inner(),
                allowed: allowed(unknown.expected),
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

/// The file's tables, checked one by one, their relative paths resolved against the file's
/// directory.
impl Checker<'_> {
    /// `path`, relative to the file's directory unless absolute.
    fn resolve(&self, value: PathBuf) -> PathBuf {
        let base = self.path.parent().unwrap_or(Path::new(""));
        base.join(value)
    }

    /// `[model]`: its `api_key_env` must name a variable; its script is resolved.
    fn model(&self, model: Option<ModelConfig>) -> Result<Option<ModelConfig>, ConfigError> {
        let mut model = model;
        if let Some(model) = &mut model {
            if let Some(var) = &model.api_key_env
                && !is_variable_name(var)
            {
                return Err(ConfigError::ApiKeyEnvNotAName {
                    origin: format!("the configuration file {}", self.path.display()),
                });
            }
            model.script = model.script.take().map(|script| self.resolve(script));
        }
        Ok(model)
    }

    /// `[sandbox]`: its words, its allow-list, its profile and its `[sandbox.env]`.
    fn sandbox(&self, raw: RawSandbox) -> Result<SandboxSection, ConfigError> {
        let mut raw_sandbox = raw;
        let allow_list = allow_list::parse(
            &mut raw_sandbox.network,
            RawAllowList {
                allowed: raw_sandbox.allowed_domains,
                denied: raw_sandbox.denied_domains,
                local_addresses: raw_sandbox.allow_local_addresses,
            },
            self.path,
            self.text,
        )?;
        Ok(SandboxSection {
            mode: self.word("sandbox.mode", raw_sandbox.mode)?,
            network: self.word("sandbox.network", raw_sandbox.network)?,
            backend: self.word("sandbox.backend", raw_sandbox.backend)?,
            profile: ProfileSection::parse(
                RawProfile {
                    writable_roots: raw_sandbox.writable_roots,
                    cache: raw_sandbox.cache,
                    protected: raw_sandbox.protected,
                    local_binding: raw_sandbox.local_binding,
                    deny_read: raw_sandbox.deny_read,
                    lift_deny_read: raw_sandbox.lift_deny_read,
                    unix_sockets: raw_sandbox.unix_sockets,
                },
                self.path,
                self.text,
            )?,
            env: EnvSection::parse(raw_sandbox.env.unwrap_or_default(), self.path, self.text)?,
            allow_list,
        })
    }

    /// `approval.ask_before`: tool names agentd knows, or MCP entries; none under the approval
    /// policy `never` (`policy`), which would ask nobody.
    fn ask_before(
        &self,
        list: Option<Spanned<Vec<Spanned<String>>>>,
        policy: Option<ApprovalPolicy>,
    ) -> Result<Option<Vec<String>>, ConfigError> {
        let Some(list) = list else {
            return Ok(None);
        };
        let line = self.line(list.span().start);
        let mut names = Vec::new();
        for name in list.into_inner() {
            names.push(self.ask_entry(name)?);
        }
        if policy == Some(ApprovalPolicy::Never) && !names.is_empty() {
            return Err(ConfigError::NeverWithAskBefore {
                path: self.path.to_owned(),
                line,
            });
        }
        Ok(Some(names))
    }

    /// One entry of `approval.ask_before`: an MCP entry, or the name of a tool agentd has.
    fn ask_entry(&self, name: Spanned<String>) -> Result<String, ConfigError> {
        let name_line = self.line(name.span().start);
        let name = name.into_inner();
        // An MCP tool's name, or all of one server's: the servers a client gives
        // are known only when its session starts.
        if is_ask_entry(&name) {
            return Ok(name);
        }
        if !is_tool_name(&name) {
            return Err(ConfigError::NotAToolName {
                path: self.path.to_owned(),
                line: name_line,
                name,
            });
        }
        // A misspelt name would ask before nothing, silently.
        let known = || NAMES.iter().copied().chain([TASK]);
        if !known().any(|tool| tool == name) {
            let tools: Vec<String> = known().map(|n| format!("{n:?}")).collect();
            return Err(ConfigError::UnknownAskBefore {
                path: self.path.to_owned(),
                line: name_line,
                name,
                known: tools.join(", "),
            });
        }
        Ok(name)
    }

    /// `[helper]`: a socket excludes a path and a ceiling; the paths are resolved.
    fn helper(&self, helper: HelperSection) -> Result<HelperSection, ConfigError> {
        if helper.path.is_some() && helper.socket.is_some() {
            return Err(ConfigError::PathAndSocket {
                path: self.path.to_owned(),
            });
        }
        if helper.ceiling.is_some() && helper.socket.is_some() {
            return Err(ConfigError::CeilingAndSocket {
                path: self.path.to_owned(),
            });
        }
        let resolve = |value: PathBuf| self.resolve(value);
        Ok(HelperSection {
            path: helper.path.map(resolve),
            socket: helper.socket.map(resolve),
            ceiling: helper.ceiling.map(resolve),
            file_io: helper.file_io.map(resolve),
        })
    }

    /// `[session]`: its state directory resolved, its step limit positive.
    fn session(&self, raw: RawSession) -> Result<SessionSection, ConfigError> {
        Ok(SessionSection {
            state_dir: raw.state_dir.map(|dir| self.resolve(dir)),
            max_steps: self.positive("session.max_steps", raw.max_steps)?,
        })
    }

    /// `[limits]`: every limit positive.
    fn limits(&self, raw: RawLimits) -> Result<LimitsSection, ConfigError> {
        Ok(LimitsSection {
            command_timeout_ms: self
                .positive("limits.command_timeout_ms", raw.command_timeout_ms)?,
            max_processes: self.positive("limits.max_processes", raw.max_processes)?,
            max_file_size: self.positive("limits.max_file_size", raw.max_file_size)?,
            max_address_space: self.positive("limits.max_address_space", raw.max_address_space)?,
            max_memory: self.positive("limits.max_memory", raw.max_memory)?,
        })
    }

    /// `[checkpoints]`: its cap and its retention positive.
    fn checkpoints(&self, raw: RawCheckpoints) -> Result<CheckpointsSection, ConfigError> {
        Ok(CheckpointsSection {
            enabled: raw.enabled,
            max_bytes: self.positive("checkpoints.max_bytes", raw.max_bytes)?,
            max_age_days: self.positive("checkpoints.max_age_days", raw.max_age_days)?,
            max_per_session: self.positive("checkpoints.max_per_session", raw.max_per_session)?,
        })
    }
}
