//! How a child agent's tool calls are shown to the editor: each as a tool call of its own,
//! nested under the `task` call that started the child (RFC 0007, "A child's calls in the
//! editor"). [`Children`] places each of a child's records; `fold::replay` and `fold::items_of`
//! turn them into what is shown, so that the live stream and `session/load` show the same calls
//! under the same ids.
//!
//! The id of a nested call is made by agentd, never taken from a model:
//! `<parent call id>/<agent tag>/<n>`, where the parent call id is the id the editor was shown
//! for the `task` call (a top-level call's, or for a grandchild its parent's nested id), the tag
//! is the child's (unique in the session's log) and `n` counts the child's tool calls from 1.
//! The last two parts name one call of one child, so two nested calls never share an id, however
//! the child's model numbers its calls. A top-level call's id is the model's, with every `/`
//! replaced ([`own_top_level_ids`]): it never contains the separator every nested id has, so a
//! model cannot name a top-level call so that it collides with a nested one.

use std::collections::HashMap;

use super::event::{Event, Record};
use crate::model::AssistantTurn;

/// What separates the parts of a nested call's id; never in a top-level call's id.
pub const SEPARATOR: char = '/';

/// What stands for [`SEPARATOR`] in a model's id of a top-level call.
const SEPARATOR_STAND_IN: &str = "_";

/// Where a child agent's tool call sits for the editor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nested {
    /// The id the editor was shown for the `task` call that started the child.
    pub parent_call_id: String,
    /// The child's tag (`agent-1`).
    pub agent: String,
    pub persona: String,
}

/// The id of the `n`th tool call (from 1) of the child `agent`, started by the call the editor
/// knows as `parent_call_id`.
pub fn call_id(parent_call_id: &str, agent: &str, n: u64) -> String {
    format!("{parent_call_id}{SEPARATOR}{agent}{SEPARATOR}{n}")
}

/// A child's call as titled for the editor: its persona, then the call's own title.
pub fn title(persona: &str, title: &str) -> String {
    format!("{persona}: {title}")
}

/// Makes the ids of a top-level answer's tool calls agentd's to show: a model's id with every
/// [`SEPARATOR`] replaced, so it cannot be a nested call's. Applied before the answer is
/// recorded, so the model's history, the log and the editor all carry the same id.
pub fn own_top_level_ids(answer: &mut AssistantTurn) {
    for call in &mut answer.tool_calls {
        if call.id.contains(SEPARATOR) {
            call.id = call.id.replace(SEPARATOR, SEPARATOR_STAND_IN);
        }
    }
}

/// The session's child agents as far as the records read so far tell.
#[derive(Debug, Default)]
pub struct Children {
    /// Each child's place: the call it was started by, and its persona.
    started: HashMap<String, Nested>,
    /// Each child's latest tool call: how many it made, and the id of the latest.
    calls: HashMap<String, (u64, String)>,
}

impl Children {
    /// Takes in `record`, the next record of the session; for a child's tool call or result,
    /// where it sits and the id it is shown under (`None` for any other record, and for a
    /// child whose `agent/started` is not in the log, a damaged or cut one: it has no place).
    pub fn place(&mut self, record: &Record) -> Option<(Nested, String)> {
        if let Event::AgentStarted {
            agent,
            persona,
            call_id,
            ..
        } = &record.event
        {
            self.started.insert(
                agent.clone(),
                Nested {
                    parent_call_id: call_id.clone(),
                    agent: agent.clone(),
                    persona: persona.clone(),
                },
            );
        }
        let agent = record.agent.as_ref()?;
        let nested = self.started.get(agent)?;
        match &record.event {
            Event::ToolCall { .. } => {
                let entry = self.calls.entry(agent.clone()).or_default();
                entry.0 += 1;
                entry.1 = call_id(&nested.parent_call_id, agent, entry.0);
                Some((nested.clone(), entry.1.clone()))
            }
            // An agent runs its calls one at a time: a result is its latest call's.
            Event::ToolResult { .. } => {
                let (_, id) = self.calls.get(agent)?;
                Some((nested.clone(), id.clone()))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
#[path = "nested_tests.rs"]
mod tests;
