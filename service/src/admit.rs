//! Who may connect: every connection's `SO_PEERCRED` uid against the admission rule.
//!
//! A connection the helper cannot accept (it has no descriptor left) stays in the backlog while
//! the listener rests for [`ACCEPT_PAUSE`]: polled again at once, it would wake the loop over and
//! over, logging a failed accept each time, until a descriptor is freed.

use std::ffi::CString;
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

use nix::unistd::{Gid, Uid, User};

use crate::log;
use crate::socket::Group;

/// How long the listener rests after a failed accept.
pub(crate) const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// Whether the listener rests after a failed accept, and whether that failure was logged.
#[derive(Debug, Default)]
pub(crate) struct Pause {
    until: Option<Instant>,
    /// Logged once per run of failures; the next accepted connection ends the run.
    logged: bool,
}

impl Pause {
    /// When the listener is polled again, while it rests.
    pub(crate) fn until(&self) -> Option<Instant> {
        self.until
    }

    /// Ends the rest once its time has come.
    pub(crate) fn wake(&mut self, now: Instant) {
        if self.until.is_some_and(|until| until <= now) {
            self.until = None;
        }
    }
}

/// Which peers a service serves: those whose uid is listed, and the members of its group.
#[derive(Debug, Clone)]
pub(crate) struct Admission {
    pub(crate) uids: Vec<u32>,
    pub(crate) group: Option<Group>,
}

/// An admitted connection: the peer's credentials as the kernel gave them at `connect`.
#[derive(Debug)]
pub(crate) struct Peer {
    pub(crate) uid: u32,
    /// What a root service's helper for the peer runs as, when its user has no entry.
    pub(crate) gid: u32,
    pub(crate) pid: i32,
}

impl Peer {
    /// The label its log lines carry.
    pub(crate) fn label(&self) -> String {
        format!("peer uid {} pid {}", self.uid, self.pid)
    }
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
        if self.uids.contains(&uid) {
            return None;
        }
        let Some(group) = &self.group else {
            return Some(format!("not in the allowed uids {:?}", self.uids));
        };
        match member_of(uid, group.gid) {
            Ok(true) => None,
            Ok(false) => Some(format!(
                "not in the allowed uids {:?} nor a member of group {}",
                self.uids, group.name
            )),
            Err(why) => Some(format!(
                "not in the allowed uids {:?}, and its membership of group {} cannot be read: \
                 {why}",
                self.uids, group.name
            )),
        }
    }
}

/// Whether the user of `uid` is a member of `gid`: as its primary group, or as the group
/// database lists it ([`listed_member`]).
fn member_of(uid: u32, gid: u32) -> Result<bool, String> {
    let user = User::from_uid(Uid::from_raw(uid))
        .map_err(|e| e.to_string())?
        .ok_or_else(|| "the uid has no user".to_owned())?;
    if user.gid.as_raw() == gid {
        return Ok(true);
    }
    listed_member(&user, gid)
}

/// Whether the group database makes `user` a member of `gid`, as its login would.
fn listed_member(user: &User, gid: u32) -> Result<bool, String> {
    let name = CString::new(user.name.as_bytes()).map_err(|e| e.to_string())?;
    let groups = nix::unistd::getgrouplist(&name, user.gid).map_err(|e| e.to_string())?;
    Ok(groups.contains(&Gid::from_raw(gid)))
}

/// The peer's uid, gid and pid, as the kernel recorded them when it connected.
fn peer_of(sock: &UnixStream) -> nix::Result<Peer> {
    let cred = nix::sys::socket::getsockopt(sock, nix::sys::socket::sockopt::PeerCredentials)?;
    Ok(Peer {
        uid: cred.uid(),
        gid: cred.gid(),
        pid: cred.pid(),
    })
}

/// Accepts every pending connection, one at a time. A peer `admission` refuses is logged and
/// dropped without a word; each admitted one goes to `admitted` with its credentials before
/// the next is accepted. A failed accept makes the listener rest (`pause`).
pub(crate) fn accept(
    listener: &UnixListener,
    admission: &Admission,
    pause: &mut Pause,
    mut admitted: impl FnMut(UnixStream, Peer),
) {
    loop {
        let sock = match listener.accept() {
            Ok((sock, _)) => sock,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                if !pause.logged {
                    log!(
                        "accept failed: {e}; waiting connections are retried every {} ms \
                         (logged once until one is accepted)",
                        ACCEPT_PAUSE.as_millis()
                    );
                    pause.logged = true;
                }
                pause.until = Some(Instant::now() + ACCEPT_PAUSE);
                break;
            }
        };
        pause.logged = false;
        let peer = match peer_of(&sock) {
            Ok(peer) => peer,
            Err(e) => {
                log!("refused a peer whose credentials cannot be read: {e}");
                continue;
            }
        };
        if let Some(why) = admission.refuses(peer.uid) {
            log!("refused peer uid {} (pid {}): {why}", peer.uid, peer.pid);
            continue;
        }
        admitted(sock, peer);
    }
}
