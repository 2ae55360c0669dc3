//! Real ACP clients against the real `agentd acp`: acpx 0.19.1, a client on the TypeScript SDK
//! 2.4.0 and one on the Python SDK 0.12.1 (`tests/external/`). Each test runs one client, with a
//! scripted model, in a scratch workspace with its own state dir and HOME, and checks what the
//! client printed and what the scripted command left on disk.
//!
//! A client that is not installed is skipped with a `SKIP` line naming the command that installs
//! it (`.ci/run` installs them all); under CI (`CI` set), having none of them fails.

mod support;

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The longest any client run may take before it is killed and the test fails.
const CLIENT_LIMIT: Duration = Duration::from_secs(90);
/// How long the processes of a finished run get to exit on their own.
const EXIT_GRACE: Duration = Duration::from_secs(10);

const NPM_INSTALL: &str = "cd tests/external && npm install";
const PIP_INSTALL: &str = "python3 -m pip install agent-client-protocol==0.12.1";

/// A model that writes one file with a shell command, then says it is done.
const WRITE_SCRIPT: &str = r#"
[[turn]]
text = "Writing the file."
[[turn.tool_calls]]
name = "bash"
arguments = { command = "printf 'written by agentd\\n' > made-by-agent.txt" }

[[turn]]
text = "Done: made-by-agent.txt is written."
"#;

fn external_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("external")
}

// ---------------------------------------------------------------------------------------------
// Which clients are installed

/// `node` runs and the npm packages of `tests/external` are installed.
fn node_clients() -> Result<(), String> {
    let node = Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !node.is_ok_and(|status| status.success()) {
        return Err("`node` does not run (Node.js 20 or later is needed)".into());
    }
    for package in ["acpx", "@agentclientprotocol/sdk"] {
        let manifest = external_dir()
            .join("node_modules")
            .join(package)
            .join("package.json");
        if !manifest.is_file() {
            return Err(format!(
                "{} is missing: install it with `{NPM_INSTALL}`",
                manifest.display()
            ));
        }
    }
    Ok(())
}

/// The Python interpreter that can `import acp`.
fn python_client() -> Result<PathBuf, String> {
    let out = Command::new("python3")
        .args(["-c", "import sys, acp; print(sys.executable)"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("`python3` does not run ({e})"))?;
    if !out.status.success() {
        return Err(format!(
            "`python3 -c 'import acp'` fails: install it with `{PIP_INSTALL}`"
        ));
    }
    Ok(PathBuf::from(
        String::from_utf8_lossy(&out.stdout).trim().to_owned(),
    ))
}

/// Prints the SKIP line when `found` is an error.
fn installed<T>(test: &str, found: Result<T, String>) -> Option<T> {
    match found {
        Ok(value) => Some(value),
        Err(reason) => {
            println!("SKIP {test}: {reason}");
            None
        }
    }
}

#[test]
fn under_ci_at_least_one_external_client_is_installed() {
    let node = node_clients();
    let python = python_client();
    println!("node clients: {node:?}; python client: {python:?}");
    let under_ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
    if under_ci {
        assert!(
            node.is_ok() || python.is_ok(),
            "CI is set but no external ACP client is installed, so every external client test \
             would skip: `.ci/run` installs them ({NPM_INSTALL}; {PIP_INSTALL}).\n\
             node: {node:?}\npython: {python:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// A scratch area and a client run

/// One test's workspace (canonical path), state dir and HOME, under a unique root.
struct Scratch {
    root: PathBuf,
}

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let root = std::env::temp_dir().join(format!("agentd-ext-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for dir in ["ws", "state", "home", "config"] {
            std::fs::create_dir_all(root.join(dir)).expect("scratch dirs");
        }
        let root = std::fs::canonicalize(&root).expect("canonical scratch root");
        Scratch { root }
    }

    fn ws(&self) -> PathBuf {
        self.root.join("ws")
    }

    /// Writes the model script; returns the `agentd acp` command line, as words.
    fn agent(&self, script: &str) -> Vec<String> {
        let path = self.root.join("script.toml");
        std::fs::write(&path, script).expect("script");
        vec![
            support::binary("agentd").display().to_string(),
            "acp".into(),
            "--model-script".into(),
            path.display().to_string(),
            "--state-dir".into(),
            self.root.join("state").display().to_string(),
        ]
    }

    /// A client command run in the workspace, with HOME and agentd's configuration and state
    /// locations inside the scratch area, in a process group of its own.
    fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new(program);
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy();
            if key.starts_with("AGENTD_") || key.starts_with("ACPX_") {
                command.env_remove(&*key);
            }
        }
        command
            .current_dir(self.ws())
            .env("HOME", self.root.join("home"))
            .env("XDG_CONFIG_HOME", self.root.join("config"))
            .env("XDG_STATE_HOME", self.root.join("state"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        command
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // Whatever a failed test left running goes first, so the directory can go.
        for pid in processes_under(&self.root) {
            kill(pid);
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// What a client run printed and how it ended.
struct Run {
    status: std::process::ExitStatus,
    stdout: String,
    stderr: String,
}

impl Run {
    /// The stdout lines as JSON; a line that is not JSON fails the test.
    fn json_lines(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(|line| {
                serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}\n{self}"))
            })
            .collect()
    }
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "--- {} ---\n--- stdout ---\n{}--- stderr ---\n{}",
            self.status, self.stdout, self.stderr
        )
    }
}

/// Runs a client to its end (killing its process group past [`CLIENT_LIMIT`]), then checks that
/// no process of the run (one whose command line names the scratch area or whose working
/// directory is in it) outlives it: each gets [`EXIT_GRACE`] to go, and is then killed and
/// reported.
fn run(scratch: &Scratch, mut command: Command) -> Run {
    let mut child = command.spawn().expect("start the client");
    let pid = child.id();
    let stdout = child.stdout.take().expect("stdout");
    let stderr = child.stderr.take().expect("stderr");
    let out = read_all(stdout);
    let err = read_all(stderr);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let (status, timed_out) = match rx.recv_timeout(CLIENT_LIMIT) {
        Ok(status) => (status.expect("wait for the client"), false),
        Err(_) => {
            kill_group(pid);
            let status = rx.recv().expect("the waiter").expect("wait for the client");
            (status, true)
        }
    };
    let survivors = reap(scratch);
    // Anything else the client left in its own group.
    kill_group(pid);
    // A pipe still open here has a writer that escaped both searches: reported, not waited for.
    const UNCLOSED: &str = "<still open: a process of the run holds it>";
    let stdout = out
        .recv_timeout(EXIT_GRACE)
        .unwrap_or_else(|_| UNCLOSED.into());
    let stderr = err
        .recv_timeout(EXIT_GRACE)
        .unwrap_or_else(|_| UNCLOSED.into());
    let run = Run {
        status,
        stdout,
        stderr,
    };
    assert!(!timed_out, "the client ran past {CLIENT_LIMIT:?}\n{run}");
    assert!(
        run.stdout != UNCLOSED && run.stderr != UNCLOSED,
        "a process of the run outlived the client with its output still open\n{run}"
    );
    assert!(
        survivors.is_empty(),
        "processes outlived the client and were killed: {survivors:#?}\n{run}"
    );
    run
}

/// Reads a pipe to its end on a thread; the text arrives on the returned channel.
fn read_all(mut pipe: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        let _ = tx.send(String::from_utf8_lossy(&bytes).into_owned());
    });
    rx
}

/// The live processes whose command line contains `needle`.
fn processes_naming(needle: &str) -> Vec<u32> {
    live_processes()
        .into_iter()
        .filter(|(_, cmdline)| cmdline.contains(needle))
        .map(|(pid, _)| pid)
        .collect()
}

/// Every live process (not a zombie) but this one, with its command line (arguments joined by spaces).
fn live_processes() -> Vec<(u32, String)> {
    let own = std::process::id();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == own || !support::alive(pid) {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        found.push((pid, String::from_utf8_lossy(&cmdline).replace('\0', " ")));
    }
    found
}

/// The live processes whose command line names `root` or whose working directory is inside it.
fn processes_under(root: &Path) -> Vec<u32> {
    let needle = format!("{}/", root.display());
    live_processes()
        .into_iter()
        .filter(|(pid, cmdline)| {
            cmdline.contains(&needle)
                || std::fs::read_link(format!("/proc/{pid}/cwd"))
                    .is_ok_and(|cwd| cwd.starts_with(root))
        })
        .map(|(pid, _)| pid)
        .collect()
}

/// Gives the run's remaining processes [`EXIT_GRACE`] to exit, kills the rest, and returns a
/// description of those it had to kill.
fn reap(scratch: &Scratch) -> Vec<String> {
    let deadline = Instant::now() + EXIT_GRACE;
    let mut killed = Vec::new();
    for pid in processes_under(&scratch.root) {
        let left = deadline.saturating_duration_since(Instant::now());
        if support::wait_gone(pid, left) {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        killed.push(format!(
            "{pid}: {}",
            String::from_utf8_lossy(&cmdline).replace('\0', " ")
        ));
        kill(pid);
    }
    killed
}

fn kill(pid: u32) {
    if let Ok(pid) = i32::try_from(pid) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

fn kill_group(pid: u32) {
    if let Ok(pid) = i32::try_from(pid) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// A command line for acpx's `--agent`, which splits it into words as a shell would.
fn shell_words(words: &[String]) -> String {
    words
        .iter()
        .map(|word| format!("'{}'", word.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ")
}

// ---------------------------------------------------------------------------------------------
// Checks shared by the clients

/// The `session/update` payloads among some events, wherever the client put them.
fn updates<'a>(events: &'a [Value], pointer: &str) -> Vec<&'a Value> {
    events.iter().filter_map(|e| e.pointer(pointer)).collect()
}

/// A `tool_call` for the scripted command, then its completed `tool_call_update` with exit 0.
fn assert_tool_call_completed(updates: &[&Value], context: &dyn std::fmt::Display) {
    let call = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call")
        .unwrap_or_else(|| panic!("no tool_call update\n{context}"));
    assert_eq!(call["kind"], "execute", "{call}");
    assert!(
        call["rawInput"]["command"]
            .as_str()
            .is_some_and(|c| c.contains("made-by-agent.txt")),
        "{call}"
    );
    let id = &call["toolCallId"];
    let done = updates
        .iter()
        .find(|u| {
            u["sessionUpdate"] == "tool_call_update"
                && u["toolCallId"] == *id
                && u["status"] == "completed"
        })
        .unwrap_or_else(|| panic!("no completed tool_call_update for {id}\n{context}"));
    assert_eq!(done["rawOutput"]["exit"], json!({"code": 0}), "{done}");
}

fn assert_file_written(scratch: &Scratch) {
    let path = scratch.ws().join("made-by-agent.txt");
    assert_eq!(
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{} was not written: {e}", path.display())),
        "written by agentd\n"
    );
}

// ---------------------------------------------------------------------------------------------
// acpx

#[test]
fn acpx_exec_runs_a_confined_command_and_ends_the_turn() {
    let test = "acpx_exec_runs_a_confined_command_and_ends_the_turn";
    if installed(test, node_clients()).is_none() {
        return;
    }
    let scratch = Scratch::new("acpx");
    let agent = shell_words(&scratch.agent(WRITE_SCRIPT));
    let mut command = scratch.command("node");
    command
        .arg(external_dir().join("node_modules/acpx/dist/cli.js"))
        .args(["--agent", &agent])
        .args([
            "--approve-all",
            "--format",
            "json",
            "--json-strict",
            "--timeout",
            "60",
        ])
        .args(["exec", "Write made-by-agent.txt"]);
    let run = run(&scratch, command);
    assert!(run.status.success(), "acpx failed\n{run}");
    let lines = run.json_lines();

    let init_id = lines
        .iter()
        .find(|m| m["method"] == "initialize")
        .map(|m| m["id"].clone())
        .unwrap_or_else(|| panic!("acpx sent no initialize\n{run}"));
    let init = lines
        .iter()
        .find(|m| m["id"] == init_id && m.get("result").is_some())
        .unwrap_or_else(|| panic!("no initialize result\n{run}"));
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    assert_eq!(
        init["result"]["agentCapabilities"]["loadSession"], true,
        "{init}"
    );
    assert!(
        lines.iter().all(|m| m.get("error").is_none()),
        "an error on the wire\n{run}"
    );

    assert_tool_call_completed(&updates(&lines, "/params/update"), &run);
    assert!(
        lines
            .iter()
            .any(|m| m["result"]["stopReason"] == "end_turn"),
        "no end_turn\n{run}"
    );
    assert_file_written(&scratch);
}

// ---------------------------------------------------------------------------------------------
// The TypeScript SDK client

fn ts_client(scratch: &Scratch, options: &[&str], script: &str, prompt: &str) -> (Run, Vec<Value>) {
    let mut command = scratch.command("node");
    command
        .arg(external_dir().join("ts-client.mjs"))
        .args(options)
        .arg("--")
        .args(scratch.agent(script))
        .arg(prompt);
    let run = run(scratch, command);
    assert!(run.status.success(), "ts-client failed\n{run}");
    let events = run.json_lines();
    // The agent exits on its own once its stdin closes.
    let exit = events
        .iter()
        .find(|e| e["event"] == "agent-exit")
        .unwrap_or_else(|| panic!("no agent-exit\n{run}"));
    assert_eq!(
        exit["code"], 0,
        "agentd did not exit cleanly at the end of its input\n{run}"
    );
    (run, events)
}

fn stop_reason(events: &[Value]) -> Option<&str> {
    events
        .iter()
        .find(|e| e["event"] == "done")
        .and_then(|e| e["stopReason"].as_str())
}

#[test]
fn typescript_sdk_client_sees_the_tool_call_and_end_turn() {
    let test = "typescript_sdk_client_sees_the_tool_call_and_end_turn";
    if installed(test, node_clients()).is_none() {
        return;
    }
    let scratch = Scratch::new("ts");
    let (run, events) = ts_client(&scratch, &[], WRITE_SCRIPT, "Write made-by-agent.txt");
    let init = events
        .iter()
        .find(|e| e["event"] == "initialize")
        .unwrap_or_else(|| panic!("no initialize\n{run}"));
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    assert_tool_call_completed(&updates(&events, "/update"), &run);
    assert_eq!(stop_reason(&events), Some("end_turn"), "{run}");
    assert_file_written(&scratch);
}

#[test]
fn typescript_sdk_client_cancels_a_running_command() {
    let test = "typescript_sdk_client_cancels_a_running_command";
    if installed(test, node_clients()).is_none() {
        return;
    }
    let scratch = Scratch::new("ts-cancel");
    let script = r#"
[[turn]]
text = "Waiting."
[[turn.tool_calls]]
name = "bash"
arguments = { command = "exec sleep TAG" }

[[turn]]
text = "Still here."
"#;
    // The unique duration makes the command findable in /proc.
    let tag = format!("985.{}", std::process::id());
    let script = script.replace("TAG", &tag);
    let started = Instant::now();
    let (run, events) = ts_client(&scratch, &["--cancel-after", "500"], &script, "wait");
    let sleepers = processes_naming(&format!("sleep {tag}"));
    for &pid in &sleepers {
        kill(pid);
    }
    assert_eq!(
        sleepers,
        Vec::<u32>::new(),
        "the cancelled command outlived agentd\n{run}"
    );
    assert_eq!(stop_reason(&events), Some("cancelled"), "{run}");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "the cancel took {:?}\n{run}",
        started.elapsed()
    );
    // If the command had started, its call ends as failed and says it was cancelled.
    let updates = updates(&events, "/update");
    if let Some(call) = updates.iter().find(|u| u["sessionUpdate"] == "tool_call") {
        let end = updates
            .iter()
            .find(|u| {
                u["sessionUpdate"] == "tool_call_update" && u["toolCallId"] == call["toolCallId"]
            })
            .unwrap_or_else(|| panic!("the cancelled call has no update\n{run}"));
        assert_eq!(end["status"], "failed", "{end}");
        assert_eq!(end["rawOutput"]["cancelled"], true, "{end}");
    }
}

// ---------------------------------------------------------------------------------------------
// The Python SDK client

#[test]
fn python_sdk_client_sees_the_tool_call_and_end_turn() {
    let test = "python_sdk_client_sees_the_tool_call_and_end_turn";
    let Some(python) = installed(test, python_client()) else {
        return;
    };
    let scratch = Scratch::new("py");
    let mut command = scratch.command(python);
    command
        .arg(external_dir().join("py_client.py"))
        .arg("--")
        .args(scratch.agent(WRITE_SCRIPT))
        .arg("Write made-by-agent.txt");
    let run = run(&scratch, command);
    assert!(run.status.success(), "py_client failed\n{run}");
    let events = run.json_lines();
    let init = events
        .iter()
        .find(|e| e["event"] == "initialize")
        .unwrap_or_else(|| panic!("no initialize\n{run}"));
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    assert_tool_call_completed(&updates(&events, "/update"), &run);
    assert_eq!(stop_reason(&events), Some("end_turn"), "{run}");
    assert_file_written(&scratch);
}
