//! `agentd acp`: the Agent Client Protocol (v1) on stdio; [`Server`] is the agent itself, which
//! `agentd exec` serves to its own client in the same process.
//!
//! The handlers only route: they look a session up, answer, or hand a prompt to a task. Handlers
//! run inside the connection's dispatch loop, so anything that waits on the client (a
//! permission, a file read) or takes long (the model, a command) runs in a tokio task that
//! reports back with notifications and finally answers the prompt. A failure inside a turn is
//! answered to that prompt; it never tears the connection down. Logs go to stderr only: stdout
//! carries the protocol.
//!
//! Every `session/update` leaves through one gate, the connection's byte budget (`outgoing`),
//! which the line writer refills as it writes: a client that stops reading holds back the
//! model's stream, a replay and live output instead of filling agentd's memory. The line
//! transport (`stdio`) caps a line at [`MAX_LINE`] and answers what is not JSON itself.
//!
//! A session's MCP servers start after `session/new` or `session/load` was answered, confined
//! like its commands ([`mcp`]); its first prompt waits for them. A session opened where its
//! workspace may not be writable (`/`, the home directory) runs read-only instead of
//! workspace-write, and says so to the editor right after that answer.
//!
//! `session/close` closes one session ([`Session::close`]); when the client closes the
//! connection (agentd's stdin ends), every session is closed the same way before [`serve`]
//! returns, so nothing a session started outlives agentd.

mod agents;
mod client_fs;
mod commands;
mod compaction;
pub mod config_options;
mod error;
mod instructions;
mod line_writer;
mod live;
mod mcp;
mod model_failure;
mod models;
mod notices;
mod options;
mod outgoing;
pub mod permission;
mod project_docs;
mod prompt;
mod questions;
mod session_roles;
mod sessions;
mod set_knob;
mod shown;
mod stdio;
mod switches;
mod task;
mod told;
mod turn;
mod updates;

use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, CloseSessionRequest, CloseSessionResponse,
    Implementation, InitializeRequest, InitializeResponse, ListSessionsRequest,
    ListSessionsResponse, LoadSessionRequest, LoadSessionResponse, McpCapabilities, McpServer,
    NewSessionRequest, NewSessionResponse, PromptCapabilities, PromptRequest, PromptResponse,
    ResumeSessionRequest, ResumeSessionResponse, SessionCapabilities, SessionCloseCapabilities,
    SessionInfo, SessionListCapabilities, SessionResumeCapabilities, SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse, SetSessionModeRequest, SetSessionModeResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{
    Agent, Client, ConnectTo, Error, on_receive_notification, on_receive_request,
};

use crate::approval::Approvals;
use crate::session::{LogError, fold, log};
use error::AcpError;
use outgoing::Outgoing;
use set_knob::Asked;

pub use options::{AcpOptions, AcpStartError};
pub use outgoing::OUTGOING_BUDGET;
pub use sessions::{AgentState, Session, Sessions};
pub use stdio::{MAX_ERROR_LINE, MAX_LINE};
pub use told::ENFORCEMENT as ENFORCEMENT_NOTICE;
pub use updates::{is_model_error, is_notice, notice_kind};
#[cfg(test)]
pub(crate) use updates::{model_error, notice};

/// The stop reason, as its wire name, that a model answer ends a prompt turn with, or `None`
/// when the turn goes on to run the answer's tool calls.
pub fn stop_reason_after(answer: &crate::model::AssistantTurn) -> Option<&'static str> {
    turn::stop_after(answer).map(turn::stop_name)
}

/// Serves ACP on stdin/stdout until the client closes the connection, then closes every
/// session.
pub async fn serve(options: AcpOptions) -> Result<(), Error> {
    // What an agentd of this user killed mid-session left in the temp directory.
    let swept = crate::session_temp::sweep(&std::env::temp_dir());
    if swept > 0 {
        eprintln!(
            "agentd: removed {swept} session temp director{} left by an agentd that was stopped \
             without closing its sessions",
            if swept == 1 { "y" } else { "ies" }
        );
    }
    serve_on(options, tokio::io::stdin(), tokio::io::stdout()).await
}

/// Serves ACP over `reader` and `writer`, one JSON-RPC message per line both ways, exactly as
/// [`serve`] does over stdin and stdout (the same line reader, the same agent), until `reader`
/// ends; then closes every session. For driving the whole input path in one process: the fuzz
/// target of `fuzz/` feeds it arbitrary lines.
pub async fn serve_on<R, W>(options: AcpOptions, reader: R, writer: W) -> Result<(), Error>
where
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
    W: tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let outgoing = Outgoing::bounded();
    let server = Server::with_outgoing(options, outgoing.clone());
    let transport = stdio::lines(reader, writer, outgoing);
    let served = ConnectTo::<Client>::connect_to(server.agent(), transport).await;
    server.close_all().await;
    served
}

/// agentd's ACP agent, for any transport: `agentd acp` serves it on stdio ([`serve`]), `agentd
/// exec` connects its own client to it in the same process. One agent, whoever its client is.
#[derive(Debug)]
pub struct Server {
    state: Arc<AgentState>,
}

impl Server {
    /// An agent that serves no session yet, to a client in this process that takes every
    /// message as it is sent (`agentd exec`): its updates wait for no budget.
    pub fn new(options: AcpOptions) -> Server {
        Server::with_outgoing(options, Outgoing::unbounded())
    }

    /// An agent whose updates go through `outgoing`.
    fn with_outgoing(options: AcpOptions, outgoing: Arc<Outgoing>) -> Server {
        let answerer = Arc::new(permission::AcpAnswerer::default());
        Server {
            state: Arc::new(AgentState {
                options,
                sessions: Sessions::default(),
                client_fs: std::sync::OnceLock::new(),
                approvals: Approvals::new(vec![answerer.clone()]),
                answerer,
                outgoing,
            }),
        }
    }

    /// Closes every session the agent serves, as when its client hangs up: what a session
    /// started ends before this returns.
    pub async fn close_all(&self) {
        self.state.sessions.close_all().await;
    }

    /// The agent's side of a connection: its handlers, ready to be connected to a client.
    pub fn agent(&self) -> impl ConnectTo<Client> + 'static {
        handlers(&self.state)
    }
}

/// The handlers of every request and notification the agent answers.
fn handlers(state: &Arc<AgentState>) -> impl ConnectTo<Client> + 'static {
    let (s1, s2, s3, s4, s5, s6, s7, s8, s9, s10) = (
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
    );
    Agent
        .v1()
        .name("agentd")
        .on_receive_request(
            async move |req: InitializeRequest, responder, _cx| initialize(&s1, req, responder),
            on_receive_request!(),
        )
        .on_receive_request(
            async move |req: NewSessionRequest, responder, cx: ConnectionTo<Client>| {
                new_session(&s2, req, responder, cx).await
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |req: LoadSessionRequest, responder, cx: ConnectionTo<Client>| {
                load_session(&s3, req, responder, cx).await
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |req: ResumeSessionRequest, responder, cx: ConnectionTo<Client>| {
                resume_session(&s10, req, responder, cx).await
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |req: ListSessionsRequest, responder, _cx| answer_list(&s4, req, responder),
            on_receive_request!(),
        )
        .on_receive_request(
            async move |req: PromptRequest, responder, cx: ConnectionTo<Client>| {
                prompt(&s5, req, responder, cx)
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |req: SetSessionConfigOptionRequest, responder, cx: ConnectionTo<Client>| {
                set_config_option(&s7, req, responder, cx).await
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |req: SetSessionModeRequest, responder, cx: ConnectionTo<Client>| {
                set_mode(&s9, req, responder, cx).await
            },
            on_receive_request!(),
        )
        .on_receive_request(
            async move |req: CloseSessionRequest, responder, _cx: ConnectionTo<Client>| {
                close_session(&s8, req, responder)
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
}

/// `initialize`: remembers whether the client reads files for the agent, and answers with what
/// the agent can do.
fn initialize(
    state: &AgentState,
    req: InitializeRequest,
    responder: Responder<InitializeResponse>,
) -> Result<(), Error> {
    let fs = &req.client_capabilities.fs;
    let _ = state.client_fs.set(fs.read_text_file);
    responder.respond(
        InitializeResponse::new(req.protocol_version)
            .agent_capabilities(capabilities())
            .agent_info(Implementation::new("agentd", env!("CARGO_PKG_VERSION"))),
    )
}

/// What the agent tells its client it can do.
fn capabilities() -> AgentCapabilities {
    AgentCapabilities::new()
        .load_session(true)
        // Streamable HTTP servers, when the session's network policy
        // reaches their host (RFC 0015); not the older SSE transport.
        .mcp_capabilities(McpCapabilities::new().http(true))
        .prompt_capabilities(PromptCapabilities::new().embedded_context(true))
        .session_capabilities(
            SessionCapabilities::new()
                .list(SessionListCapabilities::new())
                .resume(SessionResumeCapabilities::new())
                .close(SessionCloseCapabilities::new()),
        )
}

/// `session/new`: creates the session and answers; then advertises its commands, tells what
/// the opening tells and starts its MCP servers.
async fn new_session(
    state: &Arc<AgentState>,
    req: NewSessionRequest,
    responder: Responder<NewSessionResponse>,
    cx: ConnectionTo<Client>,
) -> Result<(), Error> {
    let (servers, notices) = mcp::servers(&state.options, &req.mcp_servers);
    match state.sessions.create(state, &req.cwd, servers, cx.clone()) {
        Ok(session) => {
            let answered = responder.respond(
                NewSessionResponse::new(session.id.clone())
                    .config_options(session.config_options())
                    .modes(session.modes()),
            );
            commands::advertise(&session, &cx).await;
            notices::tell_opening(&session, &cx).await;
            mcp::start(&session, &state.options.ask_before, notices, cx);
            answered
        }
        Err(e) => responder.respond_with_error(e),
    }
}

/// `session/load`: reopens the session with its whole history replayed before the answer.
async fn load_session(
    state: &Arc<AgentState>,
    req: LoadSessionRequest,
    responder: Responder<LoadSessionResponse>,
    cx: ConnectionTo<Client>,
) -> Result<(), Error> {
    let id = req.session_id.to_string();
    reopen(
        state,
        id,
        req.mcp_servers,
        Replay::Whole,
        cx,
        move |opened| match opened {
            Ok(session) => responder.respond(
                LoadSessionResponse::new()
                    .config_options(session.config_options())
                    .modes(session.modes()),
            ),
            Err(e) => responder.respond_with_error(e),
        },
    )
    .await
}

/// `session/resume`: reopens the session without replaying its history.
async fn resume_session(
    state: &Arc<AgentState>,
    req: ResumeSessionRequest,
    responder: Responder<ResumeSessionResponse>,
    cx: ConnectionTo<Client>,
) -> Result<(), Error> {
    let id = req.session_id.to_string();
    reopen(
        state,
        id,
        req.mcp_servers,
        Replay::None,
        cx,
        move |opened| match opened {
            Ok(session) => responder.respond(
                ResumeSessionResponse::new()
                    .config_options(session.config_options())
                    .modes(session.modes()),
            ),
            Err(e) => responder.respond_with_error(e),
        },
    )
    .await
}

/// `session/list`: answers with the stored sessions, of the asked directory if one was given.
fn answer_list(
    state: &AgentState,
    req: ListSessionsRequest,
    responder: Responder<ListSessionsResponse>,
) -> Result<(), Error> {
    match list_sessions(&state.options.state_dir, req.cwd.as_deref()) {
        Ok(sessions) => responder.respond(ListSessionsResponse::new(sessions)),
        Err(e) => responder.respond_with_error(AcpError::Log(e).into()),
    }
}

/// `session/prompt`: hands the prompt to a task that runs the turn and answers it.
fn prompt(
    state: &Arc<AgentState>,
    req: PromptRequest,
    responder: Responder<PromptResponse>,
    cx: ConnectionTo<Client>,
) -> Result<(), Error> {
    let id = req.session_id.to_string();
    let Some(session) = state.sessions.get(&id) else {
        return responder.respond_with_error(AcpError::NotOpen(id).into());
    };
    let state = state.clone();
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
}

/// `session/set_config_option`: switches the knob the option names, answering with the
/// session's options as they then are.
async fn set_config_option(
    state: &AgentState,
    req: SetSessionConfigOptionRequest,
    responder: Responder<SetSessionConfigOptionResponse>,
    cx: ConnectionTo<Client>,
) -> Result<(), Error> {
    let id = req.session_id.to_string();
    let Some(session) = state.sessions.get(&id) else {
        return responder.respond_with_error(AcpError::NotOpen(id).into());
    };
    let models = match session.models().offered() {
        true => session.defaults.models.names().to_vec(),
        false => Vec::new(),
    };
    let switch = match config_options::parse(&req.config_id.0, &req.value, &models) {
        Ok(switch) => switch,
        Err(e) => return responder.respond_with_error(AcpError::from(e).into()),
    };
    set_knob::switch(
        session,
        switch,
        Asked::ConfigOption,
        cx,
        move |s, r| match r {
            Ok(()) => responder.respond(SetSessionConfigOptionResponse::new(s.config_options())),
            Err(e) => responder.respond_with_error(e),
        },
    )
    .await
}

/// `session/set_mode`: switches the session to the asked mode.
async fn set_mode(
    state: &AgentState,
    req: SetSessionModeRequest,
    responder: Responder<SetSessionModeResponse>,
    cx: ConnectionTo<Client>,
) -> Result<(), Error> {
    let id = req.session_id.to_string();
    let Some(session) = state.sessions.get(&id) else {
        return responder.respond_with_error(AcpError::NotOpen(id).into());
    };
    let switch = match config_options::parse_mode_id(&req.mode_id.0) {
        Ok(switch) => switch,
        Err(e) => return responder.respond_with_error(AcpError::from(e).into()),
    };
    set_knob::switch(session, switch, Asked::Mode, cx, move |_, r| match r {
        Ok(()) => responder.respond(SetSessionModeResponse::new()),
        Err(e) => responder.respond_with_error(e),
    })
    .await
}

/// `session/close`: closes the session off the dispatch loop, answering once it has closed.
fn close_session(
    state: &Arc<AgentState>,
    req: CloseSessionRequest,
    responder: Responder<CloseSessionResponse>,
) -> Result<(), Error> {
    // Closing twice: the second finds no session.
    let id = req.session_id.to_string();
    let Some(session) = state.sessions.begin_close(&id) else {
        return responder.respond_with_error(AcpError::NotOpen(id).into());
    };
    let state = state.clone();
    // The close waits for the turn, the children and the tasks to end: off the
    // dispatch loop.
    tokio::spawn(async move {
        state.sessions.close(&session).await;
        let _ = responder.respond(CloseSessionResponse::new());
    });
    Ok(())
}

/// What a reopened session shows of its past before the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Replay {
    /// `session/load`: the whole history, before the answer (the protocol orders them so).
    Whole,
    /// `session/resume`: nothing; the editor keeps what it showed.
    None,
}

/// `session/load` and `session/resume`: the session `id` from memory or its log, with the MCP
/// servers `mcp`; its history as `replay` says, then `answer` (with the session, or the error
/// that kept it from opening); then what the opening tells. A session being closed is reopened
/// once its close has finished, off the dispatch loop.
async fn reopen(
    state: &Arc<AgentState>,
    id: String,
    mcp: Vec<McpServer>,
    replay: Replay,
    cx: ConnectionTo<Client>,
    answer: impl FnOnce(Result<&Session, Error>) -> Result<(), Error> + Send + 'static,
) -> Result<(), Error> {
    let Some(closing) = state.sessions.closing(&id) else {
        return open_stored(state, &id, &mcp, replay, cx, answer).await;
    };
    let state = state.clone();
    tokio::spawn(async move {
        closing.close().await;
        let _ = open_stored(&state, &id, &mcp, replay, cx, answer).await;
    });
    Ok(())
}

/// [`reopen`] once no close of the session runs. The history goes through the connection's
/// budget: for a client that does not read it, the replay waits, and the dispatch loop with it.
async fn open_stored(
    state: &Arc<AgentState>,
    id: &str,
    mcp: &[McpServer],
    replay: Replay,
    cx: ConnectionTo<Client>,
    answer: impl FnOnce(Result<&Session, Error>) -> Result<(), Error>,
) -> Result<(), Error> {
    let (servers, notices) = mcp::servers(&state.options, mcp);
    let session = match state.sessions.load(state, id, servers, cx.clone()) {
        Ok(session) => session,
        Err(e) => return answer(Err(e)),
    };
    if replay == Replay::Whole {
        for item in fold::replay(&session.records()) {
            if let Some(notice) = session.told_gaps.notice(&item) {
                session.show(&cx, notice).await?;
            }
            session.show(&cx, updates::update_for(&item)).await?;
        }
    }
    let answered = answer(Ok(&session));
    commands::advertise(&session, &cx).await;
    notices::tell_opening(&session, &cx).await;
    mcp::start(&session, &state.options.ask_before, notices, cx);
    answered
}

/// The sessions stored under `dir`, optionally only those of `cwd`, the most recently updated
/// first.
fn list_sessions(
    dir: &std::path::Path,
    cwd: Option<&std::path::Path>,
) -> Result<Vec<SessionInfo>, LogError> {
    let mut found = Vec::new();
    for id in log::list_ids(dir)? {
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
        found.push((
            summary.updated_ms,
            info.updated_at(updates::rfc3339(summary.updated_ms)),
        ));
    }
    found.sort_by_key(|(updated_ms, _)| std::cmp::Reverse(*updated_ms));
    Ok(found.into_iter().map(|(_, info)| info).collect())
}
