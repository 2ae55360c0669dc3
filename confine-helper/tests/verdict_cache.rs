//! The probe verdict cache fails closed: a cached "bwrap is usable" that is no longer true (here
//! forged to match a machine where user namespaces are exhausted) makes the command fail as a
//! runner failure, never run less confined; the entry is dropped and the next command is
//! probed again and confined by Landlock. The control run, with the same machine state and no
//! forged entry, is probed and confined by Landlock from the first command.
//!
//! The broken machine is a private user namespace whose `max_user_namespaces` is 0, so nothing
//! outside the test is touched.

// Linux only: these tests drive the bwrap and Landlock backends, `/proc` or Linux's own
// system calls. On macOS `macos_supervision.rs` drives the helper.
#![cfg(target_os = "linux")]

mod support;

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use confine_protocol::{Backend, ExitStatus, Mode, Reply, Request, Stage};
use support::skip::{Need, skip};
use support::{HELPER, Peer, Scratch, available};

/// Probes while bwrap works (writing a usable entry), optionally rewrites that entry to match
/// the state to come, exhausts user namespaces, then serves on descriptor 3.
const SCRIPT: &str = r#"
set -e
helper=$1 cache=$2 forge=$3
# Inside the namespace the user is uid 0, whose passwd home is not theirs: the ceiling is read
# from here instead (there is none).
export XDG_CONFIG_HOME="$cache/config"
# Its per-command temp base, /tmp/confine-helper-0, may be the real root's: a private one here.
if [ -d /tmp/confine-helper-0 ] && [ ! -O /tmp/confine-helper-0 ]; then
    mount -t tmpfs -o mode=0700 tmpfs /tmp/confine-helper-0
fi
XDG_CACHE_HOME="$cache" "$helper" probe >/dev/null 2>&1 || true
if [ "$forge" = forge ]; then
    sed -i 's/ userns=[0-9]*/ userns=0/' "$cache/confine-helper/verdicts"
fi
echo 0 > /proc/sys/user/max_user_namespaces
exec env XDG_CACHE_HOME="$cache" "$helper" --fd 3
"#;

/// Whether this machine cannot make the broken state (user namespaces to exhaust, a bwrap
/// that works until then, Landlock to confine instead); a SKIP line for `test` when it cannot.
fn cannot_run(test: &str) -> bool {
    let ok = |program: &str, args: &[&str]| {
        Command::new(program)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let missing = if let Err(why) = available::bwrap() {
        Some((Need::Bwrap, why))
    } else if let Err(why) = available::landlock() {
        Some((Need::Landlock, why))
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

/// A helper started by [`SCRIPT`] in a fresh user namespace.
fn helper(cache: &Path, forge: bool) -> Peer {
    let (ours, theirs) = UnixStream::pair().expect("socketpair");
    let theirs_fd = theirs.as_raw_fd();
    let mut cmd = Command::new("unshare");
    cmd.args(["-Urm", "sh", "-c", SCRIPT, "sh", HELPER])
        .arg(cache)
        .arg(if forge { "forge" } else { "keep" })
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    // SAFETY: dup2 is async-signal-safe; the closure touches no shared state.
    unsafe {
        cmd.pre_exec(move || {
            if nix::libc::dup2(theirs_fd, 3) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().expect("spawn unshare");
    drop(theirs);
    let mut peer = Peer::over(ours);
    peer.child = Some(child);
    peer.greet();
    peer
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

fn cached_bwrap(cache: &Path) -> bool {
    std::fs::read_to_string(cache.join("confine-helper/verdicts"))
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("usable bwrap "))
}

#[test]
fn without_a_stale_entry_the_broken_backend_is_probed_and_landlock_confines() {
    if cannot_run("without_a_stale_entry_the_broken_backend_is_probed_and_landlock_confines") {
        return;
    }
    let dir = Scratch::new("verdicts-control");
    let (cache, ws) = (dir.0.join("cache"), dir.0.join("ws"));
    std::fs::create_dir_all(&ws).unwrap();
    let mut peer = helper(&cache, false);
    peer.send(&touch(1, &ws), &[]);
    landlock_ran(&end(&mut peer, 1), &ws.join("marker"));
}

#[test]
fn a_stale_usable_entry_fails_closed_and_is_dropped() {
    const NAME: &str = "a_stale_usable_entry_fails_closed_and_is_dropped";
    if cannot_run(NAME) || bwrap_unusable_in_namespace(NAME) {
        return;
    }
    let dir = Scratch::new("verdicts-stale");
    let (cache, ws) = (dir.0.join("cache"), dir.0.join("ws"));
    std::fs::create_dir_all(&ws).unwrap();
    let mut peer = helper(&cache, true);
    assert!(
        cached_bwrap(&cache),
        "the forged entry is in place before the first command"
    );
    peer.send(&touch(1, &ws), &[]);
    match end(&mut peer, 1) {
        Reply::RunnerFailed(f) => {
            assert_eq!(f.stage, Stage::Namespace, "{f:?}");
            assert!(f.detail.contains("nothing was run"), "{f:?}");
        }
        other => panic!("a stale entry must fail closed, got {other:?}"),
    }
    assert!(!ws.join("marker").exists(), "the command ran");
    assert!(!cached_bwrap(&cache), "the failed entry is still cached");
    // The next command probes bwrap again, finds it unusable, and is confined by Landlock.
    peer.send(&touch(2, &ws), &[]);
    landlock_ran(&end(&mut peer, 2), &ws.join("marker"));
}
