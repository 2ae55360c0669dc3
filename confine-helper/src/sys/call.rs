//! The raw system calls of the forked processes and of the helper's own setup, one safe
//! function each: a single `unsafe` call under its own `// SAFETY:` line, its return code
//! turned into a `Result` by [`check`] (−1 with `errno` set is a failure). Reading `errno`
//! allocates nothing, and neither does anything here, so these run between fork and exec.
//!
//! Descriptors are raw numbers on purpose: in the shim and the command the descriptor table is
//! the process's own, laid out by the shim, and no Rust value owns those numbers.

#[cfg(target_os = "linux")]
use std::ffi::c_uint;
#[cfg(target_os = "linux")]
use std::ffi::c_ulong;
use std::ffi::{CStr, CString, c_char, c_int};

use nix::errno::{Errno, ErrnoSentinel};
use nix::libc;

pub(crate) type SysResult<T> = Result<T, Errno>;

/// A system call's return code as a result: the sentinel (−1) means `errno` says why.
pub(super) fn check<T: ErrnoSentinel + PartialEq<T>>(rc: T) -> SysResult<T> {
    Errno::result(rc)
}

/// A byte count a successful call returned (never negative once [`check`]ed).
pub(super) fn count(n: isize) -> usize {
    usize::try_from(n).unwrap_or(0)
}

/// A null-terminated array of pointers into owned C strings, built before fork.
#[derive(Debug)]
pub(crate) struct CStringArray {
    _strings: Vec<CString>,
    pointers: Vec<*const c_char>,
}

impl CStringArray {
    pub(crate) fn new(strings: Vec<CString>) -> Self {
        let mut pointers: Vec<*const c_char> = strings.iter().map(|s| s.as_ptr()).collect();
        pointers.push(std::ptr::null());
        CStringArray {
            _strings: strings,
            pointers,
        }
    }
}

/// Forks the calling process.
///
/// # Safety
/// The caller is single-threaded, and the child runs only async-signal-safe code on data built
/// before the fork, then execs or `_exit`s.
pub(super) unsafe fn fork() -> SysResult<libc::pid_t> {
    // SAFETY: the caller upholds this function's contract.
    check(unsafe { libc::fork() })
}

/// The stack of a child started by [`clone_vfork`]: anonymous memory of its own, with an
/// inaccessible page below it, so that an overflow faults instead of writing into the memory
/// the child shares with its parent.
#[cfg(target_os = "linux")]
pub(super) struct ChildStack(*mut libc::c_void);

#[cfg(target_os = "linux")]
impl ChildStack {
    /// The guard: the smallest page (`mprotect` covers the whole page it starts in).
    const GUARD: usize = 4096;
    /// Far more than the few frames between the clone and `execve`, and the guard.
    const LEN: usize = 256 * 1024 + Self::GUARD;

    pub(super) fn new() -> SysResult<ChildStack> {
        let (rw, private) = (libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE);
        let flags = private | libc::MAP_ANONYMOUS | libc::MAP_STACK;
        // SAFETY: a new private anonymous mapping; no existing memory is named.
        let stack = ChildStack(check(unsafe {
            libc::mmap(std::ptr::null_mut(), Self::LEN, rw, flags, -1, 0)
        })?);
        // SAFETY: the lowest page of the mapping just made, which nothing uses yet.
        check(unsafe { libc::mprotect(stack.0, Self::GUARD, libc::PROT_NONE) })?;
        Ok(stack)
    }
}

#[cfg(target_os = "linux")]
impl Drop for ChildStack {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, used by no child once `clone_vfork` returned.
        let _ = unsafe { libc::munmap(self.0, Self::LEN) };
    }
}

/// Starts a child that runs `body` (which executes or exits; a return ends the child) on
/// `stack` in this process's memory, and returns its pid once the child has called `execve`
/// or ended (`CLONE_VM | CLONE_VFORK`: no page table is copied, which is most of a fork's
/// cost). With `new_user`, the child starts in a user namespace of its own (`CLONE_NEWUSER`),
/// which a process sharing its memory could not make with `unshare`.
///
/// # Safety
/// As for [`fork`], and `body` writes nothing this process reads: until it executes, the child
/// runs in this process's memory while this process waits.
#[cfg(target_os = "linux")]
pub(super) unsafe fn clone_vfork<F: FnOnce()>(
    stack: &ChildStack,
    new_user: bool,
    body: F,
) -> SysResult<libc::pid_t> {
    extern "C" fn start<F: FnOnce()>(slot: *mut libc::c_void) -> c_int {
        // SAFETY: `slot` is the `Option<F>` below, alive in the waiting parent's frame.
        if let Some(body) = unsafe { &mut *slot.cast::<Option<F>>() }.take() {
            body();
        }
        exit(1)
    }
    let mut slot = Some(body);
    let signal = c_int::try_from(libc::SIGCHLD.unsigned_abs()).map_err(|_| Errno::EINVAL)?;
    let namespace = if new_user { libc::CLONE_NEWUSER } else { 0 };
    let flags = libc::CLONE_VM | libc::CLONE_VFORK | namespace | signal;
    // The end of the mapping: page-aligned, so aligned as every ABI needs.
    let top = stack
        .0
        .cast::<u8>()
        .wrapping_add(ChildStack::LEN)
        .cast::<libc::c_void>();
    // SAFETY: `top` is the top of a live mapping the child alone uses; `slot` outlives the
    // child's use of it, since this call returns only once the child has executed or ended;
    // the caller upholds the rest.
    check(unsafe { libc::clone(start::<F>, top, flags, (&raw mut slot).cast()) })
}

pub(super) fn exit(code: c_int) -> ! {
    // SAFETY: `_exit` is async-signal-safe and ends the process without running atexit handlers
    // or destructors of state copied from the parent.
    unsafe { libc::_exit(code) }
}

pub(super) fn setsid() -> SysResult<()> {
    // SAFETY: setsid takes no arguments and touches no memory.
    check(unsafe { libc::setsid() }).map(drop)
}

#[cfg(target_os = "linux")]
/// `prctl` with one integer argument (every option the helper uses takes no pointer).
pub(super) fn prctl(option: c_int, arg: c_ulong) -> SysResult<()> {
    // SAFETY: integer arguments only; the unused ones are zero as the kernel requires.
    check(unsafe { libc::prctl(option, arg, 0 as c_ulong, 0 as c_ulong, 0 as c_ulong) }).map(drop)
}

pub(super) fn getpid() -> libc::pid_t {
    // SAFETY: getpid cannot fail and touches no memory.
    unsafe { libc::getpid() }
}

#[cfg(target_os = "linux")]
pub(super) fn getppid() -> libc::pid_t {
    // SAFETY: getppid cannot fail and touches no memory.
    unsafe { libc::getppid() }
}

/// A close-on-exec duplicate of `fd` at the lowest free number not below `min`.
pub(super) fn dup_cloexec_above(fd: c_int, min: c_int) -> SysResult<c_int> {
    // SAFETY: F_DUPFD_CLOEXEC only changes this process's descriptor table.
    check(unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, min) })
}

// The calls only macOS has, and its versions of the calls it lacks, made of others.
#[cfg(target_os = "macos")]
#[path = "macos_call.rs"]
pub(super) mod macos;
#[cfg(target_os = "macos")]
pub(super) use macos::{close_range, dup3_cloexec, pipe2_cloexec};

#[cfg(target_os = "linux")]
pub(super) fn dup3_cloexec(old: c_int, new: c_int) -> SysResult<()> {
    // SAFETY: dup3 only changes this process's descriptor table.
    check(unsafe { libc::dup3(old, new, libc::O_CLOEXEC) }).map(drop)
}

/// Duplicates `old` onto `new` without close-on-exec: `new` stays open across `execve`.
pub(super) fn dup2(old: c_int, new: c_int) -> SysResult<()> {
    // SAFETY: dup2 only changes this process's descriptor table.
    check(unsafe { libc::dup2(old, new) }).map(drop)
}

pub(super) fn close(fd: c_int) -> SysResult<()> {
    // SAFETY: closing a number this process owns; callers never use it afterwards.
    check(unsafe { libc::close(fd) }).map(drop)
}

#[cfg(target_os = "linux")]
pub(super) fn close_range(first: c_uint, last: c_uint, flags: c_int) -> SysResult<()> {
    // SAFETY: closes (or flags) descriptors this process owns; none is used afterwards.
    check(unsafe { libc::close_range(first, last, flags) }).map(drop)
}

#[cfg(target_os = "linux")]
pub(super) fn pipe2_cloexec() -> SysResult<[c_int; 2]> {
    let mut ends = [0 as c_int; 2];
    // SAFETY: pipe2 writes two descriptor numbers into the live two-element array.
    check(unsafe { libc::pipe2(ends.as_mut_ptr(), libc::O_CLOEXEC) })?;
    Ok(ends)
}

pub(super) fn read(fd: c_int, buf: &mut [u8]) -> SysResult<usize> {
    // SAFETY: the kernel writes at most `buf.len()` bytes into the live buffer.
    check(unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) }).map(count)
}

pub(super) fn write(fd: c_int, bytes: &[u8]) -> SysResult<usize> {
    // SAFETY: the kernel reads `bytes.len()` bytes from the live slice.
    check(unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) }).map(count)
}

/// Reads until `buf` is full or end of file; returns the byte count. Retries on EINTR.
pub(super) fn read_full(fd: c_int, buf: &mut [u8]) -> usize {
    let mut got = 0;
    while let Some(rest) = buf.get_mut(got..).filter(|rest| !rest.is_empty()) {
        match read(fd, rest) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(Errno::EINTR) => {}
            Err(_) => break,
        }
    }
    got
}

pub(super) fn open(path: &CStr, flags: c_int) -> SysResult<c_int> {
    // SAFETY: `path` is NUL-terminated; open takes no other pointer.
    check(unsafe { libc::open(path.as_ptr(), flags) })
}

#[cfg(target_os = "linux")]
pub(super) fn openat(dir: c_int, path: &CStr, flags: c_int) -> SysResult<c_int> {
    // SAFETY: `path` is NUL-terminated; openat takes no other pointer.
    check(unsafe { libc::openat(dir, path.as_ptr(), flags) })
}

#[cfg(target_os = "linux")]
/// Directory entries of `dir` as `linux_dirent64` records into `buf`; 0 at the end.
pub(super) fn getdents64(dir: c_int, buf: &mut [u8]) -> SysResult<usize> {
    // SAFETY: the kernel writes at most `buf.len()` bytes into the live buffer.
    let n =
        check(unsafe { libc::syscall(libc::SYS_getdents64, dir, buf.as_mut_ptr(), buf.len()) })?;
    Ok(usize::try_from(n).unwrap_or(0))
}

pub(super) fn kill(pid: libc::pid_t, sig: c_int) -> SysResult<()> {
    // SAFETY: kill takes numbers only.
    check(unsafe { libc::kill(pid, sig) }).map(drop)
}

/// The signal set holding exactly `signals`.
pub(super) fn sigset(signals: &[c_int]) -> libc::sigset_t {
    // SAFETY: all-zero is a valid sigset_t, which sigemptyset then initializes.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: sigemptyset initializes the live set.
    unsafe { libc::sigemptyset(&mut set) };
    for sig in signals {
        // SAFETY: sigaddset changes the live, initialized set.
        unsafe { libc::sigaddset(&mut set, *sig) };
    }
    set
}

pub(super) fn sigprocmask(how: c_int, set: &libc::sigset_t) -> SysResult<()> {
    // SAFETY: `set` is an initialized signal set; the old mask is not asked for.
    check(unsafe { libc::sigprocmask(how, set, std::ptr::null_mut()) }).map(drop)
}

#[cfg(target_os = "linux")]
pub(super) fn signalfd(set: &libc::sigset_t) -> SysResult<c_int> {
    // SAFETY: `set` is an initialized signal set; -1 asks for a new descriptor.
    check(unsafe { libc::signalfd(-1, set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK) })
}

/// Sets `sig`'s disposition to `SIG_DFL` or `SIG_IGN` (never a handler).
pub(super) fn set_disposition(sig: c_int, disposition: libc::sighandler_t) -> SysResult<()> {
    // SAFETY: SIG_DFL and SIG_IGN install no code to run.
    check(unsafe { libc::signal(sig, disposition) }).map(drop)
}

pub(super) fn poll(fds: &mut [libc::pollfd], timeout_ms: c_int) -> SysResult<usize> {
    let len = libc::nfds_t::try_from(fds.len()).map_err(|_| Errno::EINVAL)?;
    // SAFETY: `fds` is a live slice of `len` pollfd structs.
    let n = check(unsafe { libc::poll(fds.as_mut_ptr(), len, timeout_ms) })?;
    Ok(usize::try_from(n).unwrap_or(0))
}

/// `wait4` for any child: its pid (0 with WNOHANG when none has ended), wait status and usage.
pub(super) fn wait4(flags: c_int) -> SysResult<(libc::pid_t, c_int, libc::rusage)> {
    let mut status: c_int = 0;
    // SAFETY: all-zero is a valid rusage.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: out-pointers to live stack values.
    let pid = check(unsafe { libc::wait4(-1, &mut status, flags, &mut usage) })?;
    Ok((pid, status, usage))
}

/// Waits for the child `pid` to end, again when a signal interrupts the wait.
pub(super) fn wait4_pid(pid: libc::pid_t) -> SysResult<(libc::pid_t, c_int, libc::rusage)> {
    let mut status: c_int = 0;
    // SAFETY: all-zero is a valid rusage.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: out-pointers to live stack values.
        match check(unsafe { libc::wait4(pid, &mut status, 0, &mut usage) }) {
            Err(Errno::EINTR) => {}
            ended => return ended.map(|pid| (pid, status, usage)),
        }
    }
}

/// The type of a resource number of `setrlimit` (glibc's `__rlimit_resource_t`, else `int`).
#[cfg(target_os = "linux")]
pub(crate) type Resource = u32;
#[cfg(target_os = "macos")]
pub(crate) type Resource = c_int;

/// Sets this process's `resource` limit: `soft` (what binds) and `hard` (how far it may be
/// raised again).
pub(super) fn setrlimit(resource: Resource, soft: u64, hard: u64) -> SysResult<()> {
    let limit = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: `limit` is a live rlimit struct.
    check(unsafe { libc::setrlimit(resource, &limit) }).map(drop)
}

pub(super) fn chdir(path: &CStr) -> SysResult<()> {
    // SAFETY: `path` is NUL-terminated.
    check(unsafe { libc::chdir(path.as_ptr()) }).map(drop)
}

#[cfg(target_os = "linux")]
pub(super) fn landlock_restrict_self(ruleset: c_int) -> SysResult<()> {
    // SAFETY: a descriptor number and zero flags; a wrong number fails.
    check(unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) }).map(drop)
}

#[cfg(target_os = "linux")]
/// The running kernel's Landlock ABI version, or 0 without Landlock.
pub(crate) fn landlock_abi() -> u32 {
    const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
    // SAFETY: the version query takes no attribute pointer and returns a number.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(rc).unwrap_or(0)
}

#[cfg(target_os = "linux")]
/// Loads the BPF program `filter` as this thread's seccomp filter.
pub(super) fn seccomp_set_filter(filter: &[libc::sock_filter]) -> SysResult<()> {
    let program = libc::sock_fprog {
        len: u16::try_from(filter.len()).map_err(|_| Errno::EINVAL)?,
        filter: filter.as_ptr().cast_mut().cast(),
    };
    // SAFETY: `program` points at the live slice of `len` instructions, libc's own
    // `sock_filter`s; the kernel copies it and does not write through it.
    check(unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0,
            &program,
        )
    })
    .map(drop)
}

#[cfg(target_os = "linux")]
/// Loads `filter` as this thread's seccomp filter with a listener for its `USER_NOTIF`
/// answers; returns the listener's descriptor (close-on-exec, as the kernel makes it).
pub(super) fn seccomp_new_listener(filter: &[libc::sock_filter]) -> SysResult<c_int> {
    let program = libc::sock_fprog {
        len: u16::try_from(filter.len()).map_err(|_| Errno::EINVAL)?,
        filter: filter.as_ptr().cast_mut().cast(),
    };
    // SAFETY: as in `seccomp_set_filter`; the kernel copies the program and returns a number.
    let fd = check(unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &program,
        )
    })?;
    c_int::try_from(fd).map_err(|_| Errno::EBADF)
}

#[cfg(target_os = "linux")]
/// Waits for the next notification on a seccomp listener.
pub(super) fn notif_recv(listener: c_int) -> SysResult<libc::seccomp_notif> {
    // SAFETY: an all-zero seccomp_notif is what the kernel requires as input.
    let mut notif: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: the kernel writes one seccomp_notif into the live value.
    check(unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_RECV, &mut notif) })?;
    Ok(notif)
}

#[cfg(target_os = "linux")]
/// Answers notification `id`: the system call returns 0, or fails with `errno`.
pub(super) fn notif_send(listener: c_int, id: u64, errno: Option<Errno>) -> SysResult<()> {
    let mut resp = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: errno.map_or(0, |e| -(e as i32)),
        flags: 0,
    };
    // SAFETY: the kernel reads one seccomp_notif_resp from the live value.
    check(unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SEND, &mut resp) }).map(drop)
}

#[cfg(target_os = "linux")]
/// Whether notification `id` is still pending: its task is alive and still in the call.
pub(super) fn notif_id_valid(listener: c_int, id: u64) -> SysResult<()> {
    let mut id = id;
    // SAFETY: the kernel reads one u64 from the live value.
    check(unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &mut id) }).map(drop)
}

#[cfg(target_os = "linux")]
/// `pidfd_open`'s flag for a pidfd of one thread (Linux 6.9): its value is `O_EXCL`'s.
pub(super) const PIDFD_THREAD: c_uint = libc::O_EXCL.unsigned_abs();

#[cfg(target_os = "linux")]
pub(super) fn pidfd_open(pid: libc::pid_t, flags: c_uint) -> SysResult<c_int> {
    // SAFETY: numbers only.
    let fd = check(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, flags) })?;
    c_int::try_from(fd).map_err(|_| Errno::EBADF)
}

#[cfg(target_os = "linux")]
/// A close-on-exec duplicate, in this process, of descriptor `fd` of the process `pidfd` names.
pub(super) fn pidfd_getfd(pidfd: c_int, fd: c_int) -> SysResult<c_int> {
    // SAFETY: numbers only.
    let got = check(unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd, fd, 0) })?;
    c_int::try_from(got).map_err(|_| Errno::EBADF)
}

#[cfg(target_os = "linux")]
/// Reads `buf.len()` bytes at `address` in process `pid`; a short read is `EFAULT`.
pub(super) fn read_process_memory(pid: libc::pid_t, address: u64, buf: &mut [u8]) -> SysResult<()> {
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: usize::try_from(address).map_err(|_| Errno::EFAULT)? as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: the kernel writes at most `buf.len()` bytes into the live local buffer; the
    // remote address is only read in the other process, where the kernel checks it.
    let n = check(unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) })?;
    if count(n) == buf.len() {
        Ok(())
    } else {
        Err(Errno::EFAULT)
    }
}

/// Tries `execve`; returns only when it failed, with why.
pub(super) fn execve(program: &CStr, argv: &CStringArray, envp: &CStringArray) -> Errno {
    // SAFETY: `program` is NUL-terminated; `argv` and `envp` are null-terminated arrays of
    // pointers to NUL-terminated strings they own.
    unsafe {
        libc::execve(
            program.as_ptr(),
            argv.pointers.as_ptr(),
            envp.pointers.as_ptr(),
        )
    };
    Errno::last()
}

#[cfg(target_os = "linux")]
/// `capget`/`capset`'s header and data for version 3 (two 32-bit halves).
pub(super) const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[cfg(target_os = "linux")]
#[repr(C)]
pub(super) struct CapHeader {
    pub(super) version: u32,
    pub(super) pid: c_int,
}

#[cfg(target_os = "linux")]
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(super) struct CapData {
    pub(super) effective: u32,
    pub(super) permitted: u32,
    pub(super) inheritable: u32,
}

#[cfg(target_os = "linux")]
pub(super) fn capget(header: &CapHeader) -> SysResult<[CapData; 2]> {
    let mut data = [CapData::default(); 2];
    // SAFETY: capget writes two CapData structs (version 3) into the live array.
    check(unsafe { libc::syscall(libc::SYS_capget, header, data.as_mut_ptr()) })?;
    Ok(data)
}

#[cfg(target_os = "linux")]
pub(super) fn capset(header: &CapHeader, data: &[CapData; 2]) -> SysResult<()> {
    // SAFETY: capset reads the header and two CapData structs (version 3) from live values.
    check(unsafe { libc::syscall(libc::SYS_capset, header, data.as_ptr()) }).map(drop)
}
