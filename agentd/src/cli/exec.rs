//! `agentd exec`: one prompt, headless. It serves the agent `agentd acp` serves, in the same
//! process, and is its client over the in-memory connection the protocol's SDK makes between
//! the two: `initialize` (no file system, no terminal), `session/new` in the workspace,
//! `session/prompt`, then it closes the session as an editor hanging up would. There is no
//! second way to run a turn.
//!
//! Nobody is asked anything: `--approve` answers the permission requests ([`approve`]). What
//! the turn shows goes to stdout and stderr ([`output`]). SIGINT sends `session/cancel` and
//! agentd exits 130 once the turn has ended; a second SIGINT stops waiting for that.
//!
//! Exit status: 0 when the turn ended `end_turn`; 1 when the prompt was answered with an error
//! (the model failed: the error's `data` says how); 3 `max_tokens`; 4 `refusal`; 5
//! `max_turn_requests`; 130 cancelled or interrupted; 125 when agentd could not start the turn
//! (configuration, helper, model, workspace or prompt; nothing was asked of the model).

mod approve;
mod output;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CancelNotification, ContentBlock, InitializeRequest, NewSessionRequest, PromptRequest,
    RequestPermissionRequest, RequestPermissionResponse, SessionNotification, StopReason,
};
use agent_client_protocol::{Agent, Client, Error, on_receive_notification, on_receive_request};
use clap::Args;
use confine_protocol::Mode;
use confine_protocol::vocabulary::MODE_WORDS;
use tokio::io::AsyncReadExt;
use tokio::signal::unix::{Signal, SignalKind, signal};

use super::args::AgentArgs;
use super::exit::{
    EXIT_DID_NOT_RUN, EXIT_INTERRUPTED, EXIT_MAX_TOKENS, EXIT_MAX_TURN_REQUESTS, EXIT_REFUSAL,
    EXIT_TURN_FAILED,
};
use super::start;
use super::word::Word;
use crate::acp::{AcpOptions, AcpStartError, Server};
use crate::model::ModelError;
pub use approve::{APPROVE_WORDS, Approve};
use output::Output;

// `agentd exec [OPTIONS] PROMPT` (its help is the variant's in `Command`)
#[derive(Debug, Args)]
pub struct ExecCommand {
    #[command(flatten)]
    pub agent: AgentArgs,
    /// The sandbox mode of the session (overrides AGENTD_SANDBOX_MODE and sandbox.mode).
    #[arg(long, value_parser = Word::<Mode>::new(MODE_WORDS), value_name = "MODE")]
    pub sandbox_mode: Option<Mode>,
    /// Print NDJSON on stdout: the params of every session/update, each permission request
    /// with its answer, and last {"stopReason": ...} or {"error": ...}.
    #[arg(long)]
    pub json: bool,
    /// The session's working directory, its workspace [default: the current directory].
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Which permission requests to allow, once: none; escalations (a command asking for a
    /// wider sandbox mode); all. The others are rejected.
    #[arg(
        long,
        value_parser = Word::<Approve>::new(APPROVE_WORDS),
        default_value_t = Approve::None,
        value_name = "WHICH"
    )]
    pub approve: Approve,
    /// The prompt; `-` reads it from stdin.
    #[arg(value_name = "PROMPT")]
    pub prompt: String,
}

/// Why `agentd exec` could not start the turn.
#[derive(Debug, thiserror::Error)]
enum StartError {
    #[error("cannot read the prompt from stdin: {0}")]
    Stdin(#[source] std::io::Error),
    #[error("the prompt is empty: give it as the last argument, or `-` and the prompt on stdin")]
    EmptyPrompt,
    #[error("cannot tell the current directory ({0}): give the workspace with --cwd DIR")]
    CurrentDir(#[source] std::io::Error),
    #[error("--cwd {}: {source}: give an existing directory", path.display())]
    Cwd {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("--cwd {}: not a directory: give the workspace's directory", .0.display())]
    CwdNotDirectory(PathBuf),
    #[error(transparent)]
    Agent(#[from] AcpStartError),
    #[error(transparent)]
    Model(Arc<ModelError>),
    #[error("cannot catch SIGINT: {0}")]
    Signal(#[source] std::io::Error),
}

/// How the turn ended, as the client saw it.
enum Ending {
    /// A request before the prompt failed: `what` says which.
    NotStarted {
        what: &'static str,
        error: Error,
    },
    Stopped {
        stop: StopReason,
        interrupted: bool,
    },
    Failed {
        error: Error,
        interrupted: bool,
    },
    /// Interrupted twice: agentd stops waiting for the turn.
    Abandoned,
}

/// Runs `agentd exec` and says how agentd exits.
pub async fn exec_command(command: ExecCommand) -> u8 {
    let output = Arc::new(Mutex::new(Output::new(
        command.json,
        Box::new(std::io::stdout()),
        Box::new(std::io::stderr()),
    )));
    let Started {
        prompt,
        cwd,
        options,
        interrupts,
    } = match start_turn(&command).await {
        Ok(started) => started,
        Err(e) => {
            lock(&output).own_error(&e.to_string());
            return EXIT_DID_NOT_RUN;
        }
    };
    let server = Server::new(options);
    let approve = command.approve;
    let (notes, asks) = (output.clone(), output.clone());
    let shown = output.clone();
    let ended = Client
        .v1()
        .name("agentd exec")
        .on_receive_notification(
            async move |note: SessionNotification, _cx| {
                lock(&notes).update(&note);
                Ok(())
            },
            on_receive_notification!(),
        )
        .on_receive_request(
            async move |req: RequestPermissionRequest, responder, _cx| {
                responder.respond(answer_permission(&asks, approve, &req))
            },
            on_receive_request!(),
        )
        .connect_with(server.agent(), async move |cx: ConnectionTo<Agent>| {
            Ok(one_turn(&cx, cwd, prompt, interrupts, &shown).await)
        })
        .await;
    let ending = match ended {
        Ok(ending) => ending,
        Err(error) => {
            lock(&output).failed("the connection to the agent failed", &error);
            server.close_all().await;
            return EXIT_TURN_FAILED;
        }
    };
    if !matches!(ending, Ending::Abandoned) {
        // As an editor hanging up: what the session started ends before agentd does.
        server.close_all().await;
    }
    exit_status(&mut lock(&output), ending)
}

/// Answers a permission request as `--approve` says, and shows the request with its answer.
fn answer_permission(
    output: &Mutex<Output>,
    approve: Approve,
    req: &RequestPermissionRequest,
) -> RequestPermissionResponse {
    let mut output = lock(output);
    let id = req.tool_call.tool_call_id.0.to_string();
    let mut about = output.announced(&id).cloned().unwrap_or_default();
    if let Some(title) = &req.tool_call.fields.title {
        about.title.clone_from(title);
    }
    if let Some(input) = &req.tool_call.fields.raw_input {
        about.input = input.clone();
    }
    let decision = approve::decide(approve, req, &about.input);
    output.permission(req, &about, &decision, approve.as_str());
    decision.response
}

/// Shows how the turn ended and says how agentd exits.
fn exit_status(output: &mut Output, ending: Ending) -> u8 {
    match ending {
        Ending::NotStarted { what, error } => {
            output.failed(what, &error);
            EXIT_DID_NOT_RUN
        }
        Ending::Stopped { stop, interrupted } => {
            output.stopped(stop);
            if interrupted {
                EXIT_INTERRUPTED
            } else {
                status_of(stop)
            }
        }
        Ending::Failed { error, interrupted } => {
            output.failed("the prompt failed", &error);
            if interrupted {
                EXIT_INTERRUPTED
            } else {
                EXIT_TURN_FAILED
            }
        }
        Ending::Abandoned => {
            output.own_error("interrupted again: exited without waiting for the turn to end");
            EXIT_INTERRUPTED
        }
    }
}

/// Everything the turn needs before the agent is asked anything.
struct Started {
    prompt: String,
    /// The session's directory, absolute.
    cwd: PathBuf,
    options: AcpOptions,
    /// SIGINT, caught from the moment this exists.
    interrupts: Signal,
}

/// Reads the prompt, checks the workspace, resolves the agent's options and catches SIGINT.
async fn start_turn(command: &ExecCommand) -> Result<Started, StartError> {
    let prompt = read_prompt(&command.prompt).await?;
    let cwd = workspace(command.cwd.as_deref())?;
    let mut options = start::agent_options(&command.agent, command.sandbox_mode).await?;
    // The prompt's error is the one line a model failure gets.
    options.log_model_errors = false;
    // A model that cannot be built would fail the prompt: say so before starting.
    if let Err(e) = &options.models.default_model().provider {
        return Err(StartError::Model(e.clone()));
    }
    let interrupts = signal(SignalKind::interrupt()).map_err(StartError::Signal)?;
    Ok(Started {
        prompt,
        cwd,
        options,
        interrupts,
    })
}

/// `initialize`, `session/new`, `session/prompt`; a SIGINT during the prompt cancels it.
async fn one_turn(
    cx: &ConnectionTo<Agent>,
    cwd: PathBuf,
    prompt: String,
    mut interrupts: Signal,
    output: &Mutex<Output>,
) -> Ending {
    if let Err(error) = cx
        .send_request(InitializeRequest::new(ProtocolVersion::V1))
        .block_task()
        .await
    {
        return Ending::NotStarted {
            what: "the agent could not be initialised",
            error,
        };
    }
    let session = match cx
        .send_request(NewSessionRequest::new(cwd))
        .block_task()
        .await
    {
        Ok(created) => created.session_id,
        Err(error) => {
            return Ending::NotStarted {
                what: "the session could not be created",
                error,
            };
        }
    };
    let answer = cx
        .send_request(PromptRequest::new(
            session.clone(),
            vec![ContentBlock::from(prompt)],
        ))
        .block_task();
    let mut answer = std::pin::pin!(answer);
    let mut interrupted = false;
    let answer = loop {
        tokio::select! {
            answer = &mut answer => break answer,
            Some(()) = interrupts.recv() => {
                if interrupted {
                    return Ending::Abandoned;
                }
                interrupted = true;
                lock(output).note("agentd: interrupted: cancelling the turn (again to stop waiting)");
                if cx.send_notification(CancelNotification::new(session.clone())).is_err() {
                    return Ending::Abandoned;
                }
            }
        }
    };
    match answer {
        Ok(response) => Ending::Stopped {
            stop: response.stop_reason,
            interrupted,
        },
        Err(error) => Ending::Failed { error, interrupted },
    }
}

/// The exit status of a turn that ended with `stop` (see the module documentation).
fn status_of(stop: StopReason) -> u8 {
    match stop {
        StopReason::EndTurn => 0,
        StopReason::MaxTokens => EXIT_MAX_TOKENS,
        StopReason::Refusal => EXIT_REFUSAL,
        StopReason::MaxTurnRequests => EXIT_MAX_TURN_REQUESTS,
        StopReason::Cancelled => EXIT_INTERRUPTED,
        _ => EXIT_TURN_FAILED,
    }
}

/// The prompt: the argument, or stdin's text for `-`.
async fn read_prompt(argument: &str) -> Result<String, StartError> {
    let prompt = if argument == "-" {
        let mut text = String::new();
        tokio::io::stdin()
            .read_to_string(&mut text)
            .await
            .map_err(StartError::Stdin)?;
        text
    } else {
        argument.to_owned()
    };
    if prompt.trim().is_empty() {
        return Err(StartError::EmptyPrompt);
    }
    Ok(prompt)
}

/// The session's directory: `--cwd` (relative to the current directory), else the current
/// directory; it must be a directory.
fn workspace(cwd: Option<&Path>) -> Result<PathBuf, StartError> {
    let Some(cwd) = cwd else {
        return std::env::current_dir().map_err(StartError::CurrentDir);
    };
    let path = std::path::absolute(cwd).map_err(|source| StartError::Cwd {
        path: cwd.to_owned(),
        source,
    })?;
    match std::fs::metadata(&path) {
        Ok(meta) if meta.is_dir() => Ok(path),
        Ok(_) => Err(StartError::CwdNotDirectory(cwd.to_owned())),
        Err(source) => Err(StartError::Cwd {
            path: cwd.to_owned(),
            source,
        }),
    }
}

/// The output, also after a handler panicked while holding it (what it printed stays printed).
fn lock(output: &Mutex<Output>) -> MutexGuard<'_, Output> {
    output.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_ending_has_its_status() {
        assert_eq!(status_of(StopReason::EndTurn), 0);
        let others = [
            StopReason::MaxTokens,
            StopReason::Refusal,
            StopReason::MaxTurnRequests,
            StopReason::Cancelled,
        ]
        .map(status_of);
        assert_eq!(others, [3, 4, 5, 130]);
        assert!(!others.contains(&EXIT_TURN_FAILED));
        assert!(!others.contains(&EXIT_DID_NOT_RUN));
    }

    #[test]
    fn a_cwd_that_is_no_directory_is_refused_with_what_to_do() {
        let missing = workspace(Some(Path::new("/nonexistent/agentd-exec")))
            .expect_err("missing")
            .to_string();
        assert!(
            missing.starts_with("--cwd /nonexistent/agentd-exec: No such file or directory"),
            "{missing}"
        );
        assert!(missing.ends_with("give an existing directory"), "{missing}");
        let file = workspace(Some(Path::new("/proc/self/status")))
            .expect_err("a file")
            .to_string();
        assert_eq!(
            file,
            "--cwd /proc/self/status: not a directory: give the workspace's directory"
        );
        let here = std::env::current_dir().expect("cwd");
        assert_eq!(workspace(Some(Path::new("."))).expect("."), here);
        assert_eq!(workspace(None).expect("cwd"), here);
    }
}
