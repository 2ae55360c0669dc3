//! Recorded ACP scenarios, replayed against the real `agentd acp`.
//!
//! Each directory `tests/scenarios/<name>/` is one scenario, and one test below:
//!
//! - `script.toml` — the scripted model (see `agentd::model::scripted`);
//! - `input.json` — what the client does and what must hold afterwards (format below);
//! - `agentd.toml` (optional) — written as agentd's configuration file, with `<external>`
//!   replaced by the path of `tests/external/` (whose MCP test server a scenario may start);
//! - `models/` (optional) — copied beside it: the scripts of `[models.NAME]` tables (a named
//!   model's `script` is relative to the configuration file);
//! - `files/` (optional) — copied into the workspace before agentd starts.
//!
//! The harness starts `agentd acp` in a scratch workspace, drives it over stdio as `input.json`
//! says, and records every JSON-RPC message both ways. Commands really run, confined by this
//! host's backend, so a replay is also a confinement regression. The transcript, followed by a
//! digest of the session log, is normalised (below) and compared with the insta snapshot
//! `snapshots/scenario_replay__<name>.snap`; then the declarative expectations are checked on
//! disk and in the session log.
//!
//! ## `input.json`
//!
//! ```json
//! {
//!   "description": "what the scenario shows (becomes the snapshot's description)",
//!   "args": ["--sandbox-mode", "read-only"],
//!   "backend": "host",
//!   "fifos": ["feed"],
//!   "permissionAnswers": ["allow_once", "reject_once", "cancelled"],
//!   "editorBuffers": {"notes.txt": "unsaved text\n"},
//!   "steps": [
//!     {"prompt": "text of a prompt, run to its end"},
//!     {"set_config_option": {"configId": "sandbox-mode", "value": "workspace-write"},
//!      "expectCurrent": {"sandbox-mode": "workspace-write"}},
//!     {"set_config_option": {"configId": "sandbox-mode", "value": "yolo"},
//!      "expectError": {"code": -32602, "message": "unknown sandbox-mode value \"yolo\"; …"}},
//!     {"cancel_after_permission": "text of a prompt"},
//!     {"wait_for_file": "bg.done"},
//!     {"feed": {"fifo": "feed", "line": "one"}},
//!     {"fifo_readers": {"fifo": "feed", "running": true}},
//!     {"helper_idle": {}},
//!     {"restart_and_load": {}},
//!     {"restart_and_resume": {}},
//!     {"record_tree": "before"},
//!     {"same_tree": "before"}
//!   ],
//!   "expect": { "files": {"out.txt": "hi\n"}, "absent": ["../outside.txt"], "...": "see below" }
//! }
//! ```
//!
//! - `args`: extra flags of `agentd acp` (`--model-script` and `--state-dir` are the harness's).
//! - `backend`: `host` (default) when the configuration leaves the backend to the host, whose
//!   name, enforcement and denial texts are then normalised; `forced` when `agentd.toml` forces
//!   one, whose facts are then pinned as they are.
//! - `fifos`: FIFOs made in the workspace before agentd starts, for the host and a command of the
//!   session to talk through without timing.
//! - `backgroundWrites`: workspace paths a background task writes whenever it gets to; a
//!   turn's `turn/changes` in the snapshot leaves them out, since whether the turn's end saw
//!   the write depends on timing.
//! - `permissionAnswers`: consumed first in, first out by the agent's `session/request_permission`
//!   requests. Each is an option kind (`allow_once`, `reject_once`, `allow_always`,
//!   `reject_always`), answered with the offered option of that kind, or `cancelled`. A request
//!   with no answer left is answered `cancelled`. A kind the request does not offer is answered
//!   `cancelled` and fails the scenario, so the agent cannot absorb it; so do answers left
//!   unused at the end.
//! - `editorBuffers`: the editor's unsaved buffers, by path relative to the workspace. When
//!   present (even empty), `initialize` advertises `fs.readTextFile` (never `fs.writeTextFile`),
//!   and the harness answers agentd's `fs/read_text_file` of one of these files with its text,
//!   any other with an error. Any `fs/write_text_file` fails the scenario: agentd never writes
//!   through the editor.
//! - Steps: `prompt` sends `session/prompt` and reads to its answer. `set_config_option` sends
//!   those params plus the session id; `expectError` is the exact JSON-RPC error, `expectCurrent`
//!   the `currentValue` of options in the answer. `cancel_after_permission` sends a prompt,
//!   leaves its first permission request unanswered, sends `session/cancel`, reads to the
//!   prompt's answer and to the agent's withdrawal of its request (`$/cancel_request`), and only
//!   then answers the pending request `cancelled` (as ACP asks of a client). `wait_for_file`
//!   waits until a command of the session (a background one) made that workspace file. `feed`
//!   writes the line and a newline into a workspace FIFO, which some process must have open for
//!   reading (it is opened without blocking). `fifo_readers` checks on the host who holds a
//!   workspace FIFO: `running: true` requires a process that reads it and notes every process
//!   that has it open (from `/proc`); `running: false` requires that none reads it and that
//!   every process noted before is gone. `helper_idle` waits until agentd's helper runs no
//!   command: it has no child left, so it reaped each one and sent agentd its end (before any
//!   reply to a request that comes after); a command the session runs next is answered after
//!   that end on the helper's one connection, so agentd has it once that command's result
//!   arrives. The helper's children are read from `/proc`, which cannot be watched: polled,
//!   with a deadline.
//!   `restart_and_load` kills agentd (SIGKILL), starts it again, sends `initialize` and
//!   `session/load`, and requires the replayed updates to equal the live ones (agent text chunks
//!   joined, each prompt as a user message; the knobs' `current_mode_update` and
//!   `config_option_update` left out: they are state, which the load answers in its result;
//!   live output left out, see below).
//!   `restart_and_resume` kills and starts agentd the same way, then sends `session/resume`,
//!   and requires that nothing of the session's history comes with its answer (only state:
//!   the commands, the knobs); the steps after it go on in the same session.
//!   `record_tree` reads the workspace on the host (every entry but `.git`, without following
//!   links: its kind, a file's bytes and executable bit, a link's target) and keeps it under the
//!   given name; `same_tree` requires the workspace to be exactly the tree kept under that name
//!   now, and fails naming every path that differs.
//! - `expect` (all optional): `files` (path → exact content) and `absent` (paths), relative to
//!   the workspace; `stopReasons`, one per prompt in order; `permissionRequests`, how many were
//!   received; `events` (`present`/`absent` event types) and `eventCounts` (type → count) in the
//!   session log; `approvals`, every `approval/asked` with its `approval/decided`, in order, as
//!   `{tool, call_id, reason, outcome}`; `toolResults`, by call id, the logged `tool/result`'s
//!   `status`, exact `text`, `contains` (substrings), `facts` (JSON pointer → exact value),
//!   `factsInclude` (JSON pointer → items the array there holds) and `diff` (JSON pointer into
//!   the logged `diff` → exact value, `null` for absent); `storeLacks`, texts no file of the
//!   checkpoint store (`<state>/checkpoints`, which must exist) holds; `editorReads`, the paths (relative
//!   to the workspace) agentd asked the editor to read, in order; `instructions`, where the
//!   logged `model/request` instructions `changedAt` (`"turn.step"` of each request whose
//!   instructions differ from the request before) and, for each `containing` text, the requests
//!   `at` which they contain it.
//!
//! ## Normalisation
//!
//! Session ids, the workspace, state and scratch paths, the ids of the agent's requests and the
//! approval ids (also where a decision names the rule that made it) become placeholders; log records lose their times.
//! A compaction's token estimates (in its note and its `history/compacted`) become `<n>`: they
//! count the bytes of instructions that name the scratch workspace, whose path varies. The agent's
//! `$/cancel_request` after a `session/cancel` arrives at a varying place among the other
//! messages; it is moved to the end of that step and marked `<~`. Under `backend: host`, a tool
//! result's `backend` and `enforcement` become `<backend>` and `<enforcement>`, and the kernel's
//! denial texts in tool output (which differ per backend) become `<denial>`, and the line a
//! tool result shows a person about partial enforcement is left out. Under `forced`, only the
//! enforcement gaps that depend on the kernel's Landlock ABI (`… (Landlock ABI < N)`) are left
//! out, of the facts and of that line, and the lines of agent text (`/status`) that name one.
//! Everything else — tool result texts, agent text, option lists, errors, the
//! instructions the model was given — is pinned character for character.
//!
//! ## Live output
//!
//! What a running command printed so far reaches the editor as `tool_call_update`s of its call
//! without a status (RFC 0011), sent at a pace, so how many there are depends on timing; they
//! are not recorded and `session/load` never replays them. They are left out of the snapshot and
//! of the comparison with the replay, and checked instead: each comes after its call's
//! `tool_call` and before its call's result (the `tool_call_update` with a status), which
//! replaces it, and shows one text block that the result's output holds (unless the result's
//! output was truncated for the model); after a call's result nothing more of it is shown.
//! `tests/tests/acp_live_output.rs` checks their order with a command held on a FIFO.
//!
//! The scratch areas live under the target directory, not `/tmp`: workspace-write makes `/tmp`
//! writable, so a write "outside the workspace" must aim elsewhere to be outside the sandbox.

#[path = "../../confine-helper/tests/support/proc_watch.rs"]
mod proc_watch;
mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use support::acp::{
    AcpClient, LiveOutput, Permission, Scratch, is_enforcement_notice, normalized_updates, render,
    scratch_base, without_live_output,
};
use support::fifo;

/// How long any one answer of agentd may take.
const LIMIT: Duration = Duration::from_secs(60);

/// How long after a cancel the agent may take to withdraw a pending request of its own: a
/// liveness bound (unwithdrawn, the request would wait for ever), never a measurement.
const WITHDRAWAL_LIMIT: Duration = Duration::from_secs(30);

macro_rules! scenarios {
    ($($test:ident: $dir:literal,)*) => {
        $(
            #[test]
            fn $test() {
                replay($dir);
            }
        )*
        /// Every scenario with a test.
        const SCENARIOS: &[&str] = &[$($dir),*];
    };
}

scenarios! {
    config_options: "config-options",
    mode_switching: "mode-switching",
    escalation_approved: "escalation-approved",
    escalation_rejected: "escalation-rejected",
    escalation_allowed_always: "escalation-allowed-always",
    missing_sandbox_runner: "missing-sandbox-runner",
    partial_enforcement: "partial-enforcement",
    cancel_during_permission: "cancel-during-permission",
    load_replay: "load-replay",
    background_denial: "background-denial",
    narrowing_stops_task: "narrowing-stops-task",
    narrowing_stops_task_landlock: "narrowing-stops-task-landlock",
    widening_keeps_task: "widening-keeps-task",
    thoughts_and_cut_off_answers: "thoughts-and-cut-off-answers",
    delegation: "delegation",
    subagent_tool_calls: "subagent-tool-calls",
    file_edits: "file-edits",
    model_choice: "model-choice",
    resume: "resume",
    command_status: "command-status",
    command_mcp: "command-mcp",
    command_compact: "command-compact",
    command_init: "command-init",
    commands_only_from_the_user: "commands-only-from-the-user",
    plan: "plan",
    fs_escalation_approved: "fs-escalation-approved",
    fs_escalation_rejected: "fs-escalation-rejected",
    approval_card_diff: "approval-card-diff",
    editor_reads: "editor-reads",
    editor_reads_denied: "editor-reads-denied",
    read_file_window: "read-file-window",
    undo_turn: "undo-turn",
}

fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios")
}

#[test]
fn every_scenario_directory_has_a_test() {
    let mut found: Vec<String> = std::fs::read_dir(scenarios_dir())
        .expect("tests/scenarios")
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    found.sort();
    let mut listed: Vec<String> = SCENARIOS.iter().map(|s| (*s).to_owned()).collect();
    listed.sort();
    assert_eq!(found, listed, "add the new scenario to `scenarios!`");
}

// ---------------------------------------------------------------------------------------------
// The scenario file
// ---------------------------------------------------------------------------------------------

struct Scenario {
    name: String,
    description: String,
    args: Vec<String>,
    host_backend: bool,
    fifos: Vec<String>,
    /// Workspace paths a background task writes whenever it gets to (`backgroundWrites`).
    background_writes: Vec<String>,
    answers: Vec<String>,
    /// The editor's buffers, by path relative to the workspace (`editorBuffers`).
    editor_buffers: Option<Vec<(String, String)>>,
    steps: Vec<Step>,
    expect: Map<String, Value>,
}

enum Step {
    Prompt(String),
    SetConfigOption {
        params: Map<String, Value>,
        expect_error: Option<Value>,
        expect_current: Option<Map<String, Value>>,
    },
    CancelAfterPermission(String),
    WaitForFile(String),
    Feed {
        fifo: String,
        line: String,
    },
    FifoReaders {
        fifo: String,
        running: bool,
    },
    HelperIdle,
    RestartAndLoad,
    RestartAndResume,
    RecordTree(String),
    SameTree(String),
}

/// The object `value`, whose keys must all be in `allowed`.
fn object<'a>(value: &'a Value, allowed: &[&str], what: &str) -> &'a Map<String, Value> {
    let map = value
        .as_object()
        .unwrap_or_else(|| panic!("{what}: expected an object, got {value}"));
    for key in map.keys() {
        assert!(
            allowed.contains(&key.as_str()),
            "{what}: unknown key {key:?} (known: {allowed:?})"
        );
    }
    map
}

fn string(value: &Value, what: &str) -> String {
    value
        .as_str()
        .unwrap_or_else(|| panic!("{what}: expected a string, got {value}"))
        .to_owned()
}

fn strings(value: Option<&Value>, what: &str) -> Vec<String> {
    match value {
        None => Vec::new(),
        Some(Value::Array(items)) => items.iter().map(|v| string(v, what)).collect(),
        Some(other) => panic!("{what}: expected a list of strings, got {other}"),
    }
}

impl Scenario {
    fn load(name: &str) -> Scenario {
        let path = scenarios_dir().join(name).join("input.json");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let input: Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let top = object(
            &input,
            &[
                "description",
                "args",
                "backend",
                "fifos",
                "backgroundWrites",
                "permissionAnswers",
                "editorBuffers",
                "steps",
                "expect",
            ],
            "input.json",
        );
        let editor_buffers = top.get("editorBuffers").map(|buffers| {
            buffers
                .as_object()
                .unwrap_or_else(|| panic!("editorBuffers: expected an object, got {buffers}"))
                .iter()
                .map(|(path, text)| (path.clone(), string(text, "editorBuffers")))
                .collect()
        });
        let host_backend = match top.get("backend").and_then(Value::as_str) {
            None | Some("host") => true,
            Some("forced") => false,
            Some(other) => panic!("input.json: backend is host or forced, not {other:?}"),
        };
        let answers = strings(top.get("permissionAnswers"), "permissionAnswers");
        for answer in &answers {
            assert!(
                [
                    "allow_once",
                    "allow_always",
                    "reject_once",
                    "reject_always",
                    "cancelled"
                ]
                .contains(&answer.as_str()),
                "permissionAnswers: unknown answer {answer:?}"
            );
        }
        let steps = top
            .get("steps")
            .and_then(Value::as_array)
            .expect("input.json: steps")
            .iter()
            .map(Step::parse)
            .collect();
        let expect = top
            .get("expect")
            .map(|e| {
                object(
                    e,
                    &[
                        "files",
                        "absent",
                        "stopReasons",
                        "permissionRequests",
                        "events",
                        "eventCounts",
                        "approvals",
                        "toolResults",
                        "instructions",
                        "editorReads",
                        "storeLacks",
                    ],
                    "expect",
                )
                .clone()
            })
            .unwrap_or_default();
        Scenario {
            name: name.to_owned(),
            description: top
                .get("description")
                .map(|d| string(d, "description"))
                .unwrap_or_default(),
            args: strings(top.get("args"), "args"),
            host_backend,
            fifos: strings(top.get("fifos"), "fifos"),
            background_writes: strings(top.get("backgroundWrites"), "backgroundWrites"),
            answers,
            editor_buffers,
            steps,
            expect,
        }
    }
}

impl Step {
    fn parse(value: &Value) -> Step {
        let map = object(
            value,
            &[
                "prompt",
                "set_config_option",
                "expectError",
                "expectCurrent",
                "cancel_after_permission",
                "wait_for_file",
                "feed",
                "fifo_readers",
                "helper_idle",
                "restart_and_load",
                "restart_and_resume",
                "record_tree",
                "same_tree",
            ],
            "step",
        );
        if let Some(text) = map.get("prompt") {
            assert_eq!(map.len(), 1, "a prompt step has no other keys: {value}");
            return Step::Prompt(string(text, "prompt"));
        }
        if let Some(text) = map.get("cancel_after_permission") {
            assert_eq!(map.len(), 1, "{value}");
            return Step::CancelAfterPermission(string(text, "cancel_after_permission"));
        }
        if let Some(params) = map.get("set_config_option") {
            let params = object(params, &["configId", "value", "type"], "set_config_option");
            return Step::SetConfigOption {
                params: params.clone(),
                expect_error: map.get("expectError").cloned(),
                expect_current: map
                    .get("expectCurrent")
                    .map(|c| c.as_object().expect("expectCurrent: an object").clone()),
            };
        }
        if let Some(path) = map.get("wait_for_file") {
            assert_eq!(map.len(), 1, "{value}");
            return Step::WaitForFile(string(path, "wait_for_file"));
        }
        if let Some(feed) = map.get("feed") {
            assert_eq!(map.len(), 1, "{value}");
            let feed = object(feed, &["fifo", "line"], "feed");
            return Step::Feed {
                fifo: string(&feed["fifo"], "feed.fifo"),
                line: string(&feed["line"], "feed.line"),
            };
        }
        if let Some(readers) = map.get("fifo_readers") {
            assert_eq!(map.len(), 1, "{value}");
            let readers = object(readers, &["fifo", "running"], "fifo_readers");
            return Step::FifoReaders {
                fifo: string(&readers["fifo"], "fifo_readers.fifo"),
                running: readers["running"]
                    .as_bool()
                    .expect("fifo_readers.running: true or false"),
            };
        }
        if map.contains_key("helper_idle") {
            assert_eq!(map.len(), 1, "{value}");
            return Step::HelperIdle;
        }
        if map.contains_key("restart_and_load") {
            assert_eq!(map.len(), 1, "{value}");
            return Step::RestartAndLoad;
        }
        if map.contains_key("restart_and_resume") {
            assert_eq!(map.len(), 1, "{value}");
            return Step::RestartAndResume;
        }
        if let Some(name) = map.get("record_tree") {
            assert_eq!(map.len(), 1, "{value}");
            return Step::RecordTree(string(name, "record_tree"));
        }
        if let Some(name) = map.get("same_tree") {
            assert_eq!(map.len(), 1, "{value}");
            return Step::SameTree(string(name, "same_tree"));
        }
        panic!(
            "a step is prompt, set_config_option, cancel_after_permission, wait_for_file, feed, \
             fifo_readers, helper_idle, restart_and_load, restart_and_resume, record_tree or \
             same_tree: {value}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Driving agentd
// ---------------------------------------------------------------------------------------------

/// One scenario being played.
struct Play {
    scratch: Scratch,
    script: PathBuf,
    args: Vec<String>,
    client: AcpClient,
    session: String,
    /// The transcripts of the agentd processes before the current one.
    earlier: Vec<(&'static str, Value)>,
    /// Every update the editor was shown live, each prompt as a user message first.
    live: Vec<Value>,
    stop_reasons: Vec<String>,
    /// Permission requests of the agentd processes before the current one.
    earlier_requests: usize,
    /// The editor file requests of the agentd processes before the current one.
    earlier_fs_requests: Vec<Value>,
    /// The processes `fifo_readers` found holding each FIFO open.
    holders: std::collections::HashMap<String, Vec<u32>>,
    /// The workspace trees `record_tree` kept, by name.
    trees: std::collections::HashMap<String, Tree>,
    failures: Vec<String>,
}

fn user_message(text: &str) -> Value {
    json!({"params": {"update": {
        "sessionUpdate": "user_message_chunk",
        "content": {"type": "text", "text": text},
    }}})
}

fn answer_of(kind: &str) -> Permission {
    if kind == "cancelled" {
        Permission::Cancel
    } else {
        Permission::Kind(kind.to_owned())
    }
}

impl Play {
    fn start(scenario: &Scenario) -> Play {
        let scratch = Scratch::new_in(&scratch_base(), &format!("scenario-{}", scenario.name));
        let dir = scenarios_dir().join(&scenario.name);
        let files = dir.join("files");
        if files.is_dir() {
            copy_tree(&files, &scratch.ws());
        }
        for fifo in &scenario.fifos {
            nix::unistd::mkfifo(
                &scratch.ws().join(fifo),
                nix::sys::stat::Mode::from_bits_truncate(0o600),
            )
            .unwrap_or_else(|e| panic!("mkfifo {fifo}: {e}"));
        }
        let config = dir.join("agentd.toml");
        if config.is_file() {
            let external = Path::new(env!("CARGO_MANIFEST_DIR")).join("external");
            let text = std::fs::read_to_string(&config).expect("agentd.toml");
            scratch.config(&text.replace("<external>", &external.display().to_string()));
        }
        let models = dir.join("models");
        if models.is_dir() {
            copy_tree(&models, &scratch.root.join("config").join("agentd"));
        }
        let script =
            scratch.script(&std::fs::read_to_string(dir.join("script.toml")).expect("script.toml"));
        let args = scenario.args.clone();
        let mut client = start_client(&scratch, &script, &args);
        client
            .answers
            .extend(scenario.answers.iter().map(|a| answer_of(a)));
        client.editor_buffers = editor_buffers(&scratch, scenario);
        let session = client.open_session(&scratch.ws());
        Play {
            scratch,
            script,
            args,
            client,
            session,
            earlier: Vec::new(),
            live: Vec::new(),
            stop_reasons: Vec::new(),
            earlier_requests: 0,
            earlier_fs_requests: Vec::new(),
            holders: std::collections::HashMap::new(),
            trees: std::collections::HashMap::new(),
            failures: Vec::new(),
        }
    }

    fn step(&mut self, step: &Step) {
        match step {
            Step::Prompt(text) => {
                self.live.push(user_message(text));
                let (answer, notes) = self.client.prompt(&self.session, text);
                self.live.extend(notes);
                self.stop_reason(&answer);
            }
            Step::SetConfigOption {
                params,
                expect_error,
                expect_current,
            } => {
                let mut params = params.clone();
                params.insert("sessionId".into(), json!(self.session));
                let (answer, notes) = self
                    .client
                    .request("session/set_config_option", Value::Object(params.clone()));
                self.live.extend(notes);
                self.check_config_answer(&params, &answer, expect_error, expect_current);
            }
            Step::CancelAfterPermission(text) => self.cancel_after_permission(text),
            Step::WaitForFile(path) => self.wait_for_file(path),
            Step::Feed { fifo, line } => self.feed(fifo, line),
            Step::FifoReaders { fifo, running } => self.fifo_readers(fifo, *running),
            Step::HelperIdle => self.helper_idle(),
            Step::RestartAndLoad => self.restart_and_load(),
            Step::RestartAndResume => self.restart_and_resume(),
            Step::RecordTree(name) => {
                let tree = read_tree(&self.scratch.ws());
                self.trees.insert(name.clone(), tree);
            }
            Step::SameTree(name) => {
                let Some(kept) = self.trees.get(name) else {
                    self.failures
                        .push(format!("same_tree {name}: no tree was recorded as {name}"));
                    return;
                };
                let now = read_tree(&self.scratch.ws());
                for difference in tree_differences(kept, &now) {
                    self.failures
                        .push(format!("same_tree {name}: {difference}"));
                }
            }
        }
    }

    fn stop_reason(&mut self, answer: &Value) {
        match answer["result"]["stopReason"].as_str() {
            Some(reason) => self.stop_reasons.push(reason.to_owned()),
            None => {
                self.failures.push(format!("a prompt failed: {answer}"));
                self.stop_reasons
                    .push(format!("(error: {})", answer["error"]));
            }
        }
    }

    fn check_config_answer(
        &mut self,
        params: &Map<String, Value>,
        answer: &Value,
        expect_error: &Option<Value>,
        expect_current: &Option<Map<String, Value>>,
    ) {
        let what = format!("set_config_option {}", Value::Object(params.clone()));
        match expect_error {
            Some(error) => {
                if answer.get("error") != Some(error) {
                    self.failures
                        .push(format!("{what}: expected the error {error}, got {answer}"));
                }
            }
            None => {
                if answer.get("result").is_none() {
                    self.failures.push(format!("{what} failed: {answer}"));
                }
            }
        }
        for (id, value) in expect_current.iter().flatten() {
            let current = answer["result"]["configOptions"]
                .as_array()
                .and_then(|all| all.iter().find(|o| o["id"] == id.as_str()))
                .map(|o| o["currentValue"].clone());
            if current.as_ref() != Some(value) {
                self.failures.push(format!(
                    "{what}: expected {id} = {value}, the answer says {current:?}"
                ));
            }
        }
    }

    fn cancel_after_permission(&mut self, text: &str) {
        self.live.push(user_message(text));
        let answers = std::mem::take(&mut self.client.answers);
        let otherwise = std::mem::replace(&mut self.client.permission, Permission::Ignore);
        let asked = self.client.permission_requests.len();
        let id = self.client.send(
            "session/prompt",
            json!({"sessionId": self.session, "prompt": [{"type": "text", "text": text}]}),
        );
        let deadline = Instant::now() + LIMIT;
        let mut ended = None;
        while self.client.permission_requests.len() == asked {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = self
                .client
                .next(left)
                .unwrap_or_else(|| panic!("no permission request within {LIMIT:?}"));
            if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                ended = Some(message);
                break;
            }
            if message["method"] == "session/update" {
                self.live.push(message);
            }
        }
        self.client.answers = answers;
        self.client.permission = otherwise;
        if let Some(answer) = ended {
            self.failures.push(format!(
                "the prompt ended before asking for permission: {answer}"
            ));
            self.stop_reason(&answer);
            return;
        }
        let pending = self
            .client
            .permission_requests
            .last()
            .expect("the pending request")["id"]
            .clone();
        let from = self.client.transcript.len();
        self.client
            .notify("session/cancel", json!({"sessionId": self.session}));
        let (answer, notes) = self.client.until_response(id, LIMIT);
        self.live.extend(notes);
        self.stop_reason(&answer);
        self.await_withdrawal(from, &pending);
        self.client
            .respond(&pending, json!({"outcome": {"outcome": "cancelled"}}));
    }

    /// Reads until the agent withdrew its request `pending` (`$/cancel_request`), then moves
    /// that notification, whose place among the other messages varies, to the end of what was
    /// received since `from`, marked `<~`.
    fn await_withdrawal(&mut self, from: usize, pending: &Value) {
        let is_withdrawal = |(_, m): &(&str, Value)| {
            m["method"] == "$/cancel_request" && &m["params"]["requestId"] == pending
        };
        let deadline = Instant::now() + WITHDRAWAL_LIMIT;
        while !self.client.transcript[from..].iter().any(is_withdrawal) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.client.next(left) {
                Some(message) if message["method"] == "session/update" => {
                    self.live.push(message);
                }
                Some(_) => {}
                None => {
                    self.failures.push(format!(
                        "the agent did not withdraw its pending request {pending} \
                         ($/cancel_request) within {WITHDRAWAL_LIMIT:?} of the cancel"
                    ));
                    return;
                }
            }
        }
        let received: Vec<(&'static str, Value)> = self.client.transcript.drain(from..).collect();
        let (moved, kept): (Vec<_>, Vec<_>) = received.into_iter().partition(is_withdrawal);
        self.client.transcript.extend(kept);
        self.client
            .transcript
            .extend(moved.into_iter().map(|(_, m)| ("<~", m)));
    }

    /// Waits until `path` exists in the workspace (a command of the session made it).
    fn wait_for_file(&mut self, path: &str) {
        let target = self.scratch.ws().join(path);
        let (dir, name) = match (target.parent(), target.file_name()) {
            (Some(dir), Some(name)) => (dir.to_owned(), name.to_string_lossy().into_owned()),
            _ => {
                self.failures.push(format!("{path} is not a file path"));
                return;
            }
        };
        if !support::wait_for_file(&dir, &name, LIMIT) {
            self.failures
                .push(format!("{path} did not appear within {LIMIT:?}"));
        }
    }

    /// Writes `line` and a newline into the workspace FIFO `fifo`, which a process must read.
    fn feed(&mut self, fifo: &str, line: &str) {
        use std::io::Write;
        match fifo::open_for_writing(&self.scratch.ws().join(fifo)) {
            Ok(Some(mut writer)) => {
                if let Err(e) = writer.write_all(format!("{line}\n").as_bytes()) {
                    self.failures.push(format!("feeding {fifo}: {e}"));
                }
            }
            Ok(None) => self
                .failures
                .push(format!("feeding {fifo}: no process reads it")),
            Err(e) => self.failures.push(format!("feeding {fifo}: {e}")),
        }
    }

    /// Checks who holds the workspace FIFO `fifo` open; see the module documentation.
    fn fifo_readers(&mut self, fifo: &str, running: bool) {
        let path = self.scratch.ws().join(fifo);
        let read = match fifo::open_for_writing(&path) {
            Ok(writer) => writer.is_some(),
            Err(e) => {
                self.failures.push(format!("{fifo}: {e}"));
                return;
            }
        };
        let holders = fifo::holders_of(&path);
        if running {
            if !read {
                self.failures.push(format!("no process reads {fifo}"));
            }
            if holders.is_empty() {
                self.failures
                    .push(format!("no process in /proc holds {fifo} open"));
            }
            self.holders
                .entry(fifo.to_owned())
                .or_default()
                .extend(holders);
            return;
        }
        if read {
            self.failures
                .push(format!("a process still reads {fifo}: {holders:?}"));
        }
        let noted = self.holders.get(fifo).cloned().unwrap_or_default();
        if noted.is_empty() {
            self.failures.push(format!(
                "fifo_readers {fifo} running: false needs running: true first, to note whom"
            ));
        }
        let alive: Vec<u32> = noted
            .into_iter()
            .filter(|pid| support::alive(*pid))
            .collect();
        if !alive.is_empty() {
            self.failures.push(format!(
                "processes that held {fifo} are still alive: {alive:?}"
            ));
        }
    }

    /// Waits until agentd's helper has no child process; see the module documentation.
    fn helper_idle(&mut self) {
        let agentd = self.client.child.id();
        let helpers: Vec<u32> = proc_watch::children(agentd)
            .into_iter()
            .filter(|c| c.name == "confine-helper")
            .map(|c| c.pid)
            .collect();
        let [helper] = helpers[..] else {
            self.failures
                .push(format!("agentd should have one helper, it has {helpers:?}"));
            return;
        };
        let deadline = Instant::now() + LIMIT;
        while !proc_watch::children(helper).is_empty() {
            if Instant::now() > deadline {
                self.failures.push(format!(
                    "the helper still runs {:?} after {LIMIT:?}",
                    proc_watch::children(helper)
                ));
                return;
            }
            std::thread::yield_now();
        }
    }

    fn restart_and_load(&mut self) {
        self.restart();
        let (loaded, replay) = self.client.request(
            "session/load",
            json!({"sessionId": self.session, "cwd": self.scratch.ws(), "mcpServers": []}),
        );
        if loaded.get("result").is_none() {
            self.failures.push(format!("session/load failed: {loaded}"));
        }
        // The knobs' current values are state, not history: `session/load` answers them in its
        // result (`configOptions`, `modes`), not as replayed updates.
        let live: Vec<Value> = normalized_updates(&self.live)
            .into_iter()
            .filter(|u| {
                u["sessionUpdate"] != "current_mode_update"
                    && u["sessionUpdate"] != "config_option_update"
            })
            .collect();
        let replayed = normalized_updates(&replay);
        if live != replayed {
            self.failures.push(format!(
                "session/load replayed other updates than were shown live:\n{}",
                first_difference(&live, &replayed)
            ));
        }
    }

    /// Kills agentd, starts it again and resumes the session: the answer comes with none of the
    /// session's history (the editor keeps what it showed), only state.
    fn restart_and_resume(&mut self) {
        self.restart();
        let (resumed, notes) = self.client.request(
            "session/resume",
            json!({"sessionId": self.session, "cwd": self.scratch.ws(), "mcpServers": []}),
        );
        if resumed.get("result").is_none() {
            self.failures
                .push(format!("session/resume failed: {resumed}"));
        }
        let state = [
            "available_commands_update",
            "current_mode_update",
            "config_option_update",
        ];
        for note in &notes {
            let kind = note["params"]["update"]["sessionUpdate"].as_str();
            if !kind.is_some_and(|kind| state.contains(&kind)) {
                self.failures
                    .push(format!("session/resume replayed history: {note}"));
            }
        }
    }

    /// Kills agentd (SIGKILL), starts it again with the same answers and buffers, and sends
    /// `initialize`.
    fn restart(&mut self) {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.client.child.id() as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .expect("kill -9 agentd");
        let _ = self.client.child.wait();
        let mut next = start_client(&self.scratch, &self.script, &self.args);
        next.answers = std::mem::take(&mut self.client.answers);
        next.permission = self.client.permission.clone();
        next.editor_buffers = self.client.editor_buffers.clone();
        let old = std::mem::replace(&mut self.client, next);
        self.earlier.extend(old.transcript.iter().cloned());
        self.earlier
            .push(("--", json!("agentd killed (SIGKILL) and started again")));
        self.earlier_requests += old.permission_requests.len();
        self.earlier_fs_requests
            .extend(old.fs_requests.iter().cloned());
        let unoffered = old.unoffered.clone();
        drop(old);
        self.client.unoffered.extend(unoffered);

        let capabilities = match self.client.editor_buffers {
            Some(_) => json!({"fs": {"readTextFile": true, "writeTextFile": false}}),
            None => json!({}),
        };
        let (init, _) = self.client.request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": capabilities}),
        );
        if init["result"]["agentCapabilities"]["loadSession"] != true {
            self.failures
                .push(format!("the restarted agent cannot load sessions: {init}"));
        }
    }

    fn transcript(&self) -> Vec<(&'static str, Value)> {
        let mut all = self.earlier.clone();
        all.extend(self.client.transcript.iter().cloned());
        all
    }

    fn permission_requests(&self) -> usize {
        self.earlier_requests + self.client.permission_requests.len()
    }
}

/// The editor's buffers of `scenario` by the absolute paths agentd asks for (the workspace's
/// real path: agentd resolves it once).
fn editor_buffers(
    scratch: &Scratch,
    scenario: &Scenario,
) -> Option<std::collections::HashMap<PathBuf, String>> {
    let ws = std::fs::canonicalize(scratch.ws()).expect("the workspace's real path");
    scenario.editor_buffers.as_ref().map(|buffers| {
        buffers
            .iter()
            .map(|(path, text)| (ws.join(path), text.clone()))
            .collect()
    })
}

fn start_client(scratch: &Scratch, script: &Path, args: &[String]) -> AcpClient {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut client = AcpClient::start(scratch, script, &args);
    client.permission = Permission::Cancel;
    client
}

fn first_difference(live: &[Value], replayed: &[Value]) -> String {
    let at = live
        .iter()
        .zip(replayed)
        .position(|(a, b)| a != b)
        .unwrap_or(live.len().min(replayed.len()));
    format!(
        "{} live, {} replayed; first difference at update {at}:\n  live:     {}\n  replayed: {}",
        live.len(),
        replayed.len(),
        live.get(at).map_or("(none)".into(), Value::to_string),
        replayed.get(at).map_or("(none)".into(), Value::to_string),
    )
}

/// One entry of a workspace as `record_tree` keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    Dir,
    /// Its bytes and whether it is executable.
    File(Vec<u8>, bool),
    /// Its target.
    Link(PathBuf),
    /// A FIFO, socket or device: only its kind.
    Other,
}

/// A workspace read on the host: every entry by its path relative to the workspace.
type Tree = std::collections::BTreeMap<PathBuf, Entry>;

/// The workspace `root` as it is now, `.git` left out, no link followed.
fn read_tree(root: &Path) -> Tree {
    use std::os::unix::fs::PermissionsExt;
    let mut tree = Tree::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let entry = entry.unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
            let path = entry.path();
            let relative = path
                .strip_prefix(root)
                .expect("under the root")
                .to_path_buf();
            if relative == Path::new(".git") {
                continue;
            }
            let meta = std::fs::symlink_metadata(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let kind = if meta.is_symlink() {
                Entry::Link(std::fs::read_link(&path).expect("link target"))
            } else if meta.is_dir() {
                pending.push(path.clone());
                Entry::Dir
            } else if meta.is_file() {
                let bytes =
                    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                Entry::File(bytes, meta.permissions().mode() & 0o111 != 0)
            } else {
                Entry::Other
            };
            tree.insert(relative, kind);
        }
    }
    tree
}

/// Every regular file under `dir`, with its bytes, no link followed.
fn files_under(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => pending.push(path),
                Ok(kind) if kind.is_file() => {
                    let bytes = std::fs::read(&path).unwrap_or_default();
                    found.push((path, bytes));
                }
                _ => {}
            }
        }
    }
    found
}

/// Each path where `now` is not `kept`, in words.
fn tree_differences(kept: &Tree, now: &Tree) -> Vec<String> {
    let mut differences = Vec::new();
    for (path, entry) in kept {
        match now.get(path) {
            None => differences.push(format!("{} is missing", path.display())),
            Some(found) if found != entry => {
                differences.push(format!("{} is {found:?}, was {entry:?}", path.display()));
            }
            Some(_) => {}
        }
    }
    for path in now.keys().filter(|path| !kept.contains_key(*path)) {
        differences.push(format!("{} was not there", path.display()));
    }
    differences
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir").flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Normalisation
// ---------------------------------------------------------------------------------------------

/// The strerror texts through which a backend's denials reach a command; they differ per
/// backend, so under the host's backend they are normalised.
const DENIAL_TEXTS: &[&str] = &[
    "Read-only file system",
    "Permission denied",
    "Operation not permitted",
];

/// A compaction's note with its estimates as `<n>`: `… (estimated <n> → <n> tokens).`
fn without_estimates(text: &str) -> String {
    const LEAD: &str = "(estimated ";
    let Some(start) = text.find(LEAD) else {
        return text.to_owned();
    };
    let Some(end) = text[start..].find(" tokens)") else {
        return text.to_owned();
    };
    format!("{}{LEAD}<n> → <n>{}", &text[..start], &text[start + end..])
}

/// How an enforcement gap that depends on the kernel's Landlock ABI names it.
const LANDLOCK_ABI_GAP: &str = "(Landlock ABI < ";

struct Normaliser {
    host_backend: bool,
    /// Literal replacements, longest first.
    replacements: Vec<(String, String)>,
    /// Ids of the agent's requests, in the order first seen.
    agent_ids: Vec<Value>,
    /// Approval ids, in the order first seen.
    approval_ids: Vec<String>,
    /// The absolute paths of the scenario's `backgroundWrites`.
    background_writes: Vec<String>,
}

impl Normaliser {
    fn new(play: &Play, host_backend: bool) -> Normaliser {
        let root = play.scratch.root.display().to_string();
        let real_root = std::fs::canonicalize(&play.scratch.root)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| root.clone());
        let mut replacements = vec![
            (play.scratch.ws().display().to_string(), "<ws>".to_owned()),
            (
                play.scratch.state().display().to_string(),
                "<state>".to_owned(),
            ),
            (real_root, "<root>".to_owned()),
            (root, "<root>".to_owned()),
            (play.session.clone(), "<session>".to_owned()),
        ];
        replacements.sort_by_key(|(from, _)| std::cmp::Reverse(from.len()));
        Normaliser {
            host_backend,
            replacements,
            agent_ids: Vec::new(),
            approval_ids: Vec::new(),
            background_writes: Vec::new(),
        }
    }

    fn text(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for (from, to) in &self.replacements {
            text = text.replace(from, to);
        }
        text
    }

    /// Command output as a model reads it: denial texts normalised under the host's backend.
    fn output(&self, text: &str) -> String {
        let mut text = text.to_owned();
        if self.host_backend {
            for denial in DENIAL_TEXTS {
                text = text.replace(denial, "<denial>");
            }
        }
        text
    }

    /// The notice of what the sandbox does not enforce, when `message` is one: under the host's
    /// backend, gone (`false`), since whether there is one depends on the host; under `forced`,
    /// without the gaps that depend on the kernel's Landlock ABI, and gone if none is left.
    fn enforcement_notice(&self, message: &mut Value) -> bool {
        let Some(update) = message.pointer_mut("/params/update") else {
            return true;
        };
        if !is_enforcement_notice(update) {
            return true;
        }
        if self.host_backend {
            return false;
        }
        let Some(Value::String(text)) = update.pointer_mut("/content/text") else {
            return true;
        };
        let kept: Vec<&str> = text
            .lines()
            .filter(|line| !line.contains(LANDLOCK_ABI_GAP))
            .collect();
        if kept.len() < 2 {
            return false;
        }
        *text = format!("{}\n", kept.join("\n"));
        true
    }

    /// Agent text (agentd's own answer to `/status`): under `forced`, without the lines that
    /// name a gap depending on the kernel's Landlock ABI.
    fn agent_text(&self, text: &str) -> String {
        if self.host_backend || !text.contains(LANDLOCK_ABI_GAP) {
            return text.to_owned();
        }
        text.split_inclusive('\n')
            .filter(|line| !line.contains(LANDLOCK_ABI_GAP))
            .collect()
    }

    /// A tool result's facts (`rawOutput` compact and `_meta.agentd.facts` whole on the wire,
    /// `facts` in the log).
    fn facts(&self, facts: &mut Value) {
        let Some(map) = facts.as_object_mut() else {
            return;
        };
        if self.host_backend {
            for key in ["backend", "enforcement"] {
                if map.get(key).is_some_and(|v| !v.is_null()) {
                    map.insert(key.to_owned(), json!(format!("<{key}>")));
                }
            }
        } else if let Some(Value::Array(missing)) = facts.pointer_mut("/enforcement/missing") {
            missing.retain(|m| !m.as_str().is_some_and(|m| m.contains(LANDLOCK_ABI_GAP)));
        }
    }

    fn agent_id(&mut self, id: &Value) -> Value {
        let n = match self.agent_ids.iter().position(|seen| seen == id) {
            Some(n) => n,
            None => {
                self.agent_ids.push(id.clone());
                self.agent_ids.len() - 1
            }
        };
        json!(format!("<agent-request-{}>", n + 1))
    }

    fn approval_id(&mut self, id: &str) -> String {
        let n = match self.approval_ids.iter().position(|seen| seen == id) {
            Some(n) => n,
            None => {
                self.approval_ids.push(id.to_owned());
                self.approval_ids.len() - 1
            }
        };
        format!("<approval-{}>", n + 1)
    }

    fn message(&mut self, direction: &str, message: &mut Value) {
        let is_request = message.get("method").is_some() && message.get("id").is_some();
        let received = direction.starts_with('<');
        let agents_id = (received && is_request)
            || (direction == ">" && !is_request && message.get("id").is_some());
        if agents_id {
            let id = self.agent_id(&message["id"]);
            message["id"] = id;
        }
        // The agent withdrawing one of its own requests (`$/cancel_request`) names its id.
        if received
            && !is_request
            && let Some(id) = message.pointer("/params/requestId").cloned()
        {
            message["params"]["requestId"] = self.agent_id(&id);
        }
        if let Some(update) = message.pointer_mut("/params/update") {
            if update["sessionUpdate"] == "agent_thought_chunk"
                && let Some(Value::String(text)) = update.pointer_mut("/content/text")
            {
                *text = without_estimates(text);
            }
            if update["sessionUpdate"] == "agent_message_chunk"
                && let Some(Value::String(text)) = update.pointer_mut("/content/text")
            {
                *text = self.agent_text(text);
            }
            if let Some(raw) = update.get_mut("rawOutput") {
                self.facts(raw);
            }
            if let Some(facts) = update.pointer_mut("/_meta/agentd/facts") {
                self.facts(facts);
            }
            if let Some(Value::Array(content)) = update.get_mut("content") {
                for item in content.iter_mut() {
                    if let Some(Value::String(text)) = item.pointer_mut("/content/text") {
                        *text = self.output(text);
                    }
                }
            }
        }
    }

    /// The transcript as text, one message a line.
    fn transcript(&mut self, transcript: &[(&'static str, Value)]) -> String {
        let mut messages = transcript.to_vec();
        messages.retain_mut(|(_, message)| self.enforcement_notice(message));
        for (direction, message) in &mut messages {
            self.message(direction, message);
        }
        let pairs: Vec<(&str, &str)> = self
            .replacements
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        render(&messages, &pairs)
    }

    /// The session log, one record a line: no times, ids normalised, instructions in full only
    /// where they differ from the request before.
    fn log(&mut self, log: &[Value]) -> String {
        let mut out = String::new();
        let mut told: Option<String> = None;
        for record in log {
            let seq = record["seq"].clone();
            let kind = string(&record["type"], "type");
            // Rebuilt rather than edited in place, so the fields keep their order.
            let mut map: Map<String, Value> = record
                .as_object()
                .expect("a record is an object")
                .iter()
                .filter(|(key, _)| !["v", "seq", "at_ms", "type"].contains(&key.as_str()))
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect();
            if let Some(Value::String(id)) = map.get("id")
                && kind.starts_with("approval/")
            {
                let id = self.approval_id(id);
                map.insert("id".into(), json!(id));
            }
            // The rule that decided a request is named by the request that made it.
            if let Some(Value::String(rule)) = map.get("rule")
                && kind == "approval/decided"
            {
                let rule = self.approval_id(rule);
                map.insert("rule".into(), json!(rule));
            }
            if kind == "model/request" {
                let now = map
                    .get("instructions")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                if told.as_deref() == Some(now.as_str()) {
                    map.insert("instructions".into(), json!("(unchanged)"));
                }
                told = Some(now);
            }
            // Whether a turn's end saw a background task's write depends on timing.
            if kind == "turn/changes"
                && let Some(Value::Array(changes)) = map.get_mut("changes")
            {
                changes.retain(|change| {
                    let path = change["path"].as_str().unwrap_or_default();
                    !self.background_writes.iter().any(|p| p == path)
                });
            }
            if kind == "history/compacted" {
                for key in ["estimate_before", "estimate_after"] {
                    map.insert(key.into(), json!("<n>"));
                }
            }
            if kind == "command/output"
                && let Some(Value::String(text)) = map.get_mut("text")
            {
                *text = self.agent_text(text);
            }
            if kind == "task/stopped"
                && let Some(facts) = map.get_mut("facts")
            {
                self.facts(facts);
            }
            if kind == "tool/result" {
                if let Some(facts) = map.get_mut("facts") {
                    self.facts(facts);
                }
                if let Some(Value::String(output)) = map.get_mut("output") {
                    *output = self.output(output);
                }
            }
            let line = format!("{seq} {kind} {}", Value::Object(map));
            out.push_str(&self.text(&line));
            out.push('\n');
        }
        out
    }
}

// ---------------------------------------------------------------------------------------------
// Expectations
// ---------------------------------------------------------------------------------------------

fn of_type<'a>(log: &'a [Value], kind: &str) -> Vec<&'a Value> {
    log.iter().filter(|r| r["type"] == kind).collect()
}

fn check(play: &Play, scenario: &Scenario, log: &[Value], failures: &mut Vec<String>) {
    let ws = play.scratch.ws();
    let mut fail = |message: String| failures.push(message);
    let expect = &scenario.expect;

    for (path, content) in expect
        .get("files")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let want = string(content, "files");
        match std::fs::read_to_string(ws.join(path)) {
            Ok(got) if got == want => {}
            Ok(got) => fail(format!("{path}: expected {want:?}, found {got:?}")),
            Err(e) => fail(format!("{path}: expected {want:?}, cannot read it: {e}")),
        }
    }
    let ws_real = std::fs::canonicalize(&ws).expect("the workspace's real path");
    let fs_requests: Vec<&Value> = play
        .earlier_fs_requests
        .iter()
        .chain(&play.client.fs_requests)
        .collect();
    for request in &fs_requests {
        if request["method"] == "fs/write_text_file" {
            fail(format!("agentd asked the editor to write: {request}"));
        }
    }
    if let Some(reads) = expect.get("editorReads") {
        let want = strings(Some(reads), "editorReads");
        let got: Vec<String> = fs_requests
            .iter()
            .filter(|r| r["method"] == "fs/read_text_file")
            .map(|r| {
                let path = Path::new(r["params"]["path"].as_str().unwrap_or_default());
                path.strip_prefix(&ws_real)
                    .unwrap_or(path)
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        if want != got {
            fail(format!("editor reads: expected {want:?}, got {got:?}"));
        }
    }
    for path in strings(expect.get("absent"), "absent") {
        if ws.join(&path).exists() {
            fail(format!("{path} exists and should not"));
        }
    }
    let lacks = strings(expect.get("storeLacks"), "storeLacks");
    if !lacks.is_empty() {
        let store = play.scratch.state().join("checkpoints");
        let mut files = 0;
        for (path, bytes) in files_under(&store) {
            files += 1;
            for text in &lacks {
                if bytes
                    .windows(text.len())
                    .any(|window| window == text.as_bytes())
                {
                    fail(format!(
                        "the checkpoint store's {} holds {text:?}",
                        path.display()
                    ));
                }
            }
        }
        if files == 0 {
            fail(format!(
                "storeLacks: no checkpoint store under {}",
                store.display()
            ));
        }
    }
    if let Some(reasons) = expect.get("stopReasons") {
        let want = strings(Some(reasons), "stopReasons");
        if want != play.stop_reasons {
            fail(format!(
                "stop reasons: expected {want:?}, got {:?}",
                play.stop_reasons
            ));
        }
    }
    if let Some(count) = expect.get("permissionRequests") {
        let got = play.permission_requests();
        if Some(got as u64) != count.as_u64() {
            fail(format!("permission requests: expected {count}, got {got}"));
        }
    }
    if let Some(events) = expect.get("events") {
        let events = object(events, &["present", "absent"], "events");
        for kind in strings(events.get("present"), "events.present") {
            if of_type(log, &kind).is_empty() {
                fail(format!("no {kind} event in the session log"));
            }
        }
        for kind in strings(events.get("absent"), "events.absent") {
            if !of_type(log, &kind).is_empty() {
                fail(format!("the session log has a {kind} event"));
            }
        }
    }
    for (kind, count) in expect
        .get("eventCounts")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let got = of_type(log, kind).len();
        if Some(got as u64) != count.as_u64() {
            fail(format!("{kind} events: expected {count}, got {got}"));
        }
    }
    if let Some(want) = expect.get("approvals") {
        let got = approvals(log, &mut fail);
        if &got != want {
            fail(format!(
                "approvals: expected {want}, the log has {}",
                Value::Array(got.as_array().cloned().unwrap_or_default())
            ));
        }
    }
    for (call, want) in expect
        .get("toolResults")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        check_tool_result(log, call, want, &mut fail);
    }
    if let Some(instructions) = expect.get("instructions") {
        check_instructions(log, instructions, &mut fail);
    }
}

/// Every `approval/asked` of the log with its `approval/decided`, as
/// `{tool, call_id, reason, outcome}`.
fn approvals(log: &[Value], fail: &mut impl FnMut(String)) -> Value {
    let mut out = Vec::new();
    for asked in of_type(log, "approval/asked") {
        let decided: Vec<&Value> = of_type(log, "approval/decided")
            .into_iter()
            .filter(|d| d["id"] == asked["id"])
            .collect();
        if decided.len() != 1 {
            fail(format!(
                "approval {} has {} approval/decided records",
                asked["id"],
                decided.len()
            ));
        }
        let outcome = decided
            .first()
            .map_or(Value::Null, |d| d["outcome"].clone());
        if decided
            .first()
            .is_some_and(|d| d["seq"].as_u64() <= asked["seq"].as_u64())
        {
            fail(format!(
                "approval {} was decided before it was asked",
                asked["id"]
            ));
        }
        let mut pair = json!({"tool": asked["tool"], "outcome": outcome});
        for key in ["call_id", "reason"] {
            if let Some(value) = asked.get(key) {
                pair[key] = value.clone();
            }
        }
        out.push(pair);
    }
    if of_type(log, "approval/decided").len() != out.len() {
        fail("an approval/decided without its approval/asked".to_owned());
    }
    Value::Array(out)
}

fn check_tool_result(log: &[Value], call: &str, want: &Value, fail: &mut impl FnMut(String)) {
    let want = object(
        want,
        &[
            "status",
            "text",
            "contains",
            "facts",
            "factsInclude",
            "diff",
        ],
        "toolResults",
    );
    let results: Vec<&Value> = of_type(log, "tool/result")
        .into_iter()
        .filter(|r| r["call_id"] == call)
        .collect();
    let [result] = results.as_slice() else {
        fail(format!("{call}: {} tool/result records", results.len()));
        return;
    };
    let output = result["output"].as_str().unwrap_or_default();
    if let Some(status) = want.get("status")
        && &result["status"] != status
    {
        fail(format!(
            "{call}: status {}, expected {status}",
            result["status"]
        ));
    }
    if let Some(text) = want.get("text")
        && text.as_str() != Some(output)
    {
        fail(format!(
            "{call}: the result text is {output:?}, expected {text}"
        ));
    }
    for part in strings(want.get("contains"), "contains") {
        if !output.contains(&part) {
            fail(format!("{call}: the result text {output:?} lacks {part:?}"));
        }
    }
    for (pointer, value) in want
        .get("facts")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let got = result["facts"].pointer(pointer);
        if got != Some(value) {
            fail(format!(
                "{call}: facts{pointer} is {got:?}, expected {value}"
            ));
        }
    }
    for (pointer, value) in want
        .get("diff")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let got = result["diff"].pointer(pointer).unwrap_or(&Value::Null);
        if got != value {
            fail(format!("{call}: diff{pointer} is {got}, expected {value}"));
        }
    }
    for (pointer, items) in want
        .get("factsInclude")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let got = result["facts"].pointer(pointer).and_then(Value::as_array);
        for item in items.as_array().into_iter().flatten() {
            if !got.is_some_and(|all| all.contains(item)) {
                fail(format!("{call}: facts{pointer} ({got:?}) lacks {item}"));
            }
        }
    }
}

fn check_instructions(log: &[Value], want: &Value, fail: &mut impl FnMut(String)) {
    let want = object(want, &["changedAt", "containing"], "instructions");
    let requests: Vec<(String, &str)> = of_type(log, "model/request")
        .into_iter()
        .map(|r| {
            (
                format!("{}.{}", r["turn"], r["step"]),
                r["instructions"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    if let Some(changed) = want.get("changedAt") {
        let want = strings(Some(changed), "changedAt");
        let got: Vec<String> = requests
            .windows(2)
            .filter(|pair| pair[0].1 != pair[1].1)
            .map(|pair| pair[1].0.clone())
            .collect();
        if want != got {
            fail(format!(
                "the instructions changed at {got:?}, expected at {want:?}"
            ));
        }
    }
    for item in want
        .get("containing")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let item = object(item, &["text", "at"], "containing");
        let text = string(&item["text"], "containing.text");
        let want = strings(item.get("at"), "containing.at");
        let got: Vec<String> = requests
            .iter()
            .filter(|(_, told)| told.contains(&text))
            .map(|(at, _)| at.clone())
            .collect();
        if want != got {
            fail(format!(
                "the instructions contain {text:?} at {got:?}, expected at {want:?}"
            ));
        }
    }
}

/// The live output of the transcript, checked as the module documentation says.
fn check_live_output(transcript: &[(&'static str, Value)], failures: &mut Vec<String>) {
    let updates: Vec<&Value> = transcript
        .iter()
        .filter(|(_, m)| m["method"] == "session/update")
        .map(|(_, m)| &m["params"]["update"])
        .collect();
    let mut live = LiveOutput::default();
    for (at, update) in updates.iter().enumerate() {
        let call = &update["toolCallId"];
        let ended = |u: &&&Value| {
            u["sessionUpdate"] == "tool_call_update"
                && &u["toolCallId"] == call
                && u.get("status").is_some()
        };
        if !live.is_live(update) {
            continue;
        }
        if updates[..at].iter().any(|u| ended(&u)) {
            failures.push(format!("live output after its call's result: {update}"));
            continue;
        }
        let Some(result) = updates[at + 1..].iter().find(|u| ended(u)) else {
            failures.push(format!("live output of a call without a result: {update}"));
            continue;
        };
        let text = match update["content"].as_array().map(Vec::as_slice) {
            Some([block]) => block["content"]["text"].as_str().unwrap_or_default(),
            _ => {
                failures.push(format!("live output is not one text block: {update}"));
                continue;
            }
        };
        let output = result["content"]
            .as_array()
            .and_then(|blocks| blocks.last())
            .and_then(|block| block["content"]["text"].as_str())
            .unwrap_or_default();
        let text = match text.strip_prefix("[output truncated: ") {
            Some(rest) => rest.split_once('\n').map_or("", |(_, tail)| tail),
            None => text,
        };
        if !output.contains("[output truncated: ") && !output.contains(text) {
            failures.push(format!(
                "live output the result does not hold: {text:?}, the result {output:?}"
            ));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The replay
// ---------------------------------------------------------------------------------------------

fn replay(name: &str) {
    let scenario = Scenario::load(name);
    let mut play = Play::start(&scenario);
    for step in &scenario.steps {
        play.step(step);
    }
    let mut failures = std::mem::take(&mut play.failures);
    for kind in &play.client.unoffered {
        failures.push(format!(
            "the scripted answer {kind:?} was not among the options offered"
        ));
    }
    if !play.client.answers.is_empty() {
        failures.push(format!(
            "{} scripted permission answer(s) left unused",
            play.client.answers.len()
        ));
    }
    let log = play.scratch.log(&play.session);
    check(&play, &scenario, &log, &mut failures);

    let transcript = play.transcript();
    check_live_output(&transcript, &mut failures);
    let (transcript, _) = without_live_output(&transcript);
    let mut normaliser = Normaliser::new(&play, scenario.host_backend);
    normaliser.background_writes = scenario
        .background_writes
        .iter()
        .map(|p| play.scratch.ws().join(p).display().to_string())
        .collect();
    let text = format!(
        "{}\n--- session log ---\n{}",
        normaliser.transcript(&transcript),
        normaliser.log(&log)
    );
    for failure in &failures {
        eprintln!("{name}: {failure}");
    }
    insta::with_settings!({
        description => scenario.description.as_str(),
        omit_expression => true,
    }, {
        insta::assert_snapshot!(name, text);
    });
    assert!(failures.is_empty(), "{name}:\n{}", failures.join("\n"));
}
