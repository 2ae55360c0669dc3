//! Who is served: every connection's `SO_PEERCRED` uid against the admission rule, and the
//! caps on how many connections are served.
//!
//! Every connection holds something until it ends: in a root service a helper process running
//! as the peer, which the peer's own process limits do not see. So that one peer cannot take
//! what the others need, a service serves at most [`Caps::per_user`] connections of one uid and
//! [`Caps::total`] in all. A peer past a cap is sent a refusal that names it ([`refuse`]) and
//! closed; nothing it sent is read.

use std::collections::HashMap;
use std::ffi::CString;
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};

use confine_protocol::{Hello, encode_frame};
use nix::sys::socket::{MsgFlags, UnixCredentials, getsockopt, send, sockopt};
use nix::unistd::{Gid, Group, Uid, User, getgrouplist};

use crate::log::log;

/// Connections one uid may have open at once, by default (`--max-per-user`). agentd holds one
/// connection per agentd process (an editor's session, an `agentd exec` or `run`); a person
/// runs a few at a time, so 16 leaves room for several editors and scripts, and one user's
/// flood stops at 16 helpers.
pub(crate) const MAX_PER_USER: usize = 16;

/// Connections open at once for all uids, by default (`--max-connections`): sixteen users at
/// their own cap. Each is a helper process of a few MB, so idle helpers stay under about 1 GB.
pub(crate) const MAX_CONNECTIONS: usize = 256;

/// A refusal is sent without waiting, and a peer that has gone raises no SIGPIPE.
const SEND_FLAGS: MsgFlags = MsgFlags::MSG_DONTWAIT.union(MsgFlags::MSG_NOSIGNAL);

/// Which peers a service serves: those whose uid is listed, and the members of its group.
#[derive(Debug, Clone)]
pub(crate) struct Admission {
    pub(crate) uids: Vec<u32>,
    pub(crate) group: Option<Group>,
}

/// An admitted connection: the peer's uid, gid and pid as the kernel gave them at `connect`.
pub(crate) type Peer = UnixCredentials;

/// The caps a service enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Caps {
    pub(crate) per_user: usize,
    pub(crate) total: usize,
}

impl Default for Caps {
    fn default() -> Caps {
        let (per_user, total) = (MAX_PER_USER, MAX_CONNECTIONS);
        Caps { per_user, total }
    }
}

/// Why one more connection of `uid` would pass a cap, in words for the peer, when it would;
/// `live` holds each connection's key (a helper's pid) under its uid. (A few hundred at most:
/// counting them is cheaper than keeping counts.)
pub(crate) fn over_cap<K>(live: &HashMap<K, u32>, uid: u32, caps: Caps) -> Option<String> {
    let (own, all) = (live.values().filter(|u| **u == uid).count(), live.len());
    if own >= caps.per_user {
        return Some(format!(
            "uid {uid} has reached the cap on connections per user, {own} (--max-per-user); end \
             some agentd sessions of this user, or ask the administrator to raise the cap"
        ));
    }
    (all >= caps.total).then(|| {
        format!(
            "the service has reached its cap on connections for all users, {all} \
             (--max-connections); try again when some have ended, or ask the administrator to \
             raise the cap"
        )
    })
}

/// Whom the rule admits, for the log and for errors: `uids [..]`, and the group's members.
impl std::fmt::Display for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "uids {:?}", self.uids)?;
        match &self.group {
            Some(group) => write!(f, " and the members of group {}", group.name),
            None => Ok(()),
        }
    }
}

impl Admission {
    /// Whether a uid other than `me` may be admitted.
    pub(crate) fn admits_others(&self, me: u32) -> bool {
        self.group.is_some() || self.uids.iter().any(|uid| *uid != me)
    }

    /// Why `uid` is not served, or nothing when it is. Group membership is read from the user
    /// and group databases at every connection, so adding a user to the group (or removing one)
    /// takes effect without a restart.
    fn refuses(&self, uid: u32) -> Option<String> {
        let listed = format!("not in the allowed uids {:?}", self.uids);
        match (&self.group, self.uids.contains(&uid)) {
            (_, true) => None,
            (None, false) => Some(listed),
            (Some(group), false) => match groups_of(uid) {
                Some((_, groups)) if groups.contains(&group.gid) => None,
                Some(_) => Some(format!("{listed} nor a member of group {}", group.name)),
                None => Some(format!(
                    "{listed}, and has no user whose groups can be read"
                )),
            },
        }
    }
}

/// The login group and every group of the user of `uid`, as its login has them (the group
/// database's, with the login group); `None` when the uid has no user or its groups cannot be
/// read.
pub(crate) fn groups_of(uid: u32) -> Option<(Gid, Vec<Gid>)> {
    let user = User::from_uid(Uid::from_raw(uid)).ok()??;
    let name = CString::new(user.name.into_bytes()).ok()?;
    Some((user.gid, getgrouplist(&name, user.gid).ok()?))
}

/// Accepts the next pending connection and its peer's credentials, refusing (logged, dropped
/// without a word) each peer `admission` refuses; `Ok(None)` once none is pending.
pub(crate) fn accept(
    listener: &UnixListener,
    admission: &Admission,
) -> std::io::Result<Option<(UnixStream, Peer)>> {
    loop {
        let sock = match listener.accept() {
            Ok((sock, _)) => sock,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let peer = match getsockopt(&sock, sockopt::PeerCredentials) {
            Ok(cred) => cred,
            Err(e) => {
                log!("refused a peer whose credentials cannot be read: {e}");
                continue;
            }
        };
        let (uid, pid) = (peer.uid(), peer.pid());
        match admission.refuses(uid) {
            Some(why) => log!("refused peer uid {uid} (pid {pid}): {why}"),
            None => return Ok(Some((sock, peer))),
        }
    }
}

/// Refuses `peer`: logs why, sends it a refusal carrying `why` in place of a greeting, and
/// closes the connection (dropping `sock`). Nothing is read from it.
pub(crate) fn refuse(sock: UnixStream, peer: &Peer, why: &str) {
    log!(
        "refused peer uid {} (pid {}): {why}",
        peer.uid(),
        peer.pid()
    );
    let reason = format!("confine-helper service: {why}");
    if let Ok(frame) = encode_frame(&Hello::refusal(&reason)) {
        // A new connection's buffer takes one short frame whole, without waiting; a peer that
        // has gone already is told nothing.
        let _ = send(sock.as_raw_fd(), &frame, SEND_FLAGS);
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
        let mut live = HashMap::from([(1, 1001)]);
        assert_eq!(over_cap(&live, 1001, caps), None);
        live.insert(2, 1001);
        let own = over_cap(&live, 1001, caps).expect("at the cap of its uid");
        assert!(
            own.contains(
                "uid 1001 has reached the cap on connections per user, 2 (--max-per-user)"
            ),
            "{own}"
        );
        let other = over_cap(&live, 1002, caps);
        assert_eq!(other, None, "another uid has its own count");
        live.insert(3, 1002);
        let all = over_cap(&live, 1002, caps).expect("at the cap of all uids");
        assert!(
            all.contains("its cap on connections for all users, 3 (--max-connections)"),
            "{all}"
        );
        // An ended connection frees its place.
        live.remove(&2);
        assert_eq!(over_cap(&live, 1001, caps), None);
    }
}
