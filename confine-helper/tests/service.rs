//! Service mode: a helper listening on a path, the peer-uid check, and a bad peer that must not
//! take the service down for the others.

// Linux only: these tests drive the bwrap and Landlock backends, `/proc` or Linux's own
// system calls. On macOS `macos_supervision.rs` drives the helper.
#![cfg(target_os = "linux")]

#[path = "../../tests/shared/socket_activation.rs"]
mod socket_activation;
mod support;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use confine_protocol::{ExitStatus, Reply, Request, encode_frame};
use support::{HELPER, Peer, Scratch, Service, spawn};

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
    let out = Command::new(HELPER)
        .args(["serve", "--socket"])
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
        println!(
            "SKIP {NAME}: a helper that is not root refuses to serve another uid at all \
             (a_helper_that_is_not_root_refuses_to_serve_another_uid)"
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

/// `confine-helper serve --socket DIR/run/helper.sock ARGS` as a user other than root: as this
/// process's user, or, as root, as `nobody` from a copy of the helper that user can reach (the
/// copy's directory is returned with it); and that user's uid.
fn serve_as_a_user(dir: &Path, args: &[&str]) -> (Command, Option<Scratch>, u32) {
    let (mut command, copy, uid);
    if nix::unistd::geteuid().is_root() {
        let bin = Scratch::new("user-bin");
        std::fs::set_permissions(&bin.0, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let helper = bin.0.join("confine-helper");
        // Copied by another process: a copy written here could still be open for writing in
        // a child another test forks meanwhile, and executing it would fail (ETXTBSY).
        let copied = Command::new("cp").arg(HELPER).arg(&helper).status();
        assert!(copied.expect("cp").success(), "copy the helper");
        command = Command::new(&helper);
        command.uid(65534).gid(65534);
        (copy, uid) = (Some(bin), 65534);
    } else {
        command = Command::new(HELPER);
        (copy, uid) = (None, nix::unistd::geteuid().as_raw());
    }
    command
        .args(["serve", "--socket"])
        .arg(dir.join("run").join("helper.sock"))
        .args(args);
    (command, copy, uid)
}

#[test]
fn a_helper_that_is_not_root_refuses_to_serve_another_uid() {
    let dir = Scratch::new("not-root");
    for args in [&["--allow-uid", "4242"][..], &["--group", "root"][..]] {
        let (mut command, _copy, _) = serve_as_a_user(&dir.0, args);
        let out = command.output().expect("run confine-helper serve");
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
    let mut full = vec!["serve"];
    full.extend(args);
    socket_activation::activated(HELPER.as_ref(), &full, sock)
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
        println!("SKIP {NAME}: the primary group {gid} has no name");
        return;
    };
    let dir = Scratch::new("group");
    if !nix::unistd::geteuid().is_root() {
        // Not root, it serves no other uid: the group option is refused (tested above).
        println!("SKIP {NAME}: only root serves a group");
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
    let out = Command::new(HELPER)
        .args(["serve", "--socket"])
        .arg(run.join("helper.sock"))
        .args(["--group", &group.name])
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("others could replace the socket"), "{err}");
    assert!(!run.join("helper.sock").exists());
}

#[test]
fn the_service_socket_is_never_a_socket_a_command_may_connect_to() {
    const NAME: &str = "the_service_socket_is_never_a_socket_a_command_may_connect_to";
    let dir = Scratch::new("own-socket");
    let service = Service::start(&dir.0, &[]);
    let mut peer = Peer::connect(&service.socket).expect("connect");
    peer.greet();
    // Another socket, outside any writable root: the control, which may be listed.
    let elsewhere = Scratch::new("other-socket");
    let other = elsewhere.0.join("other.sock");
    let _listening = std::os::unix::net::UnixListener::bind(&other).expect("bind");
    let request = |id: u64, socket: &Path| {
        let mut request = spawn(id, &["true"]);
        request.policy.mode = confine_protocol::Mode::ReadOnly;
        request.backend = confine_protocol::BackendChoice::Bwrap;
        request.policy.unix_sockets = vec![socket.as_os_str().as_encoded_bytes().to_vec()];
        request
    };

    peer.send(&Request::Spawn(request(1, &other)), &[]);
    match peer.until_end(1).as_slice() {
        [.., Reply::Exited(e)] => assert_eq!(e.status, ExitStatus::Code(0)),
        other => {
            println!("SKIP {NAME}: the control did not run under bwrap here: {other:?}");
            return;
        }
    }
    peer.send(&Request::Spawn(request(2, &service.socket)), &[]);
    match peer.until_end(2).as_slice() {
        [Reply::Refused(r)] => assert!(
            r.reason.contains("one of the helper's own files"),
            "refused for another reason: {}",
            r.reason
        ),
        other => panic!("the service socket was accepted as a unix_sockets entry: {other:?}"),
    }
}
