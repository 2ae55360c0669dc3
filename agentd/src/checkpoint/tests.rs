//! The store on real files: the walk (links not followed, FIFOs not opened, ignored and
//! protected paths, the cap), incremental records, changes, plans and pruning. Restoring,
//! which needs confine-helper, is tested with the real helper in `tests/tests/undo.rs`.

use std::collections::HashMap;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

use super::*;
use crate::test_support::Scratch;

/// A deadline for a walk that must not block.
const WALK_DEADLINE: Duration = Duration::from_secs(30);

struct Fixture {
    _scratch: Scratch,
    state: PathBuf,
    ws: PathBuf,
    outside: PathBuf,
}

fn fixture(name: &str) -> Fixture {
    let scratch = Scratch::new(&format!("checkpoint-{name}"));
    let root = std::fs::canonicalize(&scratch.0).expect("canonical");
    let state = root.join("state");
    let ws = root.join("ws");
    let outside = root.join("outside");
    for dir in [&state, &ws, &outside] {
        std::fs::create_dir_all(dir).expect("dir");
    }
    Fixture {
        _scratch: scratch,
        state,
        ws,
        outside,
    }
}

fn scope(ws: &Path) -> Scope {
    Scope {
        roots: vec![ws.to_owned()],
        protected: vec![PathBuf::from(".git"), PathBuf::from(".agentd")],
        max_bytes: u64::MAX,
    }
}

fn write(path: &Path, text: &str) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("parent");
    }
    std::fs::write(path, text).expect("write");
}

fn left_out(recorded: &Recorded) -> HashMap<PathBuf, LeftOutWhy> {
    recorded
        .left_out
        .iter()
        .map(|l| (l.path.clone(), l.why))
        .collect()
}

fn objects_in(state: &Path) -> usize {
    Store::at(state).objects().all().expect("objects").len()
}

#[test]
fn the_walk_records_links_as_links_and_never_opens_a_fifo() {
    let f = fixture("walk");
    write(&f.outside.join("secret"), "outside bytes");
    write(&f.ws.join("a.txt"), "a");
    symlink(&f.outside, f.ws.join("out-dir")).expect("link");
    symlink(f.outside.join("secret"), f.ws.join("out-file")).expect("link");
    nix::unistd::mkfifo(&f.ws.join("fifo"), nix::sys::stat::Mode::S_IRWXU).expect("fifo");
    // A FIFO with no writer: an open without O_NONBLOCK would wait forever.
    let (tx, rx) = mpsc::channel();
    let (state, s) = (f.state.clone(), scope(&f.ws));
    std::thread::spawn(move || {
        let _ = tx.send(Store::at(&state).record("s1", "t1", &s));
    });
    let recorded = rx
        .recv_timeout(WALK_DEADLINE)
        .expect("the record ended (it did not wait on the FIFO)")
        .expect("recorded");
    assert_eq!(
        left_out(&recorded).get(&f.ws.join("fifo")),
        Some(&LeftOutWhy::NotRegular)
    );
    assert_eq!(recorded.files, 3, "a.txt and the two links: {recorded:?}");
    assert_eq!(
        objects_in(&f.state),
        1,
        "only a.txt's content is stored; nothing behind a link was read"
    );
    let manifest = Store::at(&f.state).load("s1", "t1").expect("manifest");
    let links: Vec<(&Path, &[u8])> = manifest
        .entries
        .iter()
        .filter(|e| e.kind == manifest::Kind::Link)
        .map(|e| (e.rel.as_path(), e.data.as_slice()))
        .collect();
    let target = f.outside.as_os_str().as_encoded_bytes();
    assert!(links.contains(&(Path::new("out-dir"), target)), "{links:?}");
    assert!(
        !manifest
            .entries
            .iter()
            .any(|e| e.rel.starts_with("out-dir") && e.rel != Path::new("out-dir")),
        "the walk did not go through the link"
    );
}

#[test]
fn ignored_protected_and_over_cap_paths_are_left_out_and_listed() {
    let f = fixture("leave-out");
    write(&f.ws.join(".gitignore"), "*.log\nbuild/\n");
    write(&f.ws.join("src/main.rs"), "fn main() {}\n");
    write(&f.ws.join("src/debug.log"), "log");
    write(&f.ws.join("build/out.bin"), "bin");
    write(&f.ws.join("node_modules/x/index.js"), "js");
    write(&f.ws.join(".agentd/config.toml"), "");
    write(&f.ws.join("big"), &"x".repeat(1000));
    let mut s = scope(&f.ws);
    s.max_bytes = 100;
    let recorded = Store::at(&f.state).record("s1", "t1", &s).expect("record");
    let out = left_out(&recorded);
    assert_eq!(
        out.get(&f.ws.join("src/debug.log")),
        Some(&LeftOutWhy::Ignored)
    );
    assert_eq!(out.get(&f.ws.join("build")), Some(&LeftOutWhy::Ignored));
    assert_eq!(
        out.get(&f.ws.join("node_modules")),
        Some(&LeftOutWhy::Ignored),
        "no repository: node_modules is left out"
    );
    assert_eq!(out.get(&f.ws.join("big")), Some(&LeftOutWhy::OverCap));
    assert!(recorded.over_cap);
    assert!(
        !out.contains_key(&f.ws.join(".agentd")),
        "protected: skipped, not listed"
    );
    let manifest = Store::at(&f.state).load("s1", "t1").expect("manifest");
    let rels: Vec<&Path> = manifest.entries.iter().map(|e| e.rel.as_path()).collect();
    assert_eq!(
        rels,
        [".gitignore", "src", "src/main.rs"].map(Path::new),
        "only what is neither ignored, protected nor over the cap"
    );

    // The control: with a repository, its rules alone decide; .git itself is never recorded.
    write(&f.ws.join(".git/info/exclude"), "src/main.rs\n");
    s.max_bytes = u64::MAX;
    let recorded = Store::at(&f.state).record("s1", "t2", &s).expect("record");
    let out = left_out(&recorded);
    assert_eq!(
        out.get(&f.ws.join("src/main.rs")),
        Some(&LeftOutWhy::Ignored)
    );
    assert!(!out.contains_key(&f.ws.join("node_modules")));
    assert!(!recorded.over_cap);
    let manifest = Store::at(&f.state).load("s1", "t2").expect("manifest");
    assert!(
        manifest
            .entries
            .iter()
            .any(|e| e.rel == Path::new("node_modules/x/index.js"))
    );
    assert!(!manifest.entries.iter().any(|e| e.rel.starts_with(".git")));
}

#[test]
fn a_second_record_of_an_unchanged_tree_reads_no_file() {
    let f = fixture("incremental");
    for i in 0..50 {
        write(
            &f.ws.join(format!("d{}/f{i}", i % 5)),
            &format!("content {i}"),
        );
    }
    let store = Store::at(&f.state).with_racy(Duration::ZERO);
    let s = scope(&f.ws);
    let (first, reads) = store.record_counting("s1", "t1", &s).expect("first");
    assert_eq!((first.files, reads), (50, 50));
    let objects = objects_in(&f.state);
    let (second, reads) = store.record_counting("s1", "t1-end", &s).expect("second");
    assert_eq!(reads, 0, "unchanged files cost a stat, not a read");
    assert_eq!(second.files, 50);
    assert_eq!(objects_in(&f.state), objects);

    write(&f.ws.join("d1/f1"), "changed");
    let (_, reads) = store.record_counting("s1", "t2", &s).expect("third");
    assert_eq!(reads, 1, "only the changed file is read");
    assert_eq!(objects_in(&f.state), objects + 1);

    // With the default window, a file changed just before a checkpoint began (d1/f1, written
    // right before t2) is read again by the next, since its timestamps cannot tell a later
    // change within the same tick; with no window it would not be.
    let (_, reads) = Store::at(&f.state)
        .record_counting("s1", "t3", &s)
        .expect("fourth");
    assert!(reads >= 1, "the racy file is read again: {reads}");
    let (_, reads) = store.record_counting("s1", "t4", &s).expect("fifth");
    assert_eq!(reads, 0);
}

#[test]
fn changes_between_checkpoints_and_a_plan_back() {
    let f = fixture("changes");
    write(&f.ws.join("keep"), "keep\n");
    write(&f.ws.join("edit"), "one\ntwo\nthree\n");
    write(&f.ws.join("gone"), "bye\n");
    write(&f.ws.join("run.sh"), "#!/bin/sh\n");
    std::fs::set_permissions(f.ws.join("run.sh"), std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    let store = Store::at(&f.state);
    let s = scope(&f.ws);
    store.record("s1", "t1", &s).expect("t1");
    write(&f.ws.join("edit"), "one\nTWO\nthree\n");
    std::fs::remove_file(f.ws.join("gone")).expect("rm");
    write(&f.ws.join("new/file"), "new\n");
    symlink("keep", f.ws.join("link")).expect("link");
    std::fs::set_permissions(f.ws.join("run.sh"), std::fs::Permissions::from_mode(0o644))
        .expect("chmod");
    store.record("s1", "t1-end", &s).expect("t1-end");
    let kinds = |changes: Vec<Change>| -> Vec<(PathBuf, ChangeKind)> {
        changes.into_iter().map(|c| (c.path, c.kind)).collect()
    };
    let w = |p: &str| f.ws.join(p);
    assert_eq!(
        kinds(store.changes("s1", "t1", "t1-end").expect("changes")),
        vec![
            (w("edit"), ChangeKind::Modified),
            (w("gone"), ChangeKind::Deleted),
            (w("link"), ChangeKind::Added),
            (w("new"), ChangeKind::Added),
            (w("new/file"), ChangeKind::Added),
            (w("run.sh"), ChangeKind::Modified),
        ]
    );
    let plan = store.plan_restore("s1", "t1", &s).expect("plan");
    assert_eq!(
        kinds(plan.changes.clone()),
        vec![
            (w("edit"), ChangeKind::Modified),
            (w("gone"), ChangeKind::Added),
            (w("link"), ChangeKind::Deleted),
            (w("new"), ChangeKind::Deleted),
            (w("new/file"), ChangeKind::Deleted),
            (w("run.sh"), ChangeKind::Modified),
        ]
    );
    assert!(plan.diff.contains("-TWO\n+two\n"), "{}", plan.diff);
    assert!(plan.diff.contains("+bye\n"), "{}", plan.diff);
    assert!(
        plan.diff
            .contains("now a link to keep; after the restore nothing"),
        "{}",
        plan.diff
    );
    assert_eq!(
        plan.ops.remove,
        vec![w("link"), w("new")],
        "new/file goes with new"
    );
    assert!(plan.ops.writes.iter().any(|(_, p)| *p == w("gone")));
    assert_eq!(
        std::fs::read_to_string(w("edit")).ok().as_deref(),
        Some("one\nTWO\nthree\n"),
        "planning changes nothing"
    );

    let missing = store.plan_restore("s1", "t9", &s).expect_err("no t9");
    assert!(
        missing
            .to_string()
            .contains("has no checkpoint t9; it has t1, t1-end"),
        "{missing}"
    );
}

#[test]
fn pruning_keeps_the_newest_per_session_and_the_objects_they_need() {
    let f = fixture("prune");
    let store = Store::at(&f.state);
    let s = scope(&f.ws);
    for turn in 1..=4 {
        write(&f.ws.join("f"), &format!("version {turn}"));
        store.record("s1", &before_turn(turn), &s).expect("record");
    }
    store.record("s2", "t1", &s).expect("other session");
    assert_eq!(objects_in(&f.state), 4);
    let keep_two = Retention {
        max_age: Duration::from_secs(3600),
        max_per_session: 2,
    };
    let pruned = store.prune(&keep_two, SystemTime::now()).expect("prune");
    assert_eq!((pruned.checkpoints, pruned.objects), (2, 2));
    assert_eq!(store.labels("s1").expect("labels"), ["t3", "t4"]);
    assert_eq!(store.labels("s2").expect("labels"), ["t1"]);
    assert!(
        store.plan_restore("s1", "t3", &s).is_ok(),
        "what is kept still restores"
    );

    let later = SystemTime::now() + Duration::from_secs(7200);
    let pruned = store.prune(&keep_two, later).expect("prune by age");
    assert_eq!((pruned.checkpoints, pruned.objects), (3, 2));
    assert!(store.labels("s1").expect("labels").is_empty());
    assert_eq!(objects_in(&f.state), 0);
}

#[test]
fn the_store_is_private_and_a_torn_record_leaves_the_others_usable() {
    let f = fixture("private");
    write(&f.ws.join("f"), "x");
    let store = Store::at(&f.state);
    store.record("s1", "t1", &scope(&f.ws)).expect("record");
    let mode = std::fs::metadata(store.dir())
        .expect("store")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
    // What a crash mid-record leaves: a manifest under its temporary name.
    let session = store.dir().join("sessions/s1");
    std::fs::write(session.join(".t2.99999"), b"V\0").expect("torn");
    assert_eq!(store.labels("s1").expect("labels"), ["t1"]);
    assert!(store.plan_restore("s1", "t1", &scope(&f.ws)).is_ok());

    std::fs::set_permissions(store.dir(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let open = store
        .record("s1", "t2", &scope(&f.ws))
        .expect_err("open store");
    assert!(open.to_string().contains("must be 0700"), "{open}");

    for bad in ["../x", "", ".hidden", "a/b"] {
        assert!(matches!(
            Store::at(&f.state).labels(bad),
            Err(CheckpointError::BadName { .. })
        ));
    }
}

#[test]
fn a_manifest_reads_back_as_written() {
    let f = fixture("manifest");
    write(&f.ws.join("a b\nc"), "odd name");
    symlink("target with spaces", f.ws.join("l")).expect("link");
    let store = Store::at(&f.state);
    store.record("s1", "t1", &scope(&f.ws)).expect("record");
    let manifest = store.load("s1", "t1").expect("load");
    assert_eq!(
        manifest::Manifest::decode(&manifest.encode()).as_ref(),
        Ok(&manifest)
    );
    assert!(
        manifest
            .entries
            .iter()
            .any(|e| e.rel == Path::new("a b\nc"))
    );
    let mut torn = manifest.encode();
    torn.truncate(torn.len() / 2);
    assert!(manifest::Manifest::decode(&torn).is_err());
}

#[test]
fn a_root_that_holds_the_state_directory_does_not_record_it() {
    let f = fixture("state-inside");
    let state = f.ws.join(".local/state/agentd");
    std::fs::create_dir_all(&state).expect("state dir");
    write(&f.ws.join("notes.txt"), "x");
    let store = Store::at(&state);
    store.record("s1", "t1", &scope(&f.ws)).expect("first");
    let (second, reads) = store
        .record_counting("s1", "t2", &scope(&f.ws))
        .expect("second");
    assert_eq!(
        second.files, 1,
        "only notes.txt, not the store's own files: {second:?}"
    );
    assert!(reads <= 1, "{reads}");
    // The control: the store is there to be recorded, had it not been left out.
    assert!(state.join("checkpoints/sessions/s1/t1").exists());
}

#[test]
fn the_events_keep_their_names_and_show_in_the_transcript_only() {
    use crate::session::fold::{history, replay, transcript};
    use crate::session::{EVENT_VERSION, Event, Record, RestoredBy};
    let change = Change {
        path: PathBuf::from("/w/a"),
        kind: ChangeKind::TypeChanged,
    };
    let events = [
        Event::SessionCreated {
            id: "abc".into(),
            cwd: "/w".into(),
            agent: "agentd test".into(),
        },
        Event::CheckpointRecorded {
            turn: 1,
            label: before_turn(1),
            files: 3,
            bytes: 42,
            left_out: vec![PathBuf::from("/w/big")],
            over_cap: true,
        },
        Event::TurnChanges {
            turn: 1,
            changes: vec![change.clone()],
        },
        Event::CheckpointRestored {
            turn: 1,
            label: before_turn(1),
            changes: vec![change],
            still_differs: vec![PathBuf::from("/w/b")],
            by: RestoredBy::Cli,
        },
    ];
    let records: Vec<Record> = events
        .into_iter()
        .enumerate()
        .map(|(i, event)| Record {
            v: EVENT_VERSION,
            seq: i as u64,
            at_ms: 1000,
            agent: None,
            event,
        })
        .collect();
    let json: Vec<serde_json::Value> = records
        .iter()
        .map(|r| serde_json::to_value(r).expect("json"))
        .collect();
    assert_eq!(json[1]["type"], "checkpoint/recorded");
    assert_eq!(json[1]["left_out"], serde_json::json!(["/w/big"]));
    assert_eq!(json[2]["type"], "turn/changes");
    assert_eq!(
        json[2]["changes"],
        serde_json::json!([{"path": "/w/a", "kind": "type_changed"}])
    );
    assert_eq!(json[3]["type"], "checkpoint/restored");
    assert_eq!(json[3]["by"], "cli");
    for (value, record) in json.iter().zip(&records) {
        let back: Record = serde_json::from_value(value.clone()).expect("reads back");
        assert_eq!(&back, record);
    }
    let text = transcript(&records);
    assert!(text.contains("checkpoint t1: 3 files, 42 bytes, 1 left out (over the size cap)"));
    assert!(
        text.contains("turn 1 changed 1 path\n    type_changed /w/a"),
        "{text}"
    );
    assert!(
        text.contains("restored checkpoint t1 (by cli): 1 path changed"),
        "{text}"
    );
    assert!(text.contains("still differs: /w/b"), "{text}");
    let recorded_only = &records[..3];
    assert!(
        history(recorded_only).is_empty(),
        "never the model's history"
    );
    assert!(
        replay(recorded_only).is_empty(),
        "never replayed to the editor"
    );
}

#[test]
fn a_fifo_swapped_in_after_the_lstat_is_not_waited_on_nor_read() {
    // The walk's open of a file it saw regular: were a FIFO put there meanwhile, an open
    // without O_NONBLOCK would wait for a writer forever.
    let f = fixture("fifo-race");
    nix::unistd::mkfifo(&f.ws.join("was-a-file"), nix::sys::stat::Mode::S_IRWXU).expect("fifo");
    write(&f.ws.join("file"), "content");
    let ws = f.ws.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let dir = std::fs::File::open(&ws).expect("dir");
        let fifo = walk::open_regular(&dir, std::ffi::OsStr::new("was-a-file"));
        let file = walk::open_regular(&dir, std::ffi::OsStr::new("file"));
        let _ = tx.send((fifo.map(|f| f.is_some()), file.map(|f| f.is_some())));
    });
    let (fifo, file) = rx
        .recv_timeout(WALK_DEADLINE)
        .expect("the opens returned (the FIFO was not waited on)");
    assert_eq!(
        fifo,
        Ok(false),
        "a FIFO is opened without waiting and not taken"
    );
    assert_eq!(file, Ok(true), "the control: a regular file is taken");
}
