//! `agentd run`: one command through confine-helper, its output streamed, its facts reported.
//!
//! The command's stdout and stderr are pipes whose write ends go to the helper with the request
//! and whose read ends agentd copies to its own streams as the bytes come. agentd reports only
//! once the terminal reply has arrived and both pipes have reached end-of-file, so nothing the
//! command wrote can appear after the facts. The facts line (`--json`) is the last line of
//! stderr so a caller can take it without parsing the command's own output.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

use confine_protocol::{BackendChoice, ExitStatus, Mode, Network, Stage};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::cli::{EXIT_DID_NOT_RUN, EXIT_INTERRUPTED, EXIT_TIMED_OUT};
use crate::command::{
    Facts, KILL_GRACE, copy_output, exec_failure_note, output_pipe, runner_failure_note, settle,
    wait_for_outcome,
};
use crate::denial::{Kind, Scope};
use crate::environment;
use crate::helper_client::{ClientError, HelperClient, SpawnSpec};
use crate::terminal;

/// What to run and how, as `agentd run` takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunArgs {
    /// The command and its arguments.
    pub argv: Vec<OsString>,
    pub mode: Mode,
    /// The workspace root; `None` means the current directory.
    pub workspace: Option<PathBuf>,
    pub network: Network,
    pub backend: BackendChoice,
    /// Wall-clock limit in whole seconds.
    pub timeout_secs: Option<u64>,
    /// Directories writable besides the workspace (workspace-write); relative ones are taken
    /// from agentd's current directory. confine-helper canonicalizes and checks them.
    pub writable_roots: Vec<PathBuf>,
    /// Relative subpaths that stay read-only inside every writable root, on top of the helper's
    /// built-in list. confine-helper validates them.
    pub protected: Vec<PathBuf>,
    /// RLIMIT_NPROC of the command; confine-helper lowers it to its ceiling.
    pub max_processes: Option<u64>,
    /// RLIMIT_FSIZE of the command, in bytes; confine-helper lowers it to its ceiling.
    pub max_file_size: Option<u64>,
    /// RLIMIT_AS of the command, in bytes; confine-helper lowers it to its ceiling.
    pub max_address_space: Option<u64>,
    /// Variables set explicitly, on top of the inherited allow-list
    /// ([`environment::command_environment`]); of two settings of one name the later wins.
    pub env: Vec<(OsString, OsString)>,
    /// Print the facts as one JSON object on the last line of stderr.
    pub json: bool,
}

impl RunArgs {
    /// Read-only, current directory as workspace, no network, automatic backend, no timeout,
    /// no further writable roots or protected paths, no resource limits, no explicit variables.
    pub fn new<I, S>(argv: I) -> RunArgs
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        RunArgs {
            argv: argv.into_iter().map(Into::into).collect(),
            mode: Mode::ReadOnly,
            workspace: None,
            network: Network::Deny,
            backend: BackendChoice::Auto,
            timeout_secs: None,
            writable_roots: Vec::new(),
            protected: Vec::new(),
            max_processes: None,
            max_file_size: None,
            max_address_space: None,
            env: Vec::new(),
            json: false,
        }
    }
}

/// Why the job stopped before the command was handed to the helper. Nothing ran.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("no command given; put it after `--`, e.g. `agentd run -- ls -l`")]
    NoCommand,
    #[error("cannot determine the current directory: {0}")]
    CurrentDir(#[source] io::Error),
    #[error("the workspace {} cannot be used: {source}; pass an existing directory with --workspace", path.display())]
    Workspace {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the workspace {} is not a directory; pass a directory with --workspace", path.display())]
    WorkspaceNotDirectory { path: PathBuf },
    #[error("{}", crate::helper_client::own_file_refusal(workspace, own))]
    OwnFile { workspace: PathBuf, own: PathBuf },
    #[error("--timeout {0} is too large")]
    TimeoutTooLarge(u64),
    #[error("cannot create a pipe for the command's output: {0}")]
    Pipe(#[source] io::Error),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("interrupted before the command started")]
    Interrupted,
}

impl RunError {
    /// The exit status agentd should end with.
    pub fn exit_code(&self) -> u8 {
        match self {
            RunError::Interrupted => EXIT_INTERRUPTED,
            _ => EXIT_DID_NOT_RUN,
        }
    }
}

/// The exit status agentd ends with: the command's own code, 128+N for signal N, 124 on
/// timeout, 125 when the command did not run.
pub fn exit_code(facts: &Facts) -> u8 {
    if facts.refused.is_some() || facts.runner_failure.is_some() {
        return EXIT_DID_NOT_RUN;
    }
    if facts.timed_out {
        return EXIT_TIMED_OUT;
    }
    match facts.exit {
        Some(ExitStatus::Code(code)) => u8::try_from(code & 0xff).unwrap_or(u8::MAX),
        Some(ExitStatus::Signal(signal)) => u8::try_from(128 + (signal & 0x7f)).unwrap_or(u8::MAX),
        None => EXIT_DID_NOT_RUN,
    }
}

/// Forwards SIGINT and SIGTERM of this process as interrupts for [`run_job`].
///
/// Installing the handlers replaces the default of dying at once: from here on the job decides
/// what an interrupt means (cancel the command, then report how it ended).
pub fn forward_signals() -> io::Result<mpsc::UnboundedReceiver<()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                Some(()) = interrupt.recv() => {}
                Some(()) = terminate.recv() => {}
                else => return,
            }
            if tx.send(()).is_err() {
                return;
            }
        }
    });
    Ok(rx)
}

/// Runs one command through `client`, copying its stdout and stderr to `stdout` and `stderr` as
/// they arrive, and reports its facts (human notes, and with `--json` the JSON line) on `stderr`.
///
/// Each message on `interrupts` cancels the command: the first with [`KILL_GRACE`], later ones
/// with none. The job still waits for the helper's terminal reply. An interrupt before the
/// command was handed to the helper ends the job with [`RunError::Interrupted`]. Pass a receiver
/// whose sender is kept but unused to run without interrupts.
///
/// Returns the facts; the exit status agentd should use is [`exit_code`].
pub async fn run_job<O, E>(
    client: &HelperClient,
    args: RunArgs,
    mut stdout: O,
    mut stderr: E,
    mut interrupts: mpsc::UnboundedReceiver<()>,
) -> Result<Facts, RunError>
where
    O: AsyncWrite + Unpin,
    E: AsyncWrite + Unpin,
{
    let spec = prepare(&args)?;
    let scope = Scope::of(&spec.cwd, &spec.policy);
    if let (Mode::WorkspaceWrite, Some(workspace)) = (args.mode, &spec.policy.workspace_root) {
        let workspace = PathBuf::from(<OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(
            workspace,
        ));
        if let Some(own) = client.own_file_within(&workspace) {
            return Err(RunError::OwnFile { workspace, own });
        }
    }
    let (out_read, out_write) = output_pipe().map_err(RunError::Pipe)?;
    let (err_read, err_write) = output_pipe().map_err(RunError::Pipe)?;
    let spec = SpawnSpec {
        stdout: Some(out_write),
        stderr: Some(err_write),
        ..spec
    };

    let handle = tokio::select! {
        spawned = client.spawn(spec) => spawned?,
        Some(()) = interrupts.recv() => return Err(RunError::Interrupted),
    };

    let mut tail = Vec::new();
    let copies = async {
        tokio::join!(
            copy_output(out_read, &mut stdout, None),
            copy_output(err_read, &mut stderr, Some(&mut tail)),
        );
    };
    let (outcome, started) = settle(wait_for_outcome(handle, &mut interrupts), copies).await;

    let facts = Facts::from_outcome(outcome, started).with_stderr_tail(tail, &scope);
    let argv0 = args
        .argv
        .first()
        .map(OsString::as_os_str)
        .unwrap_or_default();
    let mut report = String::new();
    // The notes quote the program's name and the helper's reasons: shown, never obeyed.
    for note in notes(&facts, argv0, &args) {
        report.push_str("agentd: ");
        report.push_str(&terminal::visible(&note));
        report.push('\n');
    }
    if args.json {
        report.push_str(&facts.to_json());
        report.push('\n');
    }
    // The command's output already went out; a closed stderr only loses the report.
    let _ = stderr.write_all(report.as_bytes()).await;
    let _ = stderr.flush().await;
    let _ = stdout.flush().await;
    Ok(facts)
}

/// Everything of the spawn request that does not need a pipe.
fn prepare(args: &RunArgs) -> Result<SpawnSpec, RunError> {
    if args.argv.is_empty() {
        return Err(RunError::NoCommand);
    }
    let cwd = std::env::current_dir().map_err(RunError::CurrentDir)?;
    let workspace = args.workspace.clone().unwrap_or_else(|| cwd.clone());
    let workspace = workspace
        .canonicalize()
        .map_err(|source| RunError::Workspace {
            path: workspace.clone(),
            source,
        })?;
    if !workspace.is_dir() {
        return Err(RunError::WorkspaceNotDirectory { path: workspace });
    }
    let timeout_ms = match args.timeout_secs {
        Some(secs) => Some(
            secs.checked_mul(1000)
                .ok_or(RunError::TimeoutTooLarge(secs))?,
        ),
        None => None,
    };
    let mut spec = SpawnSpec::new(args.argv.iter().cloned());
    spec.policy.writable_roots = args
        .writable_roots
        .iter()
        .map(|root| cwd.join(root).into_os_string().into_vec())
        .collect();
    spec.policy.protected = args
        .protected
        .iter()
        .map(|path| path.clone().into_os_string().into_vec())
        .collect();
    spec.cwd = cwd;
    spec.env = environment::command_environment(std::env::vars_os(), &args.env);
    spec.policy.mode = args.mode;
    spec.policy.network = args.network;
    spec.policy.workspace_root = Some(workspace.into_os_string().into_vec());
    spec.backend = args.backend;
    spec.limits.timeout_ms = timeout_ms;
    spec.limits.kill_grace_ms = u32::try_from(KILL_GRACE.as_millis()).unwrap_or(u32::MAX);
    spec.limits.max_processes = args.max_processes;
    spec.limits.max_file_size = args.max_file_size;
    spec.limits.max_address_space = args.max_address_space;
    // A closed stdin (EBADF) is not an error: the command then reads /dev/null.
    spec.stdin = io::stdin().as_fd().try_clone_to_owned().ok();
    Ok(spec)
}

/// The one-line notes for a human reader, without the `agentd: ` prefix.
fn notes(facts: &Facts, argv0: &OsStr, args: &RunArgs) -> Vec<String> {
    let mut notes = Vec::new();
    let program = argv0.to_string_lossy();
    if let Some(errno) = facts.exec_errno {
        notes.push(exec_failure_note(&program, errno));
    }
    if args.json {
        return notes;
    }
    if let Some(reason) = &facts.refused {
        notes.push(format!("confine-helper refused the command: {reason}"));
    }
    if let Some(failure) = &facts.runner_failure {
        notes.push(runner_failure_note(failure, facts.started));
        if failure.stage == Stage::Unavailable && args.backend != BackendChoice::Auto {
            notes.push(format!(
                "only --backend {} was tried; without --backend confine-helper uses whichever \
                 backend works on this machine",
                backend_choice_name(args.backend)
            ));
        }
    }
    if facts.timed_out {
        let after = args
            .timeout_secs
            .map(|secs| format!(" after {secs} s"))
            .unwrap_or_default();
        notes.push(format!("the command timed out{after} and was terminated"));
    }
    if facts.cancelled {
        notes.push("the command was cancelled".to_owned());
    }
    if let Some(denial) = &facts.denial {
        notes.extend(
            denial
                .kinds
                .iter()
                .map(|&kind| denial_note(kind, args.mode)),
        );
    }
    notes
}

/// What the sandbox denied, and which of `agentd run`'s options would allow it.
fn denial_note(kind: Kind, mode: Mode) -> String {
    let unconfined = "--mode danger-full-access runs the command unconfined";
    match kind {
        Kind::FileWrite if mode == Mode::ReadOnly => format!(
            "the sandbox denied a file write: read-only mode writes nothing (--mode \
             workspace-write makes the workspace writable, --writable-root DIR another \
             directory; {unconfined})"
        ),
        Kind::FileWrite => format!(
            "the sandbox denied a file write outside the writable roots (--writable-root DIR \
             adds one; {unconfined})"
        ),
        Kind::ProtectedPath => format!(
            "the sandbox denied a write to a protected path (git metadata, or a --protect \
             path), read-only in every confined mode ({unconfined})"
        ),
        Kind::FileRead => format!("the sandbox denied a file read ({unconfined})"),
        Kind::Network => "the sandbox denied network access (--network allow permits it)".into(),
        Kind::SystemInterface => format!(
            "the sandbox denied a system interface: Unix sockets, tracing, mounts and the like \
             are filtered in every confined mode ({unconfined})"
        ),
    }
}

/// The name `--backend` takes.
fn backend_choice_name(choice: BackendChoice) -> &'static str {
    match choice {
        BackendChoice::Auto => "auto",
        BackendChoice::Bwrap => "bwrap",
        BackendChoice::Landlock => "landlock",
        BackendChoice::Seatbelt => "seatbelt",
    }
}

#[cfg(test)]
mod tests {
    use confine_protocol::Ending;

    use super::*;
    use crate::denial::Denial;
    use crate::helper_client::Outcome;
    use crate::test_support::{confined_exit, refused, runner_failed};

    #[test]
    fn exit_code_is_the_commands_own_code() {
        let facts = Facts::from_outcome(
            Outcome::Exited(confined_exit(ExitStatus::Code(3), Ending::Exited)),
            true,
        );
        assert_eq!(exit_code(&facts), 3);
    }

    #[test]
    fn exit_code_of_a_signal_is_128_plus_the_signal() {
        let facts = Facts::from_outcome(
            Outcome::Exited(confined_exit(ExitStatus::Signal(9), Ending::Exited)),
            true,
        );
        assert_eq!(exit_code(&facts), 137);
    }

    #[test]
    fn exit_code_of_a_timeout_is_124_whatever_the_signal() {
        let facts = Facts::from_outcome(
            Outcome::Exited(confined_exit(ExitStatus::Signal(15), Ending::TimedOut)),
            true,
        );
        assert_eq!(exit_code(&facts), 124);
    }

    #[test]
    fn exit_code_of_a_cancel_is_the_commands_status() {
        let facts = Facts::from_outcome(
            Outcome::Exited(confined_exit(ExitStatus::Signal(15), Ending::Cancelled)),
            true,
        );
        assert_eq!(exit_code(&facts), 143);
        assert!(facts.cancelled);
    }

    #[test]
    fn exit_code_is_125_when_refused_or_the_runner_failed() {
        assert_eq!(exit_code(&refused("no")), 125);
        assert_eq!(exit_code(&runner_failed(Stage::Fork, 11, "fork")), 125);
        assert_eq!(
            exit_code(&runner_failed(Stage::HelperExited, 0, "gone")),
            125
        );
    }

    #[test]
    fn run_errors_exit_125_except_an_early_interrupt() {
        assert_eq!(RunError::NoCommand.exit_code(), 125);
        assert_eq!(RunError::Interrupted.exit_code(), 130);
    }

    #[test]
    fn a_missing_command_is_reported_as_command_not_found() {
        let mut exited = confined_exit(ExitStatus::Code(127), Ending::Exited);
        exited.exec_errno = Some(nix::errno::Errno::ENOENT as i32);
        let facts = Facts::from_outcome(Outcome::Exited(exited), false);
        let args = RunArgs::new(["nosuchcmd"]);
        assert_eq!(
            notes(&facts, OsStr::new("nosuchcmd"), &args),
            ["nosuchcmd: command not found"]
        );
        assert_eq!(exit_code(&facts), 127);
    }

    #[test]
    fn other_exec_failures_are_reported_with_strerror() {
        let mut exited = confined_exit(ExitStatus::Code(126), Ending::Exited);
        exited.exec_errno = Some(nix::errno::Errno::EACCES as i32);
        let facts = Facts::from_outcome(Outcome::Exited(exited), false);
        let args = RunArgs::new(["./x"]);
        assert_eq!(
            notes(&facts, OsStr::new("./x"), &args),
            ["./x: Permission denied"]
        );
    }

    #[test]
    fn a_refusal_is_explained_in_one_line() {
        let args = RunArgs::new(["ls"]);
        assert_eq!(
            notes(&refused("mode above the ceiling"), OsStr::new("ls"), &args),
            ["confine-helper refused the command: mode above the ceiling"]
        );
    }

    #[test]
    fn a_denial_is_explained_with_the_option_that_would_allow_it() {
        let mut facts = Facts::from_outcome(
            Outcome::Exited(confined_exit(ExitStatus::Code(6), Ending::Exited)),
            true,
        );
        facts.denial = Some(Denial {
            kinds: vec![Kind::FileWrite, Kind::Network],
            lifted_by: Some(Mode::DangerFullAccess),
        });
        let mut args = RunArgs::new(["curl"]);
        args.mode = Mode::WorkspaceWrite;
        assert_eq!(
            notes(&facts, OsStr::new("curl"), &args),
            [
                "the sandbox denied a file write outside the writable roots (--writable-root \
                 DIR adds one; --mode danger-full-access runs the command unconfined)",
                "the sandbox denied network access (--network allow permits it)",
            ]
        );
        // With --json the facts say it: "denials".
        args.json = true;
        assert!(notes(&facts, OsStr::new("curl"), &args).is_empty());
        assert!(
            facts
                .to_json()
                .contains(r#""denied":true,"denials":["file-write","network"]"#),
            "{}",
            facts.to_json()
        );
    }

    #[test]
    fn a_runner_failure_names_the_stage_and_the_error() {
        let args = RunArgs::new(["ls"]);
        let facts = runner_failed(Stage::Chdir, nix::errno::Errno::ENOENT as i32, "/gone");
        assert_eq!(
            notes(&facts, OsStr::new("ls"), &args),
            [
                "the sandbox runner failed at stage chdir (No such file or directory): /gone; \
                 the command did not run"
            ]
        );
    }

    /// The helper's own text for an unavailable backend, as confine-helper words it.
    const UNAVAILABLE: &str = "no usable sandbox backend for workspace-write (bwrap: bwrap is \
        not installed (looked in /usr/bin/bwrap); landlock: this kernel does not offer \
        Landlock); nothing was run unconfined. To fix: install bubblewrap";

    #[test]
    fn an_unavailable_backend_passes_on_the_helpers_detail_and_says_nothing_ran() {
        let mut args = RunArgs::new(["ls"]);
        args.mode = Mode::WorkspaceWrite;
        let note = notes(
            &runner_failed(Stage::Unavailable, 0, UNAVAILABLE),
            OsStr::new("ls"),
            &args,
        );
        assert_eq!(
            note,
            [format!(
                "the command did not run because confine-helper cannot confine it on this \
                 machine: {UNAVAILABLE}"
            )]
        );
    }

    #[test]
    fn an_unavailable_forced_backend_points_at_the_automatic_choice() {
        let mut args = RunArgs::new(["ls"]);
        args.backend = BackendChoice::Seatbelt;
        let note = notes(
            &runner_failed(Stage::Unavailable, 0, "seatbelt: this is Linux"),
            OsStr::new("ls"),
            &args,
        );
        assert_eq!(
            note,
            [
                "the command did not run because confine-helper cannot confine it on this \
                 machine: seatbelt: this is Linux",
                "only --backend seatbelt was tried; without --backend confine-helper uses \
                 whichever backend works on this machine"
            ]
        );
    }

    #[test]
    fn with_json_failures_are_left_to_the_json_line() {
        let mut args = RunArgs::new(["ls"]);
        args.json = true;
        assert!(notes(&refused("no"), OsStr::new("ls"), &args).is_empty());
    }

    #[test]
    fn a_missing_workspace_is_a_clear_error() {
        let mut args = RunArgs::new(["ls"]);
        args.workspace = Some(PathBuf::from("/nonexistent-agentd-workspace"));
        let err = prepare(&args).expect_err("workspace missing");
        let text = err.to_string();
        assert!(text.contains("/nonexistent-agentd-workspace"), "{text}");
        assert!(text.contains("--workspace"), "{text}");
    }

    #[test]
    fn writable_roots_are_made_absolute_against_the_current_directory_only() {
        let mut args = RunArgs::new(["ls"]);
        args.writable_roots = vec![
            PathBuf::from("/abs/../kept"),
            PathBuf::from("rel/dir"),
            PathBuf::from("./nonexistent"),
        ];
        let spec = prepare(&args).expect("prepares");
        let cwd = std::env::current_dir().expect("cwd");
        assert_eq!(
            spec.policy.writable_roots,
            [
                b"/abs/../kept".to_vec(),
                cwd.join("rel/dir").into_os_string().into_vec(),
                cwd.join("./nonexistent").into_os_string().into_vec(),
            ]
        );
    }

    #[test]
    fn protected_paths_and_limits_are_passed_as_given() {
        let mut args = RunArgs::new(["ls"]);
        args.protected = vec![PathBuf::from(".env"), PathBuf::from("/odd/../one")];
        args.max_processes = Some(32);
        args.max_file_size = Some(1 << 20);
        args.max_address_space = Some(1 << 32);
        let spec = prepare(&args).expect("prepares");
        assert_eq!(
            spec.policy.protected,
            [b".env".to_vec(), b"/odd/../one".to_vec()]
        );
        assert_eq!(spec.limits.max_processes, Some(32));
        assert_eq!(spec.limits.max_file_size, Some(1 << 20));
        assert_eq!(spec.limits.max_address_space, Some(1 << 32));
    }

    #[test]
    fn the_request_carries_only_the_allowed_environment_and_explicit_settings() {
        let mut args = RunArgs::new(["ls"]);
        args.env = vec![
            ("AGENTD_TEST_SET".into(), "1".into()),
            ("AGENTD_TEST_SET".into(), "2".into()),
        ];
        let spec = prepare(&args).expect("prepares");
        let names: Vec<&OsString> = spec.env.iter().map(|(name, _)| name).collect();
        for (name, value) in &spec.env {
            assert!(
                environment::passes_on(name, value) || name == "AGENTD_TEST_SET",
                "{name:?} passed on"
            );
        }
        let expected: Vec<OsString> = std::env::vars_os()
            .filter(|(name, value)| environment::passes_on(name, value))
            .map(|(name, _)| name)
            .collect();
        for name in &expected {
            assert!(names.contains(&name), "{name:?} missing");
        }
        assert_eq!(
            spec.env.last(),
            Some(&(OsString::from("AGENTD_TEST_SET"), OsString::from("2")))
        );
        assert_eq!(names.len(), expected.len() + 1);
    }

    #[test]
    fn the_request_carries_the_workspace_mode_and_timeout() {
        let mut args = RunArgs::new(["ls", "-l"]);
        args.workspace = Some(PathBuf::from("/"));
        args.mode = Mode::WorkspaceWrite;
        args.network = Network::Allow;
        args.timeout_secs = Some(7);
        let spec = prepare(&args).expect("prepares");
        assert_eq!(spec.argv, ["ls", "-l"]);
        assert_eq!(spec.policy.mode, Mode::WorkspaceWrite);
        assert_eq!(spec.policy.network, Network::Allow);
        assert_eq!(spec.policy.workspace_root.as_deref(), Some(&b"/"[..]));
        assert!(spec.policy.writable_roots.is_empty());
        assert_eq!(spec.limits.timeout_ms, Some(7000));
        assert_eq!(spec.limits.kill_grace_ms, 2000);
        assert_eq!(spec.limits.max_processes, None);
        assert_eq!(spec.limits.max_file_size, None);
        assert_eq!(spec.limits.max_address_space, None);
        assert!(spec.policy.protected.is_empty());
    }
}

#[cfg(test)]
mod job_tests {
    //! `run_job` against the fake helper of `test_support`.

    use std::io::Write;
    use std::os::fd::OwnedFd;
    use std::sync::mpsc as std_mpsc;

    use confine_protocol::{
        Backend, Cancel, Ending, Enforcement, Refused, Reply, Request, Started, StdioSpec,
    };
    use tokio::io::AsyncReadExt;

    use super::*;
    use crate::test_support::{Peer, Scratch, exited, fake_service, within};

    /// The command's stdout and stderr descriptors: the last two passed with the spawn.
    fn output_fds(peer: &mut Peer, spawn: &confine_protocol::Spawn) -> (OwnedFd, OwnedFd) {
        assert_eq!(spawn.stdio.stdout, StdioSpec::Fd);
        assert_eq!(spawn.stdio.stderr, StdioSpec::Fd);
        let passed = [spawn.stdio.stdin, spawn.stdio.stdout, spawn.stdio.stderr]
            .iter()
            .filter(|s| **s == StdioSpec::Fd)
            .count();
        assert_eq!(peer.fds.len(), passed);
        let stderr = peer.fds.pop_back().expect("stderr fd");
        let stdout = peer.fds.pop_back().expect("stdout fd");
        (stdout, stderr)
    }

    fn no_interrupts() -> (mpsc::UnboundedSender<()>, mpsc::UnboundedReceiver<()>) {
        mpsc::unbounded_channel()
    }

    #[tokio::test]
    async fn output_streams_as_it_comes_and_the_facts_line_ends_stderr() {
        let scratch = Scratch::new("job-stream");
        let (listener, client) = fake_service(&scratch);
        let (seen_tx, seen_rx) = std_mpsc::channel::<()>();
        let helper = tokio::task::spawn_blocking(move || {
            let mut peer = Peer::accept(&listener);
            let spawn = peer.spawn();
            assert_eq!(spawn.argv, [b"sh".to_vec(), b"-c".to_vec(), b"x".to_vec()]);
            let (stdout, stderr) = output_fds(&mut peer, &spawn);
            peer.send(&Reply::Started(Started {
                id: spawn.id,
                pid: 5,
            }));
            let mut stdout = std::fs::File::from(stdout);
            stdout.write_all(b"first\n").expect("write");
            // Only once agentd has passed "first" on does the command go on: output that
            // waited for the end would never get here.
            seen_rx.recv().expect("test saw the first line");
            stdout.write_all(b"second\n").expect("write");
            std::fs::File::from(stderr)
                .write_all(b"err\n")
                .expect("write");
            drop(stdout);
            peer.send(&exited(spawn.id, 3, Ending::Exited));
            assert!(peer.request().is_none());
        });

        let (sink, mut reader) = tokio::io::duplex(1024);
        let watcher = tokio::spawn(async move {
            let mut seen = Vec::new();
            let mut buf = [0u8; 64];
            while !seen.ends_with(b"first\n") {
                let n = reader.read(&mut buf).await.expect("read");
                assert_ne!(n, 0, "stdout ended before the first line");
                seen.extend_from_slice(&buf[..n]);
            }
            seen_tx.send(()).expect("helper waits");
            reader.read_to_end(&mut seen).await.expect("read");
            seen
        });
        let mut stderr = Vec::new();
        let mut args = RunArgs::new(["sh", "-c", "x"]);
        args.json = true;
        args.mode = Mode::DangerFullAccess;
        let (_keep, interrupts) = no_interrupts();
        let facts = within(run_job(&client, args, sink, &mut stderr, interrupts))
            .await
            .expect("ran");
        assert_eq!(exit_code(&facts), 3);
        assert_eq!(within(watcher).await.expect("watcher"), b"first\nsecond\n");
        let stderr = String::from_utf8(stderr).expect("utf-8");
        assert_eq!(
            stderr,
            "err\n{\"exit\":{\"code\":3},\"backend\":\"none\",\"enforcement\":null,\
             \"denied\":false,\"denials\":[],\"runner_failure\":null,\"refused\":null,\"timed_out\":false}\n"
        );
        assert_eq!(facts.stderr_tail, b"err\n");
        drop(client);
        within(helper).await.expect("fake helper");
    }

    /// Runs one command that writes `out` and `err` and exits with `code` under `backend`;
    /// returns the facts and agentd's stderr.
    async fn run_writing(
        name: &str,
        out: &'static [u8],
        err: String,
        code: i32,
        backend: Backend,
    ) -> (Facts, String) {
        let scratch = Scratch::new(name);
        let (listener, client) = fake_service(&scratch);
        let helper = tokio::task::spawn_blocking(move || {
            let mut peer = Peer::accept(&listener);
            let spawn = peer.spawn();
            let (stdout, stderr) = output_fds(&mut peer, &spawn);
            peer.send(&Reply::Started(Started {
                id: spawn.id,
                pid: 5,
            }));
            std::fs::File::from(stdout).write_all(out).expect("write");
            std::fs::File::from(stderr)
                .write_all(err.as_bytes())
                .expect("write");
            let mut ended = exited(spawn.id, code, Ending::Exited);
            if let Reply::Exited(e) = &mut ended {
                e.backend = backend;
                e.enforcement = Some(Enforcement::Full);
            }
            peer.send(&ended);
            assert!(peer.request().is_none());
        });
        let mut stdout = Vec::new();
        let mut stderr = Vec::new();
        let mut args = RunArgs::new(["sh", "-c", "x"]);
        args.json = true;
        let (_keep, interrupts) = no_interrupts();
        let facts = within(run_job(&client, args, &mut stdout, &mut stderr, interrupts))
            .await
            .expect("ran");
        assert_eq!(stdout, out);
        drop(client);
        within(helper).await.expect("fake helper");
        (facts, String::from_utf8(stderr).expect("utf-8"))
    }

    #[tokio::test]
    async fn the_commands_output_passes_untouched_and_agentds_notes_are_shown_safely() {
        const OUT: &[u8] = b"\x1b]52;c;cm0gLXJmIH4=\x07\xff\r";
        const ERR: &[u8] = b"\x1b[2A\xc2\x9b2K\n";
        let program = "./x\x1b]52;c;eA==\x07";
        let scratch = Scratch::new("job-controls");
        let (listener, client) = fake_service(&scratch);
        let helper = tokio::task::spawn_blocking(move || {
            let mut peer = Peer::accept(&listener);
            let spawn = peer.spawn();
            let (stdout, stderr) = output_fds(&mut peer, &spawn);
            std::fs::File::from(stdout).write_all(OUT).expect("write");
            std::fs::File::from(stderr).write_all(ERR).expect("write");
            let mut ended = exited(spawn.id, 127, Ending::Exited);
            if let Reply::Exited(e) = &mut ended {
                e.exec_errno = Some(nix::libc::ENOENT);
            }
            peer.send(&ended);
            assert!(peer.request().is_none());
        });
        let mut stdout = Vec::new();
        let mut stderr = Vec::new();
        let (_keep, interrupts) = no_interrupts();
        let facts = within(run_job(
            &client,
            RunArgs::new([program]),
            &mut stdout,
            &mut stderr,
            interrupts,
        ))
        .await
        .expect("ran");
        assert_eq!(exit_code(&facts), 127);
        // The user asked for the program's output: byte for byte, escapes and all.
        assert_eq!(stdout, OUT);
        let (command_err, notes) = stderr.split_at(ERR.len());
        assert_eq!(command_err, ERR);
        // agentd's own note quotes the program's name: shown, not obeyed.
        assert_eq!(
            String::from_utf8_lossy(notes),
            "agentd: ./x\\x1b]52;c;eA==\\x07: command not found\n"
        );
        drop(client);
        within(helper).await.expect("fake helper");
    }

    #[tokio::test]
    async fn a_denial_on_stderr_is_reported_in_the_facts() {
        // Outside the workspace (agentd's current directory), where anyone may write.
        let outside = std::env::temp_dir().join("c");
        let (facts, stderr) = run_writing(
            "job-denied",
            b"",
            format!(
                "sh: 1: cannot create {}: Read-only file system\n",
                outside.display()
            ),
            2,
            Backend::Bwrap,
        )
        .await;
        assert!(facts.denied());
        assert_eq!(exit_code(&facts), 2);
        assert!(
            stderr.ends_with(
                "{\"exit\":{\"code\":2},\"backend\":\"bwrap\",\"enforcement\":{\"level\":\
                 \"full\",\"missing\":[],\"layers\":[]},\"denied\":true,\"denials\":\
                 [\"file-write\"],\"runner_failure\":null,\"refused\":null,\"timed_out\":false}\n"
            ),
            "{stderr}"
        );
    }

    #[tokio::test]
    async fn a_denial_text_on_stdout_only_is_not_a_denial() {
        let (facts, stderr) = run_writing(
            "job-stdout-denial",
            b"grep: /tmp/c: Read-only file system\nPermission denied\n",
            String::new(),
            1,
            Backend::Bwrap,
        )
        .await;
        assert!(!facts.denied());
        assert!(stderr.contains("\"denied\":false"), "{stderr}");
    }

    #[tokio::test]
    async fn an_interrupt_cancels_the_command_and_the_job_waits_for_its_end() {
        let scratch = Scratch::new("job-cancel");
        let (listener, client) = fake_service(&scratch);
        let (interrupt, interrupts) = mpsc::unbounded_channel();
        let helper = tokio::task::spawn_blocking(move || {
            let mut peer = Peer::accept(&listener);
            let spawn = peer.spawn();
            let outputs = output_fds(&mut peer, &spawn);
            peer.send(&Reply::Started(Started {
                id: spawn.id,
                pid: 5,
            }));
            interrupt.send(()).expect("job listens");
            let Some(Request::Cancel(Cancel { id, grace_ms })) = peer.request() else {
                panic!("expected a Cancel");
            };
            assert_eq!((id, grace_ms), (spawn.id, 2000));
            // The cancelled command's tree is gone, and with it its ends of the pipes.
            drop(outputs);
            let mut ended = exited(id, 0, Ending::Cancelled);
            if let Reply::Exited(e) = &mut ended {
                e.status = ExitStatus::Signal(15);
            }
            peer.send(&ended);
            assert!(peer.request().is_none());
        });
        let mut stderr = Vec::new();
        let facts = within(run_job(
            &client,
            RunArgs::new(["sleep", "100"]),
            Vec::new(),
            &mut stderr,
            interrupts,
        ))
        .await
        .expect("ran");
        assert!(facts.cancelled);
        assert_eq!(exit_code(&facts), 143);
        assert_eq!(stderr, b"agentd: the command was cancelled\n");
        drop(client);
        within(helper).await.expect("fake helper");
    }

    #[tokio::test]
    async fn a_refusal_exits_125_with_a_one_line_explanation() {
        let scratch = Scratch::new("job-refused");
        let (listener, client) = fake_service(&scratch);
        let helper = tokio::task::spawn_blocking(move || {
            let mut peer = Peer::accept(&listener);
            let spawn = peer.spawn();
            peer.fds.clear();
            peer.send(&Reply::Refused(Refused {
                id: spawn.id,
                reason: "mode above the ceiling".to_owned(),
            }));
            assert!(peer.request().is_none());
        });
        let mut stdout = Vec::new();
        let mut stderr = Vec::new();
        let (_keep, interrupts) = no_interrupts();
        let facts = within(run_job(
            &client,
            RunArgs::new(["ls"]),
            &mut stdout,
            &mut stderr,
            interrupts,
        ))
        .await
        .expect("job ran");
        assert_eq!(exit_code(&facts), 125);
        assert!(stdout.is_empty());
        assert_eq!(
            stderr,
            b"agentd: confine-helper refused the command: mode above the ceiling\n"
        );
        drop(client);
        within(helper).await.expect("fake helper");
    }

    #[tokio::test]
    async fn a_helper_lost_mid_command_is_reported_even_if_the_output_stays_open() {
        let scratch = Scratch::new("job-lost");
        let (listener, client) = fake_service(&scratch);
        let (done_tx, done_rx) = std_mpsc::channel::<()>();
        let helper = tokio::task::spawn_blocking(move || {
            let mut peer = Peer::accept(&listener);
            let spawn = peer.spawn();
            // An orphaned command: it keeps its output open after the helper is gone.
            let outputs = output_fds(&mut peer, &spawn);
            peer.send(&Reply::Started(Started {
                id: spawn.id,
                pid: 5,
            }));
            drop(peer);
            done_rx.recv().expect("job finished");
            drop(outputs);
        });
        let mut stderr = Vec::new();
        let mut args = RunArgs::new(["sleep", "100"]);
        args.json = true;
        let (_keep, interrupts) = no_interrupts();
        let facts = within(run_job(&client, args, Vec::new(), &mut stderr, interrupts))
            .await
            .expect("job ran");
        done_tx.send(()).expect("helper waits");
        assert_eq!(exit_code(&facts), 125);
        let failure = facts.runner_failure.as_ref().expect("runner failure");
        assert_eq!(failure.stage, Stage::HelperExited);
        let stderr = String::from_utf8(stderr).expect("utf-8");
        assert!(
            stderr.ends_with(
                "\"runner_failure\":{\"stage\":\"helper-exited\",\"detail\":\"confine-helper \
                 closed the connection\"},\"refused\":null,\"timed_out\":false}\n"
            ),
            "{stderr}"
        );
        within(helper).await.expect("fake helper");
    }
}
