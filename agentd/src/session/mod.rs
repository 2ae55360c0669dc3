//! Sessions as append-only event logs.
//!
//! [`event`] defines what is recorded ([`diff`]: the change a file tool made, kept for the
//! editor), [`log`] stores it (one JSONL file per session, fsync at turn boundaries and before
//! side effects), and [`fold`] derives everything else from it ([`audit`]: the audit trail). A session restarted from its log
//! is the same session: restart immunity and isolation between sessions follow from replay, not
//! from state kept anywhere else.

pub mod audit;
mod audit_entry;
pub mod diff;
pub mod event;
pub mod fold;
pub mod log;
pub mod nested;
pub mod rule;
mod transcript;
pub mod undoable;

pub use crate::checkpoint::DIFF_TEXT_CAP;
pub use diff::{Before, LoggedDiff, Omission};
pub use event::{
    AgentOutcome, EVENT_VERSION, Event, LoggedToolCall, PlanItem, PlanPriority, PlanStatus,
    PromptResource, Record, RestoredBy, ToolStatus,
};
pub use log::{EventLog, LogError};
pub use rule::Scope;

/// What `f` makes of `log`'s records, read in place ([`SessionLog::with_records`]): the reads
/// each model step makes (the effective knobs, the history) cost no copy of the whole session.
pub fn read<R>(log: &dyn SessionLog, f: impl FnOnce(&[Record]) -> R) -> R {
    let mut f = Some(f);
    let mut out = None;
    log.with_records(&mut |records| {
        if let Some(f) = f.take() {
            out = Some(f(records));
        }
    });
    match out {
        Some(out) => out,
        // Every implementation calls `f` exactly once; were one not to, an empty log.
        None => f.map_or_else(
            || unreachable!("with_records took f without answering"),
            |f| f(&[]),
        ),
    }
}

/// A session's log as the domains that own events use it: the knobs' write paths
/// ([`crate::knobs::sandbox::set`], [`crate::knobs::policy::set`]) and the approval seam's audit.
pub trait SessionLog: Send + Sync {
    /// A copy of every record so far.
    fn records(&self) -> Vec<Record>;
    /// Lends every record so far to `f`, without copying them where the log can. `f` must not
    /// call back into the log (it may hold the log's lock).
    fn with_records(&self, f: &mut dyn FnMut(&[Record])) {
        f(&self.records());
    }
    /// Appends one event; `sync` makes it durable before returning.
    fn append(&self, event: Event, sync: bool) -> Result<Record, LogError>;
}
