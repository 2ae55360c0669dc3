//! The differential test of the namespace backend against bwrap (`kernel_e2e::differential`):
//! every path of every policy of the corpus must be exactly as readable and writable under
//! `--backend namespaces` as under `--backend bwrap`, as root and as an unprivileged user. Two
//! controls hold the comparison itself: bwrap compared with itself differs nowhere, and
//! Landlock, compared with bwrap where it is known not to confine alike, differs there.

#![cfg(target_os = "linux")]

use kernel_e2e::differential::compare::Outcome;
use kernel_e2e::differential::{Verdict, Who, corpus, run};
use kernel_e2e::matrix::Backend;
use kernel_e2e::skip;

/// Compares `candidate` with `reference` over `corpus` as `who` and prints each policy's
/// outcome; `None` once a skip is recorded. A comparison that cannot be made (a backend that
/// should run and did not, a fixture that cannot be made) fails the test.
fn outcomes(
    name: &str,
    who: Who,
    reference: Backend,
    candidate: Backend,
    corpus: &[corpus::Entry],
) -> Option<Vec<Outcome>> {
    match run(name, who, reference, candidate, corpus) {
        Ok(Verdict::Ran(outcomes)) => {
            for outcome in &outcomes {
                println!("{outcome}");
            }
            Some(outcomes)
        }
        Ok(Verdict::Skip(need, why)) => {
            skip::skip(&skip::this_test(), need, why);
            None
        }
        Err(e) => panic!("{reference} against {candidate} could not be compared: {e}"),
    }
}

/// Fails, with every difference, unless every policy came out the same.
fn assert_all_agree(outcomes: &[Outcome]) {
    let differing: Vec<String> = outcomes
        .iter()
        .filter(|o| !o.agrees())
        .map(ToString::to_string)
        .collect();
    assert!(
        differing.is_empty(),
        "{} of {} policies are not confined alike:\n{}",
        differing.len(),
        outcomes.len(),
        differing.join("\n")
    );
}

#[test]
fn namespaces_confines_every_path_as_bwrap_does_for_the_current_user() {
    let Some(outcomes) = outcomes(
        "namespaces",
        Who::Current,
        Backend::Bwrap,
        Backend::Namespaces,
        &corpus::ALL,
    ) else {
        return;
    };
    assert_all_agree(&outcomes);
}

#[test]
fn namespaces_confines_every_path_as_bwrap_does_for_an_unprivileged_user() {
    let Some(outcomes) = outcomes(
        "namespaces-unprivileged",
        Who::Unprivileged,
        Backend::Bwrap,
        Backend::Namespaces,
        &corpus::ALL,
    ) else {
        return;
    };
    assert_all_agree(&outcomes);
}

/// The control of the other direction: the probes answer the same twice over, so a
/// difference the comparison finds is the backends'.
#[test]
fn bwrap_compared_with_itself_differs_nowhere() {
    let Some(outcomes) = outcomes(
        "bwrap",
        Who::Current,
        Backend::Bwrap,
        Backend::Bwrap,
        &corpus::ALL,
    ) else {
        return;
    };
    assert_all_agree(&outcomes);
}

/// The control: Landlock cannot keep the workspace's `.git` read-only nor hide a denied read
/// inside a writable root (it says so, as `Gap::ProtectedInLandlock` and its denied-read gap),
/// so compared with bwrap it must differ exactly there; and its write to `.git/config` must be
/// seen on the host, as a change the policy does not allow.
#[test]
fn the_comparison_finds_where_landlock_does_not_confine_as_bwrap_does() {
    let Some(outcomes) = outcomes(
        "landlock",
        Who::Current,
        Backend::Bwrap,
        Backend::Landlock,
        &[corpus::WORKSPACE_WRITE, corpus::DENY_READ_WORKSPACE_WRITE],
    ) else {
        return;
    };
    let expected: [&[&str]; 2] = [
        &["ws/.git", "ws/.git/config"],
        &[
            "ws/secret.env",
            "ws/app/.env",
            "ws/private",
            "ws/private/key",
        ],
    ];
    for (outcome, labels) in outcomes.iter().zip(expected) {
        assert!(!outcome.agrees(), "no difference found:\n{outcome}");
        for label in labels {
            assert!(
                outcome.differences.iter().any(|d| d.label == *label),
                "{label} should differ between bwrap and landlock:\n{outcome}"
            );
        }
        assert!(
            outcome.reference_changes.is_empty(),
            "bwrap changed what the policy keeps:\n{outcome}"
        );
    }
    let git_config = outcomes.first().is_some_and(|o| {
        o.candidate_changes
            .iter()
            .any(|c| c.path.ends_with("ws/.git/config"))
    });
    assert!(
        git_config,
        "landlock's write to .git/config was not seen on the host:\n{}",
        outcomes
            .first()
            .map(ToString::to_string)
            .unwrap_or_default()
    );
}
