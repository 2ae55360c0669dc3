//! The checkpoints section: recording a 10,000-file, 200 MB workspace (a tenth in a quick run) into agentd's checkpoint
//! store, first into an empty store and then again (the incremental record every turn makes,
//! whose target is 50 ms), against a plain walk that `lstat`s every path; then planning and
//! restoring a turn's changes through confine-helper, as `agentd sessions undo` does.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agentd::api::checkpoint::{Scope, Store, restore};
use agentd::api::helper_client::HelperClient;
use agentd::api::profile::SandboxProfile;
use confine_protocol::{BackendChoice, Mode, Network};

use crate::error::BenchError;
use crate::measure::{Row, Table, rows};
use crate::setup::Setup;
use crate::stats::Samples;

/// Files of the workspace: 10,000 (200 MB); a quick run's 1,000 (20 MB).
pub const FULL_FILES: usize = 10_000;
pub const QUICK_FILES: usize = 1_000;
/// Files in each directory of the workspace.
const FILES_PER_DIR: usize = 100;
/// Bytes of each file: 10,000 of them make 200 MB.
const FILE_BYTES: usize = 20_000;
/// Records into an empty store (each writes 200 MB).
const FIRST_ROUNDS: usize = 3;
/// Restores measured (each runs about 130 confined steps).
const RESTORE_ROUNDS: usize = 6;
/// What a measured turn changes: files modified, deleted and added.
const MODIFIED: usize = 100;
const DELETED: usize = 10;
const ADDED: usize = 10;
/// The files an incremental record with changes finds changed.
const CHANGED: usize = 10;
/// The session the benchmark's checkpoints belong to.
const SESSION: &str = "bench";

fn file(ws: &Path, i: usize) -> PathBuf {
    ws.join(format!("d{:03}", i / FILES_PER_DIR))
        .join(format!("f{:03}.txt", i % FILES_PER_DIR))
}

/// Content of file `i`, distinct per file (so every file is its own object), in `round`.
fn content(i: usize, round: usize) -> Vec<u8> {
    let line = format!("file {i} round {round} of the checkpoint benchmark\n");
    line.as_bytes()
        .iter()
        .copied()
        .cycle()
        .take(FILE_BYTES)
        .collect()
}

fn io(what: &str, path: &Path) -> impl FnOnce(std::io::Error) -> BenchError {
    let path = path.display().to_string();
    let what = what.to_owned();
    move |e| fail!("cannot {what} {path}: {e}")
}

/// The plain baseline: every path `lstat`ed, directories listed.
fn walk_stat(dir: &Path) -> Result<usize, BenchError> {
    let mut seen = 0;
    for entry in std::fs::read_dir(dir).map_err(io("list", dir))? {
        let path = entry.map_err(io("list", dir))?.path();
        let meta = path.symlink_metadata().map_err(io("stat", &path))?;
        seen += 1;
        if meta.is_dir() {
            seen += walk_stat(&path)?;
        }
    }
    Ok(seen)
}

/// Bytes under `dir`.
fn size_of(dir: &Path) -> u64 {
    let Ok(listing) = std::fs::read_dir(dir) else {
        return 0;
    };
    listing
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => size_of(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// The checkpoints' names within the session, one after another: `t1`, `t2`, …
#[derive(Debug, Default)]
struct Labels(u64);

impl Labels {
    /// The next checkpoint's name.
    fn next(&mut self) -> String {
        self.0 += 1;
        format!("t{}", self.0)
    }
}

/// What the records and the restores work on: the workspace, what a record covers of it, and
/// where the store keeps its state.
struct Workspace {
    /// The workspace's directory.
    ws: PathBuf,
    /// What a record covers: the workspace, less `.git` and `.agentd`.
    scope: Scope,
    /// The store's directory.
    state: PathBuf,
    /// Files the workspace was written with.
    files: usize,
}

impl Workspace {
    /// The store in `state`, as the section measures it.
    fn store(&self) -> Store {
        // Stats are trusted only for files older than the racy window, as all but a turn's last
        // few files are in a real session: the store here trusts them at once instead of waiting.
        Store::at(&self.state).with_racy(Duration::ZERO)
    }
}

pub async fn checkpoints(setup: &Setup, client: &HelperClient) -> Result<Table, BenchError> {
    let files = setup.checkpoint_files;
    let mut table = Table::new(&format!(
        "Checkpoints ({} files, {} MB)",
        crate::stats::thousands(files),
        files * FILE_BYTES / 1_000_000
    ));
    let root = setup.workspace.join("checkpoints");
    let workspace = write_workspace(setup, &root)?;
    let first = first_records(setup, &workspace)?;
    let store = workspace.store();
    table.figures.push((
        "first record, into an empty store (median)".into(),
        crate::stats::ms(first.median()),
    ));
    table.figures.push((
        "the store after it".into(),
        format!("{:.1} MB", size_of(&workspace.state) as f64 / 1e6),
    ));
    let mut labels = Labels::default();
    table.rows = incremental_records(setup, &workspace, &store, &mut labels)?;
    table
        .rows
        .extend(restores(setup, client, &workspace, &store, &mut labels).await?);
    let _ = std::fs::remove_dir_all(&root);
    Ok(table)
}

/// Writes the section's workspace of `setup.checkpoint_files` files under `root`.
fn write_workspace(setup: &Setup, root: &Path) -> Result<Workspace, BenchError> {
    let files = setup.checkpoint_files;
    let ws = root.join("ws");
    let state = setup.scratch.join("checkpoint-state");
    for i in 0..files {
        let path = file(&ws, i);
        if i % FILES_PER_DIR == 0 {
            std::fs::create_dir_all(path.parent().unwrap_or(&ws)).map_err(io("create", &ws))?;
        }
        std::fs::write(&path, content(i, 0)).map_err(io("write", &path))?;
    }
    let scope = Scope {
        roots: vec![ws.clone()],
        protected: vec![PathBuf::from(".git"), PathBuf::from(".agentd")],
        max_bytes: u64::MAX,
    };
    Ok(Workspace {
        ws,
        scope,
        state,
        files,
    })
}

/// Times the first record of the workspace, each round into an empty store; the store the last
/// round leaves is the one the rest of the section records into.
fn first_records(setup: &Setup, workspace: &Workspace) -> Result<Samples, BenchError> {
    let state = &workspace.state;
    let rounds = setup.rounds.min(FIRST_ROUNDS + 1);
    let mut first = Samples::default();
    for round in 0..rounds {
        let _ = std::fs::remove_dir_all(state);
        std::fs::create_dir_all(state).map_err(io("create", state))?;
        let store = workspace.store();
        let started = Instant::now();
        let recorded = store
            .record(SESSION, "t0", &workspace.scope)
            .map_err(|e| fail!("{e}"))?;
        if round > 0 {
            first.0.push(started.elapsed());
        }
        if recorded.files != workspace.files as u64 {
            return Err(fail!("the first record took {} files", recorded.files));
        }
    }
    Ok(first)
}

/// The plain walk against an incremental record with nothing changed and one with
/// [`CHANGED`] files changed, interleaved round by round; their rows.
fn incremental_records(
    setup: &Setup,
    workspace: &Workspace,
    store: &Store,
    labels: &mut Labels,
) -> Result<Vec<Row>, BenchError> {
    let ws = &workspace.ws;
    let (mut stat, mut unchanged, mut changed) =
        (Samples::default(), Samples::default(), Samples::default());
    for round in 0..setup.rounds {
        let started = Instant::now();
        walk_stat(ws)?;
        let stat_took = started.elapsed();
        let started = Instant::now();
        store
            .record(SESSION, &labels.next(), &workspace.scope)
            .map_err(|e| fail!("{e}"))?;
        let unchanged_took = started.elapsed();
        for k in 0..CHANGED {
            let i = (round * CHANGED + k) % workspace.files;
            std::fs::write(file(ws, i), content(i, round + 1)).map_err(io("write", ws))?;
        }
        let started = Instant::now();
        store
            .record(SESSION, &labels.next(), &workspace.scope)
            .map_err(|e| fail!("{e}"))?;
        let changed_took = started.elapsed();
        if round > 0 {
            stat.0.push(stat_took);
            unchanged.0.push(unchanged_took);
            changed.0.push(changed_took);
        }
    }
    Ok(rows(
        vec![
            "a plain walk that `lstat`s every path".into(),
            "incremental record, nothing changed".into(),
            format!("incremental record, {CHANGED} files changed"),
        ],
        vec![stat, unchanged, changed],
        vec![
            "baseline: what an unchanged file must cost at least".into(),
            "a stat per file; the manifest written and synced".into(),
            "their content read and stored; the racy window is zero here, so the files changed \
             just before the previous record are not read again"
                .into(),
        ],
    ))
}

/// Makes a turn's changes: [`MODIFIED`] files written anew for `round`, [`DELETED`] removed and
/// [`ADDED`] added.
fn change_a_turn(workspace: &Workspace, round: usize) -> Result<(), BenchError> {
    let (ws, files) = (&workspace.ws, workspace.files);
    for i in 0..MODIFIED {
        std::fs::write(
            file(ws, i * 7 % files),
            content(i * 7 % files, 1000 + round),
        )
        .map_err(io("write", ws))?;
    }
    for i in 0..DELETED {
        let path = file(ws, files / 2 + i);
        std::fs::remove_file(&path).map_err(io("remove", &path))?;
    }
    for i in 0..ADDED {
        let path = ws.join(format!("d000/new{i}.txt"));
        std::fs::write(&path, b"new").map_err(io("write", &path))?;
    }
    Ok(())
}

/// Times a turn's changes planned and then restored through confine-helper, back to a
/// checkpoint recorded before them; the rows of the plan and of the restore.
async fn restores(
    setup: &Setup,
    client: &HelperClient,
    workspace: &Workspace,
    store: &Store,
    labels: &mut Labels,
) -> Result<[Row; 2], BenchError> {
    let policy =
        SandboxProfile::default().writes(Mode::WorkspaceWrite, &workspace.ws, Network::Deny);
    let (mut plans, mut restores) = (Samples::default(), Samples::default());
    let before = labels.next();
    store
        .record(SESSION, &before, &workspace.scope)
        .map_err(|e| fail!("{e}"))?;
    for round in 0..setup.rounds.min(RESTORE_ROUNDS + 1) {
        change_a_turn(workspace, round)?;
        let started = Instant::now();
        let plan = store
            .plan_restore(SESSION, &before, &workspace.scope)
            .map_err(|e| fail!("{e}"))?;
        let plan_took = started.elapsed();
        let started = Instant::now();
        let restored = restore(
            store,
            SESSION,
            &plan,
            client,
            policy.clone(),
            BackendChoice::Auto,
        )
        .await
        .map_err(|e| fail!("{e}"))?;
        let restore_took = started.elapsed();
        if !restored.still_differs.is_empty() {
            return Err(fail!(
                "the restore left {} paths different: {:?}",
                restored.still_differs.len(),
                restored.failed
            ));
        }
        if round > 0 {
            plans.0.push(plan_took);
            restores.0.push(restore_took);
        }
    }
    let n = MODIFIED + DELETED + ADDED;
    Ok([
        Row {
            variant: format!("plan of a restore ({n} paths: diff included)"),
            samples: plans,
            baseline: false,
            note: "a scan of the workspace against the checkpoint, and the diff text".into(),
        },
        Row {
            variant: format!(
                "restore through confine-helper ({MODIFIED} modified, {DELETED} deleted, {ADDED} added)"
            ),
            samples: restores,
            baseline: false,
            note: "one `rm`, a helper's writer per file, two scans; workspace-write, auto backend"
                .into(),
        },
    ])
}
