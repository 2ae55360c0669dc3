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
                let code = match isolate(&raw) {
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

/// In the grandchild: `keep` at 3, 4, …, stdio on `/dev/null`, every other descriptor closed.
fn isolate(keep: &[libc::c_int]) -> call::SysResult<()> {
    let kept = libc::c_int::try_from(keep.len()).map_err(|_| nix::errno::Errno::EMFILE)?;
    let first = 3 + kept + 64;
    // Park the kept descriptors above anything they could collide with, then place them.
    let mut parked = Vec::with_capacity(keep.len());
    for fd in keep {
        parked.push(call::dup_cloexec_above(*fd, first)?);
    }
    for (to, fd) in (3..).zip(&parked) {
        call::dup2(*fd, to)?;
    }
    let above = libc::c_uint::try_from(3 + kept).map_err(|_| nix::errno::Errno::EMFILE)?;
    call::close_range(above, libc::c_uint::MAX, 0)?;
    let null = call::open(c"/dev/null", libc::O_RDWR)?;
    for std in 0..3 {
        call::dup2(null, std)?;
    }
    if null > 2 {
        call::close(null)?;
    }
    Ok(())
}
