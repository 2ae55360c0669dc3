//! The benchmark still works: a quick run (a few rounds, 64 MiB of output) finishes and prints
//! every section with its figures. Nothing here judges a figure: timings belong to the report,
//! never to an assertion.

use std::process::Command;

#[test]
fn a_quick_run_prints_every_section_with_its_figures() {
    let out = Command::new(env!("CARGO_BIN_EXE_agentd-bench"))
        .arg("--quick")
        .output()
        .expect("run agentd-bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}\n{stdout}");
    for section in [
        "## Per command, inside one long-lived agentd",
        "## Whole process",
        "## 64 commands at once",
        "## Output:",
        "## File tools:",
        "## Resident memory and start-up",
        "## Session:",
        "## Checkpoints (",
    ] {
        assert!(stdout.contains(section), "no {section:?} in:\n{stdout}");
    }
    for row in [
        "| bare `tokio::process` spawn |",
        "| floor: a supervised spawn |",
        "| helper, danger-full-access |",
        "| `agentd run --mode danger-full-access` |",
        "| 64 confined, read-only (auto) |",
        "| confined, read-only (auto) |",
        "| confine-helper, idle |",
        "| agentd, idle with one session |",
        "| plain `std::fs::write` from agentd |",
        "| start to `session/load` of 10,000 events answered |",
        "| the log's fsync per tool call",
        "| agentd after turn ",
        "| incremental record, nothing changed |",
        "| restore through confine-helper ",
    ] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(row))
            .unwrap_or_else(|| panic!("no row {row:?} in:\n{stdout}"));
        assert!(
            line.contains(" ms |") || line.contains(" MiB |"),
            "the row has no figure: {line}"
        );
    }
    // Each time row has a ratio to its section's baseline.
    let ratios = stdout.lines().filter(|l| l.contains("× |")).count();
    assert!(ratios >= 8, "too few ratios:\n{stdout}");
}

/// Another tool that is installed but does not run here is named as skipped, with its status,
/// and the run goes on; the control: one that runs is measured in a row of its own.
#[test]
fn a_comparison_tool_that_does_not_run_is_skipped_and_the_run_goes_on() {
    for (tool, runs) in [("/bin/false", false), ("/bin/true", true)] {
        let out = Command::new(env!("CARGO_BIN_EXE_agentd-bench"))
            .args(["--quick", "--only", "whole-process"])
            .env("AGENTD_BENCH_CODEX", tool)
            .env("AGENTD_BENCH_SRT", tool)
            .output()
            .expect("run agentd-bench");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{tool}: {stderr}\n{stdout}");
        let row = stdout
            .lines()
            .any(|l| l.starts_with("| `codex sandbox -P :read-only` |"));
        let skipped = stdout.lines().any(|l| {
            l.starts_with("- skipped: `codex sandbox -P :read-only`: ")
                && l.contains(&format!(
                    "`{tool} sandbox -P :read-only -- /bin/true` does not run here"
                ))
        });
        assert_eq!((row, skipped), (runs, !runs), "{tool}:\n{stdout}");
    }
}
