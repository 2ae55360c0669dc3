//! What a person is shown of a tool call's result, beside what the model reads: derived from the
//! `tool/result` record alone (its status, facts, output and diff), for the live stream and for
//! `session/load` alike, so a replay shows what was shown live.
//!
//! The model's text stays whole in the log and in the model's history. The editor's
//! `tool_call_update` carries, each as its own content block and in this order:
//!
//! 1. [`person_lines`]: how the sandbox stopped the call, when it did (a denial, a runner
//!    failure, a refusal), then what the sandbox did not enforce, when the enforcement was
//!    partial. Nothing for a call that simply ran.
//! 2. For a write, [`diff_content`]: the ACP diff, or a line saying why there is none.
//! 3. [`editor_output`]: the model's text without its escalation hint, an instruction to the
//!    model that the first line says to a person.
//!
//! Its `locations` ([`locations`]) name the file a file tool read or wrote, with the first line
//! shown or changed.

use agent_client_protocol::v1::schema::{ContentBlock, Diff, ToolCallContent, ToolCallLocation};
use confine_protocol::Mode;
use serde_json::Value;

use crate::denial::Kind;
use crate::session::{DIFF_TEXT_CAP, LoggedDiff, Omission, ToolStatus};
use crate::tools::{ESCALATION_HINT_PREFIX, denied_access};

/// The content of the editor's `tool_call_update` for a result: [`person_lines`], the diff,
/// then [`editor_output`], each its own block.
pub fn content(
    status: ToolStatus,
    facts: &Value,
    output: &str,
    diff: Option<&LoggedDiff>,
) -> Vec<ToolCallContent> {
    let text = |text: String| ToolCallContent::from(ContentBlock::from(text));
    let mut content: Vec<ToolCallContent> = person_lines(status, facts, output)
        .into_iter()
        .map(text)
        .collect();
    content.extend(diff.map(diff_content));
    content.push(text(editor_output(facts, output)));
    content.extend(shown_parts(facts));
    content
}

/// The parts of an MCP result the editor is shown as they are (an image, a resource), after the
/// text that names them; a part ACP cannot read is left out (the text names it still).
fn shown_parts(facts: &Value) -> impl Iterator<Item = ToolCallContent> + '_ {
    facts
        .get(crate::tools::SHOWN_CONTENT)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|part| serde_json::from_value::<ContentBlock>(part.clone()).ok())
        .map(ToolCallContent::from)
}

/// The lines a person reads first about a tool call that ended with `status`, `facts` and the
/// model's text `output`: at most one, on how the sandbox stopped it. What the sandbox did not
/// enforce is told once per session instead ([`enforcement_gaps`]).
pub fn person_lines(status: ToolStatus, facts: &Value, output: &str) -> Vec<String> {
    ending_line(status, facts, output).into_iter().collect()
}

/// How the sandbox stopped the call, if it did: the helper refused it, its runner failed, or
/// the confinement denied it something.
fn ending_line(status: ToolStatus, facts: &Value, output: &str) -> Option<String> {
    if let Some(reason) = facts.get("refused").and_then(Value::as_str) {
        return Some(format!("Refused by the sandbox: {reason}."));
    }
    if let Some(failure) = facts.get("runner_failure").filter(|f| f.is_object()) {
        let stage = failure.get("stage").and_then(Value::as_str).unwrap_or("");
        return Some(match stage {
            "unavailable" => "Not run: no sandbox works on this machine, and agentd runs \
                              nothing unconfined; below is what to install."
                .to_owned(),
            "helper-exited" => "The sandbox went away (confine-helper exited); below is what \
                                became of the call."
                .to_owned(),
            stage => format!(
                "Not run: the sandbox failed to set it up (at {stage}), a problem of the \
                 sandbox, not of the call; the details are below."
            ),
        });
    }
    if facts.get("denied").and_then(Value::as_bool) != Some(true) {
        return None;
    }
    let word = facts.get("mode").and_then(Value::as_str).unwrap_or("");
    let what: Vec<&str> = facts
        .get("denials")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|kind| match (Kind::from_word(kind), word.parse::<Mode>()) {
            (Some(kind), Ok(mode)) => denied_access(kind, mode),
            _ => kind,
        })
        .collect();
    let blocked = match status {
        ToolStatus::Failed => "Blocked by the sandbox",
        ToolStatus::Completed => "Partly blocked by the sandbox",
    };
    let what = if what.is_empty() {
        String::new()
    } else {
        format!(": {}", what.join(", "))
    };
    let retry = if trailing_markers(output).any(is_escalation_hint) {
        "; the agent may ask to retry with more access"
    } else {
        ""
    };
    Some(format!("{blocked} ({word}){what}{retry}."))
}

/// The facts of a call as `rawOutput` carries them: a few lines a client that prints
/// `rawOutput` shows beside the call's text without folding the output away. Every fact that
/// says something happened, each as one short value: `exit`, `mode`, `backend`, `enforcement` by
/// its level, `denials` and `denied_paths` when there are any, `refused`, `runner_failure` by its
/// stage, `timed_out`/`cancelled`/`denied`/`is_error` when true, and the other short facts of a
/// file or MCP call (path, server, tool, task). Nulls, falses, empty lists, and what is long (the
/// gaps' sentences, the layers, the parts shown as content, the lines of a read) are left out:
/// the full facts are the update's `_meta.agentd.facts` and the log's.
pub fn compact_facts(facts: &Value) -> Value {
    let Some(map) = facts.as_object() else {
        return facts.clone();
    };
    let mut out = serde_json::Map::new();
    for (key, value) in map {
        let kept = match (key.as_str(), value) {
            (_, Value::Null | Value::Bool(false)) => None,
            ("enforcement", enforcement) => enforcement.get("level").cloned(),
            ("runner_failure", failure) => failure.get("stage").cloned(),
            ("exit", exit) => Some(exit.clone()),
            (_, Value::Array(items)) if items.is_empty() => None,
            (_, Value::Array(items))
                if items.len() <= COMPACT_LIST && items.iter().all(Value::is_string) =>
            {
                Some(value.clone())
            }
            (_, Value::Array(_) | Value::Object(_)) => None,
            (_, Value::String(text)) if text.len() > COMPACT_TEXT => None,
            _ => Some(value.clone()),
        };
        if let Some(kept) = kept {
            out.insert(key.clone(), kept);
        }
    }
    Value::Object(out)
}

/// The most items of a list of facts `rawOutput` keeps ([`compact_facts`]).
const COMPACT_LIST: usize = 8;
/// The longest text fact `rawOutput` keeps ([`compact_facts`]).
const COMPACT_TEXT: usize = 400;

/// What the sandbox did not enforce for a call, when its facts say the enforcement was partial:
/// the backend and each gap as the helper wrote it. Told once per session as a notice of its
/// own (`notices::enforcement`), not on every result.
pub fn enforcement_gaps(facts: &Value) -> Option<(&str, Vec<&str>)> {
    let enforcement = facts.get("enforcement")?;
    if enforcement.get("level").and_then(Value::as_str) != Some("partial") {
        return None;
    }
    let gaps: Vec<&str> = gaps(enforcement).collect();
    let backend = facts.get("backend").and_then(Value::as_str).unwrap_or("");
    Some((backend, gaps))
}

/// One gap in plain words for a person: what a command can do because of it. The helper's own
/// sentence where there is no plainer one.
pub fn plain_gap(gap: &str) -> String {
    let name = gap_name(gap);
    if let Some(repository) = name.strip_prefix("repository ") {
        return format!(
            "a command could create a git repository at {repository} (there is none yet), and \
             git run there later would use its config and hooks"
        );
    }
    match name {
        "file metadata outside writable roots" => "a command can change the permissions, owner, \
            times and extended attributes of files outside the writable roots (Landlock does not \
            control them)"
            .to_owned(),
        "process isolation" => "a command can see other processes' command lines and System V \
            IPC keys in /proc (no PID or IPC namespace)"
            .to_owned(),
        _ => gap.to_owned(),
    }
}

/// What a command's `enforcement` fact says was not enforced, each gap in the helper's sentence.
pub(super) fn gaps(enforcement: &Value) -> impl Iterator<Item = &str> {
    enforcement
        .get("missing")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

/// The name of one enforcement gap: what it says before its first `: ` outside parentheses
/// (`process isolation: other processes' …` is `process isolation`), or all of it.
fn gap_name(gap: &str) -> &str {
    let mut depth = 0usize;
    for (i, c) in gap.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ':' if depth == 0 && gap[i + 1..].starts_with(' ') => return &gap[..i],
            _ => {}
        }
    }
    gap
}

/// The model's text as the editor shows it: without the escalation hint, which only the model
/// acts on (the line of [`person_lines`] tells a person the same). Only a hint among the end
/// markers of a denied call is left out, so a command that printed such a line keeps it.
pub fn editor_output(facts: &Value, output: &str) -> String {
    if facts.get("denied").and_then(Value::as_bool) != Some(true)
        || !trailing_markers(output).any(is_escalation_hint)
    {
        return output.to_owned();
    }
    let lines: Vec<&str> = output.split('\n').collect();
    let markers = lines
        .iter()
        .rev()
        .take_while(|line| line.starts_with('['))
        .count();
    let cut = lines.len() - markers;
    lines
        .iter()
        .enumerate()
        .filter(|(at, line)| *at < cut || !is_escalation_hint(line))
        .map(|(_, line)| *line)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The last lines of `output` that are agentd's markers (each starts with `[`), last first.
fn trailing_markers(output: &str) -> impl Iterator<Item = &str> {
    output
        .split('\n')
        .rev()
        .take_while(|line| line.starts_with('['))
}

fn is_escalation_hint(line: &str) -> bool {
    line.starts_with(ESCALATION_HINT_PREFIX)
}

/// The change a write made, as the editor shows it: an ACP diff (no `oldText` for a file the
/// call created), or a line saying why there is none.
pub fn diff_content(diff: &LoggedDiff) -> ToolCallContent {
    match diff {
        LoggedDiff::Text {
            path,
            old_text,
            new_text,
        } => ToolCallContent::from(Diff::new(path, new_text.clone()).old_text(old_text.clone())),
        LoggedDiff::Omitted { reason, .. } => {
            let why = match reason {
                Omission::TooLarge => format!(
                    "No diff shown: the text before or after is over {} KiB.",
                    DIFF_TEXT_CAP / 1024
                ),
                Omission::Unread => {
                    "No diff shown: the file's text before the write could not be read.".to_owned()
                }
            };
            ToolCallContent::from(ContentBlock::from(why))
        }
    }
}

/// The file a file tool read or wrote (its facts' `path`, the real path), so the editor can
/// follow along and reload what agentd wrote on disk: in confined modes the editor's own file
/// access is not used for writes, and this is how it learns of them. The line is the first one
/// a read showed, or the first one a write changed.
pub fn locations(facts: &Value, diff: Option<&LoggedDiff>) -> Option<Vec<ToolCallLocation>> {
    let path = facts.get("path")?.as_str()?;
    if !std::path::Path::new(path).is_absolute() {
        return None;
    }
    let read_line = || {
        let first = facts.pointer("/lines/0")?.as_u64()?;
        let last = facts.pointer("/lines/1")?.as_u64()?;
        (first >= 1 && last >= first).then_some(first)
    };
    let line = match diff {
        Some(LoggedDiff::Text {
            old_text, new_text, ..
        }) => first_changed_line(old_text.as_deref().unwrap_or(""), new_text),
        Some(LoggedDiff::Omitted { .. }) => None,
        None => read_line(),
    };
    let line = line.and_then(|line| u32::try_from(line).ok());
    Some(vec![ToolCallLocation::new(path).line(line)])
}

/// The first line (from 1) where `new` differs from `old`; `None` when they are the same.
fn first_changed_line(old: &str, new: &str) -> Option<u64> {
    if old == new {
        return None;
    }
    let same = old
        .split_inclusive('\n')
        .zip(new.split_inclusive('\n'))
        .take_while(|(a, b)| a == b)
        .count() as u64;
    let lines = new.split_inclusive('\n').count() as u64;
    Some((same + 1).min(lines.max(1)))
}

#[cfg(test)]
#[path = "shown_tests.rs"]
mod tests;
