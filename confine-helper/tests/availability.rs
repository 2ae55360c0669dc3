//! The helper's report of its backends against the machine, judged without the helper
//! (`tests/shared/available.rs`: bwrap run directly with the namespaces the helper asks of it,
//! the kernel's own Landlock version query; and, for the helper's own namespaces, Landlock and
//! `unshare` making the same namespaces as the user, `support::user_namespaces`). Every test
//! that runs a backend only where it works takes that judgement, not the helper's; this test is
//! why the two can be trusted to agree: a helper that calls a working backend unusable (or an
//! unusable one usable) fails here, loudly, instead of turning that backend's tests into SKIPs.

// Linux only: bwrap, Landlock and the helper's own namespaces are Linux's backends. On macOS
// `macos_supervision.rs` drives the helper.
#![cfg(target_os = "linux")]

mod support;

use confine_protocol::{Backend, BackendChoice, ExitStatus, Mode, Reply};
use support::{Peer, available_backends, backend_works, reported_backends, run_captured, skip};

/// The helper's backends, in its order of preference, as a request chooses each.
const BACKENDS: [(Backend, BackendChoice); 3] = [
    (Backend::Namespaces, BackendChoice::Namespaces),
    (Backend::Bwrap, BackendChoice::Bwrap),
    (Backend::Landlock, BackendChoice::Landlock),
];

#[test]
fn the_helper_reports_usable_exactly_the_backends_this_machine_offers() {
    const NAME: &str = "the_helper_reports_usable_exactly_the_backends_this_machine_offers";
    let mut peer = Peer::embedded();
    peer.greet();
    let reported = reported_backends(&mut peer);
    // Every Linux backend, each once, in the order `auto` tries them.
    assert_eq!(
        reported.iter().map(|(b, _)| *b).collect::<Vec<_>>(),
        BACKENDS.map(|(b, _)| b),
        "the helper's Info lists its backends in its order of preference"
    );
    let mut compared = 0;
    for (backend, choice) in BACKENDS {
        let here = backend_works(choice);
        let helper = reported
            .iter()
            .find(|(b, _)| *b == backend)
            .map(|(_, verdict)| verdict.clone())
            .unwrap_or_else(|| panic!("the helper's Info has no verdict for {backend:?}"));
        match (&here, &helper) {
            (Ok(()), Ok(())) => compared += 1,
            (Ok(()), Err(why)) => panic!(
                "{backend:?} works on this machine (checked without the helper) but the helper \
                 reports it unusable: {why}"
            ),
            (Err((_, missing)), Ok(())) => panic!(
                "the helper reports {backend:?} usable, but this machine lacks it ({missing}): \
                 the check in tests/shared/available.rs (or support::user_namespaces) is \
                 stricter than the helper, and the tests gated on it skip a backend that works"
            ),
            (Err((need, missing)), Err(_)) => {
                skip::skip_part(NAME, backend.as_str(), *need, missing);
            }
        }
    }
    if compared == 0 {
        skip::skip(NAME, skip::Need::Backend, "no backend works here");
    }
}

/// `auto` confines by the first backend of the helper's order that works here: the helper's
/// own namespaces where they work, then bwrap, then Landlock.
#[test]
fn auto_confines_by_the_first_backend_that_works_here() {
    const NAME: &str = "auto_confines_by_the_first_backend_that_works_here";
    let Some(first) = available_backends(NAME).first().copied() else {
        skip::skip(NAME, skip::Need::Backend, "no backend works here");
        return;
    };
    let expected = BACKENDS
        .iter()
        .find(|(_, choice)| *choice == first)
        .map(|(backend, _)| *backend)
        .expect("a Linux backend");
    let mut peer = Peer::embedded();
    peer.greet();
    let mut request = support::spawn(1, &["true"]);
    request.policy.mode = Mode::ReadOnly;
    request.backend = BackendChoice::Auto;
    let (replies, _) = run_captured(&mut peer, request);
    match replies.last() {
        Some(Reply::Exited(e)) => {
            assert_eq!(e.status, ExitStatus::Code(0), "{replies:?}");
            assert_eq!(e.backend, expected, "auto's pick: {replies:?}");
        }
        other => panic!("the auto command did not run: {other:?}"),
    }
}
