//! The accounts the root-only tests make (`tests/shared/users.rs`) leave the user and group
//! databases as they found them: one made for the tests goes with its last hold, one that
//! existed before stays, and a user a killed run left behind, known by its comment, goes at the
//! next run's end. Each check has its control: while held, the account is there.

mod support;

use support::users::{MARK, run, system_group, system_user};

/// The `getent` entry of `name` in `database`, if any.
fn entry(database: &str, name: &str) -> Option<String> {
    let out = run("getent", &[database, name]);
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Names of this run's own, so that no other test's account is touched.
fn names(tag: &str) -> (String, String) {
    let pid = std::process::id();
    (
        format!("agentd-acct-{tag}u{pid}"),
        format!("agentd-acct-{tag}g{pid}"),
    )
}

fn root_or_skip(name: &str) -> bool {
    let root = nix::unistd::geteuid().is_root();
    if !root {
        support::skip::skip(
            name,
            support::skip::Need::Root,
            "making users and groups needs root",
        );
    }
    root
}

#[test]
fn a_user_and_a_group_made_for_tests_go_with_their_last_hold() {
    if !root_or_skip("a_user_and_a_group_made_for_tests_go_with_their_last_hold") {
        return;
    }
    let (user_name, group_name) = names("made");
    assert_eq!(
        entry("passwd", &user_name),
        None,
        "{user_name} exists already"
    );
    assert_eq!(
        entry("group", &group_name),
        None,
        "{group_name} exists already"
    );

    let group = system_group(&group_name);
    let user = system_user(&user_name, &[&group_name]);
    let again = system_user(&user_name, &[&group_name]);
    assert_eq!(user.ids(), again.ids());
    let passwd = entry("passwd", &user_name).expect("the user, while held");
    assert!(passwd.contains(MARK), "{passwd}");
    let members = entry("group", &group_name).expect("the group, while held");
    assert!(members.ends_with(&user_name), "{members}");
    assert!(entry("group", &user_name).is_some(), "the user's own group");

    drop(user);
    assert!(
        entry("passwd", &user_name).is_some(),
        "the user went while a test still held it"
    );
    drop(again);
    assert_eq!(entry("passwd", &user_name), None, "the user is left");
    assert_eq!(
        entry("group", &user_name),
        None,
        "the user's own group is left"
    );
    assert!(
        entry("group", &group_name).is_some(),
        "the group, while held"
    );
    drop(group);
    assert_eq!(entry("group", &group_name), None, "the group is left");
}

#[test]
fn an_account_that_existed_stays_and_a_marked_user_left_behind_goes() {
    if !root_or_skip("an_account_that_existed_stays_and_a_marked_user_left_behind_goes") {
        return;
    }
    let (user_name, group_name) = names("kept");
    let made = |args: &[&str]| {
        let out = run(args[0], &args[1..]);
        assert!(out.status.success(), "{args:?}: {out:?}");
    };

    // Someone's own group and user: held and let go, they stay.
    made(&["groupadd", "--system", &group_name]);
    made(&["useradd", "--system", "--no-create-home", &user_name]);
    drop(system_group(&group_name));
    drop(system_user(&user_name, &[]));
    let kept = (entry("group", &group_name), entry("passwd", &user_name));
    made(&["userdel", &user_name]);
    made(&["groupdel", &group_name]);
    assert!(
        kept.0.is_some(),
        "a group the tests did not make was removed"
    );
    assert!(
        kept.1.is_some(),
        "a user the tests did not make was removed"
    );

    // A user with the tests' comment, as a killed run leaves one: the next hold removes it.
    made(&[
        "useradd",
        "--system",
        "--no-create-home",
        "--comment",
        MARK,
        &user_name,
    ]);
    let left = system_user(&user_name, &[]);
    assert!(entry("passwd", &user_name).is_some(), "held");
    drop(left);
    let gone = entry("passwd", &user_name);
    if gone.is_some() {
        made(&["userdel", &user_name]);
    }
    assert_eq!(gone, None, "a user a killed run left behind is left again");
}
