//! The words of a child agent's lifecycle: its id, how it ended, what is published about it,
//! and every way a start, a message or a teardown is refused. Plain values only, so the
//! session log can record them without knowing the machinery that produced them.

use std::fmt;
use std::sync::Arc;

/// An agent of a session: `agent-0` is the top-level agent, children are numbered from 1 in
/// the order they became ready. A start that never became ready takes no number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AgentId(u64);

impl AgentId {
    /// The session's top-level agent, at depth 0.
    pub const TOP: AgentId = AgentId(0);

    pub(super) fn new(n: u64) -> AgentId {
        AgentId(n)
    }

    pub fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for AgentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "agent-{}", self.0)
    }
}

/// An agent as the registry lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentInfo {
    pub id: AgentId,
    /// `None` for the top-level agent.
    pub parent: Option<AgentId>,
    pub depth: u32,
    /// `None` for the top-level agent.
    pub persona: Option<String>,
}

/// How a child ended: the first of these to be claimed is the only one it ever has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Its final answer, which becomes the parent's tool result.
    Completed(String),
    Failed(Failure),
    /// It, an ancestor or the session was cancelled before it had an answer.
    Cancelled,
}

/// Why a child failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// Its body returned an error, rendered.
    Error(String),
    /// Its body panicked; the panic's message, when it had one.
    Panicked(String),
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Completed(_) => f.write_str("completed"),
            Outcome::Failed(Failure::Error(reason)) => write!(f, "failed: {reason}"),
            Outcome::Failed(Failure::Panicked(message)) => write!(f, "failed: panicked: {message}"),
            Outcome::Cancelled => f.write_str("cancelled"),
        }
    }
}

/// What is published about a child, in this order: `Started` once it is ready, `Ended` once
/// its outcome is claimed, then, at its teardown, every output its parent had not taken and
/// every injection it never applied. Nothing is published for a start that never became ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentEvent {
    Started {
        id: AgentId,
        parent: AgentId,
        depth: u32,
        persona: String,
    },
    Ended {
        id: AgentId,
        outcome: Outcome,
    },
    /// An output the child queued that its parent had not taken when it was torn down:
    /// delivered here, so nothing it produced is lost.
    Output {
        id: AgentId,
        text: String,
    },
    /// A message injected into the child that it had not applied when it ended: dropped, and
    /// recorded so that it does not vanish silently.
    InjectionDropped {
        id: AgentId,
        text: String,
    },
}

/// Where a session's agent events go (its log). Called synchronously, under the lock that
/// orders the child's lifecycle, so an implementation must not call back into the tree.
pub trait AgentEvents: Send + Sync {
    /// Records one event. A refused `Started` rolls the start back; a refused later event is
    /// counted in the child's [`TeardownReport::unrecorded`].
    fn publish(&self, event: AgentEvent) -> Result<(), PublishError>;
}

/// The sink could not record an event.
#[derive(Debug, thiserror::Error)]
#[error("the agent event was not recorded: {source}")]
pub struct PublishError {
    #[source]
    source: Box<dyn std::error::Error + Send + Sync>,
}

impl PublishError {
    pub fn new(source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> PublishError {
        PublishError {
            source: source.into(),
        }
    }
}

/// What a child's body returns instead of an answer.
#[derive(Debug, thiserror::Error)]
pub enum ChildError {
    /// The body stopped because it saw its cancellation.
    #[error("the child agent was cancelled")]
    Cancelled,
    #[error(transparent)]
    Failed(Box<dyn std::error::Error + Send + Sync>),
}

impl ChildError {
    pub fn failed(source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> ChildError {
        ChildError::Failed(source.into())
    }
}

/// Why a child was not started. Whatever the reason, nothing of it was registered or
/// published and no task of it runs.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(
        "a child of {parent} would be at depth {depth}, beyond the maximum depth {max_depth}; \
         answer without delegating, or raise the persona's max_depth"
    )]
    TooDeep {
        parent: AgentId,
        depth: u32,
        max_depth: u32,
    },
    #[error("{parent} is at the largest depth there is; no agent can start below it")]
    DepthOverflow { parent: AgentId },
    #[error("{parent} is not an agent of this session (it never started or was torn down)")]
    UnknownParent { parent: AgentId },
    #[error("the start under {parent} was cancelled, or {parent} was cancelled or has ended")]
    Cancelled { parent: AgentId },
    #[error("the session is closed; no agent can start in it")]
    Closed,
    #[error("a child agent can only start inside the tokio runtime")]
    NoRuntime,
    #[error("the child could not be announced, so it was not started: {0}")]
    Publish(#[source] PublishError),
}

/// A message refused because its agent has already ended: it was not applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejected {
    #[error("{id} has already ended ({outcome}); the message was not applied")]
    Settled { id: AgentId, outcome: Outcome },
}

/// Why a teardown or a session close could not be awaited.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TeardownError {
    #[error(
        "the teardown of {id} was asked for from inside {id} or one of its children; it has \
         started and finishes once this body returns, but cannot be awaited from here"
    )]
    Reentrant { id: AgentId },
    #[error("the runtime stopped before the teardown of {id} finished")]
    Interrupted { id: AgentId },
    #[error("a session can only be closed inside the tokio runtime")]
    NoRuntime,
}

/// What a child's teardown did, the same value for every caller.
#[derive(Debug)]
pub struct TeardownReport {
    pub id: AgentId,
    pub outcome: Outcome,
    /// Outputs the parent had not taken, published as [`AgentEvent::Output`].
    pub delivered_output: usize,
    /// Injections never applied, published as [`AgentEvent::InjectionDropped`].
    pub dropped_injections: Vec<String>,
    /// Events about the child the sink refused after it started.
    pub unrecorded: Vec<Arc<PublishError>>,
}

/// What a session close did: the teardown of every agent it found, by id.
#[derive(Debug)]
pub struct CloseReport {
    pub agents: Vec<Arc<TeardownReport>>,
}
