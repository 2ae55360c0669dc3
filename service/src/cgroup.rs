//! A root service's helpers in a cgroup per peer uid, when the service's own cgroup (v2) is
//! delegated to it (`--delegated-cgroup`, beside systemd's `Delegate=yes`).
//!
//! In cgroup v2 a cgroup whose children have controllers holds no process itself, so the
//! service first moves itself into a leaf, `service`, then turns on the `pids` and `memory`
//! controllers for the children (those its cgroup has), and puts each peer's helpers in
//! `uid-UID` beside it. There the kernel counts the tasks and the memory of a peer's helpers
//! and of everything their commands start, per peer. A helper joins its cgroup in the child,
//! before it executes (`sys::run_as`), so nothing it starts is ever counted elsewhere.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use crate::log::log;

/// Where the cgroup v2 hierarchy is mounted: alone, or beside the v1 hierarchies (hybrid).
const UNIFIED: [&str; 2] = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"];
/// The controllers turned on for the peers' cgroups.
const CONTROLLERS: [&str; 2] = ["pids", "memory"];

/// Why the helpers cannot have a cgroup per peer here.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CgroupError {
    #[error(
        "the service is in no cgroup v2 hierarchy at {UNIFIED:?}, or in its root cgroup, which \
         is not delegated to it: start it from a unit with Delegate=yes, or drop \
         --delegated-cgroup"
    )]
    NotDelegated,
    /// This file or directory cannot be set up.
    #[error("cannot set up {0}: {1}")]
    Io(PathBuf, std::io::Error),
}

/// The service's delegated cgroup, with the service itself in its leaf.
#[derive(Debug)]
pub(crate) struct Cgroups(PathBuf);

impl Cgroups {
    /// Moves the service into its leaf and turns on the controllers for the peers' cgroups; one
    /// that cannot be turned on is logged: the helpers are then grouped per peer, not counted.
    pub(crate) fn delegated() -> Result<Cgroups, CgroupError> {
        let own = Path::new("/proc/self/cgroup");
        let own = std::fs::read_to_string(own).map_err(io(own))?;
        let name = own.lines().find_map(|line| line.strip_prefix("0::"));
        let mount = UNIFIED.iter().map(Path::new);
        let mut mount = mount.filter(|m| m.join("cgroup.controllers").exists());
        let dir = match (name, mount.next()) {
            (Some(name), Some(mount)) if name != "/" => mount.join(name.trim_start_matches('/')),
            _ => return Err(CgroupError::NotDelegated),
        };
        make_dir(&dir.join("service"))?;
        let pid = std::process::id().to_string();
        write(&dir.join("service/cgroup.procs"), &pid)?;
        // Each on its own: one the cgroup lacks does not keep the other off.
        for controller in CONTROLLERS {
            let control = dir.join("cgroup.subtree_control");
            if let Err(e) = write(&control, &format!("+{controller}")) {
                log!("the cgroups per peer are not counted by {controller}: {e}");
            }
        }
        Ok(Cgroups(dir))
    }

    /// `uid`'s cgroup.
    pub(crate) fn of(&self, uid: u32) -> PathBuf {
        self.0.join(format!("uid-{uid}"))
    }

    /// The `cgroup.procs` file of `uid`'s cgroup (made if missing), open for a helper to join.
    pub(crate) fn procs_of(&self, uid: u32) -> Result<OwnedFd, CgroupError> {
        make_dir(&self.of(uid))?;
        let path = self.of(uid).join("cgroup.procs");
        let file = OpenOptions::new().write(true).open(&path);
        file.map(OwnedFd::from).map_err(io(&path))
    }

    /// Removes `uid`'s cgroup once none of its helpers is left; one that still holds a process
    /// (a command's, being killed) stays, to be used again.
    pub(crate) fn forget(&self, uid: u32) {
        let _ = std::fs::remove_dir(self.of(uid));
    }
}

/// The error of setting up `path`.
fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CgroupError {
    let path = path.to_owned();
    move |e| CgroupError::Io(path, e)
}

fn make_dir(dir: &Path) -> Result<(), CgroupError> {
    match std::fs::create_dir(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(io(dir)(e)),
        _ => Ok(()),
    }
}

/// Writes `text` to the cgroup file `path` in one `write`, as the kernel wants it.
fn write(path: &Path, text: &str) -> Result<(), CgroupError> {
    let file = OpenOptions::new().write(true).open(path);
    let written = file.and_then(|mut file| file.write_all(text.as_bytes()));
    written.map_err(io(path))
}
