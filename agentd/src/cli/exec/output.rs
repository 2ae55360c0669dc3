//! What `agentd exec` prints of one turn. For a person: the agent's answer on stdout as it
//! streams, and on stderr a line per finished tool call, per permission request and for an
//! ending other than `end_turn`. With `--json`: stdout is NDJSON, the params of every
//! `session/update` as they came, a line per permission request with the answer given, and last
//! the stop reason or the error; the lines for a person on stderr stay.
//!
//! Everything printed goes through [`terminal`]: the model's text and a command's output may
//! hold sequences a terminal would obey.

use std::collections::HashMap;
use std::io::Write;

use agent_client_protocol::Error;
use agent_client_protocol::v1::schema::{
    ContentBlock, RequestPermissionRequest, SessionNotification, SessionUpdate, StopReason,
    ToolCallStatus,
};
use serde_json::{Value, json};

use super::approve::Decision;
use crate::acp::{ENFORCEMENT_NOTICE, is_model_error, is_notice, notice_kind};
use crate::terminal;

/// A tool call as it was announced, for its line and for a permission request about it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Announced {
    pub title: String,
    pub input: Value,
}

/// The two streams and what has been shown on them.
pub struct Output {
    json: bool,
    stdout: Box<dyn Write + Send>,
    stderr: Box<dyn Write + Send>,
    /// Whether the answer on stdout stopped mid-line (a person's output only).
    mid_line: bool,
    calls: HashMap<String, Announced>,
}

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Output")
            .field("json", &self.json)
            .field("mid_line", &self.mid_line)
            .finish_non_exhaustive()
    }
}

impl Output {
    /// Output on these streams, NDJSON on stdout when `json`.
    pub fn new(json: bool, stdout: Box<dyn Write + Send>, stderr: Box<dyn Write + Send>) -> Output {
        Output {
            json,
            stdout,
            stderr,
            mid_line: false,
            calls: HashMap::new(),
        }
    }

    /// The call `id` as it was announced (its title updated since), if it was.
    pub fn announced(&self, id: &str) -> Option<&Announced> {
        self.calls.get(id)
    }

    /// Shows one `session/update`.
    pub fn update(&mut self, note: &SessionNotification) {
        if self.json {
            self.json_line(note);
        }
        match &note.update {
            // What the sandbox does not enforce: told only to the client, so said here, on
            // stderr, beside the calls.
            SessionUpdate::AgentMessageChunk(chunk)
                if notice_kind(chunk) == Some(ENFORCEMENT_NOTICE) =>
            {
                if let ContentBlock::Text(text) = &chunk.content {
                    for line in text.text.lines() {
                        self.person(&format!("agentd: {line}"));
                    }
                }
            }
            SessionUpdate::AgentMessageChunk(chunk) if !self.json => {
                // A model failure is shown to an editor as the agent's text; here, the
                // prompt's error on stderr says it, once. agentd's other notices are not the
                // answer: the agent wrote them on stderr as it told them.
                if let ContentBlock::Text(text) = &chunk.content
                    && !text.text.is_empty()
                    && !is_model_error(chunk)
                    && !is_notice(chunk)
                {
                    let _ = self
                        .stdout
                        .write_all(terminal::visible(&text.text).as_bytes());
                    let _ = self.stdout.flush();
                    self.mid_line = !text.text.ends_with('\n');
                }
            }
            SessionUpdate::ToolCall(call) => {
                let announced = Announced {
                    title: call.title.clone(),
                    input: call.raw_input.clone().unwrap_or(Value::Null),
                };
                self.calls
                    .insert(call.tool_call_id.0.to_string(), announced);
                if let Some(status) = final_status(call.status) {
                    self.person(&format!("tool: {} — {status}", call.title));
                }
            }
            SessionUpdate::ToolCallUpdate(update) => {
                let id = update.tool_call_id.0.to_string();
                let entry = self.calls.entry(id.clone()).or_default();
                if let Some(title) = &update.fields.title {
                    entry.title.clone_from(title);
                }
                if let Some(input) = &update.fields.raw_input {
                    entry.input = input.clone();
                }
                if let Some(status) = update.fields.status.and_then(final_status) {
                    let title = if entry.title.is_empty() {
                        id
                    } else {
                        entry.title.clone()
                    };
                    self.person(&format!("tool: {title} — {status}"));
                }
            }
            _ => {}
        }
    }

    /// Shows a permission request and the answer the policy gave it; `about` is the call it is
    /// about and `policy` the flag that decided.
    pub fn permission(
        &mut self,
        request: &RequestPermissionRequest,
        about: &Announced,
        decision: &Decision,
        policy: &str,
    ) {
        if self.json {
            self.json_line(&json!({
                "permission": {"request": request, "response": decision.response}
            }));
        }
        // The line the request gives a person to read first; else the call's title.
        let line = serde_json::to_value(&request.tool_call)
            .ok()
            .and_then(|call| {
                call.get("content")?
                    .get(0)?
                    .get("content")?
                    .get("text")?
                    .as_str()
                    .map(str::to_owned)
            });
        let what = match line {
            Some(line) => line,
            None if about.title.is_empty() => request.tool_call.tool_call_id.0.to_string(),
            None => about.title.clone(),
        };
        self.person(&format!(
            "permission: {what} — {} by --approve {policy}",
            decision.said
        ));
    }

    /// Ends the turn with its stop reason.
    pub fn stopped(&mut self, stop: StopReason) {
        self.end_answer();
        if self.json {
            self.json_line(&json!({ "stopReason": stop }));
        }
        if let Some(why) = stop_words(stop) {
            self.person(&format!("agentd: the turn ended: {why}"));
        }
    }

    /// Ends with an error: the prompt's, or one before any prompt (`what` says which step).
    pub fn failed(&mut self, what: &str, error: &Error) {
        self.end_answer();
        if self.json {
            self.json_line(&json!({ "error": error }));
        }
        let mut line = format!("agentd: {what}: {}", error.message);
        match &error.data {
            None => {}
            Some(Value::String(data)) => line.push_str(&format!(": {data}")),
            Some(data) => line.push_str(&format!(" {data}")),
        }
        self.person(&line);
    }

    /// Ends with a failure of agentd's own, which no JSON-RPC error describes.
    pub fn own_error(&mut self, message: &str) {
        if self.json {
            self.json_line(&json!({ "error": { "message": message } }));
        }
        self.person(&format!("agentd: {message}"));
    }

    /// A line for a person on stderr.
    pub fn note(&mut self, line: &str) {
        self.person(line);
    }

    /// One line for a person on stderr; the answer's line on stdout is ended first, so the two
    /// do not share a line on a terminal.
    fn person(&mut self, line: &str) {
        self.end_answer();
        let _ = writeln!(self.stderr, "{}", terminal::visible(line));
        let _ = self.stderr.flush();
    }

    fn end_answer(&mut self) {
        if self.mid_line {
            let _ = writeln!(self.stdout);
            let _ = self.stdout.flush();
            self.mid_line = false;
        }
    }

    fn json_line<T: serde::Serialize>(&mut self, value: &T) {
        let line = terminal::json_line(value)
            .unwrap_or_else(|e| format!("{{\"error\":{{\"message\":\"unprintable: {e}\"}}}}"));
        let _ = writeln!(self.stdout, "{line}");
        let _ = self.stdout.flush();
    }
}

/// A tool call's status, if it is final.
fn final_status(status: ToolCallStatus) -> Option<&'static str> {
    match status {
        ToolCallStatus::Completed => Some("completed"),
        ToolCallStatus::Failed => Some("failed"),
        _ => None,
    }
}

/// What an ending other than `end_turn` means, for a person.
fn stop_words(stop: StopReason) -> Option<&'static str> {
    match stop {
        StopReason::EndTurn => None,
        StopReason::MaxTokens => {
            Some("max_tokens: the model's answer was cut off at its token limit")
        }
        StopReason::MaxTurnRequests => {
            Some("max_turn_requests: the prompt reached session.max_steps model requests")
        }
        StopReason::Refusal => Some("refusal: the model refused to answer"),
        StopReason::Cancelled => Some("cancelled"),
        _ => Some("with a stop reason agentd does not know"),
    }
}

#[cfg(test)]
#[path = "output_tests.rs"]
mod tests;
