//! Why a model call failed, worded for the person who has to fix it.

use std::path::PathBuf;
use std::time::Duration;

/// A model call or a provider's construction failed.
///
/// Every message says what to do about it; none contains an API key.
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

    /// Nothing arrived for too long.
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

    /// The server could not be reached, or the connection broke.
    #[error("cannot talk to the model server at {url}: {detail}")]
    Connection { url: String, detail: String },

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

    /// The script of the scripted provider cannot be used.
    #[error("cannot use the model script {}: {detail}", path.display())]
    Script { path: PathBuf, detail: String },

    /// A scripted turn that simulates a provider failure.
    #[error("scripted model failure (turn {turn}): {message}")]
    Scripted { turn: usize, message: String },
}
