//! Restoring a checkpoint through confinement: every change is made by a confined process
//! under the workspace-write policy the caller gives, never by path from agentd.

use std::path::PathBuf;

use confine_protocol::{BackendChoice, Policy};

use super::{Change, CheckpointError, RestorePlan, Store};
use crate::helper_client::HelperClient;

/// What a restore did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Restored {
    /// The changes made (the plan's, less what still differs).
    pub changed: Vec<Change>,
    /// What differed from the checkpoint when the roots were scanned again afterwards.
    pub still_differs: Vec<PathBuf>,
}

/// The operations a plan carries out.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct Ops {}

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
    let _ = (store, session, plan, helper, policy, backend);
    Err(CheckpointError::Join("unfinished".into()))
}
