//! What a narrowing of a session's sandbox mode does to the background tasks still running.
//!
//! A switch narrows when the new mode is below the one the editor showed (read-only <
//! workspace-write < danger-full-access). Every background task running under a mode wider than
//! the new one is then stopped — its whole process tree killed by confine-helper — before the
//! switch is answered; a widening, or a switch to the same mode, stops nothing. A task stops
//! rather than keeps its wider mode because the user's newest word on what this session may
//! touch is the switch, and a task that kept writing after it would make the select a lie (RFC
//! 0005 says why stopping beats asking).
//!
//! This module holds what the tools, the ACP layer and the folds share: the rule
//! ([`narrows`], [`stops`]), the texts the editor, the model and `agentd sessions show` read, and
//! the fold that tells the model once, at its next request, which tasks were stopped.

use confine_protocol::Mode;

use crate::session::{Event, Record};

/// Whether a switch from `from` to `to` narrows the mode.
pub fn narrows(from: Mode, to: Mode) -> bool {
    to < from
}

/// Whether a narrowing to `to` stops a task that runs under `ran_under`.
pub fn stops(ran_under: Mode, to: Mode) -> bool {
    ran_under > to
}

/// The line a stopped task's `bash_output` shows before its end markers.
pub fn marker(ran_under: Mode, to: Mode) -> String {
    format!(
        "[stopped: the session's sandbox mode was narrowed to {}; this task ran under {}]",
        to.as_str(),
        ran_under.as_str()
    )
}

/// What the editor is shown on the tool call that started a stopped task. `confirmed` is whether
/// confine-helper reported the end of the task's process tree.
pub fn client_text(task_id: &str, ran_under: Mode, to: Mode, confirmed: bool) -> String {
    let end = if confirmed {
        "its process tree was killed"
    } else {
        "confine-helper did not confirm the end of its process tree, which may still be running"
    };
    format!(
        "Background task {task_id} was stopped: the session's sandbox mode was narrowed to {}, \
         and the task ran under {}; {end}.",
        to.as_str(),
        ran_under.as_str()
    )
}

/// The one-time note for the model's next request: every task stopped since the last request
/// the model was sent (or, before the first, since the session began), in the order stopped.
/// `None` when none was.
pub fn notice(records: &[Record]) -> Option<String> {
    let since = records
        .iter()
        .rposition(|r| matches!(r.event, Event::ModelRequest { .. }))
        .map_or(0, |i| i + 1);
    let lines: Vec<String> = records
        .iter()
        .skip(since)
        .filter_map(|r| match &r.event {
            Event::TaskStopped {
                task_id,
                ran_under,
                narrowed_to,
                ..
            } => Some(format!(
                "Background task {task_id} was stopped because the user narrowed this session's \
                 sandbox mode to \"{}\"; it ran under \"{}\". bash_output shows its output and \
                 its end; a command started now runs under the narrower mode.",
                narrowed_to.as_str(),
                ran_under.as_str()
            )),
            _ => None,
        })
        .collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::SessionLog;
    use crate::test_support::MemoryLog;

    use Mode::{DangerFullAccess, ReadOnly, WorkspaceWrite};

    const ALL: [Mode; 3] = [ReadOnly, WorkspaceWrite, DangerFullAccess];

    #[test]
    fn only_a_switch_to_a_lower_mode_narrows() {
        let narrowing: Vec<(Mode, Mode)> = ALL
            .iter()
            .flat_map(|from| ALL.iter().map(move |to| (*from, *to)))
            .filter(|(from, to)| narrows(*from, *to))
            .collect();
        assert_eq!(
            narrowing,
            [
                (WorkspaceWrite, ReadOnly),
                (DangerFullAccess, ReadOnly),
                (DangerFullAccess, WorkspaceWrite),
            ]
        );
    }

    #[test]
    fn a_narrowing_stops_exactly_the_tasks_above_the_new_mode() {
        assert!(stops(WorkspaceWrite, ReadOnly));
        assert!(stops(DangerFullAccess, ReadOnly));
        assert!(stops(DangerFullAccess, WorkspaceWrite));
        assert!(!stops(ReadOnly, ReadOnly));
        assert!(!stops(WorkspaceWrite, WorkspaceWrite));
        assert!(!stops(ReadOnly, WorkspaceWrite));
    }

    #[test]
    fn the_texts_name_the_task_and_both_modes() {
        assert_eq!(
            marker(WorkspaceWrite, ReadOnly),
            "[stopped: the session's sandbox mode was narrowed to read-only; this task ran under \
             workspace-write]"
        );
        assert_eq!(
            client_text("task-2", DangerFullAccess, WorkspaceWrite, true),
            "Background task task-2 was stopped: the session's sandbox mode was narrowed to \
             workspace-write, and the task ran under danger-full-access; its process tree was \
             killed."
        );
        assert!(
            client_text("task-2", WorkspaceWrite, ReadOnly, false)
                .ends_with("confine-helper did not confirm the end of its process tree, which may still be running.")
        );
    }

    fn stopped(log: &MemoryLog, task_id: &str, ran_under: Mode, narrowed_to: Mode) {
        log.push(Event::TaskStopped {
            task_id: task_id.into(),
            call_id: format!("call-{task_id}"),
            ran_under,
            narrowed_to,
            text: String::new(),
            facts: serde_json::json!({}),
        });
    }

    fn request(log: &MemoryLog) {
        log.push(Event::ModelRequest {
            turn: 1,
            step: 1,
            model: "scripted".into(),
            instructions: String::new(),
            tools: vec![],
        });
    }

    #[test]
    fn the_model_is_told_once_of_every_task_stopped_since_its_last_request() {
        let log = MemoryLog::new();
        assert_eq!(notice(&log.records()), None);
        request(&log);
        assert_eq!(notice(&log.records()), None, "nothing stopped");
        stopped(&log, "task-1", WorkspaceWrite, ReadOnly);
        stopped(&log, "task-3", DangerFullAccess, ReadOnly);
        let told = notice(&log.records()).expect("a notice");
        assert_eq!(
            told,
            "Background task task-1 was stopped because the user narrowed this session's sandbox \
             mode to \"read-only\"; it ran under \"workspace-write\". bash_output shows its output \
             and its end; a command started now runs under the narrower mode.\n\
             Background task task-3 was stopped because the user narrowed this session's sandbox \
             mode to \"read-only\"; it ran under \"danger-full-access\". bash_output shows its \
             output and its end; a command started now runs under the narrower mode."
        );
        request(&log);
        assert_eq!(notice(&log.records()), None, "told once");
    }

    #[test]
    fn a_stop_before_the_first_request_is_told_at_it() {
        let log = MemoryLog::new();
        stopped(&log, "task-1", WorkspaceWrite, ReadOnly);
        assert!(
            notice(&log.records()).is_some_and(|n| n.starts_with("Background task task-1 ")),
            "{:?}",
            notice(&log.records())
        );
    }
}
