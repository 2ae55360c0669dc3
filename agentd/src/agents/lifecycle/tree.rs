//! What the rest of agentd holds of a session's agents: the [`AgentTree`] (one per session),
//! a [`Pending`] start, the [`Child`] handle its parent owns and the [`ChildContext`] its body
//! runs with. Each is a thin view of the registry and of the child's cell.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::cell::Cell;
use super::event::{
    AgentEvents, AgentId, AgentInfo, ChildError, CloseReport, Outcome, Rejected, StartError,
    TeardownError, TeardownReport,
};
use super::registry::{BodyFuture, MakeBody, Reservation, TreeInner};
use super::token::CancelToken;
use crate::cancel::Cancel;

/// How long a cancelled child's body has to return before it is dropped: room for its running
/// command to be killed ([`crate::command::KILL_GRACE`]) and for the helper's answer.
pub const STOP_GRACE: Duration = Duration::from_secs(10);

/// A session's agents: the top-level agent ([`AgentId::TOP`], depth 0, driven by the turn
/// loop, not here) and every child started below it. Cheap to clone.
#[derive(Debug, Clone)]
pub struct AgentTree {
    inner: Arc<TreeInner>,
}

impl AgentTree {
    /// A session's tree, publishing to `events`.
    pub fn new(events: Arc<dyn AgentEvents>) -> AgentTree {
        AgentTree::with_stop_grace(events, STOP_GRACE)
    }

    /// A tree whose cancelled children get `grace` to return.
    pub fn with_stop_grace(events: Arc<dyn AgentEvents>, grace: Duration) -> AgentTree {
        AgentTree {
            inner: Arc::new(TreeInner::new(events, grace)),
        }
    }

    /// The first half of a start: checks everything that can be checked before anything is
    /// made (the session is open, `parent` is registered and not cancelled, the child's depth
    /// `parent + 1` is at most `max_depth`). Nothing is registered or published; dropping the
    /// [`Pending`] abandons the start.
    pub fn reserve(
        &self,
        parent: AgentId,
        persona: impl Into<String>,
        max_depth: u32,
    ) -> Result<Pending, StartError> {
        let reservation = self.inner.reserve(parent, persona.into(), max_depth)?;
        let abandon = Abandon(Some(reservation.token.clone()));
        Ok(Pending {
            tree: Arc::clone(&self.inner),
            reservation,
            abandon,
        })
    }

    /// [`AgentTree::reserve`] and [`Pending::launch`] at once, for a start with nothing to
    /// prepare.
    pub fn start<F, Fut>(
        &self,
        parent: AgentId,
        persona: impl Into<String>,
        max_depth: u32,
        body: F,
    ) -> Result<Child, StartError>
    where
        F: FnOnce(ChildContext) -> Fut + Send + 'static,
        Fut: Future<Output = Result<String, ChildError>> + Send + 'static,
    {
        self.reserve(parent, persona, max_depth)?.launch(body)
    }

    /// Cancels `id` and its whole subtree (`AgentId::TOP`: every agent of the session);
    /// idempotent. Whether `id` is registered.
    pub fn cancel(&self, id: AgentId) -> bool {
        self.inner.cancel(id)
    }

    /// The registered agents, by id; the top-level agent first.
    pub fn agents(&self) -> Vec<AgentInfo> {
        self.inner.agents()
    }

    /// Driver and teardown tasks not finished yet; 0 once a closed session's close returned.
    pub fn live_tasks(&self) -> usize {
        self.inner.live_tasks()
    }

    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// Closes the session: refuses every later start, cancels every agent, tears each down
    /// the way [`Child::teardown`] does, once however often and concurrently it is called.
    /// From inside a child's body it starts the close but cannot wait for it.
    pub async fn close(&self) -> Result<Arc<CloseReport>, TeardownError> {
        self.inner.close().await
    }
}

/// A start that passed every check but has not been made ready. Its token is already below its
/// parent's, so a cancellation of the parent during the caller's preparation is seen here, and
/// [`Pending::launch`] refuses it. Dropped without a launch, it cancels its token (waking what
/// of the preparation waits on it) and leaves nothing else behind.
#[derive(Debug)]
pub struct Pending {
    tree: Arc<TreeInner>,
    reservation: Reservation,
    abandon: Abandon,
}

/// Cancels a start's token when dropped, unless the start became ready.
#[derive(Debug)]
struct Abandon(Option<CancelToken>);

impl Drop for Abandon {
    fn drop(&mut self) {
        if let Some(token) = self.0.take() {
            token.cancel();
        }
    }
}

impl Pending {
    /// A signal for the preparation's own waits; fires if the start is cancelled.
    pub fn signal(&self) -> Cancel {
        self.reservation.token.signal()
    }

    pub fn is_cancelled(&self) -> bool {
        self.reservation.token.is_cancelled()
    }

    /// Cancels this start: its launch will be refused. Idempotent.
    pub fn cancel(&self) {
        self.reservation.token.cancel();
    }

    /// The second half of a start, with no await inside: registers the child, publishes its
    /// `Started`, and spawns its driver, which runs `body`. A start cancelled or closed in
    /// between, or whose `Started` the sink refuses, is refused here and leaves no trace.
    pub fn launch<F, Fut>(self, body: F) -> Result<Child, StartError>
    where
        F: FnOnce(ChildContext) -> Fut + Send + 'static,
        Fut: Future<Output = Result<String, ChildError>> + Send + 'static,
    {
        let Pending {
            tree,
            reservation,
            mut abandon,
        } = self;
        let body_tree = Arc::clone(&tree);
        let make: MakeBody = Box::new(move |cell: Arc<Cell>| -> BodyFuture {
            Box::pin(body(ChildContext {
                cell,
                tree: body_tree,
            }))
        });
        let cell = tree.launch(reservation, make)?;
        abandon.0 = None;
        Ok(Child { cell, tree })
    }
}

/// A started child, as its parent owns it. Dropping it starts its teardown (without waiting).
#[derive(Debug)]
pub struct Child {
    cell: Arc<Cell>,
    tree: Arc<TreeInner>,
}

impl Child {
    pub fn id(&self) -> AgentId {
        self.cell.id
    }

    pub fn depth(&self) -> u32 {
        self.cell.depth
    }

    /// Cancels the child and its subtree; idempotent. Its outcome is `Cancelled` unless it
    /// already had one.
    pub fn cancel(&self) {
        self.cell.token.cancel();
    }

    /// Waits for the child's outcome, which is queued for the parent before anything of its
    /// cleanup; every call gets the same one.
    pub async fn outcome(&self) -> Outcome {
        self.cell.outcome().await
    }

    /// The outcome, if the child has one already.
    pub fn try_outcome(&self) -> Option<Outcome> {
        self.cell.outcome_now()
    }

    /// Holds a message for the child's body, which applies it when it next takes its
    /// injections; refused once the child has ended.
    pub fn inject(&self, text: impl Into<String>) -> Result<(), Rejected> {
        self.cell.inject(text.into())
    }

    /// The child's next output, waiting for one; `None` once it has ended and every output
    /// was taken.
    pub async fn next_output(&self) -> Option<String> {
        self.cell.next_output().await
    }

    /// Tears the child down (stop its driver, drain, detach, dispose; its children first), once
    /// however often and concurrently it is called; every caller gets the same report.
    pub async fn teardown(&self) -> Result<Arc<TeardownReport>, TeardownError> {
        self.tree.teardown(&self.cell).await
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _finished = self.tree.start_teardown(&self.cell);
    }
}

/// What a child's body runs with: who it is, its cancellation, its queues, and the tree to
/// start its own children in.
#[derive(Debug, Clone)]
pub struct ChildContext {
    cell: Arc<Cell>,
    tree: Arc<TreeInner>,
}

impl ChildContext {
    pub fn id(&self) -> AgentId {
        self.cell.id
    }

    pub fn persona(&self) -> &str {
        &self.cell.persona
    }

    /// A signal for the child's model calls, tool calls and permission waits.
    pub fn signal(&self) -> Cancel {
        self.cell.token.signal()
    }

    pub fn is_cancelled(&self) -> bool {
        self.cell.token.is_cancelled()
    }

    pub async fn cancelled(&self) {
        self.cell.token.cancelled().await;
    }

    /// Cancels this child from inside; idempotent.
    pub fn cancel(&self) {
        self.cell.token.cancel();
    }

    /// Starts this child's teardown from inside, without waiting: it finishes once the body
    /// has returned.
    pub fn dispose(&self) {
        let _finished = self.tree.start_teardown(&self.cell);
    }

    /// Queues an output for the parent; refused once this child has ended.
    pub fn output(&self, text: impl Into<String>) -> Result<(), Rejected> {
        self.cell.push_output(text.into())
    }

    /// The injections held for this child, to apply now; refused once it has ended.
    pub fn take_injections(&self) -> Result<Vec<String>, Rejected> {
        self.cell.take_injections()
    }

    /// The next injection, waiting for one; refused once this child has ended.
    pub async fn next_injection(&self) -> Result<String, Rejected> {
        self.cell.next_injection().await
    }

    /// Runs `record` (a write of this child's own event to the session log) only while the
    /// child has not ended, ordered before its `Ended`. It runs under the child's lock, so it
    /// must not call back into this context or the child's handle.
    pub fn record<R>(&self, record: impl FnOnce() -> R) -> Result<R, Rejected> {
        self.cell.record(record)
    }

    /// The session's tree, to start this child's own children (`parent` = [`Self::id`]).
    pub fn tree(&self) -> AgentTree {
        AgentTree {
            inner: Arc::clone(&self.tree),
        }
    }
}
