//! The service's connections: each admitted peer is served by a helper of its own, running as
//! that peer (a root service) or as the service's own uid (a user's own service, which admits
//! that uid alone).
//!
//! The service accepts, checks the peer's credentials and the caps on its connections
//! ([`crate::admit`]), and starts `confine-helper --fd N --served-from SOCKET` (the `--helper`
//! binary) with the connection as descriptor N. A root service's child first takes the process
//! limit of the peer's process, joins the peer's cgroup (where the service has one per peer,
//! [`crate::cgroup`]) and takes the peer's user's supplementary groups, gid and uid
//! ([`crate::sys::run_as`]), before it executes: the new helper never held root, so nothing a
//! peer sends is ever read by a root process, its commands run as the peer, with the groups its
//! login gives it, confined exactly as in embedded mode, and the kernel counts the helper and
//! its commands against the peer's own process limit. A peer the service does not serve (a
//! cap, its process limit, a failed start) is sent a refusal that says why
//! ([`crate::admit::refuse`]).
//!
//! The service keeps nothing of a connection once its helper started but the helper's pid
//! under the peer's uid, and reaps its helpers as they end (SIGCHLD through a signalfd). A
//! connection it cannot accept (it has no descriptor left) stays in the backlog while the
//! listener rests for [`ACCEPT_PAUSE`]: polled again at once, it would wake the loop over and
//! over, logging a failed accept each time, until a descriptor is freed.

use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Gid, Pid, Uid, geteuid};

use crate::admit::{Admission, Caps, Peer, accept, groups_of, over_cap, refuse};
use crate::cgroup::{CgroupError, Cgroups};
use crate::log::log;
use crate::sys::run_as;

/// How long the listener rests after a failed accept.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// What a helper running as the service's own uid keeps of the service's environment: where
/// that user's ceiling lives (the helper reads no other variable). A peer's helper in a root
/// service keeps nothing.
const OWN_ENVIRONMENT: [&str; 2] = ["XDG_CONFIG_HOME", "HOME"];

/// How long a root service's helper keeps a connection that was greeted and then runs no
/// command and sends nothing, by default (`--idle-limit`). agentd holds its connection for a
/// whole session and connects again, transparently, for the next command after it was closed;
/// five minutes spares a person thinking between two prompts a new helper, and frees the place
/// of a session left open, or of a peer that only holds connections, soon.
pub(crate) const IDLE_LIMIT: Duration = Duration::from_secs(300);

/// What every peer's helper is started with besides its connection, and how many may run.
#[derive(Debug, Default)]
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
    /// This `limits` file cannot be read, or has no process limit.
    #[error("cannot read the process limit of the process that connected, {0}: {1}")]
    Limits(PathBuf, std::io::Error),
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
    // Each helper's pid, under the uid it serves.
    let mut live = HashMap::new();
    // Until when the listener rests, and whether that run of failed accepts was logged.
    let (mut resting, mut logged) = (None::<Instant>, false);
    loop {
        let now = Instant::now();
        resting = resting.filter(|until| *until > now);
        let timeout = resting.map_or(PollTimeout::NONE, |until| {
            PollTimeout::try_from(until - now).unwrap_or(PollTimeout::MAX)
        });
        let listen = resting.map_or(PollFlags::POLLIN, |_| PollFlags::empty());
        let mut fds = [
            PollFd::new(children.as_fd(), PollFlags::POLLIN),
            PollFd::new(listener.as_fd(), listen),
        ];
        match poll(&mut fds, timeout) {
            Ok(_) | Err(nix::Error::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
        let [child_ended, incoming] = fds.map(|fd| fd.revents().is_some_and(|r| !r.is_empty()));
        if child_ended {
            while let Ok(Some(_)) = children.read_signal() {}
            reap(&mut live, cgroups.as_ref());
        }
        while incoming && resting.is_none() {
            let (sock, peer) = match accept(listener, admission) {
                Ok(Some(admitted)) => admitted,
                Ok(None) => break,
                Err(e) => {
                    if !logged {
                        log!(
                            "accept failed: {e}; waiting connections are retried every {} ms \
                             (logged once until one is accepted)",
                            ACCEPT_PAUSE.as_millis()
                        );
                    }
                    (resting, logged) = (Some(Instant::now() + ACCEPT_PAUSE), true);
                    break;
                }
            };
            logged = false;
            if let Some(why) = over_cap(&live, peer.uid(), handoff.caps) {
                refuse(sock, &peer, &why);
                continue;
            }
            match start(&sock, &peer, handoff, cgroups.as_ref()) {
                Ok(helper) => drop(live.insert(helper, peer.uid())),
                Err(e) => refuse(sock, &peer, &e.to_string()),
            }
        }
    }
}

/// The service's cgroups per peer, when its cgroup is delegated and they can be set up; why
/// not is logged once.
fn cgroups(delegated: bool) -> Option<Cgroups> {
    match delegated.then(Cgroups::delegated)? {
        Ok(cgroups) => Some(cgroups),
        Err(why) => {
            log!("no cgroup per peer ({why}): a peer's helpers are bounded by its process limit");
            None
        }
    }
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
    let fallback = Gid::from_raw(peer.gid());
    let (gid, groups) = groups_of(peer.uid()).unwrap_or((fallback, vec![fallback]));
    // The process limit of the process that connected, its hard limit at most the service's
    // own. (Its pid is the one `SO_PEERCRED` recorded: if that process has ended, the
    // connection is refused; RFC 0001 says what is left.)
    let (soft, hard) = process_limit(&peer.pid().to_string())?;
    let hard = hard.min(process_limit("self")?.1);
    let processes = (soft.min(hard), hard);
    let cgroup = cgroups.map(|c| c.procs_of(peer.uid())).transpose()?;
    // The one descriptor that crosses `execve`. The service is single-threaded, so no other
    // spawn can inherit it in between.
    fcntl(sock, FcntlArg::F_SETFD(FdFlag::empty())).map_err(std::io::Error::from)?;
    let root = geteuid().is_root();
    let mut helper = Command::new(&handoff.helper);
    helper.args(["--fd", &sock.as_raw_fd().to_string()]);
    if let Some(ceiling) = &handoff.ceiling {
        helper.arg("--ceiling").arg(ceiling);
    }
    let own_env = OWN_ENVIRONMENT.iter().filter(|_| !root);
    helper
        .arg("--served-from")
        .arg(&handoff.socket)
        .args(["--idle-limit", &handoff.idle_limit.as_secs().to_string()])
        .env_clear()
        .envs(own_env.filter_map(|name| Some((name, std::env::var_os(name)?))))
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    let (uid, pid, limit) = (peer.uid(), peer.pid(), processes.0);
    let who = format!("uid {uid} gid {gid} groups {groups:?}, process limit {limit}");
    // In the child before `execve`: the peer's limits and cgroup as root, then (unless the peer
    // is root) the groups, the gid and the uid (real, effective and saved), so that it cannot
    // become root again (checked there too). A user's own service serves its own uid as is.
    if root {
        run_as(
            &mut helper,
            Uid::from_raw(uid),
            (gid, groups),
            processes,
            cgroup,
        );
    }
    let spawned = helper.spawn();
    fcntl(sock, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)).map_err(std::io::Error::from)?;
    let child = match spawned {
        // `execve` refuses a process whose uid was over its process limit when it took it.
        Err(e) if e.raw_os_error() == Some(nix::libc::EAGAIN) => {
            return Err(StartError::ProcessLimit { uid, pid, limit });
        }
        spawned => spawned?,
    };
    let cgroup = cgroups.map(|c| format!(", in {}", c.of(uid).display()));
    let (helper, cgroup) = (child.id(), cgroup.unwrap_or_default());
    log!("peer uid {uid} pid {pid}: served by helper pid {helper} as {who}{cgroup}");
    Ok(Pid::from_raw(helper.try_into().unwrap_or(i32::MAX)))
}

/// The soft and hard process limit (`RLIMIT_NPROC`) of process `pid` (a number, or `self`),
/// from `/proc/PID/limits`, a table the kernel writes and any process may read (a root process
/// without `CAP_SYS_RESOURCE` may not `prlimit` another user's process): the line `Max
/// processes`, then the two limits, each a number or `unlimited`.
fn process_limit(pid: &str) -> Result<(u64, u64), StartError> {
    let path = PathBuf::from(format!("/proc/{pid}/limits"));
    let text = std::fs::read_to_string(&path).map_err(|e| StartError::Limits(path.clone(), e))?;
    let line = text.lines().find_map(|l| l.strip_prefix("Max processes"));
    let value = |word: &str| match word {
        "unlimited" => Some(u64::MAX),
        number => number.parse().ok(),
    };
    let mut words = line.unwrap_or_default().split_whitespace().map(value);
    let invalid = std::io::ErrorKind::InvalidData.into();
    match (words.next().flatten(), words.next().flatten()) {
        (Some(soft), Some(hard)) => Ok((soft, hard)),
        _ => Err(StartError::Limits(path, invalid)),
    }
}

/// Reaps every helper that ended, logging those that failed, and forgets it.
fn reap(live: &mut HashMap<Pid, u32>, cgroups: Option<&Cgroups>) {
    loop {
        let pid = match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, 0)) => pid,
            Ok(status @ (WaitStatus::Exited(pid, _) | WaitStatus::Signaled(pid, ..))) => {
                log!("helper pid {pid} ended: {status:?}");
                pid
            }
            Ok(WaitStatus::StillAlive) | Err(nix::Error::ECHILD) => return,
            Ok(_) | Err(nix::Error::EINTR) => continue,
            Err(e) => return log!("cannot reap helpers: {e}"),
        };
        // A uid's cgroup goes with its last helper.
        if let (Some(uid), Some(cgroups)) = (live.remove(&pid), cgroups)
            && !live.values().any(|u| *u == uid)
        {
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
