//! The events a session is made of. Everything else about a session — what the model was told,
//! its history, the knobs, what an editor sees on `session/load` — is a fold over these.
//!
//! Each line of a session's log is one [`Record`]: a version, a sequence number, a timestamp and
//! one [`Event`] tagged by `type`. Event names are `domain/what` and never change meaning; a new
//! kind of fact is a new event, and an incompatible change bumps [`EVENT_VERSION`].

use std::path::PathBuf;

use confine_protocol::Mode;
use serde::{Deserialize, Serialize};

use super::diff::LoggedDiff;
use super::rule::Scope;
use crate::checkpoint::Change;
use crate::model::{AssistantTurn, Reasoning};
use crate::words::{ApprovalPolicy, Outcome};

/// The version written into every record. A log with a newer version is refused on load.
pub const EVENT_VERSION: u32 = 1;

/// One line of a session log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub v: u32,
    /// 0 for the first record of a session, then +1 per record.
    pub seq: u64,
    /// Milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// The child agent whose record this is (`agent-1`, …, as its `agent/started` names it);
    /// absent for the top-level agent's records and the session's own, so those are written
    /// exactly as before child agents existed and older logs read unchanged. (Not `agent`:
    /// `session/created` has a field of that name, and both share one JSON object.)
    #[serde(default, rename = "agent_id", skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(flatten)]
    pub event: Event,
}

impl Event {
    /// The record of a model answer that ended: its text, reasoning and tool calls as they came.
    pub fn model_output(turn: u64, step: u64, answer: &AssistantTurn) -> Event {
        Event::ModelOutput {
            turn,
            step,
            text: answer.text.clone(),
            reasoning: answer.reasoning.clone(),
            tool_calls: answer
                .tool_calls
                .iter()
                .map(|c| LoggedToolCall {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    arguments: c.arguments.clone(),
                })
                .collect(),
            finish: answer.finish.as_str().to_owned(),
            incomplete: false,
        }
    }
}

impl Record {
    /// Whether the record is the top-level agent's or the session's own (no agent tag).
    pub fn is_top_level(&self) -> bool {
        self.agent.is_none()
    }

    /// Whether the record is the child agent `agent`'s.
    pub fn is_of(&self, agent: &str) -> bool {
        self.agent.as_deref() == Some(agent)
    }
}

/// A resource a prompt attached or linked, as the model was given it: its text, or why it was
/// not included.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptResource {
    pub uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_included: Option<String>,
}

/// A tool call as the model made it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoggedToolCall {
    pub id: String,
    pub name: String,
    /// The JSON text of the arguments, exactly as the model produced it.
    pub arguments: String,
}

/// One entry of the agent's plan, with ACP's `PlanEntry` words for its priority and status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanItem {
    pub content: String,
    pub priority: PlanPriority,
    pub status: PlanStatus,
}

/// How much a plan entry matters (ACP's `PlanEntryPriority`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanPriority {
    High,
    Medium,
    Low,
}

/// Where a plan entry stands (ACP's `PlanEntryStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanStatus {
    Pending,
    InProgress,
    Completed,
}

/// A plan as `agentd sessions show` prints it: a line per entry, its status first.
pub fn plan_text(entries: &[PlanItem]) -> String {
    let lines: Vec<String> = entries
        .iter()
        .map(|e| format!("    [{}] {}", e.status.as_str(), e.content))
        .collect();
    lines.join("\n")
}

impl PlanStatus {
    /// ACP's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            PlanStatus::Pending => "pending",
            PlanStatus::InProgress => "in_progress",
            PlanStatus::Completed => "completed",
        }
    }
}

/// How a tool call ended, as shown to the editor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    Completed,
    Failed,
}

/// Something that happened in a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Event {
    /// The first record of every log.
    #[serde(rename = "session/created")]
    SessionCreated {
        id: String,
        cwd: PathBuf,
        agent: String,
    },
    /// The user's prompt, as text.
    #[serde(rename = "prompt/submitted")]
    PromptSubmitted { turn: u64, text: String },
    /// The user's prompt `input` (as typed) ran agentd's slash command `command` (`status`,
    /// `mcp`, `compact`, `init`; see `acp::commands`) as turn `turn`. Replayed as the user's
    /// message; never the model's history.
    #[serde(rename = "command/run")]
    CommandRun {
        turn: u64,
        command: String,
        input: String,
    },
    /// The prompt agentd wrote for the slash command `command` of turn `turn` (`init`), in
    /// place of the user's: the model reads it as the turn's user message (it is history, as a
    /// `prompt/submitted` is); the editor's replay shows the `command/run` before it instead.
    #[serde(rename = "command/prompt")]
    CommandPrompt {
        turn: u64,
        command: String,
        text: String,
    },
    /// What agentd itself answered the slash command `command` of turn `turn`, without the
    /// model: shown to the editor as the agent's text, live and on replay; never the model's
    /// history.
    #[serde(rename = "command/output")]
    CommandOutput {
        turn: u64,
        command: String,
        text: String,
    },
    /// The top-level agent's plan, whole, as its `update_plan` call `call_id` of turn `turn`
    /// set it: shown to the editor as an ACP `plan` update (which replaces the plan shown
    /// before), live and on replay. The call's result is the model's record of it.
    #[serde(rename = "plan/updated")]
    PlanUpdated {
        turn: u64,
        call_id: String,
        entries: Vec<PlanItem>,
    },
    /// The resources the prompt before it attached or linked, read for the model (only when
    /// it had some). The model reads them after the prompt's text; the editor's replay shows
    /// the prompt as it was written, with links named.
    #[serde(rename = "prompt/resources")]
    PromptResources {
        turn: u64,
        resources: Vec<PromptResource>,
    },
    #[serde(rename = "turn/started")]
    TurnStarted { turn: u64 },
    /// What was sent to the model for one step: which model, the instructions it was given
    /// (the system prompt and every per-request section), and the tools it was offered.
    #[serde(rename = "model/request")]
    ModelRequest {
        turn: u64,
        step: u64,
        model: String,
        instructions: String,
        tools: Vec<String>,
    },
    /// What the model answered for one step: its text, the reasoning it showed, its tool calls.
    /// With `incomplete`, what the editor was shown of an answer that then failed (the
    /// `model/error` follows): replayed, but no part of the model's history.
    #[serde(rename = "model/output")]
    ModelOutput {
        turn: u64,
        step: u64,
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning: Option<Reasoning>,
        tool_calls: Vec<LoggedToolCall>,
        finish: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        incomplete: bool,
    },
    /// The model call failed; the turn ends, and the prompt is answered with an error. `kind`
    /// classifies it (`unreachable`, `timeout`, `http`, `malformed`, … see
    /// [`crate::model::FailureKind`]), `status` is the last HTTP status when the server answered
    /// with one, `retries` how many failed attempts were retried first.
    #[serde(rename = "model/error")]
    ModelError {
        turn: u64,
        step: u64,
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kind: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<u16>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retries: Option<u32>,
    },
    /// A tool call is about to be executed (logged, and synced, before its side effects).
    /// `pending`: it waits for a person's approval before it may run (an escalation, or a tool
    /// in `approval.ask_before`); absent when false, and in older logs.
    #[serde(rename = "tool/call")]
    ToolCall {
        turn: u64,
        call_id: String,
        tool: String,
        title: String,
        kind: String,
        input: serde_json::Value,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        pending: bool,
    },
    /// A tool call's result: the text the model reads and the facts behind it; for a file
    /// tool's write, the change it made (`diff`, for the editor only; absent in older logs and
    /// for every other call).
    #[serde(rename = "tool/result")]
    ToolResult {
        turn: u64,
        call_id: String,
        status: ToolStatus,
        output: String,
        facts: serde_json::Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        diff: Option<LoggedDiff>,
    },
    /// The history up to and including turn `through` was summarised by `model` into
    /// `summary` at the start of turn `turn` (see [`crate::session::fold::history`]): from here
    /// on the model reads the summary in place of those turns. `estimate_before` and
    /// `estimate_after` are the estimated tokens of the turn's request without and with the
    /// summary ([`crate::model::estimate_tokens`]). Shown to the editor as a short note.
    #[serde(rename = "history/compacted")]
    HistoryCompacted {
        turn: u64,
        through: u64,
        summary: String,
        model: String,
        estimate_before: u64,
        estimate_after: u64,
    },
    /// The prompt turn ended with this ACP stop reason, or `failed` when the model failed and
    /// the prompt was answered with an error.
    #[serde(rename = "turn/ended")]
    TurnEnded { turn: u64, stop_reason: String },
    /// The session's sandbox mode from here on (see [`crate::knobs::sandbox`]). Log-only.
    #[serde(rename = "sandbox/mode")]
    SandboxModeSet {
        #[serde(with = "crate::words::mode_word")]
        mode: Mode,
    },
    /// The session's approval policy from here on (see [`crate::knobs::policy`]). Log-only.
    #[serde(rename = "approval/policy")]
    ApprovalPolicySet { policy: ApprovalPolicy },
    /// The session's model from here on: `name` is one of the configured models (`default`,
    /// or a `[models.NAME]`), see [`crate::knobs::model`]. Log-only.
    #[serde(rename = "model/selected")]
    ModelSelected { name: String },
    /// Approval was asked for a tool call (see [`crate::approval`]); exactly one
    /// `approval/decided` with the same `id` follows. Log-only: never in the model's history,
    /// never replayed to the editor.
    #[serde(rename = "approval/asked")]
    ApprovalAsked {
        id: String,
        tool: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// How the approval request `id` ended; `rule` names the `approval/rule` that decided it
    /// without asking anyone, `policy` the approval policy that did (`never`: nobody was
    /// asked; absent in older logs). Log-only.
    #[serde(rename = "approval/decided")]
    ApprovalDecided {
        id: String,
        outcome: Outcome,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rule: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        policy: Option<ApprovalPolicy>,
    },
    /// An "always" answer to the approval request `id`: from here on, in this session, every
    /// request of the same scope — `tool`, and for `bash` the exact `command`, and for an
    /// escalation the `mode` it asks for — is allowed (`allow`) or rejected without asking
    /// (see [`crate::approval::rules`]). Written, durable, before the request's
    /// `approval/decided`. Log-only.
    #[serde(rename = "approval/rule")]
    ApprovalRule {
        id: String,
        #[serde(flatten)]
        scope: Scope,
        allow: bool,
    },
    /// A background task was stopped because the session's sandbox mode was narrowed below the
    /// mode it ran under (see [`crate::narrowing`]). Shown to the editor as the end of the call
    /// `call_id` that started the task, with `text`; never model history: the model is told by
    /// a notice in its next request.
    #[serde(rename = "task/stopped")]
    TaskStopped {
        task_id: String,
        call_id: String,
        #[serde(with = "crate::words::mode_word")]
        ran_under: Mode,
        #[serde(with = "crate::words::mode_word")]
        narrowed_to: Mode,
        text: String,
        /// The task's facts at its end, as `bash_output` reports them.
        facts: serde_json::Value,
    },
    /// A child agent became ready: `agent` (its id, `agent-1`, …) was started below `parent`
    /// (`agent-0` is the top level) at `depth`, with `persona`, by the `task` call `call_id` of
    /// its parent. Its own records carry its id as their agent tag. Exactly one `agent/ended`
    /// follows.
    #[serde(rename = "agent/started")]
    AgentStarted {
        agent: String,
        parent: String,
        /// Checked as a depth when the log is read (`crate::depth`).
        depth: u64,
        persona: String,
        call_id: String,
    },
    /// How a child agent ended: `completed` with its `answer` (its parent's tool result),
    /// `failed` with a `reason`, or `cancelled`.
    #[serde(rename = "agent/ended")]
    AgentEnded {
        agent: String,
        outcome: AgentOutcome,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answer: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The state of the workspace and the session's other writable roots was recorded as
    /// checkpoint `label` (`t{N}` before turn N's first side effect, `t{N}-end` after it) in
    /// agentd's checkpoint store (see [`crate::checkpoint`]): `files` regular files and links of
    /// `bytes` bytes; `left_out` the paths not recorded (ignored, FIFOs/sockets/devices, over the
    /// size cap), `over_cap` when the cap left some out. Log-only: never model history, never
    /// replayed to the editor.
    #[serde(rename = "checkpoint/recorded")]
    CheckpointRecorded {
        turn: u64,
        label: String,
        files: u64,
        bytes: u64,
        left_out: Vec<PathBuf>,
        over_cap: bool,
    },
    /// What turn `turn` changed in the recorded roots: its checkpoint `t{N}` against
    /// `t{N}-end`. Log-only.
    #[serde(rename = "turn/changes")]
    TurnChanges { turn: u64, changes: Vec<Change> },
    /// The recorded roots were restored to checkpoint `label` (the state before turn `turn`):
    /// `changes` what the restore changed, `still_differs` the paths that differed from the
    /// checkpoint when it was checked again afterwards (a concurrent change, or a write the
    /// sandbox refused); `by` who asked for it. Never replayed to the editor.
    #[serde(rename = "checkpoint/restored")]
    CheckpointRestored {
        turn: u64,
        label: String,
        changes: Vec<Change>,
        still_differs: Vec<PathBuf>,
        by: RestoredBy,
    },
    /// An output of a child agent its parent had not taken when the child was torn down.
    #[serde(rename = "agent/output")]
    AgentOutput { agent: String, text: String },
    /// A message held for a child agent that it never applied; dropped at its teardown.
    #[serde(rename = "agent/injection-dropped")]
    AgentInjectionDropped { agent: String, text: String },
}

/// Who asked for a `checkpoint/restored`: the editor (`/undo`) or `agentd sessions undo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RestoredBy {
    Editor,
    Cli,
}

impl RestoredBy {
    pub fn as_str(self) -> &'static str {
        match self {
            RestoredBy::Editor => "editor",
            RestoredBy::Cli => "cli",
        }
    }
}

/// The word `agent/ended` records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentOutcome {
    Completed,
    Failed,
    Cancelled,
}

impl AgentOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            AgentOutcome::Completed => "completed",
            AgentOutcome::Failed => "failed",
            AgentOutcome::Cancelled => "cancelled",
        }
    }
}
