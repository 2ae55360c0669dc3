//! Checkpoints and undo with the real agentd, the real confine-helper and the real kernel, on
//! each backend that works here: `agentd sessions undo` on a real session log and store
//! (`--dry-run` changes nothing; the restore leaves the workspace byte for byte as it was
//! before the turn, links as links, modes included, `.git` untouched), its errors, and the
//! hostile case: while the restore runs, a thread keeps swapping a directory of the workspace
//! for a link to a directory outside it, and nothing outside changes — with the control that
//! the same plan written by path, unconfined, does write outside while the swap runs.

mod support;

use std::collections::BTreeMap;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agentd::api::checkpoint::{ChangeKind, Scope, Store};
use agentd::api::helper_client::{HelperClient, HelperEndpoint};
use agentd::api::profile::SandboxProfile;
use agentd::api::session::Event;
use agentd::api::session::{EventLog, new_id};
use confine_protocol::{BackendChoice, Mode, Network};
use serde_json::Value;
use support::acp::{Scratch, scratch_base};
use support::binary;

/// How long the unconfined control may try to land a write through the swapped link.
const CONTROL_DEADLINE: Duration = Duration::from_secs(30);
/// The files under the swapped directory: enough confined writes for the restore to last
/// across many swaps.
const SWAPPED_FILES: usize = 40;

/// One path of a tree, as the host sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    File { bytes: Vec<u8>, mode: u32 },
    Link(PathBuf),
    Dir { mode: u32 },
    Other,
}

/// Every path under `root` (links not followed), with what it holds.
fn tree(root: &Path) -> BTreeMap<PathBuf, Node> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_owned()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).expect("list") {
            let path = entry.expect("entry").path();
            let meta = path.symlink_metadata().expect("lstat");
            let mode = meta.permissions().mode() & 0o7777;
            let node = if meta.file_type().is_symlink() {
                Node::Link(std::fs::read_link(&path).expect("readlink"))
            } else if meta.is_dir() {
                todo.push(path.clone());
                Node::Dir { mode }
            } else if meta.is_file() {
                Node::File {
                    bytes: std::fs::read(&path).expect("read"),
                    mode,
                }
            } else {
                Node::Other
            };
            let rel = path.strip_prefix(root).expect("below").to_owned();
            out.insert(rel, node);
        }
    }
    out
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("dirs");
    std::fs::write(path, text).expect("write");
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// What a session records: the workspace, `.git` and `.agentd` left out.
fn scope(ws: &Path) -> Scope {
    Scope {
        roots: vec![ws.to_owned()],
        protected: vec![PathBuf::from(".git"), PathBuf::from(".agentd")],
        max_bytes: u64::MAX,
    }
}

/// A session log in the scratch's state directory whose turn 1 has its checkpoint `t1` of
/// the workspace as it is now.
fn session_with_checkpoint(scratch: &Scratch) -> String {
    let id = new_id();
    let (mut log, _) = EventLog::create(&scratch.state(), &id, &scratch.ws()).expect("log");
    log.append(Event::TurnStarted { turn: 1 }).expect("turn");
    let recorded = Store::at(&scratch.state())
        .record(&id, "t1", &scope(&scratch.ws()))
        .expect("checkpoint t1");
    // As a session's turn logs it.
    log.append(Event::CheckpointRecorded {
        turn: 1,
        label: "t1".to_owned(),
        files: recorded.files,
        bytes: recorded.bytes,
        left_out: recorded.left_out.into_iter().map(|l| l.path).collect(),
        over_cap: recorded.over_cap,
    })
    .expect("checkpoint/recorded");
    log.sync().expect("sync");
    id
}

fn undo(scratch: &Scratch, args: &[&str]) -> Output {
    let state = scratch.state();
    scratch
        .agentd("sessions")
        .arg("undo")
        .args(args)
        .arg("--state-dir")
        .arg(&state)
        .output()
        .expect("run agentd sessions undo")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn sessions_undo_restores_the_workspace_byte_for_byte_and_a_dry_run_changes_nothing() {
    for backend in support::backends() {
        let scratch = Scratch::new_in(&scratch_base(), &format!("undo-{backend}"));
        scratch.config(&format!("[sandbox]\nbackend = \"{backend}\"\n"));
        let ws = scratch.ws();
        write(&ws.join("keep.txt"), "keep\n");
        write(&ws.join("edit.txt"), "one\ntwo\n");
        write(&ws.join("changed-by-bash.txt"), "before\n");
        write(&ws.join("delete-me.txt"), "delete me\n");
        write(&ws.join("run.sh"), "#!/bin/sh\necho hi\n");
        chmod(&ws.join("run.sh"), 0o755);
        write(&ws.join("dir/nested.txt"), "nested\n");
        symlink("keep.txt", ws.join("old-link")).expect("link");
        write(&ws.join(".git/HEAD"), "ref: refs/heads/main\n");
        let id = session_with_checkpoint(&scratch);
        let before = tree(&ws);

        // What a turn did: a file tool's write, a command's change, a deletion, links, a mode.
        write(&ws.join("edit.txt"), "one\nTWO\nthree\n");
        write(&ws.join("changed-by-bash.txt"), "after\n");
        std::fs::remove_file(ws.join("delete-me.txt")).expect("rm");
        symlink("dir/nested.txt", ws.join("new-link")).expect("link");
        std::fs::remove_file(ws.join("old-link")).expect("rm link");
        symlink("edit.txt", ws.join("old-link")).expect("relink");
        chmod(&ws.join("run.sh"), 0o644);
        std::fs::remove_file(ws.join("dir/nested.txt")).expect("rm");
        symlink("../keep.txt", ws.join("dir/nested.txt")).expect("file to link");
        write(&ws.join("made/new.txt"), "new\n");
        write(&ws.join(".git/HEAD"), "ref: refs/heads/turn\n");
        let after_turn = tree(&ws);
        assert_ne!(after_turn, before);

        let dry = undo(&scratch, &[&id, "--dry-run"]);
        let out = text(&dry.stdout);
        assert_eq!(dry.status.code(), Some(0), "{out}{}", text(&dry.stderr));
        assert!(out.contains("before turn 1 (checkpoint t1)"), "{out}");
        assert!(
            out.contains(&format!(
                "added        {}",
                ws.join("delete-me.txt").display()
            )),
            "{out}"
        );
        assert!(out.contains("-TWO\n"), "the diff: {out}");
        assert!(out.contains("--dry-run: nothing was changed."), "{out}");
        assert_eq!(
            tree(&ws),
            after_turn,
            "{backend}: a dry run changes nothing"
        );

        let done = undo(&scratch, &[&id]);
        let out = text(&done.stdout);
        assert_eq!(
            done.status.code(),
            Some(0),
            "{backend}: {out}{}",
            text(&done.stderr)
        );
        let mut expected = before.clone();
        // .git is never recorded nor restored: it keeps what the turn wrote.
        expected.insert(
            PathBuf::from(".git/HEAD"),
            after_turn[Path::new(".git/HEAD")].clone(),
        );
        assert_eq!(
            tree(&ws),
            expected,
            "{backend}: byte for byte as before the turn"
        );

        let log = scratch.log(&id);
        let restored: Vec<&Value> = log
            .iter()
            .filter(|r| r["type"] == "checkpoint/restored")
            .collect();
        assert_eq!(restored.len(), 1, "{log:?}");
        assert_eq!(restored[0]["by"], "cli");
        assert_eq!(restored[0]["turn"], 1);
        assert_eq!(restored[0]["still_differs"], serde_json::json!([]));
        assert!(
            restored[0]["changes"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["kind"] == "added"
                    && c["path"] == ws.join("delete-me.txt").display().to_string())),
            "{:?}",
            restored[0]
        );

        // Undone: nothing is left to undo, and the error names the turns with a checkpoint.
        let again = undo(&scratch, &[&id]);
        assert_ne!(again.status.code(), Some(0));
        let err = text(&again.stderr);
        assert!(
            err.contains("no turn left to undo (each is undone already): the turns with one are 1"),
            "{err}"
        );
    }
}

#[test]
fn sessions_undo_says_what_is_wrong() {
    let scratch = Scratch::new_in(&scratch_base(), "undo-errors");
    write(&scratch.ws().join("f"), "x");
    let id = session_with_checkpoint(&scratch);

    let unknown = undo(&scratch, &["0000dead"]);
    assert_ne!(unknown.status.code(), Some(0));
    assert!(
        text(&unknown.stderr).contains("there is no session 0000dead"),
        "{}",
        text(&unknown.stderr)
    );

    let no_turn = undo(&scratch, &[&id, "--turn", "7", "--dry-run"]);
    assert_ne!(no_turn.status.code(), Some(0));
    let err = text(&no_turn.stderr);
    assert!(
        err.contains("has no checkpoint before turn 7; the turns with one are 1"),
        "{err}"
    );
    // The control: turn 1 has one.
    let turn_one = undo(&scratch, &[&id, "--turn", "1", "--dry-run"]);
    assert_eq!(
        turn_one.status.code(),
        Some(0),
        "{}",
        text(&turn_one.stderr)
    );

    scratch.config("[checkpoints]\nenabled = false\n");
    let disabled = undo(&scratch, &[&id, "--dry-run"]);
    assert_ne!(disabled.status.code(), Some(0));
    assert!(
        text(&disabled.stderr).contains("checkpoints are disabled"),
        "{}",
        text(&disabled.stderr)
    );
}

/// Keeps swapping `dir` for a link to `outside` until `stop`, counting the swaps made while
/// `counting` is set. Every state it leaves between two swaps is one of the two.
fn swapper(
    dir: PathBuf,
    outside: PathBuf,
    stop: Arc<AtomicBool>,
    counting: Arc<AtomicBool>,
    swaps: Arc<AtomicU64>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let real = dir.with_extension("real");
        while !stop.load(Ordering::SeqCst) {
            if std::fs::rename(&dir, &real).is_err() {
                continue;
            }
            if symlink(&outside, &dir).is_ok() {
                if counting.load(Ordering::SeqCst) {
                    swaps.fetch_add(1, Ordering::SeqCst);
                }
                std::thread::yield_now();
                let _ = std::fs::remove_file(&dir);
            }
            let _ = std::fs::rename(&real, &dir);
        }
    })
}

#[test]
fn a_directory_swapped_for_a_link_outside_during_the_restore_changes_nothing_outside() {
    for backend in support::backends() {
        let scratch = Scratch::new_in(&scratch_base(), &format!("undo-hostile-{backend}"));
        let ws = scratch.ws();
        let outside = scratch.root.join("outside");
        let d = ws.join("d");
        for i in 0..SWAPPED_FILES {
            write(&d.join(format!("f{i}")), &format!("inside {i}\n"));
            write(&outside.join(format!("f{i}")), &format!("outside {i}\n"));
        }
        let id = session_with_checkpoint(&scratch);
        for i in 0..SWAPPED_FILES {
            write(&d.join(format!("f{i}")), &format!("changed {i}\n"));
        }
        let store = Store::at(&scratch.state());
        let plan = store.plan_restore(&id, "t1", &scope(&ws)).expect("plan");
        assert_eq!(plan.changes.len(), SWAPPED_FILES);
        assert!(plan.changes.iter().all(|c| c.kind == ChangeKind::Modified));
        let outside_before = tree(&outside);

        let choice = match backend {
            "namespaces" => BackendChoice::Namespaces,
            "bwrap" => BackendChoice::Bwrap,
            "landlock" => BackendChoice::Landlock,
            other => panic!("{other} is not a Linux backend"),
        };
        let policy = SandboxProfile::default().writes(Mode::WorkspaceWrite, &ws, Network::Deny);
        let client = HelperClient::new(HelperEndpoint::Embedded(binary("confine-helper")));
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        let (stop, counting) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let swaps = Arc::new(AtomicU64::new(0));
        let thread = swapper(
            d.clone(),
            outside.clone(),
            stop.clone(),
            counting.clone(),
            swaps.clone(),
        );
        counting.store(true, Ordering::SeqCst);
        let restored = runtime.block_on(agentd::api::checkpoint::restore(
            &store,
            &id,
            &plan,
            &client,
            policy.clone(),
            choice,
        ));
        counting.store(false, Ordering::SeqCst);
        stop.store(true, Ordering::SeqCst);
        thread.join().expect("swapper");
        let restored = restored.expect("the restore ran");
        let swapped = swaps.load(Ordering::SeqCst);
        assert!(
            swapped > 0,
            "{backend}: the swap happened during the restore"
        );
        assert!(
            d.is_dir() && !d.is_symlink(),
            "the swapper left the directory in place"
        );
        assert_eq!(
            tree(&outside),
            outside_before,
            "{backend}: nothing outside the workspace changed ({swapped} swaps during the \
             restore; {} paths still differed, {} steps failed)",
            restored.still_differs.len(),
            restored.failed.len()
        );

        // Without the swap, the same restore finishes the job: nothing still differs.
        let plan = store
            .plan_restore(&id, "t1", &scope(&ws))
            .expect("plan again");
        let calm = runtime
            .block_on(agentd::api::checkpoint::restore(
                &store, &id, &plan, &client, policy, choice,
            ))
            .expect("restore");
        assert_eq!(
            calm.still_differs,
            Vec::<PathBuf>::new(),
            "{backend}: {:?}",
            calm.failed
        );
        for i in 0..SWAPPED_FILES {
            assert_eq!(
                std::fs::read_to_string(d.join(format!("f{i}"))).ok(),
                Some(format!("inside {i}\n"))
            );
        }

        // The control: the same plan written by path, unconfined, while the swap runs, does
        // write outside — the swap really sends a write there.
        for i in 0..SWAPPED_FILES {
            write(&d.join(format!("f{i}")), &format!("changed {i}\n"));
        }
        let (stop, counting) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(true)),
        );
        let thread = swapper(
            d.clone(),
            outside.clone(),
            stop.clone(),
            counting,
            swaps.clone(),
        );
        let started = Instant::now();
        let mut landed = false;
        while !landed && started.elapsed() < CONTROL_DEADLINE {
            for i in 0..SWAPPED_FILES {
                let _ = std::fs::write(d.join(format!("f{i}")), format!("inside {i}\n"));
            }
            landed = tree(&outside) != outside_before;
        }
        stop.store(true, Ordering::SeqCst);
        thread.join().expect("swapper");
        assert!(
            landed,
            "{backend}: the unconfined control wrote through the swapped link"
        );
    }
}
