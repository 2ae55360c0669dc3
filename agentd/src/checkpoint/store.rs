//! The store on disk: where it is, and recording, comparing, planning and pruning checkpoints.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::{Change, CheckpointError, Recorded, RestorePlan, Retention, STORE_DIR, Scope};

/// The longest session id or label the store takes (a file name).
pub const MAX_NAME: usize = 128;

/// `<state_dir>/checkpoints`.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

/// What [`Store::prune`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pruned {
    pub checkpoints: u64,
    pub objects: u64,
    pub bytes: u64,
}

impl Store {
    /// The store of the session logs in `state_dir`. Nothing is created until it records.
    pub fn at(state_dir: &Path) -> Store {
        Store {
            dir: state_dir.join(STORE_DIR),
        }
    }

    /// Where it is.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Records `scope` now as checkpoint `label` of `session` (labels: `t{N}` = before turn
    /// N, `t{N}-end` = after it). Blocking; callers use `spawn_blocking`.
    pub fn record(
        &self,
        session: &str,
        label: &str,
        scope: &Scope,
    ) -> Result<Recorded, CheckpointError> {
        let _ = (session, label, scope);
        Err(CheckpointError::Join("unfinished".into()))
    }

    /// What changed from checkpoint `from` to checkpoint `to` (both of `session`).
    pub fn changes(
        &self,
        session: &str,
        from: &str,
        to: &str,
    ) -> Result<Vec<Change>, CheckpointError> {
        let _ = (session, from, to);
        Err(CheckpointError::Join("unfinished".into()))
    }

    /// What restoring `scope` to checkpoint `label` would change now: the changes and a
    /// unified diff for people (text files; binary and large ones named as such).
    pub fn plan_restore(
        &self,
        session: &str,
        label: &str,
        scope: &Scope,
    ) -> Result<RestorePlan, CheckpointError> {
        let _ = (session, label, scope);
        Err(CheckpointError::Join("unfinished".into()))
    }

    /// The labels recorded for `session`, oldest first.
    pub fn labels(&self, session: &str) -> Result<Vec<String>, CheckpointError> {
        let _ = session;
        Ok(Vec::new())
    }

    /// Drops checkpoints (and the objects no checkpoint needs) by age and count.
    pub fn prune(&self, retention: &Retention, now: SystemTime) -> Result<Pruned, CheckpointError> {
        let _ = (retention, now);
        Ok(Pruned::default())
    }
}
