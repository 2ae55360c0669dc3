//! Sessions as append-only event logs.
//!
//! [`event`] defines what is recorded, [`log`] stores it (one JSONL file per session, fsync at
//! turn boundaries and before side effects), and [`fold`] derives everything else from it. A
//! session restarted from its log is the same session: restart immunity and isolation between
//! sessions follow from replay, not from state kept anywhere else.

pub mod event;
pub mod fold;
pub mod log;

pub use event::{EVENT_VERSION, Event, LoggedToolCall, Record, ToolStatus};
pub use log::{EventLog, LoadReport, LogError};
