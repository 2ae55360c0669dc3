//! The MCP servers of a session: those of the configuration (`[[mcp.servers]]`) and those the
//! client gives in `session/new` or `session/load` (`mcpServers`), as one list of servers to
//! start ([`servers`]), and their start once the session was answered ([`start`]).
//!
//! Only stdio servers are started, each through confine-helper (see [`crate::mcp`]). An HTTP or
//! SSE server is not: agentd's sandbox denies commands the network, and a server agentd itself
//! reached over the network would be outside the sandbox; the client is told. A server whose
//! name makes the same tool names as another's is not started either. The start runs after the
//! answer, off the dispatch loop; the session's first prompt waits for it. What did not start,
//! and an `approval.ask_before` entry that names no tool of the session, is told once: one line
//! on stderr each and one agent message to the client, not recorded (a `session/load` starts the
//! servers again and tells again).

use std::ffi::OsString;
use std::sync::Arc;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{McpServer, SessionNotification};

use super::options::AcpOptions;
use super::sessions::Session;
use super::updates;
use crate::mcp::{ServerSpec, names};
use crate::tools::start_mcp;

/// A server as the configuration or the client gives it: its name, its program and arguments,
/// its own variables.
struct Given {
    name: String,
    argv: Vec<OsString>,
    own: Vec<(OsString, OsString)>,
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
            argv: server.command.iter().map(OsString::from).collect(),
            own: server
                .env
                .iter()
                .map(|(n, v)| (n.into(), v.into()))
                .collect(),
        })
        .collect();
    for server in requested {
        match server {
            McpServer::Stdio(stdio) => {
                let mut argv = vec![stdio.command.clone().into_os_string()];
                argv.extend(stdio.args.iter().map(OsString::from));
                given.push(Given {
                    name: stdio.name.clone(),
                    argv,
                    own: stdio
                        .env
                        .iter()
                        .map(|var| (OsString::from(&var.name), OsString::from(&var.value)))
                        .collect(),
                });
            }
            other => notices.push(not_stdio(other)),
        }
    }
    let mut specs: Vec<ServerSpec> = Vec::new();
    for Given { name, argv, own } in given {
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
        let mut env = options.command_env.clone();
        for (var, value) in own {
            env.retain(|(existing, _)| *existing != var);
            env.push((var, value));
        }
        specs.push(ServerSpec {
            name,
            key,
            argv,
            env,
        });
    }
    (specs, notices)
}

/// Why a server that is not a stdio one is not started.
fn not_stdio(server: &McpServer) -> String {
    let (which, transport) = match server {
        McpServer::Http(http) => (format!("The MCP server {}", http.name), "HTTP"),
        McpServer::Sse(sse) => (format!("The MCP server {}", sse.name), "SSE"),
        _ => ("An MCP server".to_owned(), "a transport other than stdio"),
    };
    format!(
        "{which} is not started: only stdio MCP servers are supported. agentd runs each one \
         confined by its sandbox, which denies the network; a server reached over {transport} \
         would run outside it."
    )
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
        tell(&session, &notices, &cx);
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

/// Tells the person once: a line each on stderr, one agent message to the client.
fn tell(session: &Session, notices: &[String], cx: &ConnectionTo<Client>) {
    if notices.is_empty() {
        return;
    }
    for notice in notices {
        eprintln!("agentd: session {}: {notice}", session.id);
    }
    let text = format!("{}\n", notices.join("\n"));
    let _ = cx.send_notification(SessionNotification::new(
        session.id.clone(),
        updates::agent_text(&text),
    ));
}
