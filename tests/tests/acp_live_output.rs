//! A running command's output reaches the editor while it runs (RFC 0011), checked by the order
//! of the real `agentd acp`'s messages, not by timings: the command prints its first line and
//! then blocks reading a FIFO in its workspace, so the test knows it still runs; only once the
//! editor was shown the first line does the test feed the FIFO, letting the command print its
//! second line and exit. Its result — both lines and the facts — comes last, and is what
//! `session/load` shows of it. A command that prints nothing shows nothing before its result; a
//! cancelled one shows nothing after it. A child agent's command shows its first line the same
//! way, on its own call nested under the `task` call (RFC 0007).

mod support;

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::acp::{AcpClient, Scratch, assert_ran_clean, normalized_updates};
use support::fifo;

/// How long any one message of agentd may take.
const LIMIT: Duration = Duration::from_secs(60);

/// The scripted model: one bash call of `command`, then an answer.
fn script(command: &str) -> String {
    format!(
        r#"
[[turn]]
text = "Running it."
[[turn.tool_calls]]
name = "bash"
arguments = {{ command = "{}" }}

[[turn]]
text = "It ended."
"#,
        command.replace('\\', "\\\\").replace('"', "\\\"")
    )
}

/// Prints a line, then blocks reading `feed` (held open read-write, so it is read before the
/// line is printed), then prints what it read and exits.
const TWO_LINES: &str =
    r#"exec 3<>feed; printf 'first\n'; read -r line <&3; printf 'second %s\n' "$line""#;

/// Prints nothing: marks that it holds `feed`, blocks reading it, and exits.
const SILENT: &str = "exec 3<>feed; : > ready; read -r line <&3";

/// The scripted model: a `task` call to the built-in `general` persona, whose child makes one
/// bash call of `command` and answers.
fn child_script(command: &str) -> String {
    format!(
        r#"
[[turn]]
[[turn.tool_calls]]
name = "task"
arguments = {{ persona = "general", prompt = "Run it.", description = "run it" }}

[[turn]]
text = "The child ran it."

[[agents.general.turn]]
[[agents.general.turn.tool_calls]]
name = "bash"
arguments = {{ command = "{}" }}

[[agents.general.turn]]
text = "It ended."
"#,
        command.replace('\\', "\\\\").replace('"', "\\\"")
    )
}

/// A session of `agentd acp` in workspace-write, with the FIFO `feed` in its workspace, whose
/// model runs `command` itself.
fn start(scratch: &Scratch, command: &str) -> (AcpClient, String) {
    start_with(scratch, &script(command))
}

/// As [`start`], with the model's script `text`.
fn start_with(scratch: &Scratch, text: &str) -> (AcpClient, String) {
    nix::unistd::mkfifo(
        &scratch.ws().join("feed"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .expect("mkfifo feed");
    let script = scratch.script(text);
    let mut client = AcpClient::start(scratch, &script, &["--sandbox-mode", "workspace-write"]);
    let session = client.open_session(&scratch.ws());
    (client, session)
}

fn prompt(client: &mut AcpClient, session: &str) -> u64 {
    client.send(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "run it"}]}),
    )
}

/// Writes a line into the workspace FIFO `feed`, which the command reads.
fn feed(ws: &Path, line: &str) {
    let mut writer = fifo::open_for_writing(&ws.join("feed"))
        .expect("open feed")
        .expect("the command reads feed");
    writer
        .write_all(format!("{line}\n").as_bytes())
        .expect("feed the command");
}

/// Whether `message` answers the request `id` of the client.
fn is_answer(message: &Value, id: u64) -> bool {
    message["id"] == json!(id) && message.get("method").is_none()
}

/// The `session/update` payload of a notification, if it is one.
fn update(message: &Value) -> Option<&Value> {
    (message["method"] == "session/update").then(|| &message["params"]["update"])
}

/// Whether `update` is a `tool_call_update` of `call` with a status: the call's result.
fn is_result(update: &Value, call: &str) -> bool {
    update["sessionUpdate"] == "tool_call_update"
        && update["toolCallId"] == call
        && update.get("status").is_some()
}

/// Whether `update` is a `tool_call_update` of `call` without a status: live output.
fn is_live(update: &Value, call: &str) -> bool {
    update["sessionUpdate"] == "tool_call_update"
        && update["toolCallId"] == call
        && update.get("status").is_none()
}

/// The text of an update's only content block.
fn only_text(update: &Value) -> &str {
    match update["content"].as_array().map(Vec::as_slice) {
        Some([block]) => block["content"]["text"].as_str().unwrap_or_default(),
        _ => panic!("not one content block: {update}"),
    }
}

/// The model's text as a result shows it: its last content block (a line for a person about
/// partial enforcement may come first on some hosts).
fn result_text(update: &Value) -> &str {
    update["content"]
        .as_array()
        .and_then(|blocks| blocks.last())
        .and_then(|block| block["content"]["text"].as_str())
        .unwrap_or_default()
}

/// Reads until the `tool_call` of the prompt `id`'s command (past a `task` call that delegates
/// it); returns that call. Fails if the prompt ends.
fn until_command_call(client: &mut AcpClient, id: u64) -> Value {
    let deadline = Instant::now() + LIMIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let message = client.next(left).expect("the tool call");
        assert!(!is_answer(&message, id), "the prompt ended: {message}");
        if let Some(update) = update(&message)
            && update["sessionUpdate"] == "tool_call"
            && update["kind"] != "think"
        {
            assert_eq!(update["kind"], "execute", "{update}");
            return update.clone();
        }
    }
}

/// Reads until the `tool_call` of the prompt `id`; returns its id. Fails if the prompt ends.
fn until_tool_call(client: &mut AcpClient, id: u64) -> String {
    until_command_call(client, id)["toolCallId"]
        .as_str()
        .expect("a tool call id")
        .to_owned()
}

/// Reads until the editor is shown live output of `call` holding `line`; returns that update.
/// Fails if the call's result or the prompt's answer comes first.
fn until_live(client: &mut AcpClient, id: u64, call: &str, line: &str) -> Value {
    let deadline = Instant::now() + LIMIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let message = client
            .next(left)
            .unwrap_or_else(|| panic!("no live output holding {line:?} within {LIMIT:?}"));
        assert!(!is_answer(&message, id), "the prompt ended: {message}");
        let Some(update) = update(&message) else {
            continue;
        };
        assert!(
            !is_result(update, call),
            "the result came before the live output: {update}"
        );
        if is_live(update, call) && only_text(update).contains(line) {
            return update.clone();
        }
    }
}

/// The command of `call` (of the prompt `id`) printed its first line and is blocked on the FIFO:
/// reads until the editor is shown that line, only then lets the command go on (it prints its
/// second line and exits), and reads to the prompt's end (`end_turn`); returns what came after
/// the line.
fn first_line_then_the_rest(
    client: &mut AcpClient,
    scratch: &Scratch,
    id: u64,
    call: &str,
) -> Vec<Value> {
    let first = until_live(client, id, call, "first");
    assert_eq!(only_text(&first), "first\n", "{first}");
    feed(&scratch.ws(), "go");
    let (answer, notes) = client.until_response(id, LIMIT);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    notes
}

/// The updates of `call` among `notes`, in order.
fn updates_of<'a>(notes: &'a [Value], call: &str) -> Vec<&'a Value> {
    notes
        .iter()
        .filter_map(update)
        .filter(|u| u["toolCallId"] == call)
        .collect()
}

#[test]
fn a_running_command_shows_its_first_line_before_it_ends() {
    let scratch = Scratch::new("live-two-lines");
    let (mut client, session) = start(&scratch, TWO_LINES);
    let id = prompt(&mut client, &session);
    let call = until_tool_call(&mut client, id);
    let notes = first_line_then_the_rest(&mut client, &scratch, id, &call);
    let rest = updates_of(&notes, &call);
    let results: Vec<usize> = (0..rest.len())
        .filter(|&i| is_result(rest[i], &call))
        .collect();
    assert_eq!(results.len(), 1, "one result: {rest:#?}");
    let at = results[0];
    // Live output that came after the feed (a slow exit) precedes the result and grew from the
    // first line; nothing of the call follows its result.
    for live in &rest[..at] {
        assert!(is_live(live, &call), "{live}");
        assert!(only_text(live).starts_with("first\n"), "{live}");
    }
    assert_eq!(at, rest.len() - 1, "nothing after the result: {rest:#?}");
    let result = rest[at];
    assert_eq!(
        result_text(result),
        "first\nsecond go\n[exit code: 0]",
        "{result}"
    );
    assert_ran_clean(result, "workspace-write");
    assert_eq!(
        result["_meta"]["agentd"]["facts"]["cancelled"], false,
        "{result}"
    );

    // The log has the call and its result, nothing of the live output.
    let log = scratch.log(&session);
    let results: Vec<&Value> = log.iter().filter(|r| r["type"] == "tool/result").collect();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["output"], "first\nsecond go\n[exit code: 0]");
    assert!(
        !log.iter().any(|r| r.to_string().contains("\"first\\n\"")),
        "no record holds the live copy"
    );

    // `session/load` shows the call as the editor was shown it last: its result.
    drop(client);
    let script = scratch.root.join("script.toml");
    let mut again = AcpClient::start(&scratch, &script, &["--sandbox-mode", "workspace-write"]);
    again.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let (loaded, replay) = again.request(
        "session/load",
        json!({"sessionId": session, "cwd": scratch.ws(), "mcpServers": []}),
    );
    assert!(loaded.get("result").is_some(), "{loaded}");
    let replayed = updates_of(&replay, &call);
    assert_eq!(replayed.len(), 2, "the call and its result: {replayed:#?}");
    assert_eq!(replayed[0]["sessionUpdate"], "tool_call");
    assert_eq!(replayed[1], result, "the result as it was shown live");
    assert_eq!(
        normalized_updates(&replay)
            .iter()
            .filter(|u| u["toolCallId"] == call.as_str())
            .count(),
        2
    );
}

#[test]
fn a_command_that_prints_nothing_shows_nothing_before_its_result() {
    let scratch = Scratch::new("live-silent");
    let (mut client, session) = start(&scratch, SILENT);
    let id = prompt(&mut client, &session);
    let call = until_tool_call(&mut client, id);
    assert!(
        support::wait_for_file(&scratch.ws(), "ready", LIMIT),
        "the command never started"
    );
    feed(&scratch.ws(), "go");
    let (answer, notes) = client.until_response(id, LIMIT);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let updates = updates_of(&notes, &call);
    assert_eq!(updates.len(), 1, "only the result: {updates:#?}");
    assert!(is_result(updates[0], &call), "{}", updates[0]);
    assert_eq!(updates[0]["status"], "completed");
    assert_eq!(result_text(updates[0]), "[exit code: 0]");
}

#[test]
fn a_cancelled_command_shows_nothing_after_its_result() {
    let scratch = Scratch::new("live-cancel");
    let (mut client, session) = start(&scratch, TWO_LINES);
    let id = prompt(&mut client, &session);
    let call = until_tool_call(&mut client, id);
    until_live(&mut client, id, &call, "first");

    client.notify("session/cancel", json!({"sessionId": session}));
    let (answer, notes) = client.until_response(id, LIMIT);
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    let updates = updates_of(&notes, &call);
    let result = updates
        .iter()
        .position(|u| is_result(u, &call))
        .unwrap_or_else(|| panic!("no result: {updates:#?}"));
    assert_eq!(result, updates.len() - 1, "nothing after the result");
    let result = updates[result];
    assert_eq!(result["status"], "failed", "{result}");
    assert_eq!(
        result["_meta"]["agentd"]["facts"]["cancelled"], true,
        "{result}"
    );
    let text = result_text(result);
    assert!(text.starts_with("first\n"), "{text}");
    assert!(text.contains("[cancelled]"), "{text}");
}

#[test]
fn a_childs_running_command_shows_its_first_line_on_its_nested_call() {
    let scratch = Scratch::new("live-child");
    let (mut client, session) = start_with(&scratch, &child_script(TWO_LINES));
    let id = prompt(&mut client, &session);
    let announced = until_command_call(&mut client, id);
    assert_eq!(
        announced["_meta"]["agentd"]["persona"], "general",
        "the child's call, nested: {announced}"
    );
    let call = announced["toolCallId"]
        .as_str()
        .unwrap_or_default()
        .to_owned();

    // The editor sees the child's first line on the child's call.
    let notes = first_line_then_the_rest(&mut client, &scratch, id, &call);
    let rest = updates_of(&notes, &call);
    let result = rest
        .iter()
        .position(|u| is_result(u, &call))
        .unwrap_or_else(|| panic!("no result: {rest:#?}"));
    assert_eq!(
        result,
        rest.len() - 1,
        "nothing after the result: {rest:#?}"
    );
    assert_eq!(rest[result]["status"], "completed", "{}", rest[result]);
    assert_eq!(
        result_text(rest[result]),
        "first\nsecond go\n[exit code: 0]"
    );
}
