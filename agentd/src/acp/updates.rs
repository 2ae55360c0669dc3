//! From what the session recorded to what the editor is shown: one conversion, used by the live
//! stream and by `session/load`, so a replay shows what was shown. Every update goes to the
//! editor through its session ([`super::Session::show`]), and so through the connection's one
//! gate (`outgoing`).

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, SessionUpdate, ToolCall, ToolCallContent, ToolCallStatus,
    ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};

use super::shown;
pub use crate::clock::rfc3339;
use crate::session::ToolStatus;
use crate::session::fold::ReplayItem;
use crate::session::nested::{self, Nested};

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
                    .raw_output(facts.clone()),
            )
            .meta(nested.as_ref().map(nesting_meta)),
        ),
    }
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

/// Whether `chunk` is [`model_error`]'s.
pub fn is_model_error(chunk: &ContentChunk) -> bool {
    chunk
        .meta
        .as_ref()
        .and_then(|meta| meta.get("agentd"))
        .and_then(|agentd| agentd.get(MODEL_ERROR_MARK))
        .and_then(serde_json::Value::as_bool)
        == Some(true)
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
}
