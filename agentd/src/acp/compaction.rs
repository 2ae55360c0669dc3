//! Compaction of a long session's history: before the first request of a turn whose estimate
//! ([`crate::model::estimate_tokens`]) exceeds the configured threshold, the turns older than the
//! latest `keep_turns` are summarised by the model in one request of their own, and the summary
//! stands for them from then on.
//!
//! The summary is recorded as `history/compacted` (synced) and everything else follows from the
//! record: the model's history ([`fold::history`] puts the summary in place of the turns it
//! covers, so `session/load` and a restart give the model the same history), and the note the
//! editor is shown, live and on replay ([`fold::compaction_note`]). A failed summary request (a
//! model error, an empty or cut-off answer) records nothing: the turn goes on with the whole
//! history, and a line on stderr says why. A cancel during it cancels the turn.
//!
//! The user's `/compact` ([`Compaction::now`], `acp::commands`) summarises every turn before
//! it at once, whatever the estimate and whether or not the model has a compaction policy; what
//! came of it is the same record, or the reason it did not happen as agentd's answer.
//!
//! The summary request sends the older turns as one text (a transcript), not as chat messages:
//! without tools on offer, some servers refuse a history with tool calls in it, and the
//! reasoning a provider wants back with them is no use to a summary. Each tool result in it is cut
//! to [`RESULT_SHOWN`] bytes. Child agents never compact their own history.

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;

use super::sessions::Session;
use crate::cancel::Cancel;
use crate::config::CompactionPolicy;
use crate::model::{ChatRequest, Deltas, Message, Provider, estimate_tokens, excerpt};
use crate::session::{EVENT_VERSION, Event, LogError, Record, fold};

/// What the summary request asks of the model.
pub const SUMMARY_INSTRUCTIONS: &str = "You compact the conversation of a coding agent with its \
     user so that the agent can go on with the work from your summary alone; the turns you \
     summarise will no longer be available to it. Write a concise summary of the conversation \
     you are given: what the user asked for and still wants, what was decided, which files were \
     read, created or changed (with their paths) and what was found in them, the commands that \
     were run and what came of them, what is done and what remains to do, and any open \
     questions. Keep exact names, paths, numbers and error messages. If the conversation starts \
     with an earlier summary, fold it into yours. Answer with the summary only.";

/// How much of one tool result the summary request shows.
pub const RESULT_SHOWN: usize = 4096;

/// What a turn's compaction came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compacted {
    /// The history is under the threshold, or nothing older than the kept turns is left.
    Unneeded,
    /// The summary was recorded.
    Done,
    /// The summary request failed; nothing was recorded.
    Failed,
    /// The turn was cancelled during the summary request; nothing was recorded.
    Cancelled,
}

/// What compacting needs of a turn.
pub struct Compaction<'a> {
    pub session: &'a Session,
    pub cx: &'a ConnectionTo<Client>,
    pub provider: &'a dyn Provider,
    pub turn: u64,
    pub cancel: &'a Cancel,
}

/// How one summary request ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Summarised {
    /// The summary was recorded and shown.
    Done,
    /// Nothing was recorded, for this reason.
    Failed(String),
    /// Cancelled during the request; nothing was recorded.
    Cancelled,
}

impl Compaction<'_> {
    /// Compacts the history first if `request`, the turn's first request, is over `policy`'s
    /// threshold.
    pub async fn before_turn(
        &self,
        policy: &CompactionPolicy,
        request: &ChatRequest,
    ) -> Result<Compacted, LogError> {
        let records = self.session.records();
        let estimate_before = estimate_tokens(request);
        let through = match plan(&records, self.turn, policy, estimate_before) {
            Plan::Under => return Ok(Compacted::Unneeded),
            Plan::NothingOlder => {
                self.note(&format!(
                    "the request's estimate ({estimate_before} tokens) is over the compaction \
                     threshold ({} tokens), but only the latest {} turns are left and they are \
                     kept verbatim",
                    policy.compact_at, policy.keep_turns
                ));
                return Ok(Compacted::Unneeded);
            }
            Plan::Through(through) => through,
        };
        Ok(match self.summarise(&records, through, request).await? {
            Summarised::Done => Compacted::Done,
            Summarised::Failed(why) => {
                self.note(&why);
                Compacted::Failed
            }
            Summarised::Cancelled => {
                eprintln!(
                    "agentd: session {}: turn {}: cancelled during the summary request; the \
                     history was not compacted",
                    self.session.id, self.turn
                );
                Compacted::Cancelled
            }
        })
    }

    /// Compacts every turn before this one now, whatever the estimate (the user's `/compact`);
    /// `request` is the request the session's next turn would start with. `Failed` also when
    /// there is nothing to compact.
    pub async fn now(&self, request: &ChatRequest) -> Result<Summarised, LogError> {
        let records = self.session.records();
        let through = self.turn.saturating_sub(1);
        // Nothing new since the latest summary (or since the start): no turn of the model's.
        let compacted = fold::compacted_through(&records);
        let since = fold::history_through(&records, through).len();
        if through <= compacted || since <= fold::history_through(&records, compacted).len() {
            return Ok(Summarised::Failed(
                "there is no conversation to compact yet (every earlier turn is summarised \
                 already, or there is none)"
                    .to_owned(),
            ));
        }
        self.summarise(&records, through, request).await
    }

    /// Asks for the summary of the turns up to `through` and records it, shown to the editor.
    async fn summarise(
        &self,
        records: &[Record],
        through: u64,
        request: &ChatRequest,
    ) -> Result<Summarised, LogError> {
        let estimate_before = estimate_tokens(request);
        let summary_request = summary_request(&fold::history_through(records, through));
        // Not streamed to the editor: it is shown the note the record makes.
        let mut ignore = Deltas::ignored();
        let outcome = tokio::select! {
            answer = self.provider.complete(&summary_request, &mut ignore) => Some(answer),
            () = self.cancel.cancelled() => None,
        };
        let summary = match outcome {
            None => return Ok(Summarised::Cancelled),
            Some(Err(e)) => {
                return Ok(Summarised::Failed(format!(
                    "the summary request failed: {e}"
                )));
            }
            Some(Ok(answer)) if answer.finish.cut_off() => {
                return Ok(Summarised::Failed(format!(
                    "the summary was cut off (finish: {}); raise model.max_tokens",
                    answer.finish
                )));
            }
            Some(Ok(answer)) if answer.text.trim().is_empty() => {
                return Ok(Summarised::Failed(
                    "the model answered the summary request with no text".to_owned(),
                ));
            }
            Some(Ok(answer)) => answer.text.trim().to_owned(),
        };
        let mut event = Event::HistoryCompacted {
            turn: self.turn,
            through,
            summary,
            model: self.provider.describe(),
            estimate_before,
            estimate_after: 0,
        };
        let after = estimate_after(records, &event, request);
        if let Event::HistoryCompacted { estimate_after, .. } = &mut event {
            *estimate_after = after;
        }
        let record = self.session.append(event, true)?;
        self.session.show_record(self.cx, &record).await;
        Ok(Summarised::Done)
    }

    /// One line on stderr about a compaction that did not happen.
    fn note(&self, why: &str) {
        eprintln!(
            "agentd: session {}: turn {}: the history was not compacted, the turn goes on with \
             all of it: {why}",
            self.session.id, self.turn
        );
    }
}

/// What a turn's compaction should do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    /// The estimate is at or under the threshold.
    Under,
    /// Over it, but every turn older than the kept ones is summarised already.
    NothingOlder,
    /// Summarise the turns up to and including this one.
    Through(u64),
}

/// Whether turn `turn`, whose first request is estimated at `estimate` tokens, compacts first,
/// and up to which turn: all but the latest `keep_turns` before it (the turn itself is always
/// kept).
fn plan(records: &[Record], turn: u64, policy: &CompactionPolicy, estimate: u64) -> Plan {
    if estimate <= policy.compact_at {
        return Plan::Under;
    }
    let through = turn.saturating_sub(1).saturating_sub(policy.keep_turns);
    if through <= fold::compacted_through(records) {
        return Plan::NothingOlder;
    }
    Plan::Through(through)
}

/// The request that asks for the summary of `older`, the history it replaces.
fn summary_request(older: &[Message]) -> ChatRequest {
    ChatRequest {
        messages: vec![
            Message::system(SUMMARY_INSTRUCTIONS),
            Message::user(format!(
                "The conversation to summarise:\n\n{}",
                transcript(older)
            )),
        ],
        tools: Vec::new(),
        agent: None,
    }
}

/// `messages` as one text, each under a heading that says whose it is.
fn transcript(messages: &[Message]) -> String {
    let parts: Vec<String> = messages
        .iter()
        .map(|message| match message {
            Message::System { content } => format!("## Instructions\n{content}"),
            Message::User { content } => format!("## User\n{content}"),
            Message::Assistant {
                text, tool_calls, ..
            } => {
                let mut part = "## Assistant".to_owned();
                if let Some(text) = text {
                    part.push('\n');
                    part.push_str(text);
                }
                for call in tool_calls {
                    part.push_str(&format!(
                        "\n[calls {} {} as {}]",
                        call.name, call.arguments, call.id
                    ));
                }
                part
            }
            Message::Tool {
                tool_call_id,
                content,
            } => {
                let whole = content.trim();
                let shown = excerpt(content, RESULT_SHOWN);
                let cut = match shown.strip_suffix('…') {
                    Some(kept) if whole.len() > RESULT_SHOWN => {
                        format!("\n[{} more bytes not shown]", whole.len() - kept.len())
                    }
                    _ => String::new(),
                };
                format!("## Result of {tool_call_id}\n{shown}{cut}")
            }
        })
        .collect();
    parts.join("\n\n")
}

/// The estimate of `request` with the history as it is once `event` is recorded.
fn estimate_after(records: &[Record], event: &Event, request: &ChatRequest) -> u64 {
    let mut with = records.to_vec();
    with.push(Record {
        v: EVENT_VERSION,
        seq: records.len() as u64,
        at_ms: 0,
        agent: None,
        event: event.clone(),
    });
    let mut messages: Vec<Message> = request
        .messages
        .iter()
        .take_while(|m| matches!(m, Message::System { .. }))
        .cloned()
        .collect();
    messages.extend(fold::history(&with));
    estimate_tokens(&ChatRequest {
        messages,
        tools: request.tools.clone(),
        agent: None,
    })
}

#[cfg(test)]
#[path = "compaction_tests.rs"]
mod tests;
