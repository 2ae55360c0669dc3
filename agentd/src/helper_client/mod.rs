//! agentd's side of the confine-helper protocol.
//!
//! agentd never forks or execs a tool command itself: every command becomes a `Spawn` request to
//! confine-helper, with the command's stdio passed as file descriptors so output flows straight
//! from the command to agentd's pipes. This module is the only way agentd runs anything, and it
//! has no fallback: if the helper cannot be reached, the caller gets an error, not an unconfined
//! process.
//!
//! A [`HelperClient`] owns at most one live connection at a time and makes it lazily on the first
//! request. Many requests share the connection; replies are routed back by request id. When the
//! connection ends, every request still in flight ends with a local
//! [`RunnerFailed`] at [`FailedAt::HelperExited`] (agentd's own stage, never on the wire), and
//! the next request starts a fresh
//! helper (embedded mode) or reconnects (service mode).
//!
//! ```no_run
//! # async fn demo() -> Result<(), agentd::api::helper_client::ClientError> {
//! use agentd::api::helper_client::{HelperClient, HelperEndpoint, Outcome, SpawnSpec};
//! use confine_protocol::Mode;
//!
//! let client = HelperClient::new(HelperEndpoint::Embedded("/usr/libexec/confine-helper".into()));
//! let mut spec = SpawnSpec::new(["sh", "-c", "exit 3"]);
//! spec.policy.mode = Mode::DangerFullAccess;
//! let mut handle = client.spawn(spec).await?;
//! let _started = handle.started().await;
//! match handle.wait().await {
//!     Outcome::Exited(exited) => println!("{:?}", exited.status),
//!     other => println!("did not run: {other:?}"),
//! }
//! # Ok(())
//! # }
//! ```

mod command;
mod connect_hint;
mod connection;
mod embedded;
mod endpoint;
mod file_io;
mod info;
pub mod locate;
mod socket_io;
#[cfg(test)]
mod tests;
pub mod verdict_cache;
mod workspace;

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use confine_protocol::{
    BackendChoice, EnvVar, Hello, Limits, Policy, Request, Spawn, Stdio, StdioSpec, encode_frame,
};

pub use command::{Canceller, CommandHandle, FailedAt, Outcome, RunnerFailed};
pub use endpoint::{ClientError, FileOpError, HelperEndpoint, Lost};
pub use file_io::{EditSpec, GivenFileIo, KeepPrevious, ReadSpec, WriteSpec, locate_file_io};
pub use locate::{LocateError, LocateInputs, locate_helper};
pub use verdict_cache::VerdictCache;
pub use workspace::WorkspaceRefusal;

use connection::{Connection, EstablishError};
use embedded::EmbeddedHelper;

/// Grace between SIGTERM and SIGKILL when a timeout or an interrupt stops the command: what
/// every spawn gets unless its caller says otherwise.
pub const KILL_GRACE: Duration = Duration::from_secs(2);

/// How many times in a row the helper may die before completing the handshake before a request
/// gives up, so a helper that crashes at start-up is reported instead of respawned forever.
pub const MAX_HANDSHAKE_FAILURES: u32 = 3;

/// What to run and under which rules. Build one with [`SpawnSpec::new`], then adjust the fields.
#[derive(Debug)]
pub struct SpawnSpec {
    /// The command and its arguments; `argv[0]` is looked up on the command's `PATH`.
    pub argv: Vec<OsString>,
    /// The command's working directory.
    pub cwd: PathBuf,
    /// The command's whole environment: nothing is inherited implicitly.
    pub env: Vec<(OsString, OsString)>,
    /// What the command may touch.
    pub policy: Policy,
    /// Which confinement backend to ask for.
    pub backend: BackendChoice,
    /// Wall-clock limit and kill grace.
    pub limits: Limits,
    /// The command's stdin; `None` means `/dev/null`. Closed in agentd once handed over.
    pub stdin: Option<OwnedFd>,
    /// The command's stdout; `None` means `/dev/null`. Closed in agentd once handed over.
    pub stdout: Option<OwnedFd>,
    /// The command's stderr; `None` means `/dev/null`. Closed in agentd once handed over.
    pub stderr: Option<OwnedFd>,
    /// The socket the sandbox's proxy bridge passes its connections over ([`Spawn::proxy`]);
    /// `None` for none. Closed in agentd once handed over.
    pub proxy: Option<OwnedFd>,
}

impl SpawnSpec {
    /// The most restrictive spec for `argv`: read-only with no workspace, no network, automatic
    /// backend, no timeout ([`KILL_GRACE`] as kill grace), `/` as working directory, an empty
    /// environment and every stdio stream on `/dev/null`.
    pub fn new<I, S>(argv: I) -> SpawnSpec
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        SpawnSpec {
            argv: argv.into_iter().map(Into::into).collect(),
            cwd: PathBuf::from("/"),
            env: Vec::new(),
            policy: Policy::read_only(),
            backend: BackendChoice::Auto,
            limits: Limits::none()
                .with_kill_grace(u32::try_from(KILL_GRACE.as_millis()).unwrap_or(u32::MAX)),
            stdin: None,
            stdout: None,
            stderr: None,
            proxy: None,
        }
    }

    /// The wire request and the descriptors that travel with it, in stdin, stdout, stderr order,
    /// then the proxy's socket.
    fn into_request(self, id: u64) -> (Spawn, Vec<OwnedFd>) {
        let mut fds = Vec::new();
        let mut place = |fd: Option<OwnedFd>| match fd {
            Some(fd) => {
                fds.push(fd);
                StdioSpec::Fd
            }
            None => StdioSpec::Null,
        };
        let stdio = Stdio {
            stdin: place(self.stdin),
            stdout: place(self.stdout),
            stderr: place(self.stderr),
        };
        let proxy = self.proxy.is_some();
        fds.extend(self.proxy);
        let spawn = Spawn {
            id,
            argv: self.argv.into_iter().map(OsStringExt::into_vec).collect(),
            cwd: self.cwd.into_os_string().into_vec(),
            env: self
                .env
                .into_iter()
                .map(|(name, value)| EnvVar {
                    name: name.into_vec(),
                    value: value.into_vec(),
                })
                .collect(),
            policy: self.policy,
            backend: self.backend,
            limits: self.limits,
            stdio,
            proxy,
        };
        (spawn, fds)
    }
}

/// `path` with symbolic links resolved as far as it exists, the rest appended as written.
fn resolved(path: &Path) -> PathBuf {
    for existing in path.ancestors() {
        if let Ok(real) = std::fs::canonicalize(existing) {
            return match path.strip_prefix(existing) {
                Ok(rest) if !rest.as_os_str().is_empty() => real.join(rest),
                _ => real,
            };
        }
    }
    path.to_owned()
}

/// A handle on confine-helper shared by everything in agentd that runs commands.
///
/// Cheap to clone; all clones share one connection and one request-id counter. The connection is
/// made on the first request, and remade on the first request after it ends.
#[derive(Debug, Clone)]
pub struct HelperClient {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    endpoint: HelperEndpoint,
    /// `--ceiling PATH` for an embedded helper.
    ceiling: Option<PathBuf>,
    hello: Hello,
    /// agentd's own files, added to every request's `Policy::never_writable`.
    never_writable: Vec<Vec<u8>>,
    /// The file reader and writer ([`locate_file_io`]), or why there is none.
    file_io: Result<PathBuf, FileOpError>,
    next_id: AtomicU64,
    current: Mutex<Option<Arc<Connection>>>,
    /// Held while a connection is being made, so concurrent first requests start one helper.
    connecting: tokio::sync::Mutex<()>,
    /// An embedded helper started ahead of the first request ([`HelperClient::start_early`]),
    /// or why it could not be; the next connection made takes it.
    early: Mutex<Option<Result<EmbeddedHelper, ClientError>>>,
    /// Whether an `Info` goes right after the next request ([`HelperClient::learn_verdicts`]).
    ask_with_next: AtomicBool,
    /// Where the answer to that `Info` arrives, and how many times the verdict cache had been
    /// forgotten when it was asked.
    asked: Mutex<Option<(InfoAnswer, u64)>>,
    /// The usable verdicts sent to each new helper as hints, and learnt from its `Info`.
    verdicts: Mutex<Option<Arc<VerdictCache>>>,
}

/// Where the helper's answer to an `Info` arrives.
type InfoAnswer = tokio::sync::oneshot::Receiver<Result<confine_protocol::HelperInfo, Lost>>;

/// What `slot` holds, taken out of it.
fn taken<T>(slot: &Mutex<Option<T>>) -> Option<T> {
    slot.lock().unwrap_or_else(PoisonError::into_inner).take()
}

/// A helper started ahead that no request came for is killed before its socket closes, so it
/// never reports the end of a connection it was not told to expect.
impl Drop for Inner {
    fn drop(&mut self) {
        let early = self.early.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Some(Ok(mut helper)) = early.take() {
            let _ = helper.child.start_kill();
        }
    }
}

impl HelperClient {
    /// A client for `endpoint`. Nothing is started or connected until the first request.
    pub fn new(endpoint: HelperEndpoint) -> HelperClient {
        HelperClient::build(endpoint, None, Vec::new(), None)
    }

    /// A client for `endpoint` whose embedded helper is started with `--ceiling ceiling`
    /// (`confine-helper --fd 0 --ceiling PATH`) when `ceiling` is given (an absolute path; see
    /// [`Effective::helper_client`](crate::config::Effective::helper_client)).
    ///
    /// A service helper reads its own ceiling, so a ceiling with a
    /// [`HelperEndpoint::Service`] is an error rather than silently unused.
    pub fn with_ceiling(
        endpoint: HelperEndpoint,
        ceiling: Option<PathBuf>,
    ) -> Result<HelperClient, ClientError> {
        HelperClient::configured(endpoint, ceiling, Vec::new(), None)
    }

    /// [`HelperClient::with_ceiling`] that also marks `never_writable` (agentd's own
    /// configuration, state and binary) in every request: the helper refuses any writable root
    /// that contains one of them or lies inside one. `file_io` is the file reader and writer's
    /// path when one is configured; unset, it is searched for ([`locate_file_io`]).
    pub fn configured(
        endpoint: HelperEndpoint,
        ceiling: Option<PathBuf>,
        never_writable: Vec<PathBuf>,
        file_io: Option<GivenFileIo>,
    ) -> Result<HelperClient, ClientError> {
        if let (HelperEndpoint::Service(socket), Some(_)) = (&endpoint, &ceiling) {
            return Err(ClientError::CeilingForService {
                socket: socket.clone(),
            });
        }
        Ok(HelperClient::build(
            endpoint,
            ceiling,
            never_writable,
            file_io,
        ))
    }

    fn build(
        endpoint: HelperEndpoint,
        ceiling: Option<PathBuf>,
        mut never_writable: Vec<PathBuf>,
        file_io: Option<GivenFileIo>,
    ) -> HelperClient {
        let software = format!("agentd {}", env!("CARGO_PKG_VERSION"));
        let helper = match &endpoint {
            HelperEndpoint::Embedded(path) => Some(path.as_path()),
            HelperEndpoint::Service(_) => None,
        };
        let file_io = locate_file_io(file_io.as_ref(), helper, locate::agentd_dir().as_deref());
        // The program runs again under whatever policy the next operation has (an approved
        // write's wider one): no command may replace it.
        if let Ok(program) = &file_io {
            never_writable.push(program.clone());
        }
        HelperClient {
            inner: Arc::new(Inner {
                endpoint,
                ceiling,
                hello: Hello::ours(&software),
                never_writable: never_writable
                    .into_iter()
                    .map(|p| p.into_os_string().into_vec())
                    .collect(),
                file_io,
                next_id: AtomicU64::new(1),
                current: Mutex::new(None),
                connecting: tokio::sync::Mutex::new(()),
                early: Mutex::new(None),
                ask_with_next: AtomicBool::new(false),
                asked: Mutex::new(None),
                verdicts: Mutex::new(None),
            }),
        }
    }

    /// Keeps the helper's usable verdicts in `cache`: sends them as hints to each new helper,
    /// learns them from every `Info` reply, and drops them when a backend fails to build a
    /// command's confinement.
    pub fn keep_verdicts(&self, cache: VerdictCache) {
        *self.verdict_cache_slot() = Some(Arc::new(cache));
    }

    fn verdict_cache_slot(&self) -> std::sync::MutexGuard<'_, Option<Arc<VerdictCache>>> {
        self.inner
            .verdicts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn verdict_cache(&self) -> Option<Arc<VerdictCache>> {
        self.verdict_cache_slot().clone()
    }

    /// Where this client reaches the helper.
    pub fn endpoint(&self) -> &HelperEndpoint {
        &self.inner.endpoint
    }

    /// The ceiling file an embedded helper is started with.
    pub fn ceiling(&self) -> Option<&std::path::Path> {
        self.inner.ceiling.as_deref()
    }

    /// Starts the embedded helper now, without waiting for it: its start then overlaps what the
    /// caller does before its first request, which makes the connection with it (or reports
    /// why it could not start). Nothing for a service helper, nor when a connection is live or
    /// a helper was already started ahead.
    pub fn start_early(&self) {
        let HelperEndpoint::Embedded(path) = &self.inner.endpoint else {
            return;
        };
        let mut early = self
            .inner
            .early
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if early.is_none() && self.live_connection().is_none() {
            *early = Some(embedded::start_embedded(
                path,
                self.inner.ceiling.as_deref(),
            ));
        }
    }

    /// Makes sure a live, handshaken connection exists, starting the helper if needed.
    ///
    /// Requests do this themselves; calling it first lets a caller report a missing or
    /// mismatched helper before preparing anything else.
    pub async fn connect(&self) -> Result<(), ClientError> {
        self.connection().await.map(drop)
    }

    /// Asks the helper to run a command. Returns once the request is queued on the connection;
    /// the [`CommandHandle`] reports when it starts and how it ends.
    ///
    /// The descriptors in `spec` are closed in agentd once sent (or when the request fails), so
    /// the command's pipes reach end-of-file when the command's side closes.
    pub async fn spawn(&self, spec: SpawnSpec) -> Result<CommandHandle, ClientError> {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let (mut spawn, fds) = spec.into_request(id);
        self.mark_own_paths(&mut spawn.policy);
        self.send(id, &Request::Spawn(spawn), fds).await
    }

    /// Asks the helper to replace a file with the content in `spec`, confined by its policy:
    /// the file writer runs as a command under the plan a `bash` command of the same policy
    /// would get. The handle ends like a command's: exit code 0 when written, with the writer's
    /// report on `spec.report`.
    pub async fn write_file(&self, spec: WriteSpec) -> Result<CommandHandle, ClientError> {
        let program = self.file_io()?;
        self.spawn(spec.into_spawn(program)?).await
    }

    /// Asks the helper to edit a file in one run, confined by the read's policy as a command of
    /// the same policy would be: the program says on the read's report how much it read and
    /// sends that much on its content, then writes what agentd sends on `spec.answer` (`w` and
    /// the new content; nothing leaves the file), unless the file changed meanwhile. Read the
    /// count and that much content (the content pipe does not end while the program waits),
    /// answer, and read the rest of the report while waiting.
    pub async fn edit_file(&self, spec: EditSpec) -> Result<CommandHandle, ClientError> {
        let program = self.file_io()?;
        self.spawn(spec.into_spawn(program)?).await
    }

    /// The file reader and writer, or why there is none.
    fn file_io(&self) -> Result<&Path, FileOpError> {
        self.inner.file_io.as_deref().map_err(Clone::clone)
    }

    /// Why `dir` may not be a workspace-write workspace, with symbolic links resolved: it is
    /// `/`, holds one of agentd's own files or lies inside one, or is `home` (the `HOME` the
    /// commands get) or holds it. The helper refuses such a root for every command; callers use
    /// this to decide once, up front, with the path named.
    pub fn workspace_refusal(&self, dir: &Path, home: Option<&Path>) -> Option<WorkspaceRefusal> {
        workspace::refusal(resolved(dir), self.own_files(), home.map(resolved))
    }

    /// agentd's own files (see [`HelperClient::configured`]), resolved.
    fn own_files(&self) -> impl Iterator<Item = PathBuf> + '_ {
        self.inner
            .never_writable
            .iter()
            .map(|raw| resolved(Path::new(std::ffi::OsStr::from_bytes(raw))))
    }

    /// Asks the helper to read a file, confined by `spec.policy`: the file reader runs as a
    /// command under the plan a `bash` command of the same policy would get, so it sees what
    /// such a command sees (its own `/proc` and `/tmp`, never agentd's). The content arrives on
    /// `spec.content`, the report on `spec.report`; read both while waiting.
    pub async fn read_file(&self, spec: ReadSpec) -> Result<CommandHandle, ClientError> {
        let program = self.file_io()?;
        self.spawn(spec.into_spawn(program)?).await
    }

    fn mark_own_paths(&self, policy: &mut Policy) {
        for path in &self.inner.never_writable {
            if !policy.never_writable.contains(path) {
                policy.never_writable.push(path.clone());
            }
        }
    }

    async fn send(
        &self,
        id: u64,
        request: &Request,
        fds: Vec<OwnedFd>,
    ) -> Result<CommandHandle, ClientError> {
        let frame = encode_frame(request).map_err(ClientError::RequestTooLarge)?;
        let mut fds = Some(fds);
        let (connection, replies) = self
            .submit(|connection| connection.submit_spawn(id, &frame, &mut fds))
            .await?;
        if self.inner.ask_with_next.swap(false, Ordering::Relaxed)
            && let Some(cache) = self.verdict_cache()
            && let Ok(answer) = connection.submit_info()
        {
            let asked = (answer, cache.times_forgotten());
            *self
                .inner
                .asked
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(asked);
        }
        Ok(CommandHandle::new(id, replies, connection))
    }

    /// Registers a request on a live connection. The connection can die between being handed
    /// out and the request being registered on it; a fresh one is tried then, a bounded number
    /// of times.
    async fn submit<T>(
        &self,
        mut register: impl FnMut(&Connection) -> Result<T, Lost>,
    ) -> Result<(Arc<Connection>, T), ClientError> {
        let mut attempts = 1;
        loop {
            let connection = self.connection().await?;
            match register(&connection) {
                Ok(registered) => return Ok((connection, registered)),
                Err(reason) if attempts >= MAX_HANDSHAKE_FAILURES => {
                    return Err(ClientError::ConnectionLost(reason));
                }
                Err(_) => attempts += 1,
            }
        }
    }

    /// The process id of the embedded helper behind the current live connection; `None` in
    /// service mode or when no connection is live.
    pub fn helper_pid(&self) -> Option<u32> {
        let current = self
            .inner
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        current
            .as_ref()
            .filter(|connection| connection.is_alive())
            .and_then(|connection| connection.helper_pid())
    }

    async fn connection(&self) -> Result<Arc<Connection>, ClientError> {
        if let Some(live) = self.live_connection() {
            return Ok(live);
        }
        let _one_at_a_time = self.inner.connecting.lock().await;
        if let Some(live) = self.live_connection() {
            return Ok(live);
        }
        let mut failures = 0;
        loop {
            // Only the first attempt may take a helper started ahead; a later one starts anew.
            let early = taken(&self.inner.early);
            let established = Connection::establish(
                &self.inner.endpoint,
                self.inner.ceiling.as_deref(),
                &self.inner.hello,
                early,
            );
            match established.await {
                Ok(connection) => {
                    if let Some(cache) = self.verdict_cache() {
                        connection.hint(cache);
                    }
                    let connection = Arc::new(connection);
                    *self
                        .inner
                        .current
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner) = Some(connection.clone());
                    return Ok(connection);
                }
                Err(EstablishError::ClosedEarly(reason)) => {
                    failures += 1;
                    eprintln!(
                        "agentd: confine-helper closed the connection before the handshake \
                         ({reason}); attempt {failures} of {MAX_HANDSHAKE_FAILURES}"
                    );
                    if failures >= MAX_HANDSHAKE_FAILURES {
                        return Err(ClientError::HelperKeepsDying {
                            attempts: failures,
                            last: reason,
                        });
                    }
                }
                Err(EstablishError::Fatal(error)) => return Err(error),
            }
        }
    }

    fn live_connection(&self) -> Option<Arc<Connection>> {
        let current = self
            .inner
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        current
            .as_ref()
            .filter(|connection| connection.is_alive() && !connection.hung_up())
            .cloned()
    }
}
