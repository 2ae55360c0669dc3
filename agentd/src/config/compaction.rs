//! The `[compaction]` table: when a session's history is summarised to stay inside the model's
//! context window (`model.context_window`), and how much of it stays as it was.
//!
//! ```toml
//! [model]
//! context_window = 128000   # tokens; without it the history is never compacted
//!
//! [compaction]              # optional; needs model.context_window
//! threshold = 0.8           # compact when a request's estimate exceeds this share of the window
//! # compact_at = 100000     # or: an estimate in tokens (not both)
//! keep_turns = 2            # the latest turns that stay verbatim
//! ```
//!
//! The estimate is [`crate::model::estimate_tokens`]. Every value is checked when the file loads,
//! with the file and the line in the error.

use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use super::ConfigError;
use super::checks::line_at;

/// `compaction.threshold` when neither it nor `compaction.compact_at` is set.
pub const DEFAULT_COMPACT_SHARE: f64 = 0.8;

/// `compaction.keep_turns` when nothing sets it.
pub const DEFAULT_KEEP_TURNS: u64 = 2;

/// The `[compaction]` table, checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactionSection {
    /// When to compact; `None` when the file says neither `threshold` nor `compact_at`.
    pub at: Option<CompactAt>,
    /// The latest turns that stay verbatim.
    pub keep_turns: Option<u64>,
}

/// When a history is compacted: at a share of the context window, or at a number of tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactAt {
    /// `compaction.threshold`.
    Share(Share),
    /// `compaction.compact_at`.
    Tokens(u64),
}

impl Default for CompactAt {
    fn default() -> CompactAt {
        CompactAt::Share(Share(DEFAULT_COMPACT_SHARE))
    }
}

impl CompactAt {
    /// The estimated tokens above which a history of a model with `window` tokens is compacted.
    pub fn tokens(self, window: u64) -> u64 {
        match self {
            // Exact for every window below 2^53 tokens; the share is at most 1.
            CompactAt::Share(share) => (window as f64 * share.get()).floor() as u64,
            CompactAt::Tokens(tokens) => tokens,
        }
    }
}

/// A share of the context window: a finite number above 0 and at most 1.
///
/// Its own type so that the configuration stays `Eq`: the only float that breaks `Eq`, NaN, is
/// refused when read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Share(f64);

impl Eq for Share {}

impl Share {
    /// `value` if it is above 0 and at most 1.
    pub fn new(value: f64) -> Option<Share> {
        (value > 0.0 && value <= 1.0).then_some(Share(value))
    }

    pub fn get(self) -> f64 {
        self.0
    }
}

/// How the sessions' history is compacted, resolved from the configuration: present only when
/// `model.context_window` is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionPolicy {
    /// `model.context_window`.
    pub context_window: u64,
    /// The estimated tokens of a request above which the history is compacted first.
    pub compact_at: u64,
    /// The latest turns (before the one starting) that stay verbatim.
    pub keep_turns: u64,
}

/// The table as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCompaction {
    threshold: Option<Spanned<f64>>,
    compact_at: Option<Spanned<u64>>,
    keep_turns: Option<u64>,
}

/// Checks the `[compaction]` table of the file at `path` (text `text`), given the file's
/// `model.context_window`.
pub(super) fn section(
    raw: Option<Spanned<RawCompaction>>,
    window: Option<u64>,
    path: &Path,
    text: &str,
) -> Result<CompactionSection, ConfigError> {
    let Some(raw) = raw else {
        return Ok(CompactionSection::default());
    };
    let line = |offset: usize| line_at(text, offset);
    if window.is_none() {
        return Err(ConfigError::CompactionWithoutWindow {
            path: path.to_owned(),
            line: line(raw.span().start),
        });
    }
    let raw = raw.into_inner();
    let not_allowed =
        |key: &'static str, at: usize, value: String, why: String| ConfigError::Compaction {
            path: path.to_owned(),
            line: line(at),
            key,
            value,
            why,
        };
    let at = match (raw.threshold, raw.compact_at) {
        (Some(_), Some(tokens)) => {
            return Err(not_allowed(
                "compaction.compact_at",
                tokens.span().start,
                tokens.get_ref().to_string(),
                "set either compaction.threshold (a share of model.context_window) or \
                 compaction.compact_at (tokens), not both"
                    .to_owned(),
            ));
        }
        (Some(share), None) => match Share::new(*share.get_ref()) {
            Some(valid) => Some(CompactAt::Share(valid)),
            None => {
                return Err(not_allowed(
                    "compaction.threshold",
                    share.span().start,
                    share.get_ref().to_string(),
                    "it is the share of model.context_window above which the history is \
                     compacted: a number above 0 and at most 1, such as 0.8"
                        .to_owned(),
                ));
            }
        },
        (None, Some(tokens)) => {
            let value = *tokens.get_ref();
            let window = window.unwrap_or(u64::MAX);
            if value == 0 || value > window {
                return Err(not_allowed(
                    "compaction.compact_at",
                    tokens.span().start,
                    value.to_string(),
                    format!(
                        "it is the estimated tokens above which the history is compacted: at \
                         least 1 and at most model.context_window ({window})"
                    ),
                ));
            }
            Some(CompactAt::Tokens(value))
        }
        (None, None) => None,
    };
    Ok(CompactionSection {
        at,
        keep_turns: raw.keep_turns,
    })
}

#[cfg(test)]
#[path = "compaction_tests.rs"]
mod tests;
