//! The accounts the root-only tests make (`tests/shared/users.rs`) leave the user and group
//! databases as they found them: one made for the tests goes with its last hold, one that
//! existed before stays, and a user a killed run left behind, known by its comment, goes at the
//! next run's end (or at once, asked). A user that existed gets back the groups it had, also
//! after a run killed while it held the user. Each check has its control: while held, the
//! account is there, with the groups the test asked for.

mod support;

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use support::users::{MARK, RECORDS, remove_left_behind, run, system_group, system_user};

/// Set in the copy of a test that is killed while it holds a user: `USER,GROUP,DIR`, the user
/// to hold with the supplementary group `GROUP`, and where to say it holds it (`DIR/held`).
const HOLD_AND_WAIT: &str = "AGENTD_TEST_ACCOUNTS_HOLD_AND_WAIT";

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

/// Whether `user` is listed as a member of the group `group`.
fn member(group: &str, user: &str) -> bool {
    entry("group", group).is_some_and(|line| {
        line.rsplit(':')
            .next()
            .is_some_and(|members| members.split(',').any(|m| m == user))
    })
}

/// Runs `args` (a program and its arguments), which must succeed.
fn made(args: &[&str]) {
    let out = run(args[0], &args[1..]);
    assert!(out.status.success(), "{args:?}: {out:?}");
}

/// Whether a record of `user`'s groups is left.
fn recorded(user: &str) -> bool {
    Path::new(RECORDS).join(format!("{user}.groups")).exists()
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

    // Someone's own group and user: held and let go, they stay; nor is the user taken as one
    // a run left behind.
    made(&["groupadd", "--system", &group_name]);
    made(&["useradd", "--system", "--no-create-home", &user_name]);
    drop(system_group(&group_name));
    drop(system_user(&user_name, &[]));
    let not_left = remove_left_behind(&user_name).map_err(|e| e.to_string());
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
    assert_eq!(not_left, Ok(false));

    // A user with the tests' comment, as a killed run leaves one: the next hold removes it.
    let gone = left_behind_then(&user_name, |user| {
        let left = system_user(user, &[]);
        assert!(entry("passwd", user).is_some(), "held");
        drop(left);
    });
    assert_eq!(gone, None, "a user a killed run left behind is left again");

    // The same, taken away at once when asked (before a test that compares the databases).
    let mut removed = Ok(false);
    let gone = left_behind_then(&user_name, |user| {
        removed = remove_left_behind(user).map_err(|e| e.to_string());
    });
    assert_eq!(removed, Ok(true));
    assert_eq!(
        gone, None,
        "a user a killed run left behind was not removed when asked"
    );
}

/// Makes `user` with the tests' comment, as a killed run leaves one, and does `then` with it
/// there; its `passwd` entry afterwards (it is removed by hand if it is left).
fn left_behind_then(user: &str, then: impl FnOnce(&str)) -> Option<String> {
    made(&[
        "useradd",
        "--system",
        "--no-create-home",
        "--comment",
        MARK,
        user,
    ]);
    assert!(
        entry("passwd", user).is_some(),
        "the user left behind, made"
    );
    then(user);
    let after = entry("passwd", user);
    if after.is_some() {
        made(&["userdel", user]);
    }
    after
}

/// Makes someone's user `user` (not the tests'), a member of `own`, and the group `given` a test
/// will give it. Undone by [`unmake`].
fn make_someones_user(user: &str, own: &str, given: &str) {
    made(&["groupadd", "--system", own]);
    made(&["groupadd", "--system", given]);
    made(&["useradd", "--system", "--no-create-home", "-G", own, user]);
}

fn unmake(user: &str, own: &str, given: &str) {
    let _ = run("userdel", &[user]);
    let _ = run("groupdel", &[own]);
    let _ = run("groupdel", &[given]);
}

#[test]
fn a_user_that_existed_gets_back_its_groups_when_the_last_hold_goes() {
    if !root_or_skip("a_user_that_existed_gets_back_its_groups_when_the_last_hold_goes") {
        return;
    }
    let (user, group) = names("back");
    let (own, given) = (format!("{group}o"), format!("{group}t"));
    make_someones_user(&user, &own, &given);
    let first = system_user(&user, &[&given]);
    let second = system_user(&user, &[&given]);
    let held = (member(&own, &user), member(&given, &user));
    drop(first);
    let one_left = (member(&own, &user), member(&given, &user));
    drop(second);
    let after = (member(&own, &user), member(&given, &user));
    let record_left = recorded(&user);
    unmake(&user, &own, &given);
    assert_eq!(
        held,
        (false, true),
        "while held: exactly the groups the test asked for"
    );
    assert_eq!(
        one_left,
        (false, true),
        "the groups went back while a hold was left"
    );
    assert_eq!(
        after,
        (true, false),
        "the user did not get its own groups back"
    );
    assert!(
        !record_left,
        "the record of its groups is left in {RECORDS}"
    );
}

#[test]
fn a_group_a_killed_run_gave_a_user_that_existed_is_taken_back_by_the_next_run() {
    const NAME: &str =
        "a_group_a_killed_run_gave_a_user_that_existed_is_taken_back_by_the_next_run";
    if let Some(given) = std::env::var_os(HOLD_AND_WAIT) {
        // The copy that is killed: it holds the user with the group, says so, and waits.
        let given = given.to_string_lossy().into_owned();
        let mut parts = given.splitn(3, ',');
        let (Some(user), Some(group), Some(dir)) = (parts.next(), parts.next(), parts.next())
        else {
            panic!("{HOLD_AND_WAIT} is not USER,GROUP,DIR: {given}");
        };
        let _held = system_user(user, &[group]);
        std::fs::write(Path::new(dir).join("held"), "").expect("say it holds the user");
        let mut nothing = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut nothing);
        panic!("the killing test closed the pipe instead of killing this copy");
    }
    if !root_or_skip(NAME) {
        return;
    }
    let (user, group) = names("kill");
    let (own, given) = (format!("{group}o"), format!("{group}t"));
    make_someones_user(&user, &own, &given);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("accounts-killed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch");
    let mut copy = Command::new(std::env::current_exe().expect("this test binary"))
        .args(["--exact", NAME, "--nocapture", "--test-threads", "1"])
        .env(HOLD_AND_WAIT, format!("{user},{given},{}", dir.display()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start a copy of this test");
    let said = support::wait_for_file(&dir, "held", Duration::from_secs(60));
    let _ = copy.kill();
    let out = copy.wait_with_output().expect("wait for the copy");
    let _ = std::fs::remove_dir_all(&dir);
    // The control: the killed run left the group it gave, and the record of what it took.
    let left = (member(&own, &user), member(&given, &user));
    let record_then = recorded(&user);
    let next = system_user(&user, &[]);
    let held = (member(&own, &user), member(&given, &user));
    drop(next);
    let after = (member(&own, &user), member(&given, &user));
    let record_left = recorded(&user);
    unmake(&user, &own, &given);
    assert!(said, "the copy did not hold the user: {out:?}");
    assert_eq!(left, (false, true), "the killed copy's change: {out:?}");
    assert!(
        record_then,
        "the killed copy left no record of the user's groups"
    );
    assert_eq!(
        held,
        (false, false),
        "while the next run holds it: the groups it asked for"
    );
    assert_eq!(
        after,
        (true, false),
        "the next run did not give the user its groups back"
    );
    assert!(
        !record_left,
        "the record of its groups is left in {RECORDS}"
    );
}
