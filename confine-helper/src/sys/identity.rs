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

use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::process::Command;

use nix::libc;
use nix::unistd::{Gid, Uid, setgroups, setresgid, setresuid};

use super::call;

/// Who a peer's helper becomes, and what of the peer it carries.
#[derive(Debug)]
pub(crate) struct Identity {
    pub(crate) uid: Uid,
    pub(crate) gid: Gid,
    pub(crate) groups: Vec<Gid>,
    /// The peer's soft and hard process limit (`RLIMIT_NPROC`).
    pub(crate) processes: (u64, u64),
    /// The `cgroup.procs` file of the peer's cgroup, open for writing, when there is one.
    pub(crate) cgroup: Option<OwnedFd>,
}

/// Makes `command`'s child take `peer`'s process limit and cgroup and, unless the peer is root,
/// run as its uid, gid and groups, from before its `execve`.
pub(crate) fn run_as(command: &mut Command, peer: Identity) {
    let become_peer = move || {
        call::setrlimit(libc::RLIMIT_NPROC, peer.processes.0, peer.processes.1)?;
        if let Some(procs) = &peer.cgroup {
            // "0" moves the writing process.
            nix::unistd::write(procs, b"0")?;
        }
        if peer.uid.is_root() {
            return Ok(());
        }
        setgroups(&peer.groups)?;
        setresgid(peer.gid, peer.gid, peer.gid)?;
        setresuid(peer.uid, peer.uid, peer.uid)?;
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
