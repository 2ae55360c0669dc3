//! What the cases check with: the state of paths before and after a run, the tools and
//! kernel settings a case needs, and the skip when they are missing.

use std::path::{Path, PathBuf};

use crate::case::{Cx, Stop, Verdict};
use crate::ensure;
use crate::fixtures::PathState;
use crate::tools::find_tool;

/// The state of each path now, to compare after a run.
pub(super) fn snapshot(paths: &[&Path]) -> Vec<(PathBuf, PathState)> {
    paths
        .iter()
        .map(|p| (p.to_path_buf(), PathState::of(p)))
        .collect()
}

/// Fails unless every path is as in `before`.
pub(super) fn all_unchanged(cx: &Cx, before: &[(PathBuf, PathState)]) -> Verdict {
    for (path, state) in before {
        cx.unchanged(path, state)?;
    }
    Ok(())
}

/// Fails unless every path differs from `before`: the control run's attack really happened.
pub(super) fn all_changed(before: &[(PathBuf, PathState)]) -> Verdict {
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
pub(super) fn require_tool(tool: &str) -> Result<PathBuf, Stop> {
    find_tool(tool).ok_or_else(|| Stop::Skip(format!("{tool} is not installed")))
}

/// The text of a file in /proc/sys, trimmed.
pub(super) fn sysctl(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

/// Skips when `value` says the kernel itself forbids what the case needs.
pub(super) fn skip_unless(condition: bool, reason: impl Into<String>) -> Verdict {
    if condition {
        Ok(())
    } else {
        Err(Stop::Skip(reason.into()))
    }
}
