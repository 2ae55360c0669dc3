//! A session's own temp directory: the `/tmp` of every command of the session, so files one
//! command leaves there are there for the next (RFC 0014). Made when the session starts (a
//! fresh, randomly named directory, 0700, in agentd's temp directory) and removed with
//! everything in it when the session ends — when its last holder lets go, which is when the
//! session is closed, replaced or agentd exits. confine-helper checks it like a writable root
//! and binds it on `/tmp`: writable in workspace-write, read-only in read-only mode.
//!
//! A command may leave symbolic links in it; the removal does not follow them
//! (`std::fs::remove_dir_all` removes a link, never what it points to).

use std::io;
use std::path::{Path, PathBuf};

/// A session's temp directory, removed when dropped.
#[derive(Debug)]
pub struct SessionTemp {
    path: PathBuf,
}

impl SessionTemp {
    /// Makes a new one in `base` (agentd's temp directory: `$TMPDIR`, else `/tmp`).
    pub fn create_in(base: &Path) -> io::Result<SessionTemp> {
        let template = base.join("agentd-session-XXXXXX");
        // mkdtemp makes the directory 0700 under a name no one else chose.
        let path = nix::unistd::mkdtemp(&template)?;
        let path = path.canonicalize().unwrap_or(path);
        Ok(SessionTemp { path })
    }

    /// Makes a new one in agentd's temp directory.
    pub fn create() -> io::Result<SessionTemp> {
        SessionTemp::create_in(&std::env::temp_dir())
    }

    /// Where it is, as a real path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SessionTemp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::test_support::Scratch;

    #[test]
    fn it_is_private_and_removed_with_its_contents_but_not_what_links_point_to() {
        let scratch = Scratch::new("session-temp");
        let outside = scratch.0.join("outside.txt");
        std::fs::write(&outside, "kept").unwrap();
        let temp = SessionTemp::create_in(&scratch.0).unwrap();
        let dir = temp.path().to_path_buf();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        std::fs::create_dir(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/f"), "x").unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("link")).unwrap();
        std::os::unix::fs::symlink(&scratch.0, dir.join("dirlink")).unwrap();
        let other = SessionTemp::create_in(&scratch.0).unwrap();
        assert_ne!(other.path(), temp.path());
        drop(temp);
        assert!(!dir.exists());
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "kept");
        assert!(other.path().exists());
    }
}
