//! The shim: the helper's child for one command. It becomes a session leader and, on Linux, a
//! child subreaper, lays out its descriptors, starts the command, and stays behind as the one
//! process that can find and reap the whole tree — including descendants that called `setsid`
//! and double-forked: when they are orphaned the kernel hands them to the shim, not to init.
//! It never runs command code, so the records it writes can be trusted.
//!
//! macOS has no subreaper: there the shim finds the tree by the command's process group and by
//! walking the kernel's lists of children, and waits with kqueue ([`super::macos_tree`], which
//! says what it cannot reach). The rest — descriptors, the command's start, the records — is the
//! same code on both.

use std::ffi::{c_int, c_uint};

use confine_protocol::Stage;
use nix::errno::Errno;
use nix::libc;

use super::call;
#[cfg(target_os = "linux")]
use super::connect::Supervisor;
use super::exec;
#[cfg(target_os = "linux")]
use super::layout::CTL_TERMINATE;
#[cfg(target_os = "linux")]
use super::layout::ChildConfine;
#[cfg(target_os = "linux")]
use super::layout::finish;
use super::layout::{
    FD_CONFINE, FD_CTL, FD_FIRST_PASSED, FD_PARK, FD_STATUS, FIXED_FDS, MAX_PASSED_FDS, Prepared,
    SHIM_IGNORED, STDIO_FDS, fail, fd_at, or_fail, write_record,
};
#[cfg(target_os = "linux")]
use super::proc_scan;
#[cfg(target_os = "linux")]
use super::socket_call;
use crate::record::Record;

/// Positions in the shim's parking array (see [`FIXED_FDS`]).
const SLOT_STATUS: usize = 3;
const SLOT_CTL: usize = 4;
const SLOT_CONFINE: usize = 5;
/// `poll` without a timeout.
#[cfg(target_os = "linux")]
const WAIT_FOREVER: c_int = -1;
/// The size of one record a signalfd returns (`struct signalfd_siginfo`).
#[cfg(target_os = "linux")]
const SIGNALFD_INFO_SIZE: usize = std::mem::size_of::<libc::signalfd_siginfo>();
/// The last descriptor number `close_range` can name.
const LAST_FD: c_uint = c_uint::MAX;

/// Forks the shim for one command. Returns the shim's pid in the helper.
pub(crate) fn fork_shim(prepared: &Prepared<'_>) -> std::io::Result<libc::pid_t> {
    match fork_for(prepared) {
        Err(errno) => Err(errno.into()),
        Ok(0) => shim_main(prepared, false),
        Ok(pid) => Ok(pid),
    }
}

/// The fork of the shim: under the namespace backend, born in the sandbox's namespaces, in
/// those made ahead for it when it has them and they can be joined.
fn fork_for(prepared: &Prepared<'_>) -> Result<libc::pid_t, Errno> {
    #[cfg(target_os = "linux")]
    if let Some(sandbox) = prepared.sandbox {
        if let Some(ahead) = &sandbox.ahead {
            // SAFETY: as for `fork` below; the shim runs `shim_main`, which never returns.
            let born = unsafe { super::sandbox::born_ahead(ahead, || shim_main(prepared, true)) };
            if born.is_ok() {
                return born;
            }
        }
        // SAFETY: as for `fork` below: the child is a copy of the helper as `fork` makes it,
        // in new namespaces.
        return unsafe { super::mount_call::fork_into(sandbox.namespaces()) };
    }
    #[cfg(target_os = "macos")]
    let _ = prepared;
    // SAFETY: the helper is single-threaded, so the child inherits a consistent address space;
    // the child only runs `shim_main`, which uses async-signal-safe calls on pre-built data and
    // never returns.
    unsafe { call::fork() }
}

/// Under the namespace backend, the sandbox built around the shim (`super::sandbox`); a step
/// that fails is reported at the namespace stage and ends the shim.
#[cfg(target_os = "linux")]
fn build_sandbox(p: &Prepared<'_>, made_ahead: bool) {
    if let (Some(sandbox), ChildConfine::Landlock { filter, .. }) = (p.sandbox, &p.confine) {
        let layers = super::sandbox::Layers {
            ruleset: FD_CONFINE,
            filter,
        };
        or_fail(
            super::sandbox::enter(sandbox, &layers, made_ahead),
            FD_STATUS,
            Stage::Namespace,
        );
    }
}

/// The shim's first steps, before its descriptors are laid out: it joins the command's
/// cgroups, leads a session of its own, and becomes the subreaper of the command's tree.
fn take_place(p: &Prepared<'_>) {
    // The command's own cgroups first: everything the shim forks from now on is counted there.
    for fd in &p.cgroup_procs {
        let joined =
            call::write(*fd, b"0").and_then(|n| if n == 1 { Ok(()) } else { Err(Errno::EIO) });
        or_fail(joined, p.status_wr, Stage::Cgroup);
    }
    or_fail(call::setsid(), p.status_wr, Stage::Setsid);
    #[cfg(target_os = "linux")]
    or_fail(
        call::prctl(libc::PR_SET_CHILD_SUBREAPER, 1),
        p.status_wr,
        Stage::Supervise,
    );
    // The helper's own refusal of debuggers is not inherited by fork on macOS.
    #[cfg(target_os = "macos")]
    or_fail(
        super::call::macos::deny_attach(),
        p.status_wr,
        Stage::Supervise,
    );
}

fn shim_main(p: &Prepared<'_>, made_ahead: bool) -> ! {
    take_place(p);
    lay_out_descriptors(p);
    let status_fd = FD_STATUS;
    #[cfg(target_os = "linux")]
    build_sandbox(p, made_ahead);
    #[cfg(target_os = "macos")]
    let _ = made_ahead;

    // SIGCHLD arrives through a signalfd (Linux; on macOS the shim waits with kqueue); SIGTERM
    // sent to our process group while terminating the tree must not end the shim itself. The
    // command resets both.
    #[cfg(target_os = "linux")]
    let sigfd = {
        let mask = call::sigset(&[libc::SIGCHLD]);
        or_fail(
            call::sigprocmask(libc::SIG_BLOCK, &mask),
            status_fd,
            Stage::Signals,
        );
        or_fail(call::signalfd(&mask), status_fd, Stage::Signals)
    };
    for sig in SHIM_IGNORED {
        let _ = call::set_disposition(sig, libc::SIG_IGN);
    }
    // The kqueue the shim waits on, made before the command (which does not inherit it).
    #[cfg(target_os = "macos")]
    let kq = {
        let kq = or_fail(super::call::macos::kqueue(), status_fd, Stage::Supervise);
        or_fail(
            super::macos_tree::watch_control(kq),
            status_fd,
            Stage::Supervise,
        );
        kq
    };

    let [exec_rd, exec_wr] = or_fail(call::pipe2_cloexec(), status_fd, Stage::Pipe);
    // The command sends its `connect` filter's listener back on this pair.
    #[cfg(target_os = "linux")]
    let listener_pair = p
        .connects
        .map(|_| or_fail(socket_call::socketpair_cloexec(), status_fd, Stage::Seccomp));
    #[cfg(target_os = "macos")]
    let listener_pair: Option<[c_int; 2]> = None;
    let child = start_command(p, exec_wr, listener_pair.map(|[_, to_shim]| to_shim));
    let _ = call::close(exec_wr);
    if let Some([_, to_shim]) = listener_pair {
        let _ = call::close(to_shim);
    }
    for fd in 0..STDIO_FDS {
        let _ = call::close(fd);
    }

    // Wait for the command's execve: end of file means it succeeded (the write end was
    // close-on-exec); a record means it did not.
    let mut raw = [0u8; Record::SIZE];
    let got = call::read_full(exec_rd, &mut raw);
    let _ = call::close(exec_rd);
    if got == Record::SIZE {
        let _ = call::wait4(0);
        let _ = call::write(status_fd, &raw);
        call::exit(0);
    }
    let pid = u32::try_from(child).unwrap_or(0);
    #[cfg(target_os = "linux")]
    {
        // The command sent the listener before its execve; without it its `connect` calls fail
        // (`ENOSYS`), closed, as nobody answers them.
        let listener = listener_pair.and_then(|[from_command, _]| {
            let listener = socket_call::recv_fd(from_command).ok();
            let _ = call::close(from_command);
            listener
        });
        write_record(status_fd, Record::Started { pid });
        let supervisor = p.connects.zip(listener).map(|(c, listener)| Supervisor {
            listener,
            rules: c.rules,
            proxy_control: c.proxy.then_some(FD_FIRST_PASSED),
            proxy_listener: None,
            host_root: p
                .sandbox
                .and_then(|s| super::layout::fd_at(FD_FIRST_PASSED, s.host_root)),
        });
        supervise(child, sigfd, status_fd, supervisor)
    }
    #[cfg(target_os = "macos")]
    {
        write_record(status_fd, Record::Started { pid });
        super::macos_tree::supervise(child, kq, status_fd)
    }
}

/// Starts the command: on Linux a clone that shares the shim's memory until it executes, in a
/// user namespace of its own when its confinement counts its process cap there; on macOS a
/// fork.
fn start_command(p: &Prepared<'_>, exec_wr: c_int, listener_to: Option<c_int>) -> libc::pid_t {
    let shim_pid = call::getpid();
    #[cfg(target_os = "macos")]
    // SAFETY: the shim is single-threaded (a fork of the single-threaded helper); the child
    // runs `command_main`, async-signal-safe calls on pre-built data, and execs or exits.
    return match or_fail(unsafe { call::fork() }, FD_STATUS, Stage::Fork) {
        0 => exec::command_main(p, exec_wr, shim_pid, listener_to),
        child => child,
    };
    #[cfg(target_os = "linux")]
    {
        let stack = or_fail(call::ChildStack::new(), FD_STATUS, Stage::Fork);
        let new_user = p.confine.user_namespace().is_some();
        let command = || exec::command_main(p, exec_wr, shim_pid, listener_to);
        // SAFETY: the shim is single-threaded (a fork of the single-threaded helper); the
        // child runs `command_main`, async-signal-safe calls on pre-built data that write only
        // its own stack and descriptor table (and `errno`, which the shim reads only after a
        // failed call of its own), and execs or exits.
        let started = unsafe { call::clone_vfork(&stack, new_user, command) };
        // A namespace the kernel refuses is the namespace's failure; a process that cannot
        // be made at all is the fork's.
        let stage = match started {
            Err(e) if new_user && !matches!(e, Errno::EAGAIN | Errno::ENOMEM) => {
                Stage::UserNamespace
            }
            _ => Stage::Fork,
        };
        or_fail(started, FD_STATUS, stage)
    }
}

/// Parks every descriptor the shim keeps above the final layout, then places them at fixed
/// numbers (so a source already sitting at a target number cannot be clobbered by a dup), and
/// closes every other descriptor.
fn lay_out_descriptors(p: &Prepared<'_>) {
    let status_fd = p.status_wr;
    let passed = p.passed();
    let Some(past_passed) = fd_at(FD_FIRST_PASSED, passed.len()) else {
        fail(status_fd, Stage::Prepare, Errno::EMFILE);
    };
    let park = FD_PARK.max(past_passed);
    let mut parked = [0 as c_int; FIXED_FDS + MAX_PASSED_FDS];
    let confine_fd = p.confine.fd();
    let fixed = [
        p.stdio[0],
        p.stdio[1],
        p.stdio[2],
        p.status_wr,
        p.ctl_rd,
        confine_fd.unwrap_or(p.ctl_rd),
    ];
    for (slot, fd) in parked.iter_mut().zip(fixed.iter().chain(passed)) {
        *slot = or_fail(call::dup_cloexec_above(*fd, park), status_fd, Stage::Stdio);
    }
    or_fail(
        call::dup3_cloexec(parked[SLOT_STATUS], FD_STATUS),
        parked[SLOT_STATUS],
        Stage::Stdio,
    );
    let status_fd = FD_STATUS;
    or_fail(
        call::dup3_cloexec(parked[SLOT_CTL], FD_CTL),
        status_fd,
        Stage::Stdio,
    );
    if confine_fd.is_some() {
        let placed = call::dup3_cloexec(parked[SLOT_CONFINE], FD_CONFINE);
        or_fail(placed, status_fd, Stage::Prepare);
    }
    let Some(parked_passed) = parked.get(FIXED_FDS..FIXED_FDS + passed.len()) else {
        fail(status_fd, Stage::Prepare, Errno::EMFILE);
    };
    for (i, parked_fd) in parked_passed.iter().enumerate() {
        let Some(target) = fd_at(FD_FIRST_PASSED, i) else {
            fail(status_fd, Stage::Prepare, Errno::EMFILE);
        };
        or_fail(
            call::dup3_cloexec(*parked_fd, target),
            status_fd,
            Stage::Prepare,
        );
    }
    for (target, parked_fd) in (0..STDIO_FDS).zip(&parked) {
        or_fail(call::dup2(*parked_fd, target), status_fd, Stage::Stdio);
    }
    // Without a confinement descriptor, FD_CONFINE itself holds nothing of ours.
    let first_free = if !passed.is_empty() {
        past_passed
    } else if confine_fd.is_some() {
        FD_CONFINE + 1
    } else {
        FD_CONFINE
    };
    let first_free = or_fail(
        c_uint::try_from(first_free).map_err(|_| Errno::EBADF),
        status_fd,
        Stage::CloseFds,
    );
    or_fail(
        call::close_range(first_free, LAST_FD, 0),
        status_fd,
        Stage::CloseFds,
    );
}

/// The shim's loop: reap children, obey ctl orders, answer the command's `connect` calls when
/// it has a `supervisor`, report the main process's end.
#[cfg(target_os = "linux")]
fn supervise(
    main: libc::pid_t,
    sigfd: c_int,
    status_fd: c_int,
    supervisor: Option<Supervisor<'_>>,
) -> ! {
    let mut main_status: Option<(c_int, libc::rusage)> = None;
    let mut supervisor = supervisor;
    loop {
        let mut fds = [
            libc::pollfd {
                fd: FD_CTL,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: sigfd,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                // poll skips a negative descriptor.
                fd: supervisor.as_ref().map_or(-1, |s| s.listener),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        match call::poll(&mut fds, WAIT_FOREVER) {
            Ok(_) => {}
            Err(Errno::EINTR) => continue,
            Err(_) => {
                kill_tree(main, &mut main_status);
                finish(status_fd, main_status);
            }
        }
        if fds[1].revents != 0 {
            let mut info = [0u8; SIGNALFD_INFO_SIZE];
            while call::read(sigfd, &mut info).is_ok_and(|n| n > 0) {}
            reap(main, &mut main_status, libc::WNOHANG);
            if main_status.is_some() {
                kill_tree(main, &mut main_status);
                finish(status_fd, main_status);
            }
        }
        if fds[0].revents != 0 {
            let mut order = [0u8; 1];
            match (call::read(FD_CTL, &mut order), order[0]) {
                (Ok(1), CTL_TERMINATE) => terminate_tree(main),
                (Err(Errno::EINTR), _) => {}
                _ => {
                    // `K`, end of file (the helper is gone), or anything unexpected: kill.
                    kill_tree(main, &mut main_status);
                    finish(status_fd, main_status);
                }
            }
        }
        let ready = fds[2].revents;
        if let Some(answering) = supervisor.as_mut()
            && ready & libc::POLLIN != 0
        {
            answering.answer_one();
        } else if ready != 0 {
            // No process uses the filter any more (or the listener broke): nothing more will
            // arrive.
            supervisor = None;
        }
    }
}

/// Reaps children (waiting for one unless `flags` has WNOHANG, then every one that has already
/// ended), remembering the main process's status. Returns false once no child is left.
#[cfg(target_os = "linux")]
fn reap(main: libc::pid_t, main_status: &mut Option<(c_int, libc::rusage)>, flags: c_int) -> bool {
    let mut flags = flags;
    loop {
        match call::wait4(flags) {
            Err(Errno::EINTR) => continue,
            Err(_) => return false,
            Ok((0, _, _)) => return true,
            Ok((pid, status, usage)) => {
                if pid == main {
                    *main_status = Some((status, usage));
                }
                flags = libc::WNOHANG;
            }
        }
    }
}

/// SIGTERM to the command's process group and to every direct child (orphans that were handed
/// to the shim after escaping the group). A courtesy before the kill, not a guarantee.
#[cfg(target_os = "linux")]
fn terminate_tree(main: libc::pid_t) {
    // The command leads its own group (`exec::lifetime`): its pid is the group's id.
    let _ = call::kill(-main, libc::SIGTERM);
    proc_scan::signal_children(libc::SIGTERM);
}

/// SIGKILLs every descendant and reaps it: first the command's whole process group at once,
/// then every direct child. Killing direct children makes their own children ours (we are
/// their subreaper), so repeating until no child is left reaches the whole tree, however deep,
/// including processes that called setsid or double-forked. A descendant whose parent died was
/// handed to us before that parent could be reaped, so once we have no child at all there is
/// no descendant either: the usual end, a command that left nothing behind, costs no scan of
/// `/proc`.
#[cfg(target_os = "linux")]
fn kill_tree(main: libc::pid_t, main_status: &mut Option<(c_int, libc::rusage)>) {
    let _ = call::kill(-main, libc::SIGKILL);
    while reap(main, main_status, libc::WNOHANG) {
        proc_scan::signal_children(libc::SIGKILL);
        if !reap(main, main_status, 0) {
            return;
        }
    }
}
