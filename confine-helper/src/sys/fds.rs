//! The helper's own process: the sanitizing it does before reading anything (descriptors,
//! environment), taking ownership of the descriptors it inherits and receives, `poll`, and the
//! files it makes for one command (a sealed memfd, a private temp directory).

use std::ffi::c_int;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use nix::errno::Errno;
use nix::libc;
use nix::sys::socket::MsgFlags;

use super::call;

/// Writes a short report (at most `PIPE_BUF` bytes, so a pipe takes it whole or not at all) to
/// descriptor `fd` in one call.
#[cfg(target_os = "linux")]
pub(crate) fn write_raw(fd: RawFd, bytes: &[u8]) -> io::Result<()> {
    match call::write(fd, bytes)? {
        n if n == bytes.len() => Ok(()),
        _ => Err(io::Error::from(io::ErrorKind::WriteZero)),
    }
}

/// Received descriptors are close-on-exec as they arrive (Linux); macOS has no such flag, and
/// [`own_received`] sets it before anything can fork.
#[cfg(target_os = "linux")]
pub(crate) const RECV_FLAGS: MsgFlags = MsgFlags::MSG_DONTWAIT.union(MsgFlags::MSG_CMSG_CLOEXEC);
#[cfg(target_os = "macos")]
pub(crate) const RECV_FLAGS: MsgFlags = MsgFlags::MSG_DONTWAIT;
/// A peer gone while a reply is written is an error, never SIGPIPE (Linux's flag; on macOS the
/// signal is ignored, as the Rust runtime leaves it).
#[cfg(target_os = "linux")]
pub(crate) const SEND_FLAGS: MsgFlags = MsgFlags::MSG_DONTWAIT.union(MsgFlags::MSG_NOSIGNAL);
#[cfg(target_os = "macos")]
pub(crate) const SEND_FLAGS: MsgFlags = MsgFlags::MSG_DONTWAIT;

/// A pipe whose ends are close-on-exec (on macOS, which has no `pipe2`, flagged after `pipe`:
/// the helper is single-threaded, so no fork comes in between).
pub(crate) fn pipe_cloexec() -> nix::Result<(OwnedFd, OwnedFd)> {
    let [rd, wr] = call::pipe2_cloexec()?;
    // SAFETY: the kernel just made both descriptors; nothing else owns them.
    Ok(unsafe { (OwnedFd::from_raw_fd(rd), OwnedFd::from_raw_fd(wr)) })
}

/// `poll(2)` over raw descriptors; EINTR is reported as zero ready.
pub(crate) fn poll(fds: &mut [libc::pollfd], timeout_ms: c_int) -> io::Result<usize> {
    match call::poll(fds, timeout_ms) {
        Err(Errno::EINTR) => Ok(0),
        other => Ok(other?),
    }
}

fn is_open(fd: RawFd) -> bool {
    // SAFETY: F_GETFD only queries the descriptor table.
    unsafe { libc::fcntl(fd, libc::F_GETFD) != -1 }
}

/// Closes every descriptor above 2 except `keep`, and makes sure 0..=2 are open so that no
/// descriptor the helper opens later is mistaken for a standard stream. A `keep` of 0 (the
/// socket given as stdin) is moved above them first, and `/dev/null` takes its place, so no
/// process the helper starts can get it as its stdin. Returns the number `keep` has now.
pub(crate) fn sanitize_fds(keep: RawFd) -> io::Result<RawFd> {
    let keep = match keep {
        0 => call::dup_cloexec_above(0, 3).and_then(|moved| call::close(0).map(|()| moved))?,
        other => other,
    };
    for fd in 0..3 {
        // Opening /dev/null takes the lowest free number, which is `fd`.
        if !is_open(fd) && call::open(c"/dev/null", libc::O_RDWR) != Ok(fd) {
            return Err(io::Error::other(format!(
                "could not reopen standard descriptor {fd} on /dev/null"
            )));
        }
    }
    let ranges: [(u32, u32); 2] = match u32::try_from(keep) {
        Ok(keep) if keep > 2 => [(3, keep - 1), (keep + 1, u32::MAX)],
        _ => [(3, u32::MAX), (1, 0)],
    };
    for (first, last) in ranges {
        if first <= last {
            call::close_range(first, last, 0)?;
        }
    }
    Ok(keep)
}

/// Sets back to its default every signal the helper was started with ignored (a parent's
/// `nohup` or `trap '' TERM`, a realtime signal) but `SIGPIPE`, which the helper ignores itself
/// (Linux). Ignored dispositions survive `fork` and `execve`: after this a command can inherit
/// only the shim's and `SIGPIPE`, which it sets back itself (`sys/exec.rs`). The C library's two
/// own realtime signals (32 and 33) cannot be set through it and stay as they came; a program's
/// C library installs its own handlers for them before it uses them. Without `/proc` the mask
/// is unknown: then every signal is set back but `SIGPIPE` and those the Rust runtime handles.
#[cfg(target_os = "linux")]
pub(crate) fn reset_inherited_signals() {
    let ignored = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let mask = status
                .lines()
                .find_map(|line| line.strip_prefix("SigIgn:"))?;
            u64::from_str_radix(mask.trim(), 16).ok()
        });
    let handled = [libc::SIGPIPE, libc::SIGSEGV, libc::SIGBUS];
    let reset = |sig: &c_int| match ignored {
        Some(mask) => mask >> (sig - 1) & 1 == 1 && *sig != libc::SIGPIPE,
        None => !handled.contains(sig),
    };
    for sig in (1..=64).filter(reset) {
        let _ = call::set_disposition(sig, libc::SIG_DFL);
    }
}

/// macOS: the command sets every standard signal back itself (`sys/exec.rs`).
#[cfg(target_os = "macos")]
pub(crate) fn reset_inherited_signals() {}

/// Removes every environment variable. Runs while the helper has one thread.
pub(crate) fn clear_environment() {
    let names: Vec<_> = std::env::vars_os().map(|(name, _)| name).collect();
    for name in names {
        // SAFETY: called from `main` before any other thread exists.
        unsafe { std::env::remove_var(name) };
    }
}

/// Takes ownership of descriptors received via SCM_RIGHTS. On macOS, which cannot receive
/// them close-on-exec, the flag is set here; the helper is single-threaded, so nothing forks
/// before.
pub(crate) fn own_received(fds: &[RawFd]) -> Vec<OwnedFd> {
    fds.iter()
        // SAFETY: the kernel just installed these descriptors for us; nothing else owns them.
        .map(|fd| unsafe { OwnedFd::from_raw_fd(*fd) })
        .inspect(|_fd| {
            #[cfg(target_os = "macos")]
            let _ = nix::fcntl::fcntl(
                _fd,
                nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
            );
        })
        .collect()
}

/// Takes ownership of the inherited connection descriptor named on the command line, after
/// checking that it is open and is a socket.
pub(crate) fn inherited_socket(fd: RawFd) -> io::Result<OwnedFd> {
    inherited(fd, libc::S_IFSOCK, "it is not a socket")
}

/// Takes ownership of an inherited pipe's descriptor, after checking that it is open and is a
/// pipe (the namespace backend's bridge says on one that it listens).
#[cfg(target_os = "linux")]
pub(crate) fn inherited_pipe(fd: RawFd) -> io::Result<OwnedFd> {
    inherited(fd, libc::S_IFIFO, "it is not a pipe")
}

fn inherited(fd: RawFd, kind: libc::mode_t, not: &'static str) -> io::Result<OwnedFd> {
    if !is_open(fd) {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: all-zero is a valid stat, which fstat then fills.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes into the live out-value.
    if unsafe { libc::fstat(fd, &mut st) } == -1 {
        return Err(io::Error::last_os_error());
    }
    if st.st_mode & libc::S_IFMT != kind {
        return Err(io::Error::other(not));
    }
    // SAFETY: the descriptor is open (checked above), was inherited, and nothing else in this
    // process owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Keeps other processes of the same user from reading or changing this one: undumpable
/// (`PR_SET_DUMPABLE` 0: no `ptrace`, no `/proc/<pid>/mem`, no core dump). The forked shim
/// inherits it; `execve` of the command ends it.
#[cfg(target_os = "linux")]
pub(crate) fn forbid_tracing() -> io::Result<()> {
    Ok(nix::sys::prctl::set_dumpable(false)?)
}

/// Keeps debuggers out of this process: `ptrace(PT_DENY_ATTACH)` refuses `PT_ATTACH` and
/// DTrace from then on (a process already traced is ended by the kernel). It is not inherited
/// by `fork`: the shim asks for it again. It does not cover `task_for_pid`, which the system
/// grants or refuses by its own rules (code signing, System Integrity Protection), nor core
/// dumps, which `RLIMIT_CORE` 0 turns off for commands.
#[cfg(target_os = "macos")]
pub(crate) fn forbid_tracing() -> io::Result<()> {
    Ok(super::call::macos::deny_attach()?)
}

/// An anonymous, sealed, close-on-exec file holding `bytes`, positioned at its start.
#[cfg(target_os = "linux")]
pub(crate) fn sealed_memfd(bytes: &[u8]) -> io::Result<OwnedFd> {
    use nix::sys::memfd::{MFdFlags, memfd_create};
    let fd = memfd_create(
        c"confine-seccomp",
        MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING,
    )?;
    let mut written = 0;
    while let Some(rest) = bytes.get(written..).filter(|rest| !rest.is_empty()) {
        written += nix::unistd::write(&fd, rest)?;
    }
    nix::unistd::lseek(&fd, 0, nix::unistd::Whence::SeekSet)?;
    let seals = libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;
    nix::fcntl::fcntl(
        &fd,
        nix::fcntl::FcntlArg::F_ADD_SEALS(nix::fcntl::SealFlag::from_bits_truncate(seals)),
    )?;
    Ok(fd)
}
