use serde_json::json;

use super::*;
use crate::acp::updates::update_for;
use crate::session::fold::ReplayItem;
use crate::session::{Before, DIFF_TEXT_CAP};

/// The facts of a bash command as `bash::facts_json` writes them.
fn command_facts(mode: &str, exit: i32, denials: &[&str]) -> Value {
    json!({
        "exit": {"code": exit},
        "backend": "bwrap",
        "enforcement": {"level": "full", "missing": [], "layers": ["namespaces", "landlock", "seccomp"]},
        "denied": !denials.is_empty(),
        "denials": denials,
        "runner_failure": null,
        "refused": null,
        "timed_out": false,
        "mode": mode,
        "cancelled": false,
    })
}

const READ_ONLY_DENIAL: &str = "sh: 1: cannot create out.txt: Read-only file system\n\
     [sandbox: file write denied under read-only mode]\n\
     [sandbox: escalation available — the denied writes are inside the workspace: retry this \
     exact command once with sandbox_permissions \"workspace-write\" + justification; the \
     approval prompt asks the user]\n\
     [exit code: 2]";

#[test]
fn a_denial_under_read_only_says_blocked_and_that_the_agent_may_ask() {
    let facts = command_facts("read-only", 2, &["file-write"]);
    assert_eq!(
        person_lines(ToolStatus::Failed, &facts, READ_ONLY_DENIAL),
        [
            "Blocked by the sandbox (read-only): file write; the agent may ask to retry with more \
          access."
        ]
    );
    // The editor's copy of the output loses the hint, and only it.
    assert_eq!(
        editor_output(&facts, READ_ONLY_DENIAL),
        "sh: 1: cannot create out.txt: Read-only file system\n\
         [sandbox: file write denied under read-only mode]\n\
         [exit code: 2]"
    );
}

#[test]
fn a_denial_under_workspace_write_names_what_and_without_a_hint_does_not_promise_a_retry() {
    let facts = command_facts("workspace-write", 1, &["file-write", "network"]);
    let output = "[sandbox: file write outside the writable roots denied under workspace-write \
                  mode]\n[sandbox: network access denied under workspace-write mode]\n\
                  [exit code: 1]";
    assert_eq!(
        person_lines(ToolStatus::Failed, &facts, output),
        [
            "Blocked by the sandbox (workspace-write): file write outside the writable roots, \
          network access."
        ]
    );
    assert_eq!(editor_output(&facts, output), output);
    // A command that went on to exit 0 was only partly blocked.
    let facts = command_facts("workspace-write", 0, &["protected-path"]);
    assert_eq!(
        person_lines(ToolStatus::Completed, &facts, "[exit code: 0]"),
        ["Partly blocked by the sandbox (workspace-write): file write to git metadata."]
    );
}

#[test]
fn partial_enforcement_is_left_out_of_each_result_and_its_gaps_are_read_in_plain_words() {
    let mut facts = command_facts("workspace-write", 0, &[]);
    facts["backend"] = json!("landlock");
    facts["enforcement"] = json!({
        "level": "partial",
        "missing": [
            "file metadata outside writable roots: chmod, chown, utimes, xattrs (Landlock does not control them)",
            "ioctl on devices (Landlock ABI < 5)",
            "repository /ws/.git: there is none yet, so a command can create one",
        ],
        "layers": ["landlock", "seccomp"],
    });
    assert!(person_lines(ToolStatus::Completed, &facts, "[exit code: 0]").is_empty());
    let (backend, gaps) = enforcement_gaps(&facts).expect("partial");
    assert_eq!(backend, "landlock");
    let plain: Vec<String> = gaps.iter().map(|gap| plain_gap(gap)).collect();
    assert_eq!(
        plain,
        [
            "a command can change the permissions, owner, times and extended attributes of files \
             outside the writable roots (Landlock does not control them)",
            "ioctl on devices (Landlock ABI < 5)",
            "a command could create a git repository at /ws/.git (there is none yet), and git run \
             there later would use its config and hooks",
        ]
    );
    // A denial under it: the denial's line alone.
    facts["denied"] = json!(true);
    facts["denials"] = json!(["network"]);
    let lines = person_lines(ToolStatus::Failed, &facts, "[exit code: 1]");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].starts_with("Blocked by the sandbox"), "{lines:?}");
    // The control: full enforcement has no gaps.
    facts["enforcement"] = json!({"level": "full", "missing": [], "layers": ["bwrap"]});
    assert_eq!(enforcement_gaps(&facts), None);
}

#[test]
fn a_success_shows_the_model_text_alone() {
    let facts = command_facts("workspace-write", 0, &[]);
    let output = "hello\n[exit code: 0]";
    assert!(person_lines(ToolStatus::Completed, &facts, output).is_empty());
    assert_eq!(editor_output(&facts, output), output);
    let shown = content(ToolStatus::Completed, &facts, output, None);
    assert_eq!(
        serde_json::to_value(&shown).expect("json"),
        json!([{"type": "content", "content": {"type": "text", "text": output}}])
    );
    // A hint-like line the command printed itself stays: the call was not denied.
    let printed = "[sandbox: escalation available — made up]\n[exit code: 0]";
    assert_eq!(editor_output(&facts, printed), printed);
    // Danger-full-access enforces nothing, and says nothing about it.
    let mut unconfined = command_facts("danger-full-access", 0, &[]);
    unconfined["enforcement"] = Value::Null;
    assert!(person_lines(ToolStatus::Completed, &unconfined, output).is_empty());
}

#[test]
fn a_runner_failure_or_a_refusal_says_the_sandbox_stopped_it() {
    let failed = |stage: &str| {
        let mut facts = command_facts("workspace-write", 0, &[]);
        facts["exit"] = Value::Null;
        facts["backend"] = Value::Null;
        facts["enforcement"] = Value::Null;
        facts["runner_failure"] = json!({"stage": stage, "detail": "no usable sandbox backend"});
        person_lines(ToolStatus::Failed, &facts, "[sandbox unavailable: …]")
    };
    assert_eq!(
        failed("unavailable"),
        [
            "Not run: no sandbox works on this machine, and agentd runs nothing unconfined; below \
          is what to install."
        ]
    );
    assert_eq!(
        failed("namespace"),
        [
            "Not run: the sandbox failed to set it up (at namespace), a problem of the sandbox, \
          not of the call; the details are below."
        ]
    );
    assert!(failed("helper-exited")[0].contains("confine-helper exited"));
    let mut refused = command_facts("workspace-write", 0, &[]);
    refused["refused"] = json!("mode above the ceiling");
    assert_eq!(
        person_lines(ToolStatus::Failed, &refused, "[sandbox: refused: …]"),
        ["Refused by the sandbox: mode above the ceiling."]
    );
}

#[test]
fn a_file_tool_denied_by_the_fence_is_blocked_without_a_retry() {
    let facts =
        json!({"mode": "read-only", "path": "a.txt", "denied": true, "denials": ["file-write"]});
    let output =
        "read-only mode allows no writes\n[sandbox: file write denied under read-only mode]";
    assert_eq!(
        person_lines(ToolStatus::Failed, &facts, output),
        ["Blocked by the sandbox (read-only): file write."]
    );
}

/// The update the editor gets for a write result with `diff`.
fn write_update(diff: LoggedDiff) -> Value {
    let item = ReplayItem::ToolResult {
        call_id: "w1".into(),
        status: ToolStatus::Completed,
        output: "Created /ws/a.txt (3 bytes)".into(),
        facts: json!({"mode": "workspace-write", "path": "/ws/a.txt", "bytes": 3}),
        diff: Some(diff),
        nested: None,
    };
    serde_json::to_value(update_for(&item)).expect("json")
}

#[test]
fn a_new_file_is_a_diff_without_old_text_before_the_model_text() {
    let update = write_update(LoggedDiff::of(
        std::path::Path::new("/ws/a.txt"),
        Before::Created,
        "hi\n",
    ));
    assert_eq!(
        update["content"],
        json!([
            {"type": "diff", "path": "/ws/a.txt", "newText": "hi\n"},
            {"type": "content", "content": {"type": "text", "text": "Created /ws/a.txt (3 bytes)"}},
        ]),
        "{update}"
    );
    assert_eq!(
        update["locations"],
        json!([{"path": "/ws/a.txt", "line": 1}])
    );
}

#[test]
fn an_edit_is_a_diff_with_both_texts_and_its_location_is_the_first_changed_line() {
    let update = write_update(LoggedDiff::of(
        std::path::Path::new("/ws/a.txt"),
        Before::Text("one\ntwo\nthree\n".into()),
        "one\n2\nthree\n",
    ));
    assert_eq!(
        update["content"][0],
        json!({"type": "diff", "path": "/ws/a.txt", "oldText": "one\ntwo\nthree\n", "newText": "one\n2\nthree\n"})
    );
    assert_eq!(
        update["locations"],
        json!([{"path": "/ws/a.txt", "line": 2}])
    );
}

#[test]
fn a_change_too_large_or_unread_is_a_line_instead_of_a_diff() {
    let path = std::path::Path::new("/ws/a.txt");
    let big = "x".repeat(DIFF_TEXT_CAP + 1);
    let update = write_update(LoggedDiff::of(path, Before::Created, &big));
    assert_eq!(
        update["content"][0],
        json!({"type": "content", "content": {"type": "text", "text": "No diff shown: the text before or after is over 64 KiB."}})
    );
    assert_eq!(update["content"].as_array().map(Vec::len), Some(2));
    assert_eq!(update["locations"], json!([{"path": "/ws/a.txt"}]));
    let update = write_update(LoggedDiff::of(path, Before::Unread, "hi\n"));
    assert_eq!(
        update["content"][0]["content"]["text"],
        "No diff shown: the file's text before the write could not be read."
    );
}

#[test]
fn a_read_is_located_at_its_first_line_shown() {
    let facts =
        json!({"mode": "read-only", "path": "/ws/a.txt", "lines": [5, 9], "total_lines": 20});
    assert_eq!(
        serde_json::to_value(locations(&facts, None)).expect("json"),
        json!([{"path": "/ws/a.txt", "line": 5}])
    );
    // An empty file shows no line; a relative path (a refusal's) is no location.
    let empty = json!({"path": "/ws/e", "lines": [1, 0], "total_lines": 0});
    assert_eq!(
        serde_json::to_value(locations(&empty, None)).expect("json"),
        json!([{"path": "/ws/e"}])
    );
    assert_eq!(locations(&json!({"path": "a.txt"}), None), None);
}

#[test]
fn the_first_changed_line_of_appends_and_cuts() {
    assert_eq!(first_changed_line("a\n", "a\nb\n"), Some(2));
    assert_eq!(first_changed_line("a\nb\n", "a\n"), Some(1));
    assert_eq!(first_changed_line("a\n", "a\n"), None);
    assert_eq!(first_changed_line("", "x"), Some(1));
    assert_eq!(first_changed_line("x", ""), Some(1));
}

#[test]
fn raw_output_keeps_what_happened_in_a_few_short_facts() {
    let mut facts = command_facts("workspace-write", 0, &[]);
    facts["backend"] = json!("bwrap");
    facts["enforcement"] = json!({
        "level": "partial",
        "missing": ["repository /ws/.git: there is none yet, so a command can create one"],
        "layers": ["namespaces", "landlock", "seccomp"],
    });
    let compact = compact_facts(&facts);
    assert_eq!(compact["exit"], json!({"code": 0}));
    assert_eq!(compact["mode"], "workspace-write");
    assert_eq!(compact["backend"], "bwrap");
    assert_eq!(compact["enforcement"], "partial");
    for gone in [
        "denied",
        "denials",
        "runner_failure",
        "refused",
        "timed_out",
    ] {
        assert!(compact.get(gone).is_none(), "{gone}: {compact}");
    }
    // What did happen is kept, each as one short value.
    facts["denied"] = json!(true);
    facts["denials"] = json!(["file-write"]);
    facts["runner_failure"] = json!({"stage": "landlock", "message": "a long story"});
    let compact = compact_facts(&facts);
    assert_eq!(compact["denied"], true);
    assert_eq!(compact["denials"], json!(["file-write"]));
    assert_eq!(compact["runner_failure"], "landlock");
    // The control: the full facts carry everything.
    let update = serde_json::to_value(update_for(&ReplayItem::ToolResult {
        call_id: "c".into(),
        status: ToolStatus::Completed,
        output: "[exit code: 0]".into(),
        facts: facts.clone(),
        diff: None,
        nested: None,
    }))
    .expect("json");
    assert_eq!(update["_meta"]["agentd"]["facts"], facts);
    assert_eq!(update["rawOutput"], compact_facts(&facts));
}
