//! agentd: a coding agent whose every command runs through confine-helper.
//!
//! agentd never forks or execs a tool command. [`helper_client`] sends each command to the
//! separate confine-helper process, which confines and runs it and reports the facts back;
//! [`command`] is what the tools and `agentd run` share on top of it: a command's facts, its
//! output pipes, the wait for its end; [`cli::run`] is `agentd run`, [`cli::exec`] `agentd exec`
//! (one prompt, a client of [`acp`]'s agent in the same process); [`config`] reads the
//! optional configuration file; [`cli`] is the command line the `agentd` executable parses.
//! [`environment`] decides which variables a command gets, and [`denial`] tells from a finished
//! command whether the confinement denied it something; every tool that runs commands uses both.
//! [`profile`] is what a session's commands may write besides the workspace and what stays
//! read-only inside it: every command's and file operation's policy is built from it.
//! [`proxy`] is the network allow-list proxy: the hosts a confined command may reach, decided
//! by name, each decision reported, everything else refused.
//! [`mcp`] is the client of a session's MCP servers, each started through the helper like a
//! command.
//! [`http_client`] is the one HTTP/1.1 client stack agentd's own connections use: the model
//! provider's and those to MCP servers reached over HTTP.
//!
//! A session is its log ([`session`]), at the bottom: its events hold plain values only, the
//! protocol's and those of [`words`], the leaf that spells agentd's own vocabularies. Above the
//! log sit a session's two [`knobs`], [`knobs::sandbox`] (the mode its tools run under) and
//! [`knobs::policy`] (the approval policy), and [`approval`], how a tool call asks a human
//! before it runs. [`narrowing`] is what a narrower mode does to the background tasks still
//! running. [`composition`] is what the helper grants, which every lever agentd offers follows.
//! [`agents`] is what a child agent may be (its persona), how deep the tree of agents may grow,
//! where one agent stands in it, and the lifecycle of the children a session starts (their
//! cancellation, their one outcome each and their teardown); the tools an agent has come from
//! one resolver over the session's tool registry ([`tools::ToolScope`]).
//! Whatever agentd prints of stored or command text on a terminal goes through [`terminal`],
//! which shows control characters instead of letting the terminal obey them.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod acp;
pub mod agents;
pub mod approval;
pub mod cancel;
pub mod checkpoint;
pub mod cli;
pub mod clock;
pub mod command;
pub mod composition;
pub mod config;
pub mod credentials;
pub mod demo;
pub mod denial;
pub mod deny_read;
pub mod environment;
pub mod helper_client;
pub mod http_client;
pub mod knobs;
pub mod mcp;
pub mod model;
pub mod narrowing;
pub mod profile;
pub mod proxy;
mod real_path;
#[cfg(test)]
#[path = "../../tests/shared/route_events.rs"]
mod route_events;
pub mod session;
pub mod session_temp;
#[cfg(test)]
#[path = "../../tests/shared/skip.rs"]
mod skip;
pub mod terminal;
#[cfg(test)]
mod test_support;
pub mod tools;
pub mod words;
