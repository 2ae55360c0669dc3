//! The Landlock ruleset of one command, built in the helper before fork.
//!
//! The ruleset handles every right the running kernel's ABI knows, and is created with
//! `CompatLevel::HardRequirement`: the `landlock` crate then fails instead of silently dropping
//! a right (its best-effort mode would), so a ruleset that exists enforces exactly what was asked.
//! What the ABI cannot express is listed in [`Ruleset::missing`] and becomes the `Partial`
//! enforcement fact. The forked command only calls `landlock_restrict_self` on the descriptor.

use std::collections::BTreeSet;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use confine_protocol::Gap;
use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, PathFdError,
    Ruleset as LlRuleset, RulesetAttr, RulesetCreatedAttr, RulesetError, Scope,
};

use crate::paths::{self, Kind};
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
    /// with them cut out ([`read_rules`]) instead of as one rule.
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
        for (fd, grant) in read_rules(plan.denied).map_err(BuildError::Cut)? {
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

/// What one rule of [`read_rules`] grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadAccess {
    /// A directory on the way to a denied path: listing only.
    List,
    /// A directory beside the way: everything a read-only command may do.
    ReadDir,
    /// A file (or FIFO, socket, device) beside the way: reading and executing.
    ReadFile,
}

/// The read rules that grant everything but `denied` (none of them `/`): listing on each
/// directory on the way from `/` to a denied path, full reading on each other entry of those
/// directories. Symbolic links get no rule: what a link reaches is judged where it points.
pub(crate) fn read_rules(denied: &[&Path]) -> std::io::Result<Vec<(OwnedFd, ReadAccess)>> {
    let cut: BTreeSet<&Path> = denied.iter().copied().collect();
    let mut ways: BTreeSet<&Path> = BTreeSet::new();
    for path in denied {
        ways.extend(path.ancestors().skip(1));
    }
    let mut rules = Vec::new();
    for dir in &ways {
        let fd = paths::open_dir(dir)?;
        // A directory the user may not list gets no rules for its entries: they stay closed,
        // even those the user could reach by name.
        let names = match paths::list_dir(fd.as_fd(), Path::new(".")) {
            Ok(names) => names.unwrap_or_default(),
            Err(e) if e.raw_os_error() == Some(nix::libc::EACCES) => Vec::new(),
            Err(e) => return Err(e),
        };
        for name in names {
            let entry = dir.join(&name);
            if ways.contains(entry.as_path()) || cut.contains(entry.as_path()) {
                continue;
            }
            let child = match paths::open_entry(fd.as_fd(), Path::new(&name)) {
                Ok(child) => child,
                // Gone since it was listed: nothing to grant.
                Err(e) if e.raw_os_error() == Some(nix::libc::ENOENT) => continue,
                Err(e) => return Err(e),
            };
            let grant = match paths::kind(child.as_fd())? {
                Kind::Symlink => continue,
                Kind::Dir => ReadAccess::ReadDir,
                Kind::File | Kind::Special => ReadAccess::ReadFile,
            };
            rules.push((child, grant));
        }
        rules.push((fd, ReadAccess::List));
    }
    Ok(rules)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_is_granted_around_the_denied_path_and_not_through_it() {
        // A scratch directory of this test's own, removed even when an assertion fails. The
        // walk lists every directory on the way to it, the temporary directory among them.
        let scratch = crate::test_support::Scratch::new("deny-rules");
        let base = &scratch.0;
        let secret = base.join("home/.ssh");
        std::fs::create_dir_all(&secret).unwrap();
        std::fs::create_dir_all(base.join("home/proj")).unwrap();
        std::fs::write(base.join("home/notes"), "n").unwrap();
        std::os::unix::fs::symlink(&secret, base.join("home/link")).unwrap();
        let real = std::fs::canonicalize(&secret).unwrap();
        let rules = read_rules(&[real.as_path()]).unwrap();
        // Other tests create and remove their own entries of the temporary directory, beside
        // the scratch directory, meanwhile: one removed since its rule was made has no path to
        // compare; only the entries of the scratch directory and `/` are compared.
        let named: Vec<(PathBuf, ReadAccess)> = rules
            .iter()
            .filter_map(|(fd, g)| Some((paths::fd_path(fd.as_fd()).ok()?, *g)))
            .collect();
        let home = real.parent().unwrap();
        assert!(named.contains(&(home.to_owned(), ReadAccess::List)));
        assert!(named.contains(&(home.join("proj"), ReadAccess::ReadDir)));
        assert!(named.contains(&(home.join("notes"), ReadAccess::ReadFile)));
        assert!(named.contains(&(PathBuf::from("/"), ReadAccess::List)));
        // Neither the denied directory nor the link to it is granted anything.
        assert!(
            !named
                .iter()
                .any(|(p, _)| p == &real || p == &home.join("link"))
        );
    }
}
