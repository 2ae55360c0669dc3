//! One command's life in the helper: the request is checked, everything the forked processes
//! need is built, the shim is forked, and its records become replies.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};

use confine_protocol::{
    Backend, BackendChoice, Ending, Enforcement, EnvVar, ExitStatus, Exited, Layer, Limits, Mode,
    Network, Policy, ReadFile, Refused, Reply, RunnerFailed, Spawn, Stage, Stdio, StdioSpec, Usage,
    WriteFile,
};
use nix::fcntl::OFlag;
use nix::libc;
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;

use crate::confine::{self, Cleanup, Confinement, Context, Plan};
use crate::sys::{self, CStringArray, ChildConfine, Prepared, Record};

/// Used when the request's environment has no `PATH`.
const DEFAULT_PATH: &[u8] = b"/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// A command the helper has forked and not yet reported as ended.
#[derive(Debug)]
pub struct Running {
    pub id: u64,
    pub shim: Pid,
    /// Read end of the shim's status pipe (non-blocking).
    pub status: OwnedFd,
    /// Write end of the shim's ctl pipe; dropping it kills the tree.
    pub ctl: Option<OwnedFd>,
    pub started_at: Instant,
    pub deadline: Option<Instant>,
    pub kill_grace: Duration,
    pub kill_at: Option<Instant>,
    pub ending: Ending,
    backend: Backend,
    enforcement: Option<Enforcement>,
    layers: Vec<Layer>,
    /// The read end of `enter`'s report pipe (bwrap with the Landlock layer).
    layer_report: Option<OwnedFd>,
    cleanup: Cleanup,
    pending: Vec<u8>,
    outcome: Option<Record>,
}

/// Why a spawn produced no running command.
#[derive(Debug)]
pub enum NotRun {
    Refused(String),
    RunnerFailed(Stage, i32, String),
    /// `execve` of the program would fail with this errno: an exec failure of the command,
    /// found before forking.
    ExecFailed(i32, Backend, Option<Enforcement>, Vec<Layer>),
}

impl NotRun {
    pub fn into_reply(self, id: u64) -> Reply {
        match self {
            NotRun::Refused(reason) => Reply::Refused(Refused { id, reason }),
            NotRun::RunnerFailed(stage, errno, detail) => Reply::RunnerFailed(RunnerFailed {
                id,
                stage,
                errno,
                detail,
            }),
            NotRun::ExecFailed(errno, backend, enforcement, layers) => Reply::Exited(Exited {
                id,
                status: ExitStatus::Code(exec_failure_code(errno)),
                exec_errno: Some(errno),
                ending: Ending::Exited,
                backend,
                enforcement,
                layers,
                usage: Usage {
                    wall_us: 0,
                    user_us: 0,
                    sys_us: 0,
                    max_rss_kib: 0,
                },
            }),
        }
    }
}

/// The command a `WriteFile` becomes: the helper's own binary in `write-file` mode, with the
/// content on stdin and the report pipe on stdout. The second value is why it must not run, if
/// it must not.
pub fn write_spawn(write: &WriteFile, ctx: &Context) -> (Spawn, Option<NotRun>) {
    let mut args = vec![b"write-file".to_vec()];
    if write.make_parents {
        args.push(b"--parents".to_vec());
    }
    let stdio = Stdio {
        stdin: StdioSpec::Fd,
        stdout: StdioSpec::Fd,
        stderr: StdioSpec::Null,
    };
    let op = OwnProgram {
        id: write.id,
        args,
        path: &write.path,
        policy: &write.policy,
        backend: write.backend,
        timeout_ms: write.timeout_ms,
        stdio,
    };
    op.spawn(ctx)
}

/// The command a `ReadFile` becomes: the helper's own binary in `read-file` mode, with the
/// content pipe on stdout and the report pipe on stderr.
pub fn read_spawn(read: &ReadFile, ctx: &Context) -> (Spawn, Option<NotRun>) {
    let stdio = Stdio {
        stdin: StdioSpec::Null,
        stdout: StdioSpec::Fd,
        stderr: StdioSpec::Fd,
    };
    let op = OwnProgram {
        id: read.id,
        args: vec![
            b"read-file".to_vec(),
            b"--max".to_vec(),
            read.max_bytes.to_string().into_bytes(),
        ],
        path: &read.path,
        policy: &read.policy,
        backend: read.backend,
        timeout_ms: read.timeout_ms,
        stdio,
    };
    op.spawn(ctx)
}

/// A run of the helper's own binary on one file, under a request's policy.
struct OwnProgram<'a> {
    id: u64,
    args: Vec<Vec<u8>>,
    path: &'a [u8],
    policy: &'a Policy,
    backend: BackendChoice,
    timeout_ms: Option<u64>,
    stdio: Stdio,
}

impl OwnProgram<'_> {
    fn spawn(self, ctx: &Context) -> (Spawn, Option<NotRun>) {
        let mut problem = None;
        let exe = match &ctx.self_exe {
            Some(exe) => exe.as_os_str().as_bytes().to_vec(),
            None => {
                problem = Some(NotRun::RunnerFailed(
                    Stage::Prepare,
                    0,
                    "the helper cannot find its own binary, which reads and writes files confined"
                        .into(),
                ));
                b"confine-helper".to_vec()
            }
        };
        if self.path.first() != Some(&b'/') {
            problem = Some(NotRun::Refused(
                "the path of a file to read or write must be absolute".into(),
            ));
        }
        let mut argv = vec![exe];
        argv.extend(self.args);
        argv.extend([b"--".to_vec(), self.path.to_vec()]);
        let spawn = Spawn {
            id: self.id,
            argv,
            cwd: b"/".to_vec(),
            env: Vec::new(),
            policy: self.policy.clone(),
            backend: self.backend,
            limits: Limits {
                timeout_ms: self.timeout_ms,
                kill_grace_ms: 0,
                max_processes: None,
                max_file_size: None,
                max_address_space: None,
            },
            stdio: self.stdio,
        };
        (spawn, problem)
    }
}

/// Checks a request against the rules every request must meet, whatever its mode.
pub fn check(spawn: &Spawn) -> Result<(), NotRun> {
    let refuse = |reason: String| Err(NotRun::Refused(reason));
    if spawn.argv.is_empty() {
        return refuse("argv is empty: there is no program to run".into());
    }
    if let Some(i) = spawn.argv.iter().position(|a| a.contains(&0)) {
        return refuse(format!("argv[{i}] contains a NUL byte"));
    }
    if spawn.argv[0].is_empty() {
        return refuse("argv[0] is empty: there is no program to run".into());
    }
    if spawn.cwd.first() != Some(&b'/') {
        return refuse("cwd must be an absolute path".into());
    }
    if spawn.cwd.contains(&0) {
        return refuse("cwd contains a NUL byte".into());
    }
    for (i, var) in spawn.env.iter().enumerate() {
        if var.name.is_empty() || var.name.contains(&b'=') || var.name.contains(&0) {
            return refuse(format!(
                "environment entry {i} has an invalid name (empty, or contains '=' or NUL)"
            ));
        }
        if var.value.contains(&0) {
            return refuse(format!("environment entry {i} has a NUL byte in its value"));
        }
    }
    Ok(())
}

/// Decides how `spawn` runs: the ceiling (its environment rules first), the writable roots,
/// the backend (probed once, then cached) and its plan.
pub fn prepare(spawn: &Spawn, ctx: &Context) -> Result<Plan, NotRun> {
    confine::check_environment(spawn, ctx)?;
    let roots = confine::writable_roots(spawn, ctx)?;
    if spawn.policy.mode == Mode::DangerFullAccess {
        return confine::plan(spawn, ctx, Backend::None, &roots);
    }
    let mut tried = Vec::new();
    for backend in confine::candidates(spawn.backend) {
        match verdict(backend, ctx) {
            Ok(()) => {
                let plan = confine::plan(spawn, ctx, backend, &roots)?;
                // bwrap reports its own exec failures as exit 1 with a message; answer them the
                // same way on every backend instead.
                if backend == Backend::Bwrap {
                    if let Some(errno) = exec_error(spawn) {
                        return Err(NotRun::ExecFailed(
                            errno,
                            plan.backend,
                            plan.enforcement.clone(),
                            plan.layers.clone(),
                        ));
                    }
                }
                return Ok(plan);
            }
            Err(why) => tried.push((backend, why)),
        }
    }
    Err(confine::unavailable(spawn.policy.mode, &tried))
}

/// A backend's verdict: cached, else decided by a functional probe.
pub fn verdict(backend: Backend, ctx: &Context) -> Result<(), String> {
    if let Some(verdict) = ctx.verdict(backend) {
        return verdict;
    }
    let verdict = confine::static_verdict(backend, ctx).and_then(|()| probe(backend, ctx));
    ctx.set_verdict(backend, verdict.clone());
    verdict
}

/// Runs `true` confined by `backend` in read-only mode, through the same path as every
/// command, and waits for it: the backend is usable only if that succeeds.
fn probe(backend: Backend, ctx: &Context) -> Result<(), String> {
    let spawn = Spawn {
        id: 0,
        argv: vec![b"true".to_vec()],
        cwd: b"/".to_vec(),
        env: vec![EnvVar {
            name: b"PATH".to_vec(),
            value: DEFAULT_PATH.to_vec(),
        }],
        policy: Policy {
            mode: Mode::ReadOnly,
            workspace_root: None,
            writable_roots: Vec::new(),
            network: Network::Deny,
            protected: Vec::new(),
            never_writable: Vec::new(),
        },
        backend: confine_protocol::BackendChoice::Auto,
        limits: Limits {
            timeout_ms: Some(30_000),
            kill_grace_ms: 0,
            max_processes: None,
            max_file_size: None,
            max_address_space: None,
        },
        stdio: Stdio {
            stdin: StdioSpec::Null,
            stdout: StdioSpec::Null,
            stderr: StdioSpec::Fd,
        },
    };
    let describe = |not_run: NotRun| match not_run.into_reply(0) {
        Reply::RunnerFailed(f) => format!("{} failed: {}", f.stage.as_str(), f.detail),
        Reply::Refused(r) => r.reason,
        other => format!("{other:?}"),
    };
    let plan = confine::plan(&spawn, ctx, backend, &[]).map_err(describe)?;
    let (err_rd, err_wr) =
        nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK).map_err(|e| e.to_string())?;
    let mut running = start(&spawn, [None, None, Some(err_wr)], plan).map_err(describe)?;
    loop {
        let mut fds = [libc::pollfd {
            fd: running.status.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        sys::poll(&mut fds, 30_000).map_err(|e| e.to_string())?;
        if fds[0].revents == 0 {
            running.order(sys::CTL_KILL);
        }
        if running.read_status().1 {
            break;
        }
    }
    let mut stderr = vec![0u8; 4096];
    let n = nix::unistd::read(&err_rd, &mut stderr).unwrap_or(0);
    let stderr = String::from_utf8_lossy(&stderr[..n]).trim().to_owned();
    match running.finish() {
        Reply::Exited(e) if e.status == ExitStatus::Code(0) => Ok(()),
        Reply::Exited(e) => Err(format!(
            "a confined `true` ended with {:?}{}",
            e.status,
            if stderr.is_empty() {
                String::new()
            } else {
                format!(": {stderr}")
            }
        )),
        Reply::RunnerFailed(f) => Err(format!("{} failed: {}", f.stage.as_str(), f.detail)),
        other => Err(format!("unexpected probe result {other:?}")),
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

/// Forks the shim for `spawn` under `plan`, with the given stdio (taken from the connection).
pub fn start(
    spawn: &Spawn,
    stdio: [Option<OwnedFd>; 3],
    mut plan: Plan,
) -> Result<Running, NotRun> {
    let failed = |stage: Stage, err: nix::Error, what: &str| {
        NotRun::RunnerFailed(stage, err as i32, format!("{what}: {}", err.desc()))
    };
    let null = if stdio.iter().any(Option::is_none) {
        Some(
            nix::fcntl::open(
                c"/dev/null",
                OFlag::O_RDWR | OFlag::O_CLOEXEC,
                nix::sys::stat::Mode::empty(),
            )
            .map_err(|e| failed(Stage::Stdio, e, "opening /dev/null"))?,
        )
    } else {
        None
    };
    let raw = |fd: &Option<OwnedFd>| match fd {
        Some(fd) => fd.as_raw_fd(),
        None => null.as_ref().map_or(-1, AsRawFd::as_raw_fd),
    };
    let stdio_raw = [raw(&stdio[0]), raw(&stdio[1]), raw(&stdio[2])];

    let (status_rd, status_wr) =
        nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| failed(Stage::Pipe, e, "status pipe"))?;
    let (ctl_rd, ctl_wr) =
        nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| failed(Stage::Pipe, e, "ctl pipe"))?;
    nix::fcntl::fcntl(&status_rd, nix::fcntl::FcntlArg::F_SETFL(OFlag::O_NONBLOCK))
        .map_err(|e| failed(Stage::Pipe, e, "status pipe"))?;

    let confine = match &plan.confinement {
        Confinement::None => ChildConfine::None,
        Confinement::Bwrap { seccomp, .. } => ChildConfine::Bwrap {
            seccomp_fd: seccomp.as_raw_fd(),
        },
        Confinement::Landlock {
            ruleset,
            filter,
            drop_caps,
        } => ChildConfine::Landlock {
            ruleset_fd: ruleset.as_raw_fd(),
            filter: filter.as_ptr(),
            filter_len: u16::try_from(filter.len()).map_err(|_| {
                NotRun::RunnerFailed(Stage::Seccomp, 0, "seccomp program too long".into())
            })?,
            drop_caps: *drop_caps,
        },
    };
    let programs = match plan.backend {
        Backend::Bwrap => vec![c_string(&plan.argv[0])],
        _ => program_candidates(spawn),
    };
    let prepared = Prepared {
        programs: CStringArray::new(programs),
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
        confine,
        passed: match &plan.confinement {
            Confinement::Bwrap { passed, .. } => passed.iter().map(AsRawFd::as_raw_fd).collect(),
            _ => Vec::new(),
        },
        rlimits: plan.rlimits.clone(),
    };
    let layer_report = match &mut plan.confinement {
        Confinement::Bwrap { report, .. } => report.take(),
        _ => None,
    };
    let started_at = Instant::now();
    let shim = sys::fork_shim(&prepared).map_err(|e| {
        NotRun::RunnerFailed(
            Stage::Fork,
            e.raw_os_error().unwrap_or(0),
            format!("forking the command's supervisor: {e}"),
        )
    })?;
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
        layer_report,
        cleanup: plan.cleanup,
        pending: Vec::new(),
        outcome: None,
    })
}

/// Callers have already refused NUL bytes, so this cannot fail; an empty string is the
/// harmless fallback that execve then rejects.
fn c_string(bytes: &[u8]) -> CString {
    CString::new(bytes).unwrap_or_default()
}

/// The paths `execve` will try, in order, as `execvp` would search them.
fn program_candidates(spawn: &Spawn) -> Vec<CString> {
    let program = &spawn.argv[0];
    if program.contains(&b'/') {
        return vec![c_string(program)];
    }
    let path = spawn
        .env
        .iter()
        .rev()
        .find(|v| v.name == b"PATH")
        .map_or(DEFAULT_PATH, |v| v.value.as_slice());
    path.split(|b| *b == b':')
        .map(|dir| {
            let dir = if dir.is_empty() { b".".as_slice() } else { dir };
            c_string(&[dir, b"/", program.as_slice()].concat())
        })
        .collect()
}

impl Running {
    /// Sends one order to the shim. A shim that is already gone needs no order.
    pub fn order(&self, byte: u8) {
        if let Some(ctl) = &self.ctl {
            let _ = nix::unistd::write(ctl, &[byte]);
        }
    }

    /// Starts terminating the tree for `ending`: SIGTERM now, SIGKILL after `grace`.
    pub fn terminate(&mut self, ending: Ending, grace: Duration, now: Instant) {
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
    pub fn read_status(&mut self) -> (Option<Reply>, bool) {
        let mut started = None;
        let mut buf = [0u8; Record::SIZE * 4];
        loop {
            match nix::unistd::read(&self.status, &mut buf) {
                Ok(0) => return (started, true),
                Ok(n) => self.pending.extend_from_slice(&buf[..n]),
                Err(nix::Error::EINTR) => continue,
                Err(nix::Error::EAGAIN) => break,
                Err(_) => return (started, true),
            }
            while self.pending.len() >= Record::SIZE {
                let mut raw = [0u8; Record::SIZE];
                raw.copy_from_slice(&self.pending[..Record::SIZE]);
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

    /// Reaps the shim (it has closed its status pipe, so it is exiting) and turns what it
    /// reported into the terminal reply.
    pub fn finish(mut self) -> Reply {
        let shim_status = loop {
            match waitpid(self.shim, Some(WaitPidFlag::__WALL)) {
                Err(nix::Error::EINTR) => continue,
                other => break other,
            }
        };
        self.cleanup.run();
        let wall_us = self.started_at.elapsed().as_micros() as u64;
        let usage = |user_us, sys_us, max_rss_kib| Usage {
            wall_us,
            user_us,
            sys_us,
            max_rss_kib,
        };
        let exited = |status, exec_errno, usage| {
            Reply::Exited(Exited {
                id: self.id,
                status,
                exec_errno,
                ending: self.ending,
                backend: self.backend,
                enforcement: self.enforcement.clone(),
                layers: self.layers.clone(),
                usage,
            })
        };
        // What `enter` reported from inside the sandbox: a layer that failed means the command
        // never ran; an exec failure is the command's.
        let entered = self.layer_report.as_ref().and_then(|fd| {
            let mut buf = [0u8; crate::enter::REPORT_SIZE];
            let n = nix::unistd::read(fd, &mut buf).unwrap_or(0);
            crate::enter::decode_report(&buf[..n])
        });
        match entered {
            Some(Err(errno)) => {
                return Reply::RunnerFailed(RunnerFailed {
                    id: self.id,
                    stage: Stage::Landlock,
                    errno,
                    detail: format!(
                        "applying the Landlock layer inside the sandbox failed: {}; nothing was run",
                        nix::Error::from_raw(errno).desc()
                    ),
                });
            }
            Some(Ok(errno)) => {
                return exited(
                    ExitStatus::Code(exec_failure_code(errno)),
                    Some(errno),
                    usage(0, 0, 0),
                );
            }
            None => {}
        }
        match self.outcome {
            Some(Record::Exited {
                wait_status,
                user_us,
                sys_us,
                max_rss_kib,
            }) => exited(
                decode_wait_status(wait_status),
                None,
                usage(user_us, sys_us, max_rss_kib),
            ),
            Some(Record::ExecFailed { errno }) => exited(
                ExitStatus::Code(exec_failure_code(errno)),
                Some(errno),
                usage(0, 0, 0),
            ),
            Some(Record::StageFailed { stage, errno }) => {
                let stage = Stage::from_index(stage).unwrap_or(Stage::Supervise);
                Reply::RunnerFailed(RunnerFailed {
                    id: self.id,
                    stage,
                    errno,
                    detail: format!(
                        "{} failed: {}",
                        stage.as_str(),
                        nix::Error::from_raw(errno).desc()
                    ),
                })
            }
            Some(Record::Started { .. }) | None => Reply::RunnerFailed(RunnerFailed {
                id: self.id,
                stage: Stage::Supervise,
                errno: 0,
                detail: format!(
                    "the command's supervisor ended without reporting ({shim_status:?}); \
                     its process tree may not have been cleaned up"
                ),
            }),
        }
    }
}

/// The shell's convention: 127 when the program was not found, 126 when it could not run.
fn exec_failure_code(errno: i32) -> i32 {
    if errno == libc::ENOENT { 127 } else { 126 }
}

fn decode_wait_status(status: i32) -> ExitStatus {
    if libc::WIFSIGNALED(status) {
        ExitStatus::Signal(libc::WTERMSIG(status))
    } else {
        ExitStatus::Code(libc::WEXITSTATUS(status))
    }
}

/// How many descriptors a request's stdio declares.
pub fn declared_fds(spawn: &Spawn) -> usize {
    [spawn.stdio.stdin, spawn.stdio.stdout, spawn.stdio.stderr]
        .iter()
        .filter(|s| **s == StdioSpec::Fd)
        .count()
}
