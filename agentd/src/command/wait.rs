//! The wait for a command's end: its terminal reply, with requests to stop it turned into
//! cancels, and the end of its output, so nothing it wrote is missed.

use std::time::Duration;

use confine_protocol::Stage;
use tokio::sync::mpsc;

use super::KILL_GRACE;
use crate::helper_client::{CommandHandle, Outcome};

/// How long output is still copied after the helper vanished mid-command. A command orphaned
/// that way may keep the pipes open indefinitely; agentd must still report and exit.
const ORPHAN_DRAIN: Duration = Duration::from_secs(2);

/// Waits for the command's end: its terminal reply (`waiting`, which also says whether it
/// started) and the end of its output (`copies`), so nothing it wrote is missed.
///
/// A command orphaned by a helper that went away may keep its output open indefinitely; its
/// output is then read for at most [`ORPHAN_DRAIN`] more.
pub(crate) async fn settle<W, C>(waiting: W, copies: C) -> (Outcome, bool)
where
    W: Future<Output = (Outcome, bool)>,
    C: Future<Output = ()>,
{
    tokio::pin!(copies);
    tokio::pin!(waiting);
    let mut copied = false;
    let (outcome, started) = loop {
        tokio::select! {
            ended = &mut waiting => break ended,
            () = &mut copies, if !copied => copied = true,
        }
    };
    let orphaned = matches!(
        &outcome,
        Outcome::RunnerFailed(f) if f.stage == Stage::HelperExited
    ) && started;
    if !copied {
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
    }
    (outcome, started)
}

/// Waits for the terminal reply, turning interrupts into cancels. Returns the outcome and
/// whether the command started.
pub(crate) async fn wait_for_outcome(
    mut handle: CommandHandle,
    interrupts: &mut mpsc::UnboundedReceiver<()>,
) -> (Outcome, bool) {
    let canceller = handle.canceller();
    let mut grace = KILL_GRACE;
    let mut listening = true;
    let started = loop {
        tokio::select! {
            started = handle.started() => break started.is_some(),
            interrupt = interrupts.recv(), if listening => match interrupt {
                Some(()) => {
                    canceller.cancel(grace);
                    grace = Duration::ZERO;
                }
                None => listening = false,
            },
        }
    };
    let waiting = handle.wait();
    tokio::pin!(waiting);
    loop {
        tokio::select! {
            outcome = &mut waiting => return (outcome, started),
            interrupt = interrupts.recv(), if listening => match interrupt {
                Some(()) => {
                    canceller.cancel(grace);
                    grace = Duration::ZERO;
                }
                None => listening = false,
            },
        }
    }
}
