//! The client against a scripted peer: a fake service-mode helper on a Unix socket in this
//! process, and shell scripts standing in for an embedded helper. Nothing here needs the real
//! confine-helper binary.

use std::io::Write;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use confine_protocol::{
    Cancel, Ending, ExitStatus, Hello, HelperInfo, Reply, Request, Started, StdioSpec, check_hello,
};
use tokio::io::AsyncReadExt;

use super::*;

use crate::test_support::{FakeHelper, Peer, Scratch, exited, fake_service, pipe, within};

#[tokio::test]
async fn a_spawn_carries_its_stdio_descriptors_and_replies_come_back_in_order() {
    let scratch = Scratch::new("stdio");
    let (listener, client) = fake_service(&scratch);
    let helper = tokio::task::spawn_blocking(move || {
        let mut peer = Peer::accept(&listener);
        let spawn = peer.spawn();
        assert_eq!(spawn.argv, [b"echo".to_vec(), b"-n".to_vec()]);
        assert_eq!(spawn.stdio.stdin, StdioSpec::Null);
        assert_eq!(spawn.stdio.stdout, StdioSpec::Fd);
        assert_eq!(spawn.stdio.stderr, StdioSpec::Fd);
        assert_eq!(
            peer.fds.len(),
            2,
            "one descriptor per Fd, on the spawn frame"
        );
        let stdout = peer.fds.pop_front().expect("stdout");
        let stderr = peer.fds.pop_front().expect("stderr");
        std::fs::File::from(stdout)
            .write_all(b"to stdout")
            .expect("write stdout");
        std::fs::File::from(stderr)
            .write_all(b"to stderr")
            .expect("write stderr");
        peer.send(&Reply::Started(Started {
            id: spawn.id,
            pid: 4242,
        }));
        peer.send(&exited(spawn.id, 3, Ending::Exited));
        // The connection stays open until agentd closes it.
        assert!(peer.request().is_none());
    });

    let (mut out, out_w) = pipe();
    let (mut err, err_w) = pipe();
    let mut spec = SpawnSpec::new(["echo", "-n"]);
    spec.stdout = Some(out_w);
    spec.stderr = Some(err_w);
    let mut handle = within(client.spawn(spec)).await.expect("spawn queued");
    let started = within(handle.started()).await.expect("started");
    assert_eq!(started.pid, 4242);
    let outcome = within(handle.wait()).await;
    let Outcome::Exited(exited) = outcome else {
        panic!("expected Exited, got {outcome:?}");
    };
    assert_eq!(exited.status, ExitStatus::Code(3));

    // Both pipes reach end-of-file: agentd closed its copies of the write ends once sent.
    let mut text = String::new();
    within(out.read_to_string(&mut text))
        .await
        .expect("read stdout");
    assert_eq!(text, "to stdout");
    text.clear();
    within(err.read_to_string(&mut text))
        .await
        .expect("read stderr");
    assert_eq!(text, "to stderr");

    drop(client);
    within(helper).await.expect("fake helper");
}

#[tokio::test]
async fn many_requests_share_one_connection_and_are_routed_by_id() {
    const N: usize = 64;
    let scratch = Scratch::new("many");
    let (listener, client) = fake_service(&scratch);
    let helper = tokio::task::spawn_blocking(move || {
        let mut peer = Peer::accept(&listener);
        let mut ids: Vec<u64> = (0..N).map(|_| peer.spawn().id).collect();
        // Answer in reverse order, each exit code derived from the id.
        ids.reverse();
        for id in &ids {
            peer.send(&Reply::Started(Started {
                id: *id,
                pid: 1000 + *id as u32,
            }));
        }
        for id in ids {
            peer.send(&exited(id, (id % 100) as i32, Ending::Exited));
        }
        assert!(peer.request().is_none());
    });

    let mut waits = Vec::new();
    for _ in 0..N {
        let client = client.clone();
        waits.push(tokio::spawn(async move {
            let mut handle = client.spawn(SpawnSpec::new(["true"])).await.expect("spawn");
            let id = handle.id();
            let started = handle.started().await.expect("started");
            assert_eq!(started.id, id);
            (id, handle.wait().await)
        }));
    }
    for wait in waits {
        let (id, outcome) = within(wait).await.expect("task");
        assert_eq!(outcome.id(), id);
        let Outcome::Exited(exited) = outcome else {
            panic!("expected Exited, got {outcome:?}");
        };
        assert_eq!(exited.status, ExitStatus::Code((id % 100) as i32));
    }
    drop(client);
    within(helper).await.expect("fake helper");
}

#[tokio::test]
async fn a_lost_connection_ends_every_request_in_flight_and_the_next_request_reconnects() {
    let scratch = Scratch::new("lost");
    let (listener, client) = fake_service(&scratch);
    let helper = tokio::task::spawn_blocking(move || {
        let mut first = Peer::accept(&listener);
        let a = first.spawn();
        first.send(&Reply::Started(Started { id: a.id, pid: 1 }));
        let _b = first.spawn();
        drop(first);
        let mut second = Peer::accept(&listener);
        let c = second.spawn();
        second.send(&exited(c.id, 0, Ending::Exited));
        assert!(second.request().is_none());
    });

    let mut a = within(client.spawn(SpawnSpec::new(["a"])))
        .await
        .expect("a");
    let b = within(client.spawn(SpawnSpec::new(["b"])))
        .await
        .expect("b");
    assert!(within(a.started()).await.is_some());
    for outcome in [within(a.wait()).await, within(b.wait()).await] {
        let Outcome::RunnerFailed(RunnerFailed {
            stage,
            errno,
            detail,
            ..
        }) = outcome
        else {
            panic!("expected RunnerFailed, got {outcome:?}");
        };
        assert_eq!(stage, FailedAt::HelperExited);
        assert_eq!(errno, 0);
        assert!(detail.contains("confine-helper"), "{detail}");
    }

    let c = within(client.spawn(SpawnSpec::new(["c"])))
        .await
        .expect("c");
    assert!(matches!(within(c.wait()).await, Outcome::Exited(_)));
    drop(client);
    within(helper).await.expect("fake helper");
}

#[tokio::test]
async fn a_reply_for_an_unknown_request_is_a_protocol_error_that_ends_the_connection() {
    let scratch = Scratch::new("unknown");
    let (listener, client) = fake_service(&scratch);
    let helper = tokio::task::spawn_blocking(move || {
        let mut peer = Peer::accept(&listener);
        let spawn = peer.spawn();
        peer.send(&exited(spawn.id + 1000, 0, Ending::Exited));
        assert!(peer.request().is_none(), "agentd closes the connection");
    });
    let handle = within(client.spawn(SpawnSpec::new(["x"])))
        .await
        .expect("x");
    let outcome = within(handle.wait()).await;
    let Outcome::RunnerFailed(failed) = outcome else {
        panic!("expected RunnerFailed, got {outcome:?}");
    };
    assert_eq!(failed.stage, FailedAt::HelperExited);
    assert!(
        failed.detail.contains("protocol error"),
        "{}",
        failed.detail
    );
    within(helper).await.expect("fake helper");
}

#[tokio::test]
async fn cancel_asks_the_helper_to_end_that_request() {
    let scratch = Scratch::new("cancel");
    let (listener, client) = fake_service(&scratch);
    let helper = tokio::task::spawn_blocking(move || {
        let mut peer = Peer::accept(&listener);
        let spawn = peer.spawn();
        peer.send(&Reply::Started(Started {
            id: spawn.id,
            pid: 7,
        }));
        let Some(Request::Cancel(Cancel { id, grace_ms })) = peer.request() else {
            panic!("expected a Cancel");
        };
        assert_eq!((id, grace_ms), (spawn.id, 1500));
        peer.send(&exited(id, 143, Ending::Cancelled));
        assert!(peer.request().is_none());
    });
    let mut handle = within(client.spawn(SpawnSpec::new(["sleep", "100"])))
        .await
        .expect("spawn");
    assert!(within(handle.started()).await.is_some());
    let canceller = handle.canceller();
    let waiter = tokio::spawn(handle.wait());
    canceller.cancel(Duration::from_millis(1500));
    let outcome = within(waiter).await.expect("task");
    let Outcome::Exited(exited) = outcome else {
        panic!("expected Exited, got {outcome:?}");
    };
    assert_eq!(exited.ending, Ending::Cancelled);
    // Once ended, a cancel is not sent: the helper is never asked about a finished id.
    canceller.cancel(Duration::ZERO);
    drop(canceller);
    drop(client);
    within(helper).await.expect("fake helper");
}

#[tokio::test]
async fn info_returns_the_helpers_report() {
    let scratch = Scratch::new("info");
    let (listener, client) = fake_service(&scratch);
    let report = HelperInfo {
        software: "fake-helper".to_owned(),
        pid: 99,
        backends: Vec::new(),
        landlock_abi: Some(4),
        grant: confine_protocol::Grant {
            max_mode: confine_protocol::Mode::WorkspaceWrite,
            network: confine_protocol::Network::Deny,
            sources: Vec::new(),
            broken: None,
        },
    };
    let sent = report.clone();
    let helper = tokio::task::spawn_blocking(move || {
        let mut peer = Peer::accept(&listener);
        assert_eq!(peer.request(), Some(Request::Info));
        peer.send(&Reply::Info(sent));
        assert!(peer.request().is_none());
    });
    assert_eq!(within(client.info()).await.expect("info"), report);
    assert_eq!(client.helper_pid(), None, "service mode has no child");
    drop(client);
    within(helper).await.expect("fake helper");
}

/// An `Info` with the backend `usable` (fingerprint `fp-bwrap`).
fn bwrap_info(usable: bool) -> HelperInfo {
    HelperInfo {
        software: "fake-helper".to_owned(),
        pid: 99,
        backends: vec![confine_protocol::BackendReport {
            backend: confine_protocol::Backend::Bwrap,
            usable,
            detail: String::new(),
            layers: Vec::new(),
            fingerprint: Some("fp-bwrap".to_owned()),
        }],
        landlock_abi: None,
        grant: confine_protocol::Grant {
            max_mode: confine_protocol::Mode::WorkspaceWrite,
            network: confine_protocol::Network::Deny,
            sources: Vec::new(),
            broken: None,
        },
    }
}

/// A usable verdict from `Info` is sent as a hint first on the next connection, and a runner
/// failure that says the backend could not build the confinement drops it; the control, an
/// unusable verdict, is never sent.
#[tokio::test]
async fn a_usable_verdict_is_hinted_to_the_next_helper_and_dropped_when_confinement_fails() {
    for usable in [false, true] {
        let scratch = Scratch::new(&format!("hints-{usable}"));
        let (listener, client, cache_dir) = client_with_a_verdict_cache(&scratch);
        let (closed_tx, closed_rx) = std::sync::mpsc::channel();
        let helper = FakeHelper::start(move || {
            let mut first = Peer::accept(&listener);
            assert_eq!(first.request(), Some(Request::Info), "no hint yet");
            first.send(&Reply::Info(bwrap_info(usable)));
            first.hang_up();
            let _ = closed_tx.send(());
            let mut second = Peer::accept(&listener);
            let mut request = second.request();
            if usable {
                let expected = vec![confine_protocol::UsableBefore {
                    backend: confine_protocol::Backend::Bwrap,
                    fingerprint: "fp-bwrap".to_owned(),
                }];
                assert_eq!(request, Some(Request::Hints(expected)));
                request = second.request();
            }
            let Some(Request::Spawn(spawn)) = request else {
                panic!("expected a Spawn, got {request:?}");
            };
            second.send(&Reply::RunnerFailed(confine_protocol::RunnerFailed {
                id: spawn.id,
                stage: confine_protocol::Stage::Namespace,
                errno: 1,
                detail: "bwrap: nothing was run".to_owned(),
            }));
            assert!(second.request().is_none());
        });
        within(client.info()).await.expect("info");
        let hinted = kept(&cache_dir);
        assert_eq!(hinted.len(), usize::from(usable), "{hinted:?}");
        // The fake helper closed the first connection: the spawn makes the second.
        closed_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the fake helper closed the first connection");
        let handle = within(client.spawn(SpawnSpec::new(["true"])))
            .await
            .expect("spawn");
        let outcome = within(handle.wait()).await;
        assert!(matches!(outcome, Outcome::RunnerFailed(_)), "{outcome:?}");
        let kept = kept(&cache_dir);
        assert!(
            kept.is_empty(),
            "the failed backend is still kept: {kept:?}"
        );
        drop(client);
        helper.finished().await;
    }
}

#[tokio::test]
async fn a_protocol_mismatch_is_an_error_naming_both_sides() {
    let scratch = Scratch::new("mismatch");
    let (listener, client) = fake_service(&scratch);
    let helper = tokio::task::spawn_blocking(move || {
        let mut old = Hello::ours("confine-helper 0.0.1");
        old.protocol_version += 1;
        let _peer = Peer::accept_with(&listener, &old);
    });
    let err = within(client.spawn(SpawnSpec::new(["x"])))
        .await
        .expect_err("mismatch refused");
    assert!(matches!(err, ClientError::Mismatch(_)), "{err}");
    let text = err.to_string();
    assert!(text.contains("confine-helper 0.0.1"), "{text}");
    assert!(text.contains("agentd "), "{text}");
    within(helper).await.expect("fake helper");
}

#[tokio::test]
async fn a_service_s_refusal_is_the_error_in_its_own_words() {
    let scratch = Scratch::new("refusal");
    let (listener, client) = fake_service(&scratch);
    let reason = "confine-helper service: uid 1001 has reached the cap on connections per user, 16 \
                  (--max-per-user); end some agentd sessions of this user";
    let helper = tokio::task::spawn_blocking(move || {
        // As the root service does: its refusal, written at once, and the connection closed
        // without reading a byte.
        let (mut stream, _) = listener.accept().expect("accept");
        let refusal = Hello::refusal(&format!("{reason}\x1b[2J"));
        stream
            .write_all(&encode_frame(&refusal).expect("encode"))
            .expect("send the refusal");
        drop(stream);
        // The control: a greeting of this protocol is served.
        let mut peer = Peer::accept(&listener);
        let spawn = peer.spawn();
        peer.send(&exited(spawn.id, 0, Ending::Exited));
        assert!(peer.request().is_none());
    });
    let err = within(client.spawn(SpawnSpec::new(["x"])))
        .await
        .expect_err("refused");
    assert!(matches!(err, ClientError::Refused { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.starts_with(reason), "{text}");
    assert!(
        text.ends_with("\\x1b[2J"),
        "what a terminal obeys is shown, not sent: {text}"
    );
    let handle = within(client.spawn(SpawnSpec::new(["x"])))
        .await
        .expect("served once the service takes the connection");
    assert!(matches!(within(handle.wait()).await, Outcome::Exited(_)));
    drop(client);
    within(helper).await.expect("fake helper");
}

#[tokio::test]
async fn a_connection_the_service_closed_while_idle_is_replaced_by_the_next_request() {
    let scratch = Scratch::new("idle");
    let (listener, client) = fake_service(&scratch);
    let (close_tx, close_rx) = std::sync::mpsc::channel();
    let (closed_tx, closed_rx) = std::sync::mpsc::channel();
    let helper = FakeHelper::start(move || {
        let mut first = Peer::accept(&listener);
        let a = first.spawn();
        first.send(&exited(a.id, 0, Ending::Exited));
        // Idle: the service closes it, as a root service's helper does past its idle limit.
        close_rx.recv().expect("told to close");
        first.hang_up();
        let _ = closed_tx.send(());
        let mut second = Peer::accept(&listener);
        let b = second.spawn();
        second.send(&exited(b.id, 3, Ending::Exited));
        assert!(second.request().is_none());
    });
    let a = within(client.spawn(SpawnSpec::new(["a"])))
        .await
        .expect("a");
    assert!(matches!(within(a.wait()).await, Outcome::Exited(_)));
    // Closed and waited for without yielding: this test's runtime has one thread, so agentd's
    // reader cannot come to the end of the first connection before the next request is made.
    close_tx.send(()).expect("the fake service waits");
    closed_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the service closed the first connection");
    let first = client
        .inner
        .current
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
        .expect("the first connection");
    assert!(first.is_alive(), "the reader has not seen the end yet");
    assert!(
        client.live_connection().is_none(),
        "a connection whose helper hung up is not used again"
    );
    let b = within(client.spawn(SpawnSpec::new(["b"])))
        .await
        .expect("b");
    let Outcome::Exited(exited) = within(b.wait()).await else {
        panic!("the command after an idle close did not run");
    };
    assert_eq!(exited.status, ExitStatus::Code(3));
    drop(client);
    helper.finished().await;
}

#[tokio::test]
async fn a_missing_service_socket_is_an_error_that_says_how_to_start_it() {
    let scratch = Scratch::new("nosocket");
    let client = HelperClient::new(HelperEndpoint::Service(scratch.0.join("absent.sock")));
    let err = within(client.connect()).await.expect_err("nothing listens");
    assert!(
        err.to_string().contains("confine-service --socket"),
        "{err}"
    );
}

#[tokio::test]
async fn an_embedded_helper_gets_its_socket_as_stdin_with_an_empty_environment() {
    let scratch = Scratch::new("fd3");
    // Echoes agentd's own greeting back, which is a matching greeting, and records its
    // environment where the test can read it.
    let env_file = scratch.0.join("env");
    let helper = scratch.script(
        "echo-helper",
        &format!(
            "[ \"$1 $2\" = \"--fd 0\" ] || exit 9\n/usr/bin/env > '{}'\nexec /bin/cat >&0",
            env_file.display()
        ),
    );
    let client = HelperClient::new(HelperEndpoint::Embedded(helper));
    within(client.connect())
        .await
        .expect("handshake over stdin");
    assert!(client.helper_pid().is_some());
    let env = std::fs::read_to_string(&env_file).expect("env recorded");
    assert!(!env.contains("HOME="), "environment not cleared: {env}");

    // The echo turns our Spawn into something that is not a valid reply.
    let handle = within(client.spawn(SpawnSpec::new(["x"])))
        .await
        .expect("queued");
    let outcome = within(handle.wait()).await;
    let Outcome::RunnerFailed(failed) = outcome else {
        panic!("expected RunnerFailed, got {outcome:?}");
    };
    assert_eq!(failed.stage, FailedAt::HelperExited);
    assert!(
        failed.detail.contains("protocol error"),
        "{}",
        failed.detail
    );
    assert_eq!(client.helper_pid(), None, "a dead connection has no helper");
}

#[tokio::test]
async fn an_embedded_helper_gets_the_ceiling_after_its_descriptor() {
    let scratch = Scratch::new("ceiling");
    let args_file = scratch.0.join("args");
    let helper = scratch.script(
        "ceiling-helper",
        &format!(
            "echo \"$#|$*\" > '{}'\nexec /bin/cat >&0",
            args_file.display()
        ),
    );
    let client = HelperClient::with_ceiling(
        HelperEndpoint::Embedded(helper),
        Some(PathBuf::from("/etc/my ceiling.toml")),
    )
    .expect("an embedded helper takes a ceiling");
    assert_eq!(
        client.ceiling(),
        Some(std::path::Path::new("/etc/my ceiling.toml"))
    );
    within(client.connect()).await.expect("handshake");
    let args = std::fs::read_to_string(&args_file).expect("args recorded");
    assert_eq!(args, "4|--fd 0 --ceiling /etc/my ceiling.toml\n");
}

#[test]
fn a_ceiling_is_refused_for_a_service_helper_and_optional_for_both() {
    let err = HelperClient::with_ceiling(
        HelperEndpoint::Service("/run/h.sock".into()),
        Some("/c.toml".into()),
    )
    .expect_err("a service helper reads its own ceiling");
    assert!(
        matches!(err, ClientError::CeilingForService { .. }),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains("confine-service --socket /run/h.sock --ceiling PATH"),
        "{text}"
    );
    let service = HelperClient::with_ceiling(HelperEndpoint::Service("/s".into()), None)
        .expect("no ceiling is fine");
    assert_eq!(service.ceiling(), None);
    let embedded = HelperClient::with_ceiling(HelperEndpoint::Embedded("/h".into()), None)
        .expect("no ceiling is fine");
    assert_eq!(embedded.ceiling(), None);
}

#[tokio::test]
async fn a_helper_that_keeps_dying_before_the_handshake_is_given_up_on() {
    let scratch = Scratch::new("dying");
    let helper = scratch.script("dying-helper", "exit 1");
    let client = HelperClient::new(HelperEndpoint::Embedded(helper));
    let err = within(client.spawn(SpawnSpec::new(["x"])))
        .await
        .expect_err("gives up");
    let ClientError::HelperKeepsDying { attempts, last } = &err else {
        panic!("expected HelperKeepsDying, got {err}");
    };
    assert_eq!(*attempts, MAX_HANDSHAKE_FAILURES);
    assert!(last.contains("exited with status 1"), "{last}");
}

#[tokio::test]
async fn a_helper_binary_that_cannot_start_is_an_error_naming_it() {
    let scratch = Scratch::new("nostart");
    let missing = scratch.0.join("no-such-helper");
    let client = HelperClient::new(HelperEndpoint::Embedded(missing.clone()));
    let err = within(client.connect()).await.expect_err("cannot start");
    assert!(matches!(err, ClientError::StartHelper { .. }), "{err}");
    assert!(err.to_string().contains(&missing.display().to_string()));
}

#[test]
fn the_greeting_names_agentd_and_its_version() {
    let client = HelperClient::new(HelperEndpoint::Service("/x".into()));
    let ours = &client.inner.hello;
    assert_eq!(
        ours.software,
        format!("agentd {}", env!("CARGO_PKG_VERSION"))
    );
    assert!(check_hello(ours, &Hello::ours("confine-helper")).is_ok());
}

#[test]
fn the_spawn_request_lists_descriptors_in_stdin_stdout_stderr_order() {
    let (_, a) = std::os::unix::net::UnixStream::pair().expect("pair");
    let (_, c) = std::os::unix::net::UnixStream::pair().expect("pair");
    let (a_raw, c_raw) = (a.as_raw_fd(), c.as_raw_fd());
    let mut spec = SpawnSpec::new(["x"]);
    spec.stdin = Some(a.into());
    spec.stderr = Some(c.into());
    let (spawn, fds) = spec.into_request(5);
    assert_eq!(spawn.id, 5);
    assert_eq!(spawn.stdio.stdin, StdioSpec::Fd);
    assert_eq!(spawn.stdio.stdout, StdioSpec::Null);
    assert_eq!(spawn.stdio.stderr, StdioSpec::Fd);
    let raw: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
    assert_eq!(raw, [a_raw, c_raw]);
}

#[test]
fn an_oversized_request_is_refused_before_anything_is_sent() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let client = HelperClient::new(HelperEndpoint::Service("/nonexistent.sock".into()));
    let mut spec = SpawnSpec::new(["x"]);
    spec.env = vec![("BIG".into(), "y".repeat(2 << 20).into())];
    let err = runtime.block_on(client.spawn(spec)).expect_err("too large");
    assert!(matches!(err, ClientError::RequestTooLarge(_)), "{err}");
}

/// The `Info` asked for with the next request goes right behind it, before the command's end,
/// and `learn_verdicts` learns its answer without asking again; the control, a client that
/// did not ask, sends its `Info` only when `learn_verdicts` is called, after the command.
#[tokio::test]
async fn verdicts_asked_with_the_next_request_ride_behind_it() {
    for ahead in [false, true] {
        let scratch = Scratch::new(&format!("verdicts-ahead-{ahead}"));
        let (listener, client, cache_dir) = client_with_a_verdict_cache(&scratch);
        if ahead {
            client.learn_verdicts_with_next_request();
        }
        let helper = FakeHelper::start(move || {
            let mut peer = Peer::accept(&listener);
            let spawn = peer.spawn();
            if ahead {
                assert_eq!(peer.request(), Some(Request::Info), "the Info behind it");
                peer.send(&Reply::Info(bwrap_info(true)));
            }
            peer.send(&exited(spawn.id, 0, Ending::Exited));
            if !ahead {
                assert_eq!(peer.request(), Some(Request::Info), "asked after the end");
                peer.send(&Reply::Info(bwrap_info(true)));
            }
            assert!(peer.request().is_none(), "nothing more is asked");
        });
        let (outcome, kept) = run_and_learn(&client, &cache_dir).await;
        assert!(matches!(outcome, Outcome::Exited(_)), "{outcome:?}");
        assert_eq!(kept.len(), 1, "the answer is learnt: {kept:?}");
        drop(client);
        helper.finished().await;
    }
}

/// An `Info` answered behind the request but before the command failed to build its
/// confinement (which drops the kept verdicts) is older than that failure: it is not learnt,
/// and the helper is asked again after the command, as without the early `Info`. The helper's
/// second answer (the backend no longer usable) is what is kept; learning the first would
/// have kept the backend that just failed.
#[tokio::test]
async fn an_early_answer_from_before_a_failed_confinement_is_not_learnt() {
    let scratch = Scratch::new("verdicts-ahead-failed");
    let (listener, client, cache_dir) = client_with_a_verdict_cache(&scratch);
    client.learn_verdicts_with_next_request();
    let helper = FakeHelper::start(move || {
        let mut peer = Peer::accept(&listener);
        let spawn = peer.spawn();
        assert_eq!(peer.request(), Some(Request::Info), "the Info behind it");
        peer.send(&Reply::Info(bwrap_info(true)));
        peer.send(&Reply::RunnerFailed(confine_protocol::RunnerFailed {
            id: spawn.id,
            stage: confine_protocol::Stage::Namespace,
            errno: 1,
            detail: "bwrap: nothing was run".to_owned(),
        }));
        assert_eq!(
            peer.request(),
            Some(Request::Info),
            "asked again after the failure"
        );
        peer.send(&Reply::Info(bwrap_info(false)));
        assert!(peer.request().is_none(), "nothing more is asked");
    });
    let (outcome, kept) = run_and_learn(&client, &cache_dir).await;
    assert!(matches!(outcome, Outcome::RunnerFailed(_)), "{outcome:?}");
    assert!(kept.is_empty(), "the backend that failed is kept: {kept:?}");
    drop(client);
    helper.finished().await;
}

/// A fake service's client that keeps its verdicts in a cache of the scratch's, and where
/// that cache is.
fn client_with_a_verdict_cache(
    scratch: &Scratch,
) -> (std::os::unix::net::UnixListener, HelperClient, PathBuf) {
    let cache_dir = scratch.0.join("cache");
    let (listener, client) = fake_service(scratch);
    client.keep_verdicts(VerdictCache::open(&cache_dir, true).expect("cache"));
    (listener, client, cache_dir)
}

/// The verdicts the cache in `dir` would send the next helper.
fn kept(dir: &std::path::Path) -> Vec<confine_protocol::UsableBefore> {
    VerdictCache::open(dir, true).expect("cache").hints()
}

/// Runs `true` through `client` as `agentd run` does, learns the verdicts after it, and
/// returns how it ended and what the cache in `cache_dir` keeps then.
async fn run_and_learn(
    client: &HelperClient,
    cache_dir: &std::path::Path,
) -> (Outcome, Vec<confine_protocol::UsableBefore>) {
    let handle = within(client.spawn(SpawnSpec::new(["true"])))
        .await
        .expect("spawn");
    let outcome = within(handle.wait()).await;
    within(client.learn_verdicts()).await;
    (outcome, kept(cache_dir))
}

/// A client whose embedded helper, the script `body`, is started ahead; and its process id.
fn started_ahead(name: &str, body: &str) -> (Scratch, HelperClient, u32) {
    let scratch = Scratch::new(name);
    let helper = scratch.script("helper", body);
    let client = HelperClient::new(HelperEndpoint::Embedded(helper));
    client.start_early();
    let pid = early_pid(&client).expect("a helper started ahead");
    (scratch, client, pid)
}

/// `pid` as the kernel's type.
fn raw_pid(pid: u32) -> i32 {
    i32::try_from(pid).expect("a pid")
}

/// The process id of the helper `client` started ahead, if it started one.
fn early_pid(client: &HelperClient) -> Option<u32> {
    let early = client
        .inner
        .early
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    early.as_ref()?.as_ref().ok().map(|helper| helper.pid)
}

/// A helper started ahead is the one the first request handshakes with; none is started for
/// a service helper.
#[tokio::test]
async fn the_first_request_uses_the_helper_started_ahead() {
    let (scratch, client, early) = started_ahead("early", "exec /bin/cat >&0");
    within(client.connect()).await.expect("handshake");
    assert_eq!(client.helper_pid(), Some(early), "the helper started ahead");
    assert_eq!(early_pid(&client), None, "taken by the connection");
    client.start_early();
    assert_eq!(early_pid(&client), None, "none beside a live connection");

    let service = HelperClient::new(HelperEndpoint::Service(scratch.0.join("absent.sock")));
    service.start_early();
    assert!(service.inner.early.lock().expect("lock").is_none());
}

/// A helper started ahead that no request came for is killed when the client goes: it would
/// otherwise wait on its socket, or report the end of a connection nobody told it to expect.
/// The stand-in ignores the socket's end, so only the kill ends it. Its end is waited for on a
/// pidfd opened while it still runs (it is this process's child, so the pid stays its own).
#[tokio::test]
async fn a_helper_started_ahead_and_never_asked_is_killed_with_the_client() {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
    use std::os::fd::{AsFd, FromRawFd, OwnedFd};

    let (_scratch, client, pid) = started_ahead("early-unused", "exec /bin/sleep 600");
    // SAFETY: pidfd_open takes two integers and returns a new descriptor or -1.
    let raw = unsafe { nix::libc::syscall(nix::libc::SYS_pidfd_open, raw_pid(pid), 0) };
    let raw = i32::try_from(raw).expect("a descriptor number");
    assert!(raw >= 0, "pidfd_open: {}", std::io::Error::last_os_error());
    // SAFETY: the kernel just returned this descriptor; nothing else owns it.
    let pidfd = unsafe { OwnedFd::from_raw_fd(raw) };
    let ended_within = |ms: u16| {
        let mut fds = [PollFd::new(pidfd.as_fd(), PollFlags::POLLIN)];
        poll(&mut fds, PollTimeout::from(ms)).expect("poll the pidfd") == 1
    };
    assert!(
        !ended_within(0),
        "the control: it runs while the client is held"
    );
    drop(client);
    if !ended_within(10_000) {
        // Not left behind for ten minutes when the test fails.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(raw_pid(pid)),
            nix::sys::signal::SIGKILL,
        );
        panic!("pid {pid} still runs");
    }
    // Unless the client's drop reaped it already, it is a zombie killed by SIGKILL.
    match waitid(
        Id::PIDFd(pidfd.as_fd()),
        WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT,
    ) {
        Ok(status) => assert!(
            matches!(
                status,
                WaitStatus::Signaled(_, nix::sys::signal::SIGKILL, _)
            ),
            "{status:?}"
        ),
        Err(e) => assert_eq!(e, nix::errno::Errno::ECHILD, "waitid"),
    }
}
