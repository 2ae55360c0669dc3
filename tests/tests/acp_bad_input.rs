//! Bad ACP input over the real wire: malformed JSON lines, a line that is not UTF-8, wrong
//! types, unknown methods, a 10 MiB line, a prompt for an unknown session, requests before
//! `initialize` and a flood of cancels. Each is answered with a JSON-RPC error (or, for a
//! notification or a line that is no message, ignored; the 10 MiB prompt, being valid, is
//! answered), agentd keeps serving, and a session opened before goes on unaffected: its next
//! prompt is answered. No answer echoes what was sent: a line that is not JSON is answered with
//! where it broke, and an error quoting a megabyte a request carried (invalid params, an unknown
//! method, an unknown session) is cut to `MAX_ERROR_LINE`.
//!
//! Lines over agentd's cap (`MAX_LINE`, 64 MiB): one of four times the cap and one a byte over it
//! are each answered with a short error under the id `null`, without being kept (agentd's peak
//! memory grows by less than twice the cap while the long one passes) or echoed, and the next
//! request is served; the control, a line of exactly the cap, is a request like any other.

/// Reads memory figures of a process, as the soaks do.
#[path = "../../confine-helper/tests/support/proc_watch.rs"]
mod proc_watch;
mod support;

use std::time::Duration;

use agentd::api::acp::{MAX_ERROR_LINE, MAX_LINE};
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

    let mib = "q".repeat(1 << 20);
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
        // What a client sent, a megabyte of it, in a place an error would quote it.
        ("wrong-types-big", format!(r#"{{"jsonrpc":"2.0","id":"wrong-types-big","method":"session/new","params":{{"cwd":"/tmp","mcpServers":"{mib}"}}}}"#).into_bytes()),
        ("unknown-method-big", format!(r#"{{"jsonrpc":"2.0","id":"unknown-method-big","method":"{mib}","params":{{}}}}"#).into_bytes()),
        ("unknown-session-big", format!(r#"{{"jsonrpc":"2.0","id":"unknown-session-big","method":"session/prompt","params":{{"sessionId":"{mib}","prompt":[]}}}}"#).into_bytes()),
    ];
    // A line that is not JSON is answered without being echoed.
    let garbage = format!("{{not json {}", "g".repeat(1 << 20));
    client.write_line(garbage.as_bytes());
    let parse_error = response(&mut client, &Value::Null).expect("an answer to a line not JSON");
    assert_eq!(parse_error["error"]["code"], -32700, "{parse_error}");
    let shown = parse_error.to_string();
    assert!(
        shown.len() < 1024,
        "the error does not echo the line: {}…",
        &shown[..300]
    );

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
            shown.len() < MAX_ERROR_LINE,
            "{id}: the error does not echo a huge input ({} bytes)",
            shown.len()
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

/// A `session/list` request with the id `id` that is exactly `bytes` bytes long, padded in its
/// `_meta` (which every request may carry, and agentd ignores).
fn padded_list(id: &str, bytes: usize) -> Vec<u8> {
    let head = format!(
        r#"{{"jsonrpc":"2.0","id":"{id}","method":"session/list","params":{{"_meta":{{"pad":""#
    );
    let tail = r#""}}}"#;
    let pad = bytes - head.len() - tail.len();
    [head.as_bytes(), &vec![b'p'; pad], tail.as_bytes()].concat()
}

/// Reads the answer to a line over the cap: a short error under the id `null` that says so.
fn refused(client: &mut AcpClient, bytes: usize) {
    let answer = response(client, &Value::Null).expect("an answer to the line over the cap");
    let shown = answer.to_string();
    assert!(shown.len() < 1024, "a short answer: {}…", &shown[..300]);
    assert!(!shown.contains("ppp"), "the line is not echoed: {shown}");
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert!(
        shown.contains(&format!("({bytes} bytes)")) && shown.contains("64 MiB"),
        "{answer}"
    );
}

#[test]
fn a_line_over_the_cap_is_answered_short_unkept_and_the_next_is_served_and_one_at_the_cap_is_a_request()
 {
    let scratch = Scratch::new("line-cap");
    let script = scratch.script("[[turn]]\ntext = \"Still here.\"\n");
    let mut client = AcpClient::start(&scratch, &script, &[]);
    let session = client.open_session(&scratch.ws());
    let pid = client.child.id();
    let before = proc_watch::status_kib(pid, "VmHWM");

    let long = 4 * MAX_LINE;
    client.write_line(&padded_list("long", long));
    refused(&mut client, long);
    let grown = proc_watch::status_kib(pid, "VmHWM") - before;
    eprintln!("a line of {long} bytes passed: agentd's peak memory grew by {grown} KiB");
    assert!(
        grown < 2 * (MAX_LINE as u64 >> 10),
        "agentd's peak memory grew by {grown} KiB while a line of {long} bytes passed: it kept \
         the line"
    );
    let (listed, _) = client.request("session/list", json!({}));
    assert!(listed.get("result").is_some(), "the next request: {listed}");

    // A byte over the cap is refused the same way; a line of exactly the cap is served.
    client.write_line(&padded_list("over", MAX_LINE + 1));
    refused(&mut client, MAX_LINE + 1);
    client.write_line(&padded_list("at-cap", MAX_LINE));
    let served = response(&mut client, &json!("at-cap")).expect("an answer at the cap");
    let shown = served.to_string();
    assert!(
        served.get("result").is_some(),
        "{}",
        &shown[..shown.len().min(300)]
    );

    let (next, _) = client.prompt(&session, "are you there?");
    assert_eq!(next["result"]["stopReason"], "end_turn", "{next}");
}
