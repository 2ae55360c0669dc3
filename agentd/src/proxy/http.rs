//! The HTTP side of the proxy: a request head read as `CONNECT host:port` (a tunnel) or as an
//! absolute-form request (`GET http://host:port/path`), which is sent on in origin-form; and
//! the answers the proxy itself gives.
//!
//! The head is parsed strictly: a request line of three parts, `HTTP/1.0` or `HTTP/1.1`,
//! header lines `name: value` with a token for a name, no folded lines, no stray carriage
//! return, no NUL. What the proxy forwards it has read the same way the origin will, so a head
//! the two could read differently is refused instead. A forwarded request gets the `Host` of
//! its URL (the client's is dropped, and the port is left out when it is 80), loses the hop-by-hop headers (`Proxy-*`, `Connection`
//! and what it names, `Keep-Alive`) and gains `Connection: close`: one request per connection.

use std::fmt;

/// The port of an `http://` URL without one.
const HTTP_PORT: u16 = 80;

/// What a client asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The host as the request names it (an IPv6 address in brackets).
    pub host: String,
    pub port: u16,
    pub kind: Kind,
}

/// A tunnel, or one request to forward.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Connect,
    /// The head to send to the origin, in origin-form.
    Forward(Vec<u8>),
}

/// Why a request head is refused (with `400 Bad Request`, or `431` when too large).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BadRequest {
    #[error("the request line is not METHOD TARGET HTTP/1.x")]
    RequestLine,
    #[error("the request line has characters other than printable ASCII")]
    NotAscii,
    #[error("only HTTP/1.0 and HTTP/1.1 are served")]
    Version,
    #[error("a header line is not `name: value`")]
    Header,
    #[error("the head has a folded line, a stray carriage return or a NUL byte")]
    Framing,
    #[error("this is a proxy: ask for an absolute URL (GET http://host/path) or CONNECT host:port")]
    OriginForm,
    #[error("https URLs go through CONNECT (set HTTPS_PROXY to this proxy)")]
    Https,
    #[error("only http:// URLs are forwarded")]
    Scheme,
    #[error("the URL carries credentials (user@host), which the proxy does not pass on")]
    Credentials,
    #[error("CONNECT needs host:port")]
    ConnectTarget,
    #[error("the host or port is malformed (write an IPv6 address in brackets: [::1]:443)")]
    Authority,
    #[error("the request head is over {} bytes", super::handshake::MAX_HEAD)]
    TooLarge,
}

impl BadRequest {
    /// The status line's code and text.
    pub fn status(&self) -> (u16, &'static str) {
        match self {
            BadRequest::TooLarge => (431, "Request Header Fields Too Large"),
            BadRequest::Version => (505, "HTTP Version Not Supported"),
            _ => (400, "Bad Request"),
        }
    }
}

/// Reads a request head (through its empty line).
pub fn parse(head: &[u8]) -> Result<Request, BadRequest> {
    if head.contains(&0) {
        return Err(BadRequest::Framing);
    }
    let mut lines = head
        .split(|&b| b == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line));
    let first = lines.next().unwrap_or_default();
    if !first.iter().all(|&b| b.is_ascii_graphic() || b == b' ') {
        return Err(BadRequest::NotAscii);
    }
    let first = String::from_utf8_lossy(first);
    let mut parts = first.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(BadRequest::RequestLine);
    };
    if method.is_empty() || !method.bytes().all(is_token) || target.is_empty() {
        return Err(BadRequest::RequestLine);
    }
    if !matches!(version, "HTTP/1.1" | "HTTP/1.0") {
        return Err(BadRequest::Version);
    }
    let headers = headers(lines)?;
    if method == "CONNECT" {
        let (host, port) = authority(target, None)?;
        return Ok(Request {
            host,
            port,
            kind: Kind::Connect,
        });
    }
    let Url { host, port, path } = url(target)?;
    let mut out = match port {
        HTTP_PORT => format!("{method} {path} {version}\r\nHost: {host}\r\n"),
        _ => format!("{method} {path} {version}\r\nHost: {host}:{port}\r\n"),
    }
    .into_bytes();
    let hop = hop_by_hop(&headers);
    for (name, value) in &headers {
        if !hop.iter().any(|h| h.eq_ignore_ascii_case(name)) {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(Request {
        host,
        port,
        kind: Kind::Forward(out),
    })
}

/// The header lines up to the empty one, each as a name and its value without the spaces
/// around it.
fn headers<'a>(
    lines: impl Iterator<Item = &'a [u8]>,
) -> Result<Vec<(String, &'a [u8])>, BadRequest> {
    let mut out = Vec::new();
    for line in lines {
        if line.is_empty() {
            break;
        }
        if line.contains(&b'\r') || line.starts_with(b" ") || line.starts_with(b"\t") {
            return Err(BadRequest::Framing);
        }
        let mut parts = line.splitn(2, |&b| b == b':');
        let (Some(name), Some(value)) = (parts.next(), parts.next()) else {
            return Err(BadRequest::Header);
        };
        if name.is_empty() || !name.iter().copied().all(is_token) {
            return Err(BadRequest::Header);
        }
        out.push((
            String::from_utf8_lossy(name).into_owned(),
            value.trim_ascii(),
        ));
    }
    Ok(out)
}

/// The headers of one hop, which a forwarded request does not carry: those always so, every
/// `Proxy-*` one, and those the request's `Connection` names.
fn hop_by_hop(headers: &[(String, &[u8])]) -> Vec<String> {
    let mut hop: Vec<String> = ["Host", "Connection", "Keep-Alive", "Proxy-Connection"]
        .map(String::from)
        .to_vec();
    for (name, value) in headers {
        if name.len() > 6 && name[..6].eq_ignore_ascii_case("proxy-") {
            hop.push(name.clone());
        }
        if name.eq_ignore_ascii_case("connection") {
            let listed = String::from_utf8_lossy(value);
            hop.extend(
                listed
                    .split(',')
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(String::from),
            );
        }
    }
    hop
}

/// A character of an HTTP token (a method, a header name).
fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// An `http://` URL taken apart.
struct Url {
    host: String,
    port: u16,
    /// The path and query, `/` when there is none; the fragment dropped.
    path: String,
}

fn url(target: &str) -> Result<Url, BadRequest> {
    if target.starts_with('/') || target == "*" {
        return Err(BadRequest::OriginForm);
    }
    let scheme_end = target.find("://").ok_or(BadRequest::Scheme)?;
    let scheme = &target[..scheme_end];
    if scheme.eq_ignore_ascii_case("https") {
        return Err(BadRequest::Https);
    }
    if !scheme.eq_ignore_ascii_case("http") {
        return Err(BadRequest::Scheme);
    }
    let rest = &target[scheme_end + 3..];
    let rest = rest.split('#').next().unwrap_or_default();
    let split = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority_text, path) = rest.split_at(split);
    let (host, port) = authority(authority_text, Some(HTTP_PORT))?;
    let path = match path.strip_prefix('?') {
        Some(query) => format!("/?{query}"),
        None if path.is_empty() => "/".to_owned(),
        None => path.to_owned(),
    };
    Ok(Url { host, port, path })
}

/// `host:port`, `[v6]:port` or (with a default port) `host`: the host as written and the port.
fn authority(text: &str, default_port: Option<u16>) -> Result<(String, u16), BadRequest> {
    if text.contains('@') {
        return Err(BadRequest::Credentials);
    }
    let (host, port) = if text.starts_with('[') {
        let close = text.find(']').ok_or(BadRequest::Authority)?;
        let (host, after) = text.split_at(close + 1);
        match after.strip_prefix(':') {
            Some(port) => (host, Some(port)),
            None if after.is_empty() => (host, None),
            None => return Err(BadRequest::Authority),
        }
    } else {
        match text.rsplit_once(':') {
            Some((host, _)) if host.contains(':') => return Err(BadRequest::Authority),
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        }
    };
    if host.is_empty() {
        return Err(BadRequest::Authority);
    }
    let port = match (port, default_port) {
        (Some(port), _) if !port.is_empty() => parse_port(port)?,
        (_, Some(default)) => default,
        (_, None) => return Err(BadRequest::ConnectTarget),
    };
    Ok((host.to_owned(), port))
}

/// A port: 1 to 65535, in decimal digits only.
fn parse_port(text: &str) -> Result<u16, BadRequest> {
    if text.len() > 5 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(BadRequest::Authority);
    }
    match text.parse::<u16>() {
        Ok(0) | Err(_) => Err(BadRequest::Authority),
        Ok(port) => Ok(port),
    }
}

/// The answer to a tunnel that is open.
pub const ESTABLISHED: &[u8] = b"HTTP/1.1 200 Connection established\r\n\r\n";

/// A complete answer of the proxy's own with a one-line plain-text body; the connection ends
/// after it.
pub fn response(code: u16, text: &str, body: impl fmt::Display) -> Vec<u8> {
    let body = format!("{body}\n");
    format!(
        "HTTP/1.1 {code} {text}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: \
         {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
