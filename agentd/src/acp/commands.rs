//! The slash commands a person types in the editor: `/init`, `/compact`, `/status`, `/mcp`,
//! `/undo`.
//! They are advertised with ACP's `available_commands_update` once a session is open
//! ([`advertise`], after `session/new`, `session/load` and `session/resume`), and a prompt runs
//! one when its first text block starts with `/` and a known command's name, alone or followed
//! by a space ([`parse`]). Any other `/word` (`/etc/hosts`, `/tmp`) is an ordinary prompt for
//! the model.
//!
//! Only a `session/prompt` can run one: [`parse`] is called on the person's prompt and on
//! nothing else — never on what the model writes, on a tool's or an MCP server's result, or on
//! a child agent's prompt — so text that merely starts with `/compact` runs nothing.
//!
//! What agentd answers itself (`/status`, `/mcp`, why a `/compact` did not happen) is recorded
//! as `command/output` after the `command/run` that holds what the person typed, and shown as
//! the agent's text; `/init` hands the model a prompt agentd wrote (`command/prompt`), which
//! then works as in any turn: its writes go through the confined file tools under the session's
//! mode and approvals. `session/load` replays each as it was shown. None of it is advertised as
//! state: the list of commands does not change during a session.

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, ContentBlock, SessionUpdate,
    UnstructuredCommandInput,
};
use confine_protocol::Mode;
use serde_json::{Value, json};

use super::sessions::Session;
use crate::cancel::Cancel;
use crate::mcp::{ServerReport, ServerState};
use crate::model::ToolCall;
use crate::tools::{self, BASH, CallContext};

/// A slash command agentd runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// The model writes or updates the project's `AGENTS.md`.
    Init,
    /// The history is summarised now.
    Compact,
    /// agentd says how the session is set up.
    Status,
    /// agentd lists the session's MCP servers and their tools.
    Mcp,
    /// agentd restores the workspace to before the last turn not yet undone (RFC 0020).
    Undo,
}

/// Every command, in the order the editor lists them.
pub const ALL: [Command; 5] = [
    Command::Init,
    Command::Compact,
    Command::Status,
    Command::Mcp,
    Command::Undo,
];

impl Command {
    /// Its name, as typed after the `/` and as logged.
    pub fn name(self) -> &'static str {
        match self {
            Command::Init => "init",
            Command::Compact => "compact",
            Command::Status => "status",
            Command::Mcp => "mcp",
            Command::Undo => "undo",
        }
    }

    fn description(self) -> &'static str {
        match self {
            Command::Init => {
                "Have the agent write or update AGENTS.md, the guidance for agents working on \
                 this project (with the session's tools, sandbox and approvals)"
            }
            Command::Compact => {
                "Summarise the conversation so far now, so that the model reads the summary \
                 instead of the earlier turns"
            }
            Command::Status => {
                "Show the session's model, sandbox (backend, enforcement, mode), approval policy \
                 and MCP servers; answered by agentd, not the model"
            }
            Command::Mcp => "List the session's MCP servers, their state and their tools",
            Command::Undo => {
                "Take back the last turn: restore the workspace (what its commands changed too) \
                 to how it was before it, after showing the diff for approval"
            }
        }
    }

    /// What the person may type after it, if anything.
    fn hint(self) -> Option<&'static str> {
        match self {
            Command::Init => Some("what AGENTS.md should stress (optional)"),
            _ => None,
        }
    }
}

/// A prompt that runs a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    pub command: Command,
    /// What followed the command's name in its text block, trimmed (may be empty).
    pub rest: String,
}

/// The command `prompt` runs: its first text block starts (after blanks) with `/` and a known
/// command's name, followed by nothing or by whitespace. `None` for any other prompt.
pub fn parse(prompt: &[ContentBlock]) -> Option<Invocation> {
    let text = prompt.iter().find_map(|block| match block {
        ContentBlock::Text(t) => Some(t.text.as_str()),
        _ => None,
    })?;
    let word = text.trim_start().strip_prefix('/')?;
    let end = word.find(char::is_whitespace).unwrap_or(word.len());
    let (name, rest) = word.split_at(end);
    let command = ALL.into_iter().find(|c| c.name() == name)?;
    Some(Invocation {
        command,
        rest: rest.trim().to_owned(),
    })
}

/// The commands, as ACP's `available_commands_update`.
pub fn available() -> SessionUpdate {
    SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(
        ALL.into_iter()
            .map(|command| {
                let listed = AvailableCommand::new(command.name(), command.description());
                match command.hint() {
                    Some(hint) => listed.input(AvailableCommandInput::Unstructured(
                        UnstructuredCommandInput::new(hint),
                    )),
                    None => listed,
                }
            })
            .collect(),
    ))
}

/// Tells the editor of a session just opened which commands it has; not recorded (the list is
/// agentd's, the same for every session).
pub async fn advertise(session: &Session, cx: &ConnectionTo<Client>) {
    let _ = session.show(cx, available()).await;
}

/// The file `/init` has the model write, at the workspace's root.
pub const AGENTS_FILE: &str = "AGENTS.md";

/// The prompt `/init` gives the model for the workspace `cwd`, with what the person typed after
/// the command (`rest`), if anything.
pub fn init_prompt(cwd: &std::path::Path, rest: &str) -> String {
    let mut prompt = format!(
        "Write or update {AGENTS_FILE} at the root of this project ({}): the guidance coding \
         agents read before they work here.\n\n\
         First look at the project: its layout, its languages, how it is built, tested and \
         linted (read the build files and any CI configuration), its conventions, and what a \
         newcomer would trip over. If {AGENTS_FILE} exists, read it first and update it, keeping \
         what is still true. Then write {AGENTS_FILE} with write_file or edit_file: short \
         sections of concrete facts you checked (the commands to run, where things are, the \
         rules to follow), no guesses and no generic advice. Change no other file. End with a \
         short summary of what you wrote.",
        cwd.display()
    );
    if !rest.is_empty() {
        prompt.push_str(&format!("\n\nThe user adds: {rest}"));
    }
    prompt
}

/// What `/status` answers: the session, its workspace, its model, its sandbox (backend,
/// enforcement, mode), its approval policy and its MCP servers. The sandbox's enforcement is
/// what confine-helper reports for a command that does nothing (`true`) run now under the
/// session's mode, exactly as the model's commands run: the backend and the gaps are those of
/// this workspace and mode, not a guess.
pub async fn status(session: &Session, cancel: &Cancel) -> String {
    let model = session.selected_model();
    let mode = session.effective_mode();
    let mut lines = vec![
        format!("Session: {}", session.id),
        format!("Workspace: {}", session.cwd.display()),
        format!("Model: {}", model.label),
        format!("Sandbox mode: {}", mode.as_str()),
        sandbox_line(session, mode, cancel).await,
        format!("Approval policy: {}", session.effective_policy().as_str()),
    ];
    lines.extend(mcp_lines(session, false));
    format!("{}\n", lines.join("\n"))
}

/// What `/mcp` answers: each MCP server of the session with its state and its tools (their
/// names as the model calls them, and what they do).
pub fn mcp(session: &Session) -> String {
    format!("{}\n", mcp_lines(session, true).join("\n"))
}

/// The sandbox's line of `/status`, from a command run now under `mode`.
async fn sandbox_line(session: &Session, mode: Mode, cancel: &Cancel) -> String {
    if mode == Mode::DangerFullAccess {
        return "Sandbox: none: danger-full-access runs commands unconfined, with all of your \
                access"
            .to_owned();
    }
    let call = ToolCall {
        id: STATUS_CHECK.to_owned(),
        name: BASH.to_owned(),
        arguments: json!({ "command": "true" }).to_string(),
    };
    let context = CallContext {
        mode,
        cancel: cancel.clone(),
        narrowings: session.tools.background().mark(),
        live: None,
        owner: None,
    };
    let result = tools::run(&session.tools, &call, context).await;
    enforcement(&result.facts).unwrap_or_else(|| {
        let why = result.text.lines().next().unwrap_or("no reason given");
        format!("Sandbox: no command can run confined now: {why}")
    })
}

/// The id of the call `/status` runs to learn the enforcement; never shown or logged.
const STATUS_CHECK: &str = "status-check";

/// The sandbox's line from a command's facts: its backend, and whether it was fully enforced
/// or what was not. `None` when the facts name no backend (the command did not run confined).
fn enforcement(facts: &Value) -> Option<String> {
    let backend = facts.get("backend").and_then(Value::as_str)?;
    let enforcement = facts.get("enforcement")?;
    let level = enforcement.get("level").and_then(Value::as_str)?;
    if level == "full" {
        return Some(format!("Sandbox: {backend}, fully enforced"));
    }
    let missing: Vec<String> = super::shown::gaps(enforcement)
        .map(|gap| format!("  - {gap}"))
        .collect();
    let gaps = if missing.is_empty() {
        "  - (the helper named none)".to_owned()
    } else {
        missing.join("\n")
    };
    Some(format!(
        "Sandbox: {backend}, partly enforced; not enforced:\n{gaps}"
    ))
}

/// The MCP servers' lines: each server with its state, then (`tools`) one line per tool.
fn mcp_lines(session: &Session, tools: bool) -> Vec<String> {
    let servers = session.tools.mcp();
    let reports = servers.report();
    let unstarted = servers.unstarted();
    if reports.is_empty() && unstarted.is_empty() {
        return vec!["MCP servers: none".to_owned()];
    }
    let mut lines = vec!["MCP servers:".to_owned()];
    for report in &reports {
        lines.push(format!("  - {}", server_line(report)));
        if tools {
            for tool in &report.tools {
                let name = crate::mcp::names::tool_name(&report.key, &tool.name)
                    .unwrap_or_else(|_| tool.name.clone());
                let about = crate::terminal::one_line(&tool.description, Some(TOOL_LINE_CHARS));
                lines.push(if about.is_empty() {
                    format!("    - {name}")
                } else {
                    format!("    - {name}: {about}")
                });
            }
        }
    }
    for sentence in unstarted {
        lines.push(format!("  - {sentence}"));
    }
    lines
}

/// The longest description of an MCP tool `/mcp` shows, in characters.
const TOOL_LINE_CHARS: usize = 100;

/// One server and where it stands.
fn server_line(report: &ServerReport) -> String {
    let name = &report.name;
    let tools = report.tools.len();
    let offered = match tools {
        1 => "1 tool".to_owned(),
        n => format!("{n} tools"),
    };
    match &report.state {
        ServerState::Starting => format!("{name}: starting"),
        ServerState::Running(mode) => {
            format!(
                "{name}: running, confined under {} ({offered})",
                mode.as_str()
            )
        }
        ServerState::Stopped => format!(
            "{name}: stopped (the session's mode narrowed, or it ended); the next call of one of \
             its tools starts it again ({offered})"
        ),
        ServerState::Failed(why) => format!("{name}: failed to start: {why}"),
        ServerState::Closed => format!("{name}: stopped: the session is closed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(t: &str) -> ContentBlock {
        ContentBlock::from(t.to_owned())
    }

    #[test]
    fn only_a_known_name_at_the_start_of_the_first_text_is_a_command() {
        let run = |t: &str| parse(&[text(t)]);
        assert_eq!(
            run("/status"),
            Some(Invocation {
                command: Command::Status,
                rest: String::new()
            })
        );
        assert_eq!(
            run("  /init stress the test commands\n"),
            Some(Invocation {
                command: Command::Init,
                rest: "stress the test commands".into()
            })
        );
        assert_eq!(run("/compact").map(|i| i.command), Some(Command::Compact));
        assert_eq!(run("/mcp\nplease").map(|i| i.command), Some(Command::Mcp));
        // Not commands: a path, a longer word, an unknown name, the name elsewhere.
        for prompt in [
            "/etc/hosts",
            "/statusbar",
            "/status/x",
            "/review",
            "/",
            "please /compact",
            "status",
        ] {
            assert_eq!(run(prompt), None, "{prompt}");
        }
        assert_eq!(parse(&[]), None);
    }

    #[test]
    fn the_first_text_block_decides() {
        let link = ContentBlock::ResourceLink(
            agent_client_protocol::v1::schema::ResourceLink::new("notes", "file:///srv/notes"),
        );
        assert_eq!(
            parse(&[link.clone(), text("/status")]).map(|i| i.command),
            Some(Command::Status)
        );
        assert_eq!(parse(&[text("look at this"), text("/status")]), None);
        assert_eq!(parse(&[link]), None);
    }

    #[test]
    fn every_command_is_advertised_with_its_description() {
        let SessionUpdate::AvailableCommandsUpdate(update) = available() else {
            panic!("not an available_commands_update");
        };
        let names: Vec<&str> = update
            .available_commands
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(names, ["init", "compact", "status", "mcp", "undo"]);
        assert!(
            update
                .available_commands
                .iter()
                .all(|c| !c.description.is_empty())
        );
        assert!(update.available_commands[0].input.is_some());
    }

    #[test]
    fn the_enforcement_is_told_in_the_helpers_words() {
        assert_eq!(
            enforcement(&json!({"backend": "bwrap", "enforcement": {"level": "full"}})),
            Some("Sandbox: bwrap, fully enforced".to_owned())
        );
        assert_eq!(
            enforcement(&json!({"backend": "landlock", "enforcement": {
                "level": "partial",
                "missing": ["process isolation: other processes are visible"]
            }})),
            Some(
                "Sandbox: landlock, partly enforced; not enforced:\n  - process \
                 isolation: other processes are visible"
                    .to_owned()
            )
        );
        // A command that did not run confined names no backend: no line claims a sandbox.
        assert_eq!(enforcement(&json!({"runner_failure": "no bwrap"})), None);
    }

    #[test]
    fn init_asks_for_agents_md_and_passes_on_what_the_user_added() {
        let prompt = init_prompt(std::path::Path::new("/srv/project"), "mention the fuzzers");
        assert!(
            prompt.starts_with(
                "Write or update AGENTS.md at the root of this project (/srv/project)"
            )
        );
        assert!(prompt.ends_with("\n\nThe user adds: mention the fuzzers"));
        assert!(!init_prompt(std::path::Path::new("/srv/p"), "").contains("The user adds"));
    }
}
