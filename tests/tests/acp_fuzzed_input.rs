//! Randomized bad ACP input over the real wire, in the normal suite (the coverage-guided target
//! `fuzz/fuzz_targets/acp_input.rs` goes further): valid JSON-RPC lines of every method agentd
//! answers, mutated at random, fed to the real `agentd acp`.
//!
//! Two kinds of mutation. In the structure: values of the params replaced by values of other
//! shapes, keys dropped or added, the method swapped, with the envelope kept, so that every line
//! is a request that must be answered under its id, with a result or a JSON-RPC error. In the
//! bytes: flips, cuts, insertions and copies, after which a line may be anything; each batch of
//! them is followed by a request that must be answered. Through it all agentd keeps running and
//! writes only JSON-RPC messages, and afterwards a new session's prompt is answered as on a fresh
//! agentd.
//!
//! Seeded: a failure names its seed, and `ACP_FUZZ_SEED=<seed> cargo test -p agentd-scenarios
//! --test acp_fuzzed_input` replays it. Without the variable the default seed keeps CI
//! deterministic.

/// The seeded generator and seed reading of the protocol's randomized tests.
#[path = "../../protocol/tests/support/mod.rs"]
mod seeded;
mod support;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use seeded::Rng;
use serde_json::{Map, Value, json};
use support::acp::{AcpClient, Scratch};

const DEFAULT_SEED: u64 = 0x5eed_acf0_22ed_0001;
/// Requests mutated in their structure, each answered before the next is sent.
const STRUCTURED: usize = 400;
/// Batches of lines mutated in their bytes, and the lines of a batch.
const BATCHES: usize = 40;
const BATCH_LEN: usize = 8;
const LIMIT: Duration = Duration::from_secs(60);

/// The sessions the requests name: one that stays open (unless a mutation closes it) and one
/// the `session/close` template closes.
struct Sessions {
    open: String,
    closing: String,
}

/// A valid request of every method agentd answers: `(method, params)`.
fn templates(ws: &Path, sessions: &Sessions) -> Vec<(&'static str, Value)> {
    let (open, closing) = (&sessions.open, &sessions.closing);
    vec![
        (
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        ),
        ("session/new", json!({"cwd": ws, "mcpServers": []})),
        (
            "session/load",
            json!({"sessionId": closing, "cwd": ws, "mcpServers": []}),
        ),
        ("session/list", json!({"cwd": ws})),
        (
            "session/prompt",
            json!({"sessionId": open, "prompt": [{"type": "text", "text": "hi"}]}),
        ),
        (
            "session/set_mode",
            json!({"sessionId": open, "modeId": "read-only"}),
        ),
        (
            "session/set_config_option",
            json!({"sessionId": open, "configId": "approval-policy", "value": "never"}),
        ),
        (
            "session/set_config_option",
            json!({"sessionId": open, "configId": "sandbox-mode", "value": "workspace-write"}),
        ),
        ("session/cancel", json!({"sessionId": open})),
        ("session/close", json!({"sessionId": closing})),
    ]
}

/// A value of a random shape, some of them close to what a param wants.
fn random_value(rng: &mut Rng, depth: usize) -> Value {
    match rng.below(if depth > 3 { 12 } else { 15 }) {
        0 => Value::Null,
        1 => json!(true),
        2 => json!(rng.pick(&[0i64, -1, 1, i64::MAX, i64::MIN])),
        3 => json!(1e308),
        4 => serde_json::from_str("18446744073709551616").expect("a big number"),
        5 => json!(""),
        6 => json!(rng.pick(&[
            "read-only",
            "workspace-write",
            "danger-full-access",
            "ask",
            "never",
            "sandbox-mode",
            "approval-policy",
            "model",
            "/",
            "/nonexistent",
            "relative/path",
            "\u{0}",
            "\u{202e}",
            "file:///etc/hostname",
        ])),
        7 => json!("x".repeat(rng.below(3) * 5_000)),
        8 => json!({"type": "text"}),
        9 => json!({"type": "resource_link", "uri": "file:///nonexistent", "name": "x"}),
        10 => json!({"type": rng.pick(&["image", "audio", "resource", "nonsense"])}),
        11 => json!([]),
        12 => Value::Array(
            (0..rng.below(4))
                .map(|_| random_value(rng, depth + 1))
                .collect(),
        ),
        13 => {
            let mut object = Map::new();
            for _ in 0..rng.below(4) {
                let key = rng.pick(&["type", "text", "sessionId", "uri", "name", "a"]);
                object.insert(key.to_owned(), random_value(rng, depth + 1));
            }
            Value::Object(object)
        }
        // Nested deeper than serde_json parses (128): the parser's recursion.
        _ => (0..200).fold(json!([]), |inner, _| Value::Array(vec![inner])),
    }
}

/// A random place inside `value` (`value` itself included).
fn random_node<'v>(rng: &mut Rng, value: &'v mut Value) -> &'v mut Value {
    let children = match value {
        Value::Array(items) => items.len(),
        Value::Object(map) => map.len(),
        _ => 0,
    };
    if children == 0 || rng.below(6) == 0 {
        return value;
    }
    let i = rng.below(children);
    match value {
        Value::Array(items) => random_node(rng, &mut items[i]),
        Value::Object(map) => {
            let child = map.values_mut().nth(i).expect("a child");
            random_node(rng, child)
        }
        _ => unreachable!("a leaf has no children"),
    }
}

/// Mutates the method or the params of a request, mostly once, at most 3 times.
fn mutate_structure(rng: &mut Rng, method: &mut String, params: &mut Value) {
    for _ in 0..rng.pick(&[1, 1, 1, 1, 1, 1, 2, 2, 3]) {
        match rng.below(12) {
            0 => {
                *method = rng
                    .pick(&[
                        "initialize",
                        "session/new",
                        "session/prompt",
                        "session/cancel",
                        "session/nope",
                        "",
                        "session/",
                        "$/cancel_request",
                        "SESSION/NEW",
                    ])
                    .to_owned();
            }
            1 | 2 => {
                let node = random_node(rng, params);
                if let Value::Object(map) = node
                    && !map.is_empty()
                {
                    let key = map.keys().nth(rng.below(map.len())).cloned();
                    key.map(|key| map.remove(&key));
                }
            }
            3 | 4 => {
                let node = random_node(rng, params);
                if let Value::Object(map) = node {
                    let key = rng.pick(&["sessionId", "cwd", "prompt", "extra", "_meta"]);
                    map.insert(key.to_owned(), random_value(rng, 0));
                }
            }
            _ => *random_node(rng, params) = random_value(rng, 0),
        }
    }
}

/// Mutates the bytes of a line, 1 to 4 times.
fn mutate_bytes(rng: &mut Rng, line: &mut Vec<u8>) {
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(line.len() + 1);
        let end = (at + 1 + rng.below(12)).min(line.len());
        match rng.below(6) {
            0 if at < line.len() => line[at] ^= 1 << rng.below(8),
            1 if at < line.len() => {
                line[at] = rng.pick(&[b'{', b'}', b'[', b']', b'"', b':', b',', b'\\', 0xff, 0]);
            }
            2 => {
                line.drain(at..end);
            }
            3 => {
                let copy = line[at..end].to_vec();
                line.splice(at..at, copy);
            }
            4 => line.truncate(at),
            _ => {
                let bytes = rng.pick(&[
                    &b"\n"[..],
                    b"null",
                    b"\"\\u0000\"",
                    b"\xc3\x28",
                    b"{\"a\":",
                    b"99999999999999999999",
                    b" ",
                ]);
                line.splice(at..at, bytes.iter().copied());
            }
        }
    }
}

/// The client, and what to say when something fails.
struct Run {
    client: AcpClient,
    /// The seed, and the command that replays it.
    reproduce: String,
    /// What was sent last.
    step: String,
    stderr: std::path::PathBuf,
}

impl Run {
    fn fail(&self, what: &str) -> ! {
        let stderr = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let tail: Vec<&str> = stderr.lines().rev().take(20).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        panic!(
            "{what}\nafter {}\n{}\nagentd's stderr ends:\n{}",
            self.step,
            self.reproduce,
            tail.join("\n")
        );
    }

    /// Reads agentd's messages until the response to `id`; every message must be JSON-RPC.
    fn answer(&mut self, id: &Value) -> Value {
        loop {
            let Some(message) = self.client.next(LIMIT) else {
                let alive = matches!(self.client.child.try_wait(), Ok(None));
                self.fail(&format!(
                    "no answer with the id {id} within {LIMIT:?} (agentd running: {alive})"
                ));
            };
            if message["jsonrpc"] != "2.0" {
                self.fail(&format!("agentd wrote something not JSON-RPC: {message}"));
            }
            if message.get("method").is_some() {
                continue;
            }
            let (result, error) = (message.get("result"), message.get("error"));
            if result.is_some() == error.is_some() || error.is_some_and(|e| !e["code"].is_i64()) {
                self.fail(&format!("neither one result nor one error: {message}"));
            }
            // JSON-RPC's response always has an id, `null` when the request's could not be
            // read: a missing one is not `null` (indexing a missing key would read as `null`).
            let Some(answered) = message.get("id") else {
                self.fail(&format!("a response without an id: {message}"));
            };
            if answered == id {
                return message;
            }
        }
    }

    /// Sends a request and reads its answer. A line nested deeper than a JSON parser follows
    /// is a parse error, and params that are a bare number, string or boolean make the line no
    /// JSON-RPC request: the ACP crate answers both with an error under the id `null`, as for
    /// a line whose id cannot be read.
    fn request(&mut self, id: &str, method: &str, params: Value) -> Value {
        let unreadable = depth(&params) >= PARSER_DEPTH;
        let expected = match params {
            _ if unreadable => Value::Null,
            Value::Number(_) | Value::String(_) | Value::Bool(_) => Value::Null,
            _ => json!(id),
        };
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.client.write_line(line.to_string().as_bytes());
        self.answer(&expected)
    }

    fn new_session(&mut self, ws: &Path, id: &str) -> String {
        let new = self.request(id, "session/new", json!({"cwd": ws, "mcpServers": []}));
        match new["result"]["sessionId"].as_str() {
            Some(session) => session.to_owned(),
            None => self.fail(&format!("session/new failed: {new}")),
        }
    }
}

#[test]
fn mutated_requests_are_each_answered_and_agentd_keeps_serving() {
    let seed = seeded::seed("ACP_FUZZ_SEED", DEFAULT_SEED);
    let mut rng = Rng(seed);
    let scratch = Scratch::new("fuzzed-input");
    let script = scratch.script("[[turn]]\ntext = \"Hello.\"\n");
    let stderr = scratch.root.join("agentd.stderr");
    let args = ["--model-script".as_ref(), script.as_os_str()];
    let command = AcpClient::command(&scratch, &args);
    let log = std::fs::File::create(&stderr).expect("the stderr file");
    let mut run = Run {
        client: AcpClient::spawn_command(command, Stdio::from(log)),
        reproduce: format!(
            "seed {seed:#x}; reproduce with ACP_FUZZ_SEED={seed:#x} cargo test -p \
             agentd-scenarios --test acp_fuzzed_input"
        ),
        step: "the start".to_owned(),
        stderr,
    };
    let ws = scratch.ws();
    run.request(
        "init",
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let sessions = Sessions {
        open: run.new_session(&ws, "open"),
        closing: run.new_session(&ws, "closing"),
    };
    let templates = templates(&ws, &sessions);

    for n in 0..STRUCTURED {
        let (method, params) = templates[rng.below(templates.len())].clone();
        let (mut method, mut params) = (method.to_owned(), params);
        mutate_structure(&mut rng, &mut method, &mut params);
        let id = format!("s-{n}");
        run.step = format!("request {id}: {method} {}", shortened(&params));
        run.request(&id, &method, params);
    }

    for batch in 0..BATCHES {
        for n in 0..BATCH_LEN {
            let (method, params) = templates[rng.below(templates.len())].clone();
            let id = format!("b-{batch}-{n}");
            let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
            let mut bytes = line.to_string().into_bytes();
            mutate_bytes(&mut rng, &mut bytes);
            run.client.write_line(&bytes);
        }
        run.step = format!("byte batch {batch}");
        let probe = format!("probe-{batch}");
        run.request(&probe, "session/list", json!({}));
    }

    // A new session works as on a fresh agentd.
    let fresh = run.new_session(&ws, "fresh");
    let answer = run.request(
        "fresh-prompt",
        "session/prompt",
        json!({"sessionId": fresh, "prompt": [{"type": "text", "text": "still there?"}]}),
    );
    if answer["result"]["stopReason"] != "end_turn" {
        run.fail(&format!("the prompt of a new session failed: {answer}"));
    }
    if !matches!(run.client.child.try_wait(), Ok(None)) {
        run.fail("agentd is no longer running");
    }
}

/// How deep serde_json parses: the request's envelope is one level.
const PARSER_DEPTH: usize = 128;

/// The levels of arrays and objects in `value`.
fn depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// `value` as JSON, cut for a message.
fn shortened(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(300) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}
