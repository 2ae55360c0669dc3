//! Checkpoints of a session's writable roots, and restoring them: what lets `agentd sessions
//! undo` (and the editor's `/undo`) take back everything a turn changed, what its commands
//! changed included, not only its file tools (RFC 0020).
//!
//! A [`Store`] lives under the session state directory (`<state_dir>/checkpoints`, 0700), which
//! is never inside a writable root (`helper_client::workspace`), so no confined command of a
//! read-only or workspace-write session can change what a restore would write back. It is
//! content-addressed and incremental: file contents are objects named by their SHA-256
//! ([`objects`]), each checkpoint is one manifest of every path with its kind, mode and size,
//! and its stat (mtime, ctime, inode) as a shadow index, so recording an unchanged file costs a
//! `stat` and no read ([`manifest`], [`walk`]).
//!
//! Recording walks by descriptor and never follows a link ([`walk`]); restoring never writes
//! by path from agentd: every change is made by confined processes under the workspace-write
//! policy the caller gives ([`restore`]), then the roots are scanned again and whatever still
//! differs from the checkpoint is reported, never assumed.

mod compare;
mod damage;
mod diff_text;
mod ignore;
mod manifest;
mod objects;
mod plan;
mod restore;
mod store;
#[cfg(test)]
mod tests;
mod walk;

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use diff_text::DIFF_TEXT_CAP;
pub use plan::RestorePlan;
pub use restore::{Restored, restore};
pub use store::Store;

/// The longest session id or label the store takes (a file name).
pub const MAX_NAME: usize = 128;

/// The name of the store's directory under the state directory.
pub const STORE_DIR: &str = "checkpoints";

/// The label of the checkpoint recorded before turn `turn`'s first side effect.
pub fn before_turn(turn: u64) -> String {
    format!("t{turn}")
}

/// The label of the checkpoint recorded after turn `turn` ended.
pub fn after_turn(turn: u64) -> String {
    format!("t{turn}-end")
}

/// The turn a `t{N}` label is before, if it is one.
pub fn turn_of(label: &str) -> Option<u64> {
    label.strip_prefix('t')?.parse().ok()
}

/// What a checkpoint covers: the workspace first, then the session's other writable roots
/// (configured `writable_roots`, not the cache presets' directories); the protected subpaths
/// (relative to each root, or absolute: `.git`, `.agentd` and the profile's `protected`) left
/// out and never touched; and the most bytes of file content one checkpoint takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    pub roots: Vec<PathBuf>,
    pub protected: Vec<PathBuf>,
    pub max_bytes: u64,
}

impl Scope {
    /// What a checkpoint of a session in `workspace` with `profile` covers: the workspace, then
    /// the configured `writable_roots` (not the cache presets' directories: a cache is not the
    /// session's work); `.git`, `.agentd` and the profile's `protected` left out, and so is every
    /// path the session's commands may not read (`denied`: a request's `Policy::deny_read`, real
    /// paths — `sandbox.deny_read`, its `**/` matches, the built-in credential stores). The
    /// store is read by agentd, not by a confined command, and is readable wherever the state
    /// directory is: what the sandbox hides from commands must not reach it, nor be restored.
    pub fn for_session(
        workspace: &std::path::Path,
        profile: &crate::profile::SandboxProfile,
        denied: &[Vec<u8>],
        max_bytes: u64,
    ) -> Scope {
        use std::os::unix::ffi::OsStrExt;
        let real = |path: &std::path::Path| path.canonicalize().unwrap_or_else(|_| path.to_owned());
        let mut roots = vec![real(workspace)];
        roots.extend(profile.writable_roots.iter().map(|root| real(root)));
        let mut protected: Vec<PathBuf> = [".git", ".agentd"].map(PathBuf::from).to_vec();
        protected.extend(profile.protected.iter().cloned());
        protected.extend(
            denied
                .iter()
                .map(|path| PathBuf::from(std::ffi::OsStr::from_bytes(path))),
        );
        Scope {
            roots,
            protected,
            max_bytes,
        }
    }
}

/// What [`Store::record`] recorded.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Recorded {
    /// Regular files and symbolic links recorded.
    pub files: u64,
    /// Their bytes (a link's target counts as its bytes).
    pub bytes: u64,
    /// What was not recorded, and why.
    pub left_out: Vec<LeftOut>,
    /// Whether the size cap left files out.
    pub over_cap: bool,
}

/// A path a checkpoint does not hold, which a restore to it never touches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOut {
    /// Absolute.
    pub path: PathBuf,
    pub why: LeftOutWhy,
}

/// Why a path was left out of a checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeftOutWhy {
    /// The workspace ignores it (`.gitignore`, `.git/info/exclude`; `node_modules` and
    /// `target` without a repository).
    Ignored,
    /// A FIFO, socket or device: never opened, never recreated.
    NotRegular,
    /// Over the checkpoint's size cap (`[checkpoints] max_bytes`).
    OverCap,
    /// This user may not read it (a file or directory without read permission).
    Unreadable,
}

impl LeftOutWhy {
    /// The word a manifest and a person read.
    pub fn as_str(self) -> &'static str {
        match self {
            LeftOutWhy::Ignored => "ignored",
            LeftOutWhy::NotRegular => "not-regular",
            LeftOutWhy::OverCap => "over-cap",
            LeftOutWhy::Unreadable => "unreadable",
        }
    }

    fn parse(word: &str) -> Option<LeftOutWhy> {
        [
            LeftOutWhy::Ignored,
            LeftOutWhy::NotRegular,
            LeftOutWhy::OverCap,
            LeftOutWhy::Unreadable,
        ]
        .into_iter()
        .find(|why| why.as_str() == word)
    }
}

/// One path that differs between two states.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// Absolute.
    pub path: PathBuf,
    pub kind: ChangeKind,
}

/// How a path differs, from the earlier state to the later one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    Added,
    /// Content, link target or mode.
    Modified,
    Deleted,
    /// A file became a link or a directory, or the other way round.
    TypeChanged,
}

impl ChangeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Added => "added",
            ChangeKind::Modified => "modified",
            ChangeKind::Deleted => "deleted",
            ChangeKind::TypeChanged => "type_changed",
        }
    }
}

/// How long checkpoints are kept, and how many per session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    pub max_age: Duration,
    pub max_per_session: usize,
}

/// Why the store could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error(
        "cannot use the checkpoint store {}: {source}; check that the session state directory \
         is writable by this user (or set [checkpoints] enabled = false)",
        path.display()
    )]
    Store {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the checkpoint store {} is open to other users (mode {mode:o}); it must be 0700 — run \
         `chmod 700 {}`",
        path.display(),
        path.display()
    )]
    StoreOpen { path: PathBuf, mode: u32 },
    #[error(
        "`{name}` cannot name a checkpoint or a session in the store: only letters, digits, \
         `.`, `-` and `_` (not first), at most {} characters",
        MAX_NAME
    )]
    BadName { name: String },
    #[error(
        "session {session} has no checkpoint {label}; it has {}",
        if have.is_empty() { "none".to_owned() } else { have.join(", ") }
    )]
    NoCheckpoint {
        session: String,
        label: String,
        have: Vec<String>,
    },
    #[error(
        "the checkpoint manifest {} is damaged ({why}); remove it, and restore from another \
         checkpoint",
        path.display()
    )]
    Damaged { path: PathBuf, why: damage::Damage },
    #[error(
        "the checkpoint store has no object {hash} that {} needs (removed from outside \
         agentd?); restore from another checkpoint",
        path.display()
    )]
    MissingObject { hash: String, path: PathBuf },
    #[error("cannot record {}: {source}", path.display())]
    Walk {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{} holds more than {limit} entries to record; leave some out in .gitignore, or set \
         [checkpoints] enabled = false",
        root.display()
    )]
    TooLarge { root: PathBuf, limit: usize },
    #[error("the root {} of the checkpoint is not an absolute path", path.display())]
    NotAbsolute { path: PathBuf },
    #[error("the restore could not be handed to confine-helper: {0}")]
    Helper(#[from] crate::helper_client::ClientError),
    #[error("cannot prepare the restore: {0}")]
    Prepare(#[source] std::io::Error),
    #[error("the checkpoint work stopped before it ended: {0}")]
    Join(String),
}
