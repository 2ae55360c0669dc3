//! How a call is announced before it runs: its title, its kind (ACP's `ToolKind` names) and
//! its arguments as parsed, also when they are malformed.

use serde_json::{Value, json};

use crate::model::ToolCall;
use crate::session::Event;

use super::spec::{
    BASH, BASH_KILL, BASH_OUTPUT, EDIT_FILE, READ_FILE, TASK, UPDATE_PLAN, WRITE_FILE,
};

/// What kind of thing a call does, with ACP's `ToolKind` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolKind {
    Execute,
    Read,
    Edit,
    /// Delegation (a child agent works on it), or the agent's plan.
    Think,
    Other,
}

impl ToolKind {
    /// The name ACP uses.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolKind::Execute => "execute",
            ToolKind::Read => "read",
            ToolKind::Edit => "edit",
            ToolKind::Think => "think",
            ToolKind::Other => "other",
        }
    }
}

/// How a call is announced before it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDescription {
    pub title: String,
    pub kind: ToolKind,
    /// The arguments as parsed, or `{"raw": text}` when they are not a JSON object.
    pub input: Value,
}

impl ToolDescription {
    /// The record of the tool call `call`, announced as this description says; `pending` when
    /// it waits for a person before it may run.
    pub fn event(&self, turn: u64, call: &ToolCall, pending: bool) -> Event {
        Event::ToolCall {
            turn,
            call_id: call.id.clone(),
            tool: call.name.clone(),
            title: self.title.clone(),
            kind: self.kind.as_str().to_owned(),
            input: self.input.clone(),
            pending,
        }
    }
}

/// The longest title, in characters.
const TITLE_CHARS: usize = 80;

/// The announcement of a call of `name` with `arguments` (which may be malformed).
pub fn describe(name: &str, arguments: &str) -> ToolDescription {
    let input = match serde_json::from_str::<Value>(arguments) {
        Ok(value @ Value::Object(_)) => value,
        _ if arguments.trim().is_empty() => json!({}),
        _ => json!({ "raw": arguments }),
    };
    let field = |key: &str| input.get(key).and_then(Value::as_str).map(str::to_owned);
    let (title, kind) = match name {
        BASH => (
            escalated(field("command"), field("sandbox_permissions")),
            ToolKind::Execute,
        ),
        READ_FILE => (titled("Read", field("path")), ToolKind::Read),
        WRITE_FILE => (titled("Write", field("path")), ToolKind::Edit),
        EDIT_FILE => (titled("Edit", field("path")), ToolKind::Edit),
        BASH_OUTPUT => (titled("Output of task", field("task_id")), ToolKind::Other),
        BASH_KILL => (titled("Kill task", field("task_id")), ToolKind::Other),
        TASK => (
            delegation(field("persona"), field("description")),
            ToolKind::Think,
        ),
        UPDATE_PLAN => ("Update the plan".to_owned(), ToolKind::Think),
        other => match crate::mcp::names::split(other) {
            // An MCP tool: by its server and its name.
            Some((server, tool)) => (shorten(&format!("{server}: {tool}")), ToolKind::Other),
            None => (other.to_owned(), ToolKind::Other),
        },
    };
    ToolDescription { title, kind, input }
}

/// A `bash` call's title: its command, and the mode it asks for when it asks to escalate
/// (`npm install (with workspace-write)`), so that the escalation is not taken for the call that
/// failed before it.
fn escalated(command: Option<String>, mode: Option<String>) -> String {
    let command = command.map_or_else(|| "bash".to_owned(), |c| shorten(&c));
    match mode.and_then(|m| m.parse::<confine_protocol::Mode>().ok()) {
        Some(mode) => format!("{command} (with {})", mode.as_str()),
        None => command,
    }
}

/// A `task` call's title: whom it delegates to and what (`Delegate to reader: read a.txt`).
fn delegation(persona: Option<String>, description: Option<String>) -> String {
    let whom = titled("Delegate to", persona);
    match description.filter(|d| !d.trim().is_empty()) {
        Some(what) => shorten(&format!("{whom}: {what}")),
        None => whom,
    }
}

fn titled(verb: &str, what: Option<String>) -> String {
    match what {
        Some(what) => shorten(&format!("{verb} {what}")),
        None => verb.to_owned(),
    }
}

/// One line of at most [`TITLE_CHARS`] characters, with what a terminal or a bidirectional
/// renderer would obey shown as escapes.
fn shorten(text: &str) -> String {
    crate::terminal::one_line(text, Some(TITLE_CHARS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bash_is_titled_by_its_command_on_one_line() {
        let d = describe("bash", r#"{"command":"cargo test\n  --workspace"}"#);
        assert_eq!(d.title, "cargo test --workspace");
        assert_eq!(d.kind.as_str(), "execute");
        assert_eq!(d.input["command"], "cargo test\n  --workspace");
        let long = "x".repeat(200);
        let d = describe("bash", &format!(r#"{{"command":"{long}"}}"#));
        assert_eq!(d.title.chars().count(), 80);
        assert!(d.title.ends_with('…'));
    }

    #[test]
    fn a_title_shows_controls_as_escapes() {
        let d = describe("bash", r#"{"command":"ls \u001b[2K\u202e"}"#);
        assert_eq!(d.title, "ls \\x1b[2K\\u{202e}");
    }

    #[test]
    fn an_escalating_bash_call_names_the_mode_it_asks_for() {
        let d = describe(
            "bash",
            r#"{"command":"npm install","sandbox_permissions":"workspace-write","justification":"j"}"#,
        );
        assert_eq!(d.title, "npm install (with workspace-write)");
        let odd = describe("bash", r#"{"command":"ls","sandbox_permissions":"root"}"#);
        assert_eq!(odd.title, "ls", "a mode that is not one is not named");
    }

    #[test]
    fn file_and_task_tools_have_their_titles_and_kinds() {
        let cases = [
            (
                "read_file",
                r#"{"path":"src/a.rs"}"#,
                "Read src/a.rs",
                "read",
            ),
            (
                "write_file",
                r#"{"path":"a","content":"x"}"#,
                "Write a",
                "edit",
            ),
            (
                "edit_file",
                r#"{"path":"a","old_string":"x","new_string":"y"}"#,
                "Edit a",
                "edit",
            ),
            (
                "bash_output",
                r#"{"task_id":"task-2"}"#,
                "Output of task task-2",
                "other",
            ),
            (
                "bash_kill",
                r#"{"task_id":"task-2"}"#,
                "Kill task task-2",
                "other",
            ),
            (
                "task",
                r#"{"persona":"reader","prompt":"What does a.txt say?","description":"read a.txt"}"#,
                "Delegate to reader: read a.txt",
                "think",
            ),
            (
                "task",
                r#"{"persona":"reader"}"#,
                "Delegate to reader",
                "think",
            ),
            ("task", "{", "Delegate to", "think"),
            ("frobnicate", "{}", "frobnicate", "other"),
            (
                "mcp__notes__write_note",
                r#"{"path":"a","text":"x"}"#,
                "notes: write_note",
                "other",
            ),
        ];
        for (name, arguments, title, kind) in cases {
            let d = describe(name, arguments);
            assert_eq!(d.title, title, "{name}");
            assert_eq!(d.kind.as_str(), kind, "{name}");
        }
    }

    #[test]
    fn malformed_arguments_are_described_raw() {
        let d = describe("bash", r#"{"command": "ls"#);
        assert_eq!(d.title, "bash");
        assert_eq!(d.input, json!({ "raw": r#"{"command": "ls"# }));
        assert_eq!(describe("read_file", "[1]").input, json!({ "raw": "[1]" }));
        assert_eq!(describe("read_file", "").input, json!({}));
        assert_eq!(describe("read_file", "{}").title, "Read");
    }
}
