//! What agentd knows of each provider family that speaks the chat-completions format, in one
//! place: which assistant messages get their reasoning sent back, and which field carries the
//! token limit. These are the automatic defaults of `model.send_reasoning` and
//! `model.max_tokens_field` ([`SendReasoning`], [`MaxTokensField`], which resolve to them here);
//! either setting overrides its rule.
//!
//! A family is recognised by the host of `model.base_url` first (a hosted API follows its own
//! reference whatever model it serves), then by the model's name (the same model family served
//! by a router or a local server wants what its makers document).
//!
//! Sending reasoning back: DeepSeek's thinking-mode guide makes the reasoning of an assistant
//! message that called tools part of the context of every later request, and answers HTTP 400
//! without it; Moonshot's Kimi and Z.ai's GLM document the same for their thinking models. Their
//! rule is [`ReasoningReturn::ToolTurns`]. (The guide's earlier edition asked for the reasoning of
//! the tool loop in progress only and said to drop earlier turns'; the reasoning of that loop is
//! within `ToolTurns`, and an endpoint that wants the earlier rule exactly is set to
//! `current_turn`.) Chat templates that keep reasoning at all — gpt-oss's harmony format, Qwen3's
//! template — keep it from the last user message on, so a server of unknown family (llama.cpp,
//! vLLM, Ollama, LM Studio, a router) gets [`ReasoningReturn::CurrentTurn`]. OpenAI and Azure
//! never show reasoning in chat completions, and Groq, Mistral and DashScope document none going
//! back (Groq and Mistral refuse message fields they do not know): [`ReasoningReturn::Never`].
//!
//! The token limit: OpenAI's reference marks `max_tokens` deprecated for
//! `max_completion_tokens`, which its reasoning models require; Groq follows it. DeepSeek,
//! Mistral, DashScope, Z.ai, Moonshot and OpenRouter document `max_tokens` only. Every other
//! endpoint gets `max_completion_tokens`.

use serde::Deserialize;

/// A provider family agentd has a rule for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    OpenAi,
    Azure,
    DeepSeek,
    Moonshot,
    Zai,
    Mistral,
    Groq,
    DashScope,
    OpenRouter,
    /// Anything else: a local or self-hosted server, or an API agentd has no rule for.
    Other,
}

/// Which assistant messages of the history carry their reasoning back to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReasoningReturn {
    /// None.
    Never,
    /// Those after the last user message: the tool loop in progress.
    CurrentTurn,
    /// Those that called tools, in every turn, and those of the tool loop in progress.
    ToolTurns,
    /// All of them.
    Always,
}

impl ReasoningReturn {
    /// Whether an assistant message goes back with its reasoning: `current` when it comes after
    /// the last user message, `called_tools` when it made tool calls.
    pub fn sends(self, current: bool, called_tools: bool) -> bool {
        match self {
            ReasoningReturn::Never => false,
            ReasoningReturn::CurrentTurn => current,
            ReasoningReturn::ToolTurns => current || called_tools,
            ReasoningReturn::Always => true,
        }
    }

    /// The word the configuration uses for it.
    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningReturn::Never => "never",
            ReasoningReturn::CurrentTurn => "current_turn",
            ReasoningReturn::ToolTurns => "tool_turns",
            ReasoningReturn::Always => "always",
        }
    }
}

/// The request field that carries the limit on generated tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenLimitField {
    MaxCompletionTokens,
    MaxTokens,
}

impl TokenLimitField {
    /// The field's name on the wire (and in the configuration).
    pub fn as_str(self) -> &'static str {
        match self {
            TokenLimitField::MaxCompletionTokens => "max_completion_tokens",
            TokenLimitField::MaxTokens => "max_tokens",
        }
    }
}

impl Family {
    /// The family of the server at `host` serving `model`.
    pub fn detect(host: &str, model: &str) -> Family {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let on = |domain: &str| host == domain || host.ends_with(&format!(".{domain}"));
        let by_host = [
            ("api.openai.com", Family::OpenAi),
            ("openai.azure.com", Family::Azure),
            ("services.ai.azure.com", Family::Azure),
            ("api.deepseek.com", Family::DeepSeek),
            ("api.moonshot.ai", Family::Moonshot),
            ("api.moonshot.cn", Family::Moonshot),
            ("api.z.ai", Family::Zai),
            ("open.bigmodel.cn", Family::Zai),
            ("api.mistral.ai", Family::Mistral),
            ("api.groq.com", Family::Groq),
            ("dashscope.aliyuncs.com", Family::DashScope),
            ("dashscope-intl.aliyuncs.com", Family::DashScope),
            ("openrouter.ai", Family::OpenRouter),
        ];
        if let Some((_, family)) = by_host.iter().find(|(domain, _)| on(domain)) {
            return *family;
        }
        Family::of_model(model)
    }

    /// The family a model name belongs to, for servers that are not a known API: its last path
    /// segment, so `deepseek-ai/DeepSeek-V3` and `moonshotai/kimi-k2` are recognised.
    fn of_model(model: &str) -> Family {
        let name = model.to_ascii_lowercase();
        let name = name.rsplit('/').next().unwrap_or(&name);
        if name.contains("deepseek") {
            Family::DeepSeek
        } else if name.contains("kimi") {
            Family::Moonshot
        } else if name.starts_with("glm") {
            Family::Zai
        } else {
            Family::Other
        }
    }

    /// The reasoning rule of `model` on a server of this family.
    pub fn reasoning_return(self, model: &str) -> ReasoningReturn {
        match self {
            Family::DeepSeek | Family::Moonshot | Family::Zai => ReasoningReturn::ToolTurns,
            Family::OpenAi | Family::Azure | Family::Mistral | Family::Groq | Family::DashScope => {
                ReasoningReturn::Never
            }
            // A router serves every family: the model's own rule applies.
            Family::OpenRouter => match Family::of_model(model) {
                Family::Other => ReasoningReturn::CurrentTurn,
                family => family.reasoning_return(model),
            },
            Family::Other => ReasoningReturn::CurrentTurn,
        }
    }

    /// The field this family's reference documents for the token limit.
    pub fn token_limit_field(self) -> TokenLimitField {
        match self {
            Family::DeepSeek
            | Family::Moonshot
            | Family::Zai
            | Family::Mistral
            | Family::DashScope
            | Family::OpenRouter => TokenLimitField::MaxTokens,
            Family::OpenAi | Family::Azure | Family::Groq | Family::Other => {
                TokenLimitField::MaxCompletionTokens
            }
        }
    }
}

/// `model.send_reasoning`: which assistant messages of the history are sent back with the
/// reasoning the model showed in them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SendReasoning {
    /// The provider family's documented rule ([`Family::reasoning_return`]).
    #[default]
    Auto,
    Never,
    /// Those after the last user message: the tool loop in progress.
    CurrentTurn,
    /// Those that called tools, in every turn, and the current ones.
    ToolTurns,
    Always,
}

impl SendReasoning {
    /// The rule for `model` at `base_url`.
    pub fn resolve(self, base_url: &str, model: &str) -> ReasoningReturn {
        match self {
            SendReasoning::Auto => {
                Family::detect(&host_of(base_url), model).reasoning_return(model)
            }
            SendReasoning::Never => ReasoningReturn::Never,
            SendReasoning::CurrentTurn => ReasoningReturn::CurrentTurn,
            SendReasoning::ToolTurns => ReasoningReturn::ToolTurns,
            SendReasoning::Always => ReasoningReturn::Always,
        }
    }

    /// The word the configuration uses for it.
    pub fn as_str(self) -> &'static str {
        match self {
            SendReasoning::Auto => "auto",
            SendReasoning::Never => "never",
            SendReasoning::CurrentTurn => "current_turn",
            SendReasoning::ToolTurns => "tool_turns",
            SendReasoning::Always => "always",
        }
    }
}

/// `model.max_tokens_field`: which request field carries `model.max_tokens`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MaxTokensField {
    /// The field the provider family's reference documents ([`Family::token_limit_field`]).
    #[default]
    Auto,
    /// `max_completion_tokens`, the current OpenAI name (required by its reasoning models).
    MaxCompletionTokens,
    /// `max_tokens`, for endpoints that know only the older name.
    MaxTokens,
}

impl MaxTokensField {
    /// The field for `model` at `base_url`.
    pub fn resolve(self, base_url: &str, model: &str) -> TokenLimitField {
        match self {
            MaxTokensField::Auto => Family::detect(&host_of(base_url), model).token_limit_field(),
            MaxTokensField::MaxCompletionTokens => TokenLimitField::MaxCompletionTokens,
            MaxTokensField::MaxTokens => TokenLimitField::MaxTokens,
        }
    }

    /// The word the configuration uses for it.
    pub fn as_str(self) -> &'static str {
        match self {
            MaxTokensField::Auto => "auto",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
            MaxTokensField::MaxTokens => "max_tokens",
        }
    }
}

/// The host of a base URL, or an empty string when it has none (the URL is checked elsewhere).
fn host_of(base_url: &str) -> String {
    base_url
        .trim()
        .parse::<hyper::Uri>()
        .ok()
        .and_then(|uri| uri.host().map(str::to_owned))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_decide_before_model_names() {
        assert_eq!(
            Family::detect("api.deepseek.com", "deepseek-chat"),
            Family::DeepSeek
        );
        assert_eq!(Family::detect("API.DeepSeek.com.", "x"), Family::DeepSeek);
        assert_eq!(
            Family::detect("myres.openai.azure.com", "gpt-5"),
            Family::Azure
        );
        // A DeepSeek distillate on Groq follows Groq's reference.
        assert_eq!(
            Family::detect("api.groq.com", "deepseek-r1-distill-llama-70b"),
            Family::Groq
        );
        assert_eq!(
            Family::detect("localhost", "deepseek-ai/DeepSeek-V3.2"),
            Family::DeepSeek
        );
        assert_eq!(
            Family::detect("127.0.0.1", "moonshotai/Kimi-K2-Thinking"),
            Family::Moonshot
        );
        assert_eq!(Family::detect("10.0.0.2", "glm-4.6"), Family::Zai);
        assert_eq!(Family::detect("localhost", "gpt-oss-20b"), Family::Other);
        assert_eq!(
            Family::detect("notapi.deepseek.com.evil", "m"),
            Family::Other
        );
    }

    #[test]
    fn reasoning_goes_back_as_each_family_documents() {
        let r = |host: &str, model: &str| Family::detect(host, model).reasoning_return(model);
        assert_eq!(
            r("api.deepseek.com", "deepseek-reasoner"),
            ReasoningReturn::ToolTurns
        );
        assert_eq!(r("api.openai.com", "gpt-5"), ReasoningReturn::Never);
        assert_eq!(
            r("api.groq.com", "openai/gpt-oss-120b"),
            ReasoningReturn::Never
        );
        assert_eq!(
            r("openrouter.ai", "deepseek/deepseek-v3.2"),
            ReasoningReturn::ToolTurns
        );
        assert_eq!(
            r("openrouter.ai", "openai/gpt-oss-120b"),
            ReasoningReturn::CurrentTurn
        );
        assert_eq!(r("localhost", "qwen3:8b"), ReasoningReturn::CurrentTurn);
    }

    #[test]
    fn each_rule_picks_its_messages() {
        use ReasoningReturn::*;
        // (current, called tools)
        let cases = [(false, false), (false, true), (true, false), (true, true)];
        let picked = |rule: ReasoningReturn| cases.map(|(c, t)| rule.sends(c, t));
        assert_eq!(picked(Never), [false, false, false, false]);
        assert_eq!(picked(CurrentTurn), [false, false, true, true]);
        assert_eq!(picked(ToolTurns), [false, true, true, true]);
        assert_eq!(picked(Always), [true, true, true, true]);
    }

    #[test]
    fn the_token_limit_field_follows_the_reference() {
        let f = |host: &str| Family::detect(host, "m").token_limit_field();
        assert_eq!(f("api.openai.com"), TokenLimitField::MaxCompletionTokens);
        assert_eq!(f("api.deepseek.com"), TokenLimitField::MaxTokens);
        assert_eq!(f("api.mistral.ai"), TokenLimitField::MaxTokens);
        assert_eq!(f("localhost"), TokenLimitField::MaxCompletionTokens);
    }

    #[test]
    fn auto_settings_follow_the_provider_family_and_explicit_ones_win() {
        let deepseek = "https://api.deepseek.com/v1";
        assert_eq!(
            SendReasoning::Auto.resolve(deepseek, "deepseek-reasoner"),
            ReasoningReturn::ToolTurns
        );
        assert_eq!(
            SendReasoning::Never.resolve(deepseek, "deepseek-reasoner"),
            ReasoningReturn::Never
        );
        assert_eq!(
            MaxTokensField::Auto.resolve(deepseek, "deepseek-chat"),
            TokenLimitField::MaxTokens
        );
        assert_eq!(
            MaxTokensField::Auto.resolve("https://api.openai.com/v1", "o4-mini"),
            TokenLimitField::MaxCompletionTokens
        );
        assert_eq!(
            MaxTokensField::MaxCompletionTokens.resolve(deepseek, "deepseek-chat"),
            TokenLimitField::MaxCompletionTokens
        );
        assert_eq!(
            SendReasoning::Auto.resolve("http://localhost:8080/v1", "gpt-oss-20b"),
            ReasoningReturn::CurrentTurn
        );
    }
}
