//! The helper's event loop: one thread, one `poll`, its one connection and every command.
//!
//! A single thread keeps `fork` safe (the child inherits no lock held by another thread) and
//! keeps the state easy to audit: connections, commands and timers live in this one struct.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::io::IoSliceMut;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use confine_protocol::{
    Backend, Ending, FrameDecoder, Hello, HelperInfo, Refusal, Reply, Request, Spawn, StdioSpec,
    check_hello, decode_payload, encode_frame,
};
use nix::libc;
use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg, send};
use nix::unistd::Pid;

use crate::command::{self, Running};
use crate::confine::Context;
use crate::log;
use crate::sys;
use closed::Closed;

mod closed;

/// Why serving ended in failure; logged, and the helper exits 1.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ServeError {
    /// The descriptor of `--fd` is not an open socket.
    #[error("--fd {fd}: {source}")]
    NotASocket { fd: RawFd, source: io::Error },
    /// The connection cannot be marked close-on-exec.
    #[error("--fd {fd}: {source}")]
    Cloexec { fd: RawFd, source: nix::Error },
    /// The event loop failed.
    #[error("{0}")]
    Run(#[source] io::Error),
}

/// Serves the connection inherited as descriptor `fd` (from agentd, or from `confine-service`
/// for one of its peers) until it is gone.
pub(crate) fn serve_inherited(
    fd: RawFd,
    ctx: Context,
    idle_limit: Option<Duration>,
) -> Result<(), ServeError> {
    let owned =
        sys::inherited_socket(fd).map_err(|source| ServeError::NotASocket { fd, source })?;
    let sock = UnixStream::from(owned);
    nix::fcntl::fcntl(
        &sock,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    )
    .map_err(|source| ServeError::Cloexec { fd, source })?;
    Server::embedded(sock, ctx, idle_limit)
        .run()
        .map_err(ServeError::Run)
}

/// A peer that leaves a frame half-sent this long is cut off.
const STALL_LIMIT: Duration = Duration::from_secs(30);
/// A peer that has not greeted this long after connecting is cut off.
const HELLO_LIMIT: Duration = Duration::from_secs(10);
/// Replies queued for a peer that does not read; past this the peer is cut off.
const MAX_QUEUED_OUTPUT: usize = 4 << 20;
/// Descriptors received but not yet claimed by a Spawn frame.
const MAX_QUEUED_FDS: usize = 64;
/// Commands the connection may have running at once, counting those answered whose shims are
/// still to be reaped.
const MAX_IN_FLIGHT: usize = 1024;

/// The one connection: agentd's, or a service peer's handed over by `confine-service`.
#[derive(Debug)]
struct Conn {
    sock: UnixStream,
    decoder: FrameDecoder,
    fds: VecDeque<OwnedFd>,
    out: Vec<u8>,
    greeted: bool,
    connected_at: Instant,
    last_input: Instant,
    /// When its last command ended: with `last_input`, where an idle spell starts.
    last_ended: Instant,
}

/// How the connection is named in the log.
const PEER: &str = "agentd";

#[derive(Debug)]
pub(crate) struct Server {
    /// How long a greeted connection may stay with no command running and nothing sent: a
    /// helper serving a peer of a root service (`--served-from`) frees its place.
    idle_limit: Option<Duration>,
    /// The connection, until it is gone; its commands are then reaped and the helper exits.
    conn: Option<Conn>,
    /// The running commands, by the id agentd gave each.
    commands: HashMap<u64, Running>,
    /// Commands answered on their shim's last record, whose shims are still to be reaped; the
    /// id is free again.
    reaping: Vec<Running>,
    hello: Hello,
    ctx: Context,
    #[cfg(target_os = "linux")]
    ahead: command::Pairs,
}

enum Token {
    Conn,
    Command(u64),
    /// A command answered already, by its shim's pid.
    Reaping(Pid),
    #[cfg(target_os = "linux")]
    Ahead,
}

impl Server {
    /// A helper serving one inherited connection; it exits when that connection is gone, or
    /// once it has been idle for `idle_limit`.
    pub(crate) fn embedded(sock: UnixStream, ctx: Context, idle_limit: Option<Duration>) -> Server {
        let mut server = Server {
            idle_limit,
            conn: None,
            commands: HashMap::new(),
            reaping: Vec::new(),
            hello: Hello::ours(&format!("confine-helper {}", env!("CARGO_PKG_VERSION"))),
            ctx,
            #[cfg(target_os = "linux")]
            ahead: command::Pairs::default(),
        };
        if let Err(e) = sock.set_nonblocking(true) {
            log!("{PEER}: cannot make the connection non-blocking: {e}; closing it");
            return server;
        }
        let greeting = match encode_frame(&server.hello) {
            Ok(frame) => frame,
            Err(e) => {
                log!("cannot encode the greeting: {e}");
                return server;
            }
        };
        let now = Instant::now();
        server.conn = Some(Conn {
            sock,
            decoder: FrameDecoder::new(),
            fds: VecDeque::new(),
            out: greeting,
            greeted: false,
            connected_at: now,
            last_input: now,
            last_ended: now,
        });
        server.flush();
        server
    }

    /// Runs until there is nothing left to serve: the connection is gone and its commands
    /// reaped.
    pub(crate) fn run(&mut self) -> std::io::Result<()> {
        loop {
            if self.conn.is_none() && self.commands.is_empty() && self.reaping.is_empty() {
                #[cfg(target_os = "linux")]
                self.ahead.made();
                return Ok(());
            }
            let (mut fds, tokens) = self.poll_set();
            let timeout = self.poll_timeout();
            sys::poll(&mut fds, timeout)?;
            for (pfd, token) in fds.iter().zip(tokens) {
                if pfd.revents == 0 {
                    continue;
                }
                match token {
                    Token::Conn => {
                        if pfd.revents & libc::POLLOUT != 0 {
                            self.flush();
                        }
                        if pfd.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
                            self.read_conn();
                        }
                    }
                    Token::Command(id) => self.on_status(id),
                    Token::Reaping(shim) => self.on_reaping(shim),
                    #[cfg(target_os = "linux")]
                    Token::Ahead => self.ahead.made(),
                }
            }
            // After what arrived is handled: a request that came with its deadline counts.
            self.on_timers(Instant::now());
        }
    }

    fn poll_set(&self) -> (Vec<libc::pollfd>, Vec<Token>) {
        let mut fds = Vec::new();
        let mut tokens = Vec::new();
        let mut add = |fd: i32, events: i16, token: Token| {
            fds.push(libc::pollfd {
                fd,
                events,
                revents: 0,
            });
            tokens.push(token);
        };
        if let Some(conn) = &self.conn {
            let mut events = libc::POLLIN;
            if !conn.out.is_empty() {
                events |= libc::POLLOUT;
            }
            add(conn.sock.as_raw_fd(), events, Token::Conn);
        }
        for (id, cmd) in &self.commands {
            add(cmd.status.as_raw_fd(), libc::POLLIN, Token::Command(*id));
        }
        for cmd in &self.reaping {
            add(
                cmd.status.as_raw_fd(),
                libc::POLLIN,
                Token::Reaping(cmd.shim),
            );
        }
        #[cfg(target_os = "linux")]
        if let Some(fd) = self.ahead.making() {
            add(fd, libc::POLLIN, Token::Ahead);
        }
        (fds, tokens)
    }

    /// When the connection is cut off unless something happens first, and why.
    fn conn_deadline(&self) -> Option<(Instant, Closed)> {
        deadline(self.conn.as_ref()?, self.idle_limit, self.commands.len())
    }

    fn poll_timeout(&self) -> i32 {
        let now = Instant::now();
        let command_timers = self
            .commands
            .values()
            .flat_map(|c| [c.deadline, c.kill_at])
            .flatten();
        let conn_timer = self.conn_deadline().map(|(at, _)| at);
        match command_timers.chain(conn_timer).min() {
            None => -1,
            Some(at) => {
                let ms = at.saturating_duration_since(now).as_micros().div_ceil(1000);
                i32::try_from(ms).unwrap_or(i32::MAX)
            }
        }
    }

    fn on_timers(&mut self, now: Instant) {
        for cmd in self.commands.values_mut() {
            if cmd.deadline.is_some_and(|d| d <= now) {
                let grace = cmd.kill_grace;
                cmd.terminate(Ending::TimedOut, grace, now);
            }
            if cmd.kill_at.is_some_and(|k| k <= now) {
                cmd.kill_at = None;
                cmd.order(sys::CTL_KILL);
            }
        }
        if let Some((at, why)) = self.conn_deadline()
            && now >= at
        {
            self.close(why);
        }
    }

    fn read_conn(&mut self) {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let Some(conn) = self.conn.as_mut() else {
                return;
            };
            let mut cmsg = nix::cmsg_space!([std::os::fd::RawFd; 16]);
            let mut iov = [IoSliceMut::new(&mut buf)];
            let received = recvmsg::<()>(
                conn.sock.as_raw_fd(),
                &mut iov,
                Some(&mut cmsg),
                sys::RECV_FLAGS,
            );
            let (bytes, truncated) = match received {
                Ok(msg) => {
                    for c in msg.cmsgs().into_iter().flatten() {
                        if let ControlMessageOwned::ScmRights(fds) = c {
                            conn.fds.extend(sys::own_received(&fds));
                        }
                    }
                    (msg.bytes, msg.flags.contains(MsgFlags::MSG_CTRUNC))
                }
                Err(nix::Error::EAGAIN) => return,
                Err(nix::Error::EINTR) => continue,
                Err(e) => return self.close(Closed::Read(e)),
            };
            if truncated {
                return self.close(Closed::TooManyFds);
            }
            if conn.fds.len() > MAX_QUEUED_FDS {
                return self.close(Closed::UnclaimedFds);
            }
            if bytes == 0 {
                let why = match conn.decoder.finish() {
                    Ok(()) => Closed::ByPeer,
                    Err(e) => Closed::Protocol(e),
                };
                return self.close(why);
            }
            conn.last_input = Instant::now();
            // A count past the buffer is a broken read: the connection ends as on one.
            let Some(read) = buf.get(..bytes) else {
                return self.close(Closed::Read(nix::Error::EIO));
            };
            if let Err(e) = conn.decoder.feed(read) {
                return self.close(Closed::Protocol(e));
            }
            loop {
                let Some(conn) = self.conn.as_mut() else {
                    return;
                };
                match conn.decoder.next_payload() {
                    Ok(Some(payload)) => self.on_payload(&payload),
                    Ok(None) => break,
                    Err(e) => return self.close(Closed::Protocol(e)),
                }
            }
        }
    }

    fn on_payload(&mut self, payload: &[u8]) {
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        if !conn.greeted {
            let peer: Hello = match decode_payload(payload) {
                Ok(hello) => hello,
                Err(e) => return self.close(Closed::Greeting(e)),
            };
            if let Err(mismatch) = check_hello(&self.hello, &peer) {
                return self.close(Closed::Refused(mismatch));
            }
            conn.greeted = true;
            return;
        }
        let request: Request = match decode_payload(payload) {
            Ok(request) => request,
            Err(e) => return self.close(Closed::Protocol(e)),
        };
        match request {
            Request::Spawn(spawn) => self.on_spawn(spawn),
            Request::Cancel(cancel) => {
                let grace = Duration::from_millis(u64::from(cancel.grace_ms));
                if let Some(cmd) = self.commands.get_mut(&cancel.id) {
                    cmd.terminate(Ending::Cancelled, grace, Instant::now());
                }
            }
            Request::Hints(hints) => self.ctx.take_hints(&hints),
            Request::Info => {
                let info = Reply::Info(self.info());
                self.reply(&info);
            }
        }
    }

    fn info(&self) -> HelperInfo {
        crate::probe::info(&self.ctx)
    }

    /// Runs `spawn` with the descriptors that came with it (taken even when it must not run, so
    /// the stream of descriptors stays in step).
    fn on_spawn(&mut self, spawn: Spawn) {
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        let wanted = command::declared_fds(&spawn);
        if conn.fds.len() < wanted {
            let why = Closed::MissingFds {
                spawn: spawn.id,
                wanted,
                arrived: conn.fds.len(),
            };
            return self.close(why);
        }
        let mut take = |spec: StdioSpec| match spec {
            StdioSpec::Fd => conn.fds.pop_front(),
            StdioSpec::Null => None,
        };
        let stdio = [
            take(spawn.stdio.stdin),
            take(spawn.stdio.stdout),
            take(spawn.stdio.stderr),
        ];
        let proxy = if spawn.proxy {
            conn.fds.pop_front()
        } else {
            None
        };
        let refusal = if self.commands.contains_key(&spawn.id) {
            Some(Refusal::IdInUse { id: spawn.id })
        } else if self.commands.len() + self.reaping.len() >= MAX_IN_FLIGHT {
            Some(Refusal::TooManyCommands {
                max: u64::try_from(MAX_IN_FLIGHT).unwrap_or(u64::MAX),
            })
        } else {
            None
        };
        // The backend is known once a plan is made: a failure to start under it that is the
        // confinement's drops its verdict, as one the shim reports does (`on_status`).
        let started = match refusal {
            Some(reason) => Err((None, crate::confine::NotRun::Refused(reason))),
            None => command::check(&spawn)
                .and_then(|()| command::prepare(&spawn, &self.ctx, proxy))
                .map_err(|not_run| (None, not_run))
                .and_then(|plan| {
                    let backend = plan.backend;
                    #[cfg(target_os = "linux")]
                    let mut plan = plan;
                    #[cfg(target_os = "linux")]
                    let wanted = crate::confine::lend(&mut plan, &mut self.ahead.ready);
                    #[cfg(target_os = "macos")]
                    let wanted = false;
                    command::start(&spawn, stdio, plan)
                        .map(|running| (running, wanted))
                        .map_err(|e| (Some(backend), e))
                }),
        };
        match started {
            Ok((running, wanted)) => {
                self.commands.insert(spawn.id, running);
                #[cfg(target_os = "linux")]
                self.ahead.started(wanted);
                #[cfg(target_os = "macos")]
                let _ = wanted;
            }
            Err((backend, not_run)) => {
                let reply = not_run.into_reply(spawn.id);
                self.forget_if_unbuilt(backend, &reply);
                self.reply(&reply);
            }
        }
    }

    /// Drops `backend`'s verdict when `reply` says its confinement could not be built: the next
    /// request that needs it probes it again.
    fn forget_if_unbuilt(&self, backend: Option<Backend>, reply: &Reply) {
        if let (Some(backend), Reply::RunnerFailed(failed)) = (backend, reply)
            && failed.stage.builds_confinement()
        {
            self.ctx.forget_verdict(backend);
        }
    }

    fn on_status(&mut self, id: u64) {
        let Some(cmd) = self.commands.get_mut(&id) else {
            return;
        };
        let (started, ended) = cmd.read_status();
        let early = cmd.reply_early();
        let backend = cmd.backend();
        if let Some(started) = started {
            self.reply(&started);
        }
        if early.is_none() && !ended {
            return;
        }
        let Some(mut cmd) = self.commands.remove(&id) else {
            return;
        };
        let reply = match early {
            Some(reply) if ended => {
                cmd.reap();
                reply
            }
            Some(reply) => {
                self.reaping.push(cmd);
                reply
            }
            None => cmd.finish(),
        };
        self.forget_if_unbuilt(Some(backend), &reply);
        if let Some(conn) = self.conn.as_mut() {
            conn.last_ended = Instant::now();
        }
        self.reply(&reply);
        // Made only for a connection that may send another command.
        #[cfg(target_os = "linux")]
        if self.conn.is_some() {
            self.ahead.ended();
        }
    }

    /// Reaps an answered command's shim once it has closed its status pipe.
    fn on_reaping(&mut self, shim: Pid) {
        let Some(at) = self.reaping.iter().position(|cmd| cmd.shim == shim) else {
            return;
        };
        if let Some(cmd) = self.reaping.get_mut(at)
            && cmd.read_status().1
        {
            self.reaping.swap_remove(at).reap();
        }
    }

    fn reply(&mut self, reply: &Reply) {
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        match encode_frame(reply) {
            Ok(frame) => conn.out.extend_from_slice(&frame),
            Err(e) => return self.close(Closed::Encode(e)),
        }
        if conn.out.len() > MAX_QUEUED_OUTPUT {
            return self.close(Closed::NotReading);
        }
        self.flush();
    }

    fn flush(&mut self) {
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        while !conn.out.is_empty() {
            match send(conn.sock.as_raw_fd(), &conn.out, sys::SEND_FLAGS) {
                Ok(n) => {
                    conn.out.drain(..n);
                }
                Err(nix::Error::EAGAIN) => return,
                Err(nix::Error::EINTR) => continue,
                Err(e) => return self.close(Closed::Write(e)),
            }
        }
    }

    /// Drops the connection. Its commands lose their ctl pipe, which makes each shim kill its
    /// tree; they stay tracked until their shims are reaped.
    fn close(&mut self, why: Closed) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        // Closed before it is logged: once the line is there, the peer sees the end.
        drop(conn.sock);
        let mut killed = 0;
        for cmd in self.commands.values_mut() {
            if cmd.ctl.take().is_some() {
                killed += 1;
            }
        }
        if killed > 0 {
            log!("{PEER}: {why}; killing {killed} running command tree(s)");
        } else if !matches!(why, Closed::ByPeer) {
            log!("{PEER}: {why}");
        }
    }
}

/// When `conn` is cut off unless something happens first, and why: no greeting within
/// `HELLO_LIMIT`, a frame left half-sent for `STALL_LIMIT`, or, with `idle_limit`, nothing
/// running (of its `running` commands) and nothing sent for that long.
fn deadline(
    conn: &Conn,
    idle_limit: Option<Duration>,
    running: usize,
) -> Option<(Instant, Closed)> {
    if !conn.greeted {
        return Some((conn.connected_at + HELLO_LIMIT, Closed::NoGreeting));
    }
    if conn.decoder.buffered() > 0 {
        return Some((conn.last_input + STALL_LIMIT, Closed::Stalled));
    }
    let limit = idle_limit.filter(|_| running == 0)?;
    let since = conn.last_input.max(conn.last_ended);
    Some((since + limit, Closed::Idle(limit.as_secs())))
}
