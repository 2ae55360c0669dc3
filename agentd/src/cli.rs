//! The command line: parsing, and turning a parsed command into work and an exit status.
//!
//! Every command reads its settings through [`Effective`](crate::config::Effective): the flags a
//! command takes ([`HelperArgs`], or [`AgentArgs`] for the commands that run or inspect sessions)
//! beat the `AGENTD_*` environment variables, which beat the configuration file. Each subcommand
//! with more to it than a call has its file: [`run`] for `agentd run`, [`exec`] for `agentd
//! exec`, [`sessions`] for `agentd sessions`, [`manuals`] for `agentd man` and `agentd
//! completions`; the flags they share are in `args.rs`, the exit statuses in `exit.rs`, how
//! `agentd acp` and `agentd exec` start the agent in `start.rs`.

mod args;
mod audit;
pub mod exec;
mod exit;
pub mod manuals;
mod probe;
pub mod run;
mod run_args;
mod run_notes;
pub mod sessions;
mod signals;
mod start;
mod undo;
mod word;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use confine_protocol::Mode;
use confine_protocol::vocabulary::MODE_WORDS;

pub use args::{AgentArgs, HelperArgs};
pub use exec::ExecCommand;
pub use exit::{EXIT_DID_NOT_RUN, EXIT_FAILURE};
pub use manuals::{CompletionsCommand, ManCommand};
pub use probe::ProbeCommand;
pub use run::RunCommand;

use crate::config::ConfigError;
use crate::terminal;
use exit::{fail, failure, report};
use word::Word;

/// agentd: a coding agent whose every command runs through confine-helper.
#[derive(Debug, Parser)]
#[command(name = "agentd", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// What agentd is asked to do. Each subcommand's arguments are built only when it is the one
/// given (`defer`): a run builds its own, not every subcommand's (RFC 0023 step 8). So a
/// subcommand's help is its variant's doc comment here, never its arguments' struct's.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum Command {
    /// Run one command through confine-helper and exit with its status.
    ///
    /// Exit status: the command's own; 128+N if killed by signal N; 124 on timeout; 125 if the
    /// command did not run (refused, runner failure, helper problem, bad arguments); 130 or 143
    /// when agentd itself was interrupted (SIGINT, SIGTERM) and cancelled the command.
    Run(Box<RunCommand>),
    /// Show agentd's configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// List and show the sessions agentd has recorded.
    #[command(subcommand)]
    Sessions(SessionsCommand),
    /// Serve the Agent Client Protocol (v1) on stdin/stdout, for an editor such as Zed or any
    /// ACP client. Logs go to stderr.
    Acp(AcpCommand),
    /// Run one prompt headless, through the agent `agentd acp` serves, and exit.
    ///
    /// The answer streams to stdout, a line per tool call and per permission request to stderr
    /// (`--json`: NDJSON on stdout). Exit status: 0 end_turn; 1 the model failed (the prompt's
    /// error); 3 max_tokens; 4 refusal; 5 max_turn_requests; 130 cancelled or interrupted
    /// (SIGINT cancels the turn); 125 if the turn could not start (configuration, helper,
    /// model, --cwd, prompt).
    Exec(ExecCommand),
    /// Run a short scripted session end to end and print what happened: a file read, a write
    /// inside the workspace, and a write outside it that the sandbox refuses. Exits 0 when
    /// everything happened as it should.
    Demo(DemoCommand),
    /// Ask confine-helper which sandbox backends work on this machine, and why not: every
    /// backend's verdict (probed afresh), the Landlock ABI, the backend `auto` selects and the
    /// ceiling as the helper enforces it.
    ///
    /// Exit status: 0 when a backend is usable; 1 when none is (confined modes fail closed) or
    /// the ceiling is broken (every request is refused); 125 when the helper could not be
    /// started or asked.
    Probe(ProbeCommand),
    /// Print the completion script for a shell (the one the Debian package installs).
    ///
    /// bash: `agentd completions bash > ~/.local/share/bash-completion/completions/agentd`;
    /// zsh: `agentd completions zsh > ~/.zfunc/_agentd`, with `fpath+=~/.zfunc` before
    /// `compinit` in ~/.zshrc; fish: `agentd completions fish >
    /// ~/.config/fish/completions/agentd.fish`.
    Completions(CompletionsCommand),
    /// Print a manual page (roff), agentd's or a subcommand's, or write them all into a
    /// directory (the pages the Debian package installs).
    ///
    /// `agentd man run | man -l -` reads one; `agentd man --dir ~/.local/share/man/man1` installs
    /// them all for `man agentd-run`.
    Man(ManCommand),
}

// `agentd demo [OPTIONS]` (its help is the variant's in `Command`)
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

// `agentd acp [OPTIONS]` (its help is the variant's in `Command`)
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
    /// List the sessions in the state directory, one per line, most recently updated first:
    /// id, last update (UTC), turns, working directory, first prompt.
    List(AgentArgs),
    /// Print the transcript of one session.
    Show(SessionsShow),
    /// Print the audit trail of one session: every tool call in order (the child agents' too)
    /// with its time (UTC), agent, tool, command or path, the mode it ran under and why, the
    /// approval asked and what decided it, the sandbox's backend, layers and enforcement,
    /// denials, how it ended and how long it took.
    ///
    /// Read from the session's log alone, which no confined command can write. A torn or
    /// malformed line is warned about on stderr and the rest audited.
    Audit(SessionsAudit),
    /// Restore the session's workspace (and its other writable roots) to how it was before a
    /// turn, from its checkpoints: prints the changes and their diff first, then restores them
    /// confined, as a workspace-write command would write. Exits non-zero when a path still
    /// differs afterwards.
    Undo(SessionsUndo),
}

/// `agentd sessions audit ID [--json]`
#[derive(Debug, Args)]
pub struct SessionsAudit {
    /// The session's id, as `agentd sessions list` prints it, or enough of its beginning to
    /// name one session.
    #[arg(value_name = "ID")]
    pub id: String,
    /// Print one JSON document: an array of entries, each with its shape's version `v`
    /// (RFC 0019).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub agent: AgentArgs,
}

/// `agentd sessions undo ID [--turn N] [--dry-run]`
#[derive(Debug, Args)]
pub struct SessionsUndo {
    /// The session's id, as `agentd sessions list` prints it, or enough of its beginning to
    /// name one session.
    #[arg(value_name = "ID")]
    pub id: String,
    /// Restore to before this turn (default: the last turn not yet undone that has a
    /// checkpoint).
    #[arg(long, value_name = "N")]
    pub turn: Option<u64>,
    /// Print what would change, and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub agent: AgentArgs,
}

/// `agentd sessions show ID`
#[derive(Debug, Args)]
pub struct SessionsShow {
    /// The session's id, as `agentd sessions list` prints it, or enough of its beginning to
    /// name one session.
    #[arg(value_name = "ID")]
    pub id: String,
    #[command(flatten)]
    pub agent: AgentArgs,
}

/// Carries out a parsed command line and says how agentd should exit.
pub async fn execute(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Run(command) => ExitCode::from(run::run_command(*command).await),
        Command::Config(ConfigCommand::Show(args)) => ExitCode::from(config_show(&args)),
        Command::Sessions(SessionsCommand::List(args)) => ExitCode::from(sessions_list(&args)),
        Command::Sessions(SessionsCommand::Show(show)) => {
            ExitCode::from(sessions_show(&show.agent, &show.id))
        }
        Command::Sessions(SessionsCommand::Audit(audit)) => ExitCode::from(sessions_audit(&audit)),
        Command::Sessions(SessionsCommand::Undo(undo)) => {
            ExitCode::from(undo::undo_command(&undo.agent, &undo.id, undo.turn, undo.dry_run).await)
        }
        Command::Acp(command) => ExitCode::from(acp_command(command).await),
        Command::Exec(command) => ExitCode::from(exec::exec_command(command).await),
        Command::Demo(command) => ExitCode::from(demo_command(command).await),
        Command::Probe(command) => ExitCode::from(probe::probe_command(&command).await),
        Command::Completions(command) => ExitCode::from(manuals::completions_command(&command)),
        Command::Man(command) => ExitCode::from(manuals::man_command(&command)),
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
            eprintln!("agentd demo: {}", terminal::visible(&e.to_string()));
            1
        }
    }
}

async fn acp_command(command: AcpCommand) -> u8 {
    let options = match start::agent_options(&command.agent, command.sandbox_mode).await {
        Ok(options) => options,
        Err(e) => return fail(&e),
    };
    match crate::acp::serve(options).await {
        Ok(()) => 0,
        Err(e) => {
            report(&format!("the ACP connection failed: {e}"));
            1
        }
    }
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
    printed(sessions::show(&dir, id))
}

fn sessions_audit(audit: &SessionsAudit) -> u8 {
    let dir = match state_dir(&audit.agent) {
        Ok(dir) => dir,
        Err(e) => return failure(&e),
    };
    let format = if audit.json {
        sessions::AuditFormat::Json
    } else {
        sessions::AuditFormat::Text
    };
    printed(sessions::audit(&dir, &audit.id, format))
}

/// Prints what a sessions command made, its warnings first on stderr, and says how to exit.
fn printed(made: Result<(String, Vec<String>), sessions::ShowError>) -> u8 {
    match made {
        Ok((out, warnings)) => {
            for warning in &warnings {
                report(warning);
            }
            print!("{out}");
            0
        }
        Err(e) => failure(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Flags;

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
        let cli = Cli::try_parse_from(["agentd", "sessions", "audit", "abc", "--json"])
            .expect("sessions audit parses");
        let Command::Sessions(SessionsCommand::Audit(audit)) = cli.command else {
            panic!("not sessions audit");
        };
        assert_eq!((audit.id.as_str(), audit.json), ("abc", true));
        assert!(Cli::try_parse_from(["agentd", "sessions", "audit"]).is_err());
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
