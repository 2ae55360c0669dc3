//! `session/resume` over the real `agentd acp` wire: a stored session is reopened without its
//! history being shown again (the editor keeps what it showed), and goes on where it ended.
//! The control is `session/load` of the same session, which shows the history first.

mod support;

use serde_json::{Value, json};
use support::acp::{AcpClient, Scratch, normalized_updates};

const SCRIPT: &str = r#"
[[turn]]
text = "Noted."

[[turn]]
text = "Still here."
"#;

/// The `session/update`s of `notes` that show a message: what a replay would send.
fn shown_messages(notes: &[Value]) -> Vec<Value> {
    normalized_updates(notes)
        .into_iter()
        .filter(|u| {
            matches!(
                u["sessionUpdate"].as_str(),
                Some("user_message_chunk" | "agent_message_chunk")
            )
        })
        .collect()
}

#[test]
fn a_resumed_session_shows_no_history_and_goes_on_where_it_ended() {
    let scratch = Scratch::new("session-resume");
    let script = scratch.script(SCRIPT);
    let mut client = AcpClient::start(&scratch, &script, &[]);
    let (init, _) = client.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    assert_eq!(
        init["result"]["agentCapabilities"]["sessionCapabilities"]["resume"],
        json!({}),
        "resume is advertised: {init}"
    );
    let session = client.open_session(&scratch.ws());
    let (answer, _) = client.prompt(&session, "Remember the number 7.");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    drop(client);

    // A new agentd: the session is read back from its log.
    let mut client = AcpClient::start(&scratch, &script, &[]);
    let (_, _) = client.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let (resumed, notes) = client.request(
        "session/resume",
        json!({"sessionId": session, "cwd": scratch.ws(), "mcpServers": []}),
    );
    let result = &resumed["result"];
    assert!(result.is_object(), "session/resume failed: {resumed}");
    assert!(
        result["configOptions"].is_array() && result["modes"].is_object(),
        "{resumed}"
    );
    assert_eq!(shown_messages(&notes), Vec::<Value>::new(), "{notes:#?}");
    let (answer, after) = client.prompt(&session, "What was the number?");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    // The slash commands are listed right after the answer, as after session/new and load.
    let listed = notes
        .iter()
        .chain(&after)
        .any(|n| n["params"]["update"]["sessionUpdate"] == "available_commands_update");
    assert!(
        listed,
        "no available_commands_update after the resume: {after:#?}"
    );
    // The resumed session went on: its second prompt is its turn 2, with turn 1 before it.
    let turns: Vec<Value> = scratch
        .log(&session)
        .iter()
        .filter(|r| r["type"] == "prompt/submitted")
        .map(|r| json!([r["turn"], r["text"]]))
        .collect();
    assert_eq!(
        turns,
        [
            json!([1, "Remember the number 7."]),
            json!([2, "What was the number?"])
        ]
    );
    drop(client);

    // The control: session/load of the same session shows its history first.
    let mut client = AcpClient::start(&scratch, &script, &[]);
    let (_, notes) = client.load_session(&scratch.ws(), &session);
    let replayed = shown_messages(&notes);
    assert!(
        replayed
            .iter()
            .any(|u| u["content"]["text"] == "Remember the number 7."),
        "{replayed:#?}"
    );

    // An unknown session is refused with a message that says so.
    let (refused, _) = client.request(
        "session/resume",
        json!({"sessionId": "0123abcd", "cwd": scratch.ws(), "mcpServers": []}),
    );
    let message = refused["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("0123abcd"), "{refused}");
}

/// Sets every record of session `id` to `at_ms`, so the test decides which session was updated
/// last instead of waiting for the clock.
fn stamp(scratch: &Scratch, id: &str, at_ms: u64) {
    let path = scratch.state().join(format!("{id}.jsonl"));
    let lines: Vec<String> = scratch
        .log(id)
        .into_iter()
        .map(|mut record| {
            record["at_ms"] = json!(at_ms);
            record.to_string()
        })
        .collect();
    std::fs::write(&path, lines.join("\n") + "\n").expect("rewrite the log");
}

/// The ids `session/list` answers, in its order, from a fresh agentd.
fn listed(scratch: &Scratch, script: &std::path::Path) -> Vec<String> {
    let mut client = AcpClient::start(scratch, script, &[]);
    let (_, _) = client.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let (listed, _) = client.request("session/list", json!({}));
    listed["result"]["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("session/list failed: {listed}"))
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn session_list_shows_the_most_recently_updated_session_first() {
    let scratch = Scratch::new("session-list-order");
    let script = scratch.script(SCRIPT);
    let mut client = AcpClient::start(&scratch, &script, &[]);
    let first = client.open_session(&scratch.ws());
    let second = client.open_session(&scratch.ws());
    drop(client);

    stamp(&scratch, &first, 2_000);
    stamp(&scratch, &second, 1_000);
    assert_eq!(listed(&scratch, &script), [first.clone(), second.clone()]);
    // The control: the other way round, the other order.
    stamp(&scratch, &first, 1_000);
    stamp(&scratch, &second, 2_000);
    assert_eq!(listed(&scratch, &script), [second, first]);
}
