//! A helper killed with SIGKILL cannot remove its commands' temp directories; the next helper
//! of the same user removes them when it starts, and keeps those of a helper still running.

// Linux only: these tests drive the bwrap, namespace and Landlock backends, `/proc` or Linux's
// own system calls. On macOS `macos_supervision.rs` drives the helper.
#![cfg(target_os = "linux")]

mod support;

use confine_protocol::{Mode, Reply, Request};
use support::skip::{Need, skip};
use support::{Peer, Scratch, available_backends, spawn};

/// The temp directories under this user's base that name helper `pid`.
fn dirs_of(pid: u32) -> Vec<std::path::PathBuf> {
    let base = format!("/tmp/confine-helper-{}", nix::unistd::geteuid());
    let Ok(entries) = std::fs::read_dir(base) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with("cmd-") && name.split('-').nth(2) == Some(&pid.to_string())
        })
        .map(|e| e.path())
        .collect()
}

/// Starts a workspace-write `sleep` on `peer` and waits until it runs.
fn sleeping(peer: &mut Peer, id: u64, ws: &std::path::Path) {
    let mut request = spawn(id, &["sleep", "30"]);
    request.cwd = ws.as_os_str().as_encoded_bytes().to_vec();
    request.policy.mode = Mode::WorkspaceWrite;
    request.policy.workspace_root = Some(request.cwd.clone());
    peer.send(&Request::Spawn(request), &[]);
    match peer.reply() {
        Reply::Started(_) => {}
        other => panic!("expected the command to start, got {other:?}"),
    }
}

#[test]
fn the_next_helper_removes_the_temp_dirs_of_a_killed_one_and_keeps_a_running_ones() {
    const NAME: &str =
        "the_next_helper_removes_the_temp_dirs_of_a_killed_one_and_keeps_a_running_ones";
    // Every Linux backend gives a workspace-write command a temp directory of its own: with one
    // that works here, its absence is the regression this test is for, not a reason to skip.
    if available_backends(NAME).is_empty() {
        skip(
            NAME,
            Need::Backend,
            "no backend works here to run a workspace-write command",
        );
        return;
    }
    let dir = Scratch::new("orphans");
    let ws = dir.0.join("ws");
    std::fs::create_dir_all(&ws).expect("workspace");

    // Each helper logs to a file of its own, not into the test's output.
    let mut running = Peer::embedded_with_log(Some(&dir.0.join("running.log")));
    running.greet();
    sleeping(&mut running, 1, &ws);
    let running_pid = running.child.as_ref().expect("child").id();

    let mut killed = Peer::embedded_with_log(Some(&dir.0.join("killed.log")));
    killed.greet();
    sleeping(&mut killed, 1, &ws);
    let mut child = killed.child.take().expect("child");
    let killed_pid = child.id();
    let left = dirs_of(killed_pid);
    if left.is_empty() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("the workspace-write command got no temp directory of its own");
    }
    assert!(
        !dirs_of(running_pid).is_empty(),
        "the running helper's directory exists"
    );
    child.kill().expect("SIGKILL the helper");
    child.wait().expect("reap");
    assert!(
        left.iter().all(|d| d.exists()),
        "a helper killed with SIGKILL cannot remove its directories (the case swept)"
    );

    let mut next = Peer::embedded_with_log(Some(&dir.0.join("next.log")));
    next.greet();
    for d in &left {
        assert!(
            !d.exists(),
            "{} of the killed helper is still there",
            d.display()
        );
    }
    assert!(
        !dirs_of(running_pid).is_empty(),
        "the running helper's directory was kept"
    );
    drop(next);
    drop(running);
}
