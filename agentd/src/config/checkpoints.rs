//! The `[checkpoints]` table: whether a session records its writable roots before and after
//! every turn (for `/undo` and `agentd sessions undo`, RFC 0020), how much one checkpoint may
//! hold, and how long checkpoints are kept.
//!
//! ```toml
//! [checkpoints]
//! enabled = true            # record checkpoints
//! max_bytes = 536870912     # content one checkpoint takes; larger files are left out, said
//! max_age_days = 30         # checkpoints older than this are pruned
//! max_per_session = 100     # and all but the newest this many of each session
//! ```

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::checkpoint::Retention;

/// `checkpoints.max_bytes` by default: 512 MiB, more than a source tree's text and small
/// assets; what a build or a download adds is mostly ignored (`target`, `node_modules`).
pub const DEFAULT_MAX_BYTES: u64 = 512 * 1024 * 1024;
/// `checkpoints.max_age_days` by default: a month, past which a session is rarely undone.
pub const DEFAULT_MAX_AGE_DAYS: u64 = 30;
/// `checkpoints.max_per_session` by default: the last 50 turns (two checkpoints each).
pub const DEFAULT_MAX_PER_SESSION: u64 = 100;
/// Seconds in a day.
const DAY_SECS: u64 = 24 * 60 * 60;

/// The table as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCheckpoints {
    pub(super) enabled: Option<bool>,
    pub(super) max_bytes: Option<Spanned<u64>>,
    pub(super) max_age_days: Option<Spanned<u64>>,
    pub(super) max_per_session: Option<Spanned<u64>>,
}

/// The `[checkpoints]` table, checked (every number at least 1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckpointsSection {
    pub enabled: Option<bool>,
    pub max_bytes: Option<u64>,
    pub max_age_days: Option<u64>,
    pub max_per_session: Option<u64>,
}

/// What the sessions do about checkpoints, resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checkpoints {
    pub enabled: bool,
    pub max_bytes: u64,
    pub retention: Retention,
}

impl Checkpoints {
    /// From the table's values (defaults where unset).
    pub fn of(
        enabled: bool,
        max_bytes: u64,
        max_age_days: u64,
        max_per_session: u64,
    ) -> Checkpoints {
        Checkpoints {
            enabled,
            max_bytes,
            retention: Retention {
                max_age: Duration::from_secs(max_age_days.saturating_mul(DAY_SECS)),
                max_per_session: usize::try_from(max_per_session).unwrap_or(usize::MAX),
            },
        }
    }
}

impl Default for Checkpoints {
    fn default() -> Checkpoints {
        Checkpoints::of(
            true,
            DEFAULT_MAX_BYTES,
            DEFAULT_MAX_AGE_DAYS,
            DEFAULT_MAX_PER_SESSION,
        )
    }
}
