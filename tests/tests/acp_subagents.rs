//! Subagents over the real `agentd acp` wire, with a scripted model: the model delegates to a
//! child agent through the `task` tool, the child reads a file and answers, and the answer is the
//! `task` call's result; a persona whose filter denies `bash` gets no bash and a bash call of its
//! is refused; a persona whose depth cap allows no grandchild has no `task` tool. Checked in the
//! editor's updates and in the session log.

mod support;

use serde_json::Value;
use support::acp::{AcpClient, Permission, Scratch, normalized_updates};

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

/// A persona with a `model` table of its own: its child replays that model's script, while the
/// parent keeps the session's. The persona's script is taken from the configuration file's
/// directory.
#[test]
fn a_persona_with_its_own_model_runs_its_child_on_that_model() {
    let scratch = Scratch::new("subagent-persona-model");
    scratch.config(
        r#"
[agents.scribe]
description = "Answers from its own model"
instructions = "You answer in one sentence."
model = { provider = "scripted", script = "scribe.toml" }
"#,
    );
    let config_dir = scratch.root.join("config").join("agentd");
    std::fs::write(
        config_dir.join("scribe.toml"),
        "[[turn]]\ntext = \"The scribe's own model answers.\"\n",
    )
    .expect("scribe.toml");
    // The session's script has turns for the scribe too: a child that used the session's
    // model would answer with them instead.
    let script = scratch.script(
        r#"
[[turn]]
[[turn.tool_calls]]
name = "task"
arguments = { persona = "scribe", prompt = "Say something.", description = "ask the scribe" }

[[turn]]
text = "Done."

[[agents.scribe.turn]]
text = "The session's model answers."
"#,
    );
    let mut client = AcpClient::start(&scratch, &script, &[]);
    let session = client.open_session(&scratch.ws());
    let (answer, _) = client.prompt(&session, "Ask the scribe.");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");

    let log = scratch.log(&session);
    let started = of_type(&log, "agent/started");
    assert_eq!(started.len(), 1, "{log:#?}");
    let child = started[0]["agent"].as_str().expect("agent id");
    let ended = of_type(&log, "agent/ended");
    assert_eq!(ended[0]["outcome"], "completed", "{log:#?}");
    assert_eq!(ended[0]["answer"], "The scribe's own model answers.");
    let model_of = |tagged: Option<&str>| -> Vec<String> {
        log.iter()
            .filter(|r| r["type"] == "model/request" && r["agent_id"].as_str() == tagged)
            .map(|r| r["model"].as_str().expect("model").to_owned())
            .collect()
    };
    let child_models = model_of(Some(child));
    assert_eq!(child_models.len(), 1, "{log:#?}");
    assert!(
        child_models[0].ends_with("scribe.toml"),
        "the child runs on the persona's model: {child_models:?}"
    );
    // The control: the parent's requests name the session's script.
    let script_name = script.display().to_string();
    assert!(
        model_of(None).iter().all(|m| m.ends_with(&script_name)),
        "{:?}",
        model_of(None)
    );
}

/// `approval.ask_before = ["task"]` asks the person before a child starts; a rejection starts
/// nothing, and an approval (the control) starts the child.
#[test]
fn ask_before_task_asks_before_a_child_starts() {
    for (answer, starts) in [(Permission::Reject, false), (Permission::AllowOnce, true)] {
        let scratch = Scratch::new(&format!("subagent-ask-task-{starts}"));
        scratch.config(&format!(
            "{PERSONAS}\n[approval]\nask_before = [\"task\"]\n"
        ));
        std::fs::write(scratch.ws().join("a.txt"), "hello from the file\n").expect("a.txt");
        let script = scratch.script(DELEGATE);
        let mut client = AcpClient::start(&scratch, &script, &[]);
        client.answers.push_back(answer);
        let session = client.open_session(&scratch.ws());
        let (done, _) = client.prompt(&session, "Ask the reader what a.txt says.");
        assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
        assert_eq!(
            client.permission_requests.len(),
            1,
            "one question, before the child"
        );
        let log = scratch.log(&session);
        let asked = of_type(&log, "approval/asked");
        assert_eq!(asked.len(), 1, "{log:#?}");
        assert_eq!(asked[0]["tool"], "task", "{:?}", asked[0]);
        assert_eq!(
            of_type(&log, "agent/started").len(),
            usize::from(starts),
            "{log:#?}"
        );
        let task_result = log
            .iter()
            .find(|r| r["type"] == "tool/result" && r.get("agent_id").is_none())
            .expect("the task call's result");
        if starts {
            assert_eq!(task_result["status"], "completed", "{task_result}");
        } else {
            assert_eq!(task_result["status"], "failed", "{task_result}");
            assert!(
                !log.iter().any(|r| r.get("agent_id").is_some()),
                "nothing of a child was logged: {log:#?}"
            );
        }
    }
}
