//! A user namespace of the command's own, to count its process cap in (Linux, a helper that is
//! not root; `confine::caps` says why). The command makes it between the shim's fork and its
//! confinement: `unshare(CLONE_NEWUSER)`, its user and group mapped to themselves (so it keeps
//! its ids; other users' files show as the overflow ids, as under bwrap), `setgroups` denied
//! (which an unprivileged mapping requires), then `RLIMIT_NPROC`. The kernel counts the tasks
//! of a user namespace's users against that namespace's limit, and those of the namespace
//! above against the limit its creator had — the user's own — so the cap holds the command's
//! tree alone. The capabilities the namespace grants end with the command's `execve` (its user
//! is not root there, and no_new_privs is set), and the seccomp filter keeps it from making
//! another.
//!
//! Everything is built before the fork; the steps are async-signal-safe calls on it.

use std::ffi::c_int;

use nix::errno::Errno;
use nix::libc;

use super::call::{self, SysResult};

/// The maps of one user namespace, and the cap set inside it.
#[derive(Debug)]
pub(crate) struct UserNamespace {
    /// `RLIMIT_NPROC` inside the namespace.
    pub(crate) processes: u64,
    /// `<uid> <uid> 1`: the user mapped to itself.
    uid_map: Vec<u8>,
    /// `<gid> <gid> 1`.
    gid_map: Vec<u8>,
}

impl UserNamespace {
    /// The namespace this process's user would make, capped at `processes` tasks (at most its
    /// hard `RLIMIT_NPROC`, which no unprivileged process may raise: the user's own limit
    /// binds the command anyway).
    pub(crate) fn new(processes: u64) -> UserNamespace {
        let uid = nix::unistd::geteuid().as_raw();
        let gid = nix::unistd::getegid().as_raw();
        let hard = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NPROC)
            .map_or(processes, |(_, hard)| hard);
        UserNamespace {
            processes: processes.min(hard),
            uid_map: format!("{uid} {uid} 1").into_bytes(),
            gid_map: format!("{gid} {gid} 1").into_bytes(),
        }
    }
}

/// Writes all of `bytes` to the file at `path` in one `write`, as `/proc`'s map files need.
fn write_file(path: &std::ffi::CStr, bytes: &[u8]) -> SysResult<()> {
    let fd = call::open(path, libc::O_WRONLY | libc::O_CLOEXEC)?;
    let written = call::write(fd, bytes);
    let _ = call::close(fd);
    match written {
        Ok(n) if n == bytes.len() => Ok(()),
        Ok(_) => Err(Errno::EIO),
        Err(e) => Err(e),
    }
}

/// Moves the calling process into a user namespace of its own, mapped as `ns` says, and caps
/// its tasks there.
pub(super) fn enter(ns: &UserNamespace) -> SysResult<()> {
    make(ns)?;
    call::setrlimit(libc::RLIMIT_NPROC, ns.processes, ns.processes)
}

/// The namespace alone, mapped.
///
/// The helper is not dumpable, and a process that is not has its `/proc` files owned by root,
/// so its own maps could not be written: the process is dumpable while it writes them, and not
/// again after. Nothing confined can use that moment — the filter and Landlock keep confined
/// commands from tracing any process —, and the command is dumpable anyway once it executes.
fn make(ns: &UserNamespace) -> SysResult<()> {
    call::prctl(libc::PR_SET_DUMPABLE, 1)?;
    let made = (|| {
        call::unshare(libc::CLONE_NEWUSER)?;
        write_file(c"/proc/self/setgroups", b"deny")?;
        write_file(c"/proc/self/uid_map", &ns.uid_map)?;
        write_file(c"/proc/self/gid_map", &ns.gid_map)
    })();
    call::prctl(libc::PR_SET_DUMPABLE, 0)?;
    made
}

/// The exit code of a probe child whose namespace could not be made.
const PROBE_FAILED: c_int = 1;

/// Whether this process's user may make such a namespace here: a child tries, and exits.
pub(crate) fn usable() -> bool {
    let ns = UserNamespace::new(u64::MAX);
    // SAFETY: the helper is single-threaded; the child only makes the namespace with
    // async-signal-safe calls on `ns`, built before the fork, and `_exit`s.
    let child = match unsafe { call::fork() } {
        Ok(0) => call::exit(if make(&ns).is_ok() { 0 } else { PROBE_FAILED }),
        Ok(child) => child,
        Err(_) => return false,
    };
    loop {
        match call::wait4_pid(child) {
            Err(Errno::EINTR) => continue,
            Ok((_, status, _)) => return libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            Err(_) => return false,
        }
    }
}
