//! How agentd ends: its exit statuses, and the one-line report of an error on stderr.

use crate::terminal;

/// Exit status of agentd when the command did not run (refused, runner failure, setup error).
pub const EXIT_DID_NOT_RUN: u8 = 125;
/// Exit status of agentd when the command's timeout passed.
pub const EXIT_TIMED_OUT: u8 = 124;
/// Exit status of agentd when interrupted before the command was handed to the helper.
pub const EXIT_INTERRUPTED: u8 = 130;

/// The exit status of `config` and `sessions` when they fail.
pub const EXIT_FAILURE: u8 = 1;

/// Prints `message` on stderr after `agentd: `, terminal-safe: errors quote paths and values.
pub(crate) fn report(message: &dyn std::fmt::Display) {
    eprintln!("agentd: {}", terminal::visible(&message.to_string()));
}

pub(crate) fn fail(error: &dyn std::fmt::Display) -> u8 {
    report(error);
    EXIT_DID_NOT_RUN
}

/// Reports `error` and says how `config` and `sessions` exit when they fail.
pub(crate) fn failure(error: &dyn std::fmt::Display) -> u8 {
    report(error);
    EXIT_FAILURE
}
