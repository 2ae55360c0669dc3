//! Denied reads (`Policy::deny_read`): paths a confined command may not read, list or execute.
//!
//! Each path is opened once, as named, with no symbolic link anywhere on it (a link could
//! have been planted to redirect the denial elsewhere): one that does not exist denies nothing
//! (there is nothing to read), one with a link on its path is refused, and one that contains a
//! writable root is refused (a writable root is readable by definition). What exists is then
//! hidden by each backend in its own way:
//!
//! - bwrap mounts over it: an empty read-only tmpfs on a directory, an empty read-only file
//!   on anything else (not `/dev/null`, which would take writes silently). Both are mounted
//!   after every writable root, so nothing shadows them.
//! - Landlock, which only grants, is given `/` no longer as one read rule but as the tree with
//!   the denied paths cut out ([`read_rules`]): listing on every directory on the way to a
//!   denied path, and full reading on each of their other entries. Rules name inodes, so a
//!   denied path renamed later stays denied, and an entry created after the command started is
//!   not readable (closed, not open). Listing granted on a parent reaches the whole tree
//!   beneath it, so names inside a denied directory stay listable (their contents do not): a
//!   gap the enforcement fact names. A denied path inside a writable root cannot be cut out of
//!   its rule at all, and is named too.

use std::collections::BTreeSet;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use confine_protocol::{Refusal, Spawn};

use super::not_run::{NotRun, real_of, refuse};
use crate::paths::{self, Kind};

/// One denied path that exists.
#[derive(Debug)]
pub(crate) struct Denied {
    /// As the kernel reports it for the descriptor it was opened by.
    pub(crate) path: PathBuf,
    /// bwrap mounts a directory and a file differently; Seatbelt's rules need no kind.
    #[cfg_attr(not(target_os = "linux"), expect(dead_code, reason = "bwrap's alone"))]
    pub(crate) dir: bool,
}

/// What one rule of [`read_rules`] grants.
#[cfg_attr(
    not(target_os = "linux"),
    allow(dead_code, reason = "Landlock's alone")
)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadAccess {
    /// A directory on the way to a denied path: listing only.
    List,
    /// A directory beside the way: everything a read-only command may do.
    ReadDir,
    /// A file (or FIFO, socket, device) beside the way: reading and executing.
    ReadFile,
}

/// Opens the request's denied paths that exist; `writable` are the real paths of everything
/// the command may write (none of them may lie inside a denied path).
pub(crate) fn denied(spawn: &Spawn, writable: &[&Path]) -> Result<Vec<Denied>, NotRun> {
    let mut out: Vec<Denied> = Vec::new();
    for raw in &spawn.policy.deny_read {
        let given = PathBuf::from(std::ffi::OsStr::from_bytes(raw));
        if !given.is_absolute() || raw.contains(&0) {
            return refuse(Refusal::DeniedNotAbsolute {
                path: given.display().to_string(),
            });
        }
        let fd = match paths::open_unfollowed(&given) {
            Ok(fd) => fd,
            Err(nix::Error::ENOENT) => continue,
            Err(nix::Error::ELOOP) => return link_refusal(&given),
            Err(e) => {
                return refuse(Refusal::DeniedUnusable {
                    path: given.display().to_string(),
                    why: e.to_string(),
                });
            }
        };
        let kind = paths::kind(fd.as_fd())
            .map_err(|e| NotRun::Refused(Refusal::DeniedUnknownKind { why: e.to_string() }))?;
        if kind == Kind::Symlink {
            return link_refusal(&given);
        }
        let path = paths::fd_path(fd.as_fd()).map_err(|e| {
            NotRun::Refused(Refusal::DeniedUnusable {
                path: given.display().to_string(),
                why: e.to_string(),
            })
        })?;
        if let Some(root) = writable.iter().find(|root| root.starts_with(&path)) {
            return refuse(Refusal::DeniedHoldsWritable {
                path: path.display().to_string(),
                root: root.display().to_string(),
            });
        }
        if !out.iter().any(|d| d.path == path) {
            out.push(Denied {
                path,
                dir: kind == Kind::Dir,
            });
        }
    }
    Ok(out)
}

fn link_refusal<T>(given: &Path) -> Result<T, NotRun> {
    refuse(Refusal::DeniedLink {
        path: given.display().to_string(),
        real: real_of(given),
    })
}

/// The read rules that grant everything but `denied` (none of them `/`): listing on each
/// directory on the way from `/` to a denied path, full reading on each other entry of those
/// directories. Symbolic links get no rule: what a link reaches is judged where it points.
#[cfg_attr(
    not(target_os = "linux"),
    allow(dead_code, reason = "Landlock's alone")
)]
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
    #[cfg(target_os = "linux")]
    use super::*;

    // The read rules are Landlock's.
    #[cfg(target_os = "linux")]
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
