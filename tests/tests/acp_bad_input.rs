//! Bad ACP input over the real wire: malformed JSON lines, a line that is not UTF-8, wrong
//! types, unknown methods, a 10 MiB line, a prompt for an unknown session, requests before
//! `initialize` and a flood of cancels. Each is answered with a JSON-RPC error (or, for a
//! notification or a line that is no message, ignored; the 10 MiB prompt, being valid, is
//! answered), agentd keeps serving, and a session opened before goes on unaffected: its next
//! prompt is answered.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::acp::{AcpClient, Scratch};

const LIMIT: Duration = Duration::from_secs(60);

/// Reads until a response with `id` arrives (ignoring notifications); `None` if none comes.
fn response(client: &mut AcpClient, id: &Value) -> Option<Value> {
    loop {
        let message = client.next(LIMIT)?;
        if message.get("method").is_none() && &message["id"] == id {
            return Some(message);
        }
    }
}

#[test]
fn bad_input_is_answered_with_errors_and_agentd_keeps_serving_its_sessions() {
    let scratch = Scratch::new("bad-input");
    let script =
        scratch.script("[[turn]]\ntext = \"First.\"\n\n[[turn]]\ntext = \"Still here.\"\n");
    let mut client = AcpClient::start(&scratch, &script, &[]);

    // Before initialize: a prompt for a session that does not exist is an error, not a crash.
    client.write_line(
        br#"{"jsonrpc":"2.0","id":"early","method":"session/prompt","params":{"sessionId":"nope","prompt":[]}}"#,
    );
    let early = response(&mut client, &json!("early")).expect("an answer before initialize");
    assert!(early.get("error").is_some(), "{early}");

    let session = client.open_session(&scratch.ws());
    let (first, _) = client.prompt(&session, "hello");
    assert_eq!(first["result"]["stopReason"], "end_turn", "{first}");

    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":"huge","method":"session/prompt","params":{{"sessionId":"{session}","prompt":[{{"type":"text","text":"{}"}}]}}}}"#,
        "x".repeat(10 * 1024 * 1024)
    );
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("unknown-method", br#"{"jsonrpc":"2.0","id":"unknown-method","method":"no/such","params":{}}"#.to_vec()),
        ("wrong-types", br#"{"jsonrpc":"2.0","id":"wrong-types","method":"session/new","params":{"cwd":42,"mcpServers":"none"}}"#.to_vec()),
        ("unknown-session", br#"{"jsonrpc":"2.0","id":"unknown-session","method":"session/prompt","params":{"sessionId":"not-a-session","prompt":[{"type":"text","text":"hi"}]}}"#.to_vec()),
        ("no-params", br#"{"jsonrpc":"2.0","id":"no-params","method":"session/prompt"}"#.to_vec()),
        ("huge", huge.into_bytes()),
    ];
    // Lines that are not JSON-RPC at all, and a flood of cancels for sessions real and not.
    client.write_line(b"{not json");
    client.write_line(b"\xff\xfe not utf-8");
    client.write_line(b"[]");
    client.write_line(b"");
    for n in 0..200 {
        let target = if n % 2 == 0 { session.as_str() } else { "nope" };
        client.write_line(
            format!(r#"{{"jsonrpc":"2.0","method":"session/cancel","params":{{"sessionId":"{target}"}}}}"#)
                .as_bytes(),
        );
    }
    for (id, line) in &cases {
        client.write_line(line);
        let answer = response(&mut client, &json!(id))
            .unwrap_or_else(|| panic!("{id}: no answer; agentd stopped serving"));
        if *id == "huge" {
            // A valid prompt, only large: answered like any other (or refused with an error).
            assert!(
                answer["result"]["stopReason"] == "end_turn" || answer["error"]["code"].is_i64(),
                "{id}: {answer}"
            );
        } else {
            assert!(
                answer["error"]["code"].is_i64(),
                "{id}: a JSON-RPC error: {answer}"
            );
        }
        let shown = answer.to_string();
        assert!(
            shown.len() < 64 * 1024,
            "{id}: the error does not echo a huge input"
        );
    }

    // The session opened before goes on as if nothing happened.
    let (next, _) = client.prompt(&session, "are you there?");
    assert_eq!(next["result"]["stopReason"], "end_turn", "{next}");
    assert!(
        client.child.try_wait().expect("status").is_none(),
        "agentd is still running"
    );
}
