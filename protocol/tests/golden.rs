//! Golden wire vectors: `tests/golden.txt` holds the complete frame of one sample per message
//! type, per enum variant and per `Option`/`bool` state, so any change to the bytes on the wire
//! shows up as a diff of that file.
//!
//! Regenerate with `UPDATE_GOLDEN=1 cargo test -p confine-protocol --test golden`. That run
//! rewrites the file and then fails on purpose, so a CI job that happens to have the variable set
//! can never pass by overwriting the vectors it is meant to check; review the diff and rerun
//! without the variable.
//!
//! Coverage of enum variants is enforced by the compiler: every enum is enumerated through a
//! `next_*` function with an exhaustive `match` (no `_` arm), and the sample list is built from
//! those walks. Adding a variant fails to compile until its arm exists, and
//! `the_sample_walks_reach_every_variant_of_every_enum` fails until the new arm links the
//! variant into the walk.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::OnceLock;

use confine_protocol::*;
use serde::Serialize;

#[path = "support/outcomes.rs"]
mod outcomes;
use outcomes::{first_gap, first_refusal, next_gap, next_owner, next_path_role, next_refusal};
use serde::de::DeserializeOwned;

/// A top-level value that crosses the wire: the handshake greeting or a message after it.
#[derive(Debug, Clone, PartialEq)]
enum Message {
    Hello(Hello),
    Request(Box<Request>),
    Reply(Reply),
}

impl Message {
    fn encode(&self) -> Vec<u8> {
        match self {
            Message::Hello(m) => encode_frame(m),
            Message::Request(m) => encode_frame(m.as_ref()),
            Message::Reply(m) => encode_frame(m),
        }
        .expect("every golden sample encodes")
    }

    /// Decodes a complete frame as the same type as `self`.
    fn decode_same_type(&self, frame: &[u8]) -> Result<Message, FrameError> {
        match self {
            Message::Hello(_) => decode_frame(frame).map(Message::Hello),
            Message::Request(_) => decode_frame(frame).map(|r| Message::Request(Box::new(r))),
            Message::Reply(_) => decode_frame(frame).map(Message::Reply),
        }
    }
}

/// Runs a complete frame through the real decoder, so the length prefix is checked too.
fn decode_frame<T: DeserializeOwned>(frame: &[u8]) -> Result<T, FrameError> {
    let mut decoder = FrameDecoder::new();
    decoder.feed(frame)?;
    let message = decoder.next_message()?.ok_or(FrameError::Truncated {
        buffered: decoder.buffered(),
    })?;
    decoder.finish()?;
    Ok(message)
}

// ---------------------------------------------------------------------------------------------
// Variant walks. Each `next_*` maps a variant to the next one in wire order and the last one to
// `None`; the `match` must stay exhaustive, which is what makes a new variant a build error.
// ---------------------------------------------------------------------------------------------

fn walk<T>(first: T, next: impl Fn(&T) -> Option<T>) -> Vec<T> {
    let mut all = Vec::new();
    let mut current = Some(first);
    while let Some(value) = current {
        current = next(&value);
        all.push(value);
    }
    all
}

fn next_mode(mode: &Mode) -> Option<Mode> {
    match mode {
        Mode::ReadOnly => Some(Mode::WorkspaceWrite),
        Mode::WorkspaceWrite => Some(Mode::DangerFullAccess),
        Mode::DangerFullAccess => None,
    }
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::ReadOnly => "read_only",
        Mode::WorkspaceWrite => "workspace_write",
        Mode::DangerFullAccess => "danger_full_access",
    }
}

fn next_network(network: &Network) -> Option<Network> {
    match network {
        Network::Deny => Some(Network::Allow),
        Network::Allow => None,
    }
}

fn network_name(network: Network) -> &'static str {
    match network {
        Network::Deny => "deny",
        Network::Allow => "allow",
    }
}

fn next_backend_choice(choice: &BackendChoice) -> Option<BackendChoice> {
    match choice {
        BackendChoice::Auto => Some(BackendChoice::Bwrap),
        BackendChoice::Bwrap => Some(BackendChoice::Landlock),
        BackendChoice::Landlock => Some(BackendChoice::Seatbelt),
        BackendChoice::Seatbelt => Some(BackendChoice::Namespaces),
        BackendChoice::Namespaces => None,
    }
}

fn backend_choice_name(choice: BackendChoice) -> &'static str {
    match choice {
        BackendChoice::Auto => "auto",
        BackendChoice::Bwrap => "bwrap",
        BackendChoice::Landlock => "landlock",
        BackendChoice::Seatbelt => "seatbelt",
        BackendChoice::Namespaces => "namespaces",
    }
}

fn next_backend(backend: &Backend) -> Option<Backend> {
    match backend {
        Backend::None => Some(Backend::Bwrap),
        Backend::Bwrap => Some(Backend::Landlock),
        Backend::Landlock => Some(Backend::Seatbelt),
        Backend::Seatbelt => Some(Backend::Namespaces),
        Backend::Namespaces => None,
    }
}

fn backend_name(backend: Backend) -> &'static str {
    match backend {
        Backend::None => "none",
        Backend::Bwrap => "bwrap",
        Backend::Landlock => "landlock",
        Backend::Seatbelt => "seatbelt",
        Backend::Namespaces => "namespaces",
    }
}

fn next_stdio_spec(spec: &StdioSpec) -> Option<StdioSpec> {
    match spec {
        StdioSpec::Null => Some(StdioSpec::Fd),
        StdioSpec::Fd => None,
    }
}

fn stdio_spec_name(spec: StdioSpec) -> &'static str {
    match spec {
        StdioSpec::Null => "null",
        StdioSpec::Fd => "fd",
    }
}

fn next_exit_status(status: &ExitStatus) -> Option<ExitStatus> {
    match status {
        ExitStatus::Code(_) => Some(ExitStatus::Signal(9)),
        ExitStatus::Signal(_) => None,
    }
}

fn exit_status_name(status: ExitStatus) -> &'static str {
    match status {
        ExitStatus::Code(_) => "code",
        ExitStatus::Signal(_) => "signal",
    }
}

fn next_ending(ending: &Ending) -> Option<Ending> {
    match ending {
        Ending::Exited => Some(Ending::TimedOut),
        Ending::TimedOut => Some(Ending::Cancelled),
        Ending::Cancelled => None,
    }
}

fn ending_name(ending: Ending) -> &'static str {
    match ending {
        Ending::Exited => "exited",
        Ending::TimedOut => "timed_out",
        Ending::Cancelled => "cancelled",
    }
}

fn next_enforcement(enforcement: &Enforcement) -> Option<Enforcement> {
    match enforcement {
        Enforcement::Full => Some(Enforcement::Partial {
            missing: vec![Gap::Truncate, Gap::Signals],
        }),
        Enforcement::Partial { .. } => None,
    }
}

fn enforcement_name(enforcement: &Enforcement) -> &'static str {
    match enforcement {
        Enforcement::Full => "full",
        Enforcement::Partial { .. } => "partial",
    }
}

fn next_layer(layer: &Layer) -> Option<Layer> {
    match layer {
        Layer::Namespaces => Some(Layer::Landlock),
        Layer::Landlock => Some(Layer::Seccomp),
        Layer::Seccomp => None,
    }
}

fn next_stage(stage: &Stage) -> Option<Stage> {
    match stage {
        Stage::Unavailable => Some(Stage::Pipe),
        Stage::Pipe => Some(Stage::Fork),
        Stage::Fork => Some(Stage::Setsid),
        Stage::Setsid => Some(Stage::Stdio),
        Stage::Stdio => Some(Stage::CloseFds),
        Stage::CloseFds => Some(Stage::Chdir),
        Stage::Chdir => Some(Stage::Signals),
        Stage::Signals => Some(Stage::Rlimits),
        Stage::Rlimits => Some(Stage::DeathSignal),
        Stage::DeathSignal => Some(Stage::NoNewPrivs),
        Stage::NoNewPrivs => Some(Stage::Capabilities),
        Stage::Capabilities => Some(Stage::Landlock),
        Stage::Landlock => Some(Stage::Seccomp),
        Stage::Seccomp => Some(Stage::Namespace),
        Stage::Namespace => Some(Stage::RunnerExec),
        Stage::RunnerExec => Some(Stage::Supervise),
        Stage::Supervise => Some(Stage::Prepare),
        Stage::Prepare => Some(Stage::Cgroup),
        Stage::Cgroup => Some(Stage::UserNamespace),
        Stage::UserNamespace => None,
    }
}

fn next_request(request: &Request) -> Option<Request> {
    match request {
        Request::Spawn(_) => Some(Request::Cancel(Cancel {
            id: 7,
            grace_ms: 2_000,
        })),
        Request::Cancel(_) => Some(Request::Info),
        Request::Info => Some(Request::Hints(vec![UsableBefore {
            backend: Backend::Bwrap,
            fingerprint: "helper=0.1.0/8 landlock=6 bwrap=2f7573722f62696e2f6277726170".to_owned(),
        }])),
        Request::Hints(_) => None,
    }
}

fn request_name(request: &Request) -> &'static str {
    match request {
        Request::Spawn(_) => "spawn",
        Request::Cancel(_) => "cancel",
        Request::Info => "info",
        Request::Hints(_) => "hints",
    }
}

fn next_reply(reply: &Reply) -> Option<Reply> {
    match reply {
        Reply::Started(_) => Some(Reply::Exited(exited())),
        Reply::Exited(_) => Some(Reply::RunnerFailed(runner_failed(Stage::Namespace))),
        Reply::RunnerFailed(_) => Some(Reply::Refused(Refused {
            id: 9,
            reason: Refusal::CeilingNetwork,
        })),
        Reply::Refused(_) => Some(Reply::Info(helper_info())),
        Reply::Info(_) => None,
    }
}

fn reply_name(reply: &Reply) -> &'static str {
    match reply {
        Reply::Started(_) => "started",
        Reply::Exited(_) => "exited",
        Reply::RunnerFailed(_) => "runner_failed",
        Reply::Refused(_) => "refused",
        Reply::Info(_) => "info",
    }
}

// ---------------------------------------------------------------------------------------------
// Base samples. Variations below change one field of these at a time, so a diff in the golden
// file points at the bytes of that field.
// ---------------------------------------------------------------------------------------------

fn hello() -> Hello {
    Hello {
        protocol_version: 1,
        schema_hash: 0x0123_4567_89ab_cdef,
        software: "agentd 0.1.0".to_owned(),
    }
}

fn spawn() -> Spawn {
    Spawn {
        id: 1,
        // The last element is not UTF-8: argv is raw bytes on the wire.
        argv: vec![
            b"sh".to_vec(),
            b"-c".to_vec(),
            b"echo hi".to_vec(),
            vec![0xff, 0xfe, 0x00],
        ],
        cwd: b"/ws".to_vec(),
        env: vec![
            EnvVar {
                name: b"PATH".to_vec(),
                value: b"/usr/bin:/bin".to_vec(),
            },
            EnvVar {
                name: b"EMPTY".to_vec(),
                value: Vec::new(),
            },
        ],
        policy: Policy {
            mode: Mode::WorkspaceWrite,
            workspace_root: Some(b"/ws".to_vec()),
            writable_roots: vec![b"/tmp".to_vec()],
            network: Network::Deny,
            protected: vec![b".cargo".to_vec()],
            never_writable: vec![b"/home/u/.config/agentd".to_vec()],
            local_binding: true,
            deny_read: vec![b"/home/u/.ssh".to_vec()],
            session_temp: Some(b"/tmp/agentd-session-a1b2c3".to_vec()),
            unix_sockets: vec![b"/run/docker.sock".to_vec()],
            visible: vec![b"/opt/tools/server.py".to_vec()],
        },
        backend: BackendChoice::Auto,
        limits: Limits {
            timeout_ms: Some(60_000),
            kill_grace_ms: 2_000,
            max_processes: Some(512),
            max_file_size: None,
            max_address_space: Some(1 << 32),
            max_memory: Some(1 << 30),
        },
        stdio: Stdio {
            stdin: StdioSpec::Null,
            stdout: StdioSpec::Fd,
            stderr: StdioSpec::Fd,
        },
        proxy: true,
    }
}

fn minimal_spawn() -> Spawn {
    Spawn {
        id: 0,
        argv: Vec::new(),
        cwd: Vec::new(),
        env: Vec::new(),
        // The constructors: this vector also pins that the most restrictive policy and no
        // limits encode as every field's first value (`spawn()` pins each field by name).
        policy: Policy::read_only(),
        backend: BackendChoice::Auto,
        limits: Limits::none(),
        stdio: Stdio {
            stdin: StdioSpec::Null,
            stdout: StdioSpec::Null,
            stderr: StdioSpec::Null,
        },
        proxy: false,
    }
}

fn exited() -> Exited {
    Exited {
        id: 1,
        status: ExitStatus::Code(0),
        exec_errno: None,
        ending: Ending::Exited,
        backend: Backend::Landlock,
        enforcement: Some(Enforcement::Full),
        layers: vec![Layer::Landlock, Layer::Seccomp],
        usage: Usage {
            wall_us: 1_500_000,
            user_us: 20_000,
            sys_us: 10_000,
            max_rss_kib: 4_096,
        },
        caps: Caps {
            processes: Some(Cap {
                max: 2_048,
                reached: Some(false),
            }),
            memory: None,
        },
    }
}

fn runner_failed(stage: Stage) -> RunnerFailed {
    RunnerFailed {
        id: 3,
        stage,
        errno: 1,
        detail: "operation not permitted".to_owned(),
    }
}

fn helper_info() -> HelperInfo {
    HelperInfo {
        software: "confine-helper 0.1.0".to_owned(),
        pid: 4242,
        backends: walk(Backend::None, next_backend)
            .into_iter()
            .map(|backend| BackendReport {
                backend,
                usable: backend != Backend::Seatbelt,
                detail: backend_name(backend).to_owned(),
                layers: vec![Layer::Landlock, Layer::Seccomp],
                fingerprint: (backend == Backend::Landlock)
                    .then(|| "helper=0.1.0/8 landlock=6".to_owned()),
            })
            .collect(),
        landlock_abi: Some(6),
        grant: Grant {
            max_mode: Mode::WorkspaceWrite,
            network: Network::Deny,
            sources: vec!["/etc/confine-helper/ceiling.toml".to_owned()],
            broken: None,
        },
    }
}

// ---------------------------------------------------------------------------------------------
// The sample list.
// ---------------------------------------------------------------------------------------------

fn samples() -> Vec<(String, Message)> {
    let mut out: Vec<(String, Message)> = Vec::new();
    let mut hello_sample = |name: &str, m: Hello| out.push((name.to_owned(), Message::Hello(m)));

    hello_sample("hello", hello());
    hello_sample(
        "hello.empty_software",
        Hello {
            software: String::new(),
            ..hello()
        },
    );
    hello_sample(
        "hello.max",
        Hello {
            protocol_version: u32::MAX,
            schema_hash: u64::MAX,
            software: "é✓🦀".to_owned(),
        },
    );

    hello_sample(
        "hello.refusal",
        Hello::refusal(
            "confine-helper service: uid 1001 has reached the cap on connections per user, 16",
        ),
    );

    let mut request = |name: String, m: Request| out.push((name, Message::Request(Box::new(m))));
    for r in walk(Request::Spawn(spawn()), next_request) {
        request(format!("request.{}", request_name(&r)), r);
    }
    request(
        "request.spawn.minimal".to_owned(),
        Request::Spawn(minimal_spawn()),
    );
    request(
        "request.spawn.max".to_owned(),
        Request::Spawn(Spawn {
            id: u64::MAX,
            limits: Limits {
                timeout_ms: Some(u64::MAX),
                kill_grace_ms: u32::MAX,
                max_processes: Some(u64::MAX),
                max_file_size: Some(u64::MAX),
                max_address_space: Some(u64::MAX),
                max_memory: Some(u64::MAX),
            },
            ..spawn()
        }),
    );
    request(
        "request.cancel.max".to_owned(),
        Request::Cancel(Cancel {
            id: u64::MAX,
            grace_ms: u32::MAX,
        }),
    );
    for mode in walk(Mode::ReadOnly, next_mode) {
        let mut s = spawn();
        s.policy.mode = mode;
        request(
            format!("request.spawn.mode.{}", mode_name(mode)),
            Request::Spawn(s),
        );
    }
    for network in walk(Network::Deny, next_network) {
        let mut s = spawn();
        s.policy.network = network;
        request(
            format!("request.spawn.network.{}", network_name(network)),
            Request::Spawn(s),
        );
    }
    for backend in walk(BackendChoice::Auto, next_backend_choice) {
        let s = Spawn { backend, ..spawn() };
        request(
            format!("request.spawn.backend.{}", backend_choice_name(backend)),
            Request::Spawn(s),
        );
    }
    for spec in walk(StdioSpec::Null, next_stdio_spec) {
        let s = Spawn {
            stdio: Stdio {
                stdin: spec,
                stdout: spec,
                stderr: spec,
            },
            proxy: false,
            ..spawn()
        };
        request(
            format!("request.spawn.stdio.{}", stdio_spec_name(spec)),
            Request::Spawn(s),
        );
    }
    for (state, root) in [("none", None), ("some", Some(b"/ws".to_vec()))] {
        let mut s = spawn();
        s.policy.workspace_root = root;
        request(
            format!("request.spawn.workspace_root.{state}"),
            Request::Spawn(s),
        );
    }
    for (state, timeout_ms) in [("none", None), ("some", Some(60_000))] {
        let mut s = spawn();
        s.limits.timeout_ms = timeout_ms;
        request(
            format!("request.spawn.timeout_ms.{state}"),
            Request::Spawn(s),
        );
    }

    let mut reply = |name: String, m: Reply| out.push((name, Message::Reply(m)));
    for r in walk(Reply::Started(Started { id: 1, pid: 31_337 }), next_reply) {
        reply(format!("reply.{}", reply_name(&r)), r);
    }
    let mut broken = helper_info();
    broken.grant.max_mode = Mode::ReadOnly;
    broken.grant.broken =
        Some("ceiling /etc/confine-helper/ceiling.toml: line 2: unknown key".into());
    reply("reply.info.broken_ceiling".to_owned(), Reply::Info(broken));
    reply(
        "reply.started.max".to_owned(),
        Reply::Started(Started {
            id: u64::MAX,
            pid: u32::MAX,
        }),
    );
    reply(
        "reply.exited.max".to_owned(),
        Reply::Exited(Exited {
            id: u64::MAX,
            status: ExitStatus::Code(i32::MIN),
            exec_errno: Some(i32::MAX),
            usage: Usage {
                wall_us: u64::MAX,
                user_us: u64::MAX,
                sys_us: u64::MAX,
                max_rss_kib: u64::MAX,
            },
            caps: Caps {
                processes: Some(Cap {
                    max: u64::MAX,
                    reached: Some(true),
                }),
                memory: Some(Cap {
                    max: u64::MAX,
                    reached: Some(true),
                }),
            },
            ..exited()
        }),
    );
    for (name, reached) in [("unknown", None), ("no", Some(false)), ("yes", Some(true))] {
        let cap = Cap { max: 64, reached };
        reply(
            format!("reply.exited.caps.reached_{name}"),
            Reply::Exited(Exited {
                caps: Caps {
                    processes: Some(cap),
                    memory: Some(cap),
                },
                ..exited()
            }),
        );
    }
    reply(
        "reply.exited.caps.none".to_owned(),
        Reply::Exited(Exited {
            caps: Caps {
                processes: None,
                memory: None,
            },
            ..exited()
        }),
    );
    for status in walk(ExitStatus::Code(0), next_exit_status) {
        let e = Exited { status, ..exited() };
        reply(
            format!("reply.exited.status.{}", exit_status_name(status)),
            Reply::Exited(e),
        );
    }
    reply(
        "reply.exited.status.code_negative".to_owned(),
        Reply::Exited(Exited {
            status: ExitStatus::Code(-1),
            ..exited()
        }),
    );
    for (state, exec_errno) in [("none", None), ("some", Some(2))] {
        let e = Exited {
            status: ExitStatus::Code(127),
            exec_errno,
            ..exited()
        };
        reply(format!("reply.exited.exec_errno.{state}"), Reply::Exited(e));
    }
    for ending in walk(Ending::Exited, next_ending) {
        let e = Exited { ending, ..exited() };
        reply(
            format!("reply.exited.ending.{}", ending_name(ending)),
            Reply::Exited(e),
        );
    }
    for backend in walk(Backend::None, next_backend) {
        let e = Exited {
            backend,
            ..exited()
        };
        reply(
            format!("reply.exited.backend.{}", backend_name(backend)),
            Reply::Exited(e),
        );
    }
    reply(
        "reply.exited.enforcement.none".to_owned(),
        Reply::Exited(Exited {
            enforcement: None,
            ..exited()
        }),
    );
    for enforcement in walk(Enforcement::Full, next_enforcement) {
        let name = format!(
            "reply.exited.enforcement.{}",
            enforcement_name(&enforcement)
        );
        reply(
            name,
            Reply::Exited(Exited {
                enforcement: Some(enforcement),
                ..exited()
            }),
        );
    }
    reply(
        "reply.exited.enforcement.partial_empty".to_owned(),
        Reply::Exited(Exited {
            enforcement: Some(Enforcement::Partial {
                missing: Vec::new(),
            }),
            ..exited()
        }),
    );
    for reason in walk(first_refusal(), next_refusal) {
        let name = format!("reply.refused.{}", reason.code().replace('-', "_"));
        reply(name, Reply::Refused(Refused { id: 9, reason }));
    }
    for gap in walk(first_gap(), next_gap) {
        let name = format!(
            "reply.exited.enforcement.gap.{}",
            gap.code().replace('-', "_")
        );
        reply(
            name,
            Reply::Exited(Exited {
                enforcement: Some(Enforcement::Partial { missing: vec![gap] }),
                ..exited()
            }),
        );
    }
    for stage in walk(Stage::Unavailable, next_stage) {
        let name = format!(
            "reply.runner_failed.stage.{}",
            stage.as_str().replace('-', "_")
        );
        reply(name, Reply::RunnerFailed(runner_failed(stage)));
    }
    for (state, landlock_abi) in [("none", None), ("some", Some(6))] {
        let info = HelperInfo {
            landlock_abi,
            ..helper_info()
        };
        reply(
            format!("reply.info.landlock_abi.{state}"),
            Reply::Info(info),
        );
    }
    reply(
        "reply.info.no_backends".to_owned(),
        Reply::Info(HelperInfo {
            backends: Vec::new(),
            ..helper_info()
        }),
    );
    for usable in [false, true] {
        let info = HelperInfo {
            backends: vec![BackendReport {
                backend: Backend::Bwrap,
                usable,
                detail: String::new(),
                layers: Vec::new(),
                fingerprint: None,
            }],
            ..helper_info()
        };
        reply(format!("reply.info.usable.{usable}"), Reply::Info(info));
    }
    for layer in walk(Layer::Namespaces, next_layer) {
        reply(
            format!("reply.exited.layer.{}", layer.as_str()),
            Reply::Exited(Exited {
                layers: vec![layer],
                ..exited()
            }),
        );
    }
    for mode in walk(Mode::ReadOnly, next_mode) {
        let mut info = helper_info();
        info.grant.max_mode = mode;
        info.grant.network = Network::Allow;
        reply(
            format!("reply.info.grant.{}", mode.as_str().replace('-', "_")),
            Reply::Info(info),
        );
    }

    out
}

// ---------------------------------------------------------------------------------------------
// The golden file.
// ---------------------------------------------------------------------------------------------

const HEADER: &str = "\
# Golden wire vectors of confine-protocol, checked by tests/golden.rs.
# Each line is `name: hex of the complete frame`, the 4-byte little-endian length prefix included.
# Any change below is a change of the bytes on the wire: old peers decode these frames differently
# or not at all. Regenerate with UPDATE_GOLDEN=1 cargo test -p confine-protocol --test golden
";

fn golden_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("golden.txt")
}

fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

fn unhex(text: &str) -> Result<Vec<u8>, String> {
    if !text.len().is_multiple_of(2) || !text.is_ascii() {
        return Err(format!("not an even-length ASCII hex string: {text:?}"));
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).map_err(|e| format!("{text:?}: {e}")))
        .collect()
}

fn render() -> String {
    let mut text = HEADER.to_owned();
    let _ = writeln!(text, "\nprotocol_version: {PROTOCOL_VERSION}");
    let _ = writeln!(text, "schema_hash: {SCHEMA_HASH:016x}\n");
    for (name, message) in samples() {
        let _ = writeln!(text, "{name}: {}", hex(&message.encode()));
    }
    text
}

fn parse(text: &str) -> BTreeMap<String, String> {
    let mut entries = BTreeMap::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, value) = line
            .split_once(": ")
            .unwrap_or_else(|| panic!("golden.txt line {}: no `name: value`", number + 1));
        let previous = entries.insert(name.to_owned(), value.to_owned());
        assert!(
            previous.is_none(),
            "golden.txt line {}: {name} appears twice",
            number + 1
        );
    }
    entries
}

/// The golden file's entries. With `UPDATE_GOLDEN` set, rewrites the file once per test run and
/// fails every caller, so regenerated vectors are never also the ones a passing run checked.
fn golden() -> BTreeMap<String, String> {
    if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| !v.is_empty() && v != "0") {
        static WRITTEN: OnceLock<()> = OnceLock::new();
        WRITTEN.get_or_init(|| {
            let path = golden_path();
            let temporary = path.with_extension("txt.tmp");
            std::fs::write(&temporary, render()).expect("write golden.txt.tmp");
            std::fs::rename(&temporary, &path).expect("replace golden.txt");
        });
        panic!(
            "UPDATE_GOLDEN is set: rewrote {}; review the diff and rerun without UPDATE_GOLDEN",
            golden_path().display()
        );
    }
    let text = std::fs::read_to_string(golden_path()).unwrap_or_else(|e| {
        panic!(
            "cannot read {}: {e}; create it with UPDATE_GOLDEN=1 cargo test -p confine-protocol \
             --test golden",
            golden_path().display()
        )
    });
    parse(&text)
}

const META: [&str; 2] = ["protocol_version", "schema_hash"];

fn golden_vectors() -> BTreeMap<String, String> {
    let mut entries = golden();
    for key in META {
        entries.remove(key);
    }
    entries
}

// ---------------------------------------------------------------------------------------------
// Tests.
// ---------------------------------------------------------------------------------------------

#[test]
fn every_sample_encodes_to_the_bytes_in_the_golden_file() {
    let golden = golden_vectors();
    let mut mismatches = Vec::new();
    for (name, message) in samples() {
        let actual = hex(&message.encode());
        match golden.get(&name) {
            Some(expected) if *expected == actual => {}
            Some(expected) => mismatches.push(format!(
                "{name}:\n  golden:  {expected}\n  encoded: {actual}"
            )),
            None => mismatches.push(format!("{name}: missing from golden.txt")),
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} sample(s) differ from golden.txt:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

#[test]
fn every_golden_vector_decodes_back_to_its_sample() {
    let golden = golden_vectors();
    let mut failures = Vec::new();
    for (name, message) in samples() {
        let Some(text) = golden.get(&name) else {
            continue;
        };
        let frame = unhex(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        match message.decode_same_type(&frame) {
            Ok(decoded) if decoded == message => {}
            Ok(decoded) => failures.push(format!("{name}: decoded {decoded:?}, want {message:?}")),
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "golden vectors that do not decode back:\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_golden_file_names_exactly_the_samples() {
    let golden = golden_vectors();
    let sampled: BTreeMap<String, Message> = samples().into_iter().collect();
    let stale: Vec<&String> = golden
        .keys()
        .filter(|name| !sampled.contains_key(*name))
        .collect();
    let missing: Vec<&String> = sampled
        .keys()
        .filter(|name| !golden.contains_key(*name))
        .collect();
    assert!(
        stale.is_empty() && missing.is_empty(),
        "golden.txt names no sample produces: {stale:?}; samples missing from golden.txt: \
         {missing:?}"
    );
}

#[test]
fn sample_names_are_unique() {
    let mut seen = std::collections::BTreeSet::new();
    for (name, _) in samples() {
        assert!(
            seen.insert(name.clone()),
            "sample name {name} is used twice"
        );
    }
}

#[test]
fn the_golden_file_pins_the_protocol_version_and_schema_hash() {
    let golden = golden();
    assert_eq!(
        golden.get("protocol_version").map(String::as_str),
        Some(PROTOCOL_VERSION.to_string().as_str()),
        "PROTOCOL_VERSION changed; regenerate golden.txt so the change is reviewed"
    );
    assert_eq!(
        golden.get("schema_hash").map(String::as_str),
        Some(format!("{SCHEMA_HASH:016x}").as_str()),
        "the wire schema changed (SCHEMA_HASH); regenerate golden.txt so the change is reviewed"
    );
}

#[test]
fn the_stage_walk_is_stage_all_in_wire_order() {
    let walked = walk(Stage::Unavailable, next_stage);
    assert_eq!(walked, Stage::ALL);
    for (index, stage) in walked.iter().enumerate() {
        let index = u32::try_from(index).unwrap();
        assert_eq!(stage.index(), index);
        assert_eq!(Stage::from_index(index), Some(*stage));
    }
    assert_eq!(
        Stage::from_index(u32::try_from(Stage::ALL.len()).unwrap()),
        None
    );
}

/// Whether postcard knows a variant with this index: a missing variant is the only thing that
/// makes serde's derived enum visitor fail with a custom error on a bare variant index.
fn has_variant<T: DeserializeOwned>(index: u32) -> bool {
    let mut bytes = Vec::new();
    let mut rest = index;
    loop {
        let byte = (rest & 0x7f) as u8;
        rest >>= 7;
        if rest == 0 {
            bytes.push(byte);
            break;
        }
        bytes.push(byte | 0x80);
    }
    !matches!(
        postcard::from_bytes::<T>(&bytes),
        Err(postcard::Error::SerdeDeCustom)
    )
}

fn assert_walk_is_complete<T: DeserializeOwned + Serialize>(name: &str, walked: &[T]) {
    let count = u32::try_from(walked.len()).unwrap();
    for (index, value) in walked.iter().enumerate() {
        let encoded = postcard::to_allocvec(value).unwrap();
        assert_eq!(
            encoded.first().copied(),
            u8::try_from(index).ok(),
            "{name}: the walk is not in wire order at position {index}"
        );
        assert!(has_variant::<T>(u32::try_from(index).unwrap()));
    }
    assert!(
        !has_variant::<T>(count),
        "{name} has a variant with wire index {count} that its next_* walk does not reach"
    );
}

#[test]
fn the_sample_walks_reach_every_variant_of_every_enum() {
    assert_walk_is_complete("Mode", &walk(Mode::ReadOnly, next_mode));
    assert_walk_is_complete("Network", &walk(Network::Deny, next_network));
    assert_walk_is_complete(
        "BackendChoice",
        &walk(BackendChoice::Auto, next_backend_choice),
    );
    assert_walk_is_complete("Backend", &walk(Backend::None, next_backend));
    assert_walk_is_complete("StdioSpec", &walk(StdioSpec::Null, next_stdio_spec));
    assert_walk_is_complete("ExitStatus", &walk(ExitStatus::Code(0), next_exit_status));
    assert_walk_is_complete("Ending", &walk(Ending::Exited, next_ending));
    assert_walk_is_complete("Enforcement", &walk(Enforcement::Full, next_enforcement));
    assert_walk_is_complete("Layer", &walk(Layer::Namespaces, next_layer));
    assert_walk_is_complete("Refusal", &walk(first_refusal(), next_refusal));
    assert_walk_is_complete("Gap", &walk(first_gap(), next_gap));
    assert_walk_is_complete("PathRole", &walk(PathRole::WritableRoot, next_path_role));
    assert_walk_is_complete("Owner", &walk(Owner::Helper, next_owner));
    assert_walk_is_complete("Stage", &walk(Stage::Unavailable, next_stage));
    assert_walk_is_complete("Request", &walk(Request::Spawn(spawn()), next_request));
    assert_walk_is_complete(
        "Reply",
        &walk(Reply::Started(Started { id: 1, pid: 1 }), next_reply),
    );
}
