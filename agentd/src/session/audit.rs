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

use serde::Serialize;
use serde_json::Value;

use super::event::{Event, Record, ToolStatus};
use super::nested::Children;
use super::rule::Scope;
use crate::checkpoint::Change;
use crate::clock::rfc3339;
use crate::words::{ApprovalPolicy, Outcome};

/// The version of an entry's shape, written into each as `v`. A field's meaning never changes
/// within a version; a new field may be added.
pub const AUDIT_VERSION: u32 = 1;

/// The top-level agent's tag, as `agent/started` names a child's parent.
const TOP_AGENT: &str = super::fold::TOP_AGENT;

/// The tools whose calls are no entry of their own: `update_plan` changes nothing, and a
/// `bash_output` reports a background task's end, which its `bash` call's entry shows.
const NOT_ENTRIES: [&str; 2] = ["update_plan", "bash_output"];

/// Where a background task's end and a call's duration are read from.
const FROM_RECORDS: &str = "records";

/// One line of the trail.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "entry", rename_all = "snake_case")]
pub enum Entry {
    /// A tool call.
    Call(Box<Call>),
    /// What a turn changed in the recorded roots, as its checkpoints tell (`turn/changes`).
    Changes(TurnChanges),
    /// An undo: the recorded roots restored to the state before a turn (`checkpoint/restored`).
    Undo(Undo),
}

impl Entry {
    /// The sequence number of the record the entry starts at.
    pub fn seq(&self) -> u64 {
        match self {
            Entry::Call(call) => call.seq,
            Entry::Changes(changes) => changes.seq,
            Entry::Undo(undo) => undo.seq,
        }
    }
}

/// The files a turn changed, commands' changes included.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TurnChanges {
    pub v: u32,
    pub seq: u64,
    pub at_ms: u64,
    pub at: String,
    pub turn: u64,
    /// Each changed path (absolute) and how: `added`, `modified`, `deleted`, `type_changed`.
    pub changes: Vec<Change>,
}

/// An undo, and what it changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Undo {
    pub v: u32,
    pub seq: u64,
    pub at_ms: u64,
    pub at: String,
    /// The turn whose start the roots were restored to, and its checkpoint's label.
    pub turn: u64,
    pub label: String,
    /// Who asked: `editor` (`/undo`) or `cli` (`agentd sessions undo`).
    pub by: &'static str,
    pub changes: Vec<Change>,
    /// Paths that still differed from the checkpoint when checked after the restore.
    pub still_differs: Vec<String>,
}

/// A tool call as the log recorded it. Fields the log says nothing of are `null` (or empty).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Call {
    /// [`AUDIT_VERSION`].
    pub v: u32,
    /// The sequence number of its `tool/call` record.
    pub seq: u64,
    /// When it was recorded (before it ran, or before it was asked), in milliseconds since the
    /// Unix epoch, and as RFC 3339 in UTC.
    pub at_ms: u64,
    pub at: String,
    pub turn: u64,
    /// `agent-0` for the top-level agent, else the child's tag.
    pub agent: String,
    /// A child agent's persona; `null` for the top-level agent.
    pub persona: Option<String>,
    /// The id the editor was shown (a child's call: `<parent call>/<agent>/<n>`).
    pub call_id: String,
    pub tool: String,
    /// What it ran or touched: a command line, a path, an MCP server's tool, a persona, a task.
    pub target: Target,
    /// The mode it ran under, as its facts say; `null` when they do not (it did not run).
    pub mode: Option<String>,
    /// Why that mode: `session` (the session's mode, as switched in the log or configured) or
    /// `escalation` (a wider mode this call asked for and was granted).
    pub mode_from: Option<&'static str>,
    /// The wider mode it asked for, and why, when it asked for one.
    pub escalation: Option<Escalation>,
    /// The approval asked for it, when one was.
    pub approval: Option<Approval>,
    /// The helper's facts: backend, enforcement, denials, how it ended.
    pub sandbox: Sandbox,
    /// How it ended: `exited`, `timed-out`, `cancelled`, `runner-failure`, `refused` (by the
    /// helper), `denied` (refused before it ran), `not-approved`, `started` (a background task
    /// whose end the log does not hold), `completed` or `failed` (a call that ran no command),
    /// `no-result` (the log ends before its result: a crash, or it still runs).
    pub ended: &'static str,
    /// The `tool/result` status.
    pub status: Option<ToolStatus>,
    /// From its start (its record, or its approval's decision when one was asked) to its
    /// result's record; `null` for a background task and a call without a result.
    pub duration_ms: Option<u64>,
    /// Where `duration_ms` comes from: `records` (the log's own times; the facts hold none).
    pub duration_from: Option<&'static str>,
}

/// What a call ran or touched, as its input named it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Target {
    /// `bash`: the command line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// `bash`: it started a background task.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub background: bool,
    /// A background task's id (`bash` in the background, `bash_kill`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// A file tool: the path as given, and where it landed when the facts say so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolved: Option<String>,
    /// An MCP tool: its server and its own name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp_server: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp_tool: Option<String>,
    /// `task`: the persona of the child it started, and the child's tag.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persona: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub child: Option<String>,
}

/// An escalation a call asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Escalation {
    pub mode: String,
    pub justification: Option<String>,
}

/// An approval request and how it was decided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Approval {
    /// The id of its `approval/asked` and `approval/decided` records.
    pub id: String,
    pub reason: Option<String>,
    /// `null` when the log ends before the decision.
    pub outcome: Option<Outcome>,
    /// What decided: `user` (whoever answered the editor's permission request), `rule` (an
    /// "always" answer given before), `policy` (the approval policy `never`: nobody was
    /// asked), `nobody` (cancelled, or nobody could be asked), `null` when undecided.
    pub by: Option<&'static str>,
    /// The rule that decided, or the rule this answer made ("always").
    pub rule: Option<Rule>,
}

/// An "always" rule: the id of the request whose answer made it, and what it covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rule {
    pub id: String,
    /// The scope in words ([`Scope::name`]).
    pub scope: String,
    pub allow: bool,
    /// Whether this call's answer made it (else an earlier answer did and it decided here).
    pub made_here: bool,
}

/// What the helper reported of the command, read from the facts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Sandbox {
    pub backend: Option<String>,
    /// `full` or `partial`; `null` when nothing was confined or it did not run.
    pub enforcement: Option<String>,
    /// What a partial enforcement could not enforce.
    pub missing: Vec<String>,
    pub layers: Vec<String>,
    /// Denial kinds (`file-write`, `file-read`, `network`, …) and the paths they named.
    pub denials: Vec<String>,
    pub denied_paths: Vec<String>,
    /// `{"code": N}` or `{"signal": N}`.
    pub exit: Option<Value>,
    pub runner_failure: Option<RunnerFailure>,
    /// The helper's reason for refusing the request.
    pub refused: Option<String>,
    /// The record whose facts these are, when not the call's own result: a background task's
    /// end, as a later `bash_output` or `task/stopped` recorded it.
    pub ended_at_seq: Option<u64>,
}

/// A runner step that failed before the command ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunnerFailure {
    pub stage: String,
    pub detail: String,
}

/// The trail of a session's records, in order.
pub fn trail(records: &[Record]) -> Vec<Entry> {
    let mut calls: Vec<Call> = Vec::new();
    // Where each call is in `calls`, by its agent and its call id as recorded.
    let mut by_id: HashMap<(String, String), usize> = HashMap::new();
    // By the id the editor was shown, which approval requests name.
    let mut by_shown: HashMap<String, usize> = HashMap::new();
    let mut by_approval: HashMap<String, usize> = HashMap::new();
    let mut by_task: HashMap<String, usize> = HashMap::new();
    let mut rules: HashMap<String, (Scope, bool)> = HashMap::new();
    // When a call that was asked for was allowed: its run starts then, not at its record.
    let mut allowed_ms: HashMap<usize, u64> = HashMap::new();
    let mut children = Children::default();
    let mut turns: Vec<Entry> = Vec::new();
    for record in records {
        let placed = children.place(record);
        let agent = record.agent.clone().unwrap_or_else(|| TOP_AGENT.to_owned());
        // A `bash_output` that found its task ended carries the task's end.
        if let Event::ToolResult { facts, .. } = &record.event
            && facts.get("running") == Some(&Value::Bool(false))
            && let Some(task) = text(facts, "task_id")
        {
            task_end(&mut calls, &by_task, &task, facts, record.seq);
        }
        match &record.event {
            Event::ToolCall {
                turn,
                call_id,
                tool,
                input,
                ..
            } => {
                let (shown, persona) = match placed {
                    Some((nested, shown)) => (shown, Some(nested.persona)),
                    None => (call_id.clone(), None),
                };
                if NOT_ENTRIES.contains(&tool.as_str()) {
                    continue;
                }
                let index = calls.len();
                by_id.insert((agent.clone(), call_id.clone()), index);
                by_shown.insert(shown.clone(), index);
                calls.push(Call {
                    v: AUDIT_VERSION,
                    seq: record.seq,
                    at_ms: record.at_ms,
                    at: rfc3339(record.at_ms),
                    turn: *turn,
                    agent,
                    persona,
                    call_id: shown,
                    tool: tool.clone(),
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
                });
            }
            Event::ApprovalAsked {
                id,
                call_id: Some(call_id),
                reason,
                ..
            } => {
                if let Some(&index) = by_shown.get(call_id) {
                    by_approval.insert(id.clone(), index);
                    calls[index].approval = Some(Approval {
                        id: id.clone(),
                        reason: reason.clone(),
                        outcome: None,
                        by: None,
                        rule: None,
                    });
                }
            }
            Event::ApprovalRule { id, scope, allow } => {
                rules.insert(id.clone(), (scope.clone(), *allow));
                if let Some(approval) = approval_of(&mut calls, &by_approval, id) {
                    approval.rule = Some(rule(id, scope, *allow, true));
                }
            }
            Event::ApprovalDecided {
                id,
                outcome,
                rule: deciding,
                policy,
            } => {
                let Some(&index) = by_approval.get(id) else {
                    continue;
                };
                let call = &mut calls[index];
                if let Some(approval) = call.approval.as_mut() {
                    approval.outcome = Some(*outcome);
                    approval.by = Some(decided_by(*outcome, deciding.is_some(), *policy));
                    if let Some(deciding) = deciding {
                        approval.rule = Some(match rules.get(deciding) {
                            Some((scope, allow)) => rule(deciding, scope, *allow, false),
                            None => Rule {
                                id: deciding.clone(),
                                scope: "(a rule the log does not hold)".to_owned(),
                                allow: outcome.allows(),
                                made_here: false,
                            },
                        });
                    }
                }
                allowed_ms.insert(index, record.at_ms);
            }
            Event::ToolResult {
                call_id,
                status,
                facts,
                ..
            } => {
                let Some(&index) = by_id.get(&(agent, call_id.clone())) else {
                    continue;
                };
                let call = &mut calls[index];
                call.status = Some(*status);
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
                    by_task.insert(task, index);
                }
                call.mode_from = call.mode.as_ref().map(|mode| mode_from(call, mode));
                call.ended = ended(call, facts);
                if call.ended != "started" {
                    let started = allowed_ms.get(&index).copied().unwrap_or(call.at_ms);
                    call.duration_ms = Some(record.at_ms.saturating_sub(started));
                    call.duration_from = Some(FROM_RECORDS);
                }
            }
            Event::TaskStopped { task_id, facts, .. } => {
                task_end(&mut calls, &by_task, task_id, facts, record.seq);
            }
            Event::TurnChanges { turn, changes } => {
                turns.push(Entry::Changes(TurnChanges {
                    v: AUDIT_VERSION,
                    seq: record.seq,
                    at_ms: record.at_ms,
                    at: rfc3339(record.at_ms),
                    turn: *turn,
                    changes: changes.clone(),
                }));
            }
            Event::CheckpointRestored {
                turn,
                label,
                changes,
                still_differs,
                by,
            } => {
                turns.push(Entry::Undo(Undo {
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
                }));
            }
            _ => {}
        }
    }
    let mut entries: Vec<Entry> = calls
        .into_iter()
        .map(|c| Entry::Call(Box::new(c)))
        .chain(turns)
        .collect();
    entries.sort_by_key(Entry::seq);
    entries
}

/// The approval of the call that asked request `id`.
fn approval_of<'a>(
    calls: &'a mut [Call],
    by_approval: &HashMap<String, usize>,
    id: &str,
) -> Option<&'a mut Approval> {
    let index = *by_approval.get(id)?;
    calls[index].approval.as_mut()
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
    let Some(&index) = by_task.get(task) else {
        return;
    };
    let call = &mut calls[index];
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
