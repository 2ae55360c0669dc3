//! The command runtime that the tools and `agentd run` share: what is known about a finished
//! command ([`Facts`]), the pipes its output comes through and the copying of it, the wait for
//! its end, and the one-line notes that explain a failure to a reader.
//!
//! Everything here is below the tools and the command line: it names neither.

mod facts;
mod notes;
mod output;
mod wait;

pub use facts::{Facts, RunnerFailure};
pub(crate) use notes::{exec_failure_note, runner_failure_note};
pub(crate) use output::{copy_output, input_pipe, output_pipe, wide_output_pipe};
pub(crate) use wait::{Waiting, settle, wait_for_outcome};

/// How much of the end of the command's stderr is kept for classifying failures.
pub const STDERR_TAIL: usize = 8 * 1024;

pub use crate::helper_client::KILL_GRACE;
