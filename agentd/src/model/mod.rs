//! The model layer: the chat history the agent loop keeps, and the providers that answer it.
//!
//! The loop keeps a [`ChatRequest`] (the history as [`Message`]s plus the [`ToolSpec`]s the
//! model may call), hands it to a [`Provider`] and gets back an [`AssistantTurn`]: the text, the
//! model's reasoning when it shows it, the tool calls, why the model stopped and, when the server
//! says, the token usage. While the turn is produced the provider reports [`Delta`]s so the loop
//! can stream reasoning, text and tool calls to the editor as they arrive, through a bounded
//! queue ([`Deltas`]) that holds the provider back when the loop falls behind.
//!
//! Two providers exist: [`openai::OpenAiProvider`], a client of any OpenAI-compatible
//! chat-completions endpoint (OpenAI, DeepSeek, vLLM, llama.cpp server, Ollama), and
//! [`scripted::ScriptedProvider`], which replays turns from a file for tests and demos.
//! [`build_provider`] picks and builds one from the `[model]` table of the configuration
//! ([`ModelConfig`]).
//!
//! [`estimate_tokens`] tells roughly how many tokens a request sends, for compacting a long
//! history.
//!
//! Cancellation is by dropping the future [`Provider::complete`] returns: the HTTP provider owns
//! its connection inside that future, so dropping it closes the socket at once.

mod config;
mod deltas;
mod error;
mod estimate;
mod family;
pub mod openai;
mod retry;
pub mod scripted;
mod stream;

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};

pub use config::{ModelConfig, ProviderKind, build_provider};
#[cfg(test)]
pub(crate) use deltas::DELTAS_AHEAD;
pub use deltas::Deltas;
pub use error::{FailureKind, ModelError};
pub use estimate::estimate_tokens;
pub use family::{MaxTokensField, SendReasoning};
#[cfg(test)]
pub(crate) use family::{ReasoningReturn, TokenLimitField};

/// One entry of the chat history.
///
/// Serialized with a `role` tag (`{"role":"user","content":"..."}`), which is the form the
/// session log stores; the HTTP provider translates to its own wire format.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// Instructions that frame the whole conversation.
    System { content: String },
    /// What the user said.
    User { content: String },
    /// What the model answered: text, tool calls, or both, and the reasoning it showed on the
    /// way (sent back to the server only where its provider wants it, see
    /// [`ReasoningReturn`]).
    Assistant {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning: Option<Reasoning>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call, answered to the model.
    Tool {
        tool_call_id: String,
        content: String,
    },
}

impl Message {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Message {
        Message::System {
            content: content.into(),
        }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Message {
        Message::User {
            content: content.into(),
        }
    }

    /// The result of the tool call `tool_call_id`.
    pub fn tool(tool_call_id: impl Into<String>, content: impl Into<String>) -> Message {
        Message::Tool {
            tool_call_id: tool_call_id.into(),
            content: content.into(),
        }
    }
}

/// The reasoning a model showed before (or between) its answer's parts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reasoning {
    /// All reasoning deltas joined.
    pub text: String,
    /// Where the server put it, so it goes back the same way; `None` when no server said (a
    /// scripted turn, or a step that failed before it ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<ReasoningField>,
}

/// Where a chat-completions server puts a model's reasoning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningField {
    /// `reasoning_content` beside `content` (DeepSeek, llama.cpp, vLLM, Qwen, GLM, Kimi).
    ReasoningContent,
    /// `reasoning` beside `content` (OpenRouter, Groq, Ollama, newer vLLM).
    Reasoning,
    /// A `{"type": "thinking"}` part of an array `content` (Mistral's Magistral).
    ThinkingPart,
}

impl ReasoningField {
    /// The field's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningField::ReasoningContent => "reasoning_content",
            ReasoningField::Reasoning => "reasoning",
            ReasoningField::ThinkingPart => "thinking",
        }
    }
}

/// A call of a tool, as the model made it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The id the model gave the call; the tool result refers to it.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as JSON text, exactly as the model produced it (it may be malformed: the
    /// tool decides what to answer then). An empty argument string is reported as `{}`.
    pub arguments: String,
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// The JSON schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// What a provider is asked: the history so far and the tools on offer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub messages: Vec<Message>,
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// The persona of the child agent asking, `None` for the session's own agent. Only the
    /// scripted provider reads it (to replay a child's own turns); it is never sent to a server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum FinishReason {
    /// It finished its answer.
    Stop,
    /// It wants the tool calls run and their results answered.
    ToolCalls,
    /// It hit the token limit.
    Length,
    /// The server's content filter cut it off.
    ContentFilter,
    /// Anything else the server said, verbatim.
    Other(String),
}

impl FinishReason {
    /// Whether the model's answer is cut off or withheld, so that its tool calls must not run:
    /// the last call's arguments may be truncated, or the server hid what the model wanted.
    pub fn cut_off(&self) -> bool {
        matches!(self, FinishReason::Length | FinishReason::ContentFilter)
    }

    /// The reason as the OpenAI wire format spells it.
    pub fn as_str(&self) -> &str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::Length => "length",
            FinishReason::ContentFilter => "content_filter",
            FinishReason::Other(other) => other,
        }
    }
}

impl From<&str> for FinishReason {
    fn from(value: &str) -> FinishReason {
        match value {
            // TGI says `eos_token` and `stop_sequence` for an answer that ended by itself.
            "stop" | "eos_token" | "stop_sequence" => FinishReason::Stop,
            // `function_call` is the name older servers still use for the same thing.
            "tool_calls" | "function_call" => FinishReason::ToolCalls,
            // `model_length` is Mistral's word for the context running out.
            "length" | "model_length" => FinishReason::Length,
            // Z.ai's GLM says `sensitive` when its filter stopped the answer.
            "content_filter" | "sensitive" => FinishReason::ContentFilter,
            other => FinishReason::Other(other.to_owned()),
        }
    }
}

impl From<String> for FinishReason {
    fn from(value: String) -> FinishReason {
        FinishReason::from(value.as_str())
    }
}

impl From<FinishReason> for String {
    fn from(value: FinishReason) -> String {
        value.as_str().to_owned()
    }
}

impl fmt::Display for FinishReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Token counts, when the server reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub prompt_tokens: u64,
    #[serde(default)]
    pub completion_tokens: u64,
    #[serde(default)]
    pub total_tokens: u64,
}

/// One complete answer of the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssistantTurn {
    /// All text deltas joined (empty when the model only called tools).
    pub text: String,
    /// The reasoning the server showed, if any.
    pub reasoning: Option<Reasoning>,
    /// The tool calls, in the order the model made them.
    pub tool_calls: Vec<ToolCall>,
    /// Why the model stopped, as the server said. Some servers say `stop` even when they made
    /// tool calls, so a loop should decide on `tool_calls` being empty, not on this alone.
    pub finish: FinishReason,
    pub usage: Option<Usage>,
}

impl AssistantTurn {
    /// The history entry that records this turn.
    pub fn to_message(&self) -> Message {
        Message::Assistant {
            text: (!self.text.is_empty()).then(|| self.text.clone()),
            reasoning: self.reasoning.clone(),
            tool_calls: self.tool_calls.clone(),
        }
    }
}

/// Part of a turn, reported while the turn is produced.
///
/// Joining the text deltas gives [`AssistantTurn::text`], joining the reasoning deltas the text
/// of [`AssistantTurn::reasoning`]; for each tool call there is exactly one
/// `ToolCallStarted`, before any of its `ToolCallArguments`, and joining its argument fragments
/// gives the call's arguments (before an empty string is turned into `{}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delta {
    /// More answer text.
    Text(String),
    /// More of the model's reasoning.
    Reasoning(String),
    /// A tool call began. `index` is its position among this turn's tool calls (0, 1, ...).
    ToolCallStarted {
        index: usize,
        id: String,
        name: String,
    },
    /// More of the arguments of the tool call at `index`.
    ToolCallArguments { index: usize, fragment: String },
}

/// The future [`Provider::complete`] returns.
pub type CompleteFuture<'a> =
    Pin<Box<dyn Future<Output = Result<AssistantTurn, ModelError>> + Send + 'a>>;

/// Something that answers a chat history with a model turn.
///
/// Usable as `Arc<dyn Provider>` from any tokio task. Dropping the returned future cancels the
/// request: network activity stops and nothing more is delivered to `deltas`.
pub trait Provider: Send + Sync {
    /// Produces the next assistant turn for `req`, delivering its parts to `deltas` as they
    /// arrive, and reading no more of the answer while `deltas`' reader is behind.
    ///
    /// Deltas already delivered stay delivered if the call then fails; a provider never retries
    /// once it has delivered one.
    fn complete<'a>(&'a self, req: &'a ChatRequest, deltas: &'a mut Deltas) -> CompleteFuture<'a>;

    /// A short description for logs and status lines, e.g. `deepseek-chat at https://...`.
    fn describe(&self) -> String;
}

impl fmt::Debug for dyn Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Provider({})", self.describe())
    }
}

/// Cuts `text` to at most `max` bytes on a character boundary, marking the cut.
pub(crate) fn excerpt(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_serialize_with_a_role_tag() {
        let messages = vec![
            Message::system("be brief"),
            Message::user("hi"),
            Message::Assistant {
                text: None,
                reasoning: Some(Reasoning {
                    text: "list first".into(),
                    field: Some(ReasoningField::ReasoningContent),
                }),
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "bash".into(),
                    arguments: "{}".into(),
                }],
            },
            Message::tool("c1", "ok"),
        ];
        let json = serde_json::to_value(&messages).expect("serializes");
        assert_eq!(
            json,
            serde_json::json!([
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "hi"},
                {"role": "assistant",
                 "reasoning": {"text": "list first", "field": "reasoning_content"},
                 "tool_calls": [{"id": "c1", "name": "bash", "arguments": "{}"}]},
                {"role": "tool", "tool_call_id": "c1", "content": "ok"},
            ])
        );
        let back: Vec<Message> = serde_json::from_value(json).expect("deserializes");
        assert_eq!(back, messages);
    }

    #[test]
    fn finish_reasons_round_trip_through_their_wire_names() {
        for name in ["stop", "tool_calls", "length", "content_filter", "eos"] {
            assert_eq!(FinishReason::from(name).as_str(), name);
        }
        assert_eq!(FinishReason::from("function_call"), FinishReason::ToolCalls);
        assert_eq!(FinishReason::from("eos_token"), FinishReason::Stop);
        assert_eq!(FinishReason::from("model_length"), FinishReason::Length);
        assert_eq!(FinishReason::from("sensitive"), FinishReason::ContentFilter);
        assert!(FinishReason::Length.cut_off() && FinishReason::ContentFilter.cut_off());
        assert!(!FinishReason::Stop.cut_off() && !FinishReason::ToolCalls.cut_off());
        let json = serde_json::to_string(&FinishReason::Other("eos".into())).expect("ser");
        assert_eq!(json, "\"eos\"");
    }

    #[test]
    fn a_turn_becomes_its_history_entry() {
        let turn = AssistantTurn {
            text: String::new(),
            reasoning: None,
            tool_calls: vec![],
            finish: FinishReason::Stop,
            usage: None,
        };
        assert_eq!(
            turn.to_message(),
            Message::Assistant {
                text: None,
                reasoning: None,
                tool_calls: vec![]
            }
        );
    }

    #[test]
    fn excerpts_cut_on_character_boundaries() {
        assert_eq!(excerpt("  short ", 10), "short");
        assert_eq!(excerpt("ééé", 3), "é…");
    }
}
