//! What `agentd acp` runs with: the configuration resolved once, and what the helper grants.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;

use confine_protocol::{BackendChoice, Mode, Network};

use super::models::Models;
use crate::agents::{PersonaModel, Personas};
use crate::composition::Composition;
use crate::config::{
    BuiltModel, ConfigError, Effective, HelperSetupError, McpServerConfig, PersonaProviders,
};
use crate::environment;
use crate::helper_client::{ClientError, HelperClient};
use crate::model::{ModelError, Provider};
use crate::profile::SandboxProfile;
use crate::words::ApprovalPolicy;

/// Why `agentd acp` cannot serve with the configuration it was given.
#[derive(Debug, thiserror::Error)]
pub enum AcpStartError {
    /// confine-helper cannot be set up as configured.
    #[error(transparent)]
    Helper(#[from] HelperSetupError),
    /// The configuration cannot be used (no state directory, say).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The helper could not be asked what it grants.
    #[error(transparent)]
    Info(#[from] ClientError),
    /// The sessions' default mode is one the helper's ceiling refuses; `from` names where the
    /// default came from, `why` the ceiling.
    #[error(
        "the sessions' sandbox mode {} ({from}) cannot be used: {why}",
        mode.as_str()
    )]
    ModeRefused {
        mode: Mode,
        from: String,
        why: String,
    },
}

/// Everything `agentd acp` needs, resolved from the configuration.
#[derive(Clone)]
pub struct AcpOptions {
    pub helper: HelperClient,
    /// Every configured model, built, the default first; a model that cannot be built is
    /// reported at the first prompt that uses it (see [`Models`]).
    pub models: Arc<Models>,
    /// The models of personas with a `model` table of their own; the others use a named model
    /// or the session's.
    pub persona_providers: PersonaProviders,
    pub state_dir: PathBuf,
    /// The sandbox mode of a session until it is switched.
    pub default_mode: Mode,
    /// The approval policy of a session until it is switched.
    pub default_policy: ApprovalPolicy,
    /// Tools that ask the user before every call (`approval.ask_before`).
    pub ask_before: Vec<String>,
    pub network: Network,
    pub backend: BackendChoice,
    /// Model requests per prompt before the turn ends with `max_turn_requests`.
    pub max_steps: u64,
    /// Default timeout of a foreground command.
    pub command_timeout_ms: u64,
    /// The environment commands get (already the allow-list).
    pub command_env: Vec<(OsString, OsString)>,
    /// What every session's commands may write besides the workspace, and what stays
    /// read-only (`[sandbox] writable_roots`, `cache`, `protected`).
    pub profile: SandboxProfile,
    /// What the helper grants; [`AcpOptions::learn`] asks it.
    pub composition: Composition,
    /// The personas a `task` call may start (`[agents.NAME]` and the built-in `general`).
    pub personas: Personas,
    /// The MCP servers every session starts (`[[mcp.servers]]`).
    pub mcp_servers: Vec<McpServerConfig>,
    /// Whether a model failure is also logged on stderr as it happens: an editor keeps
    /// agentd's stderr as a log; `agentd exec`, whose stderr is the person's, reports the
    /// failure once, as the prompt's error.
    pub log_model_errors: bool,
    /// Whether and how turns are checkpointed for `/undo` (`[checkpoints]`, RFC 0020).
    pub checkpoints: crate::config::Checkpoints,
}

impl std::fmt::Debug for AcpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcpOptions")
            .field("state_dir", &self.state_dir)
            .field("default_mode", &self.default_mode)
            .field("default_policy", &self.default_policy)
            .field("ask_before", &self.ask_before)
            .field("max_steps", &self.max_steps)
            .field("models", &self.models)
            .finish_non_exhaustive()
    }
}

impl AcpOptions {
    /// The options the effective configuration gives, with the sandbox mode of new sessions
    /// overridden by `mode` when given. A missing model is not an error here: it is reported at
    /// the first prompt, so an editor can still connect, list and load sessions.
    pub fn from_config(
        config: &Effective,
        mode: Option<Mode>,
    ) -> Result<AcpOptions, AcpStartError> {
        let helper = config.helper_client()?;
        let state_dir = config.state_dir()?.to_owned();
        Ok(AcpOptions {
            helper,
            models: Arc::new(Models::from_config(config)),
            persona_providers: config.persona_providers(),
            state_dir,
            default_mode: mode.unwrap_or(config.sandbox_mode.value),
            default_policy: config.approval_policy.value,
            ask_before: config.ask_before.value.clone(),
            network: config.network.value,
            backend: config.backend.value,
            max_steps: u64::from(config.max_steps.value),
            command_timeout_ms: config.command_timeout_ms.value,
            command_env: environment::command_environment(
                std::env::vars_os(),
                &config
                    .sandbox_env
                    .value
                    .explicit(crate::config::process_lookup),
            ),
            profile: config.sandbox_profile(),
            composition: Composition::nothing(),
            personas: config.personas.clone(),
            mcp_servers: config.mcp_servers.value.clone(),
            log_model_errors: true,
            checkpoints: config.checkpoints(),
        })
    }

    /// Whether a call of `tool` asks the user first: `approval.ask_before` lists it, or, for an
    /// MCP tool, every tool of its server (`mcp__SERVER__*`).
    pub fn asks_before(&self, tool: &str) -> bool {
        crate::mcp::listed(&self.ask_before, tool)
    }

    /// The model a child agent of `persona` runs with: the persona's own table, else the
    /// model it names, else `session`'s, the model its session has selected.
    pub fn provider_for(
        &self,
        persona: &str,
        session: &BuiltModel,
    ) -> Result<Arc<dyn Provider>, Arc<ModelError>> {
        if let Some(own) = self.persona_providers.get(persona) {
            return own.clone();
        }
        match self.personas.get(persona).and_then(|p| p.model.as_ref()) {
            Some(PersonaModel::Named(name)) => match self.models.get(name) {
                Some(model) => model.provider.clone(),
                // The configuration checks every name when it loads; never the session's model
                // in place of the one the persona names.
                None => Err(Arc::new(ModelError::InvalidConfig {
                    file: "agentd's configuration".to_owned(),
                    detail: format!(
                        "the persona {persona:?} names the model {name:?}, which is not configured"
                    ),
                })),
            },
            _ => session.provider.clone(),
        }
    }

    /// Asks the helper what it grants, and checks the sessions' default mode against its
    /// ceiling: a default the ceiling refuses is an error that names the ceiling file and the
    /// setting to change. (A machine with no usable backend is not an error here: sessions
    /// start, are offered only what can run, and every confined command fails closed with a
    /// message that says how to fix it.) `mode_source` names where the default came from.
    pub async fn learn(&mut self, mode_source: &str) -> Result<(), AcpStartError> {
        let info = self.helper.info().await?;
        self.composition = Composition::from_info(&info, self.backend);
        if let Some(why) = self.composition.ceiling_refusal(self.default_mode) {
            return Err(AcpStartError::ModeRefused {
                mode: self.default_mode,
                from: mode_source.to_owned(),
                why,
            });
        }
        Ok(())
    }
}
