//! MCP's streamable HTTP transport (revision 2025-03-26 and later), the client's side: every
//! JSON-RPC message agentd sends is one `POST` to the server's URL; a request's answer comes
//! back as an `application/json` body or as a `text/event-stream` whose events carry the
//! server's messages up to the answer; a notification is accepted with `202`. The
//! `Mcp-Session-Id` the server gives with its `initialize` answer, and the protocol revision it
//! answered, go with every later request; the headers the server was given with (a token, most
//! often) go with every one.
//!
//! There is no process and nothing of the server runs on this machine: agentd itself connects,
//! and only as far as the call's network policy reaches ([`Reach`]). With the network allowed
//! (or in danger-full-access) it connects directly; under the allow-list every connection goes
//! through the allow-list proxy's own gate ([`crate::proxy::gate::open`]): decided by the host's
//! name, the rule against this machine and its link applied to every address it leads to, the
//! [`Decision`] recorded as the proxy records a command's; with the network denied it connects
//! to nothing. The server is not trusted to behave: an answer longer than [`MAX_ANSWER`] bytes is
//! refused, each request has a deadline and a cancel (after which it is withdrawn with
//! `notifications/cancelled`), a stop ([`HttpClient::stop`]) ends every request at once, and the
//! server's own requests in an event stream are answered as the stdio client answers them. One
//! connection per message: nothing is kept open between calls.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{ACCEPT, CONTENT_TYPE, HOST, HeaderValue, USER_AGENT};
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;
use tokio_rustls::{TlsConnector, rustls};

use super::endpoint::{Endpoint, PROTOCOL_VERSION, Reach, SESSION_ID};
use super::rpc::{self, HttpFailure, Message, Rpc, RpcError};
use crate::cancel::{self, Cancel, Canceller};
use crate::http_client::sse::SseParser;
use crate::http_client::{self, chain};
use crate::proxy::gate::{self, Attempt, Gate};
use crate::proxy::gateway::{MAX_KEPT, Shown};
use crate::proxy::upstream::{self, CONNECT_TIMEOUT};
use crate::proxy::{Decision, Decisions, Protocol, SystemResolver};

/// The longest answer a server may send, in bytes: the stdio transport's longest line.
pub const MAX_ANSWER: usize = rpc::MAX_LINE;

/// How long a notification, or an answer to a request of the server's, may take to be
/// delivered: a connection of its own, and TLS, each time.
pub const NOTIFY_TIMEOUT: Duration = Duration::from_secs(10);

/// The most of an error answer's body kept for the message, in bytes.
const MAX_ERROR_BODY: usize = 2000;

/// A stream a request can go over: TCP, or TLS over TCP.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// A connection to one MCP server over streamable HTTP.
pub struct HttpClient {
    endpoint: Endpoint,
    reach: Reach,
    tls: Option<TlsConnector>,
    /// What the server's `initialize` answer set: its session, its protocol revision.
    session: Mutex<Option<HeaderValue>>,
    protocol_version: Mutex<Option<HeaderValue>>,
    next_id: AtomicU64,
    /// The allow-list's decisions since they were last taken.
    decisions: Mutex<Decisions>,
    /// The server answered 404 to a request of its session.
    session_ended: AtomicBool,
    stopper: Canceller,
    stopped: Cancel,
    max_answer: usize,
}

impl fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpClient")
            .field("endpoint", &self.endpoint)
            .field("reach", &self.reach)
            .finish_non_exhaustive()
    }
}

impl HttpClient {
    /// A client of the server at `endpoint`, connecting as far as `reach` allows. Fails when
    /// TLS cannot be set up for an `https://` URL.
    pub fn new(endpoint: Endpoint, reach: Reach) -> Result<HttpClient, rustls::Error> {
        HttpClient::with_max_answer(endpoint, reach, MAX_ANSWER)
    }

    /// [`HttpClient::new`] with another longest answer.
    pub fn with_max_answer(
        endpoint: Endpoint,
        reach: Reach,
        max_answer: usize,
    ) -> Result<HttpClient, rustls::Error> {
        let tls = match endpoint.target.https {
            true => Some(http_client::tls_connector()?),
            false => None,
        };
        let (stopper, stopped) = cancel::pair();
        Ok(HttpClient {
            endpoint,
            reach,
            tls,
            session: Mutex::new(None),
            protocol_version: Mutex::new(None),
            next_id: AtomicU64::new(1),
            decisions: Mutex::new(Decisions::default()),
            session_ended: AtomicBool::new(false),
            stopper,
            stopped,
            max_answer,
        })
    }

    pub fn reach(&self) -> &Reach {
        &self.reach
    }

    /// Whether the server is no longer to be used: it was stopped, or it ended its session.
    pub fn has_ended(&self) -> bool {
        self.stopped.is_cancelled() || self.session_ended.load(Ordering::SeqCst)
    }

    /// Ends every request at once and sends nothing more.
    pub fn stop(&self) {
        self.stopper.cancel();
    }

    /// What the allow-list decided since this was last asked; `None` without one.
    pub fn take_decisions(&self) -> Option<Decisions> {
        match self.reach {
            Reach::AllowList(_) => Some(std::mem::take(
                &mut *self
                    .decisions
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner),
            )),
            Reach::Open | Reach::Denied => None,
        }
    }

    fn record(&self, decision: Decision) {
        let mut all = self
            .decisions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        all.total += 1;
        if all.kept.len() < MAX_KEPT {
            all.kept.push(Shown::from(&decision));
        }
    }

    /// A connection to the server's host, as far as the reach allows.
    async fn connect(&self) -> Result<Box<dyn Io>, HttpFailure> {
        let target = &self.endpoint.target;
        let host = target.host.as_str();
        let unreachable = |e: &dyn std::error::Error| HttpFailure::Unreachable(chain(e));
        let tcp = match &self.reach {
            Reach::Denied => {
                return Err(HttpFailure::NetworkDenied {
                    host: host.to_owned(),
                });
            }
            Reach::Open => {
                let deadline = Instant::now() + CONNECT_TIMEOUT;
                let resolved =
                    upstream::resolve(&SystemResolver, host, target.port, deadline).await;
                let addresses = resolved.map_err(|e| unreachable(&e))?;
                upstream::connect(&addresses, deadline, |_| Ok(()))
                    .await
                    .map_err(|e| unreachable(&e))?
            }
            Reach::AllowList(policy) => {
                // As the proxy would record it had a client asked it for the URL: plain HTTP
                // forwarded, or a tunnel for TLS.
                let protocol = match target.https {
                    true => Protocol::Connect,
                    false => Protocol::Http,
                };
                let attempt = Attempt {
                    host,
                    port: target.port,
                    protocol,
                };
                let record = |decision| self.record(decision);
                match gate::open(attempt, policy, &SystemResolver, &record).await {
                    Gate::Open(tcp) => tcp,
                    Gate::Refused(reason) => {
                        return Err(HttpFailure::Refused {
                            host: host.to_owned(),
                            reason,
                        });
                    }
                    Gate::Failed(e) => return Err(unreachable(&e)),
                }
            }
        };
        let _ = tcp.set_nodelay(true);
        match &self.tls {
            None => Ok(Box::new(tcp)),
            Some(tls) => {
                let handshake = http_client::tls(tls, host, tcp);
                match tokio::time::timeout(CONNECT_TIMEOUT, handshake).await {
                    Ok(Ok(stream)) => Ok(Box::new(stream)),
                    Ok(Err(e)) => Err(unreachable(&e)),
                    Err(_) => Err(HttpFailure::Unreachable(format!(
                        "no TLS handshake within {} s",
                        CONNECT_TIMEOUT.as_secs()
                    ))),
                }
            }
        }
    }

    /// The `POST` of `message`, with every header a request of this server carries.
    fn post(&self, message: &Value) -> Request<Full<Bytes>> {
        let target = &self.endpoint.target;
        let body = Bytes::from(message.to_string());
        let mut request = Request::post(target.target.as_str())
            .header(HOST, target.authority.as_str())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream")
            .header(USER_AGENT, http_client::USER_AGENT)
            .body(Full::new(body))
            .unwrap_or_default();
        let headers = request.headers_mut();
        for (name, value) in &self.endpoint.headers {
            headers.append(name, value.clone());
        }
        let session = self.session.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(session) = session.as_ref() {
            headers.insert(SESSION_ID, session.clone());
        }
        let revision = self
            .protocol_version
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(revision) = revision.as_ref() {
            headers.insert(PROTOCOL_VERSION, revision.clone());
        }
        request
    }

    /// Sends `message` and hands an answer of a success status to `read`. A 404 to a request
    /// of the server's session ends that session; any other status that is not a success is
    /// the error, with the start of its body.
    async fn send<T, R, F>(&self, message: &Value, read: R) -> Result<T, Failed>
    where
        R: FnOnce(Response<Incoming>) -> F,
        F: Future<Output = Result<T, Failed>>,
    {
        if self.stopped.is_cancelled() {
            return Err(Failed::Http(HttpFailure::Stopped));
        }
        if self.session_ended.load(Ordering::SeqCst) {
            return Err(Failed::Http(HttpFailure::SessionEnded));
        }
        let io = self.connect().await?;
        let request = self.post(message);
        let had_session = request.headers().contains_key(SESSION_ID);
        let work = |mut sender: SendRequest<Full<Bytes>>| async move {
            sender.ready().await.map_err(broken)?;
            let response = sender.send_request(request).await.map_err(broken)?;
            let status = response.status();
            if status == StatusCode::NOT_FOUND && had_session {
                self.session_ended.store(true, Ordering::SeqCst);
                return Err(Failed::Http(HttpFailure::SessionEnded));
            }
            if !status.is_success() {
                let body = read_body(response.into_body(), MAX_ERROR_BODY, false).await;
                let body = String::from_utf8_lossy(&body.unwrap_or_default()).into_owned();
                let body = match crate::terminal::one_line(body.trim(), Some(MAX_ERROR_BODY)) {
                    text if text.is_empty() => "(no explanation in the body)".to_owned(),
                    text => text,
                };
                return Err(Failed::Http(HttpFailure::Status {
                    status: status.as_u16(),
                    body,
                }));
            }
            read(response).await
        };
        http_client::exchange(io, work)
            .await
            .map_err(|e| Failed::Http(broken(e)))?
    }

    /// Sends a notification, or an answer to a request of the server's: accepted with any
    /// success status (`202`, as the transport says), whatever the body.
    async fn deliver(&self, message: &Value) -> Result<(), Failed> {
        self.send(message, |_| std::future::ready(Ok(()))).await
    }

    /// Sends request `id` and reads its answer, with the session header that came with it.
    async fn ask(
        &self,
        message: &Value,
        id: u64,
    ) -> Result<(rpc::Reply, Option<HeaderValue>), Failed> {
        self.send(message, |response| async move {
            let session = response.headers().get(SESSION_ID).cloned();
            let reply = self.answer(response, id).await?;
            Ok((reply, session))
        })
        .await
    }

    /// Reads the answer to request `id`: a JSON body that is that answer, or an event stream
    /// that carries it.
    async fn answer(&self, response: Response<Incoming>, id: u64) -> Result<rpc::Reply, Failed> {
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .map(|v| {
                String::from_utf8_lossy(v.as_bytes())
                    .trim()
                    .to_ascii_lowercase()
            })
            .unwrap_or_default();
        let body = response.into_body();
        if content_type.starts_with("text/event-stream") {
            return self.events(body, id).await;
        }
        if !content_type.starts_with("application/json") {
            return Err(Failed::Http(HttpFailure::ContentType(content_type)));
        }
        let whole = read_body(body, self.max_answer, true).await?;
        match rpc::read_message(&whole) {
            Some(Message::Answer {
                id: answered,
                reply,
            }) if answered == id => Ok(reply),
            _ => Err(Failed::Malformed(format!(
                "the body is not the answer to request {id}: {}",
                crate::terminal::one_line(&String::from_utf8_lossy(&whole), Some(200))
            ))),
        }
    }

    /// Reads an event stream until the answer to request `id`, answering the server's own
    /// requests on the way.
    async fn events(&self, mut body: Incoming, id: u64) -> Result<rpc::Reply, Failed> {
        let mut parser = SseParser::new();
        let mut events = Vec::new();
        let mut received = 0usize;
        let mut ended = false;
        while !ended {
            match body.frame().await {
                None => {
                    events.extend(parser.finish());
                    ended = true;
                }
                Some(Err(e)) => return Err(Failed::Http(broken(e))),
                Some(Ok(frame)) => {
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    received += data.len();
                    if received > self.max_answer {
                        return Err(Failed::Http(HttpFailure::TooLarge(self.max_answer)));
                    }
                    parser
                        .push(&data, &mut events)
                        .map_err(|_| Failed::Http(HttpFailure::TooLarge(self.max_answer)))?;
                }
            }
            for event in events.drain(..) {
                match rpc::read_message(event.data.as_bytes()) {
                    Some(Message::Answer {
                        id: answered,
                        reply,
                    }) if answered == id => {
                        return Ok(reply);
                    }
                    Some(Message::Request { answer }) => {
                        let _ = tokio::time::timeout(NOTIFY_TIMEOUT, self.deliver(&answer)).await;
                    }
                    Some(Message::Answer { .. } | Message::Other) | None => {}
                }
            }
        }
        Err(Failed::Http(HttpFailure::NoAnswer))
    }

    /// Tells the server that request `id` is no longer waited for (best effort, at most
    /// [`rpc::WRITE_WAIT`]).
    async fn withdraw(&self, id: u64, why: &RpcError) {
        let params = json!({ "requestId": id, "reason": why.to_string() });
        let message =
            json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": params });
        tokio::select! {
            _ = tokio::time::timeout(rpc::WRITE_WAIT, self.deliver(&message)) => {}
            () = self.stopped.cancelled() => {}
        }
    }
}

/// Why an exchange failed, before it is an [`RpcError`] of a method.
enum Failed {
    Http(HttpFailure),
    Malformed(String),
}

impl From<HttpFailure> for Failed {
    fn from(why: HttpFailure) -> Failed {
        Failed::Http(why)
    }
}

impl Failed {
    fn of(self, method: &str) -> RpcError {
        let method = method.to_owned();
        match self {
            Failed::Http(why) => RpcError::Http { method, why },
            Failed::Malformed(why) => RpcError::Malformed { method, why },
        }
    }
}

fn broken(error: hyper::Error) -> HttpFailure {
    HttpFailure::Broken(chain(&error))
}

/// A body's bytes, at most `max`: beyond, [`HttpFailure::TooLarge`] when `strict`, else the
/// first `max`.
async fn read_body(mut body: Incoming, max: usize, strict: bool) -> Result<Vec<u8>, HttpFailure> {
    let mut whole = Vec::new();
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(broken)?.into_data() else {
            continue;
        };
        if whole.len() + data.len() > max {
            if strict {
                return Err(HttpFailure::TooLarge(max));
            }
            whole.extend(data.iter().take(max.saturating_sub(whole.len())));
            break;
        }
        whole.extend_from_slice(&data);
    }
    Ok(whole)
}

impl Rpc for HttpClient {
    async fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        cancel: &Cancel,
    ) -> Result<Value, RpcError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let message = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        let exchange = async {
            match tokio::time::timeout(timeout, self.ask(&message, id)).await {
                Ok(answered) => answered.map_err(|failed| failed.of(method)),
                Err(_) => Err(RpcError::Timeout {
                    method: method.to_owned(),
                    after: timeout,
                }),
            }
        };
        let waited = tokio::select! {
            answered = exchange => answered,
            () = cancel.cancelled() => Err(RpcError::Cancelled { method: method.to_owned() }),
            () = self.stopped.cancelled() => Err(Failed::Http(HttpFailure::Stopped).of(method)),
        };
        let (reply, session) = match waited {
            Ok(answered) => answered,
            Err(e) => {
                if matches!(e, RpcError::Timeout { .. } | RpcError::Cancelled { .. }) {
                    self.withdraw(id, &e).await;
                }
                return Err(e);
            }
        };
        let result = reply.into_result(method)?;
        if method == "initialize" {
            *self.session.lock().unwrap_or_else(PoisonError::into_inner) = session;
            let revision = result
                .get("protocolVersion")
                .and_then(Value::as_str)
                .and_then(|v| HeaderValue::from_str(v).ok());
            *self
                .protocol_version
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = revision;
        }
        Ok(result)
    }

    /// Waits at most [`NOTIFY_TIMEOUT`] for the server to accept it.
    async fn notify(&self, method: &str, params: Value) -> Result<(), RpcError> {
        let message = json!({ "jsonrpc": "2.0", "method": method, "params": params });
        let delivered = tokio::time::timeout(NOTIFY_TIMEOUT, self.deliver(&message));
        let timed_out = || RpcError::Timeout {
            method: method.to_owned(),
            after: NOTIFY_TIMEOUT,
        };
        tokio::select! {
            delivered = delivered => match delivered {
                Ok(sent) => sent.map_err(|failed| failed.of(method)),
                Err(_) => Err(timed_out()),
            },
            () = self.stopped.cancelled() => Err(Failed::Http(HttpFailure::Stopped).of(method)),
        }
    }
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
