//! The project's `AGENTS.md` files over the real `agentd acp` wire, with a scripted model: the
//! ones from the repository's root down to the workspace are stated in every model request's
//! instructions (and so in the log), outermost first; one that is a link to a FIFO is read the
//! way `read_file` reads (confined, never blocking the turn) and named with why it is not
//! stated; a workspace without one is told nothing of them.

mod support;

use serde_json::Value;
use support::acp::{AcpClient, Scratch, scratch_base};

const ANSWER: &str = "[[turn]]\ntext = \"Noted.\"\n";

/// The instructions of every `model/request` of the session's log.
fn instructions(log: &[Value]) -> Vec<String> {
    log.iter()
        .filter(|r| r["type"] == "model/request")
        .map(|r| r["instructions"].as_str().expect("instructions").to_owned())
        .collect()
}

/// Opens a session in `ws`, sends one prompt and returns the session's id once it is answered.
fn one_prompt(scratch: &Scratch, ws: &std::path::Path) -> String {
    let script = scratch.script(ANSWER);
    let mut client = AcpClient::start(scratch, &script, &[]);
    let session = client.open_session(ws);
    let (answer, _) = client.prompt(&session, "hello");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    session
}

#[test]
fn agents_md_from_the_repository_root_down_is_stated_in_the_instructions() {
    // Not under /tmp: a confined read sees a /tmp of its own, so a file above the workspace
    // there would be out of its sight.
    let scratch = Scratch::new_in(&scratch_base(), "project-docs");
    let root = scratch.ws();
    std::fs::create_dir(root.join(".git")).expect(".git");
    std::fs::write(root.join("AGENTS.md"), "Run the tests with make check.\n").expect("root");
    let ws = root.join("crate");
    std::fs::create_dir(&ws).expect("crate");
    std::fs::write(ws.join("AGENTS.md"), "This crate has no unsafe code.\n").expect("ws");
    let session = one_prompt(&scratch, &ws);

    let told = instructions(&scratch.log(&session));
    assert_eq!(told.len(), 1);
    let text = &told[0];
    let outer = format!(
        "--- {}\nRun the tests with make check.\n--- end of {}",
        root.join("AGENTS.md").display(),
        root.join("AGENTS.md").display()
    );
    let inner = format!(
        "--- {}\nThis crate has no unsafe code.\n--- end of {}",
        ws.join("AGENTS.md").display(),
        ws.join("AGENTS.md").display()
    );
    let (Some(at_outer), Some(at_inner)) = (text.find(&outer), text.find(&inner)) else {
        panic!("both files are stated: {text}");
    };
    assert!(at_outer < at_inner, "outermost first: {text}");
    assert!(text.contains("It is the project's, not agentd's"), "{text}");
    // agentd's own rules come first, the approval policy's marker after the guidance.
    let rules = text.find("Check the [exit code: N] marker").expect("rules");
    let policy = text
        .find("<!-- agentd-approval-policy:")
        .expect("policy marker");
    assert!(rules < at_outer && at_inner < policy, "{text}");
}

#[test]
fn an_agents_md_that_is_a_fifo_is_named_and_does_not_block_the_turn() {
    let scratch = Scratch::new("project-docs-fifo");
    let ws = scratch.ws();
    nix::unistd::mkfifo(
        &ws.join("feed"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .expect("mkfifo");
    std::os::unix::fs::symlink("feed", ws.join("AGENTS.md")).expect("symlink");
    let session = one_prompt(&scratch, &ws);
    let told = instructions(&scratch.log(&session));
    let named = format!("--- {} is not stated: ", ws.join("AGENTS.md").display());
    assert!(told[0].contains(&named), "{}", told[0]);
}

#[test]
fn a_workspace_without_agents_md_is_told_nothing_of_it() {
    let scratch = Scratch::new("project-docs-none");
    let session = one_prompt(&scratch, &scratch.ws());
    let told = instructions(&scratch.log(&session));
    assert!(!told[0].contains("AGENTS.md"), "{}", told[0]);
}
