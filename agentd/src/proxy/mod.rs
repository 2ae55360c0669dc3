//! The network allow-list proxy: what lets a confined command reach the hosts a person listed
//! and nothing else (RFC 0016).
//!
//! A command whose sandbox has no network of its own reaches the outside only through this
//! proxy, which agentd serves outside the sandbox on the client streams it is given — TCP
//! connections, or socket ends passed from inside the sandbox. A client speaks HTTP `CONNECT`,
//! plain HTTP with absolute URLs, or SOCKS5; whichever it is, the host it names goes through
//! one gate ([`gate`]): the [`Policy`] decides by the name as written (an IP address only when
//! that address is listed), an allowed host is resolved by the proxy and every address it leads
//! to is judged against this machine and its link ([`local`], asking the kernel's routes,
//! [`route`]), the [`Decision`] is reported to the caller before anything is connected, a
//! refusal is answered in the client's protocol, and an allowed host is connected to by the
//! proxy, then relayed both ways.
//!
//! Read in this order: [`policy`] (the lists and how a host matches them), [`handshake`] (the
//! client's bytes until it has asked, bounded in size and time), [`http`] and [`socks5`] (what
//! the client asks in each protocol), [`route`] and [`local`] (which addresses are this
//! machine's), [`upstream`] (resolving and connecting), [`gate`] (the decision), [`relay`], and
//! [`serve`] (one connection, and many at once).

pub mod gate;
pub mod gateway;
pub mod handshake;
pub mod http;
pub mod local;
pub mod policy;
pub mod relay;
pub mod route;
pub mod serve;
pub mod socks5;
pub mod upstream;

pub use gate::{Decision, Protocol};
pub use gateway::{Decisions, Gateway};
#[cfg(test)]
pub(crate) use local::{Local, LocalAddress};
#[cfg(test)]
pub(crate) use policy::Pattern;
pub use policy::{Policy, Reason};
pub(crate) use serve::accepted;
pub use serve::serve_all;
#[cfg(test)]
pub(crate) use serve::serve_listener;
pub use upstream::SystemResolver;

#[cfg(test)]
mod tests;
