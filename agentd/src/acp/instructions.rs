//! What the model is told at every request: who it is, where it works, under which sandbox mode.
//! Built in one place and logged with each `model/request`, so what the model was told replays
//! from the log.

use std::path::Path;

use confine_protocol::Mode;

/// The instructions for one model request.
pub fn for_request(cwd: &Path, mode: Mode) -> String {
    let mode_text = match mode {
        Mode::ReadOnly => {
            "read-only: commands may read anything but write nothing (not even in the \
             workspace); file writes are refused"
        }
        Mode::WorkspaceWrite => {
            "workspace-write: commands may write inside the workspace and $TMPDIR only; \
             .git/hooks, .git/config, .gitmodules and .agentd stay read-only; no network"
        }
        Mode::DangerFullAccess => "danger-full-access: commands run without confinement",
    };
    format!(
        "You are agentd, a coding agent working in the workspace {cwd}.\n\
         Use the tools to inspect and change files and to run commands. Every command runs \
         under the sandbox mode of this session: {mode_text}.\n\
         Check the [exit code: N] marker on every bash result; investigate failures before \
         moving on. A line \"[sandbox: file access denied under <mode> mode]\" means the sandbox \
         refused an access: do not retry the same thing, explain what is needed instead.\n\
         Keep answers short and say what you changed.",
        cwd = cwd.display()
    )
}
