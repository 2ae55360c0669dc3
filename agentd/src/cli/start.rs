//! Starting the ACP agent: `agentd acp` and `agentd exec` serve the same agent, so they resolve
//! its options the same way, from the same flags, and refuse to start for the same reasons.

use confine_protocol::Mode;

use super::args::AgentArgs;
use crate::acp::{AcpOptions, AcpStartError};

/// The options of the agent: the configuration with `agent`'s flags, the sessions' sandbox mode
/// overridden by `mode` (`--sandbox-mode`), checked against what the helper grants.
pub(super) async fn agent_options(
    agent: &AgentArgs,
    mode: Option<Mode>,
) -> Result<AcpOptions, AcpStartError> {
    let config = agent.effective()?;
    let mut options = AcpOptions::from_config(&config, mode)?;
    let source = if mode.is_some() {
        "--sandbox-mode".to_owned()
    } else {
        format!("sandbox.mode: {}", config.sandbox_mode.source)
    };
    options.learn(&source).await?;
    Ok(options)
}
