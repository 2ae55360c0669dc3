//! The lifecycle under races: starts refused or rolled back without a trace, cancellation of
//! subtrees, one outcome per child, late messages rejected, teardown once, and fifty children
//! cancelled at seeded random points. Every test is bounded, so a hang fails it.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;

use super::registry::child_depth;
use super::*;

/// The session log, as a list.
#[derive(Debug, Default)]
struct Recorder {
    events: Mutex<Vec<AgentEvent>>,
    refuse_started: AtomicBool,
}

impl AgentEvents for Recorder {
    fn publish(&self, event: AgentEvent) -> Result<(), PublishError> {
        if self.refuse_started.load(Ordering::SeqCst) && matches!(event, AgentEvent::Started { .. })
        {
            return Err(PublishError::new("the log is full"));
        }
        self.events.lock().expect("events").push(event);
        Ok(())
    }
}

impl Recorder {
    fn events(&self) -> Vec<AgentEvent> {
        self.events.lock().expect("events").clone()
    }

    fn of(&self, id: AgentId) -> Vec<AgentEvent> {
        self.events()
            .into_iter()
            .filter(|e| event_id(e) == id)
            .collect()
    }

    fn ended(&self, id: AgentId) -> Vec<Outcome> {
        self.of(id)
            .into_iter()
            .filter_map(|e| match e {
                AgentEvent::Ended { outcome, .. } => Some(outcome),
                _ => None,
            })
            .collect()
    }
}

fn event_id(event: &AgentEvent) -> AgentId {
    match event {
        AgentEvent::Started { id, .. }
        | AgentEvent::Ended { id, .. }
        | AgentEvent::Output { id, .. }
        | AgentEvent::InjectionDropped { id, .. } => *id,
    }
}

fn tree() -> (AgentTree, Arc<Recorder>) {
    let recorder = Arc::new(Recorder::default());
    (AgentTree::new(recorder.clone()), recorder)
}

/// Fails the test instead of hanging it.
async fn bounded<F: Future>(test: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(30), test)
        .await
        .expect("the test finished within its bound")
}

/// Counts the bodies whose futures are not dropped yet: each holds a clone.
#[derive(Debug, Clone, Default)]
struct Alive(Arc<()>);

impl Alive {
    fn count(&self) -> usize {
        Arc::strong_count(&self.0) - 1
    }
}

/// A body that runs until it is cancelled.
fn until_cancelled(
    alive: &Alive,
) -> impl FnOnce(
    ChildContext,
) -> std::pin::Pin<Box<dyn Future<Output = Result<String, ChildError>> + Send>>
+ Send
+ 'static {
    let alive = alive.clone();
    move |ctx: ChildContext| {
        Box::pin(async move {
            let _alive = alive;
            ctx.cancelled().await;
            Err(ChildError::Cancelled)
        })
    }
}

fn only_top(tree: &AgentTree) -> bool {
    tree.agents().iter().map(|a| a.id).collect::<Vec<_>>() == [AgentId::TOP]
}

#[test]
fn the_depth_of_a_child_is_its_parents_plus_one_within_the_cap_and_never_overflows() {
    assert_eq!(child_depth(AgentId::TOP, 0, 1).expect("within"), 1);
    assert_eq!(child_depth(AgentId::TOP, 1, 2).expect("within"), 2);
    assert!(matches!(
        child_depth(AgentId::TOP, 0, 0),
        Err(StartError::TooDeep {
            depth: 1,
            max_depth: 0,
            ..
        })
    ));
    assert!(matches!(
        child_depth(AgentId::TOP, u32::MAX, u32::MAX),
        Err(StartError::DepthOverflow { .. })
    ));
    let text = child_depth(AgentId::TOP, 2, 2)
        .expect_err("too deep")
        .to_string();
    assert!(
        text.contains("depth 3") && text.contains("maximum depth 2"),
        "{text}"
    );
}

#[tokio::test]
async fn a_start_beyond_the_cap_is_refused_before_anything_is_made() {
    bounded(async {
        let (tree, recorder) = tree();
        let alive = Alive::default();
        let first = tree
            .start(AgentId::TOP, "worker", 2, until_cancelled(&alive))
            .expect("depth 1");
        let second = tree
            .start(first.id(), "worker", 2, until_cancelled(&alive))
            .expect("depth 2");
        assert_eq!((first.depth(), second.depth()), (1, 2));
        let (events, agents, tasks) = (recorder.events(), tree.agents(), tree.live_tasks());
        let called = Arc::new(AtomicBool::new(false));
        let flag = called.clone();
        let refused = tree.start(second.id(), "worker", 2, move |_ctx| async move {
            flag.store(true, Ordering::SeqCst);
            Ok(String::new())
        });
        assert!(
            matches!(refused, Err(StartError::TooDeep { depth: 3, max_depth: 2, parent }) if parent == second.id())
        );
        assert!(matches!(
            tree.reserve(AgentId::TOP, "worker", 0),
            Err(StartError::TooDeep { depth: 1, .. })
        ));
        assert_eq!(recorder.events(), events, "nothing published");
        assert_eq!(tree.agents(), agents, "nothing registered");
        assert_eq!(tree.live_tasks(), tasks, "no task");
        // Closing joins every task the tree ever spawned: a body started by the refused start
        // would have run by then.
        tree.close().await.expect("closed");
        assert!(!called.load(Ordering::SeqCst), "the body never ran");
        assert_eq!(alive.count(), 0);
    })
    .await;
}

#[tokio::test]
async fn cancelling_an_agent_cancels_its_subtree_and_refuses_later_starts_below_it() {
    bounded(async {
        let (tree, recorder) = tree();
        let alive = Alive::default();
        let parent = tree
            .start(AgentId::TOP, "p", 5, until_cancelled(&alive))
            .expect("parent");
        let child = tree
            .start(parent.id(), "c", 5, until_cancelled(&alive))
            .expect("child");
        let grandchild = tree
            .start(child.id(), "g", 5, until_cancelled(&alive))
            .expect("grandchild");
        let sibling = tree
            .start(AgentId::TOP, "s", 5, until_cancelled(&alive))
            .expect("sibling");
        let pending = tree.reserve(sibling.id(), "late", 5).expect("reserved");

        parent.cancel();
        for agent in [&parent, &child, &grandchild] {
            assert_eq!(agent.outcome().await, Outcome::Cancelled);
        }
        assert_eq!(
            sibling.try_outcome(),
            None,
            "the sibling is not below the cancelled one"
        );
        assert!(matches!(
            tree.reserve(child.id(), "late", 5),
            Err(StartError::Cancelled { .. })
        ));

        let before = recorder.events();
        sibling.cancel();
        assert!(
            pending.is_cancelled(),
            "a reserved start is below its parent"
        );
        assert!(matches!(
            pending.launch(until_cancelled(&alive)),
            Err(StartError::Cancelled { .. })
        ));
        assert_eq!(sibling.outcome().await, Outcome::Cancelled);
        let after: Vec<_> = recorder.events()[before.len()..].to_vec();
        assert_eq!(
            after,
            vec![AgentEvent::Ended {
                id: sibling.id(),
                outcome: Outcome::Cancelled
            }],
            "the refused start published nothing"
        );

        assert!(tree.cancel(AgentId::TOP));
        assert!(matches!(
            tree.reserve(AgentId::TOP, "late", 5),
            Err(StartError::Cancelled { .. })
        ));
        tree.close().await.expect("closed");
        assert!(only_top(&tree));
        assert_eq!((tree.live_tasks(), alive.count()), (0, 0));
    })
    .await;
}

#[tokio::test]
async fn a_start_cancelled_during_its_preparation_publishes_nothing_and_leaves_no_task() {
    bounded(async {
        let (tree, recorder) = tree();
        let alive = Alive::default();

        // Cancelled by the preparation itself, twice.
        let pending = tree.reserve(AgentId::TOP, "w", 3).expect("reserved");
        let signal = pending.signal();
        pending.cancel();
        pending.cancel();
        assert!(signal.is_cancelled());
        assert!(matches!(
            pending.launch(until_cancelled(&alive)),
            Err(StartError::Cancelled { .. })
        ));

        // The parent cancelled while the preparation waits on another task.
        let parent = tree
            .start(AgentId::TOP, "p", 3, until_cancelled(&alive))
            .expect("parent");
        let pending = tree.reserve(parent.id(), "w", 3).expect("reserved");
        let signal = pending.signal();
        let (prepared_tx, prepared_rx) = oneshot::channel();
        let preparation = tokio::spawn(async move {
            signal.cancelled().await;
            prepared_tx.send(pending).expect("the test waits");
        });
        parent.cancel();
        preparation
            .await
            .expect("the preparation saw the cancellation");
        let pending = prepared_rx.await.expect("handed back");
        assert!(matches!(
            pending.launch(until_cancelled(&alive)),
            Err(StartError::Cancelled { .. })
        ));

        // Abandoned: dropping the start wakes its waits.
        let pending = tree.reserve(AgentId::TOP, "w", 3).expect("reserved");
        let signal = pending.signal();
        drop(pending);
        assert!(signal.is_cancelled());

        // Closed during the preparation.
        let pending = tree.reserve(AgentId::TOP, "w", 3).expect("reserved");
        tree.close().await.expect("closed");
        assert!(matches!(
            pending.launch(until_cancelled(&alive)),
            Err(StartError::Closed)
        ));
        assert!(matches!(
            tree.reserve(AgentId::TOP, "w", 3),
            Err(StartError::Closed)
        ));

        let ids: Vec<AgentId> = recorder.events().iter().map(event_id).collect();
        assert!(ids.iter().all(|id| *id == parent.id()), "{ids:?}");
        assert!(only_top(&tree));
        assert_eq!((tree.live_tasks(), alive.count()), (0, 0));
    })
    .await;
}

#[tokio::test]
async fn a_start_whose_announcement_is_refused_is_rolled_back_and_takes_no_id() {
    bounded(async {
        let (tree, recorder) = tree();
        recorder.refuse_started.store(true, Ordering::SeqCst);
        let ran = Arc::new(AtomicBool::new(false));
        let flag = ran.clone();
        let refused = tree.start(AgentId::TOP, "w", 1, move |_ctx| async move {
            flag.store(true, Ordering::SeqCst);
            Ok(String::new())
        });
        assert!(matches!(refused, Err(StartError::Publish(_))));
        assert!(recorder.events().is_empty());
        assert!(only_top(&tree));
        assert_eq!(tree.live_tasks(), 0);

        // A failure of the caller's own preparation: the start is dropped, nothing is seen.
        let pending = tree.reserve(AgentId::TOP, "w", 1).expect("reserved");
        drop(pending);
        assert!(recorder.events().is_empty());

        recorder.refuse_started.store(false, Ordering::SeqCst);
        let child = tree
            .start(AgentId::TOP, "w", 1, |_ctx| async { Ok("done".to_owned()) })
            .expect("started");
        assert_eq!(
            child.id().to_string(),
            "agent-1",
            "the refused start took no id"
        );
        assert_eq!(child.outcome().await, Outcome::Completed("done".into()));
        assert!(!ran.load(Ordering::SeqCst), "the refused body never ran");
        tree.close().await.expect("closed");
        assert_eq!(tree.live_tasks(), 0);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_racing_a_launch_either_refuses_it_or_finds_it_ready() {
    bounded(async {
        let (tree, recorder) = tree();
        let alive = Alive::default();
        let (mut refused, mut ready) = (0, 0);
        for _ in 0..50 {
            let parent = tree
                .start(AgentId::TOP, "p", 2, until_cancelled(&alive))
                .expect("parent");
            let pending = tree.reserve(parent.id(), "c", 2).expect("reserved");
            let barrier = Arc::new(tokio::sync::Barrier::new(2));
            let gate = barrier.clone();
            let launcher = {
                let alive = alive.clone();
                tokio::spawn(async move {
                    gate.wait().await;
                    pending.launch(until_cancelled(&alive))
                })
            };
            barrier.wait().await;
            parent.cancel();
            match launcher.await.expect("launcher") {
                Err(StartError::Cancelled { .. }) => refused += 1,
                Ok(child) => {
                    ready += 1;
                    assert_eq!(child.outcome().await, Outcome::Cancelled);
                    let own = recorder.of(child.id());
                    assert!(matches!(own[0], AgentEvent::Started { .. }));
                    assert_eq!(recorder.ended(child.id()), vec![Outcome::Cancelled]);
                }
                Err(other) => panic!("unexpected {other}"),
            }
            parent.teardown().await.expect("torn down");
        }
        assert_eq!(refused + ready, 50);
        // Every event belongs to an agent that was announced first.
        let events = recorder.events();
        let announced: Vec<AgentId> = events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::Started { id, .. } => Some(*id),
                _ => None,
            })
            .collect();
        assert_eq!(announced.len(), 50 + ready);
        assert!(events.iter().all(|e| announced.contains(&event_id(e))));
        assert!(only_top(&tree));
        assert_eq!((tree.live_tasks(), alive.count()), (0, 0));
    })
    .await;
}

/// A log that is full for the children's outputs: each one a teardown delivers is refused and
/// goes into its report as unrecorded.
#[derive(Debug, Default)]
struct FullForOutput;

impl AgentEvents for FullForOutput {
    fn publish(&self, event: AgentEvent) -> Result<(), PublishError> {
        match event {
            AgentEvent::Output { .. } => Err(PublishError::new("the log is full")),
            _ => Ok(()),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parents_teardown_that_no_longer_finds_a_child_leaves_nothing_of_its_teardown_running() {
    // Enough unrecorded outputs that a teardown which went on working after its detach (making
    // its report, with a copy of them) would still be at it when the parent's teardown returns.
    const OUTPUTS: usize = 100_000;
    bounded(async {
        let tree = AgentTree::new(Arc::new(FullForOutput));
        let alive = Alive::default();
        let parent = tree
            .start(AgentId::TOP, "p", 2, until_cancelled(&alive))
            .expect("parent");
        let child = tree
            .start(parent.id(), "c", 2, |ctx| async move {
                for _ in 0..OUTPUTS {
                    ctx.output(String::new()).expect("running");
                }
                Ok("done".to_owned())
            })
            .expect("child");
        assert_eq!(child.outcome().await, Outcome::Completed("done".into()));
        let id = child.id();
        // On a thread of its own, so as not to share a worker with the child's teardown: once
        // that teardown has detached the child, the parent's teardown no longer finds it and
        // does not wait for it.
        let watcher = {
            let tree = tree.clone();
            let runtime = tokio::runtime::Handle::current();
            tokio::task::spawn_blocking(move || {
                let deadline = std::time::Instant::now() + Duration::from_secs(20);
                while tree.agents().iter().any(|agent| agent.id == id) {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "the child's teardown detached it"
                    );
                    std::thread::yield_now();
                }
                runtime.block_on(parent.teardown()).expect("torn down");
                tree.live_tasks()
            })
        };
        // Starts the child's own teardown, which delivers (and sees refused) every output.
        drop(child);
        let live = watcher.await.expect("watched");
        assert_eq!(
            live, 0,
            "the parent's teardown returned with a task of its child running"
        );
        assert!(only_top(&tree));
        tree.close().await.expect("closed");
        assert_eq!((tree.live_tasks(), alive.count()), (0, 0));
    })
    .await;
}

#[tokio::test]
async fn a_body_runs_only_after_its_started_and_records_only_before_its_ended() {
    bounded(async {
        let (tree, recorder) = tree();
        let sink = recorder.clone();
        let child = tree
            .start(AgentId::TOP, "reader", 1, move |ctx| async move {
                let announced = sink.of(ctx.id()).first().cloned();
                let expected = AgentEvent::Started {
                    id: ctx.id(),
                    parent: AgentId::TOP,
                    depth: 1,
                    persona: "reader".into(),
                };
                assert_eq!(announced, Some(expected), "Started came first");
                let id = ctx.id();
                ctx.record(|| {
                    sink.events
                        .lock()
                        .expect("events")
                        .push(AgentEvent::Output {
                            id,
                            text: "own event".into(),
                        })
                })
                .expect("admitted while running");
                Ok("answer".to_owned())
            })
            .expect("started");
        assert_eq!(child.outcome().await, Outcome::Completed("answer".into()));
        let events = recorder.of(child.id());
        assert!(matches!(events[0], AgentEvent::Started { .. }));
        assert!(matches!(&events[1], AgentEvent::Output { text, .. } if text == "own event"));
        assert!(matches!(events[2], AgentEvent::Ended { .. }));
        tree.close().await.expect("closed");
    })
    .await;
}

#[tokio::test]
async fn a_double_cancel_gives_one_outcome_and_one_ended() {
    bounded(async {
        let (tree, recorder) = tree();
        let alive = Alive::default();
        let child = tree
            .start(AgentId::TOP, "w", 1, until_cancelled(&alive))
            .expect("started");
        child.cancel();
        child.cancel();
        assert!(tree.cancel(child.id()));
        assert_eq!(child.outcome().await, Outcome::Cancelled);
        child.cancel();
        let first = child.teardown().await.expect("torn down");
        let second = child.teardown().await.expect("torn down");
        assert!(Arc::ptr_eq(&first, &second));
        child.cancel();
        assert!(!tree.cancel(child.id()), "detached");
        assert_eq!(recorder.ended(child.id()), vec![Outcome::Cancelled]);
        assert_eq!((tree.live_tasks(), alive.count()), (0, 0));
    })
    .await;
}

#[tokio::test]
async fn a_cancel_from_inside_the_body_wins_over_its_later_answer_and_messages() {
    bounded(async {
        let (tree, recorder) = tree();
        let (late_tx, late_rx) = oneshot::channel();
        let child = tree
            .start(AgentId::TOP, "w", 1, move |ctx| async move {
                ctx.cancel();
                ctx.cancel();
                // Refused once the driver claimed the cancellation.
                let waited = ctx.next_injection().await;
                let output = ctx.output("late output");
                let injections = ctx.take_injections();
                let recorded = ctx.record(|| ());
                late_tx
                    .send((waited, output, injections, recorded))
                    .expect("the test waits");
                Ok("an answer after the cancellation".to_owned())
            })
            .expect("started");
        let (waited, output, injections, recorded) = late_rx.await.expect("the body reported");
        let settled = Rejected::Settled {
            id: child.id(),
            outcome: Outcome::Cancelled,
        };
        assert_eq!(waited, Err(settled.clone()));
        assert_eq!(output, Err(settled.clone()));
        assert_eq!(injections, Err(settled.clone()));
        assert_eq!(recorded, Err(settled));
        let report = child.teardown().await.expect("torn down");
        assert_eq!(report.outcome, Outcome::Cancelled);
        assert_eq!(
            report.delivered_output, 0,
            "the late output was never queued"
        );
        assert_eq!(recorder.ended(child.id()), vec![Outcome::Cancelled]);
    })
    .await;
}

#[tokio::test]
async fn dispose_and_teardown_from_inside_the_body_do_not_wait_for_themselves() {
    bounded(async {
        let (tree, recorder) = tree();
        let (me_tx, me_rx) = oneshot::channel::<Child>();
        let (seen_tx, seen_rx) = oneshot::channel();
        let handle = tree
            .start(AgentId::TOP, "w", 1, move |ctx| async move {
                let me = me_rx.await.expect("handed its own handle");
                ctx.dispose();
                ctx.dispose();
                let own = me.teardown().await;
                let close = ctx.tree().close().await;
                seen_tx.send((own, close)).expect("the test waits");
                Ok("done".to_owned())
            })
            .expect("started");
        let id = handle.id();
        me_tx.send(handle).expect("the body waits");
        let (own, close) = seen_rx.await.expect("the body reported");
        assert_eq!(own.expect_err("reentrant"), TeardownError::Reentrant { id });
        assert_eq!(
            close.expect_err("reentrant"),
            TeardownError::Reentrant { id: AgentId::TOP }
        );
        // The close the body asked for goes on, and finishes once the body returned.
        let report = tree.close().await.expect("closed");
        assert_eq!(report.agents.len(), 1);
        assert_eq!(report.agents[0].outcome, Outcome::Cancelled);
        assert_eq!(recorder.ended(id), vec![Outcome::Cancelled]);
        assert!(only_top(&tree));
        assert_eq!(tree.live_tasks(), 0);
    })
    .await;
}

#[tokio::test]
async fn the_parents_handler_of_a_childs_result_can_cancel_and_tear_it_down() {
    bounded(async {
        let (tree, recorder) = tree();
        let (grandchild_tx, grandchild_rx) = oneshot::channel();
        let parent = tree
            .start(AgentId::TOP, "lead", 3, move |ctx| async move {
                let child = ctx
                    .tree()
                    .start(ctx.id(), "helper", 3, |_ctx| async {
                        Ok("found it".to_owned())
                    })
                    .expect("started");
                let answer = match child.outcome().await {
                    Outcome::Completed(answer) => answer,
                    other => return Err(ChildError::failed(format!("unexpected {other}"))),
                };
                // The handler of the result: everything it may do to a settled child.
                child.cancel();
                child.cancel();
                ctx.tree().cancel(child.id());
                let first = child.teardown().await.expect("torn down");
                let second = child.teardown().await.expect("torn down");
                assert!(Arc::ptr_eq(&first, &second));
                let late = child.inject("too late");
                grandchild_tx
                    .send((child.id(), late))
                    .expect("the test waits");
                Ok(format!("the helper {answer}"))
            })
            .expect("started");
        assert_eq!(
            parent.outcome().await,
            Outcome::Completed("the helper found it".into())
        );
        let (child, late) = grandchild_rx.await.expect("reported");
        assert!(matches!(late, Err(Rejected::Settled { .. })));
        assert_eq!(
            recorder.ended(child),
            vec![Outcome::Completed("found it".into())]
        );

        // A handler that cancels its own agent on the result.
        let other = tree
            .start(AgentId::TOP, "lead", 3, |ctx| async move {
                let child = ctx
                    .tree()
                    .start(ctx.id(), "helper", 3, |_ctx| async { Ok("x".to_owned()) })
                    .expect("started");
                let _ = child.outcome().await;
                ctx.cancel();
                child.cancel();
                Ok("ignored".to_owned())
            })
            .expect("started");
        assert_eq!(other.outcome().await, Outcome::Cancelled);
        tree.close().await.expect("closed");
        assert_eq!(tree.live_tasks(), 0);
    })
    .await;
}

#[tokio::test]
async fn a_panicking_child_gives_its_parent_a_failure_never_a_hang() {
    bounded(async {
        let (tree, recorder) = tree();
        let panics = tree
            .start(AgentId::TOP, "w", 1, |_ctx| async {
                if true {
                    panic!("the model loop broke");
                }
                Ok(String::new())
            })
            .expect("started");
        let panics_early = tree
            .start(
                AgentId::TOP,
                "w",
                1,
                |_ctx| -> std::future::Ready<Result<String, ChildError>> {
                    std::panic::panic_any(42_u8)
                },
            )
            .expect("started");
        let fails = tree
            .start(AgentId::TOP, "w", 1, |_ctx| async {
                Err(ChildError::failed("the model refused"))
            })
            .expect("started");
        assert_eq!(
            panics.outcome().await,
            Outcome::Failed(Failure::Panicked("the model loop broke".into()))
        );
        assert_eq!(
            panics_early.outcome().await,
            Outcome::Failed(Failure::Panicked("the panic carried no message".into()))
        );
        assert_eq!(
            fails.outcome().await,
            Outcome::Failed(Failure::Error("the model refused".into()))
        );
        let report = tree.close().await.expect("closed");
        assert_eq!(report.agents.len(), 3);
        for child in [&panics, &panics_early, &fails] {
            assert_eq!(recorder.ended(child.id()).len(), 1);
        }
        assert_eq!(tree.live_tasks(), 0);
    })
    .await;
}

#[tokio::test]
async fn messages_after_settlement_are_rejected_and_never_applied() {
    bounded(async {
        let (tree, recorder) = tree();
        let child = tree
            .start(AgentId::TOP, "w", 1, |ctx| async move {
                let applied = ctx.next_injection().await.expect("running");
                ctx.output(format!("applied {applied}")).expect("running");
                Ok("done".to_owned())
            })
            .expect("started");
        child.inject("first").expect("running");
        assert_eq!(child.next_output().await.as_deref(), Some("applied first"));
        assert_eq!(child.outcome().await, Outcome::Completed("done".into()));
        assert_eq!(child.next_output().await, None, "ended, everything taken");
        assert_eq!(
            child.inject("late"),
            Err(Rejected::Settled {
                id: child.id(),
                outcome: Outcome::Completed("done".into())
            })
        );
        let report = child.teardown().await.expect("torn down");
        assert!(
            report.dropped_injections.is_empty(),
            "the late message was never held"
        );

        // A body still running after its cancellation: its messages and answer are late.
        let (go_tx, go_rx) = oneshot::channel::<()>();
        let (late_tx, late_rx) = oneshot::channel();
        let stubborn = tree
            .start(AgentId::TOP, "w", 1, move |ctx| async move {
                let _ = go_rx.await;
                late_tx
                    .send((ctx.output("late"), ctx.take_injections()))
                    .expect("the test waits");
                Ok("late answer".to_owned())
            })
            .expect("started");
        stubborn.cancel();
        assert_eq!(stubborn.outcome().await, Outcome::Cancelled);
        go_tx.send(()).expect("the body waits");
        let (output, injections) = late_rx.await.expect("reported");
        assert!(output.is_err() && injections.is_err());
        let report = stubborn.teardown().await.expect("torn down");
        assert_eq!(
            report.outcome,
            Outcome::Cancelled,
            "the late answer was not applied"
        );
        assert_eq!(recorder.ended(stubborn.id()), vec![Outcome::Cancelled]);
        tree.close().await.expect("closed");
    })
    .await;
}

#[tokio::test]
async fn teardown_stops_drains_detaches_and_disposes_in_that_order() {
    bounded(async {
        let (tree, recorder) = tree();
        let alive = Alive::default();
        let (ready_tx, ready_rx) = oneshot::channel();
        let guard = alive.clone();
        let parent = tree
            .start(AgentId::TOP, "lead", 2, move |ctx| async move {
                let _alive = guard;
                ctx.output("o1").expect("running");
                ctx.output("o2").expect("running");
                ready_tx.send(()).expect("the test waits");
                ctx.cancelled().await;
                Err(ChildError::Cancelled)
            })
            .expect("started");
        ready_rx.await.expect("ready");
        let child = tree
            .start(parent.id(), "helper", 2, until_cancelled(&alive))
            .expect("started");
        child.inject("held for the child").expect("running");
        parent.inject("switch the mode").expect("running");

        let report = parent.teardown().await.expect("torn down");
        assert_eq!(report.outcome, Outcome::Cancelled);
        assert_eq!(report.delivered_output, 2);
        assert_eq!(
            report.dropped_injections,
            vec!["switch the mode".to_owned()]
        );
        assert!(report.unrecorded.is_empty());
        assert_eq!(alive.count(), 0, "both drivers stopped");
        assert!(only_top(&tree), "both detached");
        assert_eq!(parent.next_output().await, None, "drained");
        assert!(parent.inject("after the teardown").is_err());

        let p = parent.id();
        assert_eq!(
            recorder.of(p)[1..],
            [
                AgentEvent::Ended {
                    id: p,
                    outcome: Outcome::Cancelled
                },
                AgentEvent::Output {
                    id: p,
                    text: "o1".into()
                },
                AgentEvent::Output {
                    id: p,
                    text: "o2".into()
                },
                AgentEvent::InjectionDropped {
                    id: p,
                    text: "switch the mode".into()
                },
            ]
        );
        // The child, part of what the parent started, was drained before the parent.
        let events = recorder.events();
        let position = |wanted: &AgentEvent| events.iter().position(|e| e == wanted);
        let child_drop = position(&AgentEvent::InjectionDropped {
            id: child.id(),
            text: "held for the child".into(),
        });
        let parent_output = position(&AgentEvent::Output {
            id: p,
            text: "o1".into(),
        });
        assert!(child_drop.is_some() && child_drop < parent_output);
        let child_report = child.teardown().await.expect("torn down already");
        assert_eq!(child_report.dropped_injections.len(), 1);
        assert_eq!(tree.live_tasks(), 0);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_asked_for_concurrently_runs_once() {
    bounded(async {
        let (tree, recorder) = tree();
        let alive = Alive::default();
        let guard = alive.clone();
        let (release_tx, release_rx) = oneshot::channel::<()>();
        // Stops only when released, so every teardown below is asked for while it runs.
        let child = Arc::new(
            tree.start(AgentId::TOP, "w", 1, move |_ctx| async move {
                let _alive = guard;
                let _ = release_rx.await;
                Err(ChildError::Cancelled)
            })
            .expect("started"),
        );
        child.inject("held").expect("running");
        let barrier = Arc::new(tokio::sync::Barrier::new(17));
        let mut callers = Vec::new();
        for _ in 0..16 {
            let (child, barrier) = (child.clone(), barrier.clone());
            callers.push(tokio::spawn(async move {
                barrier.wait().await;
                child.teardown().await.expect("torn down")
            }));
        }
        barrier.wait().await;
        // The close takes the agents as it is first polled, before the release.
        let (close, ()) = tokio::join!(tree.close(), async move {
            release_tx.send(()).expect("the body waits");
        });
        let close = close.expect("closed");
        assert_eq!(close.agents.len(), 1);
        let mut reports = vec![close.agents[0].clone()];
        for caller in callers {
            reports.push(caller.await.expect("caller"));
        }
        assert!(reports.iter().all(|r| Arc::ptr_eq(r, &reports[0])));
        let again = tree.close().await.expect("closed");
        assert!(Arc::ptr_eq(&close, &again));
        assert_eq!(recorder.ended(child.id()), vec![Outcome::Cancelled]);
        let dropped = recorder
            .of(child.id())
            .into_iter()
            .filter(|e| matches!(e, AgentEvent::InjectionDropped { .. }))
            .count();
        assert_eq!(dropped, 1, "drained once");
        assert_eq!((tree.live_tasks(), alive.count()), (0, 0));
    })
    .await;
}

#[tokio::test]
async fn a_body_that_ignores_its_cancellation_is_dropped_after_the_grace() {
    bounded(async {
        let recorder = Arc::new(Recorder::default());
        let tree = AgentTree::with_stop_grace(recorder.clone(), Duration::from_millis(50));
        let alive = Alive::default();
        let guard = alive.clone();
        let child = tree
            .start(AgentId::TOP, "w", 1, move |_ctx| async move {
                let _alive = guard;
                std::future::pending::<()>().await;
                Ok(String::new())
            })
            .expect("started");
        child.cancel();
        assert_eq!(child.outcome().await, Outcome::Cancelled);
        let report = child.teardown().await.expect("torn down");
        assert_eq!(report.outcome, Outcome::Cancelled);
        assert_eq!((tree.live_tasks(), alive.count()), (0, 0));
    })
    .await;
}

#[tokio::test]
async fn closing_the_session_tears_every_agent_down_and_refuses_later_starts() {
    bounded(async {
        let (tree, recorder) = tree();
        let alive = Alive::default();
        let done = tree
            .start(AgentId::TOP, "w", 3, |_ctx| async { Ok("done".to_owned()) })
            .expect("started");
        let running = tree
            .start(AgentId::TOP, "w", 3, until_cancelled(&alive))
            .expect("started");
        let below = tree
            .start(running.id(), "w", 3, until_cancelled(&alive))
            .expect("started");
        let dropped = tree
            .start(below.id(), "w", 3, until_cancelled(&alive))
            .expect("started");
        let dropped_id = dropped.id();
        drop(dropped);
        assert_eq!(done.outcome().await, Outcome::Completed("done".into()));

        let (first, second) = tokio::join!(tree.close(), tree.close());
        let (first, second) = (first.expect("closed"), second.expect("closed"));
        assert!(Arc::ptr_eq(&first, &second));
        assert!(tree.is_closed());
        let ids: Vec<AgentId> = first.agents.iter().map(|r| r.id).collect();
        assert!(ids.contains(&done.id()) && ids.contains(&running.id()));
        assert!(ids.contains(&below.id()));
        for id in [done.id(), running.id(), below.id(), dropped_id] {
            assert_eq!(recorder.ended(id).len(), 1, "{id}");
        }
        assert!(only_top(&tree));
        assert!(matches!(
            tree.start(AgentId::TOP, "w", 3, until_cancelled(&alive)),
            Err(StartError::Closed)
        ));
        assert!(matches!(running.teardown().await, Ok(r) if r.outcome == Outcome::Cancelled));
        assert_eq!((tree.live_tasks(), alive.count()), (0, 0));
    })
    .await;
}

/// A small deterministic generator (xorshift64), so the random points repeat run to run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x % n
    }
}

/// What one of the fifty children goes through.
#[derive(Debug, Clone, Copy)]
enum Plan {
    /// Its start is cancelled between reserve and launch.
    DuringStart,
    /// Cancelled right after its launch.
    AfterLaunch,
    /// Cancelled by its parent after it produced this many outputs; it has a child of its own.
    AfterOutputs(u64),
    /// Cancels itself at this step.
    Inside(u64),
    /// Answers after this many steps.
    Completes(u64),
    /// Fails after this many steps.
    Fails(u64),
    /// Panics after this many steps.
    Panics(u64),
}

async fn step(ctx: &ChildContext, n: u64) -> Result<(), ChildError> {
    if ctx.is_cancelled() {
        return Err(ChildError::Cancelled);
    }
    ctx.output(format!("step {n}"))
        .map_err(|_| ChildError::Cancelled)?;
    tokio::task::yield_now().await;
    Ok(())
}

fn body(
    plan: Plan,
    alive: Alive,
) -> impl FnOnce(
    ChildContext,
) -> std::pin::Pin<Box<dyn Future<Output = Result<String, ChildError>> + Send>>
+ Send
+ 'static {
    move |ctx: ChildContext| {
        Box::pin(async move {
            let _alive = alive.clone();
            let _grandchild = match plan {
                Plan::AfterOutputs(_) => Some(
                    ctx.tree()
                        .start(ctx.id(), "grandchild", 2, until_cancelled(&alive))
                        .map_err(ChildError::failed)?,
                ),
                _ => None,
            };
            for n in 0.. {
                match plan {
                    Plan::Inside(k) if n == k => ctx.cancel(),
                    Plan::Completes(k) if n == k => return Ok(format!("answer after {k}")),
                    Plan::Fails(k) if n == k => return Err(ChildError::failed("gave up")),
                    Plan::Panics(k) if n == k => panic!("step {k} broke"),
                    _ => {}
                }
                step(&ctx, n).await?;
            }
            Ok(String::new())
        })
    }
}

/// Runs one plan as its parent would; the outcome it saw, if the child started.
async fn run(
    tree: AgentTree,
    plan: Plan,
    alive: Alive,
    teardown: bool,
) -> Option<(AgentId, Outcome)> {
    let pending = tree.reserve(AgentId::TOP, "child", 2).expect("reserved");
    if let Plan::DuringStart = plan {
        tokio::task::yield_now().await;
        pending.cancel();
        let refused = pending.launch(body(plan, alive));
        assert!(matches!(refused, Err(StartError::Cancelled { .. })));
        return None;
    }
    let child = pending.launch(body(plan, alive)).expect("launched");
    match plan {
        Plan::AfterLaunch => child.cancel(),
        Plan::AfterOutputs(k) => {
            for _ in 0..k {
                child.next_output().await.expect("an output");
            }
            child.cancel();
        }
        _ => {}
    }
    let outcome = child.outcome().await;
    let expected = match plan {
        Plan::Completes(k) => Outcome::Completed(format!("answer after {k}")),
        Plan::Fails(_) => Outcome::Failed(Failure::Error("gave up".into())),
        Plan::Panics(k) => Outcome::Failed(Failure::Panicked(format!("step {k} broke"))),
        _ => Outcome::Cancelled,
    };
    assert_eq!(outcome, expected, "{plan:?}");
    if teardown {
        child.teardown().await.expect("torn down");
    }
    Some((child.id(), outcome))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_children_cancelled_at_random_points_end_once_each_and_leave_nothing() {
    bounded(async {
        let (tree, recorder) = tree();
        let alive = Alive::default();
        let mut rng = Rng(0x5eed_1234_abcd_0042);
        let mut runs = Vec::new();
        let mut grandchildren = false;
        let mut kinds = std::collections::HashSet::new();
        for _ in 0..50 {
            let k = rng.below(6);
            let plan = match rng.below(7) {
                0 => Plan::DuringStart,
                1 => Plan::AfterLaunch,
                2 => Plan::AfterOutputs(k),
                3 => Plan::Inside(k),
                4 => Plan::Completes(k),
                5 => Plan::Fails(k),
                _ => Plan::Panics(k),
            };
            kinds.insert(std::mem::discriminant(&plan));
            // A child that produced an output before its cancel had started its own child.
            grandchildren |= matches!(plan, Plan::AfterOutputs(k) if k > 0);
            let teardown = rng.below(2) == 0;
            runs.push(tokio::spawn(run(
                tree.clone(),
                plan,
                alive.clone(),
                teardown,
            )));
        }
        // The seed's plan has every kind of child, some with children of their own.
        assert!(kinds.len() == 7 && grandchildren, "{kinds:?}");
        let mut seen = Vec::new();
        for run in runs {
            if let Some(result) = run.await.expect("the parent's handler finished") {
                seen.push(result);
            }
        }
        tree.close().await.expect("closed");

        let events = recorder.events();
        let started: Vec<AgentId> = events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::Started { id, .. } => Some(*id),
                _ => None,
            })
            .collect();
        for id in &started {
            let own = recorder.of(*id);
            assert!(
                matches!(own[0], AgentEvent::Started { .. }),
                "{id}: {own:?}"
            );
            assert_eq!(recorder.ended(*id).len(), 1, "{id}: {own:?}");
        }
        for (id, outcome) in &seen {
            assert_eq!(recorder.ended(*id), vec![outcome.clone()]);
        }
        let every_event_started = events.iter().all(|e| started.contains(&event_id(e)));
        assert!(
            every_event_started,
            "nothing of a start that never became ready"
        );
        assert!(started.len() > seen.len(), "the grandchildren started too");
        assert!(only_top(&tree));
        assert_eq!(tree.live_tasks(), 0, "no driver or teardown task left");
        assert_eq!(alive.count(), 0, "no body left");
    })
    .await;
}
