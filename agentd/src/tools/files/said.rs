//! How a file tool's result is worded: a refusal by the fence, an operation that did not
//! happen, a write that did, and the facts each carries.

use std::path::Path;

use confine_protocol::Mode;
use serde_json::{Map, Value, json};

use super::change::{Change, Tool, diff_of};
use super::confined::{OpError, Written};
use super::fence::Refusal;
use crate::command::Facts;
use crate::tools::call::ToolResult;
use crate::tools::output::denial_marker;

/// The result of a write the fence refused.
pub(super) fn refused(refusal: Refusal, mode: Mode, given: &str, verb: &str) -> ToolResult {
    match refusal {
        Refusal::Denied(kind, why) => ToolResult::failed(
            format!("{why}\n{}", denial_marker(kind, mode)),
            json!({
                "mode": mode.as_str(),
                "path": given,
                "denied": true,
                "denials": [kind.as_str()],
            }),
        ),
        Refusal::Error(why) => ToolResult::failed(
            format!("cannot {verb} {given}: {why}"),
            json!({ "mode": mode.as_str(), "path": given }),
        ),
    }
}

/// The facts of a file operation: the run's (when confined), the mode and the path.
pub(super) fn file_facts(mode: Mode, path: &Path, run: Option<&Facts>) -> Map<String, Value> {
    let mut facts = match run.map(Facts::to_value) {
        Some(Value::Object(facts)) => facts,
        _ => Map::new(),
    };
    facts.insert("mode".to_owned(), json!(mode.as_str()));
    facts.insert("path".to_owned(), json!(path.to_string_lossy()));
    facts
}

/// The result of a read or write that did not happen.
pub(super) fn op_failed(error: OpError, mode: Mode, path: &Path, verb: &str) -> ToolResult {
    match error {
        OpError::Denied(why, run) => {
            let markers: Vec<String> = run
                .denial
                .iter()
                .flat_map(|denial| &denial.kinds)
                .map(|&kind| denial_marker(kind, mode))
                .chain(
                    run.credential_notes
                        .iter()
                        .map(|n| format!("[sandbox: {n}]")),
                )
                .collect();
            ToolResult::failed(
                format!(
                    "cannot {verb} {}: {why}\n{}",
                    path.display(),
                    markers.join("\n")
                ),
                file_facts(mode, path, Some(&run)).into(),
            )
        }
        OpError::Failed(why, run) => ToolResult::failed(
            format!("cannot {verb} {}: {why}", path.display()),
            file_facts(mode, path, run.as_deref()).into(),
        ),
    }
}

/// The result of a write that was made: what it did, and the change as the editor is shown it.
pub(super) fn said_written(written: &Written, change: Change, mode: Mode) -> ToolResult {
    let Change {
        tool,
        before,
        bytes,
        kept_after,
        replacements,
    } = change;
    let mut facts = file_facts(mode, &written.path, written.facts.as_deref());
    facts.insert("bytes".to_owned(), json!(bytes));
    let diff = diff_of(&written.path, before, kept_after.as_deref());
    let text = match tool {
        Tool::Write => {
            let verb = if written.created {
                "Created"
            } else {
                "Overwrote"
            };
            format!("{verb} {} ({bytes} bytes)", written.path.display())
        }
        Tool::Edit => {
            facts.insert("replacements".to_owned(), json!(replacements));
            let plural = if replacements == 1 { "" } else { "s" };
            format!(
                "Edited {}: {replacements} replacement{plural}",
                written.path.display()
            )
        }
    };
    ToolResult::completed(text, facts.into()).with_diff(diff)
}
