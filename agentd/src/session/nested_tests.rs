//! The ids and places of a child agent's calls as the editor is shown them, live and replayed.

use std::collections::HashSet;

use super::*;
use crate::model::{FinishReason, ToolCall};
use crate::session::ToolStatus;
use crate::session::fold::compaction_tests::records as log;
use crate::session::fold::{self, ReplayItem};

fn call(id: &str, title: &str) -> Event {
    Event::ToolCall {
        turn: 1,
        call_id: id.into(),
        tool: "read_file".into(),
        title: title.into(),
        kind: "read".into(),
        input: serde_json::json!({}),
        pending: false,
    }
}

fn result(id: &str, output: &str) -> Event {
    Event::ToolResult {
        turn: 1,
        call_id: id.into(),
        status: ToolStatus::Completed,
        output: output.into(),
        facts: serde_json::json!({}),
        diff: None,
    }
}

fn started(agent: &str, parent: &str, depth: u64, call_id: &str) -> Event {
    Event::AgentStarted {
        agent: agent.into(),
        parent: parent.into(),
        depth,
        persona: "general".into(),
        call_id: call_id.into(),
    }
}

/// Every shown call: its id, its parent's id (`None` at the top level) and its title.
fn shown_calls(records: &[Record]) -> Vec<(String, Option<String>, String)> {
    fold::replay(records)
        .into_iter()
        .filter_map(|item| match item {
            ReplayItem::ToolCall {
                call_id,
                title,
                nested,
                ..
            } => Some((call_id, nested.map(|n| n.parent_call_id), title)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_nested_id_is_the_parent_call_the_child_and_its_call_number() {
    assert_eq!(call_id("call_1_1", "agent-1", 1), "call_1_1/agent-1/1");
    assert_eq!(
        call_id("call_1_1/agent-1/2", "agent-2", 3),
        "call_1_1/agent-1/2/agent-2/3"
    );
    assert_eq!(title("reader", "Read notes.txt"), "reader: Read notes.txt");
}

#[test]
fn a_top_level_id_loses_the_separator_and_an_ordinary_one_is_kept() {
    let mut answer = AssistantTurn {
        text: String::new(),
        reasoning: None,
        tool_calls: ["call_1", "t1/agent-1/1", "a//b"]
            .iter()
            .map(|id| ToolCall {
                id: (*id).to_owned(),
                name: "bash".into(),
                arguments: "{}".into(),
            })
            .collect(),
        finish: FinishReason::ToolCalls,
        usage: None,
    };
    own_top_level_ids(&mut answer);
    let ids: Vec<&str> = answer.tool_calls.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["call_1", "t1_agent-1_1", "a__b"]);
}

/// Two children whose models give every call the same id, which is also a top-level call's,
/// and a top-level call whose model named it like the first child's first nested call.
fn repeated_ids() -> Vec<Record> {
    let mut forged = AssistantTurn {
        text: String::new(),
        reasoning: None,
        tool_calls: vec![ToolCall {
            id: "t1/agent-1/1".into(),
            name: "read_file".into(),
            arguments: "{}".into(),
        }],
        finish: FinishReason::ToolCalls,
        usage: None,
    };
    // What the top-level turn does to every answer before it is recorded.
    own_top_level_ids(&mut forged);
    let forged = forged.tool_calls[0].id.clone();
    log(vec![
        (None, call(&forged, "top read")),
        (None, result(&forged, "top")),
        (None, call("t1", "Delegate to general")),
        (None, started("agent-1", "agent-0", 1, "t1")),
        (Some("agent-1"), call("t1", "first")),
        (Some("agent-1"), result("t1", "one")),
        (Some("agent-1"), call("t1", "second")),
        (Some("agent-1"), result("t1", "two")),
        (None, result("t1", "child answered")),
        (None, call("t1", "Delegate to general again")),
        (None, started("agent-2", "agent-0", 1, "t1")),
        (Some("agent-2"), call("t1", "third")),
        (Some("agent-2"), result("t1", "three")),
        (None, result("t1", "child answered")),
    ])
}

#[test]
fn ids_never_collide_however_the_models_number_their_calls() {
    let records = repeated_ids();
    let calls = shown_calls(&records);
    let ids: Vec<&str> = calls.iter().map(|(id, _, _)| id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "t1_agent-1_1",
            "t1",
            "t1/agent-1/1",
            "t1/agent-1/2",
            "t1",
            "t1/agent-2/1"
        ]
    );
    // Every nested call is unique, and none is a top-level call's; the two top-level `t1`
    // are the model's own repeat, which agentd shows as it was made.
    let top: HashSet<&str> = calls
        .iter()
        .filter(|(_, parent, _)| parent.is_none())
        .map(|(id, _, _)| id.as_str())
        .collect();
    let nested: Vec<&str> = calls
        .iter()
        .filter(|(_, parent, _)| parent.is_some())
        .map(|(id, _, _)| id.as_str())
        .collect();
    let distinct: HashSet<&str> = nested.iter().copied().collect();
    assert_eq!(distinct.len(), nested.len(), "{nested:?}");
    assert!(distinct.is_disjoint(&top), "{nested:?} {top:?}");
    // Each result updates the call it answers.
    let results: Vec<String> = fold::replay(&records)
        .into_iter()
        .filter_map(|item| match item {
            ReplayItem::ToolResult {
                call_id, output, ..
            } => Some(format!("{call_id}={output}")),
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        [
            "t1_agent-1_1=top",
            "t1/agent-1/1=one",
            "t1/agent-1/2=two",
            "t1=child answered",
            "t1/agent-2/1=three",
            "t1=child answered"
        ]
    );
}

#[test]
fn a_grandchilds_calls_nest_under_its_parents_task_call() {
    let records = log(vec![
        (None, call("t1", "Delegate to planner")),
        (None, started("agent-1", "agent-0", 1, "t1")),
        (Some("agent-1"), call("k", "Delegate to general")),
        (None, started("agent-2", "agent-1", 2, "t1/agent-1/1")),
        (Some("agent-2"), call("k", "Read a.txt")),
        (Some("agent-2"), result("k", "a")),
        (Some("agent-1"), result("k", "the grandchild answered")),
        (None, result("t1", "the child answered")),
    ]);
    let calls = shown_calls(&records);
    assert_eq!(
        calls,
        [
            ("t1".to_owned(), None, "Delegate to planner".to_owned()),
            (
                "t1/agent-1/1".to_owned(),
                Some("t1".to_owned()),
                "Delegate to general".to_owned()
            ),
            (
                "t1/agent-1/1/agent-2/1".to_owned(),
                Some("t1/agent-1/1".to_owned()),
                "Read a.txt".to_owned()
            ),
        ]
    );
}

#[test]
fn what_a_child_shows_live_is_what_the_replay_shows() {
    let records = repeated_ids();
    let live: Vec<ReplayItem> = records
        .iter()
        .filter(|r| !r.is_top_level())
        .flat_map(|r| fold::items_of(&records, r.seq))
        .collect();
    let replayed: Vec<ReplayItem> = fold::replay(&records)
        .into_iter()
        .filter(|item| match item {
            ReplayItem::ToolCall { nested, .. } | ReplayItem::ToolResult { nested, .. } => {
                nested.is_some()
            }
            _ => false,
        })
        .collect();
    assert_eq!(live.len(), 6);
    assert_eq!(live, replayed);
    // A record written after it by another agent does not change it.
    let first_child_call = records
        .iter()
        .find(|r| r.is_of("agent-1"))
        .map(|r| r.seq)
        .unwrap_or(u64::MAX);
    assert_eq!(
        fold::items_of(&records[..=first_child_call as usize], first_child_call),
        fold::items_of(&records, first_child_call)
    );
    assert_eq!(fold::items_of(&records, u64::MAX), []);
}

#[test]
fn a_childs_call_without_its_start_shows_nothing() {
    let records = log(vec![
        (None, call("t1", "Delegate")),
        (Some("agent-1"), call("k", "Read a.txt")),
        (Some("agent-1"), result("k", "a")),
    ]);
    assert_eq!(shown_calls(&records).len(), 1);
    assert_eq!(fold::items_of(&records, 1), []);
    // The control: with its start, the same call shows.
    let mut with_start = records.clone();
    with_start.insert(
        1,
        log(vec![(None, started("agent-1", "agent-0", 1, "t1"))]).remove(0),
    );
    for (seq, record) in with_start.iter_mut().enumerate() {
        record.seq = seq as u64;
    }
    assert_eq!(shown_calls(&with_start).len(), 2);
    assert_eq!(fold::items_of(&with_start, 2).len(), 1);
}
