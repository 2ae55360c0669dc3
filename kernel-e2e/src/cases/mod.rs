//! The catalogue, section by section (ids from the security catalogue, §4).
//!
//! Each case runs the attack confined, checks the host and the facts, then runs the same attack
//! in danger-full-access as a control that must succeed: a deny that the control cannot undo
//! proves nothing about the sandbox.

use crate::case::Case;
use crate::matrix::Backend;

mod availability;
mod checks;
mod credentials;
mod denials;
mod filesystem;
mod ipc;
mod layers;
mod lifecycle;
mod network;
mod policy;
mod process;
mod profile;
mod protected;
mod secrets;

/// The program the Seatbelt backend runs commands under.
pub(crate) const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// The cases that apply to Seatbelt: writes outside the writable roots reach nothing and the
/// canaries stay as they were (T01), the workspace, `$TMPDIR` and `/dev/null` stay writable
/// (T02), read-only mode (T03), a repository's `.git` inside the workspace stays read-only
/// (T15), the network denied (T28). The others test what the Linux backends are made of
/// (namespaces, seccomp, Landlock's rules, `/proc`, bwrap's mounts, the shim's `connect`
/// supervision) or fixtures only Linux has (tmpfs mounts, abstract sockets, pidfds).
pub(crate) const SEATBELT_CASES: [&str; 5] = ["T01", "T02", "T03", "T15", "T28"];

/// Why case `id` is not run on `backend`, if it is not.
pub(crate) fn not_for(backend: Backend, id: &str) -> Option<String> {
    (backend == Backend::Seatbelt && !SEATBELT_CASES.contains(&id)).then(|| {
        format!(
            "not a Seatbelt case: it tests the Linux backends' own mechanisms or needs a Linux \
             fixture; the Seatbelt cases are {}",
            SEATBELT_CASES.join(", ")
        )
    })
}

/// Every case, in catalogue order.
pub fn all() -> Vec<Case> {
    [
        availability::CASES,
        filesystem::CASES,
        protected::CASES,
        secrets::CASES,
        network::CASES,
        ipc::CASES,
        process::CASES,
        lifecycle::CASES,
        policy::CASES,
        layers::CASES,
        denials::CASES,
        profile::CASES,
        credentials::CASES,
    ]
    .concat()
}
