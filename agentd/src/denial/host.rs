//! What the user could do to a path without any sandbox, asked of the host kernel.
//!
//! agentd runs unconfined, as the user the command ran as, so `access(2)` answers for that user:
//! a `Permission denied` on a file the user may not write anyway is the program's own failure,
//! not the sandbox's. The paths come from the command's output, which the command controls, so
//! nothing here opens one: only `access(2)`, `lstat(2)`/`stat(2)` and `readlink(2)` (through
//! `realpath(3)`), none of which can block on a FIFO or trigger a device.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::unistd::{AccessFlags, access, geteuid};

use crate::real_path::real_target;

/// What the refused access was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reading the file or listing the directory.
    Read,
    /// Changing the file's content, or creating it in its directory.
    Write,
    /// Removing or renaming the name, which its directory decides.
    Remove,
    /// Changing mode, owner, times or extended attributes, which only the owner (or root) may.
    Metadata,
}

/// The questions denial classification asks the host. A trait so the unit tests can describe a
/// host instead of depending on the one they run on.
pub trait Host {
    /// `path` (absolute) as the kernel reaches it, symbolic links resolved; `None` when it
    /// cannot be looked at (a component the user may not search, a link to nothing).
    fn resolve(&self, path: &Path) -> Option<PathBuf>;
    /// Whether the user could make `access` on the resolved `path` without a sandbox.
    fn permits(&self, path: &Path, access: Access) -> bool;
    /// Whether the user is root, whom some tools judge by other checks than `access(2)`.
    fn is_root(&self) -> bool;
}

/// The machine agentd runs on.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealHost;

/// The sticky bit of a directory: only a name's owner, the directory's owner or root may remove
/// the name.
const STICKY: u32 = 0o1000;

impl Host for RealHost {
    fn resolve(&self, path: &Path) -> Option<PathBuf> {
        real_target(path).ok()
    }

    fn permits(&self, path: &Path, want: Access) -> bool {
        let exists = fs::symlink_metadata(path).ok();
        match want {
            Access::Read => access(path, AccessFlags::R_OK).is_ok(),
            Access::Write => match exists {
                Some(_) => access(path, AccessFlags::W_OK).is_ok(),
                None => nearest_directory(path).is_some_and(|dir| may_enter_and_write(&dir)),
            },
            Access::Remove => {
                let Some(parent) = path.parent() else {
                    return false;
                };
                may_enter_and_write(parent)
                    && !sticky_forbids(parent, exists.as_ref().map(MetadataExt::uid))
            }
            Access::Metadata => {
                let me = geteuid();
                me.is_root() || fs::metadata(path).is_ok_and(|meta| meta.uid() == me.as_raw())
            }
        }
    }

    fn is_root(&self) -> bool {
        geteuid().is_root()
    }
}

/// The nearest ancestor of `path` that exists, if it is a directory.
fn nearest_directory(path: &Path) -> Option<PathBuf> {
    let mut dir = path.parent()?;
    loop {
        match fs::symlink_metadata(dir) {
            Ok(meta) => return meta.is_dir().then(|| dir.to_path_buf()),
            Err(_) => dir = dir.parent()?,
        }
    }
}

fn may_enter_and_write(dir: &Path) -> bool {
    access(dir, AccessFlags::W_OK | AccessFlags::X_OK).is_ok()
}

/// Whether `dir`'s sticky bit keeps the user from removing a name in it owned by `owner`.
fn sticky_forbids(dir: &Path, owner: Option<u32>) -> bool {
    let me = geteuid();
    if me.is_root() {
        return false;
    }
    let Ok(meta) = fs::metadata(dir) else {
        return true;
    };
    meta.permissions().mode() & STICKY != 0
        && meta.uid() != me.as_raw()
        && owner.is_some_and(|owner| owner != me.as_raw())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::Scratch;

    #[test]
    fn the_users_own_files_may_be_written_read_removed_and_changed() {
        let scratch = Scratch::new("host-own");
        let file = scratch.0.join("f");
        fs::write(&file, "x").expect("write");
        for want in [
            Access::Read,
            Access::Write,
            Access::Remove,
            Access::Metadata,
        ] {
            assert!(RealHost.permits(&file, want), "{want:?}");
        }
        // A file that does not exist yet is decided by the nearest directory that does.
        assert!(RealHost.permits(&scratch.0.join("new/deeper/f"), Access::Write));
    }

    #[test]
    fn a_directory_without_write_permission_decides_for_new_names_unless_root() {
        let scratch = Scratch::new("host-dir");
        let dir = scratch.0.join("locked");
        fs::create_dir(&dir).expect("mkdir");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o555)).expect("chmod");
        let allowed = RealHost.permits(&dir.join("new"), Access::Write);
        // Root passes every permission check; anyone else is refused, as the kernel would.
        assert_eq!(allowed, geteuid().is_root());
        assert!(RealHost.permits(&scratch.0.join("other"), Access::Write));
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).expect("chmod back");
    }

    #[test]
    fn resolving_follows_links_and_keeps_the_part_that_does_not_exist() {
        let scratch = Scratch::new("host-resolve");
        let real = scratch.0.canonicalize().expect("canonical");
        std::os::unix::fs::symlink(&real, real.join("link")).expect("symlink");
        assert_eq!(
            RealHost.resolve(&real.join("link/new/x")),
            Some(real.join("new/x"))
        );
        std::os::unix::fs::symlink(real.join("nothing"), real.join("dangling")).expect("link");
        assert_eq!(RealHost.resolve(&real.join("dangling")), None);
    }
}
