//! Running `agentd run --json` as a real process, and what came back.
//!
//! agentd is the only way the suite runs a command under test: the facts it prints are part of
//! what is checked, so the suite never talks to the helper directly.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::RawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{ChildStderr, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::binaries::Binaries;
use crate::error::{E2eError, FactsError};
use crate::facts::Facts;
use crate::matrix::{Backend, Mode};
use crate::probe;
use crate::users::Identity;

/// The longest any single run may take before the suite kills it and fails the case. Normal
/// runs take milliseconds; this only bounds a sandbox that lets a command hang agentd.
pub const RUN_LIMIT: Duration = Duration::from_secs(40);

/// How long output may keep flowing after agentd exited (it should already have ended).
const OUTPUT_GRACE: Duration = Duration::from_secs(5);

/// How much of agentd's stderr agentd itself classifies (its `STDERR_TAIL`).
const STDERR_TAIL: usize = 8 * 1024;

/// One `agentd run` command line and the process state it starts with.
#[derive(Debug, Clone)]
pub struct Invocation {
    pub mode: Mode,
    /// `--backend`; `None` leaves it at `auto`.
    pub backend: Option<Backend>,
    pub workspace: PathBuf,
    /// agentd's working directory, which the command inherits.
    pub cwd: PathBuf,
    pub writable_roots: Vec<PathBuf>,
    /// `--deny-read ENTRY`: paths (or `**/NAME` patterns) the command may not read.
    pub deny_read: Vec<OsString>,
    /// `--local-binding`: loopback sockets inside the sandbox.
    pub local_binding: bool,
    /// `--unix-socket PATH`: named Unix sockets the command may connect to.
    pub unix_sockets: Vec<PathBuf>,
    /// `--allow-domain DOMAIN`: the network allow-list.
    pub allow_domains: Vec<String>,
    /// `--allow-local-addresses`: an allowed domain may lead to this machine.
    pub local_addresses: bool,
    /// `--config PATH`: agentd's configuration file.
    pub config: Option<PathBuf>,
    pub network_allow: bool,
    pub timeout_secs: Option<u64>,
    pub ceiling: Option<PathBuf>,
    pub argv: Vec<OsString>,
    /// Added to (or replacing) agentd's base environment.
    pub env: Vec<(OsString, OsString)>,
    /// `--env NAME=VALUE`: set for the command by agentd, on top of what it inherits.
    pub command_env: Vec<(OsString, OsString)>,
    /// What the suite does when the command says `ready` on stdout.
    pub on_ready: OnReady,
    /// agentd starts with RLIMIT_CORE unlimited, so only the helper can bring it to zero.
    pub core_unlimited: bool,
    /// Descriptors agentd inherits without close-on-exec: (open descriptor, number in agentd).
    pub inherit: Vec<(RawFd, RawFd)>,
}

impl Invocation {
    pub fn new(mode: Mode, workspace: &Path, argv: Vec<OsString>) -> Invocation {
        Invocation {
            mode,
            backend: None,
            workspace: workspace.to_owned(),
            cwd: workspace.to_owned(),
            writable_roots: Vec::new(),
            deny_read: Vec::new(),
            local_binding: false,
            unix_sockets: Vec::new(),
            allow_domains: Vec::new(),
            local_addresses: false,
            config: None,
            network_allow: false,
            timeout_secs: None,
            ceiling: None,
            argv,
            env: Vec::new(),
            command_env: Vec::new(),
            on_ready: OnReady::Nothing,
            core_unlimited: false,
            inherit: Vec::new(),
        }
    }

    pub fn writable_root(mut self, root: impl Into<PathBuf>) -> Invocation {
        self.writable_roots.push(root.into());
        self
    }

    pub fn deny_read(mut self, entry: impl Into<OsString>) -> Invocation {
        self.deny_read.push(entry.into());
        self
    }

    /// Reaching `domain` (which may lead to this machine) through the allow-list proxy.
    pub fn allow_domain(mut self, domain: &str) -> Invocation {
        self.local_addresses = true;
        self.strict_domain(domain)
    }

    /// Reaching `domain` through the allow-list proxy, unless it leads to this machine (no
    /// `--allow-local-addresses` unless [`Invocation::allow_domain`] asks for it).
    pub fn strict_domain(mut self, domain: &str) -> Invocation {
        self.allow_domains.push(domain.to_owned());
        self
    }

    pub fn config(mut self, path: impl Into<PathBuf>) -> Invocation {
        self.config = Some(path.into());
        self
    }

    pub fn local_binding(mut self) -> Invocation {
        self.local_binding = true;
        self
    }

    pub fn unix_socket(mut self, path: impl Into<PathBuf>) -> Invocation {
        self.unix_sockets.push(path.into());
        self
    }

    pub fn timeout(mut self, secs: u64) -> Invocation {
        self.timeout_secs = Some(secs);
        self
    }

    pub fn ceiling(mut self, path: impl Into<PathBuf>) -> Invocation {
        self.ceiling = Some(path.into());
        self
    }

    pub fn network(mut self, allow: bool) -> Invocation {
        self.network_allow = allow;
        self
    }

    pub fn env(mut self, name: impl Into<OsString>, value: impl Into<OsString>) -> Invocation {
        self.env.push((name.into(), value.into()));
        self
    }

    /// `--env NAME=VALUE`: a variable agentd sets for the command (not for itself).
    pub fn command_env(
        mut self,
        name: impl Into<OsString>,
        value: impl Into<OsString>,
    ) -> Invocation {
        self.command_env.push((name.into(), value.into()));
        self
    }

    /// The command says `ready` and then reads `agentd=PID helper=PID` on stdin.
    pub fn interactive(self) -> Invocation {
        self.on_ready(OnReady::TellPids)
    }

    pub fn on_ready(mut self, action: OnReady) -> Invocation {
        self.on_ready = action;
        self
    }

    pub fn core_unlimited(mut self) -> Invocation {
        self.core_unlimited = true;
        self
    }

    pub fn inherit(mut self, fd: RawFd, as_fd: RawFd) -> Invocation {
        self.inherit.push((fd, as_fd));
        self
    }

    /// agentd's arguments, `run` included.
    pub fn args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["run".into(), "--json".into()];
        if let Some(config) = &self.config {
            args.push("--config".into());
            args.push(config.clone().into());
        }
        args.push("--mode".into());
        args.push(self.mode.as_str().into());
        args.push("--workspace".into());
        args.push(self.workspace.clone().into());
        for root in &self.writable_roots {
            args.push("--writable-root".into());
            args.push(root.clone().into());
        }
        for entry in &self.deny_read {
            args.push("--deny-read".into());
            args.push(entry.clone());
        }
        if self.local_binding {
            args.push("--local-binding".into());
        }
        for socket in &self.unix_sockets {
            args.push("--unix-socket".into());
            args.push(socket.clone().into());
        }
        for domain in &self.allow_domains {
            args.push("--allow-domain".into());
            args.push(domain.into());
        }
        if self.local_addresses {
            args.push("--allow-local-addresses".into());
        }
        args.push("--network".into());
        args.push(if self.network_allow { "allow" } else { "deny" }.into());
        if let Some(backend) = self.backend {
            args.push("--backend".into());
            args.push(backend.as_str().into());
        }
        if let Some(secs) = self.timeout_secs {
            args.push("--timeout".into());
            args.push(secs.to_string().into());
        }
        if let Some(ceiling) = &self.ceiling {
            args.push("--helper-ceiling".into());
            args.push(ceiling.clone().into());
        }
        for (name, value) in &self.command_env {
            let mut pair = name.clone();
            pair.push("=");
            pair.push(value);
            args.push("--env".into());
            args.push(pair);
        }
        args.push("--".into());
        args.extend(self.argv.iter().cloned());
        args
    }
}

/// What one run of agentd (or, for a few controls, of the command alone) produced.
#[derive(Debug, Clone)]
pub struct Run {
    /// What the run is for, e.g. "confined" or "control".
    pub label: String,
    pub user: String,
    pub command_line: String,
    /// agentd's exit code; `None` when it was killed by a signal.
    pub status: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// The last line of stderr, which must be the facts.
    pub facts_line: String,
    pub facts: Result<Facts, FactsError>,
    pub probe: probe::Report,
    pub elapsed: Duration,
    pub agentd_pid: u32,
    /// The helper's pid, when the run looked it up (see [`OnReady`]).
    pub helper_pid: Option<u32>,
}

/// What a [`ReadyHook`] gets: the processes of the run that is waiting for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pids {
    pub agentd: u32,
    pub helper: u32,
}

/// Work the suite does on the host while a command waits mid-run (see [`OnReady::Call`]); an
/// `Err` fails the run with its message.
#[derive(Clone)]
pub struct ReadyHook(Arc<dyn Fn(Pids) -> Result<(), E2eError> + Send + Sync>);

impl ReadyHook {
    pub fn new(hook: impl Fn(Pids) -> Result<(), E2eError> + Send + Sync + 'static) -> ReadyHook {
        ReadyHook(Arc::new(hook))
    }
}

impl std::fmt::Debug for ReadyHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReadyHook")
    }
}

/// What the suite does when the command prints `ready` on stdout, mid-run.
#[derive(Debug, Clone)]
pub enum OnReady {
    /// Nothing: the command does not wait for the suite.
    Nothing,
    /// Writes `agentd=PID helper=PID` to the command's stdin, for attacks on those processes.
    TellPids,
    /// Kills the helper with SIGKILL, as a crash would.
    KillHelper,
    /// Kills agentd with SIGKILL, as a crash would.
    KillAgentd,
    /// Runs the hook while the command waits, then closes the command's stdin: its cue to go
    /// on (`read` returns). For looking at the host while a confined command is running.
    Call(ReadyHook),
}

impl Run {
    /// The command's own stderr, as agentd classifies it: without agentd's notes and the facts
    /// line, and only its last [`STDERR_TAIL`] bytes.
    pub fn command_stderr_tail(&self) -> String {
        let mut lines: Vec<&str> = self
            .stderr
            .lines()
            .filter(|l| !l.starts_with("agentd: "))
            .collect();
        if lines.last().is_some_and(|l| *l == self.facts_line) {
            lines.pop();
        }
        let text = lines.join("\n");
        let start = text.len().saturating_sub(STDERR_TAIL);
        let start = (start..=text.len())
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(text.len());
        text[start..].to_owned()
    }

    /// A few lines that let a reader reproduce and understand the run.
    pub fn describe(&self) -> String {
        let tail = |text: &str, n: usize| {
            let lines: Vec<&str> = text.lines().collect();
            let skipped = lines.len().saturating_sub(n);
            lines.get(skipped..).unwrap_or_default().join("\n      ")
        };
        format!(
            "    {} run as {}: {}\n    agentd exit: {}, {:.2}s\n    facts: {}\n    stdout tail:\n      {}\n    stderr tail:\n      {}",
            self.label,
            self.user,
            self.command_line,
            self.status
                .map_or_else(|| "killed by a signal".to_owned(), |s| s.to_string()),
            self.elapsed.as_secs_f64(),
            if self.facts_line.is_empty() {
                "(none)"
            } else {
                &self.facts_line
            },
            tail(&self.stdout, 12),
            tail(&self.stderr, 12),
        )
    }
}

/// How to start agentd for one user.
#[derive(Debug, Clone)]
pub struct Launcher {
    pub binaries: Binaries,
    pub user: Identity,
    /// agentd's whole environment before an invocation adds to it.
    pub base_env: Vec<(OsString, OsString)>,
}

impl Launcher {
    /// Runs agentd as described and waits for it, at most [`RUN_LIMIT`].
    pub fn run(&self, label: &str, invocation: &Invocation) -> Result<Run, E2eError> {
        let mut command = Command::new(&self.binaries.agentd);
        command.args(invocation.args());
        let command_line = format!(
            "cd {} && {}{} {}",
            quote(invocation.cwd.as_os_str()),
            env_prefix(invocation),
            quote(self.binaries.agentd.as_os_str()),
            invocation
                .args()
                .iter()
                .map(|a| quote(a))
                .collect::<Vec<_>>()
                .join(" ")
        );
        self.execute(label, command, command_line, invocation)
    }

    /// Runs `argv` directly, without agentd, with the invocation's process state: the control
    /// for properties agentd itself is meant to provide (descriptor hygiene).
    pub fn run_plain(&self, label: &str, invocation: &Invocation) -> Result<Run, E2eError> {
        let (program, args) = invocation
            .argv
            .split_first()
            .ok_or_else(|| trouble!("nothing to run"))?;
        let mut command = Command::new(program);
        command.args(args);
        let command_line = format!(
            "cd {} && {}{}",
            quote(invocation.cwd.as_os_str()),
            env_prefix(invocation),
            invocation
                .argv
                .iter()
                .map(|a| quote(a))
                .collect::<Vec<_>>()
                .join(" ")
        );
        self.execute(label, command, command_line, invocation)
    }

    fn execute(
        &self,
        label: &str,
        mut command: Command,
        command_line: String,
        invocation: &Invocation,
    ) -> Result<Run, E2eError> {
        self.prepare(&mut command, invocation);
        let started = Instant::now();
        let mut child = command
            .spawn()
            .map_err(|e| trouble!("cannot start {command_line}: {e}"))?;
        let pid = child.id();
        let (lines_rx, out_rx) = read_output(child.stdout.take(), child.stderr.take());
        let mut stdin = child.stdin.take();
        let (exit_tx, exit_rx) = mpsc::channel();
        thread::spawn(move || {
            let _ = exit_tx.send(child.wait());
        });

        let deadline = started + RUN_LIMIT;
        let mut trouble = None;
        let mut helper_pid = None;
        if !matches!(invocation.on_ready, OnReady::Nothing) {
            match when_ready(
                pid,
                &lines_rx,
                &invocation.on_ready,
                stdin.as_mut(),
                deadline,
            ) {
                Ok(helper) => helper_pid = Some(helper),
                Err(e) => trouble = Some(e),
            }
        }
        drop(stdin);
        if trouble.is_some() {
            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
        }
        let status = wait_for_exit(pid, &exit_rx, deadline, &mut trouble, &command_line)?;
        let (stdout, stderr) = collect_output(&out_rx, &mut trouble);
        let elapsed = started.elapsed();
        let facts_line = stderr.lines().last().unwrap_or("").to_owned();
        let facts = Facts::parse(&facts_line);
        let run = Run {
            label: label.to_owned(),
            user: self.user.name.clone(),
            command_line,
            status: status.code(),
            probe: probe::Report::parse(&stdout),
            stdout,
            stderr,
            facts_line,
            facts,
            elapsed,
            agentd_pid: pid,
            helper_pid,
        };
        match trouble {
            Some(why) => Err(trouble!("{why}\n{}", run.describe())),
            None => Ok(run),
        }
    }

    /// Sets up `command` as `invocation` says: its directory, an environment of only what is
    /// given, pipes for its output (and its input when it is told something once ready), this
    /// launcher's user, and the process state it starts with.
    fn prepare(&self, command: &mut Command, invocation: &Invocation) {
        command
            .current_dir(&invocation.cwd)
            .env_clear()
            .envs(self.base_env.iter().map(|(k, v)| (k, v)))
            .envs(invocation.env.iter().map(|(k, v)| (k, v)))
            .stdin(
                if matches!(invocation.on_ready, OnReady::TellPids | OnReady::Call(_)) {
                    Stdio::piped()
                } else {
                    Stdio::null()
                },
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        self.user.apply(command);
        prepare_process_state(
            command,
            invocation.core_unlimited,
            invocation.inherit.clone(),
        );
    }
}

/// Reads agentd's output on two threads: each stdout line as it comes (on the first receiver),
/// and all of stdout and of stderr once each ends (on the second, `true` marking stdout).
fn read_output(
    stdout: Option<ChildStdout>,
    stderr: Option<ChildStderr>,
) -> (mpsc::Receiver<String>, mpsc::Receiver<(bool, String)>) {
    let (lines_tx, lines_rx) = mpsc::channel::<String>();
    let (out_tx, out_rx) = mpsc::channel::<(bool, String)>();
    let err_tx = out_tx.clone();
    thread::spawn(move || {
        let mut all = String::new();
        if let Some(stdout) = stdout {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                all.push_str(&line);
                all.push('\n');
                let _ = lines_tx.send(line);
            }
        }
        let _ = out_tx.send((true, all));
    });
    thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut stderr) = stderr {
            let _ = stderr.read_to_end(&mut bytes);
        }
        let _ = err_tx.send((false, String::from_utf8_lossy(&bytes).into_owned()));
    });
    (lines_rx, out_rx)
}

/// Waits for agentd (pid `agentd`) to exit until `deadline`; past it, kills agentd, notes in
/// `trouble` that it did not finish, and waits for it to go.
fn wait_for_exit(
    agentd: u32,
    exit_rx: &mpsc::Receiver<std::io::Result<ExitStatus>>,
    deadline: Instant,
    trouble: &mut Option<E2eError>,
    command_line: &str,
) -> Result<ExitStatus, E2eError> {
    match exit_rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        Ok(waited) => waited,
        Err(_) => {
            trouble.get_or_insert(trouble!(
                "agentd did not finish within {}s; killed it",
                RUN_LIMIT.as_secs()
            ));
            let _ = kill(Pid::from_raw(agentd as i32), Signal::SIGKILL);
            exit_rx
                .recv()
                .map_err(|_| trouble!("lost track of {command_line}"))?
        }
    }
    .map_err(|e| trouble!("cannot wait for {command_line}: {e}"))
}

/// agentd's whole stdout and stderr. agentd reports only after the command's output has ended,
/// so both pipes close with it, unless something outlived the command and still holds them:
/// then reading stops, and `trouble` says so.
fn collect_output(
    out_rx: &mpsc::Receiver<(bool, String)>,
    trouble: &mut Option<E2eError>,
) -> (String, String) {
    let (mut stdout, mut stderr) = (String::new(), String::new());
    let drain_deadline = Instant::now() + OUTPUT_GRACE;
    for _ in 0..2 {
        match out_rx.recv_timeout(drain_deadline.saturating_duration_since(Instant::now())) {
            Ok((true, text)) => stdout = text,
            Ok((false, text)) => stderr = text,
            Err(_) => {
                trouble.get_or_insert(trouble!(
                    "agentd exited but its output stayed open: a process outlived the command"
                ));
                break;
            }
        }
    }
    (stdout, stderr)
}

/// Waits for the command's `ready` line, then does what `action` says; returns the helper's pid.
fn when_ready(
    agentd: u32,
    lines: &mpsc::Receiver<String>,
    action: &OnReady,
    stdin: Option<&mut ChildStdin>,
    deadline: Instant,
) -> Result<u32, E2eError> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) if line == "ready" => break,
            Ok(_) => continue,
            Err(_) => return Err(trouble!("the command never said it was ready")),
        }
    }
    let helper = find_helper(agentd)
        .ok_or_else(|| trouble!("agentd (pid {agentd}) has no confine-helper child"))?;
    match action {
        OnReady::Nothing => {}
        OnReady::TellPids => {
            let stdin = stdin.ok_or_else(|| trouble!("the command's stdin is not a pipe"))?;
            writeln!(stdin, "agentd={agentd} helper={helper}")
                .map_err(|e| trouble!("cannot tell the command the pids: {e}"))?;
        }
        OnReady::KillHelper => kill(Pid::from_raw(helper as i32), Signal::SIGKILL)
            .map_err(|e| trouble!("cannot kill the helper (pid {helper}): {e}"))?,
        OnReady::KillAgentd => kill(Pid::from_raw(agentd as i32), Signal::SIGKILL)
            .map_err(|e| trouble!("cannot kill agentd (pid {agentd}): {e}"))?,
        OnReady::Call(hook) => (hook.0)(Pids { agentd, helper })?,
    }
    Ok(helper)
}

/// The confine-helper that agentd started (its child named `confine-helper`).
pub fn find_helper(agentd: u32) -> Option<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{agentd}/task")).ok()?;
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|children| {
            children
                .split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok())
                .collect::<Vec<_>>()
        })
        .find(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| comm.trim() == "confine-helper")
        })
}

/// Gives the child the process state an invocation asks for, between fork and exec.
/// The most descriptors one run may hand agentd ([`Invocation::inherit`]).
const MAX_INHERITED: usize = 16;

/// Where inherited descriptors are parked while they are placed: above every target number.
const PARK_ABOVE: RawFd = 512;

fn prepare_process_state(
    command: &mut Command,
    core_unlimited: bool,
    inherit: Vec<(RawFd, RawFd)>,
) {
    assert!(
        inherit.len() <= MAX_INHERITED && inherit.iter().all(|&(_, to)| to < PARK_ABOVE),
        "at most {MAX_INHERITED} inherited descriptors, each placed below {PARK_ABOVE}"
    );
    if !core_unlimited && inherit.is_empty() {
        return;
    }
    let closure = move || -> std::io::Result<()> {
        if core_unlimited {
            use nix::sys::resource::{RLIM_INFINITY, Resource, setrlimit};
            setrlimit(Resource::RLIMIT_CORE, RLIM_INFINITY, RLIM_INFINITY)?;
        }
        // Each source is first parked above every target, so that placing one cannot
        // overwrite another source whose number is a target (the suite's own descriptors are
        // numbered by whatever else it holds open).
        let mut parked = [-1; MAX_INHERITED];
        for (slot, &(fd, _)) in parked.iter_mut().zip(&inherit) {
            // SAFETY: fcntl(F_DUPFD_CLOEXEC) is async-signal-safe and touches only the child's
            // descriptor table; `fd` stays open in the parent for the duration of the spawn.
            *slot = unsafe { nix::libc::fcntl(fd, nix::libc::F_DUPFD_CLOEXEC, PARK_ABOVE) };
            if *slot < 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        for (&high, &(_, as_fd)) in parked.iter().zip(&inherit) {
            // SAFETY: as above; dup2 clears close-on-exec on the new number, which is the
            // point: agentd inherits it (the parked copy closes on exec).
            if unsafe { nix::libc::dup2(high, as_fd) } < 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    };
    // SAFETY: the closure runs in the forked child before exec and only makes the syscalls
    // setrlimit and dup2, both async-signal-safe; it allocates nothing (the Vec was moved in).
    unsafe {
        command.pre_exec(closure);
    }
}

/// `env NAME=VALUE… ` for what the invocation adds to the base environment, so a pasted
/// command line reproduces the run.
fn env_prefix(invocation: &Invocation) -> String {
    if invocation.env.is_empty() {
        return String::new();
    }
    let pairs: Vec<String> = invocation
        .env
        .iter()
        .map(|(name, value)| {
            let mut pair = name.clone();
            pair.push("=");
            pair.push(value);
            quote(&pair)
        })
        .collect();
    format!("env {} ", pairs.join(" "))
}

/// Quotes for a POSIX shell, so a failing command line can be pasted to reproduce it.
pub fn quote(arg: &std::ffi::OsStr) -> String {
    let text = arg.to_string_lossy();
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:@,+%^".contains(c));
    if plain {
        text.into_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_that_need_quoting_are_quoted() {
        assert_eq!(quote("plain/path-1".as_ref()), "plain/path-1");
        assert_eq!(quote("two words".as_ref()), "'two words'");
        assert_eq!(quote("it's".as_ref()), r"'it'\''s'");
        assert_eq!(quote("".as_ref()), "''");
    }

    #[test]
    fn the_command_follows_the_separator() {
        let inv = Invocation::new(Mode::ReadOnly, Path::new("/w"), vec!["true".into()])
            .writable_root("/r")
            .command_env("HOME", "/h")
            .timeout(3);
        let args: Vec<String> = inv
            .args()
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let sep = args.iter().position(|a| a == "--").expect("separator");
        assert_eq!(&args[sep + 1..], ["true"]);
        assert!(args.windows(2).any(|w| w == ["--writable-root", "/r"]));
        assert!(args.windows(2).any(|w| w == ["--timeout", "3"]));
        assert!(args[..sep].windows(2).any(|w| w == ["--env", "HOME=/h"]));
    }
}
