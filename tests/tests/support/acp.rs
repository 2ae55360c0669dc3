//! A scripted ACP client: drives the real `agentd acp` over stdio, line by line, answers the
//! agent's requests as told, and keeps the whole transcript for snapshots.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::binary;

/// How the client answers `session/request_permission`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Permission {
    /// Selects the option of kind `allow_once` (`cancelled` if none is offered).
    AllowOnce,
    /// Selects the option of kind `reject_once` (`cancelled` if none is offered).
    Reject,
    /// Answers `{"outcome": "cancelled"}`.
    Cancel,
    /// Selects this option id, offered or not.
    Option(String),
    /// Selects the option of this kind (`allow_once`, `reject_once`, …); when none is offered,
    /// answers `cancelled` and notes the kind in [`AcpClient::unoffered`].
    Kind(String),
    /// Does not answer: the test answers later with [`AcpClient::respond`], or never.
    Ignore,
}

/// One running `agentd acp` and the client side of its connection.
pub struct AcpClient {
    pub child: Child,
    /// `None` once [`AcpClient::hang_up`] closed it.
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<Value>,
    next_id: u64,
    /// Every message, both directions, in order: `(">", msg)` sent, `("<", msg)` received.
    pub transcript: Vec<(&'static str, Value)>,
    /// How permission requests are answered once `answers` is empty.
    pub permission: Permission,
    /// Scripted answers to the next permission requests, first in first used.
    pub answers: VecDeque<Permission>,
    /// Every `session/request_permission` received, in order.
    pub permission_requests: Vec<Value>,
    /// The kinds asked for by [`Permission::Kind`] that a request did not offer.
    pub unoffered: Vec<String>,
    /// The editor's buffers, by absolute path: when set, `initialize` advertises
    /// `fs.readTextFile` (never `fs.writeTextFile`) and `fs/read_text_file` of one of these
    /// paths answers its text; any other read is answered an error.
    pub editor_buffers: Option<HashMap<PathBuf, String>>,
    /// Every `fs/read_text_file` and `fs/write_text_file` request agentd sent, in order.
    pub fs_requests: Vec<Value>,
}

/// A scratch area for one test: a workspace, a state dir, a config home.
pub struct Scratch {
    pub root: PathBuf,
}

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        Scratch::new_in(&std::env::temp_dir(), tag)
    }

    /// A scratch area under `base` instead of the temporary directory.
    pub fn new_in(base: &Path, tag: &str) -> Scratch {
        let root = base.join(format!("agentd-acp-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for dir in ["ws", "state", "config", "home", "tmp"] {
            std::fs::create_dir_all(root.join(dir)).expect("scratch dirs");
        }
        Scratch { root }
    }

    pub fn ws(&self) -> PathBuf {
        std::fs::canonicalize(self.root.join("ws")).expect("ws")
    }

    pub fn state(&self) -> PathBuf {
        self.root.join("state")
    }

    /// `agentd SUBCOMMAND` with a small, known environment (PATH, and HOME and the XDG
    /// directories inside the scratch area), in the workspace.
    pub fn agentd(&self, subcommand: &str) -> Command {
        let mut command = Command::new(binary("agentd"));
        command
            .arg(subcommand)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", self.root.join("home"))
            .env("XDG_CONFIG_HOME", self.root.join("config"))
            .env("XDG_STATE_HOME", self.root.join("state"))
            .current_dir(self.ws());
        command
    }

    /// Writes `agentd.toml` where agentd finds it (`$XDG_CONFIG_HOME/agentd/`).
    pub fn config(&self, text: &str) {
        let dir = self.root.join("config").join("agentd");
        std::fs::create_dir_all(&dir).expect("config dir");
        std::fs::write(dir.join("agentd.toml"), text).expect("agentd.toml");
    }

    /// Every event of session `id`'s log, in order.
    pub fn log(&self, id: &str) -> Vec<Value> {
        let path = self.state().join(format!("{id}.jsonl"));
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .lines()
            .map(|line| serde_json::from_str(line).expect("a log line is JSON"))
            .collect()
    }

    /// Writes a model script and returns its path.
    pub fn script(&self, text: &str) -> PathBuf {
        let path = self.root.join("script.toml");
        std::fs::write(&path, text).expect("script");
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
        // The per-user base under `/var/tmp` (`scratch_base`) goes with its last scratch area:
        // removing it fails while another test's is in it, and a test that makes one after
        // makes the base again (`create_dir_all`).
        if let Some(base) = self.root.parent()
            && base
                .file_name()
                .is_some_and(|name| name.to_string_lossy().starts_with(SCRATCH_BASE_PREFIX))
        {
            let _ = std::fs::remove_dir(base);
        }
    }
}

impl AcpClient {
    /// Starts `agentd acp` with the scripted model and the scratch's state dir.
    pub fn start(scratch: &Scratch, script: &Path, extra: &[&str]) -> AcpClient {
        let mut args: Vec<&std::ffi::OsStr> = vec!["--model-script".as_ref(), script.as_os_str()];
        args.extend(extra.iter().map(|a| std::ffi::OsStr::new(*a)));
        AcpClient::spawn(scratch, &args)
    }

    /// Starts `agentd acp` with the model its configuration file names (see
    /// [`Scratch::config`]) and the scratch's state dir.
    pub fn start_configured(scratch: &Scratch, extra: &[&str]) -> AcpClient {
        let args: Vec<&std::ffi::OsStr> = extra.iter().map(|a| std::ffi::OsStr::new(*a)).collect();
        AcpClient::spawn(scratch, &args)
    }

    /// [`AcpClient::start_configured`] with agentd's stderr written to `stderr` instead of the
    /// test's, for tests of what agentd tells the person running it.
    pub fn start_configured_logging(scratch: &Scratch, extra: &[&str], stderr: &Path) -> AcpClient {
        let args: Vec<&std::ffi::OsStr> = extra.iter().map(|a| std::ffi::OsStr::new(*a)).collect();
        let file = std::fs::File::create(stderr).expect("stderr file");
        AcpClient::spawn_with(scratch, &args, Stdio::from(file))
    }

    /// `agentd acp` with `args`, the scratch's state dir, a clean environment and the
    /// workspace as its directory; stdio is the caller's to set.
    pub fn command(scratch: &Scratch, args: &[&std::ffi::OsStr]) -> Command {
        let mut command = Command::new(binary("agentd"));
        command
            .arg("acp")
            .args(args)
            .arg("--state-dir")
            .arg(scratch.state())
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", scratch.root.join("home"))
            .env("XDG_CONFIG_HOME", scratch.root.join("config"))
            .env("LANG", "C.UTF-8")
            // Sessions make their temp directories here, where a test can look.
            .env("TMPDIR", scratch.root.join("tmp"))
            .current_dir(scratch.ws());
        command
    }

    fn spawn(scratch: &Scratch, args: &[&std::ffi::OsStr]) -> AcpClient {
        AcpClient::spawn_with(scratch, args, Stdio::inherit())
    }

    fn spawn_with(scratch: &Scratch, args: &[&std::ffi::OsStr], stderr: Stdio) -> AcpClient {
        AcpClient::spawn_command(AcpClient::command(scratch, args), stderr)
    }

    /// Starts `command` (an `agentd acp`, see [`AcpClient::command`], maybe run by a wrapper,
    /// see [`wrapped`]) with the client's side of its stdin and stdout.
    pub fn spawn_command(mut command: Command, stderr: Stdio) -> AcpClient {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("start agentd acp");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| json!({"unparsable": line, "error": e.to_string()}));
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        AcpClient {
            child,
            stdin: Some(stdin),
            lines,
            next_id: 0,
            transcript: Vec::new(),
            permission: Permission::AllowOnce,
            answers: VecDeque::new(),
            permission_requests: Vec::new(),
            unoffered: Vec::new(),
            editor_buffers: None,
            fs_requests: Vec::new(),
        }
    }

    /// The capabilities `initialize` advertises: none, or `fs.readTextFile` when the client
    /// has editor buffers.
    fn capabilities(&self) -> Value {
        match self.editor_buffers {
            Some(_) => json!({"fs": {"readTextFile": true, "writeTextFile": false}}),
            None => json!({}),
        }
    }

    fn write(&mut self, message: Value) {
        let mut line = serde_json::to_string(&message).expect("json");
        line.push('\n');
        let stdin = self
            .stdin
            .as_mut()
            .expect("the connection to agentd is open (not hung up)");
        stdin.write_all(line.as_bytes()).expect("write to agentd");
        stdin.flush().expect("flush");
        self.transcript.push((">", message));
    }

    /// Writes `bytes` and a newline as one line, whatever they are (malformed input); noted in
    /// the transcript as `{"raw": …}`.
    pub fn write_line(&mut self, bytes: &[u8]) {
        let stdin = self
            .stdin
            .as_mut()
            .expect("the connection to agentd is open (not hung up)");
        stdin.write_all(bytes).expect("write to agentd");
        stdin.write_all(b"\n").expect("write to agentd");
        stdin.flush().expect("flush");
        let shown: String = String::from_utf8_lossy(bytes).chars().take(200).collect();
        self.transcript.push((">", json!({ "raw": shown })));
    }

    /// Closes agentd's stdin: the client ends the connection.
    pub fn hang_up(&mut self) {
        self.stdin = None;
    }

    /// Sends a request; returns its id.
    pub fn send(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.write(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.write(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// The next message from agentd, answering its requests on the way. `None` at EOF or after
    /// `limit`.
    pub fn next(&mut self, limit: Duration) -> Option<Value> {
        let message = self.lines.recv_timeout(limit).ok()?;
        self.transcript.push(("<", message.clone()));
        if message.get("method").is_some() && message.get("id").is_some() {
            self.answer(&message);
        }
        Some(message)
    }

    fn answer(&mut self, request: &Value) {
        let id = request["id"].clone();
        let result = match request["method"].as_str() {
            Some("session/request_permission") => {
                self.permission_requests.push(request.clone());
                let how = self
                    .answers
                    .pop_front()
                    .unwrap_or_else(|| self.permission.clone());
                let by_kind = |kind: &str| {
                    request["params"]["options"]
                        .as_array()?
                        .iter()
                        .find(|o| o["kind"] == kind)
                        .map(|o| o["optionId"].clone())
                };
                let chosen = match how {
                    Permission::AllowOnce => by_kind("allow_once"),
                    Permission::Reject => by_kind("reject_once"),
                    Permission::Cancel => None,
                    Permission::Option(option) => Some(json!(option)),
                    Permission::Kind(kind) => {
                        let chosen = by_kind(&kind);
                        if chosen.is_none() {
                            self.unoffered.push(kind);
                        }
                        chosen
                    }
                    Permission::Ignore => return,
                };
                match chosen {
                    Some(option) => json!({"outcome": {"outcome": "selected", "optionId": option}}),
                    None => json!({"outcome": {"outcome": "cancelled"}}),
                }
            }
            Some("fs/read_text_file") => {
                self.fs_requests.push(request.clone());
                let path = PathBuf::from(request["params"]["path"].as_str().unwrap_or_default());
                let text = self
                    .editor_buffers
                    .as_ref()
                    .and_then(|buffers| buffers.get(&path).cloned());
                match text {
                    Some(text) => json!({"content": text}),
                    None => {
                        self.write(json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32002, "message": "no such buffer in the test client"}}));
                        return;
                    }
                }
            }
            method => {
                if method == Some("fs/write_text_file") {
                    self.fs_requests.push(request.clone());
                }
                self.write(json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "not supported by the test client"}}));
                return;
            }
        };
        self.write(json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    /// Answers a request of the agent (one left unanswered by [`Permission::Ignore`]).
    pub fn respond(&mut self, id: &Value, result: Value) {
        self.write(json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    /// Reads until the response to `id`; returns it and the notifications seen on the way.
    pub fn until_response(&mut self, id: u64, limit: Duration) -> (Value, Vec<Value>) {
        let deadline = Instant::now() + limit;
        let mut notes = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = self
                .next(left)
                .unwrap_or_else(|| panic!("no response to request {id} within {limit:?}"));
            if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                return (message, notes);
            }
            if message.get("method").and_then(Value::as_str) == Some("session/update") {
                notes.push(message);
            }
        }
    }

    /// Sends a request and waits for its answer.
    pub fn request(&mut self, method: &str, params: Value) -> (Value, Vec<Value>) {
        let id = self.send(method, params);
        self.until_response(id, Duration::from_secs(60))
    }

    /// `initialize` then `session/new` in the scratch's workspace; returns the session id.
    pub fn open_session(&mut self, cwd: &Path) -> String {
        self.new_session(cwd).0
    }

    /// `initialize` then `session/new` in `cwd`, which must succeed; returns the session id and
    /// the answer's result (its `configOptions`, `modes`).
    pub fn new_session(&mut self, cwd: &Path) -> (String, Value) {
        let capabilities = self.capabilities();
        let (init, _) = self.request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": capabilities}),
        );
        assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
        let (new, _) = self.request("session/new", json!({"cwd": cwd, "mcpServers": []}));
        let id = new["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("session/new failed: {new}"))
            .to_owned();
        (id, new["result"].clone())
    }

    /// `initialize` then `session/load` of `session` in `cwd`, which must succeed; returns the
    /// load's answer and the updates it replayed.
    pub fn load_session(&mut self, cwd: &Path, session: &str) -> (Value, Vec<Value>) {
        let capabilities = self.capabilities();
        let (init, _) = self.request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": capabilities}),
        );
        assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
        let (loaded, notes) = self.request(
            "session/load",
            json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
        );
        assert!(
            loaded.get("result").is_some(),
            "session/load failed: {loaded}"
        );
        (loaded, notes)
    }

    pub fn prompt(&mut self, session: &str, text: &str) -> (Value, Vec<Value>) {
        self.request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        )
    }
}

impl Drop for AcpClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `command` run by `wrapper` (a program and its first arguments), in the same directory with
/// the same environment (cleared, then what `command` sets).
pub fn wrapped(command: &Command, wrapper: &[&std::ffi::OsStr]) -> Command {
    let (program, leading) = wrapper.split_first().expect("a wrapper program");
    let mut out = Command::new(program);
    out.args(leading)
        .arg(command.get_program())
        .args(command.get_args())
        .env_clear();
    for (key, value) in command.get_envs() {
        if let Some(value) = value {
            out.env(key, value);
        }
    }
    if let Some(dir) = command.get_current_dir() {
        out.current_dir(dir);
    }
    out
}

/// The transcript as stable text: ids, paths and times replaced by placeholders.
pub fn render(transcript: &[(&'static str, Value)], replacements: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for (dir, message) in transcript {
        let mut text = serde_json::to_string(message).expect("json");
        for (from, to) in replacements {
            text = text.replace(from, to);
        }
        out.push_str(dir);
        out.push(' ');
        out.push_str(&text);
        out.push('\n');
    }
    out
}

/// Tells the live output among a sequence of `session/update` payloads: a `tool_call_update`
/// without a status, of a call announced as `kind: execute` — what a running command printed so
/// far, sent while it runs at a pace that depends on timing, never recorded and never replayed
/// (the call's result, which has a status, replaces it).
#[derive(Debug, Default)]
pub struct LiveOutput {
    execute_calls: std::collections::HashSet<Value>,
}

impl LiveOutput {
    /// Whether `update` is live output; notes the `execute` calls it announces.
    pub fn is_live(&mut self, update: &Value) -> bool {
        match update["sessionUpdate"].as_str() {
            Some("tool_call") => {
                if update["kind"] == "execute" {
                    self.execute_calls.insert(update["toolCallId"].clone());
                }
                false
            }
            Some("tool_call_update") => {
                update.get("status").is_none() && self.execute_calls.contains(&update["toolCallId"])
            }
            _ => false,
        }
    }
}

/// Asserts that the tool result `update` is a command that completed under `mode`, exited 0
/// and was denied nothing, by its full facts (`_meta.agentd.facts`).
pub fn assert_ran_clean(update: &Value, mode: &str) {
    let facts = &update["_meta"]["agentd"]["facts"];
    assert_eq!(update["status"], "completed", "{update}");
    assert_eq!(facts["exit"], json!({"code": 0}), "{update}");
    assert_eq!(facts["mode"], mode, "{update}");
    assert_eq!(facts["denied"], false, "{update}");
}

/// The kind of agentd's own notice `update` is (`_meta.agentd.notice`: `enforcement`, `mcp`,
/// `workspace`), if it is one.
pub fn notice_kind(update: &Value) -> Option<&str> {
    update
        .pointer("/_meta/agentd/notice")
        .and_then(Value::as_str)
}

/// Whether `update` is the notice of what the sandbox does not enforce, which there is only
/// where the host's backend enforces partly.
pub fn is_enforcement_notice(update: &Value) -> bool {
    notice_kind(update) == Some("enforcement")
}

/// Whether `update` is a `tool_call_update` with nothing but a status: a call a person allowed
/// now runs, or a child agent's call that asked has ended. Unrecorded progress like live output:
/// a replay shows the call's result instead.
pub fn is_status_only(update: &Value) -> bool {
    update["sessionUpdate"] == "tool_call_update"
        && update
            .as_object()
            .is_some_and(|fields| fields.len() == 3 && fields.contains_key("status"))
}

/// A transcript without its live output (see [`LiveOutput`]), and the live output taken out,
/// each message whole, in order.
pub fn without_live_output(
    transcript: &[(&'static str, Value)],
) -> (Vec<(&'static str, Value)>, Vec<Value>) {
    let mut live = LiveOutput::default();
    let mut kept = Vec::new();
    let mut taken = Vec::new();
    for (direction, message) in transcript {
        let update = &message["params"]["update"];
        if message["method"] == "session/update" && live.is_live(update) {
            taken.push(message.clone());
        } else {
            kept.push((*direction, message.clone()));
        }
    }
    (kept, taken)
}

/// The `session/update` payloads of some notifications, with consecutive agent text chunks
/// joined, and consecutive thought chunks (the live stream sends the model's reasoning and text
/// in pieces, a replay sends each whole), without live output (see [`LiveOutput`]: a replay
/// has none; the call's result is what both show last), without the
/// `available_commands_update` every opening of a session sends after its answer (state, not
/// history: it is never replayed), and without the notice of partial enforcement, which only
/// some hosts' backends give ([`is_enforcement_notice`]). Chunks of different messages
/// (`messageId`: agentd's notices have their own) are not joined.
pub fn normalized_updates(notes: &[Value]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let mut live = LiveOutput::default();
    for note in notes {
        let update = note["params"]["update"].clone();
        if live.is_live(&update)
            || is_status_only(&update)
            || update["sessionUpdate"] == "available_commands_update"
            || is_enforcement_notice(&update)
        {
            continue;
        }
        let kind = update["sessionUpdate"].clone();
        if (kind == "agent_message_chunk" || kind == "agent_thought_chunk")
            && let Some(last) = out.last_mut()
            && last["sessionUpdate"] == kind
            && last.get("messageId") == update.get("messageId")
        {
            let joined = format!(
                "{}{}",
                last["content"]["text"].as_str().unwrap_or_default(),
                update["content"]["text"].as_str().unwrap_or_default()
            );
            last["content"]["text"] = Value::String(joined);
            continue;
        }
        out.push(update);
    }
    out
}

/// Whether `dir` is a directory (not a link) of this user's; if so, it is made writable by this
/// user alone.
pub fn own(dir: &Path) -> bool {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let ours = std::fs::symlink_metadata(dir)
        .is_ok_and(|found| found.is_dir() && found.uid() == nix::unistd::geteuid().as_raw());
    ours && std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).is_ok()
}

/// The name of `scratch_base`'s per-user directory under `/var/tmp`, but for the uid.
const SCRATCH_BASE_PREFIX: &str = "agentd-scenarios-";

/// Where scratch areas go whose writes "outside the workspace" must be outside the sandbox
/// too (the scenarios, the denial tests): outside the temporary directory, because
/// workspace-write makes `/tmp` writable (the helper's own namespaces and bwrap: an empty
/// tmpfs), so a write "outside the workspace" would not be outside the sandbox there. The target directory when it is not under
/// `/tmp` (a checkout anywhere else) and this user may write it, otherwise `/var/tmp`.
pub fn scratch_base() -> PathBuf {
    let temps: Vec<PathBuf> = [PathBuf::from("/tmp"), std::env::temp_dir()]
        .into_iter()
        .map(|t| std::fs::canonicalize(&t).unwrap_or(t))
        .collect();
    let outside = |dir: &Path| !temps.iter().any(|t| dir.starts_with(t));
    let uid = nix::unistd::geteuid().as_raw();
    let candidates = [
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")),
        PathBuf::from(format!("/var/tmp/{SCRATCH_BASE_PREFIX}{uid}")),
    ];
    for base in candidates {
        if std::fs::create_dir_all(&base).is_err() {
            continue;
        }
        // A name under `/var/tmp` anyone can take first: used only as this user's own
        // directory (no link), which nobody else may then write.
        if base.starts_with("/var/tmp") && !own(&base) {
            continue;
        }
        let Ok(base) = std::fs::canonicalize(&base) else {
            continue;
        };
        // Another user's build (the suite run as an unprivileged user) is not ours to write.
        if nix::unistd::access(&base, nix::unistd::AccessFlags::W_OK).is_err() {
            continue;
        }
        if outside(&base) {
            return base;
        }
    }
    panic!(
        "no scratch directory outside {temps:?}: the scenarios need one, because workspace-write \
         makes /tmp writable; create /var/tmp or check out the project elsewhere"
    );
}
