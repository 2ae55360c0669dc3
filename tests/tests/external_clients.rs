//! Real ACP clients against the real `agentd acp`: acpx 0.19.1, a client on the TypeScript SDK
//! 2.4.0 (`tests/external/ts-client.mjs`) and one on the Python SDK 0.12.1
//! (`tests/external/py_client.py`). Each flow runs one client, with a scripted model, in a
//! scratch area with its own workspace, state dir, HOME and XDG dirs, through initialize,
//! session/new, session/set_config_option, a bash call, a permission prompt answered allow (the
//! allowed write arrives as ACP diff content), reject and cancelled, session/cancel during a
//! long command and session/load by a fresh agent process, and checks what the client saw, the
//! stop reasons, and what landed on disk. acpx and the Python SDK client each also show a
//! subagent's tool call, nested under the `task` call by `_meta.agentd.parentToolCallId`. One
//! more acpx flow runs against a local model server that answers HTTP 500 every time: the
//! prompt ends in a JSON-RPC error and acpx exits non-zero. acpx and the Python SDK each show
//! agentd's slash commands (the `available_commands_update` after `session/new`, and `/status`
//! answered by agentd without the model) and a plan (the model's `update_plan` as ACP's `plan`).
//!
//! Where the clients are found: the npm packages in `tests/external/node_modules` or in
//! `$AGENTD_CI_CACHE/npm/node_modules`, the Python SDK in `$AGENTD_CI_CACHE/venv` or in the
//! `python3` on PATH, each only at its pinned version. `AGENTD_CI_CACHE` defaults to
//! `${XDG_CACHE_HOME:-$HOME/.cache}/agentd-ci`, where `.ci/run` installs them. A flow whose
//! client is missing says `SKIP <flow>: <reason>` (printed after the run) and passes, unless
//! the run requires that client: `AGENTD_REQUIRE_ACPX`, `AGENTD_REQUIRE_TYPESCRIPT_SDK`,
//! `AGENTD_REQUIRE_PYTHON_SDK` (`.ci/run` sets all three once it installed them).

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::skip::{self, Need};

/// The longest any client run may take before it is killed and the test fails.
const CLIENT_LIMIT: Duration = Duration::from_secs(120);
/// How long the processes of a finished run get to exit on their own.
const EXIT_GRACE: Duration = Duration::from_secs(10);
/// How long after a cancelled prompt has ended its command may take to be gone: a liveness
/// bound (the command would sleep for over 16 minutes), never a measurement.
const CANCEL_GRACE: Duration = Duration::from_secs(30);

const ACPX_VERSION: &str = "0.19.1";
const TS_SDK_VERSION: &str = "2.4.0";
const PY_SDK_VERSION: &str = "0.12.1";
const INSTALL: &str = "`bash .ci/run --install-only` installs it";

fn external_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("external")
}

// ---------------------------------------------------------------------------------------------
// Which clients are installed

/// Where `.ci/run` installs the clients.
fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("AGENTD_CI_CACHE").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache")
        });
    cache.join("agentd-ci")
}

/// `node` runs and is Node.js 20 or later.
fn node() -> Result<(), String> {
    let out = Command::new("node")
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("`node` does not run ({e}); Node.js 20 or later is needed"))?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let major = version
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse::<u32>().ok());
    match major {
        Some(major) if out.status.success() && major >= 20 => Ok(()),
        _ => Err(format!(
            "`node --version` says {version:?}; Node.js 20 or later is needed"
        )),
    }
}

/// The `node_modules` directory holding `package` at `version`: the one in `tests/external`,
/// else the one in the cache.
fn node_modules_with(package: &str, version: &str) -> Result<PathBuf, String> {
    node()?;
    let candidates = [
        external_dir().join("node_modules"),
        cache_dir().join("npm").join("node_modules"),
    ];
    let mut seen = Vec::new();
    for dir in &candidates {
        let manifest = dir.join(package).join("package.json");
        let Ok(text) = std::fs::read_to_string(&manifest) else {
            seen.push(format!("{} is missing", manifest.display()));
            continue;
        };
        let found = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|m| m["version"].as_str().map(str::to_owned))
            .unwrap_or_default();
        if found == version {
            return Ok(dir.clone());
        }
        seen.push(format!("{} is version {found:?}", manifest.display()));
    }
    Err(format!(
        "{package}@{version} is not installed ({}): {INSTALL}",
        seen.join("; ")
    ))
}

/// acpx's `cli.js`.
fn acpx() -> Result<PathBuf, String> {
    Ok(node_modules_with("acpx", ACPX_VERSION)?.join("acpx/dist/cli.js"))
}

/// The `node_modules` directory that holds the TypeScript SDK.
fn typescript_sdk() -> Result<PathBuf, String> {
    node_modules_with("@agentclientprotocol/sdk", TS_SDK_VERSION)
}

/// A Python interpreter that has the SDK at its pinned version: the cache's venv, else
/// `python3`.
fn python_sdk() -> Result<PathBuf, String> {
    let check = format!(
        "import sys, importlib.metadata as m, acp; \
         v = m.version('agent-client-protocol'); \
         print(sys.executable if v == '{PY_SDK_VERSION}' else 'version ' + v)"
    );
    let mut seen = Vec::new();
    for python in [
        cache_dir().join("venv/bin/python3"),
        PathBuf::from("python3"),
    ] {
        let out = Command::new(&python)
            .args(["-c", &check])
            .stdin(Stdio::null())
            .output();
        match out {
            Ok(out) if out.status.success() => {
                let said = String::from_utf8_lossy(&out.stdout).trim().to_owned();
                if let Some(version) = said.strip_prefix("version ") {
                    seen.push(format!(
                        "{} has agent-client-protocol {version}",
                        python.display()
                    ));
                } else {
                    return Ok(PathBuf::from(said));
                }
            }
            Ok(_) => seen.push(format!("{} cannot `import acp`", python.display())),
            Err(e) => seen.push(format!("{} does not run ({e})", python.display())),
        }
    }
    Err(format!(
        "agent-client-protocol=={PY_SDK_VERSION} is not installed ({}): {INSTALL}",
        seen.join("; ")
    ))
}

/// What each client is, for the skip lines: its name and the need that requires it.
fn need_of(client: &str) -> Need {
    match client {
        "acpx" => Need::Acpx,
        "typescript-sdk" => Need::TypescriptSdk,
        _ => Need::PythonSdk,
    }
}

/// The client when `found`; a SKIP line for the running test (flow `flow`) when not, which
/// fails the test where the run requires the client.
fn installed<T>(client: &str, flow: &str, found: Result<T, String>) -> Option<T> {
    match found {
        Ok(value) => Some(value),
        Err(reason) => {
            let test = skip::this_test();
            skip::skip(
                &test,
                need_of(client),
                format!("{reason} ({client}, flow {flow})"),
            );
            None
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A scratch area and client runs

/// One flow's workspace (canonical path), state dir, HOME and XDG dirs, under a unique root.
struct Scratch {
    root: PathBuf,
}

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let root = std::env::temp_dir().join(format!("agentd-ext-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for dir in ["ws", "state", "home", "config", "cache", "data"] {
            std::fs::create_dir_all(root.join(dir)).expect("scratch dirs");
        }
        let root = std::fs::canonicalize(&root).expect("canonical scratch root");
        Scratch { root }
    }

    fn ws(&self) -> PathBuf {
        self.root.join("ws")
    }

    /// Writes `agentd.toml` where agentd finds it (`$XDG_CONFIG_HOME/agentd/`).
    fn config(&self, text: &str) {
        let dir = self.root.join("config/agentd");
        std::fs::create_dir_all(&dir).expect("config dir");
        std::fs::write(dir.join("agentd.toml"), text).expect("agentd.toml");
    }

    /// Writes the model script; returns the `agentd acp` command line, as words. Sessions start
    /// read-only, so that a write that lands shows the switch to workspace-write was honoured.
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
            "--sandbox-mode".into(),
            "read-only".into(),
        ]
    }

    /// The `agentd acp` command line, as words, for the model that `agentd.toml` configures
    /// (see [`Scratch::config`]); sessions start read-only.
    fn configured_agent(&self) -> Vec<String> {
        vec![
            support::binary("agentd").display().to_string(),
            "acp".into(),
            "--state-dir".into(),
            self.root.join("state").display().to_string(),
            "--sandbox-mode".into(),
            "read-only".into(),
        ]
    }

    /// A client command run in the workspace, with HOME and the XDG dirs inside the scratch
    /// area, in a process group of its own.
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
            .env("XDG_CACHE_HOME", self.root.join("cache"))
            .env("XDG_DATA_HOME", self.root.join("data"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        command
    }

    fn exists(&self, file: &str) -> bool {
        self.ws().join(file).exists()
    }

    fn read(&self, file: &str) -> String {
        let path = self.ws().join(file);
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{} was not written: {e}", path.display()))
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

/// What happens to the scratch area's other processes when a run ends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Leftovers {
    /// Each gets [`EXIT_GRACE`] to exit; one still there is killed and fails the test.
    Fail,
    /// As `Fail`, but acpx's queue owners (which stay for their `--ttl`) still there are
    /// killed and reported on stderr first, then their agents get the grace again.
    KillQueueOwners,
    /// They are left alone: another run of the same flow is still going.
    Keep,
}

/// A client process that is running; its stdout comes line by line.
struct Running {
    child: Child,
    started: Instant,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
    stderr: mpsc::Receiver<String>,
}

impl Running {
    fn start(mut command: Command) -> Running {
        let mut child = command.spawn().expect("start the client");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout");
        let stderr = read_all(child.stderr.take().expect("stderr"));
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Running {
            child,
            started: Instant::now(),
            stdin,
            lines,
            seen: Vec::new(),
            stderr,
        }
    }

    /// The next stdout line that satisfies `wanted` (as JSON), reading on until then; panics
    /// at the end of the output or of [`CLIENT_LIMIT`].
    fn until(&mut self, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        loop {
            let left = CLIENT_LIMIT.saturating_sub(self.started.elapsed());
            let Ok(line) = self.lines.recv_timeout(left) else {
                panic!(
                    "the client ended or ran past {CLIENT_LIMIT:?} before {what}\n{}",
                    self.seen.join("\n")
                );
            };
            self.seen.push(line.clone());
            if let Ok(value) = serde_json::from_str::<Value>(&line)
                && wanted(&value)
            {
                return value;
            }
        }
    }

    /// Writes a line to the client's stdin.
    fn say(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("the client's stdin is piped");
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .and_then(|()| stdin.flush())
            .expect("write to the client");
    }

    /// Waits for the client to end (killing its process group past [`CLIENT_LIMIT`]), then
    /// deals with the other processes of the scratch area as `leftovers` says.
    fn finish(mut self, scratch: &Scratch, leftovers: Leftovers) -> Run {
        drop(self.stdin.take());
        let pid = self.child.id();
        let mut child = self.child;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait());
        });
        let left = CLIENT_LIMIT.saturating_sub(self.started.elapsed());
        let (status, timed_out) = match rx.recv_timeout(left) {
            Ok(status) => (status.expect("wait for the client"), false),
            Err(_) => {
                kill_group(pid);
                let status = rx.recv().expect("the waiter").expect("wait for the client");
                (status, true)
            }
        };
        let survivors = match leftovers {
            Leftovers::Keep => Vec::new(),
            Leftovers::Fail => reap(scratch),
            Leftovers::KillQueueOwners => {
                let deadline = Instant::now() + EXIT_GRACE;
                for pid in processes_under(&scratch.root) {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if support::wait_gone(pid, left) {
                        continue;
                    }
                    let cmdline = cmdline(pid);
                    if cmdline.contains("__queue-owner") {
                        let _ = writeln!(
                            std::io::stderr().lock(),
                            "note: an acpx queue owner outlived its --ttl and was killed: \
                             {pid}: {cmdline}"
                        );
                        kill(pid);
                    }
                }
                reap(scratch)
            }
        };
        // Anything else the client left in its own group.
        kill_group(pid);
        // A pipe still open here has a writer that escaped both searches: reported, not
        // waited for.
        const UNCLOSED: &str = "<still open: a process of the run holds it>";
        let mut stdout = self.seen;
        let mut closed = false;
        while let Ok(line) = self.lines.recv_timeout(EXIT_GRACE) {
            stdout.push(line);
        }
        if matches!(self.lines.try_recv(), Err(mpsc::TryRecvError::Disconnected)) {
            closed = true;
        }
        let mut stdout = stdout.join("\n");
        stdout.push('\n');
        if !closed {
            stdout.push_str(UNCLOSED);
        }
        let stderr = self
            .stderr
            .recv_timeout(EXIT_GRACE)
            .unwrap_or_else(|_| UNCLOSED.into());
        let run = Run {
            status,
            stdout,
            stderr,
        };
        assert!(!timed_out, "the client ran past {CLIENT_LIMIT:?}\n{run}");
        assert!(
            closed && run.stderr != UNCLOSED,
            "a process of the run outlived the client with its output still open\n{run}"
        );
        assert!(
            survivors.is_empty(),
            "processes outlived the client and were killed: {survivors:#?}\n{run}"
        );
        run
    }
}

/// Runs a client to its end; see [`Running::finish`].
fn run(scratch: &Scratch, command: Command, leftovers: Leftovers) -> Run {
    Running::start(command).finish(scratch, leftovers)
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

fn cmdline(pid: u32) -> String {
    let bytes = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    String::from_utf8_lossy(&bytes).replace('\0', " ")
}

/// Every live process (not a zombie) but this one, with its command line.
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
        found.push((pid, cmdline(pid)));
    }
    found
}

/// The live processes whose command line contains `needle`.
fn processes_naming(needle: &str) -> Vec<u32> {
    live_processes()
        .into_iter()
        .filter(|(_, cmdline)| cmdline.contains(needle))
        .map(|(pid, _)| pid)
        .collect()
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

/// Gives the scratch area's remaining processes [`EXIT_GRACE`] to exit, kills the rest, and
/// returns a description of those it had to kill.
fn reap(scratch: &Scratch) -> Vec<String> {
    let deadline = Instant::now() + EXIT_GRACE;
    let mut killed = Vec::new();
    for pid in processes_under(&scratch.root) {
        let left = deadline.saturating_duration_since(Instant::now());
        if support::wait_gone(pid, left) {
            continue;
        }
        killed.push(format!("{pid}: {}", cmdline(pid)));
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

/// Asserts that no process runs the long command of a cancelled prompt, giving it
/// [`CANCEL_GRACE`] to go; kills any it finds.
fn assert_no_sleeper(tag: &str, context: &dyn std::fmt::Display) {
    let needle = format!("sleep {tag}");
    let deadline = Instant::now() + CANCEL_GRACE;
    let mut survivors = Vec::new();
    for pid in processes_naming(&needle) {
        let left = deadline.saturating_duration_since(Instant::now());
        if !support::wait_gone(pid, left) {
            survivors.push(format!("{pid}: {}", cmdline(pid)));
            kill(pid);
        }
    }
    assert!(
        survivors.is_empty(),
        "the cancelled command outlived its prompt: {survivors:#?}\n{context}"
    );
}

/// A unique duration for `sleep`, so that the command can be found in /proc.
fn sleep_tag(flow: u32) -> String {
    format!("98{flow}.{}", std::process::id())
}

// ---------------------------------------------------------------------------------------------
// Checks shared by the clients

/// The config option `id`'s current value in a list of config options.
fn current(options: &Value, id: &str) -> String {
    options
        .as_array()
        .and_then(|all| all.iter().find(|o| o["id"] == id))
        .and_then(|o| o["currentValue"].as_str())
        .unwrap_or_else(|| panic!("no config option {id} in {options}"))
        .to_owned()
}

/// Updates with consecutive agent text chunks joined: the live stream sends the model's text in
/// pieces, a replay sends it whole; and without status-only updates (a call a person allowed now
/// runs), which are not recorded: the call's result is what both show; nor the list of slash
/// commands every opening sends, which is state, never replayed.
fn joined(updates: &[&Value]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for &update in updates {
        if support::acp::is_status_only(update)
            || update["sessionUpdate"] == "available_commands_update"
        {
            continue;
        }
        if update["sessionUpdate"] == "agent_message_chunk"
            && let Some(last) = out.last_mut()
            && last["sessionUpdate"] == "agent_message_chunk"
        {
            let text = format!(
                "{}{}",
                last["content"]["text"].as_str().unwrap_or_default(),
                update["content"]["text"].as_str().unwrap_or_default()
            );
            last["content"]["text"] = Value::String(text);
            continue;
        }
        out.push(update.clone());
    }
    out
}

/// The agent's text among some updates.
fn agent_text(updates: &[&Value]) -> String {
    updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect()
}

/// The one `tool_call` among some updates and the last `tool_call_update` of the same call.
fn the_call<'a>(updates: &[&'a Value], context: &dyn std::fmt::Display) -> (&'a Value, &'a Value) {
    let calls: Vec<&Value> = updates
        .iter()
        .copied()
        .filter(|u| u["sessionUpdate"] == "tool_call")
        .collect();
    assert_eq!(calls.len(), 1, "one tool call: {calls:#?}\n{context}");
    let id = &calls[0]["toolCallId"];
    let end = updates
        .iter()
        .copied()
        .rfind(|u| u["sessionUpdate"] == "tool_call_update" && u["toolCallId"] == *id)
        .unwrap_or_else(|| panic!("no tool_call_update for {id}\n{context}"));
    (calls[0], end)
}

/// The model's text as the editor shows it: the last content block (a line for a person, or
/// a write's diff, may come first).
fn result_text(update: &Value) -> String {
    update["content"]
        .as_array()
        .and_then(|blocks| blocks.last())
        .map_or(&Value::Null, |block| &block["content"]["text"])
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The bash write: it ran under the workspace-write mode the client switched to, and exited 0.
fn assert_bash_write(call: &Value, end: &Value, scratch: &Scratch, file: &str) {
    assert_eq!(call["kind"], "execute", "{call}");
    assert!(
        call["rawInput"]["command"]
            .as_str()
            .is_some_and(|c| c.contains(file)),
        "{call}"
    );
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(end["rawOutput"]["exit"], json!({"code": 0}), "{end}");
    assert_eq!(end["rawOutput"]["mode"], "workspace-write", "{end}");
    // rawOutput is compact: what did not happen is left out.
    assert!(end["rawOutput"].get("denied").is_none(), "{end}");
    assert_eq!(scratch.read(file), "written by agentd\n");
}

/// How a permission prompt was answered, and what that answer must leave behind.
#[derive(Clone, Copy, Debug)]
enum Answer {
    Allow,
    Reject,
    Cancel,
}

impl Answer {
    fn file(self) -> &'static str {
        match self {
            Answer::Allow => "allowed.txt",
            Answer::Reject => "rejected.txt",
            Answer::Cancel => "cancelled.txt",
        }
    }

    /// The outcome the client sends.
    fn outcome(self) -> Value {
        match self {
            Answer::Allow => json!({"outcome": "selected", "optionId": "allow-once"}),
            Answer::Reject => json!({"outcome": "selected", "optionId": "reject-once"}),
            Answer::Cancel => json!({"outcome": "cancelled"}),
        }
    }

    /// The permission prompt's call ended as it should, and its file is there or not.
    fn assert_result(self, call: &Value, end: &Value, scratch: &Scratch) {
        let file = self.file();
        assert_eq!(call["kind"], "edit", "{call}");
        assert_eq!(call["rawInput"]["path"], file, "{call}");
        match self {
            Answer::Allow => {
                assert_eq!(end["status"], "completed", "{end}");
                assert_eq!(scratch.read(file), "yes");
                // The write arrives as ACP diff content (after a line for a person when the
                // enforcement was partial), located at the file: a new file, so no oldText.
                let diffs: Vec<&Value> = end["content"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|block| block["type"] == "diff")
                    .collect();
                let [diff] = diffs.as_slice() else {
                    panic!("one diff: {end}");
                };
                assert_eq!(diff["newText"], "yes", "{end}");
                assert!(diff.get("oldText").is_none_or(Value::is_null), "{end}");
                let ends_with_file =
                    |path: &Value| path.as_str().is_some_and(|p| p.ends_with(file));
                assert!(ends_with_file(&diff["path"]), "{end}");
                assert!(ends_with_file(&end["locations"][0]["path"]), "{end}");
            }
            Answer::Reject | Answer::Cancel => {
                assert_eq!(end["status"], "failed", "{end}");
                let expected = match self {
                    Answer::Reject => "the user rejected tool \"write_file\"",
                    _ => "approval for tool \"write_file\" was cancelled",
                };
                assert_eq!(result_text(end), expected, "{end}");
                assert!(!scratch.exists(file), "{file} must not be written");
            }
        }
    }
}

/// The options of every permission prompt for `write_file` of `file` in `approval.ask_before`:
/// allow once, allow always, reject once, reject always, the "always" ones for that one file,
/// named by its whole real path.
fn assert_offered(options: &Value, file: &str) {
    let name = |i: usize| options[i]["name"].as_str().unwrap_or_default().to_owned();
    let always = |verb: &str, name: &str| {
        name.starts_with(&format!("Always {verb} write_file on /"))
            && name.ends_with(&format!("/ws/{file} in this session"))
    };
    assert!(always("allow", &name(1)), "{options}");
    assert!(always("reject", &name(3)), "{options}");
    assert_eq!(
        options,
        &json!([
            {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
            {"optionId": "allow-always", "name": name(1), "kind": "allow_always"},
            {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"},
            {"optionId": "reject-always", "name": name(3), "kind": "reject_always"},
        ])
    );
}

const ASK_BEFORE_WRITE_FILE: &str = "[approval]\nask_before = [\"write_file\"]\n";

// ---------------------------------------------------------------------------------------------
// The SDK clients: one flow, with steps

/// A bash write, three write_file calls behind a permission prompt, a long command, and one
/// more answer after the reload.
const SDK_SCRIPT: &str = r#"
[[turn]]
text = "Writing the file."
[[turn.tool_calls]]
name = "bash"
arguments = { command = "printf 'written by agentd\\n' > made-by-agent.txt" }

[[turn]]
text = "Done: made-by-agent.txt is written."

[[turn]]
[[turn.tool_calls]]
name = "write_file"
arguments = { path = "allowed.txt", content = "yes" }

[[turn]]
text = "First write answered."

[[turn]]
[[turn.tool_calls]]
name = "write_file"
arguments = { path = "rejected.txt", content = "yes" }

[[turn]]
text = "Second write answered."

[[turn]]
[[turn.tool_calls]]
name = "write_file"
arguments = { path = "cancelled.txt", content = "yes" }

[[turn]]
text = "Third write answered."

[[turn]]
text = "Waiting."
[[turn.tool_calls]]
name = "bash"
arguments = { command = "touch sleeping && exec sleep TAG" }

[[turn]]
text = "Back after the reload."
"#;

/// The prompts of the flow, in order; the replay shows them again.
const SDK_PROMPTS: [&str; 5] = [
    "Write made-by-agent.txt",
    "Write allowed.txt",
    "Write rejected.txt",
    "Write cancelled.txt",
    "Wait a long time",
];

fn sdk_steps() -> Value {
    json!([
        {"set": "sandbox-mode", "value": "workspace-write"},
        {"prompt": SDK_PROMPTS[0]},
        {"prompt": SDK_PROMPTS[1], "permission": "allow"},
        {"prompt": SDK_PROMPTS[2], "permission": "reject"},
        {"prompt": SDK_PROMPTS[3], "permission": "cancel"},
        {"prompt": SDK_PROMPTS[4], "cancelOn": "tool_call", "cancelWhen": "sleeping"},
        {"checkpoint": "cancelled"},
        {"reload": true},
        {"prompt": "Are you back?"},
    ])
}

/// Runs an SDK client through [`sdk_steps`], checking at the checkpoint that the cancelled
/// command is gone, then checks everything it printed and what is on disk.
fn sdk_flow(client: &str, scratch: &Scratch, mut command: Command, tag: &str) {
    command.stdin(Stdio::piped());
    let mut running = Running::start(command);
    running.until("the checkpoint after the cancel", |e| {
        e["event"] == "checkpoint"
    });
    assert_no_sleeper(tag, &running.seen.join("\n"));
    running.say("go on");
    let run = running.finish(scratch, Leftovers::Fail);
    assert!(run.status.success(), "{client} failed\n{run}");
    let events = run.json_lines();
    check_sdk_events(&events, scratch, &run);
}

fn check_sdk_events(events: &[Value], scratch: &Scratch, run: &Run) {
    let at = |step: u64| -> Vec<&Value> { events.iter().filter(|e| e["step"] == step).collect() };
    let updates_at = |step: u64| -> Vec<&Value> {
        at(step)
            .into_iter()
            .filter(|e| e["event"] == "update")
            .map(|e| &e["update"])
            .collect()
    };
    let one = |step: u64, event: &str| -> &Value {
        let found: Vec<&Value> = at(step)
            .into_iter()
            .filter(|e| e["event"] == event)
            .collect();
        assert_eq!(found.len(), 1, "one {event} at step {step}\n{run}");
        found[0]
    };
    let stop_reason = |step: u64| one(step, "done")["stopReason"].clone();
    assert!(
        events.iter().all(|e| e["event"] != "error"),
        "an error\n{run}"
    );

    // initialize, session/new: the session starts read-only.
    let inits: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "initialize")
        .collect();
    assert_eq!(inits.len(), 2, "one initialize per agent process\n{run}");
    for init in &inits {
        assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
        assert_eq!(
            init["result"]["agentCapabilities"]["loadSession"], true,
            "{init}"
        );
    }
    let session = events
        .iter()
        .find(|e| e["event"] == "session")
        .unwrap_or_else(|| panic!("no session\n{run}"));
    assert_eq!(
        current(&session["configOptions"], "sandbox-mode"),
        "read-only"
    );

    // 0: set_config_option answers the complete list with the new value.
    let config = &one(0, "config")["configOptions"];
    assert_eq!(current(config, "sandbox-mode"), "workspace-write");
    assert_eq!(current(config, "approval-policy"), "ask");

    // 1: the bash call lands under workspace-write; bash is not behind a prompt.
    let updates = updates_at(1);
    let (call, end) = the_call(&updates, run);
    assert_bash_write(call, end, scratch, "made-by-agent.txt");
    assert!(at(1).iter().all(|e| e["event"] != "permission"), "{run}");
    assert_eq!(stop_reason(1), "end_turn");

    // 2, 3, 4: one prompt each, answered allow, reject, cancelled; the turn ends normally.
    for (step, answer) in [(2, Answer::Allow), (3, Answer::Reject), (4, Answer::Cancel)] {
        let updates = updates_at(step);
        let (call, end) = the_call(&updates, run);
        let asked = one(step, "permission");
        assert_eq!(asked["toolCall"]["toolCallId"], call["toolCallId"]);
        assert_offered(&asked["options"], answer.file());
        assert_eq!(asked["answered"], answer.outcome(), "{answer:?}");
        answer.assert_result(call, end, scratch);
        assert_eq!(stop_reason(step), "end_turn", "{answer:?}");
    }

    // 5: session/cancel during the long command ends the turn cancelled, and the call with it.
    one(5, "cancel");
    assert_eq!(stop_reason(5), "cancelled", "{run}");
    let updates = updates_at(5);
    let (call, end) = the_call(&updates, run);
    assert!(
        call["rawInput"]["command"]
            .as_str()
            .is_some_and(|c| c.contains("exec sleep ")),
        "{call}"
    );
    assert_eq!(end["status"], "failed", "{end}");
    assert_eq!(end["rawOutput"]["cancelled"], true, "{end}");

    // 7: the first agent exited by itself; a fresh one replays the session on session/load:
    // the prompts, then the same updates the client saw live, and the switched mode.
    let exits: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "agent-exit")
        .collect();
    assert_eq!(exits.len(), 2, "{run}");
    for exit in &exits {
        assert_eq!(
            exit["code"], 0,
            "an agent did not exit cleanly: {exit}\n{run}"
        );
    }
    assert_eq!(exits[0]["step"], 7, "{run}");
    let loaded = one(7, "load");
    assert_eq!(
        current(&loaded["configOptions"], "sandbox-mode"),
        "workspace-write"
    );
    let replay = updates_at(7);
    let prompts: Vec<&str> = replay
        .iter()
        .filter(|u| u["sessionUpdate"] == "user_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(prompts, SDK_PROMPTS, "{run}");
    let replayed: Vec<&Value> = replay
        .iter()
        .copied()
        .filter(|u| u["sessionUpdate"] != "user_message_chunk")
        .collect();
    let live: Vec<&Value> = (1..=5).flat_map(updates_at).collect();
    assert_eq!(
        joined(&replayed),
        joined(&live),
        "the replay differs from what the client saw live\n{run}"
    );

    // 8: the loaded session goes on where it was.
    assert_eq!(stop_reason(8), "end_turn");
    assert_eq!(agent_text(&updates_at(8)), "Back after the reload.");
}

#[test]
fn typescript_sdk_client_runs_the_whole_flow() {
    let flow = "typescript_sdk_client_runs_the_whole_flow";
    let Some(modules) = installed("typescript-sdk", flow, typescript_sdk()) else {
        return;
    };
    let scratch = Scratch::new("ts");
    scratch.config(ASK_BEFORE_WRITE_FILE);
    let tag = sleep_tag(1);
    // The client runs from a copy whose node_modules is the installed one, wherever that is.
    let client = scratch.root.join("client");
    std::fs::create_dir_all(&client).expect("client dir");
    std::fs::copy(
        external_dir().join("ts-client.mjs"),
        client.join("ts-client.mjs"),
    )
    .expect("copy ts-client.mjs");
    std::os::unix::fs::symlink(&modules, client.join("node_modules")).expect("node_modules");
    let mut command = scratch.command("node");
    command
        .arg(client.join("ts-client.mjs"))
        .args(["--steps", &sdk_steps().to_string()])
        .arg("--")
        .args(scratch.agent(&SDK_SCRIPT.replace("TAG", &tag)));
    sdk_flow("ts-client", &scratch, command, &tag);
}

#[test]
fn python_sdk_client_runs_the_whole_flow() {
    let flow = "python_sdk_client_runs_the_whole_flow";
    let Some(python) = installed("python-sdk", flow, python_sdk()) else {
        return;
    };
    let scratch = Scratch::new("py");
    scratch.config(ASK_BEFORE_WRITE_FILE);
    let tag = sleep_tag(2);
    let mut command = scratch.command(python);
    command
        .arg(external_dir().join("py_client.py"))
        .args(["--steps", &sdk_steps().to_string()])
        .arg("--")
        .args(scratch.agent(&SDK_SCRIPT.replace("TAG", &tag)));
    sdk_flow("py_client", &scratch, command, &tag);
}

/// A model that sets a plan of two steps, then answers.
const PLAN_SCRIPT: &str = r#"
[[turn]]
[[turn.tool_calls]]
name = "update_plan"
arguments = { plan = [
  { content = "Read the notes", priority = "high", status = "completed" },
  { content = "Write the answer", priority = "medium", status = "in_progress" },
] }

[[turn]]
text = "Planned."
"#;

/// The plan [`PLAN_SCRIPT`] sets, as ACP's `plan` update carries it.
fn planned() -> Value {
    json!([
        {"content": "Read the notes", "priority": "high", "status": "completed"},
        {"content": "Write the answer", "priority": "medium", "status": "in_progress"},
    ])
}

/// The commands agentd advertises, checked in the `available_commands_update` a client got.
fn assert_commands_advertised(updates: &[&Value], context: &dyn std::fmt::Display) {
    let advertised: Vec<&Value> = updates
        .iter()
        .copied()
        .filter(|u| u["sessionUpdate"] == "available_commands_update")
        .collect();
    assert!(
        !advertised.is_empty(),
        "no available_commands_update\n{context}"
    );
    let names: Vec<&str> = advertised[0]["availableCommands"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(
        names,
        ["init", "compact", "status", "mcp", "undo"],
        "{context}"
    );
}

/// agentd's answer to `/status` in a read-only session without MCP servers, as a client shows
/// it.
fn assert_status_answer(text: &str, context: &dyn std::fmt::Display) {
    for line in [
        "Session: ",
        "Model: ",
        "Sandbox mode: read-only",
        "Sandbox: ",
        "Approval policy: ask",
        "MCP servers: none",
    ] {
        assert!(
            text.contains(line),
            "the /status answer lacks {line:?}: {text:?}\n{context}"
        );
    }
}

#[test]
fn python_sdk_client_shows_agentds_slash_commands_and_the_plan() {
    let flow = "python_sdk_client_shows_agentds_slash_commands_and_the_plan";
    let Some(python) = installed("python-sdk", flow, python_sdk()) else {
        return;
    };
    let scratch = Scratch::new("py-commands");
    let steps = json!([{"prompt": "/status"}, {"prompt": "Plan it."}]);
    let mut command = scratch.command(python);
    command
        .arg(external_dir().join("py_client.py"))
        .args(["--steps", &steps.to_string()])
        .arg("--")
        .args(scratch.agent(PLAN_SCRIPT));
    let run = run(&scratch, command, Leftovers::Fail);
    assert!(run.status.success(), "py_client failed\n{run}");
    let events = run.json_lines();
    assert!(
        events.iter().all(|e| e["event"] != "error"),
        "an error\n{run}"
    );
    let updates_at = |step: u64| -> Vec<&Value> {
        events
            .iter()
            .filter(|e| e["event"] == "update" && e["step"] == step)
            .map(|e| &e["update"])
            .collect()
    };
    let done = |step: u64| -> Vec<&Value> {
        events
            .iter()
            .filter(|e| e["event"] == "done" && e["step"] == step)
            .map(|e| &e["stopReason"])
            .collect()
    };
    let all: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "update")
        .map(|e| &e["update"])
        .collect();
    assert_commands_advertised(&all, &run);

    // 0: /status, answered by agentd: no model turn, no tool call.
    let status = updates_at(0);
    assert_status_answer(&agent_text(&status), &run);
    assert!(
        status.iter().all(|u| u["sessionUpdate"] != "tool_call"),
        "{run}"
    );
    assert_eq!(done(0), [&json!("end_turn")], "{run}");

    // 1: the model's update_plan reaches the client as ACP's plan, whole.
    let plans: Vec<&Value> = updates_at(1)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "plan")
        .collect();
    assert_eq!(plans.len(), 1, "{run}");
    assert_eq!(plans[0]["entries"], planned(), "{run}");
    assert_eq!(agent_text(&updates_at(1)), "Planned.", "{run}");
    assert_eq!(done(1), [&json!("end_turn")], "{run}");
}

// ---------------------------------------------------------------------------------------------
// acpx

/// A command line for acpx's `--agent`, which splits it into words as a shell would.
fn shell_words(words: &[String]) -> String {
    words
        .iter()
        .map(|word| format!("'{}'", word.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// An acpx command with the agent and the JSON output; `options` go before the subcommand.
fn acpx_command(scratch: &Scratch, cli: &Path, script: &str, options: &[&str]) -> Command {
    acpx_command_for(scratch, cli, &scratch.agent(script), options)
}

/// An acpx command with the agent command line `agent` and the JSON output.
fn acpx_command_for(scratch: &Scratch, cli: &Path, agent: &[String], options: &[&str]) -> Command {
    let mut command = scratch.command("node");
    command.args(acpx_args(cli, agent, options));
    command
}

/// The words after `node` of an acpx command with the agent command line `agent`.
fn acpx_args(cli: &Path, agent: &[String], options: &[&str]) -> Vec<String> {
    let mut args = vec![
        cli.display().to_string(),
        "--agent".to_owned(),
        shell_words(agent),
    ];
    args.extend(
        ["--format", "json", "--json-strict", "--timeout", "60"]
            .iter()
            .chain(options)
            .map(|word| (*word).to_owned()),
    );
    args
}

/// The JSON-RPC messages among acpx's output lines.
struct Wire<'a> {
    lines: &'a [Value],
    run: &'a Run,
}

impl Wire<'_> {
    /// The requests of a method acpx sent.
    fn requests(&self, method: &str) -> Vec<&Value> {
        self.lines
            .iter()
            .filter(|m| m["method"] == method && m.get("id").is_some())
            .collect()
    }

    /// The one request of a method and the answer to it.
    fn exchange(&self, method: &str) -> (&Value, &Value) {
        let requests = self.requests(method);
        assert_eq!(requests.len(), 1, "one {method}\n{}", self.run);
        let id = &requests[0]["id"];
        let answer = self
            .lines
            .iter()
            .find(|m| m["id"] == *id && m.get("method").is_none())
            .unwrap_or_else(|| panic!("no answer to {method}\n{}", self.run));
        (requests[0], answer)
    }

    fn updates(&self) -> Vec<&Value> {
        self.lines
            .iter()
            .filter(|m| m["method"] == "session/update")
            .map(|m| &m["params"]["update"])
            .collect()
    }
}

/// One bash write and one write_file behind a permission prompt, in one turn.
fn acpx_exec_script(answer: Answer) -> String {
    format!(
        r#"
[[turn]]
text = "Writing both files."
[[turn.tool_calls]]
name = "bash"
arguments = {{ command = "printf 'written by agentd\\n' > made-by-agent.txt" }}
[[turn.tool_calls]]
name = "write_file"
arguments = {{ path = "{}", content = "yes" }}

[[turn]]
text = "Done."
"#,
        answer.file()
    )
}

/// `acpx exec` with the sandbox switched to workspace-write and the permission prompt answered
/// as `answer` by the given permission options; checks the wire, the files and acpx's exit code.
fn acpx_exec_flow(flow: &str, answer: Answer, permission_options: &[&str], rc: i32) {
    let Some(cli) = installed("acpx", flow, acpx()) else {
        return;
    };
    let scratch = Scratch::new(&format!("acpx-{answer:?}"));
    scratch.config(ASK_BEFORE_WRITE_FILE);
    let mut command = acpx_command(
        &scratch,
        &cli,
        &acpx_exec_script(answer),
        permission_options,
    );
    command.args([
        "exec",
        "--config-option",
        "sandbox-mode=workspace-write",
        "Write both files",
    ]);
    let run = run(&scratch, command, Leftovers::Fail);
    assert_eq!(run.status.code(), Some(rc), "acpx's exit code\n{run}");
    let lines = run.json_lines();
    let wire = Wire {
        lines: &lines,
        run: &run,
    };

    let (_, init) = wire.exchange("initialize");
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    let (_, new) = wire.exchange("session/new");
    assert_eq!(
        current(&new["result"]["configOptions"], "sandbox-mode"),
        "read-only"
    );
    let (set, switched) = wire.exchange("session/set_config_option");
    assert_eq!(set["params"]["configId"], "sandbox-mode", "{set}");
    assert_eq!(set["params"]["value"], "workspace-write", "{set}");
    assert_eq!(
        current(&switched["result"]["configOptions"], "sandbox-mode"),
        "workspace-write"
    );

    let updates = wire.updates();
    let call_of = |kind: &str| -> (&Value, &Value) {
        let picked: Vec<&Value> = updates
            .iter()
            .copied()
            .filter(|u| u["kind"] == kind || u["sessionUpdate"] == "tool_call_update")
            .collect();
        let call = picked
            .iter()
            .copied()
            .find(|u| u["sessionUpdate"] == "tool_call" && u["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind} call\n{run}"));
        let mine: Vec<&Value> = picked
            .into_iter()
            .filter(|u| u["toolCallId"] == call["toolCallId"])
            .collect();
        the_call(&mine, &run)
    };
    let (call, end) = call_of("execute");
    assert_bash_write(call, end, &scratch, "made-by-agent.txt");

    let (call, end) = call_of("edit");
    let asked = wire.requests("session/request_permission");
    assert_eq!(asked.len(), 1, "one permission prompt\n{run}");
    assert_eq!(
        asked[0]["params"]["toolCall"]["toolCallId"],
        call["toolCallId"]
    );
    assert_offered(&asked[0]["params"]["options"], answer.file());
    let reply = lines
        .iter()
        .find(|m| m["id"] == asked[0]["id"] && m.get("method").is_none())
        .unwrap_or_else(|| panic!("acpx did not answer the permission prompt\n{run}"));
    assert_eq!(reply["result"]["outcome"], answer.outcome(), "{reply}");
    answer.assert_result(call, end, &scratch);

    let (_, done) = wire.exchange("session/prompt");
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    // acpx's own errors: only the one that `fail` announces.
    let errors: Vec<&Value> = lines.iter().filter(|m| m.get("error").is_some()).collect();
    match answer {
        Answer::Cancel => {
            assert_eq!(errors.len(), 1, "{run}");
            assert_eq!(errors[0]["error"]["code"], -32072, "{run}");
        }
        _ => assert!(errors.is_empty(), "an error on the wire\n{run}"),
    }
}

#[test]
fn acpx_exec_approve_all_allows_the_write() {
    let flow = "acpx_exec_approve_all_allows_the_write";
    acpx_exec_flow(flow, Answer::Allow, &["--approve-all"], 0);
}

#[test]
fn acpx_exec_deny_all_rejects_the_write() {
    // acpx exits 5 when every permission prompt was denied.
    let flow = "acpx_exec_deny_all_rejects_the_write";
    acpx_exec_flow(flow, Answer::Reject, &["--deny-all"], 5);
}

#[test]
fn acpx_exec_without_a_prompt_to_ask_cancels_the_write() {
    // No TTY and `fail`: acpx answers cancelled, reports -32072 and exits 5.
    let flow = "acpx_exec_without_a_prompt_to_ask_cancels_the_write";
    acpx_exec_flow(
        flow,
        Answer::Cancel,
        &["--non-interactive-permissions", "fail"],
        5,
    );
}

/// A read-only session whose model escalates one write to workspace-write.
const ACPX_ESCALATION_SCRIPT: &str = r#"
[[turn]]
[[turn.tool_calls]]
name = "bash"
arguments = { command = "echo saved > escalated.txt", sandbox_permissions = "workspace-write", justification = "the answer has to be saved" }

[[turn]]
text = "Saved."
"#;

#[test]
fn acpx_at_a_terminal_shows_the_command_and_the_target_mode_in_its_permission_prompt() {
    let flow = "acpx_at_a_terminal_shows_the_command_and_the_target_mode_in_its_permission_prompt";
    let Some(cli) = installed("acpx", flow, acpx()) else {
        return;
    };
    let scratch = Scratch::new("acpx-tty");
    let screen = scratch.root.join("terminal.txt");
    // acpx asks a person only when its stdin and stderr are a terminal: a pseudo-terminal,
    // answered "y" once the question is on it.
    let mut command = scratch.command("python3");
    command
        .arg(external_dir().join("pty_answer.py"))
        .arg(&screen)
        .args(["y", "--", "node"])
        .args(acpx_args(&cli, &scratch.agent(ACPX_ESCALATION_SCRIPT), &[]))
        .args(["exec", "Save the answer"]);
    let run = run(&scratch, command, Leftovers::Fail);
    assert_eq!(run.status.code(), Some(0), "acpx's exit code\n{run}");
    let shown = std::fs::read_to_string(&screen).expect("the terminal's transcript");
    let question = "[permission] Allow echo saved > escalated.txt (with workspace-write) \
                    [execute]? (y/N)";
    assert!(
        shown.contains(question),
        "the prompt names the command and the mode it would run under:\n{shown}\n{run}"
    );
    let lines = run.json_lines();
    let wire = Wire {
        lines: &lines,
        run: &run,
    };
    let asked = wire.requests("session/request_permission");
    assert_eq!(asked.len(), 1, "{run}");
    assert_eq!(
        asked[0]["params"]["toolCall"]["content"][0]["content"]["text"],
        "Run `echo saved > escalated.txt` with workspace-write (now read-only): the answer has \
         to be saved",
        "{run}"
    );
    assert_eq!(asked[0]["params"]["toolCall"]["status"], "pending");
    assert_eq!(
        scratch.read("escalated.txt"),
        "saved\n",
        "answered y, the escalated write landed"
    );
}

#[test]
fn acpx_exec_exits_non_zero_when_the_model_answers_500_every_time() {
    let flow = "acpx_exec_exits_non_zero_when_the_model_answers_500_every_time";
    let Some(cli) = installed("acpx", flow, acpx()) else {
        return;
    };
    let server =
        support::model_server::ModelServer::start(|_, _| support::model_server::Reply::Status {
            code: 500,
            body: r#"{"error":{"message":"upstream exploded"}}"#.into(),
        });
    let scratch = Scratch::new("acpx-model-500");
    scratch.config(&format!(
        "[model]\nbase_url = \"{}\"\nmodel = \"m\"\nmax_retries = 1\n",
        server.base_url
    ));
    let mut command = acpx_command_for(&scratch, &cli, &scratch.configured_agent(), &[]);
    command.args(["exec", "Say hello"]);
    let run = run(&scratch, command, Leftovers::Fail);
    // acpx exits 1 when the prompt ended in an error (0 would read as an answer).
    assert_eq!(
        run.status.code(),
        Some(1),
        "acpx must not exit 0 when the model failed\n{run}"
    );
    let lines = run.json_lines();
    let wire = Wire {
        lines: &lines,
        run: &run,
    };
    let (_, done) = wire.exchange("session/prompt");
    assert!(done.get("result").is_none(), "no stop reason: {done}");
    assert_eq!(done["error"]["code"], -32603, "{done}");
    assert_eq!(
        done["error"]["data"],
        json!({"kind": "http", "status": 500, "retries": 1}),
        "{done}"
    );
    assert_eq!(
        server.requests().len(),
        2,
        "one attempt and one retry\n{run}"
    );
}

/// acpx keeps its queue owners' sockets in `/tmp/acpx-<hash of HOME>`; removes it at the end.
struct AcpxSockets(Option<PathBuf>);

impl AcpxSockets {
    fn of(home: &Path) -> AcpxSockets {
        let out = Command::new("node")
            .args([
                "-e",
                "const h = require('node:crypto').createHash('sha256'); \
                 console.log(h.update(process.argv[1]).digest('hex').slice(0, 10))",
            ])
            .arg(home)
            .output();
        let dir = out
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .map(|hash| PathBuf::from(format!("/tmp/acpx-{hash}")));
        AcpxSockets(dir)
    }
}

impl Drop for AcpxSockets {
    fn drop(&mut self) {
        if let Some(dir) = &self.0 {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// A bash write, then a long command in the same prompt; one more answer after the reload.
const ACPX_SESSION_SCRIPT: &str = r#"
[[turn]]
text = "Writing the file."
[[turn.tool_calls]]
name = "bash"
arguments = { command = "printf 'written by agentd\\n' > made-by-agent.txt" }

[[turn]]
text = "Waiting."
[[turn.tool_calls]]
name = "bash"
arguments = { command = "touch sleeping && exec sleep TAG" }

[[turn]]
text = "Back after the reload."
"#;

#[test]
fn acpx_persistent_session_is_cancelled_then_reloaded_by_a_fresh_agent() {
    let flow = "acpx_persistent_session_is_cancelled_then_reloaded_by_a_fresh_agent";
    let Some(cli) = installed("acpx", flow, acpx()) else {
        return;
    };
    let scratch = Scratch::new("acpx-session");
    let _sockets = AcpxSockets::of(&scratch.root.join("home"));
    let tag = sleep_tag(3);
    let script = ACPX_SESSION_SCRIPT.replace("TAG", &tag);
    // Queue owners stay 1 s after their last prompt.
    let acpx = |options: &[&str]| {
        let mut command = acpx_command(&scratch, &cli, &script, &["--ttl", "1"]);
        command.args(options);
        command
    };

    // sessions new: initialize, session/new; the agent exits with acpx.
    let run_new = run(&scratch, acpx(&["sessions", "new"]), Leftovers::Fail);
    assert!(run_new.status.success(), "{run_new}");
    let created = run_new.json_lines();
    let session = created
        .iter()
        .find_map(|m| m["acpxSessionId"].as_str())
        .unwrap_or_else(|| panic!("no session id\n{run_new}"))
        .to_owned();

    // set: a switch acpx remembers and sends again after each reconnect.
    let run_set = run(
        &scratch,
        acpx(&["set", "sandbox-mode", "workspace-write"]),
        Leftovers::KillQueueOwners,
    );
    assert!(run_set.status.success(), "{run_set}");
    let set = run_set.json_lines();
    let answer = set
        .iter()
        .find(|m| m["action"] == "config_set")
        .unwrap_or_else(|| panic!("no config_set\n{run_set}"));
    assert_eq!(
        current(&answer["configOptions"], "sandbox-mode"),
        "workspace-write"
    );

    // A prompt in the background: the bash write, then the long command, which `acpx cancel`
    // interrupts through the queue owner.
    let mut prompt = Running::start(acpx(&[
        "--approve-all",
        "Write made-by-agent.txt, then wait",
    ]));
    prompt.until("the long command", |m| {
        m["params"]["update"]["rawInput"]["command"]
            .as_str()
            .is_some_and(|c| c.contains("exec sleep "))
    });
    // The command itself says it is running: then the cancel has something to stop.
    assert!(
        support::wait_for_file(&scratch.ws(), "sleeping", Duration::from_secs(30)),
        "the long command never started"
    );
    let cancel = run(&scratch, acpx(&["cancel"]), Leftovers::Keep);
    assert!(cancel.status.success(), "{cancel}");
    let said = cancel.json_lines();
    assert!(
        said.iter()
            .any(|m| m["action"] == "cancel_result" && m["cancelled"] == true),
        "{cancel}"
    );
    prompt.until("the cancelled stop reason", |m| {
        m["result"]["stopReason"].is_string()
    });
    assert_no_sleeper(&tag, &prompt.seen.join("\n"));
    let first = prompt.finish(&scratch, Leftovers::KillQueueOwners);
    assert!(first.status.success(), "{first}");
    let lines = first.json_lines();
    let wire = Wire {
        lines: &lines,
        run: &first,
    };
    // A reconnect: the session is resumed (agentd offers session/resume, which acpx prefers to
    // session/load: nothing is replayed), the switch sent again, then the prompt.
    let (load, _) = wire.exchange("session/resume");
    assert_eq!(load["params"]["sessionId"], session.as_str());
    assert!(wire.requests("session/load").is_empty(), "{first}");
    assert!(wire.requests("session/new").is_empty(), "{first}");
    let (set, _) = wire.exchange("session/set_config_option");
    assert_eq!(set["params"]["value"], "workspace-write", "{set}");
    assert!(
        lines.iter().any(|m| m["method"] == "session/cancel"),
        "acpx sent no session/cancel\n{first}"
    );
    let (_, done) = wire.exchange("session/prompt");
    assert_eq!(done["result"]["stopReason"], "cancelled", "{done}");
    let updates = wire.updates();
    let ends: Vec<&Value> = updates
        .iter()
        .copied()
        .filter(|u| u["sessionUpdate"] == "tool_call_update")
        .collect();
    assert_eq!(ends.len(), 2, "{first}");
    assert_eq!(ends[0]["status"], "completed", "{}", ends[0]);
    assert_eq!(ends[0]["rawOutput"]["mode"], "workspace-write");
    assert_eq!(scratch.read("made-by-agent.txt"), "written by agentd\n");
    assert_eq!(ends[1]["status"], "failed", "{}", ends[1]);
    assert_eq!(ends[1]["rawOutput"]["cancelled"], true, "{}", ends[1]);

    // Nothing of the first prompt runs now: the next prompt starts a fresh agent, which resumes
    // the session from its log and goes on at the model's third turn.
    assert_eq!(processes_under(&scratch.root), Vec::<u32>::new());
    let second = run(
        &scratch,
        acpx(&["--approve-all", "Are you back?"]),
        Leftovers::KillQueueOwners,
    );
    assert!(second.status.success(), "{second}");
    let lines = second.json_lines();
    let wire = Wire {
        lines: &lines,
        run: &second,
    };
    let (_, init) = wire.exchange("initialize");
    assert_eq!(
        init["result"]["agentCapabilities"]["loadSession"], true,
        "{init}"
    );
    let (load, loaded) = wire.exchange("session/resume");
    assert_eq!(load["params"]["sessionId"], session.as_str());
    assert_eq!(
        current(&loaded["result"]["configOptions"], "sandbox-mode"),
        "workspace-write",
        "the switch was kept in the session log"
    );
    let (_, done) = wire.exchange("session/prompt");
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert_eq!(agent_text(&wire.updates()), "Back after the reload.");
}

#[test]
fn acpx_shows_agentds_slash_commands_and_the_plan() {
    let flow = "acpx_shows_agentds_slash_commands_and_the_plan";
    let Some(cli) = installed("acpx", flow, acpx()) else {
        return;
    };
    // /status: agentd's own answer, the commands advertised before it.
    let scratch = Scratch::new("acpx-status");
    let mut command = acpx_command(&scratch, &cli, PLAN_SCRIPT, &[]);
    command.args(["exec", "/status"]);
    let run_status = run(&scratch, command, Leftovers::Fail);
    assert_eq!(run_status.status.code(), Some(0), "{run_status}");
    let lines = run_status.json_lines();
    let wire = Wire {
        lines: &lines,
        run: &run_status,
    };
    let updates = wire.updates();
    assert_commands_advertised(&updates, &run_status);
    assert_status_answer(&agent_text(&updates), &run_status);
    assert!(
        updates.iter().all(|u| u["sessionUpdate"] != "tool_call"),
        "{run_status}"
    );
    let (_, done) = wire.exchange("session/prompt");
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");

    // A plan: the model's update_plan reaches acpx as ACP's plan, whole.
    let scratch = Scratch::new("acpx-plan");
    let mut command = acpx_command(&scratch, &cli, PLAN_SCRIPT, &[]);
    command.args(["exec", "Plan it."]);
    let run_plan = run(&scratch, command, Leftovers::Fail);
    assert_eq!(run_plan.status.code(), Some(0), "{run_plan}");
    let lines = run_plan.json_lines();
    let wire = Wire {
        lines: &lines,
        run: &run_plan,
    };
    let plans: Vec<&Value> = wire
        .updates()
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "plan")
        .collect();
    assert_eq!(plans.len(), 1, "{run_plan}");
    assert_eq!(plans[0]["entries"], planned(), "{run_plan}");
}

// ---------------------------------------------------------------------------------------------
// A subagent's tool call

/// The top level delegates to the built-in `general` persona (nothing is configured), whose
/// child runs one command and answers.
const SUBAGENT_SCRIPT: &str = r#"
[[turn]]
[[turn.tool_calls]]
name = "task"
arguments = { persona = "general", prompt = "Say hello from a command.", description = "say hello" }

[[turn]]
text = "The helper said hello."

[[agents.general.turn]]
[[agents.general.turn.tool_calls]]
name = "bash"
arguments = { command = "echo hello from the child" }

[[agents.general.turn]]
text = "It printed hello."
"#;

/// The prompt that makes [`SUBAGENT_SCRIPT`] delegate.
const SUBAGENT_PROMPT: &str = "Ask a helper to say hello";

/// Checks that `updates` (every `session/update` a client received, in order) show the `task`
/// call and the child's command as a tool call of its own, nested under it by
/// `_meta.agentd.parentToolCallId`, titled with the persona and ended with the command's output.
fn assert_nested_child_call(updates: &[&Value], context: &dyn std::fmt::Display) {
    let calls: Vec<&Value> = updates
        .iter()
        .copied()
        .filter(|u| u["sessionUpdate"] == "tool_call")
        .collect();
    let task = calls
        .iter()
        .find(|c| c["title"] == "Delegate to general: say hello")
        .unwrap_or_else(|| panic!("no task call\n{context}"));
    let child = calls
        .iter()
        .find(|c| c["_meta"]["agentd"]["parentToolCallId"] == task["toolCallId"])
        .unwrap_or_else(|| panic!("no call nested under the task call\n{context}"));
    assert_eq!(
        child["title"], "general: echo hello from the child",
        "{context}"
    );
    assert_eq!(child["kind"], "execute", "{context}");
    assert_eq!(child["_meta"]["agentd"]["persona"], "general", "{context}");
    assert_ne!(child["toolCallId"], task["toolCallId"], "{context}");
    let end = updates
        .iter()
        .rfind(|u| u["toolCallId"] == child["toolCallId"] && u.get("status").is_some())
        .unwrap_or_else(|| panic!("the child's call never ended\n{context}"));
    assert_eq!(end["status"], "completed", "{context}");
    assert!(
        result_text(end).contains("hello from the child"),
        "{end}\n{context}"
    );
}

#[test]
fn acpx_shows_a_subagents_tool_call_nested_under_the_task_call() {
    let flow = "acpx_shows_a_subagents_tool_call_nested_under_the_task_call";
    let Some(cli) = installed("acpx", flow, acpx()) else {
        return;
    };
    let scratch = Scratch::new("acpx-subagent");
    let mut command = acpx_command(&scratch, &cli, SUBAGENT_SCRIPT, &["--approve-all"]);
    command.args(["exec", SUBAGENT_PROMPT]);
    let run = run(&scratch, command, Leftovers::Fail);
    assert!(run.status.success(), "{run}");
    let lines = run.json_lines();
    let wire = Wire {
        lines: &lines,
        run: &run,
    };
    let (_, done) = wire.exchange("session/prompt");
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert_nested_child_call(&wire.updates(), &run);
}

#[test]
fn python_sdk_client_shows_a_subagents_tool_call_nested_under_the_task_call() {
    let flow = "python_sdk_client_shows_a_subagents_tool_call_nested_under_the_task_call";
    let Some(python) = installed("python-sdk", flow, python_sdk()) else {
        return;
    };
    let scratch = Scratch::new("py-subagent");
    let mut command = scratch.command(python);
    command
        .arg(external_dir().join("py_client.py"))
        .args(["--steps", &json!([{"prompt": SUBAGENT_PROMPT}]).to_string()])
        .arg("--")
        .args(scratch.agent(SUBAGENT_SCRIPT));
    let run = run(&scratch, command, Leftovers::Fail);
    assert!(run.status.success(), "{run}");
    let events = run.json_lines();
    assert!(events.iter().all(|e| e["event"] != "error"), "{run}");
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "done" && e["stopReason"] == "end_turn"),
        "{run}"
    );
    let updates: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "update")
        .map(|e| &e["update"])
        .collect();
    assert_nested_child_call(&updates, &run);
}
