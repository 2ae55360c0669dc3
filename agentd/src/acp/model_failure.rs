//! A model failure as a prompt turn reports it: the JSON-RPC error the prompt is answered with
//! and the `model/error` record it leaves in the log.

use agent_client_protocol::{Error, ErrorCode};

use super::models::Unusable;
use crate::model::{FailureKind, ModelError};
use crate::session::Event;

/// A model failure as the prompt's error reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ModelFailure {
    message: String,
    kind: FailureKind,
    status: Option<u16>,
    retries: u32,
}

impl ModelFailure {
    pub(super) fn of(error: &ModelError) -> ModelFailure {
        ModelFailure {
            message: error.to_string(),
            kind: error.kind(),
            status: error.status(),
            retries: error.retries(),
        }
    }

    /// ACP's internal error, with the failure's reason as the message and its facts as data.
    pub(super) fn into_error(self) -> Error {
        Error::new(ErrorCode::INTERNAL_ERROR, self.message).data(serde_json::json!({
            "kind": self.kind.as_str(),
            "status": self.status,
            "retries": self.retries,
        }))
    }

    /// The record of the failure.
    pub(super) fn event(&self, turn: u64, step: u64) -> Event {
        Event::ModelError {
            turn,
            step,
            message: self.message.clone(),
            kind: Some(self.kind.as_str().to_owned()),
            status: self.status,
            retries: Some(self.retries),
        }
    }

    /// The failure of a turn whose model could not be built: a configuration error.
    pub(super) fn unusable(why: &Unusable) -> ModelFailure {
        ModelFailure {
            message: why.to_string(),
            kind: FailureKind::Config,
            status: None,
            retries: 0,
        }
    }
}
