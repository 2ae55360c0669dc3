//! What the model reads when the sandbox denies a command, over the real wire and the real
//! kernel: the marker names the kind of denial, the escalation line the mode that would lift it,
//! and a failure the sandbox did not cause gets neither. (The model's text is read from the
//! session log: the editor is shown a line for a person instead of the escalation line.) Each denial is paired with a control
//! that succeeds (inside the workspace, or in a danger-full-access session).

mod support;

use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{Value, json};
use support::acp::{AcpClient, Scratch, normalized_updates, scratch_base};

/// A script with one turn per command, each one bash call, then a closing text.
fn script(commands: &[&str]) -> String {
    let mut text = String::new();
    for command in commands {
        // A JSON string is a valid TOML basic string.
        let quoted = serde_json::to_string(command).expect("json");
        text.push_str(&format!(
            "[[turn]]\n[[turn.tool_calls]]\nname = \"bash\"\narguments = {{ command = {quoted} }}\n\n"
        ));
    }
    text.push_str("[[turn]]\ntext = \"Done.\"\n");
    text
}

/// Runs `commands` in one session of `mode` confined by `backend` (one that works here:
/// [`support::backends`]); returns their `tool_call_update`s in order.
fn run_on(backend: &str, scratch: &Scratch, mode: &str, commands: &[&str]) -> Vec<Value> {
    scratch.config(&format!("[sandbox]\nbackend = \"{backend}\"\n"));
    let results = run(scratch, mode, commands);
    assert_eq!(
        results[0]["_meta"]["agentd"]["facts"]["backend"], backend,
        "{backend} works here, but the command did not run under it: {}",
        results[0]
    );
    results
}

/// Runs `commands` in one session of `mode`; returns their `tool_call_update`s in order, each
/// with what the model read of it (its logged `tool/result` output) as `modelText`.
fn run(scratch: &Scratch, mode: &str, commands: &[&str]) -> Vec<Value> {
    let script = scratch.script(&script(commands));
    let mut client = AcpClient::start(scratch, &script, &["--sandbox-mode", mode]);
    let session = client.open_session(&scratch.ws());
    let (answer, notes) = client.prompt(&session, "go");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let log = scratch.log(&session);
    // Without live output, which a slow command may show before its result.
    let results: Vec<Value> = normalized_updates(&notes)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update")
        .map(|mut update| {
            let logged = log
                .iter()
                .find(|r| r["type"] == "tool/result" && r["call_id"] == update["toolCallId"]);
            update["modelText"] = logged.map_or(Value::Null, |r| r["output"].clone());
            update
        })
        .collect();
    assert_eq!(results.len(), commands.len(), "{results:#?}");
    results
}

/// What the model read of a result.
fn text(result: &Value) -> String {
    result["modelText"].as_str().unwrap_or_default().to_owned()
}

/// The text blocks the editor was shown of a result, in order.
fn shown(result: &Value) -> Vec<String> {
    result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|block| block["content"]["text"].as_str())
        .map(str::to_owned)
        .collect()
}

/// The marker lines of a result: every line agentd adds that starts with `[sandbox: `.
fn sandbox_lines(result: &Value) -> Vec<String> {
    text(result)
        .lines()
        .filter(|l| l.starts_with("[sandbox: "))
        .map(str::to_owned)
        .collect()
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

#[test]
fn a_write_outside_the_workspace_is_named_a_file_write_and_one_inside_lands() {
    for backend in support::backends() {
        let scratch = Scratch::new_in(&scratch_base(), &format!("denial-write-{backend}"));
        let commands = ["printf x > ../outside.txt", "printf x > inside.txt"];
        let results = run_on(backend, &scratch, "workspace-write", &commands);
        a_write_outside_is_a_file_write(&scratch, &results);
    }
}

fn a_write_outside_is_a_file_write(scratch: &Scratch, results: &[Value]) {
    let outside = scratch.root.join("outside.txt");

    assert_eq!(results[0]["status"], "failed", "{}", results[0]);
    assert_eq!(
        sandbox_lines(&results[0]),
        [
            "[sandbox: file write outside the writable roots denied under workspace-write mode]",
            "[sandbox: escalation available — only danger-full-access allows these file writes: \
             retry this exact command once with sandbox_permissions \"danger-full-access\" + \
             justification if the task needs it; the approval prompt asks the user]",
        ],
        "{}",
        text(&results[0])
    );
    assert!(text(&results[0]).ends_with("\n[exit code: 1]"));
    // The editor is shown a line for a person first, and the model's text without the hint.
    let shown = shown(&results[0]);
    assert_eq!(
        shown[0],
        "Blocked by the sandbox (workspace-write): file write outside the writable roots; the \
         agent may ask to retry with more access.",
        "{shown:?}"
    );
    let model_text = text(&results[0]);
    let without_hint: Vec<&str> = model_text
        .lines()
        .filter(|l| !l.starts_with("[sandbox: escalation available"))
        .collect();
    assert_eq!(shown.last(), Some(&without_hint.join("\n")), "{shown:?}");
    assert_eq!(
        results[0]["_meta"]["agentd"]["facts"]["denials"],
        json!(["file-write"])
    );
    assert!(!outside.exists(), "the write outside reached the host");

    // The control: the same write inside the workspace lands, with no marker.
    assert_eq!(results[1]["status"], "completed", "{}", results[1]);
    assert_eq!(text(&results[1]), "[exit code: 0]");
    assert_eq!(
        std::fs::read_to_string(scratch.ws().join("inside.txt")).expect("written"),
        "x"
    );
}

#[test]
fn a_connection_with_the_network_denied_is_named_network_and_a_unix_socket_a_system_interface() {
    if !support::available::on_path("python3") {
        let why = "python3, which the commands run, is not installed (apt-get install python3)";
        support::skip::skip(
            &support::skip::this_test(),
            support::skip::Need::Python3,
            why,
        );
        return;
    }
    let backends = support::backends();
    if backends.is_empty() {
        return;
    }
    let listener = TcpListener::bind("127.0.0.1:0").expect("listen");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("address").port();
    let accepted = || std::iter::from_fn(|| listener.accept().ok()).count();
    let connect = format!(
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port})).close()\""
    );
    let unix = "python3 -c \"import socket; socket.socket(socket.AF_UNIX).close()\"";

    for backend in backends {
        let scratch = Scratch::new(&format!("denial-network-{backend}"));
        let results = run_on(backend, &scratch, "workspace-write", &[&connect, unix]);
        network_and_unix_sockets_are_named(&results);
        assert_eq!(
            accepted(),
            0,
            "the listener heard from the confined command"
        );
    }

    // The control: unconfined, the connection arrives and the socket opens.
    let control = Scratch::new("denial-network-control");
    let results = run(&control, "danger-full-access", &[&connect, unix]);
    for result in &results {
        assert_eq!(result["status"], "completed", "{result}");
        assert_eq!(text(result), "[exit code: 0]");
    }
    assert_eq!(accepted(), 1, "the control's connection did not arrive");
}

fn network_and_unix_sockets_are_named(results: &[Value]) {
    assert_eq!(results[0]["status"], "failed", "{}", results[0]);
    let lines = sandbox_lines(&results[0]);
    assert_eq!(
        lines[0],
        "[sandbox: network access denied under workspace-write mode]",
        "{}",
        text(&results[0])
    );
    assert_eq!(
        lines.len(),
        2,
        "one marker and the escalation line: {lines:?}"
    );
    assert!(
        lines[1].contains("only danger-full-access allows network access (no file mode does")
            && lines[1].contains("sandbox.network is \"deny\""),
        "{}",
        lines[1]
    );
    assert_eq!(
        results[0]["_meta"]["agentd"]["facts"]["denials"],
        json!(["network"])
    );

    assert_eq!(results[1]["status"], "failed", "{}", results[1]);
    assert_eq!(
        sandbox_lines(&results[1])[0],
        "[sandbox: system interface (Unix sockets, tracing, mounts and the like) denied under \
         workspace-write mode]",
        "{}",
        text(&results[1])
    );
    assert_eq!(
        results[1]["_meta"]["agentd"]["facts"]["denials"],
        json!(["system-interface"])
    );
}

#[test]
fn a_file_its_user_may_not_read_is_a_denial_only_when_the_sandbox_is_the_reason() {
    for backend in support::backends() {
        let scratch = Scratch::new(&format!("denial-read-{backend}"));
        let secret = scratch.ws().join("secret");
        std::fs::write(&secret, "secret\n").expect("write");
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o000)).expect("chmod");
        let confined = run_on(backend, &scratch, "workspace-write", &["cat secret"]);
        a_closed_file_is_judged_by_its_user(&scratch, &secret, &confined);
    }
}

fn a_closed_file_is_judged_by_its_user(scratch: &Scratch, secret: &Path, confined: &[Value]) {
    let control = run(scratch, "danger-full-access", &["cat secret"]);
    assert_eq!(confined[0]["status"], "failed", "{}", confined[0]);
    if is_root() {
        // Root reads it only with the capability it loses in the sandbox: the sandbox is why.
        assert_eq!(
            sandbox_lines(&confined[0])[0],
            "[sandbox: file read denied under workspace-write mode]",
            "{}",
            text(&confined[0])
        );
        assert_eq!(
            confined[0]["_meta"]["agentd"]["facts"]["denials"],
            json!(["file-read"])
        );
        assert_eq!(control[0]["status"], "completed", "{}", control[0]);
        assert_eq!(text(&control[0]), "secret\n[exit code: 0]");
    } else {
        // Anyone else may not read it at all: the file's permissions are why, not the sandbox.
        assert_eq!(
            sandbox_lines(&confined[0]),
            Vec::<String>::new(),
            "{}",
            text(&confined[0])
        );
        assert_eq!(confined[0]["_meta"]["agentd"]["facts"]["denied"], false);
        assert_eq!(control[0]["status"], "failed", "{}", control[0]);
        assert!(text(&control[0]).contains("Permission denied"));
        // And what it may read, it reads in the sandbox too.
        std::fs::set_permissions(secret, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let readable = run(scratch, "workspace-write", &["cat secret"]);
        assert_eq!(text(&readable[0]), "secret\n[exit code: 0]");
    }
}

#[test]
fn an_ordinary_failure_and_denial_words_a_command_prints_get_no_marker() {
    let commands = [
        "ls missing",
        "echo 'error: permission denied: you are not a maintainer of this project' >&2; exit 1",
        "echo 'Permission denied' >&2; echo 'Read-only file system' >&2",
        "ls present",
    ];
    for backend in support::backends() {
        let scratch = Scratch::new(&format!("denial-none-{backend}"));
        std::fs::write(scratch.ws().join("present"), "").expect("fixture");
        let results = run_on(backend, &scratch, "workspace-write", &commands);
        no_marker_on_any(&results);
    }
}

fn no_marker_on_any(results: &[Value]) {
    for (i, status) in ["failed", "failed", "completed", "completed"]
        .iter()
        .enumerate()
    {
        let result = &results[i];
        assert_eq!(result["status"], *status, "{result}");
        assert_eq!(
            sandbox_lines(result),
            Vec::<String>::new(),
            "{}",
            text(result)
        );
        assert_eq!(
            result["_meta"]["agentd"]["facts"]["denied"], false,
            "{result}"
        );
        assert_eq!(
            result["_meta"]["agentd"]["facts"]["denials"],
            json!([]),
            "{result}"
        );
    }
}
