//! Pure folds over a session's records: its summary, what an editor is shown on
//! `session/load`, and the transcript `agentd sessions show` prints.

use std::path::PathBuf;

use super::event::{Event, Record, ToolStatus};
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
            Event::TurnStarted { turn } | Event::PromptSubmitted { turn, .. } => Some(turn),
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
    ToolCall {
        call_id: String,
        title: String,
        kind: String,
        input: serde_json::Value,
    },
    ToolResult {
        call_id: String,
        status: ToolStatus,
        output: String,
        facts: serde_json::Value,
    },
}

/// Every record that an editor showed live, in the same order.
pub fn replay(records: &[Record]) -> Vec<ReplayItem> {
    records.iter().flat_map(replay_items).collect()
}

/// What the editor is shown for one record, in order: the live stream and `session/load` both
/// go through this, so a replay shows what was shown.
pub fn replay_items(record: &Record) -> Vec<ReplayItem> {
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
        Event::ModelError { message, .. } => Some(ReplayItem::AgentText(model_error_text(message))),
        Event::ToolCall {
            call_id,
            title,
            kind,
            input,
            ..
        } => Some(ReplayItem::ToolCall {
            call_id: call_id.clone(),
            title: title.clone(),
            kind: kind.clone(),
            input: input.clone(),
        }),
        Event::ToolResult {
            call_id,
            status,
            output,
            facts,
            ..
        } => Some(ReplayItem::ToolResult {
            call_id: call_id.clone(),
            status: *status,
            output: output.clone(),
            facts: facts.clone(),
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
        }),
        _ => None,
    }
}

/// How a failed model call is shown to the user: what happened, in the words of the error.
pub fn model_error_text(message: &str) -> String {
    format!("The model request failed: {message}")
}

/// The chat history a model is given for the next step: every prompt, every model answer (with
/// the reasoning it showed; the provider decides what of it goes back) and every tool result,
/// in order. What was shown of an answer that then failed is not history: the step gave no
/// answer. A tool call that has no result (the turn was cancelled or cut off, or agentd stopped
/// before it ran) is answered with a note, because a model API requires every tool call to be
/// followed by its result.
pub fn history(records: &[Record]) -> Vec<Message> {
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
            Event::PromptSubmitted { text, .. } => {
                close_pending(&mut out, &mut pending);
                out.push(Message::user(text.clone()));
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
            _ => {}
        }
    }
    close_pending(&mut out, &mut pending);
    out
}

/// A readable transcript of the whole session.
pub fn transcript(records: &[Record]) -> String {
    let mut out = String::new();
    for r in records {
        let line = match &r.event {
            Event::SessionCreated { id, cwd, agent } => {
                format!("session {id} in {} ({agent})", cwd.display())
            }
            Event::PromptSubmitted { turn, text } => format!("[turn {turn}] user: {text}"),
            Event::TurnStarted { .. } => continue,
            Event::ModelRequest {
                step, model, tools, ..
            } => format!(
                "  model request {step} to {model} (tools: {})",
                tools.join(", ")
            ),
            Event::ModelOutput {
                text,
                reasoning,
                tool_calls,
                finish,
                incomplete,
                ..
            } => {
                let mut s = String::new();
                if let Some(reasoning) = reasoning.as_ref().filter(|r| !r.text.is_empty()) {
                    s.push_str(&format!("  thinking: {}", reasoning.text));
                }
                if !text.is_empty() {
                    if !s.is_empty() {
                        s.push('\n');
                    }
                    s.push_str(&format!("  assistant: {text}"));
                }
                for call in tool_calls {
                    if !s.is_empty() {
                        s.push('\n');
                    }
                    s.push_str(&format!("  calls {}({})", call.name, call.arguments));
                }
                if s.is_empty() {
                    s = format!("  assistant: (nothing; finish {finish})");
                }
                if *incomplete {
                    s.push_str("\n  (the answer broke off here)");
                }
                s
            }
            Event::ModelError { message, kind, .. } => match kind {
                Some(kind) => format!("  model error ({kind}): {message}"),
                None => format!("  model error: {message}"),
            },
            Event::ToolCall { title, .. } => format!("  tool: {title}"),
            Event::ToolResult { status, output, .. } => {
                let status = match status {
                    ToolStatus::Completed => "completed",
                    ToolStatus::Failed => "failed",
                };
                format!("  result ({status}):\n{}", indent(output, "    "))
            }
            Event::TurnEnded { turn, stop_reason } => {
                format!("[turn {turn}] ended: {stop_reason}")
            }
            Event::SandboxModeSet { mode } => format!("  sandbox mode: {}", mode.as_str()),
            Event::ApprovalPolicySet { policy } => {
                format!("  approval policy: {}", policy.as_str())
            }
            Event::ApprovalAsked { tool, reason, .. } => match reason {
                Some(reason) => format!("  approval asked for {tool}: {reason}"),
                None => format!("  approval asked for {tool}"),
            },
            Event::ApprovalDecided { outcome, .. } => {
                format!("  approval: {}", outcome.as_str())
            }
            Event::TaskStopped { text, .. } => format!("  {text}"),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

fn indent(text: &str, prefix: &str) -> String {
    text.lines()
        .map(|l| format!("{prefix}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::event::{EVENT_VERSION, LoggedToolCall};

    fn records(events: Vec<Event>) -> Vec<Record> {
        events
            .into_iter()
            .enumerate()
            .map(|(i, event)| Record {
                v: EVENT_VERSION,
                seq: i as u64,
                at_ms: 1000 + i as u64,
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
            },
            Event::ToolResult {
                turn: 1,
                call_id: "c1".into(),
                status: ToolStatus::Completed,
                output: "a\n[exit code: 0]".into(),
                facts: serde_json::json!({"exit": {"code": 0}}),
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
                Event::ApprovalAsked {
                    id: "a1".into(),
                    tool: "bash".into(),
                    call_id: Some("c1".into()),
                    reason: Some("why".into()),
                },
                Event::ApprovalDecided {
                    id: "a1".into(),
                    outcome: crate::approval::Outcome::AllowedOnce,
                },
            ],
        );
        records(events)
    }

    #[test]
    fn knob_and_approval_events_are_neither_history_nor_replayed() {
        let plain = sample();
        let full = with_log_only_events();
        assert_eq!(full.len(), plain.len() + 4);
        assert_eq!(history(&full), history(&plain));
        assert_eq!(replay(&full), replay(&plain));
        for record in &full {
            if matches!(
                record.event,
                Event::SandboxModeSet { .. }
                    | Event::ApprovalPolicySet { .. }
                    | Event::ApprovalAsked { .. }
                    | Event::ApprovalDecided { .. }
            ) {
                assert_eq!(replay_items(record), [], "{record:?}");
            }
        }
        let t = transcript(&full);
        assert!(
            t.contains("  approval asked for bash: why\n  approval: allowed-once"),
            "{t}"
        );
        assert!(t.contains("  sandbox mode: workspace-write"), "{t}");
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
                ReplayItem::AgentText(
                    "The model request failed: the connection to the model server at http://x \
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
}
