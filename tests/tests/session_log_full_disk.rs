//! A full disk under the session log: the turn that cannot be recorded fails with a JSON-RPC
//! error naming the cause and the log's path — at its first record, and half-way, once the
//! model's answer was shown — agentd goes on serving, the log keeps only whole lines, and a fresh
//! agentd loads it and replays what was recorded before the disk filled. Once there is space
//! again, the session goes on where it was.
//!
//! The full disk is a small tmpfs mounted over agentd's state directory in a user and mount
//! namespace of its own, the same as root and as an unprivileged user, and gone with agentd:
//! nothing is mounted on the host. agentd runs there as the user running the test (`unshare
//! --map-current-user --keep-caps`, the capabilities dropped again with `setpriv` once the tmpfs
//! is mounted: util-linux), so the helper's user and its ceiling are the same as outside. The test
//! fills and frees that file system from outside, through `/proc/<agentd>/root`. Where user
//! namespaces, `unshare` or `setpriv` are not available the test says `SKIP` and why.

mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use support::acp::{AcpClient, Scratch, normalized_updates, wrapped};

/// A short answer, then a long one: [`LARGE`] bytes.
fn script() -> String {
    format!(
        "[[turn]]\ntext = \"First answer.\"\n\n[[turn]]\ntext = \"{}\"\n",
        "y".repeat(LARGE)
    )
}

/// The size of the file system under the state directory: room for a session and a turn.
const TMPFS_SIZE: &str = "1m";

/// A record larger than the room left: a page of the log's and [`FREED`].
const LARGE: usize = 32 * 1024;

/// The room made for the records before the long answer.
const FREED: u64 = 8 * 1024;

/// Runs a program in a user and mount namespace of its own as the user running the test: `sh
/// -c SCRIPT DIR PROGRAM ARGS…` mounts a tmpfs of `size` at `DIR` (`$0`) and runs the program
/// without the namespace's capabilities.
fn in_namespace(size: &str) -> Vec<String> {
    let script = format!(
        "mount -t tmpfs -o size={size},mode=0700 agentd-full-disk \"$0\" && exec setpriv \
         --inh-caps=-all --ambient-caps=-all \"$@\""
    );
    [
        "unshare",
        "--user",
        "--map-current-user",
        "--keep-caps",
        "--mount",
        "--",
        "sh",
        "-c",
        &script,
    ]
    .map(str::to_owned)
    .to_vec()
}

/// Why a tmpfs cannot be mounted in a namespace of this user's own here, if it cannot.
fn namespaces_unavailable(scratch: &Scratch) -> Option<String> {
    let probe = scratch.root.join("probe");
    std::fs::create_dir_all(&probe).expect("probe dir");
    let wrapper = in_namespace("4k");
    let output = Command::new(&wrapper[0])
        .args(&wrapper[1..])
        .arg(&probe)
        .arg("true")
        .stdin(Stdio::null())
        .output();
    match output {
        Err(e) => Some(format!("unshare (util-linux) cannot be run: {e}")),
        Ok(out) if !out.status.success() => Some(format!(
            "a tmpfs cannot be mounted in a user namespace of this user's ({}): {:?}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Ok(_) => None,
    }
}

/// `agentd acp` in a user and mount namespace of its own, its state directory a tmpfs of
/// [`TMPFS_SIZE`] that only it sees.
fn start_on_tmpfs(scratch: &Scratch, script: &Path) -> AcpClient {
    let args = ["--model-script".as_ref(), script.as_os_str()];
    let agentd = AcpClient::command(scratch, &args);
    let wrapper = in_namespace(TMPFS_SIZE);
    let state = scratch.state();
    let wrapper: Vec<&std::ffi::OsStr> = wrapper
        .iter()
        .map(std::ffi::OsStr::new)
        .chain([state.as_os_str()])
        .collect();
    AcpClient::spawn_command(wrapped(&agentd, &wrapper), Stdio::inherit())
}

/// `path` as agentd's mount namespace sees it, reached from the host.
fn inside(client: &AcpClient, path: &Path) -> PathBuf {
    let relative = path.strip_prefix("/").expect("an absolute path");
    PathBuf::from(format!("/proc/{}/root", client.child.id())).join(relative)
}

/// Fills the file system at `dir` (seen from the host) up to its last byte with a file
/// `filler`, and returns it.
fn fill(dir: &Path) -> std::fs::File {
    let mut file = std::fs::File::create(dir.join("filler")).expect("create the filler");
    let chunk = vec![0u8; 64 * 1024];
    let full = loop {
        if let Err(e) = file.write_all(&chunk) {
            break e;
        }
    };
    assert_eq!(
        full.kind(),
        std::io::ErrorKind::StorageFull,
        "filling the tmpfs: {full}"
    );
    file
}

/// The log at `path`: its bytes must be whole JSON lines.
fn whole_lines(path: &Path) -> Vec<Value> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let text = String::from_utf8_lossy(&bytes);
    if !text.ends_with('\n') {
        let torn = &text[text.rfind('\n').map_or(0, |i| i + 1)..];
        let shown: String = torn.chars().take(120).collect();
        panic!(
            "the log ends in a torn line of {} bytes: {shown}…",
            torn.len()
        );
    }
    text.lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not a whole line ({e}): {line}"))
        })
        .collect()
}

/// What a fresh agentd, outside any namespace, replays of the session whose log is at `log`.
fn replay_of_copy(log: &Path, session: &str, cwd: &Path, script: &Path) -> Vec<Value> {
    let copy = Scratch::new("full-disk-copy");
    std::fs::copy(log, copy.state().join(format!("{session}.jsonl"))).expect("copy the log");
    let mut client = AcpClient::start(&copy, script, &[]);
    let (_, replay) = client.load_session(cwd, session);
    normalized_updates(&replay)
}

/// Asserts that `answer` is the error of a full disk under the log at `path`.
fn assert_full(answer: &Value, path: &Path) {
    let error = &answer["error"];
    assert_eq!(error["code"], -32603, "{answer}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("No space left on device") && message.contains(&*path.to_string_lossy()),
        "the error names the cause and the log: {message}"
    );
}

/// What `session/load` replays of a prompt: its text, then what it showed.
fn shown(prompt: &str, notes: &[Value]) -> Vec<Value> {
    let mut all = vec![json!({"params": {"update": {
        "sessionUpdate": "user_message_chunk",
        "content": {"type": "text", "text": prompt},
    }}})];
    all.extend(notes.iter().cloned());
    normalized_updates(&all)
}

#[test]
fn a_full_disk_fails_the_turn_with_its_cause_and_leaves_a_log_that_loads() {
    let scratch = Scratch::new("full-disk");
    if let Some(why) = namespaces_unavailable(&scratch) {
        support::skip::skip(
            "a_full_disk_fails_the_turn_with_its_cause_and_leaves_a_log_that_loads",
            support::skip::Need::UserNamespace,
            why,
        );
        return;
    }
    let script = scratch.script(&script());
    let mut client = start_on_tmpfs(&scratch, &script);
    let session = client.open_session(&scratch.ws());
    let state = inside(&client, &scratch.state());
    let log = state.join(format!("{session}.jsonl"));
    // The path agentd knows it by.
    let path = scratch.state().join(format!("{session}.jsonl"));
    assert!(!path.exists(), "the log is on the tmpfs, not on the host");
    let (answer, first) = client.prompt(&session, "first");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let before = whole_lines(&log);

    // Full: the turn fails at its first record, larger than the room left.
    let filler = fill(&state);
    let (answer, _) = client.prompt(&session, &"x".repeat(LARGE));
    assert_full(&answer, &path);
    // A session cannot start either, and leaves no file behind.
    let (answer, _) = client.request(
        "session/new",
        json!({"cwd": scratch.ws(), "mcpServers": []}),
    );
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("No space left on device"),
        "session/new on a full disk: {answer}"
    );
    let mut left: Vec<String> = std::fs::read_dir(&state)
        .expect("the state directory")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    // The checkpoint store was made by the first turn, before the disk filled.
    assert_eq!(
        left,
        [
            format!("{session}.jsonl"),
            "checkpoints".to_owned(),
            "filler".to_owned()
        ]
    );
    // agentd still serves.
    let (listed, _) = client.request("session/list", json!({}));
    assert_eq!(
        listed["result"]["sessions"][0]["sessionId"], session,
        "{listed}"
    );
    assert_eq!(client.child.try_wait().expect("wait"), None, "agentd runs");
    // The log holds what it held before the disk filled, in whole lines, and loads.
    assert_eq!(whole_lines(&log), before);
    let mut replayed = shown("first", &first);
    assert_eq!(
        replay_of_copy(&log, &session, &scratch.ws(), &script),
        replayed,
        "a fresh agentd replays what was recorded before the disk filled"
    );

    // Room for the turn's first records, not for the long answer: the turn fails half-way,
    // after the answer was shown.
    let size = filler.metadata().expect("filler").len();
    filler.set_len(size - FREED).expect("free some room");
    let (answer, shown_live) = client.prompt(&session, "second");
    assert_full(&answer, &path);
    assert!(
        !shown_live.is_empty(),
        "the answer was shown before it was to be recorded"
    );
    let halfway = whole_lines(&log);
    let kinds: Vec<&Value> = halfway[before.len()..].iter().map(|r| &r["type"]).collect();
    assert_eq!(
        kinds,
        [
            "prompt/submitted",
            "turn/started",
            "checkpoint/recorded",
            "model/request"
        ],
        "what fit"
    );
    replayed.extend(shown("second", &[]));
    assert_eq!(
        replay_of_copy(&log, &session, &scratch.ws(), &script),
        replayed
    );

    // With room again, the session goes on after its last whole line.
    drop(filler);
    std::fs::remove_file(state.join("filler")).expect("free the tmpfs");
    let (answer, notes) = client.prompt(&session, "third");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(whole_lines(&log)[..halfway.len()], halfway[..]);
    replayed.extend(shown("third", &notes));
    assert_eq!(
        replay_of_copy(&log, &session, &scratch.ws(), &script),
        replayed
    );
}
