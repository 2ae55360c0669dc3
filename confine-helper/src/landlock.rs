//! The Landlock ruleset of one command, built in the helper before fork.
//!
//! The ruleset handles every right the running kernel's ABI knows, and is created with
//! `CompatLevel::HardRequirement`: the `landlock` crate then fails instead of silently dropping
//! a right (its best-effort mode would), so a ruleset that exists enforces exactly what was asked.
//! What the ABI cannot express is listed in [`Ruleset::missing`] and becomes the `Partial`
//! enforcement fact. The forked command only calls `landlock_restrict_self` on the descriptor.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use confine_protocol::Gap;
use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, PathFdError,
    Ruleset as LlRuleset, RulesetAttr, RulesetCreatedAttr, RulesetError, Scope,
};

use crate::confine::deny::ReadAccess;
use crate::sys;

/// A created ruleset and what it cannot enforce.
#[derive(Debug)]
pub(crate) struct Ruleset {
    pub(crate) fd: OwnedFd,
    pub(crate) missing: Vec<Gap>,
}

/// The running kernel's Landlock ABI version; 0 when Landlock is unavailable.
pub(crate) fn kernel_abi() -> u32 {
    sys::landlock_abi()
}

/// What the command may do, in the terms the ruleset needs.
#[derive(Debug)]
pub(crate) struct RulesetSpec<'a> {
    pub(crate) abi: u32,
    /// Directories with every right (workspace-write only), as descriptors the helper opened
    /// and checked: the rules are made from them, not from their names.
    pub(crate) writable: &'a [OwnedFd],
    pub(crate) network_denied: bool,
    /// Denied reads outside the writable roots, as real paths: `/` is then granted as the tree
    /// with them cut out ([`crate::confine::deny::read_rules`]) instead of as one rule.
    pub(crate) denied: &'a [&'a Path],
}

/// Why no ruleset was built; the text is the detail of a `RunnerFailed{landlock}`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BuildError {
    #[error("this kernel does not offer Landlock")]
    Unsupported,
    #[error("handling file access: {0}")]
    HandleFs(#[source] RulesetError),
    #[error("handling network access: {0}")]
    HandleNet(#[source] RulesetError),
    #[error("scoping signals and abstract sockets: {0}")]
    Scope(#[source] RulesetError),
    #[error("creating the ruleset: {0}")]
    Create(#[source] RulesetError),
    #[error("opening {path}: {source}")]
    Open { path: PathBuf, source: PathFdError },
    #[error("allowing {path}: {source}")]
    Allow { path: PathBuf, source: RulesetError },
    #[error("allowing a writable root: {0}")]
    AllowRoot(#[source] RulesetError),
    #[error("cutting the denied reads out of /: {0}")]
    Cut(#[source] std::io::Error),
    #[error("allowing the tree around the denied reads: {0}")]
    AllowAround(#[source] RulesetError),
    #[error("the kernel did not create a ruleset")]
    NotCreated,
}

/// Creates the ruleset for `plan`.
pub(crate) fn build(plan: &RulesetSpec<'_>) -> Result<Ruleset, BuildError> {
    let abi = ABI::from(i32::try_from(plan.abi).unwrap_or(0));
    if plan.abi == 0 {
        return Err(BuildError::Unsupported);
    }
    let handled = AccessFs::from_all(abi);
    let mut ruleset = LlRuleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(handled)
        .map_err(BuildError::HandleFs)?;
    if plan.network_denied && plan.abi >= 4 {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(BuildError::HandleNet)?;
    }
    if plan.abi >= 6 {
        ruleset = ruleset
            .scope(Scope::from_all(abi))
            .map_err(BuildError::Scope)?;
    }
    let mut created = ruleset.create().map_err(BuildError::Create)?;

    let read = AccessFs::from_read(abi);
    let mut null_rights = AccessFs::ReadFile | AccessFs::WriteFile;
    if plan.abi >= 3 {
        null_rights |= AccessFs::Truncate;
    }
    let mut fixed = vec![(Path::new("/dev/null"), null_rights)];
    if plan.denied.is_empty() {
        fixed.push((Path::new("/"), read));
    } else {
        let file_read = read & AccessFs::from_file(abi);
        for (fd, grant) in crate::confine::deny::read_rules(plan.denied).map_err(BuildError::Cut)? {
            let rights = match grant {
                ReadAccess::List => AccessFs::ReadDir.into(),
                ReadAccess::ReadDir => read,
                ReadAccess::ReadFile => file_read,
            };
            created = created
                .add_rule(PathBeneath::new(fd, rights))
                .map_err(BuildError::AllowAround)?;
        }
    }
    // `/` and `/dev/null` are owned by root; no command can swap them.
    for (path, rights) in fixed {
        let fd = PathFd::new(path).map_err(|source| BuildError::Open {
            path: path.to_owned(),
            source,
        })?;
        created = created
            .add_rule(PathBeneath::new(fd, rights))
            .map_err(|source| BuildError::Allow {
                path: path.to_owned(),
                source,
            })?;
    }
    for fd in plan.writable {
        created = created
            .add_rule(PathBeneath::new(fd.as_fd(), handled))
            .map_err(BuildError::AllowRoot)?;
    }
    let fd: Option<OwnedFd> = created.into();
    let fd = fd.ok_or(BuildError::NotCreated)?;

    let mut missing = Vec::new();
    if plan.abi < 3 {
        missing.push(Gap::Truncate);
    }
    if plan.abi < 5 {
        missing.push(Gap::DeviceIoctl);
    }
    if plan.abi < 6 {
        missing.push(Gap::Signals);
    }
    if !plan.writable.is_empty() {
        missing.push(Gap::FileMetadata);
    }
    Ok(Ruleset { fd, missing })
}
