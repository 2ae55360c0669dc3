//! The lifecycle of a session's child agents, with one owner per resource, so that starts,
//! cancellations, late messages and teardowns stay correct however they race.
//!
//! - One [`CancelToken`] per agent, below its parent's: cancelling an agent cancels its
//!   subtree; a token made under a cancelled one is born cancelled.

mod token;

pub use token::CancelToken;
