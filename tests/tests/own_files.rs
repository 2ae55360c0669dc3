//! agentd's own files — its configuration, session logs and binary — are never writable by a
//! command: a session whose workspace holds them opens read-only and refuses a switch to
//! workspace-write, and `agentd run` refuses such a workspace, each naming the path. A command that could write them would change what agentd runs at its next
//! start (`helper.path`, `[model]`) or the logs its modes and approvals are replayed from.

mod support;

use serde_json::json;
use support::acp::{AcpClient, Scratch};

const SCRIPT: &str = "[[turn]]\ntext = \"ok\"\n";

#[test]
fn a_session_whose_workspace_holds_agentds_configuration_and_logs_may_not_be_workspace_write() {
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
    let switch = |client: &mut AcpClient, cwd: &std::path::Path| {
        let (opened, _) = client.request("session/new", json!({"cwd": cwd, "mcpServers": []}));
        let session = opened["result"]["sessionId"].clone();
        assert!(session.is_string(), "the session opens: {opened}");
        client
            .request(
                "session/set_config_option",
                json!({"sessionId": session, "configId": "sandbox-mode", "value": "workspace-write"}),
            )
            .0
    };
    let refused = switch(&mut client, &root);
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        refused["error"]["code"] == -32602 && message.contains("agentd's own"),
        "{refused}"
    );
    assert!(
        message.contains(&root.join("config/agentd").display().to_string())
            || message.contains(&root.join("state").display().to_string()),
        "the refusal names the path: {refused}"
    );
    // The control: the workspace beside them may be workspace-write.
    let taken = switch(&mut client, &scratch.ws());
    assert!(taken["result"]["configOptions"].is_array(), "{taken}");
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
