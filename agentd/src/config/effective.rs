//! The effective configuration: the built-in defaults, then the file, then the `AGENTD_*`
//! environment variables, then the flags, each value with where it came from.

use std::path::{Path, PathBuf};
use std::time::Duration;

use confine_protocol::{BackendChoice, Mode, Network};

use super::allow_list::AllowList;
use super::cache::ResolvedCache;
use super::checkpoints::{
    Checkpoints, DEFAULT_MAX_AGE_DAYS, DEFAULT_MAX_BYTES, DEFAULT_MAX_PER_SESSION,
};
use super::checks::is_variable_name;
use super::compaction::{CompactAt, CompactionPolicy, DEFAULT_KEEP_TURNS};
use super::effective_sandbox::SandboxSettings;
use super::file::{HelperSection, LoadedConfig};
pub use super::from_env::default_state_dir;
use super::from_env::{absolute, env_path, env_string, env_word};
use super::mcp::McpServerConfig;
use super::models::{DEFAULT_MODEL_NAME, ModelsError, NamedModel, known_names};
use super::sandbox::Lined;
use super::sandbox_env::EnvSection;
use super::setting::{Setting, layered};
use super::{
    ConfigError, DEFAULT_COMMAND_TIMEOUT_MS, DEFAULT_MAX_STEPS, Env, FILE_NAME, Source, process_env,
};
use crate::agents::Personas;
use crate::credentials::Credential;
use crate::deny_read::DenyRead;
use crate::model::{ModelConfig, ProviderKind};
use crate::profile::{CacheDir, ResourceLimits, SandboxProfile};
use crate::words::ApprovalPolicy;

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
    /// The `[models.NAME]` tables, sorted by name. Only the file sets them.
    pub models: Vec<NamedModel>,
    /// The name of the default model: `default` (the `[model]` table, also when nothing
    /// configures one) unless `[model]` sets nothing and the file's `default_model` picks one
    /// of `models`.
    pub default_model: Setting<String>,
    /// The sandbox mode of new sessions.
    pub sandbox_mode: Setting<Mode>,
    pub network: Setting<Network>,
    pub backend: Setting<BackendChoice>,
    /// `sandbox.writable_roots`, with `~` taken from `$HOME`: written in workspace-write.
    pub writable_roots: Setting<Vec<PathBuf>>,
    /// `sandbox.cache`: each preset with the directories it resolved to.
    pub cache: Setting<Vec<ResolvedCache>>,
    /// `sandbox.protected`: read-only inside every writable root.
    pub protected: Setting<Vec<PathBuf>>,
    /// `sandbox.local_binding`: loopback sockets in the sandbox's own network namespace.
    pub local_binding: Setting<bool>,
    /// `sandbox.deny_read`: what no confined command may read.
    pub deny_read: Setting<Vec<DenyRead>>,
    /// The file's line of each of `deny_read`, in order.
    pub deny_read_lines: Vec<usize>,
    /// Every built-in denied read from the home directory ([`credentials::resolve`]), those
    /// lifted included; `None` when no home directory is known.
    pub credentials: Option<Vec<Credential>>,
    /// `sandbox.lift_deny_read`: the built-in denied reads commands may read, with their lines.
    pub lift_deny_read: Setting<Vec<Lined<String>>>,
    /// `sandbox.unix_sockets`: the named Unix sockets a confined command may connect to, `~`
    /// expanded, otherwise as written.
    pub unix_sockets: Setting<Vec<PathBuf>>,
    /// `sandbox.network = "allow-list"` with its lists: the proxy's (with `network` deny).
    pub allow_list: Setting<Option<AllowList>>,
    /// `[sandbox.env]`: variables every command gets besides the inherited ones.
    pub sandbox_env: Setting<EnvSection>,
    pub approval_policy: Setting<ApprovalPolicy>,
    /// Tools that ask the user before every call (under [`ApprovalPolicy::Never`], whether set
    /// by a session or here, such a call is rejected without asking).
    pub ask_before: Setting<Vec<String>>,
    pub helper: Setting<HelperChoice>,
    /// The ceiling file of an embedded helper.
    pub helper_ceiling: Setting<Option<PathBuf>>,
    /// The file reader and writer's path, when given; unset, it is searched for.
    pub helper_file_io: Setting<Option<PathBuf>>,
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
    pub max_memory: Setting<Option<u64>>,
    /// `model.context_window`: without it the history is never compacted.
    pub context_window: Setting<Option<u64>>,
    /// `compaction.threshold` or `compaction.compact_at`.
    pub compact_at: Setting<CompactAt>,
    /// `compaction.keep_turns`.
    pub keep_turns: Setting<u64>,
    /// `checkpoints.enabled`.
    pub checkpoints_enabled: Setting<bool>,
    /// `checkpoints.max_bytes`.
    pub checkpoint_max_bytes: Setting<u64>,
    /// `checkpoints.max_age_days`.
    pub checkpoint_max_age_days: Setting<u64>,
    /// `checkpoints.max_per_session`.
    pub checkpoint_max_per_session: Setting<u64>,
    /// The personas a child agent may be: the file's `[agents.NAME]` tables and, unless one of
    /// them is called `general`, the built-in one. Only the file sets them
    /// ([`Effective::persona_source`]).
    pub personas: Personas,
    /// `[[mcp.servers]]`: the MCP servers every session starts. Only the file sets them.
    pub mcp_servers: Setting<Vec<McpServerConfig>>,
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
        let (model, model_sources) = model_table(flags, config.model, &file, env)?;
        let default_model =
            default_model(model.as_ref(), config.default_model, &config.models, &file)?;
        let sandbox = SandboxSettings::merge(&config.sandbox, &file, env)?;
        let approval_policy = approval_policy(config.approval.policy, &file, env)?;
        let helper = helper_choice(flags, &config.helper, &file, env)?;
        let helper_ceiling = helper_ceiling(flags, &config.helper, &file)?;
        let helper_file_io = helper_file_io(&config.helper, &file, env)?;
        let state_dir = state_dir(flags, config.session.state_dir.as_deref(), &file, env)?;
        let limits = config.limits;
        let optional = |value: Option<u64>| layered(value.map(Some), None, &file);
        // [compaction] needs the window of the file's [model].
        let window = model
            .as_ref()
            .and_then(|m| m.context_window)
            .map(|w| w.get());
        let points = &config.checkpoints;
        Ok(Effective {
            model,
            model_sources,
            models: config.models,
            default_model,
            sandbox_mode: sandbox.mode,
            network: sandbox.network,
            backend: sandbox.backend,
            writable_roots: sandbox.writable_roots,
            cache: sandbox.cache,
            protected: sandbox.protected,
            local_binding: sandbox.local_binding,
            deny_read: sandbox.deny_read,
            deny_read_lines: sandbox.deny_read_lines,
            credentials: sandbox.credentials,
            lift_deny_read: sandbox.lift_deny_read,
            unix_sockets: sandbox.unix_sockets,
            allow_list: sandbox.allow_list,
            sandbox_env: sandbox.env,
            approval_policy,
            ask_before: layered(config.approval.ask_before, Vec::new(), &file),
            helper,
            helper_ceiling,
            helper_file_io,
            state_dir,
            max_steps: layered(config.session.max_steps, DEFAULT_MAX_STEPS, &file),
            command_timeout_ms: layered(
                limits.command_timeout_ms,
                DEFAULT_COMMAND_TIMEOUT_MS,
                &file,
            ),
            max_processes: optional(limits.max_processes),
            max_file_size: optional(limits.max_file_size),
            max_address_space: optional(limits.max_address_space),
            max_memory: optional(limits.max_memory),
            context_window: layered(window.map(Some), None, &file),
            compact_at: layered(config.compaction.at, CompactAt::default(), &file),
            keep_turns: layered(config.compaction.keep_turns, DEFAULT_KEEP_TURNS, &file),
            checkpoints_enabled: layered(points.enabled, true, &file),
            checkpoint_max_bytes: layered(points.max_bytes, DEFAULT_MAX_BYTES, &file),
            checkpoint_max_age_days: layered(points.max_age_days, DEFAULT_MAX_AGE_DAYS, &file),
            checkpoint_max_per_session: layered(
                points.max_per_session,
                DEFAULT_MAX_PER_SESSION,
                &file,
            ),
            personas: config.agents,
            mcp_servers: layered(
                (!config.mcp.is_empty()).then_some(config.mcp),
                Vec::new(),
                &file,
            ),
            file,
            file_found,
        })
    }

    /// Where the persona `name` comes from: the file, or agentd itself for the built-in
    /// `general`.
    pub fn persona_source(&self, name: &str) -> Source {
        match &self.file {
            Some(path) if !self.personas.is_built_in(name) => Source::File(path.clone()),
            _ => Source::Default,
        }
    }

    /// The configuration file as messages should name it.
    pub(super) fn file_for_messages(&self) -> String {
        match &self.file {
            Some(path) => path.display().to_string(),
            None => {
                format!("a configuration file given with --config (~/.config/agentd/{FILE_NAME})")
            }
        }
    }

    /// `[checkpoints]`: whether sessions record checkpoints, their cap and their retention.
    pub fn checkpoints(&self) -> Checkpoints {
        Checkpoints::of(
            self.checkpoints_enabled.value,
            self.checkpoint_max_bytes.value,
            self.checkpoint_max_age_days.value,
            self.checkpoint_max_per_session.value,
        )
    }

    /// How sessions using the default model compact their history; `None`, never, without its
    /// `context_window`.
    pub fn compaction(&self) -> Option<CompactionPolicy> {
        self.compaction_for(self.default_table()?)
    }

    /// How a session using `model` compacts its history: its `context_window` with
    /// `[compaction]`'s settings; `None`, never, without a window.
    pub(super) fn compaction_for(&self, model: &ModelConfig) -> Option<CompactionPolicy> {
        let context_window = model.context_window?.get();
        Some(CompactionPolicy {
            context_window,
            compact_at: self.compact_at.value.tokens(context_window),
            keep_turns: self.keep_turns.value,
        })
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

    /// The sandbox profile the configuration gives every session (and `agentd run`): its
    /// writable roots, its cache presets' directories, its protected paths, its denied reads,
    /// its Unix sockets and the rest of `[sandbox]`'s profile.
    pub fn sandbox_profile(&self) -> SandboxProfile {
        SandboxProfile {
            writable_roots: self.writable_roots.value.clone(),
            cache_dirs: self
                .cache
                .value
                .iter()
                .flat_map(|cache| {
                    cache.dirs.iter().map(|dir| CacheDir {
                        preset: cache.preset.as_str(),
                        path: dir.path.clone(),
                    })
                })
                .collect(),
            protected: self.protected.value.clone(),
            local_binding: self.local_binding.value,
            deny_read: self.deny_read.value.clone(),
            credentials: self.denied_credentials(),
            unix_sockets: self.unix_sockets.value.clone(),
            allow_list: self.allow_list.value.as_ref().map(|a| a.policy.clone()),
            limits: ResourceLimits {
                max_processes: self.max_processes.value,
                max_file_size: self.max_file_size.value,
                max_address_space: self.max_address_space.value,
                max_memory: self.max_memory.value,
            },
        }
    }

    /// The built-in denied reads in force: every one but those `sandbox.lift_deny_read` names.
    pub fn denied_credentials(&self) -> Vec<Credential> {
        let lifted: Vec<&str> = self
            .lift_deny_read
            .value
            .iter()
            .map(|l| l.value.as_str())
            .collect();
        self.credentials
            .iter()
            .flatten()
            .filter(|c| !lifted.contains(&c.built_in.entry))
            .cloned()
            .collect()
    }

    /// The default timeout of a command.
    pub fn command_timeout(&self) -> Duration {
        Duration::from_millis(self.command_timeout_ms.value)
    }
}

/// Where a value the file `file` sets came from.
fn from_file(file: &Option<PathBuf>) -> Source {
    match file {
        Some(path) => Source::File(path.clone()),
        None => Source::Default,
    }
}

/// `[model]`: the file's table `model` (from `file`), then `AGENTD_MODEL`, `AGENTD_BASE_URL`
/// and `AGENTD_API_KEY_ENV`, then `--model-script`; with where each value came from.
fn model_table(
    flags: &Flags,
    mut model: Option<ModelConfig>,
    file: &Option<PathBuf>,
    env: Env<'_>,
) -> Result<(Option<ModelConfig>, ModelSources), ConfigError> {
    let mut model_sources = ModelSources::default();
    if let Some(model) = &model {
        let source = |set: bool| {
            if set {
                from_file(file)
            } else {
                Source::Default
            }
        };
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
    Ok((model, model_sources))
}

/// Which model is the default: `[model]` whenever anything sets it, else the file's
/// `default_model` `named`, which it needs when it has `[models.NAME]` tables `models`.
fn default_model(
    model: Option<&ModelConfig>,
    named: Option<String>,
    models: &[NamedModel],
    file: &Option<PathBuf>,
) -> Result<Setting<String>, ConfigError> {
    Ok(match (model, named) {
        (None, Some(name)) => Setting::new(name, from_file(file)),
        (None, None) if !models.is_empty() => {
            return Err(ModelsError::NoDefault {
                path: file.clone().unwrap_or_default(),
                known: known_names(models),
            }
            .into());
        }
        _ => Setting::default(DEFAULT_MODEL_NAME.to_owned()),
    })
}

/// `[approval] policy` (from `file`), then `AGENTD_APPROVAL_POLICY`.
fn approval_policy(
    policy: Option<ApprovalPolicy>,
    file: &Option<PathBuf>,
    env: Env<'_>,
) -> Result<Setting<ApprovalPolicy>, ConfigError> {
    let mut approval_policy = layered(policy, ApprovalPolicy::Ask, file);
    if let Some(policy) = env_word(env, "AGENTD_APPROVAL_POLICY")? {
        approval_policy = Setting::new(policy, Source::Env("AGENTD_APPROVAL_POLICY"));
    }
    Ok(approval_policy)
}

/// How to reach the helper: `--helper-socket`, `--helper`, `AGENTD_HELPER`, then the file's
/// `[helper]` table `section` (its socket before its path); else searched for.
fn helper_choice(
    flags: &Flags,
    section: &HelperSection,
    file: &Option<PathBuf>,
    env: Env<'_>,
) -> Result<Setting<HelperChoice>, ConfigError> {
    Ok(if let Some(socket) = &flags.helper_socket {
        let source = Source::Flag("--helper-socket");
        Setting::new(HelperChoice::Socket(absolute(socket, &source)?), source)
    } else if let Some(path) = &flags.helper {
        let source = Source::Flag("--helper");
        Setting::new(HelperChoice::Binary(absolute(path, &source)?), source)
    } else if let Some(path) = env_path(env, "AGENTD_HELPER")? {
        let source = Source::Env("AGENTD_HELPER");
        Setting::new(HelperChoice::Binary(absolute(&path, &source)?), source)
    } else if let Some(socket) = &section.socket {
        let source = from_file(file);
        Setting::new(HelperChoice::Socket(absolute(socket, &source)?), source)
    } else if let Some(path) = &section.path {
        let source = from_file(file);
        Setting::new(HelperChoice::Binary(absolute(path, &source)?), source)
    } else {
        Setting::default(HelperChoice::Search)
    })
}

/// The ceiling file of an embedded helper: `--helper-ceiling`, then `[helper] ceiling`.
fn helper_ceiling(
    flags: &Flags,
    section: &HelperSection,
    file: &Option<PathBuf>,
) -> Result<Setting<Option<PathBuf>>, ConfigError> {
    Ok(if let Some(path) = &flags.helper_ceiling {
        let source = Source::Flag("--helper-ceiling");
        Setting::new(Some(absolute(path, &source)?), source)
    } else if let Some(path) = &section.ceiling {
        let source = from_file(file);
        Setting::new(Some(absolute(path, &source)?), source)
    } else {
        Setting::default(None)
    })
}

/// The file reader and writer: `AGENTD_FILE_IO`, then `[helper] file_io`.
fn helper_file_io(
    section: &HelperSection,
    file: &Option<PathBuf>,
    env: Env<'_>,
) -> Result<Setting<Option<PathBuf>>, ConfigError> {
    Ok(if let Some(path) = env_path(env, "AGENTD_FILE_IO")? {
        let source = Source::Env("AGENTD_FILE_IO");
        Setting::new(Some(absolute(&path, &source)?), source)
    } else if let Some(path) = &section.file_io {
        let source = from_file(file);
        Setting::new(Some(absolute(path, &source)?), source)
    } else {
        Setting::default(None)
    })
}

/// Where session logs are kept: `--state-dir`, `AGENTD_STATE_DIR`, then the file's
/// `[session] state_dir` `configured`; else the default under `$XDG_STATE_HOME` or `$HOME`.
fn state_dir(
    flags: &Flags,
    configured: Option<&Path>,
    file: &Option<PathBuf>,
    env: Env<'_>,
) -> Result<Setting<Option<PathBuf>>, ConfigError> {
    Ok(if let Some(dir) = &flags.state_dir {
        let source = Source::Flag("--state-dir");
        Setting::new(Some(absolute(dir, &source)?), source)
    } else if let Some(dir) = env_path(env, "AGENTD_STATE_DIR")? {
        let source = Source::Env("AGENTD_STATE_DIR");
        Setting::new(Some(absolute(&dir, &source)?), source)
    } else if let Some(dir) = configured {
        let source = from_file(file);
        Setting::new(Some(absolute(dir, &source)?), source)
    } else {
        Setting::default(default_state_dir(env("XDG_STATE_HOME"), env("HOME")))
    })
}
