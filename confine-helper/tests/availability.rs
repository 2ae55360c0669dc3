//! The helper's report of its backends against the machine, judged without the helper
//! (`tests/shared/available.rs`: bwrap run directly with the namespaces the helper asks of it,
//! the kernel's own Landlock version query). Every test that runs a backend only where it works
//! takes that judgement, not the helper's; this test is why the two can be trusted to agree: a
//! helper that calls a working backend unusable (or an unusable one usable) fails here, loudly,
//! instead of turning that backend's tests into SKIPs.

// Linux only: bwrap and Landlock are Linux's backends. On macOS `macos_supervision.rs` drives
// the helper.
#![cfg(target_os = "linux")]

mod support;

use confine_protocol::Backend;
use support::{Peer, available, reported_backends, skip};

#[test]
fn the_helper_reports_usable_exactly_the_backends_this_machine_offers() {
    const NAME: &str = "the_helper_reports_usable_exactly_the_backends_this_machine_offers";
    let mut peer = Peer::embedded();
    peer.greet();
    let reported = reported_backends(&mut peer);
    let machine = [
        (Backend::Bwrap, available::bwrap(), skip::Need::Bwrap),
        (
            Backend::Landlock,
            available::landlock(),
            skip::Need::Landlock,
        ),
    ];
    let mut compared = 0;
    for (backend, here, need) in machine {
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
            (Err(missing), Ok(())) => panic!(
                "the helper reports {backend:?} usable, but this machine lacks it ({missing}): \
                 the check in tests/shared/available.rs is stricter than the helper, and the \
                 tests gated on it skip a backend that works"
            ),
            (Err(missing), Err(_)) => {
                skip::skip_part(NAME, backend.as_str(), need, missing);
            }
        }
    }
    if compared == 0 {
        skip::skip(NAME, skip::Need::Backend, "neither backend works here");
    }
}
