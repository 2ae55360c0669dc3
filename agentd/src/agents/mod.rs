//! A session's agents: the top-level agent and the children it delegates to.

pub mod lifecycle;
