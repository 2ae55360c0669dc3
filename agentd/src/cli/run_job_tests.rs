//! `run_job` against the fake helper of `test_support`.

use std::io::Write;
use std::os::fd::OwnedFd;
use std::sync::mpsc as std_mpsc;

use confine_protocol::{
    Backend, Cancel, Ending, Enforcement, Mode, Refusal, Refused, Reply, Request, Started,
    StdioSpec,
};
use tokio::io::AsyncReadExt;

use super::*;
use crate::test_support::{Peer, Scratch, exited, fake_service, within};

/// The command's stdout and stderr descriptors: the last two passed with the spawn.
fn output_fds(peer: &mut Peer, spawn: &confine_protocol::Spawn) -> (OwnedFd, OwnedFd) {
    assert_eq!(spawn.stdio.stdout, StdioSpec::Fd);
    assert_eq!(spawn.stdio.stderr, StdioSpec::Fd);
    let passed = [spawn.stdio.stdin, spawn.stdio.stdout, spawn.stdio.stderr]
        .iter()
        .filter(|s| **s == StdioSpec::Fd)
        .count();
    assert_eq!(peer.fds.len(), passed);
    let stderr = peer.fds.pop_back().expect("stderr fd");
    let stdout = peer.fds.pop_back().expect("stdout fd");
    (stdout, stderr)
}

fn no_interrupts() -> (mpsc::UnboundedSender<()>, mpsc::UnboundedReceiver<()>) {
    mpsc::unbounded_channel()
}

#[tokio::test]
async fn output_streams_as_it_comes_and_the_facts_line_ends_stderr() {
    let scratch = Scratch::new("job-stream");
    let (listener, client) = fake_service(&scratch);
    let (seen_tx, seen_rx) = std_mpsc::channel::<()>();
    let helper = tokio::task::spawn_blocking(move || {
        let mut peer = Peer::accept(&listener);
        let spawn = peer.spawn();
        assert_eq!(spawn.argv, [b"sh".to_vec(), b"-c".to_vec(), b"x".to_vec()]);
        let (stdout, stderr) = output_fds(&mut peer, &spawn);
        peer.send(&Reply::Started(Started {
            id: spawn.id,
            pid: 5,
        }));
        let mut stdout = std::fs::File::from(stdout);
        stdout.write_all(b"first\n").expect("write");
        // Only once agentd has passed "first" on does the command go on: output that
        // waited for the end would never get here.
        seen_rx.recv().expect("test saw the first line");
        stdout.write_all(b"second\n").expect("write");
        std::fs::File::from(stderr)
            .write_all(b"err\n")
            .expect("write");
        drop(stdout);
        peer.send(&exited(spawn.id, 3, Ending::Exited));
        assert!(peer.request().is_none());
    });

    let (sink, mut reader) = tokio::io::duplex(1024);
    let watcher = tokio::spawn(async move {
        let mut seen = Vec::new();
        let mut buf = [0u8; 64];
        while !seen.ends_with(b"first\n") {
            let n = reader.read(&mut buf).await.expect("read");
            assert_ne!(n, 0, "stdout ended before the first line");
            seen.extend_from_slice(&buf[..n]);
        }
        seen_tx.send(()).expect("helper waits");
        reader.read_to_end(&mut seen).await.expect("read");
        seen
    });
    let mut stderr = Vec::new();
    let mut args = RunArgs::new(["sh", "-c", "x"]);
    args.json = true;
    args.mode = Mode::DangerFullAccess;
    let (_keep, interrupts) = no_interrupts();
    let facts = within(run_job(&client, args, sink, &mut stderr, interrupts))
        .await
        .expect("ran");
    assert_eq!(exit_code(&facts), 3);
    assert_eq!(within(watcher).await.expect("watcher"), b"first\nsecond\n");
    let stderr = String::from_utf8(stderr).expect("utf-8");
    assert_eq!(
        stderr,
        "err\n{\"exit\":{\"code\":3},\"backend\":\"none\",\"enforcement\":null,\
         \"denied\":false,\"denials\":[],\"runner_failure\":null,\"refused\":null,\"timed_out\":false}\n"
    );
    assert_eq!(facts.stderr_tail, b"err\n");
    drop(client);
    within(helper).await.expect("fake helper");
}

/// Runs one command that writes `out` and `err` and exits with `code` under `backend`;
/// returns the facts and agentd's stderr.
async fn run_writing(
    name: &str,
    out: &'static [u8],
    err: String,
    code: i32,
    backend: Backend,
) -> (Facts, String) {
    let scratch = Scratch::new(name);
    let (listener, client) = fake_service(&scratch);
    let helper = tokio::task::spawn_blocking(move || {
        let mut peer = Peer::accept(&listener);
        let spawn = peer.spawn();
        let (stdout, stderr) = output_fds(&mut peer, &spawn);
        peer.send(&Reply::Started(Started {
            id: spawn.id,
            pid: 5,
        }));
        std::fs::File::from(stdout).write_all(out).expect("write");
        std::fs::File::from(stderr)
            .write_all(err.as_bytes())
            .expect("write");
        let mut ended = exited(spawn.id, code, Ending::Exited);
        if let Reply::Exited(e) = &mut ended {
            e.backend = backend;
            e.enforcement = Some(Enforcement::Full);
        }
        peer.send(&ended);
        assert!(peer.request().is_none());
    });
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    let mut args = RunArgs::new(["sh", "-c", "x"]);
    args.json = true;
    let (_keep, interrupts) = no_interrupts();
    let facts = within(run_job(&client, args, &mut stdout, &mut stderr, interrupts))
        .await
        .expect("ran");
    assert_eq!(stdout, out);
    drop(client);
    within(helper).await.expect("fake helper");
    (facts, String::from_utf8(stderr).expect("utf-8"))
}

#[tokio::test]
async fn the_commands_output_passes_untouched_and_agentds_notes_are_shown_safely() {
    const OUT: &[u8] = b"\x1b]52;c;cm0gLXJmIH4=\x07\xff\r";
    const ERR: &[u8] = b"\x1b[2A\xc2\x9b2K\n";
    let program = "./x\x1b]52;c;eA==\x07";
    let scratch = Scratch::new("job-controls");
    let (listener, client) = fake_service(&scratch);
    let helper = tokio::task::spawn_blocking(move || {
        let mut peer = Peer::accept(&listener);
        let spawn = peer.spawn();
        let (stdout, stderr) = output_fds(&mut peer, &spawn);
        std::fs::File::from(stdout).write_all(OUT).expect("write");
        std::fs::File::from(stderr).write_all(ERR).expect("write");
        let mut ended = exited(spawn.id, 127, Ending::Exited);
        if let Reply::Exited(e) = &mut ended {
            e.exec_errno = Some(nix::libc::ENOENT);
        }
        peer.send(&ended);
        assert!(peer.request().is_none());
    });
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    let (_keep, interrupts) = no_interrupts();
    let facts = within(run_job(
        &client,
        RunArgs::new([program]),
        &mut stdout,
        &mut stderr,
        interrupts,
    ))
    .await
    .expect("ran");
    assert_eq!(exit_code(&facts), 127);
    // The user asked for the program's output: byte for byte, escapes and all.
    assert_eq!(stdout, OUT);
    let (command_err, notes) = stderr.split_at(ERR.len());
    assert_eq!(command_err, ERR);
    // agentd's own note quotes the program's name: shown, not obeyed.
    assert_eq!(
        String::from_utf8_lossy(notes),
        "agentd: ./x\\x1b]52;c;eA==\\x07: command not found\n"
    );
    drop(client);
    within(helper).await.expect("fake helper");
}

#[tokio::test]
async fn a_denial_on_stderr_is_reported_in_the_facts() {
    // Outside the workspace (agentd's current directory), where anyone may write.
    let outside = std::env::temp_dir().join("c");
    let (facts, stderr) = run_writing(
        "job-denied",
        b"",
        format!(
            "sh: 1: cannot create {}: Read-only file system\n",
            outside.display()
        ),
        2,
        Backend::Bwrap,
    )
    .await;
    assert!(facts.denied());
    assert_eq!(exit_code(&facts), 2);
    assert!(
        stderr.ends_with(&format!(
            "{{\"exit\":{{\"code\":2}},\"backend\":\"bwrap\",\"enforcement\":{{\"level\":\
             \"full\",\"missing\":[],\"layers\":[]}},\"denied\":true,\"denials\":\
             [\"file-write\"],\"denied_paths\":[\"{}\"],\"runner_failure\":null,\"refused\":\
             null,\"timed_out\":false}}\n",
            outside.canonicalize().unwrap_or(outside.clone()).display()
        )),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_denial_text_on_stdout_only_is_not_a_denial() {
    let (facts, stderr) = run_writing(
        "job-stdout-denial",
        b"grep: /tmp/c: Read-only file system\nPermission denied\n",
        String::new(),
        1,
        Backend::Bwrap,
    )
    .await;
    assert!(!facts.denied());
    assert!(stderr.contains("\"denied\":false"), "{stderr}");
}

#[tokio::test]
async fn an_interrupt_cancels_the_command_and_the_job_waits_for_its_end() {
    let scratch = Scratch::new("job-cancel");
    let (listener, client) = fake_service(&scratch);
    let (interrupt, interrupts) = mpsc::unbounded_channel();
    let helper = tokio::task::spawn_blocking(move || {
        let mut peer = Peer::accept(&listener);
        let spawn = peer.spawn();
        let outputs = output_fds(&mut peer, &spawn);
        peer.send(&Reply::Started(Started {
            id: spawn.id,
            pid: 5,
        }));
        interrupt.send(()).expect("job listens");
        let Some(Request::Cancel(Cancel { id, grace_ms })) = peer.request() else {
            panic!("expected a Cancel");
        };
        assert_eq!((id, grace_ms), (spawn.id, 2000));
        // The cancelled command's tree is gone, and with it its ends of the pipes.
        drop(outputs);
        let mut ended = exited(id, 0, Ending::Cancelled);
        if let Reply::Exited(e) = &mut ended {
            e.status = ExitStatus::Signal(15);
        }
        peer.send(&ended);
        assert!(peer.request().is_none());
    });
    let mut stderr = Vec::new();
    let facts = within(run_job(
        &client,
        RunArgs::new(["sleep", "100"]),
        Vec::new(),
        &mut stderr,
        interrupts,
    ))
    .await
    .expect("ran");
    assert!(facts.cancelled);
    assert_eq!(exit_code(&facts), 143);
    assert_eq!(stderr, b"agentd: the command was cancelled\n");
    drop(client);
    within(helper).await.expect("fake helper");
}

#[tokio::test]
async fn a_refusal_exits_125_with_a_one_line_explanation() {
    let scratch = Scratch::new("job-refused");
    let (listener, client) = fake_service(&scratch);
    let helper = tokio::task::spawn_blocking(move || {
        let mut peer = Peer::accept(&listener);
        let spawn = peer.spawn();
        peer.fds.clear();
        peer.send(&Reply::Refused(Refused {
            id: spawn.id,
            reason: Refusal::CeilingMode {
                max: Mode::ReadOnly,
                asked: Mode::WorkspaceWrite,
            },
        }));
        assert!(peer.request().is_none());
    });
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    let (_keep, interrupts) = no_interrupts();
    let facts = within(run_job(
        &client,
        RunArgs::new(["ls"]),
        &mut stdout,
        &mut stderr,
        interrupts,
    ))
    .await
    .expect("job ran");
    assert_eq!(exit_code(&facts), 125);
    assert!(stdout.is_empty());
    assert_eq!(
        stderr,
        b"agentd: confine-helper refused the command: ceiling max_mode is read-only: \
          workspace-write is not allowed\n"
    );
    drop(client);
    within(helper).await.expect("fake helper");
}

#[tokio::test]
async fn a_helper_lost_mid_command_is_reported_even_if_the_output_stays_open() {
    let scratch = Scratch::new("job-lost");
    let (listener, client) = fake_service(&scratch);
    let (done_tx, done_rx) = std_mpsc::channel::<()>();
    let helper = tokio::task::spawn_blocking(move || {
        let mut peer = Peer::accept(&listener);
        let spawn = peer.spawn();
        // An orphaned command: it keeps its output open after the helper is gone.
        let outputs = output_fds(&mut peer, &spawn);
        peer.send(&Reply::Started(Started {
            id: spawn.id,
            pid: 5,
        }));
        drop(peer);
        done_rx.recv().expect("job finished");
        drop(outputs);
    });
    let mut stderr = Vec::new();
    let mut args = RunArgs::new(["sleep", "100"]);
    args.json = true;
    let (_keep, interrupts) = no_interrupts();
    let facts = within(run_job(&client, args, Vec::new(), &mut stderr, interrupts))
        .await
        .expect("job ran");
    done_tx.send(()).expect("helper waits");
    assert_eq!(exit_code(&facts), 125);
    let failure = facts.runner_failure.as_ref().expect("runner failure");
    assert_eq!(failure.stage, FailedAt::HelperExited);
    let stderr = String::from_utf8(stderr).expect("utf-8");
    assert!(
        stderr.ends_with(
            "\"runner_failure\":{\"stage\":\"helper-exited\",\"detail\":\"confine-helper \
             closed the connection\"},\"refused\":null,\"timed_out\":false}\n"
        ),
        "{stderr}"
    );
    within(helper).await.expect("fake helper");
}
