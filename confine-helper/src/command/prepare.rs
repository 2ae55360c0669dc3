//! Deciding how a request runs: the rules every request meets, the ceiling, the backend
//! (probed once by running `true` confined, then cached) and its plan.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use confine_protocol::environment::DEFAULT_PATH;
use confine_protocol::{
    Backend, EnvVar, ExitStatus, Limits, Mode, Policy, Refusal, Reply, Spawn, Stdio, StdioSpec,
};
use nix::fcntl::OFlag;
use nix::libc;

use super::start::{program_candidates, start};
use crate::confine::{self, Context, NotRun, Plan, Unusable};
use crate::sys;

/// Checks a request against the rules every request must meet, whatever its mode.
pub(crate) fn check(spawn: &Spawn) -> Result<(), NotRun> {
    let refuse = |reason: Refusal| Err(NotRun::Refused(reason));
    if spawn.argv.is_empty() {
        return refuse(Refusal::EmptyArgv);
    }
    if let Some(i) = spawn.argv.iter().position(|a| a.contains(&0)) {
        return refuse(Refusal::NulInArgv { index: count(i) });
    }
    if spawn.argv.first().is_some_and(|program| program.is_empty()) {
        return refuse(Refusal::EmptyProgram);
    }
    if spawn.cwd.first() != Some(&b'/') {
        return refuse(Refusal::RelativeCwd);
    }
    if spawn.cwd.contains(&0) {
        return refuse(Refusal::NulInCwd);
    }
    for (i, var) in spawn.env.iter().enumerate() {
        if var.name.is_empty() || var.name.contains(&b'=') || var.name.contains(&0) {
            return refuse(Refusal::BadEnvName { index: count(i) });
        }
        if var.value.contains(&0) {
            return refuse(Refusal::NulInEnvValue { index: count(i) });
        }
    }
    if let Some(field) = nul_in_policy(&spawn.policy) {
        return refuse(Refusal::NulInPolicy { field });
    }
    Ok(())
}

/// A position in a request's list, as a refusal names it.
fn count(i: usize) -> u64 {
    u64::try_from(i).unwrap_or(u64::MAX)
}

/// The policy path that holds a NUL byte, named as its field. No path can hold one: caught
/// here, it is refused in the field's name rather than failing wherever it is first opened.
fn nul_in_policy(policy: &Policy) -> Option<String> {
    let has_nul = |path: &Vec<u8>| path.contains(&0);
    for (name, path) in [
        ("workspace_root", &policy.workspace_root),
        ("session_temp", &policy.session_temp),
    ] {
        if path.as_ref().is_some_and(has_nul) {
            return Some(name.to_owned());
        }
    }
    for (name, list) in [
        ("writable_roots", &policy.writable_roots),
        ("protected", &policy.protected),
        ("never_writable", &policy.never_writable),
        ("deny_read", &policy.deny_read),
        ("unix_sockets", &policy.unix_sockets),
    ] {
        if let Some(i) = list.iter().position(has_nul) {
            return Some(format!("{name}[{i}]"));
        }
    }
    None
}

/// Decides how `spawn` runs: the ceiling (its environment rules first), the writable roots,
/// the backend (probed once, then cached) and its plan.
pub(crate) fn prepare(
    spawn: &Spawn,
    ctx: &Context,
    mut proxy: Option<OwnedFd>,
) -> Result<Plan, NotRun> {
    confine::check_environment(spawn, ctx)?;
    let roots = confine::writable_roots(spawn, ctx)?;
    if spawn.policy.mode == Mode::DangerFullAccess {
        // Unconfined, the command has the network itself: the bridge's socket is not needed.
        return confine::plan(spawn, ctx, Backend::None, &roots, None);
    }
    let mut tried = Vec::new();
    for backend in confine::candidates(spawn.backend) {
        match verdict(backend, ctx) {
            Ok(()) => {
                let plan = confine::plan(spawn, ctx, backend, &roots, proxy.take())?;
                // bwrap (and sandbox-exec, with its own exit status) reports its own exec
                // failures as an exit with a message; answer them the same way on every backend
                // instead.
                if matches!(backend, Backend::Bwrap | Backend::Seatbelt)
                    && let Some(errno) = exec_error(spawn)
                {
                    return Err(NotRun::ExecFailed(
                        errno,
                        plan.backend,
                        plan.enforcement.clone(),
                        plan.layers.clone(),
                    ));
                }
                return Ok(plan);
            }
            Err(why) => tried.push((backend, why)),
        }
    }
    Err(confine::unavailable(spawn.policy.mode, &tried))
}

/// A backend's verdict: known in this process, else usable by an earlier helper's probe (a hint
/// agentd sent), else decided by a functional probe.
pub(crate) fn verdict(backend: Backend, ctx: &Context) -> Result<(), Unusable> {
    if let Some(verdict) = ctx.verdict(backend) {
        return verdict;
    }
    let verdict = confine::static_verdict(backend, ctx).and_then(|()| {
        if ctx.usable_before(backend) {
            return Ok(());
        }
        probe(backend, ctx)
    });
    ctx.set_verdict(backend, verdict.clone());
    verdict
}

/// Runs `true` confined by `backend` in read-only mode, through the same path as every
/// command, and waits for it: the backend is usable only if that succeeds.
fn probe(backend: Backend, ctx: &Context) -> Result<(), Unusable> {
    let spawn = Spawn {
        id: 0,
        argv: vec![b"true".to_vec()],
        cwd: b"/".to_vec(),
        env: vec![EnvVar {
            name: b"PATH".to_vec(),
            value: DEFAULT_PATH.as_bytes().to_vec(),
        }],
        policy: Policy::read_only(),
        backend: confine_protocol::BackendChoice::Auto,
        limits: Limits::none().with_timeout(Some(30_000)),
        stdio: Stdio {
            stdin: StdioSpec::Null,
            stdout: StdioSpec::Null,
            stderr: StdioSpec::Fd,
        },
        proxy: false,
    };
    let describe = |not_run: NotRun| match not_run.into_reply(0) {
        Reply::RunnerFailed(f) => Unusable::RunnerFailed {
            stage: f.stage,
            detail: f.detail,
            stderr: String::new(),
        },
        Reply::Refused(r) => Unusable::Refused(r.reason),
        other => Unusable::NotStarted(Box::new(other)),
    };
    let plan = confine::plan(&spawn, ctx, backend, &[], None).map_err(describe)?;
    let (err_rd, err_wr) = sys::pipe_cloexec().map_err(Unusable::Pipe)?;
    nix::fcntl::fcntl(&err_rd, nix::fcntl::FcntlArg::F_SETFL(OFlag::O_NONBLOCK))
        .map_err(Unusable::Pipe)?;
    let mut running = start(&spawn, [None, None, Some(err_wr)], plan).map_err(describe)?;
    loop {
        let mut fds = [libc::pollfd {
            fd: running.status.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        sys::poll(&mut fds, 30_000).map_err(|e| Unusable::Poll(e.raw_os_error().unwrap_or(0)))?;
        if fds[0].revents == 0 {
            running.order(sys::CTL_KILL);
        }
        if running.read_status().1 {
            break;
        }
    }
    let mut stderr = vec![0u8; 4096];
    let n = nix::unistd::read(&err_rd, &mut stderr).unwrap_or(0);
    // What the runner said on its way out, e.g. bwrap's reason for not building the sandbox.
    let stderr = String::from_utf8_lossy(stderr.get(..n).unwrap_or_default())
        .trim()
        .to_owned();
    match running.finish() {
        Reply::Exited(e) if e.status == ExitStatus::Code(0) => Ok(()),
        Reply::Exited(e) => Err(Unusable::Ended {
            status: e.status,
            stderr,
        }),
        Reply::RunnerFailed(f) => Err(Unusable::RunnerFailed {
            stage: f.stage,
            detail: f.detail,
            stderr,
        }),
        other => Err(Unusable::Unexpected(Box::new(other))),
    }
}

/// The errno `execvp` of `argv[0]` would fail with, judged from the files: `ENOENT` when no
/// candidate exists, `EACCES` when one exists but none is an executable regular file.
fn exec_error(spawn: &Spawn) -> Option<i32> {
    use std::os::unix::fs::PermissionsExt;
    let mut found = false;
    for candidate in program_candidates(spawn) {
        let path = std::path::Path::new(std::ffi::OsStr::from_bytes(candidate.as_bytes()));
        if let Ok(meta) = std::fs::metadata(path) {
            found = true;
            if meta.is_file() && meta.permissions().mode() & 0o111 != 0 {
                return None;
            }
        }
    }
    Some(if found { libc::EACCES } else { libc::ENOENT })
}
