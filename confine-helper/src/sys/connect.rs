//! The shim's side of connect supervision (`unix_sockets`, the allow-list under Landlock):
//! answering the command's `connect` calls that its seccomp filter hands over (`USER_NOTIF`),
//! one at a time, from the shim's poll loop.
//!
//! For each: the address is read once from the command's memory, the socket is taken from the
//! command's descriptor table (`pidfd_getfd`: the same open socket, not a copy), the verdict is
//! made on those two ([`crate::connects`]; any family but Unix and IP is refused), and the shim
//! connects that socket itself. The command's system call then returns what the shim's
//! `connect` returned. Whatever the command changes after the read (the address, which socket
//! its descriptor names) changes nothing that was decided.
//!
//! The proxy, where the command shares the host's network: the shim listens on an ephemeral
//! loopback port of its own, connects the command's socket there, accepts that connection — the
//! one whose peer is the command's socket, any other is closed — and passes it to the requester
//! over the proxy's control socket, as the bridge does inside bwrap. The command keeps a real
//! TCP socket; the proxy serves the other end.
//!
//! Nothing here allocates: the buffers are on the stack and the rules were built before the
//! fork, like everything else the shim uses.

use std::ffi::c_int;

use nix::errno::Errno;
use nix::libc;

use super::{call, proc_scan, socket_call};
use crate::connects::{Rules, Verdict, judge_inet, judge_unix};

/// The largest address `connect` takes (`sizeof(struct sockaddr_storage)`).
const MAX_ADDRESS_LEN: usize = 128;
/// How long the shim's own `connect` may wait (a full listen backlog, a slow handshake): the
/// shim serves the command's tree, so it never waits on it for long. A `connect` that would
/// wait longer gets what a socket with this send timeout gets (`EAGAIN` for a Unix socket).
const CONNECT_BOUND: libc::timeval = libc::timeval {
    tv_sec: 1,
    tv_usec: 0,
};
/// Connections the shim's proxy listener queues; it accepts each as soon as it is made.
const PROXY_BACKLOG: c_int = 16;

/// What the shim holds to answer `connect` calls.
#[derive(Debug)]
pub(super) struct Supervisor<'a> {
    pub(super) listener: c_int,
    pub(super) rules: &'a Rules,
    /// The requester's proxy socket, where the command may reach the proxy.
    pub(super) proxy_control: Option<c_int>,
    /// The shim's own loopback listener for proxy connections, made at the first one.
    pub(super) proxy_listener: Option<c_int>,
    /// The host's root, when the shim's own root is a sandbox's (the namespace backend): a
    /// listed socket's path is the host's, looked up from there.
    pub(super) host_root: Option<c_int>,
}

impl Supervisor<'_> {
    /// Takes one pending notification off the listener and answers it. A notification whose
    /// task has gone answers nothing.
    pub(super) fn answer_one(&mut self) {
        let Ok(notif) = call::notif_recv(self.listener) else {
            return;
        };
        let outcome = self.connect_for(&notif);
        let _ = call::notif_send(self.listener, notif.id, outcome.err());
    }

    /// Connects the command's socket as the verdict says; the command's `connect` gets the
    /// result.
    fn connect_for(&mut self, notif: &libc::seccomp_notif) -> Result<(), Errno> {
        if i64::from(notif.data.nr) != libc::SYS_connect {
            return Err(Errno::EPERM);
        }
        let pid = libc::pid_t::try_from(notif.pid).map_err(|_| Errno::ESRCH)?;
        // connect(int fd, const struct sockaddr *addr, socklen_t addrlen): the kernel reads
        // the int arguments from the low 32 bits of the registers.
        let [fd_arg, address_at, len_arg, ..] = notif.data.args;
        let fd = low_int(fd_arg);
        let len = usize::try_from(low_int(len_arg)).map_err(|_| Errno::EINVAL)?;
        let mut buf = [0u8; MAX_ADDRESS_LEN];
        // Longer than any socket address: the call is refused.
        let address = buf.get_mut(..len).ok_or(Errno::EINVAL)?;
        let pidfd = pidfd_of(pid)?;
        let socket = read_and_take(self.listener, notif.id, pid, pidfd, address_at, address, fd);
        let _ = call::close(pidfd);
        let socket = socket?;
        let result = self.connect_socket(socket, address);
        let _ = call::close(socket);
        result
    }

    fn connect_socket(&mut self, socket: c_int, address: &[u8]) -> Result<(), Errno> {
        let verdict = match socket_call::getsockopt_int(socket, libc::SOL_SOCKET, libc::SO_DOMAIN)?
        {
            libc::AF_UNIX => judge_unix(address, self.rules),
            libc::AF_INET | libc::AF_INET6 => judge_inet(address, self.rules),
            _ => Verdict::Refuse(Errno::EPERM),
        };
        match verdict {
            Verdict::Connect(to) => match self.host_root {
                Some(root) if is_unix_pathname(to) => connect_from(root, socket, to),
                _ => bounded_connect(socket, to),
            },
            Verdict::Proxy => self.connect_to_proxy(socket),
            Verdict::Refuse(errno) => Err(errno),
        }
    }

    /// Connects `socket` to the shim's own listener and hands the accepted end to the proxy.
    fn connect_to_proxy(&mut self, socket: c_int) -> Result<(), Errno> {
        let control = self.proxy_control.ok_or(Errno::EPERM)?;
        let listener = match self.proxy_listener {
            Some(listener) => listener,
            None => {
                let listener = socket_call::loopback_listener(PROXY_BACKLOG)?;
                self.proxy_listener = Some(listener);
                listener
            }
        };
        let (at, at_len) = socket_call::local_address(listener)?;
        match bounded_connect(socket, at.get(..at_len).ok_or(Errno::EINVAL)?) {
            // A non-blocking socket: the handshake on the loopback completes at once, and the
            // connection must be accepted and handed over before the command's call returns.
            Err(Errno::EINPROGRESS) => wait_connected(socket)?,
            other => other?,
        }
        let (command_end, command_len) = socket_call::local_address(socket)?;
        let command_end = command_end.get(..command_len).ok_or(Errno::EINVAL)?;
        let accepted = loop {
            let (accepted, peer, peer_len) = socket_call::accept_nonblocking(listener)?;
            if peer.get(..peer_len) == Some(command_end) {
                break accepted;
            }
            // Someone else on this machine found the port: not the command's connection.
            let _ = call::close(accepted);
        };
        let sent = socket_call::send_fd(control, accepted);
        let _ = call::close(accepted);
        // The requester gone: the command's socket is connected to nothing that answers.
        sent.map_err(|_| Errno::ECONNREFUSED)
    }
}

impl Drop for Supervisor<'_> {
    fn drop(&mut self) {
        let _ = call::close(self.listener);
        if let Some(listener) = self.proxy_listener {
            let _ = call::close(listener);
        }
    }
}

/// A pidfd of thread `tid`, whose descriptor table is its process's: of the thread itself
/// where the kernel can make one (Linux 6.9), else of its thread group's leader.
fn pidfd_of(tid: libc::pid_t) -> Result<c_int, Errno> {
    match call::pidfd_open(tid, call::PIDFD_THREAD) {
        Err(Errno::EINVAL) => {
            let leader = proc_scan::thread_group_of(tid).ok_or(Errno::ESRCH)?;
            call::pidfd_open(leader, 0)
        }
        other => other,
    }
}

/// Reads the address, makes sure the notification's task is the one `pid` and `pidfd` name
/// (it is still waiting in this call), then takes its socket.
fn read_and_take(
    listener: c_int,
    id: u64,
    pid: libc::pid_t,
    pidfd: c_int,
    address_at: u64,
    address: &mut [u8],
    fd: c_int,
) -> Result<c_int, Errno> {
    if !address.is_empty() {
        call::read_process_memory(pid, address_at, address)?;
    }
    call::notif_id_valid(listener, id)?;
    call::pidfd_getfd(pidfd, fd)
}

/// Whether `address` is a Unix socket's absolute pathname.
fn is_unix_pathname(address: &[u8]) -> bool {
    let family = u16::try_from(libc::AF_UNIX)
        .unwrap_or_default()
        .to_ne_bytes();
    address.starts_with(&family) && address.get(2) == Some(&b'/')
}

/// Connects `socket` to the Unix pathname `address` looked up from `root` rather than from the
/// shim's own root: the same path made relative, from `root` as the working directory, which
/// is `/` again afterwards.
fn connect_from(root: c_int, socket: c_int, address: &[u8]) -> Result<(), Errno> {
    let mut relative = [0u8; MAX_ADDRESS_LEN];
    let (family, path) = address.split_at_checked(2).ok_or(Errno::EINVAL)?;
    let path = path.strip_prefix(b"/").ok_or(Errno::EINVAL)?;
    let len = family.len() + path.len();
    let (head, tail) = relative
        .get_mut(..len)
        .ok_or(Errno::EINVAL)?
        .split_at_mut(family.len());
    head.copy_from_slice(family);
    tail.copy_from_slice(path);
    super::mount_call::fchdir(root)?;
    let result = bounded_connect(socket, relative.get(..len).ok_or(Errno::EINVAL)?);
    call::chdir(c"/")?;
    result
}

/// `connect` with the socket's send timeout at most [`CONNECT_BOUND`] for the call, then set
/// back to what the command had.
fn bounded_connect(socket: c_int, address: &[u8]) -> Result<(), Errno> {
    let before = socket_call::send_timeout(socket)?;
    let unbounded = before.tv_sec == 0 && before.tv_usec == 0;
    let longer = (before.tv_sec, before.tv_usec) > (CONNECT_BOUND.tv_sec, CONNECT_BOUND.tv_usec);
    if !(unbounded || longer) {
        return socket_call::connect(socket, address);
    }
    socket_call::set_send_timeout(socket, &CONNECT_BOUND)?;
    let result = socket_call::connect(socket, address);
    let _ = socket_call::set_send_timeout(socket, &before);
    result
}

/// Waits (at most [`CONNECT_BOUND`]) for the connection `socket` started to be made.
fn wait_connected(socket: c_int) -> Result<(), Errno> {
    let mut fds = [libc::pollfd {
        fd: socket,
        events: libc::POLLOUT,
        revents: 0,
    }];
    let bound_ms = c_int::try_from(CONNECT_BOUND.tv_sec * 1000).unwrap_or(c_int::MAX);
    if call::poll(&mut fds, bound_ms)? == 0 {
        return Err(Errno::ETIMEDOUT);
    }
    match socket_call::getsockopt_int(socket, libc::SOL_SOCKET, libc::SO_ERROR)? {
        0 => Ok(()),
        errno => Err(Errno::from_raw(errno)),
    }
}

/// An `int` argument as the kernel reads it from a 64-bit register.
fn low_int(register: u64) -> c_int {
    let [a, b, c, d, ..] = register.to_le_bytes();
    c_int::from_le_bytes([a, b, c, d])
}
