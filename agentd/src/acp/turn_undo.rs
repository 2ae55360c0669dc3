//! A turn's checkpoints, and `/undo` (RFC 0020).
//!
//! Every turn that can act — a prompt for the model, `/init` — records the session's writable
//! roots before its first side effect (`t{N}`, right after `turn/started`) and again when it
//! ends (`t{N}-end`), and logs what changed between the two (`turn/changes`). Both are agentd's
//! own work in its own store: a failure to record tells the person undo will not cover the
//! turn, and the turn goes on.
//!
//! `/undo` restores the roots to how they were before the last turn not yet undone: the
//! turns with a checkpoint, each later `checkpoint/restored` taking back every turn from the
//! one it restored ([`undoable`]). What it would change is shown first, with the diff, in a
//! permission card asked through the approval seam as any request (so the approval policy
//! `never` refuses it and the audit trail records who decided); nothing changes unless it is
//! allowed. The restore itself runs confined under the session's workspace-write policy
//! ([`checkpoint::restore`]), and what still differs afterwards is said, never hidden.

use std::path::{Path, PathBuf};

use confine_protocol::Mode;
use serde_json::json;

use super::super::commands::Command;
use super::super::updates;
use super::{Ending, Turn};
use crate::approval::{Ask, Question};
use crate::checkpoint::{self, Change, ChangeKind, RestorePlan, Restored, Scope, Store};
use crate::deny_read::ExpandError;
use crate::session::undoable::last_undoable;
use crate::session::{Event, LogError, RestoredBy};

/// The id of the permission card `/undo` asks with: no tool call of the model has it.
const UNDO_CALL: &str = "agentd-undo";

/// The most changed paths a reply lists one by one; the rest are counted.
const LISTED_PATHS: usize = 40;

impl Turn<'_> {
    /// The session's checkpoint store, when checkpoints are on.
    fn store(&self) -> Option<Store> {
        let settings = &self.state.options.checkpoints;
        settings
            .enabled
            .then(|| Store::at(&self.state.options.state_dir))
    }

    /// What a checkpoint of this session covers, the paths its commands may not read left out
    /// (as a read-only or workspace-write command's request names them now); `Err` when they
    /// cannot be found, and then nothing is recorded or restored.
    fn checkpoint_scope(&self) -> Result<Scope, ExpandError> {
        let tools = &self.session.tools;
        let denied = tools.policy(Mode::ReadOnly)?.deny_read;
        Ok(Scope::for_session(
            tools.workspace(),
            &tools.profile(),
            &denied,
            self.state.options.checkpoints.max_bytes,
        ))
    }

    /// Records the checkpoint before this turn's first side effect, after pruning old ones; a
    /// failure is told to the person (undo will not cover this turn), not fatal.
    pub(super) async fn checkpoint_before(&self) -> Result<(), LogError> {
        let Some(store) = self.store() else {
            return Ok(());
        };
        let retention = self.state.options.checkpoints.retention;
        let session = self.session.id.clone();
        let label = checkpoint::before_turn(self.number);
        let recorded = match self.checkpoint_scope() {
            Ok(scope) => {
                in_store(move || {
                    // Pruning is housekeeping: a failure costs disk space, never this turn's
                    // checkpoint.
                    let _ = store.prune(&retention, std::time::SystemTime::now());
                    store.record(&session, &label, &scope).map(|r| (label, r))
                })
                .await
            }
            Err(why) => Err(why.into()),
        };
        let (label, recorded) = match recorded {
            Ok(recorded) => recorded,
            Err(why) => {
                self.notice(&format!(
                    "No checkpoint was recorded before this turn, so /undo cannot take it back: \
                     {why}"
                ))
                .await;
                return Ok(());
            }
        };
        if recorded.over_cap {
            let over = recorded
                .left_out
                .iter()
                .filter(|l| l.why == checkpoint::LeftOutWhy::OverCap)
                .count();
            self.notice(&format!(
                "The checkpoint before this turn left out {over} file(s) over its size cap \
                 ([checkpoints] max_bytes = {} bytes): /undo will not restore them.",
                self.state.options.checkpoints.max_bytes
            ))
            .await;
        }
        self.record(
            Event::CheckpointRecorded {
                turn: self.number,
                label,
                files: recorded.files,
                bytes: recorded.bytes,
                left_out: recorded.left_out.into_iter().map(|l| l.path).collect(),
                over_cap: recorded.over_cap,
            },
            false,
        )?;
        Ok(())
    }

    /// Records the checkpoint after this turn and logs what the turn changed, when the turn
    /// has its checkpoint from before.
    pub(super) async fn checkpoint_after(&self) -> Result<(), LogError> {
        let Some(store) = self.store() else {
            return Ok(());
        };
        let before = checkpoint::before_turn(self.number);
        let recorded_before = self.session.with_records(|records| {
            records.iter().any(
                |r| matches!(&r.event, Event::CheckpointRecorded { label, .. } if *label == before),
            )
        });
        if !recorded_before {
            return Ok(());
        }
        let session = self.session.id.clone();
        let after = checkpoint::after_turn(self.number);
        let changes = match self.checkpoint_scope() {
            Ok(scope) => {
                in_store(move || {
                    store.record(&session, &after, &scope)?;
                    store.changes(&session, &before, &after)
                })
                .await
            }
            Err(why) => Err(why.into()),
        };
        match changes {
            Ok(changes) => {
                self.record(
                    Event::TurnChanges {
                        turn: self.number,
                        changes,
                    },
                    false,
                )?;
            }
            Err(why) => {
                self.notice(&format!(
                    "What this turn changed was not recorded (no checkpoint after it): {why}"
                ))
                .await;
            }
        }
        Ok(())
    }

    /// Shows the person a notice of this turn's checkpoints; not recorded.
    async fn notice(&self, text: &str) {
        let id = format!("checkpoint-{}", self.number);
        let _ = self
            .session
            .show(
                self.cx,
                updates::notice("checkpoint", &id, &format!("{text}\n")),
            )
            .await;
    }

    /// `/undo`: the workspace restored to before the last turn not yet undone, once the person
    /// saw what would change and allowed it.
    pub(super) async fn undo(&self) -> Result<Ending, LogError> {
        let Some(store) = self.store() else {
            return self
                .reply(
                    Command::Undo,
                    "Nothing was restored: checkpoints are off ([checkpoints] enabled = false), \
                     so no turn can be undone.\n"
                        .to_owned(),
                )
                .await;
        };
        let last = match self.last_undoable_turn(&store).await {
            Ok(last) => last,
            Err(why) => return self.undo_failed(&why.to_string()).await,
        };
        let Some(turn) = last else {
            return self
                .reply(
                    Command::Undo,
                    "Nothing to undo: no turn of this session that is not already undone has a \
                     checkpoint.\n"
                        .to_owned(),
                )
                .await;
        };
        let plan = match self.plan_undo(&store, turn).await {
            Ok(plan) => plan,
            Err(why) => return self.undo_failed(&format!("turn {turn}: {why}")).await,
        };
        let left_out = self.left_out_before(turn);
        if plan.changes.is_empty() {
            return self
                .reply(
                    Command::Undo,
                    format!(
                        "Nothing to restore: the workspace is already as it was before turn \
                         {turn}.\n"
                    ),
                )
                .await;
        }
        if let Some(why) = self.undo_refused(turn, &plan, &left_out).await {
            return self
                .reply(
                    Command::Undo,
                    format!("Nothing was restored: {why}. The workspace is unchanged.\n"),
                )
                .await;
        }
        self.restore_turn(&store, turn, &plan).await
    }

    /// The last turn of this session not yet undone whose checkpoint from before is still in
    /// the store, if any; `Err` with why when the store's checkpoints cannot be listed.
    async fn last_undoable_turn(&self, store: &Store) -> Result<Option<u64>, StoreFailed> {
        // A turn whose checkpoint was pruned cannot be undone; the one before it can.
        let labels = {
            let (store, session) = (store.clone(), self.session.id.clone());
            in_store(move || store.labels(&session)).await?
        };
        Ok(self
            .session
            .with_records(|records| last_undoable(records, &labels)))
    }

    /// What restoring the workspace to its checkpoint before `turn` would change.
    async fn plan_undo(&self, store: &Store, turn: u64) -> Result<RestorePlan, StoreFailed> {
        let session = self.session.id.clone();
        let label = checkpoint::before_turn(turn);
        let scope = self.checkpoint_scope()?;
        let store = store.clone();
        in_store(move || store.plan_restore(&session, &label, &scope)).await
    }

    /// The paths the checkpoint before `turn` left out, as it was recorded.
    fn left_out_before(&self, turn: u64) -> Vec<PathBuf> {
        let label = checkpoint::before_turn(turn);
        self.session.with_records(|records| {
            records
                .iter()
                .find_map(|r| match &r.event {
                    Event::CheckpointRecorded {
                        label: recorded,
                        left_out,
                        ..
                    } if *recorded == label && r.is_top_level() => Some(left_out.clone()),
                    _ => None,
                })
                .unwrap_or_default()
        })
    }

    /// Asks the person whether to undo `turn` as `plan` says; `None` when it was allowed, or
    /// why it was not.
    async fn undo_refused(
        &self,
        turn: u64,
        plan: &RestorePlan,
        left_out: &[PathBuf],
    ) -> Option<&'static str> {
        let decision = self
            .state
            .approvals
            .decision(
                &**self.session,
                undo_ask(turn, plan, left_out, &self.session.cwd),
                &self.cancel,
            )
            .await;
        if decision.outcome.allows() {
            return None;
        }
        Some(if decision.by_policy {
            "the approval policy is never, so nobody can allow it (`agentd sessions undo` \
             restores from a terminal)"
        } else {
            "it was not allowed"
        })
    }

    /// Restores the workspace as `plan` says, confined under workspace-write, records the
    /// restore and replies with what changed and what still differs.
    async fn restore_turn(
        &self,
        store: &Store,
        turn: u64,
        plan: &RestorePlan,
    ) -> Result<Ending, LogError> {
        let tools = &self.session.tools;
        let policy = match tools.policy(Mode::WorkspaceWrite) {
            Ok(policy) => policy,
            Err(e) => return self.undo_failed(&format!("turn {turn}: {e}")).await,
        };
        let restored = checkpoint::restore(
            store,
            &self.session.id,
            plan,
            tools.helper(),
            policy,
            tools.backend(),
        )
        .await;
        let restored = match restored {
            Ok(restored) => restored,
            Err(e) => return self.undo_failed(&format!("turn {turn}: {e}")).await,
        };
        self.record(
            Event::CheckpointRestored {
                turn,
                label: plan.label.clone(),
                changes: restored.changed.clone(),
                still_differs: restored.still_differs.clone(),
                by: RestoredBy::Editor,
            },
            true,
        )?;
        self.reply(
            Command::Undo,
            restored_text(turn, &restored, &self.session.cwd),
        )
        .await
    }

    /// The reply of an `/undo` that could not be carried out, and why.
    async fn undo_failed(&self, why: &str) -> Result<Ending, LogError> {
        self.reply(Command::Undo, format!("Nothing was undone: {why}\n"))
            .await
    }
}

/// `work` on the store, off the async threads; its error or the task's, in words.
async fn in_store<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, checkpoint::CheckpointError> + Send + 'static,
) -> Result<T, StoreFailed> {
    Ok(tokio::task::spawn_blocking(work).await??)
}

/// Why a checkpoint's work on the store did not happen, in the words of what failed.
#[derive(Debug, thiserror::Error)]
enum StoreFailed {
    /// The paths the checkpoint leaves out could not be found.
    #[error("{0}")]
    Scope(#[from] ExpandError),
    #[error("{0}")]
    Store(#[from] checkpoint::CheckpointError),
    /// The blocking task ended without an answer.
    #[error("{0}")]
    Task(#[from] tokio::task::JoinError),
}

/// The permission card of an `/undo` of `turn`: what it changes, and the diff.
fn undo_ask(turn: u64, plan: &RestorePlan, left_out: &[PathBuf], workspace: &Path) -> Ask {
    let mut text = format!(
        "Restore the workspace to how it was before turn {turn}: {}.\n{}",
        counted(&plan.changes),
        listed(&plan.changes, workspace)
    );
    if !left_out.is_empty() {
        let n = left_out.len();
        let noun = if n == 1 { "path was" } else { "paths were" };
        text.push_str(&format!(
            "{n} {noun} left out of the checkpoint (ignored by the workspace, FIFOs, sockets or \
             devices, unreadable, or over the size cap) and stay as they are:\n"
        ));
        let shown: Vec<PathBuf> = left_out.iter().take(LISTED_PATHS).cloned().collect();
        text.push_str(&paths(&shown, workspace));
        if n > LISTED_PATHS {
            text.push_str(&format!("  … and {} more\n", n - LISTED_PATHS));
        }
    }
    if !plan.diff.is_empty() {
        text.push_str(&format!("\n```diff\n{}\n```\n", plan.diff.trim_end()));
    }
    Ask {
        tool: "undo".to_owned(),
        call_id: Some(UNDO_CALL.to_owned()),
        reason: Some(format!(
            "/undo restores the workspace to before turn {turn}"
        )),
        question: Question {
            title: format!("Undo turn {turn}"),
            kind: "edit".to_owned(),
            input: json!({ "turn": turn }),
            text,
            diff: None,
        },
        scope: None,
    }
}

/// The reply of an `/undo` of `turn` that ran: what it changed, and what still differs.
fn restored_text(turn: u64, restored: &Restored, workspace: &Path) -> String {
    let mut text = format!(
        "Restored the workspace to how it was before turn {turn}: {}.\n",
        counted(&restored.changed)
    );
    text.push_str(&listed(&restored.changed, workspace));
    if !restored.still_differs.is_empty() {
        text.push_str(&format!(
            "These paths still differ from the checkpoint (something changed them during \
             the restore, or the sandbox refused the write):\n{}",
            paths(&restored.still_differs, workspace)
        ));
    }
    text
}

/// What a restore does to a path that differs like this, in words: `change` goes from the state
/// now to the checkpoint's, so an `added` path is one the restore brings back.
fn restoring(kind: ChangeKind) -> &'static str {
    match kind {
        ChangeKind::Added => "brought back",
        ChangeKind::Modified => "reverted",
        ChangeKind::Deleted => "removed",
        ChangeKind::TypeChanged => "replaced",
    }
}

/// `3 paths (1 brought back, 1 reverted, 1 removed)`.
fn counted(changes: &[Change]) -> String {
    let count = |kind: ChangeKind| changes.iter().filter(|c| c.kind == kind).count();
    let parts: Vec<String> = [
        ChangeKind::Added,
        ChangeKind::Modified,
        ChangeKind::Deleted,
        ChangeKind::TypeChanged,
    ]
    .into_iter()
    .filter(|kind| count(*kind) > 0)
    .map(|kind| format!("{} {}", count(kind), restoring(kind)))
    .collect();
    let n = changes.len();
    let noun = if n == 1 { "path" } else { "paths" };
    format!("{n} {noun} ({})", parts.join(", "))
}

/// One line per change, `  brought back path` (relative to the workspace when inside it), at
/// most [`LISTED_PATHS`].
fn listed(changes: &[Change], workspace: &Path) -> String {
    let mut text = String::new();
    for change in changes.iter().take(LISTED_PATHS) {
        text.push_str(&format!(
            "  {:<12} {}\n",
            restoring(change.kind),
            shown(&change.path, workspace)
        ));
    }
    if changes.len() > LISTED_PATHS {
        text.push_str(&format!("  … and {} more\n", changes.len() - LISTED_PATHS));
    }
    text
}

/// One line per path.
fn paths(paths: &[PathBuf], workspace: &Path) -> String {
    paths
        .iter()
        .map(|p| format!("  {}\n", shown(p, workspace)))
        .collect()
}

/// `path` on one line, relative to `workspace` when inside it.
fn shown(path: &Path, workspace: &Path) -> String {
    let relative = path.strip_prefix(workspace).unwrap_or(path);
    crate::terminal::one_line(&relative.display().to_string(), None)
}
