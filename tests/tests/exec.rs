//! `agentd exec` as a user runs it: one prompt, a scripted model, the real helper and kernel.
//! What it prints, how it exits for each ending, how `--approve` answers an escalation (checked
//! on the host, with its control), and the `--json` transcript, snapshotted.

mod support;

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use support::acp::{LiveOutput, Scratch, is_enforcement_notice, scratch_base};

/// How one `agentd exec` ended.
#[derive(Debug)]
struct Ran {
    status: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Ran {
    /// The stdout lines of `--json`, each parsed (a line that is not JSON fails the test).
    fn json_lines(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .map(|line| {
                serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
            })
            .collect()
    }
}

/// `agentd exec` with `args`, the scratch's state dir and config home, a clean environment, and
/// a directory that is not the workspace (so a test says which one it means).
fn command(scratch: &Scratch, args: &[&OsStr]) -> Command {
    let mut command = Command::new(support::binary("agentd"));
    command
        .arg("exec")
        .arg("--state-dir")
        .arg(scratch.state())
        .args(args)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", scratch.root.join("home"))
        .env("XDG_CONFIG_HOME", scratch.root.join("config"))
        .env("LANG", "C.UTF-8")
        .current_dir(scratch.root.join("home"));
    command
}

/// Runs `agentd exec` to its end, with `stdin` as its input.
fn exec(scratch: &Scratch, args: &[&OsStr], stdin: &str) -> Ran {
    let mut child = command(scratch, args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start agentd exec");
    let mut input = child.stdin.take().expect("stdin");
    input.write_all(stdin.as_bytes()).expect("write the prompt");
    drop(input);
    let out = child.wait_with_output().expect("agentd exec ends");
    Ran {
        status: out.status.code(),
        stdout: String::from_utf8(out.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(out.stderr).expect("stderr is UTF-8"),
    }
}

/// `agentd exec --model-script SCRIPT --cwd WS EXTRA... PROMPT`, nothing on stdin.
fn exec_script(scratch: &Scratch, script: &str, extra: &[&str], prompt: &str) -> Ran {
    let script = scratch.script(script);
    let ws = scratch.ws();
    let mut args: Vec<&OsStr> = vec![
        "--model-script".as_ref(),
        script.as_os_str(),
        "--cwd".as_ref(),
        ws.as_os_str(),
    ];
    args.extend(extra.iter().map(OsStr::new));
    args.push(prompt.as_ref());
    exec(scratch, &args, "")
}

/// The ids of the session logs in the scratch's state dir.
fn session_ids(scratch: &Scratch) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(scratch.state())
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| {
                    e.file_name()
                        .to_str()
                        .and_then(|n| n.strip_suffix(".jsonl"))
                        .map(str::to_owned)
                })
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids
}

const ANSWER: &str = r#"
[[turn]]
text = "The answer is 42."
"#;

#[test]
fn the_answer_is_printed_on_stdout_and_the_exit_is_zero() {
    let scratch = Scratch::new("exec-answer");
    let ran = exec_script(&scratch, ANSWER, &[], "What is the answer?");
    assert_eq!(ran.status, Some(0), "{ran:?}");
    assert_eq!(ran.stdout, "The answer is 42.\n");
    assert_eq!(ran.stderr, "", "nothing to say but the answer");
    // The prompt ran in the workspace given, and was recorded like an editor's.
    let ids = session_ids(&scratch);
    assert_eq!(ids.len(), 1, "{ids:?}");
    let log = scratch.log(&ids[0]);
    assert_eq!(log[0]["cwd"], json!(scratch.ws()), "{}", log[0]);
    assert!(
        log.iter()
            .any(|r| r["type"] == "prompt/submitted" && r["text"] == "What is the answer?"),
        "{log:#?}"
    );
}

#[test]
fn a_dash_reads_the_prompt_from_stdin() {
    let scratch = Scratch::new("exec-stdin");
    let script = scratch.script(ANSWER);
    let ws = scratch.ws();
    let args: Vec<&OsStr> = vec![
        "--model-script".as_ref(),
        script.as_os_str(),
        "--cwd".as_ref(),
        ws.as_os_str(),
        "-".as_ref(),
    ];
    let ran = exec(&scratch, &args, "A prompt\nof two lines\n");
    assert_eq!(ran.status, Some(0), "{ran:?}");
    assert_eq!(ran.stdout, "The answer is 42.\n");
    let log = scratch.log(&session_ids(&scratch)[0]);
    assert!(
        log.iter()
            .any(|r| r["type"] == "prompt/submitted" && r["text"] == "A prompt\nof two lines\n"),
        "{log:#?}"
    );

    // Nothing on stdin is no prompt: nothing is asked of the model.
    let empty = Scratch::new("exec-stdin-empty");
    let script = empty.script(ANSWER);
    let args: Vec<&OsStr> = vec!["--model-script".as_ref(), script.as_os_str(), "-".as_ref()];
    let ran = exec(&empty, &args, " \n");
    assert_eq!(ran.status, Some(125), "{ran:?}");
    assert_eq!(
        ran.stderr,
        "agentd: the prompt is empty: give it as the last argument, or `-` and the prompt on \
         stdin\n"
    );
    assert!(session_ids(&empty).is_empty(), "no session was started");
}

#[test]
fn a_failing_model_exits_1_with_its_error_on_stderr() {
    let scratch = Scratch::new("exec-model-fails");
    let failing = r#"
[[turn]]
error = "simulated outage"
"#;
    let ran = exec_script(&scratch, failing, &[], "hello");
    assert_eq!(ran.status, Some(1), "{ran:?}");
    // The failure is said once, on stderr, as the prompt's error: not also as the agent's text
    // an editor is shown, nor as agentd's log line of it.
    assert_eq!(ran.stdout, "");
    let said: Vec<&str> = ran
        .stderr
        .lines()
        .filter(|line| line.contains("simulated outage"))
        .collect();
    assert_eq!(
        said,
        [
            "agentd: the prompt failed: scripted model failure (turn 1): simulated outage \
             {\"kind\":\"scripted\",\"status\":null,\"retries\":0}"
        ],
        "{}",
        ran.stderr
    );

    // The same with --json: the error is the last line, as the prompt's JSON-RPC error.
    let ran = exec_script(&scratch, failing, &["--json"], "hello");
    assert_eq!(ran.status, Some(1), "{ran:?}");
    let lines = ran.json_lines();
    let last = lines.last().expect("a last line");
    assert_eq!(last["error"]["code"], -32603, "{last}");
    assert!(
        last["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("simulated outage")),
        "{last}"
    );
}

#[test]
fn every_other_ending_has_its_own_status() {
    let cut = r#"
[[turn]]
text = "The answer is"
finish = "length"
"#;
    let refused = r#"
[[turn]]
text = "No."
finish = "content_filter"
"#;
    let endless = r#"
[[turn]]
[[turn.tool_calls]]
name = "bash"
arguments = { command = "true" }
"#;
    for (tag, script, config, status, said) in [
        ("exec-max-tokens", cut, "", 3, "max_tokens"),
        ("exec-refusal", refused, "", 4, "refusal"),
        (
            "exec-max-steps",
            endless,
            "[session]\nmax_steps = 1\n",
            5,
            "max_turn_requests",
        ),
    ] {
        let scratch = Scratch::new(tag);
        scratch.config(config);
        let ran = exec_script(&scratch, script, &["--json"], "go");
        assert_eq!(ran.status, Some(status), "{tag}: {ran:?}");
        let lines = ran.json_lines();
        assert_eq!(lines.last(), Some(&json!({"stopReason": said})), "{tag}");
        assert!(
            ran.stderr
                .contains(&format!("agentd: the turn ended: {said}")),
            "{tag}: {}",
            ran.stderr
        );
    }
}

#[test]
fn a_bad_cwd_or_configuration_is_a_clear_error_and_nothing_runs() {
    let scratch = Scratch::new("exec-bad-start");
    let script = scratch.script(ANSWER);
    let missing = scratch.root.join("no-such-dir");
    let args: Vec<&OsStr> = vec![
        "--model-script".as_ref(),
        script.as_os_str(),
        "--cwd".as_ref(),
        missing.as_os_str(),
        "hello".as_ref(),
    ];
    let ran = exec(&scratch, &args, "");
    assert_eq!(ran.status, Some(125), "{ran:?}");
    assert_eq!(ran.stdout, "");
    assert_eq!(
        ran.stderr,
        format!(
            "agentd: --cwd {}: No such file or directory (os error 2): give an existing \
             directory\n",
            missing.display()
        )
    );
    assert!(session_ids(&scratch).is_empty(), "no session was started");

    let config = scratch.root.join("missing.toml");
    let args: Vec<&OsStr> = vec![
        "--json".as_ref(),
        "--config".as_ref(),
        config.as_os_str(),
        "hello".as_ref(),
    ];
    let ran = exec(&scratch, &args, "");
    assert_eq!(ran.status, Some(125), "{ran:?}");
    assert!(
        ran.stderr.starts_with("agentd: ") && ran.stderr.contains(&config.display().to_string()),
        "{}",
        ran.stderr
    );
    let lines = ran.json_lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0]["error"]["message"].is_string(), "{}", lines[0]);

    // The control: the same start with a workspace that exists answers.
    let ran = exec_script(&scratch, ANSWER, &[], "hello");
    assert_eq!(ran.status, Some(0), "{ran:?}");
}

/// A model that, in a workspace-write session, writes `outside.txt` beside the workspace (so
/// outside it) with one command escalated to danger-full-access, then answers.
const ESCALATING: &str = r#"
[[turn]]
text = "Writing the note."
[[turn.tool_calls]]
name = "bash"
arguments = { command = "echo note > ../outside.txt", sandbox_permissions = "danger-full-access", justification = "the note belongs beside the workspace" }

[[turn]]
text = "Done."
"#;

#[test]
fn approve_none_rejects_an_escalation_and_approve_escalations_allows_it() {
    for (approve, lands) in [("none", false), ("escalations", true), ("all", true)] {
        let scratch = Scratch::new_in(&scratch_base(), &format!("exec-approve-{approve}"));
        let outside = scratch.root.join("outside.txt");
        let ran = exec_script(
            &scratch,
            ESCALATING,
            &["--sandbox-mode", "workspace-write", "--approve", approve],
            "write the note",
        );
        assert_eq!(ran.status, Some(0), "{approve}: {ran:?}");
        let said = if lands { "allowed once" } else { "rejected" };
        let asked = format!(
            "permission: Run `echo note > ../outside.txt` with danger-full-access (now \
             workspace-write): the note belongs beside the workspace — {said} by --approve \
             {approve}\n"
        );
        let status = if lands { "completed" } else { "failed" };
        let tool =
            format!("tool: echo note > ../outside.txt (with danger-full-access) — {status}\n");
        assert_eq!(ran.stderr, format!("{asked}{tool}"), "{approve}");
        assert_eq!(ran.stdout, "Writing the note.\nDone.\n", "{approve}");
        // On the host: the file exists only when the escalation was allowed.
        assert_eq!(outside.exists(), lands, "{approve}: {}", outside.display());
        if lands {
            assert_eq!(std::fs::read_to_string(&outside).expect("note"), "note\n");
        }
        let log = scratch.log(&session_ids(&scratch)[0]);
        let decided: Vec<&Value> = log
            .iter()
            .filter(|r| r["type"] == "approval/decided")
            .collect();
        assert_eq!(decided.len(), 1, "{approve}: {log:#?}");
        let outcome = if lands { "allowed-once" } else { "rejected" };
        assert_eq!(decided[0]["outcome"], outcome, "{approve}");
    }
}

#[test]
fn approve_escalations_rejects_what_is_not_an_escalation() {
    let scratch = Scratch::new("exec-approve-ask-before");
    scratch.config("[approval]\nask_before = [\"write_file\"]\n");
    let script = r#"
[[turn]]
[[turn.tool_calls]]
name = "write_file"
arguments = { path = "note.txt", content = "hi" }

[[turn]]
text = "Done."
"#;
    let ran = exec_script(
        &scratch,
        script,
        &[
            "--sandbox-mode",
            "workspace-write",
            "--approve",
            "escalations",
        ],
        "write",
    );
    assert_eq!(ran.status, Some(0), "{ran:?}");
    assert!(
        ran.stderr.contains(
            "permission: Write note.txt: write_file is listed in approval.ask_before — \
                 rejected by --approve escalations"
        ),
        "{}",
        ran.stderr
    );
    assert!(
        !scratch.ws().join("note.txt").exists(),
        "nothing was written"
    );

    // The control: --approve all lets the same call write.
    let ran = exec_script(
        &scratch,
        script,
        &["--sandbox-mode", "workspace-write", "--approve", "all"],
        "write",
    );
    assert_eq!(ran.status, Some(0), "{ran:?}");
    assert_eq!(
        std::fs::read_to_string(scratch.ws().join("note.txt")).expect("written"),
        "hi"
    );
}

/// Facts that vary with the machine become placeholders (see `acp_wire`).
fn redact_volatile(line: &mut Value) {
    for at in ["/update/rawOutput", "/update/_meta/agentd/facts"] {
        if let Some(raw) = line.pointer_mut(at) {
            for key in ["backend", "enforcement"] {
                if raw.get(key).is_some() {
                    raw[key] = json!(format!("<{key}>"));
                }
            }
        }
    }
}

#[test]
fn the_json_lines_all_parse_and_end_with_the_stop_reason() {
    let scratch = Scratch::new_in(&scratch_base(), "exec-json");
    let outside = scratch.root.join("outside.txt");
    let ran = exec_script(
        &scratch,
        ESCALATING,
        &[
            "--json",
            "--sandbox-mode",
            "workspace-write",
            "--approve",
            "escalations",
        ],
        "write the note",
    );
    assert_eq!(ran.status, Some(0), "{ran:?}");
    assert!(outside.exists(), "the allowed escalation wrote the note");
    let lines = ran.json_lines();
    assert_eq!(lines.last(), Some(&json!({"stopReason": "end_turn"})));
    let session = lines[0]["sessionId"]
        .as_str()
        .expect("a session id")
        .to_owned();
    let mut live = LiveOutput::default();
    let mut shown = Vec::new();
    for mut line in lines {
        // Live output depends on how fast the command ran: left out.
        if line.get("update").is_some_and(|u| live.is_live(u)) {
            continue;
        }
        // So is the notice of partial enforcement, which only some hosts' backends give.
        if line.get("update").is_some_and(is_enforcement_notice) {
            continue;
        }
        redact_volatile(&mut line);
        let mut text = serde_json::to_string(&line).expect("json");
        for (from, to) in [
            (session.as_str(), "<session>"),
            (&scratch.root.display().to_string(), "<scratch>"),
        ] {
            text = text.replace(from, to);
        }
        shown.push(text);
    }
    insta::assert_snapshot!("json_transcript", shown.join("\n"));
}

#[test]
fn sigint_cancels_the_turn_and_exits_130_once_it_has_ended() {
    let scratch = Scratch::new("exec-sigint");
    let tag = format!("996.{}", std::process::id());
    let script = scratch.script(&format!(
        r#"
[[turn]]
[[turn.tool_calls]]
name = "bash"
arguments = {{ command = "touch started && exec sleep {tag}" }}

[[turn]]
text = "Still here."
"#
    ));
    let ws = scratch.ws();
    let args: Vec<&OsStr> = vec![
        "--json".as_ref(),
        "--model-script".as_ref(),
        script.as_os_str(),
        "--cwd".as_ref(),
        ws.as_os_str(),
        "--sandbox-mode".as_ref(),
        "workspace-write".as_ref(),
        "wait".as_ref(),
    ];
    let mut child = command(&scratch, &args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start agentd exec");
    assert!(
        support::wait_for_file(&ws, "started", Duration::from_secs(30)),
        "the command never started"
    );
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).expect("SIGINT");
    assert!(
        support::wait_gone(child.id(), Duration::from_secs(10)),
        "agentd exec did not end after SIGINT"
    );
    let stdout = child.stdout.take().expect("stdout");
    let lines: Vec<Value> = BufReader::new(stdout)
        .lines()
        .map(|l| serde_json::from_str(&l.expect("a line")).expect("JSON"))
        .collect();
    let status = child.wait().expect("status");
    assert_eq!(status.code(), Some(130), "{lines:#?}");
    assert_eq!(lines.last(), Some(&json!({"stopReason": "cancelled"})));
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr)
        .expect("stderr");
    assert!(
        stderr.contains("agentd: interrupted: cancelling the turn"),
        "{stderr}"
    );
    assert!(
        stderr.contains("agentd: the turn ended: cancelled"),
        "{stderr}"
    );
    let survivors: Vec<String> = std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&tag))
        .collect();
    assert_eq!(survivors, Vec::<String>::new(), "the command was killed");
}
