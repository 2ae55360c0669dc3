//! The shim's side of `unix_sockets`: answering the command's `connect` calls that its seccomp
//! filter hands over (`USER_NOTIF`), one at a time, from the shim's poll loop.
//!
//! For each: the address is read once from the command's memory, the socket is taken from the
//! command's descriptor table (`pidfd_getfd`: the same open socket, not a copy), the verdict is
//! made on those two ([`crate::unix_sockets::judge`] for Unix sockets; loopback `AF_INET` and
//! `AF_INET6` sockets of the sandbox's own network namespace are connected as asked; every
//! other family is refused), and the shim connects that socket itself. The command's system
//! call then returns what the shim's `connect` returned. Whatever the command changes after the
//! read (the address, which socket its descriptor names) changes nothing that was decided.
//!
//! Nothing here allocates: the buffers are on the stack and the listed sockets were built
//! before the fork, like everything else the shim uses.

use std::ffi::c_int;

use nix::errno::Errno;
use nix::libc;

use super::{call, proc_scan};
use crate::unix_sockets::{Listed, Verdict, judge};

/// The largest address `connect` takes (`sizeof(struct sockaddr_storage)`).
const MAX_ADDRESS_LEN: usize = 128;
/// How long the shim's own `connect` may wait (a full listen backlog, a slow handshake): the
/// shim serves the command's tree, so it never waits on it for long. A `connect` that would
/// wait longer gets what a socket with this send timeout gets (`EAGAIN` for a Unix socket).
const CONNECT_BOUND: libc::timeval = libc::timeval {
    tv_sec: 1,
    tv_usec: 0,
};

/// Takes one pending notification off `listener` and answers it. A notification whose task
/// has gone answers nothing.
pub(super) fn answer_one(listener: c_int, listed: &[Listed]) {
    let Ok(notif) = call::notif_recv(listener) else {
        return;
    };
    let outcome = connect_for(listener, &notif, listed);
    let _ = call::notif_send(listener, notif.id, outcome.err());
}

/// Connects the command's socket as the verdict says; the command's `connect` gets the result.
fn connect_for(
    listener: c_int,
    notif: &libc::seccomp_notif,
    listed: &[Listed],
) -> Result<(), Errno> {
    if i64::from(notif.data.nr) != libc::SYS_connect {
        return Err(Errno::EPERM);
    }
    let pid = libc::pid_t::try_from(notif.pid).map_err(|_| Errno::ESRCH)?;
    // connect(int fd, const struct sockaddr *addr, socklen_t addrlen): the kernel reads the
    // int arguments from the low 32 bits of the registers.
    let [fd_arg, address_at, len_arg, ..] = notif.data.args;
    let fd = low_int(fd_arg);
    let len = usize::try_from(low_int(len_arg)).map_err(|_| Errno::EINVAL)?;
    if len > MAX_ADDRESS_LEN {
        return Err(Errno::EINVAL);
    }
    let mut buf = [0u8; MAX_ADDRESS_LEN];
    let address = &mut buf[..len];
    let pidfd = pidfd_of(pid)?;
    let socket = read_and_take(listener, notif.id, pid, pidfd, address_at, address, fd);
    let _ = call::close(pidfd);
    let socket = socket?;
    let result = connect_socket(socket, address, listed);
    let _ = call::close(socket);
    result
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

fn connect_socket(socket: c_int, address: &[u8], listed: &[Listed]) -> Result<(), Errno> {
    match call::getsockopt_int(socket, libc::SOL_SOCKET, libc::SO_DOMAIN)? {
        libc::AF_UNIX => match judge(address, listed) {
            Verdict::Connect(to) => bounded_connect(socket, to),
            Verdict::Refuse(errno) => Err(errno),
        },
        libc::AF_INET | libc::AF_INET6 => bounded_connect(socket, address),
        _ => Err(Errno::EPERM),
    }
}

/// `connect` with the socket's send timeout at most [`CONNECT_BOUND`] for the call, then set
/// back to what the command had.
fn bounded_connect(socket: c_int, address: &[u8]) -> Result<(), Errno> {
    let before = call::send_timeout(socket)?;
    let unbounded = before.tv_sec == 0 && before.tv_usec == 0;
    let longer = (before.tv_sec, before.tv_usec) > (CONNECT_BOUND.tv_sec, CONNECT_BOUND.tv_usec);
    if !(unbounded || longer) {
        return call::connect(socket, address);
    }
    call::set_send_timeout(socket, &CONNECT_BOUND)?;
    let result = call::connect(socket, address);
    let _ = call::set_send_timeout(socket, &before);
    result
}

/// An `int` argument as the kernel reads it from a 64-bit register.
fn low_int(register: u64) -> c_int {
    let [a, b, c, d, ..] = register.to_le_bytes();
    c_int::from_le_bytes([a, b, c, d])
}
