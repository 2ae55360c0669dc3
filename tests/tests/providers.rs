//! The provider suite: what real providers stream, replayed through agentd's real model client.
//!
//! Each recorded stream in `tests/fixtures/providers/` (its README says where each provider
//! documents its format) is served by a local HTTP server to agentd's chat-completions client,
//! configured as agentd would configure it for that provider: the provider's own base URL and
//! model decide the rules (which field carries the token limit, which assistant messages go
//! back with their reasoning), the requests go to the local server. Each case checks the text,
//! the reasoning and the field it came in, the tool calls, the stop reason the turn ends with,
//! and then the next request: the history agentd sends back, with the reasoning on exactly the
//! assistant messages the provider's rule names, in the field the provider used.

mod support;

use std::time::Duration;

use agentd::api::model::openai::{OpenAiProvider, OpenAiSettings};
use agentd::api::model::{
    AssistantTurn, ChatRequest, Delta, Deltas, MaxTokensField, Message, ModelError, Provider,
    Reasoning, ReasoningField, SendReasoning, ToolCall,
};
use serde_json::{Value, json};
use support::model_server::{ModelServer, Received, Reply, assistant_messages, fixture};

/// The token limit every case sets, to see which field carries it.
const MAX_TOKENS: u32 = 512;

/// Fails a test that would otherwise hang.
async fn within<F: std::future::Future>(future: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(30), future)
        .await
        .expect("the model call finished in time")
}

/// One recorded stream and what agentd must make of it.
struct Case {
    fixture: &'static str,
    /// The provider's own endpoint and a model it serves: agentd's rules for them apply.
    provider_url: &'static str,
    model: &'static str,
    text: &'static str,
    reasoning: Option<(&'static str, ReasoningField)>,
    /// `(name, arguments)` of each tool call.
    calls: &'static [(&'static str, &'static str)],
    /// The stop reason the answer ends the turn with; `None` when the turn runs its tools.
    stop: Option<&'static str>,
    /// The field that carries the token limit.
    token_field: &'static str,
    /// Which assistant messages of the next request carry their reasoning: an earlier turn's
    /// tool-calling message, an earlier turn's answer, and this answer.
    sent_back: [bool; 3],
    usage_total: Option<u64>,
}

/// The history of the first request: an earlier turn that called a tool and answered, both
/// with reasoning in the provider's field, then the prompt the recorded answer answers.
fn first_request(field: ReasoningField) -> ChatRequest {
    let reasoning = |text: &str| {
        Some(Reasoning {
            text: text.into(),
            field: Some(field),
        })
    };
    ChatRequest {
        messages: vec![
            Message::system("You are agentd."),
            Message::user("What is in the workspace?"),
            Message::Assistant {
                text: None,
                reasoning: reasoning("Earlier: list it."),
                tool_calls: vec![ToolCall {
                    id: "call_earlier".into(),
                    name: "bash".into(),
                    arguments: "{\"command\":\"ls\"}".into(),
                }],
            },
            Message::tool("call_earlier", "notes.txt\n[exit code: 0]"),
            Message::Assistant {
                text: Some("One file, notes.txt.".into()),
                reasoning: reasoning("Earlier: one file."),
                tool_calls: vec![],
            },
            Message::user("Go on."),
        ],
        tools: vec![],
        agent: None,
    }
}

async fn complete(
    provider: &OpenAiProvider,
    req: &ChatRequest,
) -> (Vec<Delta>, Result<AssistantTurn, ModelError>) {
    let (mut deltas, mut reader) = Deltas::channel();
    let answering = async move { provider.complete(req, &mut deltas).await };
    let reading = async {
        let mut all = Vec::new();
        while let Some(delta) = reader.recv().await {
            all.push(delta);
        }
        all
    };
    let (result, deltas) = within(async { tokio::join!(answering, reading) }).await;
    (deltas, result)
}

/// agentd's client for `case`'s provider, sending to `server`.
fn provider_for(case: &Case, server: &ModelServer) -> OpenAiProvider {
    let mut settings = OpenAiSettings::new(&server.base_url, case.model);
    settings.max_tokens = Some(MAX_TOKENS);
    settings.max_tokens_field = MaxTokensField::Auto.resolve(case.provider_url, case.model);
    settings.send_reasoning = SendReasoning::Auto.resolve(case.provider_url, case.model);
    OpenAiProvider::new(settings).expect("valid settings")
}

async fn replay(case: Case) {
    let answer = fixture(case.fixture);
    let server = ModelServer::start(move |_, count| match count {
        0 => Reply::Stream(answer.clone()),
        _ => Reply::Stream(fixture("deepseek-thinking-answer.sse")),
    });
    let provider = provider_for(&case, &server);
    let field = case
        .reasoning
        .map_or(ReasoningField::ReasoningContent, |(_, f)| f);
    let first = first_request(field);
    let (deltas, turn) = complete(&provider, &first).await;
    let turn = turn.unwrap_or_else(|e| panic!("{}: {e}", case.fixture));
    let what = case.fixture;

    // What the user sees and what is recorded.
    assert_eq!(turn.text, case.text, "{what}: text");
    let streamed_text: String = deltas
        .iter()
        .filter_map(|d| match d {
            Delta::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(streamed_text, case.text, "{what}: streamed text");
    let streamed_reasoning: String = deltas
        .iter()
        .filter_map(|d| match d {
            Delta::Reasoning(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    match case.reasoning {
        Some((text, field)) => {
            assert_eq!(
                turn.reasoning,
                Some(Reasoning {
                    text: text.into(),
                    field: Some(field)
                }),
                "{what}: reasoning"
            );
            assert_eq!(streamed_reasoning, text, "{what}: streamed reasoning");
        }
        None => {
            assert_eq!(turn.reasoning, None, "{what}: no reasoning");
            assert!(streamed_reasoning.is_empty(), "{what}");
        }
    }
    let calls: Vec<(&str, &str)> = turn
        .tool_calls
        .iter()
        .map(|c| (c.name.as_str(), c.arguments.as_str()))
        .collect();
    assert_eq!(calls, case.calls, "{what}: tool calls");
    assert!(
        turn.tool_calls.iter().all(|c| !c.id.is_empty()),
        "{what}: every call has an id"
    );
    assert_eq!(
        agentd::api::acp::stop_reason_after(&turn),
        case.stop,
        "{what}: stop reason (finish {})",
        turn.finish
    );
    if let Some(total) = case.usage_total {
        assert_eq!(turn.usage.map(|u| u.total_tokens), Some(total), "{what}");
    }

    // The next request: the answer and its tool results appended, as the turn loop does.
    let mut next = first.clone();
    next.messages.push(turn.to_message());
    for call in &turn.tool_calls {
        next.messages
            .push(Message::tool(call.id.clone(), "[exit code: 0]"));
    }
    let (_, second) = complete(&provider, &next).await;
    second.unwrap_or_else(|e| panic!("{what}: the next request: {e}"));

    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{what}: one request per answer");
    check_token_limit(&requests[0], case.token_field, what);
    check_sent_back(&requests[1], &case, &turn, field);
}

fn check_token_limit(request: &Received, field: &str, what: &str) {
    let body = &request.body;
    assert_eq!(body[field], json!(MAX_TOKENS), "{what}: {field}: {body}");
    let other = if field == "max_tokens" {
        "max_completion_tokens"
    } else {
        "max_tokens"
    };
    assert!(body.get(other).is_none(), "{what}: no {other}: {body}");
    assert_eq!(body["stream"], true, "{what}");
}

/// The assistant messages of the second request carry their reasoning as `case.sent_back` says,
/// in the provider's field, and nothing else changed about them.
fn check_sent_back(request: &Received, case: &Case, turn: &AssistantTurn, field: ReasoningField) {
    let what = case.fixture;
    let sent = assistant_messages(request);
    assert_eq!(sent.len(), 3, "{what}: {sent:#?}");
    let reasoning_of = ["Earlier: list it.", "Earlier: one file."];
    for (at, message) in sent.iter().enumerate() {
        let expected = if at < 2 {
            Some(reasoning_of[at])
        } else {
            turn.reasoning.as_ref().map(|r| r.text.as_str())
        };
        let carried = carried_reasoning(message, field);
        let wanted = expected.filter(|_| case.sent_back[at]);
        assert_eq!(
            carried.as_deref(),
            wanted,
            "{what}: assistant message {at} of the next request: {message}"
        );
        // Only the field the provider uses, never another one.
        for other in ["reasoning_content", "reasoning"] {
            if wanted.is_none() || other != field.as_str() {
                assert!(message.get(other).is_none(), "{what}: {other} in {message}");
            }
        }
    }
    let current = &sent[2];
    if field != ReasoningField::ThinkingPart || !case.sent_back[2] {
        let text = (!turn.text.is_empty()).then_some(turn.text.as_str());
        assert_eq!(current["content"].as_str(), text, "{what}: {current}");
    }
    let calls: Vec<&str> = current["tool_calls"]
        .as_array()
        .map(|all| {
            all.iter()
                .filter_map(|c| c["function"]["name"].as_str())
                .collect()
        })
        .unwrap_or_default();
    let names: Vec<&str> = case.calls.iter().map(|(name, _)| *name).collect();
    assert_eq!(calls, names, "{what}: {current}");
}

/// The reasoning an assistant message of a request carries, in `field`.
fn carried_reasoning(message: &Value, field: ReasoningField) -> Option<String> {
    match field {
        ReasoningField::ThinkingPart => message["content"].as_array().and_then(|parts| {
            parts
                .iter()
                .find(|p| p["type"] == "thinking")
                .and_then(|p| p["thinking"][0]["text"].as_str())
                .map(str::to_owned)
        }),
        field => message
            .get(field.as_str())
            .and_then(Value::as_str)
            .map(str::to_owned),
    }
}

macro_rules! cases {
    ($($test:ident: $case:expr;)*) => {
        $(
            #[tokio::test]
            async fn $test() {
                replay($case).await;
            }
        )*
    };
}

cases! {
    openai_streams_a_tool_call_and_gets_max_completion_tokens: Case {
        fixture: "openai-tool-call.sse",
        provider_url: "https://api.openai.com/v1",
        model: "gpt-5-mini",
        text: "",
        reasoning: None,
        calls: &[("bash", "{\"command\":\"ls -la\"}")],
        stop: None,
        token_field: "max_completion_tokens",
        sent_back: [false, false, false],
        usage_total: None,
    };
    openai_cut_off_by_the_token_limit_ends_with_max_tokens: Case {
        fixture: "openai-length.sse",
        provider_url: "https://api.openai.com/v1",
        model: "gpt-5-mini",
        text: "The files are: a.txt, b.txt, and",
        reasoning: None,
        calls: &[],
        stop: Some("max_tokens"),
        token_field: "max_completion_tokens",
        sent_back: [false, false, false],
        usage_total: Some(428),
    };
    azure_content_filter_ends_with_refusal: Case {
        fixture: "azure-content-filter.sse",
        provider_url: "https://myresource.openai.azure.com/openai/deployments/gpt-41",
        model: "gpt-4.1",
        text: "I can help with ",
        reasoning: None,
        calls: &[],
        stop: Some("refusal"),
        token_field: "max_completion_tokens",
        sent_back: [false, false, false],
        usage_total: None,
    };
    openrouter_reasoning_goes_back_for_the_tool_loop_in_progress: Case {
        fixture: "openrouter-reasoning-tool-call.sse",
        provider_url: "https://openrouter.ai/api/v1",
        model: "openai/gpt-oss-120b",
        text: "",
        reasoning: Some((
            "The user wants the test suite run. I'll call bash.",
            ReasoningField::Reasoning,
        )),
        calls: &[("bash", "{\"command\":\"cargo test\"}")],
        stop: None,
        token_field: "max_tokens",
        sent_back: [false, false, true],
        usage_total: Some(343),
    };
    groq_reasoning_is_shown_and_never_sent_back: Case {
        fixture: "groq-reasoning.sse",
        provider_url: "https://api.groq.com/openai/v1",
        model: "openai/gpt-oss-20b",
        text: "Two files changed.",
        reasoning: Some(("Need to answer briefly.", ReasoningField::Reasoning)),
        calls: &[],
        stop: Some("end_turn"),
        token_field: "max_completion_tokens",
        sent_back: [false, false, false],
        usage_total: Some(145),
    };
    deepseek_thinking_goes_back_on_every_tool_calling_message: Case {
        fixture: "deepseek-thinking-tool-call.sse",
        provider_url: "https://api.deepseek.com/v1",
        model: "deepseek-reasoner",
        text: "",
        reasoning: Some((
            "The user asks what notes.txt says. I should read it with bash.",
            ReasoningField::ReasoningContent,
        )),
        calls: &[("bash", "{\"command\":\"cat notes.txt\"}")],
        stop: None,
        token_field: "max_tokens",
        sent_back: [true, false, true],
        usage_total: Some(453),
    };
    deepseek_thinking_answer_ends_the_turn: Case {
        fixture: "deepseek-thinking-answer.sse",
        provider_url: "https://api.deepseek.com",
        model: "deepseek-chat",
        text: "notes.txt says: hello from the workspace.",
        reasoning: Some((
            "The file says hello. Report it.",
            ReasoningField::ReasoningContent,
        )),
        calls: &[],
        stop: Some("end_turn"),
        token_field: "max_tokens",
        sent_back: [true, false, true],
        usage_total: Some(502),
    };
    mistral_thinking_parts_are_reasoning_and_text_parts_text: Case {
        fixture: "mistral-magistral-thinking.sse",
        provider_url: "https://api.mistral.ai/v1",
        model: "magistral-medium-latest",
        text: "The answer is **4**.",
        reasoning: Some(("Okay, 2 + 2 is 4.", ReasoningField::ThinkingPart)),
        calls: &[],
        stop: Some("end_turn"),
        token_field: "max_tokens",
        sent_back: [false, false, false],
        usage_total: Some(61),
    };
    dashscope_qwen_thinking_is_shown_and_not_sent_back: Case {
        fixture: "dashscope-qwen-thinking.sse",
        provider_url: "https://dashscope-intl.aliyuncs.com/compatible-mode/v1",
        model: "qwen-plus",
        text: "Hello! How can I help?",
        reasoning: Some(("Okay, the user greets me.", ReasoningField::ReasoningContent)),
        calls: &[],
        stop: Some("end_turn"),
        token_field: "max_tokens",
        sent_back: [false, false, false],
        usage_total: Some(75),
    };
    zai_glm_reasoning_goes_back_on_every_tool_calling_message: Case {
        fixture: "zai-glm-reasoning-tool-call.sse",
        provider_url: "https://api.z.ai/api/paas/v4",
        model: "glm-4.6",
        text: "\n",
        reasoning: Some((
            "The user wants notes.txt. Read it.",
            ReasoningField::ReasoningContent,
        )),
        calls: &[("read_file", "{\"path\": \"notes.txt\"}")],
        stop: None,
        token_field: "max_tokens",
        sent_back: [true, false, true],
        usage_total: Some(394),
    };
    llamacpp_gpt_oss_reasoning_goes_back_for_the_tool_loop_in_progress: Case {
        fixture: "llamacpp-gpt-oss-tool-call.sse",
        provider_url: "http://localhost:8080/v1",
        model: "gpt-oss-20b",
        text: "",
        reasoning: Some((
            "We need to list the directory.",
            ReasoningField::ReasoningContent,
        )),
        calls: &[("bash", "{\"command\":\"ls\"}")],
        stop: None,
        token_field: "max_completion_tokens",
        sent_back: [false, false, true],
        usage_total: Some(246),
    };
    ollama_reasoning_goes_back_for_the_tool_loop_in_progress: Case {
        fixture: "ollama-reasoning-tool-call.sse",
        provider_url: "http://localhost:11434/v1",
        model: "qwen3:8b",
        text: "",
        reasoning: Some(("Okay, I'll check git status.", ReasoningField::Reasoning)),
        calls: &[("bash", "{\"command\":\"git status\"}")],
        stop: None,
        token_field: "max_completion_tokens",
        sent_back: [false, false, true],
        usage_total: None,
    };
    tgi_choices_numbered_per_token_are_one_answer: Case {
        fixture: "tgi-choice-index-per-token.sse",
        provider_url: "http://localhost:3000/v1",
        model: "tgi",
        text: "Use `git log`.",
        reasoning: None,
        calls: &[],
        stop: Some("end_turn"),
        token_field: "max_completion_tokens",
        sent_back: [false, false, false],
        usage_total: None,
    };
}

#[test]
fn every_fixture_has_a_case_and_a_line_in_the_readme() {
    let source = include_str!("providers.rs");
    let readme = std::fs::read_to_string(support::model_server::fixtures_dir().join("README.md"))
        .expect("the fixtures' README");
    let mut found = 0;
    for entry in std::fs::read_dir(support::model_server::fixtures_dir()).expect("fixtures") {
        let name = entry
            .expect("entry")
            .file_name()
            .to_string_lossy()
            .into_owned();
        if !name.ends_with(".sse") {
            continue;
        }
        found += 1;
        assert!(
            source.contains(&format!("fixture: \"{name}\"")),
            "{name} has no case here"
        );
        assert!(
            readme.contains(&format!("`{name}`")),
            "{name} is not in the README"
        );
    }
    assert_eq!(found, 13, "the provider streams");
}

#[tokio::test]
async fn a_server_that_stalls_before_answering_is_retried_and_its_second_answer_used() {
    let server = ModelServer::start(|_, count| match count {
        0 => Reply::Stall,
        _ => Reply::Stream(fixture("deepseek-thinking-answer.sse")),
    });
    let mut settings = OpenAiSettings::new(&server.base_url, "deepseek-reasoner");
    settings.idle_timeout = Duration::from_millis(300);
    settings.retry_base_delay = Duration::from_millis(1);
    settings.max_retries = 1;
    let provider = OpenAiProvider::new(settings).expect("valid settings");
    let (deltas, turn) = complete(&provider, &first_request(ReasoningField::Reasoning)).await;
    let turn = turn.expect("the retry answers");
    assert_eq!(turn.text, "notes.txt says: hello from the workspace.");
    assert!(
        deltas.iter().any(|d| matches!(d, Delta::Reasoning(_))),
        "{deltas:?}"
    );
    assert_eq!(server.requests().len(), 2, "one stalled, one answered");
}

#[tokio::test]
async fn an_answer_that_breaks_off_after_showing_text_is_not_retried() {
    // The events of the first half of an answer, then the end of the body.
    let answer = fixture("deepseek-thinking-answer.sse");
    let cut = answer[answer.len() / 2..]
        .windows(2)
        .position(|w| w == b"\n\n")
        .map(|at| answer.len() / 2 + at + 2)
        .expect("an event ends after the middle");
    let server = ModelServer::start(move |_, count| match count {
        0 => Reply::Stream(answer[..cut].to_vec()),
        _ => Reply::Stall,
    });
    let mut settings = OpenAiSettings::new(&server.base_url, "deepseek-reasoner");
    settings.idle_timeout = Duration::from_millis(300);
    settings.retry_base_delay = Duration::from_millis(1);
    let provider = OpenAiProvider::new(settings).expect("valid settings");
    let (deltas, result) = complete(&provider, &first_request(ReasoningField::Reasoning)).await;
    let err = result.expect_err("the answer broke off");
    assert_eq!(
        (err.kind().as_str(), err.retries()),
        ("interrupted", 0),
        "{err}"
    );
    assert!(!deltas.is_empty(), "part of the answer was delivered");
    assert_eq!(server.requests().len(), 1, "no second attempt");
}
