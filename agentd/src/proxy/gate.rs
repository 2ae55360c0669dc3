//! The one place a connection attempt is decided, whatever protocol asked — a command's, or
//! agentd's own for an HTTP MCP server: the host checked against the policy, then — for an
//! allowed name — resolved, every address it leads to (a listed address too) judged against
//! this machine and its link ([`local`]), the [`Decision`] reported once, and only then a
//! connection made, to an address judged again right before it. A refused name is never
//! resolved, so a refusal does not even leak as a DNS query.

use std::fmt;
use std::net::SocketAddr;

use tokio::net::TcpStream;
use tokio::time::Instant;

use super::local;
use super::policy::{Host, Policy, Reason};
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
            Ok(addresses) => addresses,
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
    let addresses = match reachable(addresses, policy) {
        Ok(addresses) => addresses,
        Err(local) => {
            report(&local);
            return Gate::Refused(local);
        }
    };
    report(&reason);
    // Judged again right before each connection: an address that has become this machine's
    // since (an interface got it) is passed over like one that was from the start.
    let admit = |address: SocketAddr| {
        if policy.local_addresses() {
            return Ok(());
        }
        match local::judge(address) {
            None => Ok(()),
            Some(why) => Err(DialError::Local { address, why }),
        }
    };
    match connect(&addresses, deadline, admit).await {
        Ok(stream) => Gate::Open(stream),
        Err(error) => Gate::Failed(error),
    }
}

/// The addresses an allowed host may lead to: all of them when the policy allows local ones,
/// else those that are not this machine's or its link's ([`local::judge`]); none left is a
/// refusal naming each address and why.
fn reachable(addresses: Vec<SocketAddr>, policy: &Policy) -> Result<Vec<SocketAddr>, Reason> {
    if policy.local_addresses() {
        return Ok(addresses);
    }
    match local::sort_out(addresses) {
        (elsewhere, local) if elsewhere.is_empty() => Err(Reason::LocalAddresses(local)),
        (elsewhere, _) => Ok(elsewhere),
    }
}
