use serde_json::json;

use super::*;
use crate::session::EVENT_VERSION;

/// Records of `events` (each with its agent tag), one second apart from `1_000_000` ms.
fn records(events: Vec<(Option<&str>, Event)>) -> Vec<Record> {
    events
        .into_iter()
        .enumerate()
        .map(|(seq, (agent, event))| Record {
            v: EVENT_VERSION,
            seq: seq as u64,
            at_ms: 1_000_000 + seq as u64 * 1_000,
            agent: agent.map(str::to_owned),
            event,
        })
        .collect()
}

fn call(call_id: &str, tool: &str, input: Value) -> Event {
    Event::ToolCall {
        turn: 1,
        call_id: call_id.into(),
        tool: tool.into(),
        title: String::new(),
        kind: "execute".into(),
        input,
        pending: false,
    }
}

fn result(call_id: &str, status: ToolStatus, facts: Value) -> Event {
    Event::ToolResult {
        turn: 1,
        call_id: call_id.into(),
        status,
        output: String::new(),
        facts,
        diff: None,
    }
}

fn asked(id: &str, call_id: &str) -> Event {
    Event::ApprovalAsked {
        id: id.into(),
        tool: "bash".into(),
        call_id: Some(call_id.into()),
        reason: Some("escalate sandbox to workspace-write: needs to write".into()),
    }
}

fn decided(id: &str, outcome: Outcome, rule: Option<&str>) -> Event {
    Event::ApprovalDecided {
        id: id.into(),
        outcome,
        rule: rule.map(str::to_owned),
        policy: None,
    }
}

fn ran(mode: &str, exit: i32) -> Value {
    json!({
        "exit": {"code": exit}, "backend": "bwrap",
        "enforcement": {"level": "full", "missing": [], "layers": ["namespaces", "seccomp"]},
        "denied": false, "denials": [], "runner_failure": null, "refused": null,
        "timed_out": false, "mode": mode, "cancelled": false
    })
}

fn calls(records: &[Record]) -> Vec<Call> {
    trail(records)
        .into_iter()
        .filter_map(|entry| match entry {
            Entry::Call(call) => Some(*call),
            _ => None,
        })
        .collect()
}

const ESCALATED: &str = r"printf x >> out.txt";

fn escalating(call_id: &str) -> Event {
    call(
        call_id,
        "bash",
        json!({"command": ESCALATED, "sandbox_permissions": "workspace-write",
               "justification": "needs to write"}),
    )
}

#[test]
fn an_escalation_granted_always_names_the_rule_it_made_and_the_rule_decides_the_next() {
    let scope = Scope::command(
        "bash",
        ESCALATED,
        Some(confine_protocol::Mode::WorkspaceWrite),
    );
    let log = records(vec![
        (None, escalating("c1")),
        (None, asked("a1", "c1")),
        (
            None,
            Event::ApprovalRule {
                id: "a1".into(),
                scope: scope.clone(),
                allow: true,
            },
        ),
        (None, decided("a1", Outcome::AllowedAlways, None)),
        (
            None,
            result("c1", ToolStatus::Completed, ran("workspace-write", 0)),
        ),
        (None, escalating("c2")),
        (None, asked("a2", "c2")),
        (None, decided("a2", Outcome::AllowedAlways, Some("a1"))),
        (
            None,
            result("c2", ToolStatus::Completed, ran("workspace-write", 0)),
        ),
    ]);
    let calls = calls(&log);
    assert_eq!(calls.len(), 2);
    let first = &calls[0];
    assert_eq!(first.mode.as_deref(), Some("workspace-write"));
    assert_eq!(first.mode_from, Some("escalation"));
    let approval = first.approval.as_ref().expect("asked");
    assert_eq!(
        (approval.outcome, approval.by),
        (Some(Outcome::AllowedAlways), Some("user"))
    );
    let made = approval.rule.as_ref().expect("made a rule");
    assert!(made.made_here && made.allow && made.id == "a1");
    assert_eq!(made.scope, scope.name());
    // Its run starts once it is allowed: from the decision (seq 3) to the result (seq 4).
    assert_eq!(first.duration_ms, Some(1_000));
    assert_eq!(first.duration_from, Some("records"));
    assert_eq!(first.at_ms, 1_000_000);

    let second = calls[1].approval.as_ref().expect("decided");
    assert_eq!(second.by, Some("rule"));
    let rule = second.rule.as_ref().expect("the deciding rule");
    assert!(!rule.made_here);
    assert_eq!(
        (rule.id.as_str(), rule.scope.as_str()),
        ("a1", scope.name().as_str())
    );
}

#[test]
fn a_call_under_the_session_mode_an_unasked_call_and_a_rejected_escalation() {
    let log = records(vec![
        (None, call("c1", "bash", json!({"command": "true"}))),
        (
            None,
            result("c1", ToolStatus::Completed, ran("read-only", 0)),
        ),
        (None, escalating("c2")),
        (None, asked("a1", "c2")),
        (None, decided("a1", Outcome::Rejected, None)),
        (
            None,
            result(
                "c2",
                ToolStatus::Failed,
                json!({"mode": "read-only", "escalation": "workspace-write", "approval": "rejected"}),
            ),
        ),
    ]);
    let calls = calls(&log);
    assert_eq!(calls[0].mode_from, Some("session"));
    assert!(calls[0].approval.is_none());
    assert_eq!(calls[0].ended, "exited");
    assert_eq!(calls[0].sandbox.exit, Some(json!({"code": 0})));
    assert_eq!(calls[0].sandbox.layers, ["namespaces", "seccomp"]);
    // The control: the same escalation, rejected, did not run under the wider mode.
    assert_eq!(calls[1].mode_from, Some("session"));
    assert_eq!(calls[1].ended, "not-approved");
    assert_eq!(calls[1].approval.as_ref().and_then(|a| a.by), Some("user"));
}

#[test]
fn the_policy_that_rejected_without_asking_is_named() {
    let mut log = records(vec![
        (None, escalating("c1")),
        (None, asked("a1", "c1")),
        (None, decided("a1", Outcome::Rejected, None)),
    ]);
    if let Event::ApprovalDecided { policy, .. } = &mut log[2].event {
        *policy = Some(ApprovalPolicy::Never);
    }
    let calls = calls(&log);
    assert_eq!(
        calls[0].approval.as_ref().and_then(|a| a.by),
        Some("policy")
    );
    assert_eq!(calls[0].ended, "no-result");
    assert_eq!(calls[0].duration_ms, None);
}

#[test]
fn denials_runner_failures_timeouts_and_refusals_are_told_apart() {
    let denied = json!({
        "exit": {"code": 1}, "backend": "landlock",
        "enforcement": {"level": "partial", "missing": ["truncate"], "layers": ["landlock"]},
        "denied": true, "denials": ["file-write"], "denied_paths": ["/srv/outside.txt"],
        "runner_failure": null, "refused": null, "timed_out": false, "mode": "workspace-write",
        "cancelled": false
    });
    let failed = json!({
        "exit": null, "backend": null, "enforcement": null, "denied": false, "denials": [],
        "runner_failure": {"stage": "prepare", "detail": "sandbox.deny_read: too deep"},
        "refused": null, "timed_out": false, "mode": "workspace-write", "cancelled": false
    });
    let mut timed_out = ran("workspace-write", 0);
    timed_out["exit"] = json!({"signal": 9});
    timed_out["timed_out"] = json!(true);
    let refused =
        json!({"exit": null, "refused": "mode above the ceiling", "mode": "danger-full-access"});
    let log = records(vec![
        (
            None,
            call("c1", "bash", json!({"command": "echo > ../outside.txt"})),
        ),
        (None, result("c1", ToolStatus::Failed, denied)),
        (None, call("c2", "bash", json!({"command": "true"}))),
        (None, result("c2", ToolStatus::Failed, failed)),
        (None, call("c3", "bash", json!({"command": "sleep 9"}))),
        (None, result("c3", ToolStatus::Failed, timed_out)),
        (None, call("c4", "bash", json!({"command": "true"}))),
        (None, result("c4", ToolStatus::Failed, refused)),
        (
            None,
            call("c5", "write_file", json!({"path": "x", "content": ""})),
        ),
        (
            None,
            result(
                "c5",
                ToolStatus::Failed,
                json!({"mode": "read-only", "path": "x", "denied": true, "denials": ["file-write"]}),
            ),
        ),
    ]);
    let calls = calls(&log);
    let ended: Vec<&str> = calls.iter().map(|c| c.ended).collect();
    assert_eq!(
        ended,
        ["exited", "runner-failure", "timed-out", "refused", "denied"]
    );
    let sandbox = &calls[0].sandbox;
    assert_eq!(sandbox.denials, ["file-write"]);
    assert_eq!(sandbox.denied_paths, ["/srv/outside.txt"]);
    assert_eq!(
        (sandbox.enforcement.as_deref(), sandbox.missing.as_slice()),
        (Some("partial"), ["truncate".to_owned()].as_slice())
    );
    let failure = calls[1].sandbox.runner_failure.as_ref().expect("failure");
    assert_eq!(
        (failure.stage.as_str(), failure.detail.as_str()),
        ("prepare", "sandbox.deny_read: too deep")
    );
    assert_eq!(calls[4].target.path.as_deref(), Some("x"));
    assert_eq!(calls[4].target.resolved, None);
}

#[test]
fn a_child_agents_calls_carry_its_tag_persona_and_the_id_the_editor_was_shown() {
    let log = records(vec![
        (
            None,
            call("t1", "task", json!({"persona": "writer", "prompt": "p"})),
        ),
        (
            None,
            Event::AgentStarted {
                agent: "agent-1".into(),
                parent: "agent-0".into(),
                depth: 1,
                persona: "writer".into(),
                call_id: "t1".into(),
            },
        ),
        (
            Some("agent-1"),
            call("w1", "write_file", json!({"path": "n.txt", "content": "x"})),
        ),
        (None, asked("a1", "t1/agent-1/1")),
        (None, decided("a1", Outcome::AllowedOnce, None)),
        (
            Some("agent-1"),
            result(
                "w1",
                ToolStatus::Completed,
                json!({"mode": "workspace-write", "path": "/ws/n.txt", "exit": {"code": 0}}),
            ),
        ),
        (
            None,
            result(
                "t1",
                ToolStatus::Completed,
                json!({"agent": "agent-1", "persona": "writer"}),
            ),
        ),
    ]);
    let calls = calls(&log);
    assert_eq!(calls.len(), 2);
    let (task, write) = (&calls[0], &calls[1]);
    assert_eq!(
        (task.agent.as_str(), task.persona.as_deref()),
        ("agent-0", None)
    );
    assert_eq!(task.target.child.as_deref(), Some("agent-1"));
    assert_eq!(task.ended, "completed");
    assert_eq!(write.agent, "agent-1");
    assert_eq!(write.persona.as_deref(), Some("writer"));
    assert_eq!(write.call_id, "t1/agent-1/1");
    assert_eq!(write.target.resolved.as_deref(), Some("/ws/n.txt"));
    assert_eq!(
        write.approval.as_ref().and_then(|a| a.outcome),
        Some(Outcome::AllowedOnce)
    );
}

#[test]
fn a_background_task_shows_its_end_from_the_later_record_that_holds_it() {
    let mut end = ran("workspace-write", 3);
    end["task_id"] = json!("task-1");
    end["running"] = json!(false);
    let log = records(vec![
        (
            None,
            call(
                "c1",
                "bash",
                json!({"command": "make", "run_in_background": true}),
            ),
        ),
        (
            None,
            result(
                "c1",
                ToolStatus::Completed,
                json!({"task_id": "task-1", "mode": "workspace-write", "running": true}),
            ),
        ),
        (
            None,
            call("c2", "bash_output", json!({"task_id": "task-1"})),
        ),
        (None, result("c2", ToolStatus::Failed, end.clone())),
        (
            None,
            call("c3", "bash_output", json!({"task_id": "task-1"})),
        ),
        (None, result("c3", ToolStatus::Failed, end)),
    ]);
    let calls = calls(&log);
    assert_eq!(calls.len(), 1, "bash_output is no entry of its own");
    let task = &calls[0];
    assert!(task.target.background);
    assert_eq!(task.target.task_id.as_deref(), Some("task-1"));
    assert_eq!(task.ended, "exited");
    assert_eq!(task.sandbox.exit, Some(json!({"code": 3})));
    assert_eq!(
        task.sandbox.ended_at_seq,
        Some(3),
        "the first record of its end"
    );
    assert_eq!(task.duration_ms, None);
}

#[test]
fn a_call_without_a_result_says_so() {
    let log = records(vec![(None, call("c1", "bash", json!({"command": "true"})))]);
    let calls = calls(&log);
    assert_eq!(calls[0].ended, "no-result");
    assert_eq!(calls[0].mode, None);
}

#[test]
fn each_entry_is_versioned_and_keeps_its_shape_in_json() {
    let log = records(vec![
        (None, call("c1", "bash", json!({"command": "true"}))),
        (
            None,
            result("c1", ToolStatus::Completed, ran("read-only", 0)),
        ),
    ]);
    let json = serde_json::to_value(trail(&log)).expect("json");
    let entry = &json[0];
    assert_eq!(entry["entry"], "call");
    assert_eq!(entry["v"], AUDIT_VERSION);
    let mut keys: Vec<&str> = entry
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "agent",
            "approval",
            "at",
            "at_ms",
            "call_id",
            "duration_from",
            "duration_ms",
            "ended",
            "entry",
            "escalation",
            "mode",
            "mode_from",
            "persona",
            "sandbox",
            "seq",
            "status",
            "target",
            "tool",
            "turn",
            "v"
        ]
    );
    assert_eq!(entry["at"], "1970-01-01T00:16:40Z");
    assert_eq!(entry["target"], json!({"command": "true"}));
}

#[test]
fn a_turns_changes_and_an_undo_are_entries_in_their_place() {
    use crate::checkpoint::{Change, ChangeKind};
    use crate::session::event::RestoredBy;
    let change = |path: &str, kind| Change {
        path: path.into(),
        kind,
    };
    let log = records(vec![
        (None, call("c1", "bash", json!({"command": "rm old.txt"}))),
        (
            None,
            result("c1", ToolStatus::Completed, ran("workspace-write", 0)),
        ),
        (
            None,
            Event::TurnChanges {
                turn: 1,
                changes: vec![change("/ws/old.txt", ChangeKind::Deleted)],
            },
        ),
        (
            None,
            Event::CheckpointRestored {
                turn: 1,
                label: "t1".into(),
                changes: vec![change("/ws/old.txt", ChangeKind::Added)],
                still_differs: vec![],
                by: RestoredBy::Editor,
            },
        ),
    ]);
    let entries = trail(&log);
    assert_eq!(
        entries.iter().map(Entry::seq).collect::<Vec<_>>(),
        [0, 2, 3]
    );
    let json = serde_json::to_value(&entries).expect("json");
    assert_eq!(json[1]["entry"], "changes");
    assert_eq!(
        json[1]["changes"],
        json!([{"path": "/ws/old.txt", "kind": "deleted"}])
    );
    assert_eq!(json[2]["entry"], "undo");
    assert_eq!(
        (json[2]["turn"].clone(), json[2]["by"].clone()),
        (json!(1), json!("editor"))
    );
}
