//! `agentd acp`: the Agent Client Protocol (v1) on stdio.
//!
//! The handlers only route: they look a session up, answer, or hand a prompt to a task. Handlers
//! run inside the connection's dispatch loop, so anything that waits on the client (a
//! permission, a file read) or takes long (the model, a command) runs in a tokio task that
//! reports back with notifications and finally answers the prompt. A failure inside a turn is
//! answered to that prompt; it never tears the connection down. Logs go to stderr only: stdout
//! carries the protocol.

mod client_fs;
pub mod config_options;
mod instructions;
pub mod permission;
mod sessions;
mod switches;
mod turn;
mod updates;

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, Implementation, InitializeRequest, InitializeResponse,
    ListSessionsRequest, ListSessionsResponse, LoadSessionRequest, LoadSessionResponse,
    NewSessionRequest, NewSessionResponse, PromptCapabilities, PromptRequest, SessionCapabilities,
    SessionInfo, SessionListCapabilities, SessionNotification, SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse,
};
use agent_client_protocol::{
    Agent, Client, Error, Stdio, on_receive_notification, on_receive_request,
};
use confine_protocol::{BackendChoice, Mode, Network};

use crate::approval::Approvals;
use crate::composition::Composition;
use crate::config::Effective;
use crate::environment;
use crate::helper_client::HelperClient;
use crate::model::Provider;
use crate::session::{fold, log};
use crate::words::ApprovalPolicy;

pub use sessions::{Session, Sessions};

/// Everything `agentd acp` needs, resolved from the configuration.
#[derive(Clone)]
pub struct AcpOptions {
    pub helper: HelperClient,
    /// The model, or why there is none (shown to the user at the first prompt).
    pub provider: Result<Arc<dyn Provider>, String>,
    pub state_dir: PathBuf,
    /// The sandbox mode of a session until it is switched.
    pub default_mode: Mode,
    /// The approval policy of a session until it is switched.
    pub default_policy: ApprovalPolicy,
    /// Tools that ask the user before every call (`approval.ask_before`).
    pub ask_before: Vec<String>,
    pub network: Network,
    pub backend: BackendChoice,
    /// Model requests per prompt before the turn ends with `max_turn_requests`.
    pub max_steps: u64,
    /// Default timeout of a foreground command.
    pub command_timeout_ms: u64,
    /// The environment commands get (already the allow-list).
    pub command_env: Vec<(OsString, OsString)>,
    /// What the helper grants; [`AcpOptions::learn`] asks it.
    pub composition: Composition,
}

impl std::fmt::Debug for AcpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcpOptions")
            .field("state_dir", &self.state_dir)
            .field("default_mode", &self.default_mode)
            .field("default_policy", &self.default_policy)
            .field("ask_before", &self.ask_before)
            .field("max_steps", &self.max_steps)
            .finish_non_exhaustive()
    }
}

impl AcpOptions {
    /// The options the effective configuration gives, with the sandbox mode of new sessions
    /// overridden by `mode` when given. A missing model is not an error here: it is reported at
    /// the first prompt, so an editor can still connect, list and load sessions.
    pub fn from_config(config: &Effective, mode: Option<Mode>) -> Result<AcpOptions, String> {
        let helper = config.helper_client().map_err(|e| e.to_string())?;
        let state_dir = config.state_dir().map_err(|e| e.to_string())?.to_owned();
        Ok(AcpOptions {
            helper,
            provider: config.provider().map_err(|e| e.to_string()),
            state_dir,
            default_mode: mode.unwrap_or(config.sandbox_mode.value),
            default_policy: config.approval_policy.value,
            ask_before: config.ask_before.value.clone(),
            network: config.network.value,
            backend: config.backend.value,
            max_steps: u64::from(config.max_steps.value),
            command_timeout_ms: config.command_timeout_ms.value,
            command_env: environment::command_environment(std::env::vars_os(), &[]),
            composition: Composition::nothing(),
        })
    }

    /// Asks the helper what it grants, and checks the sessions' default mode against its
    /// ceiling: a default the ceiling refuses is an error that names the ceiling file and the
    /// setting to change. (A machine with no usable backend is not an error here: sessions
    /// start, are offered only what can run, and every confined command fails closed with a
    /// message that says how to fix it.) `mode_source` names where the default came from.
    pub async fn learn(&mut self, mode_source: &str) -> Result<(), String> {
        let info = self.helper.info().await.map_err(|e| e.to_string())?;
        self.composition = Composition::from_info(&info, self.backend);
        if let Some(why) = self.composition.ceiling_refusal(self.default_mode) {
            return Err(format!(
                "the sessions' sandbox mode {} ({mode_source}) cannot be used: {why}",
                self.default_mode.as_str()
            ));
        }
        Ok(())
    }
}

/// The agent's shared state: options, sessions, what the client can do, and who answers
/// approval requests.
#[derive(Debug)]
pub struct AgentState {
    pub options: AcpOptions,
    pub sessions: Sessions,
    /// The client's `fs.readTextFile` / `fs.writeTextFile` capabilities, set at `initialize`.
    pub client_fs: std::sync::OnceLock<(bool, bool)>,
    /// The approval chain: the editor, through [`permission::AcpAnswerer`].
    pub approvals: Approvals,
    /// The chain's answerer for this connection's sessions.
    pub answerer: Arc<permission::AcpAnswerer>,
}

/// The stop reason, as its wire name, that a model answer ends a prompt turn with, or `None`
/// when the turn goes on to run the answer's tool calls.
pub fn stop_reason_after(answer: &crate::model::AssistantTurn) -> Option<&'static str> {
    turn::stop_after(answer).map(turn::stop_name)
}

/// An ACP error with a message the client shows.
fn error(code: i32, message: impl Into<String>) -> Error {
    Error::new(code, message.into())
}

/// `-32002`: the session id is unknown.
fn not_found(id: &str) -> Error {
    error(-32002, format!("session {id} not found"))
}

/// Serves ACP on stdin/stdout until the client closes the connection.
pub async fn serve(options: AcpOptions) -> Result<(), String> {
    let answerer = Arc::new(permission::AcpAnswerer::default());
    let state = Arc::new(AgentState {
        options,
        sessions: Sessions::default(),
        client_fs: std::sync::OnceLock::new(),
        approvals: Approvals::new(vec![answerer.clone()]),
        answerer,
    });
    let (s1, s2, s3, s4, s5, s6, s7) = (
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
    );
    let result = Agent
        .v1()
        .name("agentd")
        .on_receive_request(
            async move |req: InitializeRequest, responder, _cx| {
                let fs = &req.client_capabilities.fs;
                let _ = s1.client_fs.set((fs.read_text_file, fs.write_text_file));
                responder.respond(
                    InitializeResponse::new(req.protocol_version)
                        .agent_capabilities(
                            AgentCapabilities::new()
                                .load_session(true)
                                .prompt_capabilities(PromptCapabilities::new())
                                .session_capabilities(
                                    SessionCapabilities::new().list(SessionListCapabilities::new()),
                                ),
                        )
                        .agent_info(Implementation::new("agentd", env!("CARGO_PKG_VERSION"))),
                )
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |req: NewSessionRequest, responder, cx: ConnectionTo<Client>| match s2
                .sessions
                .create(&s2, &req.cwd, cx)
            {
                Ok(session) => responder.respond(
                    NewSessionResponse::new(session.id.clone())
                        .config_options(session.config_options()),
                ),
                Err(e) => responder.respond_with_error(e),
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |req: LoadSessionRequest, responder, cx: ConnectionTo<Client>| {
                let id = req.session_id.to_string();
                let session = match s3.sessions.load(&s3, &id, cx.clone()) {
                    Ok(session) => session,
                    Err(e) => return responder.respond_with_error(e),
                };
                // The whole history first, then the answer: the protocol orders them so.
                for item in fold::replay(&session.records()) {
                    cx.send_notification(SessionNotification::new(
                        req.session_id.clone(),
                        updates::update_for(&item),
                    ))?;
                }
                responder
                    .respond(LoadSessionResponse::new().config_options(session.config_options()))
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |req: ListSessionsRequest, responder, _cx| match list_sessions(
                &s4.options.state_dir,
                req.cwd.as_deref(),
            ) {
                Ok(sessions) => responder.respond(ListSessionsResponse::new(sessions)),
                Err(e) => responder.respond_with_error(error(-32603, e)),
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |req: PromptRequest, responder, cx: ConnectionTo<Client>| {
                let id = req.session_id.to_string();
                let Some(session) = s5.sessions.get(&id) else {
                    return responder.respond_with_error(not_found(&id));
                };
                let state = s5.clone();
                // The turn waits on the model, on commands and on the client: off the
                // dispatch loop, on tokio's workers.
                tokio::spawn(async move {
                    let answer = turn::run(&state, &session, &req.prompt, &cx).await;
                    let _ = match answer {
                        Ok(response) => responder.respond(response),
                        Err(e) => responder.respond_with_error(e),
                    };
                });
                Ok(())
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |req: SetSessionConfigOptionRequest, responder, cx: ConnectionTo<Client>| {
                let id = req.session_id.to_string();
                let Some(session) = s7.sessions.get(&id) else {
                    return responder.respond_with_error(not_found(&id));
                };
                let switch = match config_options::parse(&req.config_id.0, &req.value) {
                    Ok(switch) => switch,
                    Err(message) => return responder.respond_with_error(error(-32602, message)),
                };
                // Only the modes the helper would run; the current one may stay selected.
                if let config_options::Switch::Mode(mode) = switch
                    && mode != session.effective_mode()
                    && let Some(why) = session.tools.composition().refusal(mode)
                {
                    return responder.respond_with_error(error(
                        -32602,
                        format!(
                            "sandbox-mode cannot be switched to {}: {why}",
                            mode.as_str()
                        ),
                    ));
                }
                let log_error = |e| error(-32603, format!("cannot write the session log: {e}"));
                let stopping = match session.switch(switch) {
                    Ok(stopping) => stopping,
                    Err(e) => return responder.respond_with_error(log_error(e)),
                };
                let Some(stopping) = stopping else {
                    return responder.respond(SetSessionConfigOptionResponse::new(
                        session.config_options(),
                    ));
                };
                // The narrowing stopped tasks: their ends are waited for (up to the kill grace
                // and the helper's answer) off the dispatch loop, and each stop is shown before
                // the answer.
                tokio::spawn(async move {
                    let _ = match session.report_stopped(stopping, &cx).await {
                        Ok(()) => responder.respond(SetSessionConfigOptionResponse::new(
                            session.config_options(),
                        )),
                        Err(e) => responder.respond_with_error(log_error(e)),
                    };
                });
                Ok(())
            },
            on_receive_request!(),
        )
        .on_receive_notification(
            async move |note: CancelNotification, _cx| {
                if let Some(session) = s6.sessions.get(&note.session_id.to_string()) {
                    session.cancel_turn();
                }
                Ok(())
            },
            on_receive_notification!(),
        )
        .connect_to(Stdio::new())
        .await;
    result.map_err(|e| e.to_string())
}

/// The sessions stored under `dir`, optionally only those of `cwd`.
fn list_sessions(
    dir: &std::path::Path,
    cwd: Option<&std::path::Path>,
) -> Result<Vec<SessionInfo>, String> {
    let mut out = Vec::new();
    for id in log::list_ids(dir).map_err(|e| e.to_string())? {
        let Ok((records, _)) = log::read_log(dir, &id) else {
            continue;
        };
        let summary = fold::summarize(&records);
        if cwd.is_some_and(|c| c != summary.cwd) {
            continue;
        }
        let mut info = SessionInfo::new(summary.id.clone(), summary.cwd.clone());
        if let Some(title) = summary.title {
            info = info.title(title);
        }
        out.push(info.updated_at(updates::rfc3339(summary.updated_ms)));
    }
    Ok(out)
}
