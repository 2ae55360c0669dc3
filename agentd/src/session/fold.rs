//! Pure folds over a session's records: its summary, what an editor is shown on
//! `session/load`, and (from `transcript.rs`) the transcript `agentd sessions show` prints.

use std::path::PathBuf;

use super::diff::LoggedDiff;
use super::event::{Event, PlanItem, PromptResource, Record, ToolStatus};
use super::nested::{Children, Nested};
use crate::model::{Message, ToolCall};

/// What `agentd sessions list` shows of a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub id: String,
    pub cwd: PathBuf,
    pub created_ms: u64,
    pub updated_ms: u64,
    pub turns: u64,
    /// The first line of the first prompt, shortened.
    pub title: Option<String>,
}

/// The summary of a session's records (which start with `session/created`).
pub fn summarize(records: &[Record]) -> Summary {
    let (id, cwd) = match records.first().map(|r| &r.event) {
        Some(Event::SessionCreated { id, cwd, .. }) => (id.clone(), cwd.clone()),
        _ => (String::new(), PathBuf::new()),
    };
    let title = records.iter().find_map(|r| match &r.event {
        Event::PromptSubmitted { text, .. } => Some(shorten(text.lines().next().unwrap_or(""), 60)),
        _ => None,
    });
    Summary {
        id,
        cwd,
        created_ms: records.first().map_or(0, |r| r.at_ms),
        updated_ms: records.last().map_or(0, |r| r.at_ms),
        turns: last_turn(records),
        title,
    }
}

/// The highest turn number seen; the next prompt is this + 1.
pub fn last_turn(records: &[Record]) -> u64 {
    records
        .iter()
        .filter_map(|r| match r.event {
            Event::TurnStarted { turn }
            | Event::PromptSubmitted { turn, .. }
            | Event::CommandRun { turn, .. } => Some(turn),
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max - 1).collect();
    out.push('…');
    out
}

/// What an editor is shown of the session, in order, when it loads it.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplayItem {
    UserText(String),
    /// The reasoning the model showed.
    AgentThought(String),
    AgentText(String),
    /// A failed model call, as the agent's text ([`model_error_text`]), marked as agentd's own
    /// words so that no text of the model can pass for it.
    ModelError(String),
    ToolCall {
        call_id: String,
        title: String,
        kind: String,
        input: serde_json::Value,
        /// It waits for a person's approval before it may run.
        pending: bool,
        /// Where a child agent's call sits; `None` for a top-level call.
        nested: Option<Nested>,
    },
    ToolResult {
        call_id: String,
        status: ToolStatus,
        output: String,
        facts: serde_json::Value,
        /// The change a file tool made, as its `tool/result` kept it.
        diff: Option<LoggedDiff>,
        /// Where a child agent's call sits; `None` for a top-level call.
        nested: Option<Nested>,
    },
    /// The agent's plan, whole (it replaces the plan shown before).
    Plan(Vec<PlanItem>),
}

/// Every record that an editor showed live, in the same order; a child agent's tool calls
/// nested under the `task` call that started the child ([`super::nested`]).
pub fn replay(records: &[Record]) -> Vec<ReplayItem> {
    let mut children = Children::default();
    records
        .iter()
        .flat_map(|r| shown(&mut children, r))
        .collect()
}

/// What the editor is shown for the record `seq` of `records`, given those before it: how a
/// child's loop shows a record it has just written, as [`replay`] shows it again. (Records
/// written after it, by another agent meanwhile, do not count.)
pub fn items_of(records: &[Record], seq: u64) -> Vec<ReplayItem> {
    let mut children = Children::default();
    for record in records {
        if record.seq == seq {
            return shown(&mut children, record);
        }
        // What these showed was shown when they were written; only where they leave matters.
        let _ = children.place(record);
    }
    Vec::new()
}

/// What the editor is shown for `record`, the next record after those `children` took in: a
/// top-level record as [`replay_items`] says; a child's tool call and result as a nested call.
fn shown(children: &mut Children, record: &Record) -> Vec<ReplayItem> {
    let place = children.place(record);
    if record.is_top_level() {
        return replay_items(record);
    }
    let Some((nested, id)) = place else {
        return Vec::new();
    };
    let item = match replay_item(record) {
        Some(ReplayItem::ToolCall {
            title,
            kind,
            input,
            pending,
            ..
        }) => ReplayItem::ToolCall {
            call_id: id,
            title,
            kind,
            input,
            pending,
            nested: Some(nested),
        },
        Some(ReplayItem::ToolResult {
            status,
            output,
            facts,
            diff,
            ..
        }) => ReplayItem::ToolResult {
            call_id: id,
            status,
            output,
            facts,
            diff,
            nested: Some(nested),
        },
        _ => return Vec::new(),
    };
    vec![item]
}

/// The tag of the top-level agent as a parent in `agent/started`.
pub const TOP_AGENT: &str = "agent-0";

/// What the editor is shown for one record, in order: the live stream and `session/load` both
/// go through this, so a replay shows what was shown. A child agent's record shows nothing
/// here: its calls are shown nested, which depends on the records before it
/// ([`Children`]).
pub fn replay_items(record: &Record) -> Vec<ReplayItem> {
    if !record.is_top_level() {
        return Vec::new();
    }
    match &record.event {
        // The model's reasoning came before its text.
        Event::ModelOutput {
            text, reasoning, ..
        } => {
            let thought = reasoning
                .as_ref()
                .filter(|r| !r.text.is_empty())
                .map(|r| ReplayItem::AgentThought(r.text.clone()));
            let text = (!text.is_empty()).then(|| ReplayItem::AgentText(text.clone()));
            thought.into_iter().chain(text).collect()
        }
        _ => replay_item(record).into_iter().collect(),
    }
}

/// What the editor is shown for a record that shows one thing, if it shows anything.
fn replay_item(record: &Record) -> Option<ReplayItem> {
    match &record.event {
        Event::PromptSubmitted { text, .. } => Some(ReplayItem::UserText(text.clone())),
        Event::CommandRun { input, .. } => Some(ReplayItem::UserText(input.clone())),
        Event::CommandOutput { text, .. } => Some(ReplayItem::AgentText(text.clone())),
        Event::PlanUpdated { entries, .. } => Some(ReplayItem::Plan(entries.clone())),
        Event::ModelError { message, .. } => {
            Some(ReplayItem::ModelError(model_error_text(message)))
        }
        Event::HistoryCompacted {
            through,
            estimate_before,
            estimate_after,
            ..
        } => Some(ReplayItem::AgentThought(compaction_note(
            *through,
            *estimate_before,
            *estimate_after,
        ))),
        Event::ToolCall {
            call_id,
            title,
            kind,
            input,
            pending,
            ..
        } => Some(ReplayItem::ToolCall {
            call_id: call_id.clone(),
            title: title.clone(),
            kind: kind.clone(),
            input: input.clone(),
            pending: *pending,
            nested: None,
        }),
        Event::ToolResult {
            call_id,
            status,
            output,
            facts,
            diff,
            ..
        } => Some(ReplayItem::ToolResult {
            call_id: call_id.clone(),
            status: *status,
            output: output.clone(),
            facts: facts.clone(),
            diff: diff.clone(),
            nested: None,
        }),
        // The end of the call that started the task, as the editor saw it then.
        Event::TaskStopped {
            call_id,
            text,
            facts,
            ..
        } => Some(ReplayItem::ToolResult {
            call_id: call_id.clone(),
            status: ToolStatus::Failed,
            output: text.clone(),
            facts: facts.clone(),
            diff: None,
            nested: None,
        }),
        _ => None,
    }
}

/// How a failed model call is shown to the user: what happened, in the words of the error, as
/// a paragraph of its own — after the text the failed answer had already shown, if any (a
/// leading blank line is nothing to a markdown view when there was none).
pub fn model_error_text(message: &str) -> String {
    format!("{MODEL_ERROR_LEAD}{message}")
}

/// How [`model_error_text`] begins.
const MODEL_ERROR_LEAD: &str = "\n\nThe model request failed: ";

/// The chat history a model is given for the next step: every prompt, every model answer (with
/// the reasoning it showed; the provider decides what of it goes back) and every tool result,
/// in order. What was shown of an answer that then failed is not history: the step gave no
/// answer. A tool call that has no result (the turn was cancelled or cut off, or agentd stopped
/// before it ran) is answered with a note, because a model API requires every tool call to be
/// followed by its result.
///
/// Only the top-level agent's records count: a child agent's are its own history
/// ([`history_of`]); its parent sees its answer as the `task` call's result.
///
/// After a `history/compacted`, the latest one stands for every turn up to its `through`: the
/// history starts with one user message stating its summary ([`summary_message`]), then the
/// later turns as they were. A later compaction's summary was written from the earlier one's
/// and the turns after it, so only the latest counts.
pub fn history(records: &[Record]) -> Vec<Message> {
    compacted_history(records, None)
}

/// The history of the turns up to and including `through`, as [`history`] gives it (starting
/// with the latest summary, if any): what a compaction summarises.
pub fn history_through(records: &[Record], through: u64) -> Vec<Message> {
    compacted_history(records, Some(through))
}

/// The last turn the latest `history/compacted` summarised; 0 when the history was never
/// compacted.
pub fn compacted_through(records: &[Record]) -> u64 {
    latest_compaction(records).map_or(0, |(through, _)| through)
}

/// The user message that stands for the turns a compaction summarised.
pub fn summary_message(through: u64, summary: &str) -> Message {
    let turns = if through == 1 {
        "its first turn".to_owned()
    } else {
        format!("its first {through} turns")
    };
    Message::user(format!(
        "Summary of the conversation so far ({turns}, summarised to save context):\n\n{}",
        summary.trim()
    ))
}

/// What the editor is shown of a compaction, live and on `session/load`.
pub fn compaction_note(through: u64, estimate_before: u64, estimate_after: u64) -> String {
    let turns = if through == 1 { "turn" } else { "turns" };
    format!(
        "Compacted {through} earlier {turns} into a summary (estimated {estimate_before} → \
         {estimate_after} tokens).\n\n"
    )
}

fn latest_compaction(records: &[Record]) -> Option<(u64, &str)> {
    records
        .iter()
        .rev()
        .filter(|r| r.is_top_level())
        .find_map(|r| match &r.event {
            Event::HistoryCompacted {
                through, summary, ..
            } => Some((*through, summary.as_str())),
            _ => None,
        })
}

fn compacted_history(records: &[Record], through: Option<u64>) -> Vec<Message> {
    let latest = latest_compaction(records);
    let floor = latest.map_or(0, |(through, _)| through);
    let kept = records.iter().filter(|r| r.is_top_level()).filter(|r| {
        turn_of(&r.event).is_none_or(|turn| turn > floor && through.is_none_or(|t| turn <= t))
    });
    let mut out: Vec<Message> = latest
        .map(|(through, summary)| summary_message(through, summary))
        .into_iter()
        .collect();
    out.extend(history_from(kept));
    out
}

/// The turn a record of the model's history belongs to; `None` for a record of none.
fn turn_of(event: &Event) -> Option<u64> {
    match event {
        Event::PromptSubmitted { turn, .. }
        | Event::CommandPrompt { turn, .. }
        | Event::PromptResources { turn, .. }
        | Event::ModelOutput { turn, .. }
        | Event::ToolResult { turn, .. } => Some(*turn),
        _ => None,
    }
}

/// The chat history of the child agent `agent`: its own prompt, answers and tool results, in
/// the same shape as [`history`].
pub fn history_of(records: &[Record], agent: &str) -> Vec<Message> {
    history_from(records.iter().filter(|r| r.is_of(agent)))
}

fn history_from<'a>(records: impl Iterator<Item = &'a Record>) -> Vec<Message> {
    let mut out = Vec::new();
    let mut pending: Vec<String> = Vec::new();
    let close_pending = |out: &mut Vec<Message>, pending: &mut Vec<String>| {
        for id in pending.drain(..) {
            out.push(Message::tool(
                id,
                "[no result: the turn ended before this tool call ran]",
            ));
        }
    };
    for record in records {
        match &record.event {
            Event::PromptSubmitted { text, .. } | Event::CommandPrompt { text, .. } => {
                close_pending(&mut out, &mut pending);
                out.push(Message::user(text.clone()));
            }
            Event::PromptResources { resources, .. } => {
                if let Some(Message::User { content }) = out.last_mut() {
                    content.push_str(&resources_text(resources));
                }
            }
            Event::ModelOutput {
                text,
                reasoning,
                tool_calls,
                incomplete: false,
                ..
            } => {
                close_pending(&mut out, &mut pending);
                out.push(Message::Assistant {
                    text: (!text.is_empty()).then(|| text.clone()),
                    reasoning: reasoning.clone(),
                    tool_calls: tool_calls
                        .iter()
                        .map(|c| ToolCall {
                            id: c.id.clone(),
                            name: c.name.clone(),
                            arguments: c.arguments.clone(),
                        })
                        .collect(),
                });
                pending = tool_calls.iter().map(|c| c.id.clone()).collect();
            }
            Event::ToolResult {
                call_id, output, ..
            } => {
                if let Some(i) = pending.iter().position(|id| id == call_id) {
                    pending.remove(i);
                    out.push(Message::tool(call_id.clone(), output.clone()));
                }
            }
            // The model must not go on from files that are no longer there.
            Event::CheckpointRestored {
                turn,
                changes,
                still_differs,
                ..
            } => {
                close_pending(&mut out, &mut pending);
                out.push(Message::user(undone_note(*turn, changes, still_differs)));
            }
            _ => {}
        }
    }
    close_pending(&mut out, &mut pending);
    out
}

/// What the model is told of an undo: the workspace is as before turn `turn`, what changed, and
/// what still differs.
fn undone_note(turn: u64, changes: &[crate::checkpoint::Change], differs: &[PathBuf]) -> String {
    let mut note = format!(
        "[agentd] The user undid turn {turn} and every turn after it: the workspace was restored \
         to how it was before turn {turn}. What those turns changed on disk is gone; read files \
         again before relying on them. Restored:"
    );
    for change in changes {
        note.push_str(&format!(
            "\n- {} ({})",
            change.path.display(),
            change.kind.as_str()
        ));
    }
    if !differs.is_empty() {
        note.push_str("\nStill different from before that turn:");
        for path in differs {
            note.push_str(&format!("\n- {}", path.display()));
        }
    }
    note
}

/// What the model reads of a prompt's resources, after the prompt's text.
pub fn resources_text(resources: &[PromptResource]) -> String {
    let mut text = String::new();
    for resource in resources {
        let uri = &resource.uri;
        match (&resource.text, &resource.not_included) {
            (Some(body), _) => text.push_str(&format!(
                "\n\n[resource {uri}]\n{}\n[end of resource {uri}]",
                body.trim_end()
            )),
            (None, why) => text.push_str(&format!(
                "\n\n[resource {uri}: not included: {}]",
                why.as_deref().unwrap_or("no text")
            )),
        }
    }
    text
}

pub use super::transcript::transcript;

#[cfg(test)]
#[path = "fold_compaction_tests.rs"]
pub(crate) mod compaction_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::event::AgentOutcome;
    use crate::session::event::{EVENT_VERSION, LoggedToolCall};

    fn records(events: Vec<Event>) -> Vec<Record> {
        events
            .into_iter()
            .enumerate()
            .map(|(i, event)| Record {
                v: EVENT_VERSION,
                seq: i as u64,
                at_ms: 1000 + i as u64,
                agent: None,
                event,
            })
            .collect()
    }

    fn sample() -> Vec<Record> {
        records(vec![
            Event::SessionCreated {
                id: "abc".into(),
                cwd: "/w".into(),
                agent: "agentd test".into(),
            },
            Event::PromptSubmitted {
                turn: 1,
                text: "list the files\nplease".into(),
            },
            Event::TurnStarted { turn: 1 },
            Event::ModelOutput {
                turn: 1,
                step: 1,
                text: "Looking.".into(),
                reasoning: None,
                tool_calls: vec![LoggedToolCall {
                    id: "c1".into(),
                    name: "bash".into(),
                    arguments: "{\"command\":\"ls\"}".into(),
                }],
                finish: "tool_calls".into(),
                incomplete: false,
            },
            Event::ToolCall {
                turn: 1,
                call_id: "c1".into(),
                tool: "bash".into(),
                title: "ls".into(),
                kind: "execute".into(),
                input: serde_json::json!({"command": "ls"}),
                pending: false,
            },
            Event::ToolResult {
                turn: 1,
                call_id: "c1".into(),
                status: ToolStatus::Completed,
                output: "a\n[exit code: 0]".into(),
                facts: serde_json::json!({"exit": {"code": 0}}),
                diff: None,
            },
            Event::TurnEnded {
                turn: 1,
                stop_reason: "end_turn".into(),
            },
        ])
    }

    #[test]
    fn the_summary_names_the_session_its_turns_and_its_first_prompt() {
        let s = summarize(&sample());
        assert_eq!(s.id, "abc");
        assert_eq!(s.turns, 1);
        assert_eq!(s.title.as_deref(), Some("list the files"));
        assert_eq!((s.created_ms, s.updated_ms), (1000, 1006));
    }

    #[test]
    fn replay_shows_what_the_editor_saw_in_order() {
        let items = replay(&sample());
        assert!(matches!(&items[0], ReplayItem::UserText(t) if t.starts_with("list")));
        assert!(matches!(&items[1], ReplayItem::AgentText(t) if t == "Looking."));
        assert!(matches!(&items[2], ReplayItem::ToolCall { call_id, .. } if call_id == "c1"));
        assert!(matches!(
            &items[3],
            ReplayItem::ToolResult {
                status: ToolStatus::Completed,
                ..
            }
        ));
        assert_eq!(items.len(), 4);
    }

    #[test]
    fn a_write_replays_with_the_diff_its_result_kept_and_an_older_result_without_one() {
        let line = |diff: &str| {
            format!(
                r#"{{"v":1,"seq":0,"at_ms":0,"type":"tool/result","turn":1,"call_id":"w1","status":"completed","output":"Created /w/a (3 bytes)","facts":{{"path":"/w/a"}}{diff}}}"#
            )
        };
        let old: Record = serde_json::from_str(&line("")).expect("an older record");
        let new: Record = serde_json::from_str(&line(
            r#","diff":{"shown":"text","path":"/w/a","new_text":"hi\n"}"#,
        ))
        .expect("a record with a diff");
        let diff_of = |record: &Record| match replay_items(record).as_slice() {
            [ReplayItem::ToolResult { diff, .. }] => diff.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(diff_of(&old), None);
        assert_eq!(
            diff_of(&new),
            Some(LoggedDiff::Text {
                path: "/w/a".into(),
                old_text: None,
                new_text: "hi\n".into()
            })
        );
        // Written back as it was read; the model's history is the output alone either way.
        let json = serde_json::to_string(&old).expect("json");
        assert!(!json.contains("diff"), "{json}");
        let history_of = |record: &Record| history(std::slice::from_ref(record));
        assert_eq!(history_of(&old), history_of(&new));
    }

    #[test]
    fn history_gives_every_tool_call_a_result() {
        let mut events = sample();
        // Drop the tool result: the call must still be answered.
        events.retain(|r| !matches!(r.event, Event::ToolResult { .. }));
        let h = history(&events);
        assert_eq!(h.len(), 3, "{h:?}");
        assert!(matches!(&h[0], Message::User { content } if content.starts_with("list")));
        assert!(matches!(&h[1], Message::Assistant { tool_calls, .. } if tool_calls.len() == 1));
        assert!(matches!(&h[2], Message::Tool { tool_call_id, .. } if tool_call_id == "c1"));
        let full = history(&sample());
        assert!(matches!(&full[2], Message::Tool { content, .. } if content.contains("exit code")));
    }

    /// The sample with a knob switch and an approval pair in the middle of its turn.
    fn with_log_only_events() -> Vec<Record> {
        let mut events: Vec<Event> = sample().into_iter().map(|r| r.event).collect();
        let at = events
            .iter()
            .position(|e| matches!(e, Event::ToolCall { .. }))
            .expect("a tool call");
        events.splice(
            at + 1..at + 1,
            [
                Event::SandboxModeSet {
                    mode: confine_protocol::Mode::WorkspaceWrite,
                },
                Event::ApprovalPolicySet {
                    policy: crate::words::ApprovalPolicy::Never,
                },
                Event::ModelSelected {
                    name: "fast".into(),
                },
                Event::ApprovalAsked {
                    id: "a1".into(),
                    tool: "bash".into(),
                    call_id: Some("c1".into()),
                    reason: Some("why".into()),
                },
                Event::ApprovalRule {
                    id: "a1".into(),
                    scope: crate::session::Scope::command("bash", "make", None),
                    allow: true,
                },
                Event::ApprovalDecided {
                    id: "a1".into(),
                    outcome: crate::approval::Outcome::AllowedAlways,
                    rule: None,
                    policy: None,
                },
            ],
        );
        records(events)
    }

    #[test]
    fn knob_and_approval_events_are_neither_history_nor_replayed() {
        let plain = sample();
        let full = with_log_only_events();
        assert_eq!(full.len(), plain.len() + 6);
        assert_eq!(history(&full), history(&plain));
        assert_eq!(replay(&full), replay(&plain));
        for record in &full {
            if matches!(
                record.event,
                Event::SandboxModeSet { .. }
                    | Event::ApprovalPolicySet { .. }
                    | Event::ModelSelected { .. }
                    | Event::ApprovalAsked { .. }
                    | Event::ApprovalDecided { .. }
                    | Event::ApprovalRule { .. }
            ) {
                assert_eq!(replay_items(record), [], "{record:?}");
            }
        }
        let t = transcript(&full);
        assert!(
            t.contains(
                "  approval asked for bash: why\n  approval rule: always allow `make`\n  \
                 approval: allowed-always"
            ),
            "{t}"
        );
        assert!(t.contains("  sandbox mode: workspace-write"), "{t}");
        assert!(t.contains("  model: fast"), "{t}");
    }

    #[test]
    fn a_stopped_task_ends_its_starting_call_for_the_editor_but_is_no_history() {
        let plain = sample();
        let mut events: Vec<Event> = plain.iter().map(|r| r.event.clone()).collect();
        let text = "Background task task-1 was stopped: the session's sandbox mode was narrowed to \
                    read-only, and the task ran under workspace-write; its process tree was killed.";
        events.push(Event::TaskStopped {
            task_id: "task-1".into(),
            call_id: "c1".into(),
            ran_under: confine_protocol::Mode::WorkspaceWrite,
            narrowed_to: confine_protocol::Mode::ReadOnly,
            text: text.into(),
            facts: serde_json::json!({"task_id": "task-1", "narrowed_to": "read-only"}),
        });
        let full = records(events);
        assert_eq!(history(&full), history(&plain));
        assert_eq!(
            replay(&full).last(),
            Some(&ReplayItem::ToolResult {
                call_id: "c1".into(),
                status: ToolStatus::Failed,
                output: text.into(),
                facts: serde_json::json!({"task_id": "task-1", "narrowed_to": "read-only"}),
                diff: None,
                nested: None,
            })
        );
        assert!(transcript(&full).ends_with(&format!("  {text}\n")));
        let json = serde_json::to_value(&full[full.len() - 1].event).expect("json");
        assert_eq!(json["type"], "task/stopped");
        assert_eq!(
            (&json["ran_under"], &json["narrowed_to"]),
            (
                &serde_json::json!("workspace-write"),
                &serde_json::json!("read-only")
            )
        );
    }

    /// The sample with reasoning on its answer, then a second step that failed after showing
    /// part of an answer.
    fn with_reasoning_and_a_failure() -> Vec<Record> {
        let mut events: Vec<Event> = sample().into_iter().map(|r| r.event).collect();
        if let Some(Event::ModelOutput { reasoning, .. }) = events.get_mut(3) {
            *reasoning = Some(crate::model::Reasoning {
                text: "ls shows them.".into(),
                field: Some(crate::model::ReasoningField::ReasoningContent),
            });
        }
        let end = events.pop().expect("turn/ended");
        events.extend([
            Event::ModelOutput {
                turn: 1,
                step: 2,
                text: "There are".into(),
                reasoning: Some(crate::model::Reasoning {
                    text: "One file.".into(),
                    field: None,
                }),
                tool_calls: vec![],
                finish: String::new(),
                incomplete: true,
            },
            Event::ModelError {
                turn: 1,
                step: 2,
                message: "the connection to the model server at http://x failed: reset".into(),
                kind: Some("interrupted".into()),
                status: None,
                retries: Some(0),
            },
            end,
        ]);
        records(events)
    }

    #[test]
    fn reasoning_is_replayed_before_its_text_and_kept_in_the_history() {
        let records = with_reasoning_and_a_failure();
        let items = replay(&records);
        assert_eq!(items[1], ReplayItem::AgentThought("ls shows them.".into()));
        assert_eq!(items[2], ReplayItem::AgentText("Looking.".into()));
        let h = history(&records);
        assert!(
            matches!(&h[1], Message::Assistant { reasoning: Some(r), .. } if r.text == "ls shows them."),
            "{h:?}"
        );
    }

    #[test]
    fn a_failed_step_is_replayed_with_what_it_showed_but_is_no_history() {
        let records = with_reasoning_and_a_failure();
        let items = replay(&records);
        assert_eq!(
            items[items.len() - 3..],
            [
                ReplayItem::AgentThought("One file.".into()),
                ReplayItem::AgentText("There are".into()),
                ReplayItem::ModelError(
                    "\n\nThe model request failed: the connection to the model server at http://x \
                     failed: reset"
                        .into()
                ),
            ]
        );
        let h = history(&records);
        assert_eq!(h.len(), history(&sample()).len(), "{h:?}");
        assert!(
            !h.iter()
                .any(|m| matches!(m, Message::Assistant { text: Some(t), .. } if t == "There are")),
            "{h:?}"
        );
        let t = transcript(&records);
        assert!(
            t.contains("  thinking: One file.\n  assistant: There are\n  (the answer broke off here)\n  model error (interrupted): "),
            "{t}"
        );
    }

    #[test]
    fn the_transcript_reads_as_a_conversation() {
        let t = transcript(&sample());
        assert!(t.contains("[turn 1] user: list the files"), "{t}");
        assert!(t.contains("calls bash({\"command\":\"ls\"})"), "{t}");
        assert!(t.contains("[turn 1] ended: end_turn"), "{t}");
    }

    /// The sample with a child agent that ran one `read_file` call and answered, started by a
    /// `task` call of the top level.
    fn with_a_child() -> Vec<Record> {
        let mut all = sample();
        let end = all.pop().expect("turn/ended");
        let tagged = |event: Event| (Some("agent-1".to_owned()), event);
        let events = vec![
            (
                None,
                Event::AgentStarted {
                    agent: "agent-1".into(),
                    parent: "agent-0".into(),
                    depth: 1,
                    persona: "general".into(),
                    call_id: "t1".into(),
                },
            ),
            tagged(Event::PromptSubmitted {
                turn: 1,
                text: "read a.txt".into(),
            }),
            tagged(Event::ModelOutput {
                turn: 1,
                step: 1,
                text: String::new(),
                reasoning: None,
                tool_calls: vec![LoggedToolCall {
                    id: "k1".into(),
                    name: "read_file".into(),
                    arguments: r#"{"path":"a.txt"}"#.into(),
                }],
                finish: "tool_calls".into(),
                incomplete: false,
            }),
            tagged(Event::ToolCall {
                turn: 1,
                call_id: "k1".into(),
                tool: "read_file".into(),
                title: "Read a.txt".into(),
                kind: "read".into(),
                input: serde_json::json!({"path": "a.txt"}),
                pending: false,
            }),
            tagged(Event::ToolResult {
                turn: 1,
                call_id: "k1".into(),
                status: ToolStatus::Completed,
                output: "hello".into(),
                facts: serde_json::json!({}),
                diff: None,
            }),
            (
                None,
                Event::AgentEnded {
                    agent: "agent-1".into(),
                    outcome: AgentOutcome::Completed,
                    answer: Some("it says hello".into()),
                    reason: None,
                },
            ),
        ];
        for (agent, event) in events {
            let seq = all.len() as u64;
            all.push(Record {
                v: EVENT_VERSION,
                seq,
                at_ms: 1000 + seq,
                agent,
                event,
            });
        }
        let seq = all.len() as u64;
        all.push(Record { seq, ..end });
        all
    }

    #[test]
    fn a_childs_records_are_its_own_history_and_not_its_parents() {
        let records = with_a_child();
        assert_eq!(history(&records), history(&sample()));
        let child = history_of(&records, "agent-1");
        assert_eq!(child.len(), 3, "{child:?}");
        assert!(matches!(&child[0], Message::User { content } if content == "read a.txt"));
        assert!(matches!(&child[2], Message::Tool { content, .. } if content == "hello"));
        assert_eq!(history_of(&records, "agent-2"), []);
    }

    #[test]
    fn a_childs_tool_calls_replay_as_calls_nested_under_the_task_call() {
        let records = with_a_child();
        let items = replay(&records);
        let plain = replay(&sample());
        assert_eq!(items[..plain.len()], plain[..]);
        let nested = Some(Nested {
            parent_call_id: "t1".into(),
            agent: "agent-1".into(),
            persona: "general".into(),
        });
        assert_eq!(
            items[plain.len()..],
            [
                ReplayItem::ToolCall {
                    call_id: "t1/agent-1/1".into(),
                    title: "Read a.txt".into(),
                    kind: "read".into(),
                    input: serde_json::json!({"path": "a.txt"}),
                    pending: false,
                    nested: nested.clone(),
                },
                ReplayItem::ToolResult {
                    call_id: "t1/agent-1/1".into(),
                    status: ToolStatus::Completed,
                    output: "hello".into(),
                    facts: serde_json::json!({}),
                    diff: None,
                    nested,
                }
            ]
        );
        let t = transcript(&records);
        assert!(
            t.contains("  agent-1 started by agent-0 (persona general, depth 1)\n"),
            "{t}"
        );
        assert!(t.contains("  [agent-1]  tool: Read a.txt\n"), "{t}");
        assert!(t.contains("  agent-1 ended: completed\n"), "{t}");
    }

    #[test]
    fn a_top_level_record_is_written_without_an_agent_tag_and_a_childs_with_one() {
        let records = with_a_child();
        let top = serde_json::to_value(&records[0]).expect("json");
        assert_eq!(top["agent"], "agentd test");
        assert!(top.get("agent_id").is_none(), "{top}");
        let child = &records[sample().len()];
        let json = serde_json::to_string(child).expect("json");
        assert!(json.contains(r#""agent_id":"agent-1""#), "{json}");
        let back: Record = serde_json::from_str(&json).expect("reads back");
        assert_eq!(&back, child);
        let old = r#"{"v":1,"seq":0,"at_ms":5,"type":"session/created","id":"a","cwd":"/w","agent":"agentd 0.1"}"#;
        let old: Record = serde_json::from_str(old).expect("an old record reads");
        assert_eq!(old.agent, None);
        let started = serde_json::to_value(&records[sample().len() - 1]).expect("json");
        assert_eq!(started["type"], "agent/started");
        assert_eq!(started["call_id"], "t1");
        let ended = serde_json::to_value(&records[records.len() - 2]).expect("json");
        assert_eq!(
            (&ended["type"], &ended["outcome"], &ended["answer"]),
            (
                &serde_json::json!("agent/ended"),
                &serde_json::json!("completed"),
                &serde_json::json!("it says hello")
            )
        );
    }
}
