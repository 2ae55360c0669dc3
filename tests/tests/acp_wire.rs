//! `agentd acp` over its real stdio, driven by a scripted model and a scripted client: the
//! wire transcript is snapshotted, and the side effects are checked on disk and in `/proc`.

mod support;

use std::time::Duration;

use serde_json::json;
use support::acp::{
    AcpClient, Scratch, assert_ran_clean, is_enforcement_notice, normalized_updates, render,
    without_live_output,
};

/// A model that reads a file, writes another, then says it is done.
/// How long a cancelled prompt may take to be answered: a liveness bound, not a measurement.
const CANCEL_LIVENESS: Duration = Duration::from_secs(30);

const READ_WRITE_SCRIPT: &str = r#"
[[turn]]
text = "Reading the note, then writing the answer."
[[turn.tool_calls]]
name = "bash"
arguments = { command = "cat hello.txt" }
[[turn.tool_calls]]
name = "bash"
arguments = { command = "printf 'hi\\n' > out.txt" }

[[turn]]
text = "Done: out.txt holds the answer."
"#;

#[test]
fn a_prompt_runs_confined_tools_and_ends_the_turn() {
    let scratch = Scratch::new("readwrite");
    std::fs::write(scratch.ws().join("hello.txt"), "hello from the workspace\n").expect("note");
    let script = scratch.script(READ_WRITE_SCRIPT);
    let mut client = AcpClient::start(&scratch, &script, &["--sandbox-mode", "workspace-write"]);
    let session = client.open_session(&scratch.ws());
    let (answer, notes) = client.prompt(&session, "Answer the note in out.txt");

    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(
        std::fs::read_to_string(scratch.ws().join("out.txt")).expect("out.txt on disk"),
        "hi\n"
    );
    let updates = normalized_updates(&notes);
    let results: Vec<_> = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update")
        .collect();
    assert_eq!(results.len(), 2, "{updates:#?}");
    for result in &results {
        assert_ran_clean(result, "workspace-write");
    }
    // The model's text is the last block (a denied call's line for a person comes first).
    let cat = results[0]["content"]
        .as_array()
        .and_then(|blocks| blocks.last())
        .and_then(|block| block["content"]["text"].as_str())
        .unwrap_or_default();
    assert!(cat.starts_with("hello from the workspace\n"), "{cat}");
    assert!(cat.trim_end().ends_with("[exit code: 0]"), "{cat}");

    let ws = scratch.ws().display().to_string();
    // Live output, if a command was slow enough to show any, depends on timing: left out.
    let (mut transcript, _) = without_live_output(&client.transcript);
    transcript.retain(|(_, message)| !is_enforcement_notice(&message["params"]["update"]));
    for (_, message) in &mut transcript {
        redact_volatile(message);
    }
    let text = render(&transcript, &[(&session, "<session>"), (&ws, "<ws>")]);
    insta::assert_snapshot!("read_write_transcript", text);
}

/// Facts that vary with the machine (which backend it picked, what that backend enforces)
/// become placeholders, wherever a tool result carries them. (The notice of partial
/// enforcement, which there is only where the host's backend enforces partly, is left out of
/// the transcript.)
fn redact_volatile(message: &mut serde_json::Value) {
    for at in [
        "/params/update/rawOutput",
        "/params/update/_meta/agentd/facts",
    ] {
        if let Some(raw) = message.pointer_mut(at) {
            for key in ["backend", "enforcement"] {
                if raw.get(key).is_some() {
                    raw[key] = json!(format!("<{key}>"));
                }
            }
        }
    }
}

/// The unique duration makes the command findable in /proc without catching other tests'.
fn sleeper_script(tag: &str) -> String {
    format!(
        r#"
[[turn]]
text = "Waiting."
[[turn.tool_calls]]
name = "bash"
arguments = {{ command = "touch started && exec sleep {tag}" }}

[[turn]]
text = "Still here."
"#
    )
}

/// Processes whose command line contains `needle`.
fn processes_with(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(needle) {
            found.push(format!(
                "{}: {cmdline}",
                entry.file_name().to_string_lossy()
            ));
        }
    }
    found
}

#[test]
fn cancelling_a_prompt_ends_it_and_kills_the_command() {
    let scratch = Scratch::new("cancel");
    let tag = format!("997.{}", std::process::id());
    let script = scratch.script(&sleeper_script(&tag));
    let mut client = AcpClient::start(&scratch, &script, &["--sandbox-mode", "workspace-write"]);
    let session = client.open_session(&scratch.ws());
    let id = client.send(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "wait"}]}),
    );
    assert!(
        support::wait_for_file(&scratch.ws(), "started", Duration::from_secs(30)),
        "the command never started"
    );
    // Seen running before the cancel. Looked for again until it is: while the shell executes
    // `sleep`, the kernel shows the process's new command line empty for a moment.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while processes_with(&tag).is_empty() && std::time::Instant::now() < deadline {
        std::thread::yield_now();
    }
    assert!(
        !processes_with(&tag).is_empty(),
        "the command is running before the cancel"
    );

    // The cancel, not the command (which sleeps for over 16 minutes), ends the prompt: it is
    // answered at all within a liveness bound, however loaded the machine.
    client.notify("session/cancel", json!({"sessionId": session}));
    let (answer, _) = client.until_response(id, CANCEL_LIVENESS);
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    assert_eq!(
        processes_with(&tag),
        Vec::<String>::new(),
        "no process of the command survives"
    );
}

/// A model that runs one command, then a long one, then answers twice.
fn restart_script(tag: &str) -> String {
    format!(
        r#"
[[turn]]
[[turn.tool_calls]]
name = "bash"
arguments = {{ command = "echo first" }}

[[turn]]
text = "First turn done."

[[turn]]
[[turn.tool_calls]]
name = "bash"
arguments = {{ command = "touch started && exec sleep {tag}" }}

[[turn]]
text = "Back after the restart."
"#
    )
}

#[test]
fn a_killed_agent_restarts_and_session_load_replays_the_session_which_then_continues() {
    let scratch = Scratch::new("restart");
    let tag = format!("996.{}", std::process::id());
    let script = scratch.script(&restart_script(&tag));
    let args = ["--sandbox-mode", "workspace-write"];

    let mut first = AcpClient::start(&scratch, &script, &args);
    let session = first.open_session(&scratch.ws());
    let (answer, live_one) = first.prompt(&session, "one");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let id = first.send(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "two"}]}),
    );
    // Everything the editor was shown of the second turn: up to the long command's tool call.
    let mut live_two = Vec::new();
    loop {
        let message = first
            .next(Duration::from_secs(30))
            .expect("the second turn's tool call");
        assert_ne!(
            message.get("id"),
            Some(&json!(id)),
            "the second prompt ended early: {message}"
        );
        let is_call = message["params"]["update"]["sessionUpdate"] == "tool_call";
        live_two.push(message);
        if is_call {
            break;
        }
    }
    assert!(
        support::wait_for_file(&scratch.ws(), "started", Duration::from_secs(30)),
        "the command never started"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(first.child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill -9 agentd");
    let _ = first.child.wait();

    let mut second = AcpClient::start(&scratch, &script, &args);
    let (init, _) = second.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    assert_eq!(init["result"]["agentCapabilities"]["loadSession"], true);
    let (loaded, replay) = second.request(
        "session/load",
        json!({"sessionId": session, "cwd": scratch.ws(), "mcpServers": []}),
    );
    assert!(loaded.get("result").is_some(), "{loaded}");

    let user = |text: &str| json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": text}});
    let mut expected = vec![user("one")];
    expected.extend(normalized_updates(&live_one));
    expected.push(user("two"));
    expected.extend(normalized_updates(&live_two));
    assert_eq!(normalized_updates(&replay), expected);

    let (answer, notes) = second.prompt(&session, "three");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let said = normalized_updates(&notes);
    assert_eq!(
        said.last().map(|u| u["content"]["text"].clone()),
        Some(json!("Back after the restart."))
    );
}
