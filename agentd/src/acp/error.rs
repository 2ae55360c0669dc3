//! The JSON-RPC errors the ACP handlers answer with: one typed error, [`AcpError`], whose
//! variant decides the SDK's error code, whose text — what went wrong and what to do — is the
//! error's `message`, the one line clients show, and whose values (an id, a path, a mode) are
//! its `data`.

use std::path::PathBuf;

use agent_client_protocol::{Error, ErrorCode};
use confine_protocol::Mode;
use serde_json::json;

use super::config_options::{ConfigOptionError, SANDBOX_MODE};
use super::models::Unusable;
use crate::config::ConfigError;
use crate::profile::CacheDirError;
use crate::session::LogError;

/// Why an ACP request is answered with an error.
#[derive(Debug, thiserror::Error)]
pub(super) enum AcpError {
    /// The session id names no recorded session (also an id agentd would never generate).
    #[error(
        "session {0} not found: no session of that id is recorded in agentd's state directory; \
         session/list lists those that are"
    )]
    SessionNotFound(String),
    /// The session id names no session open on this connection (never opened, or closed).
    #[error(
        "session {0} is not open: open it with session/new, or with session/load if it was \
         recorded (session/list lists those that were)"
    )]
    NotOpen(String),
    /// The session's log does not start with its header.
    #[error(
        "session {0} cannot be loaded: its log does not begin with the session/created record \
         (it was cut or edited); the session cannot be continued"
    )]
    NoHeader(String),
    /// A log could not be created, read or listed.
    #[error("{0}{hint}", hint = full_hint(.0))]
    Log(#[source] LogError),
    /// An event could not be appended to the session's log.
    #[error("cannot write the session log: {0}{hint}", hint = full_hint(.0))]
    LogWrite(#[source] LogError),
    /// `session/prompt` while a turn of the session runs.
    #[error("a prompt is already running in session {0}; cancel it or wait for it to end")]
    PromptRunning(String),
    /// `session/set_config_option` asked for something that is not a switch.
    #[error(transparent)]
    ConfigOption(#[from] ConfigOptionError),
    /// `session/set_config_option` asked for a mode the helper would not run.
    #[error("sandbox-mode cannot be switched to {}: {why}", mode.as_str())]
    ModeRefused { mode: Mode, why: String },
    /// `session/set_config_option` asked for a model whose provider could not be built.
    #[error("{0}; fix that and start agentd again to select it")]
    ModelRefused(Unusable),
    /// The session's temp directory could not be made.
    #[error(
        "cannot make the session's temp directory in {}: {source}; set TMPDIR to a writable \
         directory",
        base.display()
    )]
    SessionTemp {
        base: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The `cwd` of `session/new` is relative.
    #[error(
        "cwd {} is not an absolute path: give the workspace's directory as an absolute path",
        .0.display()
    )]
    CwdNotAbsolute(PathBuf),
    /// The `cwd` of `session/new` cannot be resolved.
    #[error("cwd {} cannot be used: {source}; give an existing directory", path.display())]
    CwdUnusable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The `cwd` of `session/new` is not a directory.
    #[error("cwd {} is not a directory: give the workspace's directory", .0.display())]
    CwdNotDirectory(PathBuf),
    /// A cache preset's directory could not be created when the session started.
    #[error(transparent)]
    CacheDir(#[from] CacheDirError),
    /// The workspace's project file cannot be read or says what it may not; no prompt runs
    /// until it is fixed.
    #[error(transparent)]
    Project(ConfigError),
}

/// What to do when the session log's file system is full.
fn full_hint(error: &LogError) -> &'static str {
    match error {
        LogError::Io { source, .. } if source.kind() == std::io::ErrorKind::StorageFull => {
            "; free space on its file system, then try again (the log keeps what was recorded \
             before)"
        }
        _ => "",
    }
}

impl AcpError {
    /// An error from a session's log: an unknown or impossible id is a session not found.
    pub(super) fn of_log(error: LogError) -> AcpError {
        match error {
            LogError::NotFound(id) | LogError::BadId(id) => AcpError::SessionNotFound(id),
            other => AcpError::Log(other),
        }
    }
}

impl AcpError {
    /// The SDK's error code: `-32002` (resource not found) for an unknown session or one not
    /// open, `-32602`
    /// (invalid params) for a request that cannot be done as asked, `-32603` (internal error)
    /// for a failure of agentd's own.
    fn code(&self) -> ErrorCode {
        match self {
            AcpError::SessionNotFound(_) | AcpError::NotOpen(_) => ErrorCode::RESOURCE_NOT_FOUND,
            AcpError::PromptRunning(_)
            | AcpError::ConfigOption(_)
            | AcpError::ModeRefused { .. }
            | AcpError::ModelRefused(_)
            | AcpError::CwdNotAbsolute(_)
            | AcpError::CwdUnusable { .. }
            | AcpError::CwdNotDirectory(_) => ErrorCode::INVALID_PARAMS,
            AcpError::NoHeader(_)
            | AcpError::Log(_)
            | AcpError::LogWrite(_)
            | AcpError::CacheDir(_)
            | AcpError::SessionTemp { .. }
            | AcpError::Project(_) => ErrorCode::INTERNAL_ERROR,
        }
    }

    /// The values the message names, for a client that acts on them: the session's id (as
    /// ACP's own `session_not_found` gives it), the `cwd` refused, the mode refused.
    fn data(&self) -> Option<serde_json::Value> {
        match self {
            AcpError::SessionNotFound(id) | AcpError::NotOpen(id) | AcpError::NoHeader(id) => {
                Some(json!({ "sessionId": id }))
            }
            AcpError::CwdNotAbsolute(cwd)
            | AcpError::CwdUnusable { path: cwd, .. }
            | AcpError::CwdNotDirectory(cwd) => Some(json!({ "cwd": cwd })),
            AcpError::ModeRefused { mode, .. } => {
                Some(json!({ "configId": SANDBOX_MODE, "value": mode.as_str() }))
            }
            _ => None,
        }
    }
}

impl From<AcpError> for Error {
    /// The SDK's error: the code of [`AcpError::code`], the error's sentence as `message`, its
    /// values as `data`.
    fn from(error: AcpError) -> Error {
        let wire = Error::new(error.code(), error.to_string());
        match error.data() {
            Some(data) => wire.data(data),
            None => wire,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_keeps_its_code_and_message() {
        let wire = |error: AcpError| serde_json::to_value(Error::from(error)).expect("json");
        assert_eq!(
            wire(AcpError::SessionNotFound("abc".into())),
            serde_json::json!({
                "code": -32002,
                "message": "session abc not found: no session of that id is recorded in agentd's \
                            state directory; session/list lists those that are",
                "data": {"sessionId": "abc"}
            })
        );
        assert_eq!(
            wire(AcpError::PromptRunning("abc".into())),
            serde_json::json!({
                "code": -32602,
                "message": "a prompt is already running in session abc; cancel it or wait for \
                            it to end"
            })
        );
        assert_eq!(
            wire(AcpError::NoHeader("abc".into()))["code"],
            serde_json::json!(-32603)
        );
        assert_eq!(
            wire(AcpError::CwdNotAbsolute("rel".into())),
            serde_json::json!({
                "code": -32602,
                "message": "cwd rel is not an absolute path: give the workspace's directory as an \
                            absolute path",
                "data": {"cwd": "rel"}
            })
        );
        assert_eq!(
            wire(AcpError::ModeRefused {
                mode: Mode::WorkspaceWrite,
                why: "the ceiling".into()
            }),
            serde_json::json!({
                "code": -32602,
                "message": "sandbox-mode cannot be switched to workspace-write: the ceiling",
                "data": {"configId": "sandbox-mode", "value": "workspace-write"}
            })
        );
        let full = || LogError::Io {
            path: "/state/s.jsonl".into(),
            source: std::io::Error::from(std::io::ErrorKind::StorageFull),
        };
        assert_eq!(
            wire(AcpError::LogWrite(full())),
            serde_json::json!({
                "code": -32603,
                "message": "cannot write the session log: /state/s.jsonl: no storage space; free \
                            space on its file system, then try again (the log keeps what was \
                            recorded before)"
            })
        );
        assert!(
            AcpError::Log(full())
                .to_string()
                .ends_with("try again (the log keeps what was recorded before)")
        );
        assert!(matches!(
            AcpError::of_log(LogError::BadId("../x".into())),
            AcpError::SessionNotFound(id) if id == "../x"
        ));
    }
}
