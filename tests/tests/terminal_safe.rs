//! A session whose command printed terminal control sequences — an OSC 52 clipboard write,
//! cursor movement, the 8-bit CSI, a carriage return, a bell — is shown by the real
//! `agentd sessions show` with every control visible as text and none of them sent raw.

mod support;

use std::process::Command;

use support::acp::{AcpClient, Scratch};

/// One bash call whose output carries the sequences, then an answer. `\302\233` is U+009B, the
/// C1 CSI, as UTF-8.
const SCRIPT: &str = r#"
[[turn]]
[[turn.tool_calls]]
name = "bash"
arguments = { command = "printf 'copied\\033]52;c;cm0gLXJmIH4=\\007 moved\\033[2A\\033[2K\\302\\2332J over\\rX\\n'" }

[[turn]]
text = "Printed."
"#;

/// The bytes a terminal would obey: ESC, BEL, CR, and U+009B in UTF-8.
fn obeyed(bytes: &[u8]) -> Vec<&'static str> {
    let mut found = Vec::new();
    if bytes.contains(&0x1b) {
        found.push("ESC");
    }
    if bytes.contains(&0x07) {
        found.push("BEL");
    }
    if bytes.contains(&b'\r') {
        found.push("CR");
    }
    if bytes.windows(2).any(|w| w == [0xc2, 0x9b]) {
        found.push("C1 CSI");
    }
    found
}

#[test]
fn sessions_show_prints_a_commands_escape_sequences_visibly() {
    let scratch = Scratch::new("terminal-safe");
    let script = scratch.script(SCRIPT);
    let mut client = AcpClient::start(&scratch, &script, &["--sandbox-mode", "danger-full-access"]);
    let session = client.open_session(&scratch.ws());
    let (answer, _) = client.prompt(&session, "print something");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    drop(client);

    // The control: the stored output really holds the raw sequences, so a raw print would
    // send them to the terminal.
    let log = scratch.log(&session);
    let output = log
        .iter()
        .find(|e| e["type"] == "tool/result")
        .and_then(|e| e["output"].as_str())
        .unwrap_or_else(|| panic!("no tool result in the log: {log:?}"))
        .to_owned();
    assert_eq!(
        obeyed(output.as_bytes()),
        ["ESC", "BEL", "CR", "C1 CSI"],
        "{output:?}"
    );

    let shown = Command::new(support::binary("agentd"))
        .args(["sessions", "show", &session, "--state-dir"])
        .arg(scratch.state())
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", scratch.root.join("home"))
        .env("XDG_CONFIG_HOME", scratch.root.join("config"))
        .output()
        .expect("run agentd sessions show");
    let stdout = String::from_utf8_lossy(&shown.stdout).into_owned();
    assert!(
        shown.status.success(),
        "{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    assert_eq!(obeyed(&shown.stdout), Vec::<&str>::new(), "{stdout:?}");
    assert!(
        !stdout
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t'),
        "{stdout:?}"
    );
    assert!(
        stdout.contains(r"copied\x1b]52;c;cm0gLXJmIH4=\x07 moved\x1b[2A\x1b[2K\u{9b}2J over\x0dX"),
        "{stdout}"
    );
}
