//! System users and groups the root-only tests make (and keep, like the confinement suite's
//! user), and the one way they run a program and read its output. Used by the scenario tests
//! and by confine-helper's service tests, through `#[path]`.

use std::process::{Command, Output};

/// `program ARGS`, waited for, its output kept.
pub fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"))
}

/// The gid of the system group `name`, made with `groupadd` if missing.
pub fn system_group(name: &str) -> u32 {
    if nix::unistd::Group::from_name(name).ok().flatten().is_none() {
        let out = run("groupadd", &["--system", name]);
        assert!(out.status.success(), "groupadd {name}: {out:?}");
    }
    nix::unistd::Group::from_name(name)
        .expect("group lookup")
        .expect("the group just made")
        .gid
        .as_raw()
}

/// The uid and gid of the system user `name`, made with `useradd` if missing, whose
/// supplementary groups are exactly `groups` (`usermod -G` replaces the list).
pub fn system_user(name: &str, groups: &[&str]) -> (u32, u32) {
    if nix::unistd::User::from_name(name).ok().flatten().is_none() {
        let out = run("useradd", &["--system", "--no-create-home", name]);
        assert!(out.status.success(), "useradd {name}: {out:?}");
    }
    let out = run("usermod", &["-G", &groups.join(","), name]);
    assert!(out.status.success(), "usermod {name}: {out:?}");
    let user = nix::unistd::User::from_name(name)
        .expect("user lookup")
        .expect("the user just made");
    (user.uid.as_raw(), user.gid.as_raw())
}
