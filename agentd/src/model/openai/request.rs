//! What a chat-completions request is made of: where it goes ([`endpoint`], from
//! `model.base_url`) and its JSON body, the history in the wire format with each assistant
//! message's reasoning sent back where the rule says.

use serde_json::{Map, Value, json};

use super::settings::OpenAiSettings;
use crate::http_client::{Target, TargetError};
use crate::model::family::ReasoningReturn;
use crate::model::{ChatRequest, Message, ReasoningField};

/// Why `model.base_url` names no endpoint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    /// The URL carries a user name or password.
    #[error(
        "model.base_url must not contain credentials; put the API key in the variable \
         model.api_key_env names"
    )]
    Credentials,
    /// The URL (trimmed) is not an `http://` or `https://` URL with a host.
    #[error(
        "model.base_url {0:?} is not an http:// or https:// URL (for example \
         https://api.openai.com/v1 or http://localhost:11434/v1)"
    )]
    NotHttp(String),
}

/// Where requests go: `.../chat/completions` below `base_url`, its query kept.
pub(super) fn endpoint(base_url: &str) -> Result<Target, EndpointError> {
    let base_url = base_url.trim();
    let (base, query) = match base_url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (base_url, None),
    };
    let url = match query {
        Some(query) => format!("{}/chat/completions?{query}", base.trim_end_matches('/')),
        None => format!("{}/chat/completions", base.trim_end_matches('/')),
    };
    Target::parse(&url).map_err(|e| match e {
        TargetError::Credentials(_) => EndpointError::Credentials,
        TargetError::NotHttp(_) => EndpointError::NotHttp(base_url.to_owned()),
    })
}

/// The JSON body of a request for `req`.
pub(super) fn request_body(settings: &OpenAiSettings, req: &ChatRequest) -> Vec<u8> {
    // The messages after the last user message are the tool loop in progress.
    let last_user = req
        .messages
        .iter()
        .rposition(|m| matches!(m, Message::User { .. }));
    let messages: Vec<Value> = req
        .messages
        .iter()
        .enumerate()
        .map(|(at, message)| {
            let current = last_user.is_none_or(|user| at > user);
            wire_message(message, settings.send_reasoning, current)
        })
        .collect();
    let mut body = Map::new();
    body.insert("model".into(), json!(settings.model));
    body.insert("messages".into(), Value::Array(messages));
    body.insert("stream".into(), json!(true));
    if !req.tools.is_empty() {
        let tools = req
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    },
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(max_tokens) = settings.max_tokens {
        body.insert(settings.max_tokens_field.as_str().into(), json!(max_tokens));
    }
    if let Some(temperature) = settings.temperature {
        body.insert("temperature".into(), json!(temperature));
    }
    if settings.include_usage {
        body.insert("stream_options".into(), json!({ "include_usage": true }));
    }
    Value::Object(body).to_string().into_bytes()
}

/// A history entry in the chat-completions wire format. An assistant message carries its
/// reasoning when `rule` says so for it (`current`: it comes after the last user message).
fn wire_message(message: &Message, rule: ReasoningReturn, current: bool) -> Value {
    match message {
        Message::System { content } => json!({ "role": "system", "content": content }),
        Message::User { content } => json!({ "role": "user", "content": content }),
        Message::Assistant {
            text,
            reasoning,
            tool_calls,
        } => {
            let mut wire = Map::new();
            wire.insert("role".into(), json!("assistant"));
            // `content` may be null only beside tool calls.
            let content = match text {
                Some(text) => json!(text),
                None if tool_calls.is_empty() => json!(""),
                None => Value::Null,
            };
            wire.insert("content".into(), content);
            let sent = reasoning
                .as_ref()
                .filter(|_| rule.sends(current, !tool_calls.is_empty()));
            if let Some(reasoning) = sent {
                let field = reasoning.field.unwrap_or(ReasoningField::ReasoningContent);
                match field {
                    ReasoningField::ReasoningContent | ReasoningField::Reasoning => {
                        wire.insert(field.as_str().into(), json!(reasoning.text));
                    }
                    // Mistral takes its thinking back as it sent it: a part of the content.
                    ReasoningField::ThinkingPart => {
                        let mut parts = vec![json!({
                            "type": "thinking",
                            "thinking": [{ "type": "text", "text": reasoning.text }],
                        })];
                        if let Some(text) = text {
                            parts.push(json!({ "type": "text", "text": text }));
                        }
                        wire.insert("content".into(), Value::Array(parts));
                    }
                }
            }
            if !tool_calls.is_empty() {
                let calls = tool_calls
                    .iter()
                    .map(|call| {
                        json!({
                            "id": call.id,
                            "type": "function",
                            "function": { "name": call.name, "arguments": call.arguments },
                        })
                    })
                    .collect();
                wire.insert("tool_calls".into(), Value::Array(calls));
            }
            Value::Object(wire)
        }
        Message::Tool {
            tool_call_id,
            content,
        } => json!({ "role": "tool", "tool_call_id": tool_call_id, "content": content }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Reasoning;

    #[test]
    fn base_urls_become_endpoints() {
        let e = endpoint("https://api.deepseek.com/v1/").expect("parses");
        assert!(e.https);
        assert_eq!((e.host.as_str(), e.port), ("api.deepseek.com", 443));
        assert_eq!(e.target, "/v1/chat/completions");
        assert_eq!(e.url, "https://api.deepseek.com/v1/chat/completions");
        let e = endpoint("http://[::1]:8080/v1?api-version=2").expect("parses");
        assert_eq!((e.host.as_str(), e.port), ("::1", 8080));
        assert_eq!(e.authority, "[::1]:8080");
        assert_eq!(e.target, "/v1/chat/completions?api-version=2");
        let e = endpoint("http://localhost").expect("parses");
        assert_eq!((e.target.as_str(), e.port), ("/chat/completions", 80));
    }

    fn thinking(field: Option<ReasoningField>, calls: bool) -> Message {
        Message::Assistant {
            text: Some("Four.".into()),
            reasoning: Some(Reasoning {
                text: "2+2".into(),
                field,
            }),
            tool_calls: if calls {
                vec![crate::model::ToolCall {
                    id: "c".into(),
                    name: "bash".into(),
                    arguments: "{}".into(),
                }]
            } else {
                vec![]
            },
        }
    }

    #[test]
    fn reasoning_goes_back_in_the_field_it_came_in_when_the_rule_says() {
        let rule = ReasoningReturn::ToolTurns;
        let wire = wire_message(&thinking(None, true), rule, false);
        assert_eq!(wire["reasoning_content"], "2+2", "{wire}");
        let wire = wire_message(
            &thinking(Some(ReasoningField::Reasoning), false),
            rule,
            true,
        );
        assert_eq!(wire["reasoning"], "2+2", "{wire}");
        assert!(wire.get("reasoning_content").is_none(), "{wire}");
        let wire = wire_message(
            &thinking(Some(ReasoningField::ThinkingPart), false),
            rule,
            true,
        );
        assert_eq!(
            wire["content"],
            json!([{"type": "thinking", "thinking": [{"type": "text", "text": "2+2"}]},
                   {"type": "text", "text": "Four."}])
        );
        for (rule, current, calls) in [
            (ReasoningReturn::ToolTurns, false, false),
            (ReasoningReturn::CurrentTurn, false, true),
            (ReasoningReturn::Never, true, true),
        ] {
            let wire = wire_message(&thinking(None, calls), rule, current);
            assert!(wire.get("reasoning_content").is_none(), "{rule:?}: {wire}");
            assert_eq!(wire["content"], "Four.", "{wire}");
        }
    }
}
