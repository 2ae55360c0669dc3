//! The one place a connection attempt is decided, whatever protocol asked: the host checked
//! against the policy, then — for an allowed name — resolved and its addresses checked, the
//! [`Decision`] reported once, and only then a connection made. A refused name is never
//! resolved, so a refusal does not even leak as a DNS query.

use std::fmt;
use std::net::SocketAddr;

use tokio::net::TcpStream;
use tokio::time::Instant;

use super::policy::{Host, Policy, Reason, is_host_local};
use super::upstream::{CONNECT_TIMEOUT, DialError, Resolve, connect, resolve};

/// The protocol a client asked in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP `CONNECT host:port`.
    Connect,
    /// An HTTP request in absolute form, forwarded.
    Http,
    Socks5,
}

impl Protocol {
    /// The protocol's name as a decision shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Connect => "connect",
            Protocol::Http => "http",
            Protocol::Socks5 => "socks5",
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the proxy decided about one connection attempt, given to the caller's callback before
/// anything is connected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The host as the client named it.
    pub host: String,
    pub port: u16,
    pub protocol: Protocol,
    pub allowed: bool,
    pub reason: Reason,
}

/// How an attempt ended at the gate.
#[derive(Debug)]
pub enum Gate {
    /// Allowed and connected.
    Open(TcpStream),
    /// Refused by the policy, for this reason.
    Refused(Reason),
    /// Allowed, but the host could not be reached.
    Failed(DialError),
}

/// One attempt to reach `host:port` through the gate.
#[derive(Debug)]
pub struct Attempt<'a> {
    pub host: &'a str,
    pub port: u16,
    pub protocol: Protocol,
}

/// Decides `attempt`, reports the decision through `on_decision` and, when allowed, connects.
pub async fn open<R, C>(
    attempt: Attempt<'_>,
    policy: &Policy,
    resolver: &R,
    on_decision: &C,
) -> Gate
where
    R: Resolve,
    C: Fn(Decision) + Sync,
{
    let report = |reason: &Reason| {
        on_decision(Decision {
            host: attempt.host.to_owned(),
            port: attempt.port,
            protocol: attempt.protocol,
            allowed: reason.allows(),
            reason: reason.clone(),
        });
    };
    let (host, reason) = policy.decide(attempt.host);
    if !reason.allows() {
        report(&reason);
        return Gate::Refused(reason);
    }
    let deadline = Instant::now() + CONNECT_TIMEOUT;
    let addresses = match host {
        Host::Ip(ip) => vec![SocketAddr::new(ip, attempt.port)],
        Host::Name(name) => match resolve(resolver, &name, attempt.port, deadline).await {
            Ok(addresses) => match reachable(addresses, policy) {
                Ok(addresses) => addresses,
                Err(local) => {
                    report(&local);
                    return Gate::Refused(local);
                }
            },
            Err(error) => {
                report(&reason);
                return Gate::Failed(error);
            }
        },
        // `decide` never allows an invalid host.
        Host::Invalid => {
            report(&Reason::NotAName);
            return Gate::Refused(Reason::NotAName);
        }
    };
    report(&reason);
    match connect(&addresses, deadline).await {
        Ok(stream) => Gate::Open(stream),
        Err(error) => Gate::Failed(error),
    }
}

/// The addresses a name may lead to: all of them when the policy allows host-local ones, else
/// those that are not; none left is a refusal naming the first local one.
fn reachable(addresses: Vec<SocketAddr>, policy: &Policy) -> Result<Vec<SocketAddr>, Reason> {
    if policy.local_addresses() {
        return Ok(addresses);
    }
    let first_local = addresses.iter().find(|a| is_host_local(a.ip())).copied();
    let kept: Vec<SocketAddr> = addresses
        .into_iter()
        .filter(|a| !is_host_local(a.ip()))
        .collect();
    match first_local {
        Some(local) if kept.is_empty() => Err(Reason::LocalAddress(local.ip())),
        _ => Ok(kept),
    }
}
