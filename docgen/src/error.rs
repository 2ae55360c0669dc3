//! Why the generator could not produce its files: a bad command line, a page or completion that
//! would not render, or agentd's ACP agent not answering as an editor expects.

use std::path::PathBuf;
use std::time::Duration;

/// A boxed error of agentd's own (its configuration, its ACP options), shown as agentd says it.
type AgentdError = Box<dyn std::error::Error + Send + Sync>;

/// Why a generated file could not be produced.
#[derive(Debug, thiserror::Error)]
pub enum DocgenError {
    /// `--root` without a directory after it.
    #[error("--root needs a directory")]
    RootWithoutDir,
    /// An argument the generator does not take.
    #[error("unknown argument {0}")]
    UnknownArgument(String),
    /// clap_mangen could not render a man page.
    #[error("cannot render {page}: {error}")]
    Render { page: String, error: std::io::Error },
    /// A rendered page or completion script that is not UTF-8.
    #[error("{file}: {error}")]
    NotUtf8 {
        file: String,
        error: std::string::FromUtf8Error,
    },
    /// A scratch file or directory could not be made.
    #[error("cannot {action} {}: {error}", path.display())]
    Scratch {
        action: &'static str,
        path: PathBuf,
        error: std::io::Error,
    },
    /// agentd's configuration or ACP options for the given file would not load.
    #[error("{0}")]
    Agentd(AgentdError),
    /// No runtime to serve agentd's ACP agent on.
    #[error("cannot start a tokio runtime: {0}")]
    Runtime(std::io::Error),
    /// agentd did not answer in time.
    #[error("agentd did not answer within {0:?}")]
    Timeout(Duration),
    /// The in-memory pipe to agentd failed.
    #[error("cannot write to agentd: {0}")]
    WriteToAgentd(std::io::Error),
    /// Reading agentd's answers, or closing the pipe, failed.
    #[error("{0}")]
    Pipe(std::io::Error),
    /// agentd answered with a line that is not JSON.
    #[error("{0}")]
    NotJson(serde_json::Error),
    /// agentd answered a request with an error.
    #[error("agentd refused {method}: {answer}")]
    Refused {
        method: String,
        answer: serde_json::Value,
    },
    /// agentd ended the conversation before answering.
    #[error("agentd stopped before answering {0}")]
    Stopped(String),
    /// The task serving agentd's agent panicked or was cancelled.
    #[error("agentd's serving task failed: {0}")]
    ServingTask(tokio::task::JoinError),
    /// agentd's agent ended with an error.
    #[error("agentd ended with an error: {0}")]
    Ended(AgentdError),
    /// `Mode::ALL` lacks the widest mode, under which `initialize` is documented.
    #[error("Mode::ALL lacks danger-full-access")]
    NoWidestMode,
}
