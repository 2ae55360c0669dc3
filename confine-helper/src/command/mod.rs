//! One command's life in the helper: the request is checked, everything the forked processes
//! need is built, the shim is forked, and its records become replies.

#[cfg(target_os = "linux")]
mod ahead;
mod prepare;
mod running;
mod start;

#[cfg(target_os = "linux")]
pub(crate) use ahead::Pairs;
pub(crate) use prepare::{check, prepare, verdict};
pub(crate) use running::{Running, declared_fds};
pub(crate) use start::start;
