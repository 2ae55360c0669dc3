//! Service mode: a helper listening on a path, the peer-uid check, and a bad peer that must not
//! take the service down for the others.

mod support;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
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
