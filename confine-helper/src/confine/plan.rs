//! What a plan is made of, for every backend: how the command is confined, the plan itself,
//! what it leaves to clean up, and the pieces every backend's plan takes (the command's `/tmp`,
//! its denied reads, the enforcement fact).

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use confine_protocol::{Backend, Enforcement, EnvVar, Gap, Layer, Mode, Spawn, Stage};

use super::context::Context;
use super::deny;
use super::not_run::{NotRun, fail};
use super::request::session_temp;
use crate::connects::Rules;
use crate::paths;
use crate::protect::Root;
use crate::sys::Resource;

/// How the forked command is confined. On macOS only `None`: the argv starts with
/// `sandbox-exec`, which confines the command itself.
#[derive(Debug)]
pub(crate) enum Confinement {
    None,
    /// The argv already starts with bwrap; this descriptor holds the seccomp program, and
    /// `passed` the descriptors its mounts are made from (`--bind-fd`) and those `enter` uses
    /// (this binary, the Landlock ruleset, the report pipe), numbered from
    /// [`crate::sys::COMMAND_FIRST_PASSED_FD`] on as the argv names them. `report` is the read
    /// end of `enter`'s report pipe.
    #[cfg(target_os = "linux")]
    Bwrap {
        seccomp: OwnedFd,
        passed: Vec<OwnedFd>,
        report: Option<OwnedFd>,
    },
    /// The namespace backend: the shim builds `sandbox` from `passed` (placed from
    /// `crate::sys::FD_FIRST_PASSED` on), and the command applies the ruleset and the filter.
    #[cfg(target_os = "linux")]
    Namespaces {
        ruleset: OwnedFd,
        filter: crate::bpf::Program,
        passed: Vec<OwnedFd>,
        sandbox: crate::sys::Sandbox,
    },
    #[cfg(target_os = "linux")]
    Landlock {
        ruleset: OwnedFd,
        filter: crate::bpf::Program,
        drop_caps: bool,
        /// The requester's proxy socket, which the shim keeps: the allow-list under Landlock.
        proxy: Option<OwnedFd>,
        /// The user namespace the command makes to count its process cap in.
        user_namespace: Option<crate::sys::UserNamespace>,
    },
}

/// Everything `command::start` needs beyond the request.
#[derive(Debug)]
pub(crate) struct Plan {
    pub(crate) backend: Backend,
    pub(crate) enforcement: Option<Enforcement>,
    /// The layers the command gets, in the order they are applied.
    pub(crate) layers: Vec<Layer>,
    pub(crate) argv: Vec<Vec<u8>>,
    pub(crate) env: Vec<EnvVar>,
    pub(crate) confinement: Confinement,
    pub(crate) rlimits: Vec<(Resource, u64)>,
    /// The caps on the command's whole tree, and how they are applied.
    pub(crate) caps: super::caps::Planned,
    pub(crate) cleanup: Cleanup,
    /// The command's `connect` calls go to its shim (`unix_sockets`, the allow-list under
    /// Landlock). Always `None` on macOS, where the shim supervises no `connect`.
    #[cfg_attr(
        not(target_os = "linux"),
        expect(dead_code, reason = "the Linux shim's")
    )]
    pub(crate) connects: Option<Connects>,
}

/// What connect supervision needs: the filter that hands every `connect` to the shim, and the
/// rules the shim judges by ([`crate::connects`]).
#[derive(Debug)]
pub(crate) struct Connects {
    #[cfg(target_os = "linux")]
    pub(crate) notify: crate::bpf::Program,
    #[cfg_attr(
        not(target_os = "linux"),
        expect(dead_code, reason = "the Linux shim's")
    )]
    pub(crate) rules: Rules,
}

/// Host-side things a plan created and the command's end removes: only the per-command temp
/// directory, outside the user's tree. Nothing is ever created inside a writable root.
#[derive(Debug, Default)]
pub(crate) struct Cleanup {
    pub(crate) temp_dir: Option<PathBuf>,
}

impl Cleanup {
    /// Removes what the plan created.
    pub(crate) fn run(&mut self) {
        if let Some(dir) = self.temp_dir.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        self.run();
    }
}

pub(super) fn enforcement_of(missing: Vec<Gap>) -> Enforcement {
    if missing.is_empty() {
        Enforcement::Full
    } else {
        Enforcement::Partial { missing }
    }
}

/// The command's `/tmp` as the host names it.
#[derive(Debug)]
pub(super) struct Temp {
    /// What the Linux backends mount or grant; Seatbelt's rules name the path.
    #[cfg_attr(
        not(target_os = "linux"),
        expect(dead_code, reason = "the Linux backends'")
    )]
    pub(super) fd: OwnedFd,
    pub(super) path: PathBuf,
    /// Writable (workspace-write), else bound read-only.
    pub(super) writable: bool,
}

/// The command's `/tmp`: the session's directory when the request names one (writable in
/// workspace-write, read-only in read-only mode), else in workspace-write a private one removed
/// when the command ends, else none.
pub(super) fn temp_dir(
    spawn: &Spawn,
    ctx: &Context,
    cleanup: &mut Cleanup,
) -> Result<Option<Temp>, NotRun> {
    let writable = spawn.policy.mode == Mode::WorkspaceWrite;
    if let Some(root) = session_temp(spawn, ctx)? {
        return Ok(Some(Temp {
            fd: root.fd,
            path: root.path,
            writable,
        }));
    }
    if !writable {
        return Ok(None);
    }
    let dir = crate::sys::private_temp_dir(&ctx.temp_base)
        .or_else(|e| fail(Stage::Prepare, format!("per-command temp dir: {e}")))?;
    cleanup.temp_dir = Some(dir.clone());
    let fd = paths::open_dir(&dir)
        .or_else(|e| fail(Stage::Prepare, format!("opening {}: {e}", dir.display())))?;
    Ok(Some(Temp {
        fd,
        path: dir,
        writable: true,
    }))
}

/// The request's denied reads that exist, checked against everything the command may write.
pub(super) fn denied_reads(
    spawn: &Spawn,
    roots: &[Root],
    tmp: Option<&Temp>,
) -> Result<Vec<deny::Denied>, NotRun> {
    let mut writable: Vec<&Path> = roots.iter().map(|r| r.path.as_path()).collect();
    writable.extend(tmp.filter(|t| t.writable).map(|t| t.path.as_path()));
    deny::denied(spawn, &writable)
}
