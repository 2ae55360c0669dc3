//! Who runs agentd: the user running the suite, and, when that is root, an unprivileged user too.
//!
//! Root is the easy case for a sandbox to get wrong in one direction (capabilities survive) and
//! an unprivileged user in the other (user namespaces, ownership), so a root run covers both.

use std::fs;
use std::io;
use std::os::unix::fs::{PermissionsExt, chown};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::accounts;
use crate::error::E2eError;
use nix::unistd::{Uid, User};

/// The name of the unprivileged user the suite creates when it runs as root.
pub const UNPRIVILEGED_USER: &str = "agentd-e2e";

/// A user agentd runs as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub home: PathBuf,
    /// Whether this is the user running the suite (then nothing is switched at spawn).
    pub current: bool,
}

impl Identity {
    /// The user running the suite; `$HOME` wins over the password database, as it does for agentd.
    pub fn current() -> Result<Identity, E2eError> {
        let uid = Uid::effective();
        let user = User::from_uid(uid)
            .map_err(|e| trouble!("cannot look up uid {uid}: {e}"))?
            .ok_or_else(|| trouble!("uid {uid} has no password entry"))?;
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|h| h.is_absolute())
            .unwrap_or(user.dir);
        Ok(Identity {
            name: user.name,
            uid: uid.as_raw(),
            gid: user.gid.as_raw(),
            home,
            current: true,
        })
    }

    /// The unprivileged user, created with a home directory if it does not exist yet; it is
    /// removed, home and all, when the returned hold is dropped, if the suite made it (the
    /// scenario tests' accounts, `tests/shared/users.rs`, work the same way).
    pub fn unprivileged() -> Result<(Identity, accounts::User), E2eError> {
        let home = PathBuf::from(format!("/home/{UNPRIVILEGED_USER}"));
        let new = accounts::NewUser {
            groups: &[],
            home: Some(&home),
            system: false,
        };
        let user = accounts::try_user(UNPRIVILEGED_USER, new)?;
        let identity = Identity {
            name: user.name.clone(),
            uid: user.uid,
            gid: user.gid,
            home: user.home.clone(),
            current: false,
        };
        // An existing account may have lost its home; the home canaries need one.
        if !identity.home.is_dir() {
            fs::create_dir_all(&identity.home)
                .and_then(|()| {
                    fs::set_permissions(&identity.home, fs::Permissions::from_mode(0o755))
                })
                .and_then(|()| identity.give(&identity.home))
                .map_err(|e| trouble!("cannot create {}: {e}", identity.home.display()))?;
        }
        Ok((identity, user))
    }

    pub fn is_root(&self) -> bool {
        self.uid == 0
    }

    /// Makes `command` run as this user. Setting the uid also makes std drop the supplementary
    /// groups (setgroups(0) before setuid), so the child keeps none of root's groups.
    pub fn apply(&self, command: &mut Command) {
        if !self.current {
            command.uid(self.uid).gid(self.gid);
        }
    }

    /// Gives `path` (created by the suite) to this user, so the user's own writes are what a
    /// control run can do and a confined run must not.
    pub fn give(&self, path: &Path) -> io::Result<()> {
        if self.current {
            return Ok(());
        }
        chown(path, Some(self.uid), Some(self.gid))
    }
}
