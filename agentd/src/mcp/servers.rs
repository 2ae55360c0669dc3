//! The MCP servers of one session ([`McpServers`]): started once the session exists, each
//! server's tools exposed under their registry names, every call handed to the server that
//! offers the tool, every server stopped when the session closes.
//!
//! A server always runs under the policy of the call it serves. A call whose policy is not the
//! one its server was started under (the session's mode was switched, or the project file
//! protects other paths now), or whose server has ended, restarts the server first: stopped
//! through confine-helper, started and initialized again under the call's policy. A server
//! reached over HTTP is started under the call's network reach ([`Reach`]) instead, and started
//! again when a call's reach is another: whether its host may be reached is decided at every
//! call. A narrowing of the mode ([`McpServers::narrow`]) stops every server started under a
//! wider mode at once, as it stops background tasks; the next call starts it again, narrower.
//! A restarted server keeps the tools it was first listed with: what the model was offered does
//! not change in the middle of a session.

use std::ffi::OsString;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use confine_protocol::{BackendChoice, Mode, Policy};
use serde_json::Value;
use tokio::sync::watch;

use super::endpoint::{Endpoint, Reach};
use super::http_server::HttpServer;
use super::names;
use super::protocol::{CallOutput, McpTool, START_TIMEOUT};
use super::server::{Launch, Running, StartError};
use super::started::Started;
use crate::cancel::Cancel;
use crate::helper_client::HelperClient;
use crate::narrowing;

/// One server a session has: its name as configured, its part of its tools' names, and how it
/// is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    /// As the configuration or the client named it.
    pub name: String,
    /// Its tools' names start `mcp__<key>__` ([`names::server_key`]).
    pub key: String,
    pub transport: Transport,
}

/// How a server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A command agentd starts through confine-helper, spoken to over its stdin and stdout.
    Stdio {
        argv: Vec<OsString>,
        /// Its whole environment.
        env: Vec<(OsString, OsString)>,
    },
    /// A server at a URL, spoken to over streamable HTTP.
    Http(Endpoint),
}

/// Where a server runs for one call (or for the session's start).
#[derive(Debug, Clone)]
pub struct Placement<'a> {
    pub helper: &'a HelperClient,
    pub workspace: &'a Path,
    pub backend: BackendChoice,
    pub policy: Policy,
    /// The allow-list proxy a server under `policy` reaches the network through, if any.
    pub proxy: Option<std::sync::Arc<crate::proxy::Policy>>,
}

impl Placement<'_> {
    /// How far a server over HTTP may be reached from here.
    fn reach(&self) -> Reach {
        Reach::of(&self.policy, self.proxy.as_ref())
    }

    /// Starts and initializes the server of `spec` here.
    async fn start(&self, spec: &ServerSpec) -> Result<Started, StartError> {
        match &spec.transport {
            Transport::Stdio { argv, env } => {
                let launch = Launch {
                    argv: argv.clone(),
                    cwd: self.workspace.to_owned(),
                    env: env.clone(),
                    policy: self.policy.clone(),
                    backend: self.backend,
                    proxy: self.proxy.clone(),
                };
                let running = Running::start(self.helper, launch, START_TIMEOUT).await?;
                Ok(Started::Stdio(running))
            }
            Transport::Http(endpoint) => {
                let mode = self.policy.mode;
                let reach = self.reach();
                let server =
                    HttpServer::start(endpoint.clone(), reach, mode, START_TIMEOUT).await?;
                Ok(Started::Http(server))
            }
        }
    }
}

/// A tool of a server, under its registry name.
#[derive(Debug, Clone, PartialEq)]
pub struct Exposed {
    /// Its registry name, `mcp__<server>__<tool>`.
    pub name: String,
    /// The server's name as configured.
    pub server: String,
    pub tool: McpTool,
    slot: usize,
}

/// Where one server of a session stands, for the person who asks (`/status`, `/mcp`).
#[derive(Debug, Clone, PartialEq)]
pub struct ServerReport {
    /// As the configuration or the client named it.
    pub name: String,
    /// Its tools' names start `mcp__<key>__`.
    pub key: String,
    pub state: ServerState,
    /// The tools it offers, as the server lists them, in the order exposed.
    pub tools: Vec<McpTool>,
}

/// Where a server stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerState {
    /// The session's start of its servers has not finished yet.
    Starting,
    /// It runs, confined under this mode.
    Running(Mode),
    /// It did not start, for this reason; its tools are not offered.
    Failed(String),
    /// It ran and is stopped now (a narrowing of the mode, or it ended); the next call of one
    /// of its tools starts it again.
    Stopped,
    /// The session is closed: it is stopped and none starts again.
    Closed,
}

/// Why a call of an MCP tool got no result from its server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpCallError {
    #[error("{0:?} is not a tool of this session's MCP servers")]
    Unknown(String),
    #[error("the MCP server {server} could not be started for this call: {why}")]
    Start { server: String, why: String },
    #[error("the MCP server {server} did not answer the call: {why}")]
    Failed { server: String, why: String },
    #[error("the session is closed: its MCP servers are stopped")]
    Closed,
}

#[derive(Debug)]
struct Slot {
    spec: ServerSpec,
    current: Mutex<Option<Arc<Started>>>,
    /// Why the session's start of it failed, if it did.
    failed: Mutex<Option<String>>,
    /// Held while the server is (re)started, so that concurrent calls start it once.
    starting: tokio::sync::Mutex<()>,
}

impl Slot {
    fn current(&self) -> MutexGuard<'_, Option<Arc<Started>>> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The MCP servers of one session.
#[derive(Debug)]
pub struct McpServers {
    slots: Vec<Slot>,
    /// A sentence for each server the session was given but could not start at all (its
    /// transport, its name, its URL): these have no slot.
    unstarted: Mutex<Vec<String>>,
    exposed: Mutex<Vec<Exposed>>,
    ready: watch::Sender<bool>,
    /// Set by the first [`McpServers::start_all`]: the servers start once.
    started: AtomicBool,
    closed: AtomicBool,
    call_timeout: Duration,
}

impl Default for McpServers {
    fn default() -> McpServers {
        McpServers::new(Vec::new(), Duration::ZERO)
    }
}

impl McpServers {
    /// The servers of `specs`, none started yet; each call waits at most `call_timeout` for
    /// its answer. With no server, [`McpServers::ready`] holds at once.
    pub fn new(specs: Vec<ServerSpec>, call_timeout: Duration) -> McpServers {
        let (ready, _) = watch::channel(specs.is_empty());
        McpServers {
            slots: specs
                .into_iter()
                .map(|spec| Slot {
                    spec,
                    current: Mutex::new(None),
                    failed: Mutex::new(None),
                    starting: tokio::sync::Mutex::new(()),
                })
                .collect(),
            unstarted: Mutex::new(Vec::new()),
            exposed: Mutex::new(Vec::new()),
            ready,
            started: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            call_timeout,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    fn exposed(&self) -> MutexGuard<'_, Vec<Exposed>> {
        self.exposed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts every server under `placement`, all at once, and exposes their tools, each under
    /// its registry name unless `taken` says another tool has it or the name cannot be made.
    /// Returns one sentence per server that failed and per tool refused, for the client; a
    /// server that failed has no tool. Only the first call starts anything (a later one is
    /// `None`); the caller says when the tools are offered ([`McpServers::mark_ready`]).
    pub async fn start_all(
        &self,
        placement: &Placement<'_>,
        taken: &(dyn Fn(&str) -> bool + Sync),
    ) -> Option<Vec<String>> {
        if self.started.swap(true, Ordering::SeqCst) {
            return None;
        }
        let starts = self.slots.iter().map(|slot| async move {
            let _one = slot.starting.lock().await;
            let listed = start_and_list(placement, &slot.spec).await;
            if let Ok(running) = &listed {
                self.install(slot, running.0.clone());
            }
            listed.map(|(_, tools)| tools)
        });
        let started = futures::future::join_all(starts).await;
        let mut notices = Vec::new();
        for (index, (slot, listed)) in self.slots.iter().zip(started).enumerate() {
            let name = &slot.spec.name;
            let tools = match listed {
                Ok(tools) => tools,
                Err(why) => {
                    let why = why.to_string();
                    notices.push(format!("The MCP server {name} did not start: {why}."));
                    *slot.failed.lock().unwrap_or_else(PoisonError::into_inner) = Some(why);
                    continue;
                }
            };
            for tool in tools {
                match names::tool_name(&slot.spec.key, &tool.name) {
                    Ok(full) if taken(&full) || self.exposed().iter().any(|e| e.name == full) => {
                        notices.push(format!(
                            "The tool {:?} of the MCP server {name} is not offered: another \
                             tool is already called {full}.",
                            tool.name
                        ));
                    }
                    Ok(full) => self.exposed().push(Exposed {
                        name: full,
                        server: name.clone(),
                        tool,
                        slot: index,
                    }),
                    Err(why) => notices.push(format!(
                        "The tool {:?} of the MCP server {name} is not offered: {why}.",
                        tool.name
                    )),
                }
            }
        }
        Some(notices)
    }

    /// The servers' start has finished and their tools are offered: [`McpServers::ready`]
    /// holds from now on.
    pub fn mark_ready(&self) {
        self.ready.send_replace(true);
    }

    /// Resolves once the servers' start has finished (at once when there are none).
    pub async fn ready(&self) {
        let mut ready = self.ready.subscribe();
        let _ = ready.wait_for(|ready| *ready).await;
    }

    /// Keeps `sentences`, one per server the session was given but could not start at all,
    /// for [`McpServers::unstarted`].
    pub fn note_unstarted(&self, sentences: &[String]) {
        self.unstarted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(sentences.iter().cloned());
    }

    /// What [`McpServers::note_unstarted`] kept.
    pub fn unstarted(&self) -> Vec<String> {
        self.unstarted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Where each server stands now, in the order given, with the tools it offers.
    pub fn report(&self) -> Vec<ServerReport> {
        let exposed = self.exposed().clone();
        let ready = *self.ready.borrow();
        self.slots
            .iter()
            .enumerate()
            .map(|(index, slot)| {
                let failed = slot
                    .failed
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                let running = slot
                    .current()
                    .as_ref()
                    .filter(|r| !r.has_ended())
                    .map(|r| r.mode());
                let state = match (failed, running) {
                    (Some(why), _) => ServerState::Failed(why),
                    _ if self.closed.load(Ordering::SeqCst) => ServerState::Closed,
                    (None, Some(mode)) => ServerState::Running(mode),
                    (None, None) if !ready => ServerState::Starting,
                    (None, None) => ServerState::Stopped,
                };
                ServerReport {
                    name: slot.spec.name.clone(),
                    key: slot.spec.key.clone(),
                    state,
                    tools: exposed
                        .iter()
                        .filter(|e| e.slot == index)
                        .map(|e| e.tool.clone())
                        .collect(),
                }
            })
            .collect()
    }

    /// The registry names of every exposed tool, in the order exposed.
    pub fn tool_names(&self) -> Vec<String> {
        self.exposed().iter().map(|e| e.name.clone()).collect()
    }

    /// The exposed tool called `name`.
    pub fn tool(&self, name: &str) -> Option<Exposed> {
        self.exposed().iter().find(|e| e.name == name).cloned()
    }

    /// Calls the tool `name` with `arguments` on its server, running under `placement` (the
    /// server is restarted first if it runs under another policy, or another reach for one over
    /// HTTP, or has ended), waiting at most the call timeout and until `cancel`.
    pub async fn call(
        &self,
        name: &str,
        arguments: Value,
        placement: &Placement<'_>,
        cancel: &Cancel,
    ) -> Result<CallOutput, McpCallError> {
        let Some(exposed) = self.tool(name) else {
            return Err(McpCallError::Unknown(name.to_owned()));
        };
        let Some(slot) = self.slots.get(exposed.slot) else {
            return Err(McpCallError::Unknown(name.to_owned()));
        };
        let server = slot.spec.name.clone();
        let running = {
            let _one = slot.starting.lock().await;
            let current = slot.current().clone();
            match current {
                Some(running)
                    if running.serves(&placement.policy, &placement.reach())
                        && !running.has_ended() =>
                {
                    running
                }
                stale => {
                    if let Some(stale) = stale {
                        stale.stop();
                    }
                    if self.closed.load(Ordering::SeqCst) {
                        return Err(McpCallError::Closed);
                    }
                    let started = tokio::select! {
                        started = placement.start(&slot.spec) => started,
                        () = cancel.cancelled() => Err(StartError::Cancelled),
                    };
                    let running = Arc::new(started.map_err(|why| McpCallError::Start {
                        server: server.clone(),
                        why: why.to_string(),
                    })?);
                    self.install(slot, running.clone());
                    running
                }
            }
        };
        let called = running
            .call_tool(&exposed.tool.name, arguments, self.call_timeout, cancel)
            .await;
        match called {
            Ok(mut output) => {
                output.proxy = running.take_decisions();
                Ok(output)
            }
            Err(e) => Err(McpCallError::Failed {
                server,
                why: running.explain(&e).await,
            }),
        }
    }

    /// Makes `running` the slot's server, unless the session closed meanwhile: it is stopped
    /// then.
    fn install(&self, slot: &Slot, running: Arc<Started>) {
        let mut current = slot.current();
        if self.closed.load(Ordering::SeqCst) {
            running.stop();
            return;
        }
        if let Some(old) = current.replace(running) {
            old.stop();
        }
    }

    /// Whether a narrowing to `to` would stop a running server.
    pub fn would_stop(&self, to: Mode) -> bool {
        self.slots.iter().any(|slot| {
            slot.current()
                .as_ref()
                .is_some_and(|r| !r.has_ended() && narrowing::stops(r.mode(), to))
        })
    }

    /// The session's mode narrowed to `to`: every server started under a wider mode is
    /// stopped. Returns their names.
    pub fn narrow(&self, to: Mode) -> Vec<String> {
        let mut stopped = Vec::new();
        for slot in &self.slots {
            let mut current = slot.current();
            if current
                .as_ref()
                .is_some_and(|r| narrowing::stops(r.mode(), to))
                && let Some(running) = current.take()
            {
                running.stop();
                stopped.push(slot.spec.name.clone());
            }
        }
        stopped
    }

    /// The session closed: every server is stopped, and none starts again.
    pub fn stop_all(&self) {
        self.closed.store(true, Ordering::SeqCst);
        for slot in &self.slots {
            if let Some(running) = slot.current().take() {
                running.stop();
            }
        }
        // A start still running finds the session closed when it installs its server.
        self.ready.send_replace(true);
    }
}

/// Starts one server and lists its tools (none when it has no `tools` capability). The error
/// says why.
async fn start_and_list(
    placement: &Placement<'_>,
    spec: &ServerSpec,
) -> Result<(Arc<Started>, Vec<McpTool>), StartError> {
    let running = placement.start(spec).await?;
    if !running.initialized().has_tools {
        return Ok((Arc::new(running), Vec::new()));
    }
    match running.list_tools(START_TIMEOUT).await {
        Ok(tools) => Ok((Arc::new(running), tools)),
        Err(e) => Err(StartError::Answer(running.explain(&e).await)),
    }
}
