//! Service mode: `confine-service` listening on a path, the peer-uid check, the hand-off to a
//! helper per peer, and a bad peer that must not take the service down for the others.

// Linux only: these tests drive the bwrap, namespace and Landlock backends, `/proc` or Linux's
// own system calls. On macOS `macos_supervision.rs` drives the helper.
#![cfg(target_os = "linux")]

#[path = "../../tests/shared/socket_activation.rs"]
mod socket_activation;
mod support;

use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use confine_protocol::{ExitStatus, Hello, Mode, Reply, Request, StdioSpec, encode_frame};
use support::skip::{Need, skip, skip_part};
use support::{
    Peer, Scratch, Service, available_backends, connect_as, open_to_everyone, run_captured,
    service_bin, service_for_every_user, spawn, users,
};

#[test]
fn the_socket_is_private_to_its_owner() {
    let dir = Scratch::new("perm");
    let service = Service::start(&dir.0, &[]);
    let sock_mode = std::fs::metadata(&service.socket)
        .expect("socket")
        .permissions()
        .mode();
    let dir_mode = std::fs::metadata(service.socket.parent().expect("dir"))
        .expect("dir")
        .permissions()
        .mode();
    assert_eq!(sock_mode & 0o777, 0o600);
    assert_eq!(dir_mode & 0o777, 0o700);
}

#[test]
fn a_socket_directory_other_users_can_enter_is_rejected() {
    let dir = Scratch::new("opendir");
    let run = dir.0.join("run");
    std::fs::create_dir(&run).expect("mkdir");
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let out = Command::new(service_bin())
        .arg("--socket")
        .arg(run.join("helper.sock"))
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not safe") && err.contains("755"), "{err}");
    assert!(!run.join("helper.sock").exists());
}

#[test]
fn a_peer_whose_uid_is_not_allowed_is_refused_and_logged() {
    const NAME: &str = "a_peer_whose_uid_is_not_allowed_is_refused_and_logged";
    if !nix::unistd::geteuid().is_root() {
        skip(
            NAME,
            Need::Root,
            "a helper that is not root refuses to serve another uid at all \
             (a_helper_that_is_not_root_refuses_to_serve_another_uid)",
        );
        return;
    }
    let dir = Scratch::new("uid");
    let me = nix::unistd::geteuid().as_raw();
    let other = if me == 4242 { 4243 } else { 4242 };
    let service = Service::start(&dir.0, &["--allow-uid", &other.to_string()]);
    let mut peer = Peer::connect(&service.socket).expect("connect");
    assert!(
        peer.read_message::<confine_protocol::Hello>().is_none(),
        "a refused peer must not even be greeted"
    );
    let line = service.expect_log("refused peer uid");
    assert!(line.contains(&format!("uid {me}")), "{line}");
}

#[test]
fn a_peer_that_breaks_the_protocol_is_cut_off_and_others_keep_being_served() {
    let dir = Scratch::new("bad");
    let mut service = Service::start(&dir.0, &[]);
    let mut good = Peer::connect(&service.socket).expect("connect");
    good.greet();

    let valid = encode_frame(&Request::Info).expect("encode");
    let mut trailing = valid.clone();
    trailing[0] += 1;
    trailing.push(0);
    let mut unknown_variant = valid.clone();
    unknown_variant[4] = 5;
    let bad_inputs: Vec<(&str, Vec<u8>, bool)> = vec![
        ("zero-length", vec![0, 0, 0, 0], false),
        ("oversized", vec![0xff, 0xff, 0xff, 0xff], false),
        (
            "over the cap by one",
            (confine_protocol::MAX_FRAME + 1).to_le_bytes().to_vec(),
            false,
        ),
        ("trailing bytes", trailing, false),
        ("unknown request variant", unknown_variant, false),
        ("truncated then closed", vec![10, 0, 0, 0, 1, 2], true),
    ];
    for (what, bytes, then_close) in bad_inputs {
        let mut bad = Peer::connect(&service.socket).expect("connect");
        bad.greet();
        bad.send_raw(&bytes);
        if then_close {
            bad.sock
                .shutdown(std::net::Shutdown::Write)
                .expect("shutdown");
        }
        assert!(
            bad.read_message::<Reply>().is_none(),
            "{what}: the helper must close the connection"
        );
        service.expect_log("protocol error");
        assert!(service.still_running(), "{what}: the service must survive");
    }

    good.send(&Request::Spawn(spawn(5, &["sh", "-c", "exit 4"])), &[]);
    match good.until_end(5).last() {
        Some(Reply::Exited(e)) => assert_eq!(e.status, ExitStatus::Code(4)),
        other => panic!("the good peer was not served: {other:?}"),
    }
}

#[test]
fn a_greeting_that_is_not_a_hello_is_a_protocol_error() {
    let dir = Scratch::new("greet");
    let service = Service::start(&dir.0, &[]);
    let mut bad = Peer::connect(&service.socket).expect("connect");
    bad.sock.write_all(&[1, 0, 0, 0, 0xff]).expect("write");
    let _hello: Option<confine_protocol::Hello> = bad.read_message();
    assert!(bad.read_message::<Reply>().is_none());
    service.expect_log("protocol error in greeting");
}

/// `confine-service --socket DIR/run/helper.sock ARGS` as a user other than root: as this
/// process's user, or, as root, as `nobody` from a copy of the helper that user can reach (the
/// copy's directory is returned with it); and that user's uid.
fn serve_as_a_user(dir: &Path, args: &[&str]) -> (Command, Option<Scratch>, u32) {
    let (mut command, copy, uid);
    if nix::unistd::geteuid().is_root() {
        let (service, bin) = service_for_every_user();
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        command = Command::new(&service);
        command.uid(65534).gid(65534);
        (copy, uid) = (Some(bin), 65534);
    } else {
        command = Command::new(service_bin());
        (copy, uid) = (None, nix::unistd::geteuid().as_raw());
    }
    command
        .arg("--socket")
        .arg(dir.join("run").join("helper.sock"))
        .args(args);
    (command, copy, uid)
}

#[test]
fn a_helper_that_is_not_root_refuses_to_serve_another_uid() {
    let dir = Scratch::new("not-root");
    for args in [&["--allow-uid", "4242"][..], &["--group", "root"][..]] {
        let (mut command, _copy, _) = serve_as_a_user(&dir.0, args);
        let out = command.output().expect("run confine-service");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}: {err}");
        assert!(
            err.contains("is not root, so it would run the commands of")
                && err.contains("as its own uid"),
            "{args:?}: {err}"
        );
        assert!(!dir.0.join("run").exists(), "{args:?}: it made its socket");
    }
    // The control: the same user, allowing its own uid alone, serves.
    let (probe, _copy, uid) = serve_as_a_user(&dir.0, &[]);
    drop(probe);
    let (command, _copy, _) = serve_as_a_user(&dir.0, &["--allow-uid", &uid.to_string()]);
    let service = Service::start_command(dir.0.join("run").join("helper.sock"), command);
    assert!(service.socket.exists());
}

/// A listening socket at `path` (its directory 0700) made as systemd's socket unit would make
/// it, and a helper started with it as descriptor 3 and `LISTEN_PID`/`LISTEN_FDS` set for it.
fn activated(path: &Path, socket_mode: u32, listening: bool, args: &[&str]) -> Command {
    let dir = path.parent().expect("dir");
    std::fs::create_dir_all(dir).expect("mkdir");
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let sock = socket_activation::bound(path, listening);
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(socket_mode)).expect("chmod");
    socket_activation::activated(service_bin().as_os_str(), args, sock)
}

#[test]
fn the_socket_a_service_manager_passes_is_taken_only_if_it_is_the_one_asked_for() {
    let dir = Scratch::new("activated");
    let path = dir.0.join("run").join("helper.sock");
    let arg = path.to_str().expect("utf-8").to_owned();

    // The control: the socket at --socket, listening, 0600, is served.
    let service = Service::start_command(
        path.clone(),
        activated(&path, 0o600, true, &["--socket", &arg]),
    );
    let mut peer = Peer::connect(&path).expect("connect");
    peer.greet();
    peer.send(&Request::Spawn(spawn(1, &["sh", "-c", "exit 3"])), &[]);
    match peer.until_end(1).last() {
        Some(Reply::Exited(e)) => assert_eq!(e.status, ExitStatus::Code(3)),
        other => panic!("the activated service did not serve: {other:?}"),
    }
    drop(service);
    std::fs::remove_file(&path).expect("remove the socket");

    let elsewhere = dir.0.join("run").join("other.sock");
    let other_arg = elsewhere.to_str().expect("utf-8").to_owned();
    let cases: [(&str, u32, bool, &str, &str); 3] = [
        (
            "open to everyone",
            0o666,
            true,
            &arg,
            "other users could connect",
        ),
        ("not listening", 0o600, false, &arg, "is not listening"),
        (
            "bound elsewhere",
            0o600,
            true,
            &other_arg,
            "not to --socket",
        ),
    ];
    for (what, mode, listening, asked, says) in cases {
        let out = activated(&path, mode, listening, &["--socket", asked])
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{what}: it served: {err}");
        assert!(err.contains(says), "{what}: {err}");
        std::fs::remove_file(&path).expect("remove the socket");
    }
}

#[test]
fn a_group_socket_is_0660_and_the_group_s_in_a_directory_only_the_helper_writes() {
    const NAME: &str =
        "a_group_socket_is_0660_and_the_group_s_in_a_directory_only_the_helper_writes";
    // A group the helper's user may give its files: its own primary group.
    let gid = nix::unistd::getegid();
    let Ok(Some(group)) = nix::unistd::Group::from_gid(gid) else {
        skip(
            NAME,
            Need::Users,
            format!("the primary group {gid} has no name"),
        );
        return;
    };
    let dir = Scratch::new("group");
    if !nix::unistd::geteuid().is_root() {
        // Not root, it serves no other uid: the group option is refused (tested above).
        skip(NAME, Need::Root, "only root serves a group");
        return;
    }
    let service = Service::start(&dir.0, &["--group", &group.name]);
    let sock = std::fs::metadata(&service.socket).expect("socket");
    let run = std::fs::metadata(service.socket.parent().expect("dir")).expect("dir");
    use std::os::unix::fs::MetadataExt;
    assert_eq!(sock.mode() & 0o777, 0o660);
    assert_eq!(sock.gid(), gid.as_raw());
    assert_eq!(run.mode() & 0o777, 0o750);
    assert_eq!(run.gid(), gid.as_raw());
    // Served, by a helper of its own, as the peer (root here).
    let mut peer = Peer::connect(&service.socket).expect("connect");
    peer.greet();
    service.expect_log("served by helper pid");
    drop(service);

    // A directory others may write is refused, and the reason says how to fix it.
    let open = Scratch::new("group-open");
    let run = open.0.join("run");
    std::fs::create_dir(&run).expect("mkdir");
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o775)).expect("chmod");
    let out = Command::new(service_bin())
        .arg("--socket")
        .arg(run.join("helper.sock"))
        .args(["--group", &group.name])
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("others could replace the socket"), "{err}");
    assert!(!run.join("helper.sock").exists());
}

/// Under each backend that keeps `unix_sockets` (bwrap and the helper's own namespaces).
#[test]
fn the_service_socket_is_never_a_socket_a_command_may_connect_to() {
    const NAME: &str = "the_service_socket_is_never_a_socket_a_command_may_connect_to";
    let backends = support::namespace_backends(NAME);
    if backends.is_empty() {
        return;
    }
    let dir = Scratch::new("own-socket");
    let service = Service::start(&dir.0, &[]);
    let mut peer = Peer::connect(&service.socket).expect("connect");
    peer.greet();
    // Another socket, outside any writable root: the control, which may be listed.
    let elsewhere = Scratch::new("other-socket");
    let other = elsewhere.0.join("other.sock");
    let _listening = std::os::unix::net::UnixListener::bind(&other).expect("bind");
    let request = |id: u64, socket: &Path, backend| {
        let mut request = spawn(id, &["true"]);
        request.policy.mode = confine_protocol::Mode::ReadOnly;
        request.backend = backend;
        request.policy.unix_sockets = vec![socket.as_os_str().as_encoded_bytes().to_vec()];
        request
    };

    for backend in backends {
        // The control, with the backend working here (judged above without the helper): a
        // socket elsewhere is listed and the command runs. Were every listed socket refused,
        // this fails.
        peer.send(&Request::Spawn(request(1, &other, backend)), &[]);
        match peer.until_end(1).as_slice() {
            [.., Reply::Exited(e)] => assert_eq!(e.status, ExitStatus::Code(0), "{backend:?}"),
            other => panic!(
                "the control, listing a socket elsewhere, did not run under {backend:?}: {other:?}"
            ),
        }
        peer.send(&Request::Spawn(request(2, &service.socket, backend)), &[]);
        match peer.until_end(2).as_slice() {
            [Reply::Refused(r)] => assert!(
                r.reason
                    .to_string()
                    .contains("one of the helper's own files"),
                "{backend:?}: refused for another reason: {}",
                r.reason
            ),
            other => panic!(
                "{backend:?}: the service socket was accepted as a unix_sockets entry: {other:?}"
            ),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// What one peer may hold of a root service: its connections (helpers) per uid and in all, its
// own process limit, its place when idle, and a cgroup per uid.
// ---------------------------------------------------------------------------------------------

/// The users these tests make (and remove when they end): one for each test that counts a
/// user's processes, and one whose commands show that the service still serves everyone else.
const NPROC_USER: &str = "confine-svc-nproc";
const CAPPED_USER: &str = "confine-svc-capped";
const OTHER_USER: &str = "confine-svc-other";

/// A root service serving `uids`, each by a helper of its own started from a copy of the
/// helper every user can execute, with `extra` arguments; its socket open to everyone. The
/// scratch directories go with it.
fn root_service(tag: &str, uids: &[u32], extra: &[&str]) -> (Service, [Scratch; 2]) {
    let dir = Scratch::new(tag);
    let (service, bin) = service_for_every_user();
    let socket = dir.0.join("run").join("helper.sock");
    let mut command = Command::new(service);
    command.arg("--socket").arg(&socket);
    for uid in uids {
        command.args(["--allow-uid", &uid.to_string()]);
    }
    command.args(extra);
    let service = Service::start_command(socket, command);
    open_to_everyone(&service.socket);
    (service, [dir, bin])
}

/// How a service answered a connection: served (it greeted; ours is sent back), or refused,
/// with the reason its refusal gives.
enum Answer {
    Served(Peer),
    Refused(String),
}

fn answer(sock: UnixStream) -> Answer {
    let mut peer = Peer::over(sock);
    let hello: Hello = peer.read_message().expect("a greeting or a refusal");
    match hello.refused() {
        Some(reason) => Answer::Refused(reason.to_owned()),
        None => {
            peer.send_raw(&encode_frame(&Hello::ours("service-test")).expect("encode"));
            Answer::Served(peer)
        }
    }
}

/// The served peers and the refusals among `answers`.
fn sort(answers: Vec<Answer>) -> (Vec<Peer>, Vec<String>) {
    let (mut served, mut refused) = (Vec::new(), Vec::new());
    for answer in answers {
        match answer {
            Answer::Served(peer) => served.push(peer),
            Answer::Refused(reason) => refused.push(reason),
        }
    }
    (served, refused)
}

/// The output of `id -u` run confined (read-only, the first backend that works here) by the
/// helper serving `peer`; `None` when no backend works here.
fn confined_uid(peer: &mut Peer, test: &str) -> Option<String> {
    let backend = available_backends(test).first().copied()?;
    let mut request = spawn(1, &["id", "-u"]);
    request.policy.mode = Mode::ReadOnly;
    request.backend = backend;
    let (replies, out) = run_captured(peer, request);
    match replies.last() {
        Some(Reply::Exited(e)) => assert_eq!(e.status, ExitStatus::Code(0), "{replies:?}"),
        other => panic!("the confined command did not run: {other:?}"),
    }
    Some(out.trim().to_owned())
}

/// Checks that the service serves `user` a confined command of its own, as itself.
fn assert_serves_confined(service: &Service, user: (u32, u32), name: &str) {
    let mut held = connect_as(user, &service.socket, 1, None).expect("connect");
    let Answer::Served(mut peer) = answer(held.socks.remove(0)) else {
        panic!("{name}: the other user was refused");
    };
    match confined_uid(&mut peer, name) {
        Some(uid) => assert_eq!(uid, user.0.to_string(), "{name}: ran as another uid"),
        None => skip_part(
            name,
            "the confined control",
            Need::Backend,
            "no backend works here",
        ),
    }
}

#[test]
fn a_user_holds_no_more_helpers_than_its_process_limit_allows_while_another_is_served() {
    const NAME: &str =
        "a_user_holds_no_more_helpers_than_its_process_limit_allows_while_another_is_served";
    if !nix::unistd::geteuid().is_root() {
        skip(
            NAME,
            Need::Root,
            "making users and a root service needs root",
        );
        return;
    }
    let limited_user = users::system_user(NPROC_USER, &[]);
    let other_user = users::system_user(OTHER_USER, &[]);
    let (limited, other) = (limited_user.ids(), other_user.ids());
    let (service, _dirs) = root_service("nproc", &[limited.0, other.0], &[]);
    // The user's one process, connecting TRIES times, may have LIMIT processes: the kernel
    // checks the count when a helper takes the uid, before counting it, so the user reaches
    // LIMIT + 1 at most: its own process and LIMIT helpers.
    const LIMIT: u64 = 3;
    const TRIES: usize = 6;
    let mut held =
        connect_as(limited, &service.socket, TRIES, Some(LIMIT)).expect("connect as the user");
    let answers: Vec<Answer> = held.socks.drain(..).map(answer).collect();
    let (served, refused) = sort(answers);
    assert!(
        !served.is_empty() && served.len() as u64 <= LIMIT,
        "{} helpers served a user limited to {LIMIT} processes; refused: {refused:?}",
        served.len()
    );
    assert_eq!(served.len() + refused.len(), TRIES);
    for reason in &refused {
        assert!(
            reason.contains(&format!("uid {}", limited.0))
                && reason.contains(&format!("RLIMIT_NPROC {LIMIT}")),
            "the refusal does not name the limit: {reason}"
        );
    }
    let line = service.expect_log(&format!("RLIMIT_NPROC {LIMIT}"));
    assert!(
        line.contains(&format!(
            "refused peer uid {} (pid {})",
            limited.0,
            held.pid()
        )),
        "{line}"
    );
    // The control: another user is served meanwhile, its command confined and its own.
    assert_serves_confined(&service, other, NAME);
}

#[test]
fn a_user_past_a_cap_is_refused_naming_it_while_others_are_served() {
    const NAME: &str = "a_user_past_a_cap_is_refused_naming_it_while_others_are_served";
    if !nix::unistd::geteuid().is_root() {
        skip(
            NAME,
            Need::Root,
            "making users and a root service needs root",
        );
        return;
    }
    let capped_user = users::system_user(CAPPED_USER, &[]);
    let other_user = users::system_user(OTHER_USER, &[]);
    let (capped, other) = (capped_user.ids(), other_user.ids());
    let caps = ["--max-per-user", "2", "--max-connections", "3"];
    let (service, _dirs) = root_service("caps", &[capped.0, other.0], &caps);

    let mut held = connect_as(capped, &service.socket, 3, None).expect("connect");
    let (mut served, refused) = sort(held.socks.drain(..).map(answer).collect());
    assert_eq!(served.len(), 2, "refused: {refused:?}");
    let [reason] = refused.as_slice() else {
        panic!("expected one refusal: {refused:?}");
    };
    assert!(
        reason.contains(&format!(
            "uid {} has reached the cap on connections per user, 2 (--max-per-user)",
            capped.0
        )),
        "{reason}"
    );
    let line = service.expect_log("--max-per-user");
    assert!(
        line.contains(&format!("refused peer uid {}", capped.0)),
        "{line}"
    );

    // Another user has its own count, up to the cap of all connections.
    let mut others = connect_as(other, &service.socket, 2, None).expect("connect");
    let (mut other_served, refused) = sort(others.socks.drain(..).map(answer).collect());
    assert_eq!(other_served.len(), 1, "refused: {refused:?}");
    let [reason] = refused.as_slice() else {
        panic!("expected one refusal: {refused:?}");
    };
    assert!(
        reason.contains("its cap on connections for all users, 3 (--max-connections)"),
        "{reason}"
    );
    // The control: the other user's served connection runs its confined command.
    match confined_uid(&mut other_served[0], NAME) {
        Some(uid) => assert_eq!(uid, other.0.to_string()),
        None => skip_part(
            NAME,
            "the confined control",
            Need::Backend,
            "no backend works here",
        ),
    }

    // A connection that ends frees its place once its helper is reaped: the other user is
    // served again (bounded: each try is refused at once until then).
    drop(served.pop());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut again = connect_as(other, &service.socket, 1, None).expect("connect");
        match answer(again.socks.remove(0)) {
            Answer::Served(_) => break,
            Answer::Refused(reason) => {
                assert!(Instant::now() < deadline, "no place came free: {reason}");
                std::thread::yield_now();
            }
        }
    }
}

#[test]
fn an_idle_connection_is_closed_after_the_idle_limit_and_one_running_a_command_is_not() {
    const NAME: &str =
        "an_idle_connection_is_closed_after_the_idle_limit_and_one_running_a_command_is_not";
    if !nix::unistd::geteuid().is_root() {
        skip(
            NAME,
            Need::Root,
            "only a root service starts a helper per peer",
        );
        return;
    }
    let dir = Scratch::new("idle");
    // Root is served by a helper of its own once another uid is admitted too.
    let service = Service::start(
        &dir.0,
        &[
            "--allow-uid",
            "0",
            "--allow-uid",
            "4242",
            "--idle-limit",
            "1",
        ],
    );
    let mut busy = Peer::connect(&service.socket).expect("connect");
    busy.greet();
    let (command_stdin, mut writer) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map(|(r, w)| (r, std::fs::File::from(w)))
        .expect("pipe");
    let mut request = spawn(1, &["sh", "-c", "read line; exit 5"]);
    request.stdio.stdin = StdioSpec::Fd;
    busy.send(&Request::Spawn(request), &[command_stdin.as_fd()]);
    drop(command_stdin);
    assert!(
        matches!(busy.reply(), Reply::Started(_)),
        "the command did not start"
    );

    // Greeted and then idle, twice in a row: closed each time (EOF, within the peer's read
    // timeout), while the busy connection's last request is older than both.
    for round in 0..2 {
        let mut idle = Peer::connect(&service.socket).expect("connect");
        idle.greet();
        assert!(
            idle.read_message::<Reply>().is_none(),
            "round {round}: the idle connection was not closed"
        );
        let line = service.expect_log("idle for 1 s");
        assert!(line.contains("--idle-limit"), "{line}");
    }
    // The control: the connection whose command runs is still served.
    busy.send(&Request::Info, &[]);
    assert!(
        matches!(busy.reply(), Reply::Info(_)),
        "a connection running a command was closed"
    );
    // Its command ends: idle then, it is closed in turn.
    writer.write_all(b"go\n").expect("write");
    drop(writer);
    match busy.until_end(1).last() {
        Some(Reply::Exited(e)) => assert_eq!(e.status, ExitStatus::Code(5)),
        other => panic!("the command did not end: {other:?}"),
    }
    assert!(
        busy.read_message::<Reply>().is_none(),
        "the connection was kept once idle"
    );
}

/// A cgroup of this test's own on the cgroup v2 hierarchy, removed (with the children the
/// service made in it) when dropped; `None` when there is no v2 hierarchy this process may
/// write, with why.
struct TestCgroup {
    dir: PathBuf,
    /// Its path in the hierarchy, as `/proc/PID/cgroup` shows it.
    name: String,
}

impl TestCgroup {
    fn new(tag: &str) -> Result<TestCgroup, String> {
        let mountinfo =
            std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| e.to_string())?;
        let mount = mountinfo
            .lines()
            .find_map(|line| {
                let (mount, fs) = line.split_once(" - ")?;
                let mut fields = mount.split_whitespace().skip(3);
                let (root, point) = (fields.next()?, fields.next()?);
                (fs.starts_with("cgroup2 ") && root == "/").then(|| PathBuf::from(point))
            })
            .ok_or("no cgroup v2 hierarchy is mounted")?;
        let name = format!("/confine-helper-test-{tag}-{}", std::process::id());
        let dir = mount.join(&name[1..]);
        std::fs::create_dir(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
        Ok(TestCgroup { dir, name })
    }

    /// `command`, started in this cgroup (by a shell that joins it, then executes it).
    fn run_in(&self, command: &Command) -> Command {
        let mut shell = Command::new("sh");
        shell
            .args(["-c", "echo $$ > \"$0/cgroup.procs\" && exec \"$@\""])
            .arg(&self.dir)
            .arg(command.get_program())
            .args(command.get_args());
        shell
    }
}

impl Drop for TestCgroup {
    /// Removes the cgroups once the processes left in them have ended (a helper ends with its
    /// connection; bounded).
    fn drop(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        for dir in [
            self.dir.join("service"),
            self.dir.join("uid-0"),
            self.dir.clone(),
        ] {
            let empty =
                || std::fs::read_to_string(dir.join("cgroup.procs")).map_or(true, |p| p.is_empty());
            while !empty() && Instant::now() < deadline {
                std::thread::yield_now();
            }
            let _ = std::fs::remove_dir(&dir);
        }
    }
}

/// The cgroup v2 path of process `pid`, as `/proc/PID/cgroup` shows it.
fn cgroup_of(pid: &str) -> String {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).expect("its cgroups");
    text.lines()
        .find_map(|line| line.strip_prefix("0::"))
        .expect("a cgroup v2 line")
        .to_owned()
}

#[test]
fn a_peer_s_helper_and_its_commands_run_in_a_cgroup_of_its_uid_when_the_cgroup_is_delegated() {
    const NAME: &str =
        "a_peer_s_helper_and_its_commands_run_in_a_cgroup_of_its_uid_when_the_cgroup_is_delegated";
    if !nix::unistd::geteuid().is_root() {
        skip(
            NAME,
            Need::Root,
            "only a root service starts a helper per peer",
        );
        return;
    }
    // Served as root by a helper of its own: another uid is admitted too.
    let rule = ["--allow-uid", "0", "--allow-uid", "4242"];
    let served_in = |delegated: bool| -> Option<(String, String, String)> {
        let cgroup = match TestCgroup::new(if delegated { "on" } else { "off" }) {
            Ok(cgroup) => cgroup,
            Err(why) => {
                skip(NAME, Need::Cgroup2, why);
                return None;
            }
        };
        let dir = Scratch::new("cgroup");
        let socket = dir.0.join("run").join("helper.sock");
        let mut helper = Command::new(service_bin());
        helper.arg("--socket").arg(&socket).args(rule);
        if delegated {
            helper.arg("--delegated-cgroup");
        }
        let service = Service::start_command(socket.clone(), cgroup.run_in(&helper));
        let mut peer = Peer::connect(&socket).expect("connect");
        peer.greet();
        let line = service.expect_log("served by helper pid");
        let pid = line
            .split("served by helper pid ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .expect("the helper's pid")
            .trim_end_matches(',')
            .to_owned();
        let (replies, command) = run_captured(&mut peer, spawn(1, &["cat", "/proc/self/cgroup"]));
        assert!(
            matches!(replies.last(), Some(Reply::Exited(_))),
            "{replies:?}"
        );
        let command = command
            .lines()
            .find_map(|line| line.strip_prefix("0::"))
            .expect("the command's cgroup")
            .to_owned();
        let found = (
            cgroup_of(&service.child.id().to_string()),
            cgroup_of(&pid),
            command,
        );
        // The helper ends with its connection and, reaped, its uid's cgroup goes (bounded).
        drop(peer);
        let uid_dir = cgroup.dir.join("uid-0");
        let deadline = Instant::now() + Duration::from_secs(30);
        while uid_dir.exists() && Instant::now() < deadline {
            std::thread::yield_now();
        }
        assert!(
            !uid_dir.exists(),
            "the uid's cgroup outlived its last helper"
        );
        drop(service);
        Some((
            cgroup.name.clone(),
            found.0,
            format!("{}|{}", found.1, found.2),
        ))
    };
    let Some((name, service, helper_and_command)) = served_in(true) else {
        return;
    };
    assert_eq!(
        service,
        format!("{name}/service"),
        "the service is not in its leaf"
    );
    assert_eq!(
        helper_and_command,
        format!("{name}/uid-0|{name}/uid-0"),
        "the helper and its command are not in the uid's cgroup"
    );
    // The control: without --delegated-cgroup, the helper stays in the service's cgroup.
    let Some((name, service, helper_and_command)) = served_in(false) else {
        return;
    };
    assert_eq!(service, name);
    assert_eq!(helper_and_command, format!("{name}|{name}"));
}

#[test]
fn a_user_s_own_service_caps_its_connections_too() {
    let dir = Scratch::new("own-caps");
    let service = Service::start(&dir.0, &["--max-per-user", "1"]);
    let first = UnixStream::connect(&service.socket).expect("connect");
    let Answer::Served(mut served) = answer(first) else {
        panic!("the first connection was refused");
    };
    let second = UnixStream::connect(&service.socket).expect("connect");
    let Answer::Refused(reason) = answer(second) else {
        panic!("a connection past --max-per-user 1 was served");
    };
    assert!(
        reason.contains("the cap on connections per user, 1 (--max-per-user)"),
        "{reason}"
    );
    // The control: the first is served all along, and its place frees once it ends.
    served.send(&Request::Spawn(spawn(1, &["sh", "-c", "exit 4"])), &[]);
    match served.until_end(1).last() {
        Some(Reply::Exited(e)) => assert_eq!(e.status, ExitStatus::Code(4)),
        other => panic!("the served connection was not served: {other:?}"),
    }
    drop(served);
    let deadline = Instant::now() + Duration::from_secs(30);
    while let Answer::Refused(reason) =
        answer(UnixStream::connect(&service.socket).expect("connect"))
    {
        assert!(
            Instant::now() < deadline,
            "the place never came free: {reason}"
        );
        std::thread::yield_now();
    }
}

#[test]
fn a_service_that_serves_its_own_uid_itself_refuses_what_only_a_hand_off_has() {
    for option in [&["--idle-limit", "5"][..], &["--delegated-cgroup"]] {
        let dir = Scratch::new("own-options");
        let out = Command::new(service_bin())
            .arg("--socket")
            .arg(dir.0.join("run").join("helper.sock"))
            .args(option)
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{option:?}: it served: {err}");
        assert!(
            err.contains(&format!("{} is for a root service", option[0])),
            "{option:?}: {err}"
        );
    }
    // The control: without them, the same service serves.
    let dir = Scratch::new("own-options");
    let service = Service::start(&dir.0, &["--max-per-user", "4"]);
    assert!(service.socket.exists());
}
