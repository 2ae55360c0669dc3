//! The entries of a session's audit trail ([`super::audit`]): their shapes, as
//! `agentd sessions audit` writes them.

use serde::Serialize;
use serde_json::Value;

use super::event::ToolStatus;
use crate::checkpoint::Change;
use crate::words::Outcome;

/// The version of an entry's shape, written into each as `v`. A field's meaning never changes
/// within a version; a new field may be added.
pub const AUDIT_VERSION: u32 = 1;

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
    /// The scope in words ([`Scope::name`](super::rule::Scope::name)).
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
