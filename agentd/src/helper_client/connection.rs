//! One handshaken connection to confine-helper and the two tasks that drive it.
//!
//! The writer task owns the outgoing queue, so frames (and the descriptors riding on them) go
//! out whole and in order however many callers submit at once. The reader task routes replies
//! to the request they answer. Both share a table of requests in flight; whichever task first
//! sees the connection end marks it dead and answers every entry, under the same lock that new
//! requests register under. That lock is what guarantees each registered request exactly one
//! terminal reply: either it registered before the end (and is answered by the helper or by the
//! teardown), or it saw the connection dead and was never registered.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use confine_protocol::{
    Cancel, FrameDecoder, Hello, HelperInfo, Reply, Request, check_hello, decode_payload,
    encode_frame,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::process::Child;
use tokio::sync::{mpsc, oneshot};

use super::embedded::{EmbeddedHelper, start_embedded};
use super::endpoint::{ClientError, HelperEndpoint, Lost};
use super::socket_io;
use super::verdict_cache::VerdictCache;

/// How long the helper has to answer our greeting.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The most of a service's refusal shown: the reason is a sentence.
const MAX_REFUSAL_CHARS: usize = 1024;

/// A frame waiting for the writer, with the descriptors that must ride on its first byte.
#[derive(Debug)]
struct Outgoing {
    frame: Vec<u8>,
    fds: Vec<OwnedFd>,
}

/// Why a connection could not be made.
#[derive(Debug)]
pub enum EstablishError {
    /// The helper went away before completing the handshake; worth another try, a few times.
    ClosedEarly(String),
    /// Retrying would fail the same way.
    Fatal(ClientError),
}

/// A reply that breaks the protocol: the connection is ended.
#[derive(Debug, thiserror::Error)]
enum Violation {
    #[error("a reply without a request id")]
    NoRequestId,
    #[error("an Info reply nobody asked for")]
    UnaskedInfo,
    #[error("a reply for unknown request {0}")]
    UnknownRequest(u64),
    #[error("a second Started for request {0}")]
    SecondStarted(u64),
}

/// A live (or formerly live) connection. Dropping the last reference closes it.
#[derive(Debug)]
pub struct Connection {
    shared: Arc<Shared>,
    outgoing: mpsc::UnboundedSender<Outgoing>,
    helper_pid: Option<u32>,
}

#[derive(Debug)]
struct Shared {
    stream: UnixStream,
    routes: Mutex<Routes>,
    /// Why the connection ended, once it has.
    lost_detail: Mutex<Option<String>>,
    /// An embedded helper's process and pid, until the connection ends and it is waited for.
    embedded: Mutex<Option<(Child, u32)>>,
    /// What a lost connection is called in the local `RunnerFailed` detail.
    lost: &'static str,
    /// The verdicts whose hints this connection's helper got: dropped when a backend fails to
    /// build a command's confinement.
    verdicts: std::sync::OnceLock<Arc<VerdictCache>>,
}

#[derive(Debug, Default)]
struct Routes {
    dead: bool,
    commands: HashMap<u64, Route>,
    /// `Info` replies carry no id; the helper answers requests in order.
    infos: VecDeque<oneshot::Sender<Result<HelperInfo, Lost>>>,
}

#[derive(Debug)]
struct Route {
    replies: mpsc::UnboundedSender<Reply>,
    started: bool,
}

/// How a connection ended.
enum End {
    /// agentd dropped it: nothing to report.
    Dropped,
    /// The peer closed it.
    Closed,
    Io(io::Error),
    Protocol(String),
}

impl Connection {
    /// Starts or connects to the helper, completes the handshake, and starts the I/O tasks.
    /// An embedded helper is `early`'s when one was started ahead, else started here with
    /// `--ceiling ceiling` if given; a service helper has its own ceiling.
    pub async fn establish(
        endpoint: &HelperEndpoint,
        ceiling: Option<&Path>,
        hello: &Hello,
        early: Option<Result<EmbeddedHelper, ClientError>>,
    ) -> Result<Connection, EstablishError> {
        match endpoint {
            HelperEndpoint::Embedded(path) => {
                let started = early.unwrap_or_else(|| start_embedded(path, ceiling));
                let EmbeddedHelper { stream, child, pid } =
                    started.map_err(EstablishError::Fatal)?;
                let helper = path.display().to_string();
                match handshake(stream, hello, &helper).await {
                    Ok((stream, decoder)) => Ok(Connection::start(
                        stream,
                        decoder,
                        Some((child, pid)),
                        "confine-helper exited",
                    )),
                    Err(error) => {
                        let status = super::embedded::stop(child).await;
                        Err(match error {
                            EstablishError::ClosedEarly(reason) => {
                                EstablishError::ClosedEarly(format!("{reason}; {status}"))
                            }
                            fatal => fatal,
                        })
                    }
                }
            }
            HelperEndpoint::Service(socket) => {
                let stream = UnixStream::connect(socket).await.map_err(|source| {
                    EstablishError::Fatal(ClientError::Connect {
                        hint: super::connect_hint::connect_hint(socket, &source),
                        socket: socket.clone(),
                        source,
                    })
                })?;
                let helper = socket.display().to_string();
                let (stream, decoder) = handshake(stream, hello, &helper).await?;
                Ok(Connection::start(
                    stream,
                    decoder,
                    None,
                    "confine-helper closed the connection",
                ))
            }
        }
    }

    fn start(
        stream: UnixStream,
        decoder: FrameDecoder,
        embedded: Option<(Child, u32)>,
        lost: &'static str,
    ) -> Connection {
        let helper_pid = embedded.as_ref().map(|(_, pid)| *pid);
        let shared = Arc::new(Shared {
            stream,
            routes: Mutex::new(Routes::default()),
            lost_detail: Mutex::new(None),
            embedded: Mutex::new(embedded),
            lost,
            verdicts: std::sync::OnceLock::new(),
        });
        let (outgoing, queue) = mpsc::unbounded_channel();
        tokio::spawn(write_frames(shared.clone(), queue));
        tokio::spawn(read_replies(shared.clone(), decoder));
        Connection {
            shared,
            outgoing,
            helper_pid,
        }
    }

    /// Whether requests may still be submitted.
    pub fn is_alive(&self) -> bool {
        !self.shared.routes().dead
    }

    /// Whether the helper has closed its end, seen on the socket itself, before the reader
    /// has come to it: a service closes a connection it finds idle, and a request queued on
    /// it then would be lost, where a new connection serves it.
    pub fn hung_up(&self) -> bool {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        let fd = std::os::fd::AsFd::as_fd(&self.shared.stream);
        // Hang-ups are reported whatever is asked for.
        let mut fds = [PollFd::new(fd, PollFlags::empty())];
        match poll(&mut fds, PollTimeout::ZERO) {
            Ok(_) => fds[0]
                .revents()
                .is_some_and(|r| r.intersects(PollFlags::POLLHUP | PollFlags::POLLERR)),
            Err(_) => false,
        }
    }

    /// The embedded helper's process id.
    pub fn helper_pid(&self) -> Option<u32> {
        self.helper_pid
    }

    /// Registers request `id` and queues its frame. On success the descriptors are taken from
    /// `fds` (the writer closes them once sent); on a dead connection they are left in place
    /// for the next attempt and the reason is returned.
    pub fn submit_spawn(
        &self,
        id: u64,
        frame: &[u8],
        fds: &mut Option<Vec<OwnedFd>>,
    ) -> Result<mpsc::UnboundedReceiver<Reply>, Lost> {
        let mut routes = self.shared.routes();
        if routes.dead {
            return Err(Lost::Dead(self.shared.lost));
        }
        let (replies, receiver) = mpsc::unbounded_channel();
        routes.commands.insert(
            id,
            Route {
                replies,
                started: false,
            },
        );
        // Queued under the lock: the writer only stops after the teardown has taken the lock,
        // so a registered request's frame is either sent or answered by the teardown.
        let outgoing = Outgoing {
            frame: frame.to_vec(),
            fds: fds.take().unwrap_or_default(),
        };
        // A failed send means the writer is gone; the teardown that stopped it will find the
        // route registered above once it takes the lock, so the request still gets its ending.
        let _ = self.outgoing.send(outgoing);
        Ok(receiver)
    }

    /// Sends the helper `cache`'s hints, before any request, and drops them from `cache` when
    /// a backend fails to build a command's confinement on this connection.
    pub fn hint(&self, cache: Arc<VerdictCache>) {
        let hints = cache.hints();
        let _ = self.shared.verdicts.set(cache);
        if hints.is_empty() {
            return;
        }
        match encode_frame(&Request::Hints(hints)) {
            Ok(frame) => {
                let _ = self.outgoing.send(Outgoing {
                    frame,
                    fds: Vec::new(),
                });
            }
            // Without hints the helper only probes.
            Err(e) => eprintln!("agentd: cannot encode the verdict hints: {e}"),
        }
    }

    /// Queues an `Info` request and returns where its answer will arrive.
    pub fn submit_info(&self) -> Result<oneshot::Receiver<Result<HelperInfo, Lost>>, Lost> {
        let frame = encode_frame(&Request::Info).map_err(Lost::Encode)?;
        let mut routes = self.shared.routes();
        if routes.dead {
            return Err(Lost::Dead(self.shared.lost));
        }
        let (answer, receiver) = oneshot::channel();
        routes.infos.push_back(answer);
        let _ = self.outgoing.send(Outgoing {
            frame,
            fds: Vec::new(),
        });
        Ok(receiver)
    }

    /// Why the connection ended, once it has: what a command that was waiting reports.
    pub fn lost(&self) -> Option<String> {
        self.shared
            .lost_detail
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Asks the helper to terminate request `id`'s tree. Does nothing once the request has
    /// ended or the connection is gone, so the helper is never asked about an id it finished.
    pub fn cancel(&self, id: u64, grace_ms: u32) {
        let routes = self.shared.routes();
        if routes.dead || !routes.commands.contains_key(&id) {
            return;
        }
        match encode_frame(&Request::Cancel(Cancel { id, grace_ms })) {
            Ok(frame) => {
                let _ = self.outgoing.send(Outgoing {
                    frame,
                    fds: Vec::new(),
                });
            }
            Err(e) => eprintln!("agentd: cannot encode a cancel request: {e}"),
        }
    }
}

impl Shared {
    fn routes(&self) -> MutexGuard<'_, Routes> {
        self.routes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Ends the connection once: every request in flight gets a local `RunnerFailed`. An
    /// embedded helper that went away is waited for first (briefly: it has closed the socket,
    /// so it is exiting), so that how it ended is part of what is reported, before any waiting
    /// caller hears of the failure.
    async fn end(&self, end: End) {
        let (commands, infos) = {
            let mut routes = self.routes();
            if routes.dead {
                return;
            }
            routes.dead = true;
            (
                std::mem::take(&mut routes.commands),
                std::mem::take(&mut routes.infos),
            )
        };
        // Wakes the other task (and, for an embedded helper, tells it to exit): the socket is
        // useless to both once either side has given up on it.
        let _ =
            nix::sys::socket::shutdown(self.stream.as_raw_fd(), nix::sys::socket::Shutdown::Both);
        let mut detail = match &end {
            End::Dropped | End::Closed => self.lost.to_owned(),
            End::Io(e) => format!("{}: connection error: {e}", self.lost),
            End::Protocol(e) => format!("{}: protocol error: {e}", self.lost),
        };
        let embedded = self
            .embedded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some((mut child, pid)) = embedded {
            match end {
                End::Dropped => super::embedded::reap(child, pid),
                _ => match super::embedded::ended(&mut child).await {
                    Some(Some(how)) => detail = format!("{detail}: it {how}"),
                    Some(None) => {}
                    None => super::embedded::reap(child, pid),
                },
            }
        }
        if !matches!(end, End::Dropped) {
            let in_flight = commands.len() + infos.len();
            eprintln!("agentd: {detail} ({in_flight} request(s) in flight)");
        }
        // Each waiting command hears of it when its route closes, and asks `lost` why.
        *self
            .lost_detail
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(detail.clone());
        drop(commands);
        for answer in infos {
            let _ = answer.send(Err(Lost::Ended(detail.clone())));
        }
    }

    /// Hands one reply to whoever waits for it. An error is a protocol violation.
    fn dispatch(&self, reply: Reply) -> Result<(), Violation> {
        let mut routes = self.routes();
        let Some(id) = reply.request_id() else {
            let Reply::Info(info) = reply else {
                return Err(Violation::NoRequestId);
            };
            let Some(answer) = routes.infos.pop_front() else {
                return Err(Violation::UnaskedInfo);
            };
            let _ = answer.send(Ok(info));
            return Ok(());
        };
        let Some(route) = routes.commands.get_mut(&id) else {
            return Err(Violation::UnknownRequest(id));
        };
        if let Reply::RunnerFailed(failed) = &reply
            && failed.stage.builds_confinement()
            && let Some(cache) = self.verdicts.get()
        {
            cache.forget();
        }
        if let Reply::Started(_) = reply {
            if route.started {
                return Err(Violation::SecondStarted(id));
            }
            route.started = true;
            let _ = route.replies.send(reply);
            return Ok(());
        }
        if let Some(route) = routes.commands.remove(&id) {
            // The handle may have been dropped; the route is gone either way.
            let _ = route.replies.send(reply);
        }
        Ok(())
    }
}

/// Sends our greeting, reads the helper's, and checks they match. Returns the stream and any
/// bytes that arrived after the greeting. A service that refuses the connection sends a
/// refusal instead and closes, perhaps before our greeting is written: it is read all the same,
/// and its reason is the error.
async fn handshake(
    mut stream: UnixStream,
    hello: &Hello,
    helper: &str,
) -> Result<(UnixStream, FrameDecoder), EstablishError> {
    let exchange = async {
        let frame =
            encode_frame(hello).map_err(|e| EstablishError::Fatal(ClientError::BadGreeting(e)))?;
        // Why our greeting could not be written, when the helper had gone: its own may wait.
        let unwritten = match stream.write_all(&frame).await {
            Ok(()) => None,
            Err(e) => match closed_or_fatal(e) {
                EstablishError::ClosedEarly(why) => Some(why),
                fatal => return Err(fatal),
            },
        };
        let mut decoder = FrameDecoder::new();
        let mut buf = [0u8; 4096];
        let payload = loop {
            match decoder.next_payload() {
                Ok(Some(payload)) => break payload,
                Ok(None) => {}
                Err(e) => return Err(EstablishError::Fatal(ClientError::BadGreeting(e))),
            }
            let read = stream.read(&mut buf).await;
            let read = match read.and_then(|n| socket_io::filled(&buf, n)) {
                Ok(read) => read,
                Err(e) => return Err(closed_or_fatal(e)),
            };
            if read.is_empty() {
                return Err(EstablishError::ClosedEarly(
                    match (unwritten, decoder.finish()) {
                        (Some(why), _) => why,
                        (None, Ok(())) => "end of file".to_owned(),
                        (None, Err(e)) => e.to_string(),
                    },
                ));
            }
            if let Err(e) = decoder.feed(read) {
                return Err(EstablishError::Fatal(ClientError::BadGreeting(e)));
            }
        };
        let peer: Hello = decode_payload(&payload)
            .map_err(|e| EstablishError::Fatal(ClientError::BadGreeting(e)))?;
        if let Some(reason) = peer.refused() {
            return Err(EstablishError::Fatal(ClientError::Refused {
                reason: crate::terminal::one_line(reason, Some(MAX_REFUSAL_CHARS)),
            }));
        }
        check_hello(hello, &peer).map_err(|e| EstablishError::Fatal(e.into()))?;
        Ok(decoder)
    };
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, exchange).await {
        Ok(Ok(decoder)) => Ok((stream, decoder)),
        Ok(Err(error)) => Err(error),
        Err(_) => Err(EstablishError::Fatal(ClientError::HandshakeTimeout {
            helper: helper.to_owned(),
            seconds: HANDSHAKE_TIMEOUT.as_secs(),
        })),
    }
}

/// A reset or broken pipe during the handshake means the helper went away; anything else would
/// recur on a retry.
fn closed_or_fatal(e: io::Error) -> EstablishError {
    match e.kind() {
        io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe => {
            EstablishError::ClosedEarly(e.to_string())
        }
        _ => EstablishError::Fatal(ClientError::HandshakeIo(e)),
    }
}

async fn write_frames(shared: Arc<Shared>, mut queue: mpsc::UnboundedReceiver<Outgoing>) {
    while let Some(Outgoing { frame, fds }) = queue.recv().await {
        let sent = socket_io::send_with_fds(&shared.stream, &frame, &fds).await;
        // agentd's copies must close now: the pipes reach end-of-file only when every writer,
        // including the one agentd held, has let go.
        drop(fds);
        if let Err(e) = sent {
            shared.end(End::Io(e)).await;
            return;
        }
    }
    shared.end(End::Dropped).await;
}

async fn read_replies(shared: Arc<Shared>, mut decoder: FrameDecoder) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        loop {
            match decoder.next_message::<Reply>() {
                Ok(Some(reply)) => {
                    if let Err(e) = shared.dispatch(reply) {
                        shared.end(End::Protocol(e.to_string())).await;
                        return;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    shared.end(End::Protocol(e.to_string())).await;
                    return;
                }
            }
        }
        let read = socket_io::read_some(&shared.stream, &mut buf).await;
        match read.and_then(|n| socket_io::filled(&buf, n)) {
            Ok([]) => {
                let end = match decoder.finish() {
                    Ok(()) => End::Closed,
                    Err(e) => End::Protocol(e.to_string()),
                };
                shared.end(end).await;
                return;
            }
            Ok(read) => {
                if let Err(e) = decoder.feed(read) {
                    shared.end(End::Protocol(e.to_string())).await;
                    return;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {
                shared.end(End::Closed).await;
                return;
            }
            Err(e) => {
                shared.end(End::Io(e)).await;
                return;
            }
        }
    }
}
