//! The helper driven over its real socket by a minimal peer: spawning, exit facts, exec
//! failures, refusals, timeouts, cancellation of whole process trees, and the handshake.

// Linux only: these tests drive the bwrap, namespace and Landlock backends, `/proc` or Linux's
// own system calls. On macOS `macos_supervision.rs` drives the helper.
#![cfg(target_os = "linux")]

mod support;

use std::io::{BufRead, BufReader};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;

use confine_protocol::{
    BackendChoice, Cancel, Ending, ExitStatus, Hello, Mode, Reply, Request, Stage, StdioSpec,
    encode_frame,
};
use support::skip::{Need, skip};
use support::{Peer, Scratch, available_backends, pipe, run_captured, spawn};

fn exited(replies: &[Reply]) -> &confine_protocol::Exited {
    match replies.last() {
        Some(Reply::Exited(e)) => e,
        other => panic!("expected Exited, got {other:?}"),
    }
}

#[test]
fn a_command_runs_and_its_exit_code_and_output_come_back() {
    let mut peer = Peer::embedded();
    peer.greet();
    let (replies, out) = run_captured(&mut peer, spawn(1, &["sh", "-c", "echo hello; exit 3"]));
    assert!(matches!(replies[0], Reply::Started(s) if s.id == 1 && s.pid > 0));
    let e = exited(&replies);
    assert_eq!(e.status, ExitStatus::Code(3));
    assert_eq!(e.ending, Ending::Exited);
    assert_eq!(e.exec_errno, None);
    assert_eq!(e.enforcement, None);
    assert_eq!(out, "hello\n");
}

#[test]
fn a_command_killed_by_a_signal_reports_the_signal() {
    let mut peer = Peer::embedded();
    peer.greet();
    let (replies, _) = run_captured(&mut peer, spawn(1, &["sh", "-c", "kill -9 $$"]));
    assert_eq!(exited(&replies).status, ExitStatus::Signal(9));
}

#[test]
fn a_missing_program_is_an_exec_failure_with_status_127_not_a_runner_failure() {
    let mut peer = Peer::embedded();
    peer.greet();
    let (replies, _) = run_captured(&mut peer, spawn(1, &["no-such-program-here"]));
    assert_eq!(replies.len(), 1, "nothing started: {replies:?}");
    let e = exited(&replies);
    assert_eq!(e.status, ExitStatus::Code(127));
    assert_eq!(e.exec_errno, Some(nix::libc::ENOENT));
}

#[test]
fn a_program_that_is_not_executable_is_an_exec_failure_with_status_126() {
    let dir = Scratch::new("noexec");
    let file = dir.0.join("not-executable");
    std::fs::write(&file, "#!/bin/sh\necho no\n").expect("write");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let mut peer = Peer::embedded();
    peer.greet();
    let (replies, out) = run_captured(&mut peer, spawn(1, &[file.to_str().expect("utf-8")]));
    let e = exited(&replies);
    // execve demands an execute bit from root too.
    assert_eq!(e.status, ExitStatus::Code(126));
    assert_eq!(e.exec_errno, Some(nix::libc::EACCES));
    assert_eq!(out, "");
}

#[test]
fn a_backend_that_cannot_work_here_fails_closed_and_says_how_to_fix_it() {
    let mut peer = Peer::embedded();
    peer.greet();
    let mut request = spawn(7, &["sh", "-c", "echo ran"]);
    request.policy.mode = Mode::ReadOnly;
    request.backend = confine_protocol::BackendChoice::Seatbelt;
    let (replies, out) = run_captured(&mut peer, request);
    match replies.as_slice() {
        [Reply::RunnerFailed(f)] => {
            assert_eq!(f.stage, Stage::Unavailable);
            assert!(f.detail.contains("seatbelt"), "{}", f.detail);
            assert!(f.detail.contains("install bubblewrap"), "{}", f.detail);
            assert!(f.detail.contains("danger-full-access"), "{}", f.detail);
        }
        other => panic!("expected one RunnerFailed, got {other:?}"),
    }
    assert_eq!(out, "", "nothing ran");
}

#[test]
fn malformed_requests_are_refused_with_the_rule_they_break() {
    let mut peer = Peer::embedded();
    peer.greet();
    let cases: Vec<(confine_protocol::Spawn, &str)> = vec![
        (spawn(1, &[]), "argv is empty"),
        (
            {
                let mut s = spawn(2, &["true"]);
                s.cwd = b"relative".to_vec();
                s
            },
            "absolute",
        ),
        (
            {
                let mut s = spawn(3, &["true"]);
                s.argv.push(b"a\0b".to_vec());
                s
            },
            "NUL",
        ),
    ];
    for (request, words) in cases {
        let id = request.id;
        peer.send(&Request::Spawn(request), &[]);
        match peer.until_end(id).as_slice() {
            [Reply::Refused(r)] => assert!(r.reason.to_string().contains(words), "{}", r.reason),
            other => panic!("expected Refused, got {other:?}"),
        }
    }
}

#[test]
fn argv_and_environment_reach_the_command_byte_for_byte() {
    let mut peer = Peer::embedded();
    peer.greet();
    let mut request = spawn(
        1,
        &[
            "sh",
            "-c",
            "printf '%s|' \"$0\" \"$1\" \"$X\"",
            "--bind",
            "-c",
        ],
    );
    request.env.push(confine_protocol::EnvVar {
        name: b"X".to_vec(),
        value: b"\xffraw".to_vec(),
    });
    let (mut out, w) = pipe();
    request.stdio.stdout = StdioSpec::Fd;
    peer.send(&Request::Spawn(request), &[w.as_fd()]);
    drop(w);
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut out, &mut bytes).expect("read");
    peer.until_end(1);
    assert_eq!(bytes, b"--bind|-c|\xffraw|");
}

/// A danger-full-access spawn of `sh -c script` with `vars` added to its environment.
fn with_env(id: u64, script: &str, vars: &[(&str, &str)]) -> confine_protocol::Spawn {
    let mut request = spawn(id, &["sh", "-c", script]);
    for (name, value) in vars {
        request.env.push(confine_protocol::EnvVar {
            name: name.as_bytes().to_vec(),
            value: value.as_bytes().to_vec(),
        });
    }
    request
}

/// The reason of a request the helper refused, and what the command printed (nothing, if the
/// refusal is real).
fn refusal(peer: &mut Peer, request: confine_protocol::Spawn) -> (String, String) {
    let (replies, out) = run_captured(peer, request);
    match replies.as_slice() {
        [Reply::Refused(r)] => (r.reason.to_string(), out),
        other => panic!("expected Refused, got {other:?}"),
    }
}

#[test]
fn a_secret_looking_variable_is_refused_naming_env_allow_unless_the_ceiling_allows_it() {
    let script = "printf '%s' \"$DB_PASSWORD\"";
    let vars = [("DB_PASSWORD", "hunter2")];
    let mut peer = Peer::embedded();
    peer.greet();
    let (reason, out) = refusal(&mut peer, with_env(1, script, &vars));
    assert!(reason.contains("DB_PASSWORD"), "{reason}");
    assert!(reason.contains("env_allow"), "{reason}");
    assert!(
        !reason.contains("hunter2"),
        "the reason shows the value: {reason}"
    );
    assert_eq!(out, "", "a refused request ran");

    // The control: a ceiling that lists the name lets the same request run with it.
    let dir = Scratch::new("env-allow");
    let ceiling = dir.0.join("ceiling.toml");
    std::fs::write(&ceiling, "env_allow = [\"DB_PASSWORD\"]\n").expect("ceiling");
    let mut peer = Peer::embedded_with(None, |cmd| {
        cmd.arg("--ceiling").arg(&ceiling);
    });
    peer.greet();
    let (replies, out) = run_captured(&mut peer, with_env(2, script, &vars));
    assert_eq!(exited(&replies).status, ExitStatus::Code(0));
    assert_eq!(out, "hunter2");
}

#[test]
fn a_locale_variable_must_hold_a_locale_name() {
    let mut peer = Peer::embedded();
    peer.greet();
    let (reason, out) = refusal(
        &mut peer,
        with_env(1, "printf '%s' \"$LC_ALL\"", &[("LC_ALL", "hunter2")]),
    );
    assert!(
        reason.contains("LC_ALL") && reason.contains("locale name"),
        "{reason}"
    );
    assert!(
        !reason.contains("hunter2"),
        "the reason shows the value: {reason}"
    );
    assert_eq!(out, "", "a refused request ran");

    // The control: locale names pass, and an LC_ name that is no locale category is an
    // ordinary variable.
    let vars = [
        ("LC_ALL", "C.UTF-8"),
        ("LANG", "sr_RS.UTF-8@latin"),
        ("LC_EXTRA", "anything at all"),
    ];
    let (replies, out) = run_captured(
        &mut peer,
        with_env(2, "printf '%s|' \"$LC_ALL\" \"$LANG\" \"$LC_EXTRA\"", &vars),
    );
    assert_eq!(exited(&replies).status, ExitStatus::Code(0));
    assert_eq!(out, "C.UTF-8|sr_RS.UTF-8@latin|anything at all|");
}

#[test]
fn the_wall_clock_timeout_terminates_the_command() {
    let mut peer = Peer::embedded();
    peer.greet();
    let mut request = spawn(1, &["sleep", "1000"]);
    request.limits.timeout_ms = Some(200);
    let (replies, _) = run_captured(&mut peer, request);
    let e = exited(&replies);
    assert_eq!(e.ending, Ending::TimedOut);
    assert_eq!(e.status, ExitStatus::Signal(nix::libc::SIGTERM));
}

#[test]
fn a_command_that_ignores_sigterm_is_killed_after_the_grace() {
    let mut peer = Peer::embedded();
    peer.greet();
    let mut request = spawn(
        1,
        &["sh", "-c", "trap '' TERM; echo ready; while :; do :; done"],
    );
    let (out, w) = pipe();
    request.stdio.stdout = StdioSpec::Fd;
    request.limits.kill_grace_ms = 100;
    peer.send(&Request::Spawn(request), &[w.as_fd()]);
    drop(w);
    let mut lines = BufReader::new(out).lines();
    assert_eq!(lines.next().and_then(Result::ok).as_deref(), Some("ready"));
    peer.send(
        &Request::Cancel(Cancel {
            id: 1,
            grace_ms: 100,
        }),
        &[],
    );
    let e = peer.until_end(1);
    let e = exited(&e);
    assert_eq!(e.ending, Ending::Cancelled);
    assert_eq!(e.status, ExitStatus::Signal(nix::libc::SIGKILL));
}

/// Writes a `sleep` that announces its pid on stdout before it becomes the real sleep, so the
/// test knows each process of the tree exists without polling.
fn announcing_sleep(dir: &Scratch) -> String {
    let real = ["/usr/bin/sleep", "/bin/sleep"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("a sleep binary");
    let wrapper = dir.0.join("sleep");
    std::fs::write(
        &wrapper,
        format!("#!/bin/sh\necho \"sleeping $$\"\nexec {real} \"$@\"\n"),
    )
    .expect("write wrapper");
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    format!("{}:/usr/local/bin:/usr/bin:/bin", dir.0.display())
}

fn zombies_of(parent: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let fields: Vec<&str> = stat[close + 2..].split(' ').collect();
        if fields.len() > 1 && fields[0] == "Z" && fields[1] == parent.to_string() {
            found.push(entry.file_name().to_string_lossy().parse().unwrap_or(0));
        }
    }
    found
}

#[test]
fn cancel_kills_the_whole_tree_including_setsid_and_double_forked_processes() {
    let dir = Scratch::new("tree");
    let mut peer = Peer::embedded();
    peer.greet();
    let helper_pid = peer.child.as_ref().expect("child").id();
    let mut request = spawn(
        1,
        &[
            "sh",
            "-c",
            r#"(setsid sh -c "sleep 1000 & sleep 1000") & sleep 1000"#,
        ],
    );
    request.env[0].value = announcing_sleep(&dir).into_bytes();
    let (out, w) = pipe();
    request.stdio.stdout = StdioSpec::Fd;
    peer.send(&Request::Spawn(request), &[w.as_fd()]);
    drop(w);
    let mut lines = BufReader::new(out).lines();
    let mut pids: Vec<u32> = Vec::new();
    while pids.len() < 3 {
        let line = lines
            .next()
            .expect("the tree announced fewer than 3 sleeps")
            .expect("read");
        let pid = line.strip_prefix("sleeping ").expect("announcement");
        pids.push(pid.parse().expect("pid"));
    }
    for pid in &pids {
        assert!(
            std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "sleep {pid} should be running before the cancel"
        );
    }
    peer.send(
        &Request::Cancel(Cancel {
            id: 1,
            grace_ms: 500,
        }),
        &[],
    );
    let replies = peer.until_end(1);
    assert_eq!(exited(&replies).ending, Ending::Cancelled);
    for pid in &pids {
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "process {pid} of the cancelled tree is still alive"
        );
    }
    // Every pipe write end is gone with the tree: the output reaches end of file.
    assert!(lines.all(|l| l.is_ok()));
    // The helper answers on the shim's last record and reaps the shim when it has exited.
    assert_eq!(
        eventually(|| zombies_of(helper_pid), Vec::is_empty),
        Vec::<u32>::new()
    );
}

/// How long a helper may take to reap a shim after answering its command: the shim writes its
/// last record and exits (RFC 0023, step 7).
const REAP_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// What `probe` finds once `done` holds of it, or when [`REAP_LIMIT`] has passed.
fn eventually<T>(mut probe: impl FnMut() -> T, done: impl Fn(&T) -> bool) -> T {
    let deadline = std::time::Instant::now() + REAP_LIMIT;
    let mut found = probe();
    while !done(&found) && std::time::Instant::now() < deadline {
        std::thread::yield_now();
        found = probe();
    }
    found
}

#[test]
fn background_processes_do_not_outlive_their_command() {
    let dir = Scratch::new("bg");
    let mut peer = Peer::embedded();
    peer.greet();
    // The escapee announces itself through a fifo the main shell relays, so it provably
    // exists before the main process exits.
    let fifo = dir.0.join("f");
    let script = format!(
        "mkfifo {f}; (setsid sleep 1000 > {f} &); read line < {f}; echo \"$line\"",
        f = fifo.display()
    );
    let mut request = spawn(1, &["sh", "-c", &script]);
    request.env[0].value = announcing_sleep(&dir).into_bytes();
    let (out, w) = pipe();
    request.stdio.stdout = StdioSpec::Fd;
    peer.send(&Request::Spawn(request), &[w.as_fd()]);
    drop(w);
    let replies = peer.until_end(1);
    assert_eq!(exited(&replies).status, ExitStatus::Code(0));
    let lines: Vec<String> = BufReader::new(out).lines().map_while(Result::ok).collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    let pid = lines[0].strip_prefix("sleeping ").expect("announcement");
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "background process {pid} survived its command"
    );
}

#[test]
fn closing_the_connection_kills_running_trees_and_the_helper_exits() {
    let mut peer = Peer::embedded();
    peer.greet();
    let (out, w) = pipe();
    let mut request = spawn(1, &["sh", "-c", "echo $$; exec sleep 1000"]);
    request.stdio.stdout = StdioSpec::Fd;
    peer.send(&Request::Spawn(request), &[w.as_fd()]);
    drop(w);
    let mut lines = BufReader::new(out).lines();
    let pid = lines.next().expect("pid line").expect("read");
    let mut child = peer.child.take().expect("child");
    drop(peer);
    let status = child.wait().expect("wait helper");
    assert!(status.success(), "helper exit: {status:?}");
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
}

#[test]
fn many_commands_run_at_once_on_one_connection() {
    let mut peer = Peer::embedded();
    peer.greet();
    let mut reads = Vec::new();
    for id in 0..32u64 {
        let (out, w) = pipe();
        let mut request = spawn(id, &["sh", "-c", &format!("echo {id}; exit {}", id % 5)]);
        request.stdio.stdout = StdioSpec::Fd;
        peer.send(&Request::Spawn(request), &[w.as_fd()]);
        reads.push(out);
    }
    let mut ended = std::collections::HashMap::new();
    while ended.len() < 32 {
        if let Reply::Exited(e) = peer.reply() {
            ended.insert(e.id, e.status);
        }
    }
    for (id, mut out) in reads.into_iter().enumerate() {
        let id = id as u64;
        let mut text = String::new();
        std::io::Read::read_to_string(&mut out, &mut text).expect("read");
        assert_eq!(text, format!("{id}\n"));
        assert_eq!(ended[&id], ExitStatus::Code((id % 5) as i32));
    }
}

#[test]
fn a_peer_with_another_schema_is_refused_with_both_versions_named() {
    let dir = Scratch::new("hello");
    let log = dir.0.join("helper.log");
    let mut peer = Peer::embedded_with_log(Some(&log));
    let mut hello = Hello::ours("agentd 9.9.9");
    hello.schema_hash ^= 1;
    hello.protocol_version = confine_protocol::PROTOCOL_VERSION + 1;
    peer.send_raw(&encode_frame(&hello).expect("encode"));
    let theirs: Hello = peer.read_message().expect("the helper still greets");
    assert_eq!(theirs.protocol_version, confine_protocol::PROTOCOL_VERSION);
    assert!(peer.read_message::<Reply>().is_none(), "connection closed");
    let status = peer.child.take().expect("child").wait().expect("wait");
    assert!(status.success());
    let log = std::fs::read_to_string(&log).expect("log");
    let ours = confine_protocol::PROTOCOL_VERSION;
    assert!(
        log.contains(&format!("agentd 9.9.9 speaks protocol v{}", ours + 1)),
        "{log}"
    );
    assert!(log.contains(&format!("speaks v{ours}")), "{log}");
}

#[test]
fn inherited_descriptors_and_environment_reach_neither_the_helper_nor_the_command() {
    let leaked = std::fs::File::open("/dev/null").expect("open");
    // dup() gives a descriptor without close-on-exec: exactly what a careless parent leaks.
    let leaked_fd = nix::unistd::dup(&leaked).expect("dup");
    let mut peer = Peer::embedded_with(None, |cmd| {
        cmd.env("AGENT_API_TOKEN", "secret-value");
    });
    peer.greet();
    let helper = peer.child.as_ref().expect("child").id();

    let (_, out) = run_captured(&mut peer, spawn(1, &["sh", "-c", "ls /proc/$$/fd; env"]));
    let lines: Vec<&str> = out.lines().collect();
    let fds: Vec<&str> = lines
        .iter()
        .copied()
        .take_while(|l| l.parse::<u32>().is_ok())
        .collect();
    assert_eq!(
        fds,
        ["0", "1", "2"],
        "the command sees only its stdio: {out}"
    );
    assert!(!out.contains("secret-value"), "{out}");

    // The shim's two pipes go once the helper has reaped it, just after its answer.
    let listed = || {
        let entries = std::fs::read_dir(format!("/proc/{helper}/fd"))?;
        let mut open: Vec<u32> = entries
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect();
        open.sort_unstable();
        Ok::<_, std::io::Error>(open)
    };
    let settled = |open: &std::io::Result<Vec<u32>>| open.as_ref().map_or(true, |o| o.len() <= 6);
    match eventually(listed, settled) {
        Ok(open) => {
            // Besides stdio and its socket, the helper holds one descriptor of its own binary,
            // which bwrap executes as the Landlock step, and one of the file reader and writer
            // beside it, which bwrap executes as that command.
            let extra: Vec<u32> = open.iter().copied().filter(|fd| *fd > 3).collect();
            assert_eq!(
                open.iter()
                    .copied()
                    .filter(|fd| *fd <= 3)
                    .collect::<Vec<_>>(),
                [0, 1, 2, 3],
                "the helper keeps stdio and its socket"
            );
            let mut targets: Vec<std::path::PathBuf> = extra
                .iter()
                .map(|fd| std::fs::read_link(format!("/proc/{helper}/fd/{fd}")).expect("readlink"))
                .collect();
            targets.sort();
            let exe = std::fs::read_link(format!("/proc/{helper}/exe")).expect("readlink exe");
            let mut expected = vec![exe, support::file_io()];
            expected.sort();
            assert_eq!(
                targets, expected,
                "the extra descriptors are the helper's own binary and the file reader and \
                 writer: {open:?}"
            );
        }
        // A non-dumpable process's /proc entries belong to root: that is the proof here.
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied),
    }
    drop(leaked_fd);
}

/// agentd gives its helper the socket as stdin (`--fd 0`), so that no code of its own runs
/// between `fork` and `execve`. The helper moves it above the standard streams before it
/// reads anything: it serves on it there, and its stdin is `/dev/null`, which is all a process
/// it starts could inherit of it.
#[test]
fn a_socket_given_as_stdin_is_served_from_above_the_standard_streams() {
    let (ours, theirs) = UnixStream::pair().expect("socketpair");
    let inode = |fd: BorrowedFd<'_>| nix::sys::stat::fstat(fd).expect("fstat").st_ino;
    let socket = format!("socket:[{}]", inode(theirs.as_fd()));
    let child = std::process::Command::new(support::HELPER)
        .args(["--fd", "0"])
        .stdin(OwnedFd::from(theirs))
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("spawn confine-helper");
    let mut peer = Peer::over(ours);
    peer.child = Some(child);
    peer.greet();
    let (replies, out) = run_captured(&mut peer, spawn(1, &["sh", "-c", "echo served"]));
    assert_eq!(exited(&replies).status, ExitStatus::Code(0));
    assert_eq!(
        out, "served\n",
        "the helper serves on the socket it was given"
    );

    let helper = peer.child.as_ref().expect("child").id();
    match std::fs::read_link(format!("/proc/{helper}/fd/0")) {
        Ok(stdin) => {
            assert_eq!(
                stdin,
                std::path::Path::new("/dev/null"),
                "the helper's stdin"
            );
            // The control: the socket is there to be seen, above the standard streams.
            let held: Vec<(u32, std::path::PathBuf)> =
                std::fs::read_dir(format!("/proc/{helper}/fd"))
                    .expect("the helper's descriptors")
                    .flatten()
                    .filter_map(|e| {
                        let fd = e.file_name().to_str()?.parse().ok()?;
                        Some((fd, std::fs::read_link(e.path()).ok()?))
                    })
                    .filter(|(_, target)| target.as_os_str() == socket.as_str())
                    .collect();
            assert!(
                matches!(held[..], [(fd, _)] if fd > 2),
                "the socket, once and above stdio: {held:?}"
            );
        }
        // A non-dumpable process's /proc entries belong to root: that is the proof here.
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied),
    }
}

#[test]
fn exec_failures_read_the_same_on_every_backend() {
    let dir = Scratch::new("parity");
    let file = dir.0.join("not-executable");
    std::fs::write(&file, "echo no\n").expect("write");
    let mut peer = Peer::embedded();
    peer.greet();
    const NAME: &str = "exec_failures_read_the_same_on_every_backend";
    let backends = available_backends(NAME);
    if backends.is_empty() {
        skip(NAME, Need::Backend, "no backend works here");
        return;
    }
    for backend in backends {
        for (program, code, errno) in [
            ("no-such-program-here", 127, nix::libc::ENOENT),
            (file.to_str().expect("utf-8"), 126, nix::libc::EACCES),
        ] {
            let mut request = spawn(1, &[program]);
            request.policy.mode = Mode::ReadOnly;
            request.backend = backend;
            let (replies, _) = run_captured(&mut peer, request);
            let e = exited(&replies);
            assert_eq!(e.status, ExitStatus::Code(code), "{backend:?} {program}");
            assert_eq!(e.exec_errno, Some(errno), "{backend:?} {program}");
            assert!(
                e.enforcement.is_some(),
                "{backend:?}: confined runs report enforcement"
            );
        }
    }
}

/// The `SigIgn` and `SigBlk` masks of `status`, a `/proc/PID/status` text.
fn signal_masks(status: &str) -> (u64, u64) {
    let mask = |field: &str| {
        let hex = status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .unwrap_or_else(|| panic!("no {field} in {status}"));
        u64::from_str_radix(hex.trim(), 16).expect("a hex mask")
    };
    (mask("SigIgn:"), mask("SigBlk:"))
}

/// Ignores SIGHUP, SIGINT, SIGTERM, SIGUSR1 and a realtime signal and blocks SIGUSR2 in the
/// process about to execute: what `nohup`, `trap '' INT TERM` or a parent's mask hand a program.
fn with_signals_ignored_and_blocked(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: signal and sigprocmask are async-signal-safe; the closure touches no shared state.
    unsafe {
        cmd.pre_exec(|| {
            use nix::libc;
            let realtime = libc::SIGRTMIN() + 2;
            for sig in [
                libc::SIGHUP,
                libc::SIGINT,
                libc::SIGTERM,
                libc::SIGUSR1,
                realtime,
            ] {
                if libc::signal(sig, libc::SIG_IGN) == libc::SIG_ERR {
                    return Err(std::io::Error::last_os_error());
                }
            }
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&raw mut set);
            libc::sigaddset(&raw mut set, libc::SIGUSR2);
            if libc::sigprocmask(libc::SIG_BLOCK, &raw const set, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// A command starts with every signal at its default and none blocked, on every backend, even
/// when the helper itself was started with some ignored and blocked: ignored dispositions and
/// the mask survive `fork` and `execve`, and a command that ignores `SIGTERM` or `SIGINT` would
/// not stop when asked. Control: the same program started directly with the same start
/// inherits them. Signals 32 and 33 are the C library's own (a test binary's children may get
/// them ignored from its spawn, and the helper cannot set them through the C library); a
/// program's C library installs its handlers for them before it uses them.
#[test]
fn a_command_starts_with_default_signals_whatever_the_helper_inherited() {
    let mut control = std::process::Command::new("cat");
    control.arg("/proc/self/status");
    with_signals_ignored_and_blocked(&mut control);
    let out = control.output().expect("cat");
    let (ignored, blocked) = signal_masks(&String::from_utf8_lossy(&out.stdout));
    let bit = |sig: i32| 1u64 << (sig - 1);
    use nix::libc::{SIGHUP, SIGINT, SIGRTMIN, SIGTERM, SIGUSR1, SIGUSR2};
    let expected = bit(SIGHUP) | bit(SIGINT) | bit(SIGTERM) | bit(SIGUSR1) | bit(SIGRTMIN() + 2);
    assert_eq!(
        ignored & expected,
        expected,
        "control: the start ignores them"
    );
    assert_eq!(
        blocked & bit(SIGUSR2),
        bit(SIGUSR2),
        "control: and blocks SIGUSR2"
    );

    let mut peer = Peer::embedded_with(None, with_signals_ignored_and_blocked);
    peer.greet();
    let mut modes = vec![(BackendChoice::Auto, Mode::DangerFullAccess)];
    let backends =
        available_backends("a_command_starts_with_default_signals_whatever_the_helper_inherited");
    modes.extend(backends.into_iter().map(|b| (b, Mode::ReadOnly)));
    for (id, (backend, mode)) in (1..).zip(modes) {
        let mut request = spawn(id, &["cat", "/proc/self/status"]);
        request.policy.mode = mode;
        request.backend = backend;
        let (replies, out) = run_captured(&mut peer, request);
        assert_eq!(
            exited(&replies).status,
            ExitStatus::Code(0),
            "{backend:?}: {out}"
        );
        let (ignored, blocked) = signal_masks(&out);
        let libc_own = bit(32) | bit(33);
        assert_eq!(
            (ignored & !libc_own, blocked),
            (0, 0),
            "{backend:?} {mode:?}: the command ignores or blocks nothing:\n{out}"
        );
    }
}
