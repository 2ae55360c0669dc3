//! What agentd can confine with, against the machine judged without the helper
//! (`tests/shared/available.rs`: bwrap run directly with the namespaces the helper asks of it,
//! the kernel's own Landlock version query). Every test here that runs a backend only where it
//! works takes that judgement, not the helper's; this test is why the two can be trusted to
//! agree: where a backend works, `agentd run --backend` confines a command with it, and where it
//! does not, the command fails as unavailable and nothing runs.

mod support;

use serde_json::Value;
use support::acp::{Scratch, scratch_base};
use support::skip::{self, Need};

#[test]
fn agentd_confines_with_exactly_the_backends_this_machine_offers() {
    const NAME: &str = "agentd_confines_with_exactly_the_backends_this_machine_offers";
    let scratch = Scratch::new_in(&scratch_base(), "availability");
    let mut worked = 0;
    for backend in support::BACKENDS {
        let out = scratch
            .agentd("run")
            .args(["--json", "--mode", "read-only", "--backend", backend])
            .args(["--", "sh", "-c", "echo ran"])
            .output()
            .expect("run agentd");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let facts: Value = serde_json::from_str(stderr.lines().last().unwrap_or_default())
            .unwrap_or_else(|e| panic!("{backend}: no facts ({e}): {stderr}"));
        match support::backend_works(backend) {
            Ok(()) => {
                assert_eq!(
                    facts["backend"], backend,
                    "{backend} works on this machine (checked without the helper), but agentd \
                     did not confine with it: {facts}"
                );
                assert_eq!(out.status.code(), Some(0), "{facts}");
                assert_eq!(String::from_utf8_lossy(&out.stdout), "ran\n");
                worked += 1;
            }
            Err((need, why)) => {
                assert_eq!(
                    facts["runner_failure"]["stage"], "unavailable",
                    "{backend} does not work on this machine ({why}), yet agentd ran: {facts}"
                );
                assert!(out.stdout.is_empty(), "nothing may run: {facts}");
                skip::skip_part(NAME, backend, need, why);
            }
        }
    }
    if worked == 0 {
        skip::skip(NAME, Need::Backend, "neither bwrap nor Landlock works here");
    }
}
