//! How `agentd sessions audit` prints a session's audit trail ([`crate::session::audit`]): a
//! block of lines per entry for a person, or one JSON document (`--json`) for a program. Both
//! are terminal-safe: the trail quotes commands and paths a model chose.

use serde_json::Value;

use crate::checkpoint::Change;
use crate::session::ToolStatus;
use crate::session::audit::{Approval, Call, Entry, Sandbox, TurnChanges, Undo};
use crate::terminal;

/// The trail as text: one block per entry, a blank line between blocks; terminal-safe.
pub fn text(entries: &[Entry]) -> String {
    if entries.is_empty() {
        return "no tool calls in this session\n".to_owned();
    }
    let blocks: Vec<String> = entries
        .iter()
        .map(|entry| match entry {
            Entry::Call(call) => call_text(call),
            Entry::Changes(changes) => changes_text(changes),
            Entry::Undo(undo) => undo_text(undo),
        })
        .collect();
    terminal::visible(&blocks.join("\n")).into_owned()
}

/// The trail as one JSON document on one line: the array of entries, each with its `v`;
/// terminal-safe ([`terminal::json_line`]).
pub fn json(entries: &[Entry]) -> Result<String, serde_json::Error> {
    terminal::json_line(entries).map(|line| line + "\n")
}

fn call_text(call: &Call) -> String {
    let who = match &call.persona {
        Some(persona) => format!("{} ({persona})", call.agent),
        None => call.agent.clone(),
    };
    let mut lines = vec![format!(
        "#{} {} turn {} {who} {} {}",
        call.seq, call.at, call.turn, call.tool, call.call_id
    )];
    lines.extend(target_lines(call));
    lines.push(format!("  mode: {}", mode_text(call)));
    lines.push(format!(
        "  approval: {}",
        approval_text(call.approval.as_ref())
    ));
    if let Some(sandbox) = sandbox_text(&call.sandbox) {
        lines.push(format!("  sandbox: {sandbox}"));
    }
    if !call.sandbox.denials.is_empty() {
        let paths = match call.sandbox.denied_paths.as_slice() {
            [] => String::new(),
            paths => format!(": {}", paths.join(", ")),
        };
        lines.push(format!(
            "  denied: {}{paths}",
            call.sandbox.denials.join(", ")
        ));
    }
    lines.push(format!("  ended: {}", ended_text(call)));
    lines.join("\n") + "\n"
}

fn target_lines(call: &Call) -> Vec<String> {
    let t = &call.target;
    let mut lines = Vec::new();
    if let Some(command) = &t.command {
        let how = if t.background { " (background)" } else { "" };
        lines.push(format!("  command{how}: {command}"));
    }
    if let Some(path) = &t.path {
        match &t.resolved {
            Some(resolved) => lines.push(format!("  path: {path} ({resolved})")),
            None => lines.push(format!("  path: {path}")),
        }
    }
    if let (Some(server), Some(tool)) = (&t.mcp_server, &t.mcp_tool) {
        lines.push(format!("  mcp: server {server}, tool {tool}"));
    }
    if let Some(persona) = &t.persona {
        match &t.child {
            Some(child) => lines.push(format!("  child: {child} ({persona})")),
            None => lines.push(format!("  child: {persona}")),
        }
    }
    if let Some(task) = &t.task_id {
        lines.push(format!("  task: {task}"));
    }
    lines
}

fn mode_text(call: &Call) -> String {
    let asked = call.escalation.as_ref().map(|e| {
        let why = e
            .justification
            .as_deref()
            .map(|j| format!(": {j}"))
            .unwrap_or_default();
        format!("{} asked for{why}", e.mode)
    });
    match (&call.mode, call.mode_from, asked) {
        (Some(mode), Some("escalation"), _) => format!("{mode}, granted as an escalation"),
        (Some(mode), _, Some(asked)) => format!("{mode}, the session's ({asked}; not granted)"),
        (Some(mode), _, None) => format!("{mode}, the session's"),
        (None, _, Some(asked)) => format!("unknown ({asked})"),
        (None, _, None) => "unknown: the log holds no result".to_owned(),
    }
}

fn approval_text(approval: Option<&Approval>) -> String {
    let Some(approval) = approval else {
        return "not asked".to_owned();
    };
    let reason = approval
        .reason
        .as_deref()
        .map(|r| format!(" ({r})"))
        .unwrap_or_default();
    let Some(outcome) = approval.outcome else {
        return format!("asked{reason}, no decision recorded");
    };
    let by = match (approval.by, &approval.rule) {
        (Some("rule"), Some(rule)) => format!("by the rule {}: {}", rule.id, rule.scope),
        (Some("policy"), _) => "by the approval policy never, nobody asked".to_owned(),
        (Some("nobody"), _) => "nobody answered".to_owned(),
        _ => "by the user".to_owned(),
    };
    let made = match &approval.rule {
        Some(rule) if rule.made_here => format!(
            "; made the rule {}: {} ({})",
            rule.id,
            rule.scope,
            if rule.allow { "allow" } else { "reject" }
        ),
        _ => String::new(),
    };
    format!("asked{reason}; {} {by}{made}", outcome.as_str())
}

fn sandbox_text(sandbox: &Sandbox) -> Option<String> {
    let backend = sandbox.backend.as_deref()?;
    let enforcement = match sandbox.enforcement.as_deref() {
        None => "nothing enforced".to_owned(),
        Some(level) if sandbox.missing.is_empty() => format!("{level} enforcement"),
        Some(level) => format!(
            "{level} enforcement, missing {}",
            sandbox.missing.join(", ")
        ),
    };
    let layers = match sandbox.layers.as_slice() {
        [] => String::new(),
        layers => format!(" ({})", layers.join(", ")),
    };
    Some(format!("{backend}, {enforcement}{layers}"))
}

fn exit_text(exit: Option<&Value>) -> Option<String> {
    let exit = exit?;
    if let Some(code) = exit.get("code") {
        return Some(format!("exit code {code}"));
    }
    exit.get("signal").map(|signal| format!("signal {signal}"))
}

fn ended_text(call: &Call) -> String {
    let sandbox = &call.sandbox;
    let exit = exit_text(sandbox.exit.as_ref());
    let mut what = match call.ended {
        "runner-failure" => match &sandbox.runner_failure {
            Some(f) => format!(
                "runner failure at stage {}, nothing ran: {}",
                f.stage, f.detail
            ),
            None => "runner failure".to_owned(),
        },
        "refused" => format!(
            "refused by the helper: {}",
            sandbox.refused.as_deref().unwrap_or_default()
        ),
        "timed-out" => format!("timed out, {}", exit.unwrap_or_default()),
        "cancelled" => match exit {
            Some(exit) => format!("cancelled, {exit}"),
            None => "cancelled".to_owned(),
        },
        "started" => "started in the background; the log holds no end of it".to_owned(),
        "exited" => exit.unwrap_or_default(),
        "not-approved" => "did not run: not approved".to_owned(),
        "denied" => "did not run: denied before it ran".to_owned(),
        "no-result" => "the log holds no result (agentd stopped, or it still runs)".to_owned(),
        other => match call.status {
            Some(ToolStatus::Completed) => "completed".to_owned(),
            _ => other.to_owned(),
        },
    };
    if let Some(seq) = sandbox.ended_at_seq {
        what.push_str(&format!(" (its end as record #{seq} holds it)"));
    }
    if let Some(ms) = call.duration_ms {
        what.push_str(&format!(", {ms} ms (from the log's record times)"));
    }
    what
}

/// A line per changed path: how, then the path.
fn change_lines(changes: &[Change]) -> Vec<String> {
    changes
        .iter()
        .map(|c| format!("  {} {}", c.kind.as_str(), c.path.display()))
        .collect()
}

fn changes_text(changes: &TurnChanges) -> String {
    let count = changes.changes.len();
    let noun = if count == 1 { "path" } else { "paths" };
    let mut lines = vec![format!(
        "#{} {} turn {} changed {count} {noun}",
        changes.seq, changes.at, changes.turn
    )];
    lines.extend(change_lines(&changes.changes));
    lines.join("\n") + "\n"
}

fn undo_text(undo: &Undo) -> String {
    let mut lines = vec![format!(
        "#{} {} undo to the start of turn {} (checkpoint {}), asked by the {}: {} changes",
        undo.seq,
        undo.at,
        undo.turn,
        undo.label,
        undo.by,
        undo.changes.len()
    )];
    lines.extend(change_lines(&undo.changes));
    if !undo.still_differs.is_empty() {
        lines.push(format!(
            "  still differs after the restore: {}",
            undo.still_differs.join(", ")
        ));
    }
    lines.join("\n") + "\n"
}
