//! The command's own path from the shim's clone to `execve`: signals back to their defaults,
//! the death signal (Linux) or a session of its own (macOS), limits, working directory, its
//! confinement, then the `PATH` search as `execvp` does it. A failed step is reported to the
//! shim and ends the process; once `execve` succeeds the command holds none of the helper's
//! pipes.

use std::ffi::c_int;
#[cfg(target_os = "linux")]
use std::os::fd::RawFd;

use confine_protocol::Stage;
use nix::errno::Errno;
use nix::libc;

use super::call;
#[cfg(target_os = "linux")]
use super::caps;
#[cfg(target_os = "linux")]
use super::layout::{
    COMMAND_FIRST_PASSED_FD, COMMAND_SECCOMP_FD, FD_CONFINE, FD_FIRST_PASSED, fail, fd_at,
};
use super::layout::{ChildConfine, EXIT_SETUP_FAILED, Prepared, or_fail, write_record};
#[cfg(target_os = "linux")]
use super::socket_call;
use crate::record::Record;

/// The standard signals, 1 to 31, whose dispositions the command resets on macOS.
#[cfg(target_os = "macos")]
const STANDARD_SIGNALS: std::ops::Range<c_int> = 1..32;
/// The first descriptor above stdio.
#[cfg(target_os = "linux")]
const FIRST_NON_STDIO_FD: u32 = 3;

/// The command: leads a session and process group of its own, then becomes the target. `listener_to` is the socket on which the
/// command sends the shim the listener of its `connect` filter, when the shim supervises
/// `connect` (Linux).
pub(super) fn command_main(
    p: &Prepared<'_>,
    report_fd: c_int,
    shim_pid: libc::pid_t,
    listener_to: Option<c_int>,
) -> ! {
    let empty = call::sigset(&[]);
    or_fail(
        call::sigprocmask(libc::SIG_SETMASK, &empty),
        report_fd,
        Stage::Signals,
    );
    // Ignored dispositions survive execve: the shim's and the helper's are set back.
    for sig in signals_to_reset() {
        let _ = call::set_disposition(sig, libc::SIG_DFL);
    }
    lifetime(report_fd, shim_pid);
    for (resource, value) in &p.rlimits {
        or_fail(
            call::setrlimit(*resource, *value, *value),
            report_fd,
            Stage::Rlimits,
        );
    }
    or_fail(call::chdir(&p.cwd), report_fd, Stage::Chdir);
    #[cfg(target_os = "linux")]
    if let (Some(connects), Some(to_shim)) = (p.connects, listener_to) {
        hand_connects_to_shim(&connects, to_shim, report_fd);
    }
    #[cfg(target_os = "macos")]
    let _ = listener_to;
    confine_self(p, report_fd);
    // PATH search as execvp does it: skip entries that do not exist, remember that one was
    // found but not executable, stop at any other error.
    let mut saw_eacces = false;
    let mut last = Errno::ENOENT;
    for program in &p.programs {
        last = call::execve(program, &p.argv, &p.envp);
        match last {
            Errno::EACCES => saw_eacces = true,
            Errno::ENOENT | Errno::ENOTDIR | Errno::ELOOP | Errno::ENAMETOOLONG => {}
            _ => break,
        }
    }
    let errno = if saw_eacces && is_search_miss(last) {
        Errno::EACCES
    } else {
        last
    };
    write_record(
        report_fd,
        Record::ExecFailed {
            errno: errno as i32,
        },
    );
    call::exit(EXIT_SETUP_FAILED)
}

/// The signals the command sets back to their default: on Linux those the shim and the helper
/// ignore (the helper set back every other at its start); on macOS, which the helper cannot ask
/// cheaply, every standard signal.
#[cfg(target_os = "linux")]
fn signals_to_reset() -> impl Iterator<Item = c_int> {
    super::layout::SHIM_IGNORED.into_iter()
}

#[cfg(target_os = "macos")]
fn signals_to_reset() -> impl Iterator<Item = c_int> {
    STANDARD_SIGNALS.filter(|sig| *sig != libc::SIGKILL && *sig != libc::SIGSTOP)
}

/// Loads the filter that hands every `connect` to the shim, and sends the shim its listener
/// on `to_shim`.
#[cfg(target_os = "linux")]
fn hand_connects_to_shim(connects: &super::ShimConnects<'_>, to_shim: c_int, report_fd: c_int) {
    // Loaded first, so that everything this process becomes — bwrap, its sandbox, the
    // command and its children — hands its `connect` calls to the shim. Loading a filter
    // needs no_new_privs; a filter that nobody answers fails the calls (`ENOSYS`), so a
    // listener that never reaches the shim fails closed.
    or_fail(
        call::prctl(libc::PR_SET_NO_NEW_PRIVS, 1),
        report_fd,
        Stage::NoNewPrivs,
    );
    let listener = or_fail(
        call::seccomp_new_listener(connects.notify),
        report_fd,
        Stage::Seccomp,
    );
    or_fail(
        socket_call::send_fd(to_shim, listener),
        report_fd,
        Stage::Seccomp,
    );
    let _ = call::close(listener);
    let _ = call::close(to_shim);
}

/// What the command applies to itself before `execve`: nothing (macOS, unconfined), bwrap's
/// descriptors placed where its argv names them, or Landlock's user namespace, capabilities,
/// no_new_privs, ruleset and filter. A step that fails ends the process with its record.
fn confine_self(p: &Prepared<'_>, report_fd: c_int) {
    #[cfg(target_os = "macos")]
    let _ = report_fd;
    match p.confine {
        ChildConfine::None => {}
        #[cfg(target_os = "linux")]
        ChildConfine::Bwrap { .. } => {
            // bwrap reads the program and its mounts' descriptors from these numbers; dup2
            // leaves them open across execve (bwrap closes each once it has used it). Every
            // target is below every source still to be moved and below `report_fd`.
            or_fail(
                call::dup2(FD_CONFINE, COMMAND_SECCOMP_FD),
                report_fd,
                Stage::Seccomp,
            );
            for i in 0..p.passed().len() {
                let (Some(from), Some(to)) =
                    (fd_at(FD_FIRST_PASSED, i), fd_at(COMMAND_FIRST_PASSED_FD, i))
                else {
                    fail(report_fd, Stage::Prepare, Errno::EMFILE);
                };
                or_fail(call::dup2(from, to), report_fd, Stage::Prepare);
            }
        }
        #[cfg(target_os = "macos")]
        ChildConfine::Never(never, _) => match never {},
        #[cfg(target_os = "linux")]
        ChildConfine::Landlock {
            filter,
            drop_caps,
            user_namespace,
            ..
        } => {
            if let Some(ns) = user_namespace {
                or_fail(
                    super::user_namespace::settle(ns, false),
                    report_fd,
                    Stage::UserNamespace,
                );
            }
            if let Err((stage, e)) = apply_layers(FD_CONFINE, filter, drop_caps) {
                fail(report_fd, stage, e);
            }
        }
    }
}

/// The layers a confined process applies to itself, in order: every capability dropped (when
/// `drop_caps`), no new privileges, the Landlock ruleset on `ruleset`, the seccomp filter. The
/// command's (Landlock and the namespace backend) and the namespace backend's bridge's; the
/// stage of the step that failed.
#[cfg(target_os = "linux")]
pub(super) fn apply_layers(
    ruleset: c_int,
    filter: &[libc::sock_filter],
    drop_caps: bool,
) -> Result<(), (Stage, Errno)> {
    if drop_caps {
        caps::drop_all().map_err(|e| (Stage::Capabilities, e))?;
    }
    call::prctl(libc::PR_SET_NO_NEW_PRIVS, 1).map_err(|e| (Stage::NoNewPrivs, e))?;
    call::landlock_restrict_self(ruleset).map_err(|e| (Stage::Landlock, e))?;
    call::seccomp_set_filter(filter).map_err(|e| (Stage::Seccomp, e))
}

/// The command leads a session and process group of its own (`setsid`), which the shim kills
/// as one — a fork bomb's whole group in one call, however fast it forks — and whose
/// scheduling the kernel keeps apart from the shim's where it groups tasks by session
/// (autogroup): a command's tree cannot starve the shim that must end it. Then it dies with
/// its shim: `PR_SET_PDEATHSIG`, and a check that the shim did not die before it was set (the
/// parent would then be another process already).
#[cfg(target_os = "linux")]
fn lifetime(report_fd: c_int, shim_pid: libc::pid_t) {
    or_fail(call::setsid(), report_fd, Stage::Setsid);
    let deathsig = libc::c_ulong::from(libc::SIGKILL.unsigned_abs());
    or_fail(
        call::prctl(libc::PR_SET_PDEATHSIG, deathsig),
        report_fd,
        Stage::DeathSignal,
    );
    if call::getppid() != shim_pid {
        fail(report_fd, Stage::DeathSignal, Errno::ESRCH);
    }
}

/// macOS has no death signal: the command instead leads a session and process group of its
/// own (`setsid`), which the shim signals as one (`kill(-pgid)`) without signalling itself.
/// A shim killed by SIGKILL (it ignores the other signals) leaves the command running: nothing
/// on macOS ties a process's life to its parent's.
#[cfg(target_os = "macos")]
fn lifetime(report_fd: c_int, shim_pid: libc::pid_t) {
    let _ = shim_pid;
    or_fail(call::setsid(), report_fd, Stage::Setsid);
}

fn is_search_miss(errno: Errno) -> bool {
    matches!(
        errno,
        Errno::ENOENT | Errno::ENOTDIR | Errno::ELOOP | Errno::ENAMETOOLONG | Errno::EACCES
    )
}

/// `confine-helper enter`'s one step before `execvp`: the process cap counted in bwrap's user
/// namespace (`processes`, when there is one), no new privileges, the Landlock ruleset on
/// descriptor `ruleset` applied to this process, every descriptor above stdio marked
/// close-on-exec, and `SIGPIPE` back to its default (the Rust runtime ignores it, and an
/// ignored disposition would survive `execve` into the command).
#[cfg(target_os = "linux")]
pub(crate) fn enter_landlock(ruleset: RawFd, processes: Option<u64>) -> std::io::Result<()> {
    if let Some(processes) = processes {
        call::setrlimit(libc::RLIMIT_NPROC, processes, processes)?;
    }
    call::prctl(libc::PR_SET_NO_NEW_PRIVS, 1)?;
    call::landlock_restrict_self(ruleset)?;
    call::close_range(
        FIRST_NON_STDIO_FD,
        u32::MAX,
        c_int::try_from(libc::CLOSE_RANGE_CLOEXEC).map_err(|_| Errno::EINVAL)?,
    )?;
    call::set_disposition(libc::SIGPIPE, libc::SIG_DFL)?;
    Ok(())
}
