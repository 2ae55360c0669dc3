//! agentd: a coding agent whose every command runs through confine-helper.
//!
//! agentd never forks or execs a tool command. [`helper_client`] sends each command to the
//! separate confine-helper process, which confines and runs it and reports the facts back;
//! [`run`] is the `agentd run` job built on it; [`config`] reads the optional configuration
//! file; [`cli`] is the command line the `agentd` executable parses. [`environment`] decides
//! which variables a command gets, and [`denial`] tells from a finished command whether the
//! confinement denied it something; every tool that runs commands uses both. A session's two
//! knobs are [`sandbox`] (the mode its tools run under) and [`approval::policy`]; [`narrowing`]
//! is what a narrower mode does to the background tasks still running; [`approval`] is how a
//! tool call asks a human before it runs. [`composition`] is what the helper grants, which
//! every lever agentd offers follows. Whatever agentd prints of stored or command text on a
//! terminal goes through [`terminal`], which shows control characters instead of letting the
//! terminal obey them.

pub mod acp;
pub mod approval;
pub mod cancel;
pub mod cli;
pub mod clock;
pub mod composition;
pub mod config;
pub mod demo;
pub mod denial;
pub mod environment;
pub mod helper_client;
pub mod model;
pub mod narrowing;
mod real_path;
pub mod run;
pub mod sandbox;
pub mod session;
pub mod terminal;
#[cfg(test)]
mod test_support;
pub mod tools;
pub mod words;
