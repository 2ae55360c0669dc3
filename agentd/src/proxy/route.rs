//! Where the kernel would send a connection to an address: the question that tells an address of
//! this machine from one elsewhere, whatever its form ([`super::local`]).
//!
//! On Linux it is one rtnetlink `RTM_GETROUTE` request on a netlink socket of its own, answered by
//! the route lookup a `connect` makes: the routing rules and tables of agentd's network
//! namespace, for agentd's uid, TCP and the destination port (rules may match on each). The
//! answer's route type says whether a connection stays on this machine — `RTN_LOCAL` for every
//! address of every interface and all of 127/8, `RTN_BROADCAST`, `RTN_ANYCAST` and
//! `RTN_MULTICAST` for what the kernel delivers here too — or leaves it (`RTN_UNICAST`). An
//! address the kernel has no route to is answered with an error. Nothing is kept between
//! lookups: an address added to an interface counts from the next one on.
//!
//! The kernel handles the request while `sendto` runs: when it returns, the answer (or the error)
//! is already queued on the socket. So the socket never blocks, and an empty queue is an error,
//! not a wait.
//!
//! Elsewhere (macOS) there is no rtnetlink: an address a datagram socket can be bound to is one
//! of this machine's own (binding a foreign address needs an option set on the socket itself,
//! which this one does not set).

use std::fmt;

use nix::errno::Errno;

/// The type of the route the kernel picked (`rtm_type`, linux/rtnetlink.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteType(pub u8);

impl RouteType {
    /// A route out of this machine: a gateway's, or a neighbour's on a link.
    pub const UNICAST: RouteType = RouteType(1);
    /// An address of this machine.
    pub const LOCAL: RouteType = RouteType(2);
    pub const BROADCAST: RouteType = RouteType(3);
    pub const ANYCAST: RouteType = RouteType(4);
    pub const MULTICAST: RouteType = RouteType(5);

    /// Whether a connection along this route leaves the machine.
    pub fn leaves_machine(self) -> bool {
        self == RouteType::UNICAST
    }
}

impl fmt::Display for RouteType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            RouteType::UNICAST => f.write_str("unicast"),
            RouteType::LOCAL => f.write_str("local"),
            RouteType::BROADCAST => f.write_str("broadcast"),
            RouteType::ANYCAST => f.write_str("anycast"),
            RouteType::MULTICAST => f.write_str("multicast"),
            RouteType(other) => write!(f, "route type {other}"),
        }
    }
}

/// Why the kernel could not say where a connection would go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RouteError {
    #[error("cannot open a netlink socket to ask the kernel for its route ({0})")]
    Socket(Errno),
    #[error("cannot ask the kernel for its route ({0})")]
    Send(Errno),
    #[error("cannot read the kernel's route ({0})")]
    Receive(Errno),
    #[error("the kernel sent no route back")]
    Unanswered,
    /// The kernel answered the lookup with an error: most often, no route at all.
    #[error("the kernel has no route to it ({0})")]
    NoRoute(Errno),
    #[error("the kernel's answer is not the route asked for: {0}")]
    Malformed(&'static str),
    /// Where there is no rtnetlink: binding a socket to the address failed otherwise than for an
    /// address that is not this machine's.
    #[error("cannot tell whether it is this machine's: binding a socket to it failed ({0})")]
    Bind(Errno),
}

#[cfg(target_os = "linux")]
pub use netlink::lookup;

#[cfg(target_os = "linux")]
mod netlink {
    use std::net::IpAddr;
    use std::os::fd::AsRawFd;

    use nix::errno::Errno;
    use nix::sys::socket::{
        AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, recv, sendto,
        socket,
    };

    use super::{RouteError, RouteType};

    // linux/netlink.h and linux/rtnetlink.h.
    const NLMSG_ERROR: u16 = 2;
    const NLM_F_REQUEST: u16 = 1;
    const RTM_NEWROUTE: u16 = 24;
    const RTM_GETROUTE: u16 = 26;
    const RTA_DST: u16 = 1;
    /// The protocol and destination port the lookup is for (Linux 4.17; older kernels ignore
    /// them, and have no rules that match on them either).
    const RTA_IP_PROTO: u16 = 27;
    const RTA_DPORT: u16 = 29;
    const AF_INET: u8 = 2;
    const AF_INET6: u8 = 10;
    const IPPROTO_TCP: u8 = 6;

    /// `struct nlmsghdr`: length, type, flags, sequence number, port id.
    const HEADER_LEN: usize = 16;
    /// Where the header's type and sequence number lie.
    const TYPE_AT: usize = 4;
    const SEQUENCE_AT: usize = 8;
    /// `struct rtmsg`: family, destination and source prefix lengths, tos, table, protocol,
    /// scope, type (a byte each), then flags.
    const RTMSG_LEN: usize = 12;
    /// Where `rtm_family`, `rtm_dst_len` and `rtm_type` lie in it.
    const RTM_FAMILY_AT: usize = 0;
    const RTM_DST_LEN_AT: usize = 1;
    const RTM_TYPE_AT: usize = 7;
    /// `NLMSG_ERROR`'s payload starts with the request's negated errno (0 for an
    /// acknowledgement).
    const ERROR_CODE_LEN: usize = 4;
    /// An attribute's header (length and type, two bytes each); attributes start on 4-byte
    /// boundaries.
    const ATTRIBUTE_HEADER_LEN: usize = 4;
    const ALIGN: usize = 4;
    /// The request's sequence number, which the answer carries back. The socket is the
    /// request's own, so one number is enough.
    const SEQUENCE: u32 = 1;
    /// Room for the answer: a route with its attributes takes a few hundred bytes.
    const ANSWER_ROOM: usize = 4096;

    /// The type of the route a TCP connection to `ip` on `port` would take now. `ip` is taken as
    /// it is: an IPv4-mapped IPv6 address is for the caller to turn into its IPv4 address.
    pub fn lookup(ip: IpAddr, port: u16) -> Result<RouteType, RouteError> {
        let fd = socket(
            AddressFamily::Netlink,
            SockType::Raw,
            SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
            SockProtocol::NetlinkRoute,
        )
        .map_err(RouteError::Socket)?;
        let kernel = NetlinkAddr::new(0, 0);
        sendto(
            fd.as_raw_fd(),
            &request(ip, port),
            &kernel,
            MsgFlags::empty(),
        )
        .map_err(RouteError::Send)?;
        let mut answer = [0u8; ANSWER_ROOM];
        // MSG_TRUNC: the answer's whole length, even when it did not fit.
        let length = match recv(fd.as_raw_fd(), &mut answer, MsgFlags::MSG_TRUNC) {
            Ok(length) => length,
            Err(Errno::EAGAIN) => return Err(RouteError::Unanswered),
            Err(errno) => return Err(RouteError::Receive(errno)),
        };
        let answer = answer
            .get(..length)
            .ok_or(RouteError::Malformed("it is longer than a route"))?;
        parse(answer, family(ip))
    }

    fn family(ip: IpAddr) -> u8 {
        match ip {
            IpAddr::V4(_) => AF_INET,
            IpAddr::V6(_) => AF_INET6,
        }
    }

    /// The request: a header, a `struct rtmsg` of the address's family, and the destination,
    /// protocol and port as attributes.
    pub(super) fn request(ip: IpAddr, port: u16) -> Vec<u8> {
        let address = match ip {
            IpAddr::V4(v4) => v4.octets().to_vec(),
            IpAddr::V6(v6) => v6.octets().to_vec(),
        };
        let full_prefix = u8::try_from(address.len() * 8).unwrap_or(u8::MAX);
        let mut rtmsg = [0u8; RTMSG_LEN];
        rtmsg[RTM_FAMILY_AT] = family(ip);
        // The destination is one address, not a prefix.
        rtmsg[RTM_DST_LEN_AT] = full_prefix;
        let mut body = rtmsg.to_vec();
        attribute(&mut body, RTA_DST, &address);
        attribute(&mut body, RTA_IP_PROTO, &[IPPROTO_TCP]);
        attribute(&mut body, RTA_DPORT, &port.to_be_bytes());
        let length = u32::try_from(HEADER_LEN + body.len()).unwrap_or(u32::MAX);
        let mut message = Vec::with_capacity(HEADER_LEN + body.len());
        message.extend_from_slice(&length.to_ne_bytes());
        message.extend_from_slice(&RTM_GETROUTE.to_ne_bytes());
        message.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
        message.extend_from_slice(&SEQUENCE.to_ne_bytes());
        // The port id: 0, the kernel fills in the socket's own.
        message.extend_from_slice(&0u32.to_ne_bytes());
        message.extend_from_slice(&body);
        message
    }

    fn attribute(body: &mut Vec<u8>, kind: u16, payload: &[u8]) {
        let length = u16::try_from(ATTRIBUTE_HEADER_LEN + payload.len()).unwrap_or(u16::MAX);
        body.extend_from_slice(&length.to_ne_bytes());
        body.extend_from_slice(&kind.to_ne_bytes());
        body.extend_from_slice(payload);
        body.resize(body.len().next_multiple_of(ALIGN), 0);
    }

    /// The route type an answer to a request for an address of `family` gives, or why it gives
    /// none.
    pub(super) fn parse(answer: &[u8], family: u8) -> Result<RouteType, RouteError> {
        let malformed = RouteError::Malformed;
        let length = bytes::<4>(answer, 0).ok_or(malformed("it is shorter than a header"))?;
        let length = usize::try_from(u32::from_ne_bytes(length)).unwrap_or(usize::MAX);
        let (header, payload) = answer
            .get(..length)
            .and_then(|message| message.split_at_checked(HEADER_LEN))
            .ok_or(malformed("its length is not what was read"))?;
        let kind = bytes::<2>(header, TYPE_AT).map(u16::from_ne_bytes);
        let sequence = bytes::<4>(header, SEQUENCE_AT).map(u32::from_ne_bytes);
        if sequence != Some(SEQUENCE) {
            return Err(malformed("it answers another request"));
        }
        match kind {
            Some(NLMSG_ERROR) => {
                let code = bytes::<ERROR_CODE_LEN>(payload, 0)
                    .map(i32::from_ne_bytes)
                    .ok_or(malformed("an error without its number"))?;
                match code {
                    0 => Err(malformed("an acknowledgement without a route")),
                    code => Err(RouteError::NoRoute(Errno::from_raw(code.saturating_neg()))),
                }
            }
            Some(RTM_NEWROUTE) => {
                let route = bytes::<RTMSG_LEN>(payload, 0)
                    .ok_or(malformed("a route shorter than its header"))?;
                if route[RTM_FAMILY_AT] != family {
                    return Err(malformed("a route of another address family"));
                }
                Ok(RouteType(route[RTM_TYPE_AT]))
            }
            _ => Err(malformed("neither a route nor an error")),
        }
    }

    /// `N` bytes of `from` at `at`, if it holds them.
    fn bytes<const N: usize>(from: &[u8], at: usize) -> Option<[u8; N]> {
        from.get(at..at.checked_add(N)?)?.try_into().ok()
    }
}

/// The type of the route a connection to `ip` would take: an address a datagram socket can be
/// bound to is this machine's own; one the system says is not available is elsewhere.
#[cfg(not(target_os = "linux"))]
pub fn lookup(ip: std::net::IpAddr, _port: u16) -> Result<RouteType, RouteError> {
    match std::net::UdpSocket::bind((ip, 0)) {
        Ok(_) => Ok(RouteType::LOCAL),
        Err(e) => match e.raw_os_error().map(Errno::from_raw) {
            Some(Errno::EADDRNOTAVAIL) => Ok(RouteType::UNICAST),
            Some(errno) => Err(RouteError::Bind(errno)),
            None => Err(RouteError::Bind(Errno::UnknownErrno)),
        },
    }
}

#[cfg(all(test, target_os = "linux"))]
#[path = "route_tests.rs"]
mod tests;
