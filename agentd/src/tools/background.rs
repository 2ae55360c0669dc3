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
//!
//! The registry of the tasks is `tasks.rs`; this file is what the tools answer about them.
//!
//! [`NarrowingMark`]: super::tasks::NarrowingMark

use std::sync::{Arc, Mutex, PoisonError};

use confine_protocol::Mode;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::args::BashArgs;
use super::bash::{self, ANSWER_WAIT};
use super::call::{CallContext, ToolResult};
use super::env::ToolEnv;
use super::output::{self, OutputSink};
use super::tasks::{BackgroundTasks, StopCause, Stopped, Stopping, Task};
use crate::command::Facts;
use crate::narrowing;
use crate::session::ToolStatus;

impl BackgroundTasks {
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
                let confirmed = result
                    .facts
                    .get("runner_failure")
                    .is_none_or(Value::is_null);
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
    /// The end markers and facts of an ended task stopped by a narrowing, without taking its
    /// unread output; `None` if it is running or was not stopped by one.
    fn end_report(&self, shell: &str) -> Option<ToolResult> {
        let state = self.lock_state();
        let to = Task::stopped_by(&state)?;
        let facts = state.facts.clone()?;
        drop(state);
        // Only its facts reach anyone (the narrowing's report): no escalation to offer.
        Some(self.ended_result("", &facts, Some(StopCause::Narrowed(to)), shell, &[]))
    }

    /// The result of the ended task: `output`, the stop marker if a narrowing or its child
    /// agent's end stopped it, its end markers, and its facts with its id.
    fn ended_result(
        &self,
        output: &str,
        facts: &Facts,
        cause: Option<StopCause>,
        shell: &str,
        escalation: &[Mode],
    ) -> ToolResult {
        let output = match &cause {
            Some(StopCause::Narrowed(to)) => {
                output::join(output, &[narrowing::marker(self.mode, *to)])
            }
            Some(StopCause::OwnerEnded(agent)) => output::join(
                output,
                &[format!(
                    "[stopped: the child agent {agent} that started it ended; nothing of a child \
                     outlives it]"
                )],
            ),
            None => output.to_owned(),
        };
        let markers = bash::Markers { shell, escalation };
        let mut result = bash::ended(&output, facts, self.mode, self.timeout_ms, &markers);
        if let Value::Object(map) = &mut result.facts {
            map.insert("task_id".to_owned(), json!(self.id));
            map.insert("running".to_owned(), json!(false));
            match cause {
                Some(StopCause::Narrowed(to)) => {
                    map.insert("narrowed_to".to_owned(), json!(to.as_str()));
                }
                Some(StopCause::OwnerEnded(agent)) => {
                    map.insert("stopped_with_agent".to_owned(), json!(agent));
                }
                None => {}
            }
        }
        result
    }

    /// The output not read yet, then `[still running]` or the end markers; marks it read.
    fn report(&self, env: &ToolEnv) -> ToolResult {
        let (text, facts, cause) = {
            let mut state = self.lock_state();
            let cause = Task::stop_cause(&state, self.owner.as_deref());
            (state.unread.take_text(), state.facts.clone(), cause)
        };
        match facts {
            None => ToolResult::completed(
                output::join(&text, &["[still running]".to_owned()]),
                json!({ "task_id": self.id, "mode": self.mode.as_str(), "running": true }),
            ),
            Some(facts) => {
                let escalation = env.options_for(self.mode).escalation;
                self.ended_result(&text, &facts, cause, env.shell(), &escalation)
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
    let owner = ctx.owner.as_ref().map(|o| o.agent.as_str());
    let (task, killed, done) =
        env.background()
            .add(mode, args.timeout_ms, call_id, ctx.narrowings, owner);
    let (started_tx, started_rx) = oneshot::channel();
    let sink: Arc<Mutex<dyn OutputSink>> = task.state.clone();
    let state = task.state.clone();
    tokio::spawn(async move {
        let facts = bash::finish(launched, sink, killed, ANSWER_WAIT, Some(started_tx)).await;
        state.lock().unwrap_or_else(PoisonError::into_inner).facts = Some(facts);
        done.send_replace(true);
    });
    // A child's task ends with the child: once its outcome is claimed (already, perhaps).
    if let Some(owner) = ctx.owner.clone() {
        let task = task.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = owner.ended.cancelled() => task.stop_with_owner(),
                () = task.wait_done() => {}
            }
        });
    }
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
