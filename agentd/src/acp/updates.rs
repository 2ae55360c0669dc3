//! From what the session recorded to what the editor is shown: one conversion, used by the live
//! stream and by `session/load`, so a replay shows what was shown. Every update goes to the
//! editor through its session ([`super::Session::show`]), and so through the connection's one
//! gate (`outgoing`).

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, MessageId, Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus,
    SessionUpdate, ToolCall, ToolCallContent, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
    ToolKind,
};

use super::shown;
pub use crate::clock::rfc3339;
use crate::session::fold::ReplayItem;
use crate::session::nested::{self, Nested};
use crate::session::{PlanItem, PlanPriority, PlanStatus, ToolStatus};

/// The ACP update for one recorded item.
pub fn update_for(item: &ReplayItem) -> SessionUpdate {
    match item {
        ReplayItem::UserText(text) => {
            SessionUpdate::UserMessageChunk(ContentChunk::new(ContentBlock::from(text.clone())))
        }
        ReplayItem::AgentThought(text) => agent_thought(text),
        ReplayItem::AgentText(text) => agent_text(text),
        ReplayItem::ModelError(text) => model_error(text),
        // A child agent's call is titled with its persona and names its parent call in
        // `_meta`, so an editor can show it under the `task` call.
        ReplayItem::ToolCall {
            call_id,
            title,
            kind,
            input,
            pending,
            nested,
        } => SessionUpdate::ToolCall(
            ToolCall::new(
                call_id.clone(),
                match nested {
                    Some(nested) => nested::title(&nested.persona, title),
                    None => title.clone(),
                },
            )
            .kind(tool_kind(kind))
            .status(if *pending {
                ToolCallStatus::Pending
            } else {
                ToolCallStatus::InProgress
            })
            .raw_input(input.clone())
            .meta(nested.as_ref().map(nesting_meta)),
        ),
        // What a person reads first, the diff of a write, then the model's text (see
        // `shown`): all of it from the record, so `session/load` shows the same.
        ReplayItem::ToolResult {
            call_id,
            status,
            output,
            facts,
            diff,
            nested,
        } => SessionUpdate::ToolCallUpdate(
            ToolCallUpdate::new(
                call_id.clone(),
                ToolCallUpdateFields::new()
                    .status(match status {
                        ToolStatus::Completed => ToolCallStatus::Completed,
                        ToolStatus::Failed => ToolCallStatus::Failed,
                    })
                    .content(shown::content(*status, facts, output, diff.as_ref()))
                    .locations(shown::locations(facts, diff.as_ref()))
                    .raw_output(shown::compact_facts(facts)),
            )
            .meta(result_meta(facts, nested.as_ref())),
        ),
        ReplayItem::Plan(entries) => plan(entries),
    }
}

/// A result's `_meta.agentd`: its full facts and, for a child's call, where it is nested.
fn result_meta(
    facts: &serde_json::Value,
    nested: Option<&Nested>,
) -> serde_json::Map<String, serde_json::Value> {
    let mut meta = nested.map(nesting_meta).unwrap_or_default();
    let agentd = meta
        .entry("agentd")
        .or_insert_with(|| serde_json::json!({}));
    if let Some(agentd) = agentd.as_object_mut() {
        agentd.insert(FACTS_KEY.to_owned(), facts.clone());
    }
    meta
}

/// The key of a result's full facts under its update's `_meta.agentd`.
const FACTS_KEY: &str = "facts";

/// The agent's whole plan, as ACP's `plan` update (the editor replaces the plan it showed).
pub fn plan(entries: &[PlanItem]) -> SessionUpdate {
    SessionUpdate::Plan(Plan::new(
        entries
            .iter()
            .map(|entry| {
                PlanEntry::new(
                    entry.content.clone(),
                    match entry.priority {
                        PlanPriority::High => PlanEntryPriority::High,
                        PlanPriority::Medium => PlanEntryPriority::Medium,
                        PlanPriority::Low => PlanEntryPriority::Low,
                    },
                    match entry.status {
                        PlanStatus::Pending => PlanEntryStatus::Pending,
                        PlanStatus::InProgress => PlanEntryStatus::InProgress,
                        PlanStatus::Completed => PlanEntryStatus::Completed,
                    },
                )
            })
            .collect(),
    ))
}

/// The `_meta` of a child agent's call: `{"agentd": {"parentToolCallId", "agent", "persona"}}`,
/// every value agentd's own (the parent call's id as the editor was shown it, the child's tag,
/// the persona's name), none taken from a model's text.
fn nesting_meta(nested: &Nested) -> serde_json::Map<String, serde_json::Value> {
    let mut meta = serde_json::Map::new();
    meta.insert(
        "agentd".to_owned(),
        serde_json::json!({
            PARENT_TOOL_CALL_ID: nested.parent_call_id,
            "agent": nested.agent,
            "persona": nested.persona,
        }),
    );
    meta
}

/// The key under `_meta.agentd` of a child's call that names the call it is nested under.
pub const PARENT_TOOL_CALL_ID: &str = "parentToolCallId";

/// What a running command of call `call_id` printed so far, as its live copy shows it (see
/// `acp::live`): the call's content, replaced by the next update of the call. Never recorded.
pub fn live_output(call_id: &str, text: String) -> SessionUpdate {
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        call_id.to_owned(),
        ToolCallUpdateFields::new().content(vec![ToolCallContent::from(ContentBlock::from(text))]),
    ))
}

/// The call `call_id` now has `status`: running once a person allowed it. Never recorded: the
/// call's result is what a replay shows.
pub fn status(call_id: &str, status: ToolCallStatus) -> SessionUpdate {
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        call_id.to_owned(),
        ToolCallUpdateFields::new().status(status),
    ))
}

/// A piece of the agent's answer text.
pub fn agent_text(text: &str) -> SessionUpdate {
    SessionUpdate::AgentMessageChunk(ContentChunk::new(ContentBlock::from(text.to_owned())))
}

/// The agent's text of a failed model call, marked in `_meta` (`agentd.modelError`) as agentd's
/// own: `agentd exec` leaves it out of stdout by that mark, which the model's text cannot carry.
pub fn model_error(text: &str) -> SessionUpdate {
    let mut meta = serde_json::Map::new();
    meta.insert(
        "agentd".to_owned(),
        serde_json::json!({ MODEL_ERROR_MARK: true }),
    );
    SessionUpdate::AgentMessageChunk(
        ContentChunk::new(ContentBlock::from(text.to_owned())).meta(meta),
    )
}

/// The key of [`model_error`]'s mark under `_meta.agentd`.
const MODEL_ERROR_MARK: &str = "modelError";

/// The key of [`notice`]'s mark under `_meta.agentd`: what the notice is about.
const NOTICE_MARK: &str = "notice";

/// What agentd itself tells the person, apart from the agent's answer: a message of its own
/// (`messageId` `agentd-notice-<id>`), marked in `_meta` (`agentd.notice`: `kind`), so an editor
/// that tells messages apart shows it by itself and `agentd exec` prints it on stderr, not as
/// part of the answer. `id` names it uniquely in the session.
pub fn notice(kind: &str, id: &str, text: &str) -> SessionUpdate {
    let mut meta = serde_json::Map::new();
    meta.insert(
        "agentd".to_owned(),
        serde_json::json!({ NOTICE_MARK: kind }),
    );
    SessionUpdate::AgentMessageChunk(
        ContentChunk::new(ContentBlock::from(text.to_owned()))
            .message_id(MessageId::new(format!("agentd-notice-{id}")))
            .meta(meta),
    )
}

/// Whether `chunk` is a [`notice`]'s.
pub fn is_notice(chunk: &ContentChunk) -> bool {
    notice_kind(chunk).is_some()
}

/// The kind of [`notice`] `chunk` is, if it is one.
pub fn notice_kind(chunk: &ContentChunk) -> Option<&str> {
    agentd_mark(chunk, NOTICE_MARK).and_then(serde_json::Value::as_str)
}

/// Whether `chunk` is [`model_error`]'s.
pub fn is_model_error(chunk: &ContentChunk) -> bool {
    agentd_mark(chunk, MODEL_ERROR_MARK).and_then(serde_json::Value::as_bool) == Some(true)
}

/// The value of agentd's mark `key` (`_meta.agentd.<key>`) on `chunk`, if it has one.
fn agentd_mark<'a>(chunk: &'a ContentChunk, key: &str) -> Option<&'a serde_json::Value> {
    chunk.meta.as_ref()?.get("agentd")?.get(key)
}

/// A piece of the reasoning the model showed.
pub fn agent_thought(text: &str) -> SessionUpdate {
    SessionUpdate::AgentThoughtChunk(ContentChunk::new(ContentBlock::from(text.to_owned())))
}

/// ACP's `ToolKind` for its name.
pub fn tool_kind(kind: &str) -> ToolKind {
    match kind {
        "execute" => ToolKind::Execute,
        "read" => ToolKind::Read,
        "edit" => ToolKind::Edit,
        "delete" => ToolKind::Delete,
        "search" => ToolKind::Search,
        "think" => ToolKind::Think,
        _ => ToolKind::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(nested: Option<Nested>) -> serde_json::Value {
        let item = ReplayItem::ToolCall {
            call_id: "t1/agent-1/1".into(),
            title: "Read a.txt".into(),
            kind: "read".into(),
            input: serde_json::json!({"path": "a.txt"}),
            pending: true,
            nested,
        };
        serde_json::to_value(update_for(&item)).unwrap_or_default()
    }

    #[test]
    fn a_childs_call_is_titled_with_its_persona_and_names_its_parent_in_meta() {
        let nested = call(Some(Nested {
            parent_call_id: "t1".into(),
            agent: "agent-1".into(),
            persona: "reader".into(),
        }));
        assert_eq!(nested["title"], "reader: Read a.txt", "{nested}");
        assert_eq!(
            nested["_meta"],
            serde_json::json!({"agentd": {"parentToolCallId": "t1", "agent": "agent-1", "persona": "reader"}})
        );
        // The control: a top-level call has its own title and no `_meta`.
        let top = call(None);
        assert_eq!(top["title"], "Read a.txt", "{top}");
        assert!(top.get("_meta").is_none(), "{top}");
    }

    #[test]
    fn a_childs_result_carries_its_nesting_and_its_full_facts_in_meta() {
        let facts = serde_json::json!({"exit": {"code": 0}, "denied": false, "mode": "read-only"});
        let item = |nested| ReplayItem::ToolResult {
            call_id: "t1/agent-1/1".into(),
            status: ToolStatus::Completed,
            output: "[exit code: 0]".into(),
            facts: facts.clone(),
            diff: None,
            nested,
        };
        let nested = Nested {
            parent_call_id: "t1".into(),
            agent: "agent-1".into(),
            persona: "reader".into(),
        };
        let shown = serde_json::to_value(update_for(&item(Some(nested)))).unwrap_or_default();
        assert_eq!(
            shown["_meta"]["agentd"]["parentToolCallId"], "t1",
            "{shown}"
        );
        assert_eq!(shown["_meta"]["agentd"]["facts"], facts, "{shown}");
        assert!(
            shown["rawOutput"].get("denied").is_none(),
            "compact: {shown}"
        );
        let top = serde_json::to_value(update_for(&item(None))).unwrap_or_default();
        assert!(
            top["_meta"]["agentd"].get("parentToolCallId").is_none(),
            "{top}"
        );
        assert_eq!(top["_meta"]["agentd"]["facts"], facts, "{top}");
    }
}
