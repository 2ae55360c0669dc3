//! agentd's end of one command's proxy bridge (`Spawn::proxy`): the socket the bridge inside
//! the sandbox passes its connections over, and the proxy serving each of them by the
//! session's [`Policy`].
//!
//! [`Gateway::open`] makes a Unix socketpair: one end goes to confine-helper with the command
//! ([`Gateway::take_socket`]), the other stays here, where a task receives one socket end per
//! connection the command makes to `127.0.0.1:`[`PROXY_PORT`] and serves it with
//! [`serve_all`]. Anything that arrives and is not a socket is closed unread. Every decision is
//! kept (the first [`MAX_KEPT`], and a count) for the command's facts, which the session log
//! records. The task ends when the bridge's end closes (the sandbox is gone), or when the
//! gateway is dropped.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex, PoisonError};

use confine_protocol::PROXY_PORT;
use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
use serde::Serialize;
use tokio::io::Interest;
use tokio::net::UnixStream;
use tokio::task::JoinHandle;

use super::{Decision, Policy, SystemResolver, accepted, serve_all};
use crate::helper_client::SpawnSpec;

/// How many decisions one command's facts keep; the rest are counted.
pub const MAX_KEPT: usize = 64;

/// The environment that points a command's tools at the bridge.
pub fn environment() -> Vec<(String, String)> {
    let http = format!("http://127.0.0.1:{PROXY_PORT}");
    let socks = format!("socks5h://127.0.0.1:{PROXY_PORT}");
    let mut vars = Vec::new();
    for (name, value) in [
        ("HTTP_PROXY", &http),
        ("HTTPS_PROXY", &http),
        ("ALL_PROXY", &socks),
        // Loopback stays inside the sandbox's own namespace: no proxy for it.
        // (`localhost` is a name the allow-list decides, which may lead to the host itself.)
        ("NO_PROXY", &"127.0.0.1,::1".to_owned()),
    ] {
        vars.push((name.to_owned(), value.clone()));
        vars.push((name.to_lowercase(), value.clone()));
    }
    vars
}

/// One decision, as the facts name it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Shown {
    pub host: String,
    pub port: u16,
    pub protocol: &'static str,
    pub allowed: bool,
    pub reason: String,
}

impl From<&Decision> for Shown {
    fn from(d: &Decision) -> Shown {
        Shown {
            host: d.host.clone(),
            port: d.port,
            protocol: d.protocol.as_str(),
            allowed: d.allowed,
            reason: d.reason.to_string(),
        }
    }
}

/// What the proxy decided for one command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decisions {
    /// The first [`MAX_KEPT`], in order.
    pub kept: Vec<Shown>,
    /// How many there were in all.
    pub total: usize,
}

/// One command's proxy.
#[derive(Debug)]
pub struct Gateway {
    socket: Option<OwnedFd>,
    task: JoinHandle<()>,
    /// The listener on the host's port, where the command reaches it there (macOS), and the
    /// task serving it; dropping the listener gives the port back at once.
    host: Option<(Arc<tokio::net::TcpListener>, JoinHandle<()>)>,
    decisions: Arc<Mutex<Decisions>>,
}

/// Keeps each decision in `decisions`: the first [`MAX_KEPT`], and the count of all.
fn recorder(decisions: Arc<Mutex<Decisions>>) -> impl Fn(Decision) + Send + Sync + 'static {
    move |decision: Decision| {
        let mut all = decisions.lock().unwrap_or_else(PoisonError::into_inner);
        all.total += 1;
        if all.kept.len() < MAX_KEPT {
            all.kept.push(Shown::from(&decision));
        }
    }
}

/// Binds `addr` and serves every connection made to it under `policy`, each decision passed
/// to `record`, until the returned listener is dropped (which closes the socket then, not when
/// the task next runs). The bind's error names the port and who may hold it.
fn hold<C>(
    addr: SocketAddr,
    policy: Arc<Policy>,
    record: Arc<C>,
) -> io::Result<(Arc<tokio::net::TcpListener>, JoinHandle<()>)>
where
    C: Fn(Decision) + Send + Sync + 'static,
{
    let listener = std::net::TcpListener::bind(addr).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "the allow-list's proxy must listen on {addr}, where the sandbox lets the command \
                 connect, and cannot ({e}): another program, or another command of this agentd \
                 with an allow-list, holds it; the command was not started"
            ),
        )
    })?;
    listener.set_nonblocking(true)?;
    let listener = Arc::new(tokio::net::TcpListener::from_std(listener)?);
    let connections = accepted(Arc::downgrade(&listener));
    let task = tokio::spawn(async move {
        let _ = serve_all(connections, policy, Arc::new(SystemResolver), record).await;
    });
    Ok((listener, task))
}

impl Gateway {
    /// Opens the socketpair and starts serving its end here under `policy`; on macOS also
    /// holds the port the command's proxy variables name ([`Gateway::open_on`]). Must be
    /// called within a tokio runtime.
    pub fn open(policy: Arc<Policy>) -> io::Result<Gateway> {
        let port =
            cfg!(target_os = "macos").then(|| SocketAddr::from(([127, 0, 0, 1], PROXY_PORT)));
        Gateway::open_on(policy, port)
    }

    /// [`Gateway::open`], holding `host_port` too when given: a listener there, bound before
    /// the command starts and served under the same policy until the gateway ends. Seatbelt
    /// keeps a command to `localhost:`[`PROXY_PORT`] of the host itself (the command has no
    /// network of its own to put a bridge in), so whatever listens there is the command's way
    /// out: agentd must be that listener, and when it cannot bind the port (another program
    /// holds it, or another command of this agentd with an allow-list), the command does not
    /// start.
    fn open_on(policy: Arc<Policy>, host_port: Option<SocketAddr>) -> io::Result<Gateway> {
        let decisions = Arc::new(Mutex::new(Decisions::default()));
        let record = Arc::new(recorder(decisions.clone()));
        let host = match host_port {
            Some(addr) => Some(hold(addr, policy.clone(), record.clone())?),
            None => None,
        };
        let (theirs, ours) = std::os::unix::net::UnixStream::pair()?;
        ours.set_nonblocking(true)?;
        let ours = UnixStream::from_std(ours)?;
        let incoming = futures::stream::unfold(ours, |control| async move {
            loop {
                match receive(&control).await {
                    Ok(Some(stream)) => return Some((Ok(stream), control)),
                    // Not a socket, or nothing with the byte: closed unread, wait for the next.
                    Ok(None) => continue,
                    // The bridge's end closed: the sandbox is gone.
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return None,
                    Err(e) => return Some((Err(e), control)),
                }
            }
        });
        let task = tokio::spawn(async move {
            let _ = serve_all(incoming, policy, Arc::new(SystemResolver), record).await;
        });
        Ok(Gateway {
            socket: Some(theirs.into()),
            task,
            host,
            decisions,
        })
    }

    /// The end to send with the command (taken once).
    pub fn take_socket(&mut self) -> Option<OwnedFd> {
        self.socket.take()
    }

    /// Opens a gateway under `policy` for the command `spec` describes: its socket goes with
    /// the request and its tools are pointed at the bridge ([`environment`]).
    pub fn attach(spec: &mut SpawnSpec, policy: Arc<Policy>) -> io::Result<Gateway> {
        let mut gateway = Gateway::open(policy)?;
        spec.proxy = gateway.take_socket();
        let vars = environment().into_iter();
        spec.env
            .extend(vars.map(|(name, value)| (name.into(), value.into())));
        Ok(gateway)
    }

    /// What was decided since the last time this was asked (or since it opened); the proxy
    /// goes on serving. For a long-running program such as an MCP server.
    pub fn take_decisions(&self) -> Decisions {
        std::mem::take(
            &mut *self
                .decisions
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    /// What was decided so far; the proxy stops serving.
    pub fn finish(self) -> Decisions {
        self.task.abort();
        self.decisions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.task.abort();
        if let Some((listener, task)) = self.host.take() {
            task.abort();
            // Shut down before the close: a child agentd forks on another thread meanwhile
            // holds a copy of the descriptor until it executes its program, and would keep
            // the port listening past the close; the shutdown stops the listening itself.
            // (macOS may refuse it for a listener; the close still gives the port back.)
            let _ =
                nix::sys::socket::shutdown(listener.as_raw_fd(), nix::sys::socket::Shutdown::Both);
            drop(listener);
        }
    }
}

/// Receives one passed descriptor: `Some` socket, `None` for a message without one or with
/// something else (closed), end of file when the peer is gone.
async fn receive(control: &UnixStream) -> io::Result<Option<UnixStream>> {
    loop {
        control.readable().await?;
        let received = control.try_io(Interest::READABLE, || {
            let mut byte = [0u8; 1];
            let mut iov = [io::IoSliceMut::new(&mut byte)];
            let mut space = nix::cmsg_space!([std::os::fd::RawFd; 4]);
            let msg = recvmsg::<()>(control.as_raw_fd(), &mut iov, Some(&mut space), RECV_FLAGS)
                .map_err(io::Error::from)?;
            let mut fds: Vec<OwnedFd> = Vec::new();
            for cmsg in msg.cmsgs().map_err(io::Error::from)? {
                if let ControlMessageOwned::ScmRights(raw) = cmsg {
                    fds.extend(raw.into_iter().map(owned));
                }
            }
            Ok((msg.bytes, fds))
        });
        let (bytes, mut fds) = match received {
            Ok(got) => got,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        };
        if bytes == 0 && fds.is_empty() {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        // One descriptor per byte; more than one is not the bridge's doing: all are closed.
        if fds.len() != 1 {
            return Ok(None);
        }
        let fd = fds.remove(0);
        if !is_socket(&fd) {
            return Ok(None);
        }
        let stream = std::os::unix::net::UnixStream::from(fd);
        stream.set_nonblocking(true)?;
        return Ok(Some(UnixStream::from_std(stream)?));
    }
}

fn is_socket(fd: &OwnedFd) -> bool {
    use nix::sys::stat::{SFlag, fstat};
    fstat(fd.as_fd()).is_ok_and(|st| {
        SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) == SFlag::S_IFSOCK
    })
}

/// A descriptor the kernel just installed in this process.
fn owned(raw: std::os::fd::RawFd) -> OwnedFd {
    use std::os::fd::FromRawFd;
    // SAFETY: SCM_RIGHTS installed `raw` in this process just now and nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // macOS cannot receive it close-on-exec; until this call a command another thread spawns
    // could inherit it (agentd is multi-threaded): a gap Linux does not have.
    #[cfg(target_os = "macos")]
    let _ = nix::fcntl::fcntl(
        &fd,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    );
    fd
}

/// Received descriptors close-on-exec as they arrive (Linux; see [`owned`] for macOS).
#[cfg(target_os = "linux")]
const RECV_FLAGS: MsgFlags = MsgFlags::MSG_CMSG_CLOEXEC;
#[cfg(target_os = "macos")]
const RECV_FLAGS: MsgFlags = MsgFlags::empty();

#[cfg(test)]
mod tests {
    use std::io::IoSlice;

    use nix::sys::socket::{ControlMessage, sendmsg};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// Sends `fds` with one byte over `socket`, as the bridge does (or a command that got
    /// hold of it would).
    fn pass(socket: &OwnedFd, fds: &[std::os::fd::RawFd]) {
        sendmsg::<()>(
            socket.as_raw_fd(),
            &[IoSlice::new(b"c")],
            &[ControlMessage::ScmRights(fds)],
            MsgFlags::empty(),
            None,
        )
        .expect("sendmsg");
    }

    #[tokio::test]
    async fn only_a_socket_end_is_served_and_anything_else_is_closed_unread() {
        let policy = Arc::new(Policy::new(["allowed.test"], [""; 0]).expect("policy"));
        let mut gateway = Gateway::open(policy).expect("open");
        let socket = gateway.take_socket().expect("the bridge's end");

        // A forged pass: a pipe's write end instead of a socket. It is closed unread, so the
        // read end sees the end of file and nothing the proxy would have answered.
        let (pipe_read, pipe_write) = nix::unistd::pipe().expect("pipe");
        pass(&socket, &[pipe_write.as_raw_fd()]);
        drop(pipe_write);
        let mut pipe = tokio::net::unix::pipe::Receiver::from_owned_fd(pipe_read).expect("pipe");
        let mut got = Vec::new();
        crate::test_support::within(pipe.read_to_end(&mut got))
            .await
            .expect("read");
        assert!(got.is_empty(), "{got:?}");

        // The control: a socket end is served, and a refused host is answered.
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().expect("pair");
        pass(&socket, &[theirs.as_raw_fd()]);
        drop(theirs);
        ours.set_nonblocking(true).expect("nonblocking");
        let client = UnixStream::from_std(ours).expect("tokio");
        asks_a_refused_host(client).await;
        is_the_refusal_only(gateway.finish());
    }

    /// The port a Seatbelt command reaches is held before the command starts: connections to
    /// it are served under the policy and kept with the command's decisions; while it is held,
    /// a second gateway cannot hold it, and neither can one where another program listens —
    /// each refusal names the port. The control: the first gateway binds the same port, free
    /// until then.
    #[tokio::test]
    async fn the_host_port_is_held_and_served_and_a_held_one_is_refused_by_name() {
        let free = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = free.local_addr().expect("address");
        drop(free);
        let policy = Arc::new(Policy::new(["allowed.test"], [""; 0]).expect("policy"));
        let gateway = Gateway::open_on(policy.clone(), Some(addr)).expect("a free port is held");

        let client = tokio::net::TcpStream::connect(addr).await.expect("connect");
        asks_a_refused_host(client).await;

        let again = Gateway::open_on(policy.clone(), Some(addr)).expect_err("held already");
        assert!(again.to_string().contains(&addr.to_string()), "{again}");
        let other = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let taken = other.local_addr().expect("address");
        let refused = Gateway::open_on(policy, Some(taken)).expect_err("another program's");
        assert!(refused.to_string().contains("holds it"), "{refused}");

        // A copy of the listener's descriptor, as a child forked on another thread holds
        // until it executes its program.
        let copy = gateway
            .host
            .as_ref()
            .map(|(listener, _)| listener.as_fd().try_clone_to_owned().expect("dup"));
        assert!(copy.is_some(), "the gateway holds the host's port");
        is_the_refusal_only(gateway.finish());
        // Once a gateway is finished its port is free at once, the copy still open: the next
        // command's gateway, opened straight after, holds it.
        let next = Gateway::open_on(policy_again(), Some(addr));
        assert!(next.is_ok(), "the port was not given back: {next:?}");
        drop(copy);
    }

    fn policy_again() -> Arc<Policy> {
        Arc::new(Policy::new(["allowed.test"], [""; 0]).expect("policy"))
    }

    /// Asks the proxy on `client` for a host its policy refuses, and checks it answers 403.
    async fn asks_a_refused_host<S>(mut client: S)
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    {
        client
            .write_all(b"CONNECT refused.test:443 HTTP/1.1\r\nHost: refused.test:443\r\n\r\n")
            .await
            .expect("write");
        let mut answer = Vec::new();
        crate::test_support::within(client.read_to_end(&mut answer))
            .await
            .expect("read");
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    }

    /// `decisions` hold one decision: the refusal of `refused.test`.
    fn is_the_refusal_only(decisions: Decisions) {
        assert_eq!(decisions.total, 1);
        assert_eq!(decisions.kept[0].host, "refused.test");
        assert!(!decisions.kept[0].allowed);
    }
}
