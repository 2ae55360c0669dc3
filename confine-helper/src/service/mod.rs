//! Service mode: `confine-helper serve`, a helper other processes connect to over a named socket.
//!
//! Who may connect is decided twice: by the file system (the socket's mode, group and
//! directory, [`socket`]) and, for every connection, by the peer's `SO_PEERCRED` uid against
//! the admission rule ([`admit`]): listed uids, or members of the service's group. How many
//! connections are served is capped, per uid and in all ([`live`]).
//!
//! A helper that is not root serves only its own uid, in its own event loop: it would run the
//! commands of any other uid as itself. A root helper never serves a peer itself: for each
//! admitted peer it starts a helper of its own that takes the peer's process limit, and its
//! cgroup where there is one per peer ([`cgroup`]), then drops to the peer's uid and gid before
//! it reads anything ([`handoff`]), so every peer's commands run as that peer, confined exactly
//! as in embedded mode.

mod admit;
// A root service's helper per peer (Linux: `/proc/self/exe`, a signalfd, cgroup v2). On macOS a
// service serves its own uid alone.
#[cfg(target_os = "linux")]
mod cgroup;
#[cfg(target_os = "linux")]
mod handoff;
mod live;
mod socket;

pub(crate) use admit::{Admission, Pause, accept};
#[cfg(target_os = "linux")]
pub(crate) use handoff::{Handoff, IDLE_LIMIT, serve_by_handoff};
pub(crate) use live::{Caps, Live, refuse};
pub(crate) use socket::{Group, ServiceError, inherited, listen};
