//! The catalogue, section by section (ids from the security catalogue, §4).
//!
//! Each case runs the attack confined, checks the host and the facts, then runs the same attack
//! in danger-full-access as a control that must succeed: a deny that the control cannot undo
//! proves nothing about the sandbox.

use std::path::{Path, PathBuf};

use crate::case::{Case, Cx, Stop, Verdict};
use crate::ensure;
use crate::fixtures::PathState;
use crate::matrix::Backend;

mod availability;
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

/// The state of each path now, to compare after a run.
fn snapshot(paths: &[&Path]) -> Vec<(PathBuf, PathState)> {
    paths
        .iter()
        .map(|p| (p.to_path_buf(), PathState::of(p)))
        .collect()
}

/// Fails unless every path is as in `before`.
fn all_unchanged(cx: &Cx, before: &[(PathBuf, PathState)]) -> Verdict {
    for (path, state) in before {
        cx.unchanged(path, state)?;
    }
    Ok(())
}

/// Fails unless every path differs from `before`: the control run's attack really happened.
fn all_changed(before: &[(PathBuf, PathState)]) -> Verdict {
    for (path, state) in before {
        ensure!(
            PathState::of(path) != *state,
            "the control run left {} as it was ({state}): the probe does not work here",
            path.display()
        );
    }
    Ok(())
}

/// Skips unless `tool` is on the PATH the commands get.
fn require_tool(tool: &str) -> Result<PathBuf, Stop> {
    find_tool(tool).ok_or_else(|| Stop::Skip(format!("{tool} is not installed")))
}

/// `tool` on the PATH the commands get, if it is there.
pub(crate) fn find_tool(tool: &str) -> Option<PathBuf> {
    crate::suite::COMMAND_PATH
        .split(':')
        .map(|dir| Path::new(dir).join(tool))
        .find(|p| p.is_file())
}

/// The text of a file in /proc/sys, trimmed.
fn sysctl(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

/// Skips when `value` says the kernel itself forbids what the case needs.
fn skip_unless(condition: bool, reason: impl Into<String>) -> Verdict {
    if condition {
        Ok(())
    } else {
        Err(Stop::Skip(reason.into()))
    }
}
