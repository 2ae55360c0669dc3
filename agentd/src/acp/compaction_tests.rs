//! When a turn compacts and what it asks the model: the plan over the log, the summary request,
//! and the estimate once the summary stands in.

use super::*;
use crate::model::ToolCall;
use crate::test_support::record;

fn policy(compact_at: u64, keep_turns: u64) -> CompactionPolicy {
    CompactionPolicy {
        context_window: compact_at * 2,
        compact_at,
        keep_turns,
    }
}

fn prompt(turn: u64, text: &str) -> Event {
    Event::PromptSubmitted {
        turn,
        text: text.into(),
    }
}

fn compacted(turn: u64, through: u64) -> Event {
    Event::HistoryCompacted {
        turn,
        through,
        summary: "S".into(),
        model: "m".into(),
        estimate_before: 0,
        estimate_after: 0,
    }
}

#[test]
fn a_request_at_or_under_the_threshold_does_not_compact() {
    assert_eq!(plan(&[], 9, &policy(100, 2), 100), Plan::Under);
    assert_eq!(plan(&[], 9, &policy(100, 2), 0), Plan::Under);
}

#[test]
fn over_the_threshold_every_turn_but_the_latest_k_and_the_current_one_is_summarised() {
    assert_eq!(plan(&[], 5, &policy(100, 2), 101), Plan::Through(2));
    assert_eq!(plan(&[], 5, &policy(100, 0), 101), Plan::Through(4));
    // Turn 3 with two kept: turns 1 and 2 are the kept ones, nothing is older.
    assert_eq!(plan(&[], 3, &policy(100, 2), 101), Plan::NothingOlder);
    assert_eq!(plan(&[], 1, &policy(100, 0), 101), Plan::NothingOlder);
}

#[test]
fn a_turn_already_summarised_is_not_summarised_again() {
    let records = vec![record(0, compacted(4, 2))];
    assert_eq!(
        plan(&records, 5, &policy(100, 2), 101),
        Plan::NothingOlder,
        "turn 2 is the latest summarised and turns 3 and 4 are kept"
    );
    assert_eq!(plan(&records, 6, &policy(100, 2), 101), Plan::Through(3));
}

#[test]
fn the_summary_request_states_the_older_turns_as_one_text_and_offers_no_tools() {
    let older = vec![
        fold::summary_message(1, "Earlier: the user wanted a README."),
        Message::user("list the files"),
        Message::Assistant {
            text: Some("Looking.".into()),
            reasoning: None,
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: "bash".into(),
                arguments: "{\"command\":\"ls\"}".into(),
            }],
        },
        Message::tool("c1", "README.md\n[exit code: 0]"),
    ];
    let request = summary_request(&older);
    assert!(request.tools.is_empty());
    assert_eq!(request.messages.len(), 2, "{request:?}");
    assert_eq!(request.messages[0], Message::system(SUMMARY_INSTRUCTIONS));
    let Message::User { content } = &request.messages[1] else {
        panic!("the history is the user's message: {request:?}");
    };
    assert_eq!(
        content,
        "The conversation to summarise:\n\n\
         ## User\nSummary of the conversation so far (its first turn, summarised to save \
         context):\n\nEarlier: the user wanted a README.\n\n\
         ## User\nlist the files\n\n\
         ## Assistant\nLooking.\n[calls bash {\"command\":\"ls\"} as c1]\n\n\
         ## Result of c1\nREADME.md\n[exit code: 0]"
    );
}

#[test]
fn a_long_tool_result_is_cut_in_the_summary_request_and_says_by_how_much() {
    let output = "x".repeat(RESULT_SHOWN + 100);
    let text = transcript(&[Message::tool("c1", output)]);
    assert!(
        text.ends_with(&format!(
            "{}…\n[100 more bytes not shown]",
            "x".repeat(RESULT_SHOWN)
        )),
        "{}",
        &text[text.len() - 60..]
    );
    let short = transcript(&[Message::tool("c1", "ok")]);
    assert_eq!(short, "## Result of c1\nok");
}

#[test]
fn the_estimate_after_counts_the_summary_in_place_of_the_turns_it_covers() {
    let big = "y".repeat(8000);
    let records = vec![
        record(0, prompt(1, &big)),
        record(1, prompt(2, &big)),
        record(2, prompt(3, "now")),
    ];
    let request = ChatRequest {
        messages: std::iter::once(Message::system("be brief"))
            .chain(fold::history(&records))
            .collect(),
        tools: Vec::new(),
        agent: None,
    };
    let before = estimate_tokens(&request);
    let after = estimate_after(&records, &compacted(3, 2), &request);
    assert!(before > 4000, "{before}");
    assert!(after < 100, "{after}");
    let expected = ChatRequest {
        messages: vec![
            Message::system("be brief"),
            fold::summary_message(2, "S"),
            Message::user("now"),
        ],
        tools: Vec::new(),
        agent: None,
    };
    assert_eq!(after, estimate_tokens(&expected));
}
