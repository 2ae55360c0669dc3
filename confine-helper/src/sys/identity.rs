//! A root service's helper for a peer takes the peer's identity in the child, before it
//! executes: its supplementary groups, then its gid, then its uid (real, effective and saved),
//! and checks that it cannot become root again.

use std::os::unix::process::CommandExt;
use std::process::Command;

use nix::unistd::{Gid, Uid, setgroups, setresgid, setresuid};

/// Makes `command`'s child run as `uid`, `gid` and `groups` from before its `execve`.
pub(crate) fn run_as(command: &mut Command, uid: Uid, gid: Gid, groups: Vec<Gid>) {
    let become_user = move || {
        setgroups(&groups)?;
        setresgid(gid, gid, gid)?;
        setresuid(uid, uid, uid)?;
        if !uid.is_root() && setresuid(Uid::from_raw(0), Uid::from_raw(0), Uid::from_raw(0)).is_ok()
        {
            // Still able to become root: refuse to execute (an error kind allocates nothing).
            return Err(std::io::ErrorKind::PermissionDenied.into());
        }
        Ok(())
    };
    // SAFETY: the closure runs in the forked child before `execve` and calls only setgroups,
    // setresgid and setresuid (async-signal-safe system calls) on values built before the
    // fork; it allocates nothing, and an error ends the spawn.
    unsafe {
        command.pre_exec(become_user);
    }
}
