//! Background commands: `bash` with `run_in_background`, `bash_output` and `bash_kill`.
//!
//! A background task belongs to the session, not to the turn that started it: the turn's
//! cancel does not stop it. Its output is kept in memory (the newest
//! [`BACKGROUND_OUTPUT_CAP`](super::output::BACKGROUND_OUTPUT_CAP) bytes not read yet) until
//! `bash_output` reads it; once it ended, every `bash_output` repeats its end markers.
//!
//! A narrowing of the session's mode ([`BackgroundTasks::narrow`]) stops every task running
//! under a wider mode (see [`crate::narrowing`]). A call's mode is decided before its task is
//! registered, so each call carries the [`NarrowingMark`] taken before its mode was read: a
//! task registered after a narrowing it did not see is stopped as it registers. Who tells the
//! editor depends on whether the call that started the task has answered yet: once it has
//! ("started background task …"), the narrowing reports the stop; before that, the call's own
//! result does.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use confine_protocol::Mode;
use serde_json::{Value, json};
use tokio::sync::{oneshot, watch};

use super::args::BashArgs;
use super::bash::{self, ANSWER_WAIT};
use super::output::{self, BACKGROUND_OUTPUT_CAP, OutputSink, Spool};
use super::{CallContext, ToolEnv, ToolResult};
use crate::cancel;
use crate::command::Facts;
use crate::narrowing;
use crate::session::ToolStatus;

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
struct Task {
    id: String,
    /// The model's id of the call that started the task.
    call_id: String,
    mode: Mode,
    timeout_ms: Option<u64>,
    state: Arc<Mutex<TaskState>>,
    kill: cancel::Canceller,
    /// Becomes true once the task's facts are in `state`.
    done: watch::Receiver<bool>,
}

#[derive(Debug)]
struct TaskState {
    unread: Spool,
    /// How the command ended; `None` while it runs.
    facts: Option<Facts>,
    /// The mode of the narrowing that told the task to stop.
    stopped_by: Option<Mode>,
    /// Whether the starting call answered that the task runs: from then on a narrowing, not
    /// that call, reports the task's stop.
    announced: bool,
}

/// The tasks one narrowing told to stop, to be waited for ([`Stopping::ended`]).
#[derive(Debug)]
pub struct Stopping {
    to: Mode,
    /// Every task running under a wider mode, also those an earlier narrowing stopped.
    wait: Vec<Arc<Task>>,
    /// Those this narrowing stopped whose starting call had already answered.
    report: Vec<Arc<Task>>,
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

    fn get(&self, id: &str) -> Option<Arc<Task>> {
        self.lock().tasks.iter().find(|t| t.id == id).cloned()
    }

    /// A new task of call `call_id`, whose mode was decided at `mark`; returns it, the side its
    /// driver listens to for a kill, and the side that says it is done. A narrowing since `mark`
    /// below `mode` stops it at once.
    fn add(
        &self,
        mode: Mode,
        timeout_ms: Option<u64>,
        call_id: &str,
        mark: NarrowingMark,
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
            timeout_ms,
            state: Arc::new(Mutex::new(TaskState {
                unread: Spool::new(BACKGROUND_OUTPUT_CAP),
                facts: None,
                stopped_by: missed,
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

    /// The result for a task id that is not one of these.
    fn unknown(&self, id: &str) -> ToolResult {
        let ids = self.ids();
        let known = if ids.is_empty() {
            "no background task was started in this session".to_owned()
        } else {
            format!(
                "the background tasks of this session are: {}",
                ids.join(", ")
            )
        };
        ToolResult::failed(
            format!("unknown task id \"{id}\"; {known}"),
            json!({ "task_id": id, "unknown": true }),
        )
    }
}

impl Stopping {
    /// Whether this narrowing has nothing to wait for.
    pub fn is_empty(&self) -> bool {
        self.wait.is_empty()
    }

    /// Waits until every task it concerns has ended; returns those it stopped whose starting
    /// call had answered, in the order started. A task that ended by itself before the kill
    /// reached it is not among them.
    pub async fn ended(self, shell: &str) -> Vec<Stopped> {
        for task in &self.wait {
            task.wait_done().await;
        }
        self.report
            .iter()
            .filter_map(|task| {
                let result = task.end_report(shell)?;
                let confirmed = result.facts["runner_failure"].is_null();
                Some(Stopped {
                    task_id: task.id.clone(),
                    call_id: task.call_id.clone(),
                    ran_under: task.mode,
                    narrowed_to: self.to,
                    confirmed,
                    facts: result.facts,
                })
            })
            .collect()
    }
}

impl Task {
    fn ended(&self) -> bool {
        *self.done.borrow()
    }

    fn lock_state(&self) -> MutexGuard<'_, TaskState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The narrowing that stopped the task, once the task ended because of it (not by itself
    /// first).
    fn stopped_by(state: &TaskState) -> Option<Mode> {
        let facts = state.facts.as_ref()?;
        state.stopped_by.filter(|_| facts.cancelled)
    }

    /// The end markers and facts of an ended task stopped by a narrowing, without taking its
    /// unread output; `None` if it is running or was not stopped by one.
    fn end_report(&self, shell: &str) -> Option<ToolResult> {
        let state = self.lock_state();
        let to = Task::stopped_by(&state)?;
        let facts = state.facts.clone()?;
        drop(state);
        // Only its facts reach anyone (the narrowing's report): no escalation to offer.
        Some(self.ended_result("", &facts, Some(to), shell, &[]))
    }

    /// The result of the ended task: `output`, the stop marker if a narrowing stopped it, its
    /// end markers, and its facts with its id.
    fn ended_result(
        &self,
        output: &str,
        facts: &Facts,
        stopped_by: Option<Mode>,
        shell: &str,
        escalation: &[Mode],
    ) -> ToolResult {
        let output = match stopped_by {
            Some(to) => output::join(output, &[narrowing::marker(self.mode, to)]),
            None => output.to_owned(),
        };
        let markers = bash::Markers { shell, escalation };
        let mut result = bash::ended(&output, facts, self.mode, self.timeout_ms, &markers);
        if let Value::Object(map) = &mut result.facts {
            map.insert("task_id".to_owned(), json!(self.id));
            map.insert("running".to_owned(), json!(false));
            if let Some(to) = stopped_by {
                map.insert("narrowed_to".to_owned(), json!(to.as_str()));
            }
        }
        result
    }

    async fn wait_done(&self) {
        let mut done = self.done.clone();
        // An error means the driver is gone (the runtime shut down): nothing more will come.
        let _ = done.wait_for(|done| *done).await;
    }

    /// The output not read yet, then `[still running]` or the end markers; marks it read.
    fn report(&self, env: &ToolEnv) -> ToolResult {
        let (text, facts, stopped_by) = {
            let mut state = self.lock_state();
            let stopped_by = Task::stopped_by(&state);
            (state.unread.take_text(), state.facts.clone(), stopped_by)
        };
        match facts {
            None => ToolResult::completed(
                output::join(&text, &["[still running]".to_owned()]),
                json!({ "task_id": self.id, "mode": self.mode.as_str(), "running": true }),
            ),
            Some(facts) => {
                let escalation = env.options_for(self.mode).escalation;
                self.ended_result(&text, &facts, stopped_by, env.shell(), &escalation)
            }
        }
    }
}

/// `bash` with `run_in_background` for call `call_id`: hands the command to the helper, waits
/// only until it started, and leaves it running as a task of the session.
pub(crate) async fn start(
    env: &ToolEnv,
    args: BashArgs,
    call_id: &str,
    ctx: CallContext,
) -> ToolResult {
    let mode = ctx.mode;
    let launched = if ctx.cancel.is_cancelled() {
        Err(bash::not_started())
    } else {
        tokio::select! {
            biased;
            () = ctx.cancel.cancelled() => Err(bash::not_started()),
            launched = bash::launch(env, &args.command, mode, args.timeout_ms) => launched,
        }
    };
    let launched = match launched {
        Ok(launched) => launched,
        Err(facts) => {
            let escalation = env.options_for(mode).escalation;
            let markers = bash::Markers::of(env, &escalation);
            return bash::ended("", &facts, mode, args.timeout_ms, &markers);
        }
    };
    let (task, killed, done) = env
        .background()
        .add(mode, args.timeout_ms, call_id, ctx.narrowings);
    let (started_tx, started_rx) = oneshot::channel();
    let sink: Arc<Mutex<dyn OutputSink>> = task.state.clone();
    let state = task.state.clone();
    tokio::spawn(async move {
        let facts = bash::finish(launched, sink, killed, ANSWER_WAIT, Some(started_tx)).await;
        state.lock().unwrap_or_else(PoisonError::into_inner).facts = Some(facts);
        done.send_replace(true);
    });
    // A cancelled turn stops waiting here, but not the task.
    let started = tokio::select! {
        started = started_rx => started.is_ok(),
        () = ctx.cancel.cancelled() => true,
    };
    // A narrowing that stopped the task before this answer is reported by this answer.
    let announced = started && {
        let mut state = task.lock_state();
        state.announced = state.stopped_by.is_none();
        state.announced
    };
    if !announced {
        // It ended without starting (refused, runner failure), or a narrowing stopped it: say
        // so now.
        task.wait_done().await;
        return task.report(env);
    }
    ToolResult::completed(
        format!("started background task {}", task.id),
        json!({ "task_id": task.id, "mode": mode.as_str(), "running": true }),
    )
}

/// `bash_output`.
pub(crate) fn output(env: &ToolEnv, task_id: &str) -> ToolResult {
    match env.background().get(task_id) {
        Some(task) => task.report(env),
        None => env.background().unknown(task_id),
    }
}

/// `bash_kill`: cancels the task and waits for its end. The call's cancel stops the waiting,
/// not the kill.
pub(crate) async fn kill(env: &ToolEnv, task_id: &str, ctx: CallContext) -> ToolResult {
    let Some(task) = env.background().get(task_id) else {
        return env.background().unknown(task_id);
    };
    let already = task.ended();
    task.kill.cancel();
    tokio::select! {
        () = task.wait_done() => {}
        () = ctx.cancel.cancelled() => {
            return ToolResult::failed(
                format!("[cancelled: {task_id} was told to stop but had not ended yet]"),
                json!({ "task_id": task_id, "mode": task.mode.as_str(), "running": true }),
            );
        }
    }
    let mut result = task.report(env);
    let lead = if already {
        format!("{task_id} had already ended")
    } else {
        format!("stopped {task_id}")
    };
    result.text = if result.text.is_empty() {
        lead
    } else {
        format!("{lead}\n{}", result.text)
    };
    // The kill did what was asked, whatever the command's own end.
    result.status = ToolStatus::Completed;
    result
}
