//! `agentd run` with the sandbox profile of the configuration file, with the real agentd and
//! helper on the real kernel: `[sandbox] cache` and `writable_roots` are merged with
//! `--writable-root` (the facts name every extra root), and the workspace's
//! `.agentd/config.toml` protects what it lists, as in a session. Each denial has its control.

mod support;

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};
use support::acp::{Scratch, scratch_base};

/// `agentd run --json --mode workspace-write ARGS` in the scratch's workspace, HOME in the
/// scratch area.
fn agentd_run(scratch: &Scratch, args: &[&str]) -> Output {
    scratch
        .agentd("run")
        .args(["--json", "--mode", "workspace-write"])
        .args(args)
        .output()
        .expect("run agentd")
}

/// The facts: the last line of stderr.
fn facts_of(out: &Output) -> Value {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {stderr}"))
}

fn display(path: &Path) -> String {
    path.display().to_string()
}

#[test]
fn the_configurations_cache_and_roots_are_merged_with_the_flags() {
    if support::backends().is_empty() {
        return;
    }
    let scratch = Scratch::new_in(&scratch_base(), "run-profile");
    scratch.config("[sandbox]\ncache = [\"npm\"]\nwritable_roots = [\"~/extra\"]\n");
    let home = scratch.root.join("home");
    let flag_root = scratch.root.join("flagged");
    std::fs::create_dir_all(home.join("extra")).expect("extra");
    std::fs::create_dir_all(&flag_root).expect("flagged");
    let command = format!(
        "printf a > ~/.npm/a && printf b > ~/extra/b && printf c > {}/c",
        flag_root.display()
    );
    let flag = display(&flag_root);
    let out = agentd_run(
        &scratch,
        &["--writable-root", &flag, "--", "sh", "-c", &command],
    );
    let facts = facts_of(&out);
    assert_eq!(out.status.code(), Some(0), "{facts}");
    assert_eq!(
        facts["writable_roots"],
        json!([
            display(&home.join("extra")),
            display(&flag_root),
            display(&home.join(".npm")),
        ])
    );
    for (dir, name, content) in [
        (&home.join(".npm"), "a", "a"),
        (&home.join("extra"), "b", "b"),
    ] {
        assert_eq!(
            std::fs::read_to_string(dir.join(name)).ok().as_deref(),
            Some(content)
        );
    }
    assert!(flag_root.join("c").exists());

    // The control: without the configuration, the cache is outside every root and refused.
    scratch.config("");
    let out = agentd_run(&scratch, &["--", "sh", "-c", "printf z > ~/.npm/z"]);
    let facts = facts_of(&out);
    assert_ne!(out.status.code(), Some(0), "{facts}");
    assert_eq!(facts["denials"], json!(["file-write"]), "{facts}");
    assert_eq!(
        facts["denied_paths"],
        json!([display(&home.join(".npm/z"))])
    );
    assert!(facts.get("writable_roots").is_none(), "{facts}");
    assert!(!home.join(".npm/z").exists());
}

/// Under the helper's own namespaces (which bind a protected path read-only, as bwrap does), a
/// write of the file the project file protects; run again without the project file, the same
/// command is the control.
const WRITE_PRIVATE: [&str; 6] = [
    "--backend",
    "namespaces",
    "--",
    "sh",
    "-c",
    "printf x > private/data",
];

#[test]
fn the_project_file_protects_what_it_lists_in_agentd_run_too() {
    if let Err((need, why)) = support::backend_works("namespaces") {
        support::skip::skip(&support::skip::this_test(), need, why);
        return;
    }
    let scratch = Scratch::new_in(&scratch_base(), "run-project");
    let ws = scratch.ws();
    std::fs::create_dir(ws.join(".agentd")).expect(".agentd");
    std::fs::write(
        ws.join(".agentd/config.toml"),
        "[sandbox]\nprotected = [\"private\"]\n",
    )
    .expect("project");
    std::fs::create_dir(ws.join("private")).expect("private");
    std::fs::write(ws.join("private/data"), "orig").expect("data");
    let out = agentd_run(&scratch, &WRITE_PRIVATE);
    let facts = facts_of(&out);
    assert_ne!(out.status.code(), Some(0), "{facts}");
    assert_eq!(facts["denials"], json!(["protected-path"]), "{facts}");
    assert_eq!(
        std::fs::read_to_string(ws.join("private/data"))
            .ok()
            .as_deref(),
        Some("orig")
    );
    // The control: without the project file, the same command writes the same file.
    std::fs::remove_file(ws.join(".agentd/config.toml")).expect("remove the project file");
    let out = agentd_run(&scratch, &WRITE_PRIVATE);
    assert_eq!(out.status.code(), Some(0), "{}", facts_of(&out));
    assert_eq!(
        std::fs::read_to_string(ws.join("private/data"))
            .ok()
            .as_deref(),
        Some("x")
    );
}
