//! What a write or an edit changed, as the editor is shown it: the tool that made it and its
//! diff, each side kept whole or not at all (RFC 0009).

use std::path::Path;

use crate::session::{Before, DIFF_TEXT_CAP, LoggedDiff};

/// The file tool that proposes a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tool {
    Write,
    Edit,
}

impl Tool {
    pub(super) fn verb(self) -> &'static str {
        match self {
            Tool::Write => "write",
            Tool::Edit => "edit",
        }
    }
}

/// What a write changed, for its result: the tool, the text before, how much it wrote, a copy
/// of it when a diff can keep it, and an edit's replacements.
pub(super) struct Change {
    pub(super) tool: Tool,
    pub(super) before: Before,
    pub(super) bytes: usize,
    pub(super) kept_after: Option<String>,
    pub(super) replacements: usize,
}

/// A copy of what a write writes, when a diff can keep it.
pub(super) fn kept(content: &str) -> Option<String> {
    (content.len() <= DIFF_TEXT_CAP).then(|| content.to_owned())
}

/// The change a write made to `path`: `after` is `None` when it was over the cap.
pub(super) fn diff_of(path: &Path, before: Before, after: Option<&str>) -> LoggedDiff {
    match after {
        Some(after) => LoggedDiff::of(path, before, after),
        None => LoggedDiff::too_large(path),
    }
}
