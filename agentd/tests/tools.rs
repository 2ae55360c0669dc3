//! The tools against the real confine-helper: denials, writes, timeouts, background tasks,
//! cancels and runner failures as a model would see them.
//!
//! The helper is the `confine-helper` binary next to this test's target directory
//! (`target/<profile>/confine-helper`); `cargo test --workspace` builds it, `cargo test -p
//! agentd` alone does not (build it once with `cargo build --workspace`). The confined modes
//! need a working backend (bubblewrap or Landlock). Where a test has to wait for a command to
//! reach some point, the command says so through a FIFO: nothing here sleeps to synchronise.

#[path = "../../tests/shared/available.rs"]
mod available;
#[path = "../../tests/shared/skip.rs"]
mod skip;

mod tools {
    use super::available;
    use super::skip::{self, Need};
    use std::ffi::OsString;
    use std::io::{Read, Write};
    use std::path::{Path, PathBuf};
    use std::time::Duration;

    use agentd::api::cancel::{self, Cancel};
    use agentd::api::environment;
    use agentd::api::helper_client::{HelperClient, HelperEndpoint};
    use agentd::api::model::ToolCall;
    use agentd::api::session::ToolStatus;
    use agentd::api::tools::{CallContext, ToolEnv, ToolResult, run};
    use confine_protocol::{BackendChoice, Mode, Network};
    use serde_json::json;

    /// `target/<profile>/confine-helper`, from this test's `target/<profile>/deps/tools-…`.
    fn helper_binary() -> PathBuf {
        let exe = std::env::current_exe().expect("current_exe");
        let dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("target directory");
        let helper = dir.join("confine-helper");
        assert!(
            helper.is_file(),
            "{} is missing: build it with `cargo build --workspace` (cargo test --workspace \
             builds it)",
            helper.display()
        );
        helper
    }

    /// A workspace directory removed when dropped.
    struct Workspace(PathBuf);

    impl Workspace {
        fn new(name: &str) -> Workspace {
            let dir =
                std::env::temp_dir().join(format!("agentd-tools-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("create workspace");
            Workspace(dir.canonicalize().expect("canonical workspace"))
        }

        fn fifo(&self, name: &str) -> PathBuf {
            let path = self.0.join(name);
            nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600))
                .expect("mkfifo");
            path
        }
    }

    impl Drop for Workspace {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn env_with(workspace: &Workspace, backend: BackendChoice) -> ToolEnv {
        let client = HelperClient::new(HelperEndpoint::Embedded(helper_binary()));
        let vars: Vec<(OsString, OsString)> =
            environment::command_environment(std::env::vars_os(), &[]);
        ToolEnv::new(
            client,
            workspace.0.clone(),
            vars,
            Network::Deny,
            backend,
            None,
        )
    }

    fn env(workspace: &Workspace) -> ToolEnv {
        env_with(workspace, BackendChoice::Auto)
    }

    fn call(name: &str, arguments: serde_json::Value) -> ToolCall {
        ToolCall {
            id: "call-1".to_owned(),
            name: name.to_owned(),
            arguments: arguments.to_string(),
        }
    }

    fn ctx(mode: Mode) -> CallContext {
        CallContext {
            mode,
            cancel: Cancel::never(),
            narrowings: Default::default(),
            live: None,
            owner: None,
        }
    }

    /// Fails a test that would otherwise hang.
    async fn within<F: std::future::Future>(future: F) -> F::Output {
        tokio::time::timeout(Duration::from_secs(30), future)
            .await
            .expect("the test finished in time")
    }

    async fn bash(env: &ToolEnv, mode: Mode, arguments: serde_json::Value) -> ToolResult {
        within(run(env, &call("bash", arguments), ctx(mode))).await
    }

    fn last_line(text: &str) -> &str {
        text.lines().last().unwrap_or_default()
    }

    /// Writes `text` into the FIFO at `path` from a thread (opening blocks until a reader
    /// comes) and tells when done.
    fn feed(path: PathBuf, text: &'static str) -> tokio::sync::oneshot::Receiver<()> {
        let (done, wait) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            let mut fifo = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .expect("open fifo for writing");
            fifo.write_all(text.as_bytes()).expect("write fifo");
            drop(fifo);
            let _ = done.send(());
        });
        wait
    }

    /// Reads the FIFO at `path` to its end from a thread (opening blocks until a writer
    /// comes) and hands over what was read.
    fn drain(path: PathBuf) -> tokio::sync::oneshot::Receiver<String> {
        let (done, wait) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            let mut text = String::new();
            std::fs::File::open(path)
                .expect("open fifo for reading")
                .read_to_string(&mut text)
                .expect("read fifo");
            let _ = done.send(text);
        });
        wait
    }

    #[tokio::test]
    async fn read_only_denied_write_shows_the_marker_then_the_exit_code_last() {
        let workspace = Workspace::new("ro-denied");
        let env = env(&workspace);
        let result = bash(
            &env,
            Mode::ReadOnly,
            json!({"command": "echo x > denied.txt || exit 2"}),
        )
        .await;
        assert_eq!(result.status, ToolStatus::Failed, "{}", result.text);
        let lines: Vec<&str> = result.text.lines().collect();
        assert!(
            lines[0].contains("denied.txt") && lines[0].contains("Read-only file system")
                || lines[0].contains("Permission denied"),
            "{}",
            result.text
        );
        assert_eq!(
            lines[lines.len() - 2..],
            [
                "[sandbox: file write denied under read-only mode]",
                "[exit code: 2]"
            ],
            "{}",
            result.text
        );
        assert_eq!(result.facts["denied"], true);
        assert_eq!(result.facts["denials"], json!(["file-write"]));
        assert_eq!(result.facts["mode"], "read-only");
        assert_eq!(result.facts["exit"]["code"], 2);
        assert!(!workspace.0.join("denied.txt").exists());
    }

    #[tokio::test]
    async fn workspace_write_writes_inside_the_workspace() {
        let workspace = Workspace::new("ww-inside");
        let env = env(&workspace);
        let result = bash(
            &env,
            Mode::WorkspaceWrite,
            json!({"command": "echo hello > inside.txt && cat inside.txt"}),
        )
        .await;
        assert_eq!(result.status, ToolStatus::Completed, "{}", result.text);
        assert_eq!(result.text, "hello\n[exit code: 0]");
        assert_eq!(result.facts["denied"], false);
        assert_eq!(
            std::fs::read_to_string(workspace.0.join("inside.txt")).expect("written"),
            "hello\n"
        );
    }

    #[tokio::test]
    async fn a_timeout_terminates_the_command_and_says_after_how_long() {
        let workspace = Workspace::new("timeout");
        let env = env(&workspace);
        // The timeout, not the command (which would sleep for over 16 minutes), ends it: `bash`
        // answers at all within the test's liveness bound (`within`).
        let result = bash(
            &env,
            Mode::ReadOnly,
            json!({"command": "echo before; exec sleep 1000", "timeout": 300}),
        )
        .await;
        assert_eq!(result.status, ToolStatus::Failed);
        let lines: Vec<&str> = result.text.lines().collect();
        assert_eq!(lines[0], "before");
        assert!(
            lines.contains(&"[timed out after 300 ms]"),
            "{}",
            result.text
        );
        assert!(
            last_line(&result.text).starts_with("[exit code: "),
            "{}",
            result.text
        );
        assert_eq!(result.facts["timed_out"], true);
        assert_eq!(result.facts["denied"], false);
    }

    #[tokio::test]
    async fn long_output_keeps_its_head_and_tail() {
        let workspace = Workspace::new("long-output");
        let env = env(&workspace);
        let result = bash(
            &env,
            Mode::ReadOnly,
            json!({"command": "head -c 100000 /dev/zero | tr '\\0' a; echo; echo end"}),
        )
        .await;
        assert_eq!(
            result.status,
            ToolStatus::Completed,
            "{}",
            &result.text[..200]
        );
        assert!(
            result
                .text
                .contains("\n[output truncated: 70005 bytes omitted]\n"),
            "{}",
            &result.text[14_900..15_100]
        );
        assert!(result.text.ends_with("aaa\nend\n[exit code: 0]"));
    }

    #[tokio::test]
    async fn a_background_task_is_read_with_bash_output_and_stopped_with_bash_kill() {
        let workspace = Workspace::new("background");
        let gate = workspace.fifo("gate");
        let back = workspace.fifo("back");
        let env = env(&workspace);
        let started = bash(
            &env,
            Mode::WorkspaceWrite,
            json!({
                "command": "echo one; cat gate; echo two; echo ok > back; exec sleep 1000",
                "run_in_background": true,
            }),
        )
        .await;
        assert_eq!(started.status, ToolStatus::Completed, "{}", started.text);
        assert_eq!(started.text, "started background task task-1");
        assert_eq!(started.facts["task_id"], "task-1");

        // The task waits at the gate, so it is still running.
        let first = within(run(
            &env,
            &call("bash_output", json!({"task_id": "task-1"})),
            ctx(Mode::ReadOnly),
        ))
        .await;
        assert_eq!(first.status, ToolStatus::Completed);
        assert!(first.text.ends_with("[still running]"), "{}", first.text);
        assert_eq!(env.background().running(), ["task-1"]);

        let fed = feed(gate, "payload\n");
        let answered = drain(back);
        within(fed).await.expect("fed the gate");
        // Once it has written to `back`, "two" is in its output.
        assert_eq!(within(answered).await.expect("read back"), "ok\n");

        let killed = within(run(
            &env,
            &call("bash_kill", json!({"task_id": "task-1"})),
            ctx(Mode::ReadOnly),
        ))
        .await;
        assert_eq!(killed.status, ToolStatus::Completed, "{}", killed.text);
        assert!(
            killed.text.starts_with("stopped task-1\n"),
            "{}",
            killed.text
        );
        assert!(killed.text.contains("[cancelled]\n"), "{}", killed.text);
        assert!(
            last_line(&killed.text).starts_with("[exit code: "),
            "{}",
            killed.text
        );
        let output: String = first.text.clone() + &killed.text;
        let one = output.find("one\n").expect("one");
        let payload = output.find("payload\n").expect("payload");
        let two = output.find("two\n").expect("two");
        assert!(one < payload && payload < two, "{output}");
        assert!(env.background().running().is_empty());

        // After the end, the markers again and no output twice.
        let after = within(run(
            &env,
            &call("bash_output", json!({"task_id": "task-1"})),
            ctx(Mode::ReadOnly),
        ))
        .await;
        assert!(
            after.text.starts_with("[terminated by signal"),
            "{}",
            after.text
        );
        assert_eq!(last_line(&after.text), last_line(&killed.text));
        assert_eq!(after.facts["cancelled"], true);
        assert_eq!(after.facts["running"], false);

        let unknown = within(run(
            &env,
            &call("bash_output", json!({"task_id": "task-7"})),
            ctx(Mode::ReadOnly),
        ))
        .await;
        assert_eq!(unknown.status, ToolStatus::Failed);
        assert!(
            unknown
                .text
                .contains("the background tasks of this session are: task-1"),
            "{}",
            unknown.text
        );
    }

    #[tokio::test]
    async fn a_denied_background_task_shows_the_denial_on_every_read_after_its_end() {
        let workspace = Workspace::new("background-denied");
        let env = env(&workspace);
        let started = bash(
            &env,
            Mode::ReadOnly,
            json!({"command": "echo x > denied.txt || exit 2", "run_in_background": true}),
        )
        .await;
        assert_eq!(started.status, ToolStatus::Completed, "{}", started.text);
        assert!(within(env.background().wait_ended("task-1")).await);
        for read in 0..2 {
            let result = within(run(
                &env,
                &call("bash_output", json!({"task_id": "task-1"})),
                ctx(Mode::ReadOnly),
            ))
            .await;
            assert_eq!(result.status, ToolStatus::Failed, "{}", result.text);
            assert!(
                result
                    .text
                    .ends_with("[sandbox: file write denied under read-only mode]\n[exit code: 2]"),
                "read {read}: {}",
                result.text
            );
            // The command's own message comes once, with the first read.
            assert_eq!(
                result.text.contains("denied.txt"),
                read == 0,
                "{}",
                result.text
            );
        }
    }

    #[tokio::test]
    async fn closing_the_session_kills_every_background_task() {
        let workspace = Workspace::new("kill-all");
        let env = env(&workspace);
        for _ in 0..2 {
            let started = bash(
                &env,
                Mode::ReadOnly,
                json!({"command": "exec sleep 1000", "run_in_background": true}),
            )
            .await;
            assert_eq!(started.status, ToolStatus::Completed, "{}", started.text);
        }
        // A turn's cancel is not the session's: the tasks keep running.
        let (canceller, cancel) = cancel::pair();
        canceller.cancel();
        let output = within(run(
            &env,
            &call("bash_output", json!({"task_id": "task-2"})),
            CallContext {
                mode: Mode::ReadOnly,
                cancel,
                narrowings: Default::default(),
                live: None,
                owner: None,
            },
        ))
        .await;
        assert_eq!(output.text, "[still running]");
        assert_eq!(env.background().running(), ["task-1", "task-2"]);

        within(env.background().kill_all()).await;
        assert!(env.background().running().is_empty());
        assert_eq!(env.background().ids(), ["task-1", "task-2"]);
        for id in ["task-1", "task-2"] {
            let result = within(run(
                &env,
                &call("bash_output", json!({"task_id": id})),
                ctx(Mode::ReadOnly),
            ))
            .await;
            assert_eq!(
                result.text, "[terminated by signal 15]\n[cancelled]\n[exit code: 143]",
                "{id}"
            );
        }
    }

    /// Whether some process has the FIFO at `path` open for reading: opening it for writing
    /// without blocking fails with ENXIO exactly when none has.
    fn has_reader(path: &Path) -> bool {
        use std::os::unix::fs::OpenOptionsExt;
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(nix::libc::O_NONBLOCK)
            .open(path)
        {
            Ok(_) => true,
            Err(e) if e.raw_os_error() == Some(nix::libc::ENXIO) => false,
            Err(e) => panic!("{}: {e}", path.display()),
        }
    }

    #[tokio::test]
    async fn a_narrowing_stops_the_tasks_under_a_wider_mode_and_waits_for_their_whole_trees() {
        const NAME: &str =
            "a_narrowing_stops_the_tasks_under_a_wider_mode_and_waits_for_their_whole_trees";
        let mut ran = 0;
        for (backend, works, need) in [
            (BackendChoice::Bwrap, available::bwrap(), Need::Bwrap),
            (
                BackendChoice::Landlock,
                available::landlock(),
                Need::Landlock,
            ),
        ] {
            // Judged without the helper: a helper that wrongly finds a working backend
            // unusable fails the narrowing below instead of skipping it.
            if let Err(why) = works {
                skip::skip_part(NAME, need.name(), need, why);
                continue;
            }
            let workspace = Workspace::new(&format!("narrowing-{backend:?}"));
            let env = env_with(&workspace, backend);
            narrowing_stops_the_wider_tasks(&workspace, &env).await;
            ran += 1;
        }
        if ran == 0 {
            skip::skip(NAME, Need::Backend, "neither bwrap nor Landlock works here");
        }
    }

    async fn narrowing_stops_the_wider_tasks(workspace: &Workspace, env: &ToolEnv) {
        let wide = workspace.fifo("wide");
        let narrow = workspace.fifo("narrow");
        // The wide task's child holds `wide` open; the shell and the child ignore SIGTERM, so
        // under Landlock only the helper's SIGKILL after the grace ends them (under bwrap the
        // SIGTERM ends bwrap, and with it the sandbox's every process).
        let wide_open = feed(wide.clone(), "");
        let started = bash(
            env,
            Mode::WorkspaceWrite,
            json!({
                "command": "trap '' TERM; (exec 3<wide; exec sleep 1000) & wait",
                "run_in_background": true,
            }),
        )
        .await;
        assert_eq!(started.text, "started background task task-1");
        let narrow_open = feed(narrow.clone(), "");
        let started = bash(
            env,
            Mode::ReadOnly,
            json!({"command": "exec 3<narrow; exec sleep 1000", "run_in_background": true}),
        )
        .await;
        assert_eq!(started.text, "started background task task-2");
        within(wide_open)
            .await
            .expect("the wide task opened its FIFO");
        within(narrow_open)
            .await
            .expect("the narrow task opened its FIFO");
        assert!(has_reader(&wide) && has_reader(&narrow), "both tasks run");

        let stopping = env.background().narrow(Mode::ReadOnly);
        let stopped = within(stopping.ended(env.shell())).await;
        assert_eq!(stopped.len(), 1, "{stopped:?}");
        let stopped = &stopped[0];
        assert_eq!(
            (stopped.task_id.as_str(), stopped.call_id.as_str()),
            ("task-1", "call-1")
        );
        assert_eq!(
            (stopped.ran_under, stopped.narrowed_to),
            (Mode::WorkspaceWrite, Mode::ReadOnly)
        );
        assert!(stopped.confirmed, "{stopped:?}");
        assert_eq!(stopped.facts["narrowed_to"], "read-only");
        assert_eq!(stopped.facts["cancelled"], true);
        // Its whole tree is gone once the stop has ended; the read-only task runs on.
        assert!(!has_reader(&wide), "a process of the stopped task survives");
        assert!(has_reader(&narrow), "the read-only task was stopped too");
        assert_eq!(env.background().running(), ["task-2"]);

        let output = within(run(
            env,
            &call("bash_output", json!({"task_id": "task-1"})),
            ctx(Mode::ReadOnly),
        ))
        .await;
        assert_eq!(output.status, ToolStatus::Failed);
        let lines: Vec<&str> = output.text.lines().collect();
        assert_eq!(
            lines[0],
            "[stopped: the session's sandbox mode was narrowed to read-only; this task ran under \
             workspace-write]",
            "{}",
            output.text
        );
        assert!(
            lines[1].starts_with("[terminated by signal "),
            "{}",
            output.text
        );
        assert_eq!(lines[2], "[cancelled]", "{}", output.text);
        assert_eq!(output.facts["narrowed_to"], "read-only");

        // Narrowing to the mode a task runs under stops nothing.
        assert!(env.background().narrow(Mode::ReadOnly).is_empty());
        assert!(has_reader(&narrow));
        within(env.background().kill_all()).await;
        assert!(!has_reader(&narrow));
    }

    #[tokio::test]
    async fn a_task_whose_mode_was_decided_before_a_narrowing_is_stopped_as_it_registers() {
        let workspace = Workspace::new("narrowing-missed");
        let env = env(&workspace);
        let before = env.background().mark();
        assert!(env.background().narrow(Mode::ReadOnly).is_empty());
        let command = json!({"command": "exec sleep 1000", "run_in_background": true});
        let late = within(run(
            &env,
            &call("bash", command.clone()),
            CallContext {
                narrowings: before,
                ..ctx(Mode::WorkspaceWrite)
            },
        ))
        .await;
        assert_eq!(late.status, ToolStatus::Failed, "{}", late.text);
        assert!(
            late.text.starts_with(
                "[stopped: the session's sandbox mode was narrowed to read-only; this task ran \
                 under workspace-write]\n"
            ),
            "{}",
            late.text
        );
        assert_eq!(late.facts["task_id"], "task-1");
        assert!(env.background().running().is_empty());

        // Decided after the narrowing: it runs.
        let after = CallContext {
            narrowings: env.background().mark(),
            ..ctx(Mode::WorkspaceWrite)
        };
        let runs = within(run(&env, &call("bash", command), after)).await;
        assert_eq!(runs.text, "started background task task-2");
        assert_eq!(env.background().running(), ["task-2"]);
        within(env.background().kill_all()).await;
    }

    #[tokio::test]
    async fn a_turn_cancel_stops_a_foreground_command() {
        let workspace = Workspace::new("cancel");
        let ready = workspace.fifo("ready");
        let env = env(&workspace);
        let (canceller, cancel) = cancel::pair();
        let running = drain(ready);
        let call = call("bash", json!({"command": "echo ok > ready; sleep 1000"}));
        let tool = run(
            &env,
            &call,
            CallContext {
                mode: Mode::WorkspaceWrite,
                cancel,
                narrowings: Default::default(),
                live: None,
                owner: None,
            },
        );
        tokio::pin!(tool);
        let result = within(async {
            tokio::select! {
                result = &mut tool => panic!("ended before the cancel: {}", result.text),
                text = running => assert_eq!(text.expect("ready"), "ok\n"),
            }
            // The cancel, not the command (which would sleep for over 16 minutes), ends it: at
            // all within the test's liveness bound (`within`).
            canceller.cancel();
            (&mut tool).await
        })
        .await;
        assert_eq!(result.status, ToolStatus::Failed);
        let lines: Vec<&str> = result.text.lines().collect();
        assert_eq!(lines[lines.len() - 2], "[cancelled]", "{}", result.text);
        assert!(
            last_line(&result.text).starts_with("[exit code: "),
            "{}",
            result.text
        );
        assert_eq!(result.facts["cancelled"], true);
    }

    #[tokio::test]
    async fn a_command_runs_under_each_backend_this_machine_offers_and_under_no_other() {
        // agentd's availability test: whether a backend works is judged without the helper
        // (`tests/shared/available.rs`), and the helper agentd runs must agree both ways, so
        // that the tests here that run only the backends that work can trust that judgement.
        const NAME: &str =
            "a_command_runs_under_each_backend_this_machine_offers_and_under_no_other";
        let mut ran = 0;
        for (backend, name, works, need) in [
            (
                BackendChoice::Bwrap,
                "bwrap",
                available::bwrap(),
                Need::Bwrap,
            ),
            (
                BackendChoice::Landlock,
                "landlock",
                available::landlock(),
                Need::Landlock,
            ),
        ] {
            let workspace = Workspace::new(&format!("availability-{name}"));
            let env = env_with(&workspace, backend);
            let result = bash(&env, Mode::ReadOnly, json!({"command": "echo ran"})).await;
            match works {
                Ok(()) => {
                    assert_eq!(
                        result.facts["backend"], name,
                        "{name} works on this machine (checked without the helper), but the \
                         command did not run under it: {}",
                        result.text
                    );
                    assert_eq!(result.status, ToolStatus::Completed, "{}", result.text);
                    assert!(result.text.starts_with("ran\n"), "{}", result.text);
                    ran += 1;
                }
                Err(why) => {
                    assert_eq!(
                        result.facts["runner_failure"]["stage"], "unavailable",
                        "{name} does not work on this machine ({why}), yet the command ran: {}",
                        result.text
                    );
                    skip::skip_part(NAME, name, need, why);
                }
            }
        }
        if ran == 0 {
            skip::skip(NAME, Need::Backend, "neither bwrap nor Landlock works here");
        }
    }

    #[tokio::test]
    async fn a_runner_failure_says_the_sandbox_is_unavailable_and_never_denied() {
        let workspace = Workspace::new("unavailable");
        // Seatbelt is the macOS backend: on Linux it can never be used.
        let env = env_with(&workspace, BackendChoice::Seatbelt);
        if cfg!(target_os = "macos") {
            return;
        }
        let result = bash(&env, Mode::ReadOnly, json!({"command": "echo x > f"})).await;
        assert_eq!(result.status, ToolStatus::Failed);
        assert!(
            result.text.starts_with(
                "[sandbox unavailable: this command was to run in read-only mode, but no usable \
                 sandbox backend exists on this machine, and agentd refuses to run it unconfined"
            ),
            "{}",
            result.text
        );
        assert!(
            result.text.contains("\nRunner failure: "),
            "{}",
            result.text
        );
        assert!(!result.text.contains("denied under"), "{}", result.text);
        assert!(!result.text.contains("[exit code"), "{}", result.text);
        assert_eq!(result.facts["runner_failure"]["stage"], "unavailable");
        assert_eq!(result.facts["denied"], false);
        assert!(result.facts["exit"].is_null());
    }
}
