//! The one-line notes that explain to a reader why a command did not run or failed to start,
//! shared by the tools' results and `agentd run`'s report.

use confine_protocol::Stage;

use crate::helper_client::FailedAt;

use super::RunnerFailure;

/// Why `execve` of `program` failed, in the shells' words: `<program>: command not found` for
/// `ENOENT`, else `<program>: <strerror>`.
pub(crate) fn exec_failure_note(program: &str, errno: i32) -> String {
    let errno = nix::errno::Errno::from_raw(errno);
    if errno == nix::errno::Errno::ENOENT {
        format!("{program}: command not found")
    } else {
        format!("{program}: {}", errno.desc())
    }
}

/// One sentence on a runner failure for a reader: what failed, why, and whether the command ran.
pub(crate) fn runner_failure_note(failure: &RunnerFailure, started: bool) -> String {
    let detail = &failure.detail;
    match failure.stage {
        // The helper's detail names each backend it tried, why it failed, and what to do.
        FailedAt::Step(Stage::Unavailable) => format!(
            "the command did not run because confine-helper cannot confine it on this \
             machine: {detail}"
        ),
        FailedAt::HelperExited if started => format!(
            "confine-helper went away while the command was running: {detail}; its outcome is \
             unknown"
        ),
        FailedAt::HelperExited => {
            format!(
                "confine-helper went away before the command started: {detail}; the command did not run"
            )
        }
        stage => {
            let errno = if failure.errno == 0 {
                String::new()
            } else {
                format!(" ({})", nix::errno::Errno::from_raw(failure.errno).desc())
            };
            format!(
                "the sandbox runner failed at stage {}{errno}: {detail}; the command did not run",
                stage.as_str()
            )
        }
    }
}
