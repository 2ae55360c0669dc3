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
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex, PoisonError};

use confine_protocol::PROXY_PORT;
use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
use serde::Serialize;
use tokio::io::Interest;
use tokio::net::UnixStream;
use tokio::task::JoinHandle;

use super::{Decision, Policy, SystemResolver, serve_all};
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
    decisions: Arc<Mutex<Decisions>>,
}

impl Gateway {
    /// Opens the socketpair and starts serving its end here under `policy`. Must be called
    /// within a tokio runtime.
    pub fn open(policy: Arc<Policy>) -> io::Result<Gateway> {
        let (theirs, ours) = std::os::unix::net::UnixStream::pair()?;
        ours.set_nonblocking(true)?;
        let ours = UnixStream::from_std(ours)?;
        let decisions = Arc::new(Mutex::new(Decisions::default()));
        let record = {
            let decisions = decisions.clone();
            move |decision: Decision| {
                let mut all = decisions.lock().unwrap_or_else(PoisonError::into_inner);
                all.total += 1;
                if all.kept.len() < MAX_KEPT {
                    all.kept.push(Shown::from(&decision));
                }
            }
        };
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
            let _ = serve_all(incoming, policy, Arc::new(SystemResolver), Arc::new(record)).await;
        });
        Ok(Gateway {
            socket: Some(theirs.into()),
            task,
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
        let mut client = UnixStream::from_std(ours).expect("tokio");
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
        let decisions = gateway.finish();
        assert_eq!(decisions.total, 1);
        assert_eq!(decisions.kept[0].host, "refused.test");
        assert!(!decisions.kept[0].allowed);
    }
}
