//! `agentd run`: one command through confine-helper, its output streamed, its facts reported;
//! its flags, the job, and the notes and exit status that end it.
//!
//! The command's stdout and stderr are pipes whose write ends go to the helper with the request
//! and whose read ends agentd copies to its own streams as the bytes come. agentd reports only
//! once the terminal reply has arrived and both pipes have reached end-of-file, so nothing the
//! command wrote can appear after the facts. The facts line (`--json`) is the last line of
//! stderr so a caller can take it without parsing the command's own output.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use clap::Args;
use clap::builder::{OsStringValueParser, TypedValueParser};
use confine_protocol::environment::{SECRET_NAMES, SECRET_WORDS};
use confine_protocol::vocabulary::{BACKEND_CHOICE_WORDS, MODE_WORDS, NETWORK_WORDS};
use confine_protocol::{BackendChoice, ExitStatus, Mode, Network, Stage};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

pub use super::run_args::RunArgs;
use super::run_args::{deny_read_entry, unix_socket_entry};
pub use super::signals::forward_signals;

use super::args::HelperArgs;
use super::exit::{EXIT_DID_NOT_RUN, EXIT_INTERRUPTED, EXIT_TIMED_OUT, fail, report};
use super::run_notes::denial_notes;
use super::word::Word;
use crate::command::{
    Facts, KILL_GRACE, Waiting, copy_output, exec_failure_note, runner_failure_note, settle,
    wait_for_outcome, wide_output_pipe,
};
use crate::config::{ConfigError, Effective, protect_project};
use crate::deny_read::DenyRead;
use crate::environment;
use crate::helper_client::{ClientError, FailedAt, HelperClient, SpawnSpec, WorkspaceRefusal};
use crate::profile::{CacheDirError, ResourceLimits, SandboxProfile};
use crate::proxy::Gateway;
use crate::terminal;
use crate::tools::ToolEnv;

// `agentd run [OPTIONS] -- ARGV...` (its help is the variant's in `Command`)
#[derive(Debug, Args)]
pub struct RunCommand {
    /// How far the command may reach [default: sandbox.mode or AGENTD_SANDBOX_MODE when set,
    /// else read-only].
    #[arg(long, value_parser = Word::<Mode>::new(MODE_WORDS), value_name = "MODE")]
    pub mode: Option<Mode>,
    /// The workspace root [default: the current directory].
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Where the command runs [default: the current directory when it lies inside the
    /// workspace, else the workspace].
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Whether the command may use the network [default: sandbox.network when set, else deny].
    #[arg(long, value_parser = Word::<Network>::new(NETWORK_WORDS), value_name = "NETWORK")]
    pub network: Option<Network>,
    /// Which confinement backend to use [default: sandbox.backend when set, else auto].
    #[arg(
        long,
        value_parser = Word::<BackendChoice>::new(BACKEND_CHOICE_WORDS),
        value_name = "BACKEND"
    )]
    pub backend: Option<BackendChoice>,
    /// Terminate the command after this many seconds (exit status 124).
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: Option<u64>,
    /// Also let the command write DIR (workspace-write); repeatable.
    ///
    /// A relative DIR is taken from the current directory. It adds to `[sandbox]
    /// writable_roots` and `cache` of the configuration file. confine-helper refuses it if its
    /// ceiling does not allow writing there.
    #[arg(long = "writable-root", value_name = "DIR")]
    pub writable_roots: Vec<PathBuf>,
    /// Keep SUBPATH read-only inside every writable root; repeatable.
    ///
    /// SUBPATH is relative to each root, e.g. `.env` or `secrets/`. It adds to the repository
    /// metadata the helper always protects, to `[sandbox] protected` of the configuration file,
    /// to the workspace's `.agentd/config.toml`, and to `.agentd` itself when the workspace has
    /// one.
    #[arg(long = "protect", value_name = "SUBPATH")]
    pub protected: Vec<PathBuf>,
    /// Deny reading PATH in every confined mode; repeatable.
    ///
    /// An absolute path, `~/…`, or `**/NAME` for every NAME in the workspace and writable roots
    /// (`*` allowed in NAME). It adds to `[sandbox] deny_read` of the configuration file.
    #[arg(long = "deny-read", value_name = "PATH", value_parser = deny_read_entry)]
    pub deny_read: Vec<DenyRead>,
    /// Allow loopback sockets inside the sandbox's own network namespace (namespaces or bwrap
    /// only).
    #[arg(long)]
    pub local_binding: bool,
    /// Let the command connect to the named Unix socket PATH; repeatable.
    ///
    /// An absolute path, `~/…`, or a path relative to the current directory, used as named
    /// (the command connects by that name). It adds to `[sandbox] unix_sockets` of the
    /// configuration file. confine-helper connects on the command's behalf (namespaces or bwrap,
    /// with the network denied); any other Unix socket is refused.
    #[arg(long = "unix-socket", value_name = "PATH", value_parser = unix_socket_entry)]
    pub unix_sockets: Vec<PathBuf>,
    /// Let the command reach DOMAIN (`*.example.com`: its sub-domains) through the allow-list
    /// proxy, with no other network; repeatable. Replaces `[sandbox] allowed_domains`.
    #[arg(long = "allow-domain", value_name = "DOMAIN")]
    pub allow_domains: Vec<String>,
    /// Refuse DOMAIN even when --allow-domain allows it; repeatable.
    #[arg(
        long = "deny-domain",
        value_name = "DOMAIN",
        requires = "allow_domains"
    )]
    pub deny_domains: Vec<String>,
    /// Let an allowed domain (or a listed address) lead to this machine itself: loopback, any
    /// address of its interfaces, its link-local neighbours.
    #[arg(long, requires = "allow_domains")]
    pub allow_local_addresses: bool,
    /// Cap the tasks (processes and threads) the command's tree may have at once; confined
    /// modes only.
    ///
    /// Counted for the command's tree alone. Without it confine-helper caps it at 2048, and
    /// lowers it further to its ceiling's max_processes.
    #[arg(long, value_name = "N")]
    pub max_processes: Option<u64>,
    /// Limit the size of any file the command writes, in bytes (RLIMIT_FSIZE).
    ///
    /// confine-helper lowers it further to its ceiling's max_file_size.
    #[arg(long, value_name = "BYTES")]
    pub max_file_size: Option<u64>,
    /// Limit the command's virtual memory, in bytes (RLIMIT_AS).
    ///
    /// confine-helper lowers it further to its ceiling's max_address_space.
    #[arg(long, value_name = "BYTES")]
    pub max_address_space: Option<u64>,
    /// Cap the memory the command's tree may use at once, in bytes; confined modes only.
    ///
    /// Enforced where confine-helper can count a tree's memory (run as root: a cgroup of the
    /// command's own). Without it, half of the machine's memory, lowered further to the
    /// ceiling's max_memory.
    #[arg(long, value_name = "BYTES")]
    pub max_memory: Option<u64>,
    /// Set a variable for the command; repeatable, a later one wins.
    #[arg(
        long = "env",
        value_name = "NAME=VALUE",
        value_parser = OsStringValueParser::new().try_map(|s| environment::parse_assignment(&s)),
        long_help = env_long_help(),
    )]
    pub env: Vec<(OsString, OsString)>,
    /// Print the facts as one JSON object on the last line of stderr.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub helper: HelperArgs,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "ARGV")]
    pub argv: Vec<OsString>,
}

impl RunCommand {
    /// The job's arguments, with `agentd run`'s own defaults where a flag is absent (the
    /// configuration's are applied by `run_command`).
    pub fn run_args(&self) -> RunArgs {
        RunArgs {
            argv: self.argv.clone(),
            mode: self.mode.unwrap_or(Mode::ReadOnly),
            workspace: self.workspace.clone(),
            cwd: self.cwd.clone(),
            network: self.network.unwrap_or(Network::Deny),
            backend: self.backend.unwrap_or(BackendChoice::Auto),
            timeout_secs: self.timeout,
            writable_roots: self.writable_roots.clone(),
            protected: self.protected.clone(),
            deny_read: self.deny_read.clone(),
            local_binding: self.local_binding,
            unix_sockets: self.unix_sockets.clone(),
            max_processes: self.max_processes,
            max_file_size: self.max_file_size,
            max_address_space: self.max_address_space,
            max_memory: self.max_memory,
            env: self.env.clone(),
            json: self.json,
            profile: SandboxProfile::default(),
        }
    }
}

/// The long help of `--env`: what a command gets of agentd's environment.
fn env_long_help() -> String {
    format!(
        "Set a variable for the command; repeatable, a later one wins.\n\n\
         Of agentd's own environment the command gets only {}; these settings go on top. \
         confine-helper refuses to run a command given a secret-looking name (one containing \
         {}, or one of {}) unless its ceiling's env_allow lists it, and a locale variable (LANG, \
         LANGUAGE, LC_ALL, ...) whose value is not a locale name.",
        environment::inherited_summary(),
        SECRET_WORDS.join(", "),
        SECRET_NAMES.join(", "),
    )
}

/// Runs `agentd run`: the command through the configured helper, interrupts forwarded.
pub(crate) async fn run_command(command: RunCommand) -> u8 {
    let config = match Effective::load(&command.helper.flags()) {
        Ok(config) => config,
        Err(e) => return fail(&e),
    };
    let client = match config.helper_client() {
        Ok(client) => client,
        Err(e) => return fail(&e),
    };
    // The helper starts while the command is prepared; it greets when the request is ready,
    // and is asked for its verdicts with it.
    client.start_early();
    client.learn_verdicts_with_next_request();
    // A flag beats what the configuration sets (file or environment, as `config show` lists
    // it); with neither, `agentd run`'s own defaults: read-only, no network, any backend.
    // `[sandbox.env]` first, so that `--env` beats it.
    let mut env = config
        .sandbox_env
        .value
        .explicit(crate::config::process_lookup);
    env.extend(command.run_args().env);
    let args = RunArgs {
        profile: config.sandbox_profile(),
        env,
        mode: command
            .mode
            .or(config.sandbox_mode.configured())
            .unwrap_or(Mode::ReadOnly),
        network: command
            .network
            .or(config.network.configured())
            .unwrap_or(Network::Deny),
        backend: command
            .backend
            .or(config.backend.configured())
            .unwrap_or(BackendChoice::Auto),
        ..command.run_args()
    };
    let mut args = args;
    if !command.allow_domains.is_empty() {
        let policy = crate::config::allow_list::policy(
            &command.allow_domains,
            &command.deny_domains,
            command.allow_local_addresses,
        );
        match policy {
            Ok(policy) => args.profile.allow_list = Some(std::sync::Arc::new(policy)),
            Err(e) => return fail(&format!("--allow-domain: {e}")),
        }
    }
    let (interrupts, received) = match forward_signals() {
        Ok(forwarded) => forwarded,
        Err(e) => return fail(&format!("cannot listen for SIGINT and SIGTERM: {e}")),
    };
    let job = run_job(
        &client,
        args,
        tokio::io::stdout(),
        tokio::io::stderr(),
        interrupts,
    );
    match job.await {
        Ok(facts) => {
            client.learn_verdicts().await;
            interrupted_exit_code(&facts, received.load(Ordering::SeqCst))
        }
        Err(e) => {
            report(&e);
            e.exit_code()
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
    #[error(
        "the working directory {}: {source}; pass an existing directory with --cwd, or leave \
         --cwd out to run in the workspace",
        path.display()
    )]
    Cwd {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    NotWritable(#[from] WorkspaceRefusal),
    #[error("--timeout {0} is too large")]
    TimeoutTooLarge(u64),
    #[error("cannot create a pipe for the command's output: {0}")]
    Pipe(#[source] io::Error),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    CacheDir(#[from] CacheDirError),
    #[error(transparent)]
    Project(ConfigError),
    #[error(transparent)]
    DenyRead(#[from] crate::deny_read::ExpandError),
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

/// The exit status of `agentd run` when it was interrupted by signal `received` (0: it was
/// not): a command that ran and ended after the interrupt ends agentd as the interrupt would
/// have, 128+N (130 for SIGINT, 143 for SIGTERM), whatever the command's own end — it was
/// cancelled with SIGTERM, and the person pressed Ctrl-C. Otherwise [`exit_code`].
pub fn interrupted_exit_code(facts: &Facts, received: i32) -> u8 {
    let ran = facts.exit.is_some() && facts.refused.is_none() && facts.runner_failure.is_none();
    match u8::try_from(received) {
        Ok(signal @ 1..=127) if ran => 128 + signal,
        _ => exit_code(facts),
    }
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
    let mut spec = prepare(&args)?;
    let workspace = spec
        .policy
        .workspace_root
        .as_deref()
        .map(|w| PathBuf::from(<OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(w)))
        .unwrap_or_default();
    if args.mode == Mode::WorkspaceWrite {
        if let Some(refusal) = client.workspace_refusal(&workspace, environment::home(&spec.env)) {
            return Err(refusal.into());
        }
        args.profile(&spec.cwd).create_cache_dirs()?;
    }
    // The project's own file may add protected paths; it is read confined, as a session reads
    // it. Unconfined, nothing is protected, so it is not read.
    if args.mode != Mode::DangerFullAccess {
        let reader = ToolEnv::new(
            client.clone(),
            workspace,
            spec.env.clone(),
            args.network,
            args.backend,
            None,
        );
        protect_project(&reader, &mut spec.policy)
            .await
            .map_err(RunError::Project)?;
    }
    let scope = args.profile(&spec.cwd).scope(&spec.cwd, &spec.policy);
    let policy = spec.policy.clone();
    let (out_read, out_write) = wide_output_pipe().map_err(RunError::Pipe)?;
    let (err_read, err_write) = wide_output_pipe().map_err(RunError::Pipe)?;
    let mut spec = SpawnSpec {
        stdout: Some(out_write),
        stderr: Some(err_write),
        ..spec
    };
    let gateway = match args.profile.proxy(args.mode, args.network) {
        Some(policy) => Some(Gateway::attach(&mut spec, policy).map_err(RunError::Pipe)?),
        None => None,
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
    let waiting = wait_for_outcome(handle, &mut interrupts, Waiting::default());
    let ended = settle(waiting, copies).await;

    // The report starts on a line of its own, also after output that did not end one.
    let open_line = tail.last().is_some_and(|&byte| byte != b'\n');
    let mut facts = Facts::from_outcome(ended.outcome, ended.started)
        .given(&policy)
        .with_stderr_tail(tail, &scope);
    facts.proxy = gateway.map(Gateway::finish);
    let report = facts_report(&facts, &args, open_line);
    // The command's output already went out; a closed stderr only loses the report.
    let _ = stderr.write_all(report.as_bytes()).await;
    let _ = stderr.flush().await;
    let _ = stdout.flush().await;
    Ok(facts)
}

/// What `agentd run` reports on stderr once the command ended: the notes on its facts, and
/// with `--json` the JSON line; starting on a new line when the output left one `open_line`.
fn facts_report(facts: &Facts, args: &RunArgs, open_line: bool) -> String {
    let argv0 = args
        .argv
        .first()
        .map(OsString::as_os_str)
        .unwrap_or_default();
    let mut report = String::new();
    // The notes quote the program's name and the helper's reasons: shown, never obeyed.
    for note in notes(facts, argv0, args) {
        report.push_str("agentd: ");
        report.push_str(&terminal::visible(&note));
        report.push('\n');
    }
    if args.json {
        report.push_str(&facts.to_json());
        report.push('\n');
    }
    if open_line && !report.is_empty() {
        report.insert(0, '\n');
    }
    report
}

/// Where the command runs, by its real path: `cwd` (from `here`) when given; else `here` when
/// it lies inside the workspace, as a shell started there would; else the workspace itself.
fn working_directory(
    cwd: Option<&Path>,
    here: &Path,
    workspace: &Path,
) -> Result<PathBuf, RunError> {
    let chosen = match cwd {
        Some(dir) => here.join(dir),
        None => match here.canonicalize() {
            Ok(real) if real.starts_with(workspace) => real,
            _ => return Ok(workspace.to_owned()),
        },
    };
    let real = chosen.canonicalize().map_err(|source| RunError::Cwd {
        path: chosen.clone(),
        source,
    })?;
    if !real.is_dir() {
        return Err(RunError::Cwd {
            path: chosen,
            source: io::Error::from(io::ErrorKind::NotADirectory),
        });
    }
    Ok(real)
}

/// Everything of the spawn request that does not need a pipe.
fn prepare(args: &RunArgs) -> Result<SpawnSpec, RunError> {
    if args.argv.is_empty() {
        return Err(RunError::NoCommand);
    }
    let here = std::env::current_dir().map_err(RunError::CurrentDir)?;
    let workspace = args.workspace.clone().unwrap_or_else(|| here.clone());
    let workspace = workspace
        .canonicalize()
        .map_err(|source| RunError::Workspace {
            path: workspace.clone(),
            source,
        })?;
    if !workspace.is_dir() {
        return Err(RunError::WorkspaceNotDirectory { path: workspace });
    }
    let cwd = working_directory(args.cwd.as_deref(), &here, &workspace)?;
    let timeout_ms = match args.timeout_secs {
        Some(secs) => Some(
            secs.checked_mul(1000)
                .ok_or(RunError::TimeoutTooLarge(secs))?,
        ),
        None => None,
    };
    let mut spec = SpawnSpec::new(args.argv.iter().cloned());
    spec.policy = args
        .profile(&here)
        .policy(args.mode, &workspace, args.network)?;
    spec.cwd = cwd;
    spec.env = environment::command_environment(std::env::vars_os(), &args.env);
    spec.backend = args.backend;
    spec.limits.timeout_ms = timeout_ms;
    spec.limits.kill_grace_ms = u32::try_from(KILL_GRACE.as_millis()).unwrap_or(u32::MAX);
    // The configuration's limits, then the flags', which beat them.
    args.profile.limits.apply(&mut spec.limits);
    ResourceLimits {
        max_processes: args.max_processes,
        max_file_size: args.max_file_size,
        max_address_space: args.max_address_space,
        max_memory: args.max_memory,
    }
    .apply(&mut spec.limits);
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
        if failure.stage == FailedAt::Step(Stage::Unavailable)
            && args.backend != BackendChoice::Auto
        {
            notes.push(format!(
                "only --backend {} was tried; without --backend confine-helper uses whichever \
                 backend works on this machine",
                args.backend.as_str()
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
    notes.extend(facts.caps_reached_notes());
    notes.extend(denial_notes(facts, args.mode));
    notes
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "run_job_tests.rs"]
mod job_tests;
