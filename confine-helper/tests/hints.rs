//! agentd's hints fail closed: a hint "bwrap is usable" (or "the helper's own namespaces are
//! usable") under the helper's own fingerprint that is no longer true (sent after user
//! namespaces were exhausted, a change the helper's part of the fingerprint does not see) makes
//! the command fail as a runner failure, never run less confined; the hint is dropped and the
//! next command is probed again and confined by Landlock. The control runs, with the same
//! machine state and no hint or a hint under another fingerprint, are probed and confined by
//! Landlock from the first command.
//!
//! The broken machine is a private user namespace whose `max_user_namespaces` is 0, so nothing
//! outside the test is touched.

// Linux only: these tests drive the bwrap, namespace and Landlock backends, `/proc` or Linux's
// own system calls. On macOS `macos_supervision.rs` drives the helper.
#![cfg(target_os = "linux")]

mod support;

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use confine_protocol::{
    Backend, BackendChoice, ExitStatus, Mode, Reply, Request, Stage, UsableBefore,
};
use support::skip::{Need, skip};
use support::{HELPER, Peer, Scratch, available, backend_works};

/// Serves on descriptor 3 while the hinted backend works (the first helper, asked for its
/// `Info`), then exhausts user namespaces and serves on descriptor 4 (the second helper, in the
/// same namespaces, so under the same fingerprint).
const SCRIPT: &str = r#"
set -e
helper=$1 scratch=$2
# Inside the namespace the user is uid 0, whose passwd home is not theirs: the ceiling is read
# from here instead (there is none).
export XDG_CONFIG_HOME="$scratch/config"
# Its per-command temp base, /tmp/confine-helper-0, may be the real root's: a private one here.
if [ -d /tmp/confine-helper-0 ] && [ ! -O /tmp/confine-helper-0 ]; then
    mount -t tmpfs -o mode=0700 tmpfs /tmp/confine-helper-0
fi
"$helper" --fd 3 4<&- || true
exec 3<&-
echo 0 > /proc/sys/user/max_user_namespaces
exec "$helper" --fd 4
"#;

/// What the second helper is told before its first command.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Hint {
    None,
    /// The backend is usable, under the fingerprint the first helper reported.
    Own,
    /// The backend is usable, under a fingerprint that is not the helper's.
    Other,
}

/// The backend a hint names, as a request chooses it.
fn choice(backend: Backend) -> BackendChoice {
    match backend {
        Backend::Bwrap => BackendChoice::Bwrap,
        Backend::Namespaces => BackendChoice::Namespaces,
        other => panic!("not a backend these tests hint: {other:?}"),
    }
}

/// Whether this machine cannot make the broken state (user namespaces to exhaust, `backend`
/// working until then, Landlock to confine instead); a SKIP line for `test` when it cannot.
fn cannot_run(test: &str, backend: Backend) -> bool {
    let ok = |program: &str, args: &[&str]| {
        Command::new(program)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let missing = if let Err(missing) = backend_works(choice(backend)) {
        Some(missing)
    } else if let Err(why) = available::landlock() {
        Some((Need::Landlock, why.to_string()))
    } else if !ok("unshare", &["-Urm", "true"]) {
        Some((
            Need::UserNamespace,
            "unshare -Urm (an unprivileged user namespace) is not available".to_owned(),
        ))
    } else if !ok(
        "unshare",
        &[
            "-Ur",
            "sh",
            "-c",
            "echo 0 > /proc/sys/user/max_user_namespaces",
        ],
    ) {
        Some((
            Need::UserNamespace,
            "max_user_namespaces cannot be lowered in a private user namespace".to_owned(),
        ))
    } else {
        None
    };
    missing.is_some_and(|(need, why)| {
        skip(test, need, why);
        true
    })
}

/// The helper only runs a root-owned bwrap; in a namespace of a user other than root, root's
/// files belong to nobody.
fn bwrap_unusable_in_namespace(test: &str) -> bool {
    let owner = Command::new("unshare")
        .args(["-Ur", "sh", "-c", "stat -L -c %u \"$(command -v bwrap)\""])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    owner != "0" && {
        skip(
            test,
            Need::Root,
            "in a private user namespace of this user bwrap is not root's: run as root",
        );
        true
    }
}

/// The fingerprint the first helper reports for `backend`, then the second helper, told `hint`
/// of `backend`.
fn helpers(scratch: &Path, backend: Backend, hint: Hint) -> Peer {
    let (first_ours, first_theirs) = UnixStream::pair().expect("socketpair");
    let (second_ours, second_theirs) = UnixStream::pair().expect("socketpair");
    let fds = [first_theirs.as_raw_fd(), second_theirs.as_raw_fd()];
    let mut cmd = Command::new("unshare");
    cmd.args(["-Urm", "sh", "-c", SCRIPT, "sh", HELPER])
        .arg(scratch)
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    // SAFETY: dup2 is async-signal-safe; the closure touches no shared state.
    unsafe {
        cmd.pre_exec(move || {
            for (fd, to) in fds.into_iter().zip([3, 4]) {
                if nix::libc::dup2(fd, to) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let child = cmd.spawn().expect("spawn unshare");
    drop((first_theirs, second_theirs));
    let mut first = Peer::over(first_ours);
    first.greet();
    first.send(&Request::Info, &[]);
    let Reply::Info(info) = first.reply() else {
        panic!("expected the first helper's Info");
    };
    let report = info
        .backends
        .iter()
        .find(|b| b.backend == backend)
        .unwrap_or_else(|| panic!("a {backend:?} report"));
    assert!(
        report.usable,
        "{backend:?} works before the change: {report:?}"
    );
    let fingerprint = report.fingerprint.clone().unwrap_or_else(|| {
        panic!("a usable {backend:?} with the Landlock layer has a fingerprint")
    });
    drop(first);
    let mut second = Peer::over(second_ours);
    second.child = Some(child);
    second.greet();
    let fingerprint = match hint {
        Hint::None => return second,
        Hint::Own => fingerprint,
        Hint::Other => format!("{fingerprint}x"),
    };
    let hints = vec![UsableBefore {
        backend,
        fingerprint,
    }];
    second.send(&Request::Hints(hints), &[]);
    second
}

/// A workspace-write command that leaves `marker` in `ws` if it runs at all.
fn touch(id: u64, ws: &Path) -> Request {
    let mut spawn = support::spawn(id, &["sh", "-c", "echo ran > marker"]);
    spawn.cwd = ws.as_os_str().as_encoded_bytes().to_vec();
    spawn.policy.mode = Mode::WorkspaceWrite;
    spawn.policy.workspace_root = Some(spawn.cwd.clone());
    Request::Spawn(spawn)
}

fn end(peer: &mut Peer, id: u64) -> Reply {
    peer.until_end(id).pop().expect("a terminal reply")
}

fn landlock_ran(reply: &Reply, marker: &Path) {
    match reply {
        Reply::Exited(e) => {
            assert_eq!(e.status, ExitStatus::Code(0), "{reply:?}");
            assert_eq!(e.backend, Backend::Landlock, "{reply:?}");
        }
        other => panic!("expected the command to run under Landlock, got {other:?}"),
    }
    assert!(marker.exists(), "the command ran but left no marker");
}

/// With no hint, or a hint of `backend` under another fingerprint, the first command probes
/// every backend (none that needs a user namespace works now) and is confined by Landlock.
fn probed_without_a_usable_hint(backend: Backend) {
    for (name, hint) in [("none", Hint::None), ("other", Hint::Other)] {
        let dir = Scratch::new(&format!("hints-control-{name}"));
        let ws = dir.0.join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let mut peer = helpers(&dir.0, backend, hint);
        peer.send(&touch(1, &ws), &[]);
        landlock_ran(&end(&mut peer, 1), &ws.join("marker"));
    }
}

/// A hint of `backend` under the helper's own fingerprint, no longer true: the first command
/// fails closed while its sandbox is built, nothing run; the hint is dropped, and the same
/// command sent again (the control: it runs once the hint is gone) is probed again and confined
/// by Landlock.
fn stale_hint_fails_closed(backend: Backend) {
    let dir = Scratch::new("hints-stale");
    let ws = dir.0.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let mut peer = helpers(&dir.0, backend, Hint::Own);
    peer.send(&touch(1, &ws), &[]);
    match end(&mut peer, 1) {
        Reply::RunnerFailed(f) => {
            assert_eq!(f.stage, Stage::Namespace, "{backend:?}: {f:?}");
            assert!(f.detail.contains("nothing was run"), "{backend:?}: {f:?}");
        }
        other => panic!("a stale {backend:?} hint must fail closed, got {other:?}"),
    }
    assert!(!ws.join("marker").exists(), "the command ran");
    // The next command probes the backend again, finds it unusable, and is confined by
    // Landlock.
    peer.send(&touch(2, &ws), &[]);
    landlock_ran(&end(&mut peer, 2), &ws.join("marker"));
}

#[test]
fn without_a_hint_or_with_a_hint_under_another_fingerprint_bwrap_is_probed() {
    const NAME: &str = "without_a_hint_or_with_a_hint_under_another_fingerprint_bwrap_is_probed";
    if cannot_run(NAME, Backend::Bwrap) || bwrap_unusable_in_namespace(NAME) {
        return;
    }
    probed_without_a_usable_hint(Backend::Bwrap);
}

/// The helper's own namespaces need no root-owned program, so this runs as any user.
#[test]
fn without_a_hint_or_with_a_hint_under_another_fingerprint_namespaces_are_probed() {
    const NAME: &str =
        "without_a_hint_or_with_a_hint_under_another_fingerprint_namespaces_are_probed";
    if cannot_run(NAME, Backend::Namespaces) {
        return;
    }
    probed_without_a_usable_hint(Backend::Namespaces);
}

#[test]
fn a_stale_hint_fails_closed_and_is_dropped() {
    const NAME: &str = "a_stale_hint_fails_closed_and_is_dropped";
    if cannot_run(NAME, Backend::Bwrap) || bwrap_unusable_in_namespace(NAME) {
        return;
    }
    stale_hint_fails_closed(Backend::Bwrap);
}

#[test]
fn a_stale_namespaces_hint_fails_closed_and_is_dropped() {
    const NAME: &str = "a_stale_namespaces_hint_fails_closed_and_is_dropped";
    if cannot_run(NAME, Backend::Namespaces) {
        return;
    }
    stale_hint_fails_closed(Backend::Namespaces);
}
