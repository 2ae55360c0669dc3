//! The Landlock ruleset of one command, built in the helper before fork.
//!
//! The ruleset handles every right the running kernel's ABI knows, and is created with
//! `CompatLevel::HardRequirement`: the `landlock` crate then fails instead of silently dropping
//! a right (its best-effort mode would), so a ruleset that exists enforces exactly what was asked.
//! What the ABI cannot express is listed in [`Ruleset::missing`] and becomes the `Partial`
//! enforcement fact. The forked command only calls `landlock_restrict_self` on the descriptor.

use std::os::fd::{AsFd, OwnedFd};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd,
    Ruleset as LlRuleset, RulesetAttr, RulesetCreatedAttr, Scope,
};

use crate::sys;

/// A created ruleset and what it cannot enforce.
#[derive(Debug)]
pub(crate) struct Ruleset {
    pub(crate) fd: OwnedFd,
    pub(crate) missing: Vec<String>,
}

/// The running kernel's Landlock ABI version; 0 when Landlock is unavailable.
pub(crate) fn kernel_abi() -> u32 {
    sys::landlock_abi()
}

/// What the command may do, in the terms the ruleset needs.
#[derive(Debug)]
pub(crate) struct Plan<'a> {
    pub(crate) abi: u32,
    /// Directories with every right (workspace-write only), as descriptors the helper opened
    /// and checked: the rules are made from them, not from their names.
    pub(crate) writable: &'a [OwnedFd],
    pub(crate) network_denied: bool,
}

/// Creates the ruleset for `plan`.
pub(crate) fn build(plan: &Plan<'_>) -> Result<Ruleset, String> {
    let abi = ABI::from(i32::try_from(plan.abi).unwrap_or(0));
    if plan.abi == 0 {
        return Err("this kernel does not offer Landlock".into());
    }
    let err = |what: &str, e: &dyn std::fmt::Display| format!("{what}: {e}");
    let handled = AccessFs::from_all(abi);
    let mut ruleset = LlRuleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(handled)
        .map_err(|e| err("handling file access", &e))?;
    if plan.network_denied && plan.abi >= 4 {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(|e| err("handling network access", &e))?;
    }
    if plan.abi >= 6 {
        ruleset = ruleset
            .scope(Scope::from_all(abi))
            .map_err(|e| err("scoping signals and abstract sockets", &e))?;
    }
    let mut created = ruleset
        .create()
        .map_err(|e| err("creating the ruleset", &e))?;

    let read = AccessFs::from_read(abi);
    let mut null_rights = AccessFs::ReadFile | AccessFs::WriteFile;
    if plan.abi >= 3 {
        null_rights |= AccessFs::Truncate;
    }
    // `/` and `/dev/null` are owned by root; no command can swap them.
    for (path, rights) in [("/", read), ("/dev/null", null_rights)] {
        let fd = PathFd::new(path).map_err(|e| err(&format!("opening {path}"), &e))?;
        created = created
            .add_rule(PathBeneath::new(fd, rights))
            .map_err(|e| err(&format!("allowing {path}"), &e))?;
    }
    for fd in plan.writable {
        created = created
            .add_rule(PathBeneath::new(fd.as_fd(), handled))
            .map_err(|e| err("allowing a writable root", &e))?;
    }
    let fd: Option<OwnedFd> = created.into();
    let fd = fd.ok_or("the kernel did not create a ruleset")?;

    let mut missing = Vec::new();
    if plan.abi < 3 {
        missing.push("truncate of files outside writable roots (Landlock ABI < 3)".into());
    }
    if plan.abi < 5 {
        missing.push("ioctl on devices (Landlock ABI < 5)".into());
    }
    if plan.abi < 6 {
        missing.push("signals to processes outside the sandbox (Landlock ABI < 6)".into());
    }
    if !plan.writable.is_empty() {
        missing.push(
            "file metadata outside writable roots: chmod, chown, utimes, xattrs (Landlock \
             does not control them)"
                .into(),
        );
    }
    Ok(Ruleset { fd, missing })
}
