//! An `edit_file` no one is asked about, in one confined run: the helper's file program reads
//! the file, agentd makes the edit in its text, and the program writes the result, unless the
//! file changed meanwhile, in which case nothing is written and the call says so. A call a
//! person approves reads first and writes later, since the person is shown the change between
//! the two (`propose_edit`, `commit`).

use std::path::Path;

use confine_protocol::Mode;
use serde_json::json;

use super::change::{Change, Tool, kept};
use super::confined::{EditEnd, OpError, confined_edit};
use super::said::{file_facts, op_failed, said_written};
use super::text::{NotText, apply_edit, as_text};
use crate::session::Before;
use crate::tools::args::EditArgs;
use crate::tools::call::ToolResult;
use crate::tools::env::ToolEnv;

/// What agentd made of the file's text.
enum Made {
    NotText(NotText),
    /// The edit does not apply, and why.
    NotApplied(String),
    /// The edit made: the text before, and of the text after its length and a copy when a
    /// diff can keep it (the text itself goes to the program).
    Edited {
        before: String,
        bytes: usize,
        kept_after: Option<String>,
        replacements: usize,
    },
}

impl Made {
    /// Agentd's edit of the text the program sent, and the answer to send it: the text after,
    /// or nothing.
    fn of(old: Vec<u8>, args: &EditArgs) -> (Made, Option<Vec<u8>>) {
        let text = match as_text(old) {
            Ok(text) => text,
            Err(why) => return (Made::NotText(why), None),
        };
        match apply_edit(&text, &args.old_string, &args.new_string, args.replace_all) {
            Ok((after, replacements)) => {
                let made = Made::Edited {
                    before: text,
                    bytes: after.len(),
                    kept_after: kept(&after),
                    replacements,
                };
                (made, Some(after.into_bytes()))
            }
            Err(why) => (Made::NotApplied(why.to_string()), None),
        }
    }
}

/// Edits `target` (the fence's real path) under `mode` in one confined run, and words the result
/// as a read and then a write would have.
pub(super) async fn in_one_run(
    env: &ToolEnv,
    target: &Path,
    args: &EditArgs,
    mode: Mode,
) -> ToolResult {
    let mut made = None;
    let decide = |old: Vec<u8>| {
        let (edit, answer) = Made::of(old, args);
        made = Some(edit);
        answer
    };
    let end = confined_edit(env, target, mode, decide).await;
    match (end, made) {
        (Err(error), _) => op_failed(error, mode, target, "edit"),
        (
            Ok(EditEnd::Written(written)),
            Some(Made::Edited {
                before,
                bytes,
                kept_after,
                replacements,
            }),
        ) => {
            let change = Change {
                tool: Tool::Edit,
                before: Before::Text(before),
                bytes,
                kept_after,
                replacements,
            };
            said_written(&written, change, mode)
        }
        (Ok(EditEnd::Kept(_, facts)), Some(Made::NotText(why))) => op_failed(
            OpError::Failed(why.to_string(), Some(facts)),
            mode,
            target,
            "edit",
        ),
        (Ok(EditEnd::Kept(path, facts)), Some(Made::NotApplied(why))) => ToolResult::failed(
            format!("cannot edit {}: {why}", target.display()),
            file_facts(mode, &path, Some(&facts)).into(),
        ),
        // Kept after an answer that could not be sent, or a report that does not match the
        // answer given.
        (Ok(_), _) => ToolResult::failed(
            format!(
                "cannot edit {}: the file program's report does not match the answer it was \
                 given; look at the file before editing it again",
                target.display()
            ),
            json!({ "mode": mode.as_str(), "path": target.to_string_lossy() }),
        ),
    }
}
