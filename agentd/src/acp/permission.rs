//! The ACP answerer of the approval seam: a request from one of this connection's sessions
//! becomes `session/request_permission`, attached to the tool call the editor was already shown.
//!
//! The request stands on its own: its `toolCall` carries the call's title, kind and arguments,
//! status `pending`, and as content the line a person reads first (see [`crate::approval::Question`]);
//! for a file tool's write, also the change it will make as an ACP `diff` (path, `oldText`
//! absent for a new file, `newText`) and the file as its `locations`, with the first line it
//! changes.
//! The options are "Allow once" (`allow-once`, kind `allow_once`) and "Reject" (`reject-once`,
//! kind `reject_once`), and, when the request has a scope, "Always allow …" (`allow-always`,
//! kind `allow_always`) and "Always reject …" (`reject-always`, kind `reject_always`) naming it.
//! `allow-once` is allowed-once, `allow-always` allowed-always (only when offered), and
//! `reject-always` rejected-always (only when offered); the client's `cancelled` is cancelled;
//! any other option id is rejected (only an explicit allow allows); a request that fails is
//! unavailable. A
//! request of a session this connection does not serve (also one it closed), or one not tied to a tool call, goes to
//! the next answerer. A cancel of the turn stops the wait (the seam also races it), as the
//! protocol asks: the client answers `cancelled` to pending requests after `session/cancel`.

use std::collections::HashMap;
use std::sync::Mutex;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ContentBlock, PermissionOption, PermissionOptionKind, RequestPermissionOutcome,
    RequestPermissionRequest, RequestPermissionResponse, ToolCallContent, ToolCallStatus,
    ToolCallUpdate, ToolCallUpdateFields,
};
use agent_client_protocol::{Client, Error};

use crate::approval::{Answerer, Ask, Outcome, Reply, ReplyFuture, Request};

/// The option id that allows the call, once.
pub const ALLOW_ONCE: &str = "allow-once";
/// The option id that rejects it.
pub const REJECT_ONCE: &str = "reject-once";
/// The option id that allows it and every later request of its scope in the session.
pub const ALLOW_ALWAYS: &str = "allow-always";
/// The option id that rejects it and every later request of its scope in the session.
pub const REJECT_ALWAYS: &str = "reject-always";

/// Asks the editor of the sessions it serves.
#[derive(Default)]
pub struct AcpAnswerer {
    /// The sessions served, each with the connection of its editor.
    owned: Mutex<HashMap<String, ConnectionTo<Client>>>,
}

impl std::fmt::Debug for AcpAnswerer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sessions: Vec<String> = self
            .owned
            .lock()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        f.debug_struct("AcpAnswerer")
            .field("sessions", &sessions)
            .finish()
    }
}

impl AcpAnswerer {
    /// From now on, requests of `session_id` are asked of the editor behind `cx`.
    pub fn serve(&self, session_id: &str, cx: ConnectionTo<Client>) {
        if let Ok(mut owned) = self.owned.lock() {
            owned.insert(session_id.to_owned(), cx);
        }
    }

    /// Requests of `session_id` are no longer asked (the session was closed): they go to the
    /// next answerer.
    pub fn unserve(&self, session_id: &str) {
        if let Ok(mut owned) = self.owned.lock() {
            owned.remove(session_id);
        }
    }

    fn connection(&self, session_id: &str) -> Option<ConnectionTo<Client>> {
        self.owned.lock().ok()?.get(session_id).cloned()
    }
}

impl Answerer for AcpAnswerer {
    fn answer<'a>(&'a self, request: &'a Request) -> ReplyFuture<'a> {
        Box::pin(async move {
            let Some(call_id) = &request.ask.call_id else {
                return Reply::Next;
            };
            let Some(cx) = self.connection(&request.agent) else {
                return Reply::Next;
            };
            let ask = permission_request(&request.agent, call_id, &request.ask);
            let always = request.ask.scope.is_some();
            let outcome = tokio::select! {
                answer = cx.send_request(ask).block_task() => outcome_of(answer, always),
                () = request.cancel.cancelled() => Outcome::Cancelled,
            };
            Reply::outcome(outcome)
        })
    }
}

/// The `session/request_permission` for the tool call `call_id` of `session_id`, asking `ask`.
pub fn permission_request(session_id: &str, call_id: &str, ask: &Ask) -> RequestPermissionRequest {
    let question = &ask.question;
    let mut content = vec![ToolCallContent::from(ContentBlock::from(
        question.text.clone(),
    ))];
    content.extend(question.diff.as_ref().map(super::shown::diff_content));
    let mut fields = ToolCallUpdateFields::new()
        .title(question.title.clone())
        .kind(super::updates::tool_kind(&question.kind))
        .status(ToolCallStatus::Pending)
        .raw_input(question.input.clone())
        .content(content);
    if let Some(diff) = &question.diff {
        let path = serde_json::json!({ "path": diff.path() });
        fields = fields.locations(super::shown::locations(&path, Some(diff)));
    }
    let mut options = vec![PermissionOption::new(
        ALLOW_ONCE,
        "Allow once",
        PermissionOptionKind::AllowOnce,
    )];
    if let Some(scope) = &ask.scope {
        options.push(PermissionOption::new(
            ALLOW_ALWAYS,
            format!("Always allow {} in this session", scope.name()),
            PermissionOptionKind::AllowAlways,
        ));
    }
    options.push(PermissionOption::new(
        REJECT_ONCE,
        "Reject",
        PermissionOptionKind::RejectOnce,
    ));
    if let Some(scope) = &ask.scope {
        options.push(PermissionOption::new(
            REJECT_ALWAYS,
            format!("Always reject {} in this session", scope.name()),
            PermissionOptionKind::RejectAlways,
        ));
    }
    RequestPermissionRequest::new(
        session_id.to_owned(),
        ToolCallUpdate::new(call_id.to_owned(), fields),
        options,
    )
}

/// What the client's answer means; the "always" options count only when they were offered
/// (`always`).
pub fn outcome_of(answer: Result<RequestPermissionResponse, Error>, always: bool) -> Outcome {
    match answer {
        Ok(response) => match response.outcome {
            RequestPermissionOutcome::Cancelled => Outcome::Cancelled,
            RequestPermissionOutcome::Selected(selected) => match &*selected.option_id.0 {
                ALLOW_ONCE => Outcome::AllowedOnce,
                ALLOW_ALWAYS if always => Outcome::AllowedAlways,
                REJECT_ALWAYS if always => Outcome::RejectedAlways,
                _ => Outcome::Rejected,
            },
            _ => Outcome::Unavailable,
        },
        Err(e) => {
            eprintln!("agentd: the permission request failed: {e}");
            Outcome::Unavailable
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cancel::Cancel;
    use crate::test_support::within;
    use agent_client_protocol::v1::schema::SelectedPermissionOutcome;
    use serde_json::json;

    fn selected(option: &str) -> Result<RequestPermissionResponse, Error> {
        Ok(RequestPermissionResponse::new(
            RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(option.to_owned())),
        ))
    }

    fn escalation_ask() -> Ask {
        Ask {
            tool: "bash".into(),
            call_id: Some("call_1_1".into()),
            reason: Some("escalate sandbox to workspace-write: needs node_modules".into()),
            question: crate::approval::Question {
                title: "npm install (with workspace-write)".into(),
                kind: "execute".into(),
                input: json!({"command": "npm install", "sandbox_permissions": "workspace-write"}),
                text: "Run `npm install` with workspace-write (now read-only): needs node_modules"
                    .into(),
                diff: None,
            },
            scope: Some(crate::approval::Scope::command(
                "bash",
                "npm install",
                Some(confine_protocol::Mode::WorkspaceWrite),
            )),
        }
    }

    #[test]
    fn the_request_stands_alone_and_offers_always_for_its_scope() {
        let wire = serde_json::to_value(permission_request("s1", "call_1_1", &escalation_ask()))
            .expect("json");
        assert_eq!(
            wire,
            json!({
                "sessionId": "s1",
                "toolCall": {
                    "toolCallId": "call_1_1",
                    "title": "npm install (with workspace-write)",
                    "kind": "execute",
                    "status": "pending",
                    "rawInput": {"command": "npm install", "sandbox_permissions": "workspace-write"},
                    "content": [{"type": "content", "content": {
                        "type": "text",
                        "text": "Run `npm install` with workspace-write (now read-only): needs node_modules",
                    }}],
                },
                "options": [
                    {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
                    {"optionId": "allow-always", "kind": "allow_always",
                     "name": "Always allow `npm install` with workspace-write in this session"},
                    {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"},
                    {"optionId": "reject-always", "kind": "reject_always",
                     "name": "Always reject `npm install` with workspace-write in this session"},
                ],
            })
        );
        let once_only = Ask {
            scope: None,
            ..escalation_ask()
        };
        let wire = serde_json::to_value(permission_request("s1", "c", &once_only)).expect("json");
        assert_eq!(
            wire["options"],
            json!([
                {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
                {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"},
            ])
        );
    }

    #[test]
    fn only_an_offered_allow_allows_and_any_other_option_rejects() {
        assert_eq!(
            outcome_of(selected("allow-once"), false),
            Outcome::AllowedOnce
        );
        assert_eq!(
            outcome_of(selected("reject-once"), false),
            Outcome::Rejected
        );
        assert_eq!(
            outcome_of(selected("allow-always"), true),
            Outcome::AllowedAlways
        );
        assert_eq!(
            outcome_of(selected("reject-always"), true),
            Outcome::RejectedAlways
        );
        assert_eq!(
            outcome_of(selected("allow-always"), false),
            Outcome::Rejected,
            "an always that was not offered allows nothing"
        );
        assert_eq!(
            outcome_of(selected("reject-always"), false),
            Outcome::Rejected
        );
        for other in ["Allow once", "allow_once", "allow_always", "", "maybe"] {
            assert_eq!(
                outcome_of(selected(other), true),
                Outcome::Rejected,
                "{other:?}"
            );
        }
        assert_eq!(
            outcome_of(
                Ok(RequestPermissionResponse::new(
                    RequestPermissionOutcome::Cancelled
                )),
                true
            ),
            Outcome::Cancelled
        );
        assert_eq!(
            outcome_of(Err(Error::internal_error()), true),
            Outcome::Unavailable
        );
    }

    #[tokio::test]
    async fn requests_of_other_sessions_or_without_a_call_go_to_the_next_answerer() {
        let answerer = AcpAnswerer::default();
        let request = |call_id: Option<&str>| Request {
            agent: "not-served".into(),
            ask: Ask {
                call_id: call_id.map(str::to_owned),
                ..escalation_ask()
            },
            cancel: Cancel::never(),
        };
        let foreign = request(Some("c"));
        assert_eq!(within(answerer.answer(&foreign)).await, Reply::Next);
        let no_call = request(None);
        assert_eq!(within(answerer.answer(&no_call)).await, Reply::Next);
    }

    #[test]
    fn a_file_tools_request_carries_the_change_and_its_location() {
        let diff = crate::session::LoggedDiff::of(
            std::path::Path::new("/srv/ws/notes.txt"),
            crate::session::Before::Text("one\ntwo\n".into()),
            "one\n2\n",
        );
        let ask = Ask {
            tool: "edit_file".into(),
            call_id: Some("c".into()),
            reason: None,
            question: crate::approval::Question {
                title: "Edit notes.txt".into(),
                kind: "edit".into(),
                input: json!({"path": "notes.txt"}),
                text: "Edit notes.txt: edit_file is listed in approval.ask_before".into(),
                diff: Some(diff),
            },
            scope: Some(crate::approval::Scope::file(
                "edit_file",
                std::path::Path::new("/srv/ws/notes.txt"),
                None,
            )),
        };
        let wire = serde_json::to_value(permission_request("s1", "c", &ask)).expect("json");
        assert_eq!(
            wire["toolCall"]["content"][1],
            json!({"type": "diff", "path": "/srv/ws/notes.txt", "oldText": "one\ntwo\n", "newText": "one\n2\n"})
        );
        assert_eq!(
            wire["toolCall"]["locations"],
            json!([{"path": "/srv/ws/notes.txt", "line": 2}])
        );
        assert_eq!(
            wire["options"][1]["name"],
            "Always allow edit_file on /srv/ws/notes.txt in this session"
        );
        // Without a change, neither.
        let plain = Ask {
            question: crate::approval::Question {
                diff: None,
                ..ask.question.clone()
            },
            ..ask
        };
        let wire = serde_json::to_value(permission_request("s1", "c", &plain)).expect("json");
        assert_eq!(
            wire["toolCall"]["content"].as_array().map(Vec::len),
            Some(1)
        );
        assert!(wire["toolCall"].get("locations").is_none());
    }
}
