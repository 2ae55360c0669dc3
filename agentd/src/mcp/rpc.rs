//! JSON-RPC 2.0 with an MCP server: what the MCP requests need of a connection, whichever
//! transport carries it ([`Rpc`]), why a request got no usable answer ([`RpcError`], for both
//! transports), how one message from a server is read ([`read_message`]) — and the stdio
//! connection ([`RpcClient`]): one JSON object per line each way, requests with numeric ids
//! answered in any order. The streamable HTTP one is [`super::http`].
//!
//! The server is not trusted to behave. A line longer than [`MAX_LINE`] ends the connection (no
//! unbounded buffer); a line that is not a JSON object is skipped (servers print stray text);
//! an answer to no request is dropped; every request has a deadline and a cancel, after which
//! the server is told `notifications/cancelled`. Whatever goes wrong is an [`RpcError`] for the
//! caller, never a panic. The server's own requests are answered: `ping` with `{}`, anything
//! else with "method not found", since agentd offers MCP servers nothing (no sampling, no
//! roots).

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::cancel::Cancel;
use crate::proxy::Reason;

/// The longest line a server may send, in bytes; a longer one ends the connection.
pub const MAX_LINE: usize = 8 * 1024 * 1024;

/// How long a message agentd sends on its own (a notification, an answer to the server) may
/// wait for the server to read it.
pub const WRITE_WAIT: Duration = Duration::from_secs(1);

/// JSON-RPC's error code for a method the receiver does not have.
const METHOD_NOT_FOUND: i64 = -32601;

/// What the MCP requests need of a connection to a server: stdio ([`RpcClient`]) or streamable
/// HTTP ([`super::http::HttpClient`]).
pub trait Rpc: Sync {
    /// Sends `method` with `params` and waits, at most `timeout` and until `cancel`, for the
    /// result. A request given up on is withdrawn with `notifications/cancelled`.
    fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        cancel: &Cancel,
    ) -> impl Future<Output = Result<Value, RpcError>> + Send;

    /// Sends the notification `method` with `params`.
    fn notify(
        &self,
        method: &str,
        params: Value,
    ) -> impl Future<Output = Result<(), RpcError>> + Send;
}

/// Why a request got no usable answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RpcError {
    #[error("the server did not answer {method} within {}", shown(*after))]
    Timeout { method: String, after: Duration },
    #[error("the connection to the server ended: {0}")]
    Closed(Closed),
    #[error("the server answered {method} with error {code}: {message}")]
    Server {
        method: String,
        code: i64,
        message: String,
    },
    #[error("the server's answer to {method} is not what MCP defines: {why}")]
    Malformed { method: String, why: String },
    #[error("{method} was cancelled before the server answered")]
    Cancelled { method: String },
    #[error("{method} failed: {why}")]
    Http { method: String, why: HttpFailure },
}

/// Why an exchange with a server over HTTP gave no usable answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpFailure {
    /// The session's network is denied under the call's mode and it has no allow-list: agentd
    /// connects to nothing.
    #[error(
        "the session's network is denied, so agentd does not connect to {host}; set \
         sandbox.network = \"allow\", or \"allow-list\" with {host} in sandbox.allowed_domains, \
         or switch the session to danger-full-access"
    )]
    NetworkDenied { host: String },
    /// The session's allow-list refuses the host.
    #[error(
        "the network allow-list refuses {host:?}: {reason}; {}",
        allowing(reason)
    )]
    Refused { host: String, reason: Reason },
    #[error("agentd could not reach the server: {0}")]
    Unreachable(String),
    #[error("the server answered HTTP {status}: {body}")]
    Status { status: u16, body: String },
    /// A request of the server's session was answered 404: the server ended that session.
    #[error("the server ended its MCP session (HTTP 404); the next call starts a new one")]
    SessionEnded,
    #[error("the server's answer is longer than {0} bytes, the most agentd reads")]
    TooLarge(usize),
    #[error(
        "the server answered with Content-Type {0:?}, neither application/json nor \
         text/event-stream"
    )]
    ContentType(String),
    #[error("the server's event stream ended without the answer")]
    NoAnswer,
    #[error("the connection to the server broke: {0}")]
    Broken(String),
    /// The server was stopped while the request waited: the session's mode narrowed, or the
    /// session closed.
    #[error("agentd stopped the server (the session's mode narrowed, or the session closed)")]
    Stopped,
}

/// What would let the session reach a host the allow-list refuses for `reason`.
fn allowing(reason: &Reason) -> &'static str {
    match reason {
        Reason::Denied(_) => "sandbox.denied_domains lists it, which no allowed entry overrides",
        Reason::LocalAddresses(_) => {
            "set sandbox.allow_local_addresses = true to let an allowed name lead to this machine"
        }
        _ => "add it to sandbox.allowed_domains to let the session reach it",
    }
}

/// Why the connection to a server ended.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Closed {
    /// The server closed its output: it exited, most often.
    #[error("the server closed its output")]
    Output,
    /// The server no longer reads its input: it exited, most often.
    #[error("writing to the server failed: {0}")]
    Write(String),
    #[error("reading the server's output failed: {0}")]
    Read(String),
    #[error("the server sent a line longer than {0} bytes, the most agentd reads")]
    LineTooLong(usize),
    #[error("a message could not be encoded: {0}")]
    Encode(String),
}

impl Closed {
    /// Whether the server's side went away (it ended, or closed its pipes), rather than agentd
    /// ending a connection it could not go on with.
    pub fn by_the_server(&self) -> bool {
        matches!(self, Closed::Output | Closed::Write(_))
    }
}

/// A duration as a person reads it: whole seconds, or milliseconds below one.
fn shown(after: Duration) -> String {
    if after >= Duration::from_secs(1) {
        format!("{} s", after.as_secs())
    } else {
        format!("{} ms", after.as_millis())
    }
}

/// What came back for one request.
#[derive(Debug)]
pub(super) enum Reply {
    Result(Value),
    Error { code: i64, message: String },
    Malformed(String),
}

impl Reply {
    /// The reply to `method` as its caller takes it.
    pub(super) fn into_result(self, method: &str) -> Result<Value, RpcError> {
        match self {
            Reply::Result(value) => Ok(value),
            Reply::Error { code, message } => Err(RpcError::Server {
                method: method.to_owned(),
                code,
                message,
            }),
            Reply::Malformed(why) => Err(RpcError::Malformed {
                method: method.to_owned(),
                why,
            }),
        }
    }
}

/// One message from a server, read.
#[derive(Debug)]
pub(super) enum Message {
    /// The answer to agentd's request `id`.
    Answer { id: u64, reply: Reply },
    /// A request of the server's own, with agentd's answer to send back.
    Request { answer: Value },
    /// A notification (progress, logging, list changes), an answer to no request of agentd's,
    /// or no JSON-RPC at all: nothing agentd acts on.
    Other,
}

/// Reads one message from a server: `None` when it is not a JSON object.
pub(super) fn read_message(bytes: &[u8]) -> Option<Message> {
    let Ok(Value::Object(message)) = serde_json::from_slice::<Value>(bytes) else {
        return None;
    };
    Some(match (message.get("method"), message.get("id")) {
        (Some(method), Some(id)) => Message::Request {
            answer: match method.as_str() {
                Some("ping") => json!({ "jsonrpc": "2.0", "id": id, "result": {} }),
                _ => json!({
                    "jsonrpc": "2.0",
                    "id": id,
                    "error": {
                        "code": METHOD_NOT_FOUND,
                        "message": "agentd offers MCP servers no methods but ping"
                    }
                }),
            },
        },
        (None, Some(id)) => match id.as_u64() {
            Some(id) => Message::Answer {
                id,
                reply: reply_of(&message),
            },
            None => Message::Other,
        },
        _ => Message::Other,
    })
}

/// The requests waiting for an answer, and why the connection ended once it did.
#[derive(Debug, Default)]
struct Shared {
    waiting: HashMap<u64, oneshot::Sender<Reply>>,
    ended: Option<Closed>,
}

type Writer = Arc<tokio::sync::Mutex<Box<dyn AsyncWrite + Send + Unpin>>>;

/// One JSON-RPC connection to a server: requests out, answers routed back by id.
pub struct RpcClient {
    writer: Writer,
    shared: Arc<Mutex<Shared>>,
    next_id: AtomicU64,
    reader: JoinHandle<()>,
}

impl std::fmt::Debug for RpcClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RpcClient")
            .field("ended", &self.ended())
            .finish_non_exhaustive()
    }
}

impl Drop for RpcClient {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

impl RpcClient {
    /// A connection that reads the server's lines from `read` and writes to `write`. Must be
    /// made inside the runtime: a task reads the server's output from now on.
    pub fn new<R, W>(read: R, write: W) -> RpcClient
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        RpcClient::with_max_line(read, write, MAX_LINE)
    }

    /// [`RpcClient::new`] with another longest line.
    pub fn with_max_line<R, W>(read: R, write: W, max_line: usize) -> RpcClient
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let writer: Writer = Arc::new(tokio::sync::Mutex::new(Box::new(write)));
        let shared = Arc::new(Mutex::new(Shared::default()));
        let reader = tokio::spawn(read_loop(
            BufReader::new(read),
            max_line,
            shared.clone(),
            writer.clone(),
        ));
        RpcClient {
            writer,
            shared,
            next_id: AtomicU64::new(1),
            reader,
        }
    }

    /// Why the connection ended; `None` while it is open.
    pub fn ended(&self) -> Option<Closed> {
        lock(&self.shared).ended.clone()
    }

    /// Tells the server that request `id` is no longer waited for (best effort).
    async fn withdraw(&self, id: u64, why: &RpcError) {
        let params = json!({ "requestId": id, "reason": why.to_string() });
        let _ = self.notify("notifications/cancelled", params).await;
    }

    fn closed(&self) -> RpcError {
        RpcError::Closed(self.ended().unwrap_or(Closed::Output))
    }
}

impl Rpc for RpcClient {
    async fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        cancel: &Cancel,
    ) -> Result<Value, RpcError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let mut shared = lock(&self.shared);
            if let Some(why) = &shared.ended {
                return Err(RpcError::Closed(why.clone()));
            }
            shared.waiting.insert(id, tx);
        }
        let message = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        let exchange = async {
            send(&self.writer, &message).await?;
            rx.await.map_err(|_| self.closed())
        };
        let waited = tokio::select! {
            answered = tokio::time::timeout(timeout, exchange) => match answered {
                Ok(answer) => answer,
                Err(_) => Err(RpcError::Timeout { method: method.to_owned(), after: timeout }),
            },
            () = cancel.cancelled() => Err(RpcError::Cancelled { method: method.to_owned() }),
        };
        let reply = match waited {
            Ok(reply) => reply,
            Err(e) => {
                lock(&self.shared).waiting.remove(&id);
                if matches!(e, RpcError::Timeout { .. } | RpcError::Cancelled { .. }) {
                    self.withdraw(id, &e).await;
                }
                return Err(e);
            }
        };
        reply.into_result(method)
    }

    /// Waits at most [`WRITE_WAIT`] for the server to read it.
    async fn notify(&self, method: &str, params: Value) -> Result<(), RpcError> {
        let message = json!({ "jsonrpc": "2.0", "method": method, "params": params });
        match tokio::time::timeout(WRITE_WAIT, send(&self.writer, &message)).await {
            Ok(sent) => sent,
            Err(_) => Err(RpcError::Timeout {
                method: method.to_owned(),
                after: WRITE_WAIT,
            }),
        }
    }
}

/// Writes one message as one line.
async fn send(writer: &Writer, message: &Value) -> Result<(), RpcError> {
    let mut line =
        serde_json::to_vec(message).map_err(|e| RpcError::Closed(Closed::Encode(e.to_string())))?;
    line.push(b'\n');
    let mut writer = writer.lock().await;
    let written = async {
        writer.write_all(&line).await?;
        writer.flush().await
    };
    written
        .await
        .map_err(|e| RpcError::Closed(Closed::Write(e.to_string())))
}

/// Reads the server's lines until its output ends, routing each answer to its request; then
/// fails every request still waiting with the reason.
async fn read_loop<R: AsyncBufRead + Unpin>(
    mut read: R,
    max_line: usize,
    shared: Arc<Mutex<Shared>>,
    writer: Writer,
) {
    let why = loop {
        match read_line(&mut read, max_line).await {
            Ok(Some(line)) => handle(&line, &shared, &writer).await,
            Ok(None) => break Closed::Output,
            Err(why) => break why,
        }
    };
    let mut shared = lock(&shared);
    shared.ended = Some(why);
    // Dropping the senders wakes every waiting request, which then reads `ended`.
    shared.waiting.clear();
}

/// One line without its newline, at most `max` bytes; `None` at the end of the output (a last
/// line without a newline still counts).
async fn read_line<R: AsyncBufRead + Unpin>(
    read: &mut R,
    max: usize,
) -> Result<Option<Vec<u8>>, Closed> {
    let mut line = Vec::new();
    loop {
        let buf = read
            .fill_buf()
            .await
            .map_err(|e| Closed::Read(e.to_string()))?;
        if buf.is_empty() {
            return Ok((!line.is_empty()).then_some(line));
        }
        // Up to and with the first newline, or all of it when there is none.
        let piece = buf.split_inclusive(|b| *b == b'\n').next().unwrap_or(buf);
        let (text, ends) = match piece.strip_suffix(b"\n") {
            Some(text) => (text, true),
            None => (piece, false),
        };
        if line.len() + text.len() > max {
            return Err(Closed::LineTooLong(max));
        }
        line.extend_from_slice(text);
        let consumed = piece.len();
        read.consume(consumed);
        if ends {
            return Ok(Some(line));
        }
    }
}

/// One line from the server: an answer is routed to its request, a request of the server's
/// answered, anything else skipped.
async fn handle(line: &[u8], shared: &Mutex<Shared>, writer: &Writer) {
    match read_message(line) {
        Some(Message::Answer { id, reply }) => {
            if let Some(waiting) = lock(shared).waiting.remove(&id) {
                let _ = waiting.send(reply);
            }
        }
        Some(Message::Request { answer }) => {
            let _ = tokio::time::timeout(WRITE_WAIT, send(writer, &answer)).await;
        }
        Some(Message::Other) | None => {}
    }
}

fn reply_of(message: &Map<String, Value>) -> Reply {
    if let Some(error) = message.get("error") {
        let code = error.get("code").and_then(Value::as_i64);
        let text = error.get("message").and_then(Value::as_str);
        return match (code, text) {
            (Some(code), Some(text)) => Reply::Error {
                code,
                message: crate::terminal::one_line(text, Some(ERROR_CHARS)),
            },
            _ => Reply::Malformed(format!("an error without a code and a message: {error}")),
        };
    }
    match message.get("result") {
        Some(result) => Reply::Result(result.clone()),
        None => Reply::Malformed("an answer with neither a result nor an error".to_owned()),
    }
}

/// The most of a server's error message kept, in characters.
const ERROR_CHARS: usize = 2000;

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};

    use super::*;
    use crate::cancel;
    use crate::test_support::within;

    /// A client and the server's ends of its pipes: what it reads, and where it writes.
    fn connected(max_line: usize) -> (RpcClient, Lines<BufReader<DuplexStream>>, DuplexStream) {
        let (client_out, server_in) = tokio::io::duplex(64 * 1024);
        let (server_out, client_in) = tokio::io::duplex(64 * 1024);
        let client = RpcClient::with_max_line(client_in, client_out, max_line);
        (client, BufReader::new(server_in).lines(), server_out)
    }

    async fn next_message(lines: &mut Lines<BufReader<DuplexStream>>) -> Value {
        let line = lines.next_line().await.expect("read").expect("a line");
        serde_json::from_str(&line).expect("json")
    }

    async fn write(out: &mut DuplexStream, text: &str) {
        out.write_all(text.as_bytes()).await.expect("write");
    }

    #[tokio::test]
    async fn answers_are_routed_by_id_whatever_their_order_and_stray_lines_are_skipped() {
        let (client, mut lines, mut out) = connected(MAX_LINE);
        let server = tokio::spawn(async move {
            let first = next_message(&mut lines).await;
            let second = next_message(&mut lines).await;
            assert_eq!(first["jsonrpc"], "2.0");
            assert_eq!(first["method"], "one");
            assert_eq!(second["method"], "two");
            write(&mut out, "starting up...\n[1, 2]\n").await;
            let answer = |id: &Value, value: &str| {
                format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"v\":\"{value}\"}}}}\n")
            };
            write(&mut out, &answer(&second["id"], "second")).await;
            write(&mut out, &answer(&json!(999), "nobody's")).await;
            write(&mut out, &answer(&first["id"], "first")).await;
            (lines, out)
        });
        let never = Cancel::never();
        let wait = Duration::from_secs(10);
        let (one, two) = tokio::join!(
            client.request("one", json!({}), wait, &never),
            client.request("two", json!({"x": 1}), wait, &never),
        );
        assert_eq!(one.expect("one")["v"], "first");
        assert_eq!(two.expect("two")["v"], "second");
        let _ends = within(server).await.expect("server");
        assert_eq!(client.ended(), None);
    }

    #[tokio::test]
    async fn a_server_error_and_a_malformed_answer_are_errors_not_panics() {
        let (client, mut lines, mut out) = connected(MAX_LINE);
        let server = tokio::spawn(async move {
            let m = next_message(&mut lines).await;
            let error = format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{},\"error\":{{\"code\":-32602,\"message\":\"bad \
                 args\\u001b[2J\"}}}}\n",
                m["id"]
            );
            write(&mut out, &error).await;
            let m = next_message(&mut lines).await;
            write(
                &mut out,
                &format!("{{\"jsonrpc\":\"2.0\",\"id\":{}}}\n", m["id"]),
            )
            .await;
            (lines, out)
        });
        let never = Cancel::never();
        let wait = Duration::from_secs(10);
        let err = client
            .request("tools/call", json!({}), wait, &never)
            .await
            .expect_err("an error");
        assert_eq!(
            err.to_string(),
            "the server answered tools/call with error -32602: bad args\\x1b[2J"
        );
        let err = client
            .request("tools/list", json!({}), wait, &never)
            .await
            .expect_err("malformed");
        assert!(
            matches!(&err, RpcError::Malformed { why, .. } if why.contains("neither a result")),
            "{err}"
        );
        let _ends = within(server).await.expect("server");
    }

    #[tokio::test]
    async fn a_request_not_answered_in_time_times_out_and_is_withdrawn() {
        let (client, mut lines, _out) = connected(MAX_LINE);
        let err = within(client.request(
            "slow",
            json!({}),
            Duration::from_millis(50),
            &Cancel::never(),
        ))
        .await
        .expect_err("timed out");
        assert_eq!(
            err.to_string(),
            "the server did not answer slow within 50 ms"
        );
        let request = next_message(&mut lines).await;
        let withdrawn = next_message(&mut lines).await;
        assert_eq!(withdrawn["method"], "notifications/cancelled");
        assert_eq!(withdrawn["params"]["requestId"], request["id"]);
        assert!(withdrawn.get("id").is_none(), "a notification has no id");
    }

    #[tokio::test]
    async fn a_cancelled_request_stops_waiting_at_once() {
        let (client, mut lines, _out) = connected(MAX_LINE);
        let (canceller, cancel) = cancel::pair();
        let asking = client.request("tools/call", json!({}), Duration::from_secs(600), &cancel);
        let cancelling = async {
            let request = next_message(&mut lines).await;
            canceller.cancel();
            request
        };
        let (answer, request) = within(async { tokio::join!(asking, cancelling) }).await;
        assert_eq!(
            answer.expect_err("cancelled"),
            RpcError::Cancelled {
                method: "tools/call".into()
            }
        );
        let withdrawn = next_message(&mut lines).await;
        assert_eq!(withdrawn["params"]["requestId"], request["id"]);
    }

    #[tokio::test]
    async fn the_end_of_the_servers_output_fails_every_waiting_request_with_the_reason() {
        let (client, mut lines, out) = connected(MAX_LINE);
        let server = tokio::spawn(async move {
            let _ = next_message(&mut lines).await;
            drop(out);
            lines
        });
        let err = within(client.request(
            "initialize",
            json!({}),
            Duration::from_secs(600),
            &Cancel::never(),
        ))
        .await
        .expect_err("closed");
        assert_eq!(err, RpcError::Closed(Closed::Output));
        assert_eq!(
            err.to_string(),
            "the connection to the server ended: the server closed its output"
        );
        let _lines = within(server).await.expect("server");
        let again = client
            .request("again", json!({}), Duration::from_secs(1), &Cancel::never())
            .await
            .expect_err("still closed");
        assert!(matches!(again, RpcError::Closed(_)), "{again}");
    }

    #[tokio::test]
    async fn a_line_over_the_limit_ends_the_connection() {
        let (client, mut lines, mut out) = connected(64);
        let server = tokio::spawn(async move {
            let _ = next_message(&mut lines).await;
            write(&mut out, &format!("{}\n", "x".repeat(100))).await;
            (lines, out)
        });
        let err = within(client.request(
            "initialize",
            json!({}),
            Duration::from_secs(600),
            &Cancel::never(),
        ))
        .await
        .expect_err("closed");
        assert_eq!(
            err.to_string(),
            "the connection to the server ended: the server sent a line longer than 64 bytes, \
             the most agentd reads"
        );
        let _ends = within(server).await.expect("server");
    }

    #[tokio::test]
    async fn the_servers_own_requests_are_answered() {
        let (_client, mut lines, mut out) = connected(MAX_LINE);
        write(
            &mut out,
            "{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ping\"}\n\
             {\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"roots/list\"}\n\
             {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n",
        )
        .await;
        let ping = within(next_message(&mut lines)).await;
        assert_eq!(ping, json!({"jsonrpc": "2.0", "id": "p", "result": {}}));
        let roots = within(next_message(&mut lines)).await;
        assert_eq!(roots["id"], 7);
        assert_eq!(roots["error"]["code"], METHOD_NOT_FOUND);
    }

    #[tokio::test]
    async fn a_notification_is_one_line_without_an_id() {
        let (client, mut lines, _out) = connected(MAX_LINE);
        client
            .notify("notifications/initialized", json!({}))
            .await
            .expect("sent");
        let note = within(next_message(&mut lines)).await;
        assert_eq!(
            note,
            json!({"jsonrpc": "2.0", "method": "notifications/initialized", "params": {}})
        );
    }
}
