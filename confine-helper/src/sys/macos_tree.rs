//! The shim's supervision on macOS, which has no child subreaper.
//!
//! The command leads a session and process group of its own (it calls `setsid` before
//! `execve`), so its process group id is its pid. The shim waits with one kqueue: for its
//! control pipe to be readable, and for the command to exit (`EVFILT_PROC`, `NOTE_EXIT`).
//!
//! The tree is found two ways, on stack buffers: the command's process group
//! (`PROC_PGRP_ONLY`), which holds every descendant that has not called `setsid` or
//! `setpgid`; and the kernel's list of each process's children (`PROC_PPID_ONLY`), walked from
//! the command and from every member of its group, which reaches descendants that left the
//! group as long as their chain of parents back to one of those is alive.
//!
//! Killing is done in rounds, so that a killed parent cannot hand its children to launchd
//! before they are found: each process is stopped (`SIGSTOP`) before its children are listed,
//! so that it can fork no more, and the walk is repeated until it finds nobody new; then every
//! process found, and the group, gets `SIGKILL`, and the shim waits (kqueue `NOTE_EXIT`) until
//! each process it could signal has exited. A round that finds no living process ends it. The
//! command itself is reaped last: until then its pid, which is also the group's id, cannot be
//! reused, so signalling the group never reaches another.
//!
//! What this cannot do, where Linux's subreaper can:
//! - a descendant whose parent exited before the shim looked, and that left the process group
//!   (`setsid`, or `setpgid` to another group), was handed to launchd: nothing links it to the
//!   command any more, and it keeps running after the command's end;
//! - a process the shim cannot signal (it executed a set-user-ID program) is not killed, and
//!   not waited for;
//! - a walk stops at [`MAX_TREE`] processes; a larger tree is killed in several rounds, and a
//!   parent killed with children the walk had no room for hands them to launchd;
//! - the pids of a group member found without its parent stopped could, in theory, be reused
//!   between the listing and the signal (macOS hands out pids in increasing order up to 99,999
//!   before it wraps, so this takes that many new processes in that instant).
//!
//! The shim itself is not tied to the helper: if the helper dies, the end of file on the
//! control pipe kills the tree; if the shim is killed with SIGKILL (it ignores the other
//! signals), the command keeps running, as macOS has no death signal.

use std::ffi::c_int;

use nix::errno::Errno;
use nix::libc;

use super::call;
use super::call::macos::{self, Event};
use super::layout::{CTL_TERMINATE, FD_CTL, finish};

/// The most processes one walk holds (and the most children listed for one process): above the
/// default per-user process limit of macOS.
const MAX_TREE: usize = 4096;
/// Events taken from the kqueue per wait.
const EVENTS: usize = 8;

/// Watches the control pipe with `kq`, before the command is forked.
pub(super) fn watch_control(kq: c_int) -> call::SysResult<()> {
    macos::watch_readable(kq, FD_CTL)
}

/// The shim's loop: obey ctl orders, and once the command has exited, kill what is left of its
/// tree, reap the command and report its end.
pub(super) fn supervise(main: libc::pid_t, kq: c_int, status_fd: c_int) -> ! {
    match macos::watch_exit(kq, main) {
        Ok(true) => {}
        // Already exited, or the kqueue is broken: the end is the same.
        Ok(false) | Err(_) => end(main, kq, status_fd),
    }
    loop {
        let mut events = [None; EVENTS];
        let n = match macos::wait(kq, &mut events) {
            Ok(n) => n,
            Err(Errno::EINTR) => continue,
            Err(_) => end(main, kq, status_fd),
        };
        for event in events.iter().take(n).flatten() {
            match *event {
                Event::Exited(pid) if pid == main => end(main, kq, status_fd),
                Event::Readable(FD_CTL) => {
                    let mut order = [0u8; 1];
                    match (call::read(FD_CTL, &mut order), order[0]) {
                        (Ok(1), CTL_TERMINATE) => terminate_tree(main),
                        (Err(Errno::EINTR), _) => {}
                        // `K`, end of file (the helper is gone), or anything unexpected: kill.
                        _ => end(main, kq, status_fd),
                    }
                }
                _ => {}
            }
        }
    }
}

/// Kills what is left of the tree, reaps the command and reports its end. No order is read any
/// more: the control pipe stops waking the waits.
fn end(main: libc::pid_t, kq: c_int, status_fd: c_int) -> ! {
    let _ = macos::unwatch_readable(kq, FD_CTL);
    kill_tree(main, kq);
    let main_status = call::wait4_pid(main)
        .ok()
        .map(|(_, status, usage)| (status, usage));
    finish(status_fd, main_status)
}

/// SIGTERM to the command's process group and to every process the walk finds. A courtesy
/// before the kill, not a guarantee.
fn terminate_tree(main: libc::pid_t) {
    let _ = call::kill(-main, libc::SIGTERM);
    let mut tree = Tree::new();
    tree.walk(main, None);
    for pid in tree.found() {
        let _ = call::kill(*pid, libc::SIGTERM);
    }
}

/// Stops, kills and waits for the whole tree, in rounds, until a round finds no process alive.
fn kill_tree(main: libc::pid_t, kq: c_int) {
    loop {
        let mut tree = Tree::new();
        let _ = call::kill(-main, libc::SIGSTOP);
        // Until a walk finds nobody new: a process that was forking as it was stopped may have
        // a child the previous walk did not see.
        loop {
            let before = tree.len;
            tree.walk(main, Some(libc::SIGSTOP));
            if tree.len == before {
                break;
            }
        }
        let _ = call::kill(-main, libc::SIGKILL);
        let mut waiting = Tree::new();
        for pid in tree.found() {
            // A process the shim may not signal is not waited for: nothing would end it.
            if call::kill(*pid, libc::SIGKILL).is_ok()
                && macos::watch_exit(kq, *pid).unwrap_or(false)
            {
                waiting.add(*pid);
            }
        }
        if waiting.len == 0 {
            return;
        }
        wait_for_exits(kq, &mut waiting);
    }
}

/// Waits until every process of `waiting` has exited (their exits are watched on `kq`).
fn wait_for_exits(kq: c_int, waiting: &mut Tree) {
    let mut left = waiting.len;
    while left > 0 {
        let mut events = [None; EVENTS];
        let n = match macos::wait(kq, &mut events) {
            Ok(n) => n,
            Err(Errno::EINTR) => continue,
            // A broken kqueue: the next round signals again and finds who is left.
            Err(_) => return,
        };
        for event in events.iter().take(n).flatten() {
            if let Event::Exited(pid) = *event
                && waiting.remove(pid)
            {
                left -= 1;
            }
        }
    }
}

/// The processes of one walk, without repeats, on the stack.
struct Tree {
    pids: [libc::pid_t; MAX_TREE],
    len: usize,
}

impl Tree {
    fn new() -> Tree {
        Tree {
            pids: [0; MAX_TREE],
            len: 0,
        }
    }

    fn found(&self) -> &[libc::pid_t] {
        self.pids.get(..self.len).unwrap_or(&self.pids)
    }

    /// Adds `pid` unless it is held already or there is no room (the next round finds it).
    fn add(&mut self, pid: libc::pid_t) {
        if pid > 0
            && !self.found().contains(&pid)
            && let Some(slot) = self.pids.get_mut(self.len)
        {
            *slot = pid;
            self.len += 1;
        }
    }

    /// Removes `pid`; whether it was held.
    fn remove(&mut self, pid: libc::pid_t) -> bool {
        let held = self.found().iter().position(|p| *p == pid);
        match held.and_then(|at| self.pids.get_mut(at)) {
            Some(slot) => {
                *slot = 0;
                true
            }
            None => false,
        }
    }

    /// Adds the command, the members of its process group and, breadth first, every child of
    /// each; sends `signal` to each process before its children are listed.
    fn walk(&mut self, main: libc::pid_t, signal: Option<c_int>) {
        let me = call::getpid();
        let mut listed = [0 as libc::pid_t; MAX_TREE];
        self.add(main);
        let n = macos::group_members(main, &mut listed);
        for pid in listed.iter().take(n) {
            self.add(*pid);
        }
        let mut at = 0;
        while let Some(&pid) = self.found().get(at) {
            if let Some(signal) = signal {
                let _ = call::kill(pid, signal);
            }
            let n = macos::children_of(pid, &mut listed);
            for child in listed.iter().take(n) {
                if *child != me {
                    self.add(*child);
                }
            }
            at += 1;
        }
    }
}
