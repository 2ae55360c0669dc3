//! Restoring a checkpoint through confinement. agentd writes nothing by path: every change is
//! made by a confined process under the workspace-write policy the caller gives, exactly as a
//! command of the session would make it, so a directory swapped for a link to somewhere
//! outside while the restore runs changes which name is reached, never what may be written.
//!
//! In order: one `rm -rf` of what must go (what the checkpoint does not have, and what changed
//! kind); one `mkdir -p` of the directories it had; `ln -s -T` per link (a link is made, never
//! written through); the file writer, `confine-file-io`, run confined
//! (`HelperClient::write_file`, the one the file tools use) per file whose content differs, reading the object straight from the store;
//! then, after a scan, `chmod` of the modes that still differ (files, then directories deepest
//! first). FIFOs, sockets and devices are never recreated, `.git` and protected paths never
//! named. Each step's failure is noted and the next goes on; then the roots are scanned again
//! and every path that still differs from the checkpoint is reported.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use confine_protocol::{BackendChoice, ExitStatus, Policy};

use super::compare::{Difference, Now};
use super::manifest::{Kind, Manifest};
use super::plan::RestorePlan;
use super::{Change, CheckpointError, Scope, Store};
use crate::helper_client::{HelperClient, Outcome, SpawnSpec, WriteSpec};

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
        for batch in batches_of(args, group) {
            let mut argv: Vec<OsString> = program.to_vec();
            argv.extend(batch.iter().cloned());
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
            previous: None,
        };
        let handle = self.helper.write_file(spec).await?;
        let (outcome, report) = tokio::join!(handle.wait(), drain(report));
        if let Some(why) = failure(&outcome, &report) {
            failed.push(format!("{}: {why}", path.display()));
        }
        Ok(())
    }
}

/// `args` cut into the runs one command takes: whole groups of `group` arguments, each run
/// ending at the first group that brings it to `MAX_ARG_BYTES` or more (and holding at least one
/// group).
fn batches_of(args: &[OsString], group: usize) -> Vec<&[OsString]> {
    let mut batches = Vec::new();
    let mut rest = args;
    while !rest.is_empty() {
        let mut bytes = 0;
        let mut taken = 0;
        for chunk in rest.chunks(group.max(1)) {
            if taken > 0 && bytes >= MAX_ARG_BYTES {
                break;
            }
            bytes += chunk.iter().map(|arg| arg.len() + 1).sum::<usize>();
            taken += chunk.len();
        }
        let (batch, after) = rest.split_at_checked(taken).unwrap_or((rest, &[]));
        batches.push(batch);
        rest = after;
    }
    batches
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
