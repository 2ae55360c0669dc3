//! One MCP server process, started through confine-helper like every command agentd runs:
//! confined under the policy it is given, in the workspace, with only the environment it is
//! given, its stdin and stdout on pipes that carry the JSON-RPC, its stderr kept (the last
//! [`STDERR_TAIL`] bytes) for the messages that say why it failed. It runs until it is stopped
//! ([`Running::stop`], also when dropped): confine-helper then kills its whole process tree.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use confine_protocol::{BackendChoice, Ending, ExitStatus, Mode, Policy};
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::sync::watch;

use super::protocol::{self, Initialized};
use super::rpc::{RpcClient, RpcError};
use crate::command::{
    self, KILL_GRACE, RunnerFailure, STDERR_TAIL, exec_failure_note, runner_failure_note,
};
use crate::helper_client::{Canceller, CommandHandle, HelperClient, Outcome, SpawnSpec};
use crate::proxy::Gateway;

/// How long the end of a server whose connection closed is waited for, so that a message can
/// say how it ended (its exit code, the helper's refusal).
const END_WAIT: Duration = Duration::from_secs(2);

/// What a server is started as.
#[derive(Debug, Clone)]
pub struct Launch {
    pub argv: Vec<OsString>,
    /// The workspace.
    pub cwd: PathBuf,
    /// Its whole environment.
    pub env: Vec<(OsString, OsString)>,
    pub policy: Policy,
    pub backend: BackendChoice,
    /// The allow-list proxy the server reaches the network through, if any.
    pub proxy: Option<Arc<crate::proxy::Policy>>,
}

/// A started, initialized server.
#[derive(Debug)]
pub struct Running {
    rpc: RpcClient,
    canceller: Canceller,
    /// How the process ended, once it did.
    ended: watch::Receiver<Option<String>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    policy: Policy,
    initialized: Initialized,
    /// The allow-list proxy it reaches the network through, served as long as it runs.
    gateway: Option<Gateway>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The files a server's command line names by absolute path that exist — its program, its
/// script — by their real paths: the helper shows them to the server wherever they are, also
/// where its private `/tmp` would hide them. The command line is the user's configuration,
/// never a model's.
fn visible_files(argv: &[OsString]) -> Vec<Vec<u8>> {
    use std::os::unix::ffi::OsStrExt;
    let mut visible: Vec<Vec<u8>> = Vec::new();
    for arg in argv {
        let path = Path::new(arg);
        if !path.is_absolute() {
            continue;
        }
        let Ok(real) = path.canonicalize() else {
            continue;
        };
        let bytes = real.as_os_str().as_bytes().to_vec();
        if !visible.contains(&bytes) {
            visible.push(bytes);
        }
    }
    visible
}

/// Why an MCP server did not start or list its tools, in the words a notice or a call's result
/// shows.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("agentd cannot create a pipe: {0}")]
    Pipe(std::io::Error),
    #[error("agentd cannot open the network proxy's socket: {0}")]
    Proxy(std::io::Error),
    #[error("{0}")]
    Spawn(#[from] crate::helper_client::ClientError),
    #[error("agentd cannot set up TLS: {0}")]
    Tls(#[from] rustls::Error),
    /// A request of the start went unanswered or wrong: why, with how the server ended and the
    /// end of its stderr when there is one.
    #[error("{0}")]
    Answer(String),
    #[error("the call was cancelled")]
    Cancelled,
}

impl Running {
    /// Starts the server through `helper` and initializes it, each request of the start
    /// waited for at most `timeout`. The error says why, with how the process ended and the end
    /// of its stderr when there is one; a server that failed is stopped.
    pub async fn start(
        helper: &HelperClient,
        launch: Launch,
        timeout: Duration,
    ) -> Result<Running, StartError> {
        let program = launch
            .argv
            .first()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let pipe_failed = StartError::Pipe;
        let (stdin_read, stdin) = command::input_pipe().map_err(pipe_failed)?;
        let (stdout, stdout_write) = command::output_pipe().map_err(pipe_failed)?;
        let (stderr, stderr_write) = command::output_pipe().map_err(pipe_failed)?;
        let policy = launch.policy.clone();
        let visible = visible_files(&launch.argv);
        let mut spec = SpawnSpec::new(launch.argv);
        spec.cwd = launch.cwd;
        spec.env = launch.env;
        spec.policy = launch.policy;
        spec.policy.visible = visible;
        spec.backend = launch.backend;
        spec.stdin = Some(stdin_read);
        spec.stdout = Some(stdout_write);
        spec.stderr = Some(stderr_write);
        let gateway = match launch.proxy {
            Some(policy) => Some(Gateway::attach(&mut spec, policy).map_err(StartError::Proxy)?),
            None => None,
        };
        let handle = helper.spawn(spec).await?;
        // Until it is a `Running`, a start given up on (its future dropped) stops it too.
        let guard = StopUnlessKept {
            canceller: handle.canceller(),
            kept: false,
        };
        let (ended_tx, ended) = watch::channel(None);
        tokio::spawn(async move {
            let end = end_of(handle, &program).await;
            ended_tx.send_replace(Some(end));
        });
        let kept = Arc::new(Mutex::new(Vec::new()));
        tokio::spawn(keep_tail(stderr, kept.clone()));
        let rpc = RpcClient::new(stdout, stdin);
        let initialized = match protocol::initialize(&rpc, timeout).await {
            Ok(initialized) => initialized,
            Err(e) => {
                // Explained first: a stop now would hide how it ended by itself.
                let why = explained(&e, ended, &kept).await;
                drop(guard);
                return Err(StartError::Answer(why));
            }
        };
        Ok(Running {
            rpc,
            canceller: guard.keep(),
            ended,
            stderr: kept,
            policy,
            initialized,
            gateway,
        })
    }

    /// What the allow-list proxy decided for it since this was last asked; `None` without one.
    pub fn take_decisions(&self) -> Option<crate::proxy::Decisions> {
        self.gateway.as_ref().map(Gateway::take_decisions)
    }

    pub fn rpc(&self) -> &RpcClient {
        &self.rpc
    }

    /// The policy it runs under.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    pub fn mode(&self) -> Mode {
        self.policy.mode
    }

    pub fn initialized(&self) -> &Initialized {
        &self.initialized
    }

    /// Whether the process or its connection has ended.
    pub fn has_ended(&self) -> bool {
        self.ended.borrow().is_some() || self.rpc.ended().is_some()
    }

    /// Asks confine-helper to end the server's process tree: SIGTERM, SIGKILL after
    /// [`KILL_GRACE`]. Nothing happens if it already ended.
    pub fn stop(&self) {
        self.canceller.cancel(KILL_GRACE);
    }

    /// `error` of a request to this server, with how the server ended and the end of its
    /// stderr when the connection is gone.
    pub async fn explain(&self, error: &RpcError) -> String {
        explained(error, self.ended.clone(), &self.stderr).await
    }
}

/// Stops a started server when dropped, unless [`StopUnlessKept::keep`] took it.
struct StopUnlessKept {
    canceller: Canceller,
    kept: bool,
}

impl StopUnlessKept {
    fn keep(mut self) -> Canceller {
        self.kept = true;
        self.canceller.clone()
    }
}

impl Drop for StopUnlessKept {
    fn drop(&mut self) {
        if !self.kept {
            self.canceller.cancel(KILL_GRACE);
        }
    }
}

/// Why a request failed, for a person or the model: the error, and when the connection ended,
/// how the process ended (waited for up to [`END_WAIT`]; in place of the error when the
/// server's side went away) and the end of its stderr.
async fn explained(
    error: &RpcError,
    mut ended: watch::Receiver<Option<String>>,
    stderr: &Mutex<Vec<u8>>,
) -> String {
    let RpcError::Closed(why) = error else {
        return error.to_string();
    };
    let end = match tokio::time::timeout(END_WAIT, ended.wait_for(Option::is_some)).await {
        Ok(Ok(end)) => end.clone(),
        _ => None,
    };
    let mut text = match end {
        Some(end) if why.by_the_server() => end,
        Some(end) => format!("{error}; {end}"),
        None => error.to_string(),
    };
    let tail = stderr
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let tail = String::from_utf8_lossy(&tail);
    let tail = tail.trim();
    if !tail.is_empty() {
        text.push_str("; its stderr ends with: ");
        text.push_str(&crate::terminal::one_line(tail, None));
    }
    text
}

/// Waits for the process's end and says how it was, in a few words.
async fn end_of(mut handle: CommandHandle, program: &str) -> String {
    let started = handle.started().await.is_some();
    match handle.wait().await {
        Outcome::Exited(exited) => {
            if let Some(errno) = exited.exec_errno {
                return format!("it could not start: {}", exec_failure_note(program, errno));
            }
            match (exited.ending, exited.status) {
                (Ending::Cancelled, _) => "it was stopped".to_owned(),
                (Ending::TimedOut, _) => "it ran out of time".to_owned(),
                (_, ExitStatus::Code(code)) => format!("it exited with code {code}"),
                (_, ExitStatus::Signal(signal)) => format!("it was ended by signal {signal}"),
            }
        }
        Outcome::RunnerFailed(failed) => runner_failure_note(
            &RunnerFailure {
                stage: failed.stage,
                errno: failed.errno,
                detail: failed.detail,
            },
            started,
        ),
        Outcome::Refused(refused) => {
            format!("confine-helper refused to start it: {}", refused.reason)
        }
    }
}

/// Keeps the last [`STDERR_TAIL`] bytes the server writes to its stderr, until it closes it.
async fn keep_tail(mut stderr: pipe::Receiver, kept: Arc<Mutex<Vec<u8>>>) {
    let mut buf = vec![0u8; STDERR_TAIL];
    loop {
        match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                // A read never reports more bytes than it was given room for.
                let Some(read) = buf.get(..n) else {
                    return;
                };
                let mut kept = kept.lock().unwrap_or_else(PoisonError::into_inner);
                kept.extend_from_slice(read);
                let excess = kept.len().saturating_sub(STDERR_TAIL);
                kept.drain(..excess);
            }
        }
    }
}
