//! `agentd sessions undo ID [--turn N] [--dry-run]`: restores a session's writable roots to how
//! they were before a turn, from the checkpoint store (RFC 0020). It prints what would change
//! (the paths and a diff) first; `--dry-run` stops there. Otherwise the restore runs through
//! confine-helper under the workspace-write policy `agentd run` would use in the session's
//! directory, `checkpoint/restored` (by `cli`) is appended to the session log, and what still
//! differs afterwards is printed, with a non-zero exit.

use std::path::{Path, PathBuf};

use confine_protocol::{Mode, Network};

use super::args::AgentArgs;
use super::exit::{EXIT_FAILURE, report};
use super::sessions::{ShowError, resolve};
use crate::checkpoint::{self, CheckpointError, RestorePlan, Restored, Scope, Store};
use crate::config::{ConfigError, Effective, protect_project};
use crate::helper_client::{HelperClient, WorkspaceRefusal};
use crate::session::log::{EventLog, LogError, read_log};
use crate::session::undoable::last_undoable;
use crate::session::{Event, RestoredBy};
use crate::terminal;
use crate::tools::ToolEnv;

/// Why `sessions undo` stopped (before restoring anything, but for a log it could not append
/// to afterwards).
#[derive(Debug, thiserror::Error)]
pub enum UndoError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Session(#[from] ShowError),
    #[error(transparent)]
    Log(#[from] LogError),
    #[error(
        "checkpoints are disabled ([checkpoints] enabled = false), so there is nothing to undo \
         with; set enabled = true for the turns to come"
    )]
    Disabled,
    #[error(
        "session {id} has no checkpoint before turn {turn}; {}",
        turns_with(have)
    )]
    NoTurn {
        id: String,
        turn: u64,
        have: Vec<u64>,
    },
    #[error(
        "session {id} has no turn left to undo (each is undone already): {}; `--turn N` \
         restores to before one of them again",
        turns_with(have)
    )]
    NothingToUndo { id: String, have: Vec<u64> },
    #[error(
        "session {id} has no session/created record, so its workspace is unknown; its log is \
         damaged, and nothing can be restored from it"
    )]
    NoWorkspace { id: String },
    #[error(
        "the session's workspace {} is gone ({source}); nothing can be restored into it",
        path.display()
    )]
    Workspace {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    NotWritable(#[from] WorkspaceRefusal),
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error(transparent)]
    Helper(#[from] crate::config::HelperSetupError),
    #[error(transparent)]
    DenyRead(#[from] crate::deny_read::ExpandError),
}

fn turns_with(have: &[u64]) -> String {
    if have.is_empty() {
        return "no turn has one".to_owned();
    }
    let turns: Vec<String> = have.iter().map(u64::to_string).collect();
    format!("the turns with one are {}", turns.join(", "))
}

/// Runs `sessions undo`; the exit status.
pub(crate) async fn undo_command(
    agent: &AgentArgs,
    id: &str,
    turn: Option<u64>,
    dry_run: bool,
) -> u8 {
    match undo(agent, id, turn, dry_run).await {
        Ok(code) => code,
        Err(e) => {
            report(&e);
            EXIT_FAILURE
        }
    }
}

async fn undo(
    agent: &AgentArgs,
    given: &str,
    turn: Option<u64>,
    dry_run: bool,
) -> Result<u8, UndoError> {
    let config = agent.effective()?;
    if !config.checkpoints().enabled {
        return Err(UndoError::Disabled);
    }
    let dir = config.state_dir()?.to_owned();
    let id = resolve(&dir, given)?;
    let (records, _) = read_log(&dir, &id)?;
    let cwd = records
        .iter()
        .find_map(|r| match &r.event {
            Event::SessionCreated { cwd, .. } => Some(cwd.clone()),
            _ => None,
        })
        .ok_or_else(|| UndoError::NoWorkspace { id: id.clone() })?;
    let workspace = cwd.canonicalize().map_err(|source| UndoError::Workspace {
        path: cwd.clone(),
        source,
    })?;
    let store = Store::at(&dir);
    let labels = store.labels(&id)?;
    let have: Vec<u64> = labels
        .iter()
        .filter_map(|l| checkpoint::turn_of(l))
        .collect();
    let turn = match turn {
        Some(turn) if have.contains(&turn) => turn,
        Some(turn) => return Err(UndoError::NoTurn { id, turn, have }),
        None => match last_undoable(&records, &labels) {
            Some(turn) => turn,
            None => return Err(UndoError::NothingToUndo { id, have }),
        },
    };
    let label = checkpoint::before_turn(turn);
    let profile = config.sandbox_profile();
    let denied = profile
        .policy(Mode::ReadOnly, &workspace, Network::Deny)?
        .deny_read;
    let scope = Scope::for_session(
        &workspace,
        &profile,
        &denied,
        config.checkpoints().max_bytes,
    );
    let plan = {
        let (store, id, label, scope) = (store.clone(), id.clone(), label.clone(), scope.clone());
        tokio::task::spawn_blocking(move || store.plan_restore(&id, &label, &scope))
            .await
            .map_err(|e| CheckpointError::Join(e.to_string()))??
    };
    print!("{}", terminal::visible(&plan_text(&id, turn, &plan)));
    if plan.changes.is_empty() {
        println!("Nothing to restore: the workspace is already as it was before turn {turn}.");
        return Ok(0);
    }
    if dry_run {
        println!("--dry-run: nothing was changed.");
        return Ok(0);
    }
    let (client, policy, backend) = restorer(&config, &workspace).await?;
    let restored = checkpoint::restore(&store, &id, &plan, &client, policy, backend).await?;
    let (mut log, _, _) = EventLog::open(&dir, &id)?;
    log.append(Event::CheckpointRestored {
        turn,
        label,
        changes: restored.changed.clone(),
        still_differs: restored.still_differs.clone(),
        by: RestoredBy::Cli,
    })?;
    log.sync()?;
    print!("{}", terminal::visible(&restored_text(turn, &restored)));
    Ok(if restored.still_differs.is_empty() {
        0
    } else {
        EXIT_FAILURE
    })
}

/// The helper and the workspace-write policy of `workspace`, as `agentd run --mode
/// workspace-write` there would have them (the project's protected paths included), without
/// sockets: the restore's programs open none.
async fn restorer(
    config: &Effective,
    workspace: &Path,
) -> Result<
    (
        HelperClient,
        confine_protocol::Policy,
        confine_protocol::BackendChoice,
    ),
    UndoError,
> {
    let client = config.helper_client()?;
    let env = crate::environment::command_environment(
        std::env::vars_os(),
        &config
            .sandbox_env
            .value
            .explicit(crate::config::process_lookup),
    );
    if let Some(refusal) = client.workspace_refusal(workspace, crate::environment::home(&env)) {
        return Err(refusal.into());
    }
    let backend = config
        .backend
        .configured()
        .unwrap_or(confine_protocol::BackendChoice::Auto);
    let profile = config.sandbox_profile();
    let mut policy = profile.policy(Mode::WorkspaceWrite, workspace, Network::Deny)?;
    let reader = ToolEnv::new(
        client.clone(),
        workspace.to_owned(),
        env,
        Network::Deny,
        backend,
        None,
    );
    protect_project(&reader, &mut policy).await?;
    policy.local_binding = false;
    policy.unix_sockets.clear();
    Ok((client, policy, backend))
}

fn plan_text(id: &str, turn: u64, plan: &RestorePlan) -> String {
    let mut out = format!(
        "Session {id}: restoring to before turn {turn} (checkpoint {}) changes {} paths:\n",
        plan.label,
        plan.changes.len()
    );
    for change in &plan.changes {
        out.push_str(&format!(
            "  {:<12} {}\n",
            change.kind.as_str(),
            change.path.display()
        ));
    }
    if !plan.diff.is_empty() {
        out.push('\n');
        out.push_str(&plan.diff);
        out.push('\n');
    }
    out
}

fn restored_text(turn: u64, restored: &Restored) -> String {
    let mut out = format!(
        "Restored {} paths to how they were before turn {turn}.\n",
        restored.changed.len()
    );
    for why in &restored.failed {
        out.push_str(&format!("  a step failed: {why}\n"));
    }
    if !restored.still_differs.is_empty() {
        out.push_str(&format!(
            "{} paths still differ from the checkpoint (changed meanwhile, or the sandbox \
             refused the write); check them:\n",
            restored.still_differs.len()
        ));
        for path in &restored.still_differs {
            out.push_str(&format!("  {}\n", path.display()));
        }
    }
    out
}
