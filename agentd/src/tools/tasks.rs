//! The registry of a session's background tasks: numbered as started, each with its mode, its
//! unread output and, once it ended, its facts.
//!
//! A narrowing of the session's mode ([`BackgroundTasks::narrow`]) tells every task running
//! under a wider mode to stop (see [`crate::narrowing`]); a task registered after a narrowing
//! its call's [`NarrowingMark`] did not see is stopped as it registers. What the tools answer
//! about a task, its output and its end, is `background.rs`'s.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use confine_protocol::Mode;
use serde_json::Value;
use tokio::sync::watch;

use super::output::{BACKGROUND_OUTPUT_CAP, OutputSink, Spool};
use crate::cancel;
use crate::command::Facts;
use crate::narrowing;

/// A session's background tasks, numbered `task-1`, `task-2`, … in the order started.
#[derive(Debug, Default)]
pub struct BackgroundTasks {
    list: Mutex<TaskList>,
}

#[derive(Debug, Default)]
struct TaskList {
    started: u64,
    tasks: Vec<Arc<Task>>,
    /// The mode of every narrowing so far, in order.
    narrowings: Vec<Mode>,
}

/// How many narrowings of the session's mode there had been when a call's mode was decided:
/// its background task is checked against every narrowing after that. The default, before
/// every narrowing, checks it against all of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NarrowingMark(usize);

#[derive(Debug)]
pub(super) struct Task {
    pub(super) id: String,
    /// The model's id of the call that started the task.
    pub(super) call_id: String,
    pub(super) mode: Mode,
    /// The child agent that started it, whose end ends it; `None` for the top level's.
    pub(super) owner: Option<String>,
    pub(super) timeout_ms: Option<u64>,
    pub(super) state: Arc<Mutex<TaskState>>,
    pub(super) kill: cancel::Canceller,
    /// Becomes true once the task's facts are in `state`.
    done: watch::Receiver<bool>,
}

#[derive(Debug)]
pub(super) struct TaskState {
    pub(super) unread: Spool,
    /// How the command ended; `None` while it runs.
    pub(super) facts: Option<Facts>,
    /// The mode of the narrowing that told the task to stop.
    pub(super) stopped_by: Option<Mode>,
    /// Whether the end of the child agent that started it told the task to stop.
    pub(super) owner_ended: bool,
    /// Whether the starting call answered that the task runs: from then on a narrowing, not
    /// that call, reports the task's stop.
    pub(super) announced: bool,
}

/// The tasks one narrowing told to stop, to be waited for ([`Stopping::ended`]).
#[derive(Debug)]
pub struct Stopping {
    pub(super) to: Mode,
    /// Every task running under a wider mode, also those an earlier narrowing stopped.
    pub(super) wait: Vec<Arc<Task>>,
    /// Those this narrowing stopped whose starting call had already answered.
    pub(super) report: Vec<Arc<Task>>,
}

/// Why a task that did not end by itself was stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum StopCause {
    /// A narrowing of the session's mode, to this mode.
    Narrowed(Mode),
    /// The end of the child agent that started it.
    OwnerEnded(String),
}

/// A task a narrowing stopped, as the session records and shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Stopped {
    pub task_id: String,
    /// The call that started the task.
    pub call_id: String,
    pub ran_under: Mode,
    pub narrowed_to: Mode,
    /// Whether confine-helper reported the end of the task's process tree.
    pub confirmed: bool,
    /// The task's facts, as `bash_output` reports them.
    pub facts: Value,
}

impl OutputSink for TaskState {
    fn push(&mut self, bytes: &[u8]) {
        self.unread.push(bytes);
    }
}

impl BackgroundTasks {
    pub fn new() -> BackgroundTasks {
        BackgroundTasks::default()
    }

    /// The ids of every task started, running or ended, in the order started.
    pub fn ids(&self) -> Vec<String> {
        self.lock().tasks.iter().map(|t| t.id.clone()).collect()
    }

    /// The ids of the tasks still running.
    pub fn running(&self) -> Vec<String> {
        self.lock()
            .tasks
            .iter()
            .filter(|t| !t.ended())
            .map(|t| t.id.clone())
            .collect()
    }

    /// Waits until task `id` has ended (output and facts complete); `false` when there is no
    /// such task.
    pub async fn wait_ended(&self, id: &str) -> bool {
        match self.get(id) {
            Some(task) => {
                task.wait_done().await;
                true
            }
            None => false,
        }
    }

    /// Where the narrowings stand now; taken before a call's mode is read.
    pub fn mark(&self) -> NarrowingMark {
        NarrowingMark(self.lock().narrowings.len())
    }

    /// The narrowest mode the session was narrowed to since `mark` was taken; `None` when it
    /// was not.
    pub fn narrowed_since(&self, mark: NarrowingMark) -> Option<Mode> {
        self.lock()
            .narrowings
            .get(mark.0..)
            .and_then(|since| since.iter().min().copied())
    }

    /// Whether a narrowing to `to` would stop a running task.
    pub fn would_stop(&self, to: Mode) -> bool {
        self.lock()
            .tasks
            .iter()
            .any(|t| !t.ended() && narrowing::stops(t.mode, to))
    }

    /// The session's mode narrowed to `to`: every running task under a wider mode is told to
    /// stop (its tree is killed by the helper, SIGKILL after the kill grace). Wait for them with
    /// [`Stopping::ended`].
    pub fn narrow(&self, to: Mode) -> Stopping {
        let mut list = self.lock();
        list.narrowings.push(to);
        let mut stopping = Stopping {
            to,
            wait: Vec::new(),
            report: Vec::new(),
        };
        for task in &list.tasks {
            if task.ended() || !narrowing::stops(task.mode, to) {
                continue;
            }
            let (first, announced) = {
                let mut state = task.lock_state();
                let first = state.stopped_by.is_none();
                if first {
                    state.stopped_by = Some(to);
                }
                (first, state.announced)
            };
            if first {
                task.kill.cancel();
                if announced {
                    stopping.report.push(task.clone());
                }
            }
            stopping.wait.push(task.clone());
        }
        stopping
    }

    /// Cancels every task still running and waits for all of them to end (each wait is bounded
    /// the way a cancelled command's is). For the session's close.
    pub async fn kill_all(&self) {
        let tasks = self.lock().tasks.clone();
        for task in &tasks {
            task.kill.cancel();
        }
        for task in &tasks {
            task.wait_done().await;
        }
    }

    fn lock(&self) -> MutexGuard<'_, TaskList> {
        self.list.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn get(&self, id: &str) -> Option<Arc<Task>> {
        self.lock().tasks.iter().find(|t| t.id == id).cloned()
    }

    /// Waits until every task the child agent `agent` started has ended (each was told to stop
    /// when the child's outcome was claimed); returns the ids of those its end stopped, in the
    /// order started.
    pub async fn ended_with(&self, agent: &str) -> Vec<String> {
        let owned: Vec<Arc<Task>> = self
            .lock()
            .tasks
            .iter()
            .filter(|t| t.owner.as_deref() == Some(agent))
            .cloned()
            .collect();
        let mut stopped = Vec::new();
        for task in owned {
            task.wait_done().await;
            if Task::stop_cause(&task.lock_state(), task.owner.as_deref())
                .is_some_and(|c| matches!(c, StopCause::OwnerEnded(_)))
            {
                stopped.push(task.id.clone());
            }
        }
        stopped
    }

    /// A new task of call `call_id` made by `owner` (a child agent; `None` for the top level),
    /// whose mode was decided at `mark`; returns it, the side its driver listens to for a kill,
    /// and the side that says it is done. A narrowing since `mark` below `mode` stops it at once.
    pub(super) fn add(
        &self,
        mode: Mode,
        timeout_ms: Option<u64>,
        call_id: &str,
        mark: NarrowingMark,
        owner: Option<&str>,
    ) -> (Arc<Task>, cancel::Cancel, watch::Sender<bool>) {
        let (kill, killed) = cancel::pair();
        let (done_tx, done) = watch::channel(false);
        let mut list = self.lock();
        let missed = list
            .narrowings
            .get(mark.0..)
            .and_then(|since| since.iter().min().copied())
            .filter(|to| narrowing::stops(mode, *to));
        list.started += 1;
        let task = Arc::new(Task {
            id: format!("task-{}", list.started),
            call_id: call_id.to_owned(),
            mode,
            owner: owner.map(str::to_owned),
            timeout_ms,
            state: Arc::new(Mutex::new(TaskState {
                unread: Spool::new(BACKGROUND_OUTPUT_CAP),
                facts: None,
                stopped_by: missed,
                owner_ended: false,
                announced: false,
            })),
            kill,
            done,
        });
        if missed.is_some() {
            task.kill.cancel();
        }
        list.tasks.push(task.clone());
        (task, killed, done_tx)
    }
}

impl Stopping {
    /// Whether this narrowing has nothing to wait for.
    pub fn is_empty(&self) -> bool {
        self.wait.is_empty()
    }
}

impl Task {
    pub(super) fn ended(&self) -> bool {
        *self.done.borrow()
    }

    pub(super) fn lock_state(&self) -> MutexGuard<'_, TaskState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The narrowing that stopped the task, once the task ended because of it (not by itself
    /// first).
    pub(super) fn stopped_by(state: &TaskState) -> Option<Mode> {
        let facts = state.facts.as_ref()?;
        state.stopped_by.filter(|_| facts.cancelled)
    }

    /// What stopped the task, once it ended because of it (not by itself first): a narrowing,
    /// else the end of `owner`, the child agent that started it.
    pub(super) fn stop_cause(state: &TaskState, owner: Option<&str>) -> Option<StopCause> {
        if let Some(to) = Task::stopped_by(state) {
            return Some(StopCause::Narrowed(to));
        }
        let cancelled = state.facts.as_ref()?.cancelled;
        let owner = owner.filter(|_| cancelled && state.owner_ended)?;
        Some(StopCause::OwnerEnded(owner.to_owned()))
    }

    /// The child agent that started the task has ended: the task stops too, unless it already
    /// ended by itself.
    pub(super) fn stop_with_owner(&self) {
        {
            let mut state = self.lock_state();
            if state.facts.is_some() {
                return;
            }
            state.owner_ended = true;
        }
        self.kill.cancel();
    }

    pub(super) async fn wait_done(&self) {
        let mut done = self.done.clone();
        // An error means the driver is gone (the runtime shut down): nothing more will come.
        let _ = done.wait_for(|done| *done).await;
    }
}
