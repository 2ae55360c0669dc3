//! Host-side canaries: things outside the sandbox that a confined command must not change or
//! reach, each with a way to ask the host afterwards what happened to it.
//!
//! Every check is made after agentd has exited, when whatever the command did has already
//! happened: a connection attempt is in the listener's backlog or never was, so the checks never
//! wait for anything.

use std::fs;
use std::io::{self, ErrorKind};
use std::net::{TcpListener, UdpSocket};
#[cfg(target_os = "linux")]
use std::os::fd::{AsFd, FromRawFd, OwnedFd, RawFd};
#[cfg(target_os = "linux")]
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::PermissionsExt;
#[cfg(target_os = "linux")]
use std::os::unix::net::SocketAddr;
use std::os::unix::net::{UnixDatagram, UnixListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::users::Identity;

/// What is at a path on the host, compared before and after a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathState {
    Absent,
    File(Vec<u8>),
    Dir(Vec<String>),
    Symlink(PathBuf),
    Other,
}

impl PathState {
    pub fn of(path: &Path) -> PathState {
        match fs::symlink_metadata(path) {
            Err(_) => PathState::Absent,
            Ok(meta) if meta.file_type().is_symlink() => {
                PathState::Symlink(fs::read_link(path).unwrap_or_default())
            }
            Ok(meta) if meta.is_file() => PathState::File(fs::read(path).unwrap_or_default()),
            Ok(meta) if meta.is_dir() => {
                let mut names: Vec<String> = fs::read_dir(path)
                    .map(|entries| {
                        entries
                            .flatten()
                            .map(|e| e.file_name().to_string_lossy().into_owned())
                            .collect()
                    })
                    .unwrap_or_default();
                names.sort();
                PathState::Dir(names)
            }
            Ok(_) => PathState::Other,
        }
    }
}

impl std::fmt::Display for PathState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PathState::Absent => f.write_str("absent"),
            PathState::File(bytes) => {
                write!(f, "a file holding {:?}", String::from_utf8_lossy(bytes))
            }
            PathState::Dir(names) => write!(f, "a directory with {names:?}"),
            PathState::Symlink(target) => write!(f, "a symlink to {}", target.display()),
            PathState::Other => f.write_str("a special file"),
        }
    }
}

/// A TCP listener on 127.0.0.1 that tells whether anything connected.
#[derive(Debug)]
pub struct TcpCanary {
    listener: TcpListener,
}

impl TcpCanary {
    pub fn new() -> io::Result<TcpCanary> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        Ok(TcpCanary { listener })
    }

    pub fn port(&self) -> u16 {
        self.listener.local_addr().map(|a| a.port()).unwrap_or(0)
    }

    /// Connections completed since the last call (the kernel finishes the handshake without us).
    pub fn connections(&self) -> usize {
        let mut count = 0;
        while self.listener.accept().is_ok() {
            count += 1;
        }
        count
    }
}

/// A UDP socket on 127.0.0.1 that tells whether any datagram arrived.
#[derive(Debug)]
pub struct UdpCanary {
    socket: UdpSocket,
}

impl UdpCanary {
    pub fn new() -> io::Result<UdpCanary> {
        let socket = UdpSocket::bind("127.0.0.1:0")?;
        socket.set_nonblocking(true)?;
        Ok(UdpCanary { socket })
    }

    pub fn port(&self) -> u16 {
        self.socket.local_addr().map(|a| a.port()).unwrap_or(0)
    }

    pub fn datagrams(&self) -> usize {
        let mut buf = [0u8; 512];
        let mut count = 0;
        while self.socket.recv(&mut buf).is_ok() {
            count += 1;
        }
        count
    }
}

/// A Unix stream listener and datagram socket, at two paths or two abstract names: the kind of
/// endpoint a D-Bus, docker or ssh-agent socket is.
#[derive(Debug)]
pub struct UnixCanary {
    pub stream_address: String,
    pub dgram_address: String,
    listener: UnixListener,
    dgram: UnixDatagram,
}

impl UnixCanary {
    /// Sockets at `<dir>/stream.sock` and `<dir>/dgram.sock`, connectable by anyone, so only the
    /// sandbox stands between a command and them.
    pub fn pathname(dir: &Path) -> io::Result<UnixCanary> {
        let stream = dir.join("stream.sock");
        let dgram = dir.join("dgram.sock");
        let listener = UnixListener::bind(&stream)?;
        let socket = UnixDatagram::bind(&dgram)?;
        for path in [&stream, &dgram] {
            fs::set_permissions(path, fs::Permissions::from_mode(0o777))?;
        }
        UnixCanary::finish(
            stream.to_string_lossy().into_owned(),
            dgram.to_string_lossy().into_owned(),
            listener,
            socket,
        )
    }

    /// Sockets in the abstract namespace: Linux's alone.
    #[cfg(target_os = "macos")]
    pub fn abstract_names(tag: &str) -> io::Result<UnixCanary> {
        let _ = tag;
        Err(io::Error::new(
            ErrorKind::Unsupported,
            "abstract socket names are Linux's",
        ))
    }

    /// Sockets in the abstract namespace, which has no permissions at all.
    #[cfg(target_os = "linux")]
    pub fn abstract_names(tag: &str) -> io::Result<UnixCanary> {
        let stream = format!("{tag}-stream");
        let dgram = format!("{tag}-dgram");
        let listener = UnixListener::bind_addr(&SocketAddr::from_abstract_name(&stream)?)?;
        let socket = UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(&dgram)?)?;
        UnixCanary::finish(stream, dgram, listener, socket)
    }

    fn finish(
        stream_address: String,
        dgram_address: String,
        listener: UnixListener,
        dgram: UnixDatagram,
    ) -> io::Result<UnixCanary> {
        listener.set_nonblocking(true)?;
        dgram.set_nonblocking(true)?;
        Ok(UnixCanary {
            stream_address,
            dgram_address,
            listener,
            dgram,
        })
    }

    pub fn connections(&self) -> usize {
        let mut count = 0;
        while self.listener.accept().is_ok() {
            count += 1;
        }
        count
    }

    pub fn datagrams(&self) -> usize {
        let mut buf = [0u8; 512];
        let mut count = 0;
        while self.dgram.recv(&mut buf).is_ok() {
            count += 1;
        }
        count
    }
}

/// A process of the same user, outside the sandbox, that should stay alive and running.
#[derive(Debug)]
pub struct CanaryProcess {
    child: Child,
}

/// How a canary process is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    Running,
    /// Stopped or traced: something got hold of it.
    Stopped,
    Dead,
}

impl CanaryProcess {
    pub fn spawn(user: &Identity) -> io::Result<CanaryProcess> {
        let mut command = Command::new("sleep");
        command
            .arg("3600")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        user.apply(&mut command);
        Ok(CanaryProcess {
            child: command.spawn()?,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn liveness(&mut self) -> Liveness {
        if !matches!(self.child.try_wait(), Ok(None)) {
            return Liveness::Dead;
        }
        let status = fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(str::trim)
                .unwrap_or("")
                .to_owned()
        };
        let state = field("State:");
        if state.starts_with('T') || state.starts_with('t') || field("TracerPid:") != "0" {
            Liveness::Stopped
        } else {
            Liveness::Running
        }
    }

    /// An address the process has mapped readable, for a memory-read attempt.
    pub fn readable_address(&self) -> Option<String> {
        let maps = fs::read_to_string(format!("/proc/{}/maps", self.pid())).ok()?;
        maps.lines()
            .find(|l| {
                l.split_whitespace()
                    .nth(1)
                    .is_some_and(|p| p.starts_with('r'))
            })
            .and_then(|l| l.split('-').next())
            .map(|start| format!("0x{start}"))
    }
}

impl Drop for CanaryProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until process `pid` has exited, at most `limit`; whether it did. Waits on kqueue's
/// `NOTE_EXIT`, so it returns the moment the process is gone, and works for processes that are
/// not our children (registering for one already gone fails with `ESRCH`).
#[cfg(target_os = "macos")]
pub fn wait_gone(pid: u32, limit: Duration) -> bool {
    use nix::sys::event::{EvFlags, EventFilter, FilterFlag, KEvent, Kqueue};
    let Ok(kq) = Kqueue::new() else {
        return false;
    };
    let watch = KEvent::new(
        pid as usize,
        EventFilter::EVFILT_PROC,
        EvFlags::EV_ADD | EvFlags::EV_ONESHOT,
        FilterFlag::NOTE_EXIT,
        0,
        0,
    );
    let deadline = Instant::now() + limit;
    let mut changes = vec![watch];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let timeout = nix::libc::timespec {
            tv_sec: left.as_secs().try_into().unwrap_or(nix::libc::time_t::MAX),
            tv_nsec: left.subsec_nanos().into(),
        };
        let mut events = [KEvent::new(
            0,
            EventFilter::EVFILT_PROC,
            EvFlags::empty(),
            FilterFlag::empty(),
            0,
            0,
        )];
        match kq.kevent(&changes, &mut events, Some(timeout)) {
            Ok(0) => return false,
            Ok(_) => {
                // An error in the registration comes back as an event flagged EV_ERROR.
                let ev = &events[0];
                if ev.flags().contains(EvFlags::EV_ERROR) {
                    return ev.data() == nix::libc::ESRCH as isize;
                }
                return true;
            }
            Err(nix::errno::Errno::EINTR) => changes.clear(),
            Err(nix::errno::Errno::ESRCH) => return true,
            Err(_) => return false,
        }
    }
}

/// Waits until process `pid` has exited, at most `limit`; whether it did. Waits on a pidfd, so
/// it returns the moment the process is gone, and works for processes that are not our children.
#[cfg(target_os = "linux")]
pub fn wait_gone(pid: u32, limit: Duration) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1; no memory is
    // passed.
    let fd = unsafe { nix::libc::syscall(nix::libc::SYS_pidfd_open, pid as nix::libc::pid_t, 0) };
    if fd < 0 {
        // ESRCH: already gone (and reaped).
        return std::io::Error::last_os_error().raw_os_error() == Some(nix::libc::ESRCH);
    }
    // SAFETY: `fd` was just returned by pidfd_open and is owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let timeout = PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX);
        let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, timeout) {
            Ok(0) => return false,
            Ok(_) => return true,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return false,
        }
    }
}

/// A helper daemon of the cell's user (a session bus, an ssh agent) for a case to attack;
/// killed when dropped.
#[derive(Debug)]
pub struct Daemon {
    child: Child,
    /// The first line the daemon printed (its address, as these daemons announce it).
    pub announced: String,
}

impl Daemon {
    /// Starts `command` and waits for its first line on stdout, at most `limit`.
    pub fn start(mut command: Command, user: &Identity, limit: Duration) -> io::Result<Daemon> {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        user.apply(&mut command);
        let mut child = command.spawn()?;
        let stdout = child.stdout.take();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            if let Some(stdout) = stdout {
                let _ =
                    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line);
            }
            let _ = tx.send(line);
        });
        let mut daemon = Daemon {
            child,
            announced: String::new(),
        };
        match rx.recv_timeout(limit) {
            Ok(line) if !line.trim().is_empty() => {
                daemon.announced = line.trim().to_owned();
                Ok(daemon)
            }
            _ => Err(io::Error::other("the daemon did not announce itself")),
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// pids of processes whose command line contains `tag`: what a command left behind.
#[cfg(target_os = "macos")]
pub fn tagged_processes(tag: &str) -> Vec<u32> {
    // No /proc on macOS: every process's pid and arguments as ps prints them.
    let me = std::process::id();
    let Ok(out) = Command::new("/bin/ps")
        .args(["-axww", "-o", "pid=,args="])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
    else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let (pid, args) = line.trim_start().split_once(' ')?;
            let pid: u32 = pid.parse().ok()?;
            (pid != me && contains(args.as_bytes(), tag.as_bytes())).then_some(pid)
        })
        .collect()
}

/// pids of processes whose command line contains `tag`: what a command left behind.
#[cfg(target_os = "linux")]
pub fn tagged_processes(tag: &str) -> Vec<u32> {
    let me = std::process::id();
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmdline| contains(&cmdline, tag.as_bytes()))
        })
        .collect()
}

/// Kills whatever carries `tag`, so one case's survivors never disturb the next.
pub fn kill_tagged(tag: &str) -> Vec<u32> {
    let pids = tagged_processes(tag);
    for &pid in &pids {
        let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
    }
    pids
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// A tmpfs mounted for one case and unmounted when dropped.
#[derive(Debug)]
pub struct TmpfsMount {
    pub path: PathBuf,
}

impl TmpfsMount {
    /// Needs CAP_SYS_ADMIN; the caller skips the case when this fails. Linux only.
    #[cfg(target_os = "macos")]
    pub fn new(path: &Path, user: &Identity) -> io::Result<TmpfsMount> {
        let _ = (path, user);
        Err(io::Error::new(
            ErrorKind::Unsupported,
            "a tmpfs fixture is Linux's",
        ))
    }

    /// Needs CAP_SYS_ADMIN; the caller skips the case when this fails.
    #[cfg(target_os = "linux")]
    pub fn new(path: &Path, user: &Identity) -> io::Result<TmpfsMount> {
        use nix::mount::{MsFlags, mount};
        fs::create_dir_all(path)?;
        let options = format!("size=1m,mode=0755,uid={},gid={}", user.uid, user.gid);
        mount(
            Some("tmpfs"),
            path,
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some(options.as_str()),
        )
        .map_err(io::Error::from)?;
        Ok(TmpfsMount {
            path: path.to_owned(),
        })
    }
}

impl Drop for TmpfsMount {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        {
            use nix::mount::{MntFlags, umount2};
            let _ = umount2(&self.path, MntFlags::MNT_DETACH);
        }
    }
}

/// Removes a file, a symlink or a whole tree; absence is success.
pub fn remove(path: &Path) -> io::Result<()> {
    let result = match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(e) => Err(e),
    };
    match result {
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Every path under `dir`, relative to it, sorted, without following symlinks: what a user
/// listing the directory on the host would see.
pub fn listing(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(next) = pending.pop() {
        let Ok(entries) = fs::read_dir(&next) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                pending.push(path.clone());
            }
            if let Ok(relative) = path.strip_prefix(dir) {
                found.push(relative.to_string_lossy().into_owned());
            }
        }
    }
    found.sort();
    found
}

/// A process of a user that sleeps until dropped: the user's other work, which a per-command
/// cap must not count. Not tagged, so it is never taken for a command's survivor.
#[derive(Debug)]
pub struct Sleeper(std::process::Child);

/// How long a [`Sleeper`] would sleep if nothing ended it first.
const SLEEPER_SECONDS: &str = "600";

impl Sleeper {
    pub fn start(user: &crate::users::Identity) -> io::Result<Sleeper> {
        let mut command = Command::new("/bin/sleep");
        command
            .arg(SLEEPER_SECONDS)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        user.apply(&mut command);
        command.spawn().map(Sleeper)
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
