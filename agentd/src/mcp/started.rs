//! A started server, whichever way it is reached: a confined process over stdio
//! ([`Running`]) or a URL over streamable HTTP ([`HttpServer`]). What a session's servers ask
//! of one — whether it still serves a call, its tools, a call, its stop — is answered here,
//! once for both, so the MCP requests themselves ([`super::protocol`]) are written once.

use std::time::Duration;

use confine_protocol::{Mode, Policy};
use serde_json::Value;

use super::endpoint::Reach;
use super::http_server::{self, HttpServer};
use super::protocol::{self, CallOutput, Initialized, McpTool};
use super::rpc::RpcError;
use super::server::Running;
use crate::cancel::Cancel;
use crate::proxy::Decisions;

/// A started, initialized server.
#[derive(Debug)]
pub enum Started {
    Stdio(Running),
    Http(HttpServer),
}

impl Started {
    /// Whether it serves a call confined by `policy`, which reaches the network as far as
    /// `reach`: a process only under the very policy it was started with, a server over HTTP
    /// under the same reach (the rest of a policy is about files, which it never touches).
    pub fn serves(&self, policy: &Policy, reach: &Reach) -> bool {
        match self {
            Started::Stdio(running) => running.policy() == policy,
            Started::Http(server) => server.reach() == reach,
        }
    }

    /// The mode it was started under.
    pub fn mode(&self) -> Mode {
        match self {
            Started::Stdio(running) => running.mode(),
            Started::Http(server) => server.mode(),
        }
    }

    pub fn initialized(&self) -> &Initialized {
        match self {
            Started::Stdio(running) => running.initialized(),
            Started::Http(server) => server.initialized(),
        }
    }

    /// Whether it has ended: its process or connection, or its use.
    pub fn has_ended(&self) -> bool {
        match self {
            Started::Stdio(running) => running.has_ended(),
            Started::Http(server) => server.has_ended(),
        }
    }

    pub fn stop(&self) {
        match self {
            Started::Stdio(running) => running.stop(),
            Started::Http(server) => server.stop(),
        }
    }

    /// What the allow-list decided for it since this was last asked; `None` without one.
    pub fn take_decisions(&self) -> Option<Decisions> {
        match self {
            Started::Stdio(running) => running.take_decisions(),
            Started::Http(server) => server.take_decisions(),
        }
    }

    /// Every tool it offers ([`protocol::list_tools`]).
    pub async fn list_tools(&self, timeout: Duration) -> Result<Vec<McpTool>, RpcError> {
        match self {
            Started::Stdio(running) => protocol::list_tools(running.rpc(), timeout).await,
            Started::Http(server) => protocol::list_tools(server.rpc(), timeout).await,
        }
    }

    /// A call of its tool `name` ([`protocol::call_tool`]).
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        timeout: Duration,
        cancel: &Cancel,
    ) -> Result<CallOutput, RpcError> {
        match self {
            Started::Stdio(running) => {
                protocol::call_tool(running.rpc(), name, arguments, timeout, cancel).await
            }
            Started::Http(server) => {
                protocol::call_tool(server.rpc(), name, arguments, timeout, cancel).await
            }
        }
    }

    /// Why a request to it failed, for a person or the model.
    pub async fn explain(&self, error: &RpcError) -> String {
        match self {
            Started::Stdio(running) => running.explain(error).await,
            Started::Http(_) => http_server::explain(error),
        }
    }
}
