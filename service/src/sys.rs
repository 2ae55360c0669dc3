//! Every `unsafe` block of the service, one per call.
//!
//! A root service's helper for a peer becomes the peer in the child, before it executes: while
//! still root it takes the process limit of the peer's process and joins the peer's cgroup,
//! then it takes the peer's supplementary groups, gid and uid (real, effective and saved), and
//! checks that it cannot become root again.
//!
//! The limit comes first because raising a hard limit can take root, and because the kernel
//! charges the process to the peer's uid when the uid changes: with the peer's `RLIMIT_NPROC`
//! set by then, a peer at its process limit gets no helper (`setresuid` marks the process and
//! `execve` fails with `EAGAIN`), and the helper's commands count against the same limit as
//! the peer's own processes.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

use nix::libc;
use nix::sys::resource::{Resource, setrlimit};
use nix::unistd::{Gid, Uid, setgroups, setresgid, setresuid};

/// The first descriptor past stdio.
const FIRST_INHERITED: u32 = 3;

/// Makes `command`'s child take the peer's soft and hard process limit (`RLIMIT_NPROC`) and
/// the `cgroup.procs` file of its cgroup (when there is one) and, unless the peer is root, run
/// as its `uid`, gid and groups, from before its `execve`.
pub(crate) fn run_as(
    command: &mut Command,
    uid: Uid,
    (gid, groups): (Gid, Vec<Gid>),
    (soft, hard): (u64, u64),
    cgroup: Option<OwnedFd>,
) {
    let become_peer = move || {
        setrlimit(Resource::RLIMIT_NPROC, soft, hard)?;
        if let Some(procs) = &cgroup {
            // "0" moves the writing process.
            nix::unistd::write(procs, b"0")?;
        }
        if uid.is_root() {
            return Ok(());
        }
        setgroups(&groups)?;
        setresgid(gid, gid, gid)?;
        setresuid(uid, uid, uid)?;
        if setresuid(Uid::from_raw(0), Uid::from_raw(0), Uid::from_raw(0)).is_ok() {
            // Still able to become root: refuse to execute (an error kind allocates nothing).
            return Err(std::io::ErrorKind::PermissionDenied.into());
        }
        Ok(())
    };
    // SAFETY: the closure runs in the forked child before `execve` and calls only setrlimit,
    // write, setgroups, setresgid and setresuid (async-signal-safe system calls) on values
    // built before the fork; it allocates nothing, and an error ends the spawn.
    unsafe {
        command.pre_exec(become_peer);
    }
}

/// Marks every descriptor past stdio close-on-exec, those this process inherited included, so
/// that a peer's helper holds only its connection from its first instruction on (it runs as the
/// peer, who may trace it before it closes what it inherited).
pub(crate) fn cloexec_inherited() -> std::io::Result<()> {
    let flags = libc::CLOSE_RANGE_CLOEXEC.cast_signed();
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC closes nothing and touches no memory; it only
    // sets a flag on descriptors.
    let done = unsafe { libc::close_range(FIRST_INHERITED, u32::MAX, flags) };
    if done == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Takes ownership of descriptor `fd`, which the service manager passed, once `/proc` shows
/// that it is an open socket.
pub(crate) fn inherited_socket(fd: RawFd) -> std::io::Result<OwnedFd> {
    let target = std::fs::read_link(format!("/proc/self/fd/{fd}"))?;
    let target = target.to_string_lossy();
    if !target.starts_with("socket:") {
        return Err(std::io::Error::other(format!("is {target}, not a socket")));
    }
    // SAFETY: the descriptor is open (its /proc entry exists), was inherited, and nothing else
    // in this process owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
