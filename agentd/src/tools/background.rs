//! Background commands: `bash` with `run_in_background`, `bash_output` and `bash_kill`.
//!
//! A background task belongs to the session, not to the turn that started it: the turn's
//! cancel does not stop it. Its output is kept in memory (the newest
//! [`BACKGROUND_OUTPUT_CAP`](super::output::BACKGROUND_OUTPUT_CAP) bytes not read yet) until
//! `bash_output` reads it; once it ended, every `bash_output` repeats its end markers.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use confine_protocol::Mode;
use serde_json::{Value, json};
use tokio::sync::{oneshot, watch};

use super::args::BashArgs;
use super::bash::{self, ANSWER_WAIT};
use super::output::{self, BACKGROUND_OUTPUT_CAP, OutputSink, Spool};
use super::{CallContext, ToolEnv, ToolResult};
use crate::cancel;
use crate::run::Facts;
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
}

#[derive(Debug)]
struct Task {
    id: String,
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

    /// A new task; returns it, the side its driver listens to for a kill, and the side that
    /// says it is done.
    fn add(
        &self,
        mode: Mode,
        timeout_ms: Option<u64>,
    ) -> (Arc<Task>, cancel::Cancel, watch::Sender<bool>) {
        let (kill, killed) = cancel::pair();
        let (done_tx, done) = watch::channel(false);
        let mut list = self.lock();
        list.started += 1;
        let task = Arc::new(Task {
            id: format!("task-{}", list.started),
            mode,
            timeout_ms,
            state: Arc::new(Mutex::new(TaskState {
                unread: Spool::new(BACKGROUND_OUTPUT_CAP),
                facts: None,
            })),
            kill,
            done,
        });
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

impl Task {
    fn ended(&self) -> bool {
        *self.done.borrow()
    }

    async fn wait_done(&self) {
        let mut done = self.done.clone();
        // An error means the driver is gone (the runtime shut down): nothing more will come.
        let _ = done.wait_for(|done| *done).await;
    }

    /// The output not read yet, then `[still running]` or the end markers; marks it read.
    fn report(&self, shell: &str) -> ToolResult {
        let (text, facts) = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            (state.unread.take_text(), state.facts.clone())
        };
        match facts {
            None => ToolResult::completed(
                output::join(&text, &["[still running]".to_owned()]),
                json!({ "task_id": self.id, "mode": self.mode.as_str(), "running": true }),
            ),
            Some(facts) => {
                let mut result = bash::ended(&text, &facts, self.mode, self.timeout_ms, shell);
                if let Value::Object(map) = &mut result.facts {
                    map.insert("task_id".to_owned(), json!(self.id));
                    map.insert("running".to_owned(), json!(false));
                }
                result
            }
        }
    }
}

/// `bash` with `run_in_background`: hands the command to the helper, waits only until it
/// started, and leaves it running as a task of the session.
pub(crate) async fn start(env: &ToolEnv, args: BashArgs, ctx: CallContext) -> ToolResult {
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
        Err(facts) => return bash::ended("", &facts, mode, args.timeout_ms, env.shell()),
    };
    let (task, killed, done) = env.background().add(mode, args.timeout_ms);
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
    if !started {
        // It ended without starting (refused, runner failure): say so now.
        task.wait_done().await;
        return task.report(env.shell());
    }
    ToolResult::completed(
        format!("started background task {}", task.id),
        json!({ "task_id": task.id, "mode": mode.as_str(), "running": true }),
    )
}

/// `bash_output`.
pub(crate) fn output(env: &ToolEnv, task_id: &str) -> ToolResult {
    match env.background().get(task_id) {
        Some(task) => task.report(env.shell()),
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
    let mut result = task.report(env.shell());
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
