//! The lifecycle of a session's child agents, with one owner per resource, so that starts,
//! cancellations, late messages and teardowns stay correct however they race.
//!
//! - [`AgentTree`]: one per session; agent ids, parent links and depths (the top-level agent
//!   is 0, a child its parent + 1; a start beyond the caller's `max_depth` is refused before
//!   anything is made).
//! - One [`CancelToken`] per agent, below its parent's: cancelling an agent cancels its
//!   subtree; a start under a cancelled agent is refused.
//! - A start ([`AgentTree::reserve`], then [`Pending::launch`]) registers the child, publishes
//!   [`AgentEvent::Started`] and only then runs its body; a start refused on the way leaves no
//!   event, no registration and no task.
//! - The first outcome claimed ([`Outcome`]) is the only one: it is queued for the parent and
//!   published as [`AgentEvent::Ended`] before any cleanup; every message after it is
//!   [`Rejected`]; a body that panics gives [`Failure::Panicked`].
//! - The teardown ([`Child::teardown`], [`AgentTree::close`]) stops the driver, drains the
//!   child's queues, detaches and disposes it, once, however often it is asked for.
//!
//! The body of a child (its model loop) is the caller's: a closure from [`ChildContext`] to a
//! future of its answer.

mod cell;
mod event;
mod registry;
mod token;
mod tree;

pub use event::{AgentEvent, AgentEvents, AgentId, ChildError, Failure, Outcome, PublishError};
#[cfg(test)]
pub(crate) use event::{Rejected, StartError, TeardownError};
#[cfg(test)]
pub(crate) use tree::Child;
pub use tree::{AgentTree, ChildContext};

#[cfg(test)]
#[path = "lifecycle_tests.rs"]
mod tests;
