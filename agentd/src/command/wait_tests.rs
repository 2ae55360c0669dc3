//! The wait loop against the fake helper of `test_support`: each way a command is asked to
//! stop, and how long the helper's answer is waited for.

use confine_protocol::{
    Cancel as CancelRequest, Ending, Refusal, Refused, Reply, Request, Started,
};

use super::*;
use crate::cancel;
use crate::helper_client::{FailedAt, RunnerFailed, SpawnSpec};
use crate::test_support::{Peer, Scratch, exited, fake_service, within};

/// The fake helper's side: takes the spawn, says it started, and hands each request that
/// follows to `answer` until that returns false.
fn helper(
    listener: std::os::unix::net::UnixListener,
    mut answer: impl FnMut(&mut Peer, u64, Option<Request>) -> bool + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    tokio::task::spawn_blocking(move || {
        let mut peer = Peer::accept(&listener);
        let spawn = peer.spawn();
        peer.send(&Reply::Started(Started {
            id: spawn.id,
            pid: 5,
        }));
        loop {
            let request = peer.request();
            if !answer(&mut peer, spawn.id, request) {
                return;
            }
        }
    })
}

#[tokio::test]
async fn the_first_stop_has_the_kill_grace_and_later_ones_none() {
    let scratch = Scratch::new("wait-stops");
    let (listener, client) = fake_service(&scratch);
    let (stop, mut stops) = mpsc::unbounded_channel();
    let (asked_tx, asked_rx) = std::sync::mpsc::channel::<()>();
    let stop_again = stop.clone();
    let mut graces = Vec::new();
    let fake = helper(listener, move |peer, id, request| {
        let Some(Request::Cancel(CancelRequest {
            id: cancelled,
            grace_ms,
        })) = request
        else {
            panic!("expected a Cancel, got {request:?}");
        };
        assert_eq!(cancelled, id);
        graces.push(grace_ms);
        if graces.len() == 1 {
            asked_tx.send(()).expect("test waits");
            return true;
        }
        assert_eq!(graces, [2000, 0]);
        peer.send(&exited(id, 0, Ending::Cancelled));
        false
    });
    let handle = client
        .spawn(SpawnSpec::new(["sleep", "100"]))
        .await
        .expect("spawned");
    stop.send(()).expect("wait listens");
    let asking = tokio::task::spawn_blocking(move || {
        asked_rx.recv().expect("first cancel seen");
        stop_again.send(()).expect("wait listens");
    });
    let ended = within(wait_for_outcome(handle, &mut stops, Waiting::default())).await;
    within(asking).await.expect("second stop sent");
    within(fake).await.expect("fake helper");
    assert!(ended.started);
    assert!(!ended.given_up);
    assert!(matches!(ended.outcome, Outcome::Exited(e) if e.ending == Ending::Cancelled));
}

#[tokio::test]
async fn with_no_stops_left_the_wait_is_for_the_end() {
    let scratch = Scratch::new("wait-no-stops");
    let (listener, client) = fake_service(&scratch);
    let (stop, mut stops) = mpsc::unbounded_channel::<()>();
    drop(stop);
    let fake = tokio::task::spawn_blocking(move || {
        let mut peer = Peer::accept(&listener);
        let spawn = peer.spawn();
        peer.send(&exited(spawn.id, 3, Ending::Exited));
        assert!(peer.request().is_none(), "nothing is cancelled");
    });
    let handle = client
        .spawn(SpawnSpec::new(["true"]))
        .await
        .expect("spawned");
    let ended = within(wait_for_outcome(handle, &mut stops, Waiting::default())).await;
    drop(client);
    within(fake).await.expect("fake helper");
    assert!(!ended.started);
    assert!(matches!(ended.outcome, Outcome::Exited(_)));
}

#[tokio::test]
async fn a_cancel_asks_once_and_an_unanswered_one_is_given_up_on() {
    let scratch = Scratch::new("wait-give-up");
    let (listener, client) = fake_service(&scratch);
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let mut cancels = 0;
    let fake = helper(listener, move |_, id, request| {
        if cancels == 1 {
            assert!(request.is_none(), "a second request: {request:?}");
            return false;
        }
        let Some(Request::Cancel(CancelRequest {
            id: cancelled,
            grace_ms,
        })) = request
        else {
            panic!("expected a Cancel, got {request:?}");
        };
        assert_eq!((cancelled, grace_ms), (id, 2000));
        cancels += 1;
        // Never answers.
        release_rx.recv().expect("test finished");
        true
    });
    let handle = client
        .spawn(SpawnSpec::new(["sleep", "100"]))
        .await
        .expect("spawned");
    let (canceller, mut stop) = cancel::pair();
    let (started_tx, started_rx) = oneshot::channel();
    let waiting = Waiting {
        answer_wait: Some(Duration::from_millis(50)),
        on_started: Some(started_tx),
    };
    let wait = tokio::spawn(async move { wait_for_outcome(handle, &mut stop, waiting).await });
    within(started_rx).await.expect("told of the start");
    canceller.cancel();
    let ended = within(wait).await.expect("wait ended");
    drop(client);
    release_tx.send(()).expect("helper waits");
    within(fake).await.expect("fake helper");
    assert!(ended.given_up);
    assert!(ended.started);
    let Outcome::RunnerFailed(failed) = ended.outcome else {
        panic!("expected a runner failure");
    };
    assert_eq!(failed.stage, FailedAt::HelperExited);
    assert_eq!(
        failed.detail,
        "confine-helper did not report the end of the cancelled command within 0.05 s; it may \
         still be running"
    );
}

#[tokio::test]
async fn a_command_that_never_started_is_not_told_as_started() {
    let scratch = Scratch::new("wait-refused");
    let (listener, client) = fake_service(&scratch);
    let fake = tokio::task::spawn_blocking(move || {
        let mut peer = Peer::accept(&listener);
        let spawn = peer.spawn();
        peer.send(&Reply::Refused(Refused {
            id: spawn.id,
            reason: Refusal::CeilingNetwork,
        }));
    });
    let handle = client.spawn(SpawnSpec::new(["ls"])).await.expect("spawned");
    let (started_tx, started_rx) = oneshot::channel();
    let waiting = Waiting {
        answer_wait: Some(Duration::from_secs(5)),
        on_started: Some(started_tx),
    };
    let ended = within(wait_for_outcome(handle, &mut Cancel::never(), waiting)).await;
    within(fake).await.expect("fake helper");
    assert!(!ended.started);
    assert!(matches!(ended.outcome, Outcome::Refused(_)));
    assert!(started_rx.await.is_err(), "dropped unsent");
}

/// Polls `settling` once: whether it ended without waiting for anything.
fn settles_at_once(settling: impl Future<Output = Ended>) -> bool {
    let mut settling = std::pin::pin!(settling);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    settling.as_mut().poll(&mut cx).is_ready()
}

#[tokio::test]
async fn settling_after_giving_up_reads_no_more_output() {
    // The helper is gone and the output stays open: an orphan's would still be read a while.
    let ended = |given_up| Ended {
        outcome: Outcome::RunnerFailed(RunnerFailed {
            id: 1,
            stage: FailedAt::HelperExited,
            errno: 0,
            detail: "gone".to_owned(),
        }),
        started: true,
        given_up,
    };
    let open = std::future::pending::<()>;
    assert!(settles_at_once(settle(
        std::future::ready(ended(true)),
        open()
    )));
    assert!(!settles_at_once(settle(
        std::future::ready(ended(false)),
        open()
    )));
}
