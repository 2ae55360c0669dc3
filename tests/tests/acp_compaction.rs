//! Compaction of a long session's history (RFC 0012), over the wire: the real `agentd acp`
//! against a local chat-completions server that records every request. With
//! `model.context_window` set, a turn whose request is estimated over the threshold first sends
//! one summary request of the older turns, records `history/compacted`, shows the editor a note,
//! and sends the summary in their place; a second compaction summarises the first summary and the
//! turns after it; `session/load` replays the note and the model then reads the same compacted
//! history. The same prompts with no window never compact. A failed or cancelled summary
//! request records nothing.

mod support;

use std::sync::{Mutex, mpsc};
use std::time::Duration;

use serde_json::{Value, json};
use support::acp::{AcpClient, Scratch, normalized_updates};
use support::model_server::{ModelServer, Received, Reply};

/// How the summary request's instructions begin (agentd's `SUMMARY_INSTRUCTIONS`).
const SUMMARY_INSTRUCTIONS: &str = "You compact the conversation of a coding agent";

/// 60 000 bytes, about 15 000 estimated tokens: with a window of 50 000 tokens compacted above
/// 80% (40 000), two such prompts fit, three do not.
const PROMPT_BYTES: usize = 60_000;

/// The window and the kept turns the tests configure.
const COMPACTION: &str = "context_window = 50000\n[compaction]\nkeep_turns = 1\n";

/// Turn `n`'s prompt: a marker `P{n}:` and a long text.
fn long_prompt(n: u64) -> String {
    format!("P{n}: {}", "x".repeat(PROMPT_BYTES))
}

/// A streamed answer with `text`, as a chat-completions server sends it.
fn answer(text: &str) -> Reply {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let start = chunk(json!({"role": "assistant", "content": text}), Value::Null);
    let end = chunk(json!({}), json!("stop"));
    Reply::Stream(format!("data: {start}\n\ndata: {end}\n\ndata: [DONE]\n\n").into_bytes())
}

fn messages(request: &Received) -> Vec<Value> {
    request.body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn is_summary_request(request: &Received) -> bool {
    messages(request).first().is_some_and(|m| {
        m["role"] == "system"
            && m["content"]
                .as_str()
                .is_some_and(|c| c.starts_with(SUMMARY_INSTRUCTIONS))
    })
}

/// The text of the user message the request ends with.
fn last_user(request: &Received) -> String {
    messages(request)
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// A model that answers a summary request with `SUMMARY-1`, or `SUMMARY-2` once the
/// conversation it summarises holds `SUMMARY-1`, and any other request with `A` and the marker of
/// the prompt it answers (`AP3`).
fn model(request: &Received, _: usize) -> Reply {
    let last = last_user(request);
    if is_summary_request(request) {
        let n = if last.contains("SUMMARY-1") { 2 } else { 1 };
        return answer(&format!("SUMMARY-{n}: the user sent long prompts."));
    }
    let marker = last.split(':').next().unwrap_or_default();
    answer(&format!("A{marker}"))
}

/// A session configured with `extra` in `[model]` of a server answering with `handler`.
fn start(
    tag: &str,
    extra: &str,
    handler: impl Fn(&Received, usize) -> Reply + Send + Sync + 'static,
) -> (ModelServer, Scratch, AcpClient, String) {
    let server = ModelServer::start(handler);
    let scratch = Scratch::new(tag);
    scratch.config(&format!(
        "[model]\nbase_url = \"{}\"\nmodel = \"m\"\nmax_retries = 0\n{extra}",
        server.base_url
    ));
    let mut client = AcpClient::start_configured(&scratch, &[]);
    let session = client.open_session(&scratch.ws());
    (server, scratch, client, session)
}

/// Prompts turns `from..=to` with their long prompts; returns each turn's prompt and updates.
fn prompt_turns(
    client: &mut AcpClient,
    session: &str,
    turns: std::ops::RangeInclusive<u64>,
) -> Vec<(String, Vec<Value>)> {
    turns
        .map(|n| {
            let text = long_prompt(n);
            let (answer, notes) = client.prompt(session, &text);
            assert_eq!(
                answer["result"]["stopReason"], "end_turn",
                "turn {n}: {answer}"
            );
            (text, notes)
        })
        .collect()
}

/// Live updates of a prompt as a replay shows them: the prompt first.
fn as_replayed(prompt: &str, live: &[Value]) -> Vec<Value> {
    let mut out = vec![json!({
        "sessionUpdate": "user_message_chunk",
        "content": {"type": "text", "text": prompt},
    })];
    out.extend(normalized_updates(live));
    out
}

/// Kills agentd, starts it again and loads the session; returns the replayed updates.
fn restart_and_load(client: &mut AcpClient, scratch: &Scratch, session: &str) -> Vec<Value> {
    let _ = client.child.kill();
    let _ = client.child.wait();
    *client = AcpClient::start_configured(scratch, &[]);
    let (_, notes) = client.load_session(&scratch.ws(), session);
    normalized_updates(&notes)
}

fn compactions(log: &[Value]) -> Vec<Value> {
    log.iter()
        .filter(|r| r["type"] == "history/compacted")
        .cloned()
        .collect()
}

fn thoughts(updates: &[Value]) -> Vec<String> {
    normalized_updates(updates)
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_thought_chunk")
        .filter_map(|u| u["content"]["text"].as_str().map(str::to_owned))
        .collect()
}

/// Whether any message of `request` mentions `text`.
fn mentions(request: &Received, text: &str) -> bool {
    messages(request)
        .iter()
        .any(|m| m["content"].as_str().is_some_and(|c| c.contains(text)))
}

#[test]
fn a_long_history_is_summarised_twice_logged_shown_and_replayed_identically() {
    let (server, scratch, mut client, session) = start("compaction", COMPACTION, model);
    let turns = prompt_turns(&mut client, &session, 1..=4);

    // Turns 1 and 2 fit; turns 3 and 4 each send a summary request first.
    let requests = server.requests();
    let summary: Vec<bool> = requests.iter().map(is_summary_request).collect();
    assert_eq!(
        summary,
        [false, false, true, false, true, false],
        "{requests:#?}"
    );

    // The first summary request: the instructions and turn 1 as one text, no tools.
    let first = &requests[2];
    assert!(first.body.get("tools").is_none(), "{}", first.body);
    assert_eq!(messages(first).len(), 2);
    let conversation = last_user(first);
    assert!(
        conversation.starts_with("The conversation to summarise:\n\n## User\nP1: xxx"),
        "{}",
        &conversation[..80]
    );
    assert!(
        conversation.contains("## Assistant\nAP1"),
        "the answer to turn 1"
    );
    assert!(!conversation.contains("P2:"), "turn 2 is kept");

    // Turn 3's request: the summary in place of turn 1, then turns 2 and 3 as they were.
    let third = messages(&requests[3]);
    assert_eq!(
        third[1],
        json!({"role": "user", "content": "Summary of the conversation so far (its first turn, \
            summarised to save context):\n\nSUMMARY-1: the user sent long prompts."})
    );
    assert_eq!(third[2], json!({"role": "user", "content": long_prompt(2)}));
    assert!(!mentions(&requests[3], "P1:"), "turn 1 is summarised");
    assert!(
        requests[3].body["tools"].is_array(),
        "the turn offers its tools"
    );

    // The second summary request summarises the first summary and turn 2.
    let second = last_user(&requests[4]);
    assert!(
        second.contains("SUMMARY-1") && second.contains("P2: xxx"),
        "{}",
        &second[..300]
    );
    assert!(!second.contains("P1:") && !second.contains("P3:"));
    let fourth = messages(&requests[5]);
    assert_eq!(
        fourth[1],
        json!({"role": "user", "content": "Summary of the conversation so far (its first 2 \
            turns, summarised to save context):\n\nSUMMARY-2: the user sent long prompts."})
    );
    assert!(!mentions(&requests[5], "SUMMARY-1") && !mentions(&requests[5], "P2:"));
    assert!(mentions(&requests[5], "P3:") && mentions(&requests[5], "P4:"));

    // The log: one history/compacted per compaction, after its turn started, before its
    // first model request.
    let log = scratch.log(&session);
    let recorded = compactions(&log);
    assert_eq!(recorded.len(), 2, "{recorded:#?}");
    for (record, (turn, through, summary)) in recorded.iter().zip([
        (3, 1, "SUMMARY-1: the user sent long prompts."),
        (4, 2, "SUMMARY-2: the user sent long prompts."),
    ]) {
        assert_eq!(
            (&record["turn"], &record["through"], &record["summary"]),
            (&json!(turn), &json!(through), &json!(summary)),
            "{record}"
        );
        assert_eq!(record["model"], format!("m at {}", server.base_url));
        let before = record["estimate_before"].as_u64().expect("a number");
        let after = record["estimate_after"].as_u64().expect("a number");
        assert!(before > 40_000 && after < 40_000, "{record}");
        let at = log.iter().position(|r| r == record).expect("in the log");
        let started = log
            .iter()
            .position(|r| r["type"] == "turn/started" && r["turn"] == turn)
            .expect("the turn started");
        let asked = log
            .iter()
            .position(|r| r["type"] == "model/request" && r["turn"] == turn)
            .expect("the turn asked the model");
        assert!(started < at && at < asked, "{record}");
    }

    // The editor saw a note for each, derived from the record.
    let notes: Vec<Vec<String>> = turns.iter().map(|(_, notes)| thoughts(notes)).collect();
    let note = |record: &Value, turns: &str| {
        format!(
            "Compacted {} earlier {turns} into a summary (estimated {} → {} tokens).\n\n",
            record["through"], record["estimate_before"], record["estimate_after"]
        )
    };
    assert_eq!(notes[0], Vec::<String>::new());
    assert_eq!(notes[1], Vec::<String>::new());
    assert_eq!(notes[2], [note(&recorded[0], "turn")]);
    assert_eq!(notes[3], [note(&recorded[1], "turns")]);

    // The whole story in one snapshot: what each request sent (role and the start of each
    // message), the records and the notes, estimates and places normalised.
    let outline = |request: &Received| -> String {
        let lines: Vec<String> = messages(request)
            .iter()
            .map(|m| {
                let text = m["content"]
                    .as_str()
                    .unwrap_or_default()
                    .replace(&scratch.root.display().to_string(), "<root>")
                    .replace('\n', " ");
                let start: String = text.chars().take(60).collect();
                format!("  {}: {start}", m["role"].as_str().unwrap_or("?"))
            })
            .collect();
        lines.join("\n")
    };
    let mut story = Vec::new();
    for (n, request) in requests.iter().enumerate() {
        let what = if is_summary_request(request) {
            "summary request"
        } else {
            "request"
        };
        story.push(format!("{what} {}:\n{}", n + 1, outline(request)));
    }
    for record in &recorded {
        story.push(format!(
            "history/compacted turn {} through {}: {}",
            record["turn"], record["through"], record["summary"]
        ));
    }
    for (n, turn) in notes.iter().enumerate() {
        for note in turn {
            let note: String = note
                .split_whitespace()
                .map(|w| {
                    if w.chars().all(|c| c.is_ascii_digit()) {
                        "<n>"
                    } else {
                        w
                    }
                })
                .collect::<Vec<_>>()
                .join(" ");
            story.push(format!("note in turn {}: {note}", n + 1));
        }
    }
    insta::assert_snapshot!("compaction_story", story.join("\n"));

    // session/load replays exactly what was shown.
    let shown: Vec<Value> = turns
        .iter()
        .flat_map(|(prompt, notes)| as_replayed(prompt, notes))
        .collect();
    let replayed = restart_and_load(&mut client, &scratch, &session);
    assert_eq!(replayed, shown);

    // The next prompt after the load: the model reads the history it read before the load, and
    // the turn since.
    let (next, _) = client.prompt(&session, "P5: short");
    assert_eq!(next["result"]["stopReason"], "end_turn", "{next}");
    let requests = server.requests();
    assert_eq!(requests.len(), 7, "no further summary request");
    let before_load = messages(&requests[5]);
    let after_load = messages(&requests[6]);
    assert_eq!(after_load[..before_load.len()], before_load[..]);
    let tail = &after_load[before_load.len()..];
    assert_eq!(tail.len(), 2, "{tail:#?}");
    assert_eq!(
        (&tail[0]["role"], &tail[0]["content"]),
        (&json!("assistant"), &json!("AP4"))
    );
    assert_eq!(tail[1], json!({"role": "user", "content": "P5: short"}));
}

#[test]
fn the_same_prompts_without_a_context_window_never_compact() {
    let (server, scratch, mut client, session) = start("compaction-control", "", model);
    let turns = prompt_turns(&mut client, &session, 1..=4);
    let requests = server.requests();
    assert_eq!(requests.len(), 4, "one request per turn");
    assert!(!requests.iter().any(is_summary_request));
    for n in 1..=4 {
        assert!(
            mentions(&requests[3], &format!("P{n}:")),
            "turn {n} is in the history"
        );
    }
    assert!(!mentions(&requests[3], "Summary of the conversation"));
    assert!(compactions(&scratch.log(&session)).is_empty());
    assert!(turns.iter().all(|(_, notes)| thoughts(notes).is_empty()));
}

#[test]
fn a_failed_or_empty_summary_records_nothing_and_the_turn_goes_on_with_all_of_it() {
    // The first summary request fails with HTTP 500, the second is answered with no text.
    let (server, scratch, mut client, session) =
        start("compaction-failed", COMPACTION, |request, _| {
            if !is_summary_request(request) {
                return model(request, 0);
            }
            // Turn 4's summary request is the one that holds turn 2.
            if mentions(request, "P2:") {
                answer("  ")
            } else {
                Reply::Status {
                    code: 500,
                    body: r#"{"error":{"message":"summariser down"}}"#.into(),
                }
            }
        });
    let turns = prompt_turns(&mut client, &session, 1..=4);
    let requests = server.requests();
    let summary: Vec<bool> = requests.iter().map(is_summary_request).collect();
    assert_eq!(summary, [false, false, true, false, true, false]);
    assert!(!mentions(&requests[2], "P2:") && mentions(&requests[4], "P2:"));
    for (at, turn) in [(3, 3), (5, 4)] {
        for n in 1..=turn {
            assert!(
                mentions(&requests[at], &format!("P{n}:")),
                "turn {turn}'s request holds turn {n}"
            );
        }
        assert!(!mentions(&requests[at], "Summary of the conversation"));
    }
    let log = scratch.log(&session);
    assert!(compactions(&log).is_empty(), "nothing recorded");
    assert!(
        !log.iter().any(|r| r["type"] == "model/error"),
        "a failed summary is not the turn's failure"
    );
    assert!(turns.iter().all(|(_, notes)| thoughts(notes).is_empty()));
}

#[test]
fn a_cancel_during_the_summary_request_cancels_the_turn_and_records_no_compaction() {
    // The summary request is left unanswered; the server says when it arrived.
    let (arrived, summary_asked) = mpsc::channel();
    let arrived = Mutex::new(arrived);
    let (server, scratch, mut client, session) =
        start("compaction-cancel", COMPACTION, move |request, _| {
            if is_summary_request(request) {
                let _ = arrived.lock().map(|tx| tx.send(()));
                return Reply::Stall;
            }
            model(request, 0)
        });
    prompt_turns(&mut client, &session, 1..=2);
    let id = client.send(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": long_prompt(3)}]}),
    );
    summary_asked
        .recv_timeout(Duration::from_secs(60))
        .expect("the summary request reached the server");
    client.notify("session/cancel", json!({"sessionId": session}));
    let (answer, _) = client.until_response(id, Duration::from_secs(60));
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");

    let log = scratch.log(&session);
    assert!(compactions(&log).is_empty(), "nothing recorded");
    assert!(
        !log.iter()
            .any(|r| r["type"] == "model/request" && r["turn"] == 3),
        "the turn asked nothing more"
    );
    let ended = log.last().expect("records");
    assert_eq!(
        (&ended["type"], &ended["turn"], &ended["stop_reason"]),
        (&json!("turn/ended"), &json!(3), &json!("cancelled"))
    );
    assert_eq!(server.requests().len(), 3);
}
