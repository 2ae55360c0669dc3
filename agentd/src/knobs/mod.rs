//! A session's knobs: [`sandbox`], the mode its tools run under, [`policy`], whether approval
//! is asked for at all, and [`model`], which configured model answers its requests. Each is an
//! event in the session's log, a fold that finds its effective value (the last switch, or the
//! configured default) and one write path; nothing else holds them, so a restarted agentd
//! finds them by replaying the log. The knobs sit above
//! the log ([`crate::session`]), whose events name only plain values ([`crate::words`]).

pub mod model;
pub mod policy;
pub mod sandbox;
