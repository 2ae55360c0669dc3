//! The flags several commands share: which confine-helper and configuration file to use, what
//! the session commands add to that, and the words of `--mode`, `--network` and `--backend`.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::Args;
use clap::builder::{OsStringValueParser, TypedValueParser};

use crate::config::{ConfigError, Effective, Flags};

// The flags shared by the commands that run or inspect sessions; each beats the environment and
// the configuration file. (A comment, not a doc comment: flattened into a deferred subcommand,
// a doc comment would replace that subcommand's help.)
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub struct AgentArgs {
    #[command(flatten)]
    pub helper: HelperArgs,
    /// Keep session logs in DIR (overrides AGENTD_STATE_DIR and session.state_dir)
    /// [default: $XDG_STATE_HOME/agentd/sessions].
    #[arg(long, value_name = "DIR", value_parser = non_empty_path())]
    pub state_dir: Option<PathBuf>,
    /// Answer prompts with the turns scripted in FILE instead of asking a model server
    /// (model.provider = "scripted", model.script = FILE).
    #[arg(long, value_name = "FILE", value_parser = non_empty_path())]
    pub model_script: Option<PathBuf>,
}

impl AgentArgs {
    /// The flags as configuration overrides.
    pub fn flags(&self) -> Flags {
        Flags {
            state_dir: self.state_dir.clone(),
            model_script: self.model_script.clone(),
            ..self.helper.flags()
        }
    }

    /// The effective configuration with these flags: see [`Effective::load`].
    pub fn effective(&self) -> Result<Effective, ConfigError> {
        Effective::load(&self.flags())
    }
}

// Which confine-helper to use and where the configuration file is; each overrides the
// environment and the configuration file. (A comment, not a doc comment: flattened into a
// deferred subcommand, a doc comment would replace that subcommand's help.)
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub struct HelperArgs {
    /// The confine-helper binary to start (overrides AGENTD_HELPER, helper.path and
    /// helper.socket).
    #[arg(
        long,
        value_name = "PATH",
        conflicts_with = "helper_socket",
        value_parser = non_empty_path()
    )]
    pub helper: Option<PathBuf>,
    /// Connect to a confine-helper serving on this socket instead of starting one (overrides
    /// AGENTD_HELPER, helper.path and helper.socket).
    #[arg(long, value_name = "PATH", value_parser = non_empty_path())]
    pub helper_socket: Option<PathBuf>,
    /// Start confine-helper with this ceiling file, which can only narrow what it allows.
    ///
    /// Passed on as `confine-helper --fd 0 --ceiling PATH`; overrides helper.ceiling in the
    /// configuration file. The file must not be writable by group or others and must belong to
    /// you or root. Not with a helper socket: a service helper reads its own ceiling
    /// (`confine-service --ceiling PATH`).
    #[arg(long, value_name = "PATH", value_parser = non_empty_path())]
    pub helper_ceiling: Option<PathBuf>,
    /// The configuration file, which must exist [default: $XDG_CONFIG_HOME/agentd/agentd.toml,
    /// else ~/.config/agentd/agentd.toml, if present].
    #[arg(long, value_name = "PATH", value_parser = non_empty_path())]
    pub config: Option<PathBuf>,
}

impl HelperArgs {
    /// The flags as configuration overrides.
    pub fn flags(&self) -> Flags {
        Flags {
            config: self.config.clone(),
            helper: self.helper.clone(),
            helper_socket: self.helper_socket.clone(),
            helper_ceiling: self.helper_ceiling.clone(),
            ..Flags::default()
        }
    }
}

/// A path that is not empty (an empty one would silently mean the current directory).
pub(super) fn non_empty_path() -> impl TypedValueParser<Value = PathBuf> {
    OsStringValueParser::new().try_map(|value: OsString| {
        if value.is_empty() {
            Err("the path is empty")
        } else {
            Ok(PathBuf::from(value))
        }
    })
}
