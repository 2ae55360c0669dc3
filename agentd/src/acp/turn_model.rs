//! A turn's requests to its model: what the log makes of the next request ([`Turn::request`])
//! and asking it, with what was shown of an answer that did not end recorded
//! ([`Turn::ask`]).

use super::super::instructions;
use super::super::model_failure::ModelFailure;
use super::super::task;
use super::{Shown, Turn};
use crate::knobs::policy;
use crate::model::{AssistantTurn, ChatRequest, Deltas, Message, Provider};
use crate::narrowing;
use crate::session::{Event, LogError, fold, nested};
use crate::tools;

impl Turn<'_> {
    /// One model request. `None` when cancelled; `Some(Err)` when the model failed (recorded
    /// and shown). What was shown of an answer that did not end is recorded as incomplete.
    pub(super) async fn ask(
        &self,
        provider: &dyn Provider,
        step: u64,
        guidance: Option<&str>,
    ) -> Result<Option<Result<AssistantTurn, ModelFailure>>, LogError> {
        let (request, instructions) = self.request(guidance);
        self.record(
            Event::ModelRequest {
                turn: self.number,
                step,
                model: provider.describe(),
                instructions,
                tools: request.tools.iter().map(|s| s.name.clone()).collect(),
            },
            false,
        )?;
        let mut shown = Shown::default();
        // The answer is shown as it comes, at the pace the editor reads it: the provider reads
        // no further ahead than the deltas' queue (see `Deltas`).
        let (deltas, mut arriving) = Deltas::channel();
        let request = &request;
        let answering = async move {
            let mut deltas = deltas;
            provider.complete(request, &mut deltas).await
        };
        let showing = async {
            while let Some(delta) = arriving.recv().await {
                self.show_delta(delta, &mut shown).await;
            }
        };
        let outcome = tokio::select! {
            (answer, ()) = async { tokio::join!(answering, showing) } => Some(answer),
            () = self.cancel.cancelled() => None,
        };
        let Some(outcome) = outcome else {
            self.record_incomplete(step, shown)?;
            return Ok(None);
        };
        match outcome {
            Ok(mut answer) => {
                // Its calls' ids are shown to the editor: none may look like a child's call.
                nested::own_top_level_ids(&mut answer);
                // The reasoning and text were streamed as they came: record them without
                // showing them again. (What was shown is the answer: one copy of a long answer
                // less while it is recorded.)
                drop(shown);
                self.record(Event::model_output(self.number, step, &answer), false)?;
                Ok(Some(Ok(answer)))
            }
            Err(e) => {
                if self.state.options.log_model_errors {
                    eprintln!("agentd: session {}: model error: {e}", self.session.id);
                }
                self.record_incomplete(step, shown)?;
                let failure = ModelFailure::of(&e);
                self.show(failure.event(self.number, step)).await?;
                Ok(Some(Err(failure)))
            }
        }
    }

    /// The next step's request as the log now makes it, and the instructions in it.
    pub(super) fn request(&self, guidance: Option<&str>) -> (ChatRequest, String) {
        let (policy, notices, history) = self.session.with_records(|records| {
            let policy = policy::effective(records, self.session.defaults.policy);
            // Told once, in this request only: the next one states the policy it names, and a
            // stopped task is news only until the model was told.
            let notices: Vec<String> =
                [policy::notice(records, policy), narrowing::notice(records)]
                    .into_iter()
                    .flatten()
                    .collect();
            (policy, notices, fold::history(records))
        });
        let profile = instructions::profile_section(&self.session.tools.profile());
        let instructions = instructions::for_request(
            &self.session.cwd,
            guidance,
            profile.as_deref(),
            policy,
            &notices,
        );
        let effective = self.session.effective_mode();
        let specs = tools::offered(&self.session.tools, &tools::ToolScope::top(), effective);
        let tools = task::with_personas(specs, &self.state.options.personas);
        let mut messages = vec![Message::system(instructions.clone())];
        messages.extend(history);
        let request = ChatRequest {
            messages,
            tools,
            agent: None,
        };
        (request, instructions)
    }
}
