//! A root service's connections: each admitted peer is served by a helper of its own, running
//! as that peer.
//!
//! The root process accepts, checks the peer's credentials ([`super::accept`]) and starts
//! `confine-helper --fd N --served-from SOCKET` with the connection as descriptor N, after the
//! child has taken the peer's user's supplementary groups, gid and uid (`sys::run_as`) and
//! before it executes: the new helper never held root, so nothing a peer sends is ever read by
//! a root process, and its commands run as the peer, with the groups its login gives it,
//! confined exactly as in embedded mode.
//!
//! The root process keeps nothing of a connection once its helper started, and reaps its
//! helpers as they end (SIGCHLD through a signalfd).

use std::ffi::CString;
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Gid, Uid, User, getgrouplist};

use super::admit::{Admission, Pause, Peer, accept};
use crate::log;

/// What every peer's helper is started with besides its connection.
#[derive(Debug)]
pub(crate) struct Handoff {
    /// The service's `--ceiling`, passed on (each peer's helper also reads the system ceiling
    /// and the peer's own).
    pub(crate) ceiling: Option<PathBuf>,
    /// The service socket: its directory is kept out of every sandbox of the peer's helper.
    pub(crate) socket: PathBuf,
}

/// Accepts and hands off connections until the listener fails.
pub(crate) fn serve_by_handoff(
    listener: UnixListener,
    admission: Admission,
    handoff: Handoff,
) -> std::io::Result<()> {
    let mut mask = SigSet::empty();
    mask.add(Signal::SIGCHLD);
    mask.thread_block()?;
    let children = SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)?;
    let mut pause = Pause::default();
    loop {
        let now = Instant::now();
        pause.wake(now);
        let resting = pause.until();
        let timeout = match resting {
            Some(until) => PollTimeout::try_from(until.saturating_duration_since(now))
                .unwrap_or(PollTimeout::MAX),
            None => PollTimeout::NONE,
        };
        let listen_events = if resting.is_some() {
            PollFlags::empty()
        } else {
            PollFlags::POLLIN
        };
        let (child_ended, incoming) = {
            let mut fds = [
                PollFd::new(children.as_fd(), PollFlags::POLLIN),
                PollFd::new(listener.as_fd(), listen_events),
            ];
            match poll(&mut fds, timeout) {
                Ok(_) | Err(nix::Error::EINTR) => {}
                Err(e) => return Err(e.into()),
            }
            let ready = |fd: &PollFd| fd.revents().is_some_and(|r| !r.is_empty());
            (ready(&fds[0]), ready(&fds[1]))
        };
        if child_ended {
            while let Ok(Some(_)) = children.read_signal() {}
            reap();
        }
        if incoming {
            accept(&listener, &admission, &mut pause, |sock, peer| {
                if let Err(e) = start(&sock, &peer, &handoff) {
                    log!("cannot start a helper for {}: {e}; closed it", peer.label());
                }
            });
        }
    }
}

/// Starts the helper that serves `sock` as `peer`; `sock` is closed here when the caller drops
/// it, the helper holding its own copy.
fn start(sock: &UnixStream, peer: &Peer, handoff: &Handoff) -> std::io::Result<()> {
    // The peer's user: its login group and its supplementary groups, as its login has them;
    // without a user, the group it connected with alone.
    let user = User::from_uid(Uid::from_raw(peer.uid)).ok().flatten();
    let gid = user.as_ref().map_or(Gid::from_raw(peer.gid), |u| u.gid);
    let groups = match &user {
        Some(user) => CString::new(user.name.as_bytes())
            .ok()
            .and_then(|name| getgrouplist(&name, gid).ok())
            .unwrap_or_else(|| vec![gid]),
        None => vec![gid],
    };
    // The one descriptor that crosses `execve`. The root process is single-threaded, so no
    // other spawn can inherit it in between.
    fcntl(sock, FcntlArg::F_SETFD(FdFlag::empty()))?;
    let fd = std::os::fd::AsRawFd::as_raw_fd(sock);
    let mut helper = Command::new("/proc/self/exe");
    helper
        .arg0("confine-helper")
        .arg("--fd")
        .arg(fd.to_string());
    if let Some(ceiling) = &handoff.ceiling {
        helper.arg("--ceiling").arg(ceiling);
    }
    helper
        .arg("--served-from")
        .arg(&handoff.socket)
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    let shown_groups: Vec<String> = groups.iter().map(ToString::to_string).collect();
    let shown_groups = shown_groups.join(",");
    if peer.uid != 0 {
        // In the child before `execve`: the groups, the gid, then the uid (real, effective and
        // saved), so that it cannot become root again (checked there too).
        crate::sys::run_as(&mut helper, Uid::from_raw(peer.uid), gid, groups);
    }
    let spawned = helper.spawn();
    fcntl(sock, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
    let child = spawned?;
    if peer.uid == 0 {
        log!(
            "{}: served by helper pid {} as root",
            peer.label(),
            child.id()
        );
    } else {
        log!(
            "{}: served by helper pid {} as uid {} gid {gid} groups {shown_groups}",
            peer.label(),
            child.id(),
            peer.uid,
        );
    }
    Ok(())
}

/// Reaps every helper that ended, logging those that failed.
fn reap() {
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) | Err(nix::Error::ECHILD) => return,
            Ok(WaitStatus::Exited(_, 0)) => {}
            Ok(WaitStatus::Exited(pid, code)) => log!("helper pid {pid} exited with status {code}"),
            Ok(WaitStatus::Signaled(pid, signal, _)) => {
                log!("helper pid {pid} was killed by {signal}");
            }
            Ok(_) => {}
            Err(nix::Error::EINTR) => {}
            Err(e) => {
                log!("cannot reap helpers: {e}");
                return;
            }
        }
    }
}
