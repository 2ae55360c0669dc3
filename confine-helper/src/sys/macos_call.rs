//! The raw calls only macOS has, one safe function each like [`super::call`]'s: kqueue (the
//! shim waits on its control pipe and on processes' exits), libproc's lists of processes by
//! parent and by process group, and `ptrace(PT_DENY_ATTACH)`. Stack buffers only, nothing
//! allocates: the shim runs them.

use std::ffi::c_int;

use nix::errno::Errno;
use nix::libc;

use super::call::{SysResult, check};

/// `proc_listpids`'s selectors (`<sys/proc_info.h>`): processes of one process group, and
/// processes of one parent.
const PROC_PGRP_ONLY: u32 = 2;
const PROC_PPID_ONLY: u32 = 6;

/// Refuses debuggers from now on (`PT_ATTACH` and DTrace); a process already traced is ended.
pub(super) fn deny_attach() -> SysResult<()> {
    // SAFETY: PT_DENY_ATTACH takes no address and no data; the null pointer is never read.
    check(unsafe { libc::ptrace(libc::PT_DENY_ATTACH, 0, std::ptr::null_mut(), 0) }).map(drop)
}

/// A new kqueue. It is not inherited by `fork`, and the shim makes it after the command's.
pub(super) fn kqueue() -> SysResult<c_int> {
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
pub(super) fn watch_readable(kq: c_int, fd: c_int) -> SysResult<()> {
    let ident = usize::try_from(fd).map_err(|_| Errno::EBADF)?;
    change(kq, &event(ident, libc::EVFILT_READ, libc::EV_ADD, 0))
}

/// Stops watching `fd` on `kq`: a pipe at its end of file is readable for ever, and would wake
/// every wait.
pub(super) fn unwatch_readable(kq: c_int, fd: c_int) -> SysResult<()> {
    let ident = usize::try_from(fd).map_err(|_| Errno::EBADF)?;
    change(kq, &event(ident, libc::EVFILT_READ, libc::EV_DELETE, 0))
}

/// Asks `kq` for one event when process `pid` exits. `Ok(false)` when it already has: the
/// kernel finds no such process (a zombie included) and refuses the registration, and once
/// registered the exit cannot be missed (the kernel marks a process exited before it posts
/// the event), so registering leaves no window.
pub(super) fn watch_exit(kq: c_int, pid: libc::pid_t) -> SysResult<bool> {
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
pub(super) enum Event {
    /// The descriptor has something to read, or its writer is gone.
    Readable(c_int),
    /// The process exited.
    Exited(libc::pid_t),
}

/// Waits for at least one event on `kq` and returns up to `out.len()` of them; `EINTR` when a
/// signal came first.
pub(super) fn wait(kq: c_int, out: &mut [Option<Event>]) -> SysResult<usize> {
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
    for (slot, ev) in out.iter_mut().zip(&got[..n]) {
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
pub(super) fn children_of(pid: libc::pid_t, buf: &mut [libc::pid_t]) -> usize {
    let Ok(pid) = u32::try_from(pid) else {
        return 0;
    };
    list_pids(PROC_PPID_ONLY, pid, buf)
}

/// The processes of process group `pgid`, zombies included, into `buf`; returns how many.
pub(super) fn group_members(pgid: libc::pid_t, buf: &mut [libc::pid_t]) -> usize {
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
