//! Agents that start other agents: what a child agent may be ([`Persona`], configured as
//! `[agents.NAME]` and read by [`crate::config`]), how deep the tree of agents may grow
//! ([`crate::depth`]), where one agent stands in that tree ([`Lineage`]: its depth, its depth cap and
//! its tool scope), and the lifecycle of the children a session starts ([`lifecycle`]: one owner
//! per resource, one cancellation token per agent, the first outcome wins, a memoized teardown).
//! RFC 0007 says why it is shaped this way.
//!
//! Read `../depth.rs` (a leaf of its own, since a session log holds depths too), then
//! `persona.rs`, then `lineage.rs`, then `lifecycle.rs`.

pub mod lifecycle;
mod lineage;
mod persona;

pub use crate::depth::{Depth, DepthOrigin, InvalidDepth, MAX_DEPTH, TooDeep, check_child_start};
pub use lineage::{Lineage, StartRefused};
pub use persona::{DEFAULT_MAX_DEPTH, GENERAL, Persona, PersonaModel, Personas, UnknownPersona};
