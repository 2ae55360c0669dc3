//! The service's connections: each admitted peer is served by a helper of its own, running as
//! that peer (a root service) or as the service's own uid (a user's own service, which admits
//! that uid alone).
//!
//! The service accepts, checks the peer's credentials ([`crate::admit`]) and the caps on its
//! connections ([`crate::live`]), and starts `confine-helper --fd N --served-from SOCKET` (the
//! `--helper` binary) with the connection as descriptor N. A root service's child first takes
//! the process limit of the peer's process, joins the peer's cgroup (where the service has one
//! per peer, [`crate::cgroup`]) and takes the peer's user's supplementary groups, gid and uid
//! ([`crate::sys::run_as`]), before it executes: the new helper never held root, so nothing a peer sends
//! is ever read by a root process, its commands run as the peer, with the groups its login
//! gives it, confined exactly as in embedded mode, and the kernel counts the helper and its
//! commands against the peer's own process limit. A peer the service does not serve (a cap,
//! its process limit, a failed start) is sent a refusal that says why ([`crate::live::refuse`]).
//!
//! The service keeps nothing of a connection once its helper started but the helper's
//! pid under the peer's uid, and reaps its helpers as they end (SIGCHLD through a signalfd).

use std::ffi::CString;
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Gid, Pid, Uid, User, getgrouplist};

use crate::admit::{Admission, Pause, Peer, accept};
use crate::cgroup::{CgroupError, Cgroups};
use crate::live::{Caps, Live, refuse};
use crate::log;
use crate::sys::{Identity, run_as};

/// What a helper running as the service's own uid keeps of the service's environment: where
/// that user's ceiling and verdict cache live. A peer's helper in a root service keeps nothing.
const OWN_ENVIRONMENT: [&str; 3] = ["XDG_CONFIG_HOME", "XDG_CACHE_HOME", "HOME"];

/// How long a root service's helper keeps a connection that was greeted and then runs no
/// command and sends nothing, by default (`--idle-limit`). agentd holds its connection for a
/// whole session and connects again, transparently, for the next command after it was closed;
/// five minutes spares a person thinking between two prompts a new helper, and frees the place
/// of a session left open, or of a peer that only holds connections, soon.
pub(crate) const IDLE_LIMIT: Duration = Duration::from_secs(300);

/// What every peer's helper is started with besides its connection, and how many may run.
#[derive(Debug)]
pub(crate) struct Handoff {
    /// The `confine-helper` executed for every peer.
    pub(crate) helper: PathBuf,
    /// The service's `--ceiling`, passed on (each peer's helper also reads the system ceiling
    /// and the peer's own).
    pub(crate) ceiling: Option<PathBuf>,
    /// The service socket: its directory is kept out of every sandbox of the peer's helper.
    pub(crate) socket: PathBuf,
    pub(crate) caps: Caps,
    /// Passed on as `--idle-limit`: how long a peer's helper keeps a connection that runs
    /// nothing and sends nothing (zero: for as long as it is open).
    pub(crate) idle_limit: Duration,
    /// Whether the service's cgroup is delegated to it (`--delegated-cgroup`).
    pub(crate) delegated_cgroup: bool,
}

/// Why a peer's helper was not started; the text is what the peer is told.
#[derive(Debug, thiserror::Error)]
enum StartError {
    #[error("cannot read the process limit of the process that connected, {path}: {source}")]
    Limits {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "no new process may start as uid {uid}: it has reached its process limit (RLIMIT_NPROC \
         {limit}, as its process pid {pid} has it), or the service its own; end some of its \
         processes or agentd sessions"
    )]
    ProcessLimit { uid: u32, pid: i32, limit: u64 },
    #[error("{0}")]
    Cgroup(#[from] CgroupError),
    #[error("cannot start a helper: {0}")]
    Spawn(#[from] std::io::Error),
}

/// Accepts and hands off connections until the listener fails.
pub(crate) fn serve(
    listener: &UnixListener,
    admission: &Admission,
    handoff: &Handoff,
) -> std::io::Result<()> {
    let mut mask = SigSet::empty();
    mask.add(Signal::SIGCHLD);
    mask.thread_block()?;
    let children = SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)?;
    let cgroups = cgroups(handoff.delegated_cgroup);
    let mut live = Live::new();
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
            reap(&mut live, cgroups.as_ref());
        }
        if incoming {
            accept(listener, admission, &mut pause, |sock, peer| {
                if let Some(why) = live.over_cap(peer.uid, handoff.caps) {
                    return refuse(sock, &peer, &why);
                }
                match start(&sock, &peer, handoff, cgroups.as_ref()) {
                    Ok(helper) => live.add(helper, peer.uid),
                    Err(e) => refuse(sock, &peer, &e.to_string()),
                }
            });
        }
    }
}

/// The service's cgroups per peer, when its cgroup is delegated and they can be set up; why
/// not is logged once.
fn cgroups(delegated: bool) -> Option<Cgroups> {
    let why = match delegated.then(Cgroups::delegated) {
        Some(Ok(cgroups)) => return Some(cgroups),
        Some(Err(why)) => why.to_string(),
        None => "no --delegated-cgroup".to_owned(),
    };
    log!("no cgroup per peer ({why}): a peer's helpers are bounded by its process limit alone");
    None
}

/// Starts the helper that serves `sock` as `peer`, returning its pid; `sock` is closed here
/// when the caller drops it, the helper holding its own copy.
fn start(
    sock: &UnixStream,
    peer: &Peer,
    handoff: &Handoff,
    cgroups: Option<&Cgroups>,
) -> Result<Pid, StartError> {
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
    // The process limit of the process that connected, its hard limit at most the service's
    // own. (Its pid is the one `SO_PEERCRED` recorded: if that process has ended, the
    // connection is refused; RFC 0001 says what is left.)
    let (soft, hard) = process_limit(&peer.pid.to_string())?;
    let hard = hard.min(process_limit("self")?.1);
    let processes = (soft.min(hard), hard);
    let cgroup = cgroups.map(|c| c.procs_of(peer.uid)).transpose()?;
    // The one descriptor that crosses `execve`. The root process is single-threaded, so no
    // other spawn can inherit it in between.
    fcntl(sock, FcntlArg::F_SETFD(FdFlag::empty())).map_err(std::io::Error::from)?;
    let fd = std::os::fd::AsRawFd::as_raw_fd(sock);
    let mut helper = Command::new(&handoff.helper);
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
        .arg("--idle-limit")
        .arg(handoff.idle_limit.as_secs().to_string())
        .env_clear()
        .envs(OWN_ENVIRONMENT.iter().filter_map(|name| {
            let own = !nix::unistd::geteuid().is_root();
            own.then(|| std::env::var_os(name).map(|value| (name, value)))?
        }))
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    let shown_groups: Vec<String> = groups.iter().map(ToString::to_string).collect();
    let shown_groups = shown_groups.join(",");
    // In the child before `execve`: the peer's limits and cgroup as root, then (unless the peer
    // is root) the groups, the gid and the uid (real, effective and saved), so that it cannot
    // become root again (checked there too). A user's own service serves its own uid as is.
    if nix::unistd::geteuid().is_root() {
        let identity = Identity {
            uid: Uid::from_raw(peer.uid),
            gid,
            groups,
            processes,
            cgroup,
        };
        run_as(&mut helper, identity);
    }
    let spawned = helper.spawn();
    fcntl(sock, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)).map_err(std::io::Error::from)?;
    let child = match spawned {
        // `execve` refuses a process whose uid was over its process limit when it took it.
        Err(e) if e.raw_os_error() == Some(nix::libc::EAGAIN) => {
            return Err(StartError::ProcessLimit {
                uid: peer.uid,
                pid: peer.pid,
                limit: processes.0,
            });
        }
        spawned => spawned?,
    };
    let who = if peer.uid == 0 {
        "root".to_owned()
    } else {
        format!("uid {} gid {gid} groups {shown_groups}", peer.uid)
    };
    let cgroup = cgroups.map_or_else(String::new, |c| {
        format!(", in {}", c.of(peer.uid).display())
    });
    log!(
        "{}: served by helper pid {} as {who}, process limit {}{cgroup}",
        peer.label(),
        child.id(),
        processes.0,
    );
    Ok(Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX)))
}

/// The soft and hard process limit (`RLIMIT_NPROC`) of process `pid` (a number, or `self`),
/// from `/proc/PID/limits`, a table the kernel writes and any process may read (a root process
/// without `CAP_SYS_RESOURCE` may not `prlimit` another user's process): the line `Max
/// processes`, then the two limits, each a number or `unlimited`.
fn process_limit(pid: &str) -> Result<(u64, u64), StartError> {
    let path = PathBuf::from(format!("/proc/{pid}/limits"));
    let text = std::fs::read_to_string(&path);
    let value = |word: Option<&str>| match word? {
        "unlimited" => Some(u64::MAX),
        number => number.parse().ok(),
    };
    let limit = |text: &str| {
        let mut words = text
            .lines()
            .find_map(|l| l.strip_prefix("Max processes"))?
            .split_whitespace();
        Some((value(words.next())?, value(words.next())?))
    };
    match text {
        Ok(text) => limit(&text).ok_or(std::io::ErrorKind::InvalidData.into()),
        Err(e) => Err(e),
    }
    .map_err(|source| StartError::Limits { path, source })
}

/// Reaps every helper that ended, logging those that failed, and forgets it.
fn reap(live: &mut Live<Pid>, cgroups: Option<&Cgroups>) {
    loop {
        let pid = match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) | Err(nix::Error::ECHILD) => return,
            Ok(WaitStatus::Exited(pid, code)) => {
                if code != 0 {
                    log!("helper pid {pid} exited with status {code}");
                }
                pid
            }
            Ok(WaitStatus::Signaled(pid, signal, _)) => {
                log!("helper pid {pid} was killed by {signal}");
                pid
            }
            Ok(_) | Err(nix::Error::EINTR) => continue,
            Err(e) => {
                log!("cannot reap helpers: {e}");
                return;
            }
        };
        if let (Some((uid, 0)), Some(cgroups)) = (live.remove(&pid), cgroups) {
            cgroups.forget(uid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_limit_is_read_from_the_kernel_s_table() {
        let resource = nix::sys::resource::Resource::RLIMIT_NPROC;
        let limit = nix::sys::resource::getrlimit(resource).expect("getrlimit");
        assert_eq!(process_limit("self").expect("read"), limit);
        let pid = std::process::id().to_string();
        assert_eq!(process_limit(&pid).expect("read"), limit);
    }
}
