//! This machine and its link: where an allowed host may not lead unless the policy allows local
//! addresses ([`super::Policy::allowing_local_addresses`]). The proxy runs outside every
//! sandbox, so whatever listens on this machine — on `0.0.0.0`, `::`, loopback, or an address of
//! one of its interfaces — is one connection away from it.
//!
//! Every address the proxy is about to connect to — after resolution, each of them — is judged
//! by two rules. By its form: loopback, unspecified (a connection to it reaches this machine),
//! link-local (`169.254.169.254` is where cloud metadata services answer) and broadcast. And by
//! the kernel ([`super::route`]): a route lookup says whether a connection to it would stay on
//! this machine, which is how an address of one of its own interfaces is known — a LAN address,
//! a container bridge's, a VPN's — whatever its form. Only a route that leaves the machine lets
//! an address through; any other answer, and a lookup that fails, keeps it out (the reason says
//! which). An IPv4-mapped IPv6 address (`::ffff:10.0.0.1`) is judged as the IPv4 address it
//! carries, which is where a connection to it goes.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use super::route::{self, RouteError, RouteType};

/// Why an address counts as this machine's or its link's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[expect(
    clippy::enum_variant_names,
    reason = "link-local is the name of the address range"
)]
pub enum Local {
    Loopback,
    /// `0.0.0.0/8` or `::`: a connection to it reaches this machine.
    Unspecified,
    /// `169.254.0.0/16` or `fe80::/10`.
    LinkLocal,
    /// `255.255.255.255`.
    Broadcast,
    /// The kernel keeps a connection to it on this machine: one of its own addresses (a `local`
    /// route), or one it delivers here as broadcast, anycast or multicast.
    ThisMachine(RouteType),
    /// Whether the kernel keeps it here is not known: asking failed, so it is kept out.
    Unknown(RouteError),
}

impl fmt::Display for Local {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Local::Loopback => f.write_str("loopback"),
            Local::Unspecified => f.write_str("unspecified, which reaches this machine"),
            Local::LinkLocal => f.write_str("link-local"),
            Local::Broadcast => f.write_str("broadcast"),
            Local::ThisMachine(RouteType::LOCAL) => {
                f.write_str("an address of this machine (the kernel's route to it is local)")
            }
            Local::ThisMachine(kind) => write!(
                f,
                "delivered to this machine (the kernel's route to it is {kind})"
            ),
            Local::Unknown(error) => write!(f, "not known to lead elsewhere: {error}"),
        }
    }
}

/// An address an allowed host may not lead to, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalAddress {
    pub ip: IpAddr,
    pub why: Local,
}

impl fmt::Display for LocalAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.ip, self.why)
    }
}

/// Why a connection to `address` would stay on this machine or its link, or `None` when the
/// kernel would send it out. Asks the kernel each time: nothing is kept.
pub fn judge(address: SocketAddr) -> Option<Local> {
    let ip = address.ip().to_canonical();
    by_form(ip).or_else(|| match route::lookup(ip, address.port()) {
        Ok(kind) if kind.leaves_machine() => None,
        Ok(kind) => Some(Local::ThisMachine(kind)),
        Err(error) => Some(Local::Unknown(error)),
    })
}

/// Why `ip` is this machine's or its link's by its form alone, if it is.
pub fn by_form(ip: IpAddr) -> Option<Local> {
    match ip.to_canonical() {
        IpAddr::V4(v4) if v4.is_loopback() => Some(Local::Loopback),
        IpAddr::V4(v4) if v4.octets()[0] == 0 => Some(Local::Unspecified),
        IpAddr::V4(v4) if v4.is_link_local() => Some(Local::LinkLocal),
        IpAddr::V4(v4) if v4.is_broadcast() => Some(Local::Broadcast),
        IpAddr::V6(v6) if v6.is_loopback() => Some(Local::Loopback),
        IpAddr::V6(v6) if v6.is_unspecified() => Some(Local::Unspecified),
        IpAddr::V6(v6) if v6.is_unicast_link_local() => Some(Local::LinkLocal),
        _ => None,
    }
}

/// `addresses` split into those a connection may go to, in their order, and those it may not,
/// each with why.
pub fn sort_out(addresses: Vec<SocketAddr>) -> (Vec<SocketAddr>, Vec<LocalAddress>) {
    let mut elsewhere = Vec::new();
    let mut local = Vec::new();
    for address in addresses {
        match judge(address) {
            None => elsewhere.push(address),
            Some(why) => local.push(LocalAddress {
                ip: address.ip(),
                why,
            }),
        }
    }
    (elsewhere, local)
}

#[cfg(test)]
#[path = "local_tests.rs"]
mod tests;
