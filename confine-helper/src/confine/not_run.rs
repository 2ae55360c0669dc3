//! Why a request produced no running command, and the reply that says so: shared by the
//! planning steps that decide it and the command code that reports it.

use std::path::Path;

use confine_protocol::{
    Backend, Caps, Ending, Enforcement, ExitStatus, Exited, Layer, Refusal, Refused, Reply,
    RunnerFailed, Stage, Usage,
};

use crate::record::exec_failure_code;

/// Why a spawn produced no running command.
#[derive(Debug)]
pub(crate) enum NotRun {
    Refused(Refusal),
    RunnerFailed(Stage, i32, String),
    /// `execve` of the program would fail with this errno: an exec failure of the command,
    /// found before forking.
    ExecFailed(i32, Backend, Option<Enforcement>, Vec<Layer>),
}

impl NotRun {
    pub(crate) fn into_reply(self, id: u64) -> Reply {
        match self {
            NotRun::Refused(reason) => Reply::Refused(Refused { id, reason }),
            NotRun::RunnerFailed(stage, errno, detail) => Reply::RunnerFailed(RunnerFailed {
                id,
                stage,
                errno,
                detail,
            }),
            NotRun::ExecFailed(errno, backend, enforcement, layers) => Reply::Exited(Exited {
                id,
                status: ExitStatus::Code(exec_failure_code(errno)),
                exec_errno: Some(errno),
                ending: Ending::Exited,
                backend,
                enforcement,
                layers,
                usage: Usage {
                    wall_us: 0,
                    user_us: 0,
                    sys_us: 0,
                    max_rss_kib: 0,
                },
                // It never ran: no cap held anything.
                caps: Caps {
                    processes: None,
                    memory: None,
                },
            }),
        }
    }
}

pub(crate) fn refuse<T>(reason: Refusal) -> Result<T, NotRun> {
    Err(NotRun::Refused(reason))
}

pub(crate) fn fail<T>(stage: Stage, detail: String) -> Result<T, NotRun> {
    Err(NotRun::RunnerFailed(stage, 0, detail))
}

/// A path as a refusal or a gap shows it.
pub(crate) fn shown(path: &Path) -> String {
    path.display().to_string()
}

/// The real path of `given`, named through a symbolic link, when it can be found: a refusal
/// suggests it.
pub(crate) fn real_of(given: &Path) -> Option<String> {
    std::fs::canonicalize(given).ok().map(|real| shown(&real))
}
