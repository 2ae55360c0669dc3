//! agentd: a coding agent whose every command runs through confine-helper.
//!
//! agentd never forks or execs a tool command. [`helper_client`] sends each command to the
//! separate confine-helper process, which confines and runs it and reports the facts back.
//!
//! The modules stand in layers, and an import runs only down a layer or within one, never up
//! (`tests/tests/structure.rs` holds the same list and checks it, with no import circle between
//! files or folders). From the bottom:
//!
//! 1. **Leaves**, naming nothing else of agentd: [`words`] spells agentd's own vocabularies a
//!    session log records; [`clock`], [`cancel`] (one cancellation per turn), [`terminal`]
//!    (whatever agentd prints of stored or command text shows control characters instead of
//!    letting the terminal obey them), [`credentials`] and [`deny_read`] (what no command may
//!    read), [`real_path`], [`depth`] (how deep the tree of agents may grow, a value a session
//!    log holds), [`environment`] (which variables a command gets), [`session_temp`].
//! 2. **What agentd reaches outside itself through**: [`helper_client`]; [`http_client`], the
//!    one HTTP/1.1 client stack of agentd's own connections; [`proxy`], the network allow-list
//!    proxy (hosts decided by name, each decision reported); [`composition`], what the helper
//!    grants, which every lever agentd offers follows; [`denial`], which tells from a finished
//!    command whether the confinement denied it something; [`profile`], what a session's
//!    commands may write besides the workspace and what stays read-only inside it.
//! 3. **Running things**: [`command`], what the tools and `agentd run` share on top of the
//!    helper client (a command's facts, its output pipes, the wait for its end); [`model`], the
//!    model provider; [`checkpoint`], the checkpoints a turn can be undone to.
//! 4. **The session**: a session is its log ([`session`]), whose events hold plain values
//!    only, the protocol's and those of the layers below; above the log sit its two [`knobs`]
//!    ([`knobs::sandbox`], the mode its tools run under, and [`knobs::policy`], the approval
//!    policy), [`approval`] (how a tool call asks a human before it runs) and [`narrowing`]
//!    (what a narrower mode does to the background tasks still running).
//! 5. **What a turn calls**: [`mcp`], the client of a session's MCP servers, each started
//!    through the helper like a command, and [`tools`], the tool registry and its tools.
//! 6. **Agents that start agents**: [`agents`], what a child agent may be (its persona, which
//!    names the tools it may use), where one agent stands in the tree, and the lifecycle of the
//!    children a session starts; the tools an agent has come from one resolver over the
//!    session's tool registry ([`tools::ToolScope`]).
//! 7. **The configuration file**, [`config`], which names all of the above.
//! 8. **The front ends**: [`acp`], the ACP agent; [`cli`], the command line the `agentd`
//!    executable parses ([`cli::run`] is `agentd run`, [`cli::exec`] `agentd exec`, one prompt
//!    as a client of [`acp`]'s agent in the same process); [`demo`].
//!
//! Every module is private to the crate. What other crates use of agentd (its executable, the
//! benchmark, the documentation generator, the fuzz targets and the scenarios) is [`api`], the
//! one public module.

#![warn(clippy::too_many_lines)]
#![cfg_attr(not(test), warn(clippy::indexing_slicing))]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod acp;
mod agents;
pub mod api;
mod approval;
mod cancel;
mod checkpoint;
mod cli;
mod clock;
mod command;
mod composition;
mod config;
mod credentials;
mod demo;
mod denial;
mod deny_read;
mod depth;
mod environment;
mod helper_client;
mod http_client;
mod knobs;
mod mcp;
mod model;
mod narrowing;
mod profile;
mod proxy;
mod real_path;
#[cfg(test)]
#[path = "../../tests/shared/route_events.rs"]
mod route_events;
mod session;
mod session_temp;
#[cfg(test)]
#[path = "../../tests/shared/skip.rs"]
mod skip;
mod terminal;
#[cfg(test)]
mod test_support;
mod tools;
mod words;
