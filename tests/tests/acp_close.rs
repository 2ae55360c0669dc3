//! `session/close` and the connection's end over the real `agentd acp` wire, with a scripted
//! model and commands really confined: a closed session is gone (a prompt for it is "not
//! found") until `session/load` reads it back from its log; a close during a background task, a
//! running command or a child agent's command answers only once their processes are gone, and
//! another session's task keeps running; when the client closes agentd's stdin, agentd closes
//! every session the same way before it exits.
//!
//! A command of a session blocks reading a FIFO in its workspace (`exec 3<>feed`: opened for
//! reading and writing, so it never sees an end of file), after making `ready`. The host waits
//! for `ready` (inotify), then finds the processes holding the FIFO in `/proc`; whether they
//! are alive, and whether any process reads the FIFO, tells whether the command still runs.

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::acp::{AcpClient, Scratch, normalized_updates};
use support::fifo;

/// The bound of every wait.
const LIMIT: Duration = Duration::from_secs(60);

/// Blocks reading `feed` until killed.
const BLOCK: &str = "exec 3<>feed; : > ready; read -r line <&3";

/// The first prompt starts [`BLOCK`] in the background and answers; a later prompt answers.
fn background_script() -> String {
    format!(
        r#"
[[turn]]
text = "Waiting on the feed in the background."
[[turn.tool_calls]]
name = "bash"
arguments = {{ command = "{}", run_in_background = true }}

[[turn]]
text = "task-1 waits on the feed."

[[turn]]
text = "Still here."
"#,
        BLOCK.replace('"', "\\\"")
    )
}

/// The first prompt runs [`BLOCK`] in the foreground: the turn waits on it.
fn foreground_script() -> String {
    format!(
        r#"
[[turn]]
[[turn.tool_calls]]
name = "bash"
arguments = {{ command = "{}" }}

[[turn]]
text = "The feed ended."
"#,
        BLOCK.replace('"', "\\\"")
    )
}

/// A workspace directory of its own under the scratch's, with the FIFO `feed` in it.
fn workspace(scratch: &Scratch, name: &str) -> PathBuf {
    let dir = scratch.ws().join(name);
    std::fs::create_dir_all(&dir).expect("workspace dir");
    nix::unistd::mkfifo(
        &dir.join("feed"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .expect("mkfifo feed");
    dir
}

fn start(scratch: &Scratch, script: &str) -> AcpClient {
    let script = scratch.script(script);
    AcpClient::start(scratch, &script, &["--sandbox-mode", "workspace-write"])
}

fn initialize(client: &mut AcpClient) -> Value {
    let (init, _) = client.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    init
}

fn new_session(client: &mut AcpClient, cwd: &Path) -> String {
    let (new, _) = client.request("session/new", json!({"cwd": cwd, "mcpServers": []}));
    new["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("session/new failed: {new}"))
        .to_owned()
}

fn close(client: &mut AcpClient, session: &str) -> Value {
    client
        .request("session/close", json!({"sessionId": session}))
        .0
}

fn prompt(client: &mut AcpClient, session: &str, text: &str) -> u64 {
    client.send(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
    )
}

fn not_found(session: &str) -> Value {
    json!({
        "code": -32002,
        "message": format!(
            "session {session} is not open: open it with session/new, or with session/load if \
             it was recorded (session/list lists those that were)"
        ),
        "data": {"sessionId": session},
    })
}

/// Reads until every request of `ids` is answered; the answers by id, and the updates seen.
fn answers(client: &mut AcpClient, ids: &[u64]) -> (Vec<Value>, Vec<Value>) {
    let deadline = Instant::now() + LIMIT;
    let mut got: Vec<Option<Value>> = vec![None; ids.len()];
    let mut notes = Vec::new();
    while got.iter().any(Option::is_none) {
        let left = deadline.saturating_duration_since(Instant::now());
        let message = client
            .next(left)
            .unwrap_or_else(|| panic!("requests {ids:?} not all answered within {LIMIT:?}"));
        if message.get("method").is_some() {
            notes.push(message);
            continue;
        }
        if let Some(at) = ids.iter().position(|id| message["id"] == json!(id)) {
            got[at] = Some(message);
        }
    }
    (got.into_iter().flatten().collect(), notes)
}

/// The processes of a command blocked on `dir/feed`, once it made `dir/ready`: each alive, and
/// the FIFO read. Panics if the command does not get there within [`LIMIT`].
fn blocked_on(dir: &Path) -> Vec<u32> {
    assert!(
        support::wait_for_file(dir, "ready", LIMIT),
        "the command did not make {}/ready within {LIMIT:?}",
        dir.display()
    );
    let feed = dir.join("feed");
    // `ready` comes after `exec 3<>feed`: the shell holds the FIFO by now.
    let holders = fifo::holders_of(&feed);
    assert!(!holders.is_empty(), "no process holds {}", feed.display());
    assert_running(dir, &holders);
    holders
}

/// Every process of `holders` is alive and some process reads `dir/feed`.
fn assert_running(dir: &Path, holders: &[u32]) {
    let dead: Vec<u32> = holders
        .iter()
        .copied()
        .filter(|pid| !support::alive(*pid))
        .collect();
    assert!(dead.is_empty(), "processes of the command ended: {dead:?}");
    let feed = dir.join("feed");
    let read = fifo::open_for_writing(&feed).expect("open feed");
    assert!(read.is_some(), "nothing reads {}", feed.display());
}

/// Every process of `holders` is gone now (not waited for) and nothing reads `dir/feed`.
fn assert_gone(dir: &Path, holders: &[u32]) {
    let alive: Vec<u32> = holders
        .iter()
        .copied()
        .filter(|pid| support::alive(*pid))
        .collect();
    assert!(
        alive.is_empty(),
        "processes of the command still run: {alive:?}"
    );
    let feed = dir.join("feed");
    let read = fifo::open_for_writing(&feed).expect("open feed");
    assert!(read.is_none(), "a process still reads {}", feed.display());
}

/// Closes `session` while its prompt `prompting` waits on a command holding `held`: the prompt
/// answers `cancelled`, the close `{}`, and the command's processes are gone.
fn close_during(client: &mut AcpClient, session: &str, prompting: u64, ws: &Path, held: &[u32]) {
    let closing = client.send("session/close", json!({"sessionId": session}));
    let (got, _) = answers(client, &[prompting, closing]);
    assert_eq!(got[0]["result"]["stopReason"], "cancelled", "{}", got[0]);
    assert_eq!(got[1]["result"], json!({}), "{}", got[1]);
    assert_gone(ws, held);
}

fn of_type<'a>(log: &'a [Value], kind: &str) -> Vec<&'a Value> {
    log.iter().filter(|e| e["type"] == kind).collect()
}

#[test]
fn initialize_advertises_session_close() {
    let scratch = Scratch::new("close-init");
    let mut client = start(&scratch, "[[turn]]\ntext = \"Hello.\"\n");
    let init = initialize(&mut client);
    assert_eq!(
        init["result"]["agentCapabilities"]["sessionCapabilities"],
        json!({"list": {}, "resume": {}, "close": {}}),
        "{init}"
    );
}

#[test]
fn a_closed_session_is_not_found_until_it_is_loaded_from_its_log() {
    let scratch = Scratch::new("close-idle");
    let mut client = start(
        &scratch,
        r#"
[[turn]]
text = "First answer."

[[turn]]
text = "Second answer."
"#,
    );
    initialize(&mut client);
    let session = new_session(&mut client, &scratch.ws());
    let (answer, _) = client.prompt(&session, "first");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let before = scratch.log(&session);

    let closed = close(&mut client, &session);
    assert_eq!(closed["result"], json!({}), "{closed}");
    // Nothing is logged of the close.
    assert_eq!(scratch.log(&session), before);

    // Gone: a prompt, a switch and a second close find no session.
    let (refused, notes) = client.prompt(&session, "second");
    assert_eq!(refused["error"], not_found(&session), "{refused}");
    assert!(notes.is_empty(), "{notes:?}");
    let (switch, _) = client.request(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "sandbox-mode", "value": "read-only"}),
    );
    assert_eq!(switch["error"], not_found(&session), "{switch}");
    let again = close(&mut client, &session);
    assert_eq!(again["error"], not_found(&session), "{again}");
    assert_eq!(scratch.log(&session), before, "the refusals logged nothing");

    // Loaded again from its log: the history is replayed, and the session goes on.
    let (loaded, replayed) = client.request(
        "session/load",
        json!({"sessionId": session, "cwd": scratch.ws(), "mcpServers": []}),
    );
    assert!(loaded.get("result").is_some(), "{loaded}");
    let replayed = normalized_updates(&replayed);
    assert_eq!(
        replayed,
        [
            json!({"sessionUpdate": "user_message_chunk",
                   "content": {"type": "text", "text": "first"}}),
            json!({"sessionUpdate": "agent_message_chunk",
                   "content": {"type": "text", "text": "First answer."}}),
        ]
    );
    let (answer, notes) = client.prompt(&session, "second");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let said: Vec<Value> = normalized_updates(&notes)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["content"]["text"].clone())
        .collect();
    assert_eq!(said, [json!("Second answer.")]);
}

/// A knob switched while the session is idle is held for the next prompt; a close writes it,
/// so the loaded session has the mode the person left it with. The control: an agentd killed
/// before any prompt (SIGKILL, no close) forgets the held switch, as the knobs' RFC says of a
/// crash.
#[test]
fn a_close_writes_the_switches_held_for_the_next_prompt() {
    for closes in [true, false] {
        let scratch = Scratch::new(&format!("close-held-{closes}"));
        let mut client = start(&scratch, "[[turn]]\ntext = \"Hi.\"\n");
        initialize(&mut client);
        let session = new_session(&mut client, &scratch.ws());
        let (switched, _) = client.request(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "sandbox-mode", "value": "read-only"}),
        );
        assert!(switched.get("result").is_some(), "{switched}");
        let held = |log: &[Value]| of_type(log, "sandbox/mode").len();
        assert_eq!(held(&scratch.log(&session)), 0, "held, not yet written");
        if closes {
            let closed = close(&mut client, &session);
            assert_eq!(closed["result"], json!({}), "{closed}");
        }
        drop(client);
        let log = scratch.log(&session);
        assert_eq!(held(&log), usize::from(closes), "{log:#?}");

        let mut again = start(&scratch, "[[turn]]\ntext = \"Hi.\"\n");
        initialize(&mut again);
        let (loaded, _) = again.request(
            "session/load",
            json!({"sessionId": session, "cwd": scratch.ws(), "mcpServers": []}),
        );
        let mode = loaded["result"]["configOptions"]
            .as_array()
            .and_then(|options| options.iter().find(|o| o["id"] == "sandbox-mode"))
            .map(|o| o["currentValue"].clone());
        let expected = if closes {
            "read-only"
        } else {
            "workspace-write"
        };
        assert_eq!(mode, Some(json!(expected)), "{loaded}");
    }
}

#[test]
fn closing_a_session_kills_its_background_task_and_not_another_sessions() {
    let scratch = Scratch::new("close-background");
    let (a, b) = (workspace(&scratch, "a"), workspace(&scratch, "b"));
    let mut client = start(&scratch, &background_script());
    initialize(&mut client);
    let one = new_session(&mut client, &a);
    let two = new_session(&mut client, &b);
    for session in [&one, &two] {
        let (answer, _) = client.prompt(session, "wait on the feed in the background");
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    }
    let (held_a, held_b) = (blocked_on(&a), blocked_on(&b));

    // The control: a round trip that is not a close leaves both running.
    let (listed, _) = client.request("session/list", json!({}));
    assert!(listed.get("result").is_some(), "{listed}");
    assert_running(&a, &held_a);
    assert_running(&b, &held_b);

    let closed = close(&mut client, &one);
    assert_eq!(closed["result"], json!({}), "{closed}");
    // Answered once the task's processes are gone; the other session's task runs on.
    assert_gone(&a, &held_a);
    assert_running(&b, &held_b);
    let (answer, _) = client.prompt(&two, "still there?");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_running(&b, &held_b);

    let closed = close(&mut client, &two);
    assert_eq!(closed["result"], json!({}), "{closed}");
    assert_gone(&b, &held_b);
}

#[test]
fn closing_a_session_during_a_command_cancels_the_prompt_and_ends_the_command() {
    let scratch = Scratch::new("close-foreground");
    let ws = workspace(&scratch, "a");
    let mut client = start(&scratch, &foreground_script());
    initialize(&mut client);
    let session = new_session(&mut client, &ws);
    let prompting = prompt(&mut client, &session, "wait on the feed");
    let held = blocked_on(&ws);

    // The control: the turn waits on the command, which runs on through another round trip.
    let listing = client.send("session/list", json!({}));
    let (got, _) = answers(&mut client, &[listing]);
    assert!(got[0].get("result").is_some(), "{}", got[0]);
    let answered_early = client
        .transcript
        .iter()
        .any(|(dir, m)| *dir == "<" && m["id"] == json!(prompting) && m.get("method").is_none());
    assert!(!answered_early, "the prompt was answered before the close");
    assert_running(&ws, &held);

    close_during(&mut client, &session, prompting, &ws, &held);
    let log = scratch.log(&session);
    let ended = of_type(&log, "turn/ended");
    assert_eq!(ended.len(), 1, "{log:#?}");
    assert_eq!(ended[0]["stop_reason"], "cancelled", "{log:#?}");
}

#[test]
fn closing_a_session_during_a_child_agents_command_ends_the_child_and_the_command() {
    let scratch = Scratch::new("close-child");
    scratch.config(
        r#"
[agents.waiter]
description = "Waits on the feed"
instructions = "You wait on the feed."
"#,
    );
    let ws = workspace(&scratch, "a");
    let script = format!(
        r#"
[[turn]]
[[turn.tool_calls]]
name = "task"
arguments = {{ persona = "waiter", prompt = "Wait on the feed.", description = "wait" }}

[[turn]]
text = "The waiter is done."

[[agents.waiter.turn]]
[[agents.waiter.turn.tool_calls]]
name = "bash"
arguments = {{ command = "{}" }}

[[agents.waiter.turn]]
text = "The feed ended."
"#,
        BLOCK.replace('"', "\\\"")
    );
    let mut client = start(&scratch, &script);
    initialize(&mut client);
    let session = new_session(&mut client, &ws);
    let prompting = prompt(&mut client, &session, "have the waiter wait on the feed");
    let held = blocked_on(&ws);
    assert_running(&ws, &held);

    close_during(&mut client, &session, prompting, &ws, &held);
    let log = scratch.log(&session);
    let ended = of_type(&log, "agent/ended");
    assert_eq!(ended.len(), 1, "{log:#?}");
    assert_eq!(ended[0]["outcome"], "cancelled", "{log:#?}");
}

#[test]
fn a_load_sent_right_after_a_close_waits_for_the_close_and_continues_the_log() {
    let scratch = Scratch::new("close-then-load");
    let ws = workspace(&scratch, "a");
    let mut client = start(&scratch, &foreground_script());
    initialize(&mut client);
    let session = new_session(&mut client, &ws);
    let prompting = prompt(&mut client, &session, "wait on the feed");
    let held = blocked_on(&ws);

    // The load does not wait for the close's answer.
    let closing = client.send("session/close", json!({"sessionId": session}));
    let loading = client.send(
        "session/load",
        json!({"sessionId": session, "cwd": ws, "mcpServers": []}),
    );
    let deadline = Instant::now() + LIMIT;
    let (mut prompted, mut closed, mut loaded) = (None, None, None);
    let mut gone_at_load = None;
    while prompted.is_none() || closed.is_none() || loaded.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        let message = client
            .next(left)
            .unwrap_or_else(|| panic!("not every request answered within {LIMIT:?}"));
        if message.get("method").is_some() {
            continue;
        }
        if message["id"] == json!(prompting) {
            prompted = Some(message);
        } else if message["id"] == json!(closing) {
            closed = Some(message);
        } else if message["id"] == json!(loading) {
            // Seen as the answer arrives, whichever of the others came first.
            let read = fifo::open_for_writing(&ws.join("feed")).expect("open feed");
            gone_at_load = Some(read.is_none() && !held.iter().any(|pid| support::alive(*pid)));
            loaded = Some(message);
        }
    }
    let (prompted, closed, loaded) = (
        prompted.unwrap_or_default(),
        closed.unwrap_or_default(),
        loaded.unwrap_or_default(),
    );
    assert_eq!(prompted["result"]["stopReason"], "cancelled", "{prompted}");
    assert_eq!(closed["result"], json!({}), "{closed}");
    assert!(loaded.get("result").is_some(), "{loaded}");
    assert_eq!(
        gone_at_load,
        Some(true),
        "the load was answered before the closed session's command ended"
    );

    // The loaded session goes on, in the same log, after the cancelled turn's end.
    let (answer, _) = client.prompt(&session, "and now?");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let log = scratch.log(&session);
    let seqs: Vec<u64> = log.iter().filter_map(|e| e["seq"].as_u64()).collect();
    let expected: Vec<u64> = (0..log.len() as u64).collect();
    assert_eq!(seqs, expected, "{log:#?}");
    let ends: Vec<(Value, Value)> = of_type(&log, "turn/ended")
        .into_iter()
        .map(|e| (e["turn"].clone(), e["stop_reason"].clone()))
        .collect();
    assert_eq!(
        ends,
        [
            (json!(1), json!("cancelled")),
            (json!(2), json!("end_turn"))
        ],
        "{log:#?}"
    );
}

/// Closes agentd's stdin and waits for agentd to exit; its exit status.
fn hang_up(client: &mut AcpClient) -> std::process::ExitStatus {
    client.hang_up();
    let pid = client.child.id();
    assert!(
        support::wait_gone(pid, LIMIT),
        "agentd did not exit within {LIMIT:?} of its stdin's end"
    );
    client.child.wait().expect("agentd's exit status")
}

#[test]
fn the_connections_end_kills_every_sessions_background_task_before_agentd_exits() {
    let scratch = Scratch::new("close-hangup");
    let ws = workspace(&scratch, "a");
    let mut client = start(&scratch, &background_script());
    initialize(&mut client);
    let session = new_session(&mut client, &ws);
    let (answer, _) = client.prompt(&session, "wait on the feed in the background");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let held = blocked_on(&ws);
    let (listed, _) = client.request("session/list", json!({}));
    assert!(listed.get("result").is_some(), "{listed}");
    assert_running(&ws, &held);

    let status = hang_up(&mut client);
    assert!(status.success(), "agentd exited with {status}");
    // Gone by the time agentd exited: it waited for the task's end.
    assert_gone(&ws, &held);
}

#[test]
fn the_connections_end_cancels_a_running_turn_and_logs_its_end() {
    let scratch = Scratch::new("close-hangup-turn");
    let ws = workspace(&scratch, "a");
    let mut client = start(&scratch, &foreground_script());
    initialize(&mut client);
    let session = new_session(&mut client, &ws);
    let _prompting = prompt(&mut client, &session, "wait on the feed");
    let held = blocked_on(&ws);
    assert!(of_type(&scratch.log(&session), "turn/ended").is_empty());

    let status = hang_up(&mut client);
    assert!(status.success(), "agentd exited with {status}");
    assert_gone(&ws, &held);
    let log = scratch.log(&session);
    let ended = of_type(&log, "turn/ended");
    assert_eq!(ended.len(), 1, "{log:#?}");
    assert_eq!(ended[0]["stop_reason"], "cancelled", "{log:#?}");
}
