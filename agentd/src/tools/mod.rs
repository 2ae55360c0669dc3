//! The tools a model calls: `bash` (with `bash_output` and `bash_kill` for background
//! commands), `read_file`, `write_file` and `edit_file`.
//!
//! The agent loop offers [`specs`] to the model, announces each call with [`describe`] before
//! running it, runs it with [`run`] and reports the [`ToolResult`]: the text the model reads and
//! the facts for the editor. A session keeps one [`ToolEnv`] for all its calls; each call comes
//! with a [`CallContext`]: the sandbox mode in effect for it and the turn's cancel.
//!
//! # Where the confinement is
//!
//! Every command `bash` runs goes through confine-helper ([`crate::helper_client`]) and is
//! confined by the kernel under the call's mode; agentd never runs one itself.
//!
//! The file tools go through it too: confine-helper runs its own reader or writer as a command
//! under the same plan ([`HelperClient::read_file`], [`HelperClient::write_file`]), so the
//! kernel decides what a read may see and where a write may land, exactly as for a command of
//! that mode. Before a write, a fence in trusted code (`files::check_write`) refuses with a
//! clear sentence what the sandbox would refuse anyway: nothing in read-only; outside the
//! workspace or into git metadata in workspace-write.
//!
//! Nothing a model sends makes a tool panic: an unknown tool, malformed JSON, missing or
//! mistyped fields all give a [`ToolStatus::Failed`] result saying what was wrong and the shape
//! expected.

mod args;
mod background;
mod bash;
mod call;
mod env;
mod files;
mod output;
mod spec;
mod tasks;

use confine_protocol::Mode;
use serde_json::{Value, json};

use crate::model::ToolCall;

pub use args::{ESCALATION_NOT_OFFERED, Escalation};
pub use bash::ANSWER_WAIT;
pub use call::{CallContext, ToolResult};
pub use env::{ClientFs, FsFuture, ToolEnv};
pub use files::{MAX_TEXT_FILE, PROTECTED};
pub use output::{
    BACKGROUND_OUTPUT_CAP, MODEL_OUTPUT_CAP, denial_marker, exit_marker, truncation_marker,
};
pub use spec::{
    BASH, BASH_KILL, BASH_OUTPUT, DEFAULT_TIMEOUT_MS, EDIT_FILE, MAX_TIMEOUT_MS, NAMES, READ_CAP,
    READ_FILE, SpecOptions, WRITE_FILE, spec_with, specs, specs_with,
};
pub use tasks::{BackgroundTasks, NarrowingMark, Stopped, Stopping};

/// What kind of thing a call does, with ACP's `ToolKind` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolKind {
    Execute,
    Read,
    Edit,
    Other,
}

impl ToolKind {
    /// The name ACP uses.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolKind::Execute => "execute",
            ToolKind::Read => "read",
            ToolKind::Edit => "edit",
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
            field("command").map_or_else(|| "bash".to_owned(), |c| shorten(&c)),
            ToolKind::Execute,
        ),
        READ_FILE => (titled("Read", field("path")), ToolKind::Read),
        WRITE_FILE => (titled("Write", field("path")), ToolKind::Edit),
        EDIT_FILE => (titled("Edit", field("path")), ToolKind::Edit),
        BASH_OUTPUT => (titled("Output of task", field("task_id")), ToolKind::Other),
        BASH_KILL => (titled("Kill task", field("task_id")), ToolKind::Other),
        other => (other.to_owned(), ToolKind::Other),
    };
    ToolDescription { title, kind, input }
}

fn titled(verb: &str, what: Option<String>) -> String {
    match what {
        Some(what) => shorten(&format!("{verb} {what}")),
        None => verb.to_owned(),
    }
}

/// One line of at most [`TITLE_CHARS`] characters.
fn shorten(text: &str) -> String {
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= TITLE_CHARS {
        return line;
    }
    let mut short: String = line.chars().take(TITLE_CHARS - 1).collect();
    short.push('…');
    short
}

/// The wider mode a `bash` call asks for, checked as `run` would check it: `Ok(None)` for any
/// other call or a plain one, `Err(text for the model)` when the request is malformed or not
/// offered. The caller gates and asks for approval before running the call under the mode.
pub fn requested_escalation(env: &ToolEnv, call: &ToolCall) -> Result<Option<Escalation>, String> {
    if call.name != BASH {
        return Ok(None);
    }
    match args::parse(&call.name, &call.arguments, env.spec_options()) {
        Ok(args::Call::Bash(args)) => Ok(args.escalation),
        Ok(_) => Ok(None),
        Err(text) => Err(text),
    }
}

/// Escalation must widen: read-only → workspace-write or danger-full-access; workspace-write
/// → danger-full-access. Anything else fails without asking anyone.
pub fn strictly_widens(requested: Mode, effective: Mode) -> Result<(), String> {
    if requested > effective {
        Ok(())
    } else {
        Err(format!(
            "sandbox escalation to \"{}\" is not strictly wider than this call's current \"{}\" mode",
            requested.as_str(),
            effective.as_str()
        ))
    }
}

/// What the escalation gate checks besides the request itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateContext {
    /// The tools offer escalation (the executor confines, and the helper grants a wider mode).
    pub offered: bool,
    /// The session's effective mode for this call.
    pub effective: Mode,
    /// Why the helper would not run the requested mode, if it would not.
    pub refusal: Option<String>,
    /// An approval service is composed.
    pub approval_service: bool,
    /// The call has an agent (a session) to route the question through.
    pub agent: bool,
}

/// The escalation gate, in the specified order, before anything runs or anyone is asked: offered,
/// strictly widening, granted by the helper, an approval service, an agent. `Err` is the text
/// for the model.
pub fn escalation_gate(requested: Mode, ctx: &GateContext) -> Result<(), String> {
    if !ctx.offered {
        return Err(ESCALATION_NOT_OFFERED.to_owned());
    }
    strictly_widens(requested, ctx.effective)?;
    let m = requested.as_str();
    if let Some(why) = &ctx.refusal {
        return Err(format!(
            "sandbox escalation to \"{m}\" cannot be granted: {why}"
        ));
    }
    if !ctx.approval_service {
        return Err(format!(
            "sandbox escalation to \"{m}\" requires approval, but no approval service is composed"
        ));
    }
    if !ctx.agent {
        return Err(format!(
            "sandbox escalation to \"{m}\" requires approval, but the call has no agent to route it through"
        ));
    }
    Ok(())
}

/// Runs one call. Never panics on what the model sent; see the module documentation.
pub async fn run(env: &ToolEnv, call: &ToolCall, ctx: CallContext) -> ToolResult {
    let parsed = match args::parse(&call.name, &call.arguments, env.spec_options()) {
        Ok(parsed) => parsed,
        Err(text) => {
            return ToolResult::failed(
                text,
                json!({ "mode": ctx.mode.as_str(), "invalid_call": true }),
            );
        }
    };
    match parsed {
        args::Call::Bash(args) if args.background => {
            background::start(env, args, &call.id, ctx).await
        }
        args::Call::Bash(args) => bash::bash(env, args, ctx).await,
        args::Call::BashOutput { task_id } => background::output(env, &task_id),
        args::Call::BashKill { task_id } => background::kill(env, &task_id, ctx).await,
        args::Call::ReadFile(args) => files::read_file(env, args, ctx.mode).await,
        args::Call::WriteFile(args) => files::write_file(env, args, ctx.mode).await,
        args::Call::EditFile(args) => files::edit_file(env, args, ctx.mode).await,
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::sync::{Arc, Mutex};

    use confine_protocol::{BackendChoice, Network};

    use super::*;
    use crate::cancel::Cancel;
    use crate::helper_client::{HelperClient, HelperEndpoint};
    use crate::session::ToolStatus;
    use crate::test_support::{Scratch, within};

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
            ("frobnicate", "{}", "frobnicate", "other"),
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

    /// A tool environment whose helper is never reached.
    fn offline_env(scratch: &Scratch, client_fs: Option<Arc<dyn ClientFs>>) -> ToolEnv {
        ToolEnv::new(
            HelperClient::new(HelperEndpoint::Service(scratch.0.join("no-helper.sock"))),
            scratch.0.clone(),
            Vec::new(),
            Network::Deny,
            BackendChoice::Auto,
            client_fs,
        )
    }

    fn call(name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: "call-1".to_owned(),
            name: name.to_owned(),
            arguments: arguments.to_owned(),
        }
    }

    fn ctx(mode: Mode) -> CallContext {
        CallContext {
            mode,
            cancel: Cancel::never(),
            narrowings: NarrowingMark::default(),
        }
    }

    #[test]
    fn a_call_can_run_on_any_thread() {
        fn send<T: Send>(_: &T) {}
        let scratch = Scratch::new("tools-send");
        let env = offline_env(&scratch, None);
        let call = call("bash", "{}");
        send(&run(&env, &call, ctx(Mode::ReadOnly)));
        send(&env.background().kill_all());
    }

    #[tokio::test]
    async fn model_mistakes_fail_with_an_explanation() {
        let scratch = Scratch::new("tools-mistakes");
        let env = offline_env(&scratch, None);
        for (name, arguments, expected) in [
            ("rm", "{}", "unknown tool \"rm\""),
            ("bash", "{", "not valid JSON"),
            ("bash", r#"{"cmd":"ls"}"#, "unknown field \"cmd\""),
            ("read_file", r#"{"path":7}"#, "\"path\" must be a string"),
            (
                "bash_output",
                r#"{"task_id":"task-9"}"#,
                "no background task was started",
            ),
            (
                "bash_kill",
                r#"{"task_id":"task-9"}"#,
                "unknown task id \"task-9\"",
            ),
        ] {
            let result = within(run(&env, &call(name, arguments), ctx(Mode::ReadOnly))).await;
            assert_eq!(result.status, ToolStatus::Failed, "{name} {arguments}");
            assert!(result.text.contains(expected), "{name}: {}", result.text);
        }
    }

    #[tokio::test]
    async fn writes_are_refused_by_the_fence_or_left_to_the_helper() {
        let scratch = Scratch::new("tools-files");
        let env = offline_env(&scratch, None);
        let run = |name: &'static str, arguments: String, mode: Mode| {
            let env = &env;
            async move { within(run(env, &call(name, &arguments), ctx(mode))).await }
        };

        let denied = run(
            "write_file",
            json!({"path": "a.txt", "content": "x"}).to_string(),
            Mode::ReadOnly,
        )
        .await;
        assert_eq!(denied.status, ToolStatus::Failed);
        assert!(
            denied
                .text
                .ends_with("\n[sandbox: file write denied under read-only mode]"),
            "{}",
            denied.text
        );
        assert!(!scratch.0.join("a.txt").exists());

        // Writes that pass the fence go to confine-helper (tests/tools.rs runs them); without
        // one they fail, and nothing is written by agentd itself.
        let unconfined = run(
            "write_file",
            json!({"path": "dir/a.txt", "content": "x"}).to_string(),
            Mode::WorkspaceWrite,
        )
        .await;
        assert_eq!(unconfined.status, ToolStatus::Failed);
        assert!(
            unconfined.text.contains("cannot connect to confine-helper"),
            "{}",
            unconfined.text
        );
        assert!(!scratch.0.join("dir").exists());

        let outside = run(
            "write_file",
            json!({"path": "../escape.txt", "content": "x"}).to_string(),
            Mode::WorkspaceWrite,
        )
        .await;
        assert_eq!(outside.status, ToolStatus::Failed);
        assert!(
            outside.text.contains("outside the workspace"),
            "{}",
            outside.text
        );
        assert!(outside.text.ends_with(
            "[sandbox: file write outside the writable roots denied under \
                     workspace-write mode]"
        ));
        assert_eq!(outside.facts["denied"], true);
        assert_eq!(outside.facts["denials"], json!(["file-write"]));
    }

    /// An editor's file access over an in-memory map.
    #[derive(Default)]
    struct Buffers(Mutex<std::collections::HashMap<PathBuf, String>>);

    impl ClientFs for Buffers {
        fn read_text<'a>(&'a self, path: &'a Path) -> FsFuture<'a, String> {
            let text = self.0.lock().expect("buffers").get(path).cloned();
            Box::pin(async move { text.ok_or_else(|| "no such buffer".to_owned()) })
        }

        fn write_text<'a>(&'a self, path: &'a Path, content: &'a str) -> FsFuture<'a, ()> {
            self.0
                .lock()
                .expect("buffers")
                .insert(path.to_path_buf(), content.to_owned());
            Box::pin(async { Ok(()) })
        }
    }

    #[tokio::test]
    async fn the_editors_file_access_is_used_only_unconfined() {
        let scratch = Scratch::new("tools-clientfs");
        let buffers = Arc::new(Buffers::default());
        let env = offline_env(&scratch, Some(buffers.clone()));
        let path = env.workspace().join("unsaved.rs");
        buffers
            .0
            .lock()
            .expect("buffers")
            .insert(path.clone(), "fn main() {}\n".to_owned());

        let read = within(run(
            &env,
            &call("read_file", r#"{"path":"unsaved.rs"}"#),
            ctx(Mode::DangerFullAccess),
        ))
        .await;
        assert_eq!(read.text, "fn main() {}\n");

        let edited = within(run(
            &env,
            &call(
                "edit_file",
                r#"{"path":"unsaved.rs","old_string":"{}","new_string":"{ run() }"}"#,
            ),
            ctx(Mode::DangerFullAccess),
        ))
        .await;
        assert_eq!(edited.status, ToolStatus::Completed, "{}", edited.text);
        assert_eq!(
            buffers
                .0
                .lock()
                .expect("buffers")
                .get(&path)
                .map(String::as_str),
            Some("fn main() { run() }\n")
        );
        // Nothing touched the disk.
        assert!(!path.exists());

        // Confined, the editor is asked neither to read nor to write: it would read or write
        // wherever the path points when it does (its own /proc/self/environ, say). Both go to
        // the helper (absent here) instead.
        for (name, arguments) in [
            ("write_file", r#"{"path":"unsaved.rs","content":"x"}"#),
            ("read_file", r#"{"path":"unsaved.rs"}"#),
            ("read_file", r#"{"path":"/proc/self/environ"}"#),
        ] {
            let confined =
                within(run(&env, &call(name, arguments), ctx(Mode::WorkspaceWrite))).await;
            assert_eq!(confined.status, ToolStatus::Failed, "{name} {arguments}");
            assert!(
                confined.text.contains("confine-helper"),
                "{}",
                confined.text
            );
        }
        assert_eq!(
            buffers
                .0
                .lock()
                .expect("buffers")
                .get(&path)
                .map(String::as_str),
            Some("fn main() { run() }\n")
        );

        let denied = within(run(
            &env,
            &call("write_file", r#"{"path":".git/config","content":"x"}"#),
            ctx(Mode::WorkspaceWrite),
        ))
        .await;
        assert_eq!(denied.status, ToolStatus::Failed);
        assert!(denied.text.contains("stays read-only"), "{}", denied.text);
        assert_eq!(buffers.0.lock().expect("buffers").len(), 1);
    }
}

#[cfg(test)]
mod escalation_tests {
    use confine_protocol::{BackendChoice, Network};

    use super::*;
    use crate::helper_client::HelperClient;

    fn bash_call(arguments: &str) -> ToolCall {
        ToolCall {
            id: "c1".into(),
            name: BASH.into(),
            arguments: arguments.into(),
        }
    }

    fn parse(arguments: &str, escalation: bool) -> Result<Option<Escalation>, String> {
        let options = if escalation {
            SpecOptions::confining()
        } else {
            SpecOptions::default()
        };
        match args::parse(BASH, arguments, &options)? {
            args::Call::Bash(args) => Ok(args.escalation),
            other => panic!("not bash: {other:?}"),
        }
    }

    #[test]
    fn the_escalation_fields_exist_only_when_the_executor_confines() {
        let with = spec_with(BASH, &SpecOptions::confining()).expect("bash");
        let props = &with.parameters["properties"];
        assert_eq!(
            props["sandbox_permissions"]["enum"],
            json!(["workspace-write", "danger-full-access"])
        );
        assert!(props.get("justification").is_some());
        assert!(with.description.contains("Sandbox escalation"));
        let without = spec_with(BASH, &SpecOptions::default()).expect("bash");
        assert!(
            without.parameters["properties"]
                .get("sandbox_permissions")
                .is_none()
        );
        assert!(
            without.parameters["properties"]
                .get("justification")
                .is_none()
        );
        assert!(!without.description.contains("escalat"));
    }

    #[test]
    fn escalation_fields_are_validated_with_the_specified_texts() {
        let only_mode = r#"{"command":"x","sandbox_permissions":"workspace-write"}"#;
        assert_eq!(
            parse(only_mode, true).unwrap_err(),
            "invalid escalation: sandbox_permissions requires a justification"
        );
        let only_why = r#"{"command":"x","justification":"because"}"#;
        assert_eq!(
            parse(only_why, true).unwrap_err(),
            "invalid escalation: justification is only valid together with sandbox_permissions"
        );
        let blank =
            r#"{"command":"x","sandbox_permissions":"workspace-write","justification":"  "}"#;
        assert_eq!(
            parse(blank, true).unwrap_err(),
            "invalid justification: expected a non-empty sentence"
        );
        let bad_mode = r#"{"command":"x","sandbox_permissions":"root","justification":"j"}"#;
        assert!(
            parse(bad_mode, true)
                .unwrap_err()
                .contains("must be one of")
        );
        let good = r#"{"command":"x","sandbox_permissions":"danger-full-access","justification":" to install "}"#;
        assert_eq!(
            parse(good, true).expect("valid"),
            Some(Escalation {
                mode: Mode::DangerFullAccess,
                justification: "to install".into()
            })
        );
        assert_eq!(parse(r#"{"command":"x"}"#, true).expect("plain"), None);
    }

    #[test]
    fn escalation_not_offered_is_refused_with_its_own_text() {
        let asked =
            r#"{"command":"x","sandbox_permissions":"workspace-write","justification":"j"}"#;
        assert_eq!(parse(asked, false).unwrap_err(), ESCALATION_NOT_OFFERED);
        assert_eq!(
            parse(r#"{"command":"x","justification":"j"}"#, false).unwrap_err(),
            ESCALATION_NOT_OFFERED
        );
    }

    #[test]
    fn escalation_must_strictly_widen_the_effective_mode() {
        use Mode::*;
        assert!(strictly_widens(WorkspaceWrite, ReadOnly).is_ok());
        assert!(strictly_widens(DangerFullAccess, ReadOnly).is_ok());
        assert!(strictly_widens(DangerFullAccess, WorkspaceWrite).is_ok());
        assert_eq!(
            strictly_widens(WorkspaceWrite, WorkspaceWrite).unwrap_err(),
            "sandbox escalation to \"workspace-write\" is not strictly wider than this call's current \"workspace-write\" mode"
        );
        assert!(strictly_widens(WorkspaceWrite, DangerFullAccess).is_err());
    }

    #[test]
    fn the_gate_checks_in_order_and_each_failure_has_its_text() {
        let open = GateContext {
            offered: true,
            effective: Mode::ReadOnly,
            refusal: None,
            approval_service: true,
            agent: true,
        };
        assert_eq!(escalation_gate(Mode::WorkspaceWrite, &open), Ok(()));
        let closed = GateContext {
            offered: false,
            ..open.clone()
        };
        assert_eq!(
            escalation_gate(Mode::WorkspaceWrite, &closed).unwrap_err(),
            ESCALATION_NOT_OFFERED
        );
        let narrow = GateContext {
            effective: Mode::WorkspaceWrite,
            approval_service: false,
            ..open.clone()
        };
        assert!(
            escalation_gate(Mode::WorkspaceWrite, &narrow)
                .unwrap_err()
                .contains("is not strictly wider"),
            "widening is checked before the approval service"
        );
        let ungranted = GateContext {
            refusal: Some("its ceiling allows at most read-only".into()),
            approval_service: false,
            ..open.clone()
        };
        assert_eq!(
            escalation_gate(Mode::WorkspaceWrite, &ungranted).unwrap_err(),
            "sandbox escalation to \"workspace-write\" cannot be granted: its ceiling allows at \
             most read-only",
            "the grant is checked before the approval service: nobody is asked for a dead lever"
        );
        let no_service = GateContext {
            approval_service: false,
            ..open.clone()
        };
        assert_eq!(
            escalation_gate(Mode::DangerFullAccess, &no_service).unwrap_err(),
            "sandbox escalation to \"danger-full-access\" requires approval, but no approval service is composed"
        );
        let no_agent = GateContext {
            agent: false,
            ..open
        };
        assert_eq!(
            escalation_gate(Mode::WorkspaceWrite, &no_agent).unwrap_err(),
            "sandbox escalation to \"workspace-write\" requires approval, but the call has no agent to route it through"
        );
    }

    #[test]
    fn requested_escalation_ignores_other_tools_and_reports_bad_requests() {
        let client = HelperClient::new(crate::helper_client::HelperEndpoint::Embedded(
            "/nonexistent/confine-helper".into(),
        ));
        let env = ToolEnv::new(
            client,
            std::env::temp_dir(),
            Vec::new(),
            Network::Deny,
            BackendChoice::Auto,
            None,
        )
        .with_spec_options(SpecOptions::confining());
        let read = ToolCall {
            id: "r".into(),
            name: "read_file".into(),
            arguments: r#"{"path":"a"}"#.into(),
        };
        assert_eq!(requested_escalation(&env, &read), Ok(None));
        let asked = bash_call(
            r#"{"command":"touch f","sandbox_permissions":"workspace-write","justification":"write f"}"#,
        );
        assert_eq!(
            requested_escalation(&env, &asked)
                .expect("valid")
                .map(|e| e.mode),
            Some(Mode::WorkspaceWrite)
        );
        let malformed = bash_call(r#"{"command":"x","justification":"j"}"#);
        assert!(requested_escalation(&env, &malformed).is_err());
    }
}
