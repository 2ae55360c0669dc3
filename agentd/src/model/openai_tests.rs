//! The chat-completions client against a small HTTP/1.1 server on 127.0.0.1 that speaks the
//! same wire format. Every wait in the server is on a real event (a connection, a request, the
//! client closing); nothing sleeps to synchronise.

use std::future::Future;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::http_client::test_server::accept;
use crate::test_support::within;

use super::{OpenAiProvider, OpenAiSettings};
use crate::model::{
    AssistantTurn, ChatRequest, DELTAS_AHEAD, Delta, Deltas, FailureKind, FinishReason, Message,
    ModelError, Provider, Reasoning, ReasoningField, ReasoningReturn, TokenLimitField, ToolCall,
    ToolSpec, Usage,
};

async fn listen() -> (TcpListener, String) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    (listener, format!("http://{address}/v1"))
}

const STREAM_HEAD: &str = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
                           Transfer-Encoding: chunked\r\n\r\n";

async fn write_chunk(stream: &mut TcpStream, data: &str) {
    let framed = format!("{:x}\r\n{data}\r\n", data.len());
    stream.write_all(framed.as_bytes()).await.expect("write");
}

/// A whole streamed answer: one HTTP chunk per event, then `[DONE]`.
async fn answer_events(stream: &mut TcpStream, chunks: &[Value]) {
    stream
        .write_all(STREAM_HEAD.as_bytes())
        .await
        .expect("write");
    for chunk in chunks {
        write_chunk(stream, &format!("data: {chunk}\n\n")).await;
    }
    write_chunk(stream, "data: [DONE]\n\n").await;
    stream.write_all(b"0\r\n\r\n").await.expect("write");
}

async fn answer_status(stream: &mut TcpStream, status: &str, extra: &str, body: &str) {
    let response = format!(
        "HTTP/1.1 {status}\r\n{extra}Content-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await.expect("write");
}

/// Waits until the client closes its side of the connection.
async fn until_closed(stream: &mut TcpStream) {
    let mut buffer = [0u8; 1024];
    while let Ok(n) = stream.read(&mut buffer).await {
        if n == 0 {
            break;
        }
    }
}

fn text_chunk(text: &str) -> Value {
    json!({"id": "x", "object": "chat.completion.chunk",
           "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
}

fn finish_chunk(reason: &str) -> Value {
    json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
}

fn settings(base_url: &str) -> OpenAiSettings {
    let mut settings = OpenAiSettings::new(base_url, "test-model");
    settings.retry_base_delay = Duration::from_millis(1);
    settings.retry_max_delay = Duration::from_millis(10);
    settings
}

fn provider(settings: OpenAiSettings) -> OpenAiProvider {
    OpenAiProvider::new(settings).expect("valid settings")
}

fn hello() -> ChatRequest {
    ChatRequest {
        messages: vec![Message::user("hi")],
        tools: vec![],
        agent: None,
    }
}

async fn complete(
    provider: &OpenAiProvider,
    req: &ChatRequest,
) -> (Vec<Delta>, Result<AssistantTurn, ModelError>) {
    within(crate::test_support::answer_of(provider, req)).await
}

fn server<F, T>(listener: TcpListener, serve: impl FnOnce(TcpListener) -> F) -> JoinHandle<T>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    tokio::spawn(serve(listener))
}

#[tokio::test]
async fn streamed_text_arrives_as_deltas_with_finish_and_usage() {
    let (listener, base_url) = listen().await;
    let server = server(listener, |listener| async move {
        let (mut stream, received) = accept(&listener).await;
        stream
            .write_all(STREAM_HEAD.as_bytes())
            .await
            .expect("write");
        write_chunk(&mut stream, ": keep-alive comment\r\n\r\n").await;
        write_chunk(&mut stream, &format!("data: {}\r\n\r\n", text_chunk("Hel"))).await;
        // One event split across two HTTP chunks, without the space after the colon.
        let event = format!("data:{}\n\n", text_chunk("lo world"));
        let (a, b) = event.split_at(event.len() / 2);
        write_chunk(&mut stream, a).await;
        write_chunk(&mut stream, b).await;
        let usage = json!({"choices": [], "usage":
            {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}});
        write_chunk(
            &mut stream,
            &format!(
                "data: {}\n\ndata: {usage}\n\ndata: [DONE]\n\n",
                finish_chunk("stop")
            ),
        )
        .await;
        stream.write_all(b"0\r\n\r\n").await.expect("write");
        received
    });
    let mut settings = settings(&base_url);
    settings.include_usage = true;
    let (deltas, turn) = complete(&provider(settings), &hello()).await;
    let turn = turn.expect("a turn");
    assert_eq!(
        deltas,
        [Delta::Text("Hel".into()), Delta::Text("lo world".into())]
    );
    assert_eq!(turn.text, "Hello world");
    assert_eq!(turn.finish, FinishReason::Stop);
    assert!(turn.tool_calls.is_empty());
    assert_eq!(
        turn.usage,
        Some(Usage {
            prompt_tokens: 5,
            completion_tokens: 2,
            total_tokens: 7
        })
    );
    let received = within(server).await.expect("server");
    assert_eq!(
        received.json()["stream_options"],
        json!({"include_usage": true})
    );
}

#[tokio::test]
async fn streamed_tool_call_deltas_assemble_into_two_calls() {
    let (listener, base_url) = listen().await;
    let server = server(listener, |listener| async move {
        let (mut stream, _) = accept(&listener).await;
        let call = |tool_calls: Value| json!({"choices": [{"index": 0, "delta": {"tool_calls": tool_calls}}]});
        answer_events(
            &mut stream,
            &[
                text_chunk("Looking."),
                call(json!([{"index": 0, "id": "call_a", "type": "function",
                             "function": {"name": "bash", "arguments": ""}}])),
                call(json!([{"index": 0, "function": {"arguments": "{\"comm"}}])),
                call(json!([{"index": 1, "id": "call_b", "type": "function",
                             "function": {"name": "read_file", "arguments": "{\"path\":"}}])),
                call(json!([{"index": 0, "function": {"arguments": "and\":\"ls\"}"}}])),
                call(json!([{"index": 1, "function": {"arguments": "\"a.txt\"}"}}])),
                finish_chunk("tool_calls"),
            ],
        )
        .await;
    });
    let (deltas, turn) = complete(&provider(settings(&base_url)), &hello()).await;
    let turn = turn.expect("a turn");
    assert_eq!(
        turn.tool_calls,
        [
            ToolCall {
                id: "call_a".into(),
                name: "bash".into(),
                arguments: "{\"command\":\"ls\"}".into(),
            },
            ToolCall {
                id: "call_b".into(),
                name: "read_file".into(),
                arguments: "{\"path\":\"a.txt\"}".into(),
            },
        ]
    );
    assert_eq!(turn.text, "Looking.");
    assert_eq!(turn.finish, FinishReason::ToolCalls);
    assert_eq!(
        deltas,
        [
            Delta::Text("Looking.".into()),
            Delta::ToolCallStarted {
                index: 0,
                id: "call_a".into(),
                name: "bash".into()
            },
            Delta::ToolCallArguments {
                index: 0,
                fragment: "{\"comm".into()
            },
            Delta::ToolCallStarted {
                index: 1,
                id: "call_b".into(),
                name: "read_file".into()
            },
            Delta::ToolCallArguments {
                index: 1,
                fragment: "{\"path\":".into()
            },
            Delta::ToolCallArguments {
                index: 0,
                fragment: "and\":\"ls\"}".into()
            },
            Delta::ToolCallArguments {
                index: 1,
                fragment: "\"a.txt\"}".into()
            },
        ]
    );
    within(server).await.expect("server");
}

#[tokio::test]
async fn a_429_with_retry_after_is_retried() {
    let (listener, base_url) = listen().await;
    let server = server(listener, |listener| async move {
        let (mut stream, _) = accept(&listener).await;
        answer_status(
            &mut stream,
            "429 Too Many Requests",
            "Retry-After: 0\r\n",
            r#"{"error":{"message":"slow down"}}"#,
        )
        .await;
        drop(stream);
        let (mut stream, _) = accept(&listener).await;
        answer_events(&mut stream, &[text_chunk("ok"), finish_chunk("stop")]).await;
    });
    let mut settings = settings(&base_url);
    // Were Retry-After ignored, the backoff would outlast the test.
    settings.retry_base_delay = Duration::from_secs(3600);
    settings.retry_max_delay = Duration::from_secs(3600);
    let (_, turn) = complete(&provider(settings), &hello()).await;
    assert_eq!(turn.expect("the retry succeeds").text, "ok");
    within(server).await.expect("server");
}

#[tokio::test]
async fn three_500s_exhaust_the_retries() {
    let (listener, base_url) = listen().await;
    let server = server(listener, |listener| async move {
        for _ in 0..3 {
            let (mut stream, _) = accept(&listener).await;
            answer_status(
                &mut stream,
                "500 Internal Server Error",
                "",
                "upstream exploded",
            )
            .await;
        }
    });
    let mut settings = settings(&base_url);
    settings.max_retries = 2;
    let (deltas, result) = complete(&provider(settings), &hello()).await;
    let err = result.expect_err("fails");
    let ModelError::RetriesExhausted { attempts, last } = &err else {
        panic!("not exhausted retries: {err}");
    };
    assert_eq!(*attempts, 3);
    assert!(
        matches!(**last, ModelError::Status { status: 500, .. }),
        "{last}"
    );
    let text = err.to_string();
    assert!(
        text.contains("HTTP 500") && text.contains("upstream exploded"),
        "{text}"
    );
    assert!(deltas.is_empty());
    within(server).await.expect("server");
}

#[tokio::test]
async fn a_malformed_event_is_a_malformed_stream_error() {
    let (listener, base_url) = listen().await;
    let server = server(listener, |listener| async move {
        let (mut stream, _) = accept(&listener).await;
        drop(listener);
        stream
            .write_all(STREAM_HEAD.as_bytes())
            .await
            .expect("write");
        write_chunk(&mut stream, "data: {\"choices\": [oops\n\n").await;
        until_closed(&mut stream).await;
    });
    let (_, result) = complete(&provider(settings(&base_url)), &hello()).await;
    let err = result.expect_err("malformed");
    assert!(
        matches!(&err, ModelError::MalformedStream { line, .. } if line.contains("oops")),
        "{err}"
    );
    within(server).await.expect("server");
}

#[tokio::test]
async fn a_connection_dropped_mid_stream_is_an_error_and_not_retried() {
    let (listener, base_url) = listen().await;
    let server = server(listener, |listener| async move {
        let (mut stream, _) = accept(&listener).await;
        // No second connection is possible: a retry would fail differently.
        drop(listener);
        stream
            .write_all(STREAM_HEAD.as_bytes())
            .await
            .expect("write");
        write_chunk(&mut stream, &format!("data: {}\n\n", text_chunk("partial"))).await;
        // Gone without the final chunk.
    });
    let (deltas, result) = complete(&provider(settings(&base_url)), &hello()).await;
    let err = result.expect_err("no partial success");
    assert!(
        matches!(&err, ModelError::Interrupted { detail, .. } if detail.contains("middle")),
        "{err}"
    );
    assert_eq!(deltas, [Delta::Text("partial".into())]);
    within(server).await.expect("server");
}

#[tokio::test]
async fn a_close_delimited_stream_cut_short_is_an_error() {
    let (listener, base_url) = listen().await;
    let server = server(listener, |listener| async move {
        let (mut stream, _) = accept(&listener).await;
        drop(listener);
        let head =
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
        let event = format!("data: {}\n\n", text_chunk("partial"));
        stream
            .write_all(format!("{head}{event}").as_bytes())
            .await
            .expect("write");
    });
    let (_, result) = complete(&provider(settings(&base_url)), &hello()).await;
    let err = result.expect_err("no partial success");
    assert!(
        matches!(&err, ModelError::Interrupted { detail, .. } if detail.contains("before it was complete")),
        "{err}"
    );
    within(server).await.expect("server");
}

/// A conversation with a system prompt, two tool calls (each with its reasoning, in either
/// field), an answer in between and a tool on offer.
fn tool_loop_request() -> ChatRequest {
    ChatRequest {
        messages: vec![
            Message::system("You are terse."),
            Message::user("List the files."),
            Message::Assistant {
                text: None,
                reasoning: Some(Reasoning {
                    text: "ls will do.".into(),
                    field: Some(ReasoningField::ReasoningContent),
                }),
                tool_calls: vec![ToolCall {
                    id: "call_1".into(),
                    name: "bash".into(),
                    arguments: "{\"command\":\"ls\"}".into(),
                }],
            },
            Message::tool("call_1", "a.txt\n"),
            Message::Assistant {
                text: Some("One file.".into()),
                reasoning: None,
                tool_calls: vec![],
            },
            Message::user("Thanks."),
            Message::Assistant {
                text: None,
                reasoning: Some(Reasoning {
                    text: "Say so.".into(),
                    field: Some(ReasoningField::Reasoning),
                }),
                tool_calls: vec![ToolCall {
                    id: "call_2".into(),
                    name: "bash".into(),
                    arguments: "{\"command\":\"true\"}".into(),
                }],
            },
            Message::tool("call_2", ""),
        ],
        tools: vec![ToolSpec {
            name: "bash".into(),
            description: "Runs a command.".into(),
            parameters: json!({"type": "object", "properties": {"command": {"type": "string"}},
                               "required": ["command"]}),
        }],
        agent: None,
    }
}

#[tokio::test]
async fn the_request_has_the_chat_completions_shape() {
    let (listener, base_url) = listen().await;
    let server = server(listener, |listener| async move {
        let (mut stream, received) = accept(&listener).await;
        answer_events(&mut stream, &[finish_chunk("stop")]).await;
        received
    });
    let req = tool_loop_request();
    let mut settings = settings(&base_url);
    settings.max_tokens = Some(256);
    settings.temperature = Some(0.25);
    // A local server: the family of unknown servers, whose defaults these are.
    assert_eq!(
        settings.max_tokens_field,
        TokenLimitField::MaxCompletionTokens
    );
    assert_eq!(settings.send_reasoning, ReasoningReturn::CurrentTurn);
    let (_, turn) = complete(&provider(settings), &req).await;
    turn.expect("a turn");
    let received = within(server).await.expect("server");
    assert_eq!(
        received.request_line(),
        "POST /v1/chat/completions HTTP/1.1"
    );
    assert_eq!(
        received.header("content-type").as_deref(),
        Some("application/json")
    );
    assert_eq!(
        received.header("accept").as_deref(),
        Some("text/event-stream")
    );
    assert_eq!(
        received.header("host"),
        base_url
            .strip_prefix("http://")
            .and_then(|rest| rest.strip_suffix("/v1"))
            .map(str::to_owned)
    );
    assert_eq!(
        received.json(),
        json!({
            "model": "test-model",
            "stream": true,
            "max_completion_tokens": 256,
            "temperature": 0.25,
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "List the files."},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_1", "content": "a.txt\n"},
                {"role": "assistant", "content": "One file."},
                {"role": "user", "content": "Thanks."},
                // The tool loop in progress goes back with its reasoning, as it came.
                {"role": "assistant", "content": null, "reasoning": "Say so.", "tool_calls": [
                    {"id": "call_2", "type": "function",
                     "function": {"name": "bash", "arguments": "{\"command\":\"true\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_2", "content": ""},
            ],
            "tools": [{"type": "function", "function": {
                "name": "bash",
                "description": "Runs a command.",
                "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                               "required": ["command"]},
            }}],
        })
    );
}

#[tokio::test]
async fn the_authorization_header_is_sent_only_with_a_key() {
    let (listener, base_url) = listen().await;
    let server = server(listener, |listener| async move {
        let mut seen = Vec::new();
        for _ in 0..2 {
            let (mut stream, received) = accept(&listener).await;
            answer_events(&mut stream, &[finish_chunk("stop")]).await;
            seen.push(received.header("authorization"));
        }
        seen
    });
    let mut with_key = settings(&base_url);
    with_key.api_key = Some("sk-test-123".into());
    complete(&provider(with_key), &hello())
        .await
        .1
        .expect("turn");
    complete(&provider(settings(&base_url)), &hello())
        .await
        .1
        .expect("turn");
    let seen = within(server).await.expect("server");
    assert_eq!(seen, [Some("Bearer sk-test-123".to_owned()), None]);
}

#[tokio::test]
async fn dropping_the_call_closes_the_connection() {
    let (listener, base_url) = listen().await;
    let server = server(listener, |listener| async move {
        let (mut stream, _) = accept(&listener).await;
        stream
            .write_all(STREAM_HEAD.as_bytes())
            .await
            .expect("write");
        write_chunk(&mut stream, &format!("data: {}\n\n", text_chunk("first"))).await;
        // The answer never finishes; the client must hang up.
        until_closed(&mut stream).await;
    });
    let provider = provider(settings(&base_url));
    let req = hello();
    let (mut deltas, mut got_delta) = Deltas::channel();
    let call = provider.complete(&req, &mut deltas);
    tokio::select! {
        result = call => panic!("the answer cannot finish: {result:?}"),
        delta = within(got_delta.recv()) => assert_eq!(delta, Some(Delta::Text("first".into()))),
    }
    // The call is dropped; the server sees the connection close.
    within(server).await.expect("server");
}

#[tokio::test]
async fn an_unreachable_server_is_a_connection_error() {
    let (listener, base_url) = listen().await;
    drop(listener);
    let mut settings = settings(&base_url);
    settings.max_retries = 1;
    let (_, result) = complete(&provider(settings), &hello()).await;
    let err = result.expect_err("nobody listens");
    let ModelError::RetriesExhausted { attempts: 2, last } = &err else {
        panic!("{err}");
    };
    assert!(matches!(**last, ModelError::Unreachable { .. }), "{last}");
    assert_eq!((err.kind(), err.retries()), (FailureKind::Unreachable, 1));
    let text = err.to_string();
    assert!(
        text.contains("could not be reached") && text.contains("cannot connect"),
        "{text}"
    );
}

#[tokio::test]
async fn silence_after_the_headers_is_a_timeout() {
    let (listener, base_url) = listen().await;
    let server = server(listener, |listener| async move {
        let (mut stream, _) = accept(&listener).await;
        drop(listener);
        stream
            .write_all(STREAM_HEAD.as_bytes())
            .await
            .expect("write");
        until_closed(&mut stream).await;
    });
    let mut settings = settings(&base_url);
    settings.idle_timeout = Duration::from_millis(200);
    settings.max_retries = 0;
    let (_, result) = complete(&provider(settings), &hello()).await;
    let err = result.expect_err("times out");
    assert!(matches!(err, ModelError::Timeout { .. }), "{err}");
    assert!(err.to_string().contains("timeout_secs"), "{err}");
    assert!(!err.to_string().contains("could not be reached"), "{err}");
    within(server).await.expect("server");
}

/// The server of the stall tests: the first connection gets `stall` written and then nothing
/// until the client gives up on it and closes it; the second gets a whole answer. Returns how
/// many connections it saw after the first, and the listener for a check of later ones.
async fn stall_then_answer(listener: TcpListener, stall: &'static [u8]) -> TcpListener {
    let (mut first, _) = accept(&listener).await;
    first.write_all(stall).await.expect("write");
    until_closed(&mut first).await;
    let (mut second, _) = accept(&listener).await;
    answer_events(
        &mut second,
        &[text_chunk("second try"), finish_chunk("stop")],
    )
    .await;
    listener
}

fn impatient(base_url: &str) -> OpenAiSettings {
    let mut settings = settings(base_url);
    settings.idle_timeout = Duration::from_millis(200);
    settings.max_retries = 1;
    settings
}

/// No connection waits after the client's call has returned.
fn no_further_connection(listener: TcpListener) {
    let listener = listener.into_std().expect("std listener");
    listener.set_nonblocking(true).expect("nonblocking");
    match listener.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the client tried again: {other:?}"),
    }
}

#[tokio::test]
async fn no_headers_within_the_timeout_is_retried_and_the_retry_answers() {
    let (listener, base_url) = listen().await;
    let server = server(listener, |listener| stall_then_answer(listener, b""));
    let (deltas, turn) = complete(&provider(impatient(&base_url)), &hello()).await;
    assert_eq!(turn.expect("the retry answers").text, "second try");
    assert_eq!(deltas, [Delta::Text("second try".into())]);
    no_further_connection(within(server).await.expect("server"));
}

#[tokio::test]
async fn no_body_byte_within_the_timeout_is_retried_and_the_retry_answers() {
    let (listener, base_url) = listen().await;
    let server = server(listener, |listener| {
        stall_then_answer(listener, STREAM_HEAD.as_bytes())
    });
    let (deltas, turn) = complete(&provider(impatient(&base_url)), &hello()).await;
    assert_eq!(turn.expect("the retry answers").text, "second try");
    assert_eq!(deltas, [Delta::Text("second try".into())]);
    within(server).await.expect("server");
}

#[tokio::test]
async fn a_stall_before_anything_was_delivered_is_retried_even_after_some_bytes() {
    // A keep-alive comment and a chunk with only the role: bytes, but nothing for the user.
    const PREAMBLE: &str = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
                            Content-Length: 1000\r\n\r\n: keep-alive\n\n\
                            data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n";
    let (listener, base_url) = listen().await;
    let server = server(listener, |listener| {
        stall_then_answer(listener, PREAMBLE.as_bytes())
    });
    let (_, turn) = complete(&provider(impatient(&base_url)), &hello()).await;
    assert_eq!(turn.expect("the retry answers").text, "second try");
    within(server).await.expect("server");
}

#[tokio::test]
async fn a_stall_after_text_was_delivered_is_not_retried() {
    let (listener, base_url) = listen().await;
    let server = server(listener, |listener| async move {
        let (mut stream, _) = accept(&listener).await;
        stream
            .write_all(STREAM_HEAD.as_bytes())
            .await
            .expect("write");
        write_chunk(&mut stream, &format!("data: {}\n\n", text_chunk("partial"))).await;
        until_closed(&mut stream).await;
        listener
    });
    let (deltas, result) = complete(&provider(impatient(&base_url)), &hello()).await;
    let err = result.expect_err("a timeout");
    assert!(matches!(err, ModelError::Timeout { .. }), "{err}");
    assert_eq!(err.retries(), 0);
    assert_eq!(deltas, [Delta::Text("partial".into())]);
    no_further_connection(within(server).await.expect("server"));
}

#[tokio::test]
async fn a_final_failure_after_a_retry_says_how_many_attempts_failed_before() {
    let (listener, base_url) = listen().await;
    let server = server(listener, |listener| async move {
        let (mut stream, _) = accept(&listener).await;
        answer_status(
            &mut stream,
            "503 Service Unavailable",
            "Retry-After: 0\r\n",
            "busy",
        )
        .await;
        drop(stream);
        let (mut stream, _) = accept(&listener).await;
        answer_status(
            &mut stream,
            "400 Bad Request",
            "",
            r#"{"error":{"message":"Missing `reasoning_content` field"}}"#,
        )
        .await;
    });
    let (_, result) = complete(&provider(settings(&base_url)), &hello()).await;
    let err = result.expect_err("fails");
    assert_eq!(
        (err.kind(), err.status(), err.retries()),
        (FailureKind::Http, Some(400), 1)
    );
    assert!(
        err.to_string().contains("Missing `reasoning_content`"),
        "{err}"
    );
    within(server).await.expect("server");
}

#[tokio::test]
async fn a_401_names_the_key_variable_and_is_not_retried() {
    let (listener, base_url) = listen().await;
    let server = server(listener, |listener| async move {
        let (mut stream, received) = accept(&listener).await;
        drop(listener);
        answer_status(
            &mut stream,
            "401 Unauthorized",
            "",
            r#"{"error":{"message":"Invalid API key","type":"auth"}}"#,
        )
        .await;
        received
    });
    let mut settings = settings(&base_url);
    settings.api_key = Some("sk-wrong".into());
    settings.api_key_env = Some("DEEPSEEK_API_KEY".into());
    let (_, result) = complete(&provider(settings), &hello()).await;
    let err = result.expect_err("unauthorized");
    assert!(
        matches!(err, ModelError::Status { status: 401, .. }),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains("Invalid API key") && text.contains("DEEPSEEK_API_KEY"),
        "{text}"
    );
    assert!(!text.contains("sk-wrong"), "{text}");
    within(server).await.expect("server");
}

#[tokio::test]
async fn a_whole_json_answer_is_understood() {
    let (listener, base_url) = listen().await;
    let server = server(listener, |listener| async move {
        let (mut stream, _) = accept(&listener).await;
        let body = json!({
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": "Sure.",
                "tool_calls": [{"id": "c9", "type": "function",
                                "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}}],
            }}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        });
        answer_status(&mut stream, "200 OK", "", &body.to_string()).await;
    });
    let (deltas, turn) = complete(&provider(settings(&base_url)), &hello()).await;
    let turn = turn.expect("a turn");
    assert_eq!(turn.text, "Sure.");
    assert_eq!(turn.tool_calls[0].id, "c9");
    assert_eq!(turn.finish, FinishReason::ToolCalls);
    assert_eq!(deltas.len(), 3, "{deltas:?}");
    within(server).await.expect("server");
}

#[tokio::test]
async fn an_error_event_mid_stream_is_reported() {
    let (listener, base_url) = listen().await;
    let server = server(listener, |listener| async move {
        let (mut stream, _) = accept(&listener).await;
        drop(listener);
        stream
            .write_all(STREAM_HEAD.as_bytes())
            .await
            .expect("write");
        write_chunk(
            &mut stream,
            "event: error\ndata: {\"error\":{\"message\":\"model overloaded\"}}\n\n",
        )
        .await;
        until_closed(&mut stream).await;
    });
    let (_, result) = complete(&provider(settings(&base_url)), &hello()).await;
    let err = result.expect_err("error event");
    assert!(
        matches!(&err, ModelError::Server { message } if message == "model overloaded"),
        "{err}"
    );
    within(server).await.expect("server");
}

/// Serves one answer of `words` text chunks (the `n`th being `word(n)`) to a client that may
/// not read them, noting in `blocked` whether it waits for room to write now and in `done`
/// that it wrote them all; then the end of the answer.
async fn write_words(
    listener: TcpListener,
    words: usize,
    word: impl Fn(usize) -> String,
    blocked: std::sync::Arc<std::sync::atomic::AtomicBool>,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    use std::sync::atomic::Ordering;
    let (mut stream, _) = accept(&listener).await;
    stream
        .write_all(STREAM_HEAD.as_bytes())
        .await
        .expect("write");
    for n in 0..words {
        let data = format!("data: {}\n\n", text_chunk(&word(n)));
        let framed = format!("{:x}\r\n{data}\r\n", data.len());
        let mut at = 0;
        while at < framed.len() {
            match stream.try_write(&framed.as_bytes()[at..]) {
                Ok(n) => at += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    blocked.store(true, Ordering::SeqCst);
                    stream.writable().await.expect("writable");
                    blocked.store(false, Ordering::SeqCst);
                }
                Err(e) => panic!("write: {e}"),
            }
        }
    }
    done.store(true, Ordering::SeqCst);
    write_chunk(&mut stream, &format!("data: {}\n\n", finish_chunk("stop"))).await;
    write_chunk(&mut stream, "data: [DONE]\n\n").await;
    stream.write_all(b"0\r\n\r\n").await.expect("write");
}

#[tokio::test]
async fn a_caller_that_takes_no_delta_stops_the_provider_reading_the_answer() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    // Far more than the sockets' buffers hold: 4 KiB words, 24 MiB in all.
    const WORDS: usize = 6 * 1024;
    let word = |n: usize| format!("{n:08}{} ", "w".repeat(4 * 1024 - 9));
    let (listener, base_url) = listen().await;
    // Whether the server waits for room to write now, and whether it wrote the whole answer.
    let (blocked, done) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (server_blocked, server_done) = (blocked.clone(), done.clone());
    let server = server(listener, move |listener| {
        write_words(listener, WORDS, word, server_blocked, server_done)
    });
    let provider = provider(settings(&base_url));
    let req = hello();
    let (deltas, mut reader) = Deltas::channel();
    let (provider, req) = (&provider, &req);
    let answering = async move {
        let mut deltas = deltas;
        provider.complete(req, &mut deltas).await
    };
    let reading = async {
        // Taking nothing, until the server cannot write and the provider's queue is full (or,
        // without a bound, the server wrote everything).
        let stopped = || {
            done.load(Ordering::SeqCst)
                || (blocked.load(Ordering::SeqCst) && reader.len() >= DELTAS_AHEAD)
        };
        while !stopped() {
            tokio::task::yield_now().await;
        }
        // Then as many more turns of the runtime as the provider would need to read on, were it
        // not held back: what it holds must stay at the queue's bound.
        let mut queued = reader.len();
        for _ in 0..10_000 {
            if done.load(Ordering::SeqCst) {
                break;
            }
            tokio::task::yield_now().await;
            queued = queued.max(reader.len());
        }
        let whole = done.load(Ordering::SeqCst);
        let mut text = String::new();
        while let Some(delta) = reader.recv().await {
            if let Delta::Text(t) = delta {
                text.push_str(&t);
            }
        }
        (queued, whole, text)
    };
    let (answer, (queued, whole, text)) = within(async { tokio::join!(answering, reading) }).await;
    assert!(
        !whole,
        "the server wrote the whole answer to a caller that took nothing"
    );
    assert_eq!(
        queued, DELTAS_AHEAD,
        "the provider read no further than its queue"
    );
    let expected: String = (0..WORDS).map(word).collect();
    assert_eq!(text.len(), expected.len());
    assert!(text == expected, "every word, in order");
    assert_eq!(answer.expect("the answer").text, expected);
    within(server).await.expect("server");
}
