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
//! A user that existed before gets the supplementary groups a test asks for while it is held,
//! and the ones it had back when the last hold goes. What it had is written first to
//! [`RECORDS`] (a directory only root may change), and that record removed once they are back:
//! a run killed in between leaves the record, and the next run that holds the user puts its
//! groups back from it before anything else, so no membership a test gave stays.
//!
//! Two root runs of these tests at once on one machine share the accounts by name, and one
//! run's end removes an account the other may still use: run them one at a time.

// Each test binary that includes this file uses part of it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output};
use std::sync::{Mutex, MutexGuard};

/// The comment of every user the tests make: how a later run knows one left behind as its own.
pub const MARK: &str = "agentd test account, removed when its tests end";

/// Where the supplementary groups of a user that existed before are kept while a test changes
/// them, one file a user (`NAME.groups`); removed, with the directory once empty, when they are
/// back.
pub const RECORDS: &str = "/var/lib/agentd-test-accounts";

/// Why an account could not be had, or put back as it was.
#[derive(Debug)]
pub enum AccountError {
    /// A program could not be started.
    CannotRun {
        program: String,
        error: std::io::Error,
    },
    /// A program ran and failed: the command line, its status and its stderr.
    Failed {
        command: String,
        status: ExitStatus,
        stderr: String,
    },
    /// The user or group database could not be read.
    Lookup {
        kind: Kind,
        name: String,
        error: nix::Error,
    },
    /// The account is not there though it was just made or found.
    Missing { kind: Kind, name: String },
    /// A record of a user's groups could not be read, written or removed.
    Record {
        path: PathBuf,
        error: std::io::Error,
    },
    /// A record, or its directory, that someone other than root could have written: not
    /// trusted, since it says which groups root gives a user.
    UntrustedRecord(PathBuf),
    /// A record that does not hold a list of group names.
    MalformedRecord(PathBuf),
}

impl std::fmt::Display for AccountError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AccountError::CannotRun { program, error } => {
                write!(f, "cannot run {program}: {error}")
            }
            AccountError::Failed {
                command,
                status,
                stderr,
            } => write!(f, "{command} failed ({status}): {stderr}"),
            AccountError::Lookup { kind, name, error } => {
                write!(f, "cannot look up {kind} {name}: {error}")
            }
            AccountError::Missing { kind, name } => write!(f, "{kind} {name} is missing"),
            AccountError::Record { path, error } => write!(f, "{}: {error}", path.display()),
            AccountError::UntrustedRecord(path) => write!(
                f,
                "{} is not root's alone (owner root, nobody else may write it), so the groups it \
                 records are not given back; remove it by hand",
                path.display()
            ),
            AccountError::MalformedRecord(path) => write!(
                f,
                "{} does not hold a comma-separated list of group names; remove it by hand",
                path.display()
            ),
        }
    }
}

impl std::error::Error for AccountError {}

/// `program ARGS`, waited for, its output kept.
pub fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"))
}

/// `program ARGS`, or why it failed, with its stderr.
fn try_run(program: &str, args: &[&str]) -> Result<Output, AccountError> {
    let out =
        Command::new(program)
            .args(args)
            .output()
            .map_err(|error| AccountError::CannotRun {
                program: program.to_owned(),
                error,
            })?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(AccountError::Failed {
            command: format!("{program} {}", args.join(" ")),
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        })
    }
}

/// A user or a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    User,
    Group,
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Kind::User => "user",
            Kind::Group => "group",
        })
    }
}

/// What this process holds of one account: how many holds, and whether it is the tests' to
/// remove when the last goes (made by this run, or a marked user left behind by an earlier one).
#[derive(Debug)]
struct Entry {
    holds: usize,
    ours: bool,
    /// Remove the user's home with it (`userdel --remove`): the tests made that home.
    remove_home: bool,
    /// A user that existed before: the supplementary groups to give back (as `usermod -G`
    /// takes them) when the last hold goes.
    groups_before: Option<String>,
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
        // Never a panic here: a drop during a failing test's unwinding would abort the run.
        if let Some(before) = &entry.groups_before
            && let Err(e) = give_back_groups(&self.name, before)
        {
            eprintln!(
                "the user {} keeps the groups a test gave it: {e}; give it back its groups \
                 ({before}) by hand (usermod -G)",
                self.name
            );
        }
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

fn group_lookup(name: &str) -> Result<Option<nix::unistd::Group>, AccountError> {
    nix::unistd::Group::from_name(name).map_err(|error| AccountError::Lookup {
        kind: Kind::Group,
        name: name.to_owned(),
        error,
    })
}

fn user_lookup(name: &str) -> Result<Option<nix::unistd::User>, AccountError> {
    nix::unistd::User::from_name(name).map_err(|error| AccountError::Lookup {
        kind: Kind::User,
        name: name.to_owned(),
        error,
    })
}

/// What the first hold on an account found or did: whether the account is the tests' own to
/// remove, whether its home goes with it, and the groups to give back to a user that existed.
struct Made {
    ours: bool,
    remove_home: bool,
    groups_before: Option<String>,
}

/// One more hold on the account `name`; the first one makes it with `make`.
fn hold(
    kind: Kind,
    name: &str,
    make: impl FnOnce() -> Result<Made, AccountError>,
) -> Result<Hold, AccountError> {
    let mut held = held();
    let key = (kind, name.to_owned());
    match held.get_mut(&key) {
        Some(entry) => entry.holds += 1,
        None => {
            let made = make()?;
            held.insert(
                key,
                Entry {
                    holds: 1,
                    ours: made.ours,
                    remove_home: made.remove_home,
                    groups_before: made.groups_before,
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
pub fn try_group(name: &str) -> Result<Group, AccountError> {
    let hold = hold(Kind::Group, name, || {
        let ours = group_lookup(name)?.is_none();
        if ours {
            try_run("groupadd", &["--system", name])?;
        }
        Ok(Made {
            ours,
            remove_home: false,
            groups_before: None,
        })
    })?;
    let group = group_lookup(name)?.ok_or_else(|| AccountError::Missing {
        kind: Kind::Group,
        name: name.to_owned(),
    })?;
    Ok(Group {
        name: name.to_owned(),
        gid: group.gid.as_raw(),
        _hold: hold,
    })
}

/// The user `name`, made with `useradd` as `new` says if missing, with exactly `new.groups`
/// as its supplementary groups; or why it cannot be had. A user that existed gets its own
/// groups back when the last hold goes.
pub fn try_user(name: &str, new: NewUser<'_>) -> Result<User, AccountError> {
    let hold = hold(Kind::User, name, || {
        if let Some(user) = user_lookup(name)? {
            let marked = user.gecos.to_str() == Ok(MARK);
            if marked {
                // The tests' own, removed with its memberships: nothing to give back.
                remove_record(name)?;
                return Ok(Made {
                    ours: true,
                    remove_home: new.home.is_some(),
                    groups_before: None,
                });
            }
            return Ok(Made {
                ours: false,
                remove_home: false,
                groups_before: Some(groups_to_give_back(name)?),
            });
        }
        // A record of a user that is gone is of no one.
        remove_record(name)?;
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
        Ok(Made {
            ours: true,
            remove_home: home_is_new,
            groups_before: None,
        })
    })?;
    try_run("usermod", &["-G", &new.groups.join(","), name])?;
    let user = user_lookup(name)?.ok_or_else(|| AccountError::Missing {
        kind: Kind::User,
        name: name.to_owned(),
    })?;
    Ok(User {
        name: name.to_owned(),
        uid: user.uid.as_raw(),
        gid: user.gid.as_raw(),
        home: user.dir,
        _hold: hold,
    })
}

/// Removes the user `name` if it is the tests' own (it carries [`MARK`]) and this process holds
/// none of it: one a killed run left behind, taken away before a test that checks it leaves
/// the user database as it found it. Whether there was one.
pub fn remove_left_behind(name: &str) -> Result<bool, AccountError> {
    let held = held();
    if held.contains_key(&(Kind::User, name.to_owned())) {
        return Ok(false);
    }
    let Some(user) = user_lookup(name)? else {
        return Ok(false);
    };
    if user.gecos.to_str() != Ok(MARK) {
        return Ok(false);
    }
    try_run("userdel", &["--force", name])?;
    Ok(true)
}

/// The supplementary groups of the user `name`, as `usermod -G` takes them (comma-separated).
pub fn supplementary_groups(name: &str) -> Result<String, AccountError> {
    let all = try_run("getent", &["group"])?;
    let all = String::from_utf8_lossy(&all.stdout);
    let groups: Vec<&str> = all
        .lines()
        .filter_map(|line| {
            let mut fields = line.split(':');
            let group = fields.next()?;
            let members = fields.nth(2)?;
            members.split(',').any(|m| m == name).then_some(group)
        })
        .collect();
    Ok(groups.join(","))
}

/// The groups the user `name` (one that existed) is to get back: those a run killed while
/// holding it recorded, put back now; else its groups now, recorded before a test changes them.
fn groups_to_give_back(name: &str) -> Result<String, AccountError> {
    if let Some(recorded) = read_record(name)? {
        try_run("usermod", &["-G", &recorded, name])?;
        return Ok(recorded);
    }
    let now = supplementary_groups(name)?;
    write_record(name, &now)?;
    Ok(now)
}

/// Gives the user `name` back the groups `before`, then forgets the record of them.
fn give_back_groups(name: &str, before: &str) -> Result<(), AccountError> {
    try_run("usermod", &["-G", before, name])?;
    remove_record(name)
}

fn record_path(name: &str) -> PathBuf {
    Path::new(RECORDS).join(format!("{name}.groups"))
}

/// Whether `path` is root's alone: owned by root, neither group nor others may write it, and
/// not a symbolic link.
fn roots_alone(path: &Path) -> Result<bool, AccountError> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(path).map_err(|error| AccountError::Record {
        path: path.to_owned(),
        error,
    })?;
    Ok(!meta.file_type().is_symlink() && meta.uid() == 0 && meta.mode() & 0o022 == 0)
}

/// The groups recorded for the user `name`, if a record is there.
fn read_record(name: &str) -> Result<Option<String>, AccountError> {
    let path = record_path(name);
    if std::fs::symlink_metadata(&path).is_err() {
        return Ok(None);
    }
    for checked in [Path::new(RECORDS), path.as_path()] {
        if !roots_alone(checked)? {
            return Err(AccountError::UntrustedRecord(checked.to_owned()));
        }
    }
    let text = std::fs::read_to_string(&path).map_err(|error| AccountError::Record {
        path: path.clone(),
        error,
    })?;
    let groups = text.trim_end_matches('\n');
    // Names as the group database holds them: no field or list separator, no space or control.
    let names_only = !groups
        .chars()
        .any(|c| c == ':' || c.is_whitespace() || c.is_control());
    if !names_only {
        return Err(AccountError::MalformedRecord(path));
    }
    Ok(Some(groups.to_owned()))
}

/// Records `groups` as the user `name`'s, in a directory only root may write.
fn write_record(name: &str, groups: &str) -> Result<(), AccountError> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = Path::new(RECORDS);
    let failed = |path: &Path| {
        let path = path.to_owned();
        move |error| AccountError::Record { path, error }
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(failed(dir))?;
    if !roots_alone(dir)? {
        return Err(AccountError::UntrustedRecord(dir.to_owned()));
    }
    let path = record_path(name);
    let partial = dir.join(format!("{name}.groups.new"));
    std::fs::write(&partial, format!("{groups}\n")).map_err(failed(&partial))?;
    std::fs::rename(&partial, &path).map_err(failed(&path))
}

/// Removes the record of the user `name`'s groups, and the directory once it is empty.
fn remove_record(name: &str) -> Result<(), AccountError> {
    let path = record_path(name);
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(AccountError::Record { path, error }),
    }
    // Another user's record may still be there: then the directory stays.
    let _ = std::fs::remove_dir(RECORDS);
    Ok(())
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
