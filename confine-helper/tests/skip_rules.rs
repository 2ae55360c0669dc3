//! The rules every crate's tests skip by (`tests/shared/skip.rs`), held by running this test
//! binary again with a test that skips: a binary whose every test skipped fails after its
//! summary and says why; with a test that ran beside it, it passes and still lists the skip;
//! and a skip of what the run requires (`AGENTD_REQUIRE_<NEED>=1`) fails the test itself.

mod support;

use std::process::{Command, Output};

use support::skip::{self, Need};

/// Set in the runs this test makes of its own binary: the one test below then only skips.
const AS_SUBJECT: &str = "AGENTD_SKIP_RULES_SUBJECT";
/// The need the subject's skip names, and the variable that requires it.
const NEED: Need = Need::Git;

/// This test binary, run with `filters` (exact test names) as the subject.
fn subject(filters: &[&str], require: bool) -> Output {
    let mut command = Command::new(std::env::current_exe().expect("the test binary"));
    command
        .args(filters)
        .args(["--exact", "--test-threads", "1"]);
    command.env(AS_SUBJECT, "1");
    if require {
        command.env(NEED.variable(), "1");
    } else {
        command.env_remove(NEED.variable());
    }
    command.output().expect("run the test binary")
}

#[test]
fn a_binary_whose_every_test_skipped_fails_and_a_required_skip_fails_its_test() {
    const NAME: &str = "a_binary_whose_every_test_skipped_fails_and_a_required_skip_fails_its_test";
    if std::env::var_os(AS_SUBJECT).is_some() {
        skip::skip(NAME, NEED, "the subject of the skip rules' test skips");
        return;
    }
    let line = format!("SKIP {NAME}: the subject of the skip rules' test skips");

    let alone = subject(&[NAME], false);
    let stderr = String::from_utf8_lossy(&alone.stderr);
    assert!(
        !alone.status.success(),
        "every test skipped, yet it passed: {stderr}"
    );
    assert!(stderr.contains(&line), "the skip is not listed: {stderr}");
    assert!(
        stderr.contains("every test that ran skipped, so nothing was checked"),
        "{stderr}"
    );

    // The control: beside a test that runs, the binary passes and still lists the skip.
    let beside = subject(&[NAME, "a_test_that_runs"], false);
    let stderr = String::from_utf8_lossy(&beside.stderr);
    assert!(
        beside.status.success(),
        "a test ran, yet it failed: {stderr}"
    );
    assert!(stderr.contains(&line), "the skip is not listed: {stderr}");

    // Required, the skip fails the test, naming the variable.
    let required = subject(&[NAME, "a_test_that_runs"], true);
    let stdout = String::from_utf8_lossy(&required.stdout);
    assert!(
        !required.status.success(),
        "a required skip passed: {stdout}"
    );
    assert!(
        stdout.contains(&format!("{}=1 requires it here", NEED.variable())),
        "{stdout}"
    );
}

#[test]
fn a_test_that_runs() {
    assert_eq!(Need::Backend.variable(), "AGENTD_REQUIRE_BACKEND");
}
