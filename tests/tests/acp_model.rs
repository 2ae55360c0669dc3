//! The real `agentd acp`, driven over its stdio by a test client, against a local
//! chat-completions server configured in `agentd.toml`: DeepSeek's thinking mode with tools
//! (the server refuses a history that drops `reasoning_content`, as DeepSeek does), the model's
//! reasoning shown live and on `session/load`, and model failures that end the prompt with a
//! JSON-RPC error after what happened was logged.

mod support;

use serde_json::{Value, json};
use support::acp::{AcpClient, Scratch, normalized_updates};
use support::model_server::{ModelServer, Received, Reply, fixture};

/// DeepSeek's answer to a thinking-mode history without the reasoning of a tool-calling
/// assistant message.
fn missing_reasoning(index: usize) -> Reply {
    Reply::Status {
        code: 400,
        body: json!({"error": {
            "message": format!(
                "Missing `reasoning_content` field in the assistant message at message index \
                 {index}. For more information, please refer to \
                 https://api-docs.deepseek.com/guides/thinking_mode#tool-calls"
            ),
            "type": "invalid_request_error", "param": null, "code": "invalid_request_error"}})
        .to_string(),
    }
}

/// A DeepSeek-style server in thinking mode: a new prompt is answered with reasoning and a
/// `bash` call, the call's result with reasoning and the answer; a history in which a
/// tool-calling assistant message lacks its `reasoning_content` gets HTTP 400.
fn deepseek(request: &Received, _: usize) -> Reply {
    let messages = request.body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for (index, message) in messages.iter().enumerate() {
        let calls_tools = message["tool_calls"]
            .as_array()
            .is_some_and(|c| !c.is_empty());
        if message["role"] == "assistant"
            && calls_tools
            && !message["reasoning_content"].is_string()
        {
            return missing_reasoning(index);
        }
    }
    match messages.last().map(|m| m["role"].clone()) {
        Some(role) if role == "user" => Reply::Stream(fixture("deepseek-thinking-tool-call.sse")),
        _ => Reply::Stream(fixture("deepseek-thinking-answer.sse")),
    }
}

/// The reasoning of the two recorded answers.
const TOOL_REASONING: &str = "The user asks what notes.txt says. I should read it with bash.";
const ANSWER_REASONING: &str = "The file says hello. Report it.";
const ANSWER: &str = "notes.txt says: hello from the workspace.";

fn configure(scratch: &Scratch, server: &ModelServer, extra: &str) {
    scratch.config(&format!(
        "[model]\nbase_url = \"{}\"\nmodel = \"deepseek-reasoner\"\nmax_retries = 0\n{extra}",
        server.base_url
    ));
}

fn updates_of(kind: &str, updates: &[Value]) -> Vec<Value> {
    updates
        .iter()
        .filter(|u| u["sessionUpdate"] == kind)
        .cloned()
        .collect()
}

fn texts_of(kind: &str, updates: &[Value]) -> Vec<String> {
    updates_of(kind, updates)
        .iter()
        .filter_map(|u| u["content"]["text"].as_str().map(str::to_owned))
        .collect()
}

/// Kills agentd, starts it again and loads the session; returns the replayed updates.
fn restart_and_load(client: &mut AcpClient, scratch: &Scratch, session: &str) -> Vec<Value> {
    let _ = client.child.kill();
    let _ = client.child.wait();
    *client = AcpClient::start_configured(scratch, &[]);
    let (_, notes) = client.load_session(&scratch.ws(), session);
    normalized_updates(&notes)
}

/// Live updates of a prompt as a replay shows them: the prompt first.
fn as_replayed(prompt: &str, live: &[Value]) -> Vec<Value> {
    let mut out = vec![json!({
        "sessionUpdate": "user_message_chunk",
        "content": {"type": "text", "text": prompt},
    })];
    out.extend(normalized_updates(live));
    out
}

#[test]
fn a_deepseek_thinking_tool_turn_completes_with_its_reasoning_sent_back() {
    let server = ModelServer::start(deepseek);
    let scratch = Scratch::new("deepseek-thinking");
    std::fs::write(scratch.ws().join("notes.txt"), "hello from the workspace\n").expect("notes");
    configure(&scratch, &server, "");
    let mut client = AcpClient::start_configured(&scratch, &[]);
    let session = client.open_session(&scratch.ws());

    let (answer, notes) = client.prompt(&session, "What does notes.txt say?");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let live = normalized_updates(&notes);
    assert_eq!(
        texts_of("agent_thought_chunk", &live),
        [TOOL_REASONING, ANSWER_REASONING],
        "the reasoning of both steps is shown: {live:#?}"
    );
    assert_eq!(texts_of("agent_message_chunk", &live), [ANSWER]);
    let result = updates_of("tool_call_update", &live);
    assert_eq!(result.len(), 1, "{live:#?}");
    assert_eq!(result[0]["status"], "completed", "{}", result[0]);
    // The model's text is the last block (a denied call's line for a person comes first).
    let output = result[0]["content"]
        .as_array()
        .and_then(|blocks| blocks.last())
        .and_then(|block| block["content"]["text"].as_str())
        .unwrap_or("");
    assert!(output.starts_with("hello from the workspace\n"), "{output}");

    // The follow-up request carried the reasoning DeepSeek requires; it was not refused.
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "one request per step, none refused");
    let follow_up = &requests[1].body["messages"];
    let assistant = follow_up
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "assistant"))
        .expect("the assistant message of the tool loop");
    assert_eq!(
        assistant["reasoning_content"], TOOL_REASONING,
        "{assistant}"
    );

    // Recorded with the turn: the next prompt sends the earlier tool turn's reasoning back too.
    let log = scratch.log(&session);
    let outputs: Vec<&Value> = log.iter().filter(|r| r["type"] == "model/output").collect();
    assert_eq!(
        outputs[0]["reasoning"],
        json!({"text": TOOL_REASONING, "field": "reasoning_content"})
    );
    let (again, later) = client.prompt(&session, "And now?");
    assert_eq!(again["result"]["stopReason"], "end_turn", "{again}");
    assert_eq!(
        server.requests().len(),
        4,
        "the second turn was not refused either"
    );

    // session/load replays the reasoning where the editor saw it.
    let mut shown = as_replayed("What does notes.txt say?", &notes);
    shown.extend(as_replayed("And now?", &later));
    let replayed = restart_and_load(&mut client, &scratch, &session);
    assert_eq!(replayed, shown);
}

#[test]
fn the_same_server_refuses_a_history_without_the_reasoning() {
    // The control run: with the reasoning kept back, DeepSeek's rule fails the tool turn.
    let server = ModelServer::start(deepseek);
    let scratch = Scratch::new("deepseek-control");
    std::fs::write(scratch.ws().join("notes.txt"), "hello\n").expect("notes");
    configure(&scratch, &server, "send_reasoning = \"never\"\n");
    let mut client = AcpClient::start_configured(&scratch, &[]);
    let session = client.open_session(&scratch.ws());
    let (answer, _) = client.prompt(&session, "What does notes.txt say?");
    let error = &answer["error"];
    assert_eq!(error["code"], -32603, "{answer}");
    assert_eq!(
        error["data"],
        json!({"kind": "http", "status": 400, "retries": 0}),
        "{answer}"
    );
    let message = error["message"].as_str().unwrap_or("");
    assert!(
        message.contains("HTTP 400") && message.contains("Missing `reasoning_content`"),
        "{message}"
    );
}

#[test]
fn a_model_that_always_fails_ends_the_prompt_with_an_internal_error() {
    let server = ModelServer::start(|_, _| Reply::Status {
        code: 500,
        body: r#"{"error":{"message":"upstream exploded"}}"#.into(),
    });
    let scratch = Scratch::new("model-500");
    scratch.config(&format!(
        "[model]\nbase_url = \"{}\"\nmodel = \"m\"\nmax_retries = 1\n",
        server.base_url
    ));
    let mut client = AcpClient::start_configured(&scratch, &[]);
    let session = client.open_session(&scratch.ws());
    let (answer, notes) = client.prompt(&session, "Hello?");

    assert!(answer.get("result").is_none(), "no stop reason: {answer}");
    let error = &answer["error"];
    assert_eq!(error["code"], -32603, "ACP's internal error: {answer}");
    assert_eq!(
        error["data"],
        json!({"kind": "http", "status": 500, "retries": 1}),
        "{answer}"
    );
    let message = error["message"].as_str().unwrap_or("");
    assert!(
        message.contains("HTTP 500") && message.contains("upstream exploded"),
        "{message}"
    );
    assert!(!message.contains("could not be reached"), "{message}");
    assert_eq!(
        server.requests().len(),
        2,
        "the first attempt and one retry"
    );

    // Logged before the answer, and shown the same way live and on load.
    let log = scratch.log(&session);
    let failure = log
        .iter()
        .find(|r| r["type"] == "model/error")
        .expect("model/error logged");
    assert_eq!(
        (&failure["kind"], &failure["status"], &failure["retries"]),
        (&json!("http"), &json!(500), &json!(1))
    );
    let ended = log.last().expect("records");
    assert_eq!(
        (&ended["type"], &ended["stop_reason"]),
        (&json!("turn/ended"), &json!("failed"))
    );
    let live = normalized_updates(&notes);
    let shown = texts_of("agent_message_chunk", &live);
    assert_eq!(shown, [format!("\n\nThe model request failed: {message}")]);
    let replayed = restart_and_load(&mut client, &scratch, &session);
    assert_eq!(replayed, as_replayed("Hello?", &notes));
}

#[test]
fn a_model_that_cannot_be_reached_says_so() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = closed.local_addr().expect("address");
    drop(closed);
    let scratch = Scratch::new("model-unreachable");
    scratch.config(&format!(
        "[model]\nbase_url = \"http://{address}/v1\"\nmodel = \"m\"\nmax_retries = 0\n"
    ));
    let mut client = AcpClient::start_configured(&scratch, &[]);
    let session = client.open_session(&scratch.ws());
    let (answer, _) = client.prompt(&session, "Hello?");
    let error = &answer["error"];
    assert_eq!(
        error["data"],
        json!({"kind": "unreachable", "status": null, "retries": 0}),
        "{answer}"
    );
    let message = error["message"].as_str().unwrap_or("");
    assert!(message.contains("could not be reached"), "{message}");
}

#[test]
fn an_answer_that_breaks_off_is_shown_logged_and_replayed_then_reported() {
    // The first events of a thinking answer, up to some of its text, then the end of the body.
    let answer = fixture("deepseek-thinking-answer.sse");
    let text = String::from_utf8_lossy(&answer).into_owned();
    let cut = text.find("hello from ").expect("the answer text");
    let cut = text[cut..]
        .find("\n\n")
        .map(|at| cut + at + 2)
        .expect("its event's end");
    let partial = answer[..cut].to_vec();
    let server = ModelServer::start(move |_, _| Reply::Stream(partial.clone()));
    let scratch = Scratch::new("model-broke-off");
    configure(&scratch, &server, "");
    let mut client = AcpClient::start_configured(&scratch, &[]);
    let session = client.open_session(&scratch.ws());
    let (response, notes) = client.prompt(&session, "What does notes.txt say?");

    let error = &response["error"];
    assert_eq!(
        error["data"],
        json!({"kind": "interrupted", "status": null, "retries": 0}),
        "{response}"
    );
    assert_eq!(server.requests().len(), 1, "text was shown: no retry");
    let live = normalized_updates(&notes);
    assert_eq!(texts_of("agent_thought_chunk", &live), [ANSWER_REASONING]);
    let shown = texts_of("agent_message_chunk", &live);
    assert_eq!(shown.len(), 1, "{live:#?}");
    assert!(
        shown[0].starts_with("notes.txt says: hello from \n\nThe model request failed: "),
        "the partial text, then the failure: {shown:?}"
    );
    let log = scratch.log(&session);
    let partial = log
        .iter()
        .find(|r| r["type"] == "model/output")
        .expect("what was shown is logged");
    assert_eq!(partial["incomplete"], true, "{partial}");
    assert_eq!(partial["text"], "notes.txt says: hello from ", "{partial}");
    let replayed = restart_and_load(&mut client, &scratch, &session);
    assert_eq!(replayed, as_replayed("What does notes.txt say?", &notes));

    // The broken-off answer is no history: the next request does not contain it.
    let _ = client.prompt(&session, "Again?");
    let requests = server.requests();
    let last = requests.last().expect("a request");
    let history = last.body["messages"].to_string();
    assert!(!history.contains("hello from "), "{history}");
    assert!(history.contains("What does notes.txt say?"), "{history}");
}

#[test]
fn an_explicit_max_tokens_field_overrides_the_providers_rule() {
    let server = ModelServer::start(|_, _| Reply::Stream(fixture("deepseek-thinking-answer.sse")));
    let scratch = Scratch::new("model-limit");
    configure(
        &scratch,
        &server,
        "max_tokens = 900\nmax_tokens_field = \"max_completion_tokens\"\n",
    );
    let mut client = AcpClient::start_configured(&scratch, &[]);
    let session = client.open_session(&scratch.ws());
    let (answer, _) = client.prompt(&session, "Hi");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let body = &server.requests()[0].body;
    assert_eq!(body["max_completion_tokens"], 900, "{body}");
    assert!(body.get("max_tokens").is_none(), "{body}");
}
