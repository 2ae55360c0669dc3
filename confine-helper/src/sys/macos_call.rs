//! The raw calls only macOS has, one safe function each like [`super::call`]'s: kqueue (the
//! shim waits on its control pipe and on processes' exits), libproc's lists of processes by
//! parent and by process group, and `ptrace(PT_DENY_ATTACH)`; and macOS's versions of the calls
//! it lacks (`dup3`, `close_range`, `pipe2`), made of others, which [`super::call`], its parent, re-exports
//! there. Stack buffers only, nothing allocates: the shim runs them.

use std::ffi::{c_int, c_uint};

use nix::errno::Errno;
use nix::libc;

use super::{SysResult, check, close, dup2};

/// `proc_listpids`'s selectors (`<sys/proc_info.h>`): processes of one process group, and
/// processes of one parent.
const PROC_PGRP_ONLY: u32 = 2;
const PROC_PPID_ONLY: u32 = 6;

/// Refuses debuggers from now on (`PT_ATTACH` and DTrace); a process already traced is ended.
pub(in crate::sys) fn deny_attach() -> SysResult<()> {
    // SAFETY: PT_DENY_ATTACH takes no address and no data; the null pointer is never read.
    check(unsafe { libc::ptrace(libc::PT_DENY_ATTACH, 0, std::ptr::null_mut(), 0) }).map(drop)
}

/// A new kqueue. It is not inherited by `fork`, and the shim makes it after the command's.
pub(in crate::sys) fn kqueue() -> SysResult<c_int> {
    // SAFETY: kqueue takes no arguments.
    check(unsafe { libc::kqueue() })
}

/// A kevent change or result, all fields set.
fn event(ident: usize, filter: i16, flags: u16, fflags: u32) -> libc::kevent {
    libc::kevent {
        ident,
        filter,
        flags,
        fflags,
        data: 0,
        udata: std::ptr::null_mut(),
    }
}

/// Applies one change to `kq`, receiving nothing: an error in the change is the call's error.
fn change(kq: c_int, change: &libc::kevent) -> SysResult<()> {
    // SAFETY: the kernel reads one kevent from the live value and writes nothing (no event
    // list, no timeout).
    check(unsafe { libc::kevent(kq, change, 1, std::ptr::null_mut(), 0, std::ptr::null()) })
        .map(drop)
}

/// Asks `kq` for one event when `fd` has something to read (or its writer is gone).
pub(in crate::sys) fn watch_readable(kq: c_int, fd: c_int) -> SysResult<()> {
    let ident = usize::try_from(fd).map_err(|_| Errno::EBADF)?;
    change(kq, &event(ident, libc::EVFILT_READ, libc::EV_ADD, 0))
}

/// Stops watching `fd` on `kq`: a pipe at its end of file is readable for ever, and would wake
/// every wait.
pub(in crate::sys) fn unwatch_readable(kq: c_int, fd: c_int) -> SysResult<()> {
    let ident = usize::try_from(fd).map_err(|_| Errno::EBADF)?;
    change(kq, &event(ident, libc::EVFILT_READ, libc::EV_DELETE, 0))
}

/// Asks `kq` for one event when process `pid` exits. `Ok(false)` when it already has: the
/// kernel finds no such process (a zombie included) and refuses the registration, and once
/// registered the exit cannot be missed (the kernel marks a process exited before it posts
/// the event), so registering leaves no window.
pub(in crate::sys) fn watch_exit(kq: c_int, pid: libc::pid_t) -> SysResult<bool> {
    let ident = usize::try_from(pid).map_err(|_| Errno::ESRCH)?;
    let flags = libc::EV_ADD | libc::EV_ONESHOT;
    match change(kq, &event(ident, libc::EVFILT_PROC, flags, libc::NOTE_EXIT)) {
        Ok(()) => Ok(true),
        Err(Errno::ESRCH) => Ok(false),
        Err(errno) => Err(errno),
    }
}

/// What one event of [`wait`] was about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::sys) enum Event {
    /// The descriptor has something to read, or its writer is gone.
    Readable(c_int),
    /// The process exited.
    Exited(libc::pid_t),
}

/// Waits for at least one event on `kq` and returns up to `out.len()` of them; `EINTR` when a
/// signal came first.
pub(in crate::sys) fn wait(kq: c_int, out: &mut [Option<Event>]) -> SysResult<usize> {
    const BATCH: usize = 16;
    let mut got = [event(0, 0, 0, 0); BATCH];
    let room = c_int::try_from(out.len().min(BATCH)).map_err(|_| Errno::EINVAL)?;
    // SAFETY: no change list; the kernel writes at most `room` kevents into the live array of
    // BATCH; a null timeout waits.
    let n = check(unsafe {
        libc::kevent(
            kq,
            std::ptr::null(),
            0,
            got.as_mut_ptr(),
            room,
            std::ptr::null(),
        )
    })?;
    let n = usize::try_from(n).unwrap_or(0).min(out.len());
    for (slot, ev) in out.iter_mut().zip(got.iter().take(n)) {
        *slot = match ev.filter {
            libc::EVFILT_READ => c_int::try_from(ev.ident).ok().map(Event::Readable),
            libc::EVFILT_PROC => libc::pid_t::try_from(ev.ident).ok().map(Event::Exited),
            _ => None,
        };
    }
    Ok(n)
}

/// The processes whose parent is `pid`, zombies included, into `buf`; returns how many. A list
/// that fills `buf` may have been cut short.
pub(in crate::sys) fn children_of(pid: libc::pid_t, buf: &mut [libc::pid_t]) -> usize {
    let Ok(pid) = u32::try_from(pid) else {
        return 0;
    };
    list_pids(PROC_PPID_ONLY, pid, buf)
}

/// The processes of process group `pgid`, zombies included, into `buf`; returns how many.
pub(in crate::sys) fn group_members(pgid: libc::pid_t, buf: &mut [libc::pid_t]) -> usize {
    let Ok(pgid) = u32::try_from(pgid) else {
        return 0;
    };
    list_pids(PROC_PGRP_ONLY, pgid, buf)
}

/// `proc_listpids`, which `proc_listchildpids` and `proc_listpgrppids` wrap: it returns the
/// bytes written on every macOS version (the wrappers' unit changed in 10.14), and 0 on
/// failure.
fn list_pids(kind: u32, arg: u32, buf: &mut [libc::pid_t]) -> usize {
    let room = std::mem::size_of_val(buf);
    let Ok(room) = c_int::try_from(room) else {
        return 0;
    };
    // SAFETY: the kernel writes at most `room` bytes, whole pids, into the live buffer.
    let bytes = unsafe { libc::proc_listpids(kind, arg, buf.as_mut_ptr().cast(), room) };
    let pids = usize::try_from(bytes).unwrap_or(0) / std::mem::size_of::<libc::pid_t>();
    pids.min(buf.len())
}

/// macOS has no `dup3`: `dup2`, then close-on-exec on the copy. Only the forked, single-threaded
/// shim calls it, so no other thread can fork between the two calls.
pub(in crate::sys) fn dup3_cloexec(old: c_int, new: c_int) -> SysResult<()> {
    dup2(old, new)?;
    set_cloexec(new)
}

/// Marks `fd` close-on-exec.
pub(in crate::sys) fn set_cloexec(fd: c_int) -> SysResult<()> {
    // SAFETY: F_SETFD only changes a flag of this process's descriptor table.
    check(unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) }).map(drop)
}

/// macOS has no `close_range`: every number from `first` to `last` is closed in turn, up to the
/// soft `RLIMIT_NOFILE` (no descriptor this process opened can lie above it; one inherited from
/// a parent that lowered the limit afterwards can, and is not closed). Only `flags` 0 (close)
/// is supported.
pub(in crate::sys) fn close_range(first: c_uint, last: c_uint, flags: c_int) -> SysResult<()> {
    if flags != 0 {
        return Err(Errno::EINVAL);
    }
    let end = c_uint::try_from(open_files_limit()).unwrap_or(c_uint::MAX);
    for fd in first..=last.min(end.saturating_sub(1)) {
        let Ok(fd) = c_int::try_from(fd) else {
            break;
        };
        // EBADF (nothing there) is the usual answer; there is nothing else to do about another.
        let _ = close(fd);
    }
    Ok(())
}

/// The most descriptors worth closing on macOS: the soft `RLIMIT_NOFILE`, at most
/// [`MAX_CLOSED_DESCRIPTORS`].
fn open_files_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: the kernel writes one rlimit into the live value.
    match check(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) }) {
        Ok(_) => limit.rlim_cur.min(MAX_CLOSED_DESCRIPTORS),
        Err(_) => MAX_CLOSED_DESCRIPTORS,
    }
}

/// A bound on the numbers [`close_range`] walks on macOS, whose `RLIMIT_NOFILE` may be
/// unlimited: `OPEN_MAX`, times 100.
const MAX_CLOSED_DESCRIPTORS: u64 = 1_024_000;

/// macOS has no `pipe2`: `pipe`, then close-on-exec on both ends. Only single-threaded
/// processes call it (the helper, its forked shim), so no other thread can fork in between.
pub(in crate::sys) fn pipe2_cloexec() -> SysResult<[c_int; 2]> {
    let mut ends = [0 as c_int; 2];
    // SAFETY: pipe writes two descriptor numbers into the live two-element array.
    check(unsafe { libc::pipe(ends.as_mut_ptr()) })?;
    for fd in ends {
        if let Err(errno) = set_cloexec(fd) {
            let _ = close(ends[0]);
            let _ = close(ends[1]);
            return Err(errno);
        }
    }
    Ok(ends)
}
