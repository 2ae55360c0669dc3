//! `docs/contracts/acp-session.md`: what agentd answers to `initialize` and `session/new` over
//! ACP: its capabilities, the session config options (`sandbox-mode`, `approval-policy`, and
//! `model` when several models are configured) and the session modes, per ceiling.
//!
//! The answers are agentd's own: its ACP agent (`agentd::api::acp::serve_on`) is served in this
//! process over an in-memory pipe, with the options `agentd acp` builds from a configuration
//! file, and is asked as an editor asks it. Only what a session's id and directory do not
//! change is kept.

use std::path::{Path, PathBuf};
use std::time::Duration;

use agentd::api::acp::{AcpOptions, serve_on};
use agentd::api::composition::Composition;
use agentd::api::config::{DEFAULT_SANDBOX_MODE, Effective, Flags};
use confine_protocol::{Mode, Network};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::error::DocgenError;
use crate::generated::Generated;

/// Longer than any answer takes on a loaded machine; past it the generator gives up.
const PATIENCE: Duration = Duration::from_secs(60);

/// A configuration with more than one model, so that `session/new` offers the `model` option.
const TWO_MODELS: &str = r#"default_model = "fast"

[models.fast]
base_url = "http://127.0.0.1:9/v1"
model = "small-model"

[models.deep]
base_url = "http://127.0.0.1:9/v1"
model = "large-model"
"#;

/// What agentd answered: `initialize`'s result and `session/new`'s, without the session id.
struct Answers {
    initialize: Value,
    session: Value,
}

/// A scratch directory for one run of the agent, removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The options `agentd acp --config FILE --state-dir DIR` serves with when `FILE` holds
/// `config`, no `AGENTD_*` variable is set and confine-helper grants up to `max_mode`.
fn options(root: &Path, config: &str, max_mode: Mode) -> Result<AcpOptions, DocgenError> {
    let file = root.join("agentd.toml");
    std::fs::write(&file, config).map_err(|error| DocgenError::Scratch {
        action: "write",
        path: file.clone(),
        error,
    })?;
    let flags = Flags {
        config: Some(file),
        state_dir: Some(root.join("state")),
        helper_socket: Some(root.join("no-helper.sock")),
        ..Flags::default()
    };
    let effective =
        Effective::load_with(&flags, &|_| None).map_err(|e| DocgenError::Agentd(e.into()))?;
    // agentd does not start with a default mode above its helper's ceiling: there it is
    // started with `--sandbox-mode` within it.
    let default = effective.sandbox_mode.value;
    let flag = (default > max_mode).then_some(max_mode);
    let mut options =
        AcpOptions::from_config(&effective, flag).map_err(|e| DocgenError::Agentd(e.into()))?;
    options.composition = Composition {
        max_mode,
        network: Network::Deny,
        ceiling_sources: Vec::new(),
        unconfinable: None,
        workspace: None,
    };
    Ok(options)
}

/// Serves agentd's ACP agent and asks it `initialize` and `session/new`.
fn ask(config: &str, max_mode: Mode) -> Result<Answers, DocgenError> {
    let root = std::env::temp_dir().join(format!("agentd-docgen-{}", std::process::id()));
    let scratch = Scratch(root.clone());
    std::fs::create_dir_all(root.join("ws")).map_err(|error| DocgenError::Scratch {
        action: "create",
        path: root.clone(),
        error,
    })?;
    let options = options(&root, config, max_mode)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(DocgenError::Runtime)?;
    let answers = runtime.block_on(async {
        tokio::time::timeout(PATIENCE, converse(options, &root.join("ws")))
            .await
            .map_err(|_| DocgenError::Timeout(PATIENCE))?
    });
    drop(scratch);
    answers
}

async fn converse(options: AcpOptions, cwd: &Path) -> Result<Answers, DocgenError> {
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let (their_in, their_out) = tokio::io::split(theirs);
    let served = tokio::spawn(serve_on(options, their_in, their_out));
    let (our_in, mut out) = tokio::io::split(ours);
    let mut lines = BufReader::new(our_in).lines();
    let mut request = async |id: u32, method: &str, params: Value| -> Result<Value, DocgenError> {
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        out.write_all(format!("{line}\n").as_bytes())
            .await
            .map_err(DocgenError::WriteToAgentd)?;
        while let Some(line) = lines.next_line().await.map_err(DocgenError::Pipe)? {
            let message: Value = serde_json::from_str(&line).map_err(DocgenError::NotJson)?;
            if message.get("method").is_none() && message.get("id").is_some_and(|got| *got == id) {
                return message
                    .get("result")
                    .cloned()
                    .ok_or_else(|| DocgenError::Refused {
                        method: method.to_owned(),
                        answer: message.clone(),
                    });
            }
        }
        Err(DocgenError::Stopped(method.to_owned()))
    };
    let initialize = request(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    )
    .await?;
    let mut session = request(2, "session/new", json!({"cwd": cwd, "mcpServers": []})).await?;
    if let Some(answer) = session.as_object_mut() {
        answer.remove("sessionId");
    }
    // The hang-up: agentd closes the session and returns.
    out.shutdown().await.map_err(DocgenError::Pipe)?;
    served
        .await
        .map_err(DocgenError::ServingTask)?
        .map_err(|e| DocgenError::Ended(e.into()))?;
    Ok(Answers {
        initialize,
        session,
    })
}

fn json_block(value: &Value) -> String {
    let text = serde_json::to_string_pretty(value).unwrap_or_default();
    format!("```json\n{text}\n```\n")
}

pub fn session_settings() -> Result<Generated, DocgenError> {
    let mut body = String::from(
        "# ACP session settings

What agentd answers over the Agent Client Protocol (v1) to an editor's `initialize` and
`session/new`, as it serializes them. `session/load` answers with the same `configOptions` and
`modes`, whose current values are then the session's own. `session/set_config_option` takes a
`configId` and a `value` listed here, `session/set_mode` a `modeId`; any other is answered with
JSON-RPC error -32602 naming the option and the value.

The sandbox modes offered are those the confine-helper's ceiling (`max_mode`) allows, as below
for a machine with a usable sandbox backend; where none is usable, the confined modes are not
offered (the current one is still listed, as the select's value).

## initialize

",
    );
    let by_ceiling = Mode::ALL
        .iter()
        .map(|&max_mode| Ok((max_mode, ask("", max_mode)?)))
        .collect::<Result<Vec<_>, DocgenError>>()?;
    // `initialize` as answered under the widest ceiling.
    let widest = by_ceiling
        .iter()
        .find(|(max_mode, _)| *max_mode == Mode::DangerFullAccess)
        .ok_or(DocgenError::NoWidestMode)?;
    body.push_str(&json_block(&widest.1.initialize));
    body.push_str("\n## session/new, by ceiling\n");
    for (max_mode, answers) in &by_ceiling {
        let max_mode = *max_mode;
        let current = DEFAULT_SANDBOX_MODE.min(max_mode);
        let given = match current == DEFAULT_SANDBOX_MODE {
            true => String::new(),
            false => format!(
                " and `--sandbox-mode {}` (agentd does not start with a default mode above its \
                 ceiling)",
                current.as_str()
            ),
        };
        body.push_str(&format!(
            "\n### max_mode = {}\n\nWith an empty configuration file{given}; new sessions \
             start in {}.\n\n",
            max_mode.as_str(),
            current.as_str()
        ));
        body.push_str(&json_block(&answers.session));
    }
    let models = ask(TWO_MODELS, Mode::DangerFullAccess)?;
    body.push_str(&format!(
        "\n## session/new with more than one model\n\nWith this configuration file, under a \
         ceiling of danger-full-access; the `model` option is offered only when more than one \
         model is configured.\n\n```toml\n{TWO_MODELS}```\n\n"
    ));
    body.push_str(&json_block(&models.session));
    Ok(Generated::markdown("docs/contracts/acp-session.md", &body))
}
