//! A chat-completions answer assembled from its events: text, reasoning, tool calls, why the
//! model stopped and the usage, reported as [`Delta`]s while they arrive.
//!
//! What a server sends is hostile input, and servers differ: every chunk is read as JSON and
//! then taken apart field by field, so that a field of an unexpected type is ignored rather than
//! failing the answer. The variants understood, and who sends them:
//!
//! * reasoning in `reasoning_content` (DeepSeek, llama.cpp, vLLM, DashScope, Z.ai, Moonshot) or
//!   in `reasoning` (OpenRouter, Groq, Ollama); when a delta has both with the same text (a
//!   server keeping the older name beside the newer one), it counts once;
//! * `content` as a string, or as an array of parts, where `{"type":"text"}` parts are text and
//!   `{"type":"thinking"}` parts reasoning (Mistral's Magistral), and other parts are ignored;
//! * any choice `index`: agentd asks for one choice (it never sends `n`), so every choice is that
//!   one (old TGI numbers them per token);
//! * tool calls keyed by `index`, whole calls in one delta, calls without `index` or `id`, and
//!   arguments as an object instead of JSON text (Ollama);
//! * usage at the top level or in Groq's `x_groq`;
//! * `{"error": ...}` chunks and `event: error` events, reported as the server's error;
//! * a whole JSON completion (`message` instead of `delta`) from a server that ignores
//!   `stream: true`.

use serde_json::Value;

use super::{
    AssistantTurn, Delta, FinishReason, ModelError, Reasoning, ReasoningField, ToolCall, Usage,
    excerpt,
};
use crate::http_client::sse::SseEvent;

/// Whether the stream goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    More,
    Done,
}

/// A tool call being assembled.
#[derive(Debug, Default)]
struct PartialCall {
    /// The `index` the server keys it by, if it sends one.
    server_index: Option<u64>,
    id: Option<String>,
    name: String,
    arguments: String,
    /// `ToolCallStarted` was delivered.
    started: bool,
}

/// The turn assembled from the stream so far.
#[derive(Debug, Default)]
pub(crate) struct StreamState {
    text: String,
    reasoning: String,
    /// Where the first reasoning came from.
    reasoning_field: Option<ReasoningField>,
    calls: Vec<PartialCall>,
    /// The last `finish_reason` a choice carried.
    finish_reason: Option<String>,
    usage: Option<Usage>,
}

impl StreamState {
    /// Whether a choice said why the model stopped.
    pub(crate) fn finished(&self) -> bool {
        self.finish_reason.is_some()
    }

    /// Takes in one server-sent event.
    pub(crate) fn on_event(
        &mut self,
        event: &SseEvent,
        on_delta: &mut (dyn FnMut(Delta) + Send),
    ) -> Result<Flow, ModelError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            return Ok(Flow::Done);
        }
        if event.event == "error" {
            let message = server_message(data).unwrap_or_else(|| excerpt(data, 500));
            return Err(ModelError::Server { message });
        }
        if data.is_empty() {
            return Ok(Flow::More);
        }
        self.on_chunk(data, on_delta)?;
        Ok(Flow::More)
    }

    /// Takes in one chunk (or a whole completion), the JSON text of an event's data.
    pub(crate) fn on_chunk(
        &mut self,
        data: &str,
        on_delta: &mut (dyn FnMut(Delta) + Send),
    ) -> Result<(), ModelError> {
        let malformed = |detail: String| ModelError::MalformedStream {
            detail,
            line: excerpt(data, 300),
        };
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| malformed(format!("an event is not a chat-completion chunk: {e}")))?;
        let Value::Object(chunk) = chunk else {
            return Err(malformed(
                "an event is not a chat-completion chunk: not a JSON object".to_owned(),
            ));
        };
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            let message = value_message(error).unwrap_or_else(|| error.to_string());
            return Err(ModelError::Server {
                message: excerpt(&message, 500),
            });
        }
        let usage = chunk
            .get("usage")
            .and_then(usage_of)
            .or_else(|| chunk.get("x_groq")?.get("usage").and_then(usage_of));
        if usage.is_some() {
            self.usage = usage;
        }
        let Some(Value::Array(choices)) = chunk.get("choices") else {
            return Ok(());
        };
        for choice in choices {
            let delta = choice
                .get("delta")
                .filter(|d| d.is_object())
                .or_else(|| choice.get("message").filter(|m| m.is_object()));
            if let Some(delta) = delta {
                self.on_choice_delta(delta, on_delta);
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish_reason = Some(reason.to_owned());
            }
        }
        Ok(())
    }

    fn on_choice_delta(&mut self, delta: &Value, on_delta: &mut (dyn FnMut(Delta) + Send)) {
        let reasoning_content = text_field(delta, "reasoning_content");
        let reasoning = text_field(delta, "reasoning");
        match (reasoning_content, reasoning) {
            (Some(first), Some(second)) if first == second => {
                self.push_reasoning(first, ReasoningField::ReasoningContent, on_delta);
            }
            (first, second) => {
                if let Some(text) = first {
                    self.push_reasoning(text, ReasoningField::ReasoningContent, on_delta);
                }
                if let Some(text) = second {
                    self.push_reasoning(text, ReasoningField::Reasoning, on_delta);
                }
            }
        }
        match delta.get("content") {
            Some(Value::String(text)) => self.push_text(text, on_delta),
            Some(Value::Array(parts)) => {
                for part in parts {
                    self.on_content_part(part, on_delta);
                }
            }
            _ => {}
        }
        if let Some(Value::Array(calls)) = delta.get("tool_calls") {
            for call in calls {
                self.on_tool_call(call, on_delta);
            }
        }
    }

    fn on_content_part(&mut self, part: &Value, on_delta: &mut (dyn FnMut(Delta) + Send)) {
        match part.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(text) = part.get("text").and_then(Value::as_str) {
                    self.push_text(text, on_delta);
                }
            }
            Some("thinking") => {
                let thinking = match part.get("thinking") {
                    Some(Value::String(text)) => text.clone(),
                    Some(Value::Array(inner)) => inner
                        .iter()
                        .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
                        .filter_map(|p| p.get("text").and_then(Value::as_str))
                        .collect(),
                    _ => String::new(),
                };
                self.push_reasoning(&thinking, ReasoningField::ThinkingPart, on_delta);
            }
            _ => {}
        }
    }

    fn push_text(&mut self, text: &str, on_delta: &mut (dyn FnMut(Delta) + Send)) {
        if text.is_empty() {
            return;
        }
        self.text.push_str(text);
        on_delta(Delta::Text(text.to_owned()));
    }

    fn push_reasoning(
        &mut self,
        text: &str,
        field: ReasoningField,
        on_delta: &mut (dyn FnMut(Delta) + Send),
    ) {
        if text.is_empty() {
            return;
        }
        self.reasoning_field.get_or_insert(field);
        self.reasoning.push_str(text);
        on_delta(Delta::Reasoning(text.to_owned()));
    }

    fn on_tool_call(&mut self, call: &Value, on_delta: &mut (dyn FnMut(Delta) + Send)) {
        if !call.is_object() {
            return;
        }
        let index = call.get("index").and_then(Value::as_u64);
        let id = text_field(call, "id").map(str::to_owned);
        let function = call.get("function");
        let name = function
            .and_then(|f| text_field(f, "name"))
            .map(str::to_owned);
        let fragment = match function.and_then(|f| f.get("arguments")) {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(text)) => text.clone(),
            Some(other) => other.to_string(),
        };
        if id.is_none() && name.is_none() && fragment.is_empty() {
            return;
        }
        let slot = self.slot_for(index, id.as_deref(), name.is_some());
        let Some(entry) = self.calls.get_mut(slot) else {
            return;
        };
        if entry.id.is_none() {
            entry.id = id;
        }
        if let Some(name) = name
            && entry.name.is_empty()
        {
            entry.name = name;
        }
        entry.arguments.push_str(&fragment);
        if entry.started {
            if !fragment.is_empty() {
                on_delta(Delta::ToolCallArguments {
                    index: slot,
                    fragment,
                });
            }
        } else if !entry.name.is_empty() {
            entry.started = true;
            let id = entry
                .id
                .get_or_insert_with(|| format!("call_{slot}"))
                .clone();
            on_delta(Delta::ToolCallStarted {
                index: slot,
                id,
                name: entry.name.clone(),
            });
            if !entry.arguments.is_empty() {
                on_delta(Delta::ToolCallArguments {
                    index: slot,
                    fragment: entry.arguments.clone(),
                });
            }
        }
    }

    /// Which call a tool-call delta continues, or a new one.
    fn slot_for(&mut self, index: Option<u64>, id: Option<&str>, has_name: bool) -> usize {
        let existing = match index {
            Some(index) => self
                .calls
                .iter()
                .enumerate()
                .rev()
                .find(|(_, c)| c.server_index == Some(index))
                // A different id under the same index is another call (some servers number
                // every call 0).
                .filter(|(_, c)| match (&c.id, id) {
                    (Some(known), Some(id)) => known == id,
                    _ => true,
                })
                .map(|(slot, _)| slot),
            // Without an index: the call with this id, else a named delta begins a call, else
            // it continues the latest one.
            None => match id {
                Some(id) => self.calls.iter().position(|c| c.id.as_deref() == Some(id)),
                None if has_name => None,
                None => self.calls.len().checked_sub(1),
            },
        };
        existing.unwrap_or_else(|| {
            self.calls.push(PartialCall {
                server_index: index,
                ..PartialCall::default()
            });
            self.calls.len() - 1
        })
    }

    /// The turn the stream made.
    pub(crate) fn finish(self) -> Result<AssistantTurn, ModelError> {
        let mut tool_calls = Vec::with_capacity(self.calls.len());
        for call in self.calls {
            if call.name.is_empty() {
                return Err(ModelError::MalformedStream {
                    detail: "a tool call never got a name".to_owned(),
                    line: excerpt(&call.arguments, 300),
                });
            }
            let arguments = if call.arguments.trim().is_empty() {
                "{}".to_owned()
            } else {
                call.arguments
            };
            tool_calls.push(ToolCall {
                id: call.id.unwrap_or_default(),
                name: call.name,
                arguments,
            });
        }
        let finish = match self.finish_reason {
            Some(reason) => FinishReason::from(reason),
            None if tool_calls.is_empty() => FinishReason::Stop,
            None => FinishReason::ToolCalls,
        };
        let reasoning = (!self.reasoning.is_empty()).then_some(Reasoning {
            text: self.reasoning,
            field: self.reasoning_field,
        });
        Ok(AssistantTurn {
            text: self.text,
            reasoning,
            tool_calls,
            finish,
            usage: self.usage,
        })
    }
}

/// A field of an object that is a non-empty string.
fn text_field<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// Token counts from a usage object; absent or mistyped counts are 0, and an object with none
/// of them is no usage.
fn usage_of(value: &Value) -> Option<Usage> {
    let count = |key: &str| value.get(key).and_then(Value::as_u64);
    let (prompt, completion, total) = (
        count("prompt_tokens"),
        count("completion_tokens"),
        count("total_tokens"),
    );
    if prompt.is_none() && completion.is_none() && total.is_none() {
        return None;
    }
    Some(Usage {
        prompt_tokens: prompt.unwrap_or(0),
        completion_tokens: completion.unwrap_or(0),
        total_tokens: total.unwrap_or(0),
    })
}

/// The explanation in an error body such as `{"error": {"message": "..."}}`.
pub(crate) fn server_message(body: &str) -> Option<String> {
    let value: Value = serde_json::from_str(body).ok()?;
    value_message(&value)
}

fn value_message(value: &Value) -> Option<String> {
    let error = value.get("error").unwrap_or(value);
    match error {
        Value::String(message) => Some(message.clone()),
        Value::Object(fields) => match fields.get("message") {
            Some(Value::String(message)) => Some(message.clone()),
            _ => Some(error.to_string()),
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Feeds `chunks` (the JSON of each event) and returns the deltas and the turn.
    fn assemble(chunks: &[Value]) -> (Vec<Delta>, Result<AssistantTurn, ModelError>) {
        let mut state = StreamState::default();
        let mut deltas = Vec::new();
        let mut on_delta = |d: Delta| deltas.push(d);
        for chunk in chunks {
            let event = SseEvent {
                event: String::new(),
                data: chunk.to_string(),
            };
            if let Err(e) = state.on_event(&event, &mut on_delta) {
                return (deltas, Err(e));
            }
        }
        (deltas, state.finish())
    }

    fn call_delta(tool_calls: Value) -> Value {
        json!({"choices": [{"index": 0, "delta": {"tool_calls": tool_calls}}]})
    }

    fn delta(delta: Value) -> Value {
        json!({"choices": [{"index": 0, "delta": delta}]})
    }

    fn finish(reason: &str) -> Value {
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
    }

    fn started(index: usize, id: &str, name: &str) -> Delta {
        Delta::ToolCallStarted {
            index,
            id: id.into(),
            name: name.into(),
        }
    }

    fn args(index: usize, fragment: &str) -> Delta {
        Delta::ToolCallArguments {
            index,
            fragment: fragment.into(),
        }
    }

    #[test]
    fn fragments_keyed_by_index_make_interleaved_calls() {
        let (deltas, turn) = assemble(&[
            call_delta(
                json!([{"index": 0, "id": "a", "type": "function", "function": {"name": "bash", "arguments": ""}}]),
            ),
            call_delta(json!([{"index": 1, "id": "b", "function": {"name": "read_file"}}])),
            call_delta(json!([{"index": 0, "function": {"arguments": "{\"command\":"}}])),
            call_delta(json!([{"index": 1, "function": {"arguments": "{\"path\":\"x\"}"}}])),
            call_delta(json!([{"index": 0, "function": {"arguments": "\"ls\"}"}}])),
            finish("tool_calls"),
        ]);
        let turn = turn.expect("assembles");
        assert_eq!(
            deltas,
            [
                started(0, "a", "bash"),
                started(1, "b", "read_file"),
                args(0, "{\"command\":"),
                args(1, "{\"path\":\"x\"}"),
                args(0, "\"ls\"}"),
            ]
        );
        assert_eq!(turn.tool_calls[0].arguments, "{\"command\":\"ls\"}");
        assert_eq!(turn.tool_calls[1].name, "read_file");
        assert_eq!(turn.finish, FinishReason::ToolCalls);
    }

    #[test]
    fn calls_without_index_are_told_apart_by_id_and_name() {
        // Ollama: whole calls, several in one delta, no index; arguments as an object.
        let (deltas, turn) = assemble(&[
            call_delta(json!([
                {"id": "call_x", "function": {"name": "bash", "arguments": {"command": "ls"}}},
                {"id": "call_y", "function": {"name": "bash", "arguments": "{\"command\":\"pwd\"}"}},
            ])),
            finish("stop"),
        ]);
        let turn = turn.expect("assembles");
        assert_eq!(turn.tool_calls.len(), 2);
        assert_eq!(turn.tool_calls[0].arguments, "{\"command\":\"ls\"}");
        assert_eq!(turn.tool_calls[1].id, "call_y");
        assert_eq!(deltas.len(), 4, "{deltas:?}");
        assert_eq!(turn.finish, FinishReason::Stop, "the server's word is kept");

        // No index and no id: a named delta starts a call, an unnamed one continues it.
        let (_, turn) = assemble(&[
            call_delta(json!([{"function": {"name": "bash", "arguments": "{\"a\""}}])),
            call_delta(json!([{"function": {"arguments": ":1}"}}])),
            call_delta(json!([{"function": {"name": "read_file"}}])),
        ]);
        let turn = turn.expect("assembles");
        assert_eq!(turn.tool_calls[0].arguments, "{\"a\":1}");
        assert_eq!(turn.tool_calls[0].id, "call_0", "a missing id is made up");
        assert_eq!(turn.tool_calls[1].arguments, "{}");
        assert_eq!(
            turn.finish,
            FinishReason::ToolCalls,
            "inferred without a reason"
        );
    }

    #[test]
    fn a_new_id_under_a_reused_index_is_a_new_call() {
        let (_, turn) = assemble(&[
            call_delta(
                json!([{"index": 0, "id": "a", "function": {"name": "x", "arguments": "{}"}}]),
            ),
            call_delta(
                json!([{"index": 0, "id": "b", "function": {"name": "y", "arguments": "{}"}}]),
            ),
        ]);
        let names: Vec<_> = turn
            .expect("assembles")
            .tool_calls
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(names, ["x", "y"]);
    }

    #[test]
    fn every_choice_index_is_the_one_choice_and_the_last_finish_and_usage_win() {
        let (deltas, turn) = assemble(&[
            json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}),
            json!({"choices": [{"index": 0, "delta": {"content": "Hel"}}]}),
            // Old TGI numbers the choice of each token anew.
            json!({"choices": [{"index": 1, "delta": {"content": "lo"}}]}),
            json!({"choices": [{"delta": {"content": "!"}, "finish_reason": null}]}),
            finish("length"),
            json!({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}),
        ]);
        let turn = turn.expect("assembles");
        assert_eq!(
            deltas,
            [
                Delta::Text("Hel".into()),
                Delta::Text("lo".into()),
                Delta::Text("!".into())
            ]
        );
        assert_eq!(turn.text, "Hello!");
        assert_eq!(turn.finish, FinishReason::Length);
        assert_eq!(
            turn.usage,
            Some(Usage {
                prompt_tokens: 3,
                completion_tokens: 2,
                total_tokens: 5
            })
        );
    }

    #[test]
    fn reasoning_comes_from_either_field_and_counts_once_when_both_agree() {
        let (deltas, turn) = assemble(&[
            delta(json!({"role": "assistant", "content": null, "reasoning_content": "Think"})),
            delta(json!({"reasoning_content": "ing.", "reasoning": "ing."})),
            delta(json!({"content": "Done.", "reasoning_content": null})),
            finish("stop"),
        ]);
        let turn = turn.expect("assembles");
        assert_eq!(
            deltas,
            [
                Delta::Reasoning("Think".into()),
                Delta::Reasoning("ing.".into()),
                Delta::Text("Done.".into())
            ]
        );
        assert_eq!(
            turn.reasoning,
            Some(Reasoning {
                text: "Thinking.".into(),
                field: Some(ReasoningField::ReasoningContent)
            })
        );
        let (_, turn) = assemble(&[delta(json!({"reasoning": "Hmm."})), finish("stop")]);
        assert_eq!(
            turn.expect("assembles").reasoning.and_then(|r| r.field),
            Some(ReasoningField::Reasoning)
        );
    }

    #[test]
    fn array_content_gives_text_and_thinking_parts_and_skips_the_rest() {
        let (deltas, turn) = assemble(&[
            delta(json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": [{"type": "text", "text": "Let me see"}]}]})),
            delta(json!({"content": [{"type": "thinking", "thinking": "."}]})),
            delta(
                json!({"content": [{"type": "reference", "reference_ids": [1]},
                                     {"type": "text", "text": "Four."}]}),
            ),
            delta(json!({"content": "!"})),
            finish("stop"),
        ]);
        let turn = turn.expect("array content is understood");
        assert_eq!(turn.text, "Four.!");
        assert_eq!(
            turn.reasoning,
            Some(Reasoning {
                text: "Let me see.".into(),
                field: Some(ReasoningField::ThinkingPart)
            })
        );
        assert_eq!(deltas.len(), 4, "{deltas:?}");
    }

    #[test]
    fn fields_of_unexpected_types_are_ignored() {
        let (deltas, turn) = assemble(&[
            json!({"choices": {"not": "an array"}}),
            json!({"choices": [7, {"delta": "text?"}, {"delta": {"content": 5, "tool_calls": "x"}}]}),
            json!({"choices": [{"delta": {"tool_calls": [3, {"index": -1, "function": {"name": 9}}]}}]}),
            json!({"usage": {"prompt_tokens": "many"}, "choices": [{"delta": {"content": "ok"}}]}),
            json!({"x_groq": {"id": "req_1", "usage": {"prompt_tokens": 4, "completion_tokens": 1, "total_tokens": 5}}}),
            finish("stop"),
        ]);
        assert_eq!(deltas, [Delta::Text("ok".into())]);
        let turn = turn.expect("assembles");
        assert_eq!(turn.usage.map(|u| u.total_tokens), Some(5));
    }

    #[test]
    fn a_chunk_that_is_not_an_object_is_malformed() {
        let (_, turn) = assemble(&[json!(["a", "list"])]);
        assert!(
            matches!(turn, Err(ModelError::MalformedStream { .. })),
            "{turn:?}"
        );
    }

    #[test]
    fn a_nameless_call_is_malformed() {
        let (_, turn) = assemble(&[call_delta(
            json!([{"index": 0, "function": {"arguments": "{}"}}]),
        )]);
        assert!(
            matches!(turn, Err(ModelError::MalformedStream { .. })),
            "{turn:?}"
        );
    }

    #[test]
    fn an_error_in_the_stream_is_reported() {
        let (_, turn) = assemble(&[json!({"error": {"message": "context too long", "code": 400}})]);
        let err = turn.expect_err("error");
        assert!(matches!(&err, ModelError::Server { message } if message == "context too long"));
    }
}
