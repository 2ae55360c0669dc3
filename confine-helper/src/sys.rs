//! Every `unsafe` block of the helper lives in this module.
//!
//! The largest part is the code that runs between `fork` and `execve`. The helper forks a
//! *supervisor* ("shim") per command; the shim becomes a session leader and a child subreaper,
//! forks the command, and stays behind as the one process that can find and reap the whole tree,
//! including descendants that called `setsid` and double-forked: when they are orphaned the
//! kernel hands them to the shim, not to init. Everything the shim and the command need is
//! built before the first fork ([`Prepared`]); after it only async-signal-safe system calls run,
//! on stack buffers, and nothing allocates.
//!
//! The shim talks to the helper over two pipes, never through the command's stdio:
//! - `status` (shim → helper): fixed-size [`Record`]s: started, stage failed, exec failed, exited;
//! - `ctl` (helper → shim): one byte per order: `T` terminate the tree, `K` kill it. End of file
//!   on `ctl` (the helper died or dropped the command) kills the tree too.
//!
//! The command reports a failed setup step to the shim over a third, close-on-exec pipe before
//! `execve`; once `execve` succeeds the command holds no descriptor of any of these pipes, so it
//! cannot forge a record.

use std::ffi::{CString, c_char, c_int};
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use nix::libc;

/// Order byte on the ctl pipe: SIGTERM the tree.
pub(crate) const CTL_TERMINATE: u8 = b'T';
/// Order byte on the ctl pipe: SIGKILL the tree, reap it, report.
pub(crate) const CTL_KILL: u8 = b'K';

/// Where the shim places its descriptors before it closes every other one.
const FD_STATUS: c_int = 3;
const FD_CTL: c_int = 4;
/// The confinement descriptor (seccomp program or Landlock ruleset), close-on-exec.
const FD_CONFINE: c_int = 5;
/// Where the shim keeps the descriptors bwrap's mounts are made from, in order.
const FD_FIRST_PASSED: c_int = 6;
/// Where the command finds the seccomp program it hands to bwrap (`--seccomp 3`).
pub(crate) const COMMAND_SECCOMP_FD: c_int = 3;
/// Where the command (bwrap) finds the descriptors of its mounts (`--bind-fd 4 …`), in order.
pub(crate) const COMMAND_FIRST_PASSED_FD: c_int = 4;
/// The most descriptors one command is handed for bwrap's mounts.
pub(crate) const MAX_PASSED_FDS: usize = 300;
/// Duplicates are parked at or above this number (and above every passed descriptor's final
/// number) while the final layout is built.
const FD_PARK: c_int = 10;
/// stdin, stdout, stderr, status, ctl, confinement: the descriptors every shim places.
const FIXED_FDS: usize = 6;

/// A fixed-size message from a shim to the helper. Written with one `write` of
/// [`Record::SIZE`] bytes, below `PIPE_BUF`, so records never interleave or tear.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Record {
    /// `execve` of the command succeeded; this is its pid.
    Started { pid: u32 },
    /// A runner step failed (stage index of `confine_protocol::Stage`).
    StageFailed { stage: u32, errno: i32 },
    /// `execve` of the command itself failed.
    ExecFailed { errno: i32 },
    /// The command's main process ended and its whole tree is gone.
    Exited {
        wait_status: i32,
        user_us: u64,
        sys_us: u64,
        max_rss_kib: u64,
    },
}

impl Record {
    pub(crate) const SIZE: usize = 40;

    fn encode(self) -> [u8; Record::SIZE] {
        let mut out = [0u8; Record::SIZE];
        let (tag, a, b, c, d): (u32, i64, u64, u64, u64) = match self {
            Record::Started { pid } => (1, i64::from(pid), 0, 0, 0),
            Record::StageFailed { stage, errno } => (2, i64::from(stage), errno as u64, 0, 0),
            Record::ExecFailed { errno } => (3, i64::from(errno), 0, 0, 0),
            Record::Exited {
                wait_status,
                user_us,
                sys_us,
                max_rss_kib,
            } => (4, i64::from(wait_status), user_us, sys_us, max_rss_kib),
        };
        out[0..4].copy_from_slice(&tag.to_le_bytes());
        out[8..16].copy_from_slice(&a.to_le_bytes());
        out[16..24].copy_from_slice(&b.to_le_bytes());
        out[24..32].copy_from_slice(&c.to_le_bytes());
        out[32..40].copy_from_slice(&d.to_le_bytes());
        out
    }

    /// Decodes one record; `None` for bytes no shim writes.
    pub(crate) fn decode(raw: &[u8; Record::SIZE]) -> Option<Record> {
        let word = |at: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&raw[at..at + 8]);
            w
        };
        let tag = u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]);
        let a = i64::from_le_bytes(word(8));
        let b = u64::from_le_bytes(word(16));
        match tag {
            1 => Some(Record::Started {
                pid: u32::try_from(a).ok()?,
            }),
            2 => Some(Record::StageFailed {
                stage: u32::try_from(a).ok()?,
                errno: b as i32,
            }),
            3 => Some(Record::ExecFailed {
                errno: i32::try_from(a).ok()?,
            }),
            4 => Some(Record::Exited {
                wait_status: i32::try_from(a).ok()?,
                user_us: b,
                sys_us: u64::from_le_bytes(word(24)),
                max_rss_kib: u64::from_le_bytes(word(32)),
            }),
            _ => None,
        }
    }
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

    fn as_ptr(&self) -> *const *const c_char {
        self.pointers.as_ptr()
    }

    fn programs(&self) -> &[*const c_char] {
        &self.pointers[..self.pointers.len() - 1]
    }
}

/// Everything the shim and the command need, built before fork.
#[derive(Debug)]
pub(crate) struct Prepared {
    /// Paths to try with `execve`, in `PATH` order (one entry when argv[0] contains a slash).
    pub(crate) programs: CStringArray,
    pub(crate) argv: CStringArray,
    pub(crate) envp: CStringArray,
    pub(crate) cwd: CString,
    /// The command's stdin, stdout, stderr (may repeat a descriptor).
    pub(crate) stdio: [RawFd; 3],
    /// Write end of the status pipe (shim → helper).
    pub(crate) status_wr: RawFd,
    /// Read end of the ctl pipe (helper → shim).
    pub(crate) ctl_rd: RawFd,
    pub(crate) confine: ChildConfine,
    /// Descriptors the command (bwrap) mounts from, at most [`MAX_PASSED_FDS`]; it finds them
    /// at [`COMMAND_FIRST_PASSED_FD`] on, in this order.
    pub(crate) passed: Vec<RawFd>,
    /// `(resource, limit)` pairs set as both soft and hard limits.
    pub(crate) rlimits: Vec<(u32, u64)>,
}

/// What the command applies to itself before `execve`.
#[derive(Debug)]
pub(crate) enum ChildConfine {
    None,
    /// The command is bwrap; it reads its seccomp program from this descriptor.
    Bwrap {
        seccomp_fd: RawFd,
    },
    /// Drop capabilities (when `drop_caps`), set no_new_privs, enter the ruleset, load the
    /// filter.
    Landlock {
        ruleset_fd: RawFd,
        filter: *const seccompiler::sock_filter,
        filter_len: u16,
        drop_caps: bool,
    },
}

impl ChildConfine {
    fn fd(&self) -> Option<RawFd> {
        match self {
            ChildConfine::None => None,
            ChildConfine::Bwrap { seccomp_fd } => Some(*seccomp_fd),
            ChildConfine::Landlock { ruleset_fd, .. } => Some(*ruleset_fd),
        }
    }
}

/// Forks the shim for one command. Returns the shim's pid in the helper.
pub(crate) fn fork_shim(prepared: &Prepared) -> io::Result<libc::pid_t> {
    // SAFETY: the helper is single-threaded, so the child inherits a consistent address space;
    // the child only runs `shim_main`, which uses async-signal-safe calls on pre-built data and
    // never returns.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(io::Error::last_os_error()),
        0 => shim_main(prepared),
        pid => Ok(pid),
    }
}

fn errno() -> c_int {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

fn write_record(fd: c_int, record: Record) {
    let bytes = record.encode();
    // SAFETY: `bytes` is a live stack buffer of the length passed.
    unsafe {
        libc::write(fd, bytes.as_ptr().cast(), bytes.len());
    }
}

/// Reports a failed step on `fd` and ends the calling (forked) process.
fn fail(fd: c_int, stage: confine_protocol::Stage) -> ! {
    let err = errno();
    write_record(
        fd,
        Record::StageFailed {
            stage: stage.index(),
            errno: err,
        },
    );
    // SAFETY: `_exit` is async-signal-safe and ends the forked process without running the
    // parent's atexit handlers or destructors.
    unsafe { libc::_exit(127) }
}

fn shim_main(p: &Prepared) -> ! {
    use confine_protocol::Stage;
    let status_fd = p.status_wr;
    // SAFETY: every call below is an async-signal-safe system call on descriptors and buffers
    // owned by this process; nothing allocates or takes a lock.
    unsafe {
        if libc::setsid() == -1 {
            fail(status_fd, Stage::Setsid);
        }
        if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == -1 {
            fail(status_fd, Stage::Supervise);
        }
        // Park every descriptor we keep above the final layout, then lay them out at fixed
        // numbers, so that a source descriptor already sitting at a target number cannot be
        // clobbered by a dup2.
        let passed = &p.passed[..p.passed.len().min(MAX_PASSED_FDS)];
        let park = FD_PARK.max(FD_FIRST_PASSED + passed.len() as c_int);
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
        let sources = fixed.iter().chain(passed);
        for (slot, fd) in parked.iter_mut().zip(sources) {
            *slot = libc::fcntl(*fd, libc::F_DUPFD_CLOEXEC, park);
            if *slot == -1 {
                fail(status_fd, Stage::Stdio);
            }
        }
        let status_fd = FD_STATUS;
        if libc::dup3(parked[3], FD_STATUS, libc::O_CLOEXEC) == -1 {
            fail(parked[3], Stage::Stdio);
        }
        if libc::dup3(parked[4], FD_CTL, libc::O_CLOEXEC) == -1 {
            fail(status_fd, Stage::Stdio);
        }
        if confine_fd.is_some() && libc::dup3(parked[5], FD_CONFINE, libc::O_CLOEXEC) == -1 {
            fail(status_fd, Stage::Prepare);
        }
        for (i, parked_fd) in parked[FIXED_FDS..FIXED_FDS + passed.len()]
            .iter()
            .enumerate()
        {
            if libc::dup3(*parked_fd, FD_FIRST_PASSED + i as c_int, libc::O_CLOEXEC) == -1 {
                fail(status_fd, Stage::Prepare);
            }
        }
        for (target, parked_fd) in parked[..3].iter().enumerate() {
            if libc::dup2(*parked_fd, target as c_int) == -1 {
                fail(status_fd, Stage::Stdio);
            }
        }
        // Without a confinement descriptor, FD_CONFINE itself holds nothing of ours.
        let first_free = if !passed.is_empty() {
            FD_FIRST_PASSED + passed.len() as c_int
        } else if confine_fd.is_some() {
            FD_CONFINE + 1
        } else {
            FD_CONFINE
        };
        if libc::close_range(first_free as u32, u32::MAX, 0) == -1 {
            fail(status_fd, Stage::CloseFds);
        }

        // SIGCHLD arrives through a signalfd; SIGTERM sent to our process group while
        // terminating the tree must not end the shim itself. The command resets both.
        let mut mask: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut mask);
        libc::sigaddset(&mut mask, libc::SIGCHLD);
        if libc::sigprocmask(libc::SIG_BLOCK, &mask, std::ptr::null_mut()) == -1 {
            fail(status_fd, Stage::Signals);
        }
        let sigfd = libc::signalfd(-1, &mask, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
        if sigfd == -1 {
            fail(status_fd, Stage::Signals);
        }
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGPIPE] {
            libc::signal(sig, libc::SIG_IGN);
        }

        let mut exec_pipe = [0 as c_int; 2];
        if libc::pipe2(exec_pipe.as_mut_ptr(), libc::O_CLOEXEC) == -1 {
            fail(status_fd, Stage::Pipe);
        }
        let shim_pid = libc::getpid();
        let child = libc::fork();
        if child == -1 {
            fail(status_fd, Stage::Fork);
        }
        if child == 0 {
            command_main(p, exec_pipe[1], shim_pid);
        }
        libc::close(exec_pipe[1]);
        for fd in 0..3 {
            libc::close(fd);
        }

        // Wait for the command's execve: end of file means it succeeded (the write end was
        // close-on-exec); a record means it did not.
        let mut raw = [0u8; Record::SIZE];
        let got = read_full(exec_pipe[0], &mut raw);
        libc::close(exec_pipe[0]);
        if got == Record::SIZE {
            let mut status = 0;
            libc::waitpid(child, &mut status, 0);
            libc::write(status_fd, raw.as_ptr().cast(), raw.len());
            libc::_exit(0);
        }
        write_record(status_fd, Record::Started { pid: child as u32 });

        supervise(child, sigfd, status_fd)
    }
}

/// Reads until `buf` is full or end of file; returns the byte count.
///
/// # Safety
/// `fd` must be a readable descriptor. Async-signal-safe.
unsafe fn read_full(fd: c_int, buf: &mut [u8]) -> usize {
    let mut got = 0;
    while got < buf.len() {
        // SAFETY: the pointer and length stay inside `buf`.
        let n = unsafe { libc::read(fd, buf[got..].as_mut_ptr().cast(), buf.len() - got) };
        if n > 0 {
            got += n as usize;
        } else if n == 0 || errno() != libc::EINTR {
            break;
        }
    }
    got
}

/// The shim's loop: reap children, obey ctl orders, report the main process's end.
fn supervise(main: libc::pid_t, sigfd: c_int, status_fd: c_int) -> ! {
    let mut main_status: Option<(c_int, libc::rusage)> = None;
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
        ];
        // SAFETY: `fds` is a live array of two pollfd structs.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if n == -1 {
            if errno() == libc::EINTR {
                continue;
            }
            kill_tree(main, &mut main_status);
            finish(status_fd, main_status);
        }
        if fds[1].revents != 0 {
            let mut info = [0u8; 128];
            // SAFETY: draining the signalfd into a stack buffer of its record size.
            while unsafe { libc::read(sigfd, info.as_mut_ptr().cast(), info.len()) } > 0 {}
            reap_ready(main, &mut main_status);
            if main_status.is_some() {
                kill_tree(main, &mut main_status);
                finish(status_fd, main_status);
            }
        }
        if fds[0].revents != 0 {
            let mut order = [0u8; 1];
            // SAFETY: one byte into a one-byte stack buffer.
            let n = unsafe { libc::read(FD_CTL, order.as_mut_ptr().cast(), 1) };
            match (n, order[0]) {
                (1, CTL_TERMINATE) => terminate_tree(),
                (n, _) if n == -1 && errno() == libc::EINTR => {}
                _ => {
                    // `K`, end of file (the helper is gone), or anything unexpected: kill.
                    kill_tree(main, &mut main_status);
                    finish(status_fd, main_status);
                }
            }
        }
    }
}

fn finish(status_fd: c_int, main_status: Option<(c_int, libc::rusage)>) -> ! {
    if let Some((status, usage)) = main_status {
        let micros = |t: libc::timeval| (t.tv_sec as u64) * 1_000_000 + t.tv_usec as u64;
        write_record(
            status_fd,
            Record::Exited {
                wait_status: status,
                user_us: micros(usage.ru_utime),
                sys_us: micros(usage.ru_stime),
                max_rss_kib: usage.ru_maxrss.max(0) as u64,
            },
        );
    }
    // SAFETY: ends the shim without unwinding into state copied from the helper.
    unsafe { libc::_exit(0) }
}

/// Reaps every child that has already ended, remembering the main process's status.
/// Returns false once no child is left.
fn reap_ready(main: libc::pid_t, main_status: &mut Option<(c_int, libc::rusage)>) -> bool {
    reap(main, main_status, libc::WNOHANG)
}

fn reap(main: libc::pid_t, main_status: &mut Option<(c_int, libc::rusage)>, flags: c_int) -> bool {
    let mut flags = flags;
    loop {
        let mut status: c_int = 0;
        // SAFETY: all-zero is a valid rusage.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: out-pointers to live stack values.
        let pid = unsafe { libc::wait4(-1, &mut status, flags, &mut usage) };
        if pid == main {
            *main_status = Some((status, usage));
        }
        match pid {
            -1 if errno() == libc::EINTR => continue,
            -1 => return false,
            0 => return true,
            _ => flags = libc::WNOHANG,
        }
    }
}

/// SIGTERM to the command's process group and to every direct child (orphans that were handed
/// to the shim after escaping the group). A courtesy before the kill, not a guarantee.
fn terminate_tree() {
    // SAFETY: signalling our own process group; the shim ignores SIGTERM.
    unsafe {
        libc::kill(-libc::getpid(), libc::SIGTERM);
    }
    signal_children(libc::SIGTERM);
}

/// SIGKILLs every descendant and reaps it. Killing direct children makes their own children
/// ours (we are their subreaper), so repeating until no child is left reaches the whole tree,
/// however deep, including processes that called setsid or double-forked.
fn kill_tree(main: libc::pid_t, main_status: &mut Option<(c_int, libc::rusage)>) {
    loop {
        signal_children(libc::SIGKILL);
        if !reap(main, main_status, 0) {
            return;
        }
    }
}

/// Sends `sig` to every process whose parent is this process, found by scanning `/proc`.
fn signal_children(sig: c_int) {
    // SAFETY: async-signal-safe calls on stack buffers; every descriptor opened here is closed.
    unsafe {
        let me = libc::getpid();
        let proc_fd = libc::open(
            c"/proc".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if proc_fd == -1 {
            return;
        }
        let mut buf = [0u8; 4096];
        loop {
            let n = libc::syscall(libc::SYS_getdents64, proc_fd, buf.as_mut_ptr(), buf.len());
            if n <= 0 {
                break;
            }
            let mut at = 0usize;
            while at + 19 < n as usize {
                let reclen = u16::from_ne_bytes([buf[at + 16], buf[at + 17]]) as usize;
                if reclen == 0 {
                    break;
                }
                let name = &buf[at + 19..at + reclen];
                let name = &name[..name.iter().position(|b| *b == 0).unwrap_or(name.len())];
                if let Some(pid) = parse_pid(name) {
                    if parent_of(proc_fd, name) == Some(me) {
                        libc::kill(pid, sig);
                    }
                }
                at += reclen;
            }
        }
        libc::close(proc_fd);
    }
}

fn parse_pid(name: &[u8]) -> Option<libc::pid_t> {
    if name.is_empty() || name.len() > 10 {
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
    let mut path = [0u8; 24];
    let suffix = b"/stat\0";
    if name.len() + suffix.len() > path.len() {
        return None;
    }
    path[..name.len()].copy_from_slice(name);
    path[name.len()..name.len() + suffix.len()].copy_from_slice(suffix);
    let mut stat = [0u8; 512];
    // SAFETY: `path` is NUL-terminated; reads go into a stack buffer and the fd is closed.
    let n = unsafe {
        let fd = libc::openat(
            proc_fd,
            path.as_ptr().cast(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd == -1 {
            return None;
        }
        let n = read_full(fd, &mut stat);
        libc::close(fd);
        n
    };
    let stat = &stat[..n];
    let close = stat.iter().rposition(|b| *b == b')')?;
    // ") S PPID ..."
    let rest = stat.get(close + 4..)?;
    let end = rest.iter().position(|b| *b == b' ')?;
    parse_pid(&rest[..end])
}

/// The command: runs in the shim's session and process group, then becomes the target.
fn command_main(p: &Prepared, report_fd: c_int, shim_pid: libc::pid_t) -> ! {
    use confine_protocol::Stage;
    // SAFETY: async-signal-safe system calls on pre-built data only.
    unsafe {
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        if libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) == -1 {
            fail(report_fd, Stage::Signals);
        }
        // Ignored dispositions survive execve; the helper ignores SIGPIPE and the shim others.
        for sig in 1..32 {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) == -1 {
            fail(report_fd, Stage::DeathSignal);
        }
        if libc::getppid() != shim_pid {
            fail(report_fd, Stage::DeathSignal);
        }
        for (resource, value) in &p.rlimits {
            let limit = libc::rlimit {
                rlim_cur: *value,
                rlim_max: *value,
            };
            if libc::setrlimit(*resource, &limit) == -1 {
                fail(report_fd, Stage::Rlimits);
            }
        }
        if libc::chdir(p.cwd.as_ptr()) == -1 {
            fail(report_fd, Stage::Chdir);
        }
        match p.confine {
            ChildConfine::None => {}
            ChildConfine::Bwrap { .. } => {
                // bwrap reads the program and its mounts' descriptors from these numbers; dup2
                // leaves them open across execve (bwrap closes each once it has used it). Every
                // target is below every source still to be moved and below `report_fd`.
                if libc::dup2(FD_CONFINE, COMMAND_SECCOMP_FD) == -1 {
                    fail(report_fd, Stage::Seccomp);
                }
                let passed = p.passed.len().min(MAX_PASSED_FDS) as c_int;
                for i in 0..passed {
                    if libc::dup2(FD_FIRST_PASSED + i, COMMAND_FIRST_PASSED_FD + i) == -1 {
                        fail(report_fd, Stage::Prepare);
                    }
                }
            }
            ChildConfine::Landlock {
                filter,
                filter_len,
                drop_caps,
                ..
            } => {
                if drop_caps {
                    drop_capabilities(report_fd);
                }
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1 {
                    fail(report_fd, Stage::NoNewPrivs);
                }
                if libc::syscall(libc::SYS_landlock_restrict_self, FD_CONFINE, 0) == -1 {
                    fail(report_fd, Stage::Landlock);
                }
                let program = libc::sock_fprog {
                    len: filter_len,
                    filter: filter as *mut libc::sock_filter,
                };
                if libc::syscall(
                    libc::SYS_seccomp,
                    libc::SECCOMP_SET_MODE_FILTER,
                    0,
                    &program,
                ) == -1
                {
                    fail(report_fd, Stage::Seccomp);
                }
            }
        }
        // PATH search as execvp does it: skip entries that do not exist, remember that one was
        // found but not executable, stop at any other error.
        let mut saw_eacces = false;
        let mut last = libc::ENOENT;
        for program in p.programs.programs() {
            libc::execve(*program, p.argv.as_ptr(), p.envp.as_ptr());
            last = errno();
            match last {
                libc::EACCES => saw_eacces = true,
                libc::ENOENT | libc::ENOTDIR | libc::ELOOP | libc::ENAMETOOLONG => {}
                _ => break,
            }
        }
        let errno = if saw_eacces && is_search_miss(last) {
            libc::EACCES
        } else {
            last
        };
        write_record(report_fd, Record::ExecFailed { errno });
        libc::_exit(127)
    }
}

/// Empties the bounding, ambient, inheritable, permitted and effective capability sets, and
/// locks securebits so that executing anything as uid 0 grants nothing back.
///
/// # Safety
/// Runs in the forked command; async-signal-safe system calls only.
unsafe fn drop_capabilities(report_fd: c_int) {
    use confine_protocol::Stage;
    const SECBIT_NOROOT: libc::c_ulong = 1 << 0;
    const SECBIT_NOROOT_LOCKED: libc::c_ulong = 1 << 1;
    const SECBIT_NO_SETUID_FIXUP: libc::c_ulong = 1 << 2;
    const SECBIT_NO_SETUID_FIXUP_LOCKED: libc::c_ulong = 1 << 3;
    const SECBIT_KEEP_CAPS_LOCKED: libc::c_ulong = 1 << 5;
    // SAFETY: prctl and capset with values and stack structs; no memory is shared.
    unsafe {
        for cap in 0..64 {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) == -1 && errno() != libc::EINVAL {
                fail(report_fd, Stage::Capabilities);
            }
        }
        let bits = SECBIT_NOROOT
            | SECBIT_NOROOT_LOCKED
            | SECBIT_NO_SETUID_FIXUP
            | SECBIT_NO_SETUID_FIXUP_LOCKED
            | SECBIT_KEEP_CAPS_LOCKED;
        if libc::prctl(libc::PR_SET_SECUREBITS, bits, 0, 0, 0) == -1 {
            fail(report_fd, Stage::Capabilities);
        }
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        ) == -1
        {
            fail(report_fd, Stage::Capabilities);
        }
        let header = CapHeader {
            version: LINUX_CAPABILITY_VERSION_3,
            pid: 0,
        };
        let data = [CapData::default(); 2];
        if libc::syscall(libc::SYS_capset, &header, data.as_ptr()) == -1 {
            fail(report_fd, Stage::Capabilities);
        }
    }
}

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Whether this process holds any effective capability (it runs as root, or with file caps).
pub(crate) fn holds_capabilities() -> bool {
    let header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: capget writes two CapData structs into the live array.
    let rc = unsafe { libc::syscall(libc::SYS_capget, &header, data.as_mut_ptr()) };
    rc == 0 && data.iter().any(|d| d.effective != 0 || d.permitted != 0)
}

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

/// `confine-helper enter`'s one step before `execvp`: no new privileges, the Landlock ruleset
/// on descriptor `ruleset` applied to this process, every descriptor above stdio marked
/// close-on-exec, and `SIGPIPE` back to its default (the Rust runtime ignores it, and an
/// ignored disposition would survive `execve` into the command).
pub(crate) fn enter_landlock(ruleset: RawFd) -> io::Result<()> {
    nix::sys::prctl::set_no_new_privs()?;
    // SAFETY: landlock_restrict_self takes a descriptor number and flags; a wrong number fails.
    if unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) } == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: close_range only changes descriptor flags of this process.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if rc == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: restoring a default disposition installs no handler.
    unsafe {
        nix::sys::signal::signal(
            nix::sys::signal::SIGPIPE,
            nix::sys::signal::SigHandler::SigDfl,
        )
    }?;
    Ok(())
}

/// Writes `bytes` to descriptor `fd` once, ignoring failure: a report on a pipe that may be gone.
pub(crate) fn write_raw(fd: RawFd, bytes: &[u8]) {
    // SAFETY: write reads `bytes.len()` bytes from a live slice; a wrong descriptor fails.
    let _ = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
}

/// An anonymous, sealed, close-on-exec file holding `bytes`, positioned at its start.
pub(crate) fn sealed_memfd(bytes: &[u8]) -> io::Result<OwnedFd> {
    use nix::sys::memfd::{MFdFlags, memfd_create};
    let fd = memfd_create(
        c"confine-seccomp",
        MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING,
    )?;
    let mut written = 0;
    while written < bytes.len() {
        written += nix::unistd::write(&fd, &bytes[written..])?;
    }
    nix::unistd::lseek(&fd, 0, nix::unistd::Whence::SeekSet)?;
    let seals = libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;
    nix::fcntl::fcntl(
        &fd,
        nix::fcntl::FcntlArg::F_ADD_SEALS(nix::fcntl::SealFlag::from_bits_truncate(seals)),
    )?;
    Ok(fd)
}

/// Creates a fresh 0700 directory for one command under `base` (itself created 0700 and
/// checked to be this user's real directory, not a symlink someone planted).
pub(crate) fn private_temp_dir(base: &std::path::Path) -> io::Result<std::path::PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let me = nix::unistd::geteuid().as_raw();
    match std::fs::DirBuilder::new().mode(0o700).create(base) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = std::fs::symlink_metadata(base)?;
    if !meta.is_dir() || meta.uid() != me || meta.mode() & 0o077 != 0 {
        return Err(io::Error::other(format!(
            "{} is not a private directory of uid {me}",
            base.display()
        )));
    }
    let mut random = [0u8; 8];
    // SAFETY: getrandom fills the live 8-byte buffer.
    if unsafe { libc::getrandom(random.as_mut_ptr().cast(), random.len(), 0) } != 8 {
        return Err(io::Error::last_os_error());
    }
    let dir = base.join(format!("cmd-{:016x}", u64::from_ne_bytes(random)));
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    Ok(dir)
}

fn is_search_miss(errno: c_int) -> bool {
    matches!(
        errno,
        libc::ENOENT | libc::ENOTDIR | libc::ELOOP | libc::ENAMETOOLONG | libc::EACCES
    )
}

/// Closes every descriptor above 2 except `keep`, and makes sure 0..=2 are open so that no
/// descriptor the helper opens later is mistaken for a standard stream.
pub(crate) fn sanitize_fds(keep: RawFd) -> io::Result<()> {
    for fd in 0..3 {
        // SAFETY: F_GETFD only queries the descriptor table.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
            // SAFETY: opening /dev/null onto the lowest free number, which is `fd`.
            let opened = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
            if opened != fd {
                return Err(io::Error::other(format!(
                    "could not reopen standard descriptor {fd} on /dev/null"
                )));
            }
        }
    }
    let ranges: [(u32, u32); 2] = if keep > 2 {
        [(3, keep as u32 - 1), (keep as u32 + 1, u32::MAX)]
    } else {
        [(3, u32::MAX), (1, 0)]
    };
    for (first, last) in ranges {
        // SAFETY: closes descriptors this process owns; none is referenced afterwards.
        if first <= last && unsafe { libc::close_range(first, last, 0) } == -1 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Removes every environment variable. Runs while the helper has one thread.
pub(crate) fn clear_environment() {
    let names: Vec<_> = std::env::vars_os().map(|(name, _)| name).collect();
    for name in names {
        // SAFETY: called from `main` before any other thread exists.
        unsafe { std::env::remove_var(name) };
    }
}

/// Takes ownership of descriptors received via SCM_RIGHTS.
pub(crate) fn own_received(fds: &[RawFd]) -> Vec<OwnedFd> {
    fds.iter()
        // SAFETY: the kernel just installed these descriptors for us; nothing else owns them.
        .map(|fd| unsafe { OwnedFd::from_raw_fd(*fd) })
        .collect()
}

/// Takes ownership of the inherited connection descriptor named on the command line, after
/// checking that it is open and is a socket.
pub(crate) fn inherited_socket(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: F_GETFD and fstat only query the descriptor table; `st` is a live out-value.
    let is_socket = unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fcntl(fd, libc::F_GETFD) == -1 || libc::fstat(fd, &mut st) == -1 {
            return Err(io::Error::last_os_error());
        }
        st.st_mode & libc::S_IFMT == libc::S_IFSOCK
    };
    if !is_socket {
        return Err(io::Error::other("it is not a socket"));
    }
    // SAFETY: the descriptor is open (checked above), was inherited, and nothing else in this
    // process owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `poll(2)` over raw descriptors; EINTR is reported as zero ready.
pub(crate) fn poll(fds: &mut [libc::pollfd], timeout_ms: c_int) -> io::Result<usize> {
    // SAFETY: `fds` is a live slice of pollfd structs of the length passed.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    if n == -1 {
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EINTR) {
            return Ok(0);
        }
        return Err(err);
    }
    Ok(n as usize)
}
