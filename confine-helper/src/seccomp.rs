//! The seccomp filter every confined command runs under, on both Linux backends.
//!
//! The filter is default-allow with a deny list: confinement of files is the backend's job
//! (mount namespace or Landlock); seccomp closes the kernel interfaces that would get around
//! it or reach outside the sandbox. Each rule and why:
//! - `ptrace`, `process_vm_readv/writev`, `pidfd_getfd`: reading or steering other processes of
//!   the same user (agentd, the helper, the user's shell), or taking their descriptors;
//! - `io_uring_*`: performs socket, connect and open operations without the filtered system
//!   calls;
//! - `keyctl`, `add_key`, `request_key`: the kernel keyring holds credentials;
//! - the mount API (`mount`, `umount2`, `open_tree`, `move_mount`, `fsopen`, `fsconfig`,
//!   `fsmount`, `fspick`, `mount_setattr`, `pivot_root`, `chroot`) and `setns`: rearranging the
//!   file system view;
//! - `unshare` and `clone` with `CLONE_NEWUSER`: a nested user namespace grants capabilities
//!   over a fresh namespace and a large kernel surface; `clone3` cannot be inspected (its flags
//!   are in memory), so it answers `ENOSYS`, which makes libc fall back to `clone`;
//! - `ioctl(TIOCSTI)` and `ioctl(TIOCLINUX)`: pushing keystrokes into a terminal, compared on
//!   the low 32 bits the kernel uses (CVE-2019-10063);
//! - `name_to_handle_at`, `open_by_handle_at`: opening a file by its handle bypasses the path
//!   walk, and with it every mount and Landlock rule on the way (the "shocker" escape);
//! - `userfaultfd`, and `ioctl(USERFAULTFD_IOC_NEW)` on `/dev/userfaultfd`: stalling the kernel
//!   on a page fault in the middle of a system call is how kernel races are won;
//! - `memfd_secret`: memory the kernel itself cannot read, a place to hide from inspection;
//! - `socket()`: `AF_UNIX` is denied (pathname and abstract sockets reach D-Bus, docker,
//!   ssh-agent) unless the request lists `unix_sockets`, and then only of the stream and
//!   seqpacket types, whose every `connect` a second filter hands to the shim
//!   ([`connect_notify_program`], `crate::unix_sockets`); with the network denied every other
//!   family is denied; with it allowed — or with `local_binding` or the allow-list's bridge
//!   inside bwrap's own empty network namespace, where only its loopback exists — `AF_INET`,
//!   `AF_INET6` and `AF_NETLINK` remain. `socketpair(AF_UNIX)` stays allowed for `SOCK_STREAM`
//!   and `SOCK_SEQPACKET` only: a datagram pair sends to any named socket given as `sendto`'s
//!   destination;
//! - under Landlock with the allow-list (`tcp_only`), where the command shares the host's
//!   network and its shim lets its `connect` reach only the proxy: `AF_INET`/`AF_INET6` TCP
//!   stream sockets only (a datagram needs no `connect`, nor does SCTP, which associates by
//!   `setsockopt`), and `sendto`/`sendmsg`/`sendmmsg` with `MSG_FASTOPEN` (TCP Fast Open
//!   connects without `connect()`);
//! - `bpf`, `perf_event_open`, `kcmp`, `process_madvise`: kernel surfaces no tool needs, and
//!   the last two reach into other processes;
//! - scheduling and resources of other processes: `sched_setscheduler`, `sched_setparam`,
//!   `sched_setaffinity`, `sched_setattr`, `migrate_pages`, `move_pages` and `prlimit64` only on
//!   the caller itself (pid 0), `setpriority` and `ioprio_set` only on the caller or its own
//!   process group (who 0): a command must not starve or slow the user's editor, agentd or the
//!   helper (`SCHED_IDLE`, `ioprio` idle class, CPU pinning, memory migration);
//! - without an IPC namespace (the Landlock backend), System V IPC (`shm*`, `msg*`, `sem*`)
//!   and POSIX message queues (`mq_*`): they are keyed, not named by path, so Landlock does
//!   not see them, and they reach every process of the same user. Under bwrap the command has
//!   its own IPC namespace and keeps them;
//! - in `read-only` mode, metadata changes (`chmod`, `chown`, `utimes`, xattrs families): Landlock
//!   cannot restrict them, and nothing may change in that mode.
//! - x32 system calls (numbers with bit 30 set) arrive with the x86-64 architecture tag and would
//!   slip past every rule keyed on x86-64 numbers: the process is killed.

use std::collections::BTreeMap;
use std::num::TryFromIntError;

use nix::libc;
use seccompiler::{
    BackendError, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
    SeccompFilter, SeccompRule, sock_filter,
};

/// What varies between filters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Variant {
    /// `AF_INET`, `AF_INET6` and `AF_NETLINK` sockets may be created: the network is allowed,
    /// or the command has its own network namespace and asked for `local_binding`.
    pub(crate) inet_sockets: bool,
    /// With `inet_sockets`: only `AF_INET` and `AF_INET6` stream sockets, and no TCP Fast Open
    /// sends (`MSG_FASTOPEN` connects without `connect()`). For a command that shares the
    /// host's network namespace and whose every `connect` its shim judges (the allow-list under
    /// Landlock): a datagram socket would send anywhere without one.
    pub(crate) tcp_only: bool,
    /// `AF_UNIX` stream and seqpacket sockets may be created: the request lists
    /// `unix_sockets`, and every `connect` goes to the shim ([`connect_notify_program`]).
    pub(crate) unix_sockets: bool,
    pub(crate) read_only: bool,
    /// The command runs in its own IPC namespace (bwrap): SysV IPC and message queues stay.
    pub(crate) ipc_namespace: bool,
}

#[cfg(target_arch = "x86_64")]
mod arch {
    pub(crate) const TARGET: seccompiler::TargetArch = seccompiler::TargetArch::x86_64;
    pub(crate) const AUDIT: u32 = 0xC000_003E;
    /// System call numbers with this bit set are the x32 ABI.
    pub(crate) const X32_BIT: Option<u32> = Some(0x4000_0000);
}

#[cfg(target_arch = "aarch64")]
mod arch {
    pub(crate) const TARGET: seccompiler::TargetArch = seccompiler::TargetArch::aarch64;
    pub(crate) const AUDIT: u32 = 0xC000_00B7;
    pub(crate) const X32_BIT: Option<u32> = None;
}

const TIOCSTI: u64 = 0x5412;
const FS_IOC_SETFLAGS: u64 = 0x4008_6602;
const FS_IOC_SETFLAGS_32: u64 = 0x4004_6602;
const FS_IOC_FSSETXATTR: u64 = 0x401C_5820;
const TIOCLINUX: u64 = 0x541C;
/// `_IO(0xAA, 0x00)`: a userfaultfd from `/dev/userfaultfd`, which root can open.
const USERFAULTFD_IOC_NEW: u64 = 0xAA00;
const IOPRIO_WHO_PROCESS: u64 = 1;
const IOPRIO_WHO_PGRP: u64 = 2;
/// The bits of a socket type that name it (the kernel's `SOCK_TYPE_MASK`).
const SOCK_TYPE_MASK: u64 = 0xF;
/// The socket types `socketpair(AF_UNIX, …)` may make: they reach only each other.
const PAIR_TYPES: [u64; 2] = [libc::SOCK_STREAM as u64, libc::SOCK_SEQPACKET as u64];

/// Why no filter was built: the rule table or the prologue is inconsistent, which the tests rule
/// out. The text is the detail of a `RunnerFailed{seccomp}`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FilterError {
    /// seccompiler refused a condition, a rule or the filter.
    #[error("{0}")]
    Rules(#[from] BackendError),
    #[error("{0}'s number: {1}")]
    SyscallNumber(&'static str, #[source] TryFromIntError),
    #[error("prologue length: {0}")]
    Prologue(#[source] TryFromIntError),
}

/// The filter's rules, by system call number; an empty list denies the call outright.
type Rules = BTreeMap<i64, Vec<SeccompRule>>;

/// A condition on the low 32 bits of argument `arg`, as the kernel passes most of them.
fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, BackendError> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value)
}

/// Builds the filter for `variant`, one rule family after the other (each family's calls are
/// its own: no two families name the same call, but for `ioctl`, which `metadata_rules`
/// extends). Errors only if the rule table itself is inconsistent, which the tests rule out.
pub(crate) fn build(variant: Variant) -> Result<BpfProgram, FilterError> {
    let mut rules = Rules::new();
    always_denied(&mut rules);
    namespace_rules(&mut rules)?;
    ioctl_rules(&mut rules)?;
    socket_family_rules(&mut rules, variant)?;
    other_process_rules(&mut rules)?;
    if !variant.ipc_namespace {
        for nr in ipc_syscalls() {
            rules.insert(nr, vec![]);
        }
    }
    socketpair_rules(&mut rules)?;
    if variant.read_only {
        metadata_rules(&mut rules)?;
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch::TARGET,
    )?;
    let body: BpfProgram = filter.try_into()?;
    let mut program = prologue()?;
    program.extend(body);
    Ok(program)
}

/// The calls denied whatever their arguments, in every variant.
fn always_denied(rules: &mut Rules) {
    let always = [
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_pidfd_getfd,
        libc::SYS_name_to_handle_at,
        libc::SYS_open_by_handle_at,
        libc::SYS_userfaultfd,
        libc::SYS_memfd_secret,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_open_tree,
        libc::SYS_move_mount,
        libc::SYS_fsopen,
        libc::SYS_fsconfig,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_mount_setattr,
        libc::SYS_pivot_root,
        libc::SYS_chroot,
        libc::SYS_setns,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_kcmp,
        libc::SYS_process_madvise,
    ];
    for nr in always {
        rules.insert(nr, vec![]);
    }
}

/// `unshare` and `clone` with `CLONE_NEWUSER`.
fn namespace_rules(rules: &mut Rules) -> Result<(), FilterError> {
    let newuser = libc::CLONE_NEWUSER as u64;
    for nr in [libc::SYS_unshare, libc::SYS_clone] {
        rules.insert(
            nr,
            vec![SeccompRule::new(vec![cond(
                0,
                SeccompCmpOp::MaskedEq(newuser),
                newuser,
            )?])?],
        );
    }
    Ok(())
}

/// `ioctl`s that push keystrokes into a terminal or make a userfaultfd.
fn ioctl_rules(rules: &mut Rules) -> Result<(), FilterError> {
    let mut ioctls = Vec::new();
    for cmd in [TIOCSTI, TIOCLINUX, USERFAULTFD_IOC_NEW] {
        ioctls.push(SeccompRule::new(vec![cond(1, SeccompCmpOp::Eq, cmd)?])?);
    }
    rules.insert(libc::SYS_ioctl, ioctls);
    Ok(())
}

/// `socket()` by family, and under `tcp_only` the TCP-only stream rules and the TCP Fast Open
/// sends.
fn socket_family_rules(rules: &mut Rules, variant: Variant) -> Result<(), FilterError> {
    let (unix, inet, inet6, netlink) = (
        libc::AF_UNIX as u64,
        libc::AF_INET as u64,
        libc::AF_INET6 as u64,
        libc::AF_NETLINK as u64,
    );
    let tcp_only = variant.inet_sockets && variant.tcp_only;
    let mut families = Vec::new();
    if variant.unix_sockets {
        families.push(unix);
    }
    if tcp_only {
        families.extend([inet, inet6]);
    } else if variant.inet_sockets {
        families.extend([inet, inet6, netlink]);
    }
    let mut socket = socket_rules(&families)?;
    if tcp_only {
        for family in [inet, inet6] {
            socket.extend(types_but(family, &[libc::SOCK_STREAM as u64])?);
            // A stream of another protocol than TCP: SCTP associates by `setsockopt`
            // (`SCTP_SOCKOPT_CONNECTX`) without `connect()`, and Landlock's rules are TCP's.
            socket.push(SeccompRule::new(vec![
                cond(0, SeccompCmpOp::Eq, family)?,
                cond(2, SeccompCmpOp::Ne, 0)?,
                cond(2, SeccompCmpOp::Ne, libc::IPPROTO_TCP as u64)?,
            ])?);
        }
        // The flags argument of sendto, sendmsg and sendmmsg.
        let fastopen = libc::MSG_FASTOPEN as u64;
        for (nr, flags_arg) in [
            (libc::SYS_sendto, 3),
            (libc::SYS_sendmsg, 2),
            (libc::SYS_sendmmsg, 3),
        ] {
            rules.insert(
                nr,
                vec![SeccompRule::new(vec![cond(
                    flags_arg,
                    SeccompCmpOp::MaskedEq(fastopen),
                    fastopen,
                )?])?],
            );
        }
    }
    rules.insert(libc::SYS_socket, socket);
    Ok(())
}

/// Resource limits and scheduling of other processes (the shim, the helper, agentd, the
/// user's editor): a command may only change its own (pid 0).
fn other_process_rules(rules: &mut Rules) -> Result<(), FilterError> {
    rules.insert(
        libc::SYS_prlimit64,
        vec![SeccompRule::new(vec![
            cond(0, SeccompCmpOp::Ne, 0)?,
            SeccompCondition::new(2, SeccompCmpArgLen::Qword, SeccompCmpOp::Ne, 0)?,
        ])?],
    );
    for nr in [
        libc::SYS_sched_setscheduler,
        libc::SYS_sched_setparam,
        libc::SYS_sched_setaffinity,
        libc::SYS_sched_setattr,
        libc::SYS_migrate_pages,
        libc::SYS_move_pages,
    ] {
        rules.insert(
            nr,
            vec![SeccompRule::new(vec![cond(0, SeccompCmpOp::Ne, 0)?])?],
        );
    }
    // setpriority(which, who) and ioprio_set(which, who): allowed on the caller itself or its
    // own process group (who 0, which the command leads), denied on any other process, group
    // or user.
    for (nr, process, group) in [
        (
            libc::SYS_setpriority,
            libc::PRIO_PROCESS as u64,
            libc::PRIO_PGRP as u64,
        ),
        (libc::SYS_ioprio_set, IOPRIO_WHO_PROCESS, IOPRIO_WHO_PGRP),
    ] {
        rules.insert(
            nr,
            vec![
                SeccompRule::new(vec![cond(1, SeccompCmpOp::Ne, 0)?])?,
                SeccompRule::new(vec![
                    cond(0, SeccompCmpOp::Ne, process)?,
                    cond(0, SeccompCmpOp::Ne, group)?,
                ])?,
            ],
        );
    }
    Ok(())
}

/// socketpair: only AF_UNIX, and only of the connection-oriented types. A datagram socket
/// (SOCK_DGRAM, or SOCK_RAW, which AF_UNIX turns into one) takes a destination on every
/// `sendto`/`sendmsg` even when it was made as a pair, so it would reach any pathname or
/// abstract datagram socket of the host (journald, syslog, a user's own daemons) without ever
/// calling `socket()` or `connect()`. A stream or seqpacket pair ignores or refuses a
/// destination. The type is compared on its low four bits, as the kernel reads it
/// (SOCK_TYPE_MASK; SOCK_NONBLOCK and SOCK_CLOEXEC sit above them).
fn socketpair_rules(rules: &mut Rules) -> Result<(), FilterError> {
    let mut pair_rules = vec![SeccompRule::new(vec![cond(
        0,
        SeccompCmpOp::Ne,
        libc::AF_UNIX as u64,
    )?])?];
    pair_rules.extend(unix_datagram_rules()?);
    rules.insert(libc::SYS_socketpair, pair_rules);
    Ok(())
}

/// Read-only mode: metadata changes, by their calls and, for inode flags (chattr) and
/// extended file attributes, by `ioctl` (appended to `ioctl_rules`' list).
fn metadata_rules(rules: &mut Rules) -> Result<(), FilterError> {
    for nr in metadata_syscalls() {
        rules.insert(nr, vec![]);
    }
    let ioctls = rules.entry(libc::SYS_ioctl).or_default();
    for cmd in [FS_IOC_SETFLAGS, FS_IOC_SETFLAGS_32, FS_IOC_FSSETXATTR] {
        ioctls.push(SeccompRule::new(vec![cond(1, SeccompCmpOp::Eq, cmd)?])?);
    }
    Ok(())
}

/// `socket()`'s rules: every family but `allowed` (sorted) is denied, and `AF_UNIX`, when
/// allowed, only of the connection-oriented types (see `unix_datagram_rules`).
fn socket_rules(allowed: &[u64]) -> Result<Vec<SeccompRule>, FilterError> {
    let (Some(first), Some(last)) = (allowed.first(), allowed.last()) else {
        // No rule condition: every socket() is denied.
        return Ok(Vec::new());
    };
    let mut rules = vec![SeccompRule::new(vec![cond(0, SeccompCmpOp::Lt, *first)?])?];
    for pair in allowed.windows(2) {
        if let [low, high] = pair
            && high - low > 1
        {
            rules.push(SeccompRule::new(vec![
                cond(0, SeccompCmpOp::Gt, *low)?,
                cond(0, SeccompCmpOp::Lt, *high)?,
            ])?);
        }
    }
    rules.push(SeccompRule::new(vec![cond(0, SeccompCmpOp::Gt, *last)?])?);
    if allowed.contains(&(libc::AF_UNIX as u64)) {
        rules.extend(unix_datagram_rules()?);
    }
    Ok(rules)
}

/// Rules matching an `AF_UNIX` socket (or pair) of any type but `SOCK_STREAM` and
/// `SOCK_SEQPACKET`. A datagram socket (`SOCK_DGRAM`, or `SOCK_RAW`, which `AF_UNIX` turns into
/// one) takes a destination on every `sendto`/`sendmsg`, even when it was made as a pair or
/// connected, so it would reach any pathname or abstract datagram socket of the host
/// (journald, syslog, a user's own daemons) without ever calling `connect()`. A stream or
/// seqpacket socket ignores or refuses a destination. The type is compared on its low four
/// bits, as the kernel reads it (`SOCK_TYPE_MASK`; `SOCK_NONBLOCK` and `SOCK_CLOEXEC` sit above
/// them).
fn unix_datagram_rules() -> Result<Vec<SeccompRule>, FilterError> {
    types_but(libc::AF_UNIX as u64, &PAIR_TYPES)
}

/// Rules matching a socket (or pair) of `family` of any type but `allowed`, compared on the
/// type's low four bits.
fn types_but(family: u64, allowed: &[u64]) -> Result<Vec<SeccompRule>, FilterError> {
    let mut rules = Vec::new();
    for kind in (0..=SOCK_TYPE_MASK).filter(|k| !allowed.contains(k)) {
        rules.push(SeccompRule::new(vec![
            cond(0, SeccompCmpOp::Eq, family)?,
            cond(1, SeccompCmpOp::MaskedEq(SOCK_TYPE_MASK), kind)?,
        ])?);
    }
    Ok(rules)
}

/// The filter that hands every `connect` to the shim (`SECCOMP_RET_USER_NOTIF`), for
/// `unix_sockets`; it allows everything else, which the command's main filter then judges. A
/// foreign architecture or an x32 call is left to the main filter, which kills it.
pub(crate) fn connect_notify_program() -> Result<BpfProgram, FilterError> {
    let connect =
        u32::try_from(libc::SYS_connect).map_err(|e| FilterError::SyscallNumber("connect", e))?;
    Ok(vec![
        // 0: arch; 1: a foreign one → 5 (allow)
        insn(LD_W_ABS, 0, 0, OFFSET_ARCH),
        insn(JEQ_K, 0, 3, arch::AUDIT),
        // 2: nr; 3: not connect → 5
        insn(LD_W_ABS, 0, 0, OFFSET_NR),
        insn(JEQ_K, 0, 1, connect),
        // 4, 5
        insn(RET_K, 0, 0, libc::SECCOMP_RET_USER_NOTIF),
        insn(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    ])
}

/// System V IPC and POSIX message queues: keyed by the IPC namespace, not by a path.
fn ipc_syscalls() -> [i64; 18] {
    [
        libc::SYS_shmget,
        libc::SYS_shmat,
        libc::SYS_shmctl,
        libc::SYS_shmdt,
        libc::SYS_msgget,
        libc::SYS_msgsnd,
        libc::SYS_msgrcv,
        libc::SYS_msgctl,
        libc::SYS_semget,
        libc::SYS_semop,
        libc::SYS_semtimedop,
        libc::SYS_semctl,
        libc::SYS_mq_open,
        libc::SYS_mq_unlink,
        libc::SYS_mq_timedsend,
        libc::SYS_mq_timedreceive,
        libc::SYS_mq_notify,
        libc::SYS_mq_getsetattr,
    ]
}

fn metadata_syscalls() -> Vec<i64> {
    let mut list = vec![
        libc::SYS_fchmod,
        libc::SYS_fchmodat,
        libc::SYS_fchown,
        libc::SYS_fchownat,
        libc::SYS_utimensat,
        libc::SYS_setxattr,
        libc::SYS_lsetxattr,
        libc::SYS_fsetxattr,
        libc::SYS_removexattr,
        libc::SYS_lremovexattr,
        libc::SYS_fremovexattr,
        libc::SYS_fchmodat2,
    ];
    // Newer generic numbers (identical on x86-64 and aarch64): setxattrat, removexattrat,
    // file_setattr.
    list.extend([463, 466, 469]);
    #[cfg(target_arch = "x86_64")]
    list.extend([
        libc::SYS_chmod,
        libc::SYS_chown,
        libc::SYS_lchown,
        libc::SYS_utime,
        libc::SYS_utimes,
        libc::SYS_futimesat,
    ]);
    list
}

/// Instructions that run before seccompiler's program: kill x32 calls, answer `clone3` with
/// `ENOSYS`. For any other architecture tag they fall through to seccompiler's own check, which
/// kills the process. Every jump lands inside the prologue or on the first instruction after it.
fn prologue() -> Result<BpfProgram, FilterError> {
    let kill = libc::SECCOMP_RET_KILL_PROCESS;
    let enosys = libc::SECCOMP_RET_ERRNO | (libc::ENOSYS.unsigned_abs() & libc::SECCOMP_RET_DATA);
    // What follows the architecture check: the x32 kill, then the clone3 answer.
    let mut tail = Vec::new();
    if let Some(bit) = arch::X32_BIT {
        // nr >= bit → kill, else fall through.
        tail.push(insn(JGE_K, 0, 1, bit));
        tail.push(insn(RET_K, 0, 0, kill));
    }
    // nr == clone3 → ENOSYS, else skip the return.
    let clone3 =
        u32::try_from(libc::SYS_clone3).map_err(|e| FilterError::SyscallNumber("clone3", e))?;
    tail.push(insn(JEQ_K, 0, 1, clone3));
    tail.push(insn(RET_K, 0, 0, enosys));
    // A foreign architecture skips the number's load and the tail: it lands right after.
    let past_tail = u8::try_from(tail.len() + 1).map_err(FilterError::Prologue)?;
    let mut p = vec![
        // 0: arch
        insn(LD_W_ABS, 0, 0, OFFSET_ARCH),
        // 1: foreign arch → skip to the body (it kills)
        insn(JEQ_K, 0, past_tail, arch::AUDIT),
        // 2: nr
        insn(LD_W_ABS, 0, 0, OFFSET_NR),
    ];
    p.extend(tail);
    Ok(p)
}

// The hand-written instructions' opcodes, and where `seccomp_data` holds the call's number and
// architecture.
const LD_W_ABS: u16 = opcode(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS);
const JEQ_K: u16 = opcode(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K);
const JGE_K: u16 = opcode(libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K);
const RET_K: u16 = opcode(libc::BPF_RET | libc::BPF_K);
const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;

fn insn(code: u16, jt: u8, jf: u8, k: u32) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// A BPF opcode as an instruction holds it: the kernel's constants are `u32`, the field is
/// `u16`, and every opcode fits in its low half.
const fn opcode(code: u32) -> u16 {
    let [low, high, _, _] = code.to_le_bytes();
    u16::from_le_bytes([low, high])
}

/// The program as the bytes `bwrap --seccomp FD` reads: native-endian `sock_filter`s.
pub(crate) fn to_bytes(program: &[sock_filter]) -> Vec<u8> {
    let mut out = Vec::with_capacity(program.len() * 8);
    for insn in program {
        out.extend_from_slice(&insn.code.to_ne_bytes());
        out.push(insn.jt);
        out.push(insn.jf);
        out.extend_from_slice(&insn.k.to_ne_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every variant of the filter.
    fn variants() -> Vec<Variant> {
        let mut all = Vec::new();
        for inet_sockets in [false, true] {
            for tcp_only in [false, true] {
                for unix_sockets in [false, true] {
                    for read_only in [false, true] {
                        for ipc_namespace in [false, true] {
                            all.push(Variant {
                                inet_sockets,
                                tcp_only,
                                unix_sockets,
                                read_only,
                                ipc_namespace,
                            });
                        }
                    }
                }
            }
        }
        all
    }

    #[test]
    fn every_variant_builds() {
        for variant in variants() {
            let program = build(variant).expect("filter");
            assert!(program.len() < 4096, "BPF programs are capped at 4096");
        }
    }

    // The classic BPF the filters are made of, as the kernel runs it on a `seccomp_data`.
    const ALU_AND_K: u16 = opcode(libc::BPF_ALU | libc::BPF_AND | libc::BPF_K);
    const JA: u16 = opcode(libc::BPF_JMP | libc::BPF_JA);
    const JGT_K: u16 = opcode(libc::BPF_JMP | libc::BPF_JGT | libc::BPF_K);
    const JSET_K: u16 = opcode(libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K);
    /// `seccomp_data`: nr, arch, instruction pointer, then six arguments.
    const OFFSET_ARGS: usize = 16;
    const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
    const EPERM: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;

    /// What `program` answers to system call `nr` with `args`, on this architecture.
    fn answer(program: &[sock_filter], nr: i64, args: [u64; 6]) -> u32 {
        let mut data = Vec::new();
        data.extend_from_slice(&i32::try_from(nr).expect("a call number").to_ne_bytes());
        data.extend_from_slice(&arch::AUDIT.to_ne_bytes());
        data.extend_from_slice(&0u64.to_ne_bytes());
        for arg in args {
            data.extend_from_slice(&arg.to_ne_bytes());
        }
        assert_eq!(data.len(), OFFSET_ARGS + 48);
        let (mut a, mut pc) = (0u32, 0usize);
        loop {
            let insn = &program[pc];
            let k = insn.k;
            let jump = |taken: bool| usize::from(if taken { insn.jt } else { insn.jf });
            pc += 1 + match insn.code {
                LD_W_ABS => {
                    let at = k as usize;
                    a = u32::from_ne_bytes(data[at..at + 4].try_into().expect("a word"));
                    0
                }
                ALU_AND_K => {
                    a &= k;
                    0
                }
                JA => k as usize,
                JEQ_K => jump(a == k),
                JGT_K => jump(a > k),
                JGE_K => jump(a >= k),
                JSET_K => jump(a & k != 0),
                RET_K => return k,
                other => panic!("an instruction this interpreter does not know: {other:#x}"),
            };
        }
    }

    #[test]
    fn descriptor_theft_file_handles_userfaultfd_and_secret_memory_are_refused() {
        let refused = [
            ("pidfd_getfd", libc::SYS_pidfd_getfd),
            ("name_to_handle_at", libc::SYS_name_to_handle_at),
            ("open_by_handle_at", libc::SYS_open_by_handle_at),
            ("userfaultfd", libc::SYS_userfaultfd),
            ("memfd_secret", libc::SYS_memfd_secret),
        ];
        // The controls: their neighbours, which tools need, are let through by the same program.
        let allowed = [
            ("getpid", libc::SYS_getpid),
            ("pidfd_open", libc::SYS_pidfd_open),
            ("memfd_create", libc::SYS_memfd_create),
            ("openat", libc::SYS_openat),
        ];
        for variant in variants() {
            let program = build(variant).expect("filter");
            for (name, nr) in refused {
                assert_eq!(answer(&program, nr, [0; 6]), EPERM, "{name}, {variant:?}");
            }
            for (name, nr) in allowed {
                assert_eq!(answer(&program, nr, [0; 6]), ALLOW, "{name}, {variant:?}");
            }
        }
    }

    #[test]
    fn a_userfaultfd_from_the_device_is_refused_on_the_commands_low_32_bits() {
        // FIONREAD: how many bytes are waiting to be read.
        let fionread: u64 = 0x541B;
        for variant in variants() {
            let program = build(variant).expect("filter");
            let ioctl = |cmd: u64| answer(&program, libc::SYS_ioctl, [3, cmd, 0, 0, 0, 0]);
            assert_eq!(ioctl(USERFAULTFD_IOC_NEW), EPERM, "{variant:?}");
            assert_eq!(ioctl(USERFAULTFD_IOC_NEW | 1 << 32), EPERM, "{variant:?}");
            assert_eq!(ioctl(TIOCSTI), EPERM, "{variant:?}");
            // The control: another request on the same call goes through.
            assert_eq!(ioctl(fionread), ALLOW, "{variant:?}");
        }
    }

    #[test]
    fn the_prologue_falls_through_to_the_body_for_a_foreign_arch() {
        let p = prologue().expect("prologue");
        // Instruction 1 jumps, on a foreign arch, exactly past the prologue.
        assert_eq!(1 + 1 + usize::from(p[1].jf), p.len());
    }

    #[test]
    fn bytes_are_eight_per_instruction() {
        let program = build(Variant {
            inet_sockets: false,
            tcp_only: false,
            unix_sockets: false,
            read_only: false,
            ipc_namespace: false,
        })
        .expect("filter");
        assert_eq!(to_bytes(&program).len(), program.len() * 8);
    }
}
