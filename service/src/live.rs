//! The connections a service serves, counted per uid, and the caps on them.
//!
//! Every connection holds something until it ends: in a root service a helper process running
//! as the peer, which the peer's own process limits do not see; in a user's own service a
//! descriptor and a buffer. So that one peer cannot take what the others need, a service
//! serves at most [`Caps::per_user`] connections of one uid and [`Caps::total`] in all. A peer
//! past a cap is sent a refusal that names it ([`refuse`]) and closed; nothing it sent is read.

use std::collections::HashMap;
use std::hash::Hash;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;

use confine_protocol::{Hello, encode_frame};

use crate::admit::Peer;
use crate::log;

/// A refusal is sent without waiting, and a peer that has gone raises no SIGPIPE.
const SEND_FLAGS: nix::sys::socket::MsgFlags =
    nix::sys::socket::MsgFlags::MSG_DONTWAIT.union(nix::sys::socket::MsgFlags::MSG_NOSIGNAL);

/// Connections one uid may have open at once, by default (`--max-per-user`). agentd holds one
/// connection per agentd process (an editor's session, an `agentd exec` or `run`); a person
/// runs a few at a time, so 16 leaves room for several editors and scripts, and one user's
/// flood stops at 16 helpers.
pub(crate) const MAX_PER_USER: usize = 16;

/// Connections open at once for all uids, by default (`--max-connections`): sixteen users at
/// their own cap. In a root service each is a helper process of a few MB, so idle helpers stay
/// under about 1 GB.
pub(crate) const MAX_CONNECTIONS: usize = 256;

/// The caps a service enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Caps {
    pub(crate) per_user: usize,
    pub(crate) total: usize,
}

impl Default for Caps {
    fn default() -> Caps {
        Caps {
            per_user: MAX_PER_USER,
            total: MAX_CONNECTIONS,
        }
    }
}

/// The live connections, each under the uid it serves, by a key of the caller's: a helper's
/// pid in a root service, a connection's id in a user's own. (A few hundred at most: counting
/// them is cheaper than keeping counts.)
#[derive(Debug)]
pub(crate) struct Live<K>(HashMap<K, u32>);

impl<K: Hash + Eq> Live<K> {
    pub(crate) fn new() -> Live<K> {
        Live(HashMap::new())
    }

    /// Why one more connection of `uid` would pass a cap, in words for the peer; `None` when
    /// it would not.
    pub(crate) fn over_cap(&self, uid: u32, caps: Caps) -> Option<String> {
        let (own, all) = (self.count(uid), self.0.len());
        if own >= caps.per_user {
            return Some(format!(
                "uid {uid} has reached the cap on connections per user, {own} \
                 (--max-per-user); end some agentd sessions of this user, or ask the \
                 administrator to raise the cap"
            ));
        }
        (all >= caps.total).then(|| {
            format!(
                "the service has reached its cap on connections for all users, {all} \
                 (--max-connections); try again when some have ended, or ask the \
                 administrator to raise the cap"
            )
        })
    }

    /// Counts `key` under `uid`.
    pub(crate) fn add(&mut self, key: K, uid: u32) {
        self.0.insert(key, uid);
    }

    /// Forgets `key`; returns its uid and how many connections that uid has left.
    pub(crate) fn remove(&mut self, key: &K) -> Option<(u32, usize)> {
        let uid = self.0.remove(key)?;
        Some((uid, self.count(uid)))
    }

    fn count(&self, uid: u32) -> usize {
        self.0.values().filter(|u| **u == uid).count()
    }
}

/// Refuses `peer`: logs why, sends it a refusal carrying `why` in place of a greeting, and
/// closes the connection (dropping `sock`). Nothing is read from it.
pub(crate) fn refuse(sock: UnixStream, peer: &Peer, why: &str) {
    log!("refused peer uid {} (pid {}): {why}", peer.uid, peer.pid);
    let reason = format!("confine-helper service: {why}");
    if let Ok(frame) = encode_frame(&Hello::refusal(&reason)) {
        // A new connection's buffer takes one short frame whole, without waiting; a peer that
        // has gone already is told nothing.
        let _ = nix::sys::socket::send(sock.as_raw_fd(), &frame, SEND_FLAGS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_uid_is_capped_alone_and_all_together() {
        let caps = Caps {
            per_user: 2,
            total: 3,
        };
        let mut live = Live::new();
        live.add(1, 1001);
        assert_eq!(live.over_cap(1001, caps), None);
        live.add(2, 1001);
        let own = live.over_cap(1001, caps).expect("at the cap of its uid");
        assert!(
            own.contains(
                "uid 1001 has reached the cap on connections per user, 2 (--max-per-user)"
            ),
            "{own}"
        );
        assert_eq!(
            live.over_cap(1002, caps),
            None,
            "another uid has its own count"
        );
        live.add(3, 1002);
        let all = live.over_cap(1002, caps).expect("at the cap of all uids");
        assert!(
            all.contains("its cap on connections for all users, 3 (--max-connections)"),
            "{all}"
        );
        // An ended connection frees its place; one counted twice is counted once.
        live.add(3, 1002);
        assert_eq!(live.remove(&2), Some((1001, 1)));
        assert_eq!(live.over_cap(1001, caps), None);
        assert_eq!(live.remove(&3), Some((1002, 0)));
        assert_eq!(live.remove(&3), None);
    }
}
