//! Subagents over the real `agentd acp` wire, with a scripted model: the model delegates to a
//! child agent through the `task` tool, the child reads a file and answers, and the answer is the
//! `task` call's result; a persona whose filter denies `bash` gets no bash and a bash call of its
//! is refused; a persona whose depth cap allows no grandchild has no `task` tool. Checked in the
//! editor's updates and in the session log.

mod support;

use serde_json::Value;
use support::acp::{AcpClient, Scratch, normalized_updates};

const PERSONAS: &str = r#"
[agents.reader]
description = "Reads files and reports what they say"
instructions = "You read the files you are asked about and answer in one sentence."
tools = { deny = ["bash"] }
max_depth = 1
"#;

/// The parent delegates; the child reads `a.txt`, tries bash (denied to it), and answers; the
/// parent answers with what the child said.
const DELEGATE: &str = r#"
[[turn]]
[[turn.tool_calls]]
name = "task"
arguments = { persona = "reader", prompt = "What does a.txt say?", description = "read a.txt" }

[[turn]]
text = "The reader says: a.txt says hello from the file."

[[agents.reader.turn]]
[[agents.reader.turn.tool_calls]]
name = "read_file"
arguments = { path = "a.txt" }

[[agents.reader.turn]]
[[agents.reader.turn.tool_calls]]
name = "bash"
arguments = { command = "printf x > child-bash.txt" }

[[agents.reader.turn]]
text = "a.txt says hello from the file."
"#;

fn of_type<'a>(log: &'a [Value], kind: &str) -> Vec<&'a Value> {
    log.iter().filter(|e| e["type"] == kind).collect()
}

#[test]
fn a_child_agent_reads_a_file_and_its_answer_is_the_task_result() {
    let scratch = Scratch::new("subagent-delegate");
    scratch.config(PERSONAS);
    std::fs::write(scratch.ws().join("a.txt"), "hello from the file\n").expect("a.txt");
    let script = scratch.script(DELEGATE);
    let mut client = AcpClient::start(&scratch, &script, &[]);
    let session = client.open_session(&scratch.ws());
    let (answer, notes) = client.prompt(&session, "Ask the reader what a.txt says.");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");

    // The editor sees one task call, with the child's calls as its updates, and its result.
    let updates = normalized_updates(&notes);
    let task_calls: Vec<&Value> = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call")
        .collect();
    assert_eq!(
        task_calls.len(),
        1,
        "only the task call is a call of its own: {updates:#?}"
    );
    let task_id = task_calls[0]["toolCallId"].clone();
    let of_task: Vec<String> = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update" && u["toolCallId"] == task_id)
        .map(|u| u.to_string())
        .collect();
    assert!(
        of_task.iter().any(|u| u.contains("read_file")),
        "the child's read_file shows under the task call: {of_task:#?}"
    );
    assert!(
        of_task
            .iter()
            .any(|u| u.contains("a.txt says hello from the file.")),
        "the child's answer is the task call's result: {of_task:#?}"
    );

    // The child could not run bash: no file, and its bash call was refused.
    assert!(
        !scratch.ws().join("child-bash.txt").exists(),
        "a child denied bash ran it"
    );
    let log = scratch.log(&session);
    let started = of_type(&log, "agent/started");
    let ended = of_type(&log, "agent/ended");
    assert_eq!((started.len(), ended.len()), (1, 1), "{log:#?}");
    let child = started[0]["agent"].as_str().expect("agent id").to_owned();
    assert_eq!(started[0]["persona"], "reader");
    assert_eq!(started[0]["depth"], 1);
    let child_results: Vec<&Value> = log
        .iter()
        .filter(|r| r["type"] == "tool/result" && r["agent_id"] == child.as_str())
        .collect();
    assert_eq!(child_results.len(), 2, "read_file and bash: {log:#?}");
    assert_eq!(
        child_results[0]["status"], "completed",
        "{:?}",
        child_results[0]
    );
    assert_eq!(
        child_results[1]["status"], "failed",
        "{:?}",
        child_results[1]
    );
    assert!(
        child_results[1]["output"]
            .as_str()
            .is_some_and(|o| o.contains("not available to this agent")),
        "{:?}",
        child_results[1]
    );
    // The child's requests were offered no bash and no task (its cap allows no grandchild).
    let child_requests: Vec<&Value> = log
        .iter()
        .filter(|r| r["type"] == "model/request" && r["agent_id"] == child.as_str())
        .collect();
    assert!(!child_requests.is_empty(), "{log:#?}");
    for request in &child_requests {
        let tools = request["tools"].to_string();
        assert!(!tools.contains("\"bash\""), "{tools}");
        assert!(!tools.contains("\"task\""), "{tools}");
    }
    // The parent's own request offered task; its history does not hold the child's turns.
    let parent_requests: Vec<&Value> = log
        .iter()
        .filter(|r| r["type"] == "model/request" && r.get("agent_id").is_none())
        .collect();
    assert!(parent_requests[0]["tools"].to_string().contains("\"task\""));

    // session/load replays the task call with the child's progress under it.
    drop(client);
    let mut again = AcpClient::start(&scratch, &script, &[]);
    again.request(
        "initialize",
        serde_json::json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let (loaded, replay) = again.request(
        "session/load",
        serde_json::json!({"sessionId": session, "cwd": scratch.ws(), "mcpServers": []}),
    );
    assert!(loaded.get("error").is_none(), "{loaded}");
    let replayed = normalized_updates(&replay)
        .iter()
        .filter(|u| u["toolCallId"] == task_id)
        .map(|u| u.to_string())
        .collect::<Vec<_>>();
    assert!(
        replayed.iter().any(|u| u.contains("read_file")),
        "session/load replays the child's calls under the task call: {replayed:#?}"
    );
}
