//! The tools a model calls: `bash` (with `bash_output` and `bash_kill` for background
//! commands), `read_file`, `write_file` and `edit_file`, and those of the session's MCP servers
//! (`mcp__<server>__<tool>`, see [`start_mcp`]).
//!
//! The agent loop offers the model the tools of [`offered`], announces each call with
//! [`describe`] before running it, runs it with [`run`] (or [`run_scoped`]) and reports the
//! [`ToolResult`]: the text the model reads and the facts for the editor. A session keeps one
//! [`ToolEnv`] for all its calls, with the session's [`ToolRegistry`]; each call comes with a
//! [`CallContext`]: the sandbox mode in effect for it, the turn's cancel, and where a foreground
//! command's output goes as it arrives for the editor's live view ([`LiveOutput`]).
//!
//! Which tools an agent has is decided in one place, [`ToolScope::resolve`] over the registry:
//! [`offered`] gives the schemas of those tools and [`run_scoped`] refuses a call of any other
//! one before anything runs. The top-level agent's scope is [`ToolScope::top`], which has every
//! registered tool.
//!
//! # Where the confinement is
//!
//! Every command `bash` runs goes through confine-helper ([`crate::helper_client`]) and is
//! confined by the kernel under the call's mode; agentd never runs one itself.
//!
//! The file tools go through it too: confine-helper runs its own reader or writer as a command
//! under the same plan ([`HelperClient::read_file`], [`HelperClient::write_file`]), so the
//! kernel decides what a read may see and where a write may land, exactly as for a command of
//! that mode. Before a write, a fence in trusted code (`files::fence::check_write`) refuses with a
//! clear sentence what the sandbox would refuse anyway: nothing in read-only; outside the
//! workspace or into git metadata in workspace-write.
//!
//! Nothing a model sends makes a tool panic: an unknown tool, malformed JSON, missing or
//! mistyped fields all give a [`ToolStatus::Failed`] result saying what was wrong and the shape
//! expected.
//!
//! [`HelperClient::read_file`]: crate::helper_client::HelperClient::read_file
//! [`HelperClient::write_file`]: crate::helper_client::HelperClient::write_file
//! [`ToolStatus::Failed`]: crate::session::ToolStatus::Failed
//! [`describe`]: fn@describe

mod args;
mod background;
mod bash;
mod call;
mod describe;
mod env;
mod escalation;
mod files;
mod filter;
mod live;
mod mcp;
mod output;
pub mod plan;
mod registry;
mod spec;
mod tasks;

use confine_protocol::Mode;
use serde_json::json;

use crate::model::{ToolCall, ToolSpec};

pub use args::{ArgsError, ESCALATION_NOT_OFFERED, Escalation, Problem};
pub use bash::ANSWER_WAIT;
pub use call::{CallContext, TaskOwner, ToolResult};
pub use describe::{ToolDescription, ToolKind, describe};
pub use env::{ClientFs, ClientFsError, FsFuture, ToolEnv};
pub use escalation::{
    GateContext, GateError, escalation_gate, requested_escalation, strictly_widens,
};
pub(crate) use files::read_context;
pub use files::{MAX_TEXT_FILE, PROTECTED};
pub use filter::{FilterError, FilterList, NotOffered, ToolFilter, ToolScope};
pub use live::{LIVE_OUTPUT_CAP, LiveOutput};
pub use mcp::{SHOWN_CONTENT, start_mcp};
pub use output::{
    BACKGROUND_OUTPUT_CAP, ESCALATION_HINT_PREFIX, MODEL_OUTPUT_CAP, denial_marker, denied_access,
    exit_marker, truncation_marker,
};
pub use registry::{
    Admission, RESERVED, RegistryError, TASK, ToolRegistry, ToolSet, UPDATE_PLAN, is_tool_name,
    reserved_because,
};
pub use spec::{
    BASH, BASH_KILL, BASH_OUTPUT, DEFAULT_TIMEOUT_MS, EDIT_FILE, MAX_TIMEOUT_MS, NAMES, READ_CAP,
    READ_FILE, SpecOptions, WRITE_FILE, spec_with,
};
pub use tasks::{BackgroundTasks, NarrowingMark, Stopped, Stopping};

/// The schemas of the tools an agent in `scope` has, as offered to a call whose session runs
/// under `effective` (escalation only to the modes the helper grants above it), in the
/// registry's order. A registered tool without a schema in [`spec_with`] or from its MCP
/// server is not offered.
pub fn offered(env: &ToolEnv, scope: &ToolScope, effective: Mode) -> Vec<ToolSpec> {
    let options = env.options_for(effective);
    scope
        .resolve(&env.registry())
        .names()
        .filter_map(|name| spec_with(name, &options).or_else(|| mcp::spec(env, name)))
        .collect()
}

/// The schemas of the tools an agent in `scope` has, without escalation: `bash` has no
/// `sandbox_permissions`. What a child agent is offered; it may not escalate (RFC 0007).
pub fn offered_confined(env: &ToolEnv, scope: &ToolScope) -> Vec<ToolSpec> {
    let options = SpecOptions::default();
    scope
        .resolve(&env.registry())
        .names()
        .filter_map(|name| spec_with(name, &options).or_else(|| mcp::spec(env, name)))
        .collect()
}

/// Runs one call of the top-level agent, which has every registered tool. Never panics on what
/// the model sent; see the module documentation.
pub async fn run(env: &ToolEnv, call: &ToolCall, ctx: CallContext) -> ToolResult {
    run_scoped(env, &ToolScope::top(), call, ctx).await
}

/// Runs one call of an agent in `scope`: a tool the scope does not have is refused before
/// anything runs, with the text of [`NotOffered`].
pub async fn run_scoped(
    env: &ToolEnv,
    scope: &ToolScope,
    call: &ToolCall,
    ctx: CallContext,
) -> ToolResult {
    if let Err(refused) = scope.admit(&env.registry(), &call.name) {
        return ToolResult::failed(
            refused.to_string(),
            json!({ "mode": ctx.mode.as_str(), "invalid_call": true }),
        );
    }
    if mcp::is_mcp_tool(env, &call.name) {
        return mcp::run(env, call, ctx).await;
    }
    let parsed = match args::parse(&call.name, &call.arguments, env.spec_options()) {
        Ok(parsed) => parsed,
        Err(e) => {
            return ToolResult::failed(
                e.to_string(),
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

    use confine_protocol::{BackendChoice, Mode, Network};

    use super::*;
    use crate::cancel::Cancel;
    use crate::helper_client::{HelperClient, HelperEndpoint};
    use crate::session::ToolStatus;
    use crate::test_support::{Scratch, within};

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
            live: None,
            owner: None,
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
    async fn the_offered_schemas_and_the_admitted_calls_come_from_one_scope() {
        let scratch = Scratch::new("tools-scope");
        let env = offline_env(&scratch, None).with_spec_options(SpecOptions::confining());
        let names = |specs: Vec<ToolSpec>| -> Vec<String> {
            specs.into_iter().map(|spec| spec.name).collect()
        };
        // The top level is offered every tool, with the schemas spec.rs gives them.
        let top = offered(&env, &ToolScope::top(), Mode::WorkspaceWrite);
        let expected: Vec<ToolSpec> = NAMES
            .iter()
            .filter_map(|name| spec_with(name, &env.options_for(Mode::WorkspaceWrite)))
            .collect();
        assert_eq!(top, expected);

        let deny =
            ToolFilter::new(None, Some(vec![BASH.to_owned()]), &env.registry()).expect("a filter");
        let child = ToolScope::top().child(Some(&deny), false);
        let offered_names = names(offered(&env, &child, Mode::WorkspaceWrite));
        assert!(
            !offered_names.iter().any(|n| n == BASH),
            "{offered_names:?}"
        );
        assert_eq!(offered_names.len(), NAMES.len() - 1);

        // Refused before anything runs: no helper is reached (there is none here).
        let refused = within(run_scoped(
            &env,
            &child,
            &call(BASH, r#"{"command":"true"}"#),
            ctx(Mode::WorkspaceWrite),
        ))
        .await;
        assert_eq!(refused.status, ToolStatus::Failed);
        assert_eq!(
            refused.text,
            "the tool \"bash\" is not available to this agent; its tools are: bash_output, \
             bash_kill, read_file, write_file, edit_file"
        );
        assert_eq!(refused.facts["invalid_call"], true);
        // The same call at the top level is admitted and goes to the (absent) helper.
        let admitted = within(run(
            &env,
            &call(BASH, r#"{"command":"true"}"#),
            ctx(Mode::WorkspaceWrite),
        ))
        .await;
        assert!(
            admitted.text.contains("confine-helper"),
            "{}",
            admitted.text
        );
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
            Box::pin(async move {
                text.ok_or_else(|| ClientFsError::Read {
                    path: path.to_owned(),
                    source: "no such buffer".into(),
                })
            })
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
