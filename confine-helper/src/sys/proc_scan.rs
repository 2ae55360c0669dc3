//! Finding the shim's children in `/proc`, on stack buffers only: the shim signals every
//! process whose parent it is, including orphans the kernel handed to it as subreaper.

use std::ffi::{CStr, c_int};

use nix::libc;

use super::call;

/// Bytes read from `/proc` per `getdents64` call.
const DIRENT_BUFFER: usize = 4096;
/// Offsets inside a `linux_dirent64` record: `d_reclen` (u16) and `d_name`.
const DIRENT_RECLEN_AT: usize = 16;
const DIRENT_NAME_AT: usize = 19;
/// Room for `<pid>/stat` and its NUL.
const STAT_PATH_SIZE: usize = 24;
/// Enough of `/proc/<pid>/stat` to reach the parent pid after the longest command name.
const STAT_PREFIX_SIZE: usize = 512;
/// The most decimal digits of a pid.
const PID_DIGITS: usize = 10;
/// Between the `)` that ends the command name and the parent pid: `) S `.
const PPID_AFTER_NAME: usize = 4;

/// Sends `sig` to every process whose parent is this process: those the kernel lists as this
/// thread's children (`/proc/thread-self/children`, one read of a few bytes), else — on a
/// kernel without that file — every process `/proc` names whose parent is this one. The shim is
/// single-threaded, so its thread's children are all of its children, orphans handed to it as
/// subreaper included. Either list is a snapshot: the caller signals and reaps until no child
/// is left, so a child that arrives after the read is found on the next round.
pub(super) fn signal_children(sig: c_int) {
    if signal_listed_children(sig).is_none() {
        scan_for_children(sig);
    }
}

/// Signals each pid of `/proc/thread-self/children` (space-separated decimal pids); `None` when
/// the file cannot be read.
fn signal_listed_children(sig: c_int) -> Option<()> {
    let fd = call::open(
        c"/proc/thread-self/children",
        libc::O_RDONLY | libc::O_CLOEXEC,
    )
    .ok()?;
    let mut buf = [0u8; DIRENT_BUFFER];
    // A pid may straddle two reads: its digits so far are carried over.
    let mut digits = [0u8; PID_DIGITS];
    let mut held = 0usize;
    let mut ok = true;
    loop {
        let n = match call::read(fd, &mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(_) => {
                ok = false;
                break;
            }
        };
        for b in buf.iter().take(n) {
            match digits.get_mut(held) {
                Some(slot) if b.is_ascii_digit() => {
                    *slot = *b;
                    held += 1;
                }
                _ => {
                    if let Some(pid) = digits.get(..held).and_then(parse_pid) {
                        let _ = call::kill(pid, sig);
                    }
                    held = 0;
                }
            }
        }
    }
    if let Some(pid) = digits.get(..held).and_then(parse_pid) {
        let _ = call::kill(pid, sig);
    }
    let _ = call::close(fd);
    ok.then_some(())
}

/// Sends `sig` to every process `/proc` names whose parent is this process.
fn scan_for_children(sig: c_int) {
    let me = call::getpid();
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
    let Ok(proc_fd) = call::open(c"/proc", flags) else {
        return;
    };
    let mut buf = [0u8; DIRENT_BUFFER];
    while let Ok(n) = call::getdents64(proc_fd, &mut buf) {
        if n == 0 {
            break;
        }
        let mut at = 0usize;
        while at + DIRENT_NAME_AT < n {
            let (Some(&low), Some(&high)) = (
                buf.get(at + DIRENT_RECLEN_AT),
                buf.get(at + DIRENT_RECLEN_AT + 1),
            ) else {
                break;
            };
            let reclen = usize::from(u16::from_ne_bytes([low, high]));
            // A record shorter than its own header, or past what was read: the rest is not
            // trusted.
            let Some(name) = buf
                .get(..n)
                .and_then(|read| read.get(at + DIRENT_NAME_AT..at + reclen))
            else {
                break;
            };
            let name = name.split(|b| *b == 0).next().unwrap_or(name);
            if let Some(pid) = parse_pid(name)
                && parent_of(proc_fd, name) == Some(me)
            {
                let _ = call::kill(pid, sig);
            }
            at += reclen;
        }
    }
    let _ = call::close(proc_fd);
}

fn parse_pid(name: &[u8]) -> Option<libc::pid_t> {
    if name.is_empty() || name.len() > PID_DIGITS {
        return None;
    }
    let mut pid: i64 = 0;
    for b in name {
        if !b.is_ascii_digit() {
            return None;
        }
        pid = pid * 10 + i64::from(b - b'0');
    }
    libc::pid_t::try_from(pid).ok()
}

/// The parent pid of `/proc/<name>`, read from `stat` after the last `)` of the comm field.
fn parent_of(proc_fd: c_int, name: &[u8]) -> Option<libc::pid_t> {
    let path: [u8; STAT_PATH_SIZE] = concat(&[name, b"/stat\0"])?;
    let path = CStr::from_bytes_until_nul(&path).ok()?;
    let fd = call::openat(proc_fd, path, libc::O_RDONLY | libc::O_CLOEXEC).ok()?;
    let mut stat = [0u8; STAT_PREFIX_SIZE];
    let n = call::read_full(fd, &mut stat);
    let _ = call::close(fd);
    let stat = stat.get(..n)?;
    let close = stat.iter().rposition(|b| *b == b')')?;
    let rest = stat.get(close + PPID_AFTER_NAME..)?;
    let end = rest.iter().position(|b| *b == b' ')?;
    parse_pid(rest.get(..end)?)
}

/// The thread group (process) of thread `tid`, from `/proc/<tid>/status`.
pub(super) fn thread_group_of(tid: libc::pid_t) -> Option<libc::pid_t> {
    const PREFIX: &[u8] = b"/proc/";
    const SUFFIX: &[u8] = b"/status\0";
    const FIELD: &[u8] = b"\nTgid:";
    let mut digits = [0u8; PID_DIGITS];
    let mut n = u32::try_from(tid).ok()?;
    let mut at = digits.len();
    loop {
        at = at.checked_sub(1)?;
        *digits.get_mut(at)? = b'0' + u8::try_from(n % 10).ok()?;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let path: [u8; STAT_PATH_SIZE + PREFIX.len()] = concat(&[PREFIX, digits.get(at..)?, SUFFIX])?;
    let path = CStr::from_bytes_until_nul(&path).ok()?;
    let fd = call::open(path, libc::O_RDONLY | libc::O_CLOEXEC).ok()?;
    let mut status = [0u8; STAT_PREFIX_SIZE];
    let n = call::read_full(fd, &mut status);
    let _ = call::close(fd);
    let status = status.get(..n)?;
    let start = status.windows(FIELD.len()).position(|w| w == FIELD)? + FIELD.len();
    let value = status.get(start..)?.trim_ascii_start();
    let end = value.iter().position(|b| !b.is_ascii_digit())?;
    parse_pid(value.get(..end)?)
}

/// `parts` one after the other in a zeroed buffer of `N` bytes, on the stack; `None` when they
/// do not fit.
fn concat<const N: usize>(parts: &[&[u8]]) -> Option<[u8; N]> {
    let mut out = [0u8; N];
    let mut slots = out.iter_mut();
    for b in parts.iter().flat_map(|part| part.iter()) {
        *slots.next()? = *b;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both ways of finding children reach a child that waits for a signal. Each runs in a
    /// forked, single-threaded process of its own, as in the shim, so that the scan cannot
    /// touch the children of other tests.
    #[test]
    fn a_child_is_signalled_from_the_list_and_from_the_scan() {
        for by_list in [true, false] {
            // SAFETY: the forked process only forks, signals through `/proc` on stack
            // buffers, waits and exits: async-signal-safe calls, as the shim makes them.
            let tester = match unsafe { libc::fork() } {
                0 => {
                    // SAFETY: the grandchild only pauses until a signal ends it: SIGKILL from
                    // the test, else its own SIGALRM (so a miss fails instead of hanging).
                    let child = match unsafe { libc::fork() } {
                        0 => loop {
                            // SAFETY: alarm and pause take plain integers or nothing.
                            unsafe {
                                libc::alarm(10);
                                libc::pause();
                            }
                        },
                        pid => pid,
                    };
                    let listed = if by_list {
                        signal_listed_children(libc::SIGKILL).is_some()
                    } else {
                        scan_for_children(libc::SIGKILL);
                        true
                    };
                    let mut status = 0;
                    // SAFETY: waits for the grandchild forked above.
                    let reaped = unsafe { libc::waitpid(child, &raw mut status, 0) };
                    let killed = reaped == child
                        && libc::WIFSIGNALED(status)
                        && libc::WTERMSIG(status) == libc::SIGKILL;
                    // SAFETY: _exit ends the forked process without running the harness's code.
                    unsafe { libc::_exit(if listed && killed { 0 } else { 1 }) }
                }
                -1 => panic!("fork failed"),
                pid => pid,
            };
            let mut status = 0;
            // SAFETY: waits for the process forked above.
            let reaped = unsafe { libc::waitpid(tester, &raw mut status, 0) };
            assert_eq!(reaped, tester);
            assert!(
                libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
                "by_list {by_list}: the child was not found and killed ({status})"
            );
        }
    }

    #[test]
    fn a_thread_belongs_to_its_process() {
        let me = call::getpid();
        assert_eq!(thread_group_of(me), Some(me));
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            // SAFETY: gettid takes no arguments.
            let _ = tid_tx.send(unsafe { libc::gettid() });
            // Alive until the test has looked it up.
            let _ = done_rx.recv();
        });
        let tid = tid_rx.recv().expect("tid");
        assert_ne!(tid, me);
        assert_eq!(thread_group_of(tid), Some(me));
        drop(done_tx);
        thread.join().expect("thread");
    }
}
