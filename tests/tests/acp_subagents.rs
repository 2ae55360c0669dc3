//! Subagents over the real `agentd acp` wire, with a scripted model: the model delegates to a
//! child agent through the `task` tool, the child reads a file and answers, and the answer is the
//! `task` call's result; a persona whose filter denies `bash` gets no bash and a bash call of its
//! is refused; a persona whose depth cap allows no grandchild has no `task` tool. A third level
//! under `max_depth = 2` is refused before anything of it exists, and so is a persona whose own
//! cap is smaller than the depth it would start at; a turn cancelled while a child's command runs
//! ends the child and its process; a child whose model fails answers its `task` call with a
//! failed result and the turn goes on; an `approval.ask_before` of a child's call names the child.
//! Each of a child's tool calls reaches the editor as a call of its own, under an id agentd makes,
//! nested (`_meta.agentd.parentToolCallId`) under the `task` call that started the child, and its
//! permission requests name that call; `session/load` replays them, `session/resume` does not.
//! Checked in the editor's updates, on the host and in the session log.

mod support;

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use support::acp::{AcpClient, Permission, Scratch, normalized_updates, scratch_base};
use support::fifo;

/// How long agentd may take to answer a prompt.
const LIMIT: Duration = Duration::from_secs(60);

/// How long after `session/cancel` the prompt may take to answer, and its processes to go.
const CANCEL_LIMIT: Duration = Duration::from_secs(10);

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

    // The editor sees the task call, with the child's answer as its result, and each of the
    // child's calls as a call of its own nested under it, under an id agentd made.
    let updates = normalized_updates(&notes);
    let calls: Vec<&Value> = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call")
        .collect();
    assert_eq!(
        calls.len(),
        3,
        "the task call and two child calls: {updates:#?}"
    );
    let task_id = calls[0]["toolCallId"].clone();
    assert_eq!(calls[0]["title"], "Delegate to reader: read a.txt");
    assert!(calls[0].get("_meta").is_none(), "{}", calls[0]);
    let nested: Vec<(&Value, &Value, &Value)> = calls[1..]
        .iter()
        .map(|c| {
            (
                &c["toolCallId"],
                &c["title"],
                &c["_meta"]["agentd"]["parentToolCallId"],
            )
        })
        .collect();
    let child_id = |n: u32| json!(format!("{}/agent-1/{n}", task_id.as_str().unwrap_or("")));
    assert_eq!(
        nested,
        [
            (&child_id(1), &json!("reader: Read a.txt"), &task_id),
            (
                &child_id(2),
                &json!("reader: printf x > child-bash.txt"),
                &task_id
            ),
        ],
        "{updates:#?}"
    );
    // How a call ended: its status and the text of its content, as a top-level call's shows.
    let ended = |id: &Value| -> (Value, String) {
        let end = updates
            .iter()
            .rfind(|u| u["toolCallId"] == *id && u.get("status").is_some())
            .unwrap_or_else(|| panic!("{id} did not end: {updates:#?}"));
        let texts: Vec<&str> = end["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["content"]["text"].as_str())
            .collect();
        (end["status"].clone(), texts.join("\n"))
    };
    let (status, read) = ended(&child_id(1));
    assert_eq!(status, "completed");
    assert!(read.ends_with("hello from the file\n"), "{read:?}");
    let (status, refused) = ended(&child_id(2));
    assert_eq!(status, "failed");
    assert!(
        refused.contains("not available to this agent"),
        "{refused:?}"
    );
    assert_eq!(
        ended(&task_id),
        (
            json!("completed"),
            "a.txt says hello from the file.".to_owned()
        )
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

    // session/load replays the child's calls nested under the task call.
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
    let replayed: Vec<Value> = normalized_updates(&replay)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "tool_call")
        .collect();
    let live: Vec<Value> = calls.into_iter().cloned().collect();
    assert_eq!(
        replayed, live,
        "session/load replays the child's calls nested under the task call"
    );

    // session/resume shows nothing again, the child's calls included (the load above, the
    // control, showed them).
    drop(again);
    let mut resumed = AcpClient::start(&scratch, &script, &[]);
    resumed.request(
        "initialize",
        serde_json::json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let (answer, notes) = resumed.request(
        "session/resume",
        serde_json::json!({"sessionId": session, "cwd": scratch.ws(), "mcpServers": []}),
    );
    assert!(answer["result"].is_object(), "{answer}");
    let shown: Vec<&Value> = notes
        .iter()
        .filter(|n| n["method"] == "session/update")
        .collect();
    assert!(shown.is_empty(), "session/resume replayed: {shown:#?}");
}

/// Kills `client` (SIGKILL), starts agentd again and loads `session`: the replayed updates must
/// be the ones shown live, that is for each of `prompts` in order its text as a user message and
/// then the notifications its prompt received.
fn assert_load_replays(
    client: AcpClient,
    scratch: &Scratch,
    script: &Path,
    session: &str,
    prompts: &[(&str, &[Value])],
) {
    drop(client);
    let mut shown = Vec::new();
    for (text, notes) in prompts {
        shown.push(json!({"params": {"update": {
            "sessionUpdate": "user_message_chunk",
            "content": {"type": "text", "text": text},
        }}}));
        shown.extend(notes.iter().cloned());
    }
    let mut again = AcpClient::start(scratch, script, &[]);
    again.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let (loaded, replay) = again.request(
        "session/load",
        json!({"sessionId": session, "cwd": scratch.ws(), "mcpServers": []}),
    );
    assert!(loaded.get("error").is_none(), "{loaded}");
    assert_eq!(
        normalized_updates(&replay),
        normalized_updates(&shown),
        "session/load replays what was shown live"
    );
}

/// The one `tool/result` of `call` by `agent` (`None`: the top level).
fn result_of<'a>(log: &'a [Value], agent: Option<&str>, call: &str) -> &'a Value {
    let found: Vec<&Value> = log
        .iter()
        .filter(|r| {
            r["type"] == "tool/result"
                && r["call_id"] == call
                && r.get("agent_id").and_then(Value::as_str) == agent
        })
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one result of {call} by {agent:?}: {log:#?}"
    );
    found[0]
}

/// The tools each `model/request` of `agent` (`None`: the top level) offered.
fn offered(log: &[Value], agent: Option<&str>) -> Vec<Vec<String>> {
    log.iter()
        .filter(|r| {
            r["type"] == "model/request" && r.get("agent_id").and_then(Value::as_str) == agent
        })
        .map(|r| {
            r["tools"]
                .as_array()
                .expect("tools")
                .iter()
                .map(|t| t.as_str().expect("a tool name").to_owned())
                .collect()
        })
        .collect()
}

/// Every agent id the log names: record tags, and the agents of `agent/*` records.
fn agents_named(log: &[Value]) -> std::collections::BTreeSet<String> {
    let mut named = std::collections::BTreeSet::new();
    for record in log {
        if let Some(tag) = record.get("agent_id").and_then(Value::as_str) {
            named.insert(tag.to_owned());
        }
        if record["type"]
            .as_str()
            .is_some_and(|t| t.starts_with("agent/"))
        {
            for key in ["agent", "parent"] {
                if let Some(id) = record.get(key).and_then(Value::as_str) {
                    named.insert(id.to_owned());
                }
            }
        }
    }
    named
}

/// `(agent, parent, depth, persona, call_id)` of each `agent/started`, in order.
fn starts(log: &[Value]) -> Vec<Value> {
    of_type(log, "agent/started")
        .iter()
        .map(|s| {
            json!([
                s["agent"],
                s["parent"],
                s["depth"],
                s["persona"],
                s["call_id"]
            ])
        })
        .collect()
}

/// `(agent, outcome)` of each `agent/ended`, in order.
fn ends(log: &[Value]) -> Vec<Value> {
    of_type(log, "agent/ended")
        .iter()
        .map(|e| json!([e["agent"], e["outcome"]]))
        .collect()
}

const PLANNERS: &str = r#"
[agents.planner]
description = "Plans a change and delegates its parts"
instructions = "You plan the change you are given and delegate its parts to planners."
max_depth = 2
"#;

/// The top level delegates to a planner; every planner, whatever its depth, delegates to a
/// planner once and then answers (each child replays its persona's turns over its own history).
const PLAN: &str = r#"
[[turn]]
[[turn.tool_calls]]
name = "task"
arguments = { persona = "planner", prompt = "Plan the change.", description = "plan" }

[[turn]]
text = "The change is planned."

[[agents.planner.turn]]
[[agents.planner.turn.tool_calls]]
name = "task"
arguments = { persona = "planner", prompt = "Plan a part.", description = "plan a part" }

[[agents.planner.turn]]
text = "My part is planned."
"#;

#[test]
fn a_third_level_is_refused_under_max_depth_2_before_anything_is_created() {
    let scratch = Scratch::new("subagent-depth");
    scratch.config(PLANNERS);
    let script = scratch.script(PLAN);
    let mut client = AcpClient::start(&scratch, &script, &[]);
    let session = client.open_session(&scratch.ws());
    let (answer, _) = client.prompt(&session, "Plan the change.");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let log = scratch.log(&session);

    // Two children and no third: agent-1 at depth 1 below the top level, agent-2 at depth 2
    // below agent-1; each ended once, the deeper first.
    assert_eq!(
        starts(&log),
        [
            json!(["agent-1", "agent-0", 1, "planner", "call_1_1"]),
            // As the editor was shown the planner's task call, not as its model named it.
            json!(["agent-2", "agent-1", 2, "planner", "call_1_1/agent-1/1"]),
        ],
        "{log:#?}"
    );
    assert_eq!(
        ends(&log),
        [
            json!(["agent-2", "completed"]),
            json!(["agent-1", "completed"])
        ],
        "{log:#?}"
    );
    let named: Vec<String> = agents_named(&log).into_iter().collect();
    assert_eq!(
        named,
        ["agent-0", "agent-1", "agent-2"],
        "nothing of a third agent: {log:#?}"
    );

    // The control: the depth-1 planner (cap 2) was offered task, and its task call started the
    // depth-2 planner, whose answer is the call's result.
    let task = |tools: &Vec<String>| tools.iter().any(|t| t == "task");
    let first = offered(&log, Some("agent-1"));
    assert!(!first.is_empty() && first.iter().all(task), "{first:?}");
    let delegated = result_of(&log, Some("agent-1"), "call_planner_1_1");
    assert_eq!(delegated["status"], "completed", "{delegated}");
    assert_eq!(delegated["output"], "My part is planned.", "{delegated}");
    assert_eq!(
        delegated["facts"],
        json!({"agent": "agent-2", "persona": "planner"})
    );

    // The depth-2 planner may start no child (one more level would pass its cap of 2), so it is
    // not offered task at all. Its scripted task call is therefore refused when the call is
    // admitted against its scope ("not available to this agent"), before the start check: the
    // StartRefused of the lineage is never reached on this path
    // (`a_persona_is_refused_by_the_start_check_below_its_own_cap` reaches it).
    let second = offered(&log, Some("agent-2"));
    assert!(!second.is_empty() && !second.iter().any(task), "{second:?}");
    let refused = result_of(&log, Some("agent-2"), "call_planner_1_1");
    assert_eq!(refused["status"], "failed", "{refused}");
    assert_eq!(
        refused["output"],
        "the tool \"task\" is not available to this agent; its tools are: bash, bash_output, \
         bash_kill, read_file, write_file, edit_file",
        "{refused}"
    );
    assert_eq!(refused["facts"]["invalid_call"], true, "{refused}");
    assert_eq!(refused["facts"]["agent"], "agent-2", "{refused}");
    let top = result_of(&log, None, "call_1_1");
    assert_eq!(top["status"], "completed", "{top}");
    assert_eq!(top["output"], "My part is planned.", "{top}");
}

/// Live, a grandchild's calls are shown nested under its parent's `task` call, which is nested
/// under the top-level one; no id is a model's (`call_planner_1_1`). `session/load` replays
/// exactly what was shown.
#[test]
fn session_load_replays_a_grandchilds_session_as_it_was_shown_live() {
    let scratch = Scratch::new("subagent-depth-load");
    scratch.config(PLANNERS);
    let script = scratch.script(PLAN);
    let mut client = AcpClient::start(&scratch, &script, &[]);
    let session = client.open_session(&scratch.ws());
    let (answer, notes) = client.prompt(&session, "Plan the change.");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(of_type(&scratch.log(&session), "agent/started").len(), 2);
    let calls: Vec<Value> = normalized_updates(&notes)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "tool_call")
        .map(|c| {
            json!([
                c["toolCallId"],
                c["title"],
                c["_meta"]["agentd"]["parentToolCallId"]
            ])
        })
        .collect();
    assert_eq!(
        calls,
        [
            json!(["call_1_1", "Delegate to planner: plan", null]),
            json!([
                "call_1_1/agent-1/1",
                "planner: Delegate to planner: plan a part",
                "call_1_1"
            ]),
            json!([
                "call_1_1/agent-1/1/agent-2/1",
                "planner: Delegate to planner: plan a part",
                "call_1_1/agent-1/1"
            ]),
        ]
    );
    assert_load_replays(
        client,
        &scratch,
        &script,
        &session,
        &[("Plan the change.", &notes)],
    );
}

/// A planner (cap 2) and a reader (cap 1, its own).
const PLANNER_AND_READER: &str = r#"
[agents.planner]
description = "Plans a change and delegates its parts"
instructions = "You plan the change you are given and delegate its parts."
max_depth = 2

[agents.reader]
description = "Reads files and reports what they say"
instructions = "You read the files you are asked about and answer in one sentence."
max_depth = 1
"#;

/// The top level delegates to a reader, then to a planner, which delegates to a reader.
const PLAN_AND_READ: &str = r#"
[[turn]]
[[turn.tool_calls]]
name = "task"
arguments = { persona = "reader", prompt = "Say hello.", description = "hello" }

[[turn]]
[[turn.tool_calls]]
name = "task"
arguments = { persona = "planner", prompt = "Plan the change.", description = "plan" }

[[turn]]
text = "Done."

[[agents.reader.turn]]
text = "Hello."

[[agents.planner.turn]]
[[agents.planner.turn.tool_calls]]
name = "task"
arguments = { persona = "reader", prompt = "Say hello.", description = "hello" }

[[agents.planner.turn]]
text = "The reader could not start below me."
"#;

#[test]
fn a_persona_is_refused_by_the_start_check_below_its_own_cap() {
    let scratch = Scratch::new("subagent-start-refused");
    scratch.config(PLANNER_AND_READER);
    let script = scratch.script(PLAN_AND_READ);
    let mut client = AcpClient::start(&scratch, &script, &[]);
    let session = client.open_session(&scratch.ws());
    let (answer, notes) = client.prompt(&session, "Say hello, then plan.");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let log = scratch.log(&session);

    // The control: the reader starts at depth 1 below the top level and answers.
    let hello = result_of(&log, None, "call_1_1");
    assert_eq!(hello["status"], "completed", "{hello}");
    assert_eq!(hello["output"], "Hello.", "{hello}");
    // The planner at depth 1 may start children (its cap is 2) and is offered task; a reader
    // below it would be at depth 2, past the reader's own cap of 1: the start check refuses it.
    let planner = offered(&log, Some("agent-2"));
    assert!(
        !planner.is_empty() && planner.iter().all(|t| t.iter().any(|t| t == "task")),
        "{planner:?}"
    );
    let refused = result_of(&log, Some("agent-2"), "call_planner_1_1");
    assert_eq!(refused["status"], "failed", "{refused}");
    assert_eq!(
        refused["output"],
        "the persona \"reader\" cannot be started here: a child of an agent at depth 1 would be \
         at depth 2, deeper than the cap of 1 (the top level is depth 0 and each child is one \
         deeper than its parent); the cap is agents.reader.max_depth",
        "{refused}"
    );
    assert_eq!(
        refused["facts"],
        json!({"persona": "reader", "started": false}),
        "{refused}"
    );
    // Nothing of the refused reader was created: two starts, two ends, no third agent.
    assert_eq!(
        starts(&log),
        [
            json!(["agent-1", "agent-0", 1, "reader", "call_1_1"]),
            json!(["agent-2", "agent-0", 1, "planner", "call_2_1"]),
        ],
        "{log:#?}"
    );
    assert_eq!(
        ends(&log),
        [
            json!(["agent-1", "completed"]),
            json!(["agent-2", "completed"])
        ],
        "{log:#?}"
    );
    let named: Vec<String> = agents_named(&log).into_iter().collect();
    assert_eq!(named, ["agent-0", "agent-1", "agent-2"], "{log:#?}");
    let planned = result_of(&log, None, "call_2_1");
    assert_eq!(planned["output"], "The reader could not start below me.");
    assert_load_replays(
        client,
        &scratch,
        &script,
        &session,
        &[("Say hello, then plan.", &notes)],
    );
}

const RUNNERS: &str = r#"
[agents.runner]
description = "Runs the command it is given"
instructions = "You run the command you are asked to and report how it went."
"#;

/// The runner's command opens the workspace FIFO `feed` for reading and writing (so it holds it
/// open and never sees an end of file), marks `ready`, waits for one line and saves it.
const RUN_BLOCKED: &str = r#"
[[turn]]
[[turn.tool_calls]]
name = "task"
arguments = { persona = "runner", prompt = "Save the line fed to feed.", description = "save a line" }

[[turn]]
text = "The runner saved the line."

[[agents.runner.turn]]
[[agents.runner.turn.tool_calls]]
name = "bash"
arguments = { command = "exec 3<>feed; : > ready; read -r line <&3; printf '%s\\n' \"$line\" > got.txt" }

[[agents.runner.turn]]
text = "Saved the line in got.txt."
"#;

/// A prompt whose runner child is blocked in its command, reading the workspace FIFO `feed`.
struct Blocked {
    scratch: Scratch,
    client: AcpClient,
    session: String,
    /// The id of the `session/prompt` request, not answered yet.
    prompt: u64,
    /// The processes that hold `feed` open.
    holders: Vec<u32>,
    script: std::path::PathBuf,
}

impl Blocked {
    fn fifo(&self) -> std::path::PathBuf {
        self.scratch.ws().join("feed")
    }
}

/// Starts a prompt whose child runs [`RUN_BLOCKED`]'s command; returns once that command holds
/// the FIFO open (its `ready` mark, then `/proc`).
fn a_child_blocked_on_a_fifo(tag: &str) -> Blocked {
    // Outside the temporary directory, which workspace-write replaces with an empty one.
    let scratch = Scratch::new_in(&scratch_base(), tag);
    scratch.config(RUNNERS);
    let ws = scratch.ws();
    nix::unistd::mkfifo(
        &ws.join("feed"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .expect("mkfifo feed");
    let script = scratch.script(RUN_BLOCKED);
    let mut client = AcpClient::start(&scratch, &script, &[]);
    let session = client.open_session(&ws);
    let prompt = client.send(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "Save the line."}]}),
    );
    assert!(
        support::wait_for_file(&ws, "ready", LIMIT),
        "the child's command did not start within {LIMIT:?}"
    );
    let holders = fifo::holders_of(&ws.join("feed"));
    assert!(!holders.is_empty(), "no process holds feed open");
    Blocked {
        scratch,
        client,
        session,
        prompt,
        holders,
        script,
    }
}

fn reads(fifo: &Path) -> bool {
    fifo::open_for_writing(fifo)
        .expect("open the FIFO for writing")
        .is_some()
}

#[test]
fn a_turn_cancelled_during_a_childs_command_ends_the_child_and_its_process() {
    let mut blocked = a_child_blocked_on_a_fifo("subagent-cancel");
    let fifo = blocked.fifo();
    assert!(reads(&fifo), "the child's command reads feed");
    blocked
        .client
        .notify("session/cancel", json!({"sessionId": blocked.session}));
    let (answer, notes) = blocked.client.until_response(blocked.prompt, CANCEL_LIMIT);
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");

    // The command's processes are gone and nothing reads the FIFO any more: a write could not
    // even be opened (ENXIO), so nothing can reach the command after the cancel.
    for pid in &blocked.holders {
        assert!(
            support::wait_gone(*pid, CANCEL_LIMIT),
            "process {pid}, which held feed, is still alive"
        );
    }
    let left = fifo::holders_of(&fifo);
    assert!(left.is_empty(), "still holding feed: {left:?}");
    assert!(!reads(&fifo), "a process still reads feed");
    assert!(!blocked.scratch.ws().join("got.txt").exists());

    let log = blocked.scratch.log(&blocked.session);
    assert_eq!(
        starts(&log),
        [json!(["agent-1", "agent-0", 1, "runner", "call_1_1"])]
    );
    assert_eq!(ends(&log), [json!(["agent-1", "cancelled"])], "{log:#?}");
    let task = result_of(&log, None, "call_1_1");
    assert_eq!(task["status"], "failed", "{task}");
    assert_eq!(task["output"], "the child agent agent-1 was cancelled");
    let turn_ended = of_type(&log, "turn/ended");
    assert_eq!(turn_ended.len(), 1, "{log:#?}");
    assert_eq!(turn_ended[0]["stop_reason"], "cancelled");
    // The editor saw the task call end failed.
    let last = normalized_updates(&notes)
        .into_iter()
        .rfind(|u| u["toolCallId"] == "call_1_1")
        .expect("updates of the task call");
    assert_eq!(last["status"], "failed", "{last}");
    let Blocked {
        scratch,
        client,
        session,
        script,
        ..
    } = blocked;
    assert_load_replays(
        client,
        &scratch,
        &script,
        &session,
        &[("Save the line.", &notes)],
    );
}

/// The control of the test above: the same child fed a line instead finishes its command,
/// which writes the file, and answers.
#[test]
fn the_same_child_fed_a_line_completes_and_writes_the_file() {
    let mut blocked = a_child_blocked_on_a_fifo("subagent-fed");
    let fifo = blocked.fifo();
    let mut writer = fifo::open_for_writing(&fifo)
        .expect("open feed")
        .expect("the child's command reads feed");
    writer.write_all(b"one\n").expect("feed a line");
    drop(writer);
    let (answer, _) = blocked.client.until_response(blocked.prompt, LIMIT);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let got = std::fs::read_to_string(blocked.scratch.ws().join("got.txt")).expect("got.txt");
    assert_eq!(got, "one\n");
    for pid in &blocked.holders {
        assert!(support::wait_gone(*pid, CANCEL_LIMIT), "process {pid}");
    }
    assert!(!reads(&fifo), "the command ended and reads feed no more");
    let log = blocked.scratch.log(&blocked.session);
    assert_eq!(ends(&log), [json!(["agent-1", "completed"])], "{log:#?}");
    let task = result_of(&log, None, "call_1_1");
    assert_eq!(task["status"], "completed", "{task}");
    assert_eq!(task["output"], "Saved the line in got.txt.");
}

/// The runner starts a background command that holds the FIFO `feed` open, and waits until it
/// runs (it says so through the FIFO `started`) before it answers; then the top level starts
/// one of its own on `feed2` (the control: it outlives the turn).
const RUN_IN_BACKGROUND: &str = r#"
[[turn]]
[[turn.tool_calls]]
name = "task"
arguments = { persona = "runner", prompt = "Start the watcher in the background.", description = "start a watcher" }

[[turn]]
[[turn.tool_calls]]
name = "bash"
arguments = { command = "exec 3<>feed2; : > ready2; read -r line <&3", run_in_background = true }

[[turn]]
text = "Both watchers were started."

[[agents.runner.turn]]
[[agents.runner.turn.tool_calls]]
name = "bash"
arguments = { command = "exec 3<>feed; echo up > started; read -r line <&3", run_in_background = true }

[[agents.runner.turn]]
[[agents.runner.turn.tool_calls]]
name = "bash"
arguments = { command = "cat started" }

[[agents.runner.turn]]
text = "The watcher runs."
"#;

#[test]
fn a_childs_background_task_ends_with_the_child_and_the_top_levels_outlives_the_turn() {
    let scratch = Scratch::new_in(&scratch_base(), "subagent-background");
    scratch.config(RUNNERS);
    let ws = scratch.ws();
    for fifo in ["feed", "feed2", "started"] {
        nix::unistd::mkfifo(
            &ws.join(fifo),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .expect("mkfifo");
    }
    let script = scratch.script(RUN_IN_BACKGROUND);
    let mut client = AcpClient::start(&scratch, &script, &["--sandbox-mode", "workspace-write"]);
    let session = client.open_session(&ws);
    let (answer, _) = client.prompt(&session, "Start the watchers.");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");

    let log = scratch.log(&session);
    let child_start = result_of(&log, Some("agent-1"), "call_runner_1_1");
    assert_eq!(child_start["output"], "started background task task-1");
    // The child answered only once its watcher ran: it said so through `started`.
    let watcher_ran = result_of(&log, Some("agent-1"), "call_runner_2_1");
    assert_eq!(watcher_ran["output"], "up\n[exit code: 0]");
    // The child's answer came with its task stopped, and by then nothing held its FIFO.
    let task = result_of(&log, None, "call_1_1");
    assert_eq!(task["status"], "completed", "{task}");
    assert_eq!(
        task["output"],
        "The watcher runs.\n[the background tasks it started were stopped when it ended: task-1]"
    );
    let left = fifo::holders_of(&ws.join("feed"));
    assert!(
        left.is_empty(),
        "the child's background command outlived the child: {left:?}"
    );
    assert!(!reads(&ws.join("feed")), "a process still reads feed");

    // The control: the top level's own background task still runs after its turn ended.
    assert!(
        support::wait_for_file(&ws, "ready2", LIMIT),
        "the top level's background command did not start"
    );
    assert!(
        !fifo::holders_of(&ws.join("feed2")).is_empty(),
        "the top level's background task ended with the turn"
    );
    assert!(reads(&ws.join("feed2")), "the top level's task reads feed2");
}

const FLAKY_AND_STEADY: &str = r#"
[agents.flaky]
description = "A helper whose model fails"
instructions = "You help."

[agents.steady]
description = "A helper whose model answers"
instructions = "You help."
"#;

/// In one turn the top level delegates to `flaky`, whose model fails at its first request, and
/// then to `steady`, which answers.
const FAIL_THEN_ANSWER: &str = r#"
[[turn]]
[[turn.tool_calls]]
name = "task"
arguments = { persona = "flaky", prompt = "Help.", description = "help" }
[[turn.tool_calls]]
name = "task"
arguments = { persona = "steady", prompt = "Help.", description = "help" }

[[turn]]
text = "One helper failed, the other answered."

[[agents.flaky.turn]]
error = "simulated outage"

[[agents.steady.turn]]
text = "All is well."
"#;

#[test]
fn a_child_whose_model_fails_fails_its_task_call_and_the_turn_goes_on() {
    let scratch = Scratch::new("subagent-model-fails");
    scratch.config(FLAKY_AND_STEADY);
    let script = scratch.script(FAIL_THEN_ANSWER);
    let mut client = AcpClient::start(&scratch, &script, &[]);
    let session = client.open_session(&scratch.ws());
    let (answer, notes) = client.prompt(&session, "Ask both helpers.");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");

    let log = scratch.log(&session);
    let failed = result_of(&log, None, "call_1_1");
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(
        failed["output"],
        "the child agent agent-1 failed: the child's model request failed: scripted model \
         failure (turn 1): simulated outage",
        "{failed}"
    );
    assert_eq!(
        failed["facts"],
        json!({"agent": "agent-1", "persona": "flaky"})
    );
    // The control: the next child of the same turn answers.
    let answered = result_of(&log, None, "call_1_2");
    assert_eq!(answered["status"], "completed", "{answered}");
    assert_eq!(answered["output"], "All is well.");
    assert_eq!(
        ends(&log),
        [
            json!(["agent-1", "failed"]),
            json!(["agent-2", "completed"])
        ],
        "{log:#?}"
    );
    let flaky_end = of_type(&log, "agent/ended")[0];
    assert_eq!(
        flaky_end["reason"],
        "the child's model request failed: scripted model failure (turn 1): simulated outage",
        "{flaky_end}"
    );
    // The turn went on to the model's answer after both results.
    let updates = normalized_updates(&notes);
    let said: Vec<&Value> = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .collect();
    assert_eq!(said.len(), 1, "{updates:#?}");
    assert_eq!(
        said[0]["content"]["text"],
        "One helper failed, the other answered."
    );
    let failed_update = updates
        .iter()
        .rfind(|u| u["toolCallId"] == "call_1_1")
        .expect("updates of the failed call");
    assert_eq!(failed_update["status"], "failed", "{failed_update}");
    assert_load_replays(
        client,
        &scratch,
        &script,
        &session,
        &[("Ask both helpers.", &notes)],
    );
}

/// The reader is asked twice to read `a.txt`: the user rejects the first read, allows the second.
const READ_TWICE: &str = r#"
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
name = "read_file"
arguments = { path = "a.txt" }

[[agents.reader.turn]]
text = "a.txt says hello from the file."
"#;

#[test]
fn an_ask_before_of_a_childs_call_names_the_child_and_its_persona() {
    let scratch = Scratch::new("subagent-ask-before");
    scratch.config(&format!(
        "[approval]\nask_before = [\"read_file\"]\n{PERSONAS}"
    ));
    std::fs::write(scratch.ws().join("a.txt"), "hello from the file\n").expect("a.txt");
    let script = scratch.script(READ_TWICE);
    let mut client = AcpClient::start(&scratch, &script, &[]);
    client
        .answers
        .extend([Permission::Reject, Permission::AllowOnce]);
    client.permission = Permission::Cancel;
    let session = client.open_session(&scratch.ws());
    let (answer, notes) = client.prompt(&session, "Ask the reader what a.txt says.");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");

    // Both of the child's reads asked through session/request_permission, each for its call as
    // the editor was shown it (nested under the task call, announced pending), titled with the
    // persona.
    let asked: Vec<(&Value, &Value)> = client
        .permission_requests
        .iter()
        .map(|r| {
            (
                &r["params"]["toolCall"]["toolCallId"],
                &r["params"]["toolCall"]["title"],
            )
        })
        .collect();
    let title = json!("reader: Read a.txt");
    let (first, second) = (json!("call_1_1/agent-1/1"), json!("call_1_1/agent-1/2"));
    assert_eq!(asked, [(&first, &title), (&second, &title)]);
    assert!(client.answers.is_empty() && client.unoffered.is_empty());
    let updates = normalized_updates(&notes);
    for id in [&first, &second] {
        let announced = updates
            .iter()
            .find(|u| u["sessionUpdate"] == "tool_call" && u["toolCallId"] == *id)
            .unwrap_or_else(|| panic!("{id} was not announced: {updates:#?}"));
        assert_eq!(announced["status"], Value::Null, "pending: {announced}");
        assert_eq!(announced["_meta"]["agentd"]["parentToolCallId"], "call_1_1");
    }

    let log = scratch.log(&session);
    let rejected = result_of(&log, Some("agent-1"), "call_reader_1_1");
    assert_eq!(rejected["status"], "failed", "{rejected}");
    assert_eq!(rejected["output"], "the user rejected tool \"read_file\"");
    assert_eq!(rejected["facts"], json!({"approval": "rejected"}));
    // The control: the read the user allowed ran.
    let allowed = result_of(&log, Some("agent-1"), "call_reader_2_1");
    assert_eq!(allowed["status"], "completed", "{allowed}");
    assert_eq!(allowed["output"], "hello from the file\n");

    // The audit pair of each names the child and its persona.
    let reason = "the child agent agent-1 (reader) calls \"read_file\", which is listed in \
                  approval.ask_before";
    let pairs: Vec<Value> = of_type(&log, "approval/asked")
        .iter()
        .map(|a| {
            let decided: Vec<&Value> = of_type(&log, "approval/decided")
                .into_iter()
                .filter(|d| d["id"] == a["id"])
                .collect();
            assert_eq!(decided.len(), 1, "{log:#?}");
            json!([a["tool"], a["call_id"], a["reason"], decided[0]["outcome"]])
        })
        .collect();
    assert_eq!(
        pairs,
        [
            json!(["read_file", "call_1_1/agent-1/1", reason, "rejected"]),
            json!(["read_file", "call_1_1/agent-1/2", reason, "allowed-once"]),
        ],
        "{log:#?}"
    );
    let task = result_of(&log, None, "call_1_1");
    assert_eq!(task["output"], "a.txt says hello from the file.");
    assert_load_replays(
        client,
        &scratch,
        &script,
        &session,
        &[("Ask the reader what a.txt says.", &notes)],
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

/// The parent delegates to the built-in `general` persona, whose child edits `a.txt`.
const CHILD_EDITS: &str = r#"
[[turn]]
[[turn.tool_calls]]
name = "task"
arguments = { persona = "general", prompt = "Change hello to bye in a.txt.", description = "edit a.txt" }

[[turn]]
text = "Done."

[[agents.general.turn]]
[[agents.general.turn.tool_calls]]
name = "edit_file"
arguments = { path = "a.txt", old_string = "hello", new_string = "bye" }

[[agents.general.turn]]
text = "a.txt says bye now."
"#;

#[test]
fn a_childs_file_edit_is_asked_with_its_diff_and_an_always_for_that_file() {
    let scratch = Scratch::new("subagent-edit-card");
    scratch.config("[approval]\nask_before = [\"edit_file\"]\n");
    std::fs::write(scratch.ws().join("a.txt"), "hello from the file\n").expect("a.txt");
    let script = scratch.script(CHILD_EDITS);
    let mut client = AcpClient::start(&scratch, &script, &["--sandbox-mode", "workspace-write"]);
    client.answers.extend([Permission::AllowOnce]);
    client.permission = Permission::Cancel;
    let session = client.open_session(&scratch.ws());
    let (answer, _) = client.prompt(&session, "Have a.txt say bye.");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");

    assert_eq!(client.permission_requests.len(), 1);
    let request = &client.permission_requests[0]["params"];
    let call = &request["toolCall"];
    assert_eq!(call["toolCallId"], "call_1_1/agent-1/1", "{call}");
    let diff = call["content"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "diff"))
        .unwrap_or_else(|| panic!("no diff in the card: {call}"));
    assert!(
        diff["path"].as_str().is_some_and(|p| p.ends_with("/a.txt")),
        "{diff}"
    );
    assert_eq!(diff["oldText"], "hello from the file\n");
    assert_eq!(diff["newText"], "bye from the file\n");
    let always = request["options"]
        .as_array()
        .and_then(|o| o.iter().find(|o| o["kind"] == "allow_always"))
        .unwrap_or_else(|| panic!("no allow_always: {request}"));
    assert!(
        always["name"].as_str().is_some_and(|n| n.contains("a.txt")),
        "the always covers that one file: {always}"
    );
    // What was shown is what was written.
    assert_eq!(
        std::fs::read_to_string(scratch.ws().join("a.txt")).expect("a.txt"),
        "bye from the file\n"
    );
}
