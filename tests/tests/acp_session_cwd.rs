//! What `session/new` takes as a workspace, over the real wire: an existing absolute directory
//! (`/` and the home directory too: `acp_sessions_anywhere.rs`). A relative path, a file and a
//! missing path are each refused with invalid params whose message says what is wrong and what
//! to give instead, the path in `data`, and no session log is written.

mod support;

use serde_json::{Value, json};
use support::acp::{AcpClient, Scratch};

fn new_session(client: &mut AcpClient, cwd: &str) -> Value {
    client
        .request("session/new", json!({"cwd": cwd, "mcpServers": []}))
        .0
}

#[test]
fn session_new_takes_an_existing_absolute_directory() {
    let scratch = Scratch::new("session-cwd");
    let file = scratch.ws().join("notes.txt");
    std::fs::write(&file, "x").expect("file");
    let script = scratch.script("[[turn]]\ntext = \"Hi.\"\n");
    let mut client = AcpClient::start(&scratch, &script, &[]);
    client.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let file = file.display().to_string();
    let missing = scratch.ws().join("missing").display().to_string();
    let refused = [
        (
            "relative",
            "cwd relative is not an absolute path: give the workspace's directory as an absolute \
             path"
                .to_owned(),
        ),
        (
            file.as_str(),
            format!("cwd {file} is not a directory: give the workspace's directory"),
        ),
        (
            missing.as_str(),
            format!(
                "cwd {missing} cannot be used: No such file or directory (os error 2); give an \
                 existing directory"
            ),
        ),
    ];
    for (cwd, message) in &refused {
        let answer = new_session(&mut client, cwd);
        assert_eq!(answer["error"]["code"], -32602, "{cwd}: {answer}");
        assert_eq!(
            answer["error"]["message"],
            json!(message),
            "{cwd}: {answer}"
        );
        assert_eq!(
            answer["error"]["data"],
            json!({"cwd": cwd}),
            "{cwd}: {answer}"
        );
    }
    let sessions = scratch.state();
    let logs = || {
        std::fs::read_dir(&sessions).map_or(0, |dir| {
            dir.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
                .count()
        })
    };
    let logs_before = logs();
    assert_eq!(logs_before, 0, "no session was recorded");
    // The control: the workspace itself is taken.
    let answer = new_session(&mut client, &scratch.ws().display().to_string());
    assert!(answer["result"]["sessionId"].is_string(), "{answer}");
    assert_eq!(logs(), 1, "where the logs go: {}", sessions.display());
}
