//! The audit trail of a session (`agentd sessions audit`, RFC 0019): one [`Entry`] per tool
//! call, in the order the calls were recorded, the top-level agent's and every child agent's,
//! each saying what ran, under which mode and why, who approved it, how the sandbox held it and
//! how it ended; one per turn whose checkpoints recorded the files it changed (`turn/changes`,
//! commands' changes included); one per undo (`checkpoint/restored`).
//!
//! Everything is read from the session's log, which agentd alone writes: a `tool/call`, its
//! `approval/asked`, `approval/rule` and `approval/decided`, the facts of its `tool/result`
//! (what the helper reported, on a channel the command never holds), a background task's end
//! as `bash_output` or `task/stopped` later recorded it, `agent/started` for a child's persona.
//! Nothing here comes from anything a confined command can write, unless the command ran
//! unconfined (danger-full-access), which could write the log itself.

use std::collections::HashMap;

use serde_json::Value;

pub use super::audit_entry::{
    AUDIT_VERSION, Approval, Call, Entry, Escalation, Rule, RunnerFailure, Sandbox, Target,
    TurnChanges, Undo,
};
use super::event::{Event, Record, ToolStatus};
use super::nested::{Children, Nested};
use super::rule::Scope;
use crate::clock::rfc3339;
use crate::words::{ApprovalPolicy, Outcome};

/// The top-level agent's tag, as `agent/started` names a child's parent.
const TOP_AGENT: &str = super::fold::TOP_AGENT;

/// The tools whose calls are no entry of their own: `update_plan` changes nothing, and a
/// `bash_output` reports a background task's end, which its `bash` call's entry shows.
const NOT_ENTRIES: [&str; 2] = ["update_plan", "bash_output"];

/// Where a background task's end and a call's duration are read from.
const FROM_RECORDS: &str = "records";

/// The trail of a session's records, in order.
pub fn trail(records: &[Record]) -> Vec<Entry> {
    let mut trail = Trail::default();
    for record in records {
        trail.read(record);
    }
    trail.entries()
}

/// What [`trail`] has gathered of the records read so far.
#[derive(Default)]
struct Trail {
    calls: Vec<Call>,
    /// Where each call is in `calls`, by its agent and its call id as recorded.
    by_id: HashMap<(String, String), usize>,
    /// By the id the editor was shown, which approval requests name.
    by_shown: HashMap<String, usize>,
    by_approval: HashMap<String, usize>,
    by_task: HashMap<String, usize>,
    rules: HashMap<String, (Scope, bool)>,
    /// When a call that was asked for was allowed: its run starts then, not at its record.
    allowed_ms: HashMap<usize, u64>,
    children: Children,
    turns: Vec<Entry>,
}

impl Trail {
    /// Takes in the next record.
    fn read(&mut self, record: &Record) {
        let placed = self.children.place(record);
        let agent = record.agent.clone().unwrap_or_else(|| TOP_AGENT.to_owned());
        // A `bash_output` that found its task ended carries the task's end.
        if let Event::ToolResult { facts, .. } = &record.event
            && facts.get("running") == Some(&Value::Bool(false))
            && let Some(task) = text(facts, "task_id")
        {
            task_end(&mut self.calls, &self.by_task, &task, facts, record.seq);
        }
        match &record.event {
            Event::ToolCall { .. } => self.tool_call(record, placed, agent),
            Event::ApprovalAsked {
                id,
                call_id: Some(call_id),
                reason,
                ..
            } => self.approval_asked(id, call_id, reason.as_deref()),
            Event::ApprovalRule { id, scope, allow } => {
                self.rules.insert(id.clone(), (scope.clone(), *allow));
                if let Some(approval) = approval_of(&mut self.calls, &self.by_approval, id) {
                    approval.rule = Some(rule(id, scope, *allow, true));
                }
            }
            Event::ApprovalDecided {
                id,
                outcome,
                rule: deciding,
                policy,
            } => self.approval_decided(record, id, *outcome, deciding.as_deref(), *policy),
            Event::ToolResult {
                call_id,
                status,
                facts,
                ..
            } => self.tool_result(record, agent, call_id, *status, facts),
            Event::TaskStopped { task_id, facts, .. } => {
                task_end(&mut self.calls, &self.by_task, task_id, facts, record.seq);
            }
            Event::TurnChanges { turn, changes } => {
                self.turns.push(Entry::Changes(TurnChanges {
                    v: AUDIT_VERSION,
                    seq: record.seq,
                    at_ms: record.at_ms,
                    at: rfc3339(record.at_ms),
                    turn: *turn,
                    changes: changes.clone(),
                }));
            }
            Event::CheckpointRestored { .. } => self.turns.extend(undo(record)),
            _ => {}
        }
    }

    /// A `tool/call` record (`placed` where it sits when a child agent made it): a new call,
    /// unless its tool is one the trail leaves out.
    fn tool_call(&mut self, record: &Record, placed: Option<(Nested, String)>, agent: String) {
        let Event::ToolCall {
            turn,
            call_id,
            tool,
            input,
            ..
        } = &record.event
        else {
            return;
        };
        let (shown, persona) = match placed {
            Some((nested, shown)) => (shown, Some(nested.persona)),
            None => (call_id.clone(), None),
        };
        if NOT_ENTRIES.contains(&tool.as_str()) {
            return;
        }
        let index = self.calls.len();
        self.by_id.insert((agent.clone(), call_id.clone()), index);
        self.by_shown.insert(shown.clone(), index);
        self.calls.push(Call {
            persona,
            call_id: shown,
            ..new_call(record, *turn, agent, tool, input)
        });
    }

    /// Approval request `id` asked about the call the editor was shown as `call_id`.
    fn approval_asked(&mut self, id: &str, call_id: &str, reason: Option<&str>) {
        let Some(&index) = self.by_shown.get(call_id) else {
            return;
        };
        let Some(call) = self.calls.get_mut(index) else {
            return;
        };
        self.by_approval.insert(id.to_owned(), index);
        call.approval = Some(Approval {
            id: id.to_owned(),
            reason: reason.map(str::to_owned),
            outcome: None,
            by: None,
            rule: None,
        });
    }

    /// Approval request `id` was decided (`outcome`), by the rule `deciding` or the approval
    /// `policy` when one did.
    fn approval_decided(
        &mut self,
        record: &Record,
        id: &str,
        outcome: Outcome,
        deciding: Option<&str>,
        policy: Option<ApprovalPolicy>,
    ) {
        let Some(&index) = self.by_approval.get(id) else {
            return;
        };
        let Some(call) = self.calls.get_mut(index) else {
            return;
        };
        if let Some(approval) = call.approval.as_mut() {
            approval.outcome = Some(outcome);
            approval.by = Some(decided_by(outcome, deciding.is_some(), policy));
            if let Some(deciding) = deciding {
                approval.rule = Some(match self.rules.get(deciding) {
                    Some((scope, allow)) => rule(deciding, scope, *allow, false),
                    None => Rule {
                        id: deciding.to_owned(),
                        scope: "(a rule the log does not hold)".to_owned(),
                        allow: outcome.allows(),
                        made_here: false,
                    },
                });
            }
        }
        self.allowed_ms.insert(index, record.at_ms);
    }

    /// The result of `agent`'s call `call_id`: how it ended and what the facts say of it.
    fn tool_result(
        &mut self,
        record: &Record,
        agent: String,
        call_id: &str,
        status: ToolStatus,
        facts: &Value,
    ) {
        let Some(&index) = self.by_id.get(&(agent, call_id.to_owned())) else {
            return;
        };
        let Some(call) = self.calls.get_mut(index) else {
            return;
        };
        call.status = Some(status);
        call.sandbox = sandbox(facts);
        call.mode = text(facts, "mode");
        call.target.resolved =
            text(facts, "path").filter(|p| call.target.path.as_deref() != Some(p.as_str()));
        call.target.child = text(facts, "agent");
        call.target.mcp_server = text(facts, "mcp_server");
        call.target.mcp_tool = text(facts, "mcp_tool");
        if let Some(task) = text(facts, "task_id")
            && facts.get("running") == Some(&Value::Bool(true))
        {
            call.target.task_id = Some(task.clone());
            self.by_task.insert(task, index);
        }
        call.mode_from = call.mode.as_ref().map(|mode| mode_from(call, mode));
        call.ended = ended(call, facts);
        if call.ended != "started" {
            let started = self.allowed_ms.get(&index).copied().unwrap_or(call.at_ms);
            call.duration_ms = Some(record.at_ms.saturating_sub(started));
            call.duration_from = Some(FROM_RECORDS);
        }
    }

    /// The entries: the calls and the turns' changes and undos, in the order recorded.
    fn entries(self) -> Vec<Entry> {
        let mut entries: Vec<Entry> = self
            .calls
            .into_iter()
            .map(|c| Entry::Call(Box::new(c)))
            .chain(self.turns)
            .collect();
        entries.sort_by_key(Entry::seq);
        entries
    }
}

/// The call a `tool/call` record starts, as `agent`'s own until its result comes.
fn new_call(record: &Record, turn: u64, agent: String, tool: &str, input: &Value) -> Call {
    Call {
        v: AUDIT_VERSION,
        seq: record.seq,
        at_ms: record.at_ms,
        at: rfc3339(record.at_ms),
        turn,
        agent,
        persona: None,
        call_id: String::new(),
        tool: tool.to_owned(),
        target: target(tool, input),
        mode: None,
        mode_from: None,
        escalation: escalation(input),
        approval: None,
        sandbox: Sandbox::default(),
        ended: "no-result",
        status: None,
        duration_ms: None,
        duration_from: None,
    }
}

/// The entry of a `checkpoint/restored` record.
fn undo(record: &Record) -> Option<Entry> {
    let Event::CheckpointRestored {
        turn,
        label,
        changes,
        still_differs,
        by,
    } = &record.event
    else {
        return None;
    };
    Some(Entry::Undo(Undo {
        v: AUDIT_VERSION,
        seq: record.seq,
        at_ms: record.at_ms,
        at: rfc3339(record.at_ms),
        turn: *turn,
        label: label.clone(),
        by: by.as_str(),
        changes: changes.clone(),
        still_differs: still_differs
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect(),
    }))
}

/// The approval of the call that asked request `id`.
fn approval_of<'a>(
    calls: &'a mut [Call],
    by_approval: &HashMap<String, usize>,
    id: &str,
) -> Option<&'a mut Approval> {
    let index = *by_approval.get(id)?;
    calls.get_mut(index)?.approval.as_mut()
}

fn rule(id: &str, scope: &Scope, allow: bool, made_here: bool) -> Rule {
    Rule {
        id: id.to_owned(),
        scope: scope.name(),
        allow,
        made_here,
    }
}

/// What decided an approval request, as its `approval/decided` says.
fn decided_by(outcome: Outcome, by_rule: bool, policy: Option<ApprovalPolicy>) -> &'static str {
    if by_rule {
        "rule"
    } else if policy.is_some() {
        "policy"
    } else if matches!(outcome, Outcome::Cancelled | Outcome::Unavailable) {
        "nobody"
    } else {
        "user"
    }
}

/// Records the end of background task `task` (`facts`, recorded at `seq`) on the call that
/// started it, unless an earlier record already did.
fn task_end(
    calls: &mut [Call],
    by_task: &HashMap<String, usize>,
    task: &str,
    facts: &Value,
    seq: u64,
) {
    let Some(call) = by_task.get(task).and_then(|&index| calls.get_mut(index)) else {
        return;
    };
    if call.sandbox.ended_at_seq.is_some() {
        return;
    }
    call.sandbox = Sandbox {
        ended_at_seq: Some(seq),
        ..sandbox(facts)
    };
    call.ended = ended(call, facts);
}

/// A string member of `value`.
fn text(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// The strings of an array member of `value`.
fn texts(value: &Value, key: &str) -> Vec<String> {
    value
        .get(key)
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn target(tool: &str, input: &Value) -> Target {
    Target {
        command: text(input, "command"),
        background: input.get("run_in_background") == Some(&Value::Bool(true)),
        task_id: text(input, "task_id"),
        path: text(input, "path"),
        resolved: None,
        mcp_server: None,
        mcp_tool: None,
        persona: (tool == "task").then(|| text(input, "persona")).flatten(),
        child: None,
    }
}

fn escalation(input: &Value) -> Option<Escalation> {
    text(input, "sandbox_permissions").map(|mode| Escalation {
        mode,
        justification: text(input, "justification"),
    })
}

/// `escalation` when the call asked for a wider mode, was allowed, and ran under it.
fn mode_from(call: &Call, mode: &str) -> &'static str {
    let granted = call
        .approval
        .as_ref()
        .and_then(|a| a.outcome)
        .is_some_and(Outcome::allows);
    match &call.escalation {
        Some(escalation) if granted && escalation.mode == mode => "escalation",
        _ => "session",
    }
}

fn sandbox(facts: &Value) -> Sandbox {
    let enforcement = facts.get("enforcement").unwrap_or(&Value::Null);
    Sandbox {
        backend: text(facts, "backend"),
        enforcement: text(enforcement, "level"),
        missing: texts(enforcement, "missing"),
        layers: texts(enforcement, "layers"),
        denials: texts(facts, "denials"),
        denied_paths: texts(facts, "denied_paths"),
        exit: facts.get("exit").filter(|e| !e.is_null()).cloned(),
        runner_failure: facts
            .get("runner_failure")
            .filter(|f| !f.is_null())
            .map(|f| RunnerFailure {
                stage: text(f, "stage").unwrap_or_default(),
                detail: text(f, "detail").unwrap_or_default(),
            }),
        refused: text(facts, "refused"),
        ended_at_seq: None,
    }
}

/// How a call ended, from its result's facts (see [`Call::ended`]).
fn ended(call: &Call, facts: &Value) -> &'static str {
    let flag = |key: &str| facts.get(key) == Some(&Value::Bool(true));
    let sandbox = &call.sandbox;
    if sandbox.runner_failure.is_some() {
        "runner-failure"
    } else if sandbox.refused.is_some() {
        "refused"
    } else if flag("timed_out") {
        "timed-out"
    } else if flag("cancelled") {
        "cancelled"
    } else if flag("running") {
        "started"
    } else if sandbox.exit.is_some() {
        "exited"
    } else if facts.get("approval").is_some() {
        "not-approved"
    } else if flag("denied") {
        "denied"
    } else if call.status == Some(ToolStatus::Completed) {
        "completed"
    } else {
        "failed"
    }
}

#[cfg(test)]
#[path = "audit_tests.rs"]
mod tests;
