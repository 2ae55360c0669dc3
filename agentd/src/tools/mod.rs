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
//! The file tools go through it too: confine-helper runs the file reader or writer as a command
//! under the same plan ([`HelperClient::read_file`], [`HelperClient::write_file`]), so the
//! kernel decides what a read may see and where a write may land, exactly as for a command of
//! that mode; the one exception is a read through the editor where no denied read could apply
//! (`files::editor_may_read`), and nothing is ever written through it. Before a write, a fence
//! in trusted code (`files::fence::check_write`) refuses with a clear sentence what the sandbox
//! would refuse anyway: nothing in read-only; outside the workspace or into git metadata in
//! workspace-write. A write a person is asked about is computed first ([`propose`]) and then
//! written exactly as shown ([`run_proposed`]).
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

pub use args::{ArgsError, Escalation};
pub use call::{CallContext, TaskOwner, ToolResult};
pub use describe::{ToolDescription, describe};
pub use env::{ClientFs, ClientFsError, FsFuture, ToolEnv};
pub use escalation::{GateContext, escalation_gate, requested_escalation};
pub(crate) use files::read_context;
pub use files::{Proposal, Unread};
pub use filter::{FilterError, FilterList, ToolFilter, ToolScope};
#[cfg(test)]
pub(crate) use live::LIVE_OUTPUT_CAP;
pub use live::LiveOutput;
pub use mcp::{SHOWN_CONTENT, start_mcp};
pub use output::{ESCALATION_HINT_PREFIX, denied_access};
pub use registry::{TASK, ToolRegistry, UPDATE_PLAN, is_tool_name};
pub use spec::{BASH, NAMES, SpecOptions, spec_with};
pub use tasks::{NarrowingMark, Stopping};

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

/// The change a `write_file` or `edit_file` call of the top-level agent would make under
/// `mode`, computed without writing anything, for a person to approve: `None` for any other
/// call and for one [`run`] would refuse anyway (its tool not registered, its arguments
/// malformed); `Some(Err)` is the result the call answers instead (the fence refused the path,
/// the file cannot be read, the edit does not apply). Give the proposal to [`run_proposed`] so
/// the write writes exactly what was shown.
pub async fn propose(
    env: &ToolEnv,
    call: &ToolCall,
    mode: Mode,
) -> Option<Result<Proposal, ToolResult>> {
    if ToolScope::top().admit(&env.registry(), &call.name).is_err() {
        return None;
    }
    match args::parse(&call.name, &call.arguments, env.spec_options()).ok()? {
        args::Call::WriteFile(args) => Some(files::propose_write(env, args, mode).await),
        args::Call::EditFile(args) => Some(files::propose_edit(env, args, mode).await),
        _ => None,
    }
}

/// Writes what [`propose`] proposed (and a person was shown), under the call's mode: exactly
/// that text to that file, or nothing.
pub async fn run_proposed(env: &ToolEnv, proposal: Proposal, ctx: CallContext) -> ToolResult {
    files::commit(env, proposal, ctx.mode).await
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

    use confine_protocol::Mode;

    use super::*;
    use crate::cancel::Cancel;
    use crate::session::ToolStatus;
    use crate::test_support::{Scratch, within};

    /// A tool environment whose helper is never reached.
    fn offline_env(scratch: &Scratch, client_fs: Option<Arc<dyn ClientFs>>) -> ToolEnv {
        crate::test_support::offline_tools(scratch, scratch.0.clone(), client_fs)
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

        // Writes that pass the fence go to confine-helper as a run of confine-file-io
        // (tests/tools.rs runs them); without the program (none is beside this test binary) they
        // fail before anything is sent, and nothing is written by agentd itself.
        let unconfined = run(
            "write_file",
            json!({"path": "dir/a.txt", "content": "x"}).to_string(),
            Mode::WorkspaceWrite,
        )
        .await;
        assert_eq!(unconfined.status, ToolStatus::Failed);
        assert!(
            unconfined.text.contains("confine-file-io")
                && unconfined.text.contains("was not found"),
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

    /// An editor's file reads over an in-memory map, noting every path asked for.
    #[derive(Default)]
    struct Buffers {
        texts: Mutex<std::collections::HashMap<PathBuf, String>>,
        asked: Mutex<Vec<PathBuf>>,
    }

    impl ClientFs for Buffers {
        fn read_text<'a>(&'a self, path: &'a Path) -> FsFuture<'a, String> {
            self.asked.lock().expect("asked").push(path.to_path_buf());
            let text = self.texts.lock().expect("buffers").get(path).cloned();
            Box::pin(async move {
                text.ok_or_else(|| ClientFsError::Read {
                    path: path.to_owned(),
                    source: "no such buffer".into(),
                })
            })
        }
    }

    impl Buffers {
        fn asked(&self) -> usize {
            self.asked.lock().expect("asked").len()
        }
    }

    /// Runs `read_file` with `arguments` under `mode` through `env`.
    async fn read(env: &ToolEnv, arguments: &str, mode: Mode) -> ToolResult {
        within(run(env, &call("read_file", arguments), ctx(mode))).await
    }

    /// Reads `unsaved.rs` under `mode` and checks the helper was asked (absent here), not
    /// the editor, which has been asked `asked` times in all.
    async fn read_confined(env: &ToolEnv, mode: Mode, buffers: &Buffers, asked: usize) {
        let confined = read(env, r#"{"path":"unsaved.rs"}"#, mode).await;
        assert!(
            confined.text.contains("confine-helper"),
            "{}",
            confined.text
        );
        assert_eq!(buffers.asked(), asked);
    }

    #[tokio::test]
    async fn the_editor_reads_only_where_no_denied_read_could_apply_and_never_writes() {
        let scratch = Scratch::new("tools-clientfs");
        let buffers = Arc::new(Buffers::default());
        let env = offline_env(&scratch, Some(buffers.clone()));
        let path = env.workspace().join("unsaved.rs");
        std::fs::write(&path, "on disk\n").expect("write");
        std::os::unix::fs::symlink(&path, env.workspace().join("link.rs")).expect("symlink");
        std::fs::create_dir(env.workspace().join("src")).expect("mkdir");
        buffers
            .texts
            .lock()
            .expect("buffers")
            .insert(path.clone(), "fn main() {}\n".to_owned());

        the_editor_answers_where_nothing_can_swap_the_path(&env, &buffers).await;
        confined_paths_go_to_the_helper(&env, &buffers).await;
        the_hosts_processes_are_never_read_by_the_editor(&scratch, &buffers).await;
        denied_reads_keep_the_editor_out(&scratch, &env, &buffers).await;
        writes_go_to_the_helper_in_every_mode(&env, &path).await;
    }

    /// Reads of `unsaved.rs` in each mode: which the editor answers.
    async fn the_editor_answers_where_nothing_can_swap_the_path(env: &ToolEnv, buffers: &Buffers) {
        // No denied read, a path inside the workspace: the editor answers where no command of the
        // session can swap the path (read-only) or nothing is hidden (danger-full-access).
        for mode in [Mode::ReadOnly, Mode::DangerFullAccess] {
            let shown = read(env, r#"{"path":"unsaved.rs"}"#, mode).await;
            assert_eq!(shown.text, "fn main() {}\n", "{mode:?}");
            assert_eq!(shown.facts["read_by"], "editor");
        }
        assert_eq!(buffers.asked(), 2);
        // In workspace-write a command could swap it for a link after any check: confined.
        read_confined(env, Mode::WorkspaceWrite, buffers, 2).await;
    }

    /// Reads, in workspace-write, of paths whose target the editor cannot be trusted with.
    async fn confined_paths_go_to_the_helper(env: &ToolEnv, buffers: &Buffers) {
        // Confined, a `..`, a link or a path outside the workspace goes to the helper (absent
        // here) instead: the editor reads wherever the path points when it gets there (its own
        // /proc/self/environ, say).
        for arguments in [
            r#"{"path":"src/../unsaved.rs"}"#,
            r#"{"path":"link.rs"}"#,
            r#"{"path":"/proc/self/environ"}"#,
            r#"{"path":"missing.rs"}"#,
        ] {
            let confined = read(env, arguments, Mode::WorkspaceWrite).await;
            assert_eq!(confined.status, ToolStatus::Failed, "{arguments}");
            assert!(
                confined.text.contains("confine-helper"),
                "{}",
                confined.text
            );
        }
        assert_eq!(buffers.asked(), 2, "the editor was not asked");
    }

    /// Reads of agentd's own environment in a session opened at `/`.
    async fn the_hosts_processes_are_never_read_by_the_editor(
        scratch: &Scratch,
        buffers: &Arc<Buffers>,
    ) {
        // A session opened at `/` has `/proc` in its workspace, but no confined command sees
        // the host's processes (agentd's own environment among them): never the editor there.
        let at_root =
            crate::test_support::offline_tools(scratch, PathBuf::from("/"), Some(buffers.clone()));
        let environ = format!("/proc/{}/environ", std::process::id());
        buffers
            .texts
            .lock()
            .expect("buffers")
            .insert(PathBuf::from(&environ), "KEY=secret".to_owned());
        let arguments = json!({ "path": environ }).to_string();
        let hidden = read(&at_root, &arguments, Mode::ReadOnly).await;
        assert!(hidden.text.contains("confine-helper"), "{}", hidden.text);
        assert_eq!(buffers.asked(), 2);
        // The control: in danger-full-access a command could read it too, and the editor does.
        let unconfined = read(&at_root, &arguments, Mode::DangerFullAccess).await;
        assert_eq!(unconfined.text, "KEY=secret");
        assert_eq!(buffers.asked(), 3);
    }

    /// Reads in sessions with denied reads: `deny_read` entries, and the built-in credential
    /// stores.
    async fn denied_reads_keep_the_editor_out(
        scratch: &Scratch,
        env: &ToolEnv,
        buffers: &Arc<Buffers>,
    ) {
        // A session that denies any read never asks the editor in a confined mode.
        let profile = crate::profile::SandboxProfile {
            deny_read: vec![crate::deny_read::parse("**/.env", None).expect("entry")],
            ..Default::default()
        };
        let denying = offline_env(scratch, Some(buffers.clone())).with_profile(profile);
        let confined = read(&denying, r#"{"path":"unsaved.rs"}"#, Mode::ReadOnly).await;
        assert!(
            confined.text.contains("confine-helper"),
            "{}",
            confined.text
        );
        assert_eq!(buffers.asked(), 3);
        let unconfined = read(&denying, r#"{"path":"unsaved.rs"}"#, Mode::DangerFullAccess).await;
        assert_eq!(
            unconfined.text, "fn main() {}\n",
            "the control: nothing is denied there"
        );

        // The built-in credential stores: a workspace that is the home directory, holding
        // ~/.ssh/id_ed25519, has a denied path inside it: confined. A project directory of a
        // user with the same key holds none: the editor answers.
        std::fs::create_dir(env.workspace().join(".ssh")).expect("mkdir");
        std::fs::write(env.workspace().join(".ssh/id_ed25519"), "key").expect("key");
        let of_home = |home: &Path| crate::profile::SandboxProfile {
            credentials: crate::credentials::resolve(home, &[]),
            ..Default::default()
        };
        let at_home =
            offline_env(scratch, Some(buffers.clone())).with_profile(of_home(env.workspace()));
        read_confined(&at_home, Mode::ReadOnly, buffers, 4).await;
        let home = Scratch::new("tools-clientfs-home");
        std::fs::create_dir(home.0.join(".ssh")).expect("mkdir");
        std::fs::write(home.0.join(".ssh/id_ed25519"), "key").expect("key");
        let project = offline_env(scratch, Some(buffers.clone())).with_profile(of_home(&home.0));
        let shown = read(&project, r#"{"path":"unsaved.rs"}"#, Mode::ReadOnly).await;
        assert_eq!(shown.text, "fn main() {}\n");
        assert_eq!(buffers.asked(), 5);
        std::fs::remove_dir_all(env.workspace().join(".ssh")).expect("rm");
    }

    /// Writes, the file at `path` holding the editor's buffer on disk.
    async fn writes_go_to_the_helper_in_every_mode(env: &ToolEnv, path: &Path) {
        // Writes go to the helper's writer in every mode, danger-full-access too: the editor is
        // never asked, and its buffer stays as it was.
        for mode in [Mode::WorkspaceWrite, Mode::DangerFullAccess] {
            let written = within(run(
                env,
                &call("write_file", r#"{"path":"unsaved.rs","content":"x"}"#),
                ctx(mode),
            ))
            .await;
            assert_eq!(written.status, ToolStatus::Failed, "{mode:?}");
            assert!(written.text.contains("confine-helper"), "{}", written.text);
        }
        assert_eq!(std::fs::read_to_string(path).expect("read"), "on disk\n");

        let denied = within(run(
            env,
            &call("write_file", r#"{"path":".git/config","content":"x"}"#),
            ctx(Mode::WorkspaceWrite),
        ))
        .await;
        assert_eq!(denied.status, ToolStatus::Failed);
        assert!(denied.text.contains("stays read-only"), "{}", denied.text);
    }

    #[tokio::test]
    async fn what_comes_from_the_editor_is_read_in_the_same_window() {
        let scratch = Scratch::new("tools-clientfs-window");
        let buffers = Arc::new(Buffers::default());
        let env = offline_env(&scratch, Some(buffers.clone()));
        let path = env.workspace().join("long.txt");
        std::fs::write(&path, "short on disk\n").expect("write");
        let long: String = (1..=2003).map(|n| format!("{n}\n")).collect();
        buffers.texts.lock().expect("buffers").insert(path, long);
        let first = within(run(
            &env,
            &call("read_file", r#"{"path":"long.txt"}"#),
            ctx(Mode::ReadOnly),
        ))
        .await;
        assert_eq!(first.facts["read_by"], "editor");
        assert!(
            first
                .text
                .ends_with("2000\n[showed lines 1-2000 of 2003; read on with offset=2001]"),
            "{}",
            &first.text[first.text.len() - 80..]
        );
        let rest = within(run(
            &env,
            &call("read_file", r#"{"path":"long.txt","offset":2001}"#),
            ctx(Mode::ReadOnly),
        ))
        .await;
        assert_eq!(rest.text, "2001\n2002\n2003\n");
    }

    #[tokio::test]
    async fn a_write_is_proposed_before_anything_is_written_at_its_real_path() {
        let scratch = Scratch::new("tools-propose");
        let env = offline_env(&scratch, None);
        let ws = env.workspace().to_path_buf();
        std::fs::create_dir_all(ws.join("real/sub")).expect("mkdir");
        std::os::unix::fs::symlink(ws.join("real"), ws.join("link")).expect("symlink");
        let propose = |arguments: &str| {
            let call = call("write_file", arguments);
            let env = &env;
            async move { within(super::propose(env, &call, Mode::WorkspaceWrite)).await }
        };
        let plain = propose(r#"{"path":"new.txt","content":"hi\n"}"#)
            .await
            .expect("a write")
            .expect("proposed");
        assert_eq!(plain.target(), ws.join("new.txt"));
        assert_eq!(plain.lands_elsewhere(), None);
        assert_eq!(
            plain.diff(),
            crate::session::LoggedDiff::of(
                &ws.join("new.txt"),
                crate::session::Before::Created,
                "hi\n"
            )
        );
        for (given, lands) in [
            ("real/sub/../new.txt", ws.join("real/new.txt")),
            ("link/new.txt", ws.join("real/new.txt")),
            ("./link/sub/../../new.txt", ws.join("new.txt")),
        ] {
            let arguments = json!({"path": given, "content": "x"}).to_string();
            let proposal = propose(&arguments)
                .await
                .expect("a write")
                .expect("proposed");
            assert_eq!(proposal.target(), lands, "{given}");
            assert_eq!(proposal.lands_elsewhere(), Some(lands.as_path()), "{given}");
        }
        assert!(!ws.join("new.txt").exists(), "nothing was written");
        // Git metadata stays read-only under workspace-write, also when a call escalates to it:
        // the proposal is refused before anyone could be asked.
        let protected = propose(r#"{"path":".git/config","content":"x"}"#)
            .await
            .expect("a write")
            .expect_err("refused");
        assert!(
            protected.text.contains("stays read-only"),
            "{}",
            protected.text
        );
        let read = within(super::propose(
            &env,
            &call("read_file", r#"{"path":"new.txt"}"#),
            Mode::WorkspaceWrite,
        ))
        .await;
        assert!(read.is_none(), "only writes are proposed");
    }

    #[tokio::test]
    async fn a_proposal_whose_path_now_resolves_elsewhere_writes_nothing() {
        let scratch = Scratch::new("tools-proposal-swapped");
        let env = offline_env(&scratch, None);
        let ws = env.workspace().to_path_buf();
        std::fs::create_dir_all(ws.join("shown")).expect("mkdir");
        std::fs::create_dir_all(ws.join("other")).expect("mkdir");
        std::os::unix::fs::symlink(ws.join("shown"), ws.join("dir")).expect("symlink");
        let call = call("write_file", r#"{"path":"dir/notes.txt","content":"x"}"#);
        let propose = || within(super::propose(&env, &call, Mode::WorkspaceWrite));
        let proposal = propose().await.expect("a write").expect("proposed");
        assert_eq!(proposal.target(), ws.join("shown/notes.txt"));
        // The control: not swapped, the write goes on to the helper (absent here).
        let unswapped = within(run_proposed(
            &env,
            proposal.clone(),
            ctx(Mode::WorkspaceWrite),
        ))
        .await;
        assert!(
            unswapped.text.contains("confine-helper"),
            "{}",
            unswapped.text
        );
        // A command swaps the link for one to another directory while the person is asked.
        std::fs::remove_file(ws.join("dir")).expect("unlink");
        std::os::unix::fs::symlink(ws.join("other"), ws.join("dir")).expect("symlink");
        let swapped = within(run_proposed(&env, proposal, ctx(Mode::WorkspaceWrite))).await;
        assert_eq!(swapped.status, ToolStatus::Failed);
        assert!(
            swapped.text.contains("now resolves to")
                && swapped.text.contains("nothing was written"),
            "{}",
            swapped.text
        );
        assert!(!ws.join("other/notes.txt").exists());
        assert!(!ws.join("shown/notes.txt").exists());
    }
}
