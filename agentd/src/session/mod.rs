//! Sessions as append-only event logs.
//!
//! [`event`] defines what is recorded ([`diff`]: the change a file tool made, kept for the
//! editor), [`log`] stores it (one JSONL file per session, fsync at turn boundaries and before
//! side effects), and [`fold`] derives everything else from it. A session restarted from its log
//! is the same session: restart immunity and isolation between sessions follow from replay, not
//! from state kept anywhere else.

pub mod diff;
pub mod event;
pub mod fold;
pub mod log;
pub mod rule;

pub use diff::{Before, DIFF_TEXT_CAP, LoggedDiff, Omission};
pub use event::{
    AgentOutcome, EVENT_VERSION, Event, LoggedToolCall, PromptResource, Record, ToolStatus,
};
pub use log::{EventLog, LoadReport, LogError};
pub use rule::Scope;

/// A session's log as the domains that own events use it: the knobs' write paths
/// ([`crate::knobs::sandbox::set`], [`crate::knobs::policy::set`]) and the approval seam's audit.
pub trait SessionLog: Send + Sync {
    /// A copy of every record so far.
    fn records(&self) -> Vec<Record>;
    /// Appends one event; `sync` makes it durable before returning.
    fn append(&self, event: Event, sync: bool) -> Result<Record, LogError>;
}
