//! `agentd run` as a terminal user meets it, with the real agentd and helper: the `--json`
//! facts line is a line of its own after output that did not end one, an interrupted run
//! exits as the interrupt would (130 for SIGINT, 143 for SIGTERM), and `[sandbox]` of the
//! configuration file applies as `agentd config show` lists it, a flag beating it.

mod support;

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use support::acp::Scratch;

/// `agentd run ARGS` with the scratch's small, known environment, in its workspace.
fn agentd_run(scratch: &Scratch, args: &[&str]) -> Command {
    let mut command = scratch.agentd("run");
    command.args(args);
    command
}

#[test]
fn the_facts_line_is_a_line_of_its_own_after_output_without_a_newline() {
    let scratch = Scratch::new("run-facts-line");
    for (stderr, ends_open) in [("no newline", true), ("a line\n", false)] {
        let script = format!("printf '{}' >&2", stderr.replace('\n', "\\n"));
        let out = agentd_run(
            &scratch,
            &["--mode", "read-only", "--json", "--", "sh", "-c", &script],
        )
        .output()
        .expect("run agentd");
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let text = String::from_utf8_lossy(&out.stderr).into_owned();
        let lines: Vec<&str> = text.lines().collect();
        let [output, facts] = lines.as_slice() else {
            panic!("the command's line and the facts line: {text:?}");
        };
        assert_eq!(*output, stderr.trim_end(), "{text:?}");
        let facts: Value = serde_json::from_str(facts).expect("the facts line is JSON");
        assert_eq!(facts["exit"]["code"], 0, "{facts}");
        // The control: a command that ended its line gets no empty line before the facts.
        assert!(!text.contains("\n\n"), "{text:?}");
        assert_eq!(text.starts_with("no newline\n{"), ends_open, "{text:?}");
    }
}

/// A kept verdict the helper no longer takes — its fingerprint is stale, as after an upgrade of
/// the helper — is replaced by the one `agentd run` learns once its command has ended, so the
/// next run's helper skips its probe again. The control: the first run, with nothing kept,
/// learns the same entries.
#[test]
fn a_stale_verdict_is_replaced_by_what_one_run_learns() {
    let scratch = Scratch::new("run-stale-verdicts");
    let cache = scratch.root.join("home/.cache/agentd/helper-verdicts");
    let run = || {
        let out = agentd_run(&scratch, &["--mode", "read-only", "--", "true"])
            .output()
            .expect("run agentd");
        assert_eq!(out.status.code(), Some(0), "{out:?}");
    };
    run();
    let learned = std::fs::read_to_string(&cache).expect("the first run keeps its verdicts");
    assert!(
        learned.lines().any(|l| l.starts_with("usable ")),
        "no usable verdict kept: {learned}"
    );
    let stale: String = learned
        .lines()
        .map(|line| match line.strip_prefix("usable ") {
            Some(entry) => {
                let backend = entry.split(' ').next().unwrap_or_default();
                format!("usable {backend} helper=an-older-build\n")
            }
            None => format!("{line}\n"),
        })
        .collect();
    std::fs::write(&cache, &stale).expect("make the kept verdicts stale");
    run();
    let relearned = std::fs::read_to_string(&cache).expect("the cache");
    assert_eq!(relearned, learned, "the stale entries were kept");
}

#[test]
fn an_interrupted_run_exits_as_the_interrupt_would() {
    for (signal, expected) in [
        (nix::sys::signal::Signal::SIGINT, 130),
        (nix::sys::signal::Signal::SIGTERM, 143),
    ] {
        let scratch = Scratch::new(&format!("run-{signal}"));
        let mut child = agentd_run(
            &scratch,
            &[
                "--mode",
                "workspace-write",
                "--",
                "sh",
                "-c",
                "touch started && exec sleep 300",
            ],
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start agentd run");
        assert!(
            support::wait_for_file(&scratch.ws(), "started", Duration::from_secs(30)),
            "the command never started"
        );
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
        nix::sys::signal::kill(pid, signal).expect("signal");
        assert!(
            support::wait_gone(child.id(), Duration::from_secs(10)),
            "agentd run did not end after {signal}"
        );
        let status = child.wait().expect("status");
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr)
            .expect("stderr");
        assert_eq!(status.code(), Some(expected), "{signal}: {stderr}");
        assert!(stderr.contains("cancelled"), "{signal}: {stderr}");
    }
}

#[test]
fn the_configuration_files_sandbox_mode_applies_and_a_flag_beats_it() {
    let scratch = Scratch::new("run-config-mode");
    let touch = |scratch: &Scratch, file: &str, flags: &[&str]| {
        let mut args = flags.to_vec();
        args.extend(["--json", "--", "touch", file]);
        let out = agentd_run(scratch, &args).output().expect("run agentd");
        let text = String::from_utf8_lossy(&out.stderr).into_owned();
        let facts: Value = text
            .lines()
            .last()
            .and_then(|l| serde_json::from_str(l).ok())
            .unwrap_or_else(|| panic!("a facts line: {text}"));
        (scratch.ws().join(file).exists(), facts)
    };
    // The control: without a configuration, agentd run's own default, read-only.
    let (landed, facts) = touch(&scratch, "default.txt", &[]);
    assert!(!landed, "{facts}");
    assert_eq!(facts["denied"], true, "{facts}");
    scratch.config("[sandbox]\nmode = \"workspace-write\"\n");
    let show = scratch
        .agentd("config")
        .arg("show")
        .output()
        .expect("config show");
    let show = String::from_utf8_lossy(&show.stdout).into_owned();
    let from_file = format!(
        "sandbox.mode = \"workspace-write\"  ({})",
        scratch.root.join("config/agentd/agentd.toml").display()
    );
    assert!(show.contains(&from_file), "{show}");
    let (landed, facts) = touch(&scratch, "configured.txt", &[]);
    assert!(landed, "the file's mode applies: {facts}");
    let (landed, facts) = touch(&scratch, "flagged.txt", &["--mode", "read-only"]);
    assert!(!landed, "the flag beats the file: {facts}");
}

#[test]
fn sandbox_env_reaches_the_command_and_env_flags_beat_it() {
    let scratch = Scratch::new("run-sandbox-env");
    scratch.config(
        "[sandbox.env]\npass = [\"HANDED_ON\"]\nset = { SET_ME = \"from the file\", BEATEN = \"file\" }\n",
    );
    let show = "printf '%s|%s|%s|%s' \"$SET_ME\" \"$HANDED_ON\" \"$BEATEN\" \"$NOT_PASSED\"";
    let out = agentd_run(&scratch, &["--env", "BEATEN=flag", "--", "sh", "-c", show])
        .env("HANDED_ON", "from agentd")
        .env("NOT_PASSED", "stays behind")
        .output()
        .expect("run agentd");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "from the file|from agentd|flag|"
    );
    // A passed name that looks like a secret is refused by the helper, with the reason.
    scratch.config("[sandbox.env]\npass = [\"GITHUB_TOKEN\"]\n");
    let out = agentd_run(&scratch, &["--json", "--", "true"])
        .env("GITHUB_TOKEN", "t0ken")
        .output()
        .expect("run agentd");
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let facts: Value = serde_json::from_str(stderr.lines().last().unwrap_or_default())
        .unwrap_or_else(|_| panic!("facts: {stderr}"));
    assert!(
        facts["refused"]
            .as_str()
            .is_some_and(|r| r.contains("GITHUB_TOKEN")),
        "{facts}"
    );
    assert!(
        !stderr.contains("t0ken"),
        "the value is never shown: {stderr}"
    );
}

#[test]
fn a_command_runs_in_the_workspace_and_a_working_directory_under_tmp_stays_visible() {
    // Someone trying things: a checkout under /tmp, agentd started there, the workspace
    // elsewhere — whose command's own /tmp, under the helper's own namespaces or bwrap, is a
    // private directory.
    let here = Scratch::new_in(std::path::Path::new("/tmp"), "run-cwd-under-tmp");
    let checkout = here.ws();
    std::fs::write(checkout.join("notes.txt"), "from the checkout\n").expect("notes");
    let elsewhere = Scratch::new_in(&support::acp::scratch_base(), "run-cwd-ws");
    let ws = elsewhere.ws();
    let run = |backend: &str, extra: &[&str], script: &str| {
        let mut args = vec![
            "--backend",
            backend,
            "--mode",
            "workspace-write",
            "--workspace",
            ws.to_str().expect("utf-8"),
        ];
        args.extend_from_slice(extra);
        args.extend(["--", "sh", "-c", script]);
        let out = agentd_run(&here, &args).output().expect("run agentd");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // The backends that work here, judged without the helper (`support::backends`).
    for backend in support::backends() {
        // By default the command runs in the workspace, and writes there.
        let (code, out, err) = run(backend, &[], "pwd; echo made > made.txt");
        assert_eq!(code, Some(0), "{backend}: {err}");
        assert_eq!(out.trim(), ws.to_str().expect("utf-8"), "{backend}: {err}");
        assert_eq!(
            std::fs::read_to_string(ws.join("made.txt")).expect("made.txt"),
            "made\n"
        );
        std::fs::remove_file(ws.join("made.txt")).expect("remove made.txt");
        // Asked to run where agentd was started, it runs there and sees it, read-only: the
        // private /tmp shows the directory as it is on the host, nothing else of the host's
        // /tmp. (Before, bwrap could not even change into it.)
        let (code, out, err) = run(
            backend,
            &["--cwd", "."],
            "pwd; cat notes.txt; echo x > written.txt || echo not-written",
        );
        assert_eq!(code, Some(0), "{backend}: {err}");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines,
            [
                checkout.to_str().expect("utf-8"),
                "from the checkout",
                "not-written"
            ],
            "{backend}: {err}"
        );
        assert!(!checkout.join("written.txt").exists());
    }
    // A --cwd that is not there is agentd's own clear error, and nothing runs.
    let (code, _, err) = run("landlock", &["--cwd", "no-such-dir"], "echo ran");
    assert_eq!(code, Some(125), "{err}");
    assert!(
        err.contains("no-such-dir") && err.contains("--cwd"),
        "the error names the directory and the flag: {err}"
    );
}

/// agentd starts its helper while it prepares the command; a run that stops before the
/// command (here a `--cwd` that is not there) ends that helper before its socket closes, so
/// the person reads one line, agentd's own, and no word from a helper that was never asked
/// anything. Several runs, since the helper's start and agentd's end race.
#[test]
fn a_run_stopped_before_its_command_says_only_why() {
    let scratch = Scratch::new("run-stopped-early");
    for _ in 0..5 {
        let out = agentd_run(&scratch, &["--cwd", "no-such-dir", "--", "true"])
            .output()
            .expect("run agentd");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(125), "{err}");
        let lines: Vec<&str> = err.lines().collect();
        assert!(
            matches!(lines[..], [line] if line.contains("no-such-dir") && line.contains("--cwd")),
            "only agentd's own line: {err:?}"
        );
    }
}
