//! A state directory agentd cannot use — a read-only home, a path through a file — is said the
//! way a configuration error is: what failed, on which path, and the settings that choose
//! another directory (`--state-dir`, `AGENTD_STATE_DIR`, `session.state_dir`, `XDG_STATE_HOME`),
//! by `agentd exec`, `agentd sessions list` and `show`, and over ACP in the message of
//! `session/new`'s and `session/list`'s errors. The directory is one under a regular file, which
//! refuses root too (ENOTDIR), where a read-only mode would not. The control: the same commands
//! with a directory they can use.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};
use support::acp::{AcpClient, Scratch};

const SCRIPT: &str = "[[turn]]\ntext = \"Noted.\"\n";

/// Every setting that chooses the directory, each of which the message must name.
const SETTINGS: [&str; 4] = [
    "--state-dir DIR",
    "AGENTD_STATE_DIR",
    "session.state_dir",
    "XDG_STATE_HOME",
];

/// A regular file in the scratch area, under which no directory can be made.
fn regular_file(scratch: &Scratch) -> PathBuf {
    let file = std::fs::canonicalize(&scratch.root)
        .expect("root")
        .join("file");
    std::fs::write(&file, "not a directory\n").expect("file");
    file
}

/// Checks that `text` says it cannot `what` the state directory `dir` and how to choose another.
fn says_how_to_fix(text: &str, what: &str, dir: &Path) {
    assert!(
        text.contains(&format!(
            "cannot {what} the directory of session logs {}: Not a directory (os error 20)",
            dir.display()
        )),
        "{text}"
    );
    for setting in SETTINGS {
        assert!(text.contains(setting), "{setting}: {text}");
    }
}

/// `agentd SUBCOMMAND ARGS` with the scratch's environment (`Scratch::agentd`), `XDG_STATE_HOME`
/// set to `state_home`.
fn agentd(scratch: &Scratch, state_home: &Path, subcommand: &str, args: &[&str]) -> Output {
    scratch
        .agentd(subcommand)
        .args(args)
        .env("XDG_STATE_HOME", state_home)
        .stdin(Stdio::null())
        .output()
        .expect("run agentd")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn exec_and_sessions_name_the_settings_of_a_state_directory_they_cannot_use() {
    let scratch = Scratch::new("state-dir-cli");
    let file = regular_file(&scratch);
    let script = scratch.script(SCRIPT);
    let script = script.to_str().expect("a UTF-8 path");
    let exec = |state_home: &Path| {
        agentd(
            &scratch,
            state_home,
            "exec",
            &["--model-script", script, "What is noted?"],
        )
    };

    // The default directory, $XDG_STATE_HOME/agentd/sessions, under a file.
    let out = exec(&file);
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    says_how_to_fix(&stderr(&out), "create", &file.join("agentd/sessions"));
    // --state-dir under a file, for exec and for both sessions commands.
    let under_file = file.join("sessions");
    let flag = under_file.to_str().expect("a UTF-8 path");
    let out = agentd(
        &scratch,
        &scratch.state(),
        "exec",
        &[
            "--state-dir",
            flag,
            "--model-script",
            script,
            "What is noted?",
        ],
    );
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    says_how_to_fix(&stderr(&out), "create", &under_file);
    let out = agentd(
        &scratch,
        &scratch.state(),
        "sessions",
        &["list", "--state-dir", flag],
    );
    assert!(!out.status.success(), "{}", stderr(&out));
    says_how_to_fix(&stderr(&out), "read", &under_file);
    let out = agentd(
        &scratch,
        &scratch.state(),
        "sessions",
        &["show", "0123-abcd", "--state-dir", flag],
    );
    assert!(!out.status.success(), "{}", stderr(&out));
    says_how_to_fix(&stderr(&out), "read", &under_file);

    // The control: a directory agentd can make.
    let out = exec(&scratch.state());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = agentd(&scratch, &scratch.state(), "sessions", &["list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("What is noted?"),
        "{out:?}"
    );
}

/// `agentd acp` with the scripted model and `--state-dir dir`, as [`AcpClient::command`] starts
/// it but for the state directory.
fn acp(scratch: &Scratch, script: &Path, dir: &Path) -> AcpClient {
    let mut command = Command::new(support::binary("agentd"));
    command
        .arg("acp")
        .arg("--model-script")
        .arg(script)
        .arg("--state-dir")
        .arg(dir)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", scratch.root.join("home"))
        .env("XDG_CONFIG_HOME", scratch.root.join("config"))
        .env("LANG", "C.UTF-8")
        .env("TMPDIR", scratch.root.join("tmp"))
        .current_dir(scratch.ws());
    AcpClient::spawn_command(command, Stdio::inherit())
}

#[test]
fn over_acp_the_errors_message_names_the_directory_and_the_settings() {
    let scratch = Scratch::new("state-dir-acp");
    let under_file = regular_file(&scratch).join("sessions");
    let script = scratch.script(SCRIPT);
    let mut client = acp(&scratch, &script, &under_file);
    let (init, _) = client.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    let (refused, _) = client.request(
        "session/new",
        json!({"cwd": scratch.ws(), "mcpServers": []}),
    );
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    let message = |answer: &Value| answer["error"]["message"].as_str().unwrap_or("").to_owned();
    says_how_to_fix(&message(&refused), "create", &under_file);
    let (listed, _) = client.request("session/list", json!({}));
    says_how_to_fix(&message(&listed), "read", &under_file);
    drop(client);

    // The control: the same agentd with a directory it can make.
    let mut client = acp(&scratch, &script, &scratch.state());
    let session = client.open_session(&scratch.ws());
    let (listed, _) = client.request("session/list", json!({}));
    assert_eq!(
        listed["result"]["sessions"][0]["sessionId"], session,
        "{listed}"
    );
}
