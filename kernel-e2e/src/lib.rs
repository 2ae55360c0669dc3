//! kernel-e2e: proves on the real kernel that what `agentd run` confines stays confined.
//!
//! Every case runs the real `agentd run --json` (which runs the real `confine-helper`), then
//! checks two things: the host (a canary file unchanged, a listener that heard nothing, a process
//! still alive) and the facts agentd reported. Every denial is paired with a control run of the
//! same attack in danger-full-access, which must succeed: a probe that cannot do harm unconfined
//! proves nothing by failing confined.
//!
//! The suite is a test target without the libtest harness (`tests/suite.rs` calls
//! [`suite::main`]): cases are many, run in parallel, and report per backend.

#![warn(clippy::too_many_lines)]
#![cfg_attr(not(test), warn(clippy::indexing_slicing))]

#[macro_use]
pub mod error;

/// The system users the suite makes and gives back (the scenario tests' own accounts).
#[path = "../../tests/shared/users.rs"]
pub mod accounts;
pub mod agentd;
#[path = "../../tests/shared/available.rs"]
pub mod available;
pub mod binaries;
pub mod case;
pub mod cases;
pub mod differential;
pub mod facts;
pub mod fixtures;
pub mod git;
pub mod matrix;
#[cfg(target_os = "linux")]
pub mod netns;
#[cfg(not(target_os = "linux"))]
#[path = "netns_none.rs"]
pub mod netns;
pub mod probe;
pub mod report;
#[cfg(target_os = "linux")]
#[path = "../../tests/shared/route_events.rs"]
pub mod route_events;
#[path = "../../tests/shared/skip.rs"]
pub mod skip;
pub mod suite;
pub mod tools;
pub mod users;
