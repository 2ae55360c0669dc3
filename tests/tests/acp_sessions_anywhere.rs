//! Sessions open wherever an editor opens them, over the real `agentd acp` wire. A session in
//! the home directory or in `/` opens read-only, and a read command runs there. Where the
//! configured mode is workspace-write, such a session opens read-only all the same and tells
//! the editor why, naming the path workspace-write would make writable — at `session/new` and
//! again at `session/load` by another agentd —, and a switch to workspace-write is refused with
//! that sentence as the error's message (a snapshot), as a config option and as a session mode.
//! The control: in a project's directory the same agentd opens the session in workspace-write
//! and the same switch is taken.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::acp::{AcpClient, Scratch, normalized_updates};

/// One `ls` in the session's directory, then an answer.
const LIST: &str = r#"
[[turn]]
[[turn.tool_calls]]
name = "bash"
arguments = { command = "ls" }

[[turn]]
text = "Listed."
"#;

/// How long to wait for what agentd sends after an answer.
const LIMIT: Duration = Duration::from_secs(60);

/// The home directory agentd and its commands get (`HOME` of [`AcpClient::command`]), resolved,
/// with a file in it to find.
fn home(scratch: &Scratch) -> std::path::PathBuf {
    let home = std::fs::canonicalize(scratch.root.join("home")).expect("home");
    std::fs::write(home.join("notes.txt"), "in the home directory\n").expect("notes.txt");
    home
}

fn sandbox_mode(result: &Value) -> &str {
    result["configOptions"]
        .as_array()
        .and_then(|options| options.iter().find(|o| o["id"] == "sandbox-mode"))
        .and_then(|option| option["currentValue"].as_str())
        .unwrap_or_else(|| panic!("no sandbox-mode in {result}"))
}

/// The agent's text shown for `session` after an answer, read until it has come.
fn notice(client: &mut AcpClient, session: &str) -> String {
    let deadline = Instant::now() + LIMIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let message = client
            .next(left)
            .unwrap_or_else(|| panic!("no notice for {session} within {LIMIT:?}"));
        let update = &message["params"]["update"];
        if message["method"] == "session/update"
            && message["params"]["sessionId"] == session
            && update["sessionUpdate"] == "agent_message_chunk"
        {
            return update["content"]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
        }
    }
}

/// The text of the first tool result of a prompt's updates.
fn first_result(notes: &[Value]) -> String {
    normalized_updates(notes)
        .into_iter()
        .find(|u| u["sessionUpdate"] == "tool_call_update" && u["status"].is_string())
        .and_then(|u| {
            u["content"]
                .as_array()
                .and_then(|blocks| blocks.last())
                .and_then(|block| block["content"]["text"].as_str())
                .map(str::to_owned)
        })
        .unwrap_or_else(|| panic!("no tool result in {notes:?}"))
}

/// `session/new` in `cwd` on a connection already initialized; its id and result.
fn open(client: &mut AcpClient, cwd: &Path) -> (String, Value) {
    let (answer, _) = client.request("session/new", json!({"cwd": cwd, "mcpServers": []}));
    let id = answer["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("session/new in {} failed: {answer}", cwd.display()))
        .to_owned();
    (id, answer["result"].clone())
}

fn set_mode(client: &mut AcpClient, session: &str, mode: &str) -> Value {
    client
        .request(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "sandbox-mode", "value": mode}),
        )
        .0
}

#[test]
fn a_read_only_session_opens_in_the_home_directory_and_in_the_root_and_reads() {
    let scratch = Scratch::new("anywhere-read-only");
    let home = home(&scratch);
    let script = scratch.script(LIST);
    for (cwd, listed) in [(home.as_path(), "notes.txt"), (Path::new("/"), "etc")] {
        let mut client = AcpClient::start(&scratch, &script, &[]);
        let (session, result) = client.new_session(cwd);
        assert_eq!(sandbox_mode(&result), "read-only", "{}", cwd.display());
        let (answer, notes) = client.prompt(&session, "What is here?");
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
        let text = first_result(&notes);
        assert!(
            text.lines().any(|line| line == listed) && text.contains("[exit code: 0]"),
            "{}: {text}",
            cwd.display()
        );
        let log = scratch.log(&session);
        assert_eq!(log[0]["cwd"], json!(cwd), "the session's workspace");
    }
}

#[test]
fn where_workspace_write_is_configured_such_a_session_opens_read_only_says_why_and_refuses_it() {
    let scratch = Scratch::new("anywhere-workspace-write");
    scratch.config("[sandbox]\nmode = \"workspace-write\"\n");
    let home = home(&scratch);
    let root = std::fs::canonicalize(&scratch.root).expect("root");
    let script = scratch.script(LIST);
    let mut client =
        AcpClient::start_configured(&scratch, &["--model-script", &script_arg(&script)]);

    let (session, result) = client.new_session(&home);
    assert_eq!(sandbox_mode(&result), "read-only", "{result}");
    let offered: Vec<&str> = result["modes"]["availableModes"]
        .as_array()
        .expect("modes")
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect();
    assert!(!offered.contains(&"workspace-write"), "{offered:?}");
    let own = root.join("home/.local/state/agentd");
    let told = notice(&mut client, &session);
    assert!(
        told.starts_with(
            "This session runs read-only, although its sandbox mode is workspace-write"
        ) && told.contains(&format!("would make {} writable", own.display())),
        "{told}"
    );

    let refused = set_mode(&mut client, &session, "workspace-write");
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert_eq!(
        refused["error"]["data"],
        json!({"configId": "sandbox-mode", "value": "workspace-write"})
    );
    let message = refused["error"]["message"].as_str().expect("message");
    insta::assert_snapshot!(
        "workspace_write_refused_in_the_home_directory",
        message.replace(&root.display().to_string(), "[SCRATCH]")
    );
    let (as_mode, _) = client.request(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "workspace-write"}),
    );
    assert_eq!(as_mode["error"]["message"], message, "{as_mode}");
    // Nothing was recorded, and a command still runs read-only.
    let log = scratch.log(&session);
    assert!(!log.iter().any(|e| e["type"] == "sandbox/mode"), "{log:?}");
    let (answer, notes) = client.prompt(&session, "What is here?");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(first_result(&notes).contains("notes.txt"));

    let (in_root, result) = open(&mut client, Path::new("/"));
    assert_eq!(sandbox_mode(&result), "read-only", "{result}");
    let told = notice(&mut client, &in_root);
    assert!(
        told.contains("the workspace / would make the whole file system writable"),
        "{told}"
    );

    // The control: the same agentd in a project's directory opens in workspace-write, says
    // nothing, and takes the same switch back from read-only.
    let (project, result) = open(&mut client, &scratch.ws());
    assert_eq!(sandbox_mode(&result), "workspace-write", "{result}");
    let read_only = set_mode(&mut client, &project, "read-only");
    assert_eq!(
        sandbox_mode(&read_only["result"]),
        "read-only",
        "{read_only}"
    );
    let taken = set_mode(&mut client, &project, "workspace-write");
    assert_eq!(sandbox_mode(&taken["result"]), "workspace-write", "{taken}");
    drop(client);

    // Another agentd loads the home session: read-only again, and told again.
    let mut client =
        AcpClient::start_configured(&scratch, &["--model-script", &script_arg(&script)]);
    let (loaded, _) = client.load_session(&home, &session);
    assert_eq!(sandbox_mode(&loaded["result"]), "read-only", "{loaded}");
    let told = notice(&mut client, &session);
    assert!(
        told.contains(&format!("would make {} writable", own.display())),
        "{told}"
    );
    let refused = set_mode(&mut client, &session, "workspace-write");
    assert_eq!(refused["error"]["message"], message, "{refused}");
}

fn script_arg(script: &Path) -> String {
    script.display().to_string()
}
