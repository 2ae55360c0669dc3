//! A session's own temp directory: the `/tmp` of every command of the session, so files one
//! command leaves there are there for the next (RFC 0014). Made when the session starts (a
//! fresh, randomly named directory, 0700, in agentd's temp directory) and removed with
//! everything in it when the session ends — when its last holder lets go, which is when the
//! session is closed, replaced or agentd exits. confine-helper checks it like a writable root
//! and binds it on `/tmp`: writable in workspace-write, read-only in read-only mode.
//!
//! A command may leave symbolic links in it; the removal does not follow them
//! (`std::fs::remove_dir_all` removes a link, never what it points to).
//!
//! Beside each directory `D` lies `D.lock`, which the agentd that made `D` holds an exclusive
//! `flock` on for as long as the session lasts. An agentd killed before it could remove `D`
//! leaves both behind; [`sweep`], when an agentd starts, removes every such pair whose lock no
//! process holds any more. The lock lies outside `D`, where no command of any session can reach
//! it (commands see `D` as `/tmp`, or may write only `D` itself), so a command cannot make a
//! live session's directory look abandoned.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};

/// The names the directories and their locks start with.
const PREFIX: &str = "agentd-session-";
const LOCK: &str = ".lock";

/// A session's temp directory, removed when dropped.
#[derive(Debug)]
pub struct SessionTemp {
    path: PathBuf,
    lock: Option<Flock<File>>,
}

impl SessionTemp {
    /// Makes a new one in `base` (agentd's temp directory: `$TMPDIR`, else `/tmp`), with its
    /// lock held.
    pub fn create_in(base: &Path) -> io::Result<SessionTemp> {
        let template = base.join(format!("{PREFIX}XXXXXX"));
        // mkdtemp makes the directory 0700 under a name no one else chose.
        let path = nix::unistd::mkdtemp(&template)?;
        let path = path.canonicalize().unwrap_or(path);
        let lock = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(lock_path(&path))
            .and_then(|file| {
                Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|(_, e)| e.into())
            });
        match lock {
            Ok(lock) => Ok(SessionTemp {
                path,
                lock: Some(lock),
            }),
            Err(e) => {
                let _ = std::fs::remove_dir(&path);
                Err(e)
            }
        }
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
        let _ = std::fs::remove_file(lock_path(&self.path));
        drop(self.lock.take());
    }
}

fn lock_path(dir: &Path) -> PathBuf {
    let mut name = dir.as_os_str().to_owned();
    name.push(LOCK);
    PathBuf::from(name)
}

/// Removes the session temp directories in `base` that an agentd of this user left behind: each
/// whose lock file is this user's, a regular file, and locked by no one. Returns how many were
/// removed. Anything else — a directory without its lock, a lock someone holds, another user's
/// — is left alone.
pub fn sweep(base: &Path) -> usize {
    let uid = nix::unistd::geteuid().as_raw();
    let Ok(entries) = std::fs::read_dir(base) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let Some(stem) = name
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.strip_suffix(LOCK))
        else {
            continue;
        };
        let lock = entry.path();
        let dir = base.join(format!("{PREFIX}{stem}"));
        let ours = |path: &Path, dir: bool| {
            std::fs::symlink_metadata(path)
                .is_ok_and(|m| m.uid() == uid && if dir { m.is_dir() } else { m.is_file() })
        };
        if !ours(&lock, false) {
            continue;
        }
        let opened = OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&lock);
        let Ok(file) = opened else { continue };
        // Held by a live agentd: its session goes on.
        let Ok(held) = Flock::lock(file, FlockArg::LockExclusiveNonblock) else {
            continue;
        };
        if ours(&dir, true) {
            let _ = std::fs::remove_dir_all(&dir);
        }
        if !dir.exists() {
            let _ = std::fs::remove_file(&lock);
            removed += 1;
        }
        drop(held);
    }
    removed
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
        assert!(!lock_path(&dir).exists());
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "kept");
        assert!(other.path().exists());
    }

    #[test]
    fn a_sweep_removes_what_a_killed_agentd_left_and_keeps_live_sessions() {
        let scratch = Scratch::new("session-sweep");
        let live = SessionTemp::create_in(&scratch.0).unwrap();
        // What an agentd killed mid-session leaves: the directory with files, its lock file,
        // and no process holding the lock.
        let left_dir = scratch.0.join(format!("{PREFIX}a1b2c3"));
        std::fs::create_dir(&left_dir).unwrap();
        std::fs::write(left_dir.join("f"), "x").unwrap();
        let left_lock = lock_path(&left_dir);
        std::fs::write(&left_lock, "").unwrap();
        // A directory without its lock, and an unrelated file, are not the sweep's.
        let bare = scratch.0.join(format!("{PREFIX}bare"));
        std::fs::create_dir(&bare).unwrap();
        let unrelated = scratch.0.join("agentd-session-notes.txt");
        std::fs::write(&unrelated, "x").unwrap();

        assert!(left_dir.exists() && left_lock.exists());
        assert_eq!(sweep(&scratch.0), 1);
        assert!(!left_dir.exists() && !left_lock.exists());
        assert!(live.path().exists() && lock_path(live.path()).exists());
        assert!(bare.exists() && unrelated.exists());
        // Nothing more to sweep while the live session lasts.
        assert_eq!(sweep(&scratch.0), 0);
        drop(live);
        assert_eq!(sweep(&scratch.0), 0);
    }
}
