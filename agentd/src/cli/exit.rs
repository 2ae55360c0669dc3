//! How agentd ends: its exit statuses, and the one-line report of an error on stderr.

use crate::terminal;

/// Exit status of agentd when the command did not run (refused, runner failure, setup error).
pub const EXIT_DID_NOT_RUN: u8 = 125;
/// Exit status of agentd when the command's timeout passed.
pub const EXIT_TIMED_OUT: u8 = 124;
/// Exit status of agentd when interrupted: `agentd run` before the command was handed to the
/// helper, `agentd exec` by SIGINT (once the turn has ended) or a turn ended `cancelled`.
pub const EXIT_INTERRUPTED: u8 = 130;

/// The exit status of `config` and `sessions` when they fail.
pub const EXIT_FAILURE: u8 = 1;

/// Exit status of `agentd exec` when the prompt was answered with an error: the model failed
/// (the error's `data` says how), or agentd could not record the turn, or the connection to the
/// agent failed. (`end_turn` is 0; a cancelled or interrupted turn is [`EXIT_INTERRUPTED`]; a
/// turn that could not start is [`EXIT_DID_NOT_RUN`].)
pub const EXIT_TURN_FAILED: u8 = 1;
/// Exit status of `agentd exec` when the turn ended `max_tokens`: the answer was cut off.
pub const EXIT_MAX_TOKENS: u8 = 3;
/// Exit status of `agentd exec` when the turn ended `refusal`.
pub const EXIT_REFUSAL: u8 = 4;
/// Exit status of `agentd exec` when the turn ended `max_turn_requests` (`session.max_steps`).
pub const EXIT_MAX_TURN_REQUESTS: u8 = 5;

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
