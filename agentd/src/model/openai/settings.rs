//! The settings of the chat-completions client, already resolved from the `[model]` table.

use std::fmt;
use std::time::Duration;

use crate::model::family::{MaxTokensField, ReasoningReturn, SendReasoning, TokenLimitField};

/// Everything the client needs, already resolved (the key itself, not its variable).
#[derive(Clone)]
pub struct OpenAiSettings {
    /// The endpoint up to and excluding `/chat/completions`, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    pub model: String,
    /// Sent as `Authorization: Bearer <key>` when present.
    pub api_key: Option<String>,
    /// The variable the key came from, for error messages.
    pub api_key_env: Option<String>,
    pub max_tokens: Option<u32>,
    /// The request field that carries `max_tokens`.
    pub max_tokens_field: TokenLimitField,
    /// Which assistant messages of the history go back with their reasoning.
    pub send_reasoning: ReasoningReturn,
    pub temperature: Option<f64>,
    /// Send `stream_options: {"include_usage": true}`.
    pub include_usage: bool,
    /// The limit on connecting (TCP and TLS together).
    pub connect_timeout: Duration,
    /// The longest silence tolerated once connected.
    pub idle_timeout: Duration,
    /// Attempts after the first one, for failures worth retrying.
    pub max_retries: u32,
    /// The first backoff; each retry doubles it, with jitter.
    pub retry_base_delay: Duration,
    /// No wait between attempts is longer, whatever `Retry-After` says.
    pub retry_max_delay: Duration,
}

impl OpenAiSettings {
    /// Settings with the defaults: no key, 10 s connect timeout, 120 s idle timeout, 3 retries
    /// starting at 500 ms and capped at 30 s, and the provider family's rules for the token
    /// limit's field and for sending reasoning back.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> OpenAiSettings {
        let (base_url, model) = (base_url.into(), model.into());
        OpenAiSettings {
            max_tokens_field: MaxTokensField::Auto.resolve(&base_url, &model),
            send_reasoning: SendReasoning::Auto.resolve(&base_url, &model),
            base_url,
            model,
            api_key: None,
            api_key_env: None,
            max_tokens: None,
            temperature: None,
            include_usage: false,
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            max_retries: 3,
            retry_base_delay: Duration::from_millis(500),
            retry_max_delay: Duration::from_secs(30),
        }
    }
}

impl fmt::Debug for OpenAiSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiSettings")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("api_key_env", &self.api_key_env)
            .field("max_tokens", &self.max_tokens)
            .field("max_tokens_field", &self.max_tokens_field)
            .field("send_reasoning", &self.send_reasoning)
            .field("temperature", &self.temperature)
            .field("include_usage", &self.include_usage)
            .field("connect_timeout", &self.connect_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("max_retries", &self.max_retries)
            .field("retry_base_delay", &self.retry_base_delay)
            .field("retry_max_delay", &self.retry_max_delay)
            .finish()
    }
}
