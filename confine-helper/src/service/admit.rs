//! Who may connect: every connection's `SO_PEERCRED` uid (`LOCAL_PEERCRED` on macOS) against
//! the admission rule.
//!
//! A connection the helper cannot accept (it has no descriptor left) stays in the backlog while
//! the listener rests for [`ACCEPT_PAUSE`]: polled again at once, it would wake the loop over and
//! over, logging a failed accept each time, until a descriptor is freed.

#[cfg(target_os = "linux")]
use std::ffi::CString;
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

use nix::unistd::{Gid, Uid, User};

use super::socket::Group;
use crate::log;

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
    /// What a root service's helper for the peer runs as (Linux).
    #[cfg_attr(
        not(target_os = "linux"),
        expect(dead_code, reason = "the handoff's alone")
    )]
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

/// Why a user's membership of the admitted group cannot be read.
#[derive(Debug, thiserror::Error)]
enum Unreadable {
    #[error("{0}")]
    Lookup(#[from] nix::Error),
    #[error("the uid has no user")]
    NoUser,
    /// The user's name holds a NUL byte, so the group database cannot be asked about it.
    #[cfg(target_os = "linux")]
    #[error("{0}")]
    Name(#[from] std::ffi::NulError),
    #[cfg(target_os = "macos")]
    #[error("no group has gid {0}")]
    NoGroup(u32),
}

/// Whether the user of `uid` is a member of `gid`: as its primary group, or as the group
/// database lists it ([`listed_member`]).
fn member_of(uid: u32, gid: u32) -> Result<bool, Unreadable> {
    let user = User::from_uid(Uid::from_raw(uid))?.ok_or(Unreadable::NoUser)?;
    if user.gid.as_raw() == gid {
        return Ok(true);
    }
    listed_member(&user, gid)
}

/// Whether the group database makes `user` a member of `gid`, as its login would.
#[cfg(target_os = "linux")]
fn listed_member(user: &User, gid: u32) -> Result<bool, Unreadable> {
    let name = CString::new(user.name.as_bytes())?;
    let groups = nix::unistd::getgrouplist(&name, user.gid)?;
    Ok(groups.contains(&Gid::from_raw(gid)))
}

/// Whether the group's entry names `user` as a member. (Membership macOS's directory service
/// derives otherwise, through a nested group, is not seen: such a user is refused.)
#[cfg(target_os = "macos")]
fn listed_member(user: &User, gid: u32) -> Result<bool, Unreadable> {
    let group =
        nix::unistd::Group::from_gid(Gid::from_raw(gid))?.ok_or(Unreadable::NoGroup(gid))?;
    Ok(group.mem.contains(&user.name))
}

/// The peer's uid, gid and pid, as the kernel recorded them when it connected.
#[cfg(target_os = "linux")]
fn peer_of(sock: &UnixStream) -> nix::Result<Peer> {
    let cred = nix::sys::socket::getsockopt(sock, nix::sys::socket::sockopt::PeerCredentials)?;
    Ok(Peer {
        uid: cred.uid(),
        gid: cred.gid(),
        pid: cred.pid(),
    })
}

/// The peer's uid, effective gid and pid, as the kernel recorded them when it connected.
#[cfg(target_os = "macos")]
fn peer_of(sock: &UnixStream) -> nix::Result<Peer> {
    use nix::sys::socket::{getsockopt, sockopt};
    let cred = getsockopt(sock, sockopt::LocalPeerCred)?;
    let pid = getsockopt(sock, sockopt::LocalPeerPid)?;
    Ok(Peer {
        uid: cred.uid(),
        gid: cred.groups().first().copied().ok_or(nix::Error::EINVAL)?,
        pid,
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
