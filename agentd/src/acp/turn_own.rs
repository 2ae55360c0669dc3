//! What agentd answers itself in a turn, instead of the model or a tool: the person's slash
//! commands ([`super::commands`]) and the model's plan (`update_plan`).
//!
//! A prompt that starts with a slash command runs it ([`Turn::command`]): `/status` and `/mcp`
//! are answered by agentd, `/compact` summarises the history now, `/init` runs as a turn whose
//! prompt agentd wrote, `/undo` restores the workspace after asking (`turn_undo.rs`). `commands::parse` sees the person's prompt and nothing else: the model's
//! text and tool results never run a command. An `update_plan` call records the plan
//! (`plan/updated`) and shows it as ACP's `plan` update, between the call and its result, which
//! are shown as every call's are.

use agent_client_protocol::v1::schema::{ContentBlock, StopReason};

use super::super::commands::{self, Command, Invocation};
use super::super::compaction::{Compaction, Summarised};
use super::super::prompt;
use super::{Ending, Turn};
use crate::model::{Provider, ToolCall};
use crate::session::{Event, LogError};
use crate::tools::{self, ToolResult, UPDATE_PLAN};

impl Turn<'_> {
    /// Answers the person's prompt `blocks`: the slash command it runs, or a turn of the model.
    pub(super) async fn answer(&self, blocks: &[ContentBlock]) -> Result<Ending, LogError> {
        match commands::parse(blocks) {
            Some(invocation) => self.command(&invocation, blocks).await,
            None => self.drive(blocks, self.prompt_event(blocks, None)).await,
        }
    }

    /// The record of the turn's prompt: the person's (`prompt/submitted`), or the one agentd
    /// wrote for a command (`command/prompt`), whose `command/run` holds what the person typed.
    fn prompt_event(&self, blocks: &[ContentBlock], written: Option<(Command, String)>) -> Event {
        match written {
            None => Event::PromptSubmitted {
                turn: self.number,
                text: prompt::text(blocks),
            },
            Some((command, text)) => Event::CommandPrompt {
                turn: self.number,
                command: command.name().to_owned(),
                text,
            },
        }
    }

    /// Runs the slash command of `invocation`, typed as `blocks`: recorded as what the person
    /// typed (`command/run`), then answered by agentd or run as a turn (see [`commands`]).
    pub(super) async fn command(
        &self,
        invocation: &Invocation,
        blocks: &[ContentBlock],
    ) -> Result<Ending, LogError> {
        let command = invocation.command;
        self.record(
            Event::CommandRun {
                turn: self.number,
                command: command.name().to_owned(),
                input: prompt::text(blocks),
            },
            true,
        )?;
        // A switch made while idle counts from this prompt on, as for any prompt: `/status`
        // tells the mode the person chose.
        self.session.flush_switches()?;
        let answer = match command {
            Command::Init => {
                let written = commands::init_prompt(&self.session.cwd, &invocation.rest);
                let prompt = self.prompt_event(blocks, Some((command, written)));
                return self.drive(blocks, prompt).await;
            }
            Command::Compact => return self.compact().await,
            Command::Status => commands::status(self.session, &self.cancel).await,
            Command::Mcp => commands::mcp(self.session),
            Command::Undo => return self.undo().await,
        };
        self.reply(command, answer).await
    }

    /// agentd's own answer to `command`, recorded and shown as the agent's text.
    pub(super) async fn reply(&self, command: Command, text: String) -> Result<Ending, LogError> {
        self.show(Event::CommandOutput {
            turn: self.number,
            command: command.name().to_owned(),
            text,
        })
        .await?;
        Ok(Ending::Stop(StopReason::EndTurn))
    }

    /// `/compact`: every turn before this one summarised now, by the session's model; the
    /// summary's note, or agentd's answer saying why there is none.
    async fn compact(&self) -> Result<Ending, LogError> {
        let provider = match self.model(1).await? {
            Ok((provider, _)) => provider,
            Err(ending) => return Ok(ending),
        };
        // The estimates are of the request the next turn starts with, guidance included.
        let guidance = self.guidance().await;
        match self
            .compaction(&*provider)
            .now(&self.request(guidance.as_deref()).0)
            .await?
        {
            Summarised::Done => Ok(Ending::Stop(StopReason::EndTurn)),
            Summarised::Cancelled => Ok(Ending::Stop(StopReason::Cancelled)),
            Summarised::Failed(why) => {
                let text = format!("The history was not compacted: {why}.\n");
                self.reply(Command::Compact, text).await
            }
        }
    }

    /// Compaction of this turn's session by `provider`.
    pub(super) fn compaction<'a>(&'a self, provider: &'a dyn Provider) -> Compaction<'a> {
        Compaction {
            session: self.session,
            cx: self.cx,
            provider,
            turn: self.number,
            cancel: &self.cancel,
        }
    }

    /// Whether `call` is the session's `update_plan`.
    pub(super) fn plans(&self, call: &ToolCall) -> bool {
        call.name == UPDATE_PLAN && self.session.tools.registry().contains(UPDATE_PLAN)
    }

    /// An `update_plan` call, after `ask_before` as any tool: the plan set, or the refusal.
    pub(super) async fn plan_call(
        &self,
        call: &ToolCall,
        description: &tools::ToolDescription,
    ) -> Result<ToolResult, LogError> {
        match self.approve(call, description).await {
            Err(refused) => Ok(refused),
            // A plan writes no file: there is no change to show.
            Ok(_) => self.update_plan(call).await,
        }
    }

    /// Sets the plan an `update_plan` call gives: recorded and shown as ACP's `plan` update.
    /// The result the model reads, or the refusal of a malformed plan (nothing recorded).
    async fn update_plan(&self, call: &ToolCall) -> Result<ToolResult, LogError> {
        let entries = match tools::plan::parse(&call.arguments) {
            Ok(entries) => entries,
            Err(e) => {
                let invalid = serde_json::json!({ "invalid_call": true });
                return Ok(ToolResult::failed(e.to_string(), invalid));
            }
        };
        let text = tools::plan::result_text(&entries);
        let steps = entries.len();
        self.show(Event::PlanUpdated {
            turn: self.number,
            call_id: call.id.clone(),
            entries,
        })
        .await?;
        Ok(ToolResult::completed(
            text,
            serde_json::json!({ "plan_steps": steps }),
        ))
    }
}
