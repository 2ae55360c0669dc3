//! Load and soak of agentd (issue 18, item 2; `docs/reliability.md`, "Load and soak"): one
//! `agentd acp` serves 8 sessions at once, round after round, for each usable backend. In a
//! round the client opens 8 sessions, sends each a prompt without waiting for the others'
//! answers, and closes them all once every prompt is answered; each prompt's scripted turns run
//! confined `bash` commands (a write in the session's workspace, a write outside it that the
//! sandbox denies) and the confined file tools (`write_file`, then `read_file` of what it
//! wrote). Every prompt must end its turn with each call's result as its policy says, and no
//! permission may be asked.
//!
//! agentd's and its helper's descriptors and resident memory are taken after every round. The
//! first [`WARM_UP_ROUNDS`] warm agentd up; the peak over the last [`WINDOW`] of them is compared
//! with the peak over the last [`WINDOW`] rounds of all (the same work): the growth must stay
//! within the bounds of `confine-helper/tests/support/proc_watch.rs` (10% and a small slack).
//! Then agentd's only child is its helper and the helper has none (no zombie), no
//! command's temp directory is left, agentd's mounts are those of the start, and once the
//! client hangs up agentd and its helper exit and every session temp directory is gone.
//!
//! `AGENTD_SOAK=full` runs more rounds (see [`FULL_ROUNDS`]); by default the test suite runs
//! [`SMALL_ROUNDS`]. The figures each run prints (with `--nocapture`) are the ones
//! `docs/reliability.md` reports. `confine-helper/tests/soak.rs` is the helper's own soak, with
//! thousands of commands.

#[path = "../../confine-helper/tests/support/proc_watch.rs"]
mod proc_watch;
mod support;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use proc_watch::Footprint;
use serde_json::{Value, json};
use support::acp::{AcpClient, Permission, Scratch, normalized_updates, scratch_base};

/// Sessions working at once.
const SESSIONS: usize = 8;

/// Rounds by default: half of them to warm up.
const SMALL_ROUNDS: usize = 40;

/// Rounds with `AGENTD_SOAK=full`.
const FULL_ROUNDS: usize = 200;

/// The rounds that warm agentd up before anything is judged. Its resident memory settles only
/// once tokio's blocking pool has as many threads as the busiest moment needs (each brings a
/// stack and a malloc arena: ~1 MiB): between 7 and 11 threads, reached after 11 to 22 rounds
/// in trials here.
const WARM_UP_ROUNDS: usize = 20;

/// How many rounds' footprints make one figure: the peak of the samples taken after each. The
/// allocator gives memory back to the system or keeps it as it likes, so agentd's resident
/// memory between two identical rounds swings by up to 3 MiB (~8%) with no trend; the peak over
/// a few rounds sees past that, and a leak raises it as surely as any one sample.
const WINDOW: usize = 5;

/// How long agentd may take over any one answer.
const ANSWER: Duration = Duration::from_secs(120);

/// The exit status of the command whose write outside the workspace was denied.
const DENIED: i64 = 7;

/// One backend at a time: the figures are steadier without a second soak beside them, and the
/// temp-directory check reads a directory every helper of this uid shares.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn rounds() -> usize {
    match std::env::var("AGENTD_SOAK").as_deref() {
        Ok("full") => FULL_ROUNDS,
        _ => SMALL_ROUNDS,
    }
}

/// What every session's prompt does: a bash write in its workspace and a `write_file`, then a
/// `read_file` of what was written and a bash write outside the workspace (denied).
fn script(outside: &Path) -> String {
    let outside_write = format!(
        "echo x > {}/canary && exit 0 || exit {DENIED}",
        outside.display()
    );
    let call = |name: &str, arguments: Value| {
        format!(
            "[[turn.tool_calls]]\nname = \"{name}\"\narguments = {}\n",
            toml_inline(&arguments)
        )
    };
    [
        "[[turn]]\n".to_owned(),
        call("bash", json!({"command": "printf inside > inside.txt"})),
        call(
            "write_file",
            json!({"path": "written.txt", "content": "written\n"}),
        ),
        "\n[[turn]]\n".to_owned(),
        call("read_file", json!({"path": "written.txt"})),
        call("bash", json!({"command": outside_write})),
        "\n[[turn]]\ntext = \"Round done.\"\n".to_owned(),
    ]
    .concat()
}

/// A flat JSON object of strings as a TOML inline table (a JSON string is a TOML basic string).
fn toml_inline(object: &Value) -> String {
    let fields: Vec<String> = object
        .as_object()
        .expect("an object")
        .iter()
        .map(|(k, v)| format!("{k} = {v}"))
        .collect();
    format!("{{ {} }}", fields.join(", "))
}

/// Sends `requests` (method, params) without waiting, then reads until each is answered.
/// Returns the answers in the order sent and every `session/update` by session id.
fn all_at_once(
    client: &mut AcpClient,
    requests: Vec<(&str, Value)>,
) -> (Vec<Value>, HashMap<String, Vec<Value>>) {
    let ids: Vec<u64> = requests
        .into_iter()
        .map(|(method, params)| client.send(method, params))
        .collect();
    let mut answers: HashMap<u64, Value> = HashMap::new();
    let mut updates: HashMap<String, Vec<Value>> = HashMap::new();
    while answers.len() < ids.len() {
        let message = client
            .next(ANSWER)
            .unwrap_or_else(|| panic!("agentd did not answer within {ANSWER:?}"));
        if message.get("method").is_none() {
            if let Some(id) = message["id"].as_u64() {
                answers.insert(id, message);
            }
        } else if message["method"] == "session/update" {
            let session = message["params"]["sessionId"].as_str().unwrap_or_default();
            updates.entry(session.to_owned()).or_default().push(message);
        }
    }
    let answers = ids
        .iter()
        .map(|id| answers.remove(id).expect("answered"))
        .collect();
    (answers, updates)
}

/// One round: 8 sessions opened, prompted and closed, all at once; every result checked.
fn round(client: &mut AcpClient, scratch: &Scratch, backend: &str, n: usize) {
    let dirs: Vec<_> = (0..SESSIONS)
        .map(|i| {
            let dir = scratch.ws().join(format!("r{n}-s{i}"));
            std::fs::create_dir_all(&dir).expect("session dir");
            dir
        })
        .collect();
    let (opened, _) = all_at_once(
        client,
        dirs.iter()
            .map(|d| ("session/new", json!({"cwd": d, "mcpServers": []})))
            .collect(),
    );
    let sessions: Vec<String> = opened
        .iter()
        .map(|a| {
            let id = a["result"]["sessionId"].as_str();
            id.unwrap_or_else(|| panic!("session/new failed: {a}"))
                .to_owned()
        })
        .collect();
    let prompt = |s: &String| {
        let text = [json!({"type": "text", "text": "go"})];
        ("session/prompt", json!({"sessionId": s, "prompt": text}))
    };
    let (answers, updates) = all_at_once(client, sessions.iter().map(prompt).collect());
    for ((session, answer), dir) in sessions.iter().zip(&answers).zip(&dirs) {
        let what = format!("{backend}, round {n}, session in {}", dir.display());
        assert_eq!(
            answer["result"]["stopReason"], "end_turn",
            "{what}: {answer}"
        );
        let notes = updates.get(session).map(Vec::as_slice).unwrap_or_default();
        check_results(&what, backend, notes);
        assert_eq!(
            std::fs::read(dir.join("inside.txt")).ok(),
            Some(b"inside".to_vec())
        );
        assert_eq!(
            std::fs::read(dir.join("written.txt")).ok(),
            Some(b"written\n".to_vec())
        );
    }
    let (closed, _) = all_at_once(
        client,
        sessions
            .iter()
            .map(|s| ("session/close", json!({"sessionId": s})))
            .collect(),
    );
    for answer in closed {
        assert_eq!(
            answer["result"],
            json!({}),
            "{backend}, round {n}: {answer}"
        );
    }
    assert!(
        client.permission_requests.is_empty(),
        "{backend}: a permission was asked: {:?}",
        client.permission_requests
    );
}

/// The four calls' results (the scripted model numbers them `call_TURN_INDEX`): each bash call
/// ran under `backend`, and each call ended as its policy says.
fn check_results(what: &str, backend: &str, notes: &[Value]) {
    let results: HashMap<String, Value> = normalized_updates(notes)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update")
        .map(|u| (u["toolCallId"].as_str().unwrap_or_default().to_owned(), u))
        .collect();
    let result = |id: &str, status: &str| {
        let result = results
            .get(id)
            .unwrap_or_else(|| panic!("{what}: no result of {id}: {results:#?}"));
        assert_eq!(result["status"], status, "{what}: {id}: {result}");
        result
    };
    let inside = result("call_1_1", "completed");
    result("call_1_2", "completed");
    let read = result("call_2_1", "completed")["content"].to_string();
    assert!(read.contains("written"), "{what}: read_file showed {read}");
    let outside = result("call_2_2", "failed");
    for (bash, code) in [(inside, 0), (outside, DENIED)] {
        let raw = &bash["_meta"]["agentd"]["facts"];
        assert_eq!(raw["backend"], backend, "{what}: {bash}");
        assert_eq!(raw["exit"]["code"], code, "{what}: {bash}");
        assert!(
            raw["runner_failure"].is_null() && raw["refused"].is_null(),
            "{what}: {bash}"
        );
    }
}

/// agentd's helper: its one child named `confine-helper`.
fn helper_of(agentd: u32) -> u32 {
    let children = proc_watch::children(agentd);
    match children.as_slice() {
        [child] if child.name == "confine-helper" && child.state != 'Z' => child.pid,
        other => panic!("agentd's children should be its helper alone: {other:?}"),
    }
}

fn soak(backend: &str) {
    let _alone = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let name = format!("agentd soak {backend}");
    if let Err((need, why)) = support::backend_works(backend) {
        support::skip::skip(&name, need, why);
        return;
    }
    let scratch = Scratch::new_in(&scratch_base(), &format!("soak-{backend}"));
    let outside = scratch.root.join("outside");
    std::fs::create_dir_all(&outside).expect("outside dir");
    scratch.config(&format!("[sandbox]\nbackend = \"{backend}\"\n"));
    let script = scratch.script(&script(&outside));
    let temp = proc_watch::TempDirs::before();
    let mut client = AcpClient::start(&scratch, &script, &["--sandbox-mode", "workspace-write"]);
    client.permission = Permission::Reject;
    let agentd = client.child.id();
    let mounts = proc_watch::mounts(agentd);

    // A first session starts the helper before anything is measured.
    let probe = client.open_session(&scratch.ws());
    let (answer, notes) = client.prompt(&probe, "go");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let first = notes
        .iter()
        .map(|n| &n["params"]["update"])
        .find(|u| u["sessionUpdate"] == "tool_call_update" && u.get("status").is_some());
    assert!(
        first.is_some_and(|u| u["_meta"]["agentd"]["facts"]["backend"] == backend),
        "{name}: {backend} works here, but the first command did not run under it: {first:?}"
    );
    let (closed, _) = client.request("session/close", json!({"sessionId": probe}));
    assert_eq!(closed["result"], json!({}), "{closed}");

    let helper = helper_of(agentd);
    let rounds = rounds();
    let began = Instant::now();
    let mut samples = Vec::new();
    for n in 0..rounds {
        round(&mut client, &scratch, backend, n);
        samples.push((proc_watch::footprint(agentd), proc_watch::footprint(helper)));
    }
    let peak = |window: &[(Footprint, Footprint)]| {
        (
            proc_watch::peak(window.iter().map(|s| s.0)),
            proc_watch::peak(window.iter().map(|s| s.1)),
        )
    };
    let warm = peak(&samples[WARM_UP_ROUNDS - WINDOW..WARM_UP_ROUNDS]);
    let end = peak(&samples[rounds - WINDOW..]);
    println!(
        "{name}: {rounds} rounds of {SESSIONS} sessions at once ({} prompts, {} confined tool \
         calls), the first {WARM_UP_ROUNDS} to warm up; {:.1?}; peaks over {WINDOW} rounds: \
         agentd after warm-up {}, at the end {}; helper after warm-up {}, at the end {}",
        rounds * SESSIONS,
        rounds * SESSIONS * 4,
        began.elapsed(),
        warm.0,
        end.0,
        warm.1,
        end.1
    );
    proc_watch::assert_stable(&format!("{name}: agentd"), warm.0, end.0);
    proc_watch::assert_stable(&format!("{name}: helper"), warm.1, end.1);
    assert_eq!(helper_of(agentd), helper, "{name}: the helper was replaced");
    proc_watch::assert_no_children(&format!("{name}: helper"), helper);
    proc_watch::assert_same_mounts(&name, agentd, &mounts);
    let written: Vec<_> = std::fs::read_dir(&outside)
        .expect("outside")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(written.is_empty(), "{name}: written outside: {written:?}");

    client.hang_up();
    let status = client.child.wait().expect("agentd exits");
    assert!(status.success(), "{name}: agentd exited {status:?}");
    assert!(
        support::wait_gone(helper, Duration::from_secs(10)),
        "{name}: the helper outlived agentd"
    );
    temp.assert_none_left(&name, helper, None);
    let sessions_left: Vec<_> = std::fs::read_dir(scratch.root.join("tmp"))
        .expect("scratch tmp")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("agentd-session-") && !n.ends_with(".lock"))
        .collect();
    assert!(
        sessions_left.is_empty(),
        "{name}: session temp directories left: {sessions_left:?}"
    );
}

#[test]
fn eight_sessions_at_once_under_namespaces_round_after_round_leave_agentd_as_they_found_it() {
    soak("namespaces");
}

#[test]
fn eight_sessions_at_once_under_landlock_round_after_round_leave_agentd_as_they_found_it() {
    soak("landlock");
}
