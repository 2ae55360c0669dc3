//! What a file tool changed in one file, as `tool/result` keeps it for the editor: the text
//! before and after, so `session/load` shows the diff the editor was shown live. Never model
//! history: the model reads the result's `output` only.
//!
//! Bounded: each side is kept whole or not at all. When either is over [`DIFF_TEXT_CAP`] bytes,
//! or the text before could not be read, the record keeps only the path and why, and the editor
//! is told so in a line instead of a diff. A record written before this field existed has no
//! `diff`, and shows as it did.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::checkpoint::DIFF_TEXT_CAP;

/// `tool/result`'s `diff`: the change a `write_file` or `edit_file` call made to one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "shown", rename_all = "snake_case")]
pub enum LoggedDiff {
    /// Both sides, whole.
    Text {
        /// The file written: the real path the writer reported.
        path: String,
        /// The text before; absent for a file the call created.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        old_text: Option<String>,
        new_text: String,
    },
    /// No text is kept, and why.
    Omitted { path: String, reason: Omission },
}

/// Why a change keeps no text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Omission {
    /// The text before or the text after is over [`DIFF_TEXT_CAP`] bytes.
    TooLarge,
    /// The file existed, but its text before the write could not be read (it was not text, or
    /// the read failed): a diff against nothing would show a rewrite as a new file.
    Unread,
}

/// What a file held before a call wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Before {
    /// Nothing: the call created it.
    Created,
    Text(String),
    /// It existed, but its text was not read.
    Unread,
}

impl LoggedDiff {
    /// The change to `path` from `before` to `after`, within [`DIFF_TEXT_CAP`].
    pub fn of(path: &Path, before: Before, after: &str) -> LoggedDiff {
        let path = path.to_string_lossy().into_owned();
        let old_text = match before {
            Before::Created => None,
            Before::Text(text) => Some(text),
            Before::Unread => {
                return LoggedDiff::Omitted {
                    path,
                    reason: Omission::Unread,
                };
            }
        };
        let over = |text: &str| text.len() > DIFF_TEXT_CAP;
        if over(after) || old_text.as_deref().is_some_and(over) {
            return LoggedDiff::Omitted {
                path,
                reason: Omission::TooLarge,
            };
        }
        LoggedDiff::Text {
            path,
            old_text,
            new_text: after.to_owned(),
        }
    }

    /// The change to `path` of a write whose text after is over [`DIFF_TEXT_CAP`].
    pub fn too_large(path: &Path) -> LoggedDiff {
        LoggedDiff::Omitted {
            path: path.to_string_lossy().into_owned(),
            reason: Omission::TooLarge,
        }
    }

    /// The file changed.
    pub fn path(&self) -> &str {
        match self {
            LoggedDiff::Text { path, .. } | LoggedDiff::Omitted { path, .. } => path,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_created_file_has_no_old_text_and_an_edit_both() {
        let created = LoggedDiff::of(Path::new("/ws/a.txt"), Before::Created, "new\n");
        assert_eq!(
            serde_json::to_value(&created).expect("json"),
            json!({"shown": "text", "path": "/ws/a.txt", "new_text": "new\n"})
        );
        let edited = LoggedDiff::of(
            Path::new("/ws/a.txt"),
            Before::Text("old\n".into()),
            "new\n",
        );
        assert_eq!(
            serde_json::to_value(&edited).expect("json"),
            json!({"shown": "text", "path": "/ws/a.txt", "old_text": "old\n", "new_text": "new\n"})
        );
        let back: LoggedDiff =
            serde_json::from_value(serde_json::to_value(&edited).expect("json")).expect("read");
        assert_eq!(back, edited);
    }

    #[test]
    fn a_side_over_the_cap_keeps_no_text_and_an_unread_before_says_so() {
        let at_cap = "x".repeat(DIFF_TEXT_CAP);
        let over = "x".repeat(DIFF_TEXT_CAP + 1);
        let path = Path::new("/ws/big");
        assert!(matches!(
            LoggedDiff::of(path, Before::Text(at_cap.clone()), &at_cap),
            LoggedDiff::Text { .. }
        ));
        for diff in [
            LoggedDiff::of(path, Before::Created, &over),
            LoggedDiff::of(path, Before::Text(over.clone()), "small"),
        ] {
            assert_eq!(
                serde_json::to_value(&diff).expect("json"),
                json!({"shown": "omitted", "path": "/ws/big", "reason": "too_large"})
            );
        }
        assert_eq!(
            LoggedDiff::of(path, Before::Unread, "small"),
            LoggedDiff::Omitted {
                path: "/ws/big".into(),
                reason: Omission::Unread
            }
        );
    }
}
