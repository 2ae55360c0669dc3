//! Every `unsafe` block of the helper lives under this module, one per system call, each in a
//! small function of [`call`] or, for sockets, [`socket_call`] (or beside the one safe wrapper
//! that needs it in [`fds`]).
//!
//! The largest part is the code that runs between `fork` and `execve`. The helper forks a
//! *supervisor* ("shim", [`shim`]) per command; the shim forks the command ([`exec`]) and stays
//! behind to find ([`proc_scan`]) and reap the whole tree. Everything the shim and the command
//! need is built before the first fork ([`layout::Prepared`]); after it only async-signal-safe
//! system calls run, on stack buffers, and nothing allocates. That is a security property: a
//! lock held elsewhere at fork time, or a partly built value, cannot be met after it.
//!
//! The shim talks to the helper over two pipes, never through the command's stdio:
//! - `status` (shim → helper): fixed-size [`crate::record::Record`]s: started, stage failed,
//!   exec failed, exited;
//! - `ctl` (helper → shim): one byte per order: `T` terminate the tree, `K` kill it. End of file
//!   on `ctl` (the helper died or dropped the command) kills the tree too.
//!
//! The command reports a failed setup step to the shim over a third, close-on-exec pipe before
//! `execve`; once `execve` succeeds the command holds no descriptor of any of these pipes, so it
//! cannot forge a record.
//!
//! Where the shim supervises `connect` ([`connect`]: `unix_sockets`, the allow-list under
//! Landlock), the command loads one more filter first and sends its listener to the shim over
//! a socketpair; the shim answers each `connect` from its poll loop, on stack buffers too.
//!
//! On macOS the same shim runs with what macOS offers: no subreaper, no signalfd, no death
//! signal, no `close_range`, `pipe2` or `dup3`. The command leads a session of its own; the
//! shim waits with kqueue and finds the tree by process group and libproc's lists of children
//! (`macos_tree`, whose comment says what it cannot reach); the missing calls have macOS
//! bodies in [`call`] with the Linux signatures. The rule that nothing allocates between `fork`
//! and `execve` holds there too.

mod call;
#[cfg(target_os = "linux")]
mod caps;
#[cfg(target_os = "linux")]
mod connect;
#[cfg(target_os = "linux")]
mod detach;
mod exec;
mod fds;
mod layout;
#[cfg(target_os = "macos")]
mod macos_tree;
#[cfg(target_os = "linux")]
mod mount_call;
#[cfg(target_os = "linux")]
mod proc_scan;
#[cfg(target_os = "linux")]
mod sandbox;
mod shim;
#[cfg(target_os = "linux")]
mod socket_call;
mod temp_dirs;
#[cfg(target_os = "linux")]
mod user_namespace;

pub(crate) use call::CStringArray;
pub(crate) use call::Resource;
#[cfg(target_os = "linux")]
pub(crate) use call::landlock_abi;
#[cfg(target_os = "linux")]
pub(crate) use caps::holds_capabilities;
#[cfg(target_os = "linux")]
pub(crate) use detach::detach;
#[cfg(target_os = "linux")]
pub(crate) use exec::enter_landlock;
pub(crate) use fds::{
    RECV_FLAGS, SEND_FLAGS, clear_environment, forbid_tracing, inherited_socket, own_received,
    pipe_cloexec, poll, reset_inherited_signals, sanitize_fds,
};
#[cfg(target_os = "linux")]
pub(crate) use fds::{inherited_pipe, sealed_memfd, write_raw};
#[cfg(target_os = "linux")]
pub(crate) use layout::FD_FIRST_PASSED;
#[cfg(target_os = "linux")]
pub(crate) use layout::{
    COMMAND_FIRST_PASSED_FD, COMMAND_SECCOMP_FD, MAX_PASSED_FDS, ShimConnects,
};
pub(crate) use layout::{CTL_KILL, CTL_TERMINATE, ChildConfine, Prepared};
#[cfg(target_os = "linux")]
pub(crate) use sandbox::{Ahead, Bind, Bridge, Cover, Making, Sandbox};
pub(crate) use shim::fork_shim;
#[cfg(target_os = "linux")]
pub(crate) use temp_dirs::{orphaned, owned_name};
pub(crate) use temp_dirs::{private_temp_dir, sweep_orphaned_temp_dirs};
#[cfg(target_os = "linux")]
pub(crate) use user_namespace::{UserNamespace, usable as user_namespace_usable};
