//! The JSON-RPC errors the ACP handlers answer with.

use agent_client_protocol::Error;

/// An ACP error with a message the client shows.
pub(super) fn error(code: i32, message: impl Into<String>) -> Error {
    Error::new(code, message.into())
}

/// `-32002`: the session id is unknown.
pub(super) fn not_found(id: &str) -> Error {
    error(-32002, format!("session {id} not found"))
}
