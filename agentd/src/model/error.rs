//! Why a model call failed, worded for the person who has to fix it, and classified for the
//! client that has to report it (the `data` of the prompt's JSON-RPC error).

use std::path::PathBuf;
use std::time::Duration;

/// A model call or a provider's construction failed.
///
/// Every message says what happened and what to do about it; none contains an API key. Only
/// [`ModelError::Unreachable`] says "could not be reached": every other failure happened on a
/// connection that was made.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// A setting the provider needs is missing.
    #[error(
        "the model is not configured: {missing} {verb} missing from the [model] table of {file}; \
         add it, for example:\n\n{example}",
        missing = .missing.join(" and "),
        verb = if .missing.len() == 1 { "is" } else { "are" },
    )]
    NotConfigured {
        /// The missing keys, e.g. `model.base_url`.
        missing: Vec<&'static str>,
        /// The configuration file, as the message names it.
        file: String,
        /// A copyable `[model]` table.
        example: String,
    },

    /// A setting is present but unusable.
    #[error("the [model] table of {file} is invalid: {detail}")]
    InvalidConfig { file: String, detail: String },

    /// `api_key_env` names a variable that is not set.
    #[error(
        "the API key variable {var} (named by model.api_key_env) is not set or empty; export it \
         with the key, or drop model.api_key_env if the server needs no key"
    )]
    MissingApiKey { var: String },

    /// The server answered with an error status.
    #[error("the model server answered HTTP {status} to {url}: {body}{hint}")]
    Status {
        status: u16,
        url: String,
        /// The server's explanation (its error message, or an excerpt of its body).
        body: String,
        /// What to check, starting with a separator, or empty.
        hint: String,
    },

    /// Nothing arrived for too long on a connection that was made.
    #[error(
        "the model server at {url} sent nothing for {} s while {waiting_for}; it may be \
         overloaded (try again) or the timeout too short (model.timeout_secs)",
        .after.as_secs_f64()
    )]
    Timeout {
        url: String,
        waiting_for: &'static str,
        after: Duration,
    },

    /// No connection to the server could be made (TCP, or TLS on top of it).
    #[error("the model server at {url} could not be reached: {detail}")]
    Unreachable { url: String, detail: String },

    /// A connection was made, but it failed or ended before the answer was complete.
    #[error("the model server at {url} was reached, but {detail}")]
    Interrupted { url: String, detail: String },

    /// The server sent something that is not a chat-completions stream.
    #[error(
        "the model server sent a malformed stream ({detail}); the offending data: {line:?}. Is \
         model.base_url an OpenAI-compatible endpoint?"
    )]
    MalformedStream { detail: String, line: String },

    /// The server reported an error inside the stream.
    #[error("the model server reported an error mid-answer: {message}")]
    Server { message: String },

    /// Every attempt failed with an error worth retrying.
    #[error("the model server still failed after {attempts} attempts; the last error: {last}")]
    RetriesExhausted {
        attempts: u32,
        #[source]
        last: Box<ModelError>,
    },

    /// An attempt after `retries` retried ones failed in a way not worth retrying.
    #[error("{last} (after {retries} failed attempts before it)")]
    AfterRetries {
        retries: u32,
        #[source]
        last: Box<ModelError>,
    },

    /// The script of the scripted provider cannot be used.
    #[error("cannot use the model script {}: {detail}", path.display())]
    Script { path: PathBuf, detail: String },

    /// A scripted turn that simulates a provider failure.
    #[error("scripted model failure (turn {turn}): {message}")]
    Scripted { turn: usize, message: String },
}

/// What kind of failure a [`ModelError`] is, as a client sees it in the prompt's error data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// No connection could be made.
    Unreachable,
    /// A connection was made, then nothing arrived within the timeout.
    Timeout,
    /// The server answered with an error status.
    Http,
    /// The server's answer is not a chat-completions stream.
    Malformed,
    /// The connection failed, or the answer ended, before the answer was complete.
    Interrupted,
    /// The server reported an error inside its answer.
    Server,
    /// The model is not configured, or its configuration cannot be used.
    Config,
    /// The scripted provider simulated a failure.
    Scripted,
}

impl FailureKind {
    /// The kind's name in the error data.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Unreachable => "unreachable",
            FailureKind::Timeout => "timeout",
            FailureKind::Http => "http",
            FailureKind::Malformed => "malformed",
            FailureKind::Interrupted => "interrupted",
            FailureKind::Server => "server",
            FailureKind::Config => "config",
            FailureKind::Scripted => "scripted",
        }
    }
}

impl ModelError {
    /// The failure as a client classifies it: the kind of the last attempt's failure.
    pub fn kind(&self) -> FailureKind {
        match self {
            ModelError::NotConfigured { .. }
            | ModelError::InvalidConfig { .. }
            | ModelError::MissingApiKey { .. }
            | ModelError::Script { .. } => FailureKind::Config,
            ModelError::Status { .. } => FailureKind::Http,
            ModelError::Timeout { .. } => FailureKind::Timeout,
            ModelError::Unreachable { .. } => FailureKind::Unreachable,
            ModelError::Interrupted { .. } => FailureKind::Interrupted,
            ModelError::MalformedStream { .. } => FailureKind::Malformed,
            ModelError::Server { .. } => FailureKind::Server,
            ModelError::RetriesExhausted { last, .. } | ModelError::AfterRetries { last, .. } => {
                last.kind()
            }
            ModelError::Scripted { .. } => FailureKind::Scripted,
        }
    }

    /// The HTTP status of the last attempt, when the server answered with an error status.
    pub fn status(&self) -> Option<u16> {
        match self {
            ModelError::Status { status, .. } => Some(*status),
            ModelError::RetriesExhausted { last, .. } | ModelError::AfterRetries { last, .. } => {
                last.status()
            }
            _ => None,
        }
    }

    /// How many attempts were retried before the one that failed last.
    pub fn retries(&self) -> u32 {
        match self {
            ModelError::RetriesExhausted { attempts, .. } => attempts.saturating_sub(1),
            ModelError::AfterRetries { retries, .. } => *retries,
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16) -> ModelError {
        ModelError::Status {
            status: code,
            url: "http://x/v1/chat/completions".into(),
            body: "nope".into(),
            hint: String::new(),
        }
    }

    #[test]
    fn retried_failures_report_the_last_kind_status_and_the_retries() {
        let exhausted = ModelError::RetriesExhausted {
            attempts: 4,
            last: Box::new(status(503)),
        };
        assert_eq!(
            (exhausted.kind(), exhausted.status(), exhausted.retries()),
            (FailureKind::Http, Some(503), 3)
        );
        let after = ModelError::AfterRetries {
            retries: 2,
            last: Box::new(ModelError::MalformedStream {
                detail: "x".into(),
                line: "y".into(),
            }),
        };
        assert_eq!(
            (after.kind(), after.status(), after.retries()),
            (FailureKind::Malformed, None, 2)
        );
        assert!(
            after.to_string().contains("after 2 failed attempts"),
            "{after}"
        );
    }

    #[test]
    fn only_a_connection_never_made_could_not_be_reached() {
        let unreachable = ModelError::Unreachable {
            url: "http://x".into(),
            detail: "refused".into(),
        };
        assert!(unreachable.to_string().contains("could not be reached"));
        for answered in [
            status(500),
            ModelError::Interrupted {
                url: "http://x".into(),
                detail: "reset".into(),
            },
            ModelError::Timeout {
                url: "http://x".into(),
                waiting_for: "waiting for the answer to start",
                after: Duration::from_secs(1),
            },
        ] {
            assert!(
                !answered.to_string().contains("could not be reached"),
                "{answered}"
            );
        }
    }
}
