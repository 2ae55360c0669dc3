//! What one tool call runs under ([`CallContext`]) and what it produces ([`ToolResult`]): the
//! types every tool shares.

use confine_protocol::Mode;
use serde_json::Value;

use super::live::LiveOutput;
use super::tasks::NarrowingMark;
use crate::cancel::Cancel;
use crate::session::{LoggedDiff, ToolStatus};

/// What one call runs under.
#[derive(Debug, Clone)]
pub struct CallContext {
    /// The sandbox mode in effect for this call.
    pub mode: Mode,
    /// The turn's cancel: stops a foreground command (not a background one).
    pub cancel: Cancel,
    /// The session's narrowings when `mode` was decided (taken before it was read): a
    /// background task the call starts is stopped if one since narrowed below `mode`.
    pub narrowings: NarrowingMark,
    /// Where a foreground `bash` copies its output as it arrives, for the editor's live view
    /// of the call; `None` shows nothing while it runs (a child agent's calls). Never read by
    /// the model, never logged.
    pub live: Option<LiveOutput>,
    /// The child agent making the call, when it is one: a background task it starts ends when
    /// its outcome is claimed. `None` for the top level, whose tasks belong to the session.
    pub owner: Option<TaskOwner>,
}

/// The child agent a background task belongs to.
#[derive(Debug, Clone)]
pub struct TaskOwner {
    /// Its id, as its records are tagged (`agent-1`).
    pub agent: String,
    /// Fires once its outcome is claimed (its cancellation token).
    pub ended: Cancel,
}

/// What a call produced.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    pub status: ToolStatus,
    /// What the model reads.
    pub text: String,
    /// The raw facts for the editor: for commands, how the run ended (mode, backend,
    /// enforcement, exit, denied, runner_failure, refused, timed_out, cancelled); for files,
    /// the mode and path.
    pub facts: Value,
    /// For a file tool's write, the change it made, for the editor (see
    /// [`crate::session::diff`]); never read by the model.
    pub diff: Option<LoggedDiff>,
}

impl ToolResult {
    pub(crate) fn completed(text: String, facts: Value) -> ToolResult {
        ToolResult {
            status: ToolStatus::Completed,
            text,
            facts,
            diff: None,
        }
    }

    pub(crate) fn failed(text: String, facts: Value) -> ToolResult {
        ToolResult {
            status: ToolStatus::Failed,
            text,
            facts,
            diff: None,
        }
    }

    /// This result with the change a write made.
    pub(crate) fn with_diff(mut self, diff: LoggedDiff) -> ToolResult {
        self.diff = Some(diff);
        self
    }
}
