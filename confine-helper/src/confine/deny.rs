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
//!   the denied paths cut out (`read_rules` in `landlock.rs`): listing on every directory on the
//!   way to a denied path, and full reading on each of their other entries. Rules name inodes, so a
//!   denied path renamed later stays denied, and an entry created after the command started is
//!   not readable (closed, not open). Listing granted on a parent reaches the whole tree
//!   beneath it, so names inside a denied directory stay listable (their contents do not): a
//!   gap the enforcement fact names. A denied path inside a writable root cannot be cut out of
//!   its rule at all, and is named too.

use std::os::fd::AsFd;
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
