//! One prompt turn: ask the model, stream its text, run the tools it calls, feed the results
//! back, until it answers without tool calls, the step limit is reached, or the user cancels.
//!
//! Every step is recorded before it is shown: the editor's stream is derived from the appended
//! records, so what `session/load` replays is what was shown. A tool call is logged and synced
//! before it runs; the turn's end is synced too.
//!
//! Knob switches held while the session was idle are written right after the prompt. Each tool
//! call runs under the session's effective sandbox mode at the moment it starts, so a switch
//! during the turn applies from the next call on; each model request states the effective
//! approval policy, and tells of background tasks a narrowing stopped since the last one. A tool listed in `approval.ask_before` asks through the approval seam before
//! it runs, attached to its already announced call, and runs only if allowed once.

use std::sync::Arc;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ContentBlock, PromptResponse, SessionNotification, StopReason,
};
use agent_client_protocol::{Client, Error};

use super::sessions::Session;
use super::{AgentState, error, instructions, updates};
use crate::approval::{self, Ask};
use crate::cancel::Cancel;
use crate::model::{ChatRequest, Delta, FinishReason, Message, Provider, ToolCall};
use crate::narrowing;
use crate::session::fold;
use crate::session::{Event, LogError, LoggedToolCall, Record};
use crate::tools::{self, CallContext, ToolResult};
use confine_protocol::Mode;

/// Runs the prompt and returns the answer to `session/prompt`.
pub async fn run(
    state: &Arc<AgentState>,
    session: &Arc<Session>,
    prompt: &[ContentBlock],
    cx: &ConnectionTo<Client>,
) -> Result<PromptResponse, Error> {
    let Ok(_turn_lock) = session.turn.try_lock() else {
        return Err(error(
            -32602,
            format!(
                "a prompt is already running in session {}; cancel it or wait for it to end",
                session.id
            ),
        ));
    };
    let cancel = session.begin_turn();
    let turn = Turn {
        state,
        session,
        cx,
        number: fold::last_turn(&session.records()) + 1,
        cancel,
    };
    let stop = turn.drive(&prompt_text(prompt)).await;
    session.hold_switches();
    session.end_turn();
    let stop = stop.map_err(|e| error(-32603, format!("cannot write the session log: {e}")))?;
    Ok(PromptResponse::new(stop))
}

/// The text of a prompt: text blocks as they are, links to resources named.
fn prompt_text(prompt: &[ContentBlock]) -> String {
    let parts: Vec<String> = prompt
        .iter()
        .map(|block| match block {
            ContentBlock::Text(t) => t.text.clone(),
            ContentBlock::ResourceLink(link) => format!("[resource: {}]", link.uri),
            other => format!("[unsupported content: {}]", content_kind(other)),
        })
        .collect();
    parts.join("\n")
}

fn content_kind(block: &ContentBlock) -> &'static str {
    match block {
        ContentBlock::Image(_) => "image",
        ContentBlock::Audio(_) => "audio",
        ContentBlock::Resource(_) => "embedded resource",
        _ => "other",
    }
}

struct Turn<'a> {
    state: &'a Arc<AgentState>,
    session: &'a Arc<Session>,
    cx: &'a ConnectionTo<Client>,
    number: u64,
    cancel: Cancel,
}

impl Turn<'_> {
    async fn drive(&self, text: &str) -> Result<StopReason, LogError> {
        self.record(
            Event::PromptSubmitted {
                turn: self.number,
                text: text.to_owned(),
            },
            false,
        )?;
        self.session.flush_switches()?;
        self.record(Event::TurnStarted { turn: self.number }, true)?;
        let stop = self.steps().await?;
        // A cancel outranks whatever the turn was doing when it came.
        let stop = if self.cancel.is_cancelled() {
            StopReason::Cancelled
        } else {
            stop
        };
        self.record(
            Event::TurnEnded {
                turn: self.number,
                stop_reason: stop_name(stop).to_owned(),
            },
            true,
        )?;
        Ok(stop)
    }

    async fn steps(&self) -> Result<StopReason, LogError> {
        let provider = match &self.state.options.provider {
            Ok(provider) => provider.clone(),
            Err(why) => {
                self.show(Event::ModelError {
                    turn: self.number,
                    step: 1,
                    message: why.clone(),
                })?;
                return Ok(StopReason::EndTurn);
            }
        };
        for step in 1..=self.state.options.max_steps {
            if self.cancel.is_cancelled() {
                return Ok(StopReason::Cancelled);
            }
            let Some(answer) = self.ask(&*provider, step).await? else {
                return Ok(StopReason::Cancelled);
            };
            let Ok(answer) = answer else {
                return Ok(StopReason::EndTurn);
            };
            if answer.tool_calls.is_empty() {
                return Ok(if answer.finish == FinishReason::ContentFilter {
                    StopReason::Refusal
                } else {
                    StopReason::EndTurn
                });
            }
            for call in &answer.tool_calls {
                if self.cancel.is_cancelled() {
                    return Ok(StopReason::Cancelled);
                }
                let description = tools::describe(&call.name, &call.arguments);
                self.show_synced(Event::ToolCall {
                    turn: self.number,
                    call_id: call.id.clone(),
                    tool: call.name.clone(),
                    title: description.title,
                    kind: description.kind.as_str().to_owned(),
                    input: description.input,
                })?;
                // Taken before the gate reads the mode: a narrowing after it reaches a
                // background task this call starts, however long the gate takes.
                let narrowings = self.session.tools.background().mark();
                let result = match self.gate(call).await {
                    Err(refused) => refused,
                    Ok(mode) => {
                        let context = CallContext {
                            mode,
                            cancel: self.cancel.clone(),
                            narrowings,
                        };
                        tools::run(&self.session.tools, call, context).await
                    }
                };
                self.show(Event::ToolResult {
                    turn: self.number,
                    call_id: call.id.clone(),
                    status: result.status,
                    output: result.text,
                    facts: result.facts,
                })?;
            }
        }
        Ok(StopReason::MaxTurnRequests)
    }

    /// Decides the mode a call runs under, asking the user when it must: an escalation (one
    /// command under a wider mode) goes through the gate and the seam; any other call runs under
    /// the session's effective mode, after `ask_before`. `Err` is the result it answers instead
    /// of running.
    async fn gate(&self, call: &ToolCall) -> Result<Mode, ToolResult> {
        let effective = self.session.effective_mode();
        let refused = |text: String, extra: serde_json::Value| {
            let mut facts = serde_json::json!({ "mode": effective.as_str() });
            if let (Some(facts), Some(extra)) = (facts.as_object_mut(), extra.as_object()) {
                facts.extend(extra.clone());
            }
            ToolResult::failed(text, facts)
        };
        let escalation = match tools::requested_escalation(&self.session.tools, call) {
            Err(text) => return Err(refused(text, serde_json::json!({ "invalid_call": true }))),
            Ok(None) => {
                return match self.approve(call).await {
                    Some(refusal) => Err(refusal),
                    // Read again: the user may have switched the mode while asked.
                    None => Ok(self.session.effective_mode()),
                };
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
        if let Err(text) = tools::escalation_gate(wanted, &context) {
            return Err(refused(
                text,
                serde_json::json!({ "escalation": wanted.as_str() }),
            ));
        }
        let ask = Ask {
            tool: call.name.clone(),
            call_id: Some(call.id.clone()),
            reason: Some(format!(
                "escalate sandbox to {}: {}",
                wanted.as_str(),
                escalation.justification
            )),
        };
        let outcome = self
            .state
            .approvals
            .request(&**self.session, ask, &self.cancel)
            .await;
        match approval::escalation_refusal(wanted, outcome) {
            None => Ok(wanted),
            Some(text) => Err(refused(
                text,
                serde_json::json!({ "escalation": wanted.as_str(), "approval": outcome.as_str() }),
            )),
        }
    }

    /// Asks the user before a tool listed in `approval.ask_before` runs. `None` when the call
    /// may run; otherwise the result it answers instead.
    async fn approve(&self, call: &ToolCall) -> Option<ToolResult> {
        if !self.state.options.ask_before.contains(&call.name) {
            return None;
        }
        let ask = Ask {
            tool: call.name.clone(),
            call_id: Some(call.id.clone()),
            reason: Some(format!(
                "tool \"{}\" is listed in approval.ask_before",
                call.name
            )),
        };
        let outcome = self
            .state
            .approvals
            .request(&**self.session, ask, &self.cancel)
            .await;
        let text = approval::tool_refusal(&call.name, outcome)?;
        Some(ToolResult::failed(
            text,
            serde_json::json!({ "approval": outcome.as_str() }),
        ))
    }

    /// One model request. `None` when cancelled; `Some(Err)` when the model failed (recorded
    /// and shown).
    async fn ask(
        &self,
        provider: &dyn Provider,
        step: u64,
    ) -> Result<Option<Result<crate::model::AssistantTurn, ()>>, LogError> {
        let records = self.session.records();
        let policy = approval::policy::effective(&records, self.session.defaults.policy);
        // Told once, in this request only: the next one states the policy it names, and a
        // stopped task is news only until the model was told.
        let notices: Vec<String> = [
            approval::policy::notice(&records, policy),
            narrowing::notice(&records),
        ]
        .into_iter()
        .flatten()
        .collect();
        let instructions = instructions::for_request(&self.session.cwd, policy, &notices);
        let effective = self.session.effective_mode();
        let specs = tools::specs_with(&self.session.tools.options_for(effective));
        let mut messages = vec![Message::system(instructions.clone())];
        messages.extend(fold::history(&records));
        let request = ChatRequest {
            messages,
            tools: specs.clone(),
        };
        self.record(
            Event::ModelRequest {
                turn: self.number,
                step,
                model: provider.describe(),
                instructions,
                tools: specs.iter().map(|s| s.name.clone()).collect(),
            },
            false,
        )?;
        let cx = self.cx.clone();
        let session_id = self.session.id.clone();
        let mut on_delta = move |delta: Delta| {
            if let Delta::Text(text) = delta {
                let update = updates::agent_text(&text);
                let _ = cx.send_notification(SessionNotification::new(session_id.clone(), update));
            }
        };
        let outcome = tokio::select! {
            answer = provider.complete(&request, &mut on_delta) => answer,
            () = self.cancel.cancelled() => return Ok(None),
        };
        match outcome {
            Ok(answer) => {
                // The text was streamed as it came: record it without showing it again.
                self.record(
                    Event::ModelOutput {
                        turn: self.number,
                        step,
                        text: answer.text.clone(),
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
                    },
                    false,
                )?;
                Ok(Some(Ok(answer)))
            }
            Err(e) => {
                eprintln!("agentd: session {}: model error: {e}", self.session.id);
                self.show(Event::ModelError {
                    turn: self.number,
                    step,
                    message: e.to_string(),
                })?;
                Ok(Some(Err(())))
            }
        }
    }

    fn record(&self, event: Event, sync: bool) -> Result<Record, LogError> {
        self.session.append(event, sync)
    }

    /// Records an event and shows the editor what it means.
    fn show(&self, event: Event) -> Result<(), LogError> {
        let record = self.record(event, false)?;
        self.notify(&record);
        Ok(())
    }

    /// Like [`Turn::show`], durable before anything it announces happens.
    fn show_synced(&self, event: Event) -> Result<(), LogError> {
        let record = self.record(event, true)?;
        self.notify(&record);
        Ok(())
    }

    fn notify(&self, record: &Record) {
        updates::notify(self.cx, &self.session.id, record);
    }
}

/// The wire name of a stop reason, as logged.
fn stop_name(stop: StopReason) -> &'static str {
    match stop {
        StopReason::EndTurn => "end_turn",
        StopReason::MaxTokens => "max_tokens",
        StopReason::MaxTurnRequests => "max_turn_requests",
        StopReason::Refusal => "refusal",
        StopReason::Cancelled => "cancelled",
        _ => "end_turn",
    }
}
