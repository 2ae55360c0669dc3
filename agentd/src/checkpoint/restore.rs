//! Restoring a checkpoint through confinement. agentd writes nothing by path: every change is
//! made by a confined process under the workspace-write policy the caller gives, exactly as a
//! command of the session would make it, so a directory swapped for a link to somewhere
//! outside while the restore runs changes which name is reached, never what may be written.
//!
//! In order: one `rm -rf` of what must go (what the checkpoint does not have, and what changed
//! kind); one `mkdir -p` of the directories it had; `ln -s -T` per link (a link is made, never
//! written through); the helper's own writer (`HelperClient::write_file`, the one the file
//! tools use) per file whose content differs, reading the object straight from the store;
//! then, after a scan, `chmod` of the modes that still differ (files, then directories deepest
//! first). FIFOs, sockets and devices are never recreated, `.git` and protected paths never
//! named. Each step's failure is noted and the next goes on; then the roots are scanned again
//! and every path that still differs from the checkpoint is reported.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use confine_protocol::{BackendChoice, ExitStatus, Policy};

use super::diff_text::{Side, file_diff};
use super::manifest::{Kind, Manifest};
use super::store::{Difference, Now};
use super::walk::open_below;
use super::{Change, CheckpointError, RestorePlan, Scope, Store};
use crate::helper_client::{HelperClient, Outcome, SpawnSpec, WriteSpec};
use crate::session::DIFF_TEXT_CAP;

/// The `PATH` of the restore's commands.
const PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// The most argument bytes one command of a restore is given (the request must stay under
/// 1 MiB, the helper's frame limit).
const MAX_ARG_BYTES: usize = 256 * 1024;
/// How long one step of a restore may take.
const STEP_TIMEOUT_MS: u64 = 120_000;
/// The most of a failed step's report kept.
const REPORT_CAP: u64 = 4096;

/// What a restore did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Restored {
    /// The changes made (the plan's, less what still differs).
    pub changed: Vec<Change>,
    /// What differed from the checkpoint when the roots were scanned again afterwards.
    pub still_differs: Vec<PathBuf>,
    /// The steps that failed, in words (the sandbox refused a write, a program was missing).
    pub failed: Vec<String>,
}

/// The operations a plan carries out, all by absolute path, all confined.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct Ops {
    pub(super) remove: Vec<PathBuf>,
    mkdir: Vec<PathBuf>,
    /// Target, link.
    links: Vec<(OsString, PathBuf)>,
    /// Object, file.
    pub(super) writes: Vec<(String, PathBuf)>,
    /// What the walk after the restore skips, as the one before it did.
    protected: Vec<PathBuf>,
}

/// The plan of restoring to `then` (checkpoint `label`) from the state `found` differs by.
pub(super) fn plan(
    store: &Store,
    label: &str,
    then: &Manifest,
    found: Vec<Difference>,
    scope: &Scope,
) -> Result<RestorePlan, CheckpointError> {
    let objects = store.objects();
    let mut ops = Ops {
        protected: scope.protected.clone(),
        ..Ops::default()
    };
    let mut diff = String::new();
    for d in &found {
        let now_kind = match &d.now {
            Now::Is(e) => Some(e.kind),
            _ => None,
        };
        let kind_changes = match (&d.now, &d.then) {
            (Now::Is(n), Some(t)) => n.kind != t.kind || (t.kind == Kind::Link && !n.same_as(t)),
            (Now::Is(_), None) => true,
            (Now::Unknown(super::LeftOutWhy::NotRegular), Some(_)) => true,
            _ => false,
        };
        if kind_changes && !ops.remove.iter().any(|r| d.path.starts_with(r)) {
            ops.remove.push(d.path.clone());
        }
        let removed = kind_changes;
        if let Some(t) = &d.then {
            let same_kind = now_kind == Some(t.kind) && !removed;
            match t.kind {
                Kind::Dir => {
                    if !same_kind {
                        ops.mkdir.push(d.path.clone());
                    }
                }
                Kind::Link => {
                    if !same_kind {
                        let target = OsString::from_vec(t.data.clone());
                        ops.links.push((target, d.path.clone()));
                    }
                }
                Kind::File => {
                    let hash = String::from_utf8_lossy(&t.data).into_owned();
                    let content_same =
                        matches!(&d.now, Now::Is(n) if same_kind && n.data == t.data);
                    if !content_same {
                        if !objects.exists(&hash) {
                            return Err(CheckpointError::MissingObject {
                                hash,
                                path: d.path.clone(),
                            });
                        }
                        ops.writes.push((hash, d.path.clone()));
                    }
                }
            }
        }
        let same_content = matches!((&d.now, &d.then),
            (Now::Is(n), Some(t)) if n.kind == t.kind && n.data == t.data);
        let shows_file = !same_content
            && (d.then.as_ref().is_some_and(|t| t.kind == Kind::File)
                || now_kind == Some(Kind::File));
        if shows_file {
            diff.push_str(&file_diff(
                &d.path.to_string_lossy(),
                &now_side(then, d),
                &then_side(store, d),
            ));
        } else {
            diff.push_str(&format!("{}: {}\n", d.path.display(), describe(d)));
        }
    }
    Ok(RestorePlan {
        label: label.to_owned(),
        changes: found
            .into_iter()
            .map(|d| Change {
                path: d.path,
                kind: d.kind,
            })
            .collect(),
        diff,
        ops,
    })
}

/// A difference that is no file's content, in words.
fn describe(d: &Difference) -> String {
    let what = |kind: Kind, data: &[u8]| match kind {
        Kind::Dir => "a directory".to_owned(),
        Kind::Link => format!("a link to {}", String::from_utf8_lossy(data)),
        Kind::File => "a file".to_owned(),
    };
    let now = match &d.now {
        Now::Absent => "nothing".to_owned(),
        Now::Is(e) => what(e.kind, &e.data),
        Now::Unknown(why) => format!("left out ({})", why.as_str()),
    };
    let then = match &d.then {
        None => "nothing".to_owned(),
        Some(e) => what(e.kind, &e.data),
    };
    if let (Now::Is(n), Some(t)) = (&d.now, &d.then)
        && now == then
    {
        format!("mode now {:o}; after the restore {:o}", n.mode, t.mode)
    } else {
        format!("now {now}; after the restore {then}")
    }
}

/// What the file is now, for the diff: read without following a link.
fn now_side(then: &Manifest, d: &Difference) -> Side {
    match &d.now {
        Now::Absent => Side::Absent,
        Now::Is(e) if e.kind == Kind::File => match then.roots.get(d.root) {
            Some(root) => match open_below(root, &d.rel) {
                Some(file) => read_capped(file),
                None => Side::Other("gone".into()),
            },
            None => Side::Other("unknown".into()),
        },
        Now::Is(e) if e.kind == Kind::Link => {
            Side::Other(format!("a link to {}", String::from_utf8_lossy(&e.data)))
        }
        Now::Is(_) => Side::Other("a directory".into()),
        Now::Unknown(why) => Side::Other(format!("left out ({})", why.as_str())),
    }
}

/// What the file is in the checkpoint, for the diff.
fn then_side(store: &Store, d: &Difference) -> Side {
    match &d.then {
        None => Side::Absent,
        Some(e) if e.kind == Kind::File => {
            match store.objects().open(&String::from_utf8_lossy(&e.data)) {
                Ok(file) => read_capped(file),
                Err(_) => Side::Other("missing from the store".into()),
            }
        }
        Some(e) if e.kind == Kind::Link => {
            Side::Other(format!("a link to {}", String::from_utf8_lossy(&e.data)))
        }
        Some(_) => Side::Other("a directory".into()),
    }
}

/// A file's bytes, up to one more than a diff shows.
fn read_capped(file: std::fs::File) -> Side {
    use std::io::Read;
    let mut bytes = Vec::new();
    let cap = u64::try_from(DIFF_TEXT_CAP).unwrap_or(u64::MAX) + 1;
    match file.take(cap).read_to_end(&mut bytes) {
        Ok(_) => Side::Bytes(bytes),
        Err(e) => Side::Other(format!("unreadable ({e})")),
    }
}

/// Applies `plan` through confinement, then scans again and reports any path that still
/// differs from the checkpoint (a concurrent change, a refused write): never claims a success
/// it did not see.
pub async fn restore(
    store: &Store,
    session: &str,
    plan: &RestorePlan,
    helper: &HelperClient,
    policy: Policy,
    backend: BackendChoice,
) -> Result<Restored, CheckpointError> {
    // Shared with records, so no prune removes an object while it is being written back.
    let _lock = store.lock(false)?;
    let then = store.load(session, &plan.label)?;
    let runner = Runner {
        helper,
        policy,
        backend,
        cwd: then
            .roots
            .first()
            .cloned()
            .unwrap_or_else(|| PathBuf::from("/")),
    };
    let ops = &plan.ops;
    let mut failed = Vec::new();
    let paths = |list: &[PathBuf]| -> Vec<OsString> {
        list.iter().map(|p| p.as_os_str().to_owned()).collect()
    };
    runner
        .batches(
            &words(&["rm", "-rf", "--"]),
            &paths(&ops.remove),
            1,
            &mut failed,
        )
        .await?;
    runner
        .batches(
            &words(&["mkdir", "-p", "--"]),
            &paths(&ops.mkdir),
            1,
            &mut failed,
        )
        .await?;
    let pairs: Vec<OsString> = ops
        .links
        .iter()
        .flat_map(|(target, link)| [target.clone(), link.as_os_str().to_owned()])
        .collect();
    runner
        .batches(&each_pair("ln -s -T --"), &pairs, 2, &mut failed)
        .await?;
    for (hash, path) in &ops.writes {
        runner.write(store, hash, path, &mut failed).await?;
    }
    let scope = Scope {
        roots: then.roots.clone(),
        protected: ops.protected.clone(),
        max_bytes: u64::MAX,
    };
    // Modes last, and only where they still differ: a chmod names its path like any write,
    // and under Landlock (which does not govern metadata) the fewer of them the better.
    let modes: Vec<OsString> = mode_changes(scan(store, &then, &scope).await?)
        .into_iter()
        .flat_map(|(mode, path)| [OsString::from(format!("{mode:o}")), path.into_os_string()])
        .collect();
    runner
        .batches(&each_pair("chmod --"), &modes, 2, &mut failed)
        .await?;
    let rescan = scan(store, &then, &scope).await?;
    let still_differs: Vec<PathBuf> = rescan.into_iter().map(|d| d.path).collect();
    let changed = plan
        .changes
        .iter()
        .filter(|c| !still_differs.contains(&c.path))
        .cloned()
        .collect();
    Ok(Restored {
        changed,
        still_differs,
        failed,
    })
}

/// The roots compared with `then` now, off the async threads.
async fn scan(
    store: &Store,
    then: &Manifest,
    scope: &Scope,
) -> Result<Vec<Difference>, CheckpointError> {
    let (store, then, scope) = (store.clone(), then.clone(), scope.clone());
    tokio::task::spawn_blocking(move || store.compare_now(&then, &scope))
        .await
        .map_err(|e| CheckpointError::Join(e.to_string()))?
}

/// The modes to set so that `found` differs in nothing else: files first, then directories,
/// deepest first (a directory made read-only last).
fn mode_changes(found: Vec<Difference>) -> Vec<(u32, PathBuf)> {
    let mut modes: Vec<(bool, usize, u32, PathBuf)> = found
        .into_iter()
        .filter_map(|d| match (&d.now, &d.then) {
            (Now::Is(n), Some(t))
                if n.kind == t.kind && n.data == t.data && t.kind != Kind::Link =>
            {
                let depth = d.path.components().count();
                Some((t.kind == Kind::Dir, usize::MAX - depth, t.mode, d.path))
            }
            _ => None,
        })
        .collect();
    modes.sort();
    modes
        .into_iter()
        .map(|(_, _, mode, path)| (mode, path))
        .collect()
}

/// `sh -c` running `command "$1" "$2"` for each pair of its arguments (the paths are
/// arguments, never part of the script).
fn each_pair(command: &str) -> Vec<OsString> {
    let script = format!(
        "s=0; while [ $# -gt 1 ]; do {command} \"$1\" \"$2\" || s=1; shift 2; done; exit $s"
    );
    vec!["sh".into(), "-c".into(), script.into(), "sh".into()]
}

fn words(words: &[&str]) -> Vec<OsString> {
    words.iter().map(OsString::from).collect()
}

/// Runs a restore's steps through the helper.
struct Runner<'a> {
    helper: &'a HelperClient,
    policy: Policy,
    backend: BackendChoice,
    cwd: PathBuf,
}

impl Runner<'_> {
    /// Runs `program` with `args` appended, as few times as the argument limit allows,
    /// keeping groups of `group` arguments together.
    async fn batches(
        &self,
        program: &[OsString],
        args: &[OsString],
        group: usize,
        failed: &mut Vec<String>,
    ) -> Result<(), CheckpointError> {
        let mut start = 0;
        while start < args.len() {
            let mut end = start;
            let mut bytes = 0;
            while end < args.len() && (end == start || bytes < MAX_ARG_BYTES) {
                for arg in &args[end..(end + group).min(args.len())] {
                    bytes += arg.len() + 1;
                }
                end = (end + group).min(args.len());
            }
            let mut argv: Vec<OsString> = program.to_vec();
            argv.extend(args[start..end].iter().cloned());
            let (report, report_wr) =
                crate::command::output_pipe().map_err(CheckpointError::Prepare)?;
            let mut spec = SpawnSpec::new(argv);
            spec.cwd = self.cwd.clone();
            spec.env = vec![("PATH".into(), PATH.into()), ("LC_ALL".into(), "C".into())];
            spec.policy = self.policy.clone();
            spec.backend = self.backend;
            spec.limits.timeout_ms = Some(STEP_TIMEOUT_MS);
            spec.stderr = Some(report_wr);
            let handle = self.helper.spawn(spec).await?;
            let (outcome, report) = tokio::join!(handle.wait(), drain(report));
            if let Some(why) = failure(&outcome, &report) {
                let named = program
                    .iter()
                    .find(|w| !matches!(w.as_bytes(), b"sh" | b"-c"));
                let named = named
                    .map(|w| w.to_string_lossy().into_owned())
                    .unwrap_or_default();
                failed.push(format!("{named}: {why}"));
            }
            start = end;
        }
        Ok(())
    }

    /// Has the helper's writer put object `hash` at `path`.
    async fn write(
        &self,
        store: &Store,
        hash: &str,
        path: &Path,
        failed: &mut Vec<String>,
    ) -> Result<(), CheckpointError> {
        let content = match store.objects().open(hash) {
            Ok(file) => OwnedFd::from(file),
            Err(_) => {
                failed.push(format!(
                    "{}: the object {hash} is gone from the store",
                    path.display()
                ));
                return Ok(());
            }
        };
        let (report, report_wr) =
            crate::command::output_pipe().map_err(CheckpointError::Prepare)?;
        let spec = WriteSpec {
            path: path.to_owned(),
            make_parents: true,
            policy: self.policy.clone(),
            backend: self.backend,
            timeout_ms: Some(STEP_TIMEOUT_MS),
            content,
            report: report_wr,
        };
        let handle = self.helper.write_file(spec).await?;
        let (outcome, report) = tokio::join!(handle.wait(), drain(report));
        if let Some(why) = failure(&outcome, &report) {
            failed.push(format!("{}: {why}", path.display()));
        }
        Ok(())
    }
}

/// Everything from `pipe`, up to a cap.
async fn drain(mut pipe: tokio::net::unix::pipe::Receiver) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let mut bytes = Vec::new();
    let _ = (&mut pipe).take(REPORT_CAP).read_to_end(&mut bytes).await;
    bytes
}

/// Why a step failed, if it did: how it ended and what it said.
fn failure(outcome: &Outcome, report: &[u8]) -> Option<String> {
    let said = String::from_utf8_lossy(report).replace('\0', " ");
    let said = crate::terminal::visible(said.trim()).into_owned();
    let how = match outcome {
        Outcome::Exited(exited) if exited.status == ExitStatus::Code(0) => return None,
        Outcome::Exited(exited) => format!("ended with {:?}", exited.status),
        Outcome::RunnerFailed(f) => format!("did not run ({}): {}", f.stage.as_str(), f.detail),
        Outcome::Refused(r) => format!("refused: {}", r.reason),
    };
    Some(if said.is_empty() {
        how
    } else {
        format!("{how}: {said}")
    })
}
