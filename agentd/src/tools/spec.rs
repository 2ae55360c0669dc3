//! The tools as a model is offered them: names, descriptions and JSON schemas. Argument
//! checking ([`super::args`]) reads the same schemas, so a field added here is a field the
//! tools accept.

use confine_protocol::Mode;
use serde_json::{Value, json};

use crate::model::ToolSpec;

pub const BASH: &str = "bash";
pub const BASH_OUTPUT: &str = "bash_output";
pub const BASH_KILL: &str = "bash_kill";
pub const READ_FILE: &str = "read_file";
pub const WRITE_FILE: &str = "write_file";
pub const EDIT_FILE: &str = "edit_file";
/// The tool that starts a child agent. Reserved: no tool filter may name it.
pub const TASK: &str = "task";
/// The tool that sets the top-level agent's plan, which the editor shows. Reserved: only the
/// top-level agent has it, and no tool filter may name it.
pub const UPDATE_PLAN: &str = "update_plan";
/// The most entries a plan may have.
pub const MAX_PLAN_ENTRIES: usize = 50;
/// The longest a plan entry's content may be, in characters.
pub const MAX_PLAN_ENTRY_CHARS: usize = 500;

/// The built-in tools, in the order [`super::ToolRegistry::builtin`] registers them (the order
/// the model sees them in).
pub const NAMES: [&str; 6] = [
    BASH,
    BASH_OUTPUT,
    BASH_KILL,
    READ_FILE,
    WRITE_FILE,
    EDIT_FILE,
];

/// The tools whose calls may ask to run under a wider mode (`sandbox_permissions`).
pub const ESCALATING: [&str; 3] = [BASH, WRITE_FILE, EDIT_FILE];

/// A foreground command's time limit when the call gives none, in milliseconds.
pub const DEFAULT_TIMEOUT_MS: u64 = 120_000;
/// The longest time limit a call may ask for, in milliseconds.
pub const MAX_TIMEOUT_MS: u64 = 600_000;
/// The most `read_file` returns in one call, in bytes.
pub const READ_CAP: usize = 128 * 1024;
/// The most lines `read_file` returns in one call that names no `limit`: a window a model reads
/// on from, rather than a whole large file in its context.
pub const READ_LINES: u64 = 2000;

/// Variations of the offered tools. Everything is off by default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SpecOptions {
    /// The modes the `sandbox_permissions` of `bash`, `write_file` and `edit_file` offer (with
    /// `justification`): one command, or one write, may ask to run under one of them, with the
    /// user's consent. Empty: the fields do not exist.
    pub escalation: Vec<Mode>,
}

impl SpecOptions {
    /// The options of an executor that confines: every escalation mode is offered.
    pub fn confining() -> SpecOptions {
        SpecOptions {
            escalation: ESCALATION_MODES.to_vec(),
        }
    }

    /// These options with escalation offered only to `granted` (the modes the helper would run
    /// above the effective mode, see [`crate::composition::Composition::escalations`]).
    pub fn granting(&self, granted: &[Mode]) -> SpecOptions {
        SpecOptions {
            escalation: self
                .escalation
                .iter()
                .copied()
                .filter(|m| granted.contains(m))
                .collect(),
        }
    }

    /// Whether the `ESCALATING` tools have the escalation fields.
    pub fn escalates(&self) -> bool {
        !self.escalation.is_empty()
    }
}

/// Every mode a `sandbox_permissions` can name; a schema offers those of them the helper would
/// grant above the session's effective mode.
pub const ESCALATION_MODES: [Mode; 2] = [Mode::WorkspaceWrite, Mode::DangerFullAccess];

/// One tool's spec, `None` for an unknown name.
pub fn spec_with(name: &str, options: &SpecOptions) -> Option<ToolSpec> {
    let bash_description = if options.escalates() {
        format!("{BASH_DESCRIPTION} {ESCALATION_TEACHING}")
    } else {
        BASH_DESCRIPTION.to_owned()
    };
    let file_description = |description: &str| {
        if options.escalates() {
            format!("{description} {FILE_ESCALATION_TEACHING}")
        } else {
            description.to_owned()
        }
    };
    let (description, mut parameters) = match name {
        BASH => (bash_description, bash_parameters()),
        BASH_OUTPUT => (BASH_OUTPUT_DESCRIPTION.to_owned(), task_parameters()),
        BASH_KILL => (BASH_KILL_DESCRIPTION.to_owned(), task_parameters()),
        READ_FILE => (READ_FILE_DESCRIPTION.to_owned(), read_parameters()),
        WRITE_FILE => (file_description(WRITE_FILE_DESCRIPTION), write_parameters()),
        EDIT_FILE => (file_description(EDIT_FILE_DESCRIPTION), edit_parameters()),
        TASK => (TASK_DESCRIPTION.to_owned(), task_parameters_of_task()),
        UPDATE_PLAN => (UPDATE_PLAN_DESCRIPTION.to_owned(), plan_parameters()),
        _ => return None,
    };
    if ESCALATING.contains(&name) {
        escalation_fields(&mut parameters, name, options);
    }
    Some(ToolSpec {
        name: name.to_owned(),
        description,
        parameters,
    })
}

const BASH_DESCRIPTION: &str = "Run a shell command (bash -c) in the workspace directory and \
return its stdout and stderr, interleaved as they were written. The command gets no input \
(stdin is empty), so do not start interactive programs. After the output come markers, each on \
its own line; when the command ran, the last one is always [exit code: N]: check it on every \
result. Others: [timed out after N ms], [terminated by signal N], [cancelled], and \
[sandbox: <what> denied under <mode> mode] when the sandbox the command runs in blocked an \
access, <what> naming it: a file write, a write to git metadata, a file read, network access or \
a system interface (trying a command the sandbox may deny is safe). Output longer than 30000 \
bytes keeps its beginning and end with [output truncated: N bytes omitted] between, so prefer \
commands with short output (grep, head, tail, wc). Set run_in_background for servers, watchers \
and other long runs: the call returns at once with a task id to use with bash_output and \
bash_kill.";

/// How to escalate, in the `bash` description only when the fields exist.
const ESCALATION_TEACHING: &str = "Sandbox escalation: when a command failed with a sandbox \
denial marker and the task really needs that access, retry the exact same command once, in \
this same turn, with sandbox_permissions set to the mode the escalation line after the marker \
names, the narrowest that suffices (workspace-write to write inside the workspace; \
danger-full-access for writes elsewhere or to git metadata, the network and system interfaces, \
which no file mode allows) and justification set to one sentence the user reads when asked to \
approve; a marker without that line is a denial no escalation can lift. Do not ask in chat: the \
approval prompt is the consent. Never escalate preemptively, before a \
real denial. A rejection is final for that command. If the instructions say approvals are \
disabled, a denial is final.";

/// How a file tool escalates, in the `write_file` and `edit_file` descriptions only when the
/// fields exist.
const FILE_ESCALATION_TEACHING: &str = "Sandbox escalation: when this write was refused by the \
sandbox (a [sandbox: … denied …] marker) and the task really needs it, retry the same call \
once, in this same turn, with sandbox_permissions set to the narrowest mode that allows it \
(workspace-write for a file inside the workspace in read-only mode; danger-full-access for a \
file outside the workspace) and justification set to one sentence the user reads, with the \
change, when asked to approve. Git metadata and protected paths stay read-only in every \
confined mode. Never escalate preemptively; a rejection is final for that write.";

const TASK_DESCRIPTION: &str = "Delegate a self-contained sub-task to a child agent of a \
persona. The child works with its own tools (at most yours, never escalating the sandbox) and \
answers with one final report, which is this call's result. Give it everything it needs in \
prompt: it does not see this conversation.";

const UPDATE_PLAN_DESCRIPTION: &str = "Set your plan for the user's request, which the user \
sees beside the conversation: the whole plan each time (it replaces the one before), each step \
with its priority and status. Use it for work of several steps: make the plan before you start, \
mark a step in_progress when you begin it and completed as soon as it is done, and add, change \
or drop steps as you learn more. Keep one step in_progress at a time. Skip it for a question or \
a single quick change.";

/// The `update_plan` tool's parameters: ACP's `PlanEntry` fields.
fn plan_parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "plan": {
                "type": "array",
                "maxItems": MAX_PLAN_ENTRIES,
                "description": "Every step of the plan, in order.",
                "items": {
                    "type": "object",
                    "properties": {
                        "content": {
                            "type": "string",
                            "maxLength": MAX_PLAN_ENTRY_CHARS,
                            "description": "What the step does, in a short sentence.",
                        },
                        "priority": {"type": "string", "enum": ["high", "medium", "low"]},
                        "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                    },
                    "required": ["content", "priority", "status"],
                    "additionalProperties": false,
                },
            },
        },
        "required": ["plan"],
        "additionalProperties": false,
    })
}

/// The `task` tool's parameters.
fn task_parameters_of_task() -> Value {
    json!({
        "type": "object",
        "properties": {
            "persona": {"type": "string", "description": "The persona of the child agent."},
            "prompt": {"type": "string", "description": "The sub-task, complete and self-contained."},
            "description": {"type": "string", "description": "A few words saying what the child does, for the user."}
        },
        "required": ["persona", "prompt", "description"],
        "additionalProperties": false
    })
}

const BASH_OUTPUT_DESCRIPTION: &str = "Read the new output of a background task started by bash \
with run_in_background: everything it wrote since the last bash_output call, then \
[still running], or once it has ended the same end markers as a foreground command, \
[exit code: N] last.";

const BASH_KILL_DESCRIPTION: &str = "Stop a background task started by bash with \
run_in_background and wait for it to end. Returns its output not read yet and its end markers.";

const READ_FILE_DESCRIPTION: &str = "Read a UTF-8 text file. Returns the file's text as it is \
(no line numbers), at most 2000 lines (unless limit says otherwise) and 128 KiB per call. offset \
(the first line to return, counting from 1) and limit (how many lines) select a window of \
lines; when the result stops before the end of the file, a last line in brackets says which \
lines it showed and which offset to read on from.";

const WRITE_FILE_DESCRIPTION: &str = "Create a file or replace its whole content, creating \
missing parent directories. To change part of an existing file, prefer edit_file.";

const EDIT_FILE_DESCRIPTION: &str = "Replace text in an existing text file. old_string must \
match the file exactly, whitespace and indentation included, and occur exactly once (include \
enough surrounding lines to make it unique), unless replace_all is true, which replaces every \
occurrence. Read the file first to copy old_string exactly.";

const PATH_DESCRIPTION: &str = "The file's path: relative to the workspace directory, or absolute.";

fn bash_parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "command": {
                "type": "string",
                "description": "The command line, run as bash -c COMMAND in the workspace directory.",
            },
            "timeout": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_TIMEOUT_MS,
                "description": format!(
                    "Time limit in milliseconds (at most {MAX_TIMEOUT_MS}); the command is \
                     terminated when it passes. Default {DEFAULT_TIMEOUT_MS} for a foreground \
                     command, none for a background one."
                ),
            },
            "run_in_background": {
                "type": "boolean",
                "description": "Start the command and return at once with a task id instead of waiting for it to end.",
            },
        },
        "required": ["command"],
        "additionalProperties": false,
    })
}

/// Adds `sandbox_permissions` and `justification` to the parameters of the escalating tool
/// `name` when `options` offer escalation.
fn escalation_fields(parameters: &mut Value, name: &str, options: &SpecOptions) {
    if !options.escalates() {
        return;
    }
    // Every escalating tool's parameters are an object with properties.
    let Some(properties) = parameters
        .get_mut("properties")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let what = if name == BASH { "command" } else { "write" };
    let modes: Vec<&str> = options.escalation.iter().map(|m| m.as_str()).collect();
    properties.insert("sandbox_permissions".to_owned(), json!({
        "type": "string",
        "enum": modes,
        "description": format!("Run this one {what} under a wider sandbox mode, after a denial; the user is asked first. Requires justification."),
    }));
    properties.insert("justification".to_owned(), json!({
        "type": "string",
        "description": format!("One sentence for the user: why this {what} needs the wider mode. Only together with sandbox_permissions."),
    }));
}

fn task_parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "task_id": {
                "type": "string",
                "description": "The id bash returned when it started the task, e.g. task-1.",
            },
        },
        "required": ["task_id"],
        "additionalProperties": false,
    })
}

fn read_parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": { "type": "string", "description": PATH_DESCRIPTION },
            "offset": {
                "type": "integer",
                "minimum": 1,
                "description": "The first line to return, counting from 1. Default 1.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "description": "How many lines to return at most. Default 2000 (within 128 KiB).",
            },
        },
        "required": ["path"],
        "additionalProperties": false,
    })
}

fn write_parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": { "type": "string", "description": PATH_DESCRIPTION },
            "content": { "type": "string", "description": "The file's whole new content." },
        },
        "required": ["path", "content"],
        "additionalProperties": false,
    })
}

fn edit_parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": { "type": "string", "description": PATH_DESCRIPTION },
            "old_string": {
                "type": "string",
                "description": "The exact text to replace; must not be empty.",
            },
            "new_string": {
                "type": "string",
                "description": "The text to put in its place; must differ from old_string.",
            },
            "replace_all": {
                "type": "boolean",
                "description": "Replace every occurrence instead of requiring exactly one. Default false.",
            },
        },
        "required": ["path", "old_string", "new_string"],
        "additionalProperties": false,
    })
}

/// The shape of a tool's arguments for an error message, from its schema: the required
/// fields in their listed order, then the optional ones, marked with `?`, by name:
/// `{"command": string, "run_in_background"?: boolean, "timeout"?: integer}`.
pub fn shape(parameters: &Value) -> String {
    let required: Vec<&str> = parameters["required"]
        .as_array()
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = parameters["properties"].as_object() else {
        return "{}".to_owned();
    };
    let kind = |name: &str| {
        properties
            .get(name)
            .and_then(|property| property.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("value")
            .to_owned()
    };
    let mut optional: Vec<&str> = properties
        .keys()
        .map(String::as_str)
        .filter(|name| !required.contains(name))
        .collect();
    optional.sort_unstable();
    let fields: Vec<String> = required
        .iter()
        .filter(|name| properties.contains_key(**name))
        .map(|name| format!("\"{name}\": {}", kind(name)))
        .chain(
            optional
                .iter()
                .map(|name| format!("\"{name}\"?: {}", kind(name))),
        )
        .collect();
    format!("{{{}}}", fields.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_an_object_schema_with_its_required_fields_listed() {
        let specs: Vec<ToolSpec> = NAMES
            .iter()
            .filter_map(|name| spec_with(name, &SpecOptions::default()))
            .collect();
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, NAMES);
        for spec in &specs {
            assert_eq!(spec.parameters["type"], "object", "{}", spec.name);
            assert!(!spec.description.is_empty());
            let properties = spec.parameters["properties"]
                .as_object()
                .expect("properties");
            for required in spec.parameters["required"].as_array().expect("required") {
                let required = required.as_str().expect("a name");
                assert!(
                    properties.contains_key(required),
                    "{}: {required}",
                    spec.name
                );
            }
        }
    }

    #[test]
    fn the_bash_schema_has_the_timeout_bounds_and_background_flag() {
        let bash = spec_with(BASH, &SpecOptions::default()).expect("bash");
        let timeout = &bash.parameters["properties"]["timeout"];
        assert_eq!(timeout["type"], "integer");
        assert_eq!(timeout["maximum"], 600_000);
        assert_eq!(
            bash.parameters["properties"]["run_in_background"]["type"],
            "boolean"
        );
        assert_eq!(bash.parameters["required"], json!(["command"]));
    }

    #[test]
    fn the_shape_marks_optional_fields() {
        let read = spec_with(READ_FILE, &SpecOptions::default()).expect("read_file");
        assert_eq!(
            shape(&read.parameters),
            r#"{"path": string, "limit"?: integer, "offset"?: integer}"#
        );
    }

    #[test]
    fn an_unknown_name_has_no_spec() {
        assert!(spec_with("rm_rf", &SpecOptions::default()).is_none());
    }
}
