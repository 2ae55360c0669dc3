//! The kernel's notices of routes added or removed in the calling thread's network namespace,
//! for tests that bring a link up and must wait until its addresses are routed as this
//! machine's: the kernel installs an IPv6 address's local route from a work queue, after `ip`
//! has returned. Subscribed before the link comes up, no notice can be missed, so a test waits
//! for the event rather than polling the route table on a timer. Used through `#[path]` by
//! agentd's proxy tests and the confinement suite's network namespaces.

#![allow(dead_code)]

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::Instant;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::socket::{
    AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, bind, recv, socket,
};

/// `RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE` (linux/rtnetlink.h).
const ROUTE_GROUPS: u32 = 0x40 | 0x400;
/// Room for one read of notices; what does not fit is read by the next.
const READ_ROOM: usize = 16 * 1024;

/// A subscription to route notices in this thread's network namespace.
#[derive(Debug)]
pub struct RouteEvents(OwnedFd);

impl RouteEvents {
    /// Subscribes; call it before the change whose routes the test waits for.
    pub fn subscribe() -> io::Result<RouteEvents> {
        let fd = socket(
            AddressFamily::Netlink,
            SockType::Raw,
            SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
            SockProtocol::NetlinkRoute,
        )?;
        bind(fd.as_raw_fd(), &NetlinkAddr::new(0, ROUTE_GROUPS))?;
        Ok(RouteEvents(fd))
    }

    /// Waits until `done()` holds: checked now, then again after each notice, until
    /// `deadline`. Whether it held.
    pub fn until(&self, deadline: Instant, mut done: impl FnMut() -> bool) -> io::Result<bool> {
        let mut room = vec![0u8; READ_ROOM];
        loop {
            if done() {
                return Ok(true);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let timeout = PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX);
            let mut fds = [PollFd::new(self.0.as_fd(), PollFlags::POLLIN)];
            if poll(&mut fds, timeout)? == 0 {
                return Ok(done());
            }
            // Every notice queued so far: the check above is made again after them. ENOBUFS
            // (notices lost to a full queue) is only a reason to look again.
            while recv(self.0.as_raw_fd(), &mut room, MsgFlags::empty()).is_ok() {}
        }
    }
}
