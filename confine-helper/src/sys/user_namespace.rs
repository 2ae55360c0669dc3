//! A user namespace of the command's own, to count its process cap in (Linux, a helper that is
//! not root; `confine::caps` says why). The shim starts the command in it (`CLONE_NEWUSER` on
//! the clone, [`super::call::clone_vfork`]), and the command, before anything confines it,
//! maps its user and group to themselves (so it keeps its ids; other users' files show as the
//! overflow ids, as under bwrap), `setgroups` denied (which an unprivileged mapping requires),
//! then sets `RLIMIT_NPROC`. The kernel counts the tasks of a user namespace's users against
//! that namespace's limit, and those of the namespace above against the limit its creator had
//! — the user's own — so the cap holds the command's tree alone. The capabilities the
//! namespace grants apply to nothing before the maps are written (no owner is mapped), and end
//! with the command's `execve` (its user is not root there, and no_new_privs is set); the
//! seccomp filter keeps it from making another.
//!
//! Everything is built before the clone; the steps are async-signal-safe calls on it.

use std::ffi::c_int;

use nix::errno::Errno;
use nix::libc;

use super::call::{self, SysResult};

/// The maps of one user namespace, and the cap set inside it.
#[derive(Debug)]
pub(crate) struct UserNamespace {
    /// `RLIMIT_NPROC` inside the namespace, when it caps the command's tasks (a helper that is
    /// not root).
    pub(crate) processes: Option<u64>,
    /// `<uid> <uid> 1`: the user mapped to itself.
    uid_map: Vec<u8>,
    /// `<gid> <gid> 1`.
    gid_map: Vec<u8>,
}

impl UserNamespace {
    /// The namespace this process's user would make, capped at `processes` tasks when given
    /// (at most its hard `RLIMIT_NPROC`, which no unprivileged process may raise: the user's own
    /// limit binds the command anyway).
    pub(crate) fn new(processes: Option<u64>) -> UserNamespace {
        let uid = nix::unistd::geteuid().as_raw();
        let gid = nix::unistd::getegid().as_raw();
        let hard = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NPROC)
            .map(|(_, hard)| hard)
            .ok();
        UserNamespace {
            processes: processes.map(|n| hard.map_or(n, |hard| n.min(hard))),
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

/// Maps the calling process, started in a user namespace of its own, as `ns` says, and caps
/// its tasks there when `ns` does. A namespace `mapped` already (made ahead, `super::sandbox`)
/// is not mapped again; the caller is made not dumpable, as a map leaves it.
pub(super) fn settle(ns: &UserNamespace, mapped: bool) -> SysResult<()> {
    if mapped {
        call::prctl(libc::PR_SET_DUMPABLE, 0)?;
    } else {
        map(ns)?;
    }
    match ns.processes {
        Some(n) => call::setrlimit(libc::RLIMIT_NPROC, n, n),
        None => Ok(()),
    }
}

/// The maps alone.
///
/// The helper is not dumpable, and a process that is not has its `/proc` files owned by root,
/// so its own maps could not be written: the process is dumpable while it writes them, and not
/// again after. Dumpability belongs to the memory, which the command still shares with its
/// waiting shim: both are dumpable for those three writes. Nothing confined can use that
/// moment — the filter and Landlock keep confined commands from tracing any process —, and the
/// command is dumpable anyway once it executes.
pub(super) fn map(ns: &UserNamespace) -> SysResult<()> {
    call::prctl(libc::PR_SET_DUMPABLE, 1)?;
    let made = (|| {
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
    let ns = UserNamespace::new(None);
    let Ok(stack) = call::ChildStack::new() else {
        return false;
    };
    // SAFETY: the helper is single-threaded; the child, started as a command is, only maps
    // the namespace with async-signal-safe calls on `ns`, built before, and `_exit`s.
    let started = unsafe {
        call::clone_vfork(&stack, true, || {
            call::exit(if map(&ns).is_ok() { 0 } else { PROBE_FAILED })
        })
    };
    let Ok(child) = started else {
        return false;
    };
    call::wait4_pid(child)
        .is_ok_and(|(_, status, _)| libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0)
}
