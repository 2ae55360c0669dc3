//! A command's start: from its plan, everything the forked processes need is built before the
//! shim is forked (`sys::Prepared`), and the shim is forked.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use confine_protocol::environment::DEFAULT_PATH;
use confine_protocol::{Backend, Ending, Spawn, Stage};
use nix::fcntl::OFlag;
use nix::unistd::Pid;

use super::running::{Running, sandbox_failed};
use crate::confine::{Applied, Confinement, NotRun, Plan};
#[cfg(target_os = "linux")]
use crate::sys::ShimConnects;
use crate::sys::{self, CStringArray, ChildConfine, Prepared};

/// Forks the shim for `spawn` under `plan`, with the given stdio (taken from the connection).
pub(crate) fn start(
    spawn: &Spawn,
    stdio: [Option<OwnedFd>; 3],
    plan: Plan,
) -> Result<Running, NotRun> {
    let null = null_for(&stdio)?;
    let raw = |fd: &Option<OwnedFd>| match fd {
        Some(fd) => fd.as_raw_fd(),
        None => null.as_ref().map_or(-1, AsRawFd::as_raw_fd),
    };
    let stdio_raw = [raw(&stdio[0]), raw(&stdio[1]), raw(&stdio[2])];

    let (status_rd, status_wr) =
        sys::pipe_cloexec().map_err(|e| failed(Stage::Pipe, e, "status pipe"))?;
    let (ctl_rd, ctl_wr) = sys::pipe_cloexec().map_err(|e| failed(Stage::Pipe, e, "ctl pipe"))?;
    nix::fcntl::fcntl(&status_rd, nix::fcntl::FcntlArg::F_SETFL(OFlag::O_NONBLOCK))
        .map_err(|e| failed(Stage::Pipe, e, "status pipe"))?;

    #[cfg(target_os = "linux")]
    let mut plan = plan;
    #[cfg(target_os = "linux")]
    let layer_report = match &mut plan.confinement {
        Confinement::Bwrap { report, .. } => report.take(),
        _ => None,
    };
    let prepared = Prepared {
        programs: programs(spawn, &plan),
        argv: CStringArray::new(plan.argv.iter().map(|a| c_string(a)).collect()),
        envp: CStringArray::new(
            plan.env
                .iter()
                .map(|v| c_string(&[v.name.as_slice(), b"=", v.value.as_slice()].concat()))
                .collect(),
        ),
        cwd: c_string(&spawn.cwd),
        stdio: stdio_raw,
        status_wr: status_wr.as_raw_fd(),
        ctl_rd: ctl_rd.as_raw_fd(),
        confine: child_confine(&plan.confinement)?,
        passed: passed_fds(&plan.confinement),
        rlimits: plan.rlimits.clone(),
        cgroup_procs: cgroup_procs(&plan.caps.applied),
        #[cfg(target_os = "linux")]
        connects: shim_connects(&plan),
        #[cfg(target_os = "linux")]
        sandbox: match &plan.confinement {
            Confinement::Namespaces { sandbox, .. } => Some(sandbox),
            _ => None,
        },
    };
    let started_at = Instant::now();
    let shim = sys::fork_shim(&prepared).map_err(|e| shim_not_forked(&e, plan.backend))?;
    drop((status_wr, ctl_rd, stdio, null));

    let deadline = spawn
        .limits
        .timeout_ms
        .map(|ms| started_at + Duration::from_millis(ms));
    Ok(Running {
        id: spawn.id,
        shim: Pid::from_raw(shim),
        status: status_rd,
        ctl: Some(ctl_wr),
        started_at,
        deadline,
        kill_grace: Duration::from_millis(u64::from(spawn.limits.kill_grace_ms)),
        kill_at: None,
        ending: Ending::Exited,
        backend: plan.backend,
        enforcement: plan.enforcement,
        layers: plan.layers,
        #[cfg(target_os = "linux")]
        layer_report,
        caps: plan.caps,
        cleanup: plan.cleanup,
        pending: Vec::new(),
        outcome: None,
    })
}

/// What the shim needs to supervise the command's `connect` calls, when it does.
#[cfg(target_os = "linux")]
fn shim_connects(plan: &Plan) -> Option<ShimConnects<'_>> {
    plan.connects.as_ref().map(|c| ShimConnects {
        notify: &c.notify,
        rules: &c.rules,
        proxy: matches!(
            plan.confinement,
            Confinement::Landlock { proxy: Some(_), .. }
        ),
    })
}

/// Why the shim was not forked. Under the namespace backend the shim is born in the
/// namespaces: a clone the kernel refuses for them (they are not allowed, or their limit is
/// reached) is the sandbox's failure, at the stage that builds it, so the backend's verdict is
/// dropped and the next command probes it again; only a process that cannot be made at all
/// (`EAGAIN`, `ENOMEM`) is the fork's.
fn shim_not_forked(e: &std::io::Error, backend: Backend) -> NotRun {
    let errno = e.raw_os_error().unwrap_or(0);
    let no_process = matches!(
        nix::Error::from_raw(errno),
        nix::Error::EAGAIN | nix::Error::ENOMEM
    );
    if backend == Backend::Namespaces && !no_process {
        return NotRun::RunnerFailed(Stage::Namespace, errno, sandbox_failed(errno));
    }
    NotRun::RunnerFailed(
        Stage::Fork,
        errno,
        format!("forking the command's supervisor: {e}"),
    )
}

/// `/dev/null`, for the streams the request left without a descriptor.
fn null_for(stdio: &[Option<OwnedFd>; 3]) -> Result<Option<OwnedFd>, NotRun> {
    if stdio.iter().all(Option::is_some) {
        return Ok(None);
    }
    nix::fcntl::open(
        c"/dev/null",
        OFlag::O_RDWR | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map(Some)
    .map_err(|e| failed(Stage::Stdio, e, "opening /dev/null"))
}

/// The `cgroup.procs` descriptors the shim moves the command into, when a cgroup counts its
/// tree.
fn cgroup_procs(applied: &Applied) -> Vec<std::os::fd::RawFd> {
    match applied {
        #[cfg(target_os = "linux")]
        Applied::Cgroup(cgroup) => cgroup.procs().iter().map(AsRawFd::as_raw_fd).collect(),
        _ => Vec::new(),
    }
}

/// A runner step of `stage` that failed with `err` while doing `what`.
fn failed(stage: Stage, err: nix::Error, what: &str) -> NotRun {
    NotRun::RunnerFailed(stage, err as i32, format!("{what}: {}", err.desc()))
}

/// A filter the kernel takes: at most `u16::MAX` instructions.
#[cfg(target_os = "linux")]
fn loadable(filter: &crate::bpf::Program) -> Result<&[nix::libc::sock_filter], NotRun> {
    if u16::try_from(filter.len()).is_ok() {
        Ok(filter.as_slice())
    } else {
        Err(NotRun::RunnerFailed(
            Stage::Seccomp,
            0,
            "seccomp program too long".into(),
        ))
    }
}

/// What the command applies to itself, as the shim receives it.
fn child_confine(confinement: &Confinement) -> Result<ChildConfine<'_>, NotRun> {
    Ok(match confinement {
        Confinement::None => ChildConfine::None,
        #[cfg(target_os = "linux")]
        Confinement::Bwrap { seccomp, .. } => ChildConfine::Bwrap {
            seccomp_fd: seccomp.as_raw_fd(),
        },
        #[cfg(target_os = "linux")]
        Confinement::Landlock {
            ruleset,
            filter,
            drop_caps,
            user_namespace,
            ..
        } => ChildConfine::Landlock {
            ruleset_fd: ruleset.as_raw_fd(),
            filter: loadable(filter)?,
            drop_caps: *drop_caps,
            user_namespace: user_namespace.as_ref(),
        },
        // In the namespaces its shim made: capabilities dropped always (root's there too).
        #[cfg(target_os = "linux")]
        Confinement::Namespaces {
            ruleset, filter, ..
        } => ChildConfine::Landlock {
            ruleset_fd: ruleset.as_raw_fd(),
            filter: loadable(filter)?,
            drop_caps: true,
            user_namespace: None,
        },
    })
}

/// The descriptors the shim places for the command (bwrap's mounts and `enter`'s), or keeps
/// for itself (the proxy's, under Landlock: the command receives no passed descriptor
/// without bwrap).
fn passed_fds(confinement: &Confinement) -> Vec<std::os::fd::RawFd> {
    match confinement {
        #[cfg(target_os = "linux")]
        Confinement::Bwrap { passed, .. } | Confinement::Namespaces { passed, .. } => {
            passed.iter().map(AsRawFd::as_raw_fd).collect()
        }
        #[cfg(target_os = "linux")]
        Confinement::Landlock {
            proxy: Some(proxy), ..
        } => vec![proxy.as_raw_fd()],
        _ => Vec::new(),
    }
}

/// The paths the shim tries to execute: bwrap and sandbox-exec are named by their paths, and
/// search the command's PATH themselves; an empty argv names no program, and the exec fails.
fn programs(spawn: &Spawn, plan: &Plan) -> Vec<CString> {
    match plan.backend {
        Backend::Bwrap | Backend::Seatbelt => {
            plan.argv.first().map(|p| c_string(p)).into_iter().collect()
        }
        // The file program, named by its descriptor (`/proc/self/fd/N`).
        Backend::Namespaces if plan.argv.first() != spawn.argv.first() => {
            plan.argv.first().map(|p| c_string(p)).into_iter().collect()
        }
        _ => program_candidates(spawn),
    }
}

/// Callers have already refused NUL bytes, so this cannot fail; an empty string is the
/// harmless fallback that execve then rejects.
fn c_string(bytes: &[u8]) -> CString {
    CString::new(bytes).unwrap_or_default()
}

/// The paths `execve` will try, in order, as `execvp` would search them.
pub(super) fn program_candidates(spawn: &Spawn) -> Vec<CString> {
    // No program (refused before a plan is made): nothing to try, and the exec fails.
    let Some(program) = spawn.argv.first() else {
        return Vec::new();
    };
    if program.contains(&b'/') {
        return vec![c_string(program)];
    }
    let path = spawn
        .env
        .iter()
        .rev()
        .find(|v| v.name == b"PATH")
        .map_or(DEFAULT_PATH.as_bytes(), |v| v.value.as_slice());
    path.split(|b| *b == b':')
        .map(|dir| {
            let dir = if dir.is_empty() { b".".as_slice() } else { dir };
            c_string(&[dir, b"/", program.as_slice()].concat())
        })
        .collect()
}
