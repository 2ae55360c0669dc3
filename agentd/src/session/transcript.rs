//! The transcript `agentd sessions show` prints: every record of a session as a line or a few
//! lines for a person, in order; a child agent's records tagged with its id.

use super::event::{AgentOutcome, Event, Record, ToolStatus, plan_text};

/// A readable transcript of the whole session.
pub fn transcript(records: &[Record]) -> String {
    let mut out = String::new();
    for r in records {
        let line = match &r.event {
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
            Event::TurnStarted { .. } => continue,
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
            } => {
                let mut s = String::new();
                if let Some(reasoning) = reasoning.as_ref().filter(|r| !r.text.is_empty()) {
                    s.push_str(&format!("  thinking: {}", reasoning.text));
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
                if *incomplete {
                    s.push_str("\n  (the answer broke off here)");
                }
                s
            }
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
            } => {
                let mut s = format!(
                    "  checkpoint {label}: {}, {}",
                    counted(*files, "file", "files"),
                    counted(*bytes, "byte", "bytes")
                );
                if !left_out.is_empty() {
                    s.push_str(&format!(", {} left out", left_out.len()));
                }
                if *over_cap {
                    s.push_str(" (over the size cap)");
                }
                s
            }
            Event::TurnChanges { turn, changes } => {
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
            Event::CheckpointRestored {
                label,
                changes,
                still_differs,
                by,
                ..
            } => {
                let mut s = format!(
                    "  restored checkpoint {label} (by {}): {} changed",
                    by.as_str(),
                    counted(changes.len() as u64, "path", "paths")
                );
                for path in still_differs {
                    s.push_str(&format!("\n    still differs: {}", path.display()));
                }
                s
            }
        };
        if let Some(agent) = &r.agent {
            out.push_str(&format!("  [{agent}]"));
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
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
