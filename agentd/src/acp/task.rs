//! The `task` tool: an agent delegates a sub-task to a child agent of a persona, which runs its
//! own model loop in the same session and whose final answer is the call's result (RFC 0007).
//!
//! A start is checked before anything of the child exists: the persona must be known and
//! [`Lineage::child`] must allow it; then the session's [`AgentTree`] reserves and launches it,
//! which logs `agent/started`. The child is told its persona's instructions and the prompt, is
//! offered the tools of its scope, without escalation, and runs each call under the session's
//! effective mode after admitting it against its scope, before any approval is asked. Its
//! records are tagged with its id. Each of its tool calls is shown to the editor as a call of
//! its own, nested under the `task` call that started the child ([`nested`]), with the content a
//! top-level call of the same tool gets; its permission requests name that nested call.
//! Cancelling the turn cancels the child.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::ToolCallStatus;
use serde::Deserialize;
use serde_json::{Value, json};

use super::sessions::{AgentState, Session};
use super::{live, questions, updates};
use crate::agents::lifecycle::{AgentId, ChildContext, ChildError, Failure, Outcome};
use crate::agents::{Lineage, Personas};
use crate::approval;
use crate::cancel::Cancel;
use crate::model::{ChatRequest, Deltas, FinishReason, Message, ModelError, ToolCall, ToolSpec};
use crate::session::fold::{self, ReplayItem};
use crate::session::nested;
use crate::session::{Event, LogError, Record};
use crate::tools::{self, CallContext, LiveOutput, TASK, TaskOwner, ToolDescription, ToolResult};

/// What a `task` call and the child it starts run with; cheap to clone.
#[derive(Clone)]
pub struct TaskRun {
    pub state: Arc<AgentState>,
    pub session: Arc<Session>,
    pub cx: ConnectionTo<Client>,
    /// The prompt turn the call belongs to.
    pub turn: u64,
}

/// A `task` call's arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskArgs {
    persona: String,
    prompt: String,
    /// Required; read from the raw arguments for the call's title (`tools::describe`).
    #[allow(dead_code)]
    description: String,
}

/// Why a child agent's loop stopped without an answer.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    #[error("the child's record could not be written: {0}")]
    Log(#[from] LogError),
    #[error("the child has no model: {0}")]
    NoModel(Arc<ModelError>),
    #[error("the child's model request failed: {0}")]
    Model(#[from] ModelError),
    #[error("the child's answer was cut off ({0}) before it ended")]
    CutOff(&'static str),
    #[error("the child reached the step limit ({0} model requests) without answering")]
    StepLimit(u64),
    #[error(
        "the child's tool call (record {0} of the session log) has no place to be shown: its \
         agent/started record is missing"
    )]
    NotShown(u64),
}

type ToolFuture<'a> = Pin<Box<dyn Future<Output = ToolResult> + Send + 'a>>;

/// `specs` with the `task` schema's description naming the personas there are.
pub fn with_personas(mut specs: Vec<ToolSpec>, personas: &Personas) -> Vec<ToolSpec> {
    for spec in specs.iter_mut().filter(|s| s.name == TASK) {
        let listed: Vec<String> = personas
            .iter()
            .map(|p| format!("{} ({})", p.name, p.description))
            .collect();
        spec.description = format!("{} The personas: {}.", spec.description, listed.join("; "));
    }
    specs
}

/// The facts of a `task` call: the child's tag and persona, and the background tasks that
/// stopped when it ended, when any did.
fn child_facts(tag: &str, persona: &str, stopped: &[String]) -> Value {
    if stopped.is_empty() {
        json!({ "agent": tag, "persona": persona })
    } else {
        json!({ "agent": tag, "persona": persona, "stopped_tasks": stopped })
    }
}

/// Runs a `task` call of the agent `parent` (whose place is `lineage`), shown to the editor as
/// `shown_call_id`: starts the child, whose calls are shown nested under that id, waits for its
/// outcome or the cancel, and answers with the child's final text.
pub fn run_task<'a>(
    run: &'a TaskRun,
    parent: AgentId,
    lineage: &'a Lineage,
    call: &'a ToolCall,
    shown_call_id: &'a str,
    cancel: &'a Cancel,
) -> ToolFuture<'a> {
    Box::pin(async move {
        let invalid = |text: String| ToolResult::failed(text, json!({ "invalid_call": true }));
        let args: TaskArgs = match serde_json::from_str(&call.arguments) {
            Ok(args) => args,
            Err(e) => {
                return invalid(format!(
                    "invalid task arguments: {e}; expected {{\"persona\": string, \"prompt\": \
                     string, \"description\": string}}"
                ));
            }
        };
        let persona = match run.state.options.personas.lookup(&args.persona) {
            Ok(persona) => persona.clone(),
            Err(unknown) => return invalid(unknown.to_string()),
        };
        let refused = |text: String| {
            ToolResult::failed(text, json!({ "persona": persona.name, "started": false }))
        };
        let child_lineage = match lineage.child(&persona) {
            Ok(child) => child,
            Err(refusal) => return refused(refusal.to_string()),
        };
        let depth = u32::try_from(child_lineage.depth().get()).unwrap_or(u32::MAX);
        let session = &run.session;
        let pending = match session.agents.reserve(parent, persona.name.clone(), depth) {
            Ok(pending) => pending,
            Err(e) => return refused(e.to_string()),
        };
        // `agent/started` names the call as the editor was shown it: the child's calls are
        // nested under that id.
        session.agent_events.expect_start(parent, shown_call_id);
        let body_run = run.clone();
        let prompt = args.prompt;
        let instructions = persona.instructions.clone();
        let child = match pending.launch(move |ctx| async move {
            let child = ChildLoop {
                tag: body_run.session.agent_events.tag(ctx.id()),
                run: body_run,
                ctx,
                lineage: child_lineage,
            };
            child.drive(&instructions, &prompt).await
        }) {
            Ok(child) => child,
            Err(e) => return refused(e.to_string()),
        };
        let outcome = tokio::select! {
            outcome = child.outcome() => outcome,
            () = cancel.cancelled() => {
                child.cancel();
                child.outcome().await
            }
        };
        let tag = session.agent_events.tag(child.id());
        let _report = child.teardown().await;
        // Its outcome told its background tasks to stop; the parent hears of them once they
        // have ended.
        let stopped = session.tools.background().ended_with(&tag).await;
        let facts = child_facts(&tag, &persona.name, &stopped);
        let mut result = match outcome {
            Outcome::Completed(answer) => ToolResult::completed(answer, facts),
            Outcome::Failed(Failure::Error(reason)) => {
                ToolResult::failed(format!("the child agent {tag} failed: {reason}"), facts)
            }
            Outcome::Failed(Failure::Panicked(message)) => ToolResult::failed(
                format!("the child agent {tag} failed: it panicked: {message}"),
                facts,
            ),
            Outcome::Cancelled => {
                ToolResult::failed(format!("the child agent {tag} was cancelled"), facts)
            }
        };
        if !stopped.is_empty() {
            result.text = format!(
                "{}\n[the background tasks it started were stopped when it ended: {}]",
                result.text,
                stopped.join(", ")
            );
        }
        result
    })
}

/// One child agent's model loop.
struct ChildLoop {
    run: TaskRun,
    ctx: ChildContext,
    tag: String,
    lineage: Lineage,
}

impl ChildLoop {
    async fn drive(self, instructions: &str, prompt: &str) -> Result<String, ChildError> {
        self.steps(instructions, prompt).await.map_err(|e| match e {
            Stopped::Cancelled => ChildError::Cancelled,
            Stopped::Failed(e) => ChildError::failed(e),
        })
    }

    async fn steps(&self, instructions: &str, prompt: &str) -> Result<String, Stopped> {
        let turn = self.run.turn;
        self.record(
            Event::PromptSubmitted {
                turn,
                text: prompt.to_owned(),
            },
            false,
        )?;
        let session_model = self.run.session.selected_model();
        let provider = match self
            .run
            .state
            .options
            .provider_for(self.ctx.persona(), session_model)
        {
            Ok(provider) => provider,
            Err(why) => return Err(Stopped::Failed(TaskError::NoModel(why))),
        };
        let max_steps = self.run.state.options.max_steps;
        for step in 1..=max_steps {
            if self.ctx.is_cancelled() {
                return Err(Stopped::Cancelled);
            }
            let session = &self.run.session;
            let mut specs = tools::offered_confined(&session.tools, self.lineage.scope());
            if !self.lineage.may_start_children() {
                specs.retain(|s| s.name != TASK);
            }
            let specs = with_personas(specs, &self.run.state.options.personas);
            let mut messages = vec![Message::system(instructions.to_owned())];
            messages.extend(fold::history_of(&session.records(), &self.tag));
            let request = ChatRequest {
                messages,
                tools: specs.clone(),
                agent: Some(self.ctx.persona().to_owned()),
            };
            self.record(
                Event::ModelRequest {
                    turn,
                    step,
                    model: provider.describe(),
                    instructions: instructions.to_owned(),
                    tools: specs.iter().map(|s| s.name.clone()).collect(),
                },
                false,
            )?;
            let mut ignore = Deltas::ignored();
            let answer = tokio::select! {
                answer = provider.complete(&request, &mut ignore) => answer,
                () = self.ctx.cancelled() => return Err(Stopped::Cancelled),
            };
            let answer = answer.map_err(|e| Stopped::Failed(TaskError::Model(e)))?;
            self.record(Event::model_output(turn, step, &answer), false)?;
            match answer.finish {
                FinishReason::Length => return Err(Stopped::Failed(TaskError::CutOff("length"))),
                FinishReason::ContentFilter => {
                    return Err(Stopped::Failed(TaskError::CutOff("content filter")));
                }
                _ if answer.tool_calls.is_empty() => return Ok(answer.text),
                _ => {}
            }
            for call in &answer.tool_calls {
                if self.ctx.is_cancelled() {
                    return Err(Stopped::Cancelled);
                }
                self.call(call).await?;
            }
        }
        Err(Stopped::Failed(TaskError::StepLimit(max_steps)))
    }

    /// Announces, admits, runs and records one tool call of the child, shown to the editor as
    /// a call of its own.
    async fn call(&self, call: &ToolCall) -> Result<(), Stopped> {
        let turn = self.run.turn;
        let description = tools::describe(&call.name, &call.arguments);
        let asks = self.asks(call);
        let shown = self
            .record_shown(description.event(turn, call, asks), true)
            .await?;
        let result = self.result(call, &description, &shown).await;
        self.record_shown(
            Event::ToolResult {
                turn,
                call_id: call.id.clone(),
                status: result.status,
                output: result.text,
                facts: result.facts,
                diff: result.diff,
            },
            false,
        )
        .await?;
        Ok(())
    }

    /// Writes one of the child's records and shows the editor what it means, as
    /// [`fold::replay`] shows it again; the id the editor knows the call by.
    async fn record_shown(&self, event: Event, sync: bool) -> Result<String, Stopped> {
        let record = self.record(event, sync)?;
        let session = &self.run.session;
        let items = session.with_records(|records| fold::items_of(records, record.seq));
        let mut shown = None;
        for item in &items {
            if let ReplayItem::ToolCall { call_id, .. } | ReplayItem::ToolResult { call_id, .. } =
                item
            {
                shown = Some(call_id.clone());
            }
            if let Some(notice) = session.told_gaps.notice(item) {
                let _ = session.show(&self.run.cx, notice).await;
            }
            let _ = session.show(&self.run.cx, updates::update_for(item)).await;
        }
        shown.ok_or(Stopped::Failed(TaskError::NotShown(record.seq)))
    }

    /// The result of one call, shown to the editor as `shown`: refused when the child's scope
    /// does not have the tool or the call asks to escalate, else run (a `task` call starts a
    /// grandchild, nested under `shown`).
    async fn result(
        &self,
        call: &ToolCall,
        description: &ToolDescription,
        shown: &str,
    ) -> ToolResult {
        let session = &self.run.session;
        let mode = session.effective_mode();
        let refused = |text: String| {
            ToolResult::failed(
                text,
                json!({ "mode": mode.as_str(), "invalid_call": true, "agent": self.tag }),
            )
        };
        let scope = self.lineage.scope();
        if let Err(not_offered) = scope.admit(&session.tools.registry(), &call.name) {
            return refused(not_offered.to_string());
        }
        let cancel = self.ctx.signal();
        match tools::requested_escalation(&session.tools, call) {
            Err(e) => return refused(e.to_string()),
            Ok(Some(_)) => return refused(CHILD_MAY_NOT_ESCALATE.to_owned()),
            Ok(None) => {}
        }
        // `ask_before` gates a delegation too: a person who lists `task` is asked before any
        // child starts, at every level.
        let proposal = match self.approve(call, description, shown, &cancel).await {
            Ok(proposal) => proposal,
            Err(refusal) => return refusal,
        };
        if call.name == TASK {
            return run_task(
                &self.run,
                self.ctx.id(),
                &self.lineage,
                call,
                shown,
                &cancel,
            )
            .await;
        }
        // The mark is taken before the mode is read: a narrowing in between still reaches a
        // background task this call starts under the wider mode.
        let narrowings = session.tools.background().mark();
        let live = LiveOutput::new();
        let context = CallContext {
            mode: session.effective_mode(),
            cancel: cancel.clone(),
            narrowings,
            // What a child's command prints so far is shown on its nested call, as a top-level
            // call's is.
            live: Some(live.clone()),
            // Nothing of a child outlives its outcome: its background tasks end with it.
            owner: Some(TaskOwner {
                agent: self.tag.clone(),
                ended: self.ctx.signal(),
            }),
        };
        // A write the person was shown writes exactly that, or nothing.
        let running = async {
            match proposal {
                Some(proposal) => tools::run_proposed(&session.tools, proposal, context).await,
                None => tools::run_scoped(&session.tools, scope, call, context).await,
            }
        };
        live::showing(running, &live, &cancel, |text| async move {
            let _ = session
                .show(&self.run.cx, updates::live_output(shown, text))
                .await;
        })
        .await
    }

    /// Whether the call asks a person first (a tool listed in `approval.ask_before`).
    fn asks(&self, call: &ToolCall) -> bool {
        self.run.state.options.asks_before(&call.name)
    }

    /// Asks the user before a tool listed in `approval.ask_before` runs, naming the child: the
    /// request is attached to the nested call `shown` and titled with the persona. A file
    /// tool's card carries the change it will write and an "always" for that one file, as a
    /// top-level call's does. `Ok` when the call may run, with the write the person was shown;
    /// otherwise the result it answers instead.
    async fn approve(
        &self,
        call: &ToolCall,
        description: &ToolDescription,
        shown: &str,
        cancel: &Cancel,
    ) -> Result<Option<tools::Proposal>, ToolResult> {
        let state = &self.run.state;
        if !self.asks(call) {
            return Ok(None);
        }
        let persona = self.ctx.persona();
        let child = format!("the child agent {} ({persona})", self.tag);
        let mode = self.run.session.effective_mode();
        let ask = questions::listed(call, description, mode, Some(&child));
        let (mut ask, proposal) =
            questions::listed_with_change(ask, &self.run.session.tools, call, mode).await;
        ask.call_id = Some(shown.to_owned());
        ask.question.title = nested::title(persona, &ask.question.title);
        let decision = state
            .approvals
            .decision(&*self.run.session, ask, cancel)
            .await;
        let outcome = decision.outcome;
        let Some(text) = approval::tool_refusal(&call.name, decision) else {
            // Announced pending: it runs now.
            let update = updates::status(shown, ToolCallStatus::InProgress);
            let _ = self.run.session.show(&self.run.cx, update).await;
            return Ok(proposal);
        };
        Err(ToolResult::failed(
            text,
            json!({ "approval": outcome.as_str() }),
        ))
    }

    /// Writes one of the child's records, tagged, while it has not ended.
    fn record(&self, event: Event, sync: bool) -> Result<Record, Stopped> {
        let session = &self.run.session;
        match self
            .ctx
            .record(|| session.append_as(Some(&self.tag), event, sync))
        {
            Ok(written) => written.map_err(|e| Stopped::Failed(TaskError::Log(e))),
            Err(_settled) => Err(Stopped::Cancelled),
        }
    }
}

/// How a child's loop stopped without an answer.
enum Stopped {
    Cancelled,
    Failed(TaskError),
}

/// What a child agent is told when a call asks for `sandbox_permissions`.
pub const CHILD_MAY_NOT_ESCALATE: &str = "a child agent may not escalate its sandbox: its \
commands run under the session's mode, and sandbox_permissions is not one of its bash fields; \
run the command without it, or report in your answer what needs the wider access";
