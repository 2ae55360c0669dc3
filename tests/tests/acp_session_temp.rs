//! A session's own temp directory over the real `agentd acp` wire and the real kernel, with a
//! scripted model (RFC 0014): a file one command leaves in `$TMPDIR` is there for the next
//! command of the same session, not for another session; a read-only session's commands can
//! read theirs but not write it; and the directory is gone once the session closes. Both Linux
//! backends where this machine has them (judged without the helper; SKIP where not). agentd's
//! TMPDIR is the scratch area's, where the test can look.

mod support;

use serde_json::{Value, json};
use support::acp::{AcpClient, Scratch, normalized_updates};

/// One turn per command, then a closing text.
fn script(commands: &[&str]) -> String {
    let mut text = String::new();
    for command in commands {
        text.push_str(&format!(
            "[[turn]]\n[[turn.tool_calls]]\nname = \"bash\"\narguments = {{ command = {} }}\n\n",
            serde_json::to_string(command).expect("json")
        ));
    }
    text.push_str("[[turn]]\ntext = \"Done.\"\n");
    text
}

/// What the model read of each call of one prompt.
fn outputs(scratch: &Scratch, session: &str, notes: &[Value]) -> Vec<String> {
    let log = scratch.log(session);
    normalized_updates(notes)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update")
        .filter_map(|update| {
            log.iter()
                .find(|r| r["type"] == "tool/result" && r["call_id"] == update["toolCallId"])
                .and_then(|r| r["output"].as_str().map(str::to_owned))
        })
        .collect()
}

/// Asserts that every command of one prompt ran under `backend` (one that works here).
fn assert_ran_under(backend: &str, notes: &[Value]) {
    for update in normalized_updates(notes)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update")
    {
        assert_eq!(
            update["_meta"]["agentd"]["facts"]["backend"], backend,
            "{backend} works here, but the command did not run under it: {update}"
        );
    }
}

/// The session temp directories agentd has made in the scratch's TMPDIR.
fn session_dirs(scratch: &Scratch) -> Vec<String> {
    std::fs::read_dir(scratch.root.join("tmp"))
        .expect("scratch tmp")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("agentd-session-") && !name.ends_with(".lock"))
        .collect()
}

#[test]
fn tmp_files_last_for_the_session_stay_in_it_and_go_when_it_closes() {
    for backend in support::backends() {
        let scratch = Scratch::new(&format!("session-temp-{backend}"));
        scratch.config(&format!("[sandbox]\nbackend = \"{backend}\"\n"));
        let script = scratch.script(&script(&[
            "cat \"$TMPDIR/note\" 2>/dev/null || echo none yet",
            "echo kept > \"$TMPDIR/note\" && echo wrote",
            "cat \"$TMPDIR/note\"",
        ]));
        let mut client =
            AcpClient::start(&scratch, &script, &["--sandbox-mode", "workspace-write"]);
        let first = client.open_session(&scratch.ws());
        let (answer, notes) = client.prompt(&first, "go");
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
        assert_ran_under(backend, &notes);
        let out = outputs(&scratch, &first, &notes);
        assert_eq!(out.len(), 3, "{backend}: {out:?}");
        assert!(out[0].contains("none yet"), "{backend}: {out:?}");
        assert!(out[1].contains("wrote"), "{backend}: {out:?}");
        // The next command of the same session finds the file.
        assert!(out[2].contains("kept"), "{backend}: {out:?}");
        assert_eq!(session_dirs(&scratch).len(), 1, "{backend}");

        // Another session has its own: its first command finds nothing there.
        let second = client.open_session(&scratch.ws());
        assert_eq!(session_dirs(&scratch).len(), 2, "{backend}");
        let (answer, notes) = client.prompt(&second, "go");
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
        let out = outputs(&scratch, &second, &notes);
        assert!(out[0].contains("none yet"), "{backend}: {out:?}");
        let (close, _) = client.request("session/close", json!({"sessionId": first}));
        assert!(close.get("error").is_none(), "{backend}: {close}");
        // The first session's directory is gone with its file; the second's stays.
        assert_eq!(session_dirs(&scratch).len(), 1, "{backend}");
        let (close, _) = client.request("session/close", json!({"sessionId": second}));
        assert!(close.get("error").is_none(), "{backend}: {close}");
        assert!(session_dirs(&scratch).is_empty(), "{backend}");
    }
}

#[test]
fn a_read_only_session_reads_its_tmp_but_cannot_write_it() {
    for backend in support::backends() {
        let scratch = Scratch::new(&format!("session-temp-ro-{backend}"));
        scratch.config(&format!("[sandbox]\nbackend = \"{backend}\"\n"));
        let script = scratch.script(&script(&[
            "echo x > \"$TMPDIR/planted\" && echo wrote || echo refused",
            "ls -a \"$TMPDIR\" && echo listed",
        ]));
        let mut client = AcpClient::start(&scratch, &script, &["--sandbox-mode", "read-only"]);
        let session = client.open_session(&scratch.ws());
        let (answer, notes) = client.prompt(&session, "go");
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
        assert_ran_under(backend, &notes);
        let out = outputs(&scratch, &session, &notes);
        assert!(out[0].contains("refused"), "{backend}: {out:?}");
        assert!(out[1].contains("listed"), "{backend}: {out:?}");
        let dirs = session_dirs(&scratch);
        assert_eq!(dirs.len(), 1, "{backend}");
        let planted = scratch.root.join("tmp").join(&dirs[0]).join("planted");
        assert!(
            !planted.exists(),
            "{backend}: a read-only command wrote its tmp"
        );
        // The control: the same commands in a workspace-write session write its tmp.
        let control = Scratch::new(&format!("session-temp-rw-{backend}"));
        control.config(&format!("[sandbox]\nbackend = \"{backend}\"\n"));
        let control_script = control.script(&self::script(&[
            "echo x > \"$TMPDIR/planted\" && echo wrote || echo refused",
            "ls -a \"$TMPDIR\" && echo listed",
        ]));
        let mut client = AcpClient::start(
            &control,
            &control_script,
            &["--sandbox-mode", "workspace-write"],
        );
        let session = client.open_session(&control.ws());
        let (answer, notes) = client.prompt(&session, "go");
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
        assert_ran_under(backend, &notes);
        let out = outputs(&control, &session, &notes);
        assert!(out[0].contains("wrote"), "{backend}: {out:?}");
        assert!(out[1].contains("planted"), "{backend}: {out:?}");
    }
}

#[test]
fn what_a_killed_agentd_left_is_removed_when_the_next_one_starts_and_live_sessions_stay() {
    let scratch = Scratch::new("session-temp-killed");
    let script = scratch.script(&script(&[]));
    let mut killed = AcpClient::start(&scratch, &script, &["--sandbox-mode", "workspace-write"]);
    killed.open_session(&scratch.ws());
    assert_eq!(session_dirs(&scratch).len(), 1);
    killed.child.kill().expect("SIGKILL agentd");
    killed.child.wait().expect("reaped");
    // It could not clean up: its directory (and its lock) are still there.
    assert_eq!(session_dirs(&scratch).len(), 1);

    let mut next = AcpClient::start(&scratch, &script, &["--sandbox-mode", "workspace-write"]);
    // Answered only once it started, so the sweep has run.
    next.open_session(&scratch.ws());
    let dirs = session_dirs(&scratch);
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    // The one left is the new session's, and another agentd starting keeps it.
    let mut third = AcpClient::start(&scratch, &script, &["--sandbox-mode", "workspace-write"]);
    third.open_session(&scratch.ws());
    let now = session_dirs(&scratch);
    assert_eq!(now.len(), 2, "{now:?}");
    assert!(now.contains(&dirs[0]), "{now:?}");
}
