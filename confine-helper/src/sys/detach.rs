//! Starting a process that outlives `enter`'s exec without being the command's child: the proxy
//! bridge ([`crate::bridge`]).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use nix::libc;

use super::call;

/// Runs `body` in a new process that is not a child of the caller: the caller forks, the child
/// forks again and exits at once, so the grandchild that runs `body` is adopted by the PID
/// namespace's init (bwrap's), ends when that namespace does, and is never in the way of the
/// command's own `wait`. The grandchild holds only `keep` (moved to 3, 4, … in order) and
/// `/dev/null` on 0, 1 and 2: no pipe of the command's, no report pipe of `enter`'s. Returns in
/// the caller once the child has been reaped.
///
/// Only for a single-threaded caller (`enter`, before it executes the command): after `fork` the
/// processes may then allocate and start threads as any process may.
pub(crate) fn detach(keep: &[&OwnedFd], body: impl FnOnce() -> i32) -> io::Result<()> {
    let raw: Vec<libc::c_int> = keep.iter().map(|fd| fd.as_raw_fd()).collect();
    // SAFETY: the caller is single-threaded (this function's contract), so the child is a full
    // copy with no lock held by a thread that no longer exists.
    let child = unsafe { call::fork() }?;
    if child == 0 {
        // SAFETY: as above; this process is single-threaded too.
        match unsafe { call::fork() } {
            Ok(0) => {
                let code = match super::sandbox::keep_only(&raw) {
                    Ok(()) => body(),
                    Err(_) => 1,
                };
                call::exit(code)
            }
            Ok(_) => call::exit(0),
            Err(_) => call::exit(1),
        }
    }
    let (_, status, _) = call::wait4_pid(child)?;
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        Ok(())
    } else {
        Err(io::Error::other(
            "the bridge's process could not be started",
        ))
    }
}
