//! The generated files in the tree are what the code generates now: `cargo test --workspace`
//! fails when a contract changed without its files being regenerated, or when a generated file
//! was edited by hand. The control runs the same check on a scratch tree, where it must fail on
//! an edited file and on a file no longer generated.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn docgen(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agentd-docgen"))
        .args(args)
        .output()
        .expect("agentd-docgen runs")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn the_checked_in_generated_files_are_what_the_code_generates() {
    let checked = docgen(&["--check"]);
    assert!(
        checked.status.success(),
        "generated files drifted from the code:\n{}",
        stderr(&checked)
    );
}

/// A scratch tree, removed when dropped.
struct Tree(PathBuf);

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn check(root: &Path) -> Output {
    docgen(&["--check", "--root", root.to_str().expect("a UTF-8 path")])
}

fn generate(root: &Path) {
    let written = docgen(&["--root", root.to_str().expect("a UTF-8 path")]);
    assert!(written.status.success(), "{}", stderr(&written));
}

#[test]
fn the_check_names_an_edited_file_and_a_file_no_longer_generated() {
    let tree =
        Tree(std::env::temp_dir().join(format!("agentd-docgen-drift-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&tree.0);
    std::fs::create_dir_all(&tree.0).expect("the scratch tree");

    let empty = check(&tree.0);
    assert_eq!(empty.status.code(), Some(1));
    assert!(stderr(&empty).contains("docs/contracts/helper-protocol.md cannot be read"));

    generate(&tree.0);
    let fresh = check(&tree.0);
    assert!(fresh.status.success(), "{}", stderr(&fresh));

    let edited = tree.0.join("docs/contracts/ceiling.md");
    let mut text = std::fs::read_to_string(&edited).expect("ceiling.md");
    text.push_str("| `max_children` | integer | | | | |\n");
    std::fs::write(&edited, text).expect("the edit");
    let drifted = check(&tree.0);
    assert_eq!(drifted.status.code(), Some(1));
    let said = stderr(&drifted);
    assert!(said.contains("docs/contracts/ceiling.md differs"), "{said}");
    assert!(said.contains("cargo run -p agentd-docgen"), "{said}");
    assert!(!said.contains("agentd-toml.md"), "{said}");

    generate(&tree.0);
    let stray = tree.0.join("agentd/man/agentd-removed.1");
    std::fs::write(&stray, ".TH agentd-removed 1\n").expect("a stray page");
    let left_over = check(&tree.0);
    assert_eq!(left_over.status.code(), Some(1));
    assert!(stderr(&left_over).contains("agentd/man/agentd-removed.1 is in a generated directory"));

    generate(&tree.0);
    assert!(
        !stray.exists(),
        "the generator removes what it no longer generates"
    );
    assert!(check(&tree.0).status.success());
}
