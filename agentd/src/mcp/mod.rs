//! MCP servers, confined: agentd's client of the Model Context Protocol for the stdio servers a
//! session has (`[[mcp.servers]]` in the configuration, `mcpServers` of `session/new` and
//! `session/load`).
//!
//! A server is a command like any other: confine-helper starts it under the session's mode and
//! sandbox profile, in the workspace, with the commands' safe environment and its own variables
//! ([`server`]); the kernel decides what it may touch, so a server's tool can do no more than a
//! `bash` command of the same mode could. Over its stdin and stdout agentd speaks JSON-RPC
//! ([`rpc`]) and, on top, the few MCP requests it needs ([`protocol`]). [`servers`] is one
//! session's set: the start, the tools under their registry names ([`names`]), the calls, the
//! restart when the mode changes, the stop when the session closes. HTTP and SSE servers are
//! never started: agentd's sandbox denies commands the network, and a server agentd reached over
//! the network itself would escape the sandbox entirely (RFC 0015).

pub mod endpoint;
pub mod http;
pub mod names;
pub mod protocol;
pub mod rpc;
pub mod server;
pub mod servers;

pub use names::{NameError, listed};
pub use protocol::{CallOutput, McpTool};
pub use servers::{Exposed, McpCallError, McpServers, Placement, ServerSpec};
