//! Test doubles shared by the unit tests: a fake confine-helper that speaks the protocol from a
//! blocking thread, scratch directories, and a deadline so a broken test fails instead of hanging.

use std::collections::VecDeque;
use std::future::Future;
use std::io::{IoSliceMut, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::time::Duration;

use confine_protocol::{
    Backend, Cap, Caps, Ending, Enforcement, ExitStatus, Exited, FrameDecoder, Hello, Layer,
    Refusal, Refused, Reply, Request, Usage, decode_payload, encode_frame,
};
use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};

use crate::command::Facts;
use crate::helper_client::{FailedAt, HelperClient, HelperEndpoint, Outcome, RunnerFailed};
use crate::model::{AssistantTurn, ChatRequest, Delta, Deltas, ModelError, Provider};

/// Fails a test that would otherwise hang.
pub async fn within<F: Future>(future: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(20), future)
        .await
        .expect("the test finished in time")
}

/// A fake helper on a thread of its own, for a test whose runtime must not wait for it: a
/// blocking task that never ends (a fake helper left waiting for a connection by a failed
/// test) keeps the runtime, and so the whole test binary, from ending.
pub struct FakeHelper(tokio::sync::oneshot::Receiver<()>);

impl FakeHelper {
    pub fn start(body: impl FnOnce() + Send + 'static) -> FakeHelper {
        let (done, finished) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            body();
            let _ = done.send(());
        });
        FakeHelper(finished)
    }

    /// Waits for the fake helper's end; a panic of its own (the sender dropped unsent) or a
    /// hang fails the test.
    pub async fn finished(self) {
        within(self.0)
            .await
            .expect("the fake helper ended without a panic");
    }
}

/// What `provider` answers `req`, with every delta it delivered on the way, in order.
pub async fn answer_of(
    provider: &dyn Provider,
    req: &ChatRequest,
) -> (Vec<Delta>, Result<AssistantTurn, ModelError>) {
    let (mut deltas, mut reader) = Deltas::channel();
    let answering = async move { provider.complete(req, &mut deltas).await };
    let reading = async {
        let mut all = Vec::new();
        while let Some(delta) = reader.recv().await {
            all.push(delta);
        }
        all
    };
    let (answer, delivered) = tokio::join!(answering, reading);
    (delivered, answer)
}

/// A scratch directory removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("agentd-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create scratch dir");
        Scratch(dir)
    }

    /// A directory `name` in the scratch directory, created.
    pub fn dir(&self, name: &str) -> PathBuf {
        let dir = self.0.join(name);
        std::fs::create_dir_all(&dir).expect("create dir");
        dir
    }

    /// An executable shell script. Another process writes it: a descriptor open for writing
    /// in this process would be copied into any child another test forks meanwhile, and while
    /// that child has not yet executed its program, running the script fails with `ETXTBSY`.
    pub fn script(&self, name: &str, body: &str) -> PathBuf {
        let path = self.0.join(name);
        let written = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(r#"printf '%s\n' "$1" > "$0" && chmod 755 "$0""#)
            .arg(&path)
            .arg(format!("#!/bin/sh\n{body}"))
            .status()
            .expect("start sh to write the script");
        assert!(written.success(), "writing {} failed", path.display());
        path
    }
}

/// A workspace (with a `src` directory) inside a scratch directory, by its canonical path, and
/// `outside` beside it.
pub fn workspace(name: &str) -> (Scratch, PathBuf, PathBuf) {
    let scratch = Scratch::new(name);
    let root = std::fs::canonicalize(&scratch.0).expect("canonical scratch");
    let ws = root.join("ws");
    let outside = root.join("outside");
    std::fs::create_dir_all(ws.join("src")).expect("mkdir ws");
    std::fs::create_dir_all(&outside).expect("mkdir outside");
    (scratch, ws, outside)
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The tools of a session in `workspace` whose helper is never reached (a socket in `scratch`
/// nobody listens on), with the editor's reads `client_fs`: what the fence and the editor do
/// before any helper would be asked.
pub fn offline_tools(
    scratch: &Scratch,
    workspace: PathBuf,
    client_fs: Option<std::sync::Arc<dyn crate::tools::ClientFs>>,
) -> crate::tools::ToolEnv {
    crate::tools::ToolEnv::new(
        HelperClient::new(crate::helper_client::HelperEndpoint::Service(
            scratch.0.join("no-helper.sock"),
        )),
        workspace,
        Vec::new(),
        confine_protocol::Network::Deny,
        confine_protocol::BackendChoice::Auto,
        client_fs,
    )
}

/// A listening fake helper and the client pointed at it.
pub fn fake_service(scratch: &Scratch) -> (UnixListener, HelperClient) {
    let socket = scratch.0.join("helper.sock");
    let listener = UnixListener::bind(&socket).expect("bind");
    (listener, HelperClient::new(HelperEndpoint::Service(socket)))
}

/// The fake helper's side of one connection (blocking I/O, on a blocking thread).
pub struct Peer {
    stream: UnixStream,
    decoder: FrameDecoder,
    /// Descriptors received so far, in arrival order.
    pub fds: VecDeque<OwnedFd>,
}

impl Peer {
    /// Accepts a connection and answers the handshake with `hello`.
    pub fn accept_with(listener: &UnixListener, hello: &Hello) -> Peer {
        let (mut stream, _) = listener.accept().expect("accept");
        stream
            .write_all(&encode_frame(hello).expect("encode hello"))
            .expect("send hello");
        let mut peer = Peer {
            stream,
            decoder: FrameDecoder::new(),
            fds: VecDeque::new(),
        };
        let payload = peer.next_payload().expect("agentd's hello");
        let theirs: Hello = decode_payload(&payload).expect("decode hello");
        assert!(theirs.software.starts_with("agentd "), "{theirs:?}");
        peer
    }

    pub fn accept(listener: &UnixListener) -> Peer {
        Peer::accept_with(listener, &Hello::ours("fake-helper"))
    }

    fn next_payload(&mut self) -> Option<Vec<u8>> {
        loop {
            if let Some(payload) = self.decoder.next_payload().expect("well-formed frames") {
                return Some(payload);
            }
            let mut buf = [0u8; 4096];
            let mut space = nix::cmsg_space!([RawFd; 3]);
            let mut iov = [IoSliceMut::new(&mut buf)];
            let msg = recvmsg::<()>(
                self.stream.as_raw_fd(),
                &mut iov,
                Some(&mut space),
                // macOS has no such flag; these tests' descriptors are closed when they end.
                #[cfg(target_os = "linux")]
                MsgFlags::MSG_CMSG_CLOEXEC,
                #[cfg(target_os = "macos")]
                MsgFlags::empty(),
            )
            .expect("recvmsg");
            for cmsg in msg.cmsgs().expect("cmsgs") {
                if let ControlMessageOwned::ScmRights(fds) = cmsg {
                    for fd in fds {
                        // SAFETY: SCM_RIGHTS just installed this descriptor in our table; it
                        // is owned by nothing else.
                        self.fds.push_back(unsafe { OwnedFd::from_raw_fd(fd) });
                    }
                }
            }
            let n = msg.bytes;
            if n == 0 {
                return None;
            }
            self.decoder.feed(&buf[..n]).expect("valid prefix");
        }
    }

    pub fn request(&mut self) -> Option<Request> {
        self.next_payload()
            .map(|payload| decode_payload(&payload).expect("a Request"))
    }

    pub fn spawn(&mut self) -> confine_protocol::Spawn {
        match self.request() {
            Some(Request::Spawn(spawn)) => spawn,
            other => panic!("expected a Spawn, got {other:?}"),
        }
    }

    /// Closes the connection as the service does, seen by agentd at once: the shutdown acts
    /// on the socket itself, where a close only drops this descriptor and the socket lives
    /// on while a process another test is starting still holds a copy of it (between its
    /// fork and its exec), so its hang-up would come late.
    pub fn hang_up(self) {
        self.stream
            .shutdown(std::net::Shutdown::Both)
            .expect("shut the connection down");
    }

    pub fn send(&mut self, reply: &Reply) {
        self.stream
            .write_all(&encode_frame(reply).expect("encode reply"))
            .expect("send reply");
    }
}

pub fn exited(id: u64, code: i32, ending: Ending) -> Reply {
    Reply::Exited(confine_protocol::Exited {
        id,
        status: ExitStatus::Code(code),
        exec_errno: None,
        ending,
        backend: Backend::None,
        enforcement: None,
        layers: Vec::new(),
        usage: Usage {
            wall_us: 0,
            user_us: 0,
            sys_us: 0,
            max_rss_kib: 0,
        },
        caps: Caps {
            processes: None,
            memory: None,
        },
    })
}

/// The `Exited` message of a command confined by bwrap with every layer, fully enforced.
pub fn confined_exit(status: ExitStatus, ending: Ending) -> Exited {
    Exited {
        id: 1,
        status,
        exec_errno: None,
        ending,
        backend: Backend::Bwrap,
        enforcement: Some(Enforcement::Full),
        layers: vec![Layer::Namespaces, Layer::Landlock, Layer::Seccomp],
        usage: Usage {
            wall_us: 1,
            user_us: 1,
            sys_us: 1,
            max_rss_kib: 1,
        },
        caps: Caps {
            processes: Some(Cap {
                max: 2048,
                reached: None,
            }),
            memory: None,
        },
    }
}

/// The facts of a command whose runner failed at `stage`.
pub fn runner_failed(stage: impl Into<FailedAt>, errno: i32, detail: &str) -> Facts {
    Facts::from_outcome(
        Outcome::RunnerFailed(RunnerFailed {
            id: 1,
            stage: stage.into(),
            errno,
            detail: detail.to_owned(),
        }),
        false,
    )
}

/// The facts of a command the helper refused, with `reason` as the refusal's whole sentence
/// (a ceiling that cannot be read says just its error).
pub fn refused(reason: &str) -> Facts {
    Facts::from_outcome(
        Outcome::Refused(Refused {
            id: 1,
            reason: Refusal::CeilingBroken {
                why: reason.to_owned(),
            },
        }),
        false,
    )
}

/// A command's output pipe as agentd makes one (both ends close-on-exec, on every platform).
pub fn pipe() -> (tokio::net::unix::pipe::Receiver, OwnedFd) {
    crate::command::output_pipe().expect("pipe")
}

/// A session log in memory, starting with its `session/created` header.
#[derive(Debug)]
pub struct MemoryLog(std::sync::Mutex<Vec<crate::session::Record>>);

impl MemoryLog {
    pub fn new() -> MemoryLog {
        let log = MemoryLog(std::sync::Mutex::new(Vec::new()));
        log.push(crate::session::Event::SessionCreated {
            id: "test".into(),
            cwd: "/w".into(),
            agent: "agentd test".into(),
        });
        log
    }

    /// Appends an event (unsynced) and returns nothing: for setting a log up.
    pub fn push(&self, event: crate::session::Event) {
        crate::session::SessionLog::append(self, event, false).expect("append");
    }

    /// The events so far, without their record envelopes.
    pub fn events(&self) -> Vec<crate::session::Event> {
        self.0
            .lock()
            .expect("log")
            .iter()
            .map(|r| r.event.clone())
            .collect()
    }
}

impl crate::session::SessionLog for MemoryLog {
    fn records(&self) -> Vec<crate::session::Record> {
        self.0.lock().expect("log").clone()
    }

    fn append(
        &self,
        event: crate::session::Event,
        _sync: bool,
    ) -> Result<crate::session::Record, crate::session::LogError> {
        let mut records = self.0.lock().expect("log");
        let record = crate::session::Record {
            v: crate::session::EVENT_VERSION,
            seq: records.len() as u64,
            at_ms: 1000 + records.len() as u64,
            agent: None,
            event,
        };
        records.push(record.clone());
        Ok(record)
    }
}

/// A top-level record of `event` with sequence number `seq`, at time 0.
pub fn record(seq: u64, event: crate::session::Event) -> crate::session::Record {
    crate::session::Record {
        v: crate::session::EVENT_VERSION,
        seq,
        at_ms: 0,
        agent: None,
        event,
    }
}
