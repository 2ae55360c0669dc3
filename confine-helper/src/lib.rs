//! `confine-helper`: receives a command and its policy from agentd over a Unix socket, runs it
//! (confined, in later backends), supervises its whole process tree, and reports facts back.
//!
//! Modules, one concern each: [`cli`] parses arguments and sanitizes the process; [`server`] is
//! the single-threaded event loop; [`command`] turns one request into a supervised process;
//! [`confine`] decides how it is confined ([`ceiling`], `paths` and `protect` for what stays
//! read-only, `git` for what a repository consists of, `bwrap`, `landlock`, `seccomp`); `enter` applies
//! Landlock inside a bwrap sandbox, as the second layer; `connects` judges the `connect` calls
//! a command's shim answers for it (`unix_sockets`, the allow-list under Landlock);
//! `sys` holds every `unsafe` block. The service a socket's peers connect to is
//! `confine-service`, its own program: it executes this one per peer (`--fd N --served-from`).

#![warn(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap
)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
// Short functions and no index that can panic in what the helper ships; the threshold is in
// clippy.toml. Tests index freely: a panic there is a failed test.
#![warn(clippy::too_many_lines)]
#![cfg_attr(not(test), warn(clippy::indexing_slicing))]

// The Linux backends (bwrap, Landlock and seccomp, and `enter`, the Landlock layer inside
// bwrap) are built on Linux alone; macOS has the Seatbelt backend.
#[cfg(target_os = "linux")]
mod bpf;
#[cfg(target_os = "linux")]
mod bridge;
#[cfg(target_os = "linux")]
mod bwrap;
mod ceiling;
#[cfg(target_os = "linux")]
mod cgroup;
pub mod cli;
mod command;
mod confine;
mod connects;
#[cfg(target_os = "linux")]
mod enter;
// The parsers of what a command may have written, for fuzz/ and the randomized tests only.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod git;
#[cfg(target_os = "linux")]
mod landlock;
mod paths;
mod probe;
mod protect;
mod record;
#[cfg(target_os = "linux")]
mod seccomp;
mod server;
mod sys;

// Compiled for the unit tests only.
#[cfg(test)]
#[path = "../../tests/shared/skip.rs"]
mod skip;
#[cfg(test)]
mod test_support;

/// Logs one line to stderr, prefixed with the helper's name and pid.
#[macro_export]
macro_rules! log {
    ($($arg:tt)*) => {
        eprintln!("confine-helper[{}]: {}", std::process::id(), format_args!($($arg)*))
    };
}
