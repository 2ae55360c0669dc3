//! MCP servers, confined: agentd's client of the Model Context Protocol for the servers a
//! session has (`[[mcp.servers]]` in the configuration, `mcpServers` of `session/new` and
//! `session/load`).
//!
//! A stdio server is a command like any other: confine-helper starts it under the session's
//! mode and sandbox profile, in the workspace, with the commands' safe environment and its own
//! variables ([`server`]); the kernel decides what it may touch, so a server's tool can do no
//! more than a `bash` command of the same mode could. Over its stdin and stdout agentd speaks
//! JSON-RPC ([`rpc`]). A streamable HTTP server runs nowhere here: agentd reaches its URL
//! itself ([`endpoint`], [`http`], [`http_server`]), and only as far as the network policy of
//! the call lets a command reach — its host allowed by the mode, the network setting or the
//! allow-list, every connection decided again. Over either transport agentd speaks the few MCP
//! requests it needs ([`protocol`]) to a [`started`] server. [`servers`] is one session's set:
//! the start, the tools under their registry names ([`names`]), the calls, the restart when the
//! mode changes, the stop when the session closes. SSE servers (the older HTTP transport) are
//! never started (RFC 0015).

pub mod endpoint;
pub mod http;
pub mod http_server;
pub mod names;
pub mod protocol;
pub mod rpc;
pub mod server;
pub mod servers;
pub mod started;

pub use names::listed;
pub use protocol::CallOutput;
pub use servers::{McpServers, Placement, ServerReport, ServerSpec, ServerState, Transport};
