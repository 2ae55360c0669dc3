//! The HTTP/1.1 client agentd's own connections share: the model provider's requests
//! ([`crate::model::openai`]) and those to MCP servers reached over HTTP ([`crate::mcp::http`]).
//! One stack, so that TLS is set up, a URL read and a connection driven in one way.
//!
//! # The stack
//!
//! A `POST` and its answer, streamed or not, need little of an HTTP library: no redirects,
//! cookies, HTTP/2 or connection pool. Two stacks were weighed:
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
//! This module wires its pieces by hand: one connection per request (TCP, made by the caller,
//! then TLS for `https://` with [`tls`], then an HTTP/1.1 handshake in [`exchange`]), driven
//! inside the caller's future rather than in a spawned task, so dropping that future drops the
//! socket and the server sees the connection close at once. Proxies (`HTTPS_PROXY`) are not
//! supported. Server-sent events are read with [`sse`].

pub(crate) mod sse;

use std::future::Future;
use std::io;
use std::sync::Arc;

use http_body_util::Full;
use hyper::Uri;
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls;

/// What agentd calls itself in `User-Agent`.
pub const USER_AGENT: &str = concat!("agentd/", env!("CARGO_PKG_VERSION"));

/// An `http://` or `https://` URL, read once: where to connect, what to name in TLS and in
/// `Host`, and what to ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub https: bool,
    /// The host to connect to and to name in TLS (an IPv6 literal without brackets).
    pub host: String,
    pub port: u16,
    /// The `Host` header.
    pub authority: String,
    /// The request target: the path and query.
    pub target: String,
    /// The whole URL, for messages.
    pub url: String,
}

/// Why a URL names no [`Target`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// The URL carries a user name or password.
    #[error("the URL {0:?} contains a user name or password")]
    Credentials(String),
    /// The URL (trimmed) is not an `http://` or `https://` URL with a host.
    #[error("{0:?} is not an http:// or https:// URL with a host")]
    NotHttp(String),
}

impl Target {
    /// Reads `url` (surrounding white space ignored); a URL without a path asks for `/`.
    pub fn parse(url: &str) -> Result<Target, TargetError> {
        let url = url.trim();
        let after_scheme = url.split_once("://").map_or("", |(_, rest)| rest);
        let authority_part = after_scheme.split(['/', '?', '#']).next().unwrap_or("");
        if authority_part.contains('@') {
            return Err(TargetError::Credentials(url.to_owned()));
        }
        let not_http = || TargetError::NotHttp(url.to_owned());
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
            .map_or("/", |pq| pq.as_str())
            .to_owned();
        Ok(Target {
            https,
            host: host.to_owned(),
            port: authority.port_u16().unwrap_or(if https { 443 } else { 80 }),
            authority: authority.as_str().to_owned(),
            target,
            url: url.to_owned(),
        })
    }
}

/// The TLS client configuration: the ring provider, the Mozilla roots compiled in, HTTP/1.1
/// by ALPN.
pub fn tls_connector() -> Result<TlsConnector, rustls::Error> {
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

/// Why TLS could not be set up over a connection.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("not a TLS server name: {0}")]
    Name(#[source] rustls::pki_types::InvalidDnsNameError),
    #[error("the TLS handshake failed: {0}")]
    Handshake(#[source] io::Error),
}

impl TlsError {
    /// Whether a second try would fail the same way: a bad name, or a failure rustls itself
    /// reports (certificates, protocol), which it does as `InvalidData`.
    pub fn is_final(&self) -> bool {
        match self {
            TlsError::Name(_) => true,
            TlsError::Handshake(e) => e.kind() == io::ErrorKind::InvalidData,
        }
    }
}

/// TLS over `tcp` to `host`, its certificate checked against the compiled-in roots.
pub async fn tls(
    connector: &TlsConnector,
    host: &str,
    tcp: TcpStream,
) -> Result<TlsStream<TcpStream>, TlsError> {
    let name = rustls::pki_types::ServerName::try_from(host.to_owned()).map_err(TlsError::Name)?;
    connector
        .connect(name, tcp)
        .await
        .map_err(TlsError::Handshake)
}

/// Runs `work` with the sending half of an HTTP/1.1 connection over `io`, driving the connection
/// in this same future; the error is the handshake's. Once the connection is done (closed or
/// failed), what it delivered is still buffered for `work`, which sees any failure as a body
/// error.
pub async fn exchange<S, W, F, T>(io: S, work: W) -> Result<T, hyper::Error>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    W: FnOnce(SendRequest<Full<Bytes>>) -> F,
    F: Future<Output = T>,
{
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io)).await?;
    let mut connection = std::pin::pin!(connection);
    let mut work = std::pin::pin!(work(sender));
    let mut connection_done = false;
    loop {
        tokio::select! {
            biased;
            result = &mut work => return Ok(result),
            _ = &mut connection, if !connection_done => connection_done = true,
        }
    }
}

/// An error and its sources, joined.
pub fn chain(error: &dyn std::error::Error) -> String {
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

#[cfg(test)]
pub(crate) mod test_server;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_become_targets() {
        let t = Target::parse(" https://mcp.example.com/v1/mcp?x=1 ").expect("parses");
        assert!(t.https);
        assert_eq!((t.host.as_str(), t.port), ("mcp.example.com", 443));
        assert_eq!(t.target, "/v1/mcp?x=1");
        assert_eq!(t.url, "https://mcp.example.com/v1/mcp?x=1");
        let t = Target::parse("http://[::1]:8080").expect("parses");
        assert_eq!((t.host.as_str(), t.port), ("::1", 8080));
        assert_eq!(
            (t.authority.as_str(), t.target.as_str()),
            ("[::1]:8080", "/")
        );
        assert_eq!(
            Target::parse("http://me:pw@example.com/"),
            Err(TargetError::Credentials("http://me:pw@example.com/".into()))
        );
        for bad in ["ftp://example.com/", "example.com/mcp", "http:///mcp", ""] {
            assert_eq!(
                Target::parse(bad),
                Err(TargetError::NotHttp(bad.into())),
                "{bad}"
            );
        }
    }
}
