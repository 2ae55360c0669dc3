//! Composition truth over the real `agentd acp` wire: what the model and the user are offered
//! follows what confine-helper will grant. With a helper ceiling of `max_mode = "read-only"`
//! the bash schema the model receives has no escalation fields, the sandbox-mode select offers
//! only read-only, a switch above it is refused with the reason, and a default above it stops
//! agentd at start with a message naming the ceiling file. Each check has its control without
//! the ceiling.

mod support;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::{Value, json};
use support::acp::{AcpClient, Scratch};

/// Records every request's tools, runs one harmless command, answers.
fn script(scratch: &Scratch) -> (PathBuf, PathBuf) {
    let record = scratch.root.join("offered.jsonl");
    let script = scratch.script(&format!(
        r#"
record = "{}"

[[turn]]
[[turn.tool_calls]]
name = "bash"
arguments = {{ command = "true" }}

[[turn]]
text = "Done."
"#,
        record.display()
    ));
    (script, record)
}

fn ceiling(scratch: &Scratch, max_mode: &str) -> String {
    let path = scratch.root.join("ceiling.toml");
    std::fs::write(&path, format!("max_mode = \"{max_mode}\"\n")).expect("ceiling");
    path.to_str().expect("utf-8").to_owned()
}

/// The bash tool of every request the model received.
fn offered_bash(record: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(record).expect("the scripted model recorded its requests");
    text.lines()
        .map(|line| {
            let tools: Value = serde_json::from_str(line).expect("json");
            tools
                .as_array()
                .and_then(|all| all.iter().find(|t| t["name"] == "bash"))
                .cloned()
                .expect("bash is offered")
        })
        .collect()
}

fn mode_choices(options: &Value) -> Vec<String> {
    let select = options
        .as_array()
        .and_then(|all| all.iter().find(|o| o["id"] == "sandbox-mode"))
        .expect("sandbox-mode option");
    select["options"]
        .as_array()
        .expect("choices")
        .iter()
        .map(|c| c["value"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Opens a session and returns its id and config options.
fn open(client: &mut AcpClient, scratch: &Scratch) -> (String, Value) {
    let (init, _) = client.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    let (new, _) = client.request(
        "session/new",
        json!({"cwd": scratch.ws(), "mcpServers": []}),
    );
    let id = new["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("session/new failed: {new}"))
        .to_owned();
    (id, new["result"]["configOptions"].clone())
}

fn switch(client: &mut AcpClient, session: &str, mode: &str) -> Value {
    client
        .request(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "sandbox-mode", "value": mode}),
        )
        .0
}

#[test]
fn a_read_only_ceiling_offers_no_escalation_and_only_read_only() {
    let scratch = Scratch::new("composition-ro");
    let (script, record) = script(&scratch);
    let ceiling = ceiling(&scratch, "read-only");
    let mut client = AcpClient::start(
        &scratch,
        &script,
        &["--sandbox-mode", "read-only", "--helper-ceiling", &ceiling],
    );
    let (session, options) = open(&mut client, &scratch);
    assert_eq!(mode_choices(&options), ["read-only"]);

    let (answer, _) = client.prompt(&session, "run true");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let offered = offered_bash(&record);
    assert_eq!(offered.len(), 2, "two model requests: {offered:#?}");
    for bash in &offered {
        let properties = &bash["parameters"]["properties"];
        assert!(properties.get("sandbox_permissions").is_none(), "{bash}");
        assert!(properties.get("justification").is_none(), "{bash}");
        let description = bash["description"].as_str().unwrap_or_default();
        assert!(!description.contains("escalation"), "{description}");
    }

    let refused = switch(&mut client, &session, "workspace-write");
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("at most read-only"), "{message}");
    assert!(
        message.contains(&ceiling),
        "names the ceiling file: {message}"
    );
    let log = scratch.log(&session);
    assert!(
        !log.iter().any(|r| r["type"] == "sandbox/mode"),
        "a refused switch records nothing"
    );
}

#[test]
fn without_a_ceiling_every_mode_and_every_wider_escalation_is_offered() {
    let scratch = Scratch::new("composition-all");
    let (script, record) = script(&scratch);
    let mut client = AcpClient::start(&scratch, &script, &["--sandbox-mode", "read-only"]);
    let (session, options) = open(&mut client, &scratch);
    assert_eq!(
        mode_choices(&options),
        ["read-only", "workspace-write", "danger-full-access"]
    );
    let (answer, _) = client.prompt(&session, "run true");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let offered = offered_bash(&record);
    assert_eq!(
        offered[0]["parameters"]["properties"]["sandbox_permissions"]["enum"],
        json!(["workspace-write", "danger-full-access"])
    );
    let switched = switch(&mut client, &session, "workspace-write");
    assert!(switched.get("error").is_none(), "{switched}");
}

#[test]
fn a_workspace_write_ceiling_offers_only_workspace_write_and_refuses_the_rest_unasked() {
    let scratch = Scratch::new("composition-ww");
    let record = scratch.root.join("offered.jsonl");
    let script = scratch.script(&format!(
        r#"
record = "{}"

[[turn]]
[[turn.tool_calls]]
name = "bash"
arguments = {{ command = "echo saved > out.txt", sandbox_permissions = "danger-full-access", justification = "save it" }}

[[turn]]
text = "Done."
"#,
        record.display()
    ));
    let ceiling = ceiling(&scratch, "workspace-write");
    let mut client = AcpClient::start(
        &scratch,
        &script,
        &["--sandbox-mode", "read-only", "--helper-ceiling", &ceiling],
    );
    let (session, options) = open(&mut client, &scratch);
    assert_eq!(mode_choices(&options), ["read-only", "workspace-write"]);
    let (answer, notes) = client.prompt(&session, "save it");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(
        offered_bash(&record)[0]["parameters"]["properties"]["sandbox_permissions"]["enum"],
        json!(["workspace-write"])
    );
    let result = notes
        .iter()
        .map(|n| &n["params"]["update"])
        .find(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "failed")
        .expect("the escalation failed");
    let text = result["content"][0]["content"]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.starts_with("sandbox escalation to \"danger-full-access\" cannot be granted:"),
        "{text}"
    );
    assert!(client.permission_requests.is_empty(), "nobody was asked");
    assert!(!scratch.ws().join("out.txt").exists(), "nothing ran");
}

/// Runs `agentd acp` to its exit with stdin closed; returns its status and stderr.
fn start_only(scratch: &Scratch, args: &[&str]) -> (Option<i32>, String) {
    let (script, _) = script(scratch);
    let mut all: Vec<&std::ffi::OsStr> = vec!["--model-script".as_ref(), script.as_os_str()];
    all.extend(args.iter().map(|a| std::ffi::OsStr::new(*a)));
    let output = AcpClient::command(scratch, &all)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("run agentd acp");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn a_default_above_the_ceiling_stops_agentd_at_start_naming_the_ceiling_file() {
    let scratch = Scratch::new("composition-start");
    let ceiling = ceiling(&scratch, "read-only");
    let (status, stderr) = start_only(
        &scratch,
        &[
            "--sandbox-mode",
            "workspace-write",
            "--helper-ceiling",
            &ceiling,
        ],
    );
    assert_eq!(status, Some(125), "{stderr}");
    assert!(
        stderr.contains("workspace-write (--sandbox-mode)"),
        "{stderr}"
    );
    assert!(stderr.contains(&ceiling), "{stderr}");
    // Control: the same start within the ceiling serves until stdin closes, and exits 0.
    let (status, stderr) = start_only(
        &scratch,
        &["--sandbox-mode", "read-only", "--helper-ceiling", &ceiling],
    );
    assert_eq!(status, Some(0), "{stderr}");
}
