//! What `session/new` takes as a workspace, over the real wire: an existing absolute directory
//! other than `/`. A relative path, a file, a missing path and `/` are each refused with
//! invalid params saying what to give instead, and no session log is written.

mod support;

use serde_json::{Value, json};
use support::acp::{AcpClient, Scratch};

fn new_session(client: &mut AcpClient, cwd: &str) -> Value {
    client
        .request("session/new", json!({"cwd": cwd, "mcpServers": []}))
        .0
}

#[test]
fn session_new_takes_an_absolute_directory_other_than_the_root() {
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
            "cwd relative must be an absolute path".to_owned(),
        ),
        (
            file.as_str(),
            format!("cwd {file} is not a directory: give the workspace's directory"),
        ),
        (
            "/",
            "cwd / would make the whole file system the workspace (writable in \
             workspace-write): give a project's directory"
                .to_owned(),
        ),
    ];
    for (cwd, data) in &refused {
        let answer = new_session(&mut client, cwd);
        assert_eq!(answer["error"]["code"], -32602, "{cwd}: {answer}");
        assert_eq!(answer["error"]["data"], json!(data), "{cwd}: {answer}");
    }
    let answer = new_session(&mut client, &missing);
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
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
