//! The sessions an agent serves: each one its event log, its turn lock, its cancel signal, its
//! held knob switches and its tool environment. Sessions share nothing but the helper
//! connection. [`AgentState`], which holds them, is what every session is created and loaded
//! with.
//!
//! `session/set_config_option` switches a knob with [`Session::switch`]; see [`super::switches`]
//! for when the switch reaches the log. A switch that narrows the mode stops the MCP servers
//! and the background tasks running under a wider one; `set_knob` waits for their ends, records
//! each stop and shows it to the editor, before the switch is answered. A session's model is a
//! knob too ([`Session::selected_model`]); loading a session whose selected model is no longer
//! configured prints one line saying it uses the default.
//!
//! `session/close` and the connection's end close a session with [`Session::close`]: the
//! session leaves the open ones at once ([`Sessions::begin_close`]), so later requests for its
//! id find no session, and a `session/load` of it waits for the close and then reads its log.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use agent_client_protocol::Client;
use agent_client_protocol::Error;
use agent_client_protocol::v1::ConnectionTo;

use agent_client_protocol::v1::schema::{SessionConfigOption, SessionUpdate};
use confine_protocol::Mode;

use super::agents::LogEvents;
use super::client_fs::EditorFs;
use super::config_options::{self, Switch};
use super::error::AcpError;
use super::models::Models;
use super::options::AcpOptions;
use super::outgoing::Outgoing;
use super::switches::{self, Defaults, Switches};
use super::told::ToldGaps;
use super::{permission, updates};
use crate::agents::lifecycle::AgentTree;
use crate::approval::Approvals;
use crate::cancel::{self, Cancel, Canceller};
use crate::config::BuiltModel;
use crate::config::read_project;
use crate::mcp::{McpServers, ServerSpec};
use crate::session::{Event, EventLog, LogError, Record, SessionLog, fold, log};
use crate::session_temp::SessionTemp;
use crate::tools::{ClientFs, SpecOptions, Stopping, TASK, ToolEnv, UPDATE_PLAN};
use crate::words::ApprovalPolicy;

/// The agent's shared state: options, sessions, what the client can do, and who answers
/// approval requests.
#[derive(Debug)]
pub struct AgentState {
    pub options: AcpOptions,
    pub sessions: Sessions,
    /// The client's `fs.readTextFile` capability, set at `initialize` (`fs.writeTextFile` is
    /// never used).
    pub client_fs: std::sync::OnceLock<bool>,
    /// The approval chain: the editor, through [`permission::AcpAnswerer`].
    pub approvals: Approvals,
    /// The chain's answerer for this connection's sessions.
    pub answerer: Arc<permission::AcpAnswerer>,
    /// The gate of the connection's updates.
    pub outgoing: Arc<Outgoing>,
}

/// Every session loaded in this process, by id: the open ones, and those being closed.
#[derive(Debug, Default)]
pub struct Sessions {
    map: Mutex<SessionMap>,
}

#[derive(Debug, Default)]
struct SessionMap {
    open: HashMap<String, Arc<Session>>,
    /// Taken out of `open` by [`Sessions::begin_close`], until their close has finished.
    closing: HashMap<String, Arc<Session>>,
}

/// One session: its log (the source of truth) and what runs in it.
pub struct Session {
    pub id: String,
    pub cwd: PathBuf,
    log: Mutex<(EventLog, Vec<Record>)>,
    /// Held for the whole of a prompt turn: one turn at a time per session.
    pub turn: tokio::sync::Mutex<()>,
    signal: Mutex<TurnSignal>,
    /// Set once [`Session::close`]'s teardown has finished.
    closed: tokio::sync::OnceCell<()>,
    /// Asks the editor on the session's behalf, until the session is closed.
    answerer: Arc<permission::AcpAnswerer>,
    /// What every update the session shows the editor goes through.
    outgoing: Arc<Outgoing>,
    pub tools: ToolEnv,
    /// The knobs' values when the log has no switch.
    pub defaults: Defaults,
    switches: Switches,
    /// The models the session may select.
    models: Arc<Models>,
    /// The session's child agents, started by `task` calls.
    pub agents: AgentTree,
    /// Where their lifecycle is logged, and the tags of their records.
    pub agent_events: Arc<LogEvents>,
    /// The enforcement gaps the person was told of since the session was opened.
    pub told_gaps: ToldGaps,
}

/// The running turn's cancel signal, and whether the session is closed (no turn starts then).
#[derive(Debug, Default)]
struct TurnSignal {
    canceller: Option<Canceller>,
    closed: bool,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .field("cwd", &self.cwd)
            .finish_non_exhaustive()
    }
}

impl Sessions {
    /// The open session `id`.
    pub fn get(&self, id: &str) -> Option<Arc<Session>> {
        self.map.lock().ok()?.open.get(id).cloned()
    }

    /// The session `id` while it is being closed.
    pub fn closing(&self, id: &str) -> Option<Arc<Session>> {
        self.map.lock().ok()?.closing.get(id).cloned()
    }

    /// Takes the open session `id` out of the open ones (from now on [`Sessions::get`] does not
    /// find it) and returns it, to be closed with [`Sessions::close`]; `None` when no open
    /// session has that id, also one closed already.
    pub fn begin_close(&self, id: &str) -> Option<Arc<Session>> {
        let mut map = self.map.lock().ok()?;
        let session = map.open.remove(id)?;
        map.closing.insert(id.to_owned(), session.clone());
        Some(session)
    }

    /// Closes a session [`Sessions::begin_close`] took out ([`Session::close`]), then forgets
    /// it.
    pub async fn close(&self, session: &Arc<Session>) {
        session.close().await;
        self.forget(session);
    }

    /// The connection's end: closes every session, the open ones and those being closed, all
    /// at once, and returns when every close has finished.
    pub async fn close_all(&self) {
        let sessions: Vec<Arc<Session>> = match self.map.lock() {
            Ok(mut map) => {
                let open: Vec<(String, Arc<Session>)> = map.open.drain().collect();
                map.closing.extend(open);
                map.closing.values().cloned().collect()
            }
            Err(_) => Vec::new(),
        };
        let mut closes = tokio::task::JoinSet::new();
        for session in &sessions {
            let session = session.clone();
            closes.spawn(async move { session.close().await });
        }
        while closes.join_next().await.is_some() {}
        for session in &sessions {
            self.forget(session);
        }
    }

    /// Drops a closed session from the closing ones, unless another took its place.
    fn forget(&self, session: &Arc<Session>) {
        if let Ok(mut map) = self.map.lock()
            && map
                .closing
                .get(&session.id)
                .is_some_and(|s| Arc::ptr_eq(s, session))
        {
            map.closing.remove(&session.id);
        }
    }

    /// Starts a new session in `cwd`, which must be an existing absolute directory, with the
    /// MCP servers `mcp` (not started yet: see [`super::mcp::start`]). A directory that may not
    /// be writable (`/`, the home directory, one over agentd's own files) opens too, without
    /// workspace-write ([`super::notices::tell_opening`]).
    pub fn create(
        &self,
        state: &Arc<AgentState>,
        cwd: &Path,
        mcp: Vec<ServerSpec>,
        cx: ConnectionTo<Client>,
    ) -> Result<Arc<Session>, Error> {
        if !cwd.is_absolute() {
            return Err(AcpError::CwdNotAbsolute(cwd.to_owned()).into());
        }
        let cwd = std::fs::canonicalize(cwd).map_err(|source| AcpError::CwdUnusable {
            path: cwd.to_owned(),
            source,
        })?;
        if !cwd.is_dir() {
            return Err(AcpError::CwdNotDirectory(cwd).into());
        }
        state
            .options
            .profile
            .create_cache_dirs()
            .map_err(AcpError::from)?;
        let temp = session_temp()?;
        let id = log::new_id();
        let (log, first) =
            EventLog::create(&state.options.state_dir, &id, &cwd).map_err(AcpError::of_log)?;
        let session = Arc::new_cyclic(|me| {
            Session::new(state, (id, cwd), log, vec![first], (temp, mcp), &cx, me)
        });
        state.answerer.serve(&session.id, cx);
        self.insert(session.clone());
        Ok(session)
    }

    /// The session `id`, from memory (with the MCP servers it has) or else from its log, with
    /// the MCP servers `mcp`.
    pub fn load(
        &self,
        state: &Arc<AgentState>,
        id: &str,
        mcp: Vec<ServerSpec>,
        cx: ConnectionTo<Client>,
    ) -> Result<Arc<Session>, Error> {
        if let Some(session) = self.get(id) {
            return Ok(session);
        }
        // A session being closed is loaded again only once its close has finished (the caller
        // waits for it, see [`Sessions::closing`]): two sessions never write one log.
        let (log, records, report) =
            EventLog::open(&state.options.state_dir, id).map_err(AcpError::of_log)?;
        if let Some(bytes) = report.dropped_torn_bytes {
            eprintln!(
                "agentd: session {id}: dropped a torn last line of {bytes} bytes (agentd stopped, \
                 or its disk filled, while writing it)"
            );
        }
        let cwd = match records.first().map(|r| &r.event) {
            Some(Event::SessionCreated { cwd, .. }) => cwd.clone(),
            _ => return Err(AcpError::NoHeader(id.to_owned()).into()),
        };
        state
            .options
            .profile
            .create_cache_dirs()
            .map_err(AcpError::from)?;
        let names = state.options.models.names();
        if let Some(gone) = names.dropped(&records) {
            eprintln!(
                "agentd: session {id}: the model {gone:?} it selected is no longer configured; it \
                 uses the default model {:?}",
                names.default_name()
            );
        }
        let temp = session_temp()?;
        let session = Arc::new_cyclic(|me| {
            Session::new(
                state,
                (id.to_owned(), cwd),
                log,
                records,
                (temp, mcp),
                &cx,
                me,
            )
        });
        state.answerer.serve(&session.id, cx);
        self.insert(session.clone());
        Ok(session)
    }

    fn insert(&self, session: Arc<Session>) {
        if let Ok(mut map) = self.map.lock() {
            map.open.insert(session.id.clone(), session);
        }
    }
}

/// A new session's own temp directory, or the error that keeps the session from starting.
fn session_temp() -> Result<SessionTemp, AcpError> {
    SessionTemp::create().map_err(|source| AcpError::SessionTemp {
        base: std::env::temp_dir(),
        source,
    })
}

impl Session {
    fn new(
        state: &Arc<AgentState>,
        (id, cwd): (String, PathBuf),
        log: EventLog,
        records: Vec<Record>,
        (temp, mcp): (SessionTemp, Vec<ServerSpec>),
        cx: &ConnectionTo<Client>,
        me: &Weak<Session>,
    ) -> Session {
        // The editor's reads when it offers them; it is never asked to write.
        let read = state.client_fs.get().copied().unwrap_or(false);
        let client_fs: Option<Arc<dyn ClientFs>> =
            read.then(|| Arc::new(EditorFs::new(cx.clone(), id.clone())) as Arc<dyn ClientFs>);
        let o = &state.options;
        let refusal = o
            .helper
            .workspace_refusal(&cwd, crate::environment::home(&o.command_env));
        let workspace_writable = refusal.is_none();
        let composition = o.composition.clone().for_workspace(refusal);
        let tools = ToolEnv::new(
            o.helper.clone(),
            cwd.clone(),
            o.command_env.clone(),
            o.network,
            o.backend,
            client_fs,
        )
        .with_profile(o.profile.clone())
        .with_session_temp(temp)
        // Every command goes through confine-helper, which confines: escalation is offered,
        // and the turn gates it.
        .with_spec_options(SpecOptions::confining())
        .with_composition(composition)
        .with_mcp(McpServers::new(
            mcp,
            Duration::from_millis(o.command_timeout_ms),
        ));
        // `task` in every session: the built-in `general` persona is always there to start.
        // `update_plan` too: the top-level agent's plan, which the editor shows.
        let mut registry = tools.registry();
        for name in [TASK, UPDATE_PLAN] {
            if !registry.contains(name)
                && let Err(e) = registry.register(name)
            {
                eprintln!("agentd: session {id}: {e}; the model is not offered it");
            }
        }
        let tools = tools.with_registry(registry);
        let log_of: Weak<dyn SessionLog> = me.clone();
        let agent_events = Arc::new(LogEvents::new(log_of, &records));
        let agents = AgentTree::new(agent_events.clone());
        Session {
            id,
            cwd,
            log: Mutex::new((log, records)),
            turn: tokio::sync::Mutex::new(()),
            signal: Mutex::new(TurnSignal::default()),
            closed: tokio::sync::OnceCell::new(),
            answerer: state.answerer.clone(),
            outgoing: state.outgoing.clone(),
            tools,
            defaults: Defaults {
                mode: o.default_mode,
                policy: o.default_policy,
                models: o.models.names(),
                workspace_writable,
            },
            switches: Switches::default(),
            models: o.models.clone(),
            agents,
            agent_events,
            told_gaps: ToldGaps::default(),
        }
    }

    /// Reads the workspace's project file again (confined, [`read_project`]) and gives the
    /// session's commands the protected paths it adds from now on; a file that cannot be read
    /// or says what it may not is the error, and the prompt does not run.
    pub(super) async fn read_project(&self) -> Result<(), AcpError> {
        let protected = read_project(&self.tools).await.map_err(AcpError::Project)?;
        self.tools.set_project_protected(protected);
        Ok(())
    }

    /// A copy of every record so far.
    pub fn records(&self) -> Vec<Record> {
        self.log.lock().map(|l| l.1.clone()).unwrap_or_default()
    }

    /// `f` of every record so far, read in place under the log's lock (`f` must not call back).
    pub fn with_records<R>(&self, f: impl FnOnce(&[Record]) -> R) -> R {
        match self.log.lock() {
            Ok(guard) => f(&guard.1),
            Err(_) => f(&[]),
        }
    }

    /// Shows the editor `update` of this session once the connection's budget has room for it
    /// ([`Outgoing::send`]); an error when the client has gone.
    pub async fn show(
        &self,
        cx: &ConnectionTo<Client>,
        update: SessionUpdate,
    ) -> Result<(), Error> {
        self.outgoing.send(cx, &self.id, update).await
    }

    /// Shows the editor what one just appended record means, if anything: the live stream,
    /// derived from the log as `session/load` derives its replay. A client that went away
    /// misses it; the log still has it.
    pub async fn show_record(&self, cx: &ConnectionTo<Client>, record: &Record) {
        for item in fold::replay_items(record) {
            if let Some(notice) = self.told_gaps.notice(&item) {
                let _ = self.show(cx, notice).await;
            }
            let _ = self.show(cx, updates::update_for(&item)).await;
        }
    }

    /// Appends one event; `sync` makes it durable before returning.
    pub fn append(&self, event: Event, sync: bool) -> Result<Record, LogError> {
        self.append_as(None, event, sync)
    }

    /// Appends one event of the child agent tagged `agent` (`None`: as [`Session::append`]).
    pub fn append_as(
        &self,
        agent: Option<&str>,
        event: Event,
        sync: bool,
    ) -> Result<Record, LogError> {
        let mut guard = self
            .log
            .lock()
            .map_err(|_| LogError::NotFound(self.id.clone()))?;
        let (log, records) = &mut *guard;
        let record = log.append_as(agent, event)?;
        if sync {
            log.sync()?;
        }
        records.push(record.clone());
        Ok(record)
    }

    /// A fresh cancel signal for a new turn; `None` once the session is closed (its close has
    /// begun), when no turn may start.
    pub fn begin_turn(&self) -> Option<Cancel> {
        let mut slot = self.signal.lock().ok()?;
        if slot.closed {
            return None;
        }
        let (canceller, cancel) = cancel::pair();
        slot.canceller = Some(canceller);
        Some(cancel)
    }

    /// Cancels the running turn, if any (`session/cancel`).
    pub fn cancel_turn(&self) {
        if let Ok(slot) = self.signal.lock()
            && let Some(canceller) = slot.canceller.as_ref()
        {
            canceller.cancel();
        }
    }

    pub fn end_turn(&self) {
        if let Ok(mut slot) = self.signal.lock() {
            slot.canceller = None;
        }
    }

    /// Closes the session (`session/close`, and every session at the connection's end), in
    /// this order: no turn starts from now on and the running one is cancelled, as by
    /// `session/cancel`; the editor is no longer asked for the session's permissions (a request
    /// of it is decided without the editor); its MCP servers are stopped and none starts again;
    /// every child agent is cancelled and torn down ([`AgentTree::close`]); every background
    /// task is killed and waited for; the running turn ends (its `turn/ended` is logged); the
    /// knob switches held for the next prompt are written, as that prompt would have written
    /// them; a task a call started while the turn was ending is killed too. Each wait is bounded by the kill grace of commands, the
    /// helper's answer and [`crate::agents::lifecycle::STOP_GRACE`]. Nothing else is logged: the
    /// log reads as after agentd stopped once its switches were written, and `session/load`
    /// continues it.
    ///
    /// Once: a later or concurrent call returns when the first has finished.
    pub async fn close(&self) {
        self.closed.get_or_init(|| self.teardown()).await;
    }

    async fn teardown(&self) {
        if let Ok(mut slot) = self.signal.lock() {
            slot.closed = true;
            if let Some(canceller) = slot.canceller.as_ref() {
                canceller.cancel();
            }
        }
        self.answerer.unserve(&self.id);
        self.tools.mcp().stop_all();
        if let Err(e) = self.agents.close().await {
            eprintln!("agentd: session {}: closing its child agents: {e}", self.id);
        }
        let tasks = self.tools.background();
        tasks.kill_all().await;
        let idle = self.turn.lock().await;
        // The switches held for a next prompt that will not come are written now, as a turn's
        // start would write them: a session closed and loaded again has the knobs the person
        // left it with.
        if let Err(e) = self.flush_switches() {
            eprintln!(
                "agentd: session {}: writing its held switches: {e}",
                self.id
            );
        }
        drop(idle);
        tasks.kill_all().await;
        // Nothing of the session runs any more: its /tmp goes.
        self.tools.end_session_temp();
    }

    /// The sandbox mode the session's tool calls run under now.
    pub fn effective_mode(&self) -> Mode {
        switches::effective(self, &self.defaults).0
    }

    /// The narrower of the mode the session's calls run under now and the one the editor is
    /// shown (a switch held for the next prompt): what its MCP servers start under.
    pub fn narrowest_mode(&self) -> Mode {
        let shown = self.switches.current(self, &self.defaults).0;
        self.effective_mode().min(shown)
    }

    /// The session's approval policy now.
    pub fn effective_policy(&self) -> ApprovalPolicy {
        switches::effective(self, &self.defaults).1
    }

    /// The model the session's next request goes to: its last selection, else the default.
    pub fn selected_model(&self) -> &BuiltModel {
        let name = self.with_records(|records| self.defaults.models.effective(records).to_owned());
        self.models.select(&name)
    }

    /// The models the session may select.
    pub fn models(&self) -> &Models {
        &self.models
    }

    /// The config options with the values the editor is shown; `model` only when there is a
    /// choice of models.
    pub fn config_options(&self) -> Vec<SessionConfigOption> {
        let (mode, policy) = self.switches.current(self, &self.defaults);
        let modes = self.tools.composition().modes(mode);
        let mut options = config_options::options(mode, &modes, policy);
        if self.models.offered() {
            let current = self.switches.current_model(self, &self.defaults);
            let labels: Vec<(&str, &str)> = self
                .models
                .iter()
                .map(|m| (m.name.as_str(), m.label.as_str()))
                .collect();
            options.push(config_options::model_option(&current, &labels));
        }
        options
    }

    /// The sandbox mode as ACP session modes, with the value the editor is shown (as
    /// [`Session::config_options`]).
    pub fn modes(&self) -> agent_client_protocol::v1::schema::SessionModeState {
        let (mode, _) = self.switches.current(self, &self.defaults);
        config_options::session_modes(mode, &self.tools.composition().modes(mode))
    }

    /// Switches a knob (`session/set_config_option`): now while a turn is open, else at the
    /// next prompt. A narrowing of the mode stops every MCP server running under a wider mode
    /// (its next call starts it again), tells every background task running under a wider
    /// mode to stop, and returns them to be waited for and reported
    /// (`set_knob`) before the switch is answered; `None` when there are none.
    pub fn switch(&self, switch: Switch) -> Result<Option<Stopping>, LogError> {
        let (tasks, mcp) = (self.tools.background(), self.tools.mcp());
        let stops = |to| tasks.would_stop(to) || mcp.would_stop(to);
        let narrowed = self.switches.switch(self, &self.defaults, switch, &stops)?;
        for server in narrowed.map(|to| mcp.narrow(to)).unwrap_or_default() {
            eprintln!(
                "agentd: session {}: stopped the MCP server {server}, which ran under a wider \
                 mode; its next call starts it again",
                self.id
            );
        }
        Ok(narrowed
            .map(|to| tasks.narrow(to))
            .filter(|stopping| !stopping.is_empty()))
    }

    /// A turn opens: the held switches are written, and later ones are written at once.
    pub fn flush_switches(&self) -> Result<(), LogError> {
        self.switches.flush(self, &self.defaults)
    }

    /// The turn is over: switches are held again.
    pub fn hold_switches(&self) {
        self.switches.hold();
    }
}
