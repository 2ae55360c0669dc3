//! System users and groups the root-only tests make, and the one way they run a program and
//! read its output. Used by the scenario tests, by confine-helper's tests and by the confinement
//! suite (kernel-e2e), through `#[path]`.
//!
//! A test run leaves the user and group databases as it found them. An account is made when a
//! test first holds it and removed (`userdel --force`, `groupdel`) when the last hold on it in
//! this process is dropped, also when a test fails: a panic unwinds through the hold. An
//! account that existed before the run is used as it is and kept. A user made here carries
//! [`MARK`] as its comment, so one that a killed run left behind (SIGKILL drops nothing) is the
//! tests' own to the next run, which removes it when done; a group has no comment, and one left
//! so stays until removed by hand (`groupdel NAME`).
//!
//! Two root runs of these tests at once on one machine share the accounts by name, and one
//! run's end removes an account the other may still use: run them one at a time.

// Each test binary that includes this file uses part of it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard};

/// The comment of every user the tests make: how a later run knows one left behind as its own.
pub const MARK: &str = "agentd test account, removed when its tests end";

/// `program ARGS`, waited for, its output kept.
pub fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"))
}

/// `program ARGS`, or why it failed, with its stderr.
fn try_run(program: &str, args: &[&str]) -> Result<Output, String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(format!(
            "{program} {} failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    User,
    Group,
}

/// What this process holds of one account: how many holds, and whether it is the tests' to
/// remove when the last goes (made by this run, or a marked user left behind by an earlier one).
#[derive(Debug)]
struct Entry {
    holds: usize,
    ours: bool,
    /// Remove the user's home with it (`userdel --remove`): the tests made that home.
    remove_home: bool,
}

/// Every account this process holds. Creation and removal happen under this lock, so the
/// tests of one binary, which run on threads, never make or remove one twice.
static HELD: Mutex<BTreeMap<(Kind, String), Entry>> = Mutex::new(BTreeMap::new());

fn held() -> MutexGuard<'static, BTreeMap<(Kind, String), Entry>> {
    // A test that panicked while holding the lock left the map as it was between two complete
    // updates: it is still right.
    HELD.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One hold on an account; the account goes with the last hold if the tests made it.
#[derive(Debug)]
struct Hold {
    kind: Kind,
    name: String,
}

impl Drop for Hold {
    fn drop(&mut self) {
        let mut held = held();
        let key = (self.kind, self.name.clone());
        let Some(entry) = held.get_mut(&key) else {
            return;
        };
        entry.holds -= 1;
        if entry.holds > 0 {
            return;
        }
        let Some(entry) = held.remove(&key) else {
            return;
        };
        if !entry.ours {
            return;
        }
        // --force: a helper that served the user may still be exiting as it.
        let removed = match self.kind {
            Kind::User if entry.remove_home => {
                try_run("userdel", &["--force", "--remove", &self.name])
            }
            Kind::User => try_run("userdel", &["--force", &self.name]),
            Kind::Group => try_run("groupdel", &[&self.name]),
        };
        // Never a panic here: a drop during a failing test's unwinding would abort the run.
        if let Err(e) = removed {
            eprintln!(
                "the test account {} is left on this machine: {e}; remove it by hand",
                self.name
            );
        }
    }
}

/// A system group held for a test.
#[derive(Debug)]
pub struct Group {
    pub name: String,
    pub gid: u32,
    _hold: Hold,
}

/// A user held for a test.
#[derive(Debug)]
pub struct User {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub home: PathBuf,
    _hold: Hold,
}

impl User {
    /// The uid and gid, as the tests pass them to `chown` and `setuid`.
    pub fn ids(&self) -> (u32, u32) {
        (self.uid, self.gid)
    }
}

/// How a user the tests need is made, when it is missing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NewUser<'a> {
    /// Supplementary groups: exactly these, also for a user that existed (`usermod -G`).
    pub groups: &'a [&'a str],
    /// A home made with the user, and removed with it (unless it was there before); `None`:
    /// none is made.
    pub home: Option<&'a Path>,
    /// A system account (`useradd --system`: a uid below the ordinary users').
    pub system: bool,
}

fn group_lookup(name: &str) -> Result<Option<nix::unistd::Group>, String> {
    nix::unistd::Group::from_name(name).map_err(|e| format!("cannot look up group {name}: {e}"))
}

fn user_lookup(name: &str) -> Result<Option<nix::unistd::User>, String> {
    nix::unistd::User::from_name(name).map_err(|e| format!("cannot look up user {name}: {e}"))
}

/// One more hold on the account `name`; the first one makes it with `make`, which says
/// whether the account is the tests' own to remove and whether its home goes with it.
fn hold(
    kind: Kind,
    name: &str,
    make: impl FnOnce() -> Result<(bool, bool), String>,
) -> Result<Hold, String> {
    let mut held = held();
    let key = (kind, name.to_owned());
    match held.get_mut(&key) {
        Some(entry) => entry.holds += 1,
        None => {
            let (ours, remove_home) = make()?;
            held.insert(
                key,
                Entry {
                    holds: 1,
                    ours,
                    remove_home,
                },
            );
        }
    }
    Ok(Hold {
        kind,
        name: name.to_owned(),
    })
}

/// The system group `name`, made with `groupadd` if missing, or why it cannot be had.
pub fn try_group(name: &str) -> Result<Group, String> {
    let hold = hold(Kind::Group, name, || {
        if group_lookup(name)?.is_some() {
            return Ok((false, false));
        }
        try_run("groupadd", &["--system", name])?;
        Ok((true, false))
    })?;
    let group = group_lookup(name)?.ok_or_else(|| format!("group {name} is missing"))?;
    Ok(Group {
        name: name.to_owned(),
        gid: group.gid.as_raw(),
        _hold: hold,
    })
}

/// The user `name`, made with `useradd` as `new` says if missing, with exactly `new.groups`
/// as its supplementary groups; or why it cannot be had.
pub fn try_user(name: &str, new: NewUser<'_>) -> Result<User, String> {
    let hold = hold(Kind::User, name, || {
        if let Some(user) = user_lookup(name)? {
            let marked = user.gecos.to_str() == Ok(MARK);
            return Ok((marked, marked && new.home.is_some()));
        }
        let mut args = vec!["--shell", "/bin/sh", "--comment", MARK, "--user-group"];
        if new.system {
            args.push("--system");
        }
        let home = new.home.map(|h| h.to_string_lossy().into_owned());
        match &home {
            Some(home) => args.extend(["--create-home", "--home-dir", home]),
            None => args.push("--no-create-home"),
        }
        args.push(name);
        // A home that is there already is someone's: it stays when the user goes.
        let home_is_new = new.home.is_some_and(|home| !home.exists());
        try_run("useradd", &args)?;
        Ok((true, home_is_new))
    })?;
    try_run("usermod", &["-G", &new.groups.join(","), name])?;
    let user = user_lookup(name)?.ok_or_else(|| format!("user {name} is missing"))?;
    Ok(User {
        name: name.to_owned(),
        uid: user.uid.as_raw(),
        gid: user.gid.as_raw(),
        home: user.dir,
        _hold: hold,
    })
}

/// The system group `name`, made if missing; removed with the last hold if it was made.
pub fn system_group(name: &str) -> Group {
    try_group(name).unwrap_or_else(|e| panic!("{e}"))
}

/// The system user `name` without a home, made if missing, whose supplementary groups are
/// exactly `groups`; removed with the last hold if it was made.
pub fn system_user(name: &str, groups: &[&str]) -> User {
    let new = NewUser {
        groups,
        home: None,
        system: true,
    };
    try_user(name, new).unwrap_or_else(|e| panic!("{e}"))
}
