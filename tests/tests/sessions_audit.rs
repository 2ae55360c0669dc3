//! `agentd sessions audit` on a session recorded by the real `agentd acp`, driven over the wire
//! with a scripted model, its commands really run confined by this host's backend: the trail,
//! as text and as `--json`, is compared with insta snapshots after times, durations, approval
//! ids, paths and the host's backend are normalised.
//!
//! The session holds what the trail must tell apart: a file read; a write the read-only sandbox
//! denied; the same command escalated to workspace-write, asked and allowed "always", which
//! makes a rule; the same escalation again, decided by that rule without asking; after a switch
//! to workspace-write, a write outside the workspace that the sandbox denied; and a runner
//! failure — a command that never ran, because the `deny_read` pattern `**/never-there` could
//! not be looked for through a tree nested deeper than agentd walks (a command of the session
//! made it), so agentd refused to send the command rather than send it unchecked.

mod support;

use std::process::Output;

use serde_json::{Value, json};
use support::acp::{AcpClient, Permission, Scratch, scratch_base};

/// More levels than agentd walks looking for a `deny_read` pattern (256).
const TOO_DEEP: usize = 300;

const SCRIPT: &str = r#"
[[turn]]
[[turn.tool_calls]]
name = "read_file"
arguments = { path = "notes.txt" }
[[turn.tool_calls]]
name = "bash"
arguments = { command = "printf 'saved\\n' >> out.txt" }

[[turn]]
[[turn.tool_calls]]
name = "bash"
arguments = { command = "printf 'saved\\n' >> out.txt", sandbox_permissions = "workspace-write", justification = "The answer belongs in the workspace." }

[[turn]]
[[turn.tool_calls]]
name = "bash"
arguments = { command = "printf 'saved\\n' >> out.txt", sandbox_permissions = "workspace-write", justification = "The answer belongs in the workspace." }

[[turn]]
text = "Saved it twice."

[[turn]]
[[turn.tool_calls]]
name = "bash"
arguments = { command = "printf 'x\\n' > ../outside.txt" }

[[turn]]
[[turn.tool_calls]]
name = "bash"
arguments = { command = "mkdir -p \"$(printf 'd/%.0s' $(seq TOO_DEEP))\"" }

[[turn]]
[[turn.tool_calls]]
name = "bash"
arguments = { command = "true" }

[[turn]]
text = "Done."
"#;

/// `agentd sessions audit ID` with `extra` flags, reading the scratch's state directory.
fn audit(scratch: &Scratch, id: &str, extra: &[&str]) -> Output {
    scratch
        .agentd("sessions")
        .arg("audit")
        .arg(id)
        .arg("--state-dir")
        .arg(scratch.state())
        .args(extra)
        .output()
        .expect("run agentd sessions audit")
}

/// The approval ids of the session's log, in order, each with its placeholder.
fn approval_ids(scratch: &Scratch, id: &str) -> Vec<(String, String)> {
    scratch
        .log(id)
        .iter()
        .filter(|r| r["type"] == "approval/asked")
        .enumerate()
        .map(|(i, r)| {
            let id = r["id"].as_str().expect("approval id").to_owned();
            (id, format!("<approval-{}>", i + 1))
        })
        .collect()
}

/// `text` with the deep path a `deny_read` walk names (cut at a length, so where it is cut
/// depends on the scratch path's length) as `<deep>`.
fn without_deep_path(text: &str) -> String {
    const AFTER: &str = " deep under ";
    const BEFORE: &str = "; nothing was run";
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(AFTER) {
        let (head, tail) = rest.split_at(at + AFTER.len());
        out.push_str(head);
        let end = tail.find(BEFORE).expect("the walk's error goes on");
        out.push_str("<deep>");
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// Replaces each number of milliseconds (`N ms`) with `<n> ms` and each RFC 3339 time with
/// `<time>`.
fn without_times(line: &str) -> String {
    let words: Vec<&str> = line.split(' ').collect();
    let shown: Vec<String> = words
        .iter()
        .enumerate()
        .map(|(i, word)| {
            let time = word.len() == "2026-12-06T16:37:00Z".len()
                && word.ends_with('Z')
                && word.as_bytes().get(10) == Some(&b'T');
            let ms = words.get(i + 1) == Some(&"ms") && word.chars().all(|c| c.is_ascii_digit());
            match (time, ms) {
                (true, _) => "<time>".to_owned(),
                (_, true) => "<n>".to_owned(),
                _ => (*word).to_owned(),
            }
        })
        .collect();
    shown.join(" ")
}

/// The text with this run's paths, ids and host as placeholders.
fn normalized(text: &str, scratch: &Scratch, approvals: &[(String, String)]) -> String {
    let mut text = without_deep_path(text);
    for (id, placeholder) in approvals {
        text = text.replace(id, placeholder);
    }
    text = text
        .replace(&scratch.ws().display().to_string(), "<ws>")
        .replace(&scratch.root.display().to_string(), "<root>");
    text.lines()
        .map(|line| match line.strip_prefix("  sandbox: ") {
            // The host's backend and what it enforces (whichever `auto` picked here).
            Some(_) => "  sandbox: <backend, enforcement, layers>".to_owned(),
            None => without_times(line),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The JSON trail with times, durations and the host's backend as placeholders.
fn normalized_json(mut trail: Value) -> Value {
    for entry in trail.as_array_mut().expect("an array of entries") {
        entry["at_ms"] = json!("<ms>");
        entry["at"] = json!("<time>");
        if entry["duration_ms"].is_number() {
            entry["duration_ms"] = json!("<n>");
        }
        if let Some(sandbox) = entry.get_mut("sandbox")
            && sandbox["backend"].is_string()
        {
            sandbox["backend"] = json!("<backend>");
            sandbox["enforcement"] = json!("<enforcement>");
            sandbox["missing"] = json!("<missing>");
            sandbox["layers"] = json!("<layers>");
        }
    }
    trail
}

#[test]
fn the_audit_trail_of_a_recorded_session_tells_escalation_rule_denial_and_runner_failure() {
    let scratch = Scratch::new_in(&scratch_base(), "sessions-audit");
    std::fs::write(scratch.ws().join("notes.txt"), "The answer is 42.\n").expect("notes");
    scratch.config("[sandbox]\ndeny_read = [\"**/never-there\"]\n");
    let script = scratch.script(&SCRIPT.replace("TOO_DEEP", &TOO_DEEP.to_string()));
    let mut client = AcpClient::start(&scratch, &script, &["--sandbox-mode", "read-only"]);
    client
        .answers
        .push_back(Permission::Kind("allow_always".into()));
    let id = client.open_session(&scratch.ws());
    let (answer, _) = client.prompt(&id, "Save the answer in out.txt.");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let (switched, _) = client.request(
        "session/set_config_option",
        json!({"sessionId": id, "configId": "sandbox-mode", "value": "workspace-write"}),
    );
    assert!(switched.get("result").is_some(), "{switched}");
    let (answer, _) = client.prompt(&id, "Export it, then tidy up.");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(
        client.permission_requests.len(),
        1,
        "only the first escalation is asked"
    );
    assert!(client.unoffered.is_empty(), "{:?}", client.unoffered);
    drop(client);
    // What happened on disk, which the trail must agree with.
    assert_eq!(
        std::fs::read_to_string(scratch.ws().join("out.txt")).expect("out.txt"),
        "saved\nsaved\n"
    );
    assert!(!scratch.root.join("outside.txt").exists());

    let approvals = approval_ids(&scratch, &id);
    assert_eq!(approvals.len(), 2, "{approvals:?}");

    let text = audit(&scratch, &id, &[]);
    assert!(text.status.success(), "{text:?}");
    assert!(
        text.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&text.stderr)
    );
    let text = normalized(&String::from_utf8_lossy(&text.stdout), &scratch, &approvals);
    // The elements the acceptance names, each checked on its own before the whole.
    for element in [
        "made the rule <approval-1>: `printf 'saved\\n' >> out.txt` with workspace-write (allow)",
        "allowed-always by the rule <approval-1>: `printf 'saved\\n' >> out.txt` with workspace-write",
        "  denied: file-write: <ws>/out.txt",
        "  denied: file-write: <root>/outside.txt",
        "  ended: runner failure at stage prepare, nothing ran: sandbox.deny_read:",
        "  mode: workspace-write, granted as an escalation",
    ] {
        assert!(text.contains(element), "{element:?} missing from:\n{text}");
    }
    insta::assert_snapshot!("audit_text", text);

    let json_out = audit(&scratch, &id, &["--json"]);
    assert!(json_out.status.success(), "{json_out:?}");
    let stdout = String::from_utf8_lossy(&json_out.stdout);
    assert_eq!(stdout.lines().count(), 1, "one JSON document on one line");
    let trail: Value = serde_json::from_str(&stdout).expect("one JSON document");
    let pretty = serde_json::to_string_pretty(&normalized_json(trail)).expect("json");
    insta::assert_snapshot!("audit_json", normalized(&pretty, &scratch, &approvals));
}

#[test]
fn a_malformed_line_is_warned_about_and_the_rest_audited() {
    let scratch = Scratch::new_in(&scratch_base(), "sessions-audit-damaged");
    let script = scratch.script(
        "[[turn]]\n[[turn.tool_calls]]\nname = \"bash\"\narguments = { command = \"echo one\" }\n\n\
         [[turn]]\ntext = \"Ran it.\"\n",
    );
    let mut client = AcpClient::start(&scratch, &script, &[]);
    let id = client.open_session(&scratch.ws());
    client.prompt(&id, "Run it.");
    drop(client);
    let path = scratch.state().join(format!("{id}.jsonl"));
    let whole = std::fs::read_to_string(&path).expect("log");
    let control = audit(&scratch, &id, &[]);
    assert!(control.stderr.is_empty(), "{control:?}");
    assert!(String::from_utf8_lossy(&control.stdout).contains("  command: echo one"));
    // A damaged line after the header, and a torn last line.
    let mut lines: Vec<&str> = whole.lines().collect();
    lines.insert(1, "{not a record");
    std::fs::write(&path, lines.join("\n") + "\n{\"v\":1,\"seq\":99").expect("damage");
    let damaged = audit(&scratch, &id, &[]);
    assert!(damaged.status.success(), "{damaged:?}");
    let stderr = String::from_utf8_lossy(&damaged.stderr);
    assert!(
        stderr.contains(&format!("{}:2: not a session event", path.display())),
        "{stderr}"
    );
    assert!(stderr.contains("the last line is incomplete"), "{stderr}");
    assert_eq!(
        damaged.stdout, control.stdout,
        "the rest is audited as before"
    );
}
