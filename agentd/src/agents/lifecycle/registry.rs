//! A session's agents, with one owner per resource: the registry owns the tree of agents, each
//! child's driver task owns its body, each child's teardown task owns its end. Here are the
//! start transaction (checks, then registration and announcement, then the driver), the
//! driver, the memoized teardown and the session close.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::watch;

use super::cell::{Cell, Identity};
use super::event::{
    AgentEvent, AgentEvents, AgentId, AgentInfo, ChildError, CloseReport, Failure, Outcome,
    StartError, TeardownError, TeardownReport,
};
use super::token::CancelToken;

/// A child's body, once made from its context.
pub(super) type BodyFuture = Pin<Box<dyn Future<Output = Result<String, ChildError>> + Send>>;
/// What makes a child's body; called inside the body's task, never under a lock.
pub(super) type MakeBody = Box<dyn FnOnce(Arc<Cell>) -> BodyFuture + Send>;

tokio::task_local! {
    /// The chain (itself, its parent, …, the top-level agent) of the agent whose body the
    /// current task runs.
    static INSIDE: Arc<[AgentId]>;
}

/// Whether the current task runs the body of `id` or of an agent below it.
fn inside(id: AgentId) -> bool {
    INSIDE
        .try_with(|chain| chain.contains(&id))
        .unwrap_or(false)
}

/// The depth of a child of an agent at `parent_depth`, if `max_depth` admits it.
pub(super) fn child_depth(
    parent: AgentId,
    parent_depth: u32,
    max_depth: u32,
) -> Result<u32, StartError> {
    let depth = parent_depth
        .checked_add(1)
        .ok_or(StartError::DepthOverflow { parent })?;
    if depth > max_depth {
        return Err(StartError::TooDeep {
            parent,
            depth,
            max_depth,
        });
    }
    Ok(depth)
}

pub(super) struct TreeInner {
    registry: Mutex<Registry>,
    events: Arc<dyn AgentEvents>,
    stop_grace: Duration,
    /// Driver and teardown tasks that have not finished. A teardown counts until it detaches
    /// its agent, in the same step: whoever no longer finds an agent registered (its parent's
    /// teardown, the close) has nothing of it left to wait for.
    live: Arc<AtomicUsize>,
    close: OnceLock<watch::Receiver<Option<Arc<CloseReport>>>>,
}

impl std::fmt::Debug for TreeInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TreeInner")
            .field("stop_grace", &self.stop_grace)
            .field("live", &self.live)
            .finish_non_exhaustive()
    }
}

struct Registry {
    /// The number the next ready child takes.
    next: u64,
    closed: bool,
    nodes: BTreeMap<AgentId, Node>,
}

struct Node {
    parent: Option<AgentId>,
    depth: u32,
    chain: Arc<[AgentId]>,
    token: CancelToken,
    /// `None` for the top-level agent, which this module does not drive.
    cell: Option<Arc<Cell>>,
    children: BTreeSet<AgentId>,
}

/// A start that passed the checks and holds its token; nothing of it is registered.
#[derive(Debug)]
pub(super) struct Reservation {
    pub(super) parent: AgentId,
    pub(super) depth: u32,
    pub(super) persona: String,
    pub(super) token: CancelToken,
}

/// Counts one task as live until dropped.
struct Live(Arc<AtomicUsize>);

impl Live {
    fn new(count: &Arc<AtomicUsize>) -> Live {
        count.fetch_add(1, Ordering::SeqCst);
        Live(Arc::clone(count))
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl TreeInner {
    pub(super) fn new(events: Arc<dyn AgentEvents>, stop_grace: Duration) -> TreeInner {
        let top = Node {
            parent: None,
            depth: 0,
            chain: Arc::from([AgentId::TOP]),
            token: CancelToken::new(),
            cell: None,
            children: BTreeSet::new(),
        };
        TreeInner {
            registry: Mutex::new(Registry {
                next: 1,
                closed: false,
                nodes: BTreeMap::from([(AgentId::TOP, top)]),
            }),
            events,
            stop_grace,
            live: Arc::new(AtomicUsize::new(0)),
            close: OnceLock::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every check a start can fail before anything is made: the session is open, the parent
    /// is registered and not cancelled, and the child's depth is within `max_depth`.
    pub(super) fn reserve(
        &self,
        parent: AgentId,
        persona: String,
        max_depth: u32,
    ) -> Result<Reservation, StartError> {
        let registry = self.lock();
        if registry.closed {
            return Err(StartError::Closed);
        }
        let node = registry
            .nodes
            .get(&parent)
            .ok_or(StartError::UnknownParent { parent })?;
        let depth = child_depth(parent, node.depth, max_depth)?;
        if node.token.is_cancelled() {
            return Err(StartError::Cancelled { parent });
        }
        Ok(Reservation {
            parent,
            depth,
            persona,
            token: node.token.child(),
        })
    }

    /// Makes a reserved child ready, or nothing: a refused start leaves no event, no
    /// registration, no task and no id used.
    pub(super) fn launch(
        self: &Arc<Self>,
        reservation: Reservation,
        make: MakeBody,
    ) -> Result<Arc<Cell>, StartError> {
        let runtime = Handle::try_current().map_err(|_| StartError::NoRuntime)?;
        let Reservation {
            parent,
            depth,
            persona,
            token,
        } = reservation;
        // One lock from the last checks to the driver's spawn: a cancellation, a teardown of
        // the parent or a close either comes before (and the start is refused) or finds the
        // child ready.
        let mut registry = self.lock();
        if registry.closed {
            return Err(StartError::Closed);
        }
        let parent_chain = match registry.nodes.get(&parent) {
            Some(node) => Arc::clone(&node.chain),
            None => return Err(StartError::UnknownParent { parent }),
        };
        if token.is_cancelled() {
            return Err(StartError::Cancelled { parent });
        }
        let id = AgentId::new(registry.next);
        let chain: Arc<[AgentId]> = std::iter::once(id)
            .chain(parent_chain.iter().copied())
            .collect();
        let who = Identity {
            id,
            parent,
            depth,
            persona: persona.clone(),
            chain: Arc::clone(&chain),
        };
        let cell = Arc::new(Cell::new(
            who,
            token.clone(),
            runtime.clone(),
            Arc::clone(&self.events),
        ));
        // Registered, then announced; a refused announcement unregisters it again.
        registry.nodes.insert(
            id,
            Node {
                parent: Some(parent),
                depth,
                chain,
                token,
                cell: Some(Arc::clone(&cell)),
                children: BTreeSet::new(),
            },
        );
        if let Some(node) = registry.nodes.get_mut(&parent) {
            node.children.insert(id);
        }
        let started = AgentEvent::Started {
            id,
            parent,
            depth,
            persona,
        };
        if let Err(error) = self.events.publish(started) {
            registry.nodes.remove(&id);
            if let Some(node) = registry.nodes.get_mut(&parent) {
                node.children.remove(&id);
            }
            return Err(StartError::Publish(error));
        }
        registry.next += 1;
        // Ready: only now does anything of the child run.
        let live = Live::new(&self.live);
        let driver = runtime.spawn(drive(Arc::clone(&cell), make, self.stop_grace, live));
        *cell.driver.lock().unwrap_or_else(PoisonError::into_inner) = Some(driver);
        Ok(cell)
    }

    /// Cancels `id` and everything below it; whether `id` is registered.
    pub(super) fn cancel(&self, id: AgentId) -> bool {
        let token = self.lock().nodes.get(&id).map(|node| node.token.clone());
        token.map(|token| token.cancel()).is_some()
    }

    pub(super) fn agents(&self) -> Vec<AgentInfo> {
        let registry = self.lock();
        registry
            .nodes
            .iter()
            .map(|(id, node)| AgentInfo {
                id: *id,
                parent: node.parent,
                depth: node.depth,
                persona: node.cell.as_ref().map(|cell| cell.persona.clone()),
            })
            .collect()
    }

    pub(super) fn live_tasks(&self) -> usize {
        self.live.load(Ordering::SeqCst)
    }

    pub(super) fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// The teardown of `cell`, started by the first call and shared by every later one.
    pub(super) fn start_teardown(
        self: &Arc<Self>,
        cell: &Arc<Cell>,
    ) -> watch::Receiver<Option<Arc<TeardownReport>>> {
        cell.teardown
            .get_or_init(|| {
                // Asked for is stopped: from here on its body is told to stop and no start
                // under it is admitted, whoever goes on to wait for the teardown.
                cell.token.cancel();
                let (done, finished) = watch::channel(None);
                let live = Live::new(&self.live);
                let (tree, cell) = (Arc::clone(self), Arc::clone(cell));
                let runtime = cell.runtime.clone();
                runtime.spawn(async move {
                    let report = Arc::new(tree.run_teardown(cell, live).await);
                    done.send_replace(Some(report));
                });
                finished
            })
            .clone()
    }

    /// Starts the teardown of `cell` and waits for it, unless called from inside the body of
    /// `cell` or of one of its descendants, whose end the teardown itself waits for.
    pub(super) async fn teardown(
        self: &Arc<Self>,
        cell: &Arc<Cell>,
    ) -> Result<Arc<TeardownReport>, TeardownError> {
        let finished = self.start_teardown(cell);
        if inside(cell.id) {
            return Err(TeardownError::Reentrant { id: cell.id });
        }
        finish(finished)
            .await
            .ok_or(TeardownError::Interrupted { id: cell.id })
    }

    /// Stop the driver, drain, detach, dispose — children first, since each is part of what
    /// its parent's driver started. `live` is the teardown task's own count, released with the
    /// detach.
    async fn run_teardown(self: Arc<Self>, cell: Arc<Cell>, live: Live) -> TeardownReport {
        let children: Vec<Arc<Cell>> = {
            let registry = self.lock();
            let ids = registry
                .nodes
                .get(&cell.id)
                .map(|node| node.children.iter().copied().collect::<Vec<_>>())
                .unwrap_or_default();
            ids.iter()
                .filter_map(|id| registry.nodes.get(id).and_then(|node| node.cell.clone()))
                .collect()
        };
        for child in &children {
            finish(self.start_teardown(child)).await;
        }
        let driver = cell
            .driver
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(driver) = driver {
            // The driver ends within the stop grace of the cancellation above.
            let _ended = driver.await;
        }
        // A driver dropped by a stopping runtime claimed nothing: claim its end for it.
        let _already_settled = cell.settle(Outcome::Cancelled);
        let drained = cell.drain();
        // Settled and drained, so nothing of it changes any more: its report is made before the
        // detach, which is the teardown's last step.
        let report = TeardownReport {
            id: cell.id,
            outcome: cell.outcome_now().unwrap_or(Outcome::Cancelled),
            delivered_output: drained.delivered_output,
            dropped_injections: drained.dropped_injections,
            unrecorded: cell.unrecorded(),
        };
        {
            let mut registry = self.lock();
            registry.nodes.remove(&cell.id);
            if let Some(node) = registry.nodes.get_mut(&cell.parent) {
                node.children.remove(&cell.id);
            }
            // Under the same lock as the detach: a parent's teardown or a close that no longer
            // finds this agent does not wait for this task, so the task must not count any more
            // either (it only hands its report over now).
            drop(live);
        }
        // Disposed: settled, drained, unregistered, its token cancelled; what is left are the
        // handles' references, which only answer that it has ended.
        report
    }

    /// Closes the session once: no start is admitted any more, every agent is cancelled and
    /// torn down, and every caller gets the same report.
    pub(super) async fn close(self: &Arc<Self>) -> Result<Arc<CloseReport>, TeardownError> {
        let runtime = Handle::try_current().map_err(|_| TeardownError::NoRuntime)?;
        let finished = self
            .close
            .get_or_init(|| {
                let cells = self.shut();
                let (done, finished) = watch::channel(None);
                let live = Live::new(&self.live);
                let tree = Arc::clone(self);
                runtime.spawn(async move {
                    let report = Arc::new(tree.run_close(cells).await);
                    drop(live);
                    done.send_replace(Some(report));
                });
                finished
            })
            .clone();
        if inside(AgentId::TOP) {
            return Err(TeardownError::Reentrant { id: AgentId::TOP });
        }
        finish(finished)
            .await
            .ok_or(TeardownError::Interrupted { id: AgentId::TOP })
    }

    /// The synchronous half of a close: no start is admitted any more, every agent is
    /// cancelled; the agents to tear down.
    fn shut(&self) -> Vec<Arc<Cell>> {
        let (root, cells) = {
            let mut registry = self.lock();
            registry.closed = true;
            let root = registry
                .nodes
                .get(&AgentId::TOP)
                .map(|node| node.token.clone());
            let cells: Vec<Arc<Cell>> = registry
                .nodes
                .values()
                .filter_map(|node| node.cell.clone())
                .collect();
            (root, cells)
        };
        if let Some(root) = root {
            root.cancel();
        }
        cells
    }

    async fn run_close(self: Arc<Self>, cells: Vec<Arc<Cell>>) -> CloseReport {
        let mut agents = Vec::with_capacity(cells.len());
        for cell in &cells {
            if let Some(report) = finish(self.start_teardown(cell)).await {
                agents.push(report);
            }
        }
        CloseReport { agents }
    }
}

/// The value a memoized task publishes when it finishes; `None` if it was dropped unfinished.
async fn finish<T: Clone>(mut finished: watch::Receiver<Option<T>>) -> Option<T> {
    match finished.wait_for(Option::is_some).await {
        Ok(value) => value.clone(),
        Err(_) => None,
    }
}

/// Runs one child's body in its own task, so that a panic is a failure of the child and not of
/// whoever awaits it, and claims what the body cannot: its cancellation, its panic.
async fn drive(cell: Arc<Cell>, make: MakeBody, grace: Duration, live: Live) {
    let _live = live;
    let body_cell = Arc::clone(&cell);
    let chain = Arc::clone(&cell.chain);
    let mut body = cell.runtime.spawn(INSIDE.scope(chain, async move {
        let result = make(Arc::clone(&body_cell)).await;
        // A result after the outcome was claimed is a late message: rejected, not applied.
        let _late = body_cell.settle_body(result);
    }));
    let ended = tokio::select! {
        biased;
        ended = &mut body => ended,
        () = cell.token.cancelled() => {
            let _already_settled = cell.settle(Outcome::Cancelled);
            match tokio::time::timeout(grace, &mut body).await {
                Ok(ended) => ended,
                Err(_) => {
                    // The body did not stop when told: it is dropped.
                    body.abort();
                    body.await
                }
            }
        }
    };
    if let Err(error) = ended {
        let outcome = if error.is_panic() {
            Outcome::Failed(Failure::Panicked(panic_message(error.into_panic())))
        } else {
            Outcome::Cancelled
        };
        let _already_settled = cell.settle(outcome);
    }
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(message) => *message,
        Err(payload) => match payload.downcast::<&'static str>() {
            Ok(message) => (*message).to_owned(),
            Err(_) => "the panic carried no message".to_owned(),
        },
    }
}
