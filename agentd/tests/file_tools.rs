//! The file tools against the real confine-helper: every read and write is made by the helper's
//! own reader or writer, confined like a command of the call's mode.
//!
//! The helper is the `confine-helper` binary next to this test's target directory, as in
//! `tests/tools.rs`. Where a test waits for a command to reach some point, the command says so
//! through a FIFO: nothing here sleeps to synchronise.

#[path = "../../tests/shared/available.rs"]
mod available;
#[path = "../../tests/shared/skip.rs"]
mod skip;

mod file_tools {
    use super::available;
    use super::skip::{self, Need};
    use std::ffi::OsString;
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    use std::path::{Path, PathBuf};
    use std::time::{Duration, Instant};

    use agentd::api::cancel::Cancel;
    use agentd::api::environment;
    use agentd::api::helper_client::{
        HelperClient, HelperEndpoint, Outcome, SpawnSpec, WorkspaceRefusal,
    };
    use agentd::api::model::ToolCall;
    use agentd::api::session::{LoggedDiff, Omission, ToolStatus};
    use agentd::api::tools::{CallContext, ToolEnv, ToolResult, run};
    use confine_protocol::{BackendChoice, Mode, Network};
    use serde_json::{Value, json};

    fn target_dir() -> PathBuf {
        let exe = std::env::current_exe().expect("current_exe");
        exe.parent()
            .and_then(Path::parent)
            .expect("target directory")
            .to_owned()
    }

    fn helper_binary() -> PathBuf {
        let helper = target_dir().join("confine-helper");
        assert!(
            helper.is_file(),
            "{} is missing: build it with `cargo build --workspace` (cargo test --workspace \
             builds it)",
            helper.display()
        );
        helper
    }

    /// A workspace (and an `outside` directory beside it) removed when dropped.
    struct Workspace {
        root: PathBuf,
        ws: PathBuf,
        outside: PathBuf,
    }

    impl Workspace {
        fn new(name: &str) -> Workspace {
            let root = std::env::temp_dir()
                .join(format!("agentd-file-tools-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&root);
            std::fs::create_dir_all(root.join("ws")).expect("create workspace");
            std::fs::create_dir_all(root.join("outside")).expect("create outside");
            let root = root.canonicalize().expect("canonical");
            Workspace {
                ws: root.join("ws"),
                outside: root.join("outside"),
                root,
            }
        }

        /// A repository's git directory as far as the helper cares: its presence.
        fn with_repository(self) -> Workspace {
            std::fs::create_dir_all(self.ws.join(".git/hooks")).expect("mkdir .git");
            std::fs::write(self.ws.join(".git/config"), "[core]\n").expect("config");
            self
        }

        fn fifo(&self, name: &str) -> PathBuf {
            let path = self.ws.join(name);
            nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600))
                .expect("mkfifo");
            path
        }
    }

    impl Drop for Workspace {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }

    fn env_with(
        ws: &Workspace,
        backend: BackendChoice,
        client: HelperClient,
        home: Option<&Path>,
    ) -> ToolEnv {
        let mut vars: Vec<(OsString, OsString)> =
            environment::command_environment(std::env::vars_os(), &[]);
        if let Some(home) = home {
            vars.retain(|(name, _)| name != "HOME");
            vars.push(("HOME".into(), home.as_os_str().to_owned()));
        }
        ToolEnv::new(client, ws.ws.clone(), vars, Network::Deny, backend, None)
    }

    fn env(ws: &Workspace, backend: BackendChoice) -> ToolEnv {
        let client = HelperClient::new(HelperEndpoint::Embedded(helper_binary()));
        env_with(ws, backend, client, None)
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

    async fn within<F: std::future::Future>(future: F) -> F::Output {
        tokio::time::timeout(Duration::from_secs(60), future)
            .await
            .expect("the test finished in time")
    }

    async fn tool(env: &ToolEnv, mode: Mode, name: &str, arguments: Value) -> ToolResult {
        let call = ToolCall {
            id: "call-1".to_owned(),
            name: name.to_owned(),
            arguments: arguments.to_string(),
        };
        within(run(env, &call, ctx(mode))).await
    }

    /// The backends that work on this machine (judged without the helper), each with a
    /// session on it; a SKIP line for the others, and for `test` when none works.
    async fn usable_backends(ws: &Workspace, test: &str) -> Vec<(BackendChoice, ToolEnv)> {
        let mut usable = Vec::new();
        for (backend, works, need) in [
            (BackendChoice::Bwrap, available::bwrap(), Need::Bwrap),
            (
                BackendChoice::Landlock,
                available::landlock(),
                Need::Landlock,
            ),
        ] {
            match works {
                Ok(()) => usable.push((backend, env(ws, backend))),
                Err(why) => skip::skip_part(test, need.name(), need, why),
            }
        }
        if usable.is_empty() {
            skip::skip(test, Need::Backend, "neither bwrap nor Landlock works here");
        }
        usable
    }

    fn backend_name(backend: BackendChoice) -> &'static str {
        match backend {
            BackendChoice::Bwrap => "bwrap",
            BackendChoice::Landlock => "landlock",
            _ => "other",
        }
    }

    #[tokio::test]
    async fn writes_and_edits_are_made_by_the_confined_writer_and_name_the_real_file() {
        let ws = Workspace::new("writes");
        for (backend, env) in usable_backends(&ws, "writes_and_edits").await {
            let name = backend_name(backend);
            let mode = Mode::WorkspaceWrite;
            let created = tool(
                &env,
                mode,
                "write_file",
                json!({"path": format!("{name}/deep/a.txt"), "content": "one\ntwo\n"}),
            )
            .await;
            assert_eq!(created.status, ToolStatus::Completed, "{}", created.text);
            let file = ws.ws.join(name).join("deep/a.txt");
            assert_eq!(
                created.text,
                format!("Created {} (8 bytes)", file.display())
            );
            assert_eq!(created.facts["backend"], name, "{}", created.facts);
            assert_eq!(created.facts["path"], file.to_string_lossy().as_ref());
            assert!(created.facts["enforcement"]["level"].is_string());
            assert_eq!(std::fs::read_to_string(&file).expect("read"), "one\ntwo\n");
            let text_diff = |old_text: Option<&str>, new_text: &str| {
                Some(LoggedDiff::Text {
                    path: file.to_string_lossy().into_owned(),
                    old_text: old_text.map(str::to_owned),
                    new_text: new_text.to_owned(),
                })
            };
            assert_eq!(created.diff, text_diff(None, "one\ntwo\n"));

            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o751)).expect("chmod");
            let edited = tool(
                &env,
                mode,
                "edit_file",
                json!({"path": file, "old_string": "two", "new_string": "2"}),
            )
            .await;
            assert_eq!(edited.status, ToolStatus::Completed, "{}", edited.text);
            assert_eq!(std::fs::read_to_string(&file).expect("read"), "one\n2\n");
            assert_eq!(edited.diff, text_diff(Some("one\ntwo\n"), "one\n2\n"));
            let perms = std::fs::metadata(&file).expect("meta").permissions().mode();
            assert_eq!(perms & 0o777, 0o751, "the old permissions are kept");

            // Written through a link to the file it names, and the result says which.
            let link = ws.ws.join(format!("{name}-link"));
            std::os::unix::fs::symlink(&file, &link).expect("symlink");
            let through = tool(
                &env,
                mode,
                "write_file",
                json!({"path": link, "content": "via link\n"}),
            )
            .await;
            assert_eq!(through.status, ToolStatus::Completed, "{}", through.text);
            assert!(
                through
                    .text
                    .starts_with(&format!("Overwrote {}", file.display())),
                "{}",
                through.text
            );
            assert!(
                std::fs::symlink_metadata(&link)
                    .expect("link")
                    .file_type()
                    .is_symlink()
            );
            // The text before is what the file the link names held.
            assert_eq!(through.diff, text_diff(Some("one\n2\n"), "via link\n"));

            // A file that was not text is overwritten; its diff is a line saying why not.
            let binary = ws.ws.join(format!("{name}.bin"));
            std::fs::write(&binary, b"\0\x01\x02").expect("binary");
            let over = tool(
                &env,
                mode,
                "write_file",
                json!({"path": binary, "content": "text now\n"}),
            )
            .await;
            assert_eq!(over.status, ToolStatus::Completed, "{}", over.text);
            assert_eq!(
                over.diff,
                Some(LoggedDiff::Omitted {
                    path: binary.to_string_lossy().into_owned(),
                    reason: Omission::Unread,
                })
            );
            std::fs::remove_file(&binary).expect("remove");

            let leftovers: Vec<_> = std::fs::read_dir(ws.ws.join(name).join("deep"))
                .expect("list")
                .filter_map(Result::ok)
                .map(|e| e.file_name())
                .collect();
            assert_eq!(
                leftovers,
                [OsString::from("a.txt")],
                "no temporary file is left"
            );

            // Read-only: nothing is written, and the fence says why.
            let denied = tool(
                &env,
                Mode::ReadOnly,
                "write_file",
                json!({"path": format!("{name}-ro.txt"), "content": "x"}),
            )
            .await;
            assert_eq!(denied.status, ToolStatus::Failed);
            assert!(
                denied
                    .text
                    .ends_with("[sandbox: file write denied under read-only mode]"),
                "{}",
                denied.text
            );
            assert!(!ws.ws.join(format!("{name}-ro.txt")).exists());
            assert_eq!(
                denied.diff, None,
                "a write that did not happen changed nothing"
            );
        }
    }

    /// The id the helper client gives its next request: each confined run takes one, so the
    /// difference between two is how many runs were asked for in between (this one included).
    async fn next_run_id(env: &ToolEnv) -> u64 {
        let handle = within(env.helper().spawn(SpawnSpec::new(["true"])))
            .await
            .expect("sent");
        let id = handle.id();
        within(handle.wait()).await;
        id
    }

    #[tokio::test]
    async fn an_overwrite_and_an_edit_are_each_one_confined_run() {
        let ws = Workspace::new("one-run");
        for (backend, env) in
            usable_backends(&ws, "an_overwrite_and_an_edit_are_each_one_run").await
        {
            let file = ws.ws.join(format!("{}.txt", backend_name(backend)));
            std::fs::write(&file, "before\n").expect("write");
            let first = next_run_id(&env).await;
            let over = tool(
                &env,
                Mode::WorkspaceWrite,
                "write_file",
                json!({"path": file, "content": "after\n"}),
            )
            .await;
            let next = next_run_id(&env).await;
            assert_eq!(over.status, ToolStatus::Completed, "{}", over.text);
            assert_eq!(std::fs::read_to_string(&file).expect("read"), "after\n");
            assert_eq!(
                over.diff,
                Some(LoggedDiff::Text {
                    path: file.to_string_lossy().into_owned(),
                    old_text: Some("before\n".to_owned()),
                    new_text: "after\n".to_owned(),
                })
            );
            // The writer alone ran between the two: no read of the old file before it.
            assert_eq!(next - first, 2, "runs from {first} to {next}");
            // An edit too: one run reads the file, takes the edit and writes it.
            let edited = tool(
                &env,
                Mode::WorkspaceWrite,
                "edit_file",
                json!({"path": file, "old_string": "after", "new_string": "edited"}),
            )
            .await;
            let last = next_run_id(&env).await;
            assert_eq!(edited.status, ToolStatus::Completed, "{}", edited.text);
            assert_eq!(std::fs::read_to_string(&file).expect("read"), "edited\n");
            assert_eq!(
                edited.diff,
                Some(LoggedDiff::Text {
                    path: file.to_string_lossy().into_owned(),
                    old_text: Some("after\n".to_owned()),
                    new_text: "edited\n".to_owned(),
                })
            );
            assert_eq!(last - next, 2, "runs from {next} to {last}");
        }
    }

    #[tokio::test]
    async fn an_edit_of_a_file_larger_than_a_pipe_holds_neither_waits_nor_loses_a_byte() {
        let ws = Workspace::new("large-edit");
        for (backend, env) in usable_backends(&ws, "an_edit_of_a_file_larger_than_a_pipe").await {
            let file = ws.ws.join(format!("{}.txt", backend_name(backend)));
            // About 1 MiB: many times what a pipe holds, both ways.
            let text: String = (0..20_000)
                .map(|i| format!("line {i:05} of a file larger than any pipe\n"))
                .collect();
            std::fs::write(&file, &text).expect("write");
            let edited = tool(
                &env,
                Mode::WorkspaceWrite,
                "edit_file",
                json!({"path": file, "old_string": "line 19999 of", "new_string": "LAST LINE of"}),
            )
            .await;
            assert_eq!(edited.status, ToolStatus::Completed, "{}", edited.text);
            let expected = text.replace("line 19999 of", "LAST LINE of");
            assert_eq!(std::fs::read_to_string(&file).expect("read"), expected);
        }
    }

    #[tokio::test]
    async fn a_large_file_is_read_in_windows_of_2000_lines_each_saying_how_to_read_on() {
        let ws = Workspace::new("read-window");
        let text: String = (1..=4500).map(|n| format!("line {n}\n")).collect();
        let path = ws.ws.join("big.txt");
        std::fs::write(&path, &text).expect("big.txt");
        for (_, env) in usable_backends(&ws, "read_window").await {
            let first = tool(&env, Mode::ReadOnly, "read_file", json!({"path": path})).await;
            assert_eq!(first.status, ToolStatus::Completed, "{}", first.text);
            assert!(first.text.starts_with("line 1\nline 2\n"), "{}", first.text);
            assert!(
                first.text.ends_with(
                    "line 2000\n[showed lines 1-2000 of 4500; read on with offset=2001]"
                ),
                "{}",
                &first.text[first.text.len().saturating_sub(120)..]
            );
            assert_eq!(first.facts["lines"], json!([1, 2000]));
            // Reading on from where it said, and to the end, which needs no notice.
            let last = tool(
                &env,
                Mode::ReadOnly,
                "read_file",
                json!({"path": path, "offset": 4001}),
            )
            .await;
            assert!(last.text.starts_with("line 4001\n"), "{}", last.text);
            assert!(last.text.ends_with("line 4500\n"), "{}", last.text);
            // The control: a limit of its own is kept, larger than the default too.
            let asked = tool(
                &env,
                Mode::ReadOnly,
                "read_file",
                json!({"path": path, "limit": 3000}),
            )
            .await;
            assert_eq!(asked.facts["lines"], json!([1, 3000]));
        }
    }

    #[tokio::test]
    async fn fifos_and_devices_are_neither_written_nor_read_and_nothing_blocks() {
        let ws = Workspace::new("fifo");
        let fifo = ws.fifo("pipe");
        std::os::unix::fs::symlink("/dev/zero", ws.ws.join("zero")).expect("symlink");
        for (_, env) in usable_backends(&ws, "fifos_and_devices").await {
            // Opening a FIFO with nobody at the other end would block: finishing at all is
            // half the proof, the timeout in `tool` the other half.
            for (name, arguments) in [
                ("write_file", json!({"path": fifo, "content": "x"})),
                (
                    "edit_file",
                    json!({"path": fifo, "old_string": "a", "new_string": "b"}),
                ),
                ("read_file", json!({"path": fifo})),
                ("read_file", json!({"path": ws.ws.join("zero")})),
            ] {
                let result = tool(&env, Mode::WorkspaceWrite, name, arguments.clone()).await;
                assert_eq!(result.status, ToolStatus::Failed, "{name} {arguments}");
                assert!(
                    result.text.contains("not a regular file"),
                    "{name}: {}",
                    result.text
                );
            }
            let meta = std::fs::symlink_metadata(&fifo).expect("still there");
            assert!(
                std::os::unix::fs::FileTypeExt::is_fifo(&meta.file_type()),
                "the FIFO is left a FIFO"
            );
        }
    }

    #[tokio::test]
    async fn a_read_of_proc_self_environ_sees_the_readers_environment_not_agentds() {
        let ws = Workspace::new("environ");
        // The control: agentd's own environment is there to be leaked (this test process is
        // the agentd library, holding the environment it was started with).
        let mut own = Vec::new();
        std::fs::File::open("/proc/self/environ")
            .and_then(|mut f| f.read_to_end(&mut own))
            .expect("read own environ");
        assert!(
            own.windows(5).any(|w| w == b"PATH="),
            "this process has no PATH to leak, so the test proves nothing"
        );
        for (_, env) in usable_backends(&ws, "proc_self_environ").await {
            for mode in [Mode::ReadOnly, Mode::WorkspaceWrite, Mode::DangerFullAccess] {
                let read = tool(
                    &env,
                    mode,
                    "read_file",
                    json!({"path": "/proc/self/environ"}),
                )
                .await;
                assert!(
                    !read.text.contains("PATH="),
                    "{mode:?}: agentd's environment was read: {}",
                    read.text
                );
            }
        }
    }

    #[tokio::test]
    async fn a_read_names_the_file_really_read_and_its_confinement() {
        let ws = Workspace::new("reads");
        std::fs::create_dir_all(ws.ws.join("src")).expect("mkdir");
        std::fs::write(ws.ws.join("src/real.rs"), "fn main() {}\n").expect("write");
        std::os::unix::fs::symlink("src/real.rs", ws.ws.join("alias.rs")).expect("symlink");
        for (backend, env) in usable_backends(&ws, "reads").await {
            let read = tool(
                &env,
                Mode::ReadOnly,
                "read_file",
                json!({"path": "alias.rs"}),
            )
            .await;
            assert_eq!(read.status, ToolStatus::Completed, "{}", read.text);
            assert_eq!(read.text, "fn main() {}\n");
            assert_eq!(
                read.facts["path"],
                ws.ws.join("src/real.rs").to_string_lossy().as_ref()
            );
            assert_eq!(read.facts["backend"], backend_name(backend));
        }
    }

    /// A confined background task that swaps each `(dir, link)` pair back and forth as fast as
    /// it can, with `renameat2(RENAME_EXCHANGE)`, until it is killed.
    fn swapper_command(pairs: &[(PathBuf, PathBuf)]) -> String {
        let pairs: Vec<String> = pairs
            .iter()
            .map(|(a, b)| format!("({:?}, {:?})", a.to_string_lossy(), b.to_string_lossy()))
            .collect();
        format!(
            "exec python3 -c 'import ctypes, os\n\
             libc = ctypes.CDLL(None, use_errno=True)\n\
             pairs = [{}]\n\
             open(\"swapping\", \"w\").write(\"ok\")\n\
             while True:\n\
             \x20   for a, b in pairs:\n\
             \x20       libc.renameat2(-100, a.encode(), -100, b.encode(), 2)\n'",
            pairs.join(", ")
        )
    }

    /// Waits until a command writes a line into the FIFO at `path` (opening it for reading
    /// blocks until the command opens it for writing).
    async fn wait_for(path: &Path) {
        let path = path.to_owned();
        let waited = tokio::task::spawn_blocking(move || {
            let mut text = String::new();
            std::fs::File::open(path)
                .and_then(|mut fifo| fifo.read_to_string(&mut text))
                .expect("read the readiness FIFO");
            text
        });
        within(waited).await.expect("waited");
    }

    /// How many calls each race makes per backend (half `write_file`, half `edit_file`).
    const RACE_CALLS: usize = 2000;
    /// How many calls the unconfined control may take to land outside.
    const CONTROL_CALLS: usize = 2000;

    #[tokio::test]
    async fn the_symlink_swap_race_never_leads_a_file_tool_out_of_the_sandbox() {
        let which = Workspace::new("race-backends");
        let backends = usable_backends(&which, "symlink_swap_race").await;
        drop(which);
        if !available::on_path("python3") {
            skip::skip(
                "the_symlink_swap_race_never_leads_a_file_tool_out_of_the_sandbox",
                Need::Python3,
                "python3 is not installed (apt-get install python3)",
            );
            return;
        }
        for (backend, _) in backends {
            let ws = Workspace::new(&format!("race-{}", backend_name(backend))).with_repository();
            let env = env(&ws, backend);
            // `d` is a directory or, swapped, a link to `outside`; `g` is a directory or a
            // link to the repository's git directory.
            std::fs::create_dir_all(ws.ws.join("d")).expect("mkdir d");
            std::fs::create_dir_all(ws.ws.join("g")).expect("mkdir g");
            std::fs::write(ws.ws.join("g/config"), "[core]\n").expect("g/config");
            std::os::unix::fs::symlink(&ws.outside, ws.ws.join("d-swap")).expect("link");
            std::os::unix::fs::symlink(ws.ws.join(".git"), ws.ws.join("g-swap")).expect("link");
            let config_before = std::fs::read(ws.ws.join(".git/config")).expect("config");

            let pairs = [
                (ws.ws.join("d"), ws.ws.join("d-swap")),
                (ws.ws.join("g"), ws.ws.join("g-swap")),
            ];
            let swapping = ws.fifo("swapping");
            let started = tool(
                &env,
                Mode::WorkspaceWrite,
                "bash",
                json!({"command": swapper_command(&pairs), "run_in_background": true}),
            )
            .await;
            assert_eq!(started.status, ToolStatus::Completed, "{}", started.text);
            wait_for(&swapping).await;

            let (mut written, mut fenced, mut kernel, mut failed) = (0, 0, 0, 0);
            let began = Instant::now();
            for n in 0..RACE_CALLS {
                let result = if n % 2 == 0 {
                    let target = if n % 4 == 0 { "d/f" } else { "g/config" };
                    tool(
                        &env,
                        Mode::WorkspaceWrite,
                        "write_file",
                        json!({"path": format!("{target}-{n}"), "content": "x\n"}),
                    )
                    .await
                } else {
                    tool(
                        &env,
                        Mode::WorkspaceWrite,
                        "edit_file",
                        json!({"path": "g/config", "old_string": "[core]", "new_string": "[core]"}),
                    )
                    .await
                };
                match result.status {
                    ToolStatus::Completed => {
                        written += 1;
                        let path = PathBuf::from(result.facts["path"].as_str().unwrap_or(""));
                        // Landlock cannot keep the repository read-only, and says so.
                        let into_git = path.starts_with(ws.ws.join(".git"));
                        if into_git && backend == BackendChoice::Landlock {
                            let missing = result.facts["enforcement"]["missing"].to_string();
                            assert!(
                                missing.contains(&format!(
                                    "protected path {}",
                                    ws.ws.join(".git").display()
                                )),
                                "call {n} wrote into .git under landlock without saying so: {}",
                                result.facts
                            );
                        }
                        assert!(
                            path.starts_with(&ws.ws)
                                && (!into_git || backend == BackendChoice::Landlock),
                            "call {n} wrote {}: {}",
                            path.display(),
                            result.text
                        );
                    }
                    // The fence (no run) saw the link; the kernel (a run, denied) refused what
                    // got past the fence while the link was swapped in.
                    ToolStatus::Failed if result.facts["backend"].is_null() => fenced += 1,
                    ToolStatus::Failed if result.facts["denied"] == true => kernel += 1,
                    ToolStatus::Failed => {
                        if failed == 0 {
                            println!("first other failure: {}", result.text);
                        }
                        failed += 1
                    }
                }
                let outside: Vec<_> = std::fs::read_dir(&ws.outside)
                    .expect("list outside")
                    .filter_map(Result::ok)
                    .map(|e| e.file_name())
                    .collect();
                assert!(
                    outside.is_empty(),
                    "call {n} left {outside:?} outside the workspace: {}",
                    result.text
                );
                let git_dir: Vec<_> = std::fs::read_dir(ws.ws.join(".git"))
                    .expect("list .git")
                    .filter_map(Result::ok)
                    .map(|e| e.file_name())
                    .collect();
                assert!(
                    git_dir.len() == 2 || backend == BackendChoice::Landlock,
                    "call {n} left {git_dir:?} in .git: {}",
                    result.text
                );
            }
            if backend == BackendChoice::Bwrap {
                assert_eq!(
                    std::fs::read(ws.ws.join(".git/config")).expect("config"),
                    config_before,
                    "the repository's config changed"
                );
            }
            println!(
                "{}: {RACE_CALLS} calls in {:.1}s during the swapping: {written} written inside \
                 the workspace, {fenced} refused by the fence, {kernel} denied by the kernel, \
                 {failed} failed otherwise, none outside",
                backend_name(backend),
                began.elapsed().as_secs_f64()
            );
            assert!(written > 0, "no call got through: the race proves nothing");
            assert!(
                kernel > 0,
                "no call got past the fence while the link was swapped in: the race did not \
                 reach the writer, so it proves nothing"
            );

            // The control: the same race with the calls unconfined lands outside.
            let mut landed = None;
            for n in 0..CONTROL_CALLS {
                tool(
                    &env,
                    Mode::DangerFullAccess,
                    "write_file",
                    json!({"path": ws.ws.join(format!("d/control-{n}")), "content": "x\n"}),
                )
                .await;
                if std::fs::read_dir(&ws.outside)
                    .expect("list outside")
                    .next()
                    .is_some()
                {
                    landed = Some(n);
                    break;
                }
            }
            let killed = tool(
                &env,
                Mode::ReadOnly,
                "bash_kill",
                json!({"task_id": "task-1"}),
            )
            .await;
            assert_eq!(killed.status, ToolStatus::Completed, "{}", killed.text);
            let Some(n) = landed else {
                panic!(
                    "unconfined, {CONTROL_CALLS} writes under the same swapping never landed \
                     outside: the race does not land here, the test proves nothing"
                );
            };
            println!(
                "{}: unconfined, the same race landed outside on call {n}",
                backend_name(backend)
            );
        }
    }

    #[tokio::test]
    async fn a_command_holding_locks_on_what_the_helper_reads_does_not_stall_it() {
        let ws = Workspace::new("locks").with_repository();
        std::fs::write(ws.ws.join(".git/index"), b"DIRC\0\0\0\x02\0\0\0\0").expect("index");
        std::fs::write(ws.ws.join(".git/HEAD"), "ref: refs/heads/main\n").expect("HEAD");
        let held = ws.fifo("held");
        let never = ws.fifo("never");
        let env = env(&ws, BackendChoice::Auto);
        let holder = format!(
            "exec python3 -c 'import fcntl, os\n\
             fds = [os.open(p, os.O_RDONLY) for p in (\".git\", \".git/index\", \".git/HEAD\", \".\")]\n\
             for fd in fds:\n\
             \x20   fcntl.flock(fd, fcntl.LOCK_EX)\n\
             for fd in fds[1:3]:\n\
             \x20   fcntl.lockf(fd, fcntl.LOCK_SH)\n\
             open({held:?}, \"w\").write(\"held\")\n\
             os.open({never:?}, os.O_RDONLY)\n'",
            held = held.to_string_lossy(),
            never = never.to_string_lossy(),
        );
        let started = tool(
            &env,
            Mode::WorkspaceWrite,
            "bash",
            json!({"command": holder, "run_in_background": true}),
        )
        .await;
        assert_eq!(started.status, ToolStatus::Completed, "{}", started.text);
        wait_for(&held).await;

        // The locks are really held: a host-side non-blocking lock fails.
        let index = std::fs::File::open(ws.ws.join(".git/index")).expect("open index");
        assert!(
            nix::fcntl::Flock::lock(index, nix::fcntl::FlockArg::LockExclusiveNonblock).is_err(),
            "the background task does not hold its lock, the test proves nothing"
        );

        let echo = tool(
            &env,
            Mode::WorkspaceWrite,
            "bash",
            json!({"command": "echo still served"}),
        )
        .await;
        assert_eq!(echo.status, ToolStatus::Completed, "{}", echo.text);
        assert!(echo.text.starts_with("still served\n"), "{}", echo.text);
        let written = tool(
            &env,
            Mode::WorkspaceWrite,
            "write_file",
            json!({"path": "after.txt", "content": "x"}),
        )
        .await;
        assert_eq!(written.status, ToolStatus::Completed, "{}", written.text);
        let read = tool(
            &env,
            Mode::ReadOnly,
            "read_file",
            json!({"path": "after.txt"}),
        )
        .await;
        assert_eq!(read.text, "x");

        let killed = tool(
            &env,
            Mode::ReadOnly,
            "bash_kill",
            json!({"task_id": "task-1"}),
        )
        .await;
        assert_eq!(killed.status, ToolStatus::Completed, "{}", killed.text);
        assert!(env.background().running().is_empty());
    }

    /// Runs `true` confined in workspace-write through `client` with `HOME` set to `home`.
    async fn run_with_home(ws: &Workspace, home: &Path) -> Outcome {
        let client = HelperClient::new(HelperEndpoint::Embedded(helper_binary()));
        let mut spec = SpawnSpec::new(["true"]);
        spec.policy.mode = Mode::WorkspaceWrite;
        spec.policy.workspace_root = Some(ws.ws.as_os_str().as_encoded_bytes().to_vec());
        spec.env = vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("HOME".into(), home.as_os_str().to_owned()),
        ];
        let handle = within(client.spawn(spec)).await.expect("sent");
        within(handle.wait()).await
    }

    #[tokio::test]
    async fn the_commands_home_is_never_a_writable_root_nor_inside_one() {
        let ws = Workspace::new("home");
        std::fs::create_dir_all(ws.ws.join("sub")).expect("mkdir");
        for home in [ws.ws.clone(), ws.ws.join("sub")] {
            match run_with_home(&ws, &home).await {
                Outcome::Refused(r) => assert!(
                    r.reason.to_string().contains(&home.display().to_string()),
                    "{}",
                    r.reason
                ),
                other => panic!("HOME={} in the workspace ran: {other:?}", home.display()),
            }
        }
        // The control: a HOME elsewhere (and a root inside a HOME is fine).
        match run_with_home(&ws, &ws.root).await {
            Outcome::Refused(r) => panic!("refused with HOME elsewhere: {}", r.reason),
            // Without a backend nothing confined runs; with one, a control that fails fails.
            Outcome::RunnerFailed(f) if available::bwrap().or(available::landlock()).is_err() => {
                skip::skip_part(
                    "the_commands_home_is_never_a_writable_root_nor_inside_one",
                    "the control",
                    Need::Backend,
                    f.detail,
                );
            }
            Outcome::RunnerFailed(f) => panic!("the control, with HOME elsewhere, failed: {f:?}"),
            Outcome::Exited(e) => assert_eq!(e.status, confine_protocol::ExitStatus::Code(0)),
        }
        // The same through the tools: a session whose HOME is its workspace runs nothing.
        let client = HelperClient::new(HelperEndpoint::Embedded(helper_binary()));
        let env = env_with(&ws, BackendChoice::Auto, client, Some(&ws.ws));
        let result = tool(
            &env,
            Mode::WorkspaceWrite,
            "bash",
            json!({"command": "true"}),
        )
        .await;
        assert_eq!(result.status, ToolStatus::Failed, "{}", result.text);
        assert!(result.text.contains("never allowed"), "{}", result.text);
    }

    #[tokio::test]
    async fn the_helper_refuses_a_root_holding_agentds_own_files_even_if_agentd_did_not() {
        let ws = Workspace::new("own-files");
        let own = ws.ws.join(".config/agentd");
        let client = HelperClient::configured(
            HelperEndpoint::Embedded(helper_binary()),
            None,
            vec![own.clone()],
            None,
        )
        .expect("client");
        assert_eq!(
            client
                .workspace_refusal(&ws.ws, None)
                .as_ref()
                .map(WorkspaceRefusal::path),
            Some(own.as_path()),
            "agentd's own check sees it"
        );
        let env = env_with(&ws, BackendChoice::Auto, client, None);
        for (name, arguments) in [
            ("bash", json!({"command": "mkdir -p .config/agentd"})),
            (
                "write_file",
                json!({"path": ".config/agentd/agentd.toml", "content": "x"}),
            ),
        ] {
            let result = tool(&env, Mode::WorkspaceWrite, name, arguments).await;
            assert_eq!(result.status, ToolStatus::Failed, "{name}: {}", result.text);
            assert!(
                result.text.contains(&own.display().to_string()),
                "{name}: {}",
                result.text
            );
        }
        assert!(!ws.ws.join(".config").exists());
        // The control: the same client in a workspace that does not hold it.
        let other = Workspace::new("own-files-control");
        let client = HelperClient::configured(
            HelperEndpoint::Embedded(helper_binary()),
            None,
            vec![own],
            None,
        )
        .expect("client");
        let env = env_with(&other, BackendChoice::Auto, client, None);
        let result = tool(
            &env,
            Mode::WorkspaceWrite,
            "write_file",
            json!({"path": "a.txt", "content": "x"}),
        )
        .await;
        assert_eq!(result.status, ToolStatus::Completed, "{}", result.text);
    }
}
