//! Serving clients: one connection from its first byte — which says whether it speaks SOCKS5
//! or HTTP — through the gate to the relay, and many connections at once, at most
//! [`MAX_CONNECTIONS`] of them, from a listener or from any stream of client streams (such as
//! socket ends passed from inside a sandbox).

use std::io;
use std::pin::pin;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::timeout;

use super::gate::{Attempt, Decision, Gate, Protocol, open};
use super::handshake::{HANDSHAKE_TIMEOUT, Handshake, HandshakeError, WRITE_TIMEOUT};
use super::http::{self, BadRequest, Kind};
use super::policy::{Policy, Reason};
use super::relay::{IDLE_TIMEOUT, RelayError, relay};
use super::socks5::{self, Reply, SocksError};
use super::upstream::{DialError, Resolve};

/// The most connections served at once; the next client waits for one to end.
pub const MAX_CONNECTIONS: usize = 256;

/// Why one connection ended other than by being relayed to its end or refused by the policy.
/// Each has been answered to the client already where its protocol has an answer for it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    #[error("{0}")]
    Handshake(#[from] HandshakeError),
    #[error("a bad HTTP request: {0}")]
    BadRequest(#[from] BadRequest),
    #[error("{0}")]
    Socks(#[from] SocksError),
    #[error("cannot reach {host}:{port}: {source}")]
    Dial {
        host: String,
        port: u16,
        #[source]
        source: DialError,
    },
    #[error("writing to the client: {0}")]
    Reply(#[source] io::Error),
    #[error("writing to the host: {0}")]
    Upstream(#[source] io::Error),
    #[error("{0}")]
    Relay(#[from] RelayError),
}

/// Serves one client connection to its end: reads its request, decides it (the decision goes
/// to `on_decision`), answers, and relays. A refusal is answered to the client and is not an
/// error.
pub async fn serve_one<S, R, C>(
    stream: S,
    policy: &Policy,
    resolver: &R,
    on_decision: &C,
) -> Result<(), ServeError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
    R: Resolve,
    C: Fn(Decision) + Sync,
{
    let mut client = Handshake::new(stream, HANDSHAKE_TIMEOUT);
    match client.peek().await? {
        socks5::VERSION => serve_socks5(client, policy, resolver, on_decision).await,
        socks5::VERSION_4 => {
            client
                .reply(&socks5::SOCKS4_REJECTED)
                .await
                .map_err(ServeError::Reply)?;
            Err(SocksError::Socks4.into())
        }
        _ => serve_http(client, policy, resolver, on_decision).await,
    }
}

async fn serve_http<S, R, C>(
    mut client: Handshake<S>,
    policy: &Policy,
    resolver: &R,
    on_decision: &C,
) -> Result<(), ServeError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
    R: Resolve,
    C: Fn(Decision) + Sync,
{
    let head = match client.head().await {
        Ok(head) => head,
        Err(error) => {
            let answer = match &error {
                HandshakeError::TooLarge => Some(BadRequest::TooLarge.status()),
                HandshakeError::Timeout(_) => Some((408, "Request Timeout")),
                HandshakeError::Closed | HandshakeError::Io(_) => None,
            };
            if let Some((code, text)) = answer {
                // The client may be gone; the error to report is the one that ended it.
                let _ = client.reply(&http::response(code, text, &error)).await;
            }
            return Err(error.into());
        }
    };
    let request = match http::parse(&head) {
        Ok(request) => request,
        Err(bad) => {
            let (code, text) = bad.status();
            let _ = client.reply(&http::response(code, text, &bad)).await;
            return Err(bad.into());
        }
    };
    let protocol = match request.kind {
        Kind::Connect => Protocol::Connect,
        Kind::Forward(_) => Protocol::Http,
    };
    let attempt = Attempt {
        host: &request.host,
        port: request.port,
        protocol,
    };
    let mut upstream = match open(attempt, policy, resolver, on_decision).await {
        Gate::Open(upstream) => upstream,
        Gate::Refused(reason) => {
            let body = refusal(&request.host, &reason);
            return client
                .reply(&http::response(403, "Forbidden", body))
                .await
                .map_err(ServeError::Reply);
        }
        Gate::Failed(source) => {
            let (code, text) = match source {
                DialError::Timeout(_) => (504, "Gateway Timeout"),
                _ => (502, "Bad Gateway"),
            };
            let error = ServeError::Dial {
                host: request.host,
                port: request.port,
                source,
            };
            let _ = client.reply(&http::response(code, text, &error)).await;
            return Err(error);
        }
    };
    match request.kind {
        Kind::Connect => client
            .reply(http::ESTABLISHED)
            .await
            .map_err(ServeError::Reply)?,
        Kind::Forward(head) => send(&mut upstream, &head).await?,
    }
    finish(client, upstream).await
}

/// The one line a refused HTTP client reads.
fn refusal(host: &str, reason: &Reason) -> String {
    format!("the network allow-list refuses {host:?}: {reason}")
}

async fn serve_socks5<S, R, C>(
    mut client: Handshake<S>,
    policy: &Policy,
    resolver: &R,
    on_decision: &C,
) -> Result<(), ServeError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
    R: Resolve,
    C: Fn(Decision) + Sync,
{
    let request = socks5::request(&mut client).await?;
    let attempt = Attempt {
        host: &request.host,
        port: request.port,
        protocol: Protocol::Socks5,
    };
    let upstream = match open(attempt, policy, resolver, on_decision).await {
        Gate::Open(upstream) => upstream,
        Gate::Refused(_) => return Ok(socks5::refuse(&mut client, Reply::NotAllowed).await?),
        Gate::Failed(source) => {
            socks5::refuse(&mut client, socks_reply(&source)).await?;
            return Err(ServeError::Dial {
                host: request.host,
                port: request.port,
                source,
            });
        }
    };
    client
        .reply(&Reply::Succeeded.bytes())
        .await
        .map_err(ServeError::Reply)?;
    finish(client, upstream).await
}

/// The SOCKS5 reply for a host that could not be reached.
fn socks_reply(error: &DialError) -> Reply {
    match error.io_kind() {
        Some(io::ErrorKind::ConnectionRefused) => Reply::ConnectionRefused,
        Some(io::ErrorKind::NetworkUnreachable) => Reply::NetworkUnreachable,
        Some(io::ErrorKind::HostUnreachable) | None => Reply::HostUnreachable,
        Some(_) => Reply::GeneralFailure,
    }
}

/// Writes what the proxy sends the host itself, within [`WRITE_TIMEOUT`].
async fn send(upstream: &mut TcpStream, bytes: &[u8]) -> Result<(), ServeError> {
    timeout(WRITE_TIMEOUT, upstream.write_all(bytes))
        .await
        .unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into()))
        .map_err(ServeError::Upstream)
}

/// Sends the host what the client sent past its handshake, then relays.
async fn finish<S>(client: Handshake<S>, mut upstream: TcpStream) -> Result<(), ServeError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (client, early) = client.into_parts();
    if !early.is_empty() {
        send(&mut upstream, &early).await?;
    }
    Ok(relay(client, upstream, IDLE_TIMEOUT).await?)
}

/// Serves every client stream `incoming` yields, [`MAX_CONNECTIONS`] at most at once (the next
/// one is not taken before a slot is free). When `incoming` ends or yields an error, no new
/// client is taken and the connections still open are served to their end, after which that
/// error, if any, is returned; dropping the future ends them all at once. One connection's
/// failure ends that connection alone.
pub async fn serve_all<I, S, R, C>(
    incoming: I,
    policy: Arc<Policy>,
    resolver: Arc<R>,
    on_decision: Arc<C>,
) -> io::Result<()>
where
    I: Stream<Item = io::Result<S>>,
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    R: Resolve + Send + 'static,
    C: Fn(Decision) + Send + Sync + 'static,
{
    serve_bounded(incoming, MAX_CONNECTIONS, policy, resolver, on_decision).await
}

/// [`serve_all`] of the connections a listener accepts. Errors of one connection attempt
/// (aborted, reset, interrupted) are passed over; any other error of the listener ends it.
#[cfg(test)]
pub async fn serve_listener<R, C>(
    listener: Arc<TcpListener>,
    policy: Arc<Policy>,
    resolver: Arc<R>,
    on_decision: Arc<C>,
) -> io::Result<()>
where
    R: Resolve + Send + 'static,
    C: Fn(Decision) + Send + Sync + 'static,
{
    serve_all(
        accepted(Arc::downgrade(&listener)),
        policy,
        resolver,
        on_decision,
    )
    .await
}

/// The connections `listener` accepts, for as long as someone else holds it: the stream holds
/// it only while it is polled, so that whoever owns it closes the socket when they drop it,
/// at once, not when this stream is next polled or dropped.
pub(crate) fn accepted(
    listener: std::sync::Weak<TcpListener>,
) -> impl Stream<Item = io::Result<TcpStream>> {
    futures::stream::poll_fn(move |cx| {
        let Some(listener) = listener.upgrade() else {
            return std::task::Poll::Ready(None);
        };
        loop {
            return match listener.poll_accept(cx) {
                std::task::Poll::Ready(Ok((stream, _))) => std::task::Poll::Ready(Some(Ok(stream))),
                std::task::Poll::Ready(Err(error)) if passing(&error) => continue,
                std::task::Poll::Ready(Err(error)) => std::task::Poll::Ready(Some(Err(error))),
                std::task::Poll::Pending => std::task::Poll::Pending,
            };
        }
    })
}

/// Whether an accept error belongs to one connection attempt, not to the listener.
fn passing(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
    )
}

/// [`serve_all`] with a bound of `limit` connections.
pub(super) async fn serve_bounded<I, S, R, C>(
    incoming: I,
    limit: usize,
    policy: Arc<Policy>,
    resolver: Arc<R>,
    on_decision: Arc<C>,
) -> io::Result<()>
where
    I: Stream<Item = io::Result<S>>,
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    R: Resolve + Send + 'static,
    C: Fn(Decision) + Send + Sync + 'static,
{
    let slots = Arc::new(Semaphore::new(limit));
    let mut connections = JoinSet::new();
    let mut incoming = pin!(incoming);
    let ended = loop {
        // The semaphore is never closed, so this waits for a slot and never fails.
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            break Ok(());
        };
        while connections.try_join_next().is_some() {}
        let stream = match incoming.next().await {
            Some(Ok(stream)) => stream,
            Some(Err(error)) => break Err(error),
            None => break Ok(()),
        };
        let (policy, resolver, on_decision) = (
            Arc::clone(&policy),
            Arc::clone(&resolver),
            Arc::clone(&on_decision),
        );
        connections.spawn(async move {
            let _slot = slot;
            // Answered to the client already, and reported when it was a decision.
            let _ = serve_one(stream, &policy, &*resolver, &*on_decision).await;
        });
    };
    while connections.join_next().await.is_some() {}
    ended
}

#[cfg(test)]
#[path = "serve_tests.rs"]
mod tests;
