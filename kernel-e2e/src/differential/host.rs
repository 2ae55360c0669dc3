//! What the host says after a run: the canaries of a policy (the paths it must leave as they
//! were) compared with how they were before, and the probe entries a command may have left in
//! the host's own directories.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use crate::fixtures::{self, PathState};

/// Every canary as it is now.
#[derive(Debug, Clone)]
pub struct Snapshot(Vec<(PathBuf, PathState)>);

impl Snapshot {
    pub fn of(canaries: &[PathBuf]) -> Snapshot {
        Snapshot(
            canaries
                .iter()
                .map(|path| (path.clone(), PathState::of(path)))
                .collect(),
        )
    }

    /// The canaries that are not as they were in this snapshot.
    pub fn changed(&self) -> Vec<Change> {
        self.0
            .iter()
            .filter_map(|(path, before)| {
                let after = PathState::of(path);
                (&after != before).then(|| Change {
                    path: path.clone(),
                    before: before.clone(),
                    after,
                })
            })
            .collect()
    }
}

/// A path on the host that a run changed though the policy keeps it, or left behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub path: PathBuf,
    pub before: PathState,
    pub after: PathState,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} was {}, is now {}",
            self.path.display(),
            self.before,
            self.after
        )
    }
}

/// The probe entries (`.probe-TAG-…`) a run left in `dirs`, each removed once found: a write
/// the sandbox should have refused, which reached the host.
pub fn strays(dirs: &[&Path], tag: &str) -> Vec<Change> {
    let prefix = format!(".probe-{tag}-");
    let mut found = Vec::new();
    for dir in dirs {
        let Ok(entries) = fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with(&prefix) {
                let path = entry.path();
                found.push(Change {
                    before: PathState::Absent,
                    after: PathState::of(&path),
                    path: path.clone(),
                });
                let _ = fixtures::remove(&path);
            }
        }
    }
    found
}
