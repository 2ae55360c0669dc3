//! Sandbox escalation over the real wire and the real kernel: a denied write, a retry with
//! `sandbox_permissions` and a justification, the user's answer, and what lands on disk.

mod support;

use serde_json::Value;
use support::acp::{AcpClient, Permission, Scratch, normalized_updates};

const JUSTIFICATION: &str = "the answer has to be saved in the workspace";

/// Denied, then the same command escalated to `mode`, then a plain write again.
fn script(mode: &str) -> String {
    format!(
        r#"
[[turn]]
[[turn.tool_calls]]
name = "bash"
arguments = {{ command = "echo saved > out.txt" }}

[[turn]]
[[turn.tool_calls]]
name = "bash"
arguments = {{ command = "echo saved > out.txt", sandbox_permissions = "{mode}", justification = "{JUSTIFICATION}" }}

[[turn]]
[[turn.tool_calls]]
name = "bash"
arguments = {{ command = "echo later > later.txt" }}

[[turn]]
text = "Done."
"#
    )
}

/// The `tool_call_update`s of a prompt, in order, without live output (which a slow command
/// may show before its result).
fn results(notes: &[Value]) -> Vec<Value> {
    normalized_updates(notes)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update")
        .collect()
}

/// The model's text as the editor shows it: the last content block (a line for a person may
/// come first).
fn text(result: &Value) -> String {
    result["content"]
        .as_array()
        .and_then(|blocks| blocks.last())
        .and_then(|block| block["content"]["text"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// What the model read of the call `call_id`: its logged `tool/result` output.
fn model_text(log: &[Value], call_id: &Value) -> String {
    log.iter()
        .find(|r| r["type"] == "tool/result" && r["call_id"] == *call_id)
        .and_then(|r| r["output"].as_str())
        .unwrap_or_default()
        .to_owned()
}

fn run(
    scratch: &Scratch,
    mode: &str,
    answer: Permission,
    extra: &[&str],
) -> (AcpClient, String, Vec<Value>) {
    let script = scratch.script(&script(mode));
    let mut args = vec!["--sandbox-mode", "read-only"];
    args.extend_from_slice(extra);
    let mut client = AcpClient::start(scratch, &script, &args);
    client.permission = answer;
    let session = client.open_session(&scratch.ws());
    let (answer, notes) = client.prompt(&session, "save the answer");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    (client, session, results(&notes))
}

#[test]
fn an_allowed_escalation_runs_that_one_command_under_workspace_write() {
    let scratch = Scratch::new("escalate-allow");
    let (client, session, results) = run(&scratch, "workspace-write", Permission::AllowOnce, &[]);
    assert_eq!(results.len(), 3, "{results:#?}");

    // The model reads the denial and the hint that it may escalate; the editor is shown a line
    // for a person first, and the model's text without the hint.
    let denied = model_text(&scratch.log(&session), &results[0]["toolCallId"]);
    assert!(
        denied.contains("[sandbox: file write denied under read-only mode]"),
        "{denied}"
    );
    let hint = "[sandbox: escalation available — the denied writes are inside the workspace: \
                retry this exact command once with sandbox_permissions \"workspace-write\"";
    assert!(denied.contains(hint), "{denied}");
    assert_eq!(
        results[0]["content"][0]["content"]["text"],
        "Blocked by the sandbox (read-only): file write; the agent may ask to retry with more \
         access.",
        "{}",
        results[0]
    );
    let shown = text(&results[0]);
    assert!(
        shown.contains("[sandbox: file write denied under read-only mode]"),
        "{shown}"
    );
    assert!(!shown.contains("escalation available"), "{shown}");
    assert_eq!(results[0]["_meta"]["agentd"]["facts"]["denied"], true);
    assert_eq!(
        results[0]["_meta"]["agentd"]["facts"]["denials"],
        serde_json::json!(["file-write"])
    );

    assert_eq!(
        client.permission_requests.len(),
        1,
        "one prompt, for the escalation"
    );
    let asked = &client.permission_requests[0]["params"];
    assert_eq!(asked["toolCall"]["toolCallId"], results[1]["toolCallId"]);

    assert_eq!(results[1]["status"], "completed", "{}", results[1]);
    assert_eq!(
        results[1]["_meta"]["agentd"]["facts"]["mode"],
        "workspace-write"
    );
    assert!(
        results[1]["_meta"]["agentd"]["facts"]["backend"].is_string(),
        "{}",
        results[1]
    );
    assert_eq!(
        std::fs::read_to_string(scratch.ws().join("out.txt")).expect("the escalated write landed"),
        "saved\n"
    );

    // The grant was for that call only: the next plain write is read-only again.
    assert_eq!(results[2]["_meta"]["agentd"]["facts"]["mode"], "read-only");
    assert_eq!(results[2]["_meta"]["agentd"]["facts"]["denied"], true);
    assert!(!scratch.ws().join("later.txt").exists());

    let log = scratch.log(&session);
    let asked: Vec<&Value> = log
        .iter()
        .filter(|r| r["type"] == "approval/asked")
        .collect();
    let decided: Vec<&Value> = log
        .iter()
        .filter(|r| r["type"] == "approval/decided")
        .collect();
    assert_eq!((asked.len(), decided.len()), (1, 1));
    assert_eq!(
        asked[0]["reason"],
        format!("escalate sandbox to workspace-write: {JUSTIFICATION}")
    );
    assert_eq!(asked[0]["id"], decided[0]["id"]);
    assert_eq!(decided[0]["outcome"], "allowed-once");
}

#[test]
fn a_rejected_escalation_runs_nothing_and_says_so() {
    let scratch = Scratch::new("escalate-reject");
    let (client, _, results) = run(&scratch, "workspace-write", Permission::Reject, &[]);
    assert_eq!(client.permission_requests.len(), 1);
    assert_eq!(results[1]["status"], "failed");
    assert_eq!(
        text(&results[1]),
        "the user rejected escalating this command to \"workspace-write\""
    );
    assert!(!scratch.ws().join("out.txt").exists(), "nothing ran");
}

#[test]
fn a_cancelled_or_unknown_answer_runs_nothing() {
    for (tag, answer, expected) in [
        (
            "escalate-cancel",
            Permission::Cancel,
            "approval for escalating to \"workspace-write\" was cancelled",
        ),
        (
            "escalate-unknown",
            Permission::Option("allow-forever".into()),
            "the user rejected escalating this command to \"workspace-write\"",
        ),
    ] {
        let scratch = Scratch::new(tag);
        let (_, _, results) = run(&scratch, "workspace-write", answer, &[]);
        assert_eq!(text(&results[1]), expected, "{tag}");
        assert!(!scratch.ws().join("out.txt").exists(), "{tag}: nothing ran");
    }
}

#[test]
fn a_request_that_does_not_widen_fails_without_asking_anyone() {
    let scratch = Scratch::new("escalate-narrow");
    let script = scratch.script(
        r#"
[[turn]]
[[turn.tool_calls]]
name = "bash"
arguments = { command = "echo x > x.txt", sandbox_permissions = "workspace-write", justification = "write x" }

[[turn]]
text = "Done."
"#,
    );
    let mut client = AcpClient::start(&scratch, &script, &["--sandbox-mode", "workspace-write"]);
    let session = client.open_session(&scratch.ws());
    let (_, notes) = client.prompt(&session, "write x");
    let results = results(&notes);
    assert_eq!(
        text(&results[0]),
        "sandbox escalation to \"workspace-write\" is not strictly wider than this call's current \"workspace-write\" mode"
    );
    assert!(client.permission_requests.is_empty(), "nobody was asked");
    assert!(!scratch.ws().join("x.txt").exists());
    let log = scratch.log(&session);
    assert!(!log.iter().any(|r| r["type"] == "approval/asked"));
}
