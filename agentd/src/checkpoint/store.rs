//! The store on disk: where it is, and recording, comparing, planning and pruning checkpoints.
//!
//! ```text
//! <state_dir>/checkpoints/            0700
//!   lock                              shared by records and restores, exclusive for a prune
//!   objects/ab/cdef…                  file contents by SHA-256 (objects::Objects)
//!   sessions/<session>/<label>        one manifest per checkpoint (manifest::Manifest)
//! ```
//!
//! Every write is a new file renamed into place, so a crash mid-record leaves the earlier
//! checkpoints as they were: the new manifest appears only once every object it names is
//! written and synced.

use std::collections::HashSet;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use nix::fcntl::{Flock, FlockArg};

use super::compare::{Difference, differences};
use super::manifest::{Kind, Manifest};
use super::objects::{Objects, PRIVATE_FILE};
use super::plan::RestorePlan;
use super::walk::{RACY, Sink, walk};
use super::{Change, CheckpointError, LeftOut, MAX_NAME, Recorded, Retention, STORE_DIR, Scope};

/// The mode of the store's directories: its user's alone.
const PRIVATE_DIR: u32 = 0o700;
const SESSIONS: &str = "sessions";
const OBJECTS: &str = "objects";
const LOCK: &str = "lock";

/// `<state_dir>/checkpoints`.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
    /// How recently before a checkpoint a file may have changed for its stat still to be
    /// trusted by the next record ([`RACY`]; shorter only in tests).
    racy: Duration,
}

/// What [`Store::prune`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pruned {
    pub checkpoints: u64,
    pub objects: u64,
    pub bytes: u64,
}

/// Whether `name` may name a session or a checkpoint: a plain file name.
fn check_name(name: &str) -> Result<(), CheckpointError> {
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_');
    if name.is_empty()
        || name.len() > MAX_NAME
        || name.starts_with('.')
        || name.starts_with('-')
        || !name.chars().all(plain)
    {
        return Err(CheckpointError::BadName {
            name: name.to_owned(),
        });
    }
    Ok(())
}

/// The order of labels: `t1`, `t1-end`, `t2`, …, then any other label by name.
fn order(label: &str) -> (u8, u64, u8, String) {
    let (turn, end) = match label.strip_suffix("-end") {
        Some(turn) => (turn, 1),
        None => (label, 0),
    };
    match turn.strip_prefix('t').and_then(|n| n.parse().ok()) {
        Some(n) => (0, n, end, String::new()),
        None => (1, 0, 0, label.to_owned()),
    }
}

fn nanos_since_epoch(at: SystemTime) -> i128 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX))
        .unwrap_or(0)
}

impl Store {
    /// The store of the session logs in `state_dir`. Nothing is created until it records.
    pub fn at(state_dir: &Path) -> Store {
        Store {
            dir: state_dir.join(STORE_DIR),
            racy: RACY,
        }
    }

    /// Where it is.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// This store with stats trusted after `racy` instead of [`RACY`]: tests, and the
    /// benchmark, which measures an unchanged tree as a session meets it once its files are older
    /// than the window (zero), without waiting for the window to pass.
    pub fn with_racy(mut self, racy: Duration) -> Store {
        self.racy = racy;
        self
    }

    pub(super) fn objects(&self) -> Objects {
        Objects::at(self.dir.join(OBJECTS))
    }

    fn failed(&self, path: &Path) -> impl FnOnce(std::io::Error) -> CheckpointError + use<> {
        let path = path.to_owned();
        move |source| CheckpointError::Store { path, source }
    }

    /// `scope` with the state directory (the logs and this store) protected: a root that holds
    /// it (a read-only session in the home directory) must not record the store into itself.
    fn without_state(&self, scope: &Scope) -> Scope {
        let mut scope = scope.clone();
        if let Some(state) = self.dir.parent() {
            scope
                .protected
                .push(state.canonicalize().unwrap_or_else(|_| state.to_owned()));
        }
        scope
    }

    /// Creates the store (0700) if it is not there, and checks that no one else may use it.
    fn ensure(&self) -> Result<(), CheckpointError> {
        match std::fs::DirBuilder::new()
            .mode(PRIVATE_DIR)
            .create(&self.dir)
        {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(self.failed(&self.dir)(e)),
        }
        let meta = self
            .dir
            .symlink_metadata()
            .map_err(self.failed(&self.dir))?;
        let mode = meta.permissions().mode() & 0o7777;
        if !meta.is_dir() || mode & 0o077 != 0 {
            return Err(CheckpointError::StoreOpen {
                path: self.dir.clone(),
                mode,
            });
        }
        Ok(())
    }

    /// The store's lock: shared while recording or restoring, exclusive while pruning, so a
    /// prune never removes an object a record is about to name.
    pub(super) fn lock(&self, exclusive: bool) -> Result<Flock<File>, CheckpointError> {
        self.ensure()?;
        let path = self.dir.join(LOCK);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(PRIVATE_FILE)
            .open(&path)
            .map_err(self.failed(&path))?;
        let arg = if exclusive {
            FlockArg::LockExclusive
        } else {
            FlockArg::LockShared
        };
        Flock::lock(file, arg).map_err(|(_, errno)| self.failed(&path)(errno.into()))
    }

    fn session_dir(&self, session: &str) -> Result<PathBuf, CheckpointError> {
        check_name(session)?;
        Ok(self.dir.join(SESSIONS).join(session))
    }

    pub(super) fn load(&self, session: &str, label: &str) -> Result<Manifest, CheckpointError> {
        check_name(label)?;
        let path = self.session_dir(session)?.join(label);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(CheckpointError::NoCheckpoint {
                    session: session.to_owned(),
                    label: label.to_owned(),
                    have: self.labels(session)?,
                });
            }
            Err(e) => return Err(self.failed(&path)(e)),
        };
        Manifest::decode(&bytes).map_err(|why| CheckpointError::Damaged { path, why })
    }

    /// Writes `manifest` as `label` of `session`: synced under a temporary name, renamed.
    fn save(&self, session: &str, label: &str, manifest: &Manifest) -> Result<(), CheckpointError> {
        let dir = self.session_dir(session)?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(PRIVATE_DIR)
            .create(&dir)
            .map_err(self.failed(&dir))?;
        let temp = dir.join(format!(".{label}.{}", std::process::id()));
        let write = || -> std::io::Result<()> {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(PRIVATE_FILE)
                .open(&temp)?;
            file.write_all(&manifest.encode())?;
            file.sync_all()?;
            std::fs::rename(&temp, dir.join(label))?;
            File::open(&dir)?.sync_all()
        };
        write().map_err(|e| {
            let _ = std::fs::remove_file(&temp);
            self.failed(&dir)(e)
        })
    }

    /// Records `scope` now as checkpoint `label` of `session` (labels: `t{N}` = before turn
    /// N, `t{N}-end` = after it). Blocking; callers use `spawn_blocking`.
    pub fn record(
        &self,
        session: &str,
        label: &str,
        scope: &Scope,
    ) -> Result<Recorded, CheckpointError> {
        self.record_counting(session, label, scope)
            .map(|(recorded, _)| recorded)
    }

    /// [`Store::record`], and how many files' content it read.
    pub(super) fn record_counting(
        &self,
        session: &str,
        label: &str,
        scope: &Scope,
    ) -> Result<(Recorded, u64), CheckpointError> {
        check_name(session)?;
        check_name(label)?;
        let _lock = self.lock(false)?;
        let shadow = match self.labels(session)?.last() {
            Some(last) => self.load(session, last).ok(),
            None => None,
        };
        let objects = self.objects();
        let started = nanos_since_epoch(SystemTime::now());
        let scope = &self.without_state(scope);
        let walked = walk(
            &scope.roots,
            scope,
            shadow.as_ref(),
            Sink::Store(&objects),
            scope.max_bytes,
            started,
            self.racy,
        )?;
        if walked.reads > 0 {
            // The objects just written reach the disk before the manifest that names them.
            let dir = File::open(&self.dir).map_err(self.failed(&self.dir))?;
            nix::unistd::syncfs(&dir).map_err(|e| self.failed(&self.dir)(e.into()))?;
        }
        let manifest = walked.manifest;
        self.save(session, label, &manifest)?;
        let mut recorded = Recorded {
            over_cap: manifest.over_cap,
            ..Recorded::default()
        };
        for e in &manifest.entries {
            if e.kind != Kind::Dir {
                recorded.files += 1;
                recorded.bytes += e.size;
            }
        }
        recorded.left_out = manifest
            .left_out
            .iter()
            .map(|o| LeftOut {
                path: manifest.path(o.root, &o.rel),
                why: o.why,
            })
            .collect();
        Ok((recorded, walked.reads))
    }

    /// What changed from checkpoint `from` to checkpoint `to` (both of `session`).
    pub fn changes(
        &self,
        session: &str,
        from: &str,
        to: &str,
    ) -> Result<Vec<Change>, CheckpointError> {
        let from = self.load(session, from)?;
        let to = self.load(session, to)?;
        Ok(differences(&from, &to)
            .into_iter()
            .map(|d| Change {
                path: d.path,
                kind: d.kind,
            })
            .collect())
    }

    /// The state of the checkpoint's roots now, compared with it.
    pub(super) fn compare_now(
        &self,
        then: &Manifest,
        scope: &Scope,
    ) -> Result<Vec<Difference>, CheckpointError> {
        let started = nanos_since_epoch(SystemTime::now());
        let scope = &self.without_state(scope);
        let now = walk(
            &then.roots,
            scope,
            Some(then),
            Sink::Hash,
            u64::MAX,
            started,
            self.racy,
        )?;
        Ok(differences(&now.manifest, then))
    }

    /// What restoring `scope` to checkpoint `label` would change now: the changes and a
    /// unified diff for people (text files; binary and large ones named as such).
    pub fn plan_restore(
        &self,
        session: &str,
        label: &str,
        scope: &Scope,
    ) -> Result<RestorePlan, CheckpointError> {
        let _lock = self.lock(false)?;
        let then = self.load(session, label)?;
        let found = self.compare_now(&then, scope)?;
        super::plan::plan(&self.objects(), label, &then, found, scope)
    }

    /// The labels recorded for `session`, oldest first.
    pub fn labels(&self, session: &str) -> Result<Vec<String>, CheckpointError> {
        let dir = self.session_dir(session)?;
        let listing = match std::fs::read_dir(&dir) {
            Ok(listing) => listing,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(self.failed(&dir)(e)),
        };
        let mut labels: Vec<String> = listing
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|name| check_name(name).is_ok())
            .collect();
        labels.sort_by_key(|l| order(l));
        Ok(labels)
    }

    /// Drops checkpoints (and the objects no checkpoint needs) by age and count: a checkpoint
    /// older than `max_age`, and all but the newest `max_per_session` of each session.
    pub fn prune(&self, retention: &Retention, now: SystemTime) -> Result<Pruned, CheckpointError> {
        if !self.dir.exists() {
            return Ok(Pruned::default());
        }
        let _lock = self.lock(true)?;
        let mut pruned = Pruned::default();
        let sessions = self.dir.join(SESSIONS);
        let listing = match std::fs::read_dir(&sessions) {
            Ok(listing) => listing.flatten().collect::<Vec<_>>(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(self.failed(&sessions)(e)),
        };
        let mut needed: HashSet<Vec<u8>> = HashSet::new();
        for session in listing {
            let Some(name) = session.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if check_name(&name).is_err() {
                continue;
            }
            let labels = self.labels(&name)?;
            let keep_from = labels.len().saturating_sub(retention.max_per_session);
            for (i, label) in labels.iter().enumerate() {
                let path = session.path().join(label);
                let old = path
                    .metadata()
                    .and_then(|m| m.modified())
                    .is_ok_and(|at| now.duration_since(at).is_ok_and(|a| a > retention.max_age));
                if i < keep_from || old {
                    std::fs::remove_file(&path).map_err(self.failed(&path))?;
                    pruned.checkpoints += 1;
                    continue;
                }
                match self.load(&name, label) {
                    Ok(m) => needed.extend(
                        m.entries
                            .into_iter()
                            .filter(|e| e.kind == Kind::File)
                            .map(|e| e.data),
                    ),
                    // A damaged manifest restores nothing; its objects are not kept for it.
                    Err(CheckpointError::Damaged { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
            if self.labels(&name)?.is_empty() {
                let _ = std::fs::remove_dir(session.path());
            }
        }
        let objects = self.objects();
        objects.sweep(now);
        for (hash, path, size) in objects.all().map_err(self.failed(&self.dir))? {
            if !needed.contains(hash.as_bytes()) {
                std::fs::remove_file(&path).map_err(self.failed(&path))?;
                pruned.objects += 1;
                pruned.bytes += size;
            }
        }
        Ok(pruned)
    }
}
