//! One child's state, shared by its owner's handle, its body's context, its driver and its
//! teardown: the claim of its one outcome, and the admission of every message to or from it.
//!
//! Everything here happens under one lock: the claim of the outcome, the `Ended` it publishes,
//! and each admitted message, so no message is applied after the outcome and no event of the
//! child can be recorded after its `Ended`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use tokio::runtime::Handle;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::event::{
    AgentEvent, AgentEvents, AgentId, ChildError, Failure, Outcome, PublishError, Rejected,
    TeardownReport,
};
use super::token::CancelToken;

/// Who a child is and what it was started under.
pub(super) struct Cell {
    pub(super) id: AgentId,
    pub(super) parent: AgentId,
    pub(super) depth: u32,
    pub(super) persona: String,
    /// This child, its parent, …, up to the top-level agent.
    pub(super) chain: Arc<[AgentId]>,
    pub(super) token: CancelToken,
    /// The runtime it was started on, where its driver and teardown run.
    pub(super) runtime: Handle,
    events: Arc<dyn AgentEvents>,
    state: Mutex<State>,
    /// Told of every change of `state`, so waiters re-check it.
    changed: watch::Sender<()>,
    /// The task that runs the body; taken by the teardown, which waits for it.
    pub(super) driver: Mutex<Option<JoinHandle<()>>>,
    /// The teardown's completion, set by the first call that asks for it.
    pub(super) teardown: OnceLock<watch::Receiver<Option<Arc<TeardownReport>>>>,
}

impl std::fmt::Debug for Cell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cell")
            .field("id", &self.id)
            .field("parent", &self.parent)
            .field("depth", &self.depth)
            .field("persona", &self.persona)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Default)]
struct State {
    /// Set once, by the first claim; `Some` closes admission.
    outcome: Option<Outcome>,
    /// What the body produced that its parent has not taken yet.
    output: VecDeque<String>,
    /// What was injected that the body has not applied yet.
    injections: VecDeque<String>,
    unrecorded: Vec<Arc<PublishError>>,
}

/// Who a new cell is.
pub(super) struct Identity {
    pub(super) id: AgentId,
    pub(super) parent: AgentId,
    pub(super) depth: u32,
    pub(super) persona: String,
    pub(super) chain: Arc<[AgentId]>,
}

/// What a teardown's drain did.
pub(super) struct Drained {
    pub(super) delivered_output: usize,
    pub(super) dropped_injections: Vec<String>,
}

impl Cell {
    pub(super) fn new(
        who: Identity,
        token: CancelToken,
        runtime: Handle,
        events: Arc<dyn AgentEvents>,
    ) -> Cell {
        Cell {
            id: who.id,
            parent: who.parent,
            depth: who.depth,
            persona: who.persona,
            chain: who.chain,
            token,
            runtime,
            events,
            state: Mutex::new(State::default()),
            changed: watch::Sender::new(()),
            driver: Mutex::new(None),
            teardown: OnceLock::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn admit(&self, state: &State) -> Result<(), Rejected> {
        match &state.outcome {
            None => Ok(()),
            Some(outcome) => Err(Rejected::Settled {
                id: self.id,
                outcome: outcome.clone(),
            }),
        }
    }

    /// Claims `outcome` unless an outcome is claimed already (then the claim is rejected and
    /// changes nothing).
    pub(super) fn settle(&self, outcome: Outcome) -> Result<(), Rejected> {
        self.claim(|_| outcome)
    }

    /// Claims what the body returned. A cancellation that came before it wins: the answer of
    /// a body that finished after its cancellation is a late message.
    pub(super) fn settle_body(&self, result: Result<String, ChildError>) -> Result<(), Rejected> {
        self.claim(|cancelled| match result {
            _ if cancelled => Outcome::Cancelled,
            Ok(answer) => Outcome::Completed(answer),
            Err(ChildError::Cancelled) => Outcome::Cancelled,
            Err(error) => Outcome::Failed(Failure::Error(error.to_string())),
        })
    }

    /// The claim: under the lock, the outcome is queued for the parent, waiters are told and
    /// `Ended` is published; then the child's subtree is cancelled, since nothing of it may
    /// go on once its outcome is fixed.
    fn claim(&self, decide: impl FnOnce(bool) -> Outcome) -> Result<(), Rejected> {
        {
            let mut state = self.lock();
            self.admit(&state)?;
            let outcome = decide(self.token.is_cancelled());
            state.outcome = Some(outcome.clone());
            self.changed.send_replace(());
            let ended = AgentEvent::Ended {
                id: self.id,
                outcome,
            };
            if let Err(error) = self.events.publish(ended) {
                state.unrecorded.push(Arc::new(error));
            }
        }
        self.token.cancel();
        Ok(())
    }

    pub(super) fn outcome_now(&self) -> Option<Outcome> {
        self.lock().outcome.clone()
    }

    /// Waits until `look` finds something in the state.
    async fn wait_for<T>(&self, mut look: impl FnMut(&mut State) -> Option<T>) -> T {
        loop {
            // Subscribed before looking, so a change after the look wakes the wait.
            let mut changed = self.changed.subscribe();
            if let Some(found) = look(&mut self.lock()) {
                return found;
            }
            if changed.changed().await.is_err() {
                // The sender lives in `self`; it cannot be gone while `self` is borrowed.
                std::future::pending::<()>().await;
            }
        }
    }

    pub(super) async fn outcome(&self) -> Outcome {
        self.wait_for(|state| state.outcome.clone()).await
    }

    /// Queues an output of the body for the parent.
    pub(super) fn push_output(&self, text: String) -> Result<(), Rejected> {
        let mut state = self.lock();
        self.admit(&state)?;
        state.output.push_back(text);
        self.changed.send_replace(());
        Ok(())
    }

    /// The next output, or `None` once the child has ended and every output was taken.
    pub(super) async fn next_output(&self) -> Option<String> {
        self.wait_for(|state| match state.output.pop_front() {
            Some(text) => Some(Some(text)),
            None if state.outcome.is_some() => Some(None),
            None => None,
        })
        .await
    }

    /// Holds a message for the body, which applies it when it next takes its injections.
    pub(super) fn inject(&self, text: String) -> Result<(), Rejected> {
        let mut state = self.lock();
        self.admit(&state)?;
        state.injections.push_back(text);
        self.changed.send_replace(());
        Ok(())
    }

    /// The held injections, for the body to apply; refused once it has ended (they are then
    /// dropped, with a record, by the teardown).
    pub(super) fn take_injections(&self) -> Result<Vec<String>, Rejected> {
        let mut state = self.lock();
        self.admit(&state)?;
        Ok(state.injections.drain(..).collect())
    }

    /// The next held injection, waiting for one; refused once the child has ended.
    pub(super) async fn next_injection(&self) -> Result<String, Rejected> {
        self.wait_for(|state| match &state.outcome {
            Some(outcome) => Some(Err(Rejected::Settled {
                id: self.id,
                outcome: outcome.clone(),
            })),
            None => state.injections.pop_front().map(Ok),
        })
        .await
    }

    /// Runs `record` only while the child has not ended, under the lock that orders its
    /// `Ended`: what the child records this way lies between its `Started` and its `Ended`.
    pub(super) fn record<R>(&self, record: impl FnOnce() -> R) -> Result<R, Rejected> {
        let state = self.lock();
        self.admit(&state)?;
        Ok(record())
    }

    /// Empties both queues once the child has ended: every output is delivered to the sink,
    /// every injection dropped with a record.
    pub(super) fn drain(&self) -> Drained {
        let mut state = self.lock();
        let output: Vec<String> = state.output.drain(..).collect();
        let injections: Vec<String> = state.injections.drain(..).collect();
        let id = self.id;
        let events = output
            .iter()
            .map(|text| AgentEvent::Output {
                id,
                text: text.clone(),
            })
            .chain(injections.iter().map(|text| AgentEvent::InjectionDropped {
                id,
                text: text.clone(),
            }));
        for event in events {
            if let Err(error) = self.events.publish(event) {
                state.unrecorded.push(Arc::new(error));
            }
        }
        self.changed.send_replace(());
        Drained {
            delivered_output: output.len(),
            dropped_injections: injections,
        }
    }

    pub(super) fn unrecorded(&self) -> Vec<Arc<PublishError>> {
        self.lock().unrecorded.clone()
    }
}
