//! `agentd demo` end to end, with the real agentd and helper: every check it prints holds, and
//! the agent it drives exits by itself when its input ends (not killed after a grace).

mod support;

use support::acp::{Scratch, scratch_base};

#[test]
fn the_demo_passes_every_check_and_its_agent_exits_at_the_end_of_its_input() {
    // Outside /tmp: the home must be outside the sandbox's own /tmp for the escape to be one.
    let scratch = Scratch::new_in(&scratch_base(), "demo");
    let home = scratch.root.join("home");
    std::fs::create_dir_all(&home).expect("home");
    let out = scratch.agentd("demo").output().expect("run agentd demo");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(!text.contains("FAIL"), "{text}");
    assert!(
        text.contains("ok   agentd acp exited by itself at the end of its input"),
        "{text}"
    );
    assert!(
        !home.join("agentd-demo-escape.txt").exists(),
        "the denied write did not happen"
    );
}
