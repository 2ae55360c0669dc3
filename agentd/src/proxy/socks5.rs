//! The SOCKS5 side of the proxy (RFC 1928): the method negotiation — "no authentication" is
//! the only method offered, since the client is a command inside the sandbox and the policy
//! is the same for all of it — and the request, of which only CONNECT is served, to a domain
//! name, an IPv4 or an IPv6 address. Whatever is refused here gets the reply its reason has in
//! the protocol before the connection ends.

use std::net::{Ipv4Addr, Ipv6Addr};

use tokio::io::{AsyncRead, AsyncWrite};

use super::handshake::{Handshake, HandshakeError};

/// The protocol version, which is also the first byte a SOCKS5 client sends.
pub const VERSION: u8 = 5;

/// The first byte of a SOCKS4 request, which is answered with a refusal.
pub const VERSION_4: u8 = 4;

/// SOCKS4's reply "request rejected or failed", with no address.
pub const SOCKS4_REJECTED: [u8; 8] = [0, 0x5b, 0, 0, 0, 0, 0, 0];

/// The method "no authentication required".
const NO_AUTH: u8 = 0x00;

/// The method reply "no acceptable methods".
const NO_ACCEPTABLE_METHOD: u8 = 0xff;

const CMD_CONNECT: u8 = 1;

const ATYP_IPV4: u8 = 1;
const ATYP_DOMAIN: u8 = 3;
const ATYP_IPV6: u8 = 4;

/// A reply's code (RFC 1928, section 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Reply {
    Succeeded = 0x00,
    GeneralFailure = 0x01,
    /// "connection not allowed by ruleset": the policy refused the host.
    NotAllowed = 0x02,
    NetworkUnreachable = 0x03,
    HostUnreachable = 0x04,
    ConnectionRefused = 0x05,
    CommandNotSupported = 0x07,
    AddressTypeNotSupported = 0x08,
}

impl Reply {
    /// The reply as sent, with an unspecified bound address (`0.0.0.0:0`): clients of CONNECT
    /// have no use for the proxy's own.
    pub fn bytes(self) -> [u8; 10] {
        [VERSION, self as u8, 0, ATYP_IPV4, 0, 0, 0, 0, 0, 0]
    }
}

/// A CONNECT request: the host as the client named it (a domain as sent, an address in its
/// usual text form) and the port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub host: String,
    pub port: u16,
}

/// Why a SOCKS5 handshake ended without a request to decide on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SocksError {
    #[error("{0}")]
    Handshake(#[from] HandshakeError),
    #[error("the client does not offer SOCKS5's \"no authentication\" method, the only one served")]
    NoAcceptableMethod,
    #[error("a SOCKS5 request of version {0}, not 5")]
    Version(u8),
    #[error("SOCKS5 command {0} is not served (only CONNECT is)")]
    Command(u8),
    #[error("SOCKS5 address type {0} does not exist")]
    AddressType(u8),
    #[error("a SOCKS4 request; use SOCKS5 (socks5h://) or HTTP")]
    Socks4,
    #[error("writing the SOCKS5 reply: {0}")]
    Reply(#[source] std::io::Error),
}

/// Negotiates the method and reads the request; a refusal of the protocol's own (no method, a
/// command other than CONNECT, an unknown address type) is answered here.
pub async fn request<S>(client: &mut Handshake<S>) -> Result<Request, SocksError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    client.byte().await?;
    let count = client.byte().await?;
    let methods = client.take(usize::from(count)).await?;
    if !methods.contains(&NO_AUTH) {
        client
            .reply(&[VERSION, NO_ACCEPTABLE_METHOD])
            .await
            .map_err(SocksError::Reply)?;
        return Err(SocksError::NoAcceptableMethod);
    }
    client
        .reply(&[VERSION, NO_AUTH])
        .await
        .map_err(SocksError::Reply)?;

    let [version, command, _reserved, address_type] = client.array().await?;
    if version != VERSION {
        return Err(SocksError::Version(version));
    }
    let host = match address_type {
        ATYP_IPV4 => Ipv4Addr::from(client.array::<4>().await?).to_string(),
        ATYP_IPV6 => Ipv6Addr::from(client.array::<16>().await?).to_string(),
        ATYP_DOMAIN => {
            let length = client.byte().await?;
            let name = client.take(usize::from(length)).await?;
            String::from_utf8_lossy(&name).into_owned()
        }
        other => {
            refuse(client, Reply::AddressTypeNotSupported).await?;
            return Err(SocksError::AddressType(other));
        }
    };
    let port = u16::from_be_bytes(client.array().await?);
    if command != CMD_CONNECT {
        refuse(client, Reply::CommandNotSupported).await?;
        return Err(SocksError::Command(command));
    }
    Ok(Request { host, port })
}

/// Answers with `reply`, after which the connection ends.
pub async fn refuse<S>(client: &mut Handshake<S>, reply: Reply) -> Result<(), SocksError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    client
        .reply(&reply.bytes())
        .await
        .map_err(SocksError::Reply)
}

#[cfg(test)]
#[path = "socks5_tests.rs"]
mod tests;
