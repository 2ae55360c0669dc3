//! A hostile peer on the helper's socket (the security catalogue's §3 and section H): frames and
//! messages a correct agentd never sends, a peer that stalls inside a frame, the wrong protocol,
//! a peer of another uid, requests above the ceiling, 64 requests of different policies at once,
//! argv that looks like bwrap's options, and NUL or newline in paths. Each is refused or
//! contained, and after each a fresh connection runs a real confined command whose output, exit
//! status and facts are checked: the helper still serves.
//!
//! `protocol/tests/decoder_errors.rs` pins the decoder's answer to each malformed input; here the
//! same bytes go to the running helper over its socket.

// Linux only: these tests drive the bwrap, namespace and Landlock backends, `/proc` or Linux's
// own system calls. On macOS `macos_supervision.rs` drives the helper.
#![cfg(target_os = "linux")]

mod support;

use std::io::{Read, Write};
use std::net::Shutdown;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use confine_protocol::{
    Backend, BackendChoice, Cancel, EnvVar, ExitStatus, Exited, Hello, MAX_FRAME, Mode, Network,
    PROTOCOL_VERSION, Reply, Request, SCHEMA_HASH, Spawn, StdioSpec, encode_frame,
};
use serde::Serialize;
use support::skip::{Need, skip, skip_part};
use support::{
    Peer, Scratch, Service, available_backends, connect_as, open_to_everyone, pipe, run_captured,
    spawn,
};

/// The helper's `HELLO_LIMIT` (RFC 0001): a peer that has not greeted by then is cut off.
const HELLO_LIMIT: Duration = Duration::from_secs(10);
/// The helper's `STALL_LIMIT` (RFC 0001): a peer that leaves a frame half-sent this long is cut
/// off.
const STALL_LIMIT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------------
// The helper under attack, and the proof that it still serves.
// ---------------------------------------------------------------------------------------------

/// A helper in service mode, the backends that work on this machine (judged without the
/// helper) and the first of them, which confines the still-serving checks, and a host directory
/// outside `/tmp` (which a workspace-write sandbox replaces) for canaries.
struct Target {
    service: Service,
    backends: Vec<BackendChoice>,
    backend: Option<BackendChoice>,
    host: Scratch,
    _dir: Scratch,
}

impl Target {
    fn start(tag: &str, extra: &[&str]) -> Target {
        Target::start_with(tag, extra, |_| {})
    }

    /// Starts the helper after `adjust` has had its say on its command.
    fn start_with(
        tag: &str,
        extra: &[&str],
        adjust: impl FnOnce(&mut std::process::Command),
    ) -> Target {
        let dir = Scratch::new(tag);
        let service = Service::start_with(&dir.0, extra, adjust);
        let test = std::thread::current().name().unwrap_or(tag).to_owned();
        let backends = available_backends(&test);
        let backend = backends.first().copied();
        if backend.is_none() {
            skip_part(
                &test,
                "the confined part of each still-serving check",
                Need::Backend,
                "no backend works here; a danger-full-access command shows the helper serves \
                 instead",
            );
        }
        Target {
            service,
            backends,
            backend,
            host: host_scratch(tag),
            _dir: dir,
        }
    }

    /// A fresh, greeted connection.
    fn connect(&self) -> Peer {
        let mut peer = Peer::connect(&self.service.socket).expect("connect");
        peer.greet();
        peer
    }

    /// A fresh connection runs a read-only command confined by the backend: its output arrives,
    /// its write to the host is denied, and its facts name the backend and the layers.
    fn assert_serving(&mut self, after: &str) {
        assert!(
            self.service.still_running(),
            "after {after}: the helper exited"
        );
        let mut peer = Peer::connect(&self.service.socket)
            .unwrap_or_else(|e| panic!("after {after}: cannot connect: {e}"));
        peer.greet();
        self.assert_serves(&mut peer, after);
    }

    /// `peer` (greeted) is served a confined command, as [`Target::assert_serving`] checks.
    fn assert_serves(&self, peer: &mut Peer, after: &str) {
        let canary = self.host.0.join("still-serving");
        let script = "printf served; if echo x > \"$0\"; then exit 0; else exit 7; fi";
        let Some(backend) = self.backend else {
            let (replies, out) = run_captured(peer, spawn(1, &["sh", "-c", "printf served"]));
            assert_eq!(
                exited(&replies).status,
                ExitStatus::Code(0),
                "after {after}"
            );
            assert_eq!(out, "served", "after {after}");
            return;
        };
        let argv = ["sh", "-c", script, text(&canary)];
        let request = confined(1, &argv, Mode::ReadOnly, backend, None);
        let (replies, out) = run_captured(peer, request);
        let e = exited(&replies);
        assert_eq!(out, "served", "after {after}");
        assert_eq!(
            e.status,
            ExitStatus::Code(7),
            "after {after}: the confined write to the host was not denied"
        );
        assert_confined_facts(e, backend, &format!("after {after}"));
        assert!(!canary.exists(), "after {after}: the canary was written");
    }
}

/// A scratch directory under the build's own temp directory, which is not under `/tmp`.
fn host_scratch(tag: &str) -> Scratch {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("hostile-{tag}-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("host scratch dir");
    Scratch(dir)
}

fn text(path: &Path) -> &str {
    path.to_str().expect("test paths are UTF-8")
}

fn bytes(path: &Path) -> Vec<u8> {
    path.as_os_str().as_bytes().to_vec()
}

/// A spawn of `argv` in `mode`, confined by `backend`, with `workspace` as its workspace root.
fn confined(
    id: u64,
    argv: &[&str],
    mode: Mode,
    backend: BackendChoice,
    workspace: Option<&Path>,
) -> Spawn {
    let mut request = spawn(id, argv);
    request.policy.mode = mode;
    request.backend = backend;
    request.policy.workspace_root = workspace.map(bytes);
    request
}

fn backend_of(choice: BackendChoice) -> Backend {
    match choice {
        BackendChoice::Bwrap => Backend::Bwrap,
        BackendChoice::Landlock => Backend::Landlock,
        BackendChoice::Namespaces => Backend::Namespaces,
        other => panic!("not a backend this test asks for: {other:?}"),
    }
}

fn exited(replies: &[Reply]) -> &Exited {
    match replies.last() {
        Some(Reply::Exited(e)) => e,
        other => panic!("expected Exited, got {other:?}"),
    }
}

fn assert_confined_facts(e: &Exited, backend: BackendChoice, what: &str) {
    assert_eq!(e.backend, backend_of(backend), "{what}: the facts' backend");
    assert!(e.enforcement.is_some(), "{what}: no enforcement reported");
    assert!(!e.layers.is_empty(), "{what}: no layers reported");
}

/// The reason of a refusal, asserting that nothing ran.
fn refused(replies: &[Reply], out: &str, what: &str) -> String {
    assert_eq!(out, "", "{what}: a refused request printed output");
    match replies {
        [Reply::Refused(r)] => r.reason.to_string(),
        other => panic!("{what}: expected one Refused, got {other:?}"),
    }
}

/// A danger-full-access spawn that would write `canary`: sent where it must never run.
fn canary_spawn(id: u64, canary: &Path) -> Spawn {
    spawn(id, &["sh", "-c", "echo ran > \"$0\"", text(canary)])
}

// ---------------------------------------------------------------------------------------------
// Frames and messages a correct peer never sends.
// ---------------------------------------------------------------------------------------------

fn frame_of(payload: &[u8]) -> Vec<u8> {
    let mut frame = (payload.len() as u32).to_le_bytes().to_vec();
    frame.extend_from_slice(payload);
    frame
}

fn payload_of<T: Serialize>(message: &T) -> Vec<u8> {
    encode_frame(message).expect("encode")[4..].to_vec()
}

/// Where two encodings first differ: the offset of a field, without hard-coding the layout.
fn first_difference(a: &[u8], b: &[u8]) -> usize {
    a.iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .expect("the encodings differ")
}

/// The payload of `base` with the field `change` alters replaced by `with`.
fn with_field(base: &Spawn, change: impl FnOnce(&mut Spawn), with: &[u8]) -> Vec<u8> {
    let original = payload_of(&Request::Spawn(base.clone()));
    let mut changed = base.clone();
    change(&mut changed);
    let at = first_difference(&original, &payload_of(&Request::Spawn(changed)));
    let mut out = original[..at].to_vec();
    out.extend_from_slice(with);
    out.extend_from_slice(&original[at + 1..]);
    out
}

/// One hostile input on a fresh connection.
struct Hostile {
    what: String,
    /// Whether the peer greets correctly first.
    greet: bool,
    /// What is sent, one `sendmsg` each, with so many descriptors attached.
    sends: Vec<(Vec<u8>, usize)>,
    /// Whether the peer then closes its side.
    hang_up: bool,
    /// Words the helper's log line about the connection must contain.
    log: &'static str,
}

fn case(what: &str, greet: bool, bytes: Vec<u8>, log: &'static str) -> Hostile {
    Hostile {
        what: what.to_owned(),
        greet,
        sends: vec![(bytes, 0)],
        hang_up: false,
        log,
    }
}

fn with_fds(what: &str, sends: Vec<(Vec<u8>, usize)>, log: &'static str) -> Hostile {
    Hostile {
        sends,
        ..case(what, true, Vec::new(), log)
    }
}

/// Sends `bytes` with `count` descriptors (of `/dev/null`) attached; errors are ignored, since
/// the helper may have closed the connection already.
fn send_with_fds(sock: &UnixStream, bytes: &[u8], count: usize) {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    let null = std::fs::File::open("/dev/null").expect("/dev/null");
    let fds = vec![null.as_raw_fd(); count];
    let cmsg = [ControlMessage::ScmRights(&fds)];
    let iov = [std::io::IoSlice::new(bytes)];
    if let Ok(sent) = sendmsg::<()>(sock.as_raw_fd(), &iov, &cmsg, MsgFlags::empty(), None) {
        let _ = (&*sock).write_all(&bytes[sent..]);
    }
}

fn hanging_up(what: &str, greet: bool, bytes: Vec<u8>, log: &'static str) -> Hostile {
    Hostile {
        hang_up: true,
        ..case(what, greet, bytes, log)
    }
}

const DECODE: &str = "undecodable message";
const CAP: &str = "exceeds the 1048576-byte cap";

/// Every malformed greeting: before it, nothing but the helper's own greeting is answered.
fn greeting_cases(canary: &Path) -> Vec<Hostile> {
    let hello = |version: u32, hash: u64, software: &str| {
        frame_of(&payload_of(&Hello {
            protocol_version: version,
            schema_hash: hash,
            software: software.to_owned(),
        }))
    };
    let ours = frame_of(&payload_of(&Hello::ours("hostile")));
    let mut trailing = ours.clone();
    trailing.push(0);
    trailing[0] += 1;
    // The software name is the payload's tail; swap its last bytes for invalid UTF-8.
    let bad_utf8 = |invalid: &[u8]| {
        let mut frame = ours.clone();
        let at = frame.len() - invalid.len();
        frame[at..].copy_from_slice(invalid);
        frame
    };
    let greeting = "protocol error in greeting";
    let mismatch = "protocol mismatch";
    vec![
        case(
            "a zero-length greeting",
            false,
            vec![0; 4],
            "zero-length frame",
        ),
        case("a greeting of 2^32-1 bytes", false, vec![0xff; 4], CAP),
        case(
            "a greeting one byte over MAX_FRAME",
            false,
            (MAX_FRAME + 1).to_le_bytes().to_vec(),
            CAP,
        ),
        case(
            "a Spawn in place of the greeting",
            false,
            encode_frame(&Request::Spawn(canary_spawn(1, canary))).expect("encode"),
            greeting,
        ),
        case("a greeting with a trailing byte", false, trailing, greeting),
        case(
            "a greeting whose software is not UTF-8",
            false,
            bad_utf8(&[0xc3, 0x28]),
            greeting,
        ),
        case(
            "a greeting with an overlong UTF-8 encoding",
            false,
            bad_utf8(&[0xc0, 0xaf]),
            greeting,
        ),
        case(
            "a greeting with a UTF-16 surrogate",
            false,
            bad_utf8(&[0xed, 0xa0, 0x80]),
            greeting,
        ),
        case(
            "a greeting whose version varint overflows a u32",
            false,
            frame_of(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x00]),
            greeting,
        ),
        hanging_up(
            "a greeting cut short, then a hang-up",
            false,
            ours[..ours.len() - 2].to_vec(),
            "connection closed inside a frame",
        ),
        case(
            "the next protocol version",
            false,
            hello(PROTOCOL_VERSION + 1, SCHEMA_HASH, "agentd-next"),
            mismatch,
        ),
        case(
            "the previous protocol version",
            false,
            hello(PROTOCOL_VERSION - 1, SCHEMA_HASH, "agentd-previous"),
            mismatch,
        ),
        case(
            "the same version with another schema hash",
            false,
            hello(PROTOCOL_VERSION, SCHEMA_HASH ^ 1, "agentd-other-schema"),
            mismatch,
        ),
        case("a greeting of zeros", false, hello(0, 0, ""), mismatch),
    ]
}

/// Every malformed request after a correct greeting.
fn request_cases(canary: &Path) -> Vec<Hostile> {
    let base = canary_spawn(9, canary);
    let spawn_frame = encode_frame(&Request::Spawn(base.clone())).expect("encode");
    let mut spawn_trailing = spawn_frame.clone();
    spawn_trailing.push(0);
    let spawn_len = u32::from_le_bytes([spawn_frame[0], spawn_frame[1], spawn_frame[2], 0]) + 1;
    spawn_trailing[..4].copy_from_slice(&spawn_len.to_le_bytes());
    let trailing = |request: &Request| {
        let mut payload = payload_of(request);
        payload.push(0);
        frame_of(&payload)
    };
    let mut garbage = MAX_FRAME.to_le_bytes().to_vec();
    garbage.extend(std::iter::repeat_n(0xff, MAX_FRAME as usize));
    // A Cancel of a request that does not exist is answered by nothing.
    let unknown_cancel = encode_frame(&Request::Cancel(Cancel {
        id: 999,
        grace_ms: 0,
    }))
    .expect("encode");
    let mut stdout_fd = base.clone();
    stdout_fd.stdio.stdout = StdioSpec::Fd;
    let field = |what: &str, change: fn(&mut Spawn), with: &[u8]| {
        case(
            what,
            true,
            frame_of(&with_field(&base, change, with)),
            DECODE,
        )
    };
    vec![
        case("a zero-length frame", true, vec![0; 4], "zero-length frame"),
        case("a frame of 2^32-1 bytes", true, vec![0xff; 4], CAP),
        case(
            "a frame one byte over MAX_FRAME",
            true,
            (MAX_FRAME + 1).to_le_bytes().to_vec(),
            CAP,
        ),
        case("MAX_FRAME bytes of garbage", true, garbage, DECODE),
        case(
            "a second greeting",
            true,
            encode_frame(&Hello::ours("again")).expect("encode"),
            DECODE,
        ),
        case("request variant 5", true, frame_of(&[5]), DECODE),
        case(
            "request variant 0xffff",
            true,
            frame_of(&[0xff, 0xff, 0x03]),
            DECODE,
        ),
        case(
            "a request variant varint that overflows a u32",
            true,
            frame_of(&[0xff; 5]),
            DECODE,
        ),
        case(
            "a Spawn id varint of eleven bytes",
            true,
            frame_of(&[
                0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
            ]),
            DECODE,
        ),
        case(
            "a Spawn id varint cut off by the frame's end",
            true,
            frame_of(&[0, 0x80]),
            DECODE,
        ),
        case(
            "an argv count of 2^32-1 in a seven-byte frame",
            true,
            frame_of(&[0, 1, 0xff, 0xff, 0xff, 0xff, 0x0f]),
            DECODE,
        ),
        case(
            "an argv count of 2^64-1",
            true,
            frame_of(&[
                0, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
            ]),
            DECODE,
        ),
        field("Mode 3", |s| s.policy.mode = Mode::ReadOnly, &[3]),
        field(
            "Mode 0xffff",
            |s| s.policy.mode = Mode::ReadOnly,
            &[0xff, 0xff, 0x03],
        ),
        field("Network 2", |s| s.policy.network = Network::Allow, &[2]),
        field(
            "BackendChoice 5",
            |s| s.backend = BackendChoice::Bwrap,
            &[5],
        ),
        field("StdioSpec 2", |s| s.stdio.stdin = StdioSpec::Fd, &[2]),
        field(
            "an Option tag of 2",
            |s| s.policy.workspace_root = Some(b"/".to_vec()),
            &[2],
        ),
        field("a bool of 2", |s| s.policy.local_binding = true, &[2]),
        case(
            "a Spawn with a trailing byte",
            true,
            spawn_trailing,
            "1 trailing bytes",
        ),
        case(
            "Info with a trailing byte",
            true,
            trailing(&Request::Info),
            "1 trailing bytes",
        ),
        case(
            "Cancel with a trailing byte",
            true,
            trailing(&Request::Cancel(Cancel { id: 9, grace_ms: 0 })),
            "1 trailing bytes",
        ),
        hanging_up(
            "a Spawn cut short, then a hang-up",
            true,
            spawn_frame[..spawn_frame.len() - 1].to_vec(),
            "connection closed inside a frame",
        ),
        with_fds(
            "17 descriptors with one frame",
            vec![(encode_frame(&Request::Info).expect("encode"), 17)],
            "too many descriptors in one message",
        ),
        with_fds(
            "65 descriptors that no Spawn claims",
            (0..5).map(|_| (unknown_cancel.clone(), 13)).collect(),
            "descriptors sent without a Spawn",
        ),
        case(
            "a Spawn declaring a descriptor that never came",
            true,
            encode_frame(&Request::Spawn(stdout_fd)).expect("encode"),
            "declared 1 descriptors, 0 arrived",
        ),
        hanging_up(
            "half a length prefix, then a hang-up",
            true,
            vec![5, 0],
            "connection closed inside a frame",
        ),
    ]
}

/// Sends `case` on a fresh connection: the helper closes it without answering and says why in
/// its log, nothing runs, and a fresh connection is served.
fn attack(target: &mut Target, case: &Hostile, canary: &Path) {
    let what = &case.what;
    let mut peer = Peer::connect(&target.service.socket).expect("connect");
    if case.greet {
        peer.greet();
    } else {
        peer.read_message::<Hello>()
            .unwrap_or_else(|| panic!("{what}: the helper greets every allowed peer"));
    }
    // The helper may close before every byte is written; the close is what is checked.
    for (bytes, fds) in &case.sends {
        if *fds == 0 {
            let _ = peer.sock.write_all(bytes);
        } else {
            send_with_fds(&peer.sock, bytes, *fds);
        }
    }
    if case.hang_up {
        let _ = peer.sock.shutdown(Shutdown::Write);
    }
    assert!(
        peer.read_message::<Reply>().is_none(),
        "{what}: the helper must close the connection without an answer"
    );
    let line = target.service.expect_log(case.log);
    assert!(
        !line.contains("killing"),
        "{what}: something was running: {line}"
    );
    assert!(!canary.exists(), "{what}: a command ran");
    target.assert_serving(what);
}

#[test]
fn every_malformed_greeting_is_refused_and_the_helper_keeps_serving() {
    let mut target = Target::start("greeting", &[]);
    let canary = target.host.0.join("ran");
    for case in greeting_cases(&canary) {
        attack(&mut target, &case, &canary);
    }
}

#[test]
fn every_malformed_request_is_refused_and_the_helper_keeps_serving() {
    let mut target = Target::start("request", &[]);
    let canary = target.host.0.join("ran");
    for case in request_cases(&canary) {
        attack(&mut target, &case, &canary);
    }
    // The control: the same Spawn, well formed, runs.
    let mut peer = target.connect();
    let (replies, _) = run_captured(&mut peer, canary_spawn(9, &canary));
    assert_eq!(exited(&replies).status, ExitStatus::Code(0));
    assert!(canary.exists(), "the well-formed Spawn did not run");
}

// ---------------------------------------------------------------------------------------------
// A peer that stalls inside a frame.
// ---------------------------------------------------------------------------------------------

/// How long past a limit a staller may still be connected before the test calls the helper
/// stuck: a liveness bound, generous so that a loaded machine never reaches it.
const LIVENESS: Duration = Duration::from_secs(60);

/// Reads `peer` until the helper closes it, in a thread of its own, so that the moment of the
/// close is seen as it happens whatever the test does meanwhile. The thread answers that
/// moment; it fails if the helper answers instead, or keeps the connection past `limit` and
/// [`LIVENESS`].
fn watch_close(
    mut peer: Peer,
    limit: Duration,
    what: &'static str,
) -> std::thread::JoinHandle<Instant> {
    std::thread::spawn(move || {
        peer.sock
            .set_read_timeout(Some(limit + LIVENESS))
            .expect("timeout");
        assert!(
            peer.read_message::<Reply>().is_none(),
            "{what}: the helper answered a half frame"
        );
        Instant::now()
    })
}

/// The moment the helper closed the connection [`watch_close`] watched.
fn closed(watch: std::thread::JoinHandle<Instant>, limit: Duration, what: &str) -> Instant {
    watch.join().unwrap_or_else(|_| {
        panic!("{what}: not cut off within {limit:?} and {LIVENESS:?} more, or answered")
    })
}

#[test]
fn a_peer_that_stalls_inside_a_frame_is_cut_off_while_others_are_served() {
    let mut target = Target::start("stall", &[]);
    let canary = target.host.0.join("ran");
    let spawn_frame = encode_frame(&Request::Spawn(canary_spawn(1, &canary))).expect("encode");

    // Each staller's clock is read before the helper's can start (its greeting limit runs from
    // the accept, its stall limit from the last bytes it read): a close seen less than the
    // limit after it came early.
    let hello_stalled = Instant::now();
    let mut before_hello = Peer::connect(&target.service.socket).expect("connect");
    before_hello
        .read_message::<Hello>()
        .expect("the helper greets");
    before_hello.send_raw(&encode_frame(&Hello::ours("staller")).expect("encode")[..3]);
    let hello_watch = watch_close(before_hello, HELLO_LIMIT, "half a greeting");

    let mut mid_frame = target.connect();
    let frame_stalled = Instant::now();
    mid_frame.send_raw(&spawn_frame[..spawn_frame.len() - 1]);
    let frame_watch = watch_close(mid_frame, STALL_LIMIT, "half a Spawn");

    // A staller that hangs up is dropped at once.
    let mut hanger = target.connect();
    hanger.send_raw(&spawn_frame[..spawn_frame.len() / 2]);
    hanger.sock.shutdown(Shutdown::Write).expect("shutdown");
    assert!(hanger.read_message::<Reply>().is_none());
    target
        .service
        .expect_log("connection closed inside a frame");

    // Other connections are served while the stallers hold their half frames, one by one and
    // several at once.
    for round in 0..3 {
        target.assert_serving(&format!("round {round} beside two stallers"));
    }
    let mut peers: Vec<Peer> = (0..4).map(|_| target.connect()).collect();
    for (i, peer) in peers.iter_mut().enumerate() {
        let script = format!("exit {i}");
        peer.send(&Request::Spawn(spawn(1, &["sh", "-c", &script])), &[]);
    }
    for (i, peer) in peers.iter_mut().enumerate() {
        assert_eq!(
            exited(&peer.until_end(1)).status,
            ExitStatus::Code(i as i32)
        );
    }
    let served = Instant::now();

    // Each staller is cut off, never before its limit (its clock started first, and the close
    // is seen as it happens, so a load can only make it look later) and at all within a
    // generous bound.
    let hello_closed = closed(hello_watch, HELLO_LIMIT, "half a greeting");
    assert!(
        hello_closed.duration_since(hello_stalled) >= HELLO_LIMIT,
        "half a greeting was cut off after {:?}, before {HELLO_LIMIT:?}",
        hello_closed.duration_since(hello_stalled)
    );
    target.service.expect_log("no greeting within 10 s");
    let frame_closed = closed(frame_watch, STALL_LIMIT, "half a Spawn");
    assert!(
        frame_closed.duration_since(frame_stalled) >= STALL_LIMIT,
        "half a Spawn was cut off after {:?}, before {STALL_LIMIT:?}",
        frame_closed.duration_since(frame_stalled)
    );
    // The others were answered while the frame staller still held its connection: at all
    // within the 30 s of the stall limit, a liveness bound.
    assert!(
        served < frame_closed,
        "the other connections were not all served within the {STALL_LIMIT:?} a staller holds \
         its connection"
    );
    target
        .service
        .expect_log("a frame was left half-sent for 30 s");
    assert!(!canary.exists(), "the half-sent Spawn ran");
    target.assert_serving("two stallers were cut off");
}

// ---------------------------------------------------------------------------------------------
// Connections beyond the service's descriptors.
// ---------------------------------------------------------------------------------------------

/// Clock ticks per second in `/proc/PID/stat`: `USER_HZ`, 100 on every Linux architecture (the
/// kernel converts to it whatever its own tick rate).
const USER_HZ: u64 = 100;

/// CPU time (user and system, in clock ticks) the process `pid` has used.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let fields: Vec<&str> = stat[stat.rfind(')').expect("comm") + 2..]
        .split(' ')
        .collect();
    // utime and stime are fields 14 and 15 of stat(5); `fields` starts at field 3.
    fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime")
}

/// The open descriptors of process `pid`, each with what it is (`socket:[…]`, a path).
fn descriptors(pid: u32) -> Vec<(usize, String)> {
    let dir = format!("/proc/{pid}/fd");
    let entries = std::fs::read_dir(&dir).expect("the service's descriptors");
    entries
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let fd = entry.file_name().to_str()?.parse().ok()?;
            let to = std::fs::read_link(entry.path()).ok()?;
            Some((fd, to.to_string_lossy().into_owned()))
        })
        .collect()
}

/// Sets the soft descriptor limit of process `pid` (util-linux's `prlimit`).
fn set_fd_limit(pid: u32, soft: usize) {
    let set = std::process::Command::new("prlimit")
        .arg("--pid")
        .arg(pid.to_string())
        .arg(format!("--nofile={soft}:"))
        .status();
    assert!(
        set.expect("run prlimit").success(),
        "prlimit --nofile={soft}"
    );
}

#[test]
fn a_service_out_of_descriptors_rests_its_listener_and_serves_again_once_one_is_free() {
    // Caps above the connections, so that the descriptors run out first.
    let caps = ["--max-per-user", "1024", "--max-connections", "1024"];
    let mut target = Target::start("out-of-fds", &caps);
    let service = target.service.child.id();
    // A connection served before: its helper is a process of its own.
    let mut keeper = target.connect();
    // Once the service holds no socket but its listener (the keeper's copy closed after the
    // hand-off; a bounded wait for that event), its soft limit at its lowest free descriptor:
    // no accept can succeed.
    let deadline = Instant::now() + Duration::from_secs(20);
    let open = loop {
        let open = descriptors(service);
        let sockets = open
            .iter()
            .filter(|(_, to)| to.starts_with("socket:"))
            .count();
        if sockets == 1 || Instant::now() >= deadline {
            break open;
        }
        std::thread::yield_now();
    };
    let held = (0..)
        .find(|fd| !open.iter().any(|(n, _)| n == fd))
        .expect("a free descriptor");
    set_fd_limit(service, held);
    let hogs: Vec<UnixStream> = (0..16)
        .map(|_| UnixStream::connect(&target.service.socket).expect("connect"))
        .collect();
    target.service.expect_log("accept failed");
    // An observation window, not a synchronisation: a listener polled while no connection can
    // be accepted spins, logging on every turn and taking a whole core. Resting, the service
    // takes next to none: half a core over the window is a bound only a spin crosses, however
    // loaded the machine (load only slows the service down).
    let before = cpu_ticks(service);
    let window = Instant::now();
    let lines = target.service.log_within(Duration::from_secs(1));
    let used = cpu_ticks(service) - before;
    let half_a_core = window.elapsed().as_millis() as u64 * USER_HZ / 2_000;
    assert_eq!(
        lines,
        Vec::<String>::new(),
        "the failed accept was logged again"
    );
    assert!(
        used < half_a_core,
        "the service used {used} ticks of CPU in {:?} while out of descriptors: it spins",
        window.elapsed()
    );

    // A connection already handed off is served all along, by its own helper.
    target.assert_serves(&mut keeper, "the service ran out of descriptors");

    // Once descriptors are free, the waiting connections are taken and a fresh one is served.
    set_fd_limit(service, held + 64);
    drop(hogs);
    target.assert_serving("running out of descriptors");
}

// ---------------------------------------------------------------------------------------------
// A peer of another uid.
// ---------------------------------------------------------------------------------------------

/// The unprivileged user this test makes, and removes when it ends (`support::users`).
const OTHER_USER: &str = "confine-peer-other";

#[test]
fn a_peer_of_another_uid_is_refused_by_its_credentials_unless_allowed() {
    const NAME: &str = "a_peer_of_another_uid_is_refused_by_its_credentials_unless_allowed";
    if !nix::unistd::geteuid().is_root() {
        skip(
            NAME,
            Need::Root,
            "connecting as another uid needs root to switch uids",
        );
        return;
    }
    let other = support::users::system_user(OTHER_USER, &[]);
    let (uid, gid) = other.ids();
    let mut target = Target::start("uid", &[]);
    let socket = target.service.socket.clone();
    let canary = target.host.0.join("ran");

    // The private directory alone keeps another user out.
    let Err(denied) = connect_as((uid, gid), &socket, 1, None) else {
        panic!("another uid reached a 0700 directory");
    };
    assert_eq!(denied.raw_os_error(), Some(nix::libc::EACCES), "{denied}");

    // With the files open to everyone, SO_PEERCRED still refuses: no greeting, nothing runs.
    open_to_everyone(&socket);
    let mut held = connect_as((uid, gid), &socket, 1, None).expect("connect as the other uid");
    let mut peer = Peer::over(held.socks.remove(0));
    let frames = [
        encode_frame(&Hello::ours("other-uid")).expect("encode"),
        encode_frame(&Request::Spawn(canary_spawn(1, &canary))).expect("encode"),
    ];
    let _ = peer.sock.write_all(&frames.concat());
    assert!(
        peer.read_message::<Hello>().is_none(),
        "a peer of another uid was greeted"
    );
    let line = target.service.expect_log("refused peer uid");
    assert!(line.contains(&format!("uid {uid} ")), "{line}");
    assert!(!canary.exists(), "the refused peer's Spawn ran");
    target.assert_serving("a peer of another uid");

    // The control: a helper that allows that uid serves it a confined command.
    let mut allowed = Target::start(
        "uid-allowed",
        &["--allow-uid", "0", "--allow-uid", &uid.to_string()],
    );
    open_to_everyone(&allowed.service.socket);
    let mut held =
        connect_as((uid, gid), &allowed.service.socket, 1, None).expect("connect as the other uid");
    let mut peer = Peer::over(held.socks.remove(0));
    peer.greet();
    allowed.assert_serves(&mut peer, "a connection from the allowed uid");
    allowed.assert_serving("the allowed uid was served");
}

// ---------------------------------------------------------------------------------------------
// Requests above the ceiling.
// ---------------------------------------------------------------------------------------------

#[test]
fn requests_above_the_ceiling_are_refused_naming_the_rule_and_nothing_runs() {
    const NAME: &str = "requests_above_the_ceiling_are_refused_naming_the_rule_and_nothing_runs";
    let files = host_scratch("ceiling-files");
    let allowed = files.0.join("allowed");
    let ws = allowed.join("ws");
    let outside = files.0.join("outside");
    for dir in [&ws, &outside] {
        std::fs::create_dir_all(dir).expect("mkdir");
    }
    let ceiling = files.0.join("ceiling.toml");
    std::fs::write(
        &ceiling,
        format!(
            "max_mode = \"workspace-write\"\nallow_network = false\n\
             writable_roots_under = [{:?}]\n",
            text(&allowed)
        ),
    )
    .expect("ceiling");
    std::fs::set_permissions(&ceiling, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let mut target = Target::start("ceiling", &["--ceiling", text(&ceiling)]);
    let Some(backend) = target.backend else {
        skip(
            NAME,
            Need::Backend,
            "no backend works here to run the control",
        );
        return;
    };
    let canary = ws.join("ran");
    let argv = ["sh", "-c", "echo ran > \"$0\"", text(&canary)];
    let request = |mode, change: &dyn Fn(&mut Spawn)| {
        let mut request = confined(1, &argv, mode, backend, Some(&ws));
        change(&mut request);
        request
    };
    let network = |s: &mut Spawn| s.policy.network = Network::Allow;
    let above: Vec<(&str, Spawn, &str)> = vec![
        (
            "danger-full-access",
            request(Mode::DangerFullAccess, &|_| {}),
            "max_mode",
        ),
        (
            "workspace-write with the network",
            request(Mode::WorkspaceWrite, &network),
            "allow_network",
        ),
        (
            "read-only with the network",
            request(Mode::ReadOnly, &network),
            "allow_network",
        ),
        (
            "a writable root outside writable_roots_under",
            request(Mode::WorkspaceWrite, &|s| {
                s.policy.writable_roots = vec![bytes(&outside)]
            }),
            "writable_roots_under",
        ),
        (
            "a workspace outside writable_roots_under",
            request(Mode::WorkspaceWrite, &|s| {
                s.policy.workspace_root = Some(bytes(&outside))
            }),
            "writable_roots_under",
        ),
    ];
    let mut peer = target.connect();
    for (what, request, rule) in above {
        let (replies, out) = run_captured(&mut peer, request);
        let reason = refused(&replies, &out, what);
        assert!(
            reason.contains(rule),
            "{what}: the reason names no {rule}: {reason}"
        );
        assert!(!canary.exists(), "{what}: the command ran");
        assert!(
            std::fs::read_dir(&outside)
                .expect("outside")
                .next()
                .is_none(),
            "{what}: something was written outside"
        );
    }
    // The control: the same command within the ceiling runs and writes.
    let (replies, _) = run_captured(&mut peer, request(Mode::WorkspaceWrite, &|_| {}));
    let e = exited(&replies);
    assert_eq!(e.status, ExitStatus::Code(0), "the control did not run");
    assert_confined_facts(e, backend, "the control");
    assert!(canary.exists(), "the control did not write");
    target.assert_serving("requests above the ceiling");
}

// ---------------------------------------------------------------------------------------------
// Many requests of different policies at once.
// ---------------------------------------------------------------------------------------------

const PARALLEL: u64 = 64;
const CONNECTIONS: u64 = 4;

/// The mode of request `id`: half read-only, most of the rest workspace-write, and every
/// sixteenth danger-full-access, the control that shows each write can succeed.
fn mode_of(id: u64) -> Mode {
    match id {
        id if id % 16 == 15 => Mode::DangerFullAccess,
        id if id % 2 == 0 => Mode::ReadOnly,
        _ => Mode::WorkspaceWrite,
    }
}

#[test]
fn sixty_four_requests_at_once_are_each_confined_by_their_own_policy() {
    const NAME: &str = "sixty_four_requests_at_once_are_each_confined_by_their_own_policy";
    let mut target = Target::start("parallel", &[]);
    let backends = target.backends.clone();
    if backends.is_empty() {
        skip(NAME, Need::Backend, "no backend works here");
        return;
    }
    let ws = host_scratch("parallel-ws");
    let outside = host_scratch("parallel-outside");
    // Every command waits on its stdin until all 64 have started, so they run at the same time.
    let script = "read _; a=0; b=0; echo \"$1\" > \"$2/$1\" || a=1; \
                  echo \"$1\" > \"$3/$1\" || b=2; exit $((a + b))";
    let mut peers: Vec<Peer> = (0..CONNECTIONS).map(|_| target.connect()).collect();
    let mut gates = Vec::new();
    let mut chosen = std::collections::HashMap::new();
    for id in 0..PARALLEL {
        let backend = backends[(id as usize / 2) % backends.len()];
        let name = format!("canary-{id}");
        let argv = [
            "sh",
            "-c",
            script,
            "sh",
            &name,
            text(&ws.0),
            text(&outside.0),
        ];
        let mut request = confined(id, &argv, mode_of(id), backend, Some(&ws.0));
        request.stdio.stdin = StdioSpec::Fd;
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).expect("pipe");
        peers[(id % CONNECTIONS) as usize].send(&Request::Spawn(request), &[read.as_fd()]);
        gates.push(write);
        chosen.insert(id, backend);
    }
    let mut started = 0;
    for peer in &mut peers {
        for _ in 0..PARALLEL / CONNECTIONS {
            match peer.reply() {
                Reply::Started(_) => started += 1,
                other => panic!("a request did not start: {other:?}"),
            }
        }
    }
    assert_eq!(started, PARALLEL);
    drop(gates);
    let mut facts = std::collections::HashMap::new();
    for peer in &mut peers {
        for _ in 0..PARALLEL / CONNECTIONS {
            match peer.reply() {
                Reply::Exited(e) => {
                    facts.insert(e.id, e);
                }
                other => panic!("expected Exited, got {other:?}"),
            }
        }
    }
    assert_eq!(facts.len(), PARALLEL as usize);
    for id in 0..PARALLEL {
        let e = &facts[&id];
        let mode = mode_of(id);
        let what = format!("request {id} ({mode:?}, {:?})", chosen[&id]);
        let inside = ws.0.join(format!("canary-{id}")).exists();
        let beyond = outside.0.join(format!("canary-{id}")).exists();
        let (code, wrote_inside, wrote_beyond) = match mode {
            Mode::ReadOnly => (3, false, false),
            Mode::WorkspaceWrite => (2, true, false),
            Mode::DangerFullAccess => (0, true, true),
        };
        assert_eq!(e.status, ExitStatus::Code(code), "{what}: exit status");
        assert_eq!(inside, wrote_inside, "{what}: the workspace canary");
        assert_eq!(
            beyond, wrote_beyond,
            "{what}: the canary outside the workspace"
        );
        if mode == Mode::DangerFullAccess {
            assert_eq!(e.backend, Backend::None, "{what}");
            assert_eq!(e.enforcement, None, "{what}");
            assert!(e.layers.is_empty(), "{what}");
        } else {
            assert_confined_facts(e, chosen[&id], &what);
        }
    }
    target.assert_serving("64 requests at once");
}

// ---------------------------------------------------------------------------------------------
// Argv that looks like bwrap's options.
// ---------------------------------------------------------------------------------------------

/// Arguments bwrap would take as its own options, were any of them placed where it parses them.
const BWRAP_LOOKALIKES: &[&[u8]] = &[
    b"--bind",
    b"/",
    b"/",
    b"--",
    b"--ro-bind",
    b"/",
    b"/tmp",
    b"--dev-bind=/",
    b"--setenv",
    b"INJECTED",
    b"yes",
    b"--unsetenv",
    b"PATH",
    b"--dev",
    b"/dev",
    b"--bind-fd",
    b"3",
    b"/",
    b"--chdir",
    b"/",
    b"--args",
    b"0",
    b"--remount-ro",
    b"/",
    b"--cap-add",
    b"ALL",
    b"--uid",
    b"0",
    b"--seccomp",
    b"0",
    b"-c",
    b"--help",
    b"--version",
    b"\xff\xfe",
    b"",
    b"-",
];

/// Spawns with stdout captured as bytes; returns the replies and what the command printed.
fn run_bytes(peer: &mut Peer, mut request: Spawn) -> (Vec<Reply>, Vec<u8>) {
    let (mut out, w) = pipe();
    request.stdio.stdout = StdioSpec::Fd;
    let id = request.id;
    peer.send(&Request::Spawn(request), &[w.as_fd()]);
    drop(w);
    let mut printed = Vec::new();
    out.read_to_end(&mut printed).expect("read output");
    (peer.until_end(id), printed)
}

fn lines_of(args: &[&[u8]]) -> Vec<u8> {
    args.iter().flat_map(|a| [*a, b"\n"].concat()).collect()
}

#[test]
fn argv_that_looks_like_bwrap_options_reaches_the_command_as_plain_arguments() {
    const NAME: &str = "argv_that_looks_like_bwrap_options_reaches_the_command_as_plain_arguments";
    let mut target = Target::start("bwrap-argv", &[]);
    let backends = target.backends.clone();
    if backends.is_empty() {
        skip(NAME, Need::Backend, "no backend works here");
        return;
    }
    let ws = host_scratch("bwrap-argv-ws");
    let host = host_scratch("bwrap-argv-host");
    let canary = host.0.join("canary");
    std::fs::write(&canary, "original\n").expect("canary");
    let canary_env = EnvVar {
        name: b"CANARY".to_vec(),
        value: bytes(&canary),
    };
    let tries_to_write = "if echo pwned > \"$CANARY\"; then exit 0; else exit 7; fi";
    let script = format!(
        "printf '%s\\n' \"$0\" \"$@\"; printf 'INJECTED=%s\\n' \"${{INJECTED-unset}}\"; \
         {tries_to_write}"
    );
    let mut expected = lines_of(BWRAP_LOOKALIKES);
    expected.extend_from_slice(b"INJECTED=unset\n");
    let request = |mode, backend| {
        let mut request = confined(1, &["sh", "-c", &script], mode, backend, Some(&ws.0));
        request
            .argv
            .extend(BWRAP_LOOKALIKES.iter().map(|a| a.to_vec()));
        request.env.push(canary_env.clone());
        request
    };
    let mut peer = target.connect();
    for &backend in &backends {
        for mode in [Mode::ReadOnly, Mode::WorkspaceWrite] {
            let what = format!("{backend:?} {mode:?}");
            let (replies, out) = run_bytes(&mut peer, request(mode, backend));
            assert_eq!(
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(&expected),
                "{what}: the arguments did not arrive verbatim"
            );
            assert_eq!(out, expected, "{what}: the bytes differ");
            let e = exited(&replies);
            assert_eq!(
                e.status,
                ExitStatus::Code(7),
                "{what}: the write was not denied"
            );
            assert_confined_facts(e, backend, &what);
            assert_eq!(
                std::fs::read_to_string(&canary).expect("canary"),
                "original\n"
            );

            // argv[0] that looks like an option names a program, which does not exist.
            let mut request = confined(2, &["--bind", "/", "/", "sh", "-c"], mode, backend, None);
            request.argv.push(b"echo pwned > \"$CANARY\"".to_vec());
            request.env.push(canary_env.clone());
            let (replies, out) = run_bytes(&mut peer, request);
            let e = exited(&replies);
            assert_eq!(
                e.status,
                ExitStatus::Code(127),
                "{what}: argv[0] --bind: {e:?}"
            );
            assert_eq!(
                e.exec_errno,
                Some(nix::libc::ENOENT),
                "{what}: argv[0] --bind"
            );
            assert_eq!(out, b"", "{what}: argv[0] --bind printed");
            assert_eq!(
                std::fs::read_to_string(&canary).expect("canary"),
                "original\n"
            );
        }
    }

    // A program that is really named --bind runs, gets the rest verbatim, and stays confined.
    let bin = ws.0.join("bin");
    std::fs::create_dir(&bin).expect("mkdir");
    let program = bin.join("--bind");
    std::fs::write(
        &program,
        format!("#!/bin/sh\nprintf '%s\\n' \"$@\"\n{tries_to_write}\n"),
    )
    .expect("program");
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let rest: &[&[u8]] = &[b"/", b"/", b"--setenv", b"X", b"Y", b"sh"];
    for &backend in &backends {
        let what = format!("a program named --bind under {backend:?}");
        let mut request = confined(3, &["--bind"], Mode::WorkspaceWrite, backend, Some(&ws.0));
        request.argv.extend(rest.iter().map(|a| a.to_vec()));
        request.env[0].value = format!("{}:/usr/bin:/bin", text(&bin)).into_bytes();
        request.env.push(canary_env.clone());
        let (replies, out) = run_bytes(&mut peer, request);
        assert_eq!(out, lines_of(rest), "{what}");
        let e = exited(&replies);
        assert_eq!(
            e.status,
            ExitStatus::Code(7),
            "{what}: the write was not denied"
        );
        assert_confined_facts(e, backend, &what);
        assert_eq!(
            std::fs::read_to_string(&canary).expect("canary"),
            "original\n"
        );
    }

    // The control: unconfined, the same command prints the same and does write.
    let (replies, out) = run_bytes(&mut peer, request(Mode::DangerFullAccess, backends[0]));
    assert_eq!(out, expected, "the control");
    assert_eq!(exited(&replies).status, ExitStatus::Code(0), "the control");
    assert_eq!(std::fs::read_to_string(&canary).expect("canary"), "pwned\n");
    target.assert_serving("argv that looks like bwrap options");
}

// ---------------------------------------------------------------------------------------------
// NUL and newline in paths, argv and the environment.
// ---------------------------------------------------------------------------------------------

#[test]
fn a_nul_byte_in_any_path_is_refused_naming_the_field() {
    const NAME: &str = "a_nul_byte_in_any_path_is_refused_naming_the_field";
    let mut target = Target::start("nul", &[]);
    let Some(backend) = target.backend else {
        skip(
            NAME,
            Need::Backend,
            "no backend works here to read workspace-write paths",
        );
        return;
    };
    let ws = host_scratch("nul-ws");
    let canary = ws.0.join("ran");
    let with_nul = |p: &Path| [bytes(p), b"\0/x".to_vec()].concat();
    let base = || {
        let argv = ["sh", "-c", "echo ran > \"$0\"", text(&canary)];
        confined(1, &argv, Mode::WorkspaceWrite, backend, Some(&ws.0))
    };
    let env = |name: &[u8], value: &[u8]| EnvVar {
        name: name.to_vec(),
        value: value.to_vec(),
    };
    type Change<'a> = Box<dyn Fn(&mut Spawn) + 'a>;
    let cases: Vec<(&str, Change<'_>)> = vec![
        ("cwd", Box::new(|s| s.cwd = with_nul(&ws.0))),
        ("argv[4]", Box::new(|s| s.argv.push(b"a\0b".to_vec()))),
        (
            "environment entry 1",
            Box::new(move |s| s.env.push(env(b"A\0B", b"x"))),
        ),
        (
            "environment entry 1",
            Box::new(move |s| s.env.push(env(b"V", b"a\0b"))),
        ),
        (
            "policy.workspace_root",
            Box::new(|s| s.policy.workspace_root = Some(with_nul(&ws.0))),
        ),
        (
            "policy.writable_roots[1]",
            Box::new(|s| s.policy.writable_roots = vec![bytes(&ws.0), with_nul(&ws.0)]),
        ),
        (
            "policy.session_temp",
            Box::new(|s| s.policy.session_temp = Some(with_nul(&ws.0))),
        ),
        (
            "policy.deny_read[0]",
            Box::new(|s| s.policy.deny_read = vec![with_nul(&ws.0)]),
        ),
        (
            "policy.protected[0]",
            Box::new(|s| s.policy.protected = vec![b"a\0b".to_vec()]),
        ),
        (
            "policy.never_writable[0]",
            Box::new(|s| s.policy.never_writable = vec![with_nul(&ws.0)]),
        ),
        (
            "policy.unix_sockets[0]",
            Box::new(|s| s.policy.unix_sockets = vec![with_nul(&ws.0)]),
        ),
    ];
    let mut peer = target.connect();
    for (field, change) in &cases {
        let mut request = base();
        change(&mut request);
        let (replies, out) = run_captured(&mut peer, request);
        let reason = refused(&replies, &out, field);
        assert!(
            reason.contains(field),
            "NUL in {field}: the reason does not name it: {reason:?}"
        );
        assert!(
            reason.contains("NUL"),
            "NUL in {field}: the reason does not say NUL: {reason:?}"
        );
        assert!(!canary.exists(), "NUL in {field}: the command ran");
    }
    // The control: the request without a NUL runs.
    let (replies, _) = run_captured(&mut peer, base());
    assert_eq!(exited(&replies).status, ExitStatus::Code(0), "the control");
    assert!(canary.exists(), "the control did not write");
    target.assert_serving("NUL bytes in paths");
}

#[test]
fn a_newline_in_paths_argv_and_environment_is_plain_data_and_confinement_holds() {
    const NAME: &str =
        "a_newline_in_paths_argv_and_environment_is_plain_data_and_confinement_holds";
    let mut target = Target::start("newline", &[]);
    let backends = target.backends.clone();
    if backends.is_empty() {
        skip(NAME, Need::Backend, "no backend works here");
        return;
    }
    let ws = host_scratch("newline-ws");
    let root = ws.0.join("line\nbreak");
    std::fs::create_dir(&root).expect("mkdir");
    let host = host_scratch("newline-host");
    let canary = host.0.join("canary\nfile");
    let secret = host.0.join("secret\nfile");
    std::fs::write(&canary, "original\n").expect("canary");
    std::fs::write(&secret, "secret\n").expect("secret");
    // Exit 10, plus 2 if the canary's path could be written and 1 if the denied file's content
    // was read (bwrap and the helper's own namespaces cover a denied file with an empty one,
    // Landlock denies opening it). When the build's temp directory lies under /tmp, a
    // workspace-write sandbox of either has its own /tmp, where the denied file's directory is
    // made, so the write may land there: the host file is what tells.
    let script = "pwd; printf '%s|' \"$1\" \"$V\"; echo; echo in > inside || exit 5; w=0; r=0; \
                  echo pwned > \"$CANARY\" && w=1; grep -q secret \"$DENIED\" 2> /dev/null && r=1; \
                  exit $((10 + w * 2 + r))";
    let arg = "an argument\nover --bind / /\nthree lines";
    let value = "a value\n--setenv X Y";
    let request = |mode, backend| {
        let mut request = confined(
            1,
            &["sh", "-c", script, "sh", arg],
            mode,
            backend,
            Some(&root),
        );
        request.cwd = bytes(&root);
        request.policy.deny_read = vec![bytes(&secret)];
        request.env.extend([
            EnvVar {
                name: b"V".to_vec(),
                value: value.as_bytes().to_vec(),
            },
            EnvVar {
                name: b"CANARY".to_vec(),
                value: bytes(&canary),
            },
            EnvVar {
                name: b"DENIED".to_vec(),
                value: bytes(&secret),
            },
        ]);
        request
    };
    let expected = format!("{}\n{arg}|{value}|\n", text(&root));
    let mut peer = target.connect();
    for &backend in &backends {
        let what = format!("{backend:?}");
        let (replies, out) = run_captured(&mut peer, request(Mode::WorkspaceWrite, backend));
        assert_eq!(out, expected, "{what}: output");
        let e = exited(&replies);
        assert!(
            matches!(e.status, ExitStatus::Code(10 | 12)),
            "{what}: 11 or 13 means the denied file was read: {:?}",
            e.status
        );
        assert_confined_facts(e, backend, &what);
        assert!(
            root.join("inside").exists(),
            "{what}: the writable root was not writable"
        );
        std::fs::remove_file(root.join("inside")).expect("rm");
        assert_eq!(
            std::fs::read_to_string(&canary).expect("canary"),
            "original\n"
        );
    }
    // The control: unconfined, the same command writes the canary and reads the file.
    let (replies, out) = run_captured(&mut peer, request(Mode::DangerFullAccess, backends[0]));
    assert_eq!(out, expected, "the control");
    assert_eq!(exited(&replies).status, ExitStatus::Code(13), "the control");
    assert_eq!(std::fs::read_to_string(&canary).expect("canary"), "pwned\n");
    target.assert_serving("newlines in paths");
}
