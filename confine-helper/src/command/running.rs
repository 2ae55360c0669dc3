//! A forked command: its shim is started from a plan, receives orders, and its records become
//! the replies.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use confine_protocol::environment::DEFAULT_PATH;
use confine_protocol::{
    Backend, Caps, Ending, Enforcement, ExitStatus, Exited, Layer, Reply, RunnerFailed, Spawn,
    Stage, StdioSpec, Usage,
};
use nix::fcntl::OFlag;
use nix::libc;
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;

use crate::confine::{Applied, Cleanup, Confinement, NotRun, Plan, Planned};
#[cfg(target_os = "linux")]
use crate::enter::Entered;
use crate::record::{Record, exec_failure_code};
#[cfg(target_os = "linux")]
use crate::sys::ShimConnects;
use crate::sys::{self, CStringArray, ChildConfine, Prepared};

/// A command the helper has forked and not yet reported as ended.
#[derive(Debug)]
pub(crate) struct Running {
    pub(crate) id: u64,
    pub(crate) shim: Pid,
    /// Read end of the shim's status pipe (non-blocking).
    pub(crate) status: OwnedFd,
    /// Write end of the shim's ctl pipe; dropping it kills the tree.
    pub(crate) ctl: Option<OwnedFd>,
    pub(crate) started_at: Instant,
    pub(crate) deadline: Option<Instant>,
    pub(crate) kill_grace: Duration,
    pub(crate) kill_at: Option<Instant>,
    pub(crate) ending: Ending,
    backend: Backend,
    enforcement: Option<Enforcement>,
    layers: Vec<Layer>,
    /// The read end of `enter`'s report pipe (bwrap with the Landlock layer).
    #[cfg(target_os = "linux")]
    layer_report: Option<OwnedFd>,
    /// The caps on the tree; a cgroup among them is read at the end and removed with it.
    caps: Planned,
    /// What the plan made, removed when the command is dropped, once its shim is reaped.
    _cleanup: Cleanup,
    pending: Vec<u8>,
    outcome: Option<Record>,
}
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
        _cleanup: plan.cleanup,
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

/// The detail of a step the shim or the command reported failed with `errno`: where it failed
/// and why; the stage travels beside it, so it is not named here again.
pub(crate) fn step_failed(errno: i32) -> String {
    format!(
        "before the command's execve: {}",
        nix::Error::from_raw(errno).desc()
    )
}

/// The detail of a namespace backend's sandbox the shim could not build (`sys::sandbox`), with
/// what the two errors only its checks give mean there.
fn sandbox_failed(errno: i32) -> String {
    let why = match nix::Error::from_raw(errno) {
        nix::Error::ESTALE => "a path it binds was replaced after the helper checked it".into(),
        nix::Error::ELOOP => "a link stands where it mounts, or on the way there".into(),
        nix::Error::ENOSPC => "the most namespaces this user may have exist already \
                               (user.max_user_namespaces and its kind)"
            .into(),
        e @ (nix::Error::EPERM | nix::Error::EACCES) => format!(
            "{}: this user may not make or use the namespaces here (unprivileged user \
             namespaces are off, or an AppArmor rule keeps them from programs without a profile \
             of their own, as Ubuntu's kernel.apparmor_restrict_unprivileged_userns does)",
            e.desc()
        ),
        other => other.desc().to_owned(),
    };
    format!("building the sandbox failed: {why}; nothing was run")
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

impl Running {
    /// Sends one order to the shim. A shim that is already gone needs no order.
    pub(crate) fn order(&self, byte: u8) {
        if let Some(ctl) = &self.ctl {
            let _ = nix::unistd::write(ctl, &[byte]);
        }
    }

    /// Starts terminating the tree for `ending`: SIGTERM now, SIGKILL after `grace`.
    pub(crate) fn terminate(&mut self, ending: Ending, grace: Duration, now: Instant) {
        if self.ending == Ending::Exited {
            self.ending = ending;
        }
        self.deadline = None;
        self.order(sys::CTL_TERMINATE);
        let kill_at = now + grace;
        self.kill_at = Some(self.kill_at.map_or(kill_at, |k| k.min(kill_at)));
    }

    /// Reads what the shim wrote. Returns `Started` as soon as it arrives, and `true` in the
    /// second slot once the shim has closed its end (it exited).
    pub(crate) fn read_status(&mut self) -> (Option<Reply>, bool) {
        let mut started = None;
        let mut buf = [0u8; Record::SIZE * 4];
        loop {
            match nix::unistd::read(&self.status, &mut buf) {
                Ok(0) => return (started, true),
                Ok(n) => self.pending.extend(buf.iter().take(n)),
                Err(nix::Error::EINTR) => continue,
                Err(nix::Error::EAGAIN) => break,
                Err(_) => return (started, true),
            }
            while let Some(&raw) = self.pending.first_chunk::<{ Record::SIZE }>() {
                self.pending.drain(..Record::SIZE);
                match Record::decode(&raw) {
                    Some(Record::Started { pid }) => {
                        started = Some(Reply::Started(confine_protocol::Started {
                            id: self.id,
                            pid,
                        }));
                    }
                    other => self.outcome = other,
                }
            }
        }
        (started, false)
    }

    /// The backend that confines the command.
    pub(crate) fn backend(&self) -> Backend {
        self.backend
    }

    /// The terminal reply as soon as the shim's last record says the command ended: the shim
    /// writes it once it has killed and reaped the whole tree, and only exits after it, so the
    /// reply need not wait for that exit ([`Running::reap`] follows). `None` before that
    /// record, after a failed step (the shim may still hold a tree), and under bwrap (whose
    /// `enter` report is read at the end).
    pub(crate) fn reply_early(&self) -> Option<Reply> {
        let last = matches!(
            self.outcome,
            Some(Record::Exited { .. } | Record::ExecFailed { .. })
        );
        #[cfg(target_os = "linux")]
        let last = last && self.layer_report.is_none();
        last.then(|| self.reply("it reported its end"))
    }

    /// Reaps the shim (it has closed its status pipe, so it is exiting); its wait status, as
    /// the reply names it. What the plan made goes when the command is dropped.
    pub(crate) fn reap(&self) -> String {
        // __WALL (Linux): the shim is a child whatever its exit signal.
        #[cfg(target_os = "linux")]
        let flags = Some(WaitPidFlag::__WALL);
        #[cfg(target_os = "macos")]
        let flags: Option<WaitPidFlag> = None;
        let shim_status = loop {
            match waitpid(self.shim, flags) {
                Err(nix::Error::EINTR) => continue,
                other => break other,
            }
        };
        format!("{shim_status:?}")
    }

    /// Reaps the shim and turns what it reported into the terminal reply.
    pub(crate) fn finish(self) -> Reply {
        let shim_status = self.reap();
        self.reply(&shim_status)
    }

    /// The terminal reply from what the shim reported; `shim_status` names how the shim
    /// ended, for a shim that reported nothing.
    fn reply(&self, shim_status: &str) -> Reply {
        let caps = self.caps.at_end();
        let wall_us = u64::try_from(self.started_at.elapsed().as_micros()).unwrap_or(u64::MAX);
        if let Some(reply) = self.runner_reply(self.entered(), caps, wall_us) {
            return reply;
        }
        match self.outcome {
            Some(Record::Exited {
                wait_status,
                user_us,
                sys_us,
                max_rss_kib,
            }) => self.exited(
                decode_wait_status(wait_status),
                None,
                usage(wall_us, user_us, sys_us, max_rss_kib),
                caps,
            ),
            Some(Record::ExecFailed { errno }) => self.exited(
                ExitStatus::Code(exec_failure_code(errno)),
                Some(errno),
                usage(wall_us, 0, 0, 0),
                caps,
            ),
            Some(Record::StageFailed { stage, errno }) => {
                let stage = Stage::from_index(stage).unwrap_or(Stage::Supervise);
                let detail = match stage {
                    Stage::Namespace => sandbox_failed(errno),
                    _ => step_failed(errno),
                };
                self.not_run(stage, errno, detail)
            }
            Some(Record::Started { .. }) | None => self.not_run(
                Stage::Supervise,
                0,
                format!(
                    "the command's supervisor ended without reporting ({shim_status}); \
                     its process tree may not have been cleaned up"
                ),
            ),
        }
    }

    /// What `enter` reported from inside the sandbox: a layer that failed means the command
    /// never ran; an exec failure is the command's; nothing at all means bwrap ended before it
    /// ran `enter`, so the sandbox was never built. (Linux only: macOS has no `enter`.)
    fn entered(&self) -> Option<Report> {
        #[cfg(target_os = "linux")]
        return self.layer_report.as_ref().map(|fd| {
            let mut buf = [0u8; crate::enter::REPORT_MAX];
            let n = nix::unistd::read(fd, &mut buf).unwrap_or(0);
            // A count past the buffer reads as nothing reported: the sandbox was not built.
            crate::enter::decode_report(buf.get(..n).unwrap_or_default())
        });
        #[cfg(target_os = "macos")]
        None
    }

    /// The reply when the runner, not the command, decided the end: a layer or the bridge
    /// that failed inside the sandbox, the command's exec that `enter` reported, the runner's
    /// own exec, or bwrap ending before the command started. `None`: the shim's records decide.
    fn runner_reply(&self, entered: Option<Report>, caps: Caps, wall_us: u64) -> Option<Reply> {
        #[cfg(target_os = "macos")]
        let _ = (caps, wall_us);
        Some(match (entered, &self.outcome) {
            #[cfg(target_os = "linux")]
            (Some(Entered::LayerFailed(errno)), _) => self.not_run(
                Stage::Landlock,
                errno,
                format!(
                    "applying the Landlock layer inside the sandbox failed: {}; nothing was run",
                    nix::Error::from_raw(errno).desc()
                ),
            ),
            #[cfg(target_os = "linux")]
            (Some(Entered::BridgeFailed(errno)), _) => self.not_run(
                Stage::Namespace,
                errno,
                format!(
                    "starting the proxy bridge inside the sandbox failed: {}; nothing was run",
                    nix::Error::from_raw(errno).desc()
                ),
            ),
            #[cfg(target_os = "linux")]
            (Some(Entered::ExecFailed(errno)), _) => self.exited(
                ExitStatus::Code(exec_failure_code(errno)),
                Some(errno),
                usage(wall_us, 0, 0, 0),
                caps,
            ),
            // The runner's own exec: under bwrap (sandbox-exec) the program executed is bwrap
            // (sandbox-exec), not the command.
            (_, Some(Record::ExecFailed { errno }))
                if matches!(self.backend, Backend::Bwrap | Backend::Seatbelt) =>
            {
                let runner = match self.backend {
                    Backend::Seatbelt => "sandbox-exec",
                    _ => "bwrap",
                };
                self.not_run(
                    Stage::RunnerExec,
                    *errno,
                    format!(
                        "executing {runner} failed: {}; nothing was run",
                        nix::Error::from_raw(*errno).desc()
                    ),
                )
            }
            #[cfg(target_os = "linux")]
            (Some(Entered::Never), Some(Record::Exited { wait_status, .. }))
                if self.ending == Ending::Exited =>
            {
                let how = match decode_wait_status(*wait_status) {
                    ExitStatus::Code(code) => format!("exited with status {code}"),
                    ExitStatus::Signal(signal) => format!("was killed by signal {signal}"),
                };
                self.not_run(
                    Stage::Namespace,
                    0,
                    format!(
                        "bwrap {how} before the command started: it could not build the sandbox; \
                         nothing was run"
                    ),
                )
            }
            _ => return None,
        })
    }

    fn exited(
        &self,
        status: ExitStatus,
        exec_errno: Option<i32>,
        usage: Usage,
        caps: Caps,
    ) -> Reply {
        Reply::Exited(Exited {
            id: self.id,
            status,
            exec_errno,
            ending: self.ending,
            backend: self.backend,
            enforcement: self.enforcement.clone(),
            layers: self.layers.clone(),
            usage,
            caps,
        })
    }

    fn not_run(&self, stage: Stage, errno: i32, detail: String) -> Reply {
        Reply::RunnerFailed(RunnerFailed {
            id: self.id,
            stage,
            errno,
            detail,
        })
    }
}

/// What `enter` reports; macOS has no `enter`, and nothing to report.
#[cfg(target_os = "linux")]
type Report = Entered;
#[cfg(target_os = "macos")]
type Report = std::convert::Infallible;

fn usage(wall_us: u64, user_us: u64, sys_us: u64, max_rss_kib: u64) -> Usage {
    Usage {
        wall_us,
        user_us,
        sys_us,
        max_rss_kib,
    }
}

fn decode_wait_status(status: i32) -> ExitStatus {
    if libc::WIFSIGNALED(status) {
        ExitStatus::Signal(libc::WTERMSIG(status))
    } else {
        ExitStatus::Code(libc::WEXITSTATUS(status))
    }
}

/// How many descriptors a request declares: its stdio's, and the proxy's socket.
pub(crate) fn declared_fds(spawn: &Spawn) -> usize {
    [spawn.stdio.stdin, spawn.stdio.stdout, spawn.stdio.stderr]
        .iter()
        .filter(|s| **s == StdioSpec::Fd)
        .count()
        + usize::from(spawn.proxy)
}

#[cfg(test)]
mod tests {
    use confine_protocol::Stage;

    use crate::confine::Unusable;

    /// A step the shim or the command reported is named once by the probe's verdict, which
    /// puts the stage before the detail; the control: a detail that named its stage itself, as
    /// this one did, reads it twice.
    /// A sandbox the namespace backend's shim could not build says why in the words of its own
    /// checks (a path swapped since the helper checked it, a link where it mounts), and
    /// otherwise the system's; each says nothing ran.
    #[test]
    fn a_sandbox_not_built_says_which_check_failed() {
        assert_eq!(
            super::sandbox_failed(nix::libc::ESTALE),
            "building the sandbox failed: a path it binds was replaced after the helper checked \
             it; nothing was run"
        );
        assert_eq!(
            super::sandbox_failed(nix::libc::ELOOP),
            "building the sandbox failed: a link stands where it mounts, or on the way there; nothing \
             was run"
        );
        assert!(
            super::sandbox_failed(nix::libc::EPERM).starts_with(
                "building the sandbox failed: Operation not permitted: this user may not make or \
                 use the namespaces here"
            ),
            "{}",
            super::sandbox_failed(nix::libc::EPERM)
        );
        assert_eq!(
            super::sandbox_failed(nix::libc::EIO),
            "building the sandbox failed: I/O error; nothing was run"
        );
    }

    /// A command watched over `status`, as `start` makes it, its shim `shim`.
    fn watching(shim: &std::process::Child, status: std::os::fd::OwnedFd) -> super::Running {
        let shim = i32::try_from(shim.id()).expect("a pid");
        super::Running {
            id: 7,
            shim: nix::unistd::Pid::from_raw(shim),
            status,
            ctl: None,
            started_at: std::time::Instant::now(),
            deadline: None,
            kill_grace: std::time::Duration::ZERO,
            kill_at: None,
            ending: confine_protocol::Ending::Exited,
            backend: confine_protocol::Backend::Landlock,
            enforcement: None,
            layers: Vec::new(),
            #[cfg(target_os = "linux")]
            layer_report: None,
            caps: crate::confine::Planned::none(),
            _cleanup: crate::confine::Cleanup::default(),
            pending: Vec::new(),
            outcome: None,
        }
    }

    /// The terminal reply goes out as soon as the shim's last record arrives, before the shim
    /// has exited (here the test holds the status pipe's write end, as a shim does until its
    /// exit), and once; the shim is reaped at the end. The control: after a failed step's
    /// record, when the shim may still hold a tree, the reply waits for the shim's end.
    #[test]
    fn the_last_record_is_answered_before_the_shim_is_gone() {
        use confine_protocol::{ExitStatus, Reply};
        use nix::fcntl::{FcntlArg, OFlag, fcntl};

        use crate::record::Record;

        let exited = Record::Exited {
            wait_status: 3 << 8,
            user_us: 0,
            sys_us: 0,
            max_rss_kib: 0,
        };
        let exec_failed = Record::ExecFailed {
            errno: nix::libc::ENOENT,
        };
        let setsid_failed = Record::StageFailed {
            stage: Stage::Setsid.index(),
            errno: nix::libc::EPERM,
        };
        for (record, early) in [(exited, true), (exec_failed, true), (setsid_failed, false)] {
            #[expect(clippy::zombie_processes, reason = "reaped as a shim is, below")]
            let shim = std::process::Command::new("true").spawn().expect("a child");
            let (status, status_wr) = crate::sys::pipe_cloexec().expect("a pipe");
            fcntl(&status, FcntlArg::F_SETFL(OFlag::O_NONBLOCK)).expect("non-blocking");
            let mut running = watching(&shim, status);
            for written in [Record::Started { pid: 8 }, record] {
                nix::unistd::write(&status_wr, &written.encode()).expect("written");
            }
            let (started, ended) = running.read_status();
            assert!(started.is_some() && !ended, "{record:?}");
            let reply = running.reply_early();
            assert_eq!(reply.is_some(), early, "{record:?}: {reply:?}");
            drop(status_wr);
            assert!(running.read_status().1, "the end, once the shim is gone");
            if let Some(reply) = reply {
                let Reply::Exited(exited) = reply else {
                    panic!("{record:?}: {reply:?}")
                };
                let code = if exited.exec_errno.is_some() { 127 } else { 3 };
                assert_eq!(exited.status, ExitStatus::Code(code));
                running.reap();
            } else {
                let reply = running.finish();
                assert!(
                    matches!(&reply, Reply::RunnerFailed(f) if f.stage == Stage::Setsid),
                    "{reply:?}"
                );
            }
        }
    }

    #[test]
    fn a_reported_step_names_its_stage_once() {
        let verdict = |detail: String| {
            Unusable::RunnerFailed {
                stage: Stage::UserNamespace,
                detail,
                stderr: String::new(),
            }
            .to_string()
        };
        assert_eq!(
            verdict(super::step_failed(nix::libc::EPERM)),
            "user-namespace failed: before the command's execve: Operation not permitted"
        );
        let named = verdict("user-namespace failed: Operation not permitted".to_owned());
        assert_eq!(named.matches("user-namespace failed").count(), 2, "{named}");
    }
}
