//! `Policy::unix_sockets` on the real kernel: a confined command reaches the Unix sockets its
//! request lists and no other, whatever it does to the address while the shim judges it, under
//! bwrap and under the helper's own namespaces, which both keep the list. Each host socket is
//! served by a thread here that counts its connections, so "not reached" is a fact of the host,
//! not of the command's output.

// Linux only: these tests drive the bwrap, namespace and Landlock backends, `/proc` or Linux's
// own system calls. On macOS `macos_supervision.rs` drives the helper.
#![cfg(target_os = "linux")]

mod support;

use std::io::Write;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use confine_protocol::{Backend, BackendChoice, Mode, Network, Reply, Spawn};
use support::skip::{Need, skip, skip_part};
use support::{Peer, Scratch, available, backend_works, run_captured, spawn};

/// A host socket that answers every connection with its name and counts them.
struct Server {
    count: Arc<AtomicUsize>,
}

impl Server {
    fn start(path: &Path, name: &'static str) -> Server {
        let listener = UnixListener::bind(path).expect("bind host socket");
        let count = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&count);
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                seen.fetch_add(1, Ordering::SeqCst);
                let _ = stream.write_all(name.as_bytes());
            }
        });
        Server { count }
    }

    fn connections(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }
}

/// The backends that keep the list: bwrap, and the helper's own namespaces.
const KEEPING: [BackendChoice; 2] = [BackendChoice::Bwrap, BackendChoice::Namespaces];

/// Whether python3, which the confined commands run, is installed and `backend` works here
/// (judged without the helper); a SKIP line for `test` when not.
fn can_run(test: &str, backend: BackendChoice) -> bool {
    if !available::on_path("python3") {
        skip(
            test,
            Need::Python3,
            "python3 is not installed (apt-get install python3)",
        );
        return false;
    }
    match backend_works(backend) {
        Ok(()) => true,
        Err((need, why)) => {
            skip(test, need, why);
            false
        }
    }
}

/// The backends of [`KEEPING`] that work here (judged without the helper), when python3, which
/// the confined commands run, is installed; a SKIP line for `test` for each one missing, and
/// for the whole test when none can run.
fn keeping_backends(test: &str) -> Vec<BackendChoice> {
    if !available::on_path("python3") {
        skip(
            test,
            Need::Python3,
            "python3 is not installed (apt-get install python3)",
        );
        return Vec::new();
    }
    support::namespace_backends(test)
}

/// A read-only command confined by `backend` running `script` with python3, listing `listed`.
fn confined(script: &str, listed: &[&Path], backend: BackendChoice) -> Spawn {
    let mut request = spawn(1, &["python3", "-c", script]);
    request.policy.mode = Mode::ReadOnly;
    request.policy.network = Network::Deny;
    request.backend = backend;
    request.policy.unix_sockets = listed
        .iter()
        .map(|p| p.as_os_str().as_encoded_bytes().to_vec())
        .collect();
    request
}

fn exit_code(replies: &[Reply]) -> Option<i32> {
    replies.iter().find_map(|r| match r {
        Reply::Exited(e) => match e.status {
            confine_protocol::ExitStatus::Code(c) => Some(c),
            _ => None,
        },
        _ => None,
    })
}

/// The backend the command's facts name, when it ran.
fn ran_under(replies: &[Reply]) -> Option<Backend> {
    replies.iter().find_map(|r| match r {
        Reply::Exited(e) => Some(e.backend),
        _ => None,
    })
}

fn refusal(replies: &[Reply]) -> Option<String> {
    replies.iter().find_map(|r| match r {
        Reply::Refused(r) => Some(r.reason.to_string()),
        _ => None,
    })
}

/// Connects to each path given in argv, from a thread that is not the process's first (whose
/// descriptor table the shim must still find), and prints `NAME ok REPLY` or `NAME err ERRNO`.
const CONNECT_EACH: &str = r#"
import socket, sys, threading
def connect_each():
    for path in sys.argv[1:]:
        label = path.rsplit('/', 1)[-1] if not path.startswith('@') else path
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        except OSError as e:
            print(label, 'socket-err', e.errno); continue
        try:
            s.connect(path.replace('@', '\0', 1) if path.startswith('@') else path)
            print(label, 'ok', s.recv(64).decode())
        except OSError as e:
            print(label, 'err', e.errno)
t = threading.Thread(target=connect_each); t.start(); t.join()
try:
    socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    print('dgram ok')
except OSError as e:
    print('dgram err', e.errno)
"#;

fn run_script(peer: &mut Peer, request: Spawn, args: &[&Path]) -> (Vec<Reply>, String) {
    let mut request = request;
    request.argv.extend(
        args.iter()
            .map(|p| p.as_os_str().as_encoded_bytes().to_vec()),
    );
    run_captured(peer, request)
}

#[test]
fn a_listed_socket_is_reached_and_no_other_is() {
    let mut peer = Peer::embedded();
    peer.greet();
    for backend in keeping_backends("a_listed_socket_is_reached_and_no_other_is") {
        listed_socket_reached_and_no_other(&mut peer, backend);
    }
}

/// [`a_listed_socket_is_reached_and_no_other_is`] under `backend`.
fn listed_socket_reached_and_no_other(peer: &mut Peer, backend: BackendChoice) {
    let dir = Scratch::new("unix-sockets");
    let allowed_path = dir.0.join("allowed.sock");
    let other_path = dir.0.join("other.sock");
    let alias = dir.0.join("alias.sock");
    let allowed = Server::start(&allowed_path, "hello-allowed");
    let other = Server::start(&other_path, "hello-other");
    std::os::unix::fs::symlink(&other_path, &alias).expect("symlink");
    let abstract_name = Path::new("@confine-helper-test-abstract");
    let targets = [
        allowed_path.as_path(),
        other_path.as_path(),
        alias.as_path(),
        abstract_name,
    ];

    let (replies, out) = run_script(
        peer,
        confined(CONNECT_EACH, &[&allowed_path], backend),
        &targets,
    );
    assert_eq!(
        exit_code(&replies),
        Some(0),
        "{backend:?}: {replies:?}\n{out}"
    );
    assert!(
        out.contains("allowed.sock ok hello-allowed"),
        "{backend:?}: {out}"
    );
    assert!(out.contains("other.sock err 1\n"), "{backend:?}: {out}");
    // A link to an unlisted socket is judged by its name, not followed by the shim.
    assert!(out.contains("alias.sock err 1\n"), "{backend:?}: {out}");
    // Abstract names are the sandbox's own network namespace's: nothing is bound there.
    assert!(
        out.contains("@confine-helper-test-abstract err 111"),
        "{backend:?}: {out}"
    );
    // Datagram sockets reach any named socket through sendto: never created.
    assert!(out.contains("dgram err 1"), "{backend:?}: {out}");
    assert_eq!(allowed.connections(), 1, "{backend:?}: {out}");
    assert_eq!(other.connections(), 0, "{backend:?}: {out}");

    // Control: without the list, no Unix socket is even created, and nothing is reached.
    let (replies, out) = run_script(peer, confined(CONNECT_EACH, &[], backend), &targets[..1]);
    assert_eq!(
        exit_code(&replies),
        Some(0),
        "{backend:?}: {replies:?}\n{out}"
    );
    assert!(
        out.contains("allowed.sock socket-err 1"),
        "{backend:?}: {out}"
    );
    assert_eq!(allowed.connections(), 1, "{backend:?}: {out}");

    // Control: the other socket answers when it is the one listed.
    let (replies, out) = run_script(
        peer,
        confined(CONNECT_EACH, &[&other_path], backend),
        &targets[1..2],
    );
    assert_eq!(
        exit_code(&replies),
        Some(0),
        "{backend:?}: {replies:?}\n{out}"
    );
    assert!(
        out.contains("other.sock ok hello-other"),
        "{backend:?}: {out}"
    );
    assert_eq!(other.connections(), 1, "{backend:?}: {out}");
}

/// Connects to the path in argv[1] after saying whether the command sees anything there, and
/// prints `visible BOOL`, then `ok REPLY` or `err ERRNO`.
const CONNECT_HIDDEN: &str = r#"
import os, socket, sys
print('visible', os.path.exists(sys.argv[1]))
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sys.argv[1])
    print('ok', s.recv(64).decode())
except OSError as e:
    print('err', e.errno)
"#;

/// A listed socket is looked up in the host's tree, not the command's: one under the host's
/// `/tmp` is reached from a workspace-write command, whose own `/tmp` is private and does not
/// show it. The control: the same command, listing another socket there instead, is refused
/// it and reaches nothing.
#[test]
fn a_listed_socket_under_the_hosts_tmp_is_reached_from_a_command_whose_tmp_is_its_own() {
    const NAME: &str =
        "a_listed_socket_under_the_hosts_tmp_is_reached_from_a_command_whose_tmp_is_its_own";
    let backends = keeping_backends(NAME);
    if backends.is_empty() {
        return;
    }
    let mut peer = Peer::embedded();
    peer.greet();
    // Under the host's /tmp itself, whatever the temp directory of this run is.
    let host_tmp = Scratch(Path::new("/tmp").join(format!(
        "confine-helper-test-host-tmp-socket-{}",
        std::process::id()
    )));
    std::fs::create_dir_all(&host_tmp.0).expect("a directory under /tmp");
    let listed_path = host_tmp.0.join("listed.sock");
    let decoy_path = host_tmp.0.join("decoy.sock");
    let listed = Server::start(&listed_path, "hello-from-host-tmp");
    let decoy = Server::start(&decoy_path, "hello-decoy");
    let ws = Scratch::new("unix-host-tmp-ws");
    let ws_bytes = std::fs::canonicalize(&ws.0)
        .expect("canonical")
        .as_os_str()
        .as_encoded_bytes()
        .to_vec();
    let request = |listing: &Path, backend| {
        let mut request = confined(CONNECT_HIDDEN, &[listing], backend);
        request.policy.mode = Mode::WorkspaceWrite;
        request.policy.workspace_root = Some(ws_bytes.clone());
        request.cwd = ws_bytes.clone();
        request
    };
    for backend in backends {
        let reached = listed.connections();
        let (replies, out) = run_script(&mut peer, request(&listed_path, backend), &[&listed_path]);
        assert_eq!(
            exit_code(&replies),
            Some(0),
            "{backend:?}: {replies:?}\n{out}"
        );
        let expected = match backend {
            BackendChoice::Bwrap => Backend::Bwrap,
            _ => Backend::Namespaces,
        };
        assert_eq!(ran_under(&replies), Some(expected), "{replies:?}");
        // The command's /tmp is its own: nothing of the host's is there.
        assert!(out.contains("visible False\n"), "{backend:?}: {out}");
        assert!(out.contains("ok hello-from-host-tmp"), "{backend:?}: {out}");
        assert_eq!(listed.connections(), reached + 1, "{backend:?}: {out}");

        // The control: listing the decoy beside it, the same connect is refused.
        let (replies, out) = run_script(&mut peer, request(&decoy_path, backend), &[&listed_path]);
        assert_eq!(
            exit_code(&replies),
            Some(0),
            "{backend:?}: {replies:?}\n{out}"
        );
        assert!(out.contains("visible False\n"), "{backend:?}: {out}");
        assert!(out.contains("err 1\n"), "{backend:?}: {out}");
        assert_eq!(listed.connections(), reached + 1, "{backend:?}: {out}");
        assert_eq!(decoy.connections(), 0, "{backend:?}: {out}");
    }
}

/// One thread rewrites the address buffer between the listed and an unlisted path while the
/// main thread calls `connect(2)` with it, over and over: the shim reads the address once, so a
/// connect either is refused or reaches the listed socket, never the other one.
const FLIP_WHILE_CONNECTING: &str = r#"
import ctypes, socket, struct, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
allowed, other = sys.argv[1].encode(), sys.argv[2].encode()
def addr(path):
    return struct.pack('H', socket.AF_UNIX) + path + b'\0' * (108 - len(path))
a, o = addr(allowed), addr(other)
buf = ctypes.create_string_buffer(a, len(a))
stop = False
def flip():
    while not stop:
        ctypes.memmove(buf, o, len(o))
        ctypes.memmove(buf, a, len(a))
t = threading.Thread(target=flip); t.start()
reached, refused = 0, 0
for _ in range(400):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if libc.connect(s.fileno(), buf, len(a)) == 0:
        got = s.recv(64).decode()
        if got != 'hello-allowed':
            print('REACHED', got)
        reached += 1
    else:
        refused += 1
    s.close()
stop = True; t.join()
print('reached', reached, 'refused', refused)
"#;

#[test]
fn an_address_rewritten_while_it_is_judged_never_reaches_an_unlisted_socket() {
    const NAME: &str = "an_address_rewritten_while_it_is_judged_never_reaches_an_unlisted_socket";
    let mut peer = Peer::embedded();
    peer.greet();
    for backend in keeping_backends(NAME) {
        address_rewritten_never_reaches_unlisted(&mut peer, backend);
    }
}

/// [`an_address_rewritten_while_it_is_judged_never_reaches_an_unlisted_socket`] under
/// `backend`.
fn address_rewritten_never_reaches_unlisted(peer: &mut Peer, backend: BackendChoice) {
    let dir = Scratch::new("unix-race");
    let allowed_path = dir.0.join("a.sock");
    let other_path = dir.0.join("o.sock");
    let allowed = Server::start(&allowed_path, "hello-allowed");
    let other = Server::start(&other_path, "hello-other");
    let (replies, out) = run_script(
        peer,
        confined(FLIP_WHILE_CONNECTING, &[&allowed_path], backend),
        &[&allowed_path, &other_path],
    );
    assert_eq!(
        exit_code(&replies),
        Some(0),
        "{backend:?}: {replies:?}\n{out}"
    );
    assert!(!out.contains("REACHED"), "{backend:?}: {out}");
    assert_eq!(other.connections(), 0, "{backend:?}: {out}");
    let counts: Vec<usize> = out
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    let [reached, refused] = counts[..] else {
        panic!("{backend:?}: no counts in {out}");
    };
    assert_eq!(reached + refused, 400, "{backend:?}: {out}");
    assert_eq!(allowed.connections(), reached, "{backend:?}: {out}");
    // The race was run: both addresses reached the shim, so a connect that got the other
    // socket would have been seen.
    assert!(reached > 0 && refused > 0, "{backend:?}: {out}");
}

#[test]
fn backends_and_modes_that_cannot_keep_the_list_refuse_it() {
    const NAME: &str = "backends_and_modes_that_cannot_keep_the_list_refuse_it";
    let mut peer = Peer::embedded();
    peer.greet();
    let dir = Scratch::new("unix-refusals");
    let sock = dir.0.join("s.sock");
    let _server = Server::start(&sock, "x");

    let landlock = confined("pass", &[&sock], BackendChoice::Landlock);
    let (replies, _) = run_captured(&mut peer, landlock);
    match available::landlock() {
        Ok(()) => {
            let reason = refusal(&replies).unwrap_or_else(|| panic!("not refused: {replies:?}"));
            assert!(reason.contains("private network namespace"), "{reason}");
        }
        // No Landlock here: the request fails as unavailable, still not run.
        Err(why) => {
            assert!(
                replies.iter().any(|r| matches!(r, Reply::RunnerFailed(_))),
                "{replies:?}"
            );
            skip_part(NAME, "the Landlock refusal", Need::Landlock, why);
        }
    }

    for backend in KEEPING {
        match backend_works(backend) {
            Ok(()) => refusals_of_a_keeping_backend(&mut peer, &dir.0, &sock, backend),
            Err((need, why)) => skip_part(NAME, &format!("{backend:?}"), need, why),
        }
    }
}

/// The refusals of a backend that keeps the list, each with `sock` (served, in `dir`) or a path
/// beside it, and the control that the same socket, listed in read-only mode, runs.
fn refusals_of_a_keeping_backend(peer: &mut Peer, dir: &Path, sock: &Path, backend: BackendChoice) {
    let mut networked = confined("pass", &[sock], backend);
    networked.policy.network = Network::Allow;
    let reason = refusal(&run_captured(peer, networked).0).expect("refused");
    assert!(
        reason.contains("needs the network denied"),
        "{backend:?}: {reason}"
    );

    let relative = confined("pass", &[Path::new("s.sock")], backend);
    let reason = refusal(&run_captured(peer, relative).0).expect("refused");
    assert!(
        reason.contains("is not an absolute path"),
        "{backend:?}: {reason}"
    );

    let file = dir.join("plain");
    std::fs::write(&file, "").expect("write");
    let not_socket = confined("pass", &[&file], backend);
    let reason = refusal(&run_captured(peer, not_socket).0).expect("refused");
    assert!(reason.contains("is not a socket"), "{backend:?}: {reason}");

    // A socket where the command may write could be replaced by another one.
    let mut inside = confined("pass", &[sock], backend);
    inside.policy.mode = Mode::WorkspaceWrite;
    inside.policy.workspace_root = Some(dir.as_os_str().as_encoded_bytes().to_vec());
    inside.cwd = inside.policy.workspace_root.clone().expect("root");
    let reason = refusal(&run_captured(peer, inside).0).expect("refused");
    assert!(
        reason.contains("which the command may write"),
        "{backend:?}: {reason}"
    );

    // Control: the same socket, listed in read-only mode, runs.
    let (replies, _) = run_captured(peer, confined("pass", &[sock], backend));
    assert_eq!(exit_code(&replies), Some(0), "{backend:?}: {replies:?}");
}

/// Under Landlock the command shares the host's network: with the allow-list it reaches the
/// proxy (the requester's end of `Spawn::proxy` receives a real TCP socket) and nothing else.
const PROXY_CLIENT: &str = r#"
import socket, sys
canary = int(sys.argv[1])
def attempt(label, action):
    try:
        print(label, 'ok', action(), flush=True)
    except OSError as e:
        print(label, 'err', e.errno, flush=True)
def proxy():
    s = socket.create_connection(('127.0.0.1', 3128), timeout=5)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(b'GET http://example.test/ HTTP/1.0\r\n\r\n')
    return s.recv(64).decode().split()[-1]
attempt('proxy', proxy)
attempt('direct', lambda: socket.create_connection(('127.0.0.1', canary), timeout=5) and 'reached')
attempt('udp', lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM) and 'made')
attempt('sctp', lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM, 132) and 'made')
attempt('tcp', lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP) and 'made')
def listen():
    s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); return 'listening'
attempt('listen', listen)
def fastopen():
    s = socket.socket()
    return s.sendto(b'x', socket.MSG_FASTOPEN, ('127.0.0.1', canary))
attempt('fastopen', fastopen)
"#;

#[test]
fn under_landlock_the_allow_list_reaches_the_proxy_and_nothing_else() {
    use std::io::{BufRead, BufReader};
    use std::net::TcpListener;
    use std::os::fd::AsFd;

    const NAME: &str = "under_landlock_the_allow_list_reaches_the_proxy_and_nothing_else";
    if !can_run(NAME, BackendChoice::Landlock) {
        return;
    }
    let mut peer = Peer::embedded();
    peer.greet();
    let canary = TcpListener::bind("127.0.0.1:0").expect("canary");
    canary.set_nonblocking(true).expect("nonblocking");
    let canary_port = canary.local_addr().expect("port").port();

    // The requester's end: every socket passed over it is served one answer.
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().expect("pair");
    let served = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&served);
    std::thread::spawn(move || {
        loop {
            let mut byte = [0u8; 1];
            let mut iov = [std::io::IoSliceMut::new(&mut byte)];
            let mut space = nix::cmsg_space!([std::os::fd::RawFd; 1]);
            let Ok(msg) = nix::sys::socket::recvmsg::<()>(
                std::os::fd::AsRawFd::as_raw_fd(&ours),
                &mut iov,
                Some(&mut space),
                nix::sys::socket::MsgFlags::empty(),
            ) else {
                return;
            };
            let fds: Vec<i32> = msg
                .cmsgs()
                .expect("cmsgs")
                .flat_map(|c| match c {
                    nix::sys::socket::ControlMessageOwned::ScmRights(fds) => fds,
                    _ => Vec::new(),
                })
                .collect();
            if msg.bytes == 0 && fds.is_empty() {
                return;
            }
            for fd in fds {
                // SAFETY: the descriptor was just received and is owned by nothing else.
                let stream =
                    unsafe { <std::net::TcpStream as std::os::fd::FromRawFd>::from_raw_fd(fd) };
                let mut line = String::new();
                let _ = BufReader::new(&stream).read_line(&mut line);
                count.fetch_add(1, Ordering::SeqCst);
                let _ = (&stream).write_all(b"HTTP/1.0 200 OK\r\n\r\nproxied");
            }
        }
    });

    let mut request = spawn(1, &["python3", "-c", PROXY_CLIENT]);
    request.argv.push(canary_port.to_string().into_bytes());
    request.policy.mode = Mode::ReadOnly;
    request.backend = BackendChoice::Landlock;
    request.proxy = true;
    let (mut out, w) = support::pipe();
    request.stdio.stdout = confine_protocol::StdioSpec::Fd;
    peer.send(
        &confine_protocol::Request::Spawn(request.clone()),
        &[w.as_fd(), theirs.as_fd()],
    );
    drop((w, theirs));
    let mut text = String::new();
    std::io::Read::read_to_string(&mut out, &mut text).expect("output");
    let replies = peer.until_end(1);
    assert_eq!(exit_code(&replies), Some(0), "{replies:?}\n{text}");
    assert!(text.contains("proxy ok proxied"), "{text}");
    assert_eq!(served.load(Ordering::SeqCst), 1, "{text}");
    // A TCP socket named by its protocol is still TCP: made (the control of the SCTP line).
    assert!(text.contains("tcp ok made"), "{text}");
    for denied in ["direct err 1", "udp err 1", "sctp err 1", "fastopen err 1"] {
        assert!(text.contains(denied), "{denied}: {text}");
    }
    // Landlock's TCP rules: no port of the host's may be listened on.
    assert!(text.contains("listen err 13"), "{text}");
    assert!(
        canary.accept().is_err(),
        "the host's listener heard from the sandbox"
    );

    // The control: unconfined, the same client reaches the host's listener directly.
    request.policy.mode = Mode::DangerFullAccess;
    request.proxy = false;
    let (_, text) = run_captured(&mut peer, request);
    assert!(text.contains("direct ok reached"), "{text}");
    assert!(
        canary.accept().is_ok(),
        "the control did not reach the listener"
    );
}
