//! A client of OpenAI-compatible chat-completions servers (OpenAI, DeepSeek, vLLM, llama.cpp
//! server, Ollama), streaming.
//!
//! # The HTTP stack
//!
//! One streamed `POST` per turn needs little of an HTTP library: no redirects, cookies, HTTP/2 or
//! connection pool. Two stacks were weighed:
//!
//! * `reqwest` (0.13, default features off). Its rustls feature now brings the aws-lc-rs
//!   provider, whose build wants cmake/nasm; `rustls-no-provider` avoids that but still pulls in
//!   the platform certificate verifier, `url` with its Unicode (ICU) tables, `tower` and
//!   `tower-http`: about 210 lines of `cargo tree -e normal` for a hello-world against 59 below.
//! * hyper 1 (`client`, `http1`) with `hyper-util`'s tokio adapter, `tokio-rustls` over rustls
//!   with the `ring` provider, and the Mozilla roots compiled in from `webpki-roots`. About 30
//!   small crates; `ring` builds its C and pre-generated assembly with the system C compiler
//!   alone, and no system certificate store is needed.
//!
//! For agentd the second meant 22 more crates (`cargo tree -p agentd -e normal`: 77 lines before,
//! 128 after) and about 10 s of clean debug build on two cores, half of it rustls itself.
//!
//! This module uses the second. It wires the pieces by hand: one connection per request (TCP,
//! then TLS for `https://`, then an HTTP/1.1 handshake), driven inside the future
//! [`Provider::complete`] returns rather than in a spawned task, so dropping that future drops the
//! socket and the server sees the connection close at once. Proxies (`HTTPS_PROXY`) are not
//! supported.
//!
//! # Behaviour
//!
//! * Timeouts: 10 s to connect (TCP and TLS), then an idle timeout between received bytes
//!   (default 120 s) instead of a limit on the whole answer, which may rightly take minutes.
//! * Retries, with exponential backoff and jitter (`Retry-After` seconds honoured, every wait
//!   capped): on 429 and 5xx answers and on connections that failed before any byte of the
//!   response body arrived. Never once the body started, because deltas may have been delivered.
//! * The stream: server-sent events ([`super::sse`]), `[DONE]` or a clean end after a
//!   `finish_reason` ends it; tool calls are assembled from deltas keyed by `index`, tolerating
//!   servers that send a whole call in one delta or no `index` at all. A server that ignores
//!   `stream: true` and answers one JSON completion is understood too.

use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{
    ACCEPT, AUTHORIZATION, CONTENT_TYPE, HOST, HeaderValue, RETRY_AFTER, USER_AGENT,
};
use hyper::{Request, Response, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout, timeout_at};
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls;

use super::sse::{SseEvent, SseParser};
use super::{
    AssistantTurn, ChatRequest, CompleteFuture, Delta, FinishReason, Message, ModelError, Provider,
    ToolCall, Usage, excerpt,
};

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
    /// starting at 500 ms and capped at 30 s.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> OpenAiSettings {
        OpenAiSettings {
            base_url: base_url.into(),
            model: model.into(),
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

/// The chat-completions provider.
pub struct OpenAiProvider {
    settings: OpenAiSettings,
    endpoint: Endpoint,
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

/// Where requests go.
#[derive(Debug, Clone)]
struct Endpoint {
    https: bool,
    /// The host to connect to and to name in TLS (an IPv6 literal without brackets).
    host: String,
    port: u16,
    /// The `Host` header.
    authority: String,
    /// The request target: the path and query of `.../chat/completions`.
    target: String,
    /// The full URL, for messages.
    url: String,
}

impl Endpoint {
    fn parse(base_url: &str) -> Result<Endpoint, String> {
        let base_url = base_url.trim();
        let after_scheme = base_url.split_once("://").map_or("", |(_, rest)| rest);
        let authority_part = after_scheme.split(['/', '?']).next().unwrap_or("");
        if authority_part.contains('@') {
            return Err(
                "model.base_url must not contain credentials; put the API key in the \
                 variable model.api_key_env names"
                    .to_owned(),
            );
        }
        let not_http = || {
            format!(
                "model.base_url {base_url:?} is not an http:// or https:// URL (for example \
                 https://api.openai.com/v1 or http://localhost:11434/v1)"
            )
        };
        let (base, query) = match base_url.split_once('?') {
            Some((base, query)) => (base, Some(query)),
            None => (base_url, None),
        };
        let url = match query {
            Some(query) => format!("{}/chat/completions?{query}", base.trim_end_matches('/')),
            None => format!("{}/chat/completions", base.trim_end_matches('/')),
        };
        let uri: Uri = url.parse().map_err(|_| not_http())?;
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(not_http()),
        };
        let authority = uri.authority().ok_or_else(not_http)?;
        let host = authority.host();
        if host.is_empty() {
            return Err(not_http());
        }
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        let target = uri
            .path_and_query()
            .map_or("/chat/completions", |pq| pq.as_str())
            .to_owned();
        Ok(Endpoint {
            https,
            host: host.to_owned(),
            port: authority.port_u16().unwrap_or(if https { 443 } else { 80 }),
            authority: authority.as_str().to_owned(),
            target,
            url,
        })
    }
}

/// How an attempt failed.
enum Failure {
    /// Worth another attempt (nothing was delivered), after `retry_after` if the server said.
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
    pub fn new(settings: OpenAiSettings) -> Result<OpenAiProvider, String> {
        let endpoint = Endpoint::parse(&settings.base_url)?;
        let authorization =
            match &settings.api_key {
                None => None,
                Some(key) => {
                    let mut value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
                    let var = settings.api_key_env.as_deref().unwrap_or("the API key variable");
                    format!("the API key in {var} contains characters an HTTP header cannot carry")
                })?;
                    value.set_sensitive(true);
                    Some(value)
                }
            };
        let tls = if endpoint.https {
            Some(tls_connector().map_err(|e| format!("cannot set up TLS: {e}"))?)
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

    /// The JSON body of a request for `req`.
    fn request_body(&self, req: &ChatRequest) -> Vec<u8> {
        let messages: Vec<Value> = req.messages.iter().map(wire_message).collect();
        let mut body = json!({
            "model": self.settings.model,
            "messages": messages,
            "stream": true,
        });
        if !req.tools.is_empty() {
            body["tools"] = req
                .tools
                .iter()
                .map(|tool| {
                    json!({
                        "type": "function",
                        "function": {
                            "name": tool.name,
                            "description": tool.description,
                            "parameters": tool.parameters,
                        },
                    })
                })
                .collect();
        }
        if let Some(max_tokens) = self.settings.max_tokens {
            body["max_tokens"] = json!(max_tokens);
        }
        if let Some(temperature) = self.settings.temperature {
            body["temperature"] = json!(temperature);
        }
        if self.settings.include_usage {
            body["stream_options"] = json!({ "include_usage": true });
        }
        body.to_string().into_bytes()
    }

    fn request(&self, body: Bytes) -> Request<Full<Bytes>> {
        let mut request = Request::post(self.endpoint.target.as_str())
            .header(HOST, self.endpoint.authority.as_str())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "text/event-stream")
            .header(USER_AGENT, concat!("agentd/", env!("CARGO_PKG_VERSION")))
            .body(Full::new(body))
            .unwrap_or_default();
        if let Some(value) = &self.authorization {
            request.headers_mut().insert(AUTHORIZATION, value.clone());
        }
        request
    }

    fn connection_error(&self, detail: String) -> ModelError {
        ModelError::Connection {
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
    async fn attempt(
        &self,
        body: &Bytes,
        on_delta: &mut (dyn FnMut(Delta) + Send),
    ) -> Result<AssistantTurn, Failure> {
        let deadline = Instant::now() + self.settings.connect_timeout;
        let connect_timed_out = || Failure::Retry {
            error: self.connection_error(format!(
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
                    error: self.connection_error(format!("cannot connect: {e}")),
                    retry_after: None,
                });
            }
            Ok(Ok(tcp)) => tcp,
        };
        let _ = tcp.set_nodelay(true);
        let Some(tls) = &self.tls else {
            return self.exchange(tcp, body, on_delta).await;
        };
        let server_name = rustls::pki_types::ServerName::try_from(self.endpoint.host.clone())
            .map_err(|e| {
                Failure::Fatal(self.connection_error(format!("not a TLS server name: {e}")))
            })?;
        let stream = match timeout_at(deadline, tls.connect(server_name, tcp)).await {
            Err(_) => return Err(connect_timed_out()),
            // rustls reports its own failures (certificates, protocol) as InvalidData; those
            // will not change on a second try.
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::InvalidData => {
                return Err(Failure::Fatal(
                    self.connection_error(format!("the TLS handshake failed: {e}")),
                ));
            }
            Ok(Err(e)) => {
                return Err(Failure::Retry {
                    error: self.connection_error(format!("the TLS handshake failed: {e}")),
                    retry_after: None,
                });
            }
            Ok(Ok(stream)) => stream,
        };
        self.exchange(stream, body, on_delta).await
    }

    /// Runs the HTTP exchange over `io`, driving the connection in this same future.
    async fn exchange<S>(
        &self,
        io: S,
        body: &Bytes,
        on_delta: &mut (dyn FnMut(Delta) + Send),
    ) -> Result<AssistantTurn, Failure>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io))
            .await
            .map_err(|e| Failure::Retry {
                error: self.connection_error(format!("HTTP handshake failed: {}", chain(&e))),
                retry_after: None,
            })?;
        let request = self.request(body.clone());
        let work = async {
            let response = match timeout(self.settings.idle_timeout, async {
                sender.ready().await?;
                sender.send_request(request).await
            })
            .await
            {
                Err(_) => {
                    return Err(Failure::Fatal(
                        self.timeout_error("waiting for the answer to start"),
                    ));
                }
                Ok(Err(e)) => {
                    return Err(Failure::Retry {
                        error: self.connection_error(format!(
                            "the connection failed before the answer began: {}",
                            chain(&e)
                        )),
                        retry_after: None,
                    });
                }
                Ok(Ok(response)) => response,
            };
            self.read_response(response, on_delta).await
        };
        let mut connection = std::pin::pin!(connection);
        let mut work = std::pin::pin!(work);
        let mut connection_done = false;
        loop {
            tokio::select! {
                biased;
                result = &mut work => return result,
                // Once the connection is done (closed or failed), what it delivered is still
                // buffered for `work`, which sees any failure as a body error.
                _ = &mut connection, if !connection_done => connection_done = true,
            }
        }
    }

    async fn read_response(
        &self,
        response: Response<Incoming>,
        on_delta: &mut (dyn FnMut(Delta) + Send),
    ) -> Result<AssistantTurn, Failure> {
        let status = response.status();
        if !status.is_success() {
            return Err(self.status_failure(response).await);
        }
        let json_body = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                v.trim()
                    .to_ascii_lowercase()
                    .starts_with("application/json")
            });
        let mut body = response.into_body();
        let mut state = StreamState::default();
        let mut parser = SseParser::new();
        let mut events = Vec::new();
        let mut whole = Vec::new();
        let mut received = 0usize;
        loop {
            let waiting_for = if received == 0 {
                "waiting for the answer to start"
            } else {
                "waiting for the answer to continue"
            };
            let frame = match timeout(self.settings.idle_timeout, body.frame()).await {
                Err(_) => return Err(Failure::Fatal(self.timeout_error(waiting_for))),
                Ok(None) => break,
                Ok(Some(Err(e))) if received == 0 => {
                    return Err(Failure::Retry {
                        error: self.connection_error(format!(
                            "the connection broke before the answer began: {}",
                            chain(&e)
                        )),
                        retry_after: None,
                    });
                }
                Ok(Some(Err(e))) => {
                    return Err(Failure::Fatal(self.connection_error(format!(
                        "the connection broke in the middle of the answer (after {received} \
                         bytes): {}",
                        chain(&e)
                    ))));
                }
                Ok(Some(Ok(frame))) => frame,
            };
            let Ok(data) = frame.into_data() else {
                continue;
            };
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
                if state.on_event(&event, on_delta).map_err(Failure::Fatal)? == Flow::Done {
                    return state.finish().map_err(Failure::Fatal);
                }
            }
        }
        if json_body {
            let text = String::from_utf8_lossy(&whole);
            state.on_chunk(&text, on_delta).map_err(Failure::Fatal)?;
            return state.finish().map_err(Failure::Fatal);
        }
        if let Some(event) = parser.finish() {
            if state.on_event(&event, on_delta).map_err(Failure::Fatal)? == Flow::Done {
                return state.finish().map_err(Failure::Fatal);
            }
        }
        if state.finish_reason.is_none() {
            let detail = if received == 0 {
                "the server answered with an empty body".to_owned()
            } else {
                format!(
                    "the server ended the answer before it was complete (after {received} bytes, \
                     without a finish_reason or [DONE])"
                )
            };
            return Err(Failure::Fatal(self.connection_error(detail)));
        }
        state.finish().map_err(Failure::Fatal)
    }

    /// The failure for an error status, with the server's explanation.
    async fn status_failure(&self, response: Response<Incoming>) -> Failure {
        let status = response.status();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|secs| secs.is_finite() && *secs >= 0.0)
            .map(|secs| Duration::from_secs_f64(secs.min(86_400.0)));
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

    /// The wait before retry number `retry` (0 for the first): the base delay doubled per retry,
    /// capped, then between half of it and all of it.
    fn backoff(&self, retry: u32) -> Duration {
        let full = self
            .settings
            .retry_base_delay
            .saturating_mul(1u32 << retry.min(20))
            .min(self.settings.retry_max_delay);
        let half = full / 2;
        half + half.mul_f64(jitter())
    }
}

const MAX_ERROR_BODY: usize = 8 << 10;
const MAX_JSON_BODY: usize = 64 << 20;

impl Provider for OpenAiProvider {
    fn complete<'a>(
        &'a self,
        req: &'a ChatRequest,
        on_delta: &'a mut (dyn FnMut(Delta) + Send),
    ) -> CompleteFuture<'a> {
        Box::pin(async move {
            let body = Bytes::from(self.request_body(req));
            let mut attempts = 0u32;
            loop {
                attempts += 1;
                match self.attempt(&body, &mut *on_delta).await {
                    Ok(turn) => return Ok(turn),
                    Err(Failure::Fatal(error)) => return Err(error),
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
                            None => self.backoff(attempts - 1),
                        };
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

/// A number in [0, 1) that differs between calls, for backoff jitter.
fn jitter() -> f64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

fn tls_connector() -> Result<TlsConnector, rustls::Error> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsConnector::from(Arc::new(config)))
}

/// An error and its sources, joined.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}

/// The explanation in an error body such as `{"error": {"message": "..."}}`.
fn server_message(body: &str) -> Option<String> {
    let value: Value = serde_json::from_str(body).ok()?;
    value_message(&value)
}

fn value_message(value: &Value) -> Option<String> {
    let error = value.get("error").unwrap_or(value);
    match error {
        Value::String(message) => Some(message.clone()),
        Value::Object(fields) => match fields.get("message") {
            Some(Value::String(message)) => Some(message.clone()),
            _ => Some(error.to_string()),
        },
        _ => None,
    }
}

/// A history entry in the chat-completions wire format.
fn wire_message(message: &Message) -> Value {
    match message {
        Message::System { content } => json!({ "role": "system", "content": content }),
        Message::User { content } => json!({ "role": "user", "content": content }),
        Message::Assistant { text, tool_calls } => {
            // `content` may be null only beside tool calls.
            let content = match text {
                Some(text) => json!(text),
                None if tool_calls.is_empty() => json!(""),
                None => Value::Null,
            };
            let mut wire = json!({ "role": "assistant", "content": content });
            if !tool_calls.is_empty() {
                wire["tool_calls"] = tool_calls
                    .iter()
                    .map(|call| {
                        json!({
                            "id": call.id,
                            "type": "function",
                            "function": { "name": call.name, "arguments": call.arguments },
                        })
                    })
                    .collect();
            }
            wire
        }
        Message::Tool {
            tool_call_id,
            content,
        } => json!({ "role": "tool", "tool_call_id": tool_call_id, "content": content }),
    }
}

/// One streamed chunk (or, with `message` for `delta`, a whole non-streamed completion).
#[derive(Debug, Deserialize)]
struct WireChunk {
    choices: Option<Vec<WireChoice>>,
    usage: Option<Usage>,
    error: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct WireChoice {
    index: Option<u64>,
    #[serde(alias = "message")]
    delta: Option<WireDelta>,
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireDelta {
    content: Option<String>,
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Debug, Deserialize)]
struct WireToolCall {
    index: Option<usize>,
    id: Option<String>,
    function: Option<WireFunction>,
}

#[derive(Debug, Deserialize)]
struct WireFunction {
    name: Option<String>,
    /// A string of JSON text as the spec says; some servers send the object itself.
    arguments: Option<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    More,
    Done,
}

/// A tool call being assembled.
#[derive(Debug, Default)]
struct PartialCall {
    /// The `index` the server keys it by, if it sends one.
    server_index: Option<usize>,
    id: Option<String>,
    name: String,
    arguments: String,
    /// `ToolCallStarted` was delivered.
    started: bool,
}

/// The turn assembled from the stream so far.
#[derive(Debug, Default)]
struct StreamState {
    text: String,
    calls: Vec<PartialCall>,
    /// The last `finish_reason` a choice delta carried.
    finish_reason: Option<String>,
    usage: Option<Usage>,
}

impl StreamState {
    fn on_event(
        &mut self,
        event: &SseEvent,
        on_delta: &mut (dyn FnMut(Delta) + Send),
    ) -> Result<Flow, ModelError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            return Ok(Flow::Done);
        }
        if event.event == "error" {
            let message = server_message(data).unwrap_or_else(|| excerpt(data, 500));
            return Err(ModelError::Server { message });
        }
        if data.is_empty() {
            return Ok(Flow::More);
        }
        self.on_chunk(data, on_delta)?;
        Ok(Flow::More)
    }

    fn on_chunk(
        &mut self,
        data: &str,
        on_delta: &mut (dyn FnMut(Delta) + Send),
    ) -> Result<(), ModelError> {
        let chunk: WireChunk =
            serde_json::from_str(data).map_err(|e| ModelError::MalformedStream {
                detail: format!("an event is not a chat-completion chunk: {e}"),
                line: excerpt(data, 300),
            })?;
        if let Some(error) = chunk.error.filter(|e| !e.is_null()) {
            let message = value_message(&error).unwrap_or_else(|| error.to_string());
            return Err(ModelError::Server {
                message: excerpt(&message, 500),
            });
        }
        if chunk.usage.is_some() {
            self.usage = chunk.usage;
        }
        for choice in chunk.choices.unwrap_or_default() {
            // Only the first choice is asked for; ignore any other.
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.delta {
                if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                    self.text.push_str(&text);
                    on_delta(Delta::Text(text));
                }
                for call in delta.tool_calls.unwrap_or_default() {
                    self.on_tool_call(call, on_delta);
                }
            }
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason);
            }
        }
        Ok(())
    }

    fn on_tool_call(&mut self, call: WireToolCall, on_delta: &mut (dyn FnMut(Delta) + Send)) {
        let id = call.id.filter(|id| !id.is_empty());
        let (name, arguments) = match call.function {
            Some(function) => (function.name.filter(|n| !n.is_empty()), function.arguments),
            None => (None, None),
        };
        let slot = self.slot_for(call.index, id.as_deref(), name.is_some());
        let entry = &mut self.calls[slot];
        if entry.id.is_none() {
            entry.id = id;
        }
        if let Some(name) = name {
            if entry.name.is_empty() {
                entry.name = name;
            }
        }
        let fragment = match arguments {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(text)) => text,
            Some(other) => other.to_string(),
        };
        entry.arguments.push_str(&fragment);
        if entry.started {
            if !fragment.is_empty() {
                on_delta(Delta::ToolCallArguments {
                    index: slot,
                    fragment,
                });
            }
        } else if !entry.name.is_empty() {
            entry.started = true;
            let id = entry
                .id
                .get_or_insert_with(|| format!("call_{slot}"))
                .clone();
            on_delta(Delta::ToolCallStarted {
                index: slot,
                id,
                name: entry.name.clone(),
            });
            if !entry.arguments.is_empty() {
                on_delta(Delta::ToolCallArguments {
                    index: slot,
                    fragment: entry.arguments.clone(),
                });
            }
        }
    }

    /// Which call a tool-call delta continues, or a new one.
    fn slot_for(&mut self, index: Option<usize>, id: Option<&str>, has_name: bool) -> usize {
        let existing = match index {
            Some(index) => self
                .calls
                .iter()
                .rposition(|c| c.server_index == Some(index))
                // A different id under the same index is another call (some servers number
                // every call 0).
                .filter(|&slot| match (&self.calls[slot].id, id) {
                    (Some(known), Some(id)) => known == id,
                    _ => true,
                }),
            // Without an index: the call with this id, else a named delta begins a call, else
            // it continues the latest one.
            None => match id {
                Some(id) => self.calls.iter().position(|c| c.id.as_deref() == Some(id)),
                None if has_name => None,
                None => self.calls.len().checked_sub(1),
            },
        };
        existing.unwrap_or_else(|| {
            self.calls.push(PartialCall {
                server_index: index,
                ..PartialCall::default()
            });
            self.calls.len() - 1
        })
    }

    fn finish(self) -> Result<AssistantTurn, ModelError> {
        let mut tool_calls = Vec::with_capacity(self.calls.len());
        for call in self.calls {
            if call.name.is_empty() {
                return Err(ModelError::MalformedStream {
                    detail: "a tool call never got a name".to_owned(),
                    line: excerpt(&call.arguments, 300),
                });
            }
            let arguments = if call.arguments.trim().is_empty() {
                "{}".to_owned()
            } else {
                call.arguments
            };
            tool_calls.push(ToolCall {
                id: call.id.unwrap_or_default(),
                name: call.name,
                arguments,
            });
        }
        let finish = match self.finish_reason {
            Some(reason) => FinishReason::from(reason),
            None if tool_calls.is_empty() => FinishReason::Stop,
            None => FinishReason::ToolCalls,
        };
        Ok(AssistantTurn {
            text: self.text,
            tool_calls,
            finish,
            usage: self.usage,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `chunks` (the JSON of each event) and returns the deltas and the turn.
    fn assemble(chunks: &[Value]) -> (Vec<Delta>, Result<AssistantTurn, ModelError>) {
        let mut state = StreamState::default();
        let mut deltas = Vec::new();
        let mut on_delta = |d: Delta| deltas.push(d);
        for chunk in chunks {
            let event = SseEvent {
                event: String::new(),
                data: chunk.to_string(),
            };
            if let Err(e) = state.on_event(&event, &mut on_delta) {
                return (deltas, Err(e));
            }
        }
        (deltas, state.finish())
    }

    fn call_delta(tool_calls: Value) -> Value {
        json!({"choices": [{"index": 0, "delta": {"tool_calls": tool_calls}}]})
    }

    fn finish(reason: &str) -> Value {
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
    }

    fn started(index: usize, id: &str, name: &str) -> Delta {
        Delta::ToolCallStarted {
            index,
            id: id.into(),
            name: name.into(),
        }
    }

    fn args(index: usize, fragment: &str) -> Delta {
        Delta::ToolCallArguments {
            index,
            fragment: fragment.into(),
        }
    }

    #[test]
    fn fragments_keyed_by_index_make_interleaved_calls() {
        let (deltas, turn) = assemble(&[
            call_delta(
                json!([{"index": 0, "id": "a", "type": "function", "function": {"name": "bash", "arguments": ""}}]),
            ),
            call_delta(json!([{"index": 1, "id": "b", "function": {"name": "read_file"}}])),
            call_delta(json!([{"index": 0, "function": {"arguments": "{\"command\":"}}])),
            call_delta(json!([{"index": 1, "function": {"arguments": "{\"path\":\"x\"}"}}])),
            call_delta(json!([{"index": 0, "function": {"arguments": "\"ls\"}"}}])),
            finish("tool_calls"),
        ]);
        let turn = turn.expect("assembles");
        assert_eq!(
            deltas,
            [
                started(0, "a", "bash"),
                started(1, "b", "read_file"),
                args(0, "{\"command\":"),
                args(1, "{\"path\":\"x\"}"),
                args(0, "\"ls\"}"),
            ]
        );
        assert_eq!(turn.tool_calls[0].arguments, "{\"command\":\"ls\"}");
        assert_eq!(turn.tool_calls[1].name, "read_file");
        assert_eq!(turn.finish, FinishReason::ToolCalls);
    }

    #[test]
    fn calls_without_index_are_told_apart_by_id_and_name() {
        // Ollama: whole calls, several in one delta, no index; arguments as an object.
        let (deltas, turn) = assemble(&[
            call_delta(json!([
                {"id": "call_x", "function": {"name": "bash", "arguments": {"command": "ls"}}},
                {"id": "call_y", "function": {"name": "bash", "arguments": "{\"command\":\"pwd\"}"}},
            ])),
            finish("stop"),
        ]);
        let turn = turn.expect("assembles");
        assert_eq!(turn.tool_calls.len(), 2);
        assert_eq!(turn.tool_calls[0].arguments, "{\"command\":\"ls\"}");
        assert_eq!(turn.tool_calls[1].id, "call_y");
        assert_eq!(deltas.len(), 4, "{deltas:?}");
        assert_eq!(turn.finish, FinishReason::Stop, "the server's word is kept");

        // No index and no id: a named delta starts a call, an unnamed one continues it.
        let (_, turn) = assemble(&[
            call_delta(json!([{"function": {"name": "bash", "arguments": "{\"a\""}}])),
            call_delta(json!([{"function": {"arguments": ":1}"}}])),
            call_delta(json!([{"function": {"name": "read_file"}}])),
        ]);
        let turn = turn.expect("assembles");
        assert_eq!(turn.tool_calls[0].arguments, "{\"a\":1}");
        assert_eq!(turn.tool_calls[0].id, "call_0", "a missing id is made up");
        assert_eq!(turn.tool_calls[1].arguments, "{}");
        assert_eq!(
            turn.finish,
            FinishReason::ToolCalls,
            "inferred without a reason"
        );
    }

    #[test]
    fn a_new_id_under_a_reused_index_is_a_new_call() {
        let (_, turn) = assemble(&[
            call_delta(
                json!([{"index": 0, "id": "a", "function": {"name": "x", "arguments": "{}"}}]),
            ),
            call_delta(
                json!([{"index": 0, "id": "b", "function": {"name": "y", "arguments": "{}"}}]),
            ),
        ]);
        let names: Vec<_> = turn
            .expect("assembles")
            .tool_calls
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(names, ["x", "y"]);
    }

    #[test]
    fn the_last_finish_reason_and_usage_win() {
        let (deltas, turn) = assemble(&[
            json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}),
            json!({"choices": [{"index": 0, "delta": {"content": "Hel"}}]}),
            json!({"choices": [{"index": 1, "delta": {"content": "other choice"}}]}),
            json!({"choices": [{"delta": {"content": "lo"}, "finish_reason": null}]}),
            finish("length"),
            json!({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}),
        ]);
        let turn = turn.expect("assembles");
        assert_eq!(
            deltas,
            [Delta::Text("Hel".into()), Delta::Text("lo".into())]
        );
        assert_eq!(turn.text, "Hello");
        assert_eq!(turn.finish, FinishReason::Length);
        assert_eq!(
            turn.usage,
            Some(Usage {
                prompt_tokens: 3,
                completion_tokens: 2,
                total_tokens: 5
            })
        );
    }

    #[test]
    fn a_nameless_call_is_malformed() {
        let (_, turn) = assemble(&[call_delta(
            json!([{"index": 0, "function": {"arguments": "{}"}}]),
        )]);
        assert!(
            matches!(turn, Err(ModelError::MalformedStream { .. })),
            "{turn:?}"
        );
    }

    #[test]
    fn an_error_in_the_stream_is_reported() {
        let (_, turn) = assemble(&[json!({"error": {"message": "context too long", "code": 400}})]);
        let err = turn.expect_err("error");
        assert!(matches!(&err, ModelError::Server { message } if message == "context too long"));
    }

    #[test]
    fn base_urls_become_endpoints() {
        let e = Endpoint::parse("https://api.deepseek.com/v1/").expect("parses");
        assert!(e.https);
        assert_eq!((e.host.as_str(), e.port), ("api.deepseek.com", 443));
        assert_eq!(e.target, "/v1/chat/completions");
        assert_eq!(e.url, "https://api.deepseek.com/v1/chat/completions");
        let e = Endpoint::parse("http://[::1]:8080/v1?api-version=2").expect("parses");
        assert_eq!((e.host.as_str(), e.port), ("::1", 8080));
        assert_eq!(e.authority, "[::1]:8080");
        assert_eq!(e.target, "/v1/chat/completions?api-version=2");
        let e = Endpoint::parse("http://localhost").expect("parses");
        assert_eq!((e.target.as_str(), e.port), ("/chat/completions", 80));
    }

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        let mut settings = OpenAiSettings::new("http://127.0.0.1:1/v1", "m");
        settings.retry_base_delay = Duration::from_millis(100);
        settings.retry_max_delay = Duration::from_millis(1000);
        let provider = OpenAiProvider::new(settings).expect("builds");
        for (retry, full) in [
            (0, 100),
            (1, 200),
            (2, 400),
            (3, 800),
            (4, 1000),
            (40, 1000),
        ] {
            let wait = provider.backoff(retry);
            let full = Duration::from_millis(full);
            assert!(wait >= full / 2 && wait <= full, "retry {retry}: {wait:?}");
        }
    }
}
