//! Resources in a prompt over the real `agentd acp` wire, against a local chat-completions
//! server that records what the model is sent: an embedded text resource and a `file:` link
//! reach the model after the prompt's text, the link read confined; a link of another scheme, a
//! binary resource and a file over the cap are named with why they are not included; the log
//! keeps them in `prompt/resources`, and `session/load` replays the prompt as it was written.

mod support;

use serde_json::{Value, json};
use support::acp::{AcpClient, Scratch, normalized_updates};
use support::model_server::{ModelServer, Reply, fixture};

/// A server that answers every request with text, configured as the scratch's model.
fn answering_server(scratch: &Scratch) -> ModelServer {
    let server = ModelServer::start(|_, _| Reply::Stream(fixture("deepseek-thinking-answer.sse")));
    scratch.config(&format!(
        "[model]\nbase_url = \"{}\"\nmodel = \"deepseek-reasoner\"\nmax_retries = 0\n",
        server.base_url
    ));
    server
}

/// The last user message of the first request the server received.
fn last_user_message(server: &ModelServer) -> String {
    let requests = server.requests();
    let messages = requests[0].body["messages"].as_array().expect("messages");
    messages
        .iter()
        .rfind(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .expect("a user message")
        .to_owned()
}

#[test]
fn a_prompts_resources_reach_the_model_and_the_log_and_not_the_replay() {
    let scratch = Scratch::new("prompt-resources");
    let server = answering_server(&scratch);
    let ws = scratch.ws();
    std::fs::write(ws.join("notes.txt"), "the linked file's text\n").expect("notes");
    std::fs::write(ws.join("big.txt"), "x".repeat(70 * 1024)).expect("big");
    let link = |name: &str| format!("file://{}", ws.join(name).display());
    let mut client = AcpClient::start_configured(&scratch, &[]);
    let (init, _) = client.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    assert_eq!(
        init["result"]["agentCapabilities"]["promptCapabilities"]["embeddedContext"], true,
        "{init}"
    );
    let (new, _) = client.request("session/new", json!({"cwd": ws, "mcpServers": []}));
    let session = new["result"]["sessionId"].as_str().expect("id").to_owned();
    let prompt = json!([
        {"type": "text", "text": "Compare these."},
        {"type": "resource", "resource": {"uri": "file:///editor/buffer.rs", "text": "fn main() {}\n"}},
        {"type": "resource_link", "uri": link("notes.txt"), "name": "notes.txt"},
        {"type": "resource_link", "uri": "https://example.org/spec", "name": "spec"},
        {"type": "resource", "resource": {"uri": "file:///editor/logo.png", "blob": "iVBORw0KGgo="}},
        {"type": "resource_link", "uri": link("big.txt"), "name": "big.txt"}
    ]);
    let (answer, _) = client.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": prompt}),
    );
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");

    // What the model was sent: the text, then each resource or why it is not there.
    let user = last_user_message(&server);
    let user = user.as_str();
    let notes = link("notes.txt");
    let big = link("big.txt");
    for expected in [
        "Compare these.\n[resource: file:///editor/buffer.rs]\n",
        "[resource file:///editor/buffer.rs]\nfn main() {}\n[end of resource file:///editor/buffer.rs]",
        &format!("[resource {notes}]\nthe linked file's text\n[end of resource {notes}]"),
        "[resource https://example.org/spec: not included: only file: links to an absolute path are read]",
        "[resource file:///editor/logo.png: not included: it is binary]",
        &format!("[resource {big}: not included: "),
    ] {
        assert!(user.contains(expected), "{expected:?} in {user}");
    }
    assert!(
        !user.contains(&"x".repeat(1024)),
        "the big file is not included"
    );

    // The log keeps them; the replay shows the prompt as written.
    let log = scratch.log(&session);
    let kept: Vec<&Value> = log
        .iter()
        .filter(|r| r["type"] == "prompt/resources")
        .collect();
    assert_eq!(kept.len(), 1, "{log:#?}");
    assert_eq!(kept[0]["resources"].as_array().map(Vec::len), Some(5));
    drop(client);
    let mut again = AcpClient::start_configured(&scratch, &[]);
    again.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let (_, replay) = again.request(
        "session/load",
        json!({"sessionId": session, "cwd": ws, "mcpServers": []}),
    );
    let first = normalized_updates(&replay)
        .into_iter()
        .find(|u| u["sessionUpdate"] == "user_message_chunk")
        .expect("the prompt");
    let shown = first["content"]["text"].as_str().expect("text");
    assert!(
        shown.starts_with("Compare these.\n[resource: file:///editor/buffer.rs]"),
        "{shown}"
    );
    assert!(!shown.contains("fn main"), "{shown}");
}

/// The control: a prompt of text only records no `prompt/resources` and sends the text alone.
#[test]
fn a_prompt_of_text_only_has_no_resources() {
    let scratch = Scratch::new("prompt-resources-none");
    let server = answering_server(&scratch);
    let mut client = AcpClient::start_configured(&scratch, &[]);
    let session = client.open_session(&scratch.ws());
    let (answer, _) = client.prompt(&session, "Just text.");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let user = last_user_message(&server);
    let user = user.as_str();
    assert_eq!(user, "Just text.");
    let log = scratch.log(&session);
    assert!(
        !log.iter().any(|r| r["type"] == "prompt/resources"),
        "{log:#?}"
    );
}
