//! Reaching an allowed host: its name resolved by the proxy (through [`Resolve`], so that tests
//! can say where a name leads without touching `/etc/hosts`), then each address the caller
//! admits tried in turn, all within one deadline.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::{Instant, timeout_at};

use super::local::Local;

/// How long resolving and connecting to an allowed host may take together.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Where a name leads: the addresses to try for `host` on `port`, in order.
pub trait Resolve: Sync {
    fn resolve(
        &self,
        host: &str,
        port: u16,
    ) -> impl Future<Output = io::Result<Vec<SocketAddr>>> + Send;
}

/// The system's resolver, as any program on this host would use it.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl Resolve for SystemResolver {
    async fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        Ok(tokio::net::lookup_host((host, port)).await?.collect())
    }
}

/// A function answering at once, such as a fixed table.
impl<F> Resolve for F
where
    F: Fn(&str, u16) -> io::Result<Vec<SocketAddr>> + Sync,
{
    fn resolve(
        &self,
        host: &str,
        port: u16,
    ) -> impl Future<Output = io::Result<Vec<SocketAddr>>> + Send {
        std::future::ready(self(host, port))
    }
}

/// Why an allowed host could not be reached.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DialError {
    #[error("cannot resolve the host: {0}")]
    Resolve(#[source] io::Error),
    #[error("the host has no address")]
    NoAddress,
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The address was judged right before connecting, and found to be this machine's or its
    /// link's, which it was not when the attempt was decided.
    #[error("did not connect to {address}: it is now {why}")]
    Local { address: SocketAddr, why: Local },
    #[error("cannot connect to {address}: {source}")]
    Connect {
        address: SocketAddr,
        #[source]
        source: io::Error,
    },
}

impl DialError {
    /// The error of the last address tried, when there was one.
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        match self {
            DialError::Connect { source, .. } => Some(source.kind()),
            _ => None,
        }
    }
}

/// Resolves `host` before `deadline`.
pub async fn resolve<R: Resolve>(
    resolver: &R,
    host: &str,
    port: u16,
    deadline: Instant,
) -> Result<Vec<SocketAddr>, DialError> {
    let addresses = timeout_at(deadline, resolver.resolve(host, port))
        .await
        .map_err(|_| DialError::Timeout(CONNECT_TIMEOUT))?
        .map_err(DialError::Resolve)?;
    if addresses.is_empty() {
        return Err(DialError::NoAddress);
    }
    Ok(addresses)
}

/// Connects to the first of `addresses` that `admit` lets through and that answers before
/// `deadline`; the error is the last address's.
pub async fn connect<A>(
    addresses: &[SocketAddr],
    deadline: Instant,
    admit: A,
) -> Result<TcpStream, DialError>
where
    A: Fn(SocketAddr) -> Result<(), DialError>,
{
    let mut last = DialError::NoAddress;
    for &address in addresses {
        if let Err(refused) = admit(address) {
            last = refused;
            continue;
        }
        match timeout_at(deadline, TcpStream::connect(address)).await {
            Err(_) => return Err(DialError::Timeout(CONNECT_TIMEOUT)),
            Ok(Ok(stream)) => return Ok(stream),
            Ok(Err(source)) => last = DialError::Connect { address, source },
        }
    }
    Err(last)
}
