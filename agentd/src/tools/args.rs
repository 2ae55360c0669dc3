//! Checking a model's arguments. Nothing a model sends makes a tool panic: an unknown tool,
//! JSON that does not parse, a missing, mistyped or unknown field all become one message that
//! says what was wrong and what shape was expected.

use serde_json::{Map, Value};

use super::spec::{self, MAX_TIMEOUT_MS, SpecOptions};

/// A tool call whose arguments passed the checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Call {
    Bash(BashArgs),
    BashOutput { task_id: String },
    BashKill { task_id: String },
    ReadFile(ReadArgs),
    WriteFile(WriteArgs),
    EditFile(EditArgs),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BashArgs {
    pub command: String,
    /// Milliseconds, 1 to [`MAX_TIMEOUT_MS`].
    pub timeout_ms: Option<u64>,
    pub background: bool,
    /// The wider mode this one command asks for, with its justification.
    pub escalation: Option<Escalation>,
}

/// A request to run one command under a wider mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Escalation {
    pub mode: confine_protocol::Mode,
    pub justification: String,
}

/// The text when `sandbox_permissions` is used but not offered.
pub const ESCALATION_NOT_OFFERED: &str =
    "sandbox_permissions is not available in this composition (no sandboxing executor to escalate)";

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReadArgs {
    pub path: String,
    /// The first line to return, counting from 1.
    pub offset: u64,
    pub limit: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WriteArgs {
    pub path: String,
    pub content: String,
    /// The wider mode this one write asks for, with its justification.
    pub escalation: Option<Escalation>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EditArgs {
    pub path: String,
    pub old_string: String,
    pub new_string: String,
    pub replace_all: bool,
    /// The wider mode this one edit asks for, with its justification.
    pub escalation: Option<Escalation>,
}

/// Why a call's arguments were refused. The text is for the model: it says what was wrong and
/// what shape was expected.
#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    /// `sandbox_permissions` or `justification` where escalation is not offered.
    #[error("{ESCALATION_NOT_OFFERED}")]
    EscalationNotOffered,
    /// No tool of this name is offered.
    #[error("unknown tool \"{0}\"; the tools are: {tools}", tools = spec::NAMES.join(", "))]
    UnknownTool(String),
    /// A tool that is offered but that no parser here knows (none, today).
    #[error("unknown tool \"{0}\"")]
    Unparsed(String),
    /// The arguments are not JSON.
    #[error(
        "invalid arguments for {tool}: they are not valid JSON ({source}); expected a JSON \
         object {shape}"
    )]
    NotJson {
        tool: String,
        /// The expected shape, as [`spec::shape`] words it.
        shape: String,
        source: serde_json::Error,
    },
    /// The arguments are JSON, but not an object.
    #[error(
        "invalid arguments for {tool}: expected a JSON object {shape}, got {}",
        kind_of(got)
    )]
    NotAnObject {
        tool: String,
        shape: String,
        got: Value,
    },
    /// A field is unknown, missing or wrong.
    #[error("invalid arguments for {tool}: {problem}; expected {shape}")]
    Invalid {
        tool: String,
        shape: String,
        problem: Box<Problem>,
    },
    /// `sandbox_permissions` without a `justification`.
    #[error("invalid escalation: sandbox_permissions requires a justification")]
    NoJustification,
    /// A `justification` without `sandbox_permissions`.
    #[error("invalid escalation: justification is only valid together with sandbox_permissions")]
    JustificationAlone,
    /// A blank `justification`.
    #[error("invalid justification: expected a non-empty sentence")]
    EmptyJustification,
}

/// What is wrong with the fields of an arguments object.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Problem {
    /// Fields the tool does not have, sorted.
    #[error("unknown field {}", quoted(.0))]
    UnknownFields(Vec<String>),
    #[error("\"{0}\" is missing")]
    Missing(&'static str),
    #[error("\"{field}\" must be a string, got {}", kind_of(value))]
    NotAString { field: &'static str, value: Value },
    #[error("\"{0}\" is empty")]
    Empty(&'static str),
    #[error("\"{0}\" contains a NUL character")]
    ContainsNul(&'static str),
    /// Not a whole number from `min` to `max` (no upper bound when `max` is `u64::MAX`).
    #[error(
        "\"{field}\" must be a whole number {}, got {}",
        range(*min, *max),
        number_given(value)
    )]
    NotAWholeNumber {
        field: &'static str,
        min: u64,
        max: u64,
        value: Value,
    },
    #[error("\"{field}\" must be true or false, got {}", kind_of(value))]
    NotABoolean { field: &'static str, value: Value },
    /// `sandbox_permissions` names no mode a call may escalate to.
    #[error(
        "\"sandbox_permissions\" must be one of {}, not {given:?}",
        spec::ESCALATION_MODES.map(confine_protocol::Mode::as_str).join(", ")
    )]
    NotAnEscalationMode { given: String },
    #[error(
        "\"old_string\" is empty; to create a file or replace its whole content use write_file"
    )]
    EmptyOldString,
    #[error("\"old_string\" and \"new_string\" are the same, so the edit would change nothing")]
    NothingToChange,
}

/// Names, each in double quotes, separated by commas.
fn quoted(names: &[String]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
    quoted.join(", ")
}

/// The range of a whole number field, as a complaint words it.
fn range(min: u64, max: u64) -> String {
    if max == u64::MAX {
        format!("at least {min}")
    } else {
        format!("from {min} to {max}")
    }
}

/// What was given for a whole number: a number as it was written, anything else by its kind.
fn number_given(value: &Value) -> String {
    match value {
        Value::Number(_) => value.to_string(),
        other => kind_of(other),
    }
}

/// Whether a call's arguments name either escalation field.
fn mentions_escalation(arguments: &str) -> bool {
    serde_json::from_str::<Value>(arguments)
        .is_ok_and(|v| v.get("sandbox_permissions").is_some() || v.get("justification").is_some())
}

/// The escalation a call of an escalating tool asks for, with the validation texts of the
/// specification.
fn escalation(fields: &Fields<'_>) -> Result<Option<Escalation>, ArgsError> {
    let mode = fields.string_opt("sandbox_permissions")?;
    let justification = fields.string_opt("justification")?;
    match (mode, justification) {
        (None, None) => Ok(None),
        (Some(_), None) => Err(ArgsError::NoJustification),
        (None, Some(_)) => Err(ArgsError::JustificationAlone),
        (Some(mode), Some(justification)) => {
            if justification.trim().is_empty() {
                return Err(ArgsError::EmptyJustification);
            }
            // A word of the mode vocabulary, and one of the modes a call may escalate to.
            let wider = match mode.parse::<confine_protocol::Mode>() {
                Ok(wider) if spec::ESCALATION_MODES.contains(&wider) => wider,
                _ => return Err(fields.problem(Problem::NotAnEscalationMode { given: mode })),
            };
            Ok(Some(Escalation {
                mode: wider,
                justification: justification.trim().to_owned(),
            }))
        }
    }
}

/// Checks the arguments of a call of tool `name` against the tools as `options` offer them.
pub(crate) fn parse(name: &str, arguments: &str, options: &SpecOptions) -> Result<Call, ArgsError> {
    if spec::ESCALATING.contains(&name) && !options.escalates() && mentions_escalation(arguments) {
        return Err(ArgsError::EscalationNotOffered);
    }
    let Some(tool) = spec::spec_with(name, options) else {
        return Err(ArgsError::UnknownTool(name.to_owned()));
    };
    let fields = Fields::new(name, &tool.parameters, arguments)?;
    let call = match name {
        spec::BASH => {
            let command = fields.string("command")?;
            if command.trim().is_empty() {
                return Err(fields.problem(Problem::Empty("command")));
            }
            if command.contains('\0') {
                return Err(fields.problem(Problem::ContainsNul("command")));
            }
            Call::Bash(BashArgs {
                command,
                timeout_ms: fields.integer("timeout", 1, MAX_TIMEOUT_MS)?,
                background: fields.boolean("run_in_background")?.unwrap_or(false),
                escalation: escalation(&fields)?,
            })
        }
        spec::BASH_OUTPUT => Call::BashOutput {
            task_id: fields.string("task_id")?,
        },
        spec::BASH_KILL => Call::BashKill {
            task_id: fields.string("task_id")?,
        },
        spec::READ_FILE => Call::ReadFile(ReadArgs {
            path: fields.path()?,
            offset: fields.integer("offset", 1, u64::MAX)?.unwrap_or(1),
            limit: fields.integer("limit", 1, u64::MAX)?,
        }),
        spec::WRITE_FILE => Call::WriteFile(WriteArgs {
            path: fields.path()?,
            content: fields.string("content")?,
            escalation: escalation(&fields)?,
        }),
        spec::EDIT_FILE => {
            let args = EditArgs {
                path: fields.path()?,
                old_string: fields.string("old_string")?,
                new_string: fields.string("new_string")?,
                replace_all: fields.boolean("replace_all")?.unwrap_or(false),
                escalation: escalation(&fields)?,
            };
            if args.old_string.is_empty() {
                return Err(fields.problem(Problem::EmptyOldString));
            }
            if args.old_string == args.new_string {
                return Err(fields.problem(Problem::NothingToChange));
            }
            Call::EditFile(args)
        }
        // `spec_with` knows no other names.
        other => return Err(ArgsError::Unparsed(other.to_owned())),
    };
    Ok(call)
}

/// The arguments object of one call, with what is needed to word a complaint.
struct Fields<'a> {
    tool: &'a str,
    parameters: &'a Value,
    map: Map<String, Value>,
}

impl<'a> Fields<'a> {
    fn new(tool: &'a str, parameters: &'a Value, arguments: &str) -> Result<Fields<'a>, ArgsError> {
        let arguments = if arguments.trim().is_empty() {
            "{}"
        } else {
            arguments
        };
        let value: Value =
            serde_json::from_str(arguments).map_err(|source| ArgsError::NotJson {
                tool: tool.to_owned(),
                shape: spec::shape(parameters),
                source,
            })?;
        let Value::Object(map) = value else {
            return Err(ArgsError::NotAnObject {
                tool: tool.to_owned(),
                shape: spec::shape(parameters),
                got: value,
            });
        };
        let fields = Fields {
            tool,
            parameters,
            map,
        };
        let known = parameters["properties"].as_object();
        let mut unknown: Vec<String> = fields
            .map
            .keys()
            .filter(|name| !known.is_some_and(|known| known.contains_key(*name)))
            .cloned()
            .collect();
        if !unknown.is_empty() {
            unknown.sort_unstable();
            return Err(fields.problem(Problem::UnknownFields(unknown)));
        }
        Ok(fields)
    }

    /// The complaint about these arguments, with the expected shape.
    fn problem(&self, problem: Problem) -> ArgsError {
        ArgsError::Invalid {
            tool: self.tool.to_owned(),
            shape: spec::shape(self.parameters),
            problem: Box::new(problem),
        }
    }

    /// A field's value; a JSON `null` counts as absent.
    fn get(&self, name: &str) -> Option<&Value> {
        self.map.get(name).filter(|value| !value.is_null())
    }

    fn string(&self, name: &'static str) -> Result<String, ArgsError> {
        match self.get(name) {
            Some(Value::String(text)) => Ok(text.clone()),
            Some(other) => Err(self.problem(Problem::NotAString {
                field: name,
                value: other.clone(),
            })),
            None => Err(self.problem(Problem::Missing(name))),
        }
    }

    /// An optional string field.
    fn string_opt(&self, name: &'static str) -> Result<Option<String>, ArgsError> {
        match self.get(name) {
            None => Ok(None),
            Some(_) => self.string(name).map(Some),
        }
    }

    fn path(&self) -> Result<String, ArgsError> {
        let path = self.string("path")?;
        if path.is_empty() {
            return Err(self.problem(Problem::Empty("path")));
        }
        if path.contains('\0') {
            return Err(self.problem(Problem::ContainsNul("path")));
        }
        Ok(path)
    }

    /// An optional whole number from `min` to `max`. `5.0` counts as 5; `"5"` does not.
    fn integer(&self, name: &'static str, min: u64, max: u64) -> Result<Option<u64>, ArgsError> {
        let Some(value) = self.get(name) else {
            return Ok(None);
        };
        let number = match value {
            Value::Number(number) => number
                .as_u64()
                .or_else(|| {
                    number
                        .as_f64()
                        .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < u64::MAX as f64)
                        .map(|f| f as u64)
                })
                .filter(|n| (min..=max).contains(n)),
            _ => None,
        };
        match number {
            Some(n) => Ok(Some(n)),
            None => Err(self.problem(Problem::NotAWholeNumber {
                field: name,
                min,
                max,
                value: value.clone(),
            })),
        }
    }

    fn boolean(&self, name: &'static str) -> Result<Option<bool>, ArgsError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(self.problem(Problem::NotABoolean {
                field: name,
                value: other.clone(),
            })),
        }
    }
}

/// How a JSON value is named in a complaint: its kind, and short scalars themselves.
fn kind_of(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) if s.chars().count() <= 40 => format!("the string {s:?}"),
        Value::String(_) => "a string".to_owned(),
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(name: &str, arguments: &str) -> Call {
        parse(name, arguments, &SpecOptions::default())
            .unwrap_or_else(|e| panic!("{name} {arguments}: {e}"))
    }

    fn err(name: &str, arguments: &str) -> String {
        match parse(name, arguments, &SpecOptions::default()) {
            Ok(call) => panic!("{name} {arguments} was accepted: {call:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn bash_takes_a_command_and_optional_timeout_and_background() {
        assert_eq!(
            ok("bash", r#"{"command":"ls"}"#),
            Call::Bash(BashArgs {
                command: "ls".to_owned(),
                timeout_ms: None,
                background: false,
                escalation: None,
            })
        );
        assert_eq!(
            ok(
                "bash",
                r#"{"command":"ls","timeout":5000.0,"run_in_background":true}"#
            ),
            Call::Bash(BashArgs {
                command: "ls".to_owned(),
                timeout_ms: Some(5000),
                background: true,
                escalation: None,
            })
        );
        assert_eq!(
            ok("bash", r#"{"command":"ls","timeout":null}"#),
            ok("bash", r#"{"command":"ls"}"#)
        );
    }

    #[test]
    fn a_missing_command_names_the_field_and_the_shape() {
        assert_eq!(
            err("bash", "{}"),
            "invalid arguments for bash: \"command\" is missing; expected {\"command\": string, \
             \"run_in_background\"?: boolean, \"timeout\"?: integer}"
        );
        assert_eq!(err("bash", ""), err("bash", "{}"));
    }

    #[test]
    fn wrong_types_say_what_was_given() {
        assert!(
            err("bash", r#"{"command":["ls"]}"#)
                .contains("\"command\" must be a string, got an array")
        );
        assert!(
            err("bash", r#"{"command":"ls","timeout":"5"}"#).contains(
                "\"timeout\" must be a whole number from 1 to 600000, got the string \"5\""
            )
        );
        assert!(
            err("bash", r#"{"command":"ls","run_in_background":"yes"}"#)
                .contains("\"run_in_background\" must be true or false, got the string \"yes\"")
        );
    }

    #[test]
    fn the_timeout_is_bounded() {
        for bad in ["0", "600001", "-1", "1.5", "1e30"] {
            let e = err("bash", &format!(r#"{{"command":"ls","timeout":{bad}}}"#));
            assert!(e.contains("from 1 to 600000"), "{bad}: {e}");
        }
        assert_eq!(
            ok("bash", r#"{"command":"ls","timeout":600000}"#),
            Call::Bash(BashArgs {
                command: "ls".to_owned(),
                timeout_ms: Some(600_000),
                background: false,
                escalation: None,
            })
        );
    }

    #[test]
    fn an_empty_command_is_refused() {
        assert!(err("bash", r#"{"command":"  "}"#).contains("\"command\" is empty"));
        assert!(err("bash", r#"{"command":"a\u0000b"}"#).contains("NUL"));
    }

    #[test]
    fn malformed_json_and_non_objects_are_explained() {
        let e = err("read_file", r#"{"path": "a""#);
        assert!(
            e.starts_with("invalid arguments for read_file: they are not valid JSON"),
            "{e}"
        );
        assert!(
            e.ends_with(r#"{"path": string, "limit"?: integer, "offset"?: integer}"#),
            "{e}"
        );
        let e = err("read_file", r#"["a"]"#);
        assert!(e.contains("expected a JSON object"), "{e}");
        assert!(e.ends_with("got an array"), "{e}");
    }

    #[test]
    fn unknown_fields_are_named() {
        let e = err("bash", r#"{"command":"ls","timeout_ms":5,"cwd":"/"}"#);
        assert!(e.contains("unknown field \"cwd\", \"timeout_ms\""), "{e}");
    }

    #[test]
    fn an_unknown_tool_lists_the_tools() {
        assert_eq!(
            err("shell", "{}"),
            "unknown tool \"shell\"; the tools are: bash, bash_output, bash_kill, read_file, \
             write_file, edit_file"
        );
    }

    #[test]
    fn read_file_defaults_to_the_first_line_and_no_limit() {
        assert_eq!(
            ok("read_file", r#"{"path":"a.txt"}"#),
            Call::ReadFile(ReadArgs {
                path: "a.txt".to_owned(),
                offset: 1,
                limit: None
            })
        );
        assert!(err("read_file", r#"{"path":"a","offset":0}"#).contains("at least 1"));
        assert!(err("read_file", r#"{"path":""}"#).contains("\"path\" is empty"));
    }

    #[test]
    fn write_file_needs_path_and_content() {
        assert_eq!(
            ok("write_file", r#"{"path":"a","content":""}"#),
            Call::WriteFile(WriteArgs {
                path: "a".to_owned(),
                content: String::new(),
                escalation: None,
            })
        );
        assert!(err("write_file", r#"{"path":"a"}"#).contains("\"content\" is missing"));
    }

    #[test]
    fn edit_file_refuses_an_empty_or_unchanged_edit() {
        assert_eq!(
            ok(
                "edit_file",
                r#"{"path":"a","old_string":"x","new_string":"y","replace_all":true}"#
            ),
            Call::EditFile(EditArgs {
                path: "a".to_owned(),
                old_string: "x".to_owned(),
                new_string: "y".to_owned(),
                replace_all: true,
                escalation: None,
            })
        );
        assert!(
            err(
                "edit_file",
                r#"{"path":"a","old_string":"","new_string":"y"}"#
            )
            .contains("\"old_string\" is empty")
        );
        assert!(
            err(
                "edit_file",
                r#"{"path":"a","old_string":"x","new_string":"x"}"#
            )
            .contains("would change nothing")
        );
    }

    #[test]
    fn task_tools_need_a_task_id() {
        assert_eq!(
            ok("bash_output", r#"{"task_id":"task-1"}"#),
            Call::BashOutput {
                task_id: "task-1".to_owned()
            }
        );
        assert!(err("bash_kill", r#"{"task_id":1}"#).contains("must be a string"));
    }
}
