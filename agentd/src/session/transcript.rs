//! The transcript `agentd sessions show` prints: every record of a session as a line or a few
//! lines for a person, in order; a child agent's records tagged with its id.

use std::path::PathBuf;

use super::event::{AgentOutcome, Event, LoggedToolCall, Record, ToolStatus, plan_text};
use crate::checkpoint::Change;

/// A readable transcript of the whole session.
pub fn transcript(records: &[Record]) -> String {
    let mut out = String::new();
    for r in records {
        let Some(line) = line_of(&r.event) else {
            continue;
        };
        if let Some(agent) = &r.agent {
            out.push_str(&format!("  [{agent}]"));
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// The lines of one record, without its agent's tag; `None` for a record the transcript leaves
/// out. This tells the conversation: prompts, the model's requests and answers, tool calls.
fn line_of(event: &Event) -> Option<String> {
    Some(match event {
        Event::SessionCreated { id, cwd, agent } => {
            format!("session {id} in {} ({agent})", cwd.display())
        }
        Event::PromptSubmitted { turn, text } => format!("[turn {turn}] user: {text}"),
        Event::CommandRun { turn, input, .. } => format!("[turn {turn}] user: {input}"),
        Event::CommandPrompt { text, .. } => {
            format!("  agentd's prompt:\n{}", indent(text, "    "))
        }
        Event::CommandOutput { text, .. } => format!("  agentd:\n{}", indent(text, "    ")),
        Event::PlanUpdated { entries, .. } => format!("  plan:\n{}", plan_text(entries)),
        Event::PromptResources { resources, .. } => {
            let each: Vec<String> = resources
                .iter()
                .map(|r| match (&r.text, &r.not_included) {
                    (Some(body), _) => format!("{} ({} bytes)", r.uri, body.len()),
                    (None, why) => {
                        format!("{} (not included: {})", r.uri, why.as_deref().unwrap_or(""))
                    }
                })
                .collect();
            format!("  resources: {}", each.join(", "))
        }
        Event::TurnStarted { .. } => return None,
        Event::ModelRequest {
            step, model, tools, ..
        } => format!(
            "  model request {step} to {model} (tools: {})",
            tools.join(", ")
        ),
        Event::ModelOutput {
            text,
            reasoning,
            tool_calls,
            finish,
            incomplete,
            ..
        } => answer_lines(
            reasoning.as_ref().map(|r| r.text.as_str()),
            text,
            tool_calls,
            finish,
            *incomplete,
        ),
        Event::ModelError { message, kind, .. } => match kind {
            Some(kind) => format!("  model error ({kind}): {message}"),
            None => format!("  model error: {message}"),
        },
        Event::ToolCall { title, .. } => format!("  tool: {title}"),
        Event::ToolResult { status, output, .. } => {
            let status = match status {
                ToolStatus::Completed => "completed",
                ToolStatus::Failed => "failed",
            };
            format!("  result ({status}):\n{}", indent(output, "    "))
        }
        Event::TurnEnded { turn, stop_reason } => {
            format!("[turn {turn}] ended: {stop_reason}")
        }
        Event::HistoryCompacted {
            through,
            summary,
            model,
            estimate_before,
            estimate_after,
            ..
        } => format!(
            "  history compacted: turns 1-{through} summarised by {model} (estimated \
             {estimate_before} -> {estimate_after} tokens):\n{}",
            indent(summary, "    ")
        ),
        _ => return settings_line(event),
    })
}

/// The lines of a record that is not the conversation itself: a setting, an approval, a child
/// agent, a checkpoint.
fn settings_line(event: &Event) -> Option<String> {
    Some(match event {
        Event::SandboxModeSet { mode } => format!("  sandbox mode: {}", mode.as_str()),
        Event::ApprovalPolicySet { policy } => {
            format!("  approval policy: {}", policy.as_str())
        }
        Event::ModelSelected { name } => format!("  model: {name}"),
        Event::ApprovalAsked { tool, reason, .. } => match reason {
            Some(reason) => format!("  approval asked for {tool}: {reason}"),
            None => format!("  approval asked for {tool}"),
        },
        Event::ApprovalDecided { outcome, rule, .. } => match rule {
            Some(rule) => format!("  approval: {} (by rule {rule})", outcome.as_str()),
            None => format!("  approval: {}", outcome.as_str()),
        },
        Event::ApprovalRule { scope, allow, .. } => {
            let verb = if *allow { "allow" } else { "reject" };
            format!("  approval rule: always {verb} {}", scope.name())
        }
        Event::TaskStopped { text, .. } => format!("  {text}"),
        Event::AgentStarted {
            agent,
            parent,
            depth,
            persona,
            ..
        } => format!("  {agent} started by {parent} (persona {persona}, depth {depth})"),
        Event::AgentEnded {
            agent,
            outcome,
            reason,
            ..
        } => match (outcome, reason) {
            (AgentOutcome::Failed, Some(reason)) => format!("  {agent} failed: {reason}"),
            _ => format!("  {agent} ended: {}", outcome.as_str()),
        },
        Event::AgentOutput { agent, text } => format!("  {agent} output: {text}"),
        Event::AgentInjectionDropped { agent, text } => {
            format!("  {agent} dropped a held message: {text}")
        }
        Event::CheckpointRecorded {
            label,
            files,
            bytes,
            left_out,
            over_cap,
            ..
        } => checkpoint_line(label, *files, *bytes, left_out.len(), *over_cap),
        Event::TurnChanges { turn, changes } => changes_lines(*turn, changes),
        Event::CheckpointRestored {
            label,
            changes,
            still_differs,
            by,
            ..
        } => restored_lines(label, by.as_str(), changes, still_differs),
        // The conversation's records, which `line_of` tells; named, not `_`, so that a new kind
        // of record does not compile until the transcript says how it is shown.
        Event::SessionCreated { .. }
        | Event::PromptSubmitted { .. }
        | Event::CommandRun { .. }
        | Event::CommandPrompt { .. }
        | Event::CommandOutput { .. }
        | Event::PlanUpdated { .. }
        | Event::PromptResources { .. }
        | Event::TurnStarted { .. }
        | Event::ModelRequest { .. }
        | Event::ModelOutput { .. }
        | Event::ModelError { .. }
        | Event::ToolCall { .. }
        | Event::ToolResult { .. }
        | Event::TurnEnded { .. }
        | Event::HistoryCompacted { .. } => return None,
    })
}

/// The line of a checkpoint recorded: its label, its size, what it left out.
fn checkpoint_line(label: &str, files: u64, bytes: u64, left_out: usize, over_cap: bool) -> String {
    let mut s = format!(
        "  checkpoint {label}: {}, {}",
        counted(files, "file", "files"),
        counted(bytes, "byte", "bytes")
    );
    if left_out > 0 {
        s.push_str(&format!(", {left_out} left out"));
    }
    if over_cap {
        s.push_str(" (over the size cap)");
    }
    s
}

/// The lines of a model's answer: its thinking, its text and its calls, or that it gave none;
/// and whether it broke off.
fn answer_lines(
    reasoning: Option<&str>,
    text: &str,
    tool_calls: &[LoggedToolCall],
    finish: &str,
    incomplete: bool,
) -> String {
    let mut s = String::new();
    if let Some(reasoning) = reasoning.filter(|r| !r.is_empty()) {
        s.push_str(&format!("  thinking: {reasoning}"));
    }
    if !text.is_empty() {
        if !s.is_empty() {
            s.push('\n');
        }
        s.push_str(&format!("  assistant: {text}"));
    }
    for call in tool_calls {
        if !s.is_empty() {
            s.push('\n');
        }
        s.push_str(&format!("  calls {}({})", call.name, call.arguments));
    }
    if s.is_empty() {
        s = format!("  assistant: (nothing; finish {finish})");
    }
    if incomplete {
        s.push_str("\n  (the answer broke off here)");
    }
    s
}

/// The lines of what turn `turn` changed: how many paths, then each.
fn changes_lines(turn: u64, changes: &[Change]) -> String {
    let mut s = if changes.is_empty() {
        format!("  turn {turn} changed nothing")
    } else {
        format!(
            "  turn {turn} changed {}",
            counted(changes.len() as u64, "path", "paths")
        )
    };
    for change in changes {
        s.push_str(&format!(
            "\n    {} {}",
            change.kind.as_str(),
            change.path.display()
        ));
    }
    s
}

/// The lines of a restore of checkpoint `label` (asked for `by`): how many paths it changed,
/// then each path that still differs.
fn restored_lines(label: &str, by: &str, changes: &[Change], still_differs: &[PathBuf]) -> String {
    let mut s = format!(
        "  restored checkpoint {label} (by {by}): {} changed",
        counted(changes.len() as u64, "path", "paths")
    );
    for path in still_differs {
        s.push_str(&format!("\n    still differs: {}", path.display()));
    }
    s
}

fn indent(text: &str, prefix: &str) -> String {
    text.lines()
        .map(|l| format!("{prefix}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `1 file`, `2 files`.
fn counted(n: u64, one: &str, many: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {many}")
    }
}
