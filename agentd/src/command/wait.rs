//! The wait for a command's end: its terminal reply, with requests to stop it turned into
//! cancels, and the end of its output, so nothing it wrote is missed.
//!
//! One loop serves `agentd run` and the tools. What differs between them is a parameter:
//! where the requests to stop come from ([`Stops`]: every interrupt of `agentd run`, the one
//! cancellation of a tool call), and whether the helper's answer to a stop is waited for as
//! long as it takes (`agentd run`) or only for a while, after which the helper is given up on
//! (a tool call, whose turn must end).

use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::KILL_GRACE;
use crate::cancel::Cancel;
use crate::helper_client::{Canceller, CommandHandle, FailedAt, Outcome, RunnerFailed};

/// How long output is still copied after the helper vanished mid-command. A command orphaned
/// that way may keep the pipes open indefinitely; agentd must still report and exit.
const ORPHAN_DRAIN: Duration = Duration::from_secs(2);

/// Where the requests to stop a command come from.
///
/// The first request cancels the command with [`KILL_GRACE`] (SIGTERM, SIGKILL after the
/// grace), any later one with none (SIGKILL at once).
pub(crate) trait Stops {
    /// Resolves with the next request; never, once no more can come. Dropping it unresolved
    /// loses no request.
    async fn next(&mut self);
}

/// Every message is a request; a closed channel sends no more.
impl Stops for mpsc::UnboundedReceiver<()> {
    async fn next(&mut self) {
        if self.recv().await.is_none() {
            std::future::pending::<()>().await;
        }
    }
}

/// The cancellation is the one request: once it has fired the signal is spent, replaced by
/// one that never fires.
impl Stops for Cancel {
    async fn next(&mut self) {
        self.cancelled().await;
        *self = Cancel::never();
    }
}

/// What the wait does besides waiting for the end.
#[derive(Debug, Default)]
pub(crate) struct Waiting {
    /// How long the helper's answer to the first stop is waited for before the helper is given
    /// up on, as if it had gone away; `None` waits as long as it takes.
    pub answer_wait: Option<Duration>,
    /// Told once the command started; dropped unsent when it ended without starting.
    pub on_started: Option<oneshot::Sender<()>>,
}

/// How the wait for a command ended.
#[derive(Debug)]
pub(crate) struct Ended {
    pub outcome: Outcome,
    /// Whether the helper reported the command started.
    pub started: bool,
    /// Whether the helper was given up on (see [`Waiting::answer_wait`]); the outcome then says
    /// so as a runner failure at stage `helper-exited`.
    pub given_up: bool,
}

/// Waits for the terminal reply, turning each request of `stops` into a cancel.
pub(crate) async fn wait_for_outcome(
    mut handle: CommandHandle,
    stops: &mut impl Stops,
    waiting: Waiting,
) -> Ended {
    let Waiting {
        answer_wait,
        mut on_started,
    } = waiting;
    let id = handle.id();
    let mut stopping = Stopping {
        canceller: handle.canceller(),
        grace: KILL_GRACE,
        answer_wait,
        deadline: None,
    };
    let started = loop {
        let deadline = stopping.deadline;
        tokio::select! {
            started = handle.started() => break started.is_some(),
            () = stops.next() => stopping.stop(),
            () = until(deadline) => return stopping.given_up(id),
        }
    };
    if started && let Some(tell) = on_started.take() {
        let _ = tell.send(());
    }
    let ending = handle.wait();
    tokio::pin!(ending);
    loop {
        let deadline = stopping.deadline;
        tokio::select! {
            outcome = &mut ending => {
                return Ended {
                    outcome,
                    started,
                    given_up: false,
                };
            }
            () = stops.next() => stopping.stop(),
            () = until(deadline) => return stopping.given_up(id),
        }
    }
}

/// The cancels sent so far, and until when the answer to the first is waited for.
struct Stopping {
    canceller: Canceller,
    /// The grace of the next cancel.
    grace: Duration,
    answer_wait: Option<Duration>,
    deadline: Option<Instant>,
}

impl Stopping {
    /// Asks the helper to cancel the command; the first time, starts the wait for its answer.
    fn stop(&mut self) {
        self.canceller.cancel(self.grace);
        self.grace = Duration::ZERO;
        if self.deadline.is_none() {
            self.deadline = self.answer_wait.map(|wait| Instant::now() + wait);
        }
    }

    /// The end of a command whose helper did not answer its cancel in time.
    fn given_up(&self, id: u64) -> Ended {
        let waited = self.answer_wait.unwrap_or_default();
        let outcome = Outcome::RunnerFailed(RunnerFailed {
            id,
            stage: FailedAt::HelperExited,
            errno: 0,
            detail: format!(
                "confine-helper did not report the end of the cancelled command within {} s; it \
                 may still be running",
                waited.as_secs_f32()
            ),
        });
        // Whether it started is unknown; saying it did says its outcome is unknown.
        Ended {
            outcome,
            started: true,
            given_up: true,
        }
    }
}

/// Resolves at `deadline`; never without one.
async fn until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Waits for the command's end: its terminal reply (`waiting`) and the end of its output
/// (`copies`), so nothing it wrote is missed.
///
/// A command orphaned by a helper that went away may keep its output open indefinitely; its
/// output is then read for at most [`ORPHAN_DRAIN`] more. The output of a command whose helper
/// was given up on is not read further at all.
pub(crate) async fn settle<W, C>(waiting: W, copies: C) -> Ended
where
    W: Future<Output = Ended>,
    C: Future<Output = ()>,
{
    tokio::pin!(copies);
    tokio::pin!(waiting);
    let mut copied = false;
    let ended = loop {
        tokio::select! {
            ended = &mut waiting => break ended,
            () = &mut copies, if !copied => copied = true,
        }
    };
    if copied || ended.given_up {
        return ended;
    }
    let orphaned = matches!(
        &ended.outcome,
        Outcome::RunnerFailed(f) if f.stage == FailedAt::HelperExited
    ) && ended.started;
    if orphaned {
        if tokio::time::timeout(ORPHAN_DRAIN, &mut copies)
            .await
            .is_err()
        {
            eprintln!(
                "agentd: the command's output is still open after confine-helper went \
                 away; no longer reading it"
            );
        }
    } else {
        copies.await;
    }
    ended
}

#[cfg(test)]
#[path = "wait_tests.rs"]
mod tests;
