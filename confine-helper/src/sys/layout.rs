//! What the shim and the command share: the data built for them before the first fork
//! ([`Prepared`]), the descriptor numbers the shim lays out, and how a failed step is
//! reported (a [`Record`] on a pipe, then `_exit`).

use std::ffi::{CString, c_int};
use std::os::fd::RawFd;

use confine_protocol::Stage;
use nix::errno::Errno;

use super::call::{self, CStringArray, Resource};
#[cfg(target_os = "linux")]
use crate::connects::Rules;
use crate::record::Record;

/// Order byte on the ctl pipe: SIGTERM the tree.
pub(crate) const CTL_TERMINATE: u8 = b'T';
/// Order byte on the ctl pipe: SIGKILL the tree, reap it, report.
pub(crate) const CTL_KILL: u8 = b'K';

/// The signals the shim ignores (it must outlive a `SIGTERM` sent to the command's group), with
/// `SIGPIPE`, which the helper ignores: on Linux the only ones a command could inherit ignored
/// (the helper set back every other at its start, `reset_inherited_signals`), so the only ones
/// the command sets back to their default before `execve`.
pub(super) const SHIM_IGNORED: [c_int; 4] = [
    nix::libc::SIGTERM,
    nix::libc::SIGINT,
    nix::libc::SIGHUP,
    nix::libc::SIGPIPE,
];
/// stdin, stdout and stderr: descriptors 0, 1 and 2.
pub(super) const STDIO_FDS: c_int = 3;
/// Where the shim places its descriptors before it closes every other one.
pub(super) const FD_STATUS: c_int = 3;
pub(super) const FD_CTL: c_int = 4;
/// The confinement descriptor (seccomp program or Landlock ruleset), close-on-exec.
pub(super) const FD_CONFINE: c_int = 5;
/// Where the shim keeps the descriptors bwrap's mounts are made from, in order.
pub(crate) const FD_FIRST_PASSED: c_int = 6;
/// Where the command finds the seccomp program it hands to bwrap (`--seccomp 3`).
#[cfg(target_os = "linux")]
pub(crate) const COMMAND_SECCOMP_FD: c_int = 3;
/// Where the command (bwrap) finds the descriptors of its mounts (`--bind-fd 4 …`), in order.
#[cfg(target_os = "linux")]
pub(crate) const COMMAND_FIRST_PASSED_FD: c_int = 4;
/// The most descriptors one command is handed for bwrap's mounts.
pub(crate) const MAX_PASSED_FDS: usize = 300;
/// Duplicates are parked at or above this number (and above every passed descriptor's final
/// number) while the final layout is built.
pub(super) const FD_PARK: c_int = 10;
/// stdin, stdout, stderr, status, ctl, confinement: the descriptors every shim places, in this
/// order in its parking array.
pub(super) const FIXED_FDS: usize = 6;
const MICROS_PER_SECOND: u64 = 1_000_000;
/// `ru_maxrss` is in KiB on Linux, in bytes on macOS.
#[cfg(target_os = "linux")]
const MAX_RSS_PER_KIB: u64 = 1;
#[cfg(target_os = "macos")]
const MAX_RSS_PER_KIB: u64 = 1024;
/// The exit code of a forked process whose setup failed (the record says why).
pub(super) const EXIT_SETUP_FAILED: c_int = 127;

/// Everything the shim and the command need, built before fork.
#[derive(Debug)]
pub(crate) struct Prepared<'a> {
    /// Paths to try with `execve`, in `PATH` order (one entry when argv[0] contains a slash).
    pub(crate) programs: Vec<CString>,
    pub(crate) argv: CStringArray,
    pub(crate) envp: CStringArray,
    pub(crate) cwd: CString,
    /// The command's stdin, stdout, stderr (may repeat a descriptor).
    pub(crate) stdio: [RawFd; 3],
    /// Write end of the status pipe (shim → helper).
    pub(crate) status_wr: RawFd,
    /// Read end of the ctl pipe (helper → shim).
    pub(crate) ctl_rd: RawFd,
    pub(crate) confine: ChildConfine<'a>,
    /// Descriptors the command (bwrap) mounts from, at most [`MAX_PASSED_FDS`]; it finds them
    /// at [`COMMAND_FIRST_PASSED_FD`] on, in this order.
    pub(crate) passed: Vec<RawFd>,
    /// `(resource, limit)` pairs set as both soft and hard limits.
    pub(crate) rlimits: Vec<(Resource, u64)>,
    /// `cgroup.procs` of the command's own cgroups (its caps, as root): the shim joins them
    /// before it starts the command.
    pub(crate) cgroup_procs: Vec<RawFd>,
    /// The command hands its `connect` calls to the shim (`unix_sockets`, the allow-list
    /// under Landlock).
    #[cfg(target_os = "linux")]
    pub(crate) connects: Option<ShimConnects<'a>>,
    /// The namespace backend's sandbox, which the shim is born in and builds.
    #[cfg(target_os = "linux")]
    pub(crate) sandbox: Option<&'a super::Sandbox>,
}

/// What connect supervision needs in the shim and the command: the filter that hands
/// `connect` to the shim, which the command loads before anything else confines it, and the
/// rules the shim judges by.
#[cfg(target_os = "linux")]
#[derive(Debug, Clone, Copy)]
pub(crate) struct ShimConnects<'a> {
    pub(crate) notify: &'a [nix::libc::sock_filter],
    pub(crate) rules: &'a Rules,
    /// The first passed descriptor is the requester's proxy socket, which the shim keeps (the
    /// command, not bwrap, is executed: nothing else is passed).
    pub(crate) proxy: bool,
}

impl Prepared<'_> {
    /// The passed descriptors the shim places (never more than [`MAX_PASSED_FDS`]).
    pub(super) fn passed(&self) -> &[RawFd] {
        self.passed.get(..MAX_PASSED_FDS).unwrap_or(&self.passed)
    }
}

/// What the command applies to itself before `execve`. On macOS only `None`: there the
/// command is `sandbox-exec`, which confines itself before it executes the target.
#[derive(Debug)]
pub(crate) enum ChildConfine<'a> {
    None,
    /// The command is bwrap; it reads its seccomp program from this descriptor.
    #[cfg(target_os = "linux")]
    Bwrap {
        seccomp_fd: RawFd,
    },
    /// Drop capabilities (when `drop_caps`), set no_new_privs, enter the ruleset, load the
    /// filter.
    #[cfg(target_os = "linux")]
    Landlock {
        ruleset_fd: RawFd,
        filter: &'a [nix::libc::sock_filter],
        drop_caps: bool,
        /// The user namespace the command counts its process cap in (a helper that is not
        /// root), made before anything else confines it.
        user_namespace: Option<&'a super::UserNamespace>,
    },
    /// No value: it only carries the lifetime the Linux variants borrow with.
    #[cfg(target_os = "macos")]
    #[expect(dead_code, reason = "it has no value to make")]
    Never(std::convert::Infallible, std::marker::PhantomData<&'a ()>),
}

impl ChildConfine<'_> {
    /// The user namespace the command is started in, if any.
    #[cfg(target_os = "linux")]
    pub(super) fn user_namespace(&self) -> Option<&super::UserNamespace> {
        match self {
            ChildConfine::Landlock { user_namespace, .. } => *user_namespace,
            ChildConfine::None | ChildConfine::Bwrap { .. } => None,
        }
    }

    pub(super) fn fd(&self) -> Option<RawFd> {
        match self {
            ChildConfine::None => None,
            #[cfg(target_os = "linux")]
            ChildConfine::Bwrap { seccomp_fd } => Some(*seccomp_fd),
            #[cfg(target_os = "linux")]
            ChildConfine::Landlock { ruleset_fd, .. } => Some(*ruleset_fd),
            #[cfg(target_os = "macos")]
            ChildConfine::Never(never, _) => match *never {},
        }
    }
}

/// Descriptor number `base + offset`, if it is one.
pub(super) fn fd_at(base: c_int, offset: usize) -> Option<c_int> {
    c_int::try_from(offset)
        .ok()
        .and_then(|o| base.checked_add(o))
}

/// Writes one record with one `write`; a report on a pipe that may be gone, so failure is
/// ignored.
pub(super) fn write_record(fd: c_int, record: Record) {
    let _ = call::write(fd, &record.encode());
}

/// Reports the failed `stage` with `errno` on `fd` and ends the calling (forked) process.
pub(super) fn fail(fd: c_int, stage: Stage, errno: Errno) -> ! {
    write_record(
        fd,
        Record::StageFailed {
            stage: stage.index(),
            errno: errno as i32,
        },
    );
    call::exit(EXIT_SETUP_FAILED)
}

/// The value of `result`, or the end of this forked process with `stage` reported on `fd`.
pub(super) fn or_fail<T>(result: Result<T, Errno>, fd: c_int, stage: Stage) -> T {
    match result {
        Ok(value) => value,
        Err(errno) => fail(fd, stage, errno),
    }
}

/// Reports the main process's end, if it was reaped, and ends the shim.
pub(super) fn finish(status_fd: c_int, main_status: Option<(c_int, nix::libc::rusage)>) -> ! {
    if let Some((status, usage)) = main_status {
        let micros = |t: nix::libc::timeval| {
            let seconds = u64::try_from(t.tv_sec).unwrap_or(0);
            let micros = u64::try_from(t.tv_usec).unwrap_or(0);
            seconds
                .saturating_mul(MICROS_PER_SECOND)
                .saturating_add(micros)
        };
        write_record(
            status_fd,
            Record::Exited {
                wait_status: status,
                user_us: micros(usage.ru_utime),
                sys_us: micros(usage.ru_stime),
                max_rss_kib: u64::try_from(usage.ru_maxrss).unwrap_or(0) / MAX_RSS_PER_KIB,
            },
        );
    }
    call::exit(0)
}
