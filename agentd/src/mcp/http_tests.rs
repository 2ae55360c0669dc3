//! The streamable HTTP client against a small HTTP/1.1 server on 127.0.0.1, one connection per
//! message as the client makes them. Every wait in the server is on a real event (a connection,
//! a request); nothing sleeps to synchronise. What must not reach the server is checked on the
//! listener's own queue, without waiting.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::cancel;
use crate::http_client::test_server::{Received, accept};
use crate::proxy::Reason;
use crate::test_support::within;

async fn listen() -> (TcpListener, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    (listener, address)
}

async fn write(stream: &mut TcpStream, text: &str) {
    stream.write_all(text.as_bytes()).await.expect("write");
}

/// A whole answer with `status`, `extra` header lines and a JSON `body`.
async fn answer_json(stream: &mut TcpStream, extra: &str, body: &Value) {
    let body = body.to_string();
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n{extra}\r\n{body}",
        body.len()
    );
    write(stream, &response).await;
}

async fn accepted(stream: &mut TcpStream) {
    write(
        stream,
        "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    )
    .await;
}

/// The head of an event stream; the events follow, and the end of the connection ends it.
const STREAM_HEAD: &str =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";

fn event(message: &Value) -> String {
    format!("data: {message}\n\n")
}

fn result(request: &Received, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": request.json()["id"], "result": result })
}

fn client(address: SocketAddr, reach: Reach) -> HttpClient {
    let endpoint = Endpoint::new(
        &format!("http://{address}/mcp"),
        &[("X-Token".to_owned(), "t0ken".to_owned())],
    )
    .expect("an endpoint");
    HttpClient::new(endpoint, reach).expect("a client")
}

const WAIT: Duration = Duration::from_secs(10);

/// Whether a connection waits in `listener`'s queue, asked of the kernel without waiting.
fn has_waiting_connection(listener: TcpListener) -> bool {
    let listener = listener.into_std().expect("std listener");
    listener.set_nonblocking(true).expect("non-blocking");
    match listener.accept() {
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
        Err(e) => panic!("accept: {e}"),
    }
}

#[tokio::test]
async fn a_json_answer_is_read_and_the_session_goes_with_every_later_message() {
    let (listener, address) = listen().await;
    let client = client(address, Reach::Open);
    let server = async {
        let (mut stream, init) = accept(&listener).await;
        let answer = result(
            &init,
            json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}}),
        );
        answer_json(&mut stream, "Mcp-Session-Id: s-1\r\n", &answer).await;
        let (mut stream, note) = accept(&listener).await;
        accepted(&mut stream).await;
        let (mut stream, call) = accept(&listener).await;
        let answer = result(&call, json!({"content": [{"type": "text", "text": "hi"}]}));
        answer_json(&mut stream, "", &answer).await;
        (init, note, call)
    };
    let asking = async {
        let init = crate::mcp::protocol::initialize(&client, WAIT).await;
        let called = client
            .request(
                "tools/call",
                json!({"name": "echo"}),
                WAIT,
                &Cancel::never(),
            )
            .await;
        (init, called)
    };
    let ((init, note, call), (initialized, called)) =
        within(async { tokio::join!(server, asking) }).await;
    assert!(initialized.expect("initialized").has_tools);
    assert_eq!(called.expect("called")["content"][0]["text"], "hi");

    assert!(
        init.head.starts_with("POST /mcp HTTP/1.1\r\n"),
        "{}",
        init.head
    );
    assert_eq!(
        init.header("content-type").as_deref(),
        Some("application/json")
    );
    assert_eq!(
        init.header("accept").as_deref(),
        Some("application/json, text/event-stream")
    );
    assert_eq!(init.header("x-token").as_deref(), Some("t0ken"));
    assert_eq!(
        init.header("mcp-session-id"),
        None,
        "no session before its answer"
    );
    assert_eq!(init.json()["method"], "initialize");
    // The notification and the later request carry the session and the revision.
    assert_eq!(note.json()["method"], "notifications/initialized");
    assert!(note.json().get("id").is_none(), "a notification has no id");
    for later in [&note, &call] {
        assert_eq!(later.header("mcp-session-id").as_deref(), Some("s-1"));
        assert_eq!(
            later.header("mcp-protocol-version").as_deref(),
            Some("2025-06-18")
        );
        assert_eq!(later.header("x-token").as_deref(), Some("t0ken"));
    }
    assert_eq!(call.json()["params"], json!({"name": "echo"}));
}

#[tokio::test]
async fn an_event_stream_is_read_past_notifications_to_the_answer_and_server_requests_answered() {
    let (listener, address) = listen().await;
    let client = client(address, Reach::Open);
    let server = async {
        let (mut stream, call) = accept(&listener).await;
        write(&mut stream, STREAM_HEAD).await;
        let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                              "params": {"progress": 1}});
        let stray = json!({"jsonrpc": "2.0", "id": 999, "result": {"not": "ours"}});
        let ping = json!({"jsonrpc": "2.0", "id": "s1", "method": "ping"});
        let roots = json!({"jsonrpc": "2.0", "id": "s2", "method": "roots/list"});
        let events = [&progress, &stray, &ping, &roots].map(event).concat();
        write(
            &mut stream,
            &format!(": a comment\n\ndata: not json\n\n{events}"),
        )
        .await;
        // The client answers the server's requests before it has its own answer.
        let (mut first, pong) = accept(&listener).await;
        accepted(&mut first).await;
        let (mut second, refusal) = accept(&listener).await;
        accepted(&mut second).await;
        let answer = result(
            &call,
            json!({"content": [{"type": "text", "text": "streamed"}]}),
        );
        write(&mut stream, &event(&answer)).await;
        (pong, refusal)
    };
    let never = Cancel::never();
    let asking = client.request("tools/call", json!({}), WAIT, &never);
    let ((pong, refusal), called) = within(async { tokio::join!(server, asking) }).await;
    assert_eq!(called.expect("called")["content"][0]["text"], "streamed");
    assert_eq!(
        pong.json(),
        json!({"jsonrpc": "2.0", "id": "s1", "result": {}})
    );
    assert_eq!(refusal.json()["id"], "s2");
    assert_eq!(refusal.json()["error"]["code"], -32601);
}

#[tokio::test]
async fn a_404_to_a_request_of_the_session_ends_it_and_nothing_more_is_sent() {
    let (listener, address) = listen().await;
    let client = client(address, Reach::Open);
    let server = async {
        let (mut stream, init) = accept(&listener).await;
        let answer = result(&init, json!({"protocolVersion": "2025-06-18"}));
        answer_json(&mut stream, "Mcp-Session-Id: s-2\r\n", &answer).await;
        let (mut stream, _) = accept(&listener).await;
        write(
            &mut stream,
            "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
        )
        .await;
    };
    let asking = async {
        let never = Cancel::never();
        let init = client.request("initialize", json!({}), WAIT, &never).await;
        let gone = client.request("tools/list", json!({}), WAIT, &never).await;
        (init, gone)
    };
    let ((), (init, gone)) = within(async { tokio::join!(server, asking) }).await;
    init.expect("initialized");
    let err = gone.expect_err("the session ended");
    assert_eq!(
        err.to_string(),
        "tools/list failed: the server ended its MCP session (HTTP 404); the next call starts a \
         new one"
    );
    assert!(client.has_ended());
    let again = within(client.request("tools/list", json!({}), WAIT, &Cancel::never()))
        .await
        .expect_err("ended");
    assert!(
        matches!(
            again,
            RpcError::Http {
                why: HttpFailure::SessionEnded,
                ..
            }
        ),
        "{again}"
    );
    assert!(
        !has_waiting_connection(listener),
        "nothing was sent after the 404"
    );
}

/// The error a request gets when the server answers it with `head` and `body` (in which `ID`
/// stands for the request's id) and then closes the connection, from a client that reads at
/// most `max` bytes. A head without a Content-Length is an event stream's, ended by the close.
async fn failure_of(head: &str, body: &str, max: usize) -> RpcError {
    let (listener, address) = listen().await;
    let endpoint = Endpoint::new(&format!("http://{address}/mcp"), &[]).expect("an endpoint");
    let client = HttpClient::with_max_answer(endpoint, Reach::Open, max).expect("a client");
    let server = async {
        let (mut stream, request) = accept(&listener).await;
        let body = body.replace("ID", &request.json()["id"].to_string());
        let head = head.replace("LENGTH", &body.len().to_string());
        write(&mut stream, &format!("{head}{body}")).await;
    };
    let never = Cancel::never();
    let asking = client.request("tools/call", json!({}), WAIT, &never);
    let ((), answer) = within(async { tokio::join!(server, asking) }).await;
    answer.expect_err("a failure")
}

#[tokio::test]
async fn answers_that_cannot_be_used_are_errors_that_say_why() {
    let json =
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: LENGTH\r\n\r\n";
    let too_long = "the server's answer is longer than 100 bytes, the most agentd reads";
    let long_answer = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":ID,\"result\":{{\"t\":\"{}\"}}}}",
        "x".repeat(160)
    );
    let notification = event(&json!({"jsonrpc": "2.0", "method": "notifications/message"}));
    let cases = [
        (json, long_answer.clone(), too_long),
        (STREAM_HEAD, format!("data: {long_answer}\n\n"), too_long),
        (
            json,
            "not json".to_owned(),
            "the server's answer to tools/call is not what MCP defines: the body is not the \
             answer to request 1: not json",
        ),
        (
            json,
            "{\"jsonrpc\":\"2.0\",\"id\":77,\"result\":{}}".to_owned(),
            "the server's answer to tools/call is not what MCP defines: the body is not the \
             answer to request 1",
        ),
        (
            "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: LENGTH\r\n\r\n",
            "hi".to_owned(),
            "the server answered with Content-Type \"text/html\", neither application/json nor \
             text/event-stream",
        ),
        (
            "HTTP/1.1 500 Internal Server Error\r\nContent-Length: LENGTH\r\n\r\n",
            "it broke\r\n\x1b[2J".to_owned(),
            "the server answered HTTP 500: it broke \\x1b[2J",
        ),
        (
            STREAM_HEAD,
            notification,
            "the server's event stream ended without the answer",
        ),
    ];
    for (head, body, expected) in cases {
        let err = failure_of(head, &body, 100).await.to_string();
        let expected = match expected.starts_with("the server's answer to") {
            true => expected.to_owned(),
            false => format!("tools/call failed: {expected}"),
        };
        assert!(err.starts_with(&expected), "{err}\nexpected: {expected}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_request_not_answered_in_time_times_out() {
    let (listener, address) = listen().await;
    let client = client(address, Reach::Open);
    let server = async {
        // Read and never answered; the connection stays open.
        let (stream, request) = accept(&listener).await;
        (stream, request)
    };
    let never = Cancel::never();
    let asking = client.request("tools/call", json!({}), Duration::from_secs(30), &never);
    let ((_stream, request), answer) = tokio::join!(server, asking);
    assert_eq!(request.json()["method"], "tools/call");
    assert_eq!(
        answer.expect_err("timed out").to_string(),
        "the server did not answer tools/call within 30 s"
    );
}

#[tokio::test]
async fn a_cancelled_request_stops_waiting_at_once_and_is_withdrawn() {
    let (listener, address) = listen().await;
    let client = client(address, Reach::Open);
    let (canceller, cancel) = cancel::pair();
    let server = async {
        let (stream, request) = accept(&listener).await;
        canceller.cancel();
        let (mut withdrawal, note) = accept(&listener).await;
        accepted(&mut withdrawal).await;
        (stream, request, note)
    };
    let asking = client.request("tools/call", json!({}), Duration::from_secs(600), &cancel);
    let ((_stream, request, note), answer) = within(async { tokio::join!(server, asking) }).await;
    assert_eq!(
        answer.expect_err("cancelled"),
        RpcError::Cancelled {
            method: "tools/call".into()
        }
    );
    assert_eq!(note.json()["method"], "notifications/cancelled");
    assert_eq!(note.json()["params"]["requestId"], request.json()["id"]);
}

#[tokio::test]
async fn a_stopped_client_ends_its_requests_at_once_and_sends_nothing_more() {
    let (listener, address) = listen().await;
    let client = client(address, Reach::Open);
    let server = async {
        let (stream, _) = accept(&listener).await;
        client.stop();
        stream
    };
    let never = Cancel::never();
    let asking = client.request("tools/call", json!({}), Duration::from_secs(600), &never);
    let (_stream, answer) = within(async { tokio::join!(server, asking) }).await;
    let err = answer.expect_err("stopped");
    assert!(
        matches!(
            err,
            RpcError::Http {
                why: HttpFailure::Stopped,
                ..
            }
        ),
        "{err}"
    );
    assert!(client.has_ended());
    let again = within(client.notify("notifications/x", json!({}))).await;
    assert!(again.is_err(), "{again:?}");
    assert!(
        !has_waiting_connection(listener),
        "no withdrawal, nothing after the stop"
    );
}

#[tokio::test]
async fn with_the_network_denied_nothing_is_connected_to() {
    let (listener, address) = listen().await;
    let client = client(address, Reach::Denied);
    let err = within(client.request("initialize", json!({}), WAIT, &Cancel::never()))
        .await
        .expect_err("denied");
    assert_eq!(
        err.to_string(),
        "initialize failed: the session's network is denied, so agentd does not connect to \
         127.0.0.1; set sandbox.network = \"allow\", or \"allow-list\" with 127.0.0.1 in \
         sandbox.allowed_domains, or switch the session to danger-full-access"
    );
    assert_eq!(client.take_decisions(), None);
    assert!(!has_waiting_connection(listener));
}

#[tokio::test]
async fn under_the_allow_list_only_an_allowed_host_is_connected_to_and_every_decision_is_kept() {
    let policy = crate::proxy::Policy::new(["localhost"], [""; 0])
        .expect("a policy")
        .allowing_local_addresses();
    let reach = Reach::AllowList(Arc::new(policy));

    // An address the list does not name: refused, never connected to.
    let (listener, address) = listen().await;
    let refused = client(address, reach.clone());
    let err = within(refused.request("initialize", json!({}), WAIT, &Cancel::never()))
        .await
        .expect_err("refused");
    assert_eq!(
        err,
        RpcError::Http {
            method: "initialize".into(),
            why: HttpFailure::Refused {
                host: "127.0.0.1".into(),
                reason: Reason::AddressNotListed
            }
        }
    );
    assert!(
        err.to_string()
            .ends_with("; add it to sandbox.allowed_domains to let the session reach it"),
        "{err}"
    );
    let decisions = refused.take_decisions().expect("decisions");
    assert_eq!((decisions.total, decisions.kept[0].allowed), (1, false));
    assert!(!has_waiting_connection(listener));

    // The control: the allowed name, on the same machine, is reached.
    let (listener, address) = listen().await;
    let endpoint = Endpoint::new(&format!("http://localhost:{}/mcp", address.port()), &[])
        .expect("an endpoint");
    let allowed = HttpClient::new(endpoint, reach).expect("a client");
    let server = async {
        let (mut stream, request) = accept(&listener).await;
        answer_json(&mut stream, "", &result(&request, json!({"ok": true}))).await;
        request
    };
    let never = Cancel::never();
    let asking = allowed.request("tools/list", json!({}), WAIT, &never);
    let (request, answer) = within(async { tokio::join!(server, asking) }).await;
    assert_eq!(answer.expect("answered"), json!({"ok": true}));
    assert_eq!(
        request.header("host"),
        Some(format!("localhost:{}", address.port()))
    );
    let decisions = allowed.take_decisions().expect("decisions");
    assert_eq!(decisions.kept[0].host, "localhost");
    assert_eq!(decisions.kept[0].protocol, "http");
    assert!(decisions.kept[0].allowed);
    assert_eq!(
        allowed.take_decisions().expect("taken").total,
        0,
        "taken once"
    );
}

#[tokio::test]
async fn a_listed_address_of_this_machine_is_refused_unless_local_addresses_are_allowed() {
    let policy = crate::proxy::Policy::new(["127.0.0.1"], [""; 0]).expect("a policy");

    let (listener, address) = listen().await;
    let strict = client(address, Reach::AllowList(Arc::new(policy.clone())));
    let err = within(strict.request("initialize", json!({}), WAIT, &Cancel::never()))
        .await
        .expect_err("refused");
    let loopback = crate::proxy::LocalAddress {
        ip: address.ip(),
        why: crate::proxy::Local::Loopback,
    };
    assert_eq!(
        err,
        RpcError::Http {
            method: "initialize".into(),
            why: HttpFailure::Refused {
                host: "127.0.0.1".into(),
                reason: Reason::LocalAddresses(vec![loopback]),
            }
        }
    );
    assert!(
        err.to_string().ends_with(
            "; set sandbox.allow_local_addresses = true to let an allowed name lead to this \
             machine"
        ),
        "{err}"
    );
    let decisions = strict.take_decisions().expect("decisions");
    assert_eq!((decisions.total, decisions.kept[0].allowed), (1, false));
    assert!(!has_waiting_connection(listener));

    // The control: with local addresses allowed, the same server is reached.
    let (listener, address) = listen().await;
    let lenient = client(
        address,
        Reach::AllowList(Arc::new(policy.allowing_local_addresses())),
    );
    let server = async {
        let (mut stream, request) = accept(&listener).await;
        answer_json(&mut stream, "", &result(&request, json!({"ok": true}))).await;
    };
    let never = Cancel::never();
    let asking = lenient.request("tools/list", json!({}), WAIT, &never);
    let ((), answer) = within(async { tokio::join!(server, asking) }).await;
    assert_eq!(answer.expect("answered"), json!({"ok": true}));
}
