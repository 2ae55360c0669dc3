//! agentd's own files — its configuration, session logs and binary — are never writable by a
//! command: a workspace that holds them is refused at `session/new` and by `agentd run`, with
//! the path named. A command that could write them would change what agentd runs at its next
//! start (`helper.path`, `[model]`) or the logs its modes and approvals are replayed from.

mod support;

use serde_json::json;
use support::acp::{AcpClient, Scratch};

const SCRIPT: &str = "[[turn]]\ntext = \"ok\"\n";

#[test]
fn session_new_refuses_a_workspace_that_holds_agentds_configuration_and_logs() {
    let scratch = Scratch::new("own-files");
    let script = scratch.script(SCRIPT);
    let mut client = AcpClient::start(&scratch, &script, &[]);
    let (init, _) = client.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    // The scratch root holds `config/` (XDG_CONFIG_HOME, so agentd's configuration
    // directory) and `state/` (the session logs).
    let root = std::fs::canonicalize(&scratch.root).expect("root");
    let (refused, _) = client.request("session/new", json!({"cwd": root, "mcpServers": []}));
    let message = refused["error"].to_string();
    assert!(
        refused["error"]["code"] == -32602 && message.contains("agentd's own"),
        "{refused}"
    );
    assert!(
        message.contains(&root.join("config/agentd").display().to_string())
            || message.contains(&root.join("state").display().to_string()),
        "the refusal names the path: {refused}"
    );
    // The control: the workspace beside them opens.
    let session = client.open_session(&scratch.ws());
    assert!(!session.is_empty());
}

fn agentd_run(scratch: &Scratch, workspace: &std::path::Path) -> std::process::Output {
    scratch
        .agentd("run")
        .args(["--json", "--mode", "workspace-write", "--workspace"])
        .arg(workspace)
        .args(["--", "true"])
        .output()
        .expect("run agentd")
}

#[test]
fn agentd_run_refuses_a_workspace_that_holds_agentds_configuration() {
    let scratch = Scratch::new("own-files-run");
    let root = std::fs::canonicalize(&scratch.root).expect("root");
    let out = agentd_run(&scratch, &root);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(
        stderr.contains(&root.join("config/agentd").display().to_string())
            && stderr.contains("agentd's own"),
        "{stderr}"
    );
    // The control: the workspace beside them runs.
    let out = agentd_run(&scratch, &scratch.ws());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() || stderr.contains("\"runner_failure\":{"),
        "{stderr}"
    );
}
