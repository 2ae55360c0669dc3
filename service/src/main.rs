//! `confine-service`: the root (or a user's own) service agentd connects to over a named socket.
//!
//! It decides who is served and hands each admitted peer to an ordinary `confine-helper` of its
//! own, and nothing else: it never reads a byte a peer sends. Who may connect is decided twice:
//! by the file system (the socket's mode, group and directory, [`socket`]) and, for every
//! connection, by the peer's `SO_PEERCRED` uid against the admission rule, and how many
//! connections are served is capped, per uid and in all ([`admit`]). Each admitted connection
//! is served by `confine-helper --fd N --served-from SOCKET` ([`handoff`]): a root service's
//! helper takes the peer's process limit and cgroup ([`cgroup`]) and becomes the peer before it
//! executes ([`sys`]); a service that is not root serves its own uid alone, each peer by a
//! helper running as itself.
//!
//! Linux only (`SO_PEERCRED`, signalfd, cgroup v2, `close_range`): on macOS each user's agentd
//! starts its `confine-helper` embedded, and the workspace's macOS build leaves this crate out.

#![warn(clippy::too_many_lines)]
#![cfg_attr(not(test), warn(clippy::indexing_slicing))]
#![warn(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap
)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod admit;
mod cgroup;
mod cli;
mod handoff;
mod log;
mod socket;
mod sys;

fn main() -> std::process::ExitCode {
    cli::main()
}
