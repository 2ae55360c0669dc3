//! Tests of what `agentd exec` prints, on buffers.

use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema::{
    ContentChunk, PermissionOption, PermissionOptionKind, ToolCall, ToolCallContent,
    ToolCallUpdate, ToolCallUpdateFields,
};
use serde_json::json;

use super::*;
use crate::cli::exec::approve::{Approve, decide};

/// A stream the test reads afterwards.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("buffer").extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Shared {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().expect("buffer").clone()).expect("utf-8")
    }
}

fn output(json: bool) -> (Output, Shared, Shared) {
    let (out, err) = (Shared::default(), Shared::default());
    (
        Output::new(json, Box::new(out.clone()), Box::new(err.clone())),
        out,
        err,
    )
}

fn note(update: SessionUpdate) -> SessionNotification {
    SessionNotification::new("s", update)
}

fn text(t: &str) -> SessionNotification {
    note(SessionUpdate::AgentMessageChunk(ContentChunk::new(
        ContentBlock::from(t.to_owned()),
    )))
}

fn call(id: &str, title: &str, input: Value) -> SessionNotification {
    note(SessionUpdate::ToolCall(
        ToolCall::new(id.to_owned(), title.to_owned())
            .status(ToolCallStatus::InProgress)
            .raw_input(input),
    ))
}

fn finished(id: &str, status: ToolCallStatus) -> SessionNotification {
    note(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        id.to_owned(),
        ToolCallUpdateFields::new().status(status),
    )))
}

#[test]
fn the_answer_streams_to_stdout_and_each_finished_call_is_a_line_on_stderr() {
    let (mut output, out, err) = output(false);
    output.update(&text("Let me "));
    output.update(&text("look."));
    output.update(&call("c1", "cat a.txt", json!({"command": "cat a.txt"})));
    output.update(&note(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        "c1".to_owned(),
        ToolCallUpdateFields::new().content(vec![ContentBlock::from("partial".to_owned()).into()]),
    ))));
    output.update(&finished("c1", ToolCallStatus::Completed));
    output.update(&call("c2", "rm -rf x", json!({})));
    output.update(&finished("c2", ToolCallStatus::Failed));
    output.update(&text("Done."));
    output.stopped(StopReason::EndTurn);
    assert_eq!(out.text(), "Let me look.\nDone.\n");
    assert_eq!(
        err.text(),
        "tool: cat a.txt — completed\ntool: rm -rf x — failed\n"
    );
}

#[test]
fn what_a_terminal_would_obey_is_shown_as_text() {
    let (mut output, out, err) = output(false);
    output.update(&text("hi\x1b]52;c;eA==\x07\n"));
    output.update(&call("c1", "echo \x1b[2J", json!({})));
    output.update(&finished("c1", ToolCallStatus::Completed));
    output.stopped(StopReason::EndTurn);
    assert_eq!(out.text(), "hi\\x1b]52;c;eA==\\x07\n");
    assert_eq!(err.text(), "tool: echo \\x1b[2J — completed\n");
}

#[test]
fn json_lines_carry_every_update_the_permission_and_the_end() {
    let (mut output, out, err) = output(true);
    let input = json!({"command": "touch /x", "sandbox_permissions": "danger-full-access", "justification": "needed"});
    output.update(&call("c1", "touch /x", input.clone()));
    let request = RequestPermissionRequest::new(
        "s",
        ToolCallUpdate::new(
            "c1",
            ToolCallUpdateFields::new().content(vec![ToolCallContent::from(ContentBlock::from(
                "Run `touch /x` with danger-full-access (now read-only): needed",
            ))]),
        ),
        vec![
            PermissionOption::new("allow-once", "Allow once", PermissionOptionKind::AllowOnce),
            PermissionOption::new("reject-once", "Reject", PermissionOptionKind::RejectOnce),
        ],
    );
    let about = output.announced("c1").cloned().expect("announced");
    assert_eq!(about.input, input);
    let decision = decide(Approve::None, &request, &about.input);
    output.permission(&request, &about, &decision, "none");
    output.update(&text("No."));
    output.stopped(StopReason::Refusal);
    let lines: Vec<Value> = out
        .text()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 4, "{lines:#?}");
    assert_eq!(lines[0]["update"]["sessionUpdate"], "tool_call");
    assert_eq!(
        lines[1]["permission"]["request"]["toolCall"]["toolCallId"],
        "c1"
    );
    assert_eq!(
        lines[1]["permission"]["response"],
        json!({"outcome": {"outcome": "selected", "optionId": "reject-once"}})
    );
    assert_eq!(lines[2]["update"]["content"]["text"], "No.");
    assert_eq!(lines[3], json!({"stopReason": "refusal"}));
    assert_eq!(
        err.text(),
        "permission: Run `touch /x` with danger-full-access (now read-only): needed — rejected \
         by --approve none\nagentd: the turn ended: refusal: the model refused to answer\n"
    );
}

#[test]
fn a_request_without_a_line_for_a_person_is_named_by_its_calls_title() {
    let input = json!({"command": "touch /x", "sandbox_permissions": "danger-full-access"});
    let (mut plain, _, err) = output(false);
    plain.update(&call("c1", "touch /x", input.clone()));
    let bare = RequestPermissionRequest::new(
        "s",
        ToolCallUpdate::new("c1", ToolCallUpdateFields::new()),
        vec![],
    );
    let about = plain.announced("c1").cloned().expect("announced");
    let decision = decide(Approve::None, &bare, &about.input);
    plain.permission(&bare, &about, &decision, "none");
    assert!(
        err.text().starts_with("permission: touch /x — cancelled"),
        "{}",
        err.text()
    );
}

#[test]
fn an_error_ends_the_json_and_is_said_on_stderr() {
    let (mut shown, out, err) = output(true);
    let error =
        Error::internal_error().data(json!({"kind": "status", "status": 500, "retries": 3}));
    shown.failed("the prompt failed", &error);
    let last: Value = serde_json::from_str(out.text().trim_end()).expect("json");
    assert_eq!(last["error"]["code"], -32603);
    assert_eq!(last["error"]["data"]["status"], 500);
    assert_eq!(
        err.text(),
        "agentd: the prompt failed: Internal error {\"kind\":\"status\",\"status\":500,\"retries\":3}\n"
    );
    let (mut shown, out, err) = output(true);
    shown.own_error("no model");
    assert_eq!(out.text(), "{\"error\":{\"message\":\"no model\"}}\n");
    assert_eq!(err.text(), "agentd: no model\n");
}

#[test]
fn a_model_failure_is_left_out_of_stdout_by_its_mark_and_the_models_own_words_never_are() {
    let (mut output, out, _) = output(false);
    let failure = crate::session::fold::model_error_text("the server answered 500");
    // The model's own text, made to read as a failure: printed, since only agentd marks one.
    output.update(&text(&failure));
    output.update(&note(crate::acp::model_error(&failure)));
    assert_eq!(out.text(), failure);
}

#[test]
fn agentds_notices_are_left_out_of_the_answer_on_stdout_and_look_alike_text_is_not() {
    let (mut output, out, err) = output(false);
    let told = "The sandbox (bwrap) does not enforce everything in this session:\n";
    output.update(&note(crate::acp::notice("enforcement", "e-1", told)));
    assert_eq!(out.text(), "");
    assert_eq!(
        err.text(),
        format!("agentd: {told}"),
        "said beside the calls"
    );
    output.update(&note(crate::acp::notice(
        "mcp",
        "mcp",
        "The MCP server x …\n",
    )));
    assert_eq!(out.text(), "", "the agent told it on stderr");
    assert_eq!(err.text(), format!("agentd: {told}"));
    // The control: the same words as the agent's own text are part of the answer.
    output.update(&text(told));
    assert_eq!(out.text(), told);
}
