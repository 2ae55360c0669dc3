//! One prompt turn: ask the model, stream its reasoning and text, run the tools it calls, feed
//! the results back, until it answers without tool calls, its answer is cut off (the token limit
//! or the server's filter), the step limit is reached, the model fails, or the user cancels.
//! While a foreground command runs, what it printed so far is shown as progress of its call
//! ([`live`]); that progress is not recorded, and the call's result replaces it.
//!
//! Every step is recorded before it is shown: the editor's stream is derived from the appended
//! records, so what `session/load` replays is what was shown. (The model's reasoning and text
//! stream as they arrive and are recorded whole when the step ends, also when it fails or is
//! cancelled half-way.) A tool call is logged and synced before it runs; the turn's end is
//! synced too.
//!
//! A turn the model failed is answered with a JSON-RPC error, not a stop reason, so that a
//! client cannot take it for an answer: ACP's internal error with the failure in `message` and
//! `data` = `{"kind", "status", "retries"}` (see [`crate::model::FailureKind`]). The error is
//! sent after what was shown and the failure are in the log, so `session/load` replays them.
//!
//! Before the first request of a turn whose history nears the model's context window, the older
//! turns are summarised ([`super::compaction`]). A prompt that starts with a slash command runs
//! it instead, and the model's `update_plan` sets its plan: what agentd answers itself ([`own`]).
//!
//! Knob switches held while the session was idle are written right after the prompt. Each tool
//! call runs under the session's effective sandbox mode at the moment it starts, so a switch
//! during the turn applies from the next call on; each model request goes to the model the
//! session has selected at that moment (so a switch of `model` during the turn reaches its next
//! request), states the effective approval policy, and tells of background tasks a narrowing
//! stopped since the last one. A tool listed in `approval.ask_before` asks through the approval
//! seam before it runs, attached to its already announced call, and runs only if allowed once.

use std::sync::Arc;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{ContentBlock, PromptResponse, StopReason, ToolCallStatus};
use agent_client_protocol::{Client, Error};

use super::compaction::Compacted;
use super::error::AcpError;
use super::model_failure::ModelFailure;
use super::project_docs;
use super::prompt;
use super::sessions::{AgentState, Session};
use super::task::{self, TaskRun};
use super::{live, questions, updates};
use crate::agents::Lineage;
use crate::agents::lifecycle::AgentId;
use crate::approval;
use crate::cancel::Cancel;
use crate::config::CompactionPolicy;
use crate::model::{AssistantTurn, Delta, FinishReason, Provider, Reasoning, ToolCall};
use crate::session::{Event, LogError, Record, fold};
use crate::tools::{self, CallContext, LiveOutput, NarrowingMark, TASK, ToolResult};
use confine_protocol::Mode;

/// Runs the prompt and returns the answer to `session/prompt`.
pub async fn run(
    state: &Arc<AgentState>,
    session: &Arc<Session>,
    prompt: &[ContentBlock],
    cx: &ConnectionTo<Client>,
) -> Result<PromptResponse, Error> {
    let Ok(_turn_lock) = session.turn.try_lock() else {
        return Err(AcpError::PromptRunning(session.id.clone()).into());
    };
    session.read_project().await?;
    // A prompt that reached the session before its close began: the session is gone.
    let Some(cancel) = session.begin_turn() else {
        return Err(AcpError::NotOpen(session.id.clone()).into());
    };
    // The model is offered the tools of the session's MCP servers: their start ends first.
    tokio::select! {
        () = session.tools.mcp().ready() => {}
        () = cancel.cancelled() => {}
    }
    let turn = Turn {
        state,
        session,
        cx,
        number: session.with_records(fold::last_turn) + 1,
        cancel,
    };
    let ending = turn.answer(prompt).await;
    session.hold_switches();
    session.end_turn();
    let ending = ending.map_err(AcpError::LogWrite)?;
    match ending {
        Ending::Stop(stop) => Ok(PromptResponse::new(stop)),
        Ending::Failed(failure) => Err(failure.into_error()),
    }
}

/// How a turn ended.
enum Ending {
    Stop(StopReason),
    /// The model failed; the prompt is answered with this error.
    Failed(ModelFailure),
}

impl Ending {
    /// The word `turn/ended` records.
    fn word(&self) -> &'static str {
        match self {
            Ending::Stop(stop) => stop_name(*stop),
            Ending::Failed(_) => "failed",
        }
    }
}

/// The stop reason a model answer ends the turn with, or `None` when the turn goes on to run its
/// tool calls: `max_tokens` when the answer hit the token limit and `refusal` when the server's
/// filter stopped it (their tool calls do not run: the last one's arguments may be cut off),
/// `end_turn` when it called no tools.
pub(crate) fn stop_after(answer: &AssistantTurn) -> Option<StopReason> {
    match answer.finish {
        FinishReason::Length => Some(StopReason::MaxTokens),
        FinishReason::ContentFilter => Some(StopReason::Refusal),
        _ if answer.tool_calls.is_empty() => Some(StopReason::EndTurn),
        _ => None,
    }
}

#[path = "turn_model.rs"]
mod model;
#[path = "turn_own.rs"]
mod own;
#[path = "turn_undo.rs"]
mod undo;

struct Turn<'a> {
    state: &'a Arc<AgentState>,
    session: &'a Arc<Session>,
    cx: &'a ConnectionTo<Client>,
    number: u64,
    cancel: Cancel,
}

impl Turn<'_> {
    /// Runs the turn of `blocks`, recording `prompt` first (see [`Turn::prompt_event`]).
    async fn drive(&self, blocks: &[ContentBlock], prompt: Event) -> Result<Ending, LogError> {
        self.record(prompt, false)?;
        self.session.flush_switches()?;
        let resources =
            prompt::resources(&self.session.tools, blocks, self.session.effective_mode()).await;
        if !resources.is_empty() {
            self.record(
                Event::PromptResources {
                    turn: self.number,
                    resources,
                },
                false,
            )?;
        }
        self.record(Event::TurnStarted { turn: self.number }, true)?;
        // Before anything of the turn can change a file.
        self.checkpoint_before().await?;
        // Read once a turn, under the mode its calls start with, and stated in each request.
        let guidance = self.guidance().await;
        let ending = self.steps(guidance.as_deref()).await?;
        // A cancel outranks whatever the turn was doing when it came, a failure included.
        let ending = if self.cancel.is_cancelled() {
            Ending::Stop(StopReason::Cancelled)
        } else {
            ending
        };
        self.checkpoint_after().await?;
        self.record(
            Event::TurnEnded {
                turn: self.number,
                stop_reason: ending.word().to_owned(),
            },
            true,
        )?;
        Ok(ending)
    }

    /// The project's guidance (`AGENTS.md`), read now under the session's mode, for the
    /// requests of this turn.
    async fn guidance(&self) -> Option<String> {
        let mode = self.session.effective_mode();
        let docs = project_docs::read(&self.session.tools, &self.session.cwd, mode).await;
        project_docs::section(&docs)
    }

    /// The model the session has selected now, with how its history is compacted, or the
    /// ending of a turn whose model cannot be used (recorded and shown as step `step`'s).
    async fn model(&self, step: u64) -> Result<Result<ModelInUse, Ending>, LogError> {
        let models = self.session.models();
        let model = self.session.selected_model();
        match models.provider_of(model) {
            Ok(provider) => Ok(Ok((provider, model.compaction))),
            Err(why) => {
                let failure = ModelFailure::unusable(&why);
                self.show(failure.event(self.number, step)).await?;
                Ok(Err(Ending::Failed(failure)))
            }
        }
    }

    /// The turn's steps: a request to the model, then the answer's tool calls, until the model
    /// stops, the turn is cancelled or it runs out of steps.
    async fn steps(&self, guidance: Option<&str>) -> Result<Ending, LogError> {
        let (provider, compaction) = match self.model(1).await? {
            Ok(model) => model,
            Err(ending) => return Ok(ending),
        };
        if let Some(policy) = compaction {
            let compaction = self.compaction(&*provider);
            let request = self.request(guidance).0;
            if compaction.before_turn(&policy, &request).await? == Compacted::Cancelled {
                return Ok(Ending::Stop(StopReason::Cancelled));
            }
        }
        for step in 1..=self.state.options.max_steps {
            if self.cancel.is_cancelled() {
                return Ok(Ending::Stop(StopReason::Cancelled));
            }
            // Read at every request: a switch during the turn reaches its next request.
            let provider = match self.model(step).await? {
                Ok((provider, _)) => provider,
                Err(ending) => return Ok(ending),
            };
            let answer = match self.ask(&*provider, step, guidance).await? {
                None => return Ok(Ending::Stop(StopReason::Cancelled)),
                Some(Err(failure)) => return Ok(Ending::Failed(failure)),
                Some(Ok(answer)) => answer,
            };
            if let Some(stop) = stop_after(&answer) {
                return Ok(Ending::Stop(stop));
            }
            for call in &answer.tool_calls {
                if self.cancel.is_cancelled() {
                    return Ok(Ending::Stop(StopReason::Cancelled));
                }
                self.call(call).await?;
            }
        }
        Ok(Ending::Stop(StopReason::MaxTurnRequests))
    }

    /// One tool call of the model's answer: announced, gated and run (or delegated, or
    /// planned), and its result shown.
    async fn call(&self, call: &ToolCall) -> Result<(), LogError> {
        let description = tools::describe(&call.name, &call.arguments);
        // Read once: whether it asks to escalate decides how it is announced and gated.
        let requested = tools::requested_escalation(&self.session.tools, call);
        let asks = self.state.options.asks_before(&call.name) || matches!(requested, Ok(Some(_)));
        self.show_synced(description.event(self.number, call, asks))
            .await?;
        // Taken before the gate reads the mode: a narrowing after it reaches a
        // background task this call starts, however long the gate takes.
        let narrowings = self.session.tools.background().mark();
        let delegates = call.name == TASK && self.session.tools.registry().contains(TASK);
        let result = if delegates {
            // `ask_before` gates a delegation as it gates any other tool.
            match self.approve(call, &description).await {
                Err(refused) => refused,
                Ok(_) => self.delegate(call).await,
            }
        } else if self.plans(call) {
            self.plan_call(call, &description).await?
        } else {
            match self.gate(call, &description, requested).await {
                Err(refused) => refused,
                Ok((mode, proposal)) => self.run_gated(call, mode, proposal, narrowings).await,
            }
        };
        self.show(Event::ToolResult {
            turn: self.number,
            call_id: call.id.clone(),
            status: result.status,
            output: result.text,
            facts: result.facts,
            diff: result.diff,
        })
        .await?;
        Ok(())
    }

    /// Runs a call the gate let through, under `mode`, its output shown live as it comes.
    async fn run_gated(
        &self,
        call: &ToolCall,
        mode: Mode,
        proposal: Option<tools::Proposal>,
        narrowings: NarrowingMark,
    ) -> ToolResult {
        let live = LiveOutput::new();
        let context = CallContext {
            mode,
            cancel: self.cancel.clone(),
            narrowings,
            live: Some(live.clone()),
            owner: None,
        };
        let tools = &self.session.tools;
        // A write a person was shown writes exactly what was shown.
        let running = async move {
            match proposal {
                Some(proposal) => tools::run_proposed(tools, proposal, context).await,
                None => tools::run(tools, call, context).await,
            }
        };
        let call_id = &call.id;
        live::showing(running, &live, &self.cancel, move |text| {
            self.show_live(call_id, text)
        })
        .await
    }

    /// Runs a top-level `task` call, shown under its own id: a child agent answers it ([`task`]).
    async fn delegate(&self, call: &ToolCall) -> ToolResult {
        let run = TaskRun {
            state: self.state.clone(),
            session: self.session.clone(),
            cx: self.cx.clone(),
            turn: self.number,
        };
        task::run_task(
            &run,
            AgentId::TOP,
            &Lineage::top(),
            call,
            &call.id,
            &self.cancel,
        )
        .await
    }

    /// Decides the mode a call runs under, asking the user when it must: an escalation (one
    /// command or one write under a wider mode) goes through the gate and the seam; any other
    /// call runs under the session's effective mode, after `ask_before`. A file tool's write
    /// that a person is asked about comes back as the [`tools::Proposal`] they were shown, to be
    /// written as it is. `Err` is the result it answers instead of running.
    async fn gate(
        &self,
        call: &ToolCall,
        description: &tools::ToolDescription,
        requested: Result<Option<tools::Escalation>, tools::ArgsError>,
    ) -> Result<(Mode, Option<tools::Proposal>), ToolResult> {
        let effective = self.session.effective_mode();
        let refused = |text: String, extra: serde_json::Value| {
            let mut facts = serde_json::json!({ "mode": effective.as_str() });
            if let (Some(facts), Some(extra)) = (facts.as_object_mut(), extra.as_object()) {
                facts.extend(extra.clone());
            }
            ToolResult::failed(text, facts)
        };
        let escalation = match requested {
            Err(e) => {
                let invalid = serde_json::json!({ "invalid_call": true });
                return Err(refused(e.to_string(), invalid));
            }
            Ok(None) => {
                let proposal = self.approve(call, description).await?;
                // Read again: the user may have switched the mode while asked.
                return Ok((self.session.effective_mode(), proposal));
            }
            Ok(Some(escalation)) => escalation,
        };
        let wanted = escalation.mode;
        let context = tools::GateContext {
            offered: self.session.tools.options_for(effective).escalates(),
            effective,
            refusal: self.session.tools.composition().refusal(wanted),
            approval_service: true,
            agent: true,
        };
        if let Err(e) = tools::escalation_gate(wanted, &context) {
            return Err(refused(
                e.to_string(),
                serde_json::json!({ "escalation": wanted.as_str() }),
            ));
        }
        let ask = questions::escalation(
            call,
            description,
            wanted,
            effective,
            &escalation.justification,
        );
        // A write is computed under the mode it asks for before anyone is asked; one that
        // cannot be made there (git metadata, say) asks nobody.
        let (ask, proposal) = match tools::propose(&self.session.tools, call, wanted).await {
            None => (ask, None),
            Some(Err(cannot)) => return Err(cannot),
            Some(Ok(proposal)) => (
                questions::proposing(ask, &proposal, Some(wanted)),
                Some(proposal),
            ),
        };
        let decision = self
            .state
            .approvals
            .decision(&**self.session, ask, &self.cancel)
            .await;
        let outcome = decision.outcome;
        match approval::escalation_refusal(wanted, decision) {
            None => {
                self.show_running(&call.id).await;
                Ok((wanted, proposal))
            }
            Some(text) => Err(refused(
                text,
                serde_json::json!({ "escalation": wanted.as_str(), "approval": outcome.as_str() }),
            )),
        }
    }

    /// Asks the user before a tool listed in `approval.ask_before` runs. `Ok` when the call may
    /// run, with the write the person was shown for a file tool; otherwise the result it
    /// answers instead.
    async fn approve(
        &self,
        call: &ToolCall,
        description: &tools::ToolDescription,
    ) -> Result<Option<tools::Proposal>, ToolResult> {
        if !self.state.options.asks_before(&call.name) {
            return Ok(None);
        }
        let mode = self.session.effective_mode();
        let ask = questions::listed(call, description, mode, None);
        let (ask, proposal) =
            questions::listed_with_change(ask, &self.session.tools, call, mode).await;
        let decision = self
            .state
            .approvals
            .decision(&**self.session, ask, &self.cancel)
            .await;
        let outcome = decision.outcome;
        let Some(text) = approval::tool_refusal(&call.name, decision) else {
            self.show_running(&call.id).await;
            return Ok(proposal);
        };
        Err(ToolResult::failed(
            text,
            serde_json::json!({ "approval": outcome.as_str() }),
        ))
    }

    /// Records what the editor was shown of an answer that did not end, if anything.
    fn record_incomplete(&self, step: u64, shown: Shown) -> Result<(), LogError> {
        if shown.text.is_empty() && shown.reasoning.is_empty() {
            return Ok(());
        }
        self.record(
            Event::ModelOutput {
                turn: self.number,
                step,
                text: shown.text,
                reasoning: (!shown.reasoning.is_empty()).then_some(Reasoning {
                    text: shown.reasoning,
                    field: None,
                }),
                tool_calls: Vec::new(),
                finish: String::new(),
                incomplete: true,
            },
            false,
        )?;
        Ok(())
    }

    fn record(&self, event: Event, sync: bool) -> Result<Record, LogError> {
        self.session.append(event, sync)
    }

    /// Records an event and shows the editor what it means.
    async fn show(&self, event: Event) -> Result<(), LogError> {
        let record = self.record(event, false)?;
        self.session.show_record(self.cx, &record).await;
        Ok(())
    }

    /// Like [`Turn::show`], durable before anything it announces happens.
    async fn show_synced(&self, event: Event) -> Result<(), LogError> {
        let record = self.record(event, true)?;
        self.session.show_record(self.cx, &record).await;
        Ok(())
    }

    /// Shows the editor that the call `call_id`, announced `pending`, was allowed and runs; not
    /// recorded (its result ends it).
    async fn show_running(&self, call_id: &str) {
        let update = updates::status(call_id, ToolCallStatus::InProgress);
        let _ = self.session.show(self.cx, update).await;
    }

    /// Shows the editor what the running call `call_id` printed so far; not recorded (see
    /// [`live`]).
    async fn show_live(&self, call_id: &str, text: String) {
        let _ = self
            .session
            .show(self.cx, updates::live_output(call_id, text))
            .await;
    }

    /// Shows the editor one part of the answer in progress: its text or its reasoning, kept in
    /// `shown` once it was handed on (a part still waiting when the turn is cancelled was not
    /// shown).
    async fn show_delta(&self, delta: Delta, shown: &mut Shown) {
        match delta {
            Delta::Text(text) => {
                let _ = self.session.show(self.cx, updates::agent_text(&text)).await;
                shown.text.push_str(&text);
            }
            Delta::Reasoning(text) => {
                let _ = self
                    .session
                    .show(self.cx, updates::agent_thought(&text))
                    .await;
                shown.reasoning.push_str(&text);
            }
            Delta::ToolCallStarted { .. } | Delta::ToolCallArguments { .. } => {}
        }
    }
}

/// The provider a request goes to, and how the history is compacted for it.
type ModelInUse = (Arc<dyn Provider>, Option<CompactionPolicy>);

/// What the editor was shown of the answer in progress.
#[derive(Debug, Default)]
struct Shown {
    text: String,
    reasoning: String,
}

/// The wire name of a stop reason, as logged.
pub(crate) fn stop_name(stop: StopReason) -> &'static str {
    match stop {
        StopReason::EndTurn => "end_turn",
        StopReason::MaxTokens => "max_tokens",
        StopReason::MaxTurnRequests => "max_turn_requests",
        StopReason::Refusal => "refusal",
        StopReason::Cancelled => "cancelled",
        _ => "end_turn",
    }
}
