//! The ACP answerer of the approval seam: a request from one of this connection's sessions
//! becomes `session/request_permission`, attached to the tool call the editor was already shown.
//!
//! The user is offered exactly two options, "Allow once" (`allow-once`, kind `allow_once`) and
//! "Reject" (`reject-once`, kind `reject_once`): grants are one-shot, so nothing "always" is
//! offered. `allow-once` is allowed-once; the client's `cancelled` is cancelled; any other option
//! id is rejected (only an explicit allow allows); a request that fails is unavailable. A
//! request of a session this connection does not serve (also one it closed), or one not tied to a tool call, goes to
//! the next answerer. A cancel of the turn stops the wait (the seam also races it), as the
//! protocol asks: the client answers `cancelled` to pending requests after `session/cancel`.

use std::collections::HashMap;
use std::sync::Mutex;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, ToolCallUpdate, ToolCallUpdateFields,
};
use agent_client_protocol::{Client, Error};

use crate::approval::{Answerer, Outcome, Reply, ReplyFuture, Request};

/// The option id that allows the call, once.
pub const ALLOW_ONCE: &str = "allow-once";
/// The option id that rejects it.
pub const REJECT_ONCE: &str = "reject-once";

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
            let Some(call_id) = &request.call_id else {
                return Reply::Next;
            };
            let Some(cx) = self.connection(&request.agent) else {
                return Reply::Next;
            };
            let ask = permission_request(&request.agent, call_id);
            let outcome = tokio::select! {
                answer = cx.send_request(ask).block_task() => outcome_of(answer),
                () = request.cancel.cancelled() => Outcome::Cancelled,
            };
            Reply::outcome(outcome)
        })
    }
}

/// The `session/request_permission` for the tool call `call_id` of `session_id`.
pub fn permission_request(session_id: &str, call_id: &str) -> RequestPermissionRequest {
    RequestPermissionRequest::new(
        session_id.to_owned(),
        ToolCallUpdate::new(call_id.to_owned(), ToolCallUpdateFields::new()),
        vec![
            PermissionOption::new(ALLOW_ONCE, "Allow once", PermissionOptionKind::AllowOnce),
            PermissionOption::new(REJECT_ONCE, "Reject", PermissionOptionKind::RejectOnce),
        ],
    )
}

/// What the client's answer means.
pub fn outcome_of(answer: Result<RequestPermissionResponse, Error>) -> Outcome {
    match answer {
        Ok(response) => match response.outcome {
            RequestPermissionOutcome::Cancelled => Outcome::Cancelled,
            RequestPermissionOutcome::Selected(selected)
                if &*selected.option_id.0 == ALLOW_ONCE =>
            {
                Outcome::AllowedOnce
            }
            RequestPermissionOutcome::Selected(_) => Outcome::Rejected,
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

    #[test]
    fn the_request_attaches_to_the_streamed_call_and_offers_allow_once_and_reject() {
        let wire = serde_json::to_value(permission_request("s1", "call_1_1")).expect("json");
        assert_eq!(
            wire,
            json!({
                "sessionId": "s1",
                "toolCall": {"toolCallId": "call_1_1"},
                "options": [
                    {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
                    {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"},
                ],
            })
        );
    }

    #[test]
    fn only_allow_once_allows_and_any_other_option_rejects() {
        assert_eq!(outcome_of(selected("allow-once")), Outcome::AllowedOnce);
        assert_eq!(outcome_of(selected("reject-once")), Outcome::Rejected);
        for other in ["allow-always", "Allow once", "allow_once", "", "maybe"] {
            assert_eq!(outcome_of(selected(other)), Outcome::Rejected, "{other:?}");
        }
        assert_eq!(
            outcome_of(Ok(RequestPermissionResponse::new(
                RequestPermissionOutcome::Cancelled
            ))),
            Outcome::Cancelled
        );
        assert_eq!(
            outcome_of(Err(Error::internal_error())),
            Outcome::Unavailable
        );
    }

    #[tokio::test]
    async fn requests_of_other_sessions_or_without_a_call_go_to_the_next_answerer() {
        let answerer = AcpAnswerer::default();
        let request = |call_id: Option<&str>| Request {
            id: "r".into(),
            agent: "not-served".into(),
            tool: "write_file".into(),
            call_id: call_id.map(str::to_owned),
            reason: None,
            cancel: Cancel::never(),
        };
        let foreign = request(Some("c"));
        assert_eq!(within(answerer.answer(&foreign)).await, Reply::Next);
        let no_call = request(None);
        assert_eq!(within(answerer.answer(&no_call)).await, Reply::Next);
    }
}
