//! The socket calls of the shim and the command, one safe function each, like [`super::call`]'s:
//! passing a descriptor over a Unix socket (the `connect` filter's listener, a proxy
//! connection), socket options, `connect`, and the shim's loopback listener for the proxy. Stack
//! buffers only: these run in the shim and between fork and exec.

use std::ffi::c_int;

use nix::errno::Errno;
use nix::libc;

use super::call::{SysResult, check, close};

/// A connected pair of close-on-exec `SOCK_SEQPACKET` Unix sockets.
pub(super) fn socketpair_cloexec() -> SysResult<[c_int; 2]> {
    let mut ends = [0 as c_int; 2];
    // SAFETY: socketpair writes two descriptor numbers into the live two-element array.
    check(unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            ends.as_mut_ptr(),
        )
    })?;
    Ok(ends)
}

/// Room for one descriptor's control message, aligned as `cmsghdr` needs.
#[repr(C, align(8))]
struct OneFdControl([u8; 24]);

/// A `msghdr` for one byte (`iov`) and the first `control_len` bytes of `control`. The
/// pointers are valid while `iov` and `control` are.
fn one_fd_message(
    iov: &mut libc::iovec,
    control: &mut OneFdControl,
    control_len: usize,
) -> libc::msghdr {
    // SAFETY: an all-zero msghdr is valid (null pointers, zero lengths); the fields that matter
    // are set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = control_len.min(control.0.len()) as _;
    msg
}

/// The one-element `iovec` of `byte`.
fn one_byte(byte: &mut [u8; 1]) -> libc::iovec {
    libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: byte.len(),
    }
}

/// Sends descriptor `fd` over the Unix socket `sock` with one byte of data. (nix's `sendmsg`
/// allocates its control buffer; this runs between fork and exec.)
pub(super) fn send_fd(sock: c_int, fd: c_int) -> SysResult<()> {
    let mut byte = [0u8; 1];
    let mut iov = one_byte(&mut byte);
    let mut control = OneFdControl([0; 24]);
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(4) };
    let msg = one_fd_message(&mut iov, &mut control, usize::try_from(space).unwrap_or(0));
    // SAFETY: `msg` describes the live control buffer, which holds one header and one int.
    let header = unsafe { libc::CMSG_FIRSTHDR(&msg) };
    if header.is_null() {
        return Err(Errno::EINVAL);
    }
    // SAFETY: `header` points into `control`, aligned and large enough for a cmsghdr and an int.
    unsafe {
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(4) as _;
        libc::CMSG_DATA(header).cast::<c_int>().write_unaligned(fd);
    }
    // SAFETY: `msg` points at live buffers for the duration of the call.
    check(unsafe { libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) }).map(drop)
}

/// Receives one descriptor sent by [`send_fd`] on `sock`, close-on-exec, without waiting.
pub(super) fn recv_fd(sock: c_int) -> SysResult<c_int> {
    let mut byte = [0u8; 1];
    let mut iov = one_byte(&mut byte);
    let mut control = OneFdControl([0; 24]);
    let mut msg = one_fd_message(&mut iov, &mut control, usize::MAX);
    // SAFETY: `msg` points at live buffers the kernel writes at most their lengths into.
    check(unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC) })?;
    // SAFETY: `msg` now describes what the kernel wrote into `control`.
    let header = unsafe { libc::CMSG_FIRSTHDR(&msg) };
    if header.is_null() {
        return Err(Errno::EBADMSG);
    }
    // SAFETY: a non-null header points into `control`; its level, type and length say whether
    // one int follows it.
    unsafe {
        if (*header).cmsg_level != libc::SOL_SOCKET
            || (*header).cmsg_type != libc::SCM_RIGHTS
            || (*header).cmsg_len != libc::CMSG_LEN(4) as _
        {
            return Err(Errno::EBADMSG);
        }
        Ok(libc::CMSG_DATA(header).cast::<c_int>().read_unaligned())
    }
}

/// The size of a `T` as a socket option's length.
fn socklen_of<T>() -> SysResult<libc::socklen_t> {
    libc::socklen_t::try_from(std::mem::size_of::<T>()).map_err(|_| Errno::EINVAL)
}

/// An integer socket option of `fd`.
pub(super) fn getsockopt_int(fd: c_int, level: c_int, name: c_int) -> SysResult<c_int> {
    let mut value: c_int = 0;
    let mut len = socklen_of::<c_int>()?;
    // SAFETY: the kernel writes at most `len` bytes into the live value and updates `len`.
    check(unsafe { libc::getsockopt(fd, level, name, (&raw mut value).cast(), &mut len) })?;
    Ok(value)
}

/// The send timeout of socket `fd` (which also bounds its `connect`).
pub(super) fn send_timeout(fd: c_int) -> SysResult<libc::timeval> {
    let mut value = libc::timeval {
        tv_sec: 0,
        tv_usec: 0,
    };
    let mut len = socklen_of::<libc::timeval>()?;
    // SAFETY: the kernel writes at most `len` bytes into the live value and updates `len`.
    check(unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_SNDTIMEO,
            (&raw mut value).cast(),
            &mut len,
        )
    })?;
    Ok(value)
}

pub(super) fn set_send_timeout(fd: c_int, value: &libc::timeval) -> SysResult<()> {
    let len = socklen_of::<libc::timeval>()?;
    // SAFETY: the kernel reads `len` bytes from the live value.
    check(unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_SNDTIMEO,
            (value as *const libc::timeval).cast(),
            len,
        )
    })
    .map(drop)
}

/// `connect(fd, address)` with the address as the bytes of a `sockaddr` of any family.
pub(super) fn connect(fd: c_int, address: &[u8]) -> SysResult<()> {
    let len = libc::socklen_t::try_from(address.len()).map_err(|_| Errno::EINVAL)?;
    // SAFETY: the kernel copies `len` bytes from the live slice before using them.
    check(unsafe { libc::connect(fd, address.as_ptr().cast(), len) }).map(drop)
}

/// Room for any socket address (`sizeof(struct sockaddr_storage)`).
pub(super) const ADDRESS_ROOM: usize = 128;

/// A non-blocking, close-on-exec TCP listener on `127.0.0.1`, on a port the kernel picks.
pub(super) fn loopback_listener(backlog: c_int) -> SysResult<c_int> {
    // SAFETY: numbers only.
    let fd = check(unsafe {
        libc::socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        )
    })?;
    let address = libc::sockaddr_in {
        sin_family: libc::sa_family_t::try_from(libc::AF_INET).map_err(|_| Errno::EINVAL)?,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be(),
        },
        sin_zero: [0; 8],
    };
    let len = socklen_of::<libc::sockaddr_in>()?;
    // SAFETY: the kernel reads `len` bytes from the live address.
    let bound = check(unsafe { libc::bind(fd, (&raw const address).cast(), len) })
        // SAFETY: numbers only.
        .and_then(|_| check(unsafe { libc::listen(fd, backlog) }));
    if let Err(errno) = bound {
        let _ = close(fd);
        return Err(errno);
    }
    Ok(fd)
}

/// The local address of socket `fd`, and its length.
pub(super) fn local_address(fd: c_int) -> SysResult<([u8; ADDRESS_ROOM], usize)> {
    let mut address = [0u8; ADDRESS_ROOM];
    let mut len = libc::socklen_t::try_from(ADDRESS_ROOM).map_err(|_| Errno::EINVAL)?;
    // SAFETY: the kernel writes at most `len` bytes into the live buffer and updates `len`.
    check(unsafe { libc::getsockname(fd, address.as_mut_ptr().cast(), &mut len) })?;
    Ok((address, usize::try_from(len).unwrap_or(0).min(ADDRESS_ROOM)))
}

/// Accepts one queued connection on the non-blocking `listener` (close-on-exec); returns it
/// and its peer's address. `EAGAIN` when none is queued.
pub(super) fn accept_nonblocking(listener: c_int) -> SysResult<(c_int, [u8; ADDRESS_ROOM], usize)> {
    let mut address = [0u8; ADDRESS_ROOM];
    let mut len = libc::socklen_t::try_from(ADDRESS_ROOM).map_err(|_| Errno::EINVAL)?;
    // SAFETY: the kernel writes at most `len` bytes into the live buffer and updates `len`.
    let fd = check(unsafe {
        libc::accept4(
            listener,
            address.as_mut_ptr().cast(),
            &mut len,
            libc::SOCK_CLOEXEC,
        )
    })?;
    Ok((
        fd,
        address,
        usize::try_from(len).unwrap_or(0).min(ADDRESS_ROOM),
    ))
}
