//! A blocking, minimal peer for the helper's wire tests: it speaks frames directly, so tests can
//! also send what a correct agentd never would.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio as ProcStdio};
use std::sync::mpsc;
use std::time::Duration;

use confine_protocol::{
    Backend, BackendChoice, EnvVar, FrameDecoder, Hello, Limits, Mode, Policy, Reply, Request,
    Spawn, Stdio, StdioSpec, encode_frame,
};
use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};

#[path = "../../../tests/shared/available.rs"]
pub mod available;
#[path = "../../../tests/shared/skip.rs"]
pub mod skip;
#[path = "../../../tests/shared/users.rs"]
pub mod users;

pub const HELPER: &str = env!("CARGO_BIN_EXE_confine-helper");

/// One connection to a helper.
pub struct Peer {
    pub sock: UnixStream,
    decoder: FrameDecoder,
    pub child: Option<Child>,
}

impl Peer {
    /// Starts an embedded helper on a socketpair, with its stderr captured to `log`.
    pub fn embedded_with_log(log: Option<&Path>) -> Peer {
        Peer::embedded_with(log, |_| {})
    }

    /// Starts an embedded helper after `adjust` has had its say on the command.
    pub fn embedded_with(log: Option<&Path>, adjust: impl FnOnce(&mut Command)) -> Peer {
        Peer::embedded_program(Path::new(HELPER), log, adjust)
    }

    /// Starts the helper binary at `program` (a copy, say) embedded.
    pub fn embedded_program(
        program: &Path,
        log: Option<&Path>,
        adjust: impl FnOnce(&mut Command),
    ) -> Peer {
        let (ours, theirs) = UnixStream::pair().expect("socketpair");
        let theirs_fd = theirs.as_raw_fd();
        let mut cmd = Command::new(program);
        cmd.args(["--fd", "3"])
            .stdin(ProcStdio::null())
            .stdout(ProcStdio::null());
        if let Some(log) = log {
            cmd.stderr(std::fs::File::create(log).expect("log file"));
        }
        // SAFETY: dup2 is async-signal-safe; the closure touches no shared state.
        unsafe {
            cmd.pre_exec(move || {
                if nix::libc::dup2(theirs_fd, 3) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        adjust(&mut cmd);
        let child = cmd.spawn().expect("spawn confine-helper");
        drop(theirs);
        let mut peer = Peer::over(ours);
        peer.child = Some(child);
        peer
    }

    pub fn embedded() -> Peer {
        Peer::embedded_with_log(None)
    }

    pub fn over(sock: UnixStream) -> Peer {
        sock.set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        Peer {
            sock,
            decoder: FrameDecoder::new(),
            child: None,
        }
    }

    pub fn connect(path: &Path) -> std::io::Result<Peer> {
        UnixStream::connect(path).map(Peer::over)
    }

    /// Exchanges greetings; returns the helper's.
    pub fn greet(&mut self) -> Hello {
        self.send_raw(&encode_frame(&Hello::ours("wire-test")).expect("encode"));
        self.read_message::<Hello>().expect("helper greeting")
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.sock.write_all(bytes).expect("write");
    }

    /// Sends a request, attaching `fds` to the first byte.
    pub fn send(&mut self, request: &Request, fds: &[BorrowedFd<'_>]) {
        let frame = encode_frame(request).expect("encode");
        let raw: Vec<_> = fds.iter().map(|f| f.as_raw_fd()).collect();
        let cmsg = [ControlMessage::ScmRights(&raw)];
        let cmsgs: &[ControlMessage<'_>] = if raw.is_empty() { &[] } else { &cmsg };
        let sent = sendmsg::<()>(
            self.sock.as_raw_fd(),
            &[std::io::IoSlice::new(&frame)],
            cmsgs,
            MsgFlags::empty(),
            None,
        )
        .expect("sendmsg");
        self.sock.write_all(&frame[sent..]).expect("write rest");
    }

    /// Reads one message; `None` when the helper closed the connection.
    pub fn read_message<T: serde::de::DeserializeOwned>(&mut self) -> Option<T> {
        loop {
            match self.decoder.next_payload() {
                Ok(Some(payload)) => {
                    return Some(confine_protocol::decode_payload(&payload).expect("decode"));
                }
                Ok(None) => {}
                Err(e) => panic!("bad frame from helper: {e}"),
            }
            let mut buf = [0u8; 4096];
            match self.sock.read(&mut buf) {
                Ok(0) => return None,
                Ok(n) => self.decoder.feed(&buf[..n]).expect("frame"),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return None,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => panic!("read from helper: {e} ({:?})", e.kind()),
            }
        }
    }

    pub fn reply(&mut self) -> Reply {
        self.read_message::<Reply>()
            .expect("helper closed the connection")
    }

    /// Reads replies until the terminal one for `id`, returning every reply for `id`.
    pub fn until_end(&mut self, id: u64) -> Vec<Reply> {
        let mut seen = Vec::new();
        loop {
            let reply = self.reply();
            if reply.request_id() != Some(id) {
                continue;
            }
            let terminal = !matches!(reply, Reply::Started(_));
            seen.push(reply);
            if terminal {
                return seen;
            }
        }
    }
}

/// Sockets connected to a service by one process running as another user, which stays alive
/// until this is dropped: `SO_PEERCRED` records the credentials and the pid of the process that
/// calls `connect(2)`, and a root service gives the helper it starts the limits that process has.
pub struct ConnectedAs {
    pub socks: Vec<UnixStream>,
    /// `cat`, as the user, reading a pipe only this end writes: it ends when the pipe closes.
    holder: Child,
}

impl ConnectedAs {
    /// The connecting process's pid.
    pub fn pid(&self) -> u32 {
        self.holder.id()
    }
}

impl Drop for ConnectedAs {
    fn drop(&mut self) {
        drop(self.holder.stdin.take());
        let _ = self.holder.wait();
    }
}

/// `count` sockets connected to `path` by one process running as `uid` and `gid` (as root),
/// with `max_processes` as its `RLIMIT_NPROC` when given; the first `connect` that fails is the
/// error. Linux only, as are the service and hostile-peer tests that use it.
#[cfg(target_os = "linux")]
pub fn connect_as(
    (uid, gid): (u32, u32),
    path: &Path,
    count: usize,
    max_processes: Option<u64>,
) -> std::io::Result<ConnectedAs> {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, UnixAddr, connect, socket};
    let socks: Vec<OwnedFd> = (0..count)
        .map(|_| {
            socket(
                AddressFamily::Unix,
                SockType::Stream,
                SockFlag::SOCK_CLOEXEC,
                None,
            )
        })
        .collect::<nix::Result<_>>()?;
    let fds: Vec<i32> = socks.iter().map(AsRawFd::as_raw_fd).collect();
    let addr = UnixAddr::new(path)?;
    let mut holder = Command::new("cat");
    holder
        .uid(uid)
        .gid(gid)
        .stdin(ProcStdio::piped())
        .stdout(ProcStdio::null());
    // SAFETY: setrlimit and connect are async-signal-safe; the address and the list of
    // descriptors were built before the fork, and the closure allocates nothing.
    unsafe {
        holder.pre_exec(move || {
            if let Some(limit) = max_processes {
                let nproc = nix::sys::resource::Resource::RLIMIT_NPROC;
                nix::sys::resource::setrlimit(nproc, limit, limit)?;
            }
            for fd in &fds {
                connect(*fd, &addr)?;
            }
            Ok(())
        });
    }
    let holder = holder.spawn()?;
    Ok(ConnectedAs {
        socks: socks.into_iter().map(UnixStream::from).collect(),
        holder,
    })
}

/// Opens the socket and its directory to every user: only `SO_PEERCRED` is left to refuse.
pub fn open_to_everyone(socket: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path, m| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m));
    let run = socket.parent().expect("socket dir");
    mode(run.parent().expect("scratch dir"), 0o755).expect("chmod scratch");
    mode(run, 0o755).expect("chmod run");
    mode(socket, 0o666).expect("chmod socket");
}

/// `confine-service`, built beside the helper (`cargo test --workspace` builds both; alone,
/// `cargo build -p confine-service` first): the service tests drive it, and it executes the
/// `confine-helper` beside it.
pub fn service_bin() -> PathBuf {
    let service = Path::new(HELPER).with_file_name("confine-service");
    assert!(
        service.is_file(),
        "{} is missing: build it first (cargo build -p confine-service)",
        service.display()
    );
    service
}

/// A copy of the service and of the helper beside it that every user can execute (the
/// checkout may lie where only its owner can go): a root service's helper for another user
/// executes the helper beside the service as that user. Returns the service's copy and the
/// directory that holds both, removed when dropped.
pub fn service_for_every_user() -> (PathBuf, Scratch) {
    use std::os::unix::fs::PermissionsExt;
    let bin = Scratch::new("every-user-bin");
    std::fs::set_permissions(&bin.0, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    // Copied by another process: a copy written here could still be open for writing in a
    // child another test forks meanwhile, and executing it would fail (ETXTBSY).
    let copied = Command::new("cp")
        .arg(HELPER)
        .arg(service_bin())
        .arg(&bin.0)
        .status();
    assert!(
        copied.expect("cp").success(),
        "copy the service and the helper"
    );
    (bin.0.join("confine-service"), bin)
}

/// A danger-full-access spawn of `argv` with no stdio.
pub fn spawn(id: u64, argv: &[&str]) -> Spawn {
    Spawn {
        id,
        argv: argv.iter().map(|a| a.as_bytes().to_vec()).collect(),
        cwd: b"/".to_vec(),
        env: vec![EnvVar {
            name: b"PATH".to_vec(),
            value: b"/usr/local/bin:/usr/bin:/bin".to_vec(),
        }],
        policy: Policy::read_only().with_mode(Mode::DangerFullAccess),
        backend: BackendChoice::Auto,
        limits: Limits::none().with_kill_grace(1000),
        stdio: Stdio {
            stdin: StdioSpec::Null,
            stdout: StdioSpec::Null,
            stderr: StdioSpec::Null,
        },
        proxy: false,
    }
}

/// The file reader and writer beside the helper under test, resolved: the program the helper
/// runs by its descriptor. A workspace build makes it (`cargo build -p confine-file-io`).
pub fn file_io() -> PathBuf {
    let program = Path::new(HELPER).with_file_name(confine_protocol::FILE_IO_PROGRAM);
    assert!(
        program.is_file(),
        "{} is missing: build it with `cargo build -p confine-file-io` (a workspace build does)",
        program.display()
    );
    std::fs::canonicalize(&program).expect("resolve the file reader and writer")
}

/// The `Spawn` agentd makes of a file read or write: `program` in the mode `args` names on
/// `path`, in `/`, with no environment and no kill grace, under `policy` and `backend`.
pub fn file_spawn(
    id: u64,
    program: &Path,
    args: &[&str],
    path: &Path,
    policy: Policy,
    backend: BackendChoice,
    stdio: Stdio,
) -> Spawn {
    let mut argv = vec![program.as_os_str().as_encoded_bytes().to_vec()];
    argv.extend(args.iter().map(|a| a.as_bytes().to_vec()));
    argv.extend([b"--".to_vec(), path.as_os_str().as_encoded_bytes().to_vec()]);
    let mut request = spawn(id, &[]);
    request.argv = argv;
    request.env = Vec::new();
    request.policy = policy;
    request.backend = backend;
    request.limits.timeout_ms = Some(30_000);
    request.limits.kill_grace_ms = 0;
    request.stdio = stdio;
    request
}

/// A writer's stdio: the content in, the report out.
pub const WRITER_STDIO: Stdio = Stdio {
    stdin: StdioSpec::Fd,
    stdout: StdioSpec::Fd,
    stderr: StdioSpec::Null,
};

/// A reader's stdio: the content and the report out.
pub const READER_STDIO: Stdio = Stdio {
    stdin: StdioSpec::Null,
    stdout: StdioSpec::Fd,
    stderr: StdioSpec::Fd,
};

/// A pipe whose write end goes to the command as stdout; returns (read end, write end).
pub fn pipe() -> (std::fs::File, OwnedFd) {
    #[cfg(target_os = "linux")]
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).expect("pipe");
    // No pipe2 on macOS: the flag is set after (a test's own fork could take the ends along in
    // between, which only keeps a pipe open longer).
    #[cfg(target_os = "macos")]
    let (r, w) = {
        let (r, w) = nix::unistd::pipe().expect("pipe");
        for end in [&r, &w] {
            nix::fcntl::fcntl(
                end,
                nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
            )
            .expect("close-on-exec");
        }
        (r, w)
    };
    (std::fs::File::from(r), w)
}

/// Spawns with stdout captured; returns the replies and what the command printed.
pub fn run_captured(peer: &mut Peer, mut request: Spawn) -> (Vec<Reply>, String) {
    let (mut out, w) = pipe();
    request.stdio.stdout = StdioSpec::Fd;
    let id = request.id;
    peer.send(&Request::Spawn(request), &[w.as_fd()]);
    drop(w);
    let mut text = String::new();
    out.read_to_string(&mut text).expect("read output");
    (peer.until_end(id), text)
}

/// A private scratch directory under the system temp dir, removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "confine-helper-test-{tag}-{}-{n}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A `confine-service` whose log lines (and its helpers') arrive on a channel.
pub struct Service {
    pub child: Child,
    lines: mpsc::Receiver<String>,
    pub socket: PathBuf,
}

impl Service {
    /// Starts `confine-service` on `dir/run/helper.sock` with `extra` arguments and waits until
    /// it serves.
    pub fn start(dir: &Path, extra: &[&str]) -> Service {
        Service::start_with(dir, extra, |_| {})
    }

    /// Starts the service after `adjust` has had its say on the command.
    pub fn start_with(dir: &Path, extra: &[&str], adjust: impl FnOnce(&mut Command)) -> Service {
        let socket = dir.join("run").join("helper.sock");
        let mut command = Command::new(service_bin());
        command.arg("--socket").arg(&socket).args(extra);
        adjust(&mut command);
        Service::start_command(socket, command)
    }

    /// Starts `command`, a service (or a program that executes one) serving `socket`, and waits
    /// until it serves.
    pub fn start_command(socket: PathBuf, mut command: Command) -> Service {
        command
            .stdin(ProcStdio::null())
            .stdout(ProcStdio::null())
            .stderr(ProcStdio::piped());
        let mut child = command.spawn().expect("spawn confine-service");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let service = Service {
            child,
            lines,
            socket,
        };
        service.expect_log("serving");
        service
    }

    /// Waits for a log line containing `words`; returns it.
    pub fn expect_log(&self, words: &str) -> String {
        self.expect_log_within(words, Duration::from_secs(20))
    }

    /// Waits up to `limit` for a log line containing `words`; returns it.
    pub fn expect_log_within(&self, words: &str, limit: Duration) -> String {
        let until = std::time::Instant::now() + limit;
        loop {
            let left = until.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(words) => return line,
                Ok(_) => {}
                Err(e) => panic!("no log line containing {words:?}: {e}"),
            }
        }
    }

    /// Every log line that arrives within `window`.
    pub fn log_within(&self, window: Duration) -> Vec<String> {
        let until = std::time::Instant::now() + window;
        let mut lines = Vec::new();
        while let Ok(line) = self
            .lines
            .recv_timeout(until.saturating_duration_since(std::time::Instant::now()))
        {
            lines.push(line);
        }
        lines
    }

    pub fn still_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Why this user cannot make the namespaces the helper's own backend makes, if it cannot: a
/// user namespace with the user's ids mapped in it, and inside it mount (a fresh `/proc`
/// mounted), pid, IPC, UTS, cgroup and network namespaces, made by util-linux's `unshare`
/// ([`available::user_namespaces`], the check kernel-e2e runs as each cell's user). Judged once
/// per process.
pub fn user_namespaces() -> Result<(), String> {
    available::user_namespaces().map_err(|why| why.to_string())
}

/// Whether `backend` works on this machine, judged without the helper (`available.rs`, and
/// [`user_namespaces`] for the helper's own namespaces, which also need Landlock); what is
/// missing and why when it does not.
pub fn backend_works(backend: BackendChoice) -> Result<(), (skip::Need, String)> {
    match backend {
        BackendChoice::Bwrap => {
            available::bwrap().map_err(|why| (skip::Need::Bwrap, why.to_string()))
        }
        BackendChoice::Landlock => {
            available::landlock().map_err(|why| (skip::Need::Landlock, why.to_string()))
        }
        BackendChoice::Namespaces => {
            available::landlock().map_err(|why| (skip::Need::Landlock, why.to_string()))?;
            user_namespaces().map_err(|why| (skip::Need::UserNamespace, why))
        }
        other => Err((
            skip::Need::Backend,
            format!("{other:?} is not a Linux backend"),
        )),
    }
}

/// The backends that work on this machine, judged without the helper (`available.rs`), in the
/// helper's order of preference; a SKIP line for `test` names each one missing. Whether the
/// helper agrees is `availability.rs`'s test.
pub fn available_backends(test: &str) -> Vec<BackendChoice> {
    let mut usable = Vec::new();
    for backend in [
        BackendChoice::Namespaces,
        BackendChoice::Bwrap,
        BackendChoice::Landlock,
    ] {
        match backend_works(backend) {
            Ok(()) => usable.push(backend),
            Err((need, why)) => skip::skip_part(test, need.name(), need, why),
        }
    }
    usable
}

/// The backends with a mount namespace of their own (bwrap and the helper's own namespaces)
/// that work here: a SKIP line for `test` names each one missing, and the test's own SKIP when
/// neither does (the caller then returns on the empty list).
pub fn namespace_backends(test: &str) -> Vec<BackendChoice> {
    let mut usable = Vec::new();
    for backend in [BackendChoice::Bwrap, BackendChoice::Namespaces] {
        match backend_works(backend) {
            Ok(()) => usable.push(backend),
            Err((need, why)) => skip::skip_part(test, &format!("{backend:?}"), need, why),
        }
    }
    if usable.is_empty() {
        skip::skip(
            test,
            skip::Need::Backend,
            "neither bwrap nor the helper's own namespaces work here",
        );
    }
    usable
}

/// The backends the helper on `peer` reports usable (`HelperInfo`), with its reason for each
/// one it does not: what the availability test holds against [`available_backends`].
pub fn reported_backends(peer: &mut Peer) -> Vec<(Backend, Result<(), String>)> {
    peer.send(&Request::Info, &[]);
    let Reply::Info(info) = peer.reply() else {
        panic!("expected Info");
    };
    info.backends
        .into_iter()
        .map(|b| (b.backend, if b.usable { Ok(()) } else { Err(b.detail) }))
        .collect()
}
