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

mod call;
mod caps;
mod connect;
mod detach;
mod exec;
mod fds;
mod layout;
mod proc_scan;
mod shim;
mod socket_call;
mod temp_dirs;

pub(crate) use call::{CStringArray, landlock_abi};
pub(crate) use caps::holds_capabilities;
pub(crate) use detach::detach;
pub(crate) use exec::enter_landlock;
pub(crate) use fds::{
    clear_environment, inherited_socket, own_received, poll, sanitize_fds, sealed_memfd, write_raw,
};
pub(crate) use layout::{
    COMMAND_FIRST_PASSED_FD, COMMAND_SECCOMP_FD, CTL_KILL, CTL_TERMINATE, ChildConfine, Connects,
    MAX_PASSED_FDS, Prepared,
};
pub(crate) use shim::fork_shim;
pub(crate) use temp_dirs::{private_temp_dir, sweep_orphaned_temp_dirs};
