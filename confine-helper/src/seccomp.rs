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
//!   (`bpf::connect_notify_program`, `crate::unix_sockets`); with the network denied every other
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

use nix::libc;

use crate::bpf::{FilterError, Program, Rule, Rules, Test, high, low};

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

const TIOCSTI: u32 = 0x5412;
const FS_IOC_SETFLAGS: u32 = 0x4008_6602;
const FS_IOC_SETFLAGS_32: u32 = 0x4004_6602;
const FS_IOC_FSSETXATTR: u32 = 0x401C_5820;
const TIOCLINUX: u32 = 0x541C;
/// `_IO(0xAA, 0x00)`: a userfaultfd from `/dev/userfaultfd`, which root can open.
const USERFAULTFD_IOC_NEW: u32 = 0xAA00;
const IOPRIO_WHO_PROCESS: u32 = 1;
const IOPRIO_WHO_PGRP: u32 = 2;
/// The bits of a socket type that name it (the kernel's `SOCK_TYPE_MASK`).
const SOCK_TYPE_MASK: u32 = 0xF;
/// The socket types `socketpair(AF_UNIX, …)` may make: they reach only each other.
const PAIR_TYPES: [u32; 2] = [libc::SOCK_STREAM as u32, libc::SOCK_SEQPACKET as u32];

/// Builds the filter for `variant` (`bpf.rs` compiles it). Errors only if a number or a jump
/// does not fit, which the tests rule out.
pub(crate) fn build(variant: Variant) -> Result<Program, FilterError> {
    crate::bpf::compile(rules(variant))
}

/// The filter's rules for `variant`, one rule family after the other (each family's calls are its
/// own: no two families name the same call, but for `ioctl`, which `metadata_rules` extends).
fn rules(variant: Variant) -> Rules {
    let mut rules = Rules::new();
    always_denied(&mut rules);
    namespace_rules(&mut rules);
    rules.insert(
        libc::SYS_ioctl,
        ioctls(&[TIOCSTI, TIOCLINUX, USERFAULTFD_IOC_NEW]),
    );
    socket_family_rules(&mut rules, variant);
    other_process_rules(&mut rules);
    if !variant.ipc_namespace {
        for nr in ipc_syscalls() {
            rules.insert(nr, vec![]);
        }
    }
    rules.insert(libc::SYS_socketpair, socketpair_rules());
    if variant.read_only {
        metadata_rules(&mut rules);
    }
    rules
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
fn namespace_rules(rules: &mut Rules) {
    let newuser = libc::CLONE_NEWUSER as u32;
    for nr in [libc::SYS_unshare, libc::SYS_clone] {
        rules.insert(nr, vec![vec![low(0, Test::Masked(newuser, newuser))]]);
    }
}

/// `ioctl`s that push keystrokes into a terminal or make a userfaultfd, or in read-only mode
/// change inode flags or extended attributes: each request compared on the low 32 bits the kernel
/// uses (CVE-2019-10063).
fn ioctls(requests: &[u32]) -> Vec<Rule> {
    requests
        .iter()
        .map(|request| vec![low(1, Test::Eq(*request))])
        .collect()
}

/// `socket()` by family, and under `tcp_only` the TCP-only stream rules and the TCP Fast Open
/// sends.
fn socket_family_rules(rules: &mut Rules, variant: Variant) {
    let (unix, inet) = (libc::AF_UNIX as u32, libc::AF_INET as u32);
    let (inet6, netlink) = (libc::AF_INET6 as u32, libc::AF_NETLINK as u32);
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
    let mut socket = socket_rules(&families);
    if tcp_only {
        for family in [inet, inet6] {
            socket.extend(types_but(family, &[libc::SOCK_STREAM as u32]));
            // A stream of another protocol than TCP: SCTP associates by `setsockopt`
            // (`SCTP_SOCKOPT_CONNECTX`) without `connect()`, and Landlock's rules are TCP's.
            socket.push(vec![
                low(0, Test::Eq(family)),
                low(2, Test::Ne(0)),
                low(2, Test::Ne(libc::IPPROTO_TCP as u32)),
            ]);
        }
        // The flags argument of sendto, sendmsg and sendmmsg.
        let fastopen = libc::MSG_FASTOPEN as u32;
        for (nr, flags_arg) in [
            (libc::SYS_sendto, 3),
            (libc::SYS_sendmsg, 2),
            (libc::SYS_sendmmsg, 3),
        ] {
            let sent = low(flags_arg, Test::Masked(fastopen, fastopen));
            rules.insert(nr, vec![vec![sent]]);
        }
    }
    rules.insert(libc::SYS_socket, socket);
}

/// Resource limits and scheduling of other processes (the shim, the helper, agentd, the
/// user's editor): a command may only change its own (pid 0).
fn other_process_rules(rules: &mut Rules) {
    // prlimit64(pid, resource, new, old): a new limit (a pointer, either of its words not zero)
    // for another process.
    let other = low(0, Test::Ne(0));
    let new_limit = [low(2, Test::Ne(0)), high(2, Test::Ne(0))];
    let limit_rules = new_limit.map(|word| vec![other, word]);
    rules.insert(libc::SYS_prlimit64, limit_rules.to_vec());
    for nr in [
        libc::SYS_sched_setscheduler,
        libc::SYS_sched_setparam,
        libc::SYS_sched_setaffinity,
        libc::SYS_sched_setattr,
        libc::SYS_migrate_pages,
        libc::SYS_move_pages,
    ] {
        rules.insert(nr, vec![vec![other]]);
    }
    // setpriority(which, who) and ioprio_set(which, who): allowed on the caller itself or its
    // own process group (who 0, which the command leads), denied on any other process, group
    // or user.
    for (nr, process, group) in [
        (libc::SYS_setpriority, libc::PRIO_PROCESS, libc::PRIO_PGRP),
        (libc::SYS_ioprio_set, IOPRIO_WHO_PROCESS, IOPRIO_WHO_PGRP),
    ] {
        let which = |kind| low(0, Test::Ne(kind));
        rules.insert(
            nr,
            vec![
                vec![low(1, Test::Ne(0))],
                vec![which(process), which(group)],
            ],
        );
    }
}

/// socketpair: only AF_UNIX, and only of the connection-oriented types. A datagram socket
/// (SOCK_DGRAM, or SOCK_RAW, which AF_UNIX turns into one) takes a destination on every
/// `sendto`/`sendmsg` even when it was made as a pair, so it would reach any pathname or
/// abstract datagram socket of the host (journald, syslog, a user's own daemons) without ever
/// calling `socket()` or `connect()`. A stream or seqpacket pair ignores or refuses a
/// destination. The type is compared on its low four bits, as the kernel reads it
/// (SOCK_TYPE_MASK; SOCK_NONBLOCK and SOCK_CLOEXEC sit above them).
fn socketpair_rules() -> Vec<Rule> {
    let mut rules = vec![vec![low(0, Test::Ne(libc::AF_UNIX as u32))]];
    rules.extend(types_but(libc::AF_UNIX as u32, &PAIR_TYPES));
    rules
}

/// Read-only mode: metadata changes, by their calls and, for inode flags (chattr) and
/// extended file attributes, by `ioctl` (appended to the terminal `ioctl`s).
fn metadata_rules(rules: &mut Rules) {
    for nr in metadata_syscalls() {
        rules.insert(nr, vec![]);
    }
    let requests = ioctls(&[FS_IOC_SETFLAGS, FS_IOC_SETFLAGS_32, FS_IOC_FSSETXATTR]);
    rules.entry(libc::SYS_ioctl).or_default().extend(requests);
}

/// `socket()`'s rules: every family but `allowed` (sorted) is denied, and `AF_UNIX`, when
/// allowed, only of the connection-oriented types (see `types_but`).
fn socket_rules(allowed: &[u32]) -> Vec<Rule> {
    let (Some(first), Some(last)) = (allowed.first(), allowed.last()) else {
        // No rule condition: every socket() is denied.
        return Vec::new();
    };
    let mut rules = vec![vec![low(0, Test::Lt(*first))]];
    for pair in allowed.windows(2) {
        if let [below, above] = pair
            && above - below > 1
        {
            rules.push(vec![low(0, Test::Gt(*below)), low(0, Test::Lt(*above))]);
        }
    }
    rules.push(vec![low(0, Test::Gt(*last))]);
    if allowed.contains(&(libc::AF_UNIX as u32)) {
        rules.extend(types_but(libc::AF_UNIX as u32, &PAIR_TYPES));
    }
    rules
}

/// Rules matching a socket (or pair) of `family` of any type but `allowed`, compared on the
/// type's low four bits. For `AF_UNIX`, `allowed` is the connection-oriented types: a datagram
/// socket (`SOCK_DGRAM`, or `SOCK_RAW`, which `AF_UNIX` turns into one) takes a destination on
/// every `sendto`/`sendmsg`, even when it was made as a pair or connected, so it would reach any
/// pathname or abstract datagram socket of the host (journald, syslog, a user's own daemons)
/// without ever calling `connect()`. A stream or seqpacket socket ignores or refuses a
/// destination. `SOCK_NONBLOCK` and `SOCK_CLOEXEC` sit above the four bits.
fn types_but(family: u32, allowed: &[u32]) -> Vec<Rule> {
    // Each rule matches the types whose bits under a mask equal a value: the fewest masked bits
    // first, each kept if it matches no allowed type and one not matched yet.
    let mut masks: Vec<u32> = (0..=SOCK_TYPE_MASK).collect();
    masks.sort_by_key(|mask| mask.count_ones());
    let (mut matched, mut rules) = (Vec::new(), Vec::new());
    for (mask, value) in masks.into_iter().flat_map(|m| (0..=m).map(move |v| (m, v))) {
        let kinds: Vec<u32> = (0..=SOCK_TYPE_MASK).filter(|k| k & mask == value).collect();
        if value & !mask == 0
            && kinds.iter().all(|k| !allowed.contains(k))
            && kinds.iter().any(|k| !matched.contains(k))
        {
            matched.extend(kinds);
            let kind = low(1, Test::Masked(mask, value));
            rules.push(vec![low(0, Test::Eq(family)), kind]);
        }
    }
    rules
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::tests::seccompiler_program;
    use crate::bpf::tests::{ALLOW, EPERM, PAST_EVERY_CALL, answer, arguments_for};

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
        let (userfaultfd, tiocsti) = (u64::from(USERFAULTFD_IOC_NEW), u64::from(TIOCSTI));
        for variant in variants() {
            let program = build(variant).expect("filter");
            let ioctl = |cmd: u64| answer(&program, libc::SYS_ioctl, [3, cmd, 0, 0, 0, 0]);
            assert_eq!(ioctl(userfaultfd), EPERM, "{variant:?}");
            assert_eq!(ioctl(userfaultfd | 1 << 32), EPERM, "{variant:?}");
            assert_eq!(ioctl(tiocsti), EPERM, "{variant:?}");
            // The control: another request on the same call goes through.
            assert_eq!(ioctl(fionread), ALLOW, "{variant:?}");
        }
    }

    #[test]
    fn the_filter_answers_as_seccompiler_compiles_its_rules() {
        // seccompiler's program of the same rules (which checks the architecture itself, and
        // knows nothing of `clone3`'s answer): what the helper's search and blocks must answer.
        let plain = [[0; 6], [u64::MAX; 6], [1, 2, 3, 4, 5, 6]];
        for variant in variants() {
            let program = build(variant).expect("filter");
            let rules = rules(variant);
            let theirs = seccompiler_program(rules.clone());
            for nr in (0..i64::from(PAST_EVERY_CALL)).filter(|nr| *nr != libc::SYS_clone3) {
                let mut args = plain.to_vec();
                if let Some(list) = rules.get(&nr) {
                    args.extend(arguments_for(list));
                }
                for args in args {
                    let (ours, theirs) = (answer(&program, nr, args), answer(&theirs, nr, args));
                    assert_eq!(ours, theirs, "call {nr} {args:x?}, {variant:?}");
                }
            }
        }
    }

    #[test]
    fn other_processes_keep_their_limits_and_scheduling() {
        for variant in variants() {
            let program = build(variant).expect("filter");
            let call = |nr: i64, args: [u64; 6]| answer(&program, nr, args);
            let new = 0x7fff_0000_1000;
            // prlimit64(pid, resource, new, old): a new limit for another process, the pointer
            // in either word; the controls: reading it, and setting one's own.
            assert_eq!(call(libc::SYS_prlimit64, [42, 7, new, 0, 0, 0]), EPERM);
            assert_eq!(call(libc::SYS_prlimit64, [42, 7, 1 << 32, 0, 0, 0]), EPERM);
            assert_eq!(call(libc::SYS_prlimit64, [42, 7, 0, new, 0, 0]), ALLOW);
            assert_eq!(call(libc::SYS_prlimit64, [0, 7, new, 0, 0, 0]), ALLOW);
            assert_eq!(
                call(libc::SYS_sched_setaffinity, [42, 8, new, 0, 0, 0]),
                EPERM
            );
            assert_eq!(
                call(libc::SYS_sched_setaffinity, [0, 8, new, 0, 0, 0]),
                ALLOW
            );
            // setpriority(which, who, prio): another process, group or user; the controls: the
            // caller and its own group.
            let [process, group, user] =
                [libc::PRIO_PROCESS, libc::PRIO_PGRP, libc::PRIO_USER].map(|which| which as u64);
            assert_eq!(
                call(libc::SYS_setpriority, [process, 42, 19, 0, 0, 0]),
                EPERM
            );
            assert_eq!(call(libc::SYS_setpriority, [user, 0, 19, 0, 0, 0]), EPERM);
            assert_eq!(
                call(libc::SYS_setpriority, [process, 0, 19, 0, 0, 0]),
                ALLOW
            );
            assert_eq!(call(libc::SYS_setpriority, [group, 0, 19, 0, 0, 0]), ALLOW);
        }
    }

    #[test]
    fn sockets_and_pairs_are_answered_by_family_type_and_protocol() {
        let (unix, inet, inet6) = (libc::AF_UNIX, libc::AF_INET, libc::AF_INET6);
        let families = [
            unix,
            inet,
            inet6,
            libc::AF_NETLINK,
            libc::AF_PACKET,
            libc::AF_VSOCK,
        ];
        let flags = [0, libc::SOCK_CLOEXEC, libc::SOCK_NONBLOCK];
        let connected = |kind: i32| [libc::SOCK_STREAM, libc::SOCK_SEQPACKET].contains(&kind);
        for variant in variants() {
            let program = build(variant).expect("filter");
            let inet_allowed = |kind: i32, protocol: i32| {
                variant.inet_sockets
                    && (!variant.tcp_only
                        || kind == libc::SOCK_STREAM && [0, libc::IPPROTO_TCP].contains(&protocol))
            };
            for (family, kind, flag) in families
                .iter()
                .flat_map(|f| (0..16).flat_map(move |k| flags.map(move |flag| (*f, k, flag))))
            {
                for protocol in [0, libc::IPPROTO_TCP, libc::IPPROTO_UDP, libc::IPPROTO_SCTP] {
                    let args = [family, kind | flag, protocol, 0, 0, 0]
                        .map(|a| u64::try_from(a).expect("not negative"));
                    let socket = match family {
                        _ if family == unix => variant.unix_sockets && connected(kind),
                        _ if family == inet || family == inet6 => inet_allowed(kind, protocol),
                        libc::AF_NETLINK => variant.inet_sockets && !variant.tcp_only,
                        _ => false,
                    };
                    let pair = family == unix && connected(kind);
                    let at = format!("{family}, {kind} | {flag:#x}, {protocol}, {variant:?}");
                    let expect = |allowed: bool| if allowed { ALLOW } else { EPERM };
                    let got = answer(&program, libc::SYS_socket, args);
                    assert_eq!(got, expect(socket), "socket({at})");
                    let got = answer(&program, libc::SYS_socketpair, args);
                    assert_eq!(got, expect(pair), "socketpair({at})");
                }
            }
        }
    }
}
