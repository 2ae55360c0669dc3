//! The command line: parsing, and turning a parsed command into work and an exit status.
//!
//! Every command reads its settings through [`Effective`]: the flags a command takes
//! ([`HelperArgs`], or [`AgentArgs`] for the commands that run or inspect sessions) beat the
//! `AGENTD_*` environment variables, which beat the configuration file.

pub mod sessions;
mod word;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::builder::{OsStringValueParser, TypedValueParser};
use clap::{Args, Parser, Subcommand, ValueEnum};
use confine_protocol::environment::{SECRET_NAMES, SECRET_WORDS};
use confine_protocol::vocabulary::MODE_WORDS;
use confine_protocol::{BackendChoice, Mode, Network};

use crate::config::{ConfigError, Effective, Flags};
use crate::environment;
use crate::run::{self, EXIT_DID_NOT_RUN, RunArgs};
use crate::terminal;
use word::Word;

/// The exit status of `config` and `sessions` when they fail.
pub const EXIT_FAILURE: u8 = 1;

/// agentd: a coding agent whose every command runs through confine-helper.
#[derive(Debug, Parser)]
#[command(name = "agentd", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// What agentd is asked to do.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one command through confine-helper and exit with its status.
    ///
    /// Exit status: the command's own; 128+N if killed by signal N; 124 on timeout; 125 if the
    /// command did not run (refused, runner failure, helper problem, bad arguments).
    Run(RunCommand),
    /// Show agentd's configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// List and show the sessions agentd has recorded.
    #[command(subcommand)]
    Sessions(SessionsCommand),
    /// Serve the Agent Client Protocol (v1) on stdin/stdout, for an editor such as Zed or any
    /// ACP client. Logs go to stderr.
    Acp(AcpCommand),
    /// Run a short scripted session end to end and print what happened: a file read, a write
    /// inside the workspace, and a write outside it that the sandbox refuses. Exits 0 when
    /// everything happened as it should.
    Demo(DemoCommand),
}

/// `agentd demo [OPTIONS]`
#[derive(Debug, Args)]
pub struct DemoCommand {
    #[command(flatten)]
    pub helper: HelperArgs,
    /// The sandbox mode of the demo session.
    #[arg(
        long,
        value_parser = Word::<Mode>::new(MODE_WORDS),
        default_value_t = Mode::WorkspaceWrite,
        value_name = "MODE"
    )]
    pub sandbox_mode: Mode,
}

/// `agentd acp [OPTIONS]`
#[derive(Debug, Args)]
pub struct AcpCommand {
    #[command(flatten)]
    pub agent: AgentArgs,
    /// The sandbox mode of new sessions (overrides AGENTD_SANDBOX_MODE and sandbox.mode).
    #[arg(long, value_parser = Word::<Mode>::new(MODE_WORDS), value_name = "MODE")]
    pub sandbox_mode: Option<Mode>,
}

/// `agentd config ...`
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print every effective setting and where it comes from (default, file, environment or
    /// flag), one per line.
    ///
    /// Secrets are never printed: of the API key, only the name of its variable and whether it
    /// is set.
    Show(AgentArgs),
}

/// `agentd sessions ...`
#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// List the sessions in the state directory, one per line, most recently updated last:
    /// id, last update (UTC), turns, working directory, first prompt.
    List(AgentArgs),
    /// Print the transcript of one session.
    Show(SessionsShow),
}

/// `agentd sessions show ID`
#[derive(Debug, Args)]
pub struct SessionsShow {
    /// The session's id, as `agentd sessions list` prints it.
    #[arg(value_name = "ID")]
    pub id: String,
    #[command(flatten)]
    pub agent: AgentArgs,
}

/// The flags shared by the commands that run or inspect sessions; each beats the environment and
/// the configuration file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub struct AgentArgs {
    #[command(flatten)]
    pub helper: HelperArgs,
    /// Keep session logs in DIR (overrides AGENTD_STATE_DIR and session.state_dir)
    /// [default: $XDG_STATE_HOME/agentd/sessions].
    #[arg(long, value_name = "DIR", value_parser = non_empty_path())]
    pub state_dir: Option<PathBuf>,
    /// Answer prompts with the turns scripted in FILE instead of asking a model server
    /// (model.provider = "scripted", model.script = FILE).
    #[arg(long, value_name = "FILE", value_parser = non_empty_path())]
    pub model_script: Option<PathBuf>,
}

impl AgentArgs {
    /// The flags as configuration overrides.
    pub fn flags(&self) -> Flags {
        Flags {
            state_dir: self.state_dir.clone(),
            model_script: self.model_script.clone(),
            ..self.helper.flags()
        }
    }

    /// The effective configuration with these flags: see [`Effective::load`].
    pub fn effective(&self) -> Result<Effective, ConfigError> {
        Effective::load(&self.flags())
    }
}

/// `agentd run [OPTIONS] -- ARGV...`
#[derive(Debug, Args)]
pub struct RunCommand {
    /// How far the command may reach.
    #[arg(long, value_enum, default_value_t = ModeArg::ReadOnly)]
    pub mode: ModeArg,
    /// The workspace root [default: the current directory].
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Whether the command may use the network.
    #[arg(long, value_enum, default_value_t = NetworkArg::Deny)]
    pub network: NetworkArg,
    /// Which confinement backend to use.
    #[arg(long, value_enum, default_value_t = BackendArg::Auto)]
    pub backend: BackendArg,
    /// Terminate the command after this many seconds (exit status 124).
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: Option<u64>,
    /// Also let the command write DIR (workspace-write); repeatable.
    ///
    /// A relative DIR is taken from the current directory. confine-helper resolves it and
    /// refuses it if its ceiling does not allow writing there.
    #[arg(long = "writable-root", value_name = "DIR")]
    pub writable_roots: Vec<PathBuf>,
    /// Keep SUBPATH read-only inside every writable root; repeatable.
    ///
    /// SUBPATH is relative to each root, e.g. `.env` or `secrets/`. It adds to the helper's own
    /// list (.git/hooks, .git/config, .gitmodules, .agentd).
    #[arg(long = "protect", value_name = "SUBPATH")]
    pub protected: Vec<PathBuf>,
    /// Limit the processes of the command's user (RLIMIT_NPROC).
    ///
    /// confine-helper lowers it further to its ceiling's max_processes.
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

/// Which confine-helper to use and where the configuration file is; each overrides the
/// environment and the configuration file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub struct HelperArgs {
    /// The confine-helper binary to start (overrides AGENTD_HELPER, helper.path and
    /// helper.socket).
    #[arg(
        long,
        value_name = "PATH",
        conflicts_with = "helper_socket",
        value_parser = non_empty_path()
    )]
    pub helper: Option<PathBuf>,
    /// Connect to a confine-helper serving on this socket instead of starting one (overrides
    /// AGENTD_HELPER, helper.path and helper.socket).
    #[arg(long, value_name = "PATH", value_parser = non_empty_path())]
    pub helper_socket: Option<PathBuf>,
    /// Start confine-helper with this ceiling file, which can only narrow what it allows.
    ///
    /// Passed on as `confine-helper --fd 3 --ceiling PATH`; overrides helper.ceiling in the
    /// configuration file. The file must not be writable by group or others and must belong to
    /// you or root. Not with a helper socket: a service helper reads its own ceiling
    /// (`confine-helper serve --ceiling PATH`).
    #[arg(long, value_name = "PATH", value_parser = non_empty_path())]
    pub helper_ceiling: Option<PathBuf>,
    /// The configuration file, which must exist [default: $XDG_CONFIG_HOME/agentd/agentd.toml,
    /// else ~/.config/agentd/agentd.toml, if present].
    #[arg(long, value_name = "PATH", value_parser = non_empty_path())]
    pub config: Option<PathBuf>,
}

impl HelperArgs {
    /// The flags as configuration overrides.
    pub fn flags(&self) -> Flags {
        Flags {
            config: self.config.clone(),
            helper: self.helper.clone(),
            helper_socket: self.helper_socket.clone(),
            helper_ceiling: self.helper_ceiling.clone(),
            ..Flags::default()
        }
    }
}

/// A path that is not empty (an empty one would silently mean the current directory).
fn non_empty_path() -> impl TypedValueParser<Value = PathBuf> {
    OsStringValueParser::new().try_map(|value: OsString| {
        if value.is_empty() {
            Err("the path is empty")
        } else {
            Ok(PathBuf::from(value))
        }
    })
}

/// `--mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    ReadOnly,
    WorkspaceWrite,
    DangerFullAccess,
}

/// `--network`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum NetworkArg {
    Deny,
    Allow,
}

/// `--backend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackendArg {
    Auto,
    Bwrap,
    Landlock,
    Seatbelt,
}

impl From<ModeArg> for Mode {
    fn from(arg: ModeArg) -> Mode {
        match arg {
            ModeArg::ReadOnly => Mode::ReadOnly,
            ModeArg::WorkspaceWrite => Mode::WorkspaceWrite,
            ModeArg::DangerFullAccess => Mode::DangerFullAccess,
        }
    }
}

impl From<NetworkArg> for Network {
    fn from(arg: NetworkArg) -> Network {
        match arg {
            NetworkArg::Deny => Network::Deny,
            NetworkArg::Allow => Network::Allow,
        }
    }
}

impl From<BackendArg> for BackendChoice {
    fn from(arg: BackendArg) -> BackendChoice {
        match arg {
            BackendArg::Auto => BackendChoice::Auto,
            BackendArg::Bwrap => BackendChoice::Bwrap,
            BackendArg::Landlock => BackendChoice::Landlock,
            BackendArg::Seatbelt => BackendChoice::Seatbelt,
        }
    }
}

impl RunCommand {
    /// The job's arguments.
    pub fn run_args(&self) -> RunArgs {
        RunArgs {
            argv: self.argv.clone(),
            mode: self.mode.into(),
            workspace: self.workspace.clone(),
            network: self.network.into(),
            backend: self.backend.into(),
            timeout_secs: self.timeout,
            writable_roots: self.writable_roots.clone(),
            protected: self.protected.clone(),
            max_processes: self.max_processes,
            max_file_size: self.max_file_size,
            max_address_space: self.max_address_space,
            env: self.env.clone(),
            json: self.json,
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

/// Carries out a parsed command line and says how agentd should exit.
pub async fn execute(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Run(command) => ExitCode::from(run_command(command).await),
        Command::Config(ConfigCommand::Show(args)) => ExitCode::from(config_show(&args)),
        Command::Sessions(SessionsCommand::List(args)) => ExitCode::from(sessions_list(&args)),
        Command::Sessions(SessionsCommand::Show(show)) => {
            ExitCode::from(sessions_show(&show.agent, &show.id))
        }
        Command::Acp(command) => ExitCode::from(acp_command(command).await),
        Command::Demo(command) => ExitCode::from(demo_command(command).await),
    }
}

async fn demo_command(command: DemoCommand) -> u8 {
    let agentd = match std::env::current_exe() {
        Ok(path) => path,
        Err(e) => {
            eprintln!("agentd: cannot find its own executable: {e}");
            return EXIT_DID_NOT_RUN;
        }
    };
    let mut acp_args: Vec<OsString> = Vec::new();
    let h = &command.helper;
    for (flag, value) in [
        ("--helper", &h.helper),
        ("--helper-socket", &h.helper_socket),
        ("--helper-ceiling", &h.helper_ceiling),
        ("--config", &h.config),
    ] {
        if let Some(value) = value {
            acp_args.push(flag.into());
            acp_args.push(value.clone().into_os_string());
        }
    }
    let options = crate::demo::DemoOptions {
        agentd,
        acp_args,
        sandbox_mode: command.sandbox_mode.as_str(),
    };
    match crate::demo::run(options).await {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(e) => {
            eprintln!("agentd demo: {}", terminal::visible(&e));
            1
        }
    }
}

async fn acp_command(command: AcpCommand) -> u8 {
    let config = match command.agent.effective() {
        Ok(config) => config,
        Err(e) => return fail(&e),
    };
    let mode = command.sandbox_mode;
    let mut options = match crate::acp::AcpOptions::from_config(&config, mode) {
        Ok(options) => options,
        Err(e) => return fail(&e),
    };
    let source = if mode.is_some() {
        "--sandbox-mode".to_owned()
    } else {
        format!("sandbox.mode: {}", config.sandbox_mode.source)
    };
    if let Err(e) = options.learn(&source).await {
        eprintln!("agentd: {e}");
        return EXIT_DID_NOT_RUN;
    }
    match crate::acp::serve(options).await {
        Ok(()) => 0,
        Err(e) => {
            report(&format!("the ACP connection failed: {e}"));
            1
        }
    }
}

async fn run_command(command: RunCommand) -> u8 {
    let config = match Effective::load(&command.helper.flags()) {
        Ok(config) => config,
        Err(e) => return fail(&e),
    };
    let client = match config.helper_client() {
        Ok(client) => client,
        Err(e) => return fail(&e),
    };
    let interrupts = match run::forward_signals() {
        Ok(interrupts) => interrupts,
        Err(e) => return fail(&format!("cannot listen for SIGINT and SIGTERM: {e}")),
    };
    let job = run::run_job(
        &client,
        command.run_args(),
        tokio::io::stdout(),
        tokio::io::stderr(),
        interrupts,
    );
    match job.await {
        Ok(facts) => facts.exit_code(),
        Err(e) => {
            report(&e);
            e.exit_code()
        }
    }
}

/// Prints `message` on stderr after `agentd: `, terminal-safe: errors quote paths and values.
fn report(message: &dyn std::fmt::Display) {
    eprintln!("agentd: {}", terminal::visible(&message.to_string()));
}

fn fail(error: &dyn std::fmt::Display) -> u8 {
    report(error);
    EXIT_DID_NOT_RUN
}

/// Reports `error` and says how `config` and `sessions` exit when they fail.
fn failure(error: &dyn std::fmt::Display) -> u8 {
    report(error);
    EXIT_FAILURE
}

fn config_show(args: &AgentArgs) -> u8 {
    match args.effective() {
        Ok(config) => {
            print!("{}", terminal::visible(&config.show()));
            0
        }
        Err(e) => failure(&e),
    }
}

/// The state directory the sessions commands read.
fn state_dir(args: &AgentArgs) -> Result<PathBuf, ConfigError> {
    let config = args.effective()?;
    config.state_dir().map(ToOwned::to_owned)
}

fn sessions_list(args: &AgentArgs) -> u8 {
    let dir = match state_dir(args) {
        Ok(dir) => dir,
        Err(e) => return failure(&e),
    };
    let listing = match sessions::list(&dir) {
        Ok(listing) => listing,
        Err(e) => return failure(&e),
    };
    for line in &listing.lines {
        println!("{line}");
    }
    for warning in &listing.warnings {
        report(warning);
    }
    for error in &listing.errors {
        report(error);
    }
    if listing.errors.is_empty() {
        0
    } else {
        EXIT_FAILURE
    }
}

fn sessions_show(args: &AgentArgs, id: &str) -> u8 {
    let dir = match state_dir(args) {
        Ok(dir) => dir,
        Err(e) => return failure(&e),
    };
    match sessions::show(&dir, id) {
        Ok((transcript, warnings)) => {
            for warning in &warnings {
                report(warning);
            }
            print!("{transcript}");
            0
        }
        Err(e) => failure(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<RunCommand, clap::Error> {
        let cli = Cli::try_parse_from(args)?;
        match cli.command {
            Command::Run(run) => Ok(run),
            other => panic!("not run: {other:?}"),
        }
    }

    #[test]
    fn defaults_are_read_only_no_network_automatic_backend() {
        let run = parse(&["agentd", "run", "--", "ls"]).expect("parses");
        let args = run.run_args();
        assert_eq!(args.mode, Mode::ReadOnly);
        assert_eq!(args.network, Network::Deny);
        assert_eq!(args.backend, BackendChoice::Auto);
        assert_eq!(args.workspace, None);
        assert_eq!(args.timeout_secs, None);
        assert!(!args.json);
        assert_eq!(args.argv, ["ls"]);
        assert!(args.writable_roots.is_empty());
        assert!(args.protected.is_empty());
        assert!(args.env.is_empty());
        assert_eq!(run.helper.helper_ceiling, None);
    }

    #[test]
    fn arguments_after_the_separator_are_kept_as_data() {
        let run = parse(&[
            "agentd",
            "run",
            "--mode",
            "danger-full-access",
            "--",
            "ls",
            "-la",
            "--json",
            "--",
            "--help",
        ])
        .expect("parses");
        assert_eq!(run.argv, ["ls", "-la", "--json", "--", "--help"]);
        assert!(!run.json);
        assert_eq!(run.mode, ModeArg::DangerFullAccess);
    }

    #[test]
    fn every_option_is_understood() {
        let run = parse(&[
            "agentd",
            "run",
            "--mode",
            "workspace-write",
            "--workspace",
            "/w",
            "--network",
            "allow",
            "--backend",
            "landlock",
            "--timeout",
            "5",
            "--writable-root",
            "/extra",
            "--protect",
            ".env",
            "--max-processes",
            "10",
            "--max-file-size",
            "20",
            "--max-address-space",
            "30",
            "--env",
            "K=V",
            "--json",
            "--helper",
            "/h",
            "--helper-ceiling",
            "/ceiling.toml",
            "--config",
            "/c.toml",
            "--",
            "true",
        ])
        .expect("parses");
        let args = run.run_args();
        assert_eq!(args.writable_roots, [PathBuf::from("/extra")]);
        assert_eq!(args.protected, [PathBuf::from(".env")]);
        assert_eq!(
            (
                args.max_processes,
                args.max_file_size,
                args.max_address_space
            ),
            (Some(10), Some(20), Some(30))
        );
        assert_eq!(args.env, [(OsString::from("K"), OsString::from("V"))]);
        assert_eq!(
            run.helper.helper_ceiling,
            Some(PathBuf::from("/ceiling.toml"))
        );
        assert_eq!(args.mode, Mode::WorkspaceWrite);
        assert_eq!(args.workspace, Some(PathBuf::from("/w")));
        assert_eq!(args.network, Network::Allow);
        assert_eq!(args.backend, BackendChoice::Landlock);
        assert_eq!(args.timeout_secs, Some(5));
        assert!(args.json);
        assert_eq!(run.helper.helper, Some(PathBuf::from("/h")));
        assert_eq!(run.helper.config, Some(PathBuf::from("/c.toml")));
    }

    #[test]
    fn a_command_is_required() {
        assert!(parse(&["agentd", "run"]).is_err());
        assert!(parse(&["agentd", "run", "--"]).is_err());
    }

    #[test]
    fn the_command_must_follow_the_separator() {
        assert!(parse(&["agentd", "run", "ls"]).is_err());
    }

    #[test]
    fn an_unknown_mode_is_rejected() {
        assert!(parse(&["agentd", "run", "--mode", "yolo", "--", "ls"]).is_err());
    }

    #[test]
    fn a_zero_timeout_is_rejected() {
        assert!(parse(&["agentd", "run", "--timeout", "0", "--", "ls"]).is_err());
    }

    #[test]
    fn helper_and_helper_socket_exclude_each_other() {
        let parsed = parse(&[
            "agentd",
            "run",
            "--helper",
            "/h",
            "--helper-socket",
            "/s",
            "--",
            "ls",
        ]);
        assert!(parsed.is_err());
    }

    #[test]
    fn writable_roots_and_protected_paths_repeat_in_order() {
        let run = parse(&[
            "agentd",
            "run",
            "--writable-root",
            "/a",
            "--protect",
            ".env",
            "--writable-root",
            "rel/b",
            "--protect",
            "secrets/key",
            "--",
            "ls",
        ])
        .expect("parses");
        let args = run.run_args();
        assert_eq!(
            args.writable_roots,
            [PathBuf::from("/a"), PathBuf::from("rel/b")]
        );
        assert_eq!(
            args.protected,
            [PathBuf::from(".env"), PathBuf::from("secrets/key")]
        );
    }

    #[test]
    fn an_empty_writable_root_or_protected_path_is_rejected() {
        assert!(parse(&["agentd", "run", "--writable-root", "", "--", "ls"]).is_err());
        assert!(parse(&["agentd", "run", "--protect", "", "--", "ls"]).is_err());
    }

    #[test]
    fn resource_limits_are_read_as_numbers() {
        let run = parse(&[
            "agentd",
            "run",
            "--max-processes",
            "64",
            "--max-file-size",
            "1048576",
            "--max-address-space",
            "4294967296",
            "--",
            "ls",
        ])
        .expect("parses");
        let args = run.run_args();
        assert_eq!(args.max_processes, Some(64));
        assert_eq!(args.max_file_size, Some(1_048_576));
        assert_eq!(args.max_address_space, Some(4_294_967_296));
        let defaults = parse(&["agentd", "run", "--", "ls"]).expect("parses");
        let defaults = defaults.run_args();
        assert_eq!(
            (
                defaults.max_processes,
                defaults.max_file_size,
                defaults.max_address_space
            ),
            (None, None, None)
        );
    }

    #[test]
    fn a_limit_that_is_not_a_number_is_rejected() {
        for flag in ["--max-processes", "--max-file-size", "--max-address-space"] {
            for value in ["many", "-1", "1G", ""] {
                assert!(
                    parse(&["agentd", "run", flag, value, "--", "ls"]).is_err(),
                    "{flag} {value}"
                );
            }
        }
    }

    #[test]
    fn env_settings_repeat_in_order_and_split_at_the_first_equals() {
        let run = parse(&[
            "agentd", "run", "--env", "A=1", "--env", "B=x=y", "--env", "A=", "--", "ls",
        ])
        .expect("parses");
        assert_eq!(
            run.run_args().env,
            [
                (OsString::from("A"), OsString::from("1")),
                (OsString::from("B"), OsString::from("x=y")),
                (OsString::from("A"), OsString::new()),
            ]
        );
    }

    #[test]
    fn a_malformed_env_setting_is_a_usage_error() {
        for bad in ["A", "=1", "=", ""] {
            let err = parse(&["agentd", "run", "--env", bad, "--", "ls"]).expect_err(bad);
            assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation, "{bad}");
            assert_ne!(err.exit_code(), 0);
            assert!(err.to_string().contains("NAME=VALUE"), "{err}");
        }
    }

    #[test]
    fn the_helper_ceiling_is_read() {
        let run =
            parse(&["agentd", "run", "--helper-ceiling", "c.toml", "--", "ls"]).expect("parses");
        assert_eq!(run.helper.helper_ceiling, Some(PathBuf::from("c.toml")));
        let run = parse(&["agentd", "run", "--", "ls"]).expect("parses");
        assert_eq!(run.helper.helper_ceiling, None);
    }

    #[test]
    fn a_helper_ceiling_with_a_helper_socket_parses_and_is_refused_when_run() {
        // Left to the client, so the message can say why (and a socket from the configuration
        // file is caught the same way).
        let run = parse(&[
            "agentd",
            "run",
            "--helper-socket",
            "/s",
            "--helper-ceiling",
            "/c.toml",
            "--",
            "ls",
        ])
        .expect("parses");
        let config = Effective::load_with(&run.helper.flags(), &|_| None).expect("config");
        let err = config
            .helper_client()
            .expect_err("a service helper reads its own ceiling");
        let text = err.to_string();
        assert!(text.contains("confine-helper serve"), "{text}");
        assert!(text.contains("--ceiling"), "{text}");
    }

    #[test]
    fn the_env_help_lists_the_inherited_variables() {
        use clap::CommandFactory;
        let mut cli = Cli::command();
        let run = cli.find_subcommand_mut("run").expect("run");
        let env = run
            .get_arguments()
            .find(|a| a.get_id() == "env")
            .expect("--env");
        let help = env.get_long_help().expect("long help").to_string();
        assert!(help.contains(&environment::inherited_summary()), "{help}");
    }

    #[test]
    fn agent_args_map_to_configuration_flags() {
        let cli = Cli::try_parse_from([
            "agentd",
            "config",
            "show",
            "--config",
            "/c.toml",
            "--helper",
            "/h",
            "--helper-ceiling",
            "/ceiling.toml",
            "--state-dir",
            "/state",
            "--model-script",
            "turns.toml",
        ])
        .expect("parses");
        let Command::Config(ConfigCommand::Show(args)) = cli.command else {
            panic!("not config show");
        };
        assert_eq!(
            args.flags(),
            Flags {
                config: Some("/c.toml".into()),
                helper: Some("/h".into()),
                helper_socket: None,
                helper_ceiling: Some("/ceiling.toml".into()),
                state_dir: Some("/state".into()),
                model_script: Some("turns.toml".into()),
            }
        );
        let cli = Cli::try_parse_from(["agentd", "config", "show"]).expect("parses");
        let Command::Config(ConfigCommand::Show(args)) = cli.command else {
            panic!("not config show");
        };
        assert_eq!(args, AgentArgs::default());
    }

    #[test]
    fn agent_args_flatten_into_other_commands() {
        #[derive(Debug, Parser)]
        struct Other {
            #[command(flatten)]
            agent: AgentArgs,
        }
        let other = Other::try_parse_from(["other", "--helper-socket", "/s", "--state-dir", "d"])
            .expect("parses");
        assert_eq!(other.agent.flags().helper_socket, Some("/s".into()));
        assert_eq!(other.agent.flags().state_dir, Some("d".into()));
        assert!(
            Other::try_parse_from(["other", "--helper", "/h", "--helper-socket", "/s"]).is_err()
        );
    }

    #[test]
    fn empty_paths_are_rejected() {
        for flag in ["--state-dir", "--model-script", "--config", "--helper"] {
            assert!(
                Cli::try_parse_from(["agentd", "config", "show", flag, ""]).is_err(),
                "{flag}"
            );
        }
    }

    #[test]
    fn the_sessions_commands_parse() {
        let cli = Cli::try_parse_from(["agentd", "sessions", "list", "--state-dir", "/s"])
            .expect("parses");
        let Command::Sessions(SessionsCommand::List(args)) = cli.command else {
            panic!("not sessions list");
        };
        assert_eq!(args.state_dir, Some("/s".into()));
        let cli =
            Cli::try_parse_from(["agentd", "sessions", "show", "abc-123", "--state-dir", "/s"])
                .expect("parses");
        let Command::Sessions(SessionsCommand::Show(show)) = cli.command else {
            panic!("not sessions show");
        };
        assert_eq!(show.id, "abc-123");
        assert_eq!(show.agent.state_dir, Some("/s".into()));
        assert!(Cli::try_parse_from(["agentd", "sessions", "show"]).is_err());
    }

    #[test]
    fn the_sandbox_mode_flags_take_the_mode_words() {
        let cli = Cli::try_parse_from(["agentd", "acp", "--sandbox-mode", "danger-full-access"])
            .expect("parses");
        let Command::Acp(acp) = cli.command else {
            panic!("not acp");
        };
        assert_eq!(acp.sandbox_mode, Some(Mode::DangerFullAccess));
        let cli = Cli::try_parse_from(["agentd", "demo"]).expect("parses");
        let Command::Demo(demo) = cli.command else {
            panic!("not demo");
        };
        assert_eq!(demo.sandbox_mode, Mode::WorkspaceWrite);
        let e = Cli::try_parse_from(["agentd", "acp", "--sandbox-mode", "Read-Only"])
            .expect_err("not a word");
        assert_eq!(e.kind(), clap::error::ErrorKind::InvalidValue);
        let text = e.to_string();
        assert!(
            text.contains("[possible values: read-only, workspace-write, danger-full-access]"),
            "{text}"
        );
        assert!(
            text.contains("a similar value exists: 'read-only'"),
            "{text}"
        );
    }

    #[test]
    fn the_cli_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
