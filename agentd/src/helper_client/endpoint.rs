//! How agentd reaches confine-helper, and why reaching it or keeping the connection can fail:
//! the values every other file of the client names, kept apart from the code that uses them.

use std::path::PathBuf;

use confine_protocol::{FILE_IO_PROGRAM, FrameError, Mismatch};

/// How to reach confine-helper.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HelperEndpoint {
    /// Spawn this binary as `confine-helper --fd 0` with one end of a private socketpair as its stdin.
    Embedded(PathBuf),
    /// Connect to a helper already serving on this Unix socket (`confine-service`).
    Service(PathBuf),
}

/// Why a request could not be handed to confine-helper. Nothing ran.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot start confine-helper {}: {source}", path.display())]
    StartHelper {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot connect to confine-helper at {}: {source}; {hint}", socket.display())]
    Connect {
        socket: PathBuf,
        #[source]
        source: std::io::Error,
        /// What to do, from the cause: see `connect_hint`.
        hint: String,
    },
    #[error(
        "confine-helper at {helper} did not complete the handshake within {seconds} s and was \
         given up on; check that it is confine-helper and that its messages above show no error"
    )]
    HandshakeTimeout { helper: String, seconds: u64 },
    #[error(transparent)]
    Mismatch(#[from] Mismatch),
    /// The service would not serve this connection, and says why (a cap on its connections,
    /// the user's process limit): its words, shown as they are.
    #[error("{reason}")]
    Refused { reason: String },
    #[error(
        "confine-helper sent an invalid greeting: {0}; install matching versions of agentd and \
         confine-helper"
    )]
    BadGreeting(FrameError),
    #[error("the handshake with confine-helper failed: {0}")]
    HandshakeIo(#[source] std::io::Error),
    #[error(
        "confine-helper closed the connection before completing the handshake {attempts} times \
         in a row (last: {last}); its own messages above say why"
    )]
    HelperKeepsDying { attempts: u32, last: String },
    #[error(
        "the request cannot be sent to confine-helper: {0}; the command line and environment \
         together must stay under 1 MiB"
    )]
    RequestTooLarge(FrameError),
    #[error("the connection to confine-helper was lost: {0}")]
    ConnectionLost(#[source] Lost),
    #[error(
        "a ceiling file (--helper-ceiling or helper.ceiling) is only for the confine-helper \
         agentd starts itself; the one serving at {} reads its own ceiling, given with \
         `confine-service --socket {} --ceiling PATH`",
        socket.display(),
        socket.display()
    )]
    CeilingForService { socket: PathBuf },
    /// A file read or write that could not be asked: its program is missing, or the request
    /// could not mean what it says.
    #[error(transparent)]
    FileOp(#[from] FileOpError),
}

/// Why a request got no answer on a connection.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Lost {
    /// The connection had ended before the request could be registered: what a lost connection
    /// is called.
    #[error("{0}")]
    Dead(&'static str),
    /// The connection ended with the request in flight: how, as the teardown reports it.
    #[error("{0}")]
    Ended(String),
    /// The request cannot be encoded.
    #[error("{0}")]
    Encode(FrameError),
    /// Nobody will answer: the answer's channel closed.
    #[error("the connection closed before answering")]
    Unanswered,
}

/// Why a confined read or write was not sent to the helper. Nothing ran.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FileOpError {
    #[error(
        "{FILE_IO_PROGRAM}, the program that reads and writes files confined, was not found; \
         looked at: {}. Install it beside confine-helper (the confine-helper package ships it; \
         from a checkout, `cargo build --release -p confine-file-io`), or set AGENTD_FILE_IO or \
         helper.file_io to its path",
        looked_at(looked)
    )]
    NotFound { looked: Vec<PathBuf> },
    #[error(
        "{} (given by {by}) is not an executable regular file; point it at the {FILE_IO_PROGRAM} \
         binary or fix its permissions",
        path.display()
    )]
    NotExecutable { path: PathBuf, by: String },
    #[error(
        "{} is not an absolute path; a file to read or write is named by its absolute path",
        path.display()
    )]
    NotAbsolute { path: PathBuf },
    #[error(
        "the path {} contains a NUL byte, which no file's path can hold",
        path.display()
    )]
    NulByte { path: PathBuf },
}

fn looked_at(looked: &[PathBuf]) -> String {
    if looked.is_empty() {
        return "nowhere (neither agentd's nor the helper's directory is known)".to_owned();
    }
    let places: Vec<String> = looked.iter().map(|p| p.display().to_string()).collect();
    places.join(", ")
}
