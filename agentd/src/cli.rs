//! The command line: parsing, and turning a parsed command into work and an exit status.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use confine_protocol::{BackendChoice, Mode, Network};

use crate::config::LoadedConfig;
use crate::helper_client::{HelperClient, HelperEndpoint};
use crate::run::{self, EXIT_DID_NOT_RUN, RunArgs};

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
    /// Print the facts as one JSON object on the last line of stderr.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub helper: HelperArgs,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "ARGV")]
    pub argv: Vec<OsString>,
}

/// Which confine-helper to use; each overrides the configuration file.
#[derive(Debug, Args)]
pub struct HelperArgs {
    /// The confine-helper binary to start.
    #[arg(long, value_name = "PATH", conflicts_with = "helper_socket")]
    pub helper: Option<PathBuf>,
    /// Connect to a confine-helper serving on this socket instead of starting one.
    #[arg(long, value_name = "PATH")]
    pub helper_socket: Option<PathBuf>,
    /// The configuration file [default: $XDG_CONFIG_HOME/agentd/config.toml].
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
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
            json: self.json,
        }
    }
}

/// Carries out a parsed command line and says how agentd should exit.
pub async fn execute(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Run(command) => ExitCode::from(run_command(command).await),
    }
}

async fn run_command(command: RunCommand) -> u8 {
    let config = match LoadedConfig::load(command.helper.config.as_deref()) {
        Ok(config) => config,
        Err(e) => return fail(&e),
    };
    let endpoint = match HelperEndpoint::resolve(
        command.helper.helper.clone(),
        command.helper.helper_socket.clone(),
        &config,
    ) {
        Ok(endpoint) => endpoint,
        Err(e) => return fail(&e),
    };
    let interrupts = match run::forward_signals() {
        Ok(interrupts) => interrupts,
        Err(e) => return fail(&format!("cannot listen for SIGINT and SIGTERM: {e}")),
    };
    let client = HelperClient::new(endpoint);
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
            eprintln!("agentd: {e}");
            e.exit_code()
        }
    }
}

fn fail(error: &dyn std::fmt::Display) -> u8 {
    eprintln!("agentd: {error}");
    EXIT_DID_NOT_RUN
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<RunCommand, clap::Error> {
        let cli = Cli::try_parse_from(args)?;
        match cli.command {
            Command::Run(run) => Ok(run),
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
            "--json",
            "--helper",
            "/h",
            "--config",
            "/c.toml",
            "--",
            "true",
        ])
        .expect("parses");
        let args = run.run_args();
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
    fn the_cli_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
