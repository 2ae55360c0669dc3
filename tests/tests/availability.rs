//! What agentd can confine with, against the machine judged without the helper
//! (`tests/shared/available.rs`: bwrap run directly with the namespaces the helper asks of it,
//! util-linux's `unshare` making the namespaces of the helper's own backend, the kernel's own
//! Landlock version query). Every test here that runs a backend only where it works takes that
//! judgement, not the helper's; this test is why the two can be trusted to agree: where a
//! backend works, `agentd run --backend` confines a command with it, and where it does not, the
//! command fails as unavailable and nothing runs. `auto` confines with the first that works of
//! the helper's candidates, in its order.

mod support;

use serde_json::Value;
use support::acp::{Scratch, scratch_base};
use support::skip::{self, Need};

#[test]
fn agentd_confines_with_exactly_the_backends_this_machine_offers() {
    const NAME: &str = "agentd_confines_with_exactly_the_backends_this_machine_offers";
    let scratch = Scratch::new_in(&scratch_base(), "availability");
    // `agentd run --json --mode read-only --backend BACKEND -- sh -c 'echo ran'`: its exit
    // code, its stdout and its facts.
    let run = |backend: &str| {
        let out = scratch
            .agentd("run")
            .args(["--json", "--mode", "read-only", "--backend", backend])
            .args(["--", "sh", "-c", "echo ran"])
            .output()
            .expect("run agentd");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let facts: Value = serde_json::from_str(stderr.lines().last().unwrap_or_default())
            .unwrap_or_else(|e| panic!("{backend}: no facts ({e}): {stderr}"));
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            facts,
        )
    };
    let mut worked = Vec::new();
    for backend in support::LINUX_BACKENDS {
        let (code, stdout, facts) = run(backend);
        match support::backend_works(backend) {
            Ok(()) => {
                assert_eq!(
                    facts["backend"], backend,
                    "{backend} works on this machine (checked without the helper), but agentd \
                     did not confine with it: {facts}"
                );
                assert_eq!(code, Some(0), "{facts}");
                assert_eq!(stdout, "ran\n");
                worked.push(backend);
            }
            Err((need, why)) => {
                assert_eq!(
                    facts["runner_failure"]["stage"], "unavailable",
                    "{backend} does not work on this machine ({why}), yet agentd ran: {facts}"
                );
                assert!(stdout.is_empty(), "nothing may run: {facts}");
                skip::skip_part(NAME, backend, need, why);
            }
        }
    }
    let Some(first) = worked.first() else {
        skip::skip(NAME, Need::Backend, "no Linux backend works here");
        return;
    };
    // `auto` takes the first that works, in the helper's order.
    let (code, stdout, facts) = run("auto");
    assert_eq!(
        facts["backend"], *first,
        "{worked:?} work on this machine, in the order auto tries them, but auto did not pick \
         {first}: {facts}"
    );
    assert_eq!(code, Some(0), "{facts}");
    assert_eq!(stdout, "ran\n");
}
