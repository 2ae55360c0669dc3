//! A client of OpenAI-compatible chat-completions servers (OpenAI, DeepSeek, vLLM, llama.cpp
//! server, Ollama), streaming.
//!
//! # The HTTP stack
//!
//! [`crate::http_client`], shared with the MCP client: one connection per request (TCP, then
//! TLS for `https://`, then an HTTP/1.1 handshake), driven inside the future
//! [`Provider::complete`] returns rather than in a spawned task, so dropping that future drops the
//! socket and the server sees the connection close at once. Proxies (`HTTPS_PROXY`) are not
//! supported.
//!
//! # Behaviour
//!
//! * Timeouts: 10 s to connect (TCP and TLS), then an idle timeout (default 120 s) for the
//!   response headers and between received bytes, instead of a limit on the whole answer, which
//!   may rightly take minutes.
//! * Retries, with exponential backoff and jitter, bounded by `max_retries` and by a cap on every
//!   wait (`Retry-After`, as seconds or an HTTP date, and `retry-after-ms` honoured up to that
//!   cap): on 429 and 5xx answers, and on every failure a second try may cure that happened
//!   before anything of the answer was delivered — no connection, a connection that failed, no
//!   headers or no body byte within the idle timeout, an answer that ended before any of it was
//!   delivered. Never once a delta was delivered: the user has seen it, and a second answer
//!   would differ.
//! * The stream: server-sent events ([`crate::http_client::sse`]) assembled by [`super::stream`]; `[DONE]` or
//!   a clean end after a `finish_reason` ends it. A server that ignores `stream: true` and
//!   answers one JSON completion is understood too.
//! * The request: the history in the chat-completions format; each assistant message carries
//!   its reasoning back where `send_reasoning` says (see [`super::family`]), in the field it came
//!   in; the token limit goes in the field `max_tokens_field` names.

mod request;
mod settings;

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HOST, HeaderValue, USER_AGENT};
use hyper::{Request, Response, StatusCode};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout, timeout_at};
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls;

use super::retry;
use super::stream::{Flow, StreamState, server_message};
use super::{
    AssistantTurn, ChatRequest, CompleteFuture, Delta, Deltas, ModelError, Provider, excerpt,
};
use crate::http_client::sse::{SseEvent, SseParser};
use crate::http_client::{self, Target, chain, tls_connector};
pub use request::EndpointError;
pub use settings::OpenAiSettings;

/// The chat-completions provider.
pub struct OpenAiProvider {
    settings: OpenAiSettings,
    endpoint: Target,
    authorization: Option<HeaderValue>,
    tls: Option<TlsConnector>,
}

impl fmt::Debug for OpenAiProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiProvider")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// Why a provider cannot be made for the settings.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// `model.base_url` names no endpoint.
    #[error(transparent)]
    Endpoint(#[from] EndpointError),
    /// The API key cannot be sent in a header; `var` is the variable it came from.
    #[error(
        "the API key in {} contains characters an HTTP header cannot carry",
        var.as_deref().unwrap_or("the API key variable")
    )]
    KeyNotAHeader { var: Option<String> },
    /// rustls refused the TLS configuration.
    #[error("cannot set up TLS: {0}")]
    Tls(#[source] rustls::Error),
}

/// How an attempt failed.
enum Failure {
    /// Worth another attempt (nothing of the answer was delivered), after `retry_after` if the
    /// server said.
    Retry {
        error: ModelError,
        retry_after: Option<Duration>,
    },
    /// Final.
    Fatal(ModelError),
}

impl OpenAiProvider {
    /// A provider for these settings. Fails, with a message for the `[model]` table, when the
    /// base URL is not an `http(s)://` URL or the key cannot be sent in a header.
    pub fn new(settings: OpenAiSettings) -> Result<OpenAiProvider, SetupError> {
        let endpoint = request::endpoint(&settings.base_url)?;
        let authorization = match &settings.api_key {
            None => None,
            Some(key) => {
                let mut value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
                    SetupError::KeyNotAHeader {
                        var: settings.api_key_env.clone(),
                    }
                })?;
                value.set_sensitive(true);
                Some(value)
            }
        };
        let tls = if endpoint.https {
            Some(tls_connector().map_err(SetupError::Tls)?)
        } else {
            None
        };
        Ok(OpenAiProvider {
            settings,
            endpoint,
            authorization,
            tls,
        })
    }

    fn request(&self, body: Bytes) -> Request<Full<Bytes>> {
        let mut request = Request::post(self.endpoint.target.as_str())
            .header(HOST, self.endpoint.authority.as_str())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "text/event-stream")
            .header(USER_AGENT, http_client::USER_AGENT)
            .body(Full::new(body))
            .unwrap_or_default();
        if let Some(value) = &self.authorization {
            request.headers_mut().insert(AUTHORIZATION, value.clone());
        }
        request
    }

    fn unreachable(&self, detail: String) -> ModelError {
        ModelError::Unreachable {
            url: self.endpoint.url.clone(),
            detail,
        }
    }

    fn interrupted(&self, detail: String) -> ModelError {
        ModelError::Interrupted {
            url: self.endpoint.url.clone(),
            detail,
        }
    }

    fn timeout_error(&self, waiting_for: &'static str) -> ModelError {
        ModelError::Timeout {
            url: self.endpoint.url.clone(),
            waiting_for,
            after: self.settings.idle_timeout,
        }
    }

    /// One attempt: connect, send, read the answer.
    async fn attempt(&self, body: &Bytes, deltas: &mut Deltas) -> Result<AssistantTurn, Failure> {
        let deadline = Instant::now() + self.settings.connect_timeout;
        let connect_timed_out = || Failure::Retry {
            error: self.unreachable(format!(
                "no connection within {} s; is the server running and model.base_url right?",
                self.settings.connect_timeout.as_secs_f64()
            )),
            retry_after: None,
        };
        let address = (self.endpoint.host.as_str(), self.endpoint.port);
        let tcp = match timeout_at(deadline, TcpStream::connect(address)).await {
            Err(_) => return Err(connect_timed_out()),
            Ok(Err(e)) => {
                return Err(Failure::Retry {
                    error: self.unreachable(format!("cannot connect: {e}")),
                    retry_after: None,
                });
            }
            Ok(Ok(tcp)) => tcp,
        };
        let _ = tcp.set_nodelay(true);
        let Some(tls) = &self.tls else {
            return self.exchange(tcp, body, deltas).await;
        };
        let handshake = http_client::tls(tls, &self.endpoint.host, tcp);
        let stream = match timeout_at(deadline, handshake).await {
            Err(_) => return Err(connect_timed_out()),
            Ok(Err(e)) if e.is_final() => {
                return Err(Failure::Fatal(self.unreachable(e.to_string())));
            }
            Ok(Err(e)) => {
                return Err(Failure::Retry {
                    error: self.unreachable(e.to_string()),
                    retry_after: None,
                });
            }
            Ok(Ok(stream)) => stream,
        };
        self.exchange(stream, body, deltas).await
    }

    /// Runs the HTTP exchange over `io`, driving the connection in this same future.
    async fn exchange<S>(
        &self,
        io: S,
        body: &Bytes,
        deltas: &mut Deltas,
    ) -> Result<AssistantTurn, Failure>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let request = self.request(body.clone());
        let work = |mut sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>| async move {
            let response = match timeout(self.settings.idle_timeout, async {
                sender.ready().await?;
                sender.send_request(request).await
            })
            .await
            {
                // No headers yet: nothing of the answer can have been delivered.
                Err(_) => {
                    return Err(Failure::Retry {
                        error: self.timeout_error("waiting for the answer to start"),
                        retry_after: None,
                    });
                }
                Ok(Err(e)) => {
                    return Err(Failure::Retry {
                        error: self.interrupted(format!(
                            "the connection failed before the answer began: {}",
                            chain(&e)
                        )),
                        retry_after: None,
                    });
                }
                Ok(Ok(response)) => response,
            };
            self.read_response(response, deltas).await
        };
        http_client::exchange(io, work)
            .await
            .map_err(|e| Failure::Retry {
                error: self.interrupted(format!("the HTTP handshake failed: {}", chain(&e))),
                retry_after: None,
            })?
    }

    async fn read_response(
        &self,
        response: Response<Incoming>,
        deltas: &mut Deltas,
    ) -> Result<AssistantTurn, Failure> {
        let status = response.status();
        if !status.is_success() {
            return Err(self.status_failure(response).await);
        }
        let json_body = is_json(&response);
        // Whether anything reached the caller decides whether a failure may be retried.
        let delivered = AtomicBool::new(false);
        let mut body = response.into_body();
        let mut state = StreamState::default();
        let mut parser = SseParser::new();
        let mut events = Vec::new();
        let mut whole = Vec::new();
        let mut received = 0usize;
        while let Some(data) = self.next_data(&mut body, received, &delivered).await? {
            received += data.len();
            if json_body {
                if whole.len() + data.len() > MAX_JSON_BODY {
                    return Err(Failure::Fatal(ModelError::MalformedStream {
                        detail: "a JSON answer larger than 64 MiB".to_owned(),
                        line: excerpt(&String::from_utf8_lossy(&whole), 200),
                    }));
                }
                whole.extend_from_slice(&data);
                continue;
            }
            parser.push(&data, &mut events).map_err(|too_long| {
                Failure::Fatal(ModelError::MalformedStream {
                    detail: "an event line longer than 16 MiB".to_owned(),
                    line: too_long.start,
                })
            })?;
            for event in events.drain(..) {
                if take_event(&mut state, &event, deltas, &delivered).await? == Flow::Done {
                    return state.finish().map_err(Failure::Fatal);
                }
            }
        }
        if json_body {
            return json_answer(state, &whole, deltas, &delivered).await;
        }
        self.stream_end(state, parser, received, deltas, &delivered)
            .await
    }

    /// The next bytes of the answer's body, `None` at its end, waiting at most the idle
    /// timeout; `received` bytes of it came before.
    async fn next_data(
        &self,
        body: &mut Incoming,
        received: usize,
        delivered: &AtomicBool,
    ) -> Result<Option<Bytes>, Failure> {
        loop {
            let waiting_for = if received == 0 {
                "waiting for the answer to start"
            } else {
                "waiting for the answer to continue"
            };
            let frame = match timeout(self.settings.idle_timeout, body.frame()).await {
                Err(_) => return Err(failed(delivered, self.timeout_error(waiting_for))),
                Ok(None) => return Ok(None),
                Ok(Some(Err(e))) if received == 0 => {
                    return Err(failed(
                        delivered,
                        self.interrupted(format!(
                            "the connection broke before the answer began: {}",
                            chain(&e)
                        )),
                    ));
                }
                Ok(Some(Err(e))) => {
                    return Err(failed(
                        delivered,
                        self.interrupted(format!(
                            "the connection broke in the middle of the answer (after {received} \
                             bytes): {}",
                            chain(&e)
                        )),
                    ));
                }
                Ok(Some(Ok(frame))) => frame,
            };
            if let Ok(data) = frame.into_data() {
                return Ok(Some(data));
            }
        }
    }

    /// The answer once an event stream's body ended after `received` bytes: its last event
    /// taken in, and an error unless the answer was complete.
    async fn stream_end(
        &self,
        mut state: StreamState,
        mut parser: SseParser,
        received: usize,
        deltas: &mut Deltas,
        delivered: &AtomicBool,
    ) -> Result<AssistantTurn, Failure> {
        if let Some(event) = parser.finish()
            && take_event(&mut state, &event, deltas, delivered).await? == Flow::Done
        {
            return state.finish().map_err(Failure::Fatal);
        }
        if !state.finished() {
            let detail = if received == 0 {
                "the server ended the answer without sending any of it".to_owned()
            } else {
                format!(
                    "the server ended the answer before it was complete (after {received} bytes, \
                     without a finish_reason or [DONE])"
                )
            };
            return Err(failed(delivered, self.interrupted(detail)));
        }
        state.finish().map_err(Failure::Fatal)
    }

    /// The failure for an error status, with the server's explanation.
    async fn status_failure(&self, response: Response<Incoming>) -> Failure {
        let status = response.status();
        let retry_after = retry::server_wait(response.headers(), SystemTime::now());
        let mut body = response.into_body();
        let mut text = Vec::new();
        while text.len() < MAX_ERROR_BODY {
            match timeout(self.settings.idle_timeout, body.frame()).await {
                Ok(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        text.extend_from_slice(&data);
                    }
                }
                _ => break,
            }
        }
        let text = String::from_utf8_lossy(&text);
        let explanation = server_message(&text)
            .map(|m| excerpt(&m, 500))
            .unwrap_or_else(|| excerpt(&text, 500));
        let error = ModelError::Status {
            status: status.as_u16(),
            url: self.endpoint.url.clone(),
            body: if explanation.is_empty() {
                "(no explanation in the body)".to_owned()
            } else {
                explanation
            },
            hint: self.status_hint(status),
        };
        if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
            Failure::Retry { error, retry_after }
        } else {
            Failure::Fatal(error)
        }
    }

    fn status_hint(&self, status: StatusCode) -> String {
        match status.as_u16() {
            401 | 403 => match &self.settings.api_key_env {
                Some(var) => format!("; check the API key in {var}"),
                None => "; the server wants an API key: set model.api_key_env to the name of the \
                         variable that holds it"
                    .to_owned(),
            },
            404 => "; check model.base_url (it usually ends in /v1) and model.model".to_owned(),
            429 => "; rate limited or out of quota: wait, or check the account's limits".to_owned(),
            500..=599 => "; the server failed: try again later".to_owned(),
            _ => String::new(),
        }
    }
}

/// Whether the server answered one JSON completion instead of an event stream.
fn is_json(response: &Response<Incoming>) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim()
                .to_ascii_lowercase()
                .starts_with("application/json")
        })
}

/// The failure of an answer that broke off: retried unless something of it was `delivered`.
fn failed(delivered: &AtomicBool, error: ModelError) -> Failure {
    if delivered.load(Ordering::Relaxed) {
        Failure::Fatal(error)
    } else {
        Failure::Retry {
            error,
            retry_after: None,
        }
    }
}

/// The answer of a server that sent one JSON completion, `whole`, its deltas handed on.
async fn json_answer(
    mut state: StreamState,
    whole: &[u8],
    deltas: &mut Deltas,
    delivered: &AtomicBool,
) -> Result<AssistantTurn, Failure> {
    let text = String::from_utf8_lossy(whole);
    let mut pending = Vec::new();
    state
        .on_chunk(&text, &mut |d| pending.push(d))
        .map_err(Failure::Fatal)?;
    deliver(pending, deltas, delivered).await;
    state.finish().map_err(Failure::Fatal)
}

/// Takes in one event and hands its deltas on ([`deliver`]) before the next frame is read: while
/// the caller is behind, the body is not read and the server's writes wait.
async fn take_event(
    state: &mut StreamState,
    event: &SseEvent,
    deltas: &mut Deltas,
    delivered: &AtomicBool,
) -> Result<Flow, Failure> {
    let mut pending = Vec::new();
    let flow = state
        .on_event(event, &mut |d| pending.push(d))
        .map_err(Failure::Fatal)?;
    deliver(pending, deltas, delivered).await;
    Ok(flow)
}

/// Hands `pending` to `deltas`, in order, noting in `delivered` that some were.
async fn deliver(pending: Vec<Delta>, deltas: &mut Deltas, delivered: &AtomicBool) {
    for delta in pending {
        delivered.store(true, Ordering::Relaxed);
        deltas.send(delta).await;
    }
}

const MAX_ERROR_BODY: usize = 8 << 10;
const MAX_JSON_BODY: usize = 64 << 20;

impl Provider for OpenAiProvider {
    fn complete<'a>(&'a self, req: &'a ChatRequest, deltas: &'a mut Deltas) -> CompleteFuture<'a> {
        Box::pin(async move {
            let body = Bytes::from(request::request_body(&self.settings, req));
            let mut attempts = 0u32;
            loop {
                attempts += 1;
                match self.attempt(&body, &mut *deltas).await {
                    Ok(turn) => return Ok(turn),
                    Err(Failure::Fatal(error)) if attempts == 1 => return Err(error),
                    Err(Failure::Fatal(error)) => {
                        return Err(ModelError::AfterRetries {
                            retries: attempts - 1,
                            last: Box::new(error),
                        });
                    }
                    Err(Failure::Retry { error, retry_after }) => {
                        if attempts > self.settings.max_retries {
                            if attempts == 1 {
                                return Err(error);
                            }
                            return Err(ModelError::RetriesExhausted {
                                attempts,
                                last: Box::new(error),
                            });
                        }
                        let wait = match retry_after {
                            Some(wait) => wait.min(self.settings.retry_max_delay),
                            None => retry::backoff(
                                self.settings.retry_base_delay,
                                self.settings.retry_max_delay,
                                attempts - 1,
                            ),
                        };
                        // The wait between attempts (the backoff), not a synchronisation.
                        tokio::time::sleep(wait).await;
                    }
                }
            }
        })
    }

    fn describe(&self) -> String {
        format!(
            "{} at {}",
            self.settings.model,
            self.settings.base_url.trim()
        )
    }
}

#[cfg(test)]
#[path = "openai_tests.rs"]
mod tests;
