//! The history fold with compactions in it: which records a `history/compacted` stands for, what
//! the model reads in their place, and what the editor and `sessions show` are shown of it.

use super::*;
use crate::session::event::{EVENT_VERSION, LoggedToolCall};

/// A log of these events, each of the agent given (`None`: the top level or the session).
pub(crate) fn records(events: Vec<(Option<&str>, Event)>) -> Vec<Record> {
    events
        .into_iter()
        .enumerate()
        .map(|(i, (agent, event))| Record {
            v: EVENT_VERSION,
            seq: i as u64,
            at_ms: 1000 + i as u64,
            agent: agent.map(str::to_owned),
            event,
        })
        .collect()
}

fn top(events: Vec<Event>) -> Vec<Record> {
    records(events.into_iter().map(|e| (None, e)).collect())
}

/// Turn `n`: its prompt `pN`, an answer that runs `ls` and its result, then the answer `aN`.
fn turn(n: u64) -> Vec<Event> {
    let call = format!("c{n}");
    vec![
        Event::PromptSubmitted {
            turn: n,
            text: format!("p{n}"),
        },
        Event::TurnStarted { turn: n },
        Event::ModelOutput {
            turn: n,
            step: 1,
            text: String::new(),
            reasoning: None,
            tool_calls: vec![LoggedToolCall {
                id: call.clone(),
                name: "bash".into(),
                arguments: "{\"command\":\"ls\"}".into(),
            }],
            finish: "tool_calls".into(),
            incomplete: false,
        },
        Event::ToolResult {
            turn: n,
            call_id: call,
            status: ToolStatus::Completed,
            output: format!("out{n}"),
            facts: serde_json::json!({}),
            diff: None,
        },
        Event::ModelOutput {
            turn: n,
            step: 2,
            text: format!("a{n}"),
            reasoning: None,
            tool_calls: vec![],
            finish: "stop".into(),
            incomplete: false,
        },
        Event::TurnEnded {
            turn: n,
            stop_reason: "end_turn".into(),
        },
    ]
}

/// The messages of turn `n` as [`turn`] makes it.
fn turn_messages(n: u64) -> Vec<Message> {
    let call = format!("c{n}");
    vec![
        Message::user(format!("p{n}")),
        Message::Assistant {
            text: None,
            reasoning: None,
            tool_calls: vec![ToolCall {
                id: call.clone(),
                name: "bash".into(),
                arguments: "{\"command\":\"ls\"}".into(),
            }],
        },
        Message::tool(call, format!("out{n}")),
        Message::Assistant {
            text: Some(format!("a{n}")),
            reasoning: None,
            tool_calls: vec![],
        },
    ]
}

fn compacted(turn: u64, through: u64, summary: &str) -> Event {
    Event::HistoryCompacted {
        turn,
        through,
        summary: summary.into(),
        model: "m at http://127.0.0.1/v1".into(),
        estimate_before: 900,
        estimate_after: 300,
    }
}

/// Turns 1..=last, with `compaction` recorded right after the prompt and start of turn `at`
/// (where a turn records it, before its first request).
fn session(last: u64, compactions: &[(u64, u64, &str)]) -> Vec<Record> {
    let mut events = vec![Event::SessionCreated {
        id: "s".into(),
        cwd: "/w".into(),
        agent: "agentd test".into(),
    }];
    for n in 1..=last {
        let mut this = turn(n);
        for (at, through, summary) in compactions {
            if *at == n {
                this.insert(2, compacted(*at, *through, summary));
            }
        }
        events.extend(this);
    }
    top(events)
}

#[test]
fn without_a_compaction_the_history_is_every_turn() {
    let records = session(2, &[]);
    let mut expected = turn_messages(1);
    expected.extend(turn_messages(2));
    assert_eq!(history(&records), expected);
    assert_eq!(compacted_through(&records), 0);
}

#[test]
fn a_compaction_replaces_the_turns_it_summarised_with_one_message_stating_the_summary() {
    let records = session(3, &[(3, 1, "  The user listed files.\n")]);
    let mut expected = vec![Message::user(
        "Summary of the conversation so far (its first turn, summarised to save context):\n\n\
         The user listed files.",
    )];
    expected.extend(turn_messages(2));
    expected.extend(turn_messages(3));
    assert_eq!(history(&records), expected);
    assert_eq!(compacted_through(&records), 1);
}

#[test]
fn a_compaction_of_every_turn_but_the_last_k_keeps_those_and_the_current_one_verbatim() {
    // Turn 6 starts with two turns kept: turns 1 to 3 are summarised.
    let records = session(6, &[(6, 3, "S")]);
    let history = history(&records);
    assert_eq!(history[0], summary_message(3, "S"));
    let mut expected = vec![summary_message(3, "S")];
    for n in 4..=6 {
        expected.extend(turn_messages(n));
    }
    assert_eq!(history, expected);
    let Message::User { content } = &history[0] else {
        panic!("the summary is a user message: {history:?}");
    };
    assert!(content.contains("its first 3 turns"), "{content}");
    assert!(!format!("{history:?}").contains("p3"), "{history:?}");
}

#[test]
fn a_second_compaction_stands_for_the_first_and_the_turns_after_it() {
    let records = session(5, &[(3, 1, "S1"), (5, 3, "S2")]);
    let mut expected = vec![summary_message(3, "S2")];
    expected.extend(turn_messages(4));
    expected.extend(turn_messages(5));
    assert_eq!(history(&records), expected);
    assert_eq!(compacted_through(&records), 3);
    assert!(!format!("{:?}", history(&records)).contains("S1"));
}

#[test]
fn what_a_second_compaction_summarises_is_the_first_summary_and_the_turns_after_it() {
    // As turn 5 sees it before its own compaction: summary 1 stands for turn 1.
    let records = session(5, &[(3, 1, "S1")]);
    let mut expected = vec![summary_message(1, "S1")];
    expected.extend(turn_messages(2));
    expected.extend(turn_messages(3));
    assert_eq!(history_through(&records, 3), expected);
    // Without any compaction, the turns up to the one named.
    let plain = session(3, &[]);
    let mut expected = turn_messages(1);
    expected.extend(turn_messages(2));
    assert_eq!(history_through(&plain, 2), expected);
}

#[test]
fn a_child_agents_history_is_untouched_by_the_sessions_compaction() {
    let mut events: Vec<(Option<&str>, Event)> =
        turn(1).into_iter().map(|e| (Some("agent-1"), e)).collect();
    events.push((None, compacted(2, 1, "S")));
    let records = records(events);
    assert_eq!(history_of(&records, "agent-1"), turn_messages(1));
}

#[test]
fn the_editor_is_shown_a_note_where_the_compaction_was_recorded() {
    let records = session(2, &[(2, 1, "S")]);
    let items = replay(&records);
    let note = ReplayItem::AgentThought(compaction_note(1, 900, 300));
    let at = items.iter().position(|i| *i == note).expect("the note");
    assert!(matches!(&items[at - 1], ReplayItem::UserText(t) if t == "p2"));
    assert_eq!(
        compaction_note(1, 900, 300),
        "Compacted 1 earlier turn into a summary (estimated 900 → 300 tokens).\n\n"
    );
    assert!(compaction_note(3, 9, 3).starts_with("Compacted 3 earlier turns"));
    // The summary itself is for the model: the editor is not shown it.
    assert!(!format!("{items:?}").contains("\"S\""), "{items:?}");
}

#[test]
fn sessions_show_prints_the_compaction_with_its_summary() {
    let text = transcript(&session(2, &[(2, 1, "The user listed files.")]));
    assert!(
        text.contains(
            "  history compacted: turns 1-1 summarised by m at http://127.0.0.1/v1 (estimated \
             900 -> 300 tokens):\n    The user listed files.\n"
        ),
        "{text}"
    );
}

#[test]
fn the_compaction_record_is_history_compacted_with_its_facts() {
    let json = serde_json::to_value(&top(vec![compacted(3, 1, "S")])[0]).expect("json");
    assert_eq!(json["type"], "history/compacted");
    assert_eq!(
        (
            &json["turn"],
            &json["through"],
            &json["summary"],
            &json["estimate_before"],
            &json["estimate_after"]
        ),
        (
            &serde_json::json!(3),
            &serde_json::json!(1),
            &serde_json::json!("S"),
            &serde_json::json!(900),
            &serde_json::json!(300)
        )
    );
    let back: Record = serde_json::from_value(json).expect("reads back");
    assert_eq!(back.event, compacted(3, 1, "S"));
}
