//! The MCP servers of a session: those of the configuration (`[[mcp.servers]]`) and those the
//! client gives in `session/new` or `session/load` (`mcpServers`), as one list of servers to
//! start ([`servers`]), and their start once the session was answered ([`start`]).
//!
//! A stdio server is started through confine-helper (see [`crate::mcp`]); a streamable HTTP
//! server is reached by agentd itself, only as far as the session's network policy allows its
//! host: a refused one does not start, and the client is told why. An SSE server (the older
//! HTTP transport) is not started, nor is one whose URL or headers cannot be used, nor one whose
//! name makes the same tool names as another's; the client is told. The start runs after the
//! answer, off the dispatch loop; the session's first prompt waits for it and for what it
//! tells. What did not start,
//! and an `approval.ask_before` entry that names no tool of the session, is told once: one line
//! on stderr each and one agent message to the client, not recorded (a `session/load` starts the
//! servers again and tells again).

use std::ffi::OsString;
use std::sync::Arc;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{McpServer, McpServerHttp};

use super::notices::{MCP, tell};
use super::options::AcpOptions;
use super::sessions::Session;
use crate::mcp::endpoint::Endpoint;
use crate::mcp::{ServerSpec, Transport, names};
use crate::tools::start_mcp;

/// A server as the configuration or the client gives it: its name, and how it is reached.
struct Given {
    name: String,
    reached: Reached,
}

enum Reached {
    /// A program and its arguments, and its own variables.
    Command {
        argv: Vec<OsString>,
        own: Vec<(OsString, OsString)>,
    },
    Http(Endpoint),
}

/// The servers a session has: the configuration's, then the client's, each with the commands'
/// environment plus its own; and a sentence for each server not started.
pub fn servers(options: &AcpOptions, requested: &[McpServer]) -> (Vec<ServerSpec>, Vec<String>) {
    let mut notices = Vec::new();
    let mut given: Vec<Given> = options
        .mcp_servers
        .iter()
        .map(|server| Given {
            name: server.name.clone(),
            reached: match &server.http {
                Some(endpoint) => Reached::Http(endpoint.clone()),
                None => Reached::Command {
                    argv: server.command.iter().map(OsString::from).collect(),
                    own: server
                        .env
                        .iter()
                        .map(|(n, v)| (n.into(), v.into()))
                        .collect(),
                },
            },
        })
        .collect();
    for server in requested {
        match server {
            McpServer::Stdio(stdio) => {
                let mut argv = vec![stdio.command.clone().into_os_string()];
                argv.extend(stdio.args.iter().map(OsString::from));
                let own = stdio
                    .env
                    .iter()
                    .map(|var| (OsString::from(&var.name), OsString::from(&var.value)))
                    .collect();
                given.push(Given {
                    name: stdio.name.clone(),
                    reached: Reached::Command { argv, own },
                });
            }
            McpServer::Http(http) => match endpoint(http) {
                Ok(endpoint) => given.push(Given {
                    name: http.name.clone(),
                    reached: Reached::Http(endpoint),
                }),
                Err(e) => {
                    notices.push(format!("The MCP server {} is not started: {e}.", http.name))
                }
            },
            other => notices.push(not_supported(other)),
        }
    }
    let mut specs: Vec<ServerSpec> = Vec::new();
    for Given { name, reached } in given {
        let key = match names::server_key(&name) {
            Ok(key) => key,
            Err(e) => {
                notices.push(format!("An MCP server is not started: {e}."));
                continue;
            }
        };
        if specs.iter().any(|spec| spec.key == key) {
            notices.push(format!(
                "The MCP server {name} is not started: another server of this session already \
                 names its tools mcp__{key}__…; give each server its own name."
            ));
            continue;
        }
        let transport = match reached {
            Reached::Http(endpoint) => Transport::Http(endpoint),
            Reached::Command { argv, own } => {
                let mut env = options.command_env.clone();
                for (var, value) in own {
                    env.retain(|(existing, _)| *existing != var);
                    env.push((var, value));
                }
                Transport::Stdio { argv, env }
            }
        };
        specs.push(ServerSpec {
            name,
            key,
            transport,
        });
    }
    (specs, notices)
}

/// The endpoint of a client's HTTP server: its URL and headers, checked.
fn endpoint(http: &McpServerHttp) -> Result<Endpoint, crate::mcp::endpoint::EndpointError> {
    let headers: Vec<(String, String)> = http
        .headers
        .iter()
        .map(|h| (h.name.clone(), h.value.clone()))
        .collect();
    Endpoint::new(&http.url, &headers)
}

/// Why a server of a transport agentd does not speak is not started.
fn not_supported(server: &McpServer) -> String {
    match server {
        McpServer::Sse(sse) => format!(
            "The MCP server {} is not started: its transport, HTTP with SSE (MCP 2024-11-05), is \
             not supported; give the server's streamable HTTP endpoint as an \"http\" server \
             instead.",
            sse.name
        ),
        _ => "An MCP server is not started: its transport is not one agentd speaks (stdio or \
              streamable HTTP)."
            .to_owned(),
    }
}

/// Starts the session's servers under its mode now, off the dispatch loop, and then tells the
/// client, once, what did not start; `notices` are those [`servers`] gave.
pub fn start(
    session: &Arc<Session>,
    ask_before: &[String],
    notices: Vec<String>,
    cx: ConnectionTo<Client>,
) {
    let session = session.clone();
    let ask_before = ask_before.to_vec();
    // What `/status` and `/mcp` say of the servers that never had a chance to start.
    session.tools.mcp().note_unstarted(&notices);
    tokio::spawn(async move {
        let mut notices = notices;
        if !session.tools.mcp().is_empty() {
            match session.read_project().await {
                Ok(()) => {
                    let mode = session.narrowest_mode();
                    notices.extend(start_mcp(&session.tools, mode).await);
                    // A narrowing while they started found them not yet running.
                    let now = session.narrowest_mode();
                    if now < mode {
                        session.tools.mcp().narrow(now);
                    }
                }
                Err(e) => {
                    session.tools.mcp().stop_all();
                    notices.push(format!("The MCP servers are not started: {e}."));
                }
            }
        }
        notices.extend(unmatched(&session, &ask_before));
        tell(&session, MCP, &notices, &cx).await;
        // Only now: the session's first prompt (and its answer) comes after what was told,
        // and a start that gave up early does not leave it waiting.
        session.tools.mcp().mark_ready();
    });
}

/// A sentence per `approval.ask_before` entry for MCP tools that names none of the session's:
/// a misspelt entry would otherwise ask before nothing, silently.
fn unmatched(session: &Session, ask_before: &[String]) -> Vec<String> {
    let tools = session.tools.mcp().tool_names();
    ask_before
        .iter()
        .filter(|entry| names::split(entry).is_some())
        .filter(|entry| {
            !tools
                .iter()
                .any(|tool| names::listed(&[(*entry).clone()], tool))
        })
        .map(|entry| {
            format!(
                "approval.ask_before lists {entry}, which names no tool of this session's MCP \
                 servers."
            )
        })
        .collect()
}
