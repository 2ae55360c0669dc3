//! `confine-service`: the root (or a user's own) service agentd connects to over a named socket.
//!
//! It decides who is served and hands each admitted peer to an ordinary `confine-helper` of its
//! own, and nothing else: it never reads a byte a peer sends. Who may connect is decided twice:
//! by the file system (the socket's mode, group and directory, [`socket`]) and, for every
//! connection, by the peer's `SO_PEERCRED` uid against the admission rule ([`admit`]). How many
//! connections are served is capped, per uid and in all ([`live`]). Each admitted connection is
//! served by `confine-helper --fd N --served-from SOCKET` ([`handoff`]): a root service's
//! helper takes the peer's process limit and cgroup ([`cgroup`]) and becomes the peer before it
//! executes ([`sys`]); a service that is not root serves its own uid alone, each peer by a
//! helper running as itself. Linux only: on macOS each user runs `confine-helper` embedded.

#![warn(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap
)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

#[cfg(target_os = "linux")]
mod admit;
#[cfg(target_os = "linux")]
mod cgroup;
#[cfg(target_os = "linux")]
mod cli;
#[cfg(target_os = "linux")]
mod handoff;
#[cfg(target_os = "linux")]
mod live;
#[cfg(target_os = "linux")]
mod socket;
#[cfg(target_os = "linux")]
mod sys;

/// Logs one line to stderr, prefixed with the service's name and pid.
#[macro_export]
macro_rules! log {
    ($($arg:tt)*) => {
        eprintln!("confine-service[{}]: {}", std::process::id(), format_args!($($arg)*))
    };
}

#[cfg(target_os = "linux")]
fn main() -> std::process::ExitCode {
    cli::main()
}

#[cfg(not(target_os = "linux"))]
fn main() -> std::process::ExitCode {
    eprintln!(
        "confine-service runs on Linux only; on this system each user runs confine-helper \
         embedded (agentd starts it)"
    );
    std::process::ExitCode::FAILURE
}
