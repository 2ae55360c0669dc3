//! The caller's view of one command sent to confine-helper.

use std::sync::Arc;
use std::time::Duration;

use confine_protocol::{Exited, Refused, Reply, Stage, Started};
use tokio::sync::mpsc;

use super::connection::Connection;

/// How a command ended: exactly one per spawn request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The command ran and its whole tree is gone (also after a timeout or a cancel: see
    /// [`Exited::ending`]).
    Exited(Exited),
    /// A runner step failed, or the helper went away ([`FailedAt::HelperExited`]).
    RunnerFailed(RunnerFailed),
    /// The helper would not run the request; the command did not start.
    Refused(Refused),
}

/// Where a command that did not run to its end failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailedAt {
    /// A runner step, as the helper reported it.
    Step(Stage),
    /// agentd's own finding, never on the wire: the helper went away (or stopped answering),
    /// so the command's outcome is unknown if it had started.
    HelperExited,
}

impl FailedAt {
    /// The word the facts use: the helper's stage word, or `helper-exited`.
    pub fn as_str(self) -> &'static str {
        match self {
            FailedAt::Step(stage) => stage.as_str(),
            FailedAt::HelperExited => "helper-exited",
        }
    }
}

impl From<Stage> for FailedAt {
    fn from(stage: Stage) -> FailedAt {
        FailedAt::Step(stage)
    }
}

/// A command that failed before it could run, or whose helper went away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerFailed {
    pub id: u64,
    pub stage: FailedAt,
    pub errno: i32,
    pub detail: String,
}

impl From<confine_protocol::RunnerFailed> for RunnerFailed {
    fn from(m: confine_protocol::RunnerFailed) -> RunnerFailed {
        RunnerFailed {
            id: m.id,
            stage: FailedAt::Step(m.stage),
            errno: m.errno,
            detail: m.detail,
        }
    }
}

impl Outcome {
    /// The request this outcome ends.
    pub fn id(&self) -> u64 {
        match self {
            Outcome::Exited(m) => m.id,
            Outcome::RunnerFailed(m) => m.id,
            Outcome::Refused(m) => m.id,
        }
    }
}

/// One command in flight.
///
/// Replies arrive in order: at most one [`Started`], then one [`Outcome`]. Dropping the handle
/// does not stop the command; use [`CommandHandle::cancel`] or a [`Canceller`] for that.
#[derive(Debug)]
pub struct CommandHandle {
    id: u64,
    replies: mpsc::UnboundedReceiver<Reply>,
    started: Option<Started>,
    outcome: Option<Outcome>,
    canceller: Canceller,
}

impl CommandHandle {
    pub(super) fn new(
        id: u64,
        replies: mpsc::UnboundedReceiver<Reply>,
        connection: Arc<Connection>,
    ) -> CommandHandle {
        CommandHandle {
            id,
            replies,
            started: None,
            outcome: None,
            canceller: Canceller { id, connection },
        }
    }

    /// The request id, unique for the client's lifetime.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Waits until the command's process exists and `execve` succeeded. `None` if it ended
    /// without starting (refused, runner failure, helper gone).
    pub async fn started(&mut self) -> Option<Started> {
        while self.started.is_none() && self.outcome.is_none() {
            self.receive().await;
        }
        self.started
    }

    /// Waits for the command to end.
    pub async fn wait(mut self) -> Outcome {
        loop {
            if let Some(outcome) = self.outcome.take() {
                return outcome;
            }
            self.receive().await;
        }
    }

    /// A cloneable way to cancel this command while another task waits on the handle.
    pub fn canceller(&self) -> Canceller {
        self.canceller.clone()
    }

    /// Asks the helper to terminate the command's tree: SIGTERM now, SIGKILL after `grace`.
    /// The outcome is then [`Outcome::Exited`] with ending `Cancelled`.
    pub fn cancel(&self, grace: Duration) {
        self.canceller.cancel(grace);
    }

    async fn receive(&mut self) {
        let reply = self.replies.recv().await;
        match reply {
            Some(Reply::Started(started)) => self.started = Some(started),
            Some(Reply::Exited(m)) => self.outcome = Some(Outcome::Exited(m)),
            Some(Reply::RunnerFailed(m)) => self.outcome = Some(Outcome::RunnerFailed(m.into())),
            Some(Reply::Refused(m)) => self.outcome = Some(Outcome::Refused(m)),
            // The connection ended: it says how. An `Info` is never routed here; treat one like
            // a lost connection rather than wait forever.
            Some(Reply::Info(_)) | None => {
                self.outcome =
                    Some(Outcome::RunnerFailed(RunnerFailed {
                        id: self.id,
                        stage: FailedAt::HelperExited,
                        errno: 0,
                        detail: self.canceller.connection.lost().unwrap_or_else(|| {
                            "the connection to confine-helper closed".to_owned()
                        }),
                    }));
            }
        }
    }
}

/// Cancels one command; cheap to clone and usable from any task.
#[derive(Debug, Clone)]
pub struct Canceller {
    id: u64,
    connection: Arc<Connection>,
}

impl Canceller {
    /// The request this cancels.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Asks the helper to terminate the command's tree: SIGTERM now, SIGKILL after `grace`
    /// (whole milliseconds, at most `u32::MAX`). Does nothing if the command already ended or
    /// the connection is gone.
    pub fn cancel(&self, grace: Duration) {
        let grace_ms = u32::try_from(grace.as_millis()).unwrap_or(u32::MAX);
        self.connection.cancel(self.id, grace_ms);
    }
}
