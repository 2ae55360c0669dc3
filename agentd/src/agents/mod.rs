//! Agents that start other agents: what a child agent may be ([`Persona`], configured as
//! `[agents.NAME]` and read by [`crate::config`]), how deep the tree of agents may grow
//! ([`crate::depth`]), where one agent stands in that tree ([`Lineage`]: its depth, its depth cap and
//! its tool scope), and the lifecycle of the children a session starts ([`lifecycle`]: one owner
//! per resource, one cancellation token per agent, the first outcome wins, a memoized teardown).
//! RFC 0007 says why it is shaped this way.
//!
//! Read `../depth.rs` (a leaf of its own, since a session log holds depths too), then
//! `persona.rs`, then `lineage.rs`, then `lifecycle.rs`.

// RFC 0007's lifecycle is one tested whole; agentd's `task` tool uses its start, outcome,
// cancellation and teardown, not yet a child's output stream nor what a parent injects into a
// running child, which its unit tests exercise. The expectation fails once everything is used.
#[cfg_attr(
    not(test),
    expect(
        dead_code,
        reason = "output streams and injection are tested but not yet called"
    )
)]
pub mod lifecycle;
mod lineage;
mod persona;

pub use crate::depth::{Depth, DepthOrigin, InvalidDepth};
pub use lineage::Lineage;
#[cfg(test)]
pub(crate) use persona::GENERAL;
pub use persona::{DEFAULT_MAX_DEPTH, Persona, PersonaModel, Personas};
