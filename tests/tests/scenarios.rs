//! agentd and confine-helper as real processes: many commands through one connection, the
//! helper killed under a running command, and `agentd run`'s facts and exit statuses.

mod support;

use std::process::{Command, Stdio};
use std::time::Duration;

use agentd::api::cli::{RunArgs, run_job};
use agentd::api::helper_client::{FailedAt, HelperClient, HelperEndpoint, Outcome, SpawnSpec};
use confine_protocol::{ExitStatus, Mode};
use support::{binary, wait_gone};

/// How long what a test waits for may take to happen: a liveness bound, never a measurement.
const LIVENESS: Duration = Duration::from_secs(30);

fn client() -> HelperClient {
    HelperClient::new(HelperEndpoint::Embedded(binary("confine-helper")))
}

fn no_interrupts() -> (
    tokio::sync::mpsc::UnboundedSender<()>,
    tokio::sync::mpsc::UnboundedReceiver<()>,
) {
    tokio::sync::mpsc::unbounded_channel()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_concurrent_runs_share_one_helper_and_all_complete_correctly() {
    let client = client();
    client.connect().await.expect("connect");
    let helper = client.helper_pid().expect("embedded helper pid");
    let runs = (0..64u32).map(|i| {
        let client = client.clone();
        async move {
            let mut args = RunArgs::new([
                "sh",
                "-c",
                &format!("echo out-{i}; echo err-{i} >&2; exit $(({i} % 7))"),
            ]);
            args.mode = Mode::DangerFullAccess;
            let mut out = Vec::new();
            let mut err = Vec::new();
            let (_keep, interrupts) = no_interrupts();
            let facts = run_job(&client, args, &mut out, &mut err, interrupts)
                .await
                .expect("run");
            (i, facts, out, err)
        }
    });
    let results = futures_join_all(runs).await;
    assert_eq!(results.len(), 64);
    for (i, facts, out, err) in results {
        assert_eq!(
            facts.exit,
            Some(ExitStatus::Code((i % 7) as i32)),
            "run {i}"
        );
        assert_eq!(String::from_utf8_lossy(&out), format!("out-{i}\n"));
        assert!(
            String::from_utf8_lossy(&err).starts_with(&format!("err-{i}\n")),
            "run {i}: {}",
            String::from_utf8_lossy(&err)
        );
    }
    assert_eq!(
        client.helper_pid(),
        Some(helper),
        "one helper served every run"
    );
}

/// Joins futures without another dependency: each runs as its own task.
async fn futures_join_all<F, T>(futures: impl IntoIterator<Item = F>) -> Vec<T>
where
    F: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let handles: Vec<_> = futures.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(handles.len());
    for handle in handles {
        out.push(handle.await.expect("task"));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_helper_fails_the_running_command_and_the_next_respawns_it() {
    let client = client();
    let mut spec = SpawnSpec::new(["sleep", "1000"]);
    spec.policy.mode = Mode::DangerFullAccess;
    spec.env = vec![("PATH".into(), "/usr/bin:/bin".into())];
    let mut handle = client.spawn(spec).await.expect("spawn");
    let started = handle.started().await.expect("started");
    let helper = client.helper_pid().expect("helper pid");

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(helper as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill -9 the helper");
    // The helper's death, not the command (which sleeps for over 16 minutes), ends it: at all
    // within a liveness bound, however loaded the machine.
    let outcome = tokio::time::timeout(LIVENESS, handle.wait())
        .await
        .expect("the command ended after the helper's death");
    match outcome {
        Outcome::RunnerFailed(f) => {
            assert_eq!(f.stage, FailedAt::HelperExited);
            assert!(f.detail.contains("confine-helper exited"), "{}", f.detail);
        }
        other => panic!("expected a runner failure, got {other:?}"),
    }
    assert!(
        wait_gone(started.pid, LIVENESS),
        "the command's tree died with its helper"
    );

    let mut spec = SpawnSpec::new(["sh", "-c", "exit 5"]);
    spec.policy.mode = Mode::DangerFullAccess;
    spec.env = vec![("PATH".into(), "/usr/bin:/bin".into())];
    let outcome = client.spawn(spec).await.expect("respawn").wait().await;
    match outcome {
        Outcome::Exited(e) => assert_eq!(e.status, ExitStatus::Code(5)),
        other => panic!("the next command did not run: {other:?}"),
    }
    let respawned = client.helper_pid().expect("new helper");
    assert_ne!(respawned, helper, "a fresh helper serves the next command");
}

/// Runs the `agentd` binary; returns (exit code, stdout, the facts JSON from stderr's last line).
fn agentd(args: &[&str]) -> (i32, String, serde_json::Value) {
    let out = Command::new(binary("agentd"))
        .arg("run")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run agentd");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr.lines().last().unwrap_or_default();
    let facts: serde_json::Value = serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("last stderr line is not JSON ({e}): {stderr}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        facts,
    )
}

#[test]
fn agentd_run_exits_with_the_commands_own_code_and_reports_it() {
    let (code, stdout, facts) = agentd(&[
        "--json",
        "--mode",
        "danger-full-access",
        "--",
        "sh",
        "-c",
        "echo hi; exit 3",
    ]);
    assert_eq!(code, 3);
    assert_eq!(stdout, "hi\n");
    assert_eq!(facts["exit"], serde_json::json!({"code": 3}));
    assert_eq!(facts["backend"], "none");
    assert_eq!(facts["enforcement"], serde_json::Value::Null);
    assert_eq!(facts["timed_out"], false);
}

#[test]
fn agentd_run_reports_a_signal_as_128_plus_its_number() {
    let (code, _, facts) = agentd(&[
        "--json",
        "--mode",
        "danger-full-access",
        "--",
        "sh",
        "-c",
        "kill -TERM $$",
    ]);
    assert_eq!(code, 128 + 15);
    assert_eq!(facts["exit"], serde_json::json!({"signal": 15}));
}

#[test]
fn agentd_run_reports_a_timeout_with_status_124() {
    let (code, _, facts) = agentd(&[
        "--json",
        "--mode",
        "danger-full-access",
        "--timeout",
        "1",
        "--",
        "sleep",
        "1000",
    ]);
    assert_eq!(code, 124);
    assert_eq!(facts["timed_out"], true);
}

#[test]
fn agentd_run_reports_a_missing_program_with_status_127() {
    let (code, _, facts) = agentd(&[
        "--json",
        "--mode",
        "danger-full-access",
        "--",
        "definitely-not-a-program",
    ]);
    assert_eq!(code, 127);
    assert_eq!(facts["exit"], serde_json::json!({"code": 127}));
    assert_eq!(facts["runner_failure"], serde_json::Value::Null);
}

#[test]
fn agentd_run_reports_a_runner_failure_with_status_125_when_no_backend_can_work() {
    let (code, stdout, facts) = agentd(&[
        "--json",
        "--mode",
        "read-only",
        "--backend",
        "seatbelt",
        "--",
        "sh",
        "-c",
        "echo ran",
    ]);
    assert_eq!(code, 125);
    assert_eq!(stdout, "", "nothing ran");
    assert_eq!(facts["runner_failure"]["stage"], "unavailable");
    let detail = facts["runner_failure"]["detail"]
        .as_str()
        .unwrap_or_default();
    assert!(detail.contains("install bubblewrap"), "{detail}");
    assert_eq!(facts["exit"], serde_json::Value::Null);
    assert_eq!(facts["denied"], false);
}

#[test]
fn agentd_run_uses_a_helper_running_as_a_service() {
    let dir = std::env::temp_dir().join(format!("agentd-service-{}", std::process::id()));
    let socket = dir.join("run").join("helper.sock");
    let mut service = Command::new(binary("confine-service"))
        .arg("--socket")
        .arg(&socket)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the service");
    // The service logs once it listens: wait for that line, not for time to pass.
    let mut log = std::io::BufReader::new(service.stderr.take().expect("stderr"));
    let mut line = String::new();
    std::io::BufRead::read_line(&mut log, &mut line).expect("service log");
    assert!(line.contains("serving"), "{line}");

    let socket_arg = socket.to_str().expect("utf-8 path");
    let (code, stdout, facts) = agentd(&[
        "--json",
        "--helper-socket",
        socket_arg,
        "--mode",
        "danger-full-access",
        "--",
        "sh",
        "-c",
        "echo via-service",
    ]);
    let _ = service.kill();
    let _ = service.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(code, 0, "{facts}");
    assert_eq!(stdout, "via-service\n");
}

/// The scenarios' scratch base under `/var/tmp` has a name anyone can take first, so it is
/// used only as this user's own directory, and then closed to others: a link planted at the
/// name (even one to a directory of this user's), a file, and as root another user's
/// directory are not used. The control: this user's own directory is, and is made 0700.
#[test]
fn a_scratch_base_is_used_only_as_this_users_own_directory() {
    use std::os::unix::fs::{PermissionsExt, symlink};
    let scratch = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("scratch-base-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).expect("scratch");
    let mine = scratch.join("mine");
    std::fs::create_dir(&mine).expect("a directory");
    std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o755)).expect("0755");

    let link = scratch.join("link");
    symlink(&mine, &link).expect("a link");
    assert!(!support::acp::own(&link), "a link is not used");
    let file = scratch.join("file");
    std::fs::write(&file, "x").expect("a file");
    assert!(!support::acp::own(&file), "a file is not used");
    let mode = |dir: &std::path::Path| {
        std::fs::metadata(dir).expect("there").permissions().mode() & 0o7777
    };
    assert_eq!(mode(&mine), 0o755, "nothing was changed through the link");
    if nix::unistd::geteuid().is_root() {
        let theirs = scratch.join("theirs");
        std::fs::create_dir(&theirs).expect("a directory");
        std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o777)).expect("0777");
        let nobody = Some(nix::unistd::Uid::from_raw(65534));
        nix::unistd::chown(&theirs, nobody, None).expect("chown");
        assert!(
            !support::acp::own(&theirs),
            "another user's directory is not used"
        );
        assert_eq!(mode(&theirs), 0o777, "nor changed");
    }

    // The control: this user's own directory is used, and closed to others.
    assert!(support::acp::own(&mine));
    assert_eq!(mode(&mine), 0o700);
    std::fs::remove_dir_all(&scratch).expect("scratch removed");
}
