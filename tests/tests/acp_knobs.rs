//! A session's knobs and permission prompts over the real `agentd acp` wire, with a scripted
//! model and a scripted client: the config options advertised and switched, their validation
//! errors, their survival across kill -9 and `session/load`, session isolation, and every
//! answer to a permission prompt, checked on disk and in the session log.

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::acp::{AcpClient, Permission, Scratch, normalized_updates};

/// One bash write to `out.txt`, then an answer; twice (one per prompt).
const WRITE_TWICE: &str = r#"
[[turn]]
[[turn.tool_calls]]
name = "bash"
arguments = { command = "printf 'hi\\n' > out.txt" }

[[turn]]
text = "First try done."

[[turn]]
[[turn.tool_calls]]
name = "bash"
arguments = { command = "printf 'hi\\n' > out.txt" }

[[turn]]
text = "Second try done."
"#;

fn option<'a>(options: &'a Value, id: &str) -> &'a Value {
    options
        .as_array()
        .and_then(|all| all.iter().find(|o| o["id"] == id))
        .unwrap_or_else(|| panic!("no option {id} in {options}"))
}

fn current(options: &Value, id: &str) -> String {
    option(options, id)["currentValue"]
        .as_str()
        .unwrap_or_else(|| panic!("no currentValue for {id} in {options}"))
        .to_owned()
}

/// `session/set_config_option`; returns the whole answer.
fn set(client: &mut AcpClient, session: &str, id: &str, value: Value) -> Value {
    let mut params = json!({"sessionId": session, "configId": id});
    match value {
        Value::Bool(b) => {
            params["type"] = json!("boolean");
            params["value"] = json!(b);
        }
        other => params["value"] = other,
    }
    client.request("session/set_config_option", params).0
}

/// The events of a log of one type.
fn of_type<'a>(log: &'a [Value], kind: &str) -> Vec<&'a Value> {
    log.iter().filter(|e| e["type"] == kind).collect()
}

fn tool_results(notes: &[Value]) -> Vec<Value> {
    normalized_updates(notes)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update")
        .collect()
}

/// The model's text as the editor shows it: the last content block (a line for a person, or
/// a write's diff, may come first).
fn result_text(update: &Value) -> String {
    update["content"]
        .as_array()
        .and_then(|blocks| blocks.last())
        .map_or(&Value::Null, |block| &block["content"]["text"])
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn session_new_advertises_both_knobs_as_selects() {
    let scratch = Scratch::new("knobs-new");
    let script = scratch.script(WRITE_TWICE);
    let mut client = AcpClient::start(&scratch, &script, &["--sandbox-mode", "read-only"]);
    client.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let (new, _) = client.request(
        "session/new",
        json!({"cwd": scratch.ws(), "mcpServers": []}),
    );
    let options = &new["result"]["configOptions"];
    assert_eq!(
        options,
        &json!([
            {
                "id": "sandbox-mode",
                "name": "Sandbox",
                "description": "The file sandbox mode bash commands in this session run under.",
                "category": "mode",
                "type": "select",
                "currentValue": "read-only",
                "options": [
                    {
                        "value": "read-only",
                        "name": "Read only",
                        "description": "Commands may read files but change nothing.",
                    },
                    {
                        "value": "workspace-write",
                        "name": "Workspace write",
                        "description": "Commands may change files inside the workspace only.",
                    },
                    {
                        "value": "danger-full-access",
                        "name": "Full access (no sandbox)",
                        "description": "Commands run without the file sandbox.",
                    },
                ],
            },
            {
                "id": "approval-policy",
                "name": "Approvals",
                "description": "ask: permission prompts reach you; never: they are rejected automatically.",
                "type": "select",
                "currentValue": "ask",
                "options": [
                    {
                        "value": "ask",
                        "name": "Ask",
                        "description": "Permission prompts reach you.",
                    },
                    {
                        "value": "never",
                        "name": "Never ask",
                        "description": "Nobody is asked: what needs approval is rejected automatically.",
                    },
                ],
            },
        ])
    );
}

#[test]
fn a_switch_to_workspace_write_is_honoured_by_the_next_command() {
    let scratch = Scratch::new("knobs-switch");
    let script = scratch.script(WRITE_TWICE);
    let mut client = AcpClient::start(&scratch, &script, &["--sandbox-mode", "read-only"]);
    let session = client.open_session(&scratch.ws());
    let out = scratch.ws().join("out.txt");

    let (answer, notes) = client.prompt(&session, "write out.txt");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(!out.exists(), "read-only: the write is denied");
    let results = tool_results(&notes);
    assert_eq!(
        results[0]["_meta"]["agentd"]["facts"]["mode"], "read-only",
        "{results:?}"
    );
    assert_eq!(
        results[0]["_meta"]["agentd"]["facts"]["denied"], true,
        "{results:?}"
    );

    // Idle: the switch is held and shown, not yet written.
    let switched = set(
        &mut client,
        &session,
        "sandbox-mode",
        json!("workspace-write"),
    );
    let options = &switched["result"]["configOptions"];
    assert_eq!(current(options, "sandbox-mode"), "workspace-write");
    assert_eq!(current(options, "approval-policy"), "ask");
    assert_eq!(
        options.as_array().map(Vec::len),
        Some(2),
        "the complete list"
    );
    assert!(of_type(&scratch.log(&session), "sandbox/mode").is_empty());

    let (answer, notes) = client.prompt(&session, "try again");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(std::fs::read_to_string(&out).expect("out.txt"), "hi\n");
    let results = tool_results(&notes);
    assert_eq!(
        results[0]["_meta"]["agentd"]["facts"]["mode"],
        "workspace-write"
    );
    assert_eq!(results[0]["_meta"]["agentd"]["facts"]["denied"], false);

    // Written inside the second turn, right after its prompt.
    let log = scratch.log(&session);
    let modes = of_type(&log, "sandbox/mode");
    assert_eq!(modes.len(), 1, "{log:#?}");
    assert_eq!(modes[0]["mode"], "workspace-write");
    let at = log
        .iter()
        .position(|e| e["type"] == "sandbox/mode")
        .expect("the switch");
    assert_eq!(log[at - 1]["type"], "prompt/submitted");
    assert_eq!(log[at - 1]["turn"], 2);
    // The sandbox mode is never stated to the model.
    for request in of_type(&log, "model/request") {
        let told = request["instructions"].as_str().unwrap_or_default();
        assert!(!told.contains("read-only"), "{told}");
        assert!(!told.contains("workspace-write"), "{told}");
    }
}

#[test]
fn invalid_values_and_ids_get_the_specified_errors_and_record_nothing() {
    let scratch = Scratch::new("knobs-invalid");
    let script = scratch.script(WRITE_TWICE);
    let mut client = AcpClient::start(&scratch, &script, &["--sandbox-mode", "read-only"]);
    let session = client.open_session(&scratch.ws());
    let cases = [
        (
            "sandbox-mode",
            json!("yolo"),
            "unknown sandbox-mode value \"yolo\"; the values are: read-only, workspace-write, \
             danger-full-access",
        ),
        (
            "approval-policy",
            json!("on-request"),
            "unknown approval-policy value \"on-request\"; the values are: ask, never",
        ),
        (
            "sandbox-mode",
            json!(true),
            "config option sandbox-mode is a select; boolean values are not accepted: give one \
             of its values",
        ),
        (
            "approval-policy",
            json!(false),
            "config option approval-policy is a select; boolean values are not accepted: give \
             one of its values",
        ),
        (
            "reasoning-effort",
            json!("high"),
            "unknown config option \"reasoning-effort\"; the options are: sandbox-mode, \
             approval-policy",
        ),
    ];
    for (id, value, message) in cases {
        let answer = set(&mut client, &session, id, value);
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
        assert_eq!(answer["error"]["message"], message, "{answer}");
    }
    let unknown = client
        .request(
            "session/set_config_option",
            json!({"sessionId": "0123-abcd", "configId": "sandbox-mode", "value": "read-only"}),
        )
        .0;
    assert_eq!(unknown["error"]["code"], -32002, "{unknown}");

    // A no-op answers the complete list and records nothing, in a turn or not.
    let same = set(&mut client, &session, "sandbox-mode", json!("read-only"));
    assert_eq!(
        current(&same["result"]["configOptions"], "sandbox-mode"),
        "read-only"
    );
    client.prompt(&session, "go");
    let log = scratch.log(&session);
    assert!(of_type(&log, "sandbox/mode").is_empty(), "{log:#?}");
    assert!(of_type(&log, "approval/policy").is_empty(), "{log:#?}");
}

#[test]
fn after_kill_9_and_session_load_the_current_values_are_unchanged() {
    let scratch = Scratch::new("knobs-restart");
    let script = scratch.script(WRITE_TWICE);
    let args = ["--sandbox-mode", "read-only"];
    let mut first = AcpClient::start(&scratch, &script, &args);
    let session = first.open_session(&scratch.ws());
    set(
        &mut first,
        &session,
        "sandbox-mode",
        json!("workspace-write"),
    );
    set(&mut first, &session, "approval-policy", json!("never"));
    let (answer, _) = first.prompt(&session, "anchor the switches");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    // Held, never flushed: a crash forgets it.
    let held = set(
        &mut first,
        &session,
        "sandbox-mode",
        json!("danger-full-access"),
    );
    assert_eq!(
        current(&held["result"]["configOptions"], "sandbox-mode"),
        "danger-full-access"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(first.child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill -9 agentd");
    let _ = first.child.wait();

    let mut second = AcpClient::start(&scratch, &script, &args);
    second.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let (loaded, _) = second.request(
        "session/load",
        json!({"sessionId": session, "cwd": scratch.ws(), "mcpServers": []}),
    );
    let options = &loaded["result"]["configOptions"];
    assert_eq!(
        current(options, "sandbox-mode"),
        "workspace-write",
        "{loaded}"
    );
    assert_eq!(current(options, "approval-policy"), "never", "{loaded}");

    // And the restored mode is the one the next command runs under.
    let (answer, notes) = second.prompt(&session, "write now");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(
        tool_results(&notes)[0]["_meta"]["agentd"]["facts"]["mode"],
        "workspace-write"
    );
}

#[test]
fn one_sessions_switch_does_not_reach_another_session() {
    let scratch = Scratch::new("knobs-isolation");
    let script = scratch.script(WRITE_TWICE);
    let other_ws = scratch.root.join("ws2");
    std::fs::create_dir_all(&other_ws).expect("ws2");
    let other_ws = std::fs::canonicalize(other_ws).expect("ws2");
    let mut client = AcpClient::start(&scratch, &script, &["--sandbox-mode", "read-only"]);
    let a = client.open_session(&scratch.ws());
    let (new_b, _) = client.request("session/new", json!({"cwd": other_ws, "mcpServers": []}));
    let b = new_b["result"]["sessionId"]
        .as_str()
        .expect("session b")
        .to_owned();

    set(&mut client, &a, "sandbox-mode", json!("workspace-write"));
    set(&mut client, &a, "approval-policy", json!("never"));
    client.prompt(&a, "write");
    client.prompt(&b, "write");
    assert!(scratch.ws().join("out.txt").exists(), "a switched");
    assert!(!other_ws.join("out.txt").exists(), "b did not");
    let b_log = scratch.log(&b);
    assert!(of_type(&b_log, "sandbox/mode").is_empty());
    assert!(of_type(&b_log, "approval/policy").is_empty());
    let again = set(&mut client, &b, "sandbox-mode", json!("read-only"));
    let options = &again["result"]["configOptions"];
    assert_eq!(current(options, "sandbox-mode"), "read-only");
    assert_eq!(current(options, "approval-policy"), "ask");
}

/// Four prompts, each a `write_file` of its own file, then an answer.
const FOUR_WRITES: &str = r#"
[[turn]]
[[turn.tool_calls]]
name = "write_file"
arguments = { path = "rejected.txt", content = "no" }

[[turn]]
text = "One."

[[turn]]
[[turn.tool_calls]]
name = "write_file"
arguments = { path = "allowed.txt", content = "yes" }

[[turn]]
text = "Two."

[[turn]]
[[turn.tool_calls]]
name = "write_file"
arguments = { path = "unknown.txt", content = "?" }

[[turn]]
text = "Three."

[[turn]]
[[turn.tool_calls]]
name = "write_file"
arguments = { path = "cancelled.txt", content = "-" }

[[turn]]
text = "Four."
"#;

/// The `(tool, call_id, outcome)` of every audit pair in a log, checking each pair shares its
/// id and `asked` comes first.
fn audit_pairs(log: &[Value]) -> Vec<(String, String, String)> {
    let asked = of_type(log, "approval/asked");
    let decided = of_type(log, "approval/decided");
    assert_eq!(asked.len(), decided.len(), "{log:#?}");
    asked
        .iter()
        .zip(&decided)
        .map(|(a, d)| {
            assert_eq!(a["id"], d["id"], "one id per pair");
            assert!(a["seq"].as_u64() < d["seq"].as_u64());
            (
                a["tool"].as_str().unwrap_or_default().to_owned(),
                a["call_id"].as_str().unwrap_or_default().to_owned(),
                d["outcome"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[test]
fn each_answer_to_a_permission_prompt_has_its_outcome_on_disk_in_the_result_and_in_the_log() {
    let scratch = Scratch::new("knobs-permission");
    scratch.config("[approval]\nask_before = [\"write_file\"]\n");
    let script = scratch.script(FOUR_WRITES);
    let mut client = AcpClient::start(&scratch, &script, &["--sandbox-mode", "workspace-write"]);
    client.answers.extend([
        Permission::Reject,
        Permission::AllowOnce,
        Permission::Option("maybe-later".into()),
        Permission::Cancel,
    ]);
    client.permission = Permission::Ignore;
    let session = client.open_session(&scratch.ws());

    let expected = [
        (
            "rejected.txt",
            false,
            "the user rejected tool \"write_file\"",
        ),
        ("allowed.txt", true, ""),
        (
            "unknown.txt",
            false,
            "the user rejected tool \"write_file\"",
        ),
        (
            "cancelled.txt",
            false,
            "approval for tool \"write_file\" was cancelled",
        ),
    ];
    for (i, (file, lands, text)) in expected.iter().enumerate() {
        let asked_before = client.permission_requests.len();
        let (answer, notes) = client.prompt(&session, &format!("write {file}"));
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
        assert_eq!(client.permission_requests.len(), asked_before + 1);
        assert_eq!(scratch.ws().join(file).exists(), *lands, "{file}");
        let result = &tool_results(&notes)[0];
        if *lands {
            assert_eq!(result["status"], "completed", "{result}");
        } else {
            assert_eq!(result["status"], "failed", "{result}");
            assert_eq!(result_text(result), *text, "{result}");
        }
        // The prompt is attached to the call the editor was already shown (announced
        // `pending`), and says on its own what it asks.
        let updates = normalized_updates(&notes);
        let call = updates
            .iter()
            .find(|u| u["sessionUpdate"] == "tool_call")
            .expect("the tool call was streamed");
        // Pending is ACP's default status, left out on the wire.
        assert_eq!(call.get("status"), None, "{call}");
        let request = &client.permission_requests[i];
        // The change it will write, as an ACP diff of the file it lands on, located there, and
        // an "always" for that one file.
        let content = &call["rawInput"]["content"];
        let target = std::fs::canonicalize(scratch.ws())
            .expect("the workspace")
            .join(file)
            .display()
            .to_string();
        assert_eq!(
            request["params"],
            json!({
                "sessionId": session,
                "toolCall": {
                    "toolCallId": call["toolCallId"],
                    "title": format!("Write {file}"),
                    "kind": "edit",
                    "status": "pending",
                    "rawInput": call["rawInput"],
                    "content": [
                        {"type": "content", "content": {"type": "text",
                            "text": format!("Write {file}: write_file is listed in approval.ask_before")}},
                        {"type": "diff", "path": target, "newText": content},
                    ],
                    "locations": [{"path": target, "line": 1}],
                },
                "options": [
                    {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
                    {"optionId": "allow-always", "kind": "allow_always",
                     "name": format!("Always allow write_file on {target} in this session")},
                    {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"},
                    {"optionId": "reject-always", "kind": "reject_always",
                     "name": format!("Always reject write_file on {target} in this session")},
                ],
            })
        );
    }
    assert_eq!(
        std::fs::read_to_string(scratch.ws().join("allowed.txt")).expect("allowed.txt"),
        "yes"
    );
    let log = scratch.log(&session);
    let pairs = audit_pairs(&log);
    let outcomes: Vec<&str> = pairs.iter().map(|(_, _, o)| o.as_str()).collect();
    assert_eq!(
        outcomes,
        ["rejected", "allowed-once", "rejected", "cancelled"]
    );
    for (tool, call_id, _) in &pairs {
        assert_eq!(tool, "write_file");
        assert!(call_id.starts_with("call_"), "{call_id}");
    }

    // The audit is neither shown on load nor told to the model.
    let mut reloaded = AcpClient::start(&scratch, &script, &["--sandbox-mode", "workspace-write"]);
    reloaded.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let (_, replay) = reloaded.request(
        "session/load",
        json!({"sessionId": session, "cwd": scratch.ws(), "mcpServers": []}),
    );
    let shown = serde_json::to_string(&replay).expect("json");
    assert!(!shown.contains("approval/"), "{shown}");
    assert!(!shown.contains("allowed-once"), "{shown}");
}

#[test]
fn a_session_cancel_while_a_prompt_waits_resolves_it_cancelled_and_a_late_answer_changes_nothing() {
    let scratch = Scratch::new("knobs-cancel");
    scratch.config("[approval]\nask_before = [\"write_file\"]\n");
    let script = scratch.script(FOUR_WRITES);
    let mut client = AcpClient::start(&scratch, &script, &["--sandbox-mode", "workspace-write"]);
    client.permission = Permission::Ignore;
    let session = client.open_session(&scratch.ws());
    let id = client.send(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "write"}]}),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while client.permission_requests.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        let message = client.next(left).expect("a permission request");
        assert_ne!(
            message.get("id"),
            Some(&json!(id)),
            "ended early: {message}"
        );
    }
    let pending = client.permission_requests[0]["id"].clone();

    // Unanswered, the request would wait for ever: the cancel ends the prompt, at all within a
    // liveness bound however loaded the machine.
    client.notify("session/cancel", json!({"sessionId": session}));
    let (answer, notes) = client.until_response(id, Duration::from_secs(30));
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    assert_eq!(
        result_text(&tool_results(&notes)[0]),
        "approval for tool \"write_file\" was cancelled"
    );

    // The client's late "allow" reaches nobody.
    client.respond(
        &pending,
        json!({"outcome": {"outcome": "selected", "optionId": "allow-once"}}),
    );
    let (answer, _) = client.request("session/list", json!({}));
    assert!(answer.get("result").is_some(), "{answer}");
    assert!(!scratch.ws().join("rejected.txt").exists());
    let log = scratch.log(&session);
    let pairs = audit_pairs(&log);
    assert_eq!(pairs.len(), 1, "{log:#?}");
    assert_eq!(pairs[0].2, "cancelled");
}

#[test]
fn under_never_nobody_is_asked_and_the_model_is_told_with_one_notice() {
    let scratch = Scratch::new("knobs-never");
    scratch.config("[approval]\nask_before = [\"write_file\"]\n");
    let script = scratch.script(FOUR_WRITES);
    let mut client = AcpClient::start(&scratch, &script, &["--sandbox-mode", "workspace-write"]);
    client.permission = Permission::AllowOnce;
    let session = client.open_session(&scratch.ws());

    // Turn 1 under ask (allowed), then the user switches to never while idle.
    let (answer, _) = client.prompt(&session, "one");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(
        scratch.ws().join("rejected.txt").exists(),
        "allowed under ask"
    );
    set(&mut client, &session, "approval-policy", json!("never"));
    let (answer, notes) = client.prompt(&session, "two");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(
        client.permission_requests.len(),
        1,
        "never: nobody is asked"
    );
    assert!(!scratch.ws().join("allowed.txt").exists());
    assert_eq!(
        result_text(&tool_results(&notes)[0]),
        "tool \"write_file\" was rejected by the approval policy (never): approval prompts are \
         disabled in this session"
    );

    let log = scratch.log(&session);
    let outcomes: Vec<String> = audit_pairs(&log).into_iter().map(|p| p.2).collect();
    assert_eq!(outcomes, ["allowed-once", "rejected"]);
    let told: Vec<String> = of_type(&log, "model/request")
        .iter()
        .map(|r| r["instructions"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(told.len(), 4, "two steps per prompt");
    let notice = "The approval policy changed from \"ask\" to \"never\" (changed by the user).";
    assert!(
        told[0].ends_with("<!-- agentd-approval-policy:ask -->"),
        "{}",
        told[0]
    );
    assert!(
        !told[1].contains("The approval policy changed"),
        "{}",
        told[1]
    );
    assert!(
        told[2].contains("<!-- agentd-approval-policy:never -->\nApproval prompts are disabled")
    );
    assert!(told[2].ends_with(notice), "{}", told[2]);
    assert!(!told[3].contains(notice), "only once: {}", told[3]);
    assert!(
        told[3].contains("Approval prompts are disabled"),
        "{}",
        told[3]
    );
}

/// The sandbox mode is also offered as ACP session modes: `session/new` lists them with the
/// current one, `session/set_mode` switches the same knob (the next command runs under it, the
/// config option shows it, and the editor is sent a `config_option_update`), a mode switched as
/// a config option is announced as `current_mode_update`, and an unknown mode id gets the
/// config option's error and records nothing.
#[test]
fn session_modes_switch_the_same_sandbox_knob_as_the_config_option() {
    let scratch = Scratch::new("knobs-modes");
    let script = scratch.script(WRITE_TWICE);
    let mut client = AcpClient::start(&scratch, &script, &["--sandbox-mode", "read-only"]);
    let (init, _) = client.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    assert!(init.get("result").is_some(), "{init}");
    let (new, _) = client.request(
        "session/new",
        json!({"cwd": scratch.ws(), "mcpServers": []}),
    );
    let session = new["result"]["sessionId"].as_str().expect("id").to_owned();
    let modes = &new["result"]["modes"];
    assert_eq!(modes["currentModeId"], "read-only", "{new}");
    let ids: Vec<&str> = modes["availableModes"]
        .as_array()
        .expect("availableModes")
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect();
    // The same list as the sandbox-mode select.
    let select: Vec<&str> = option(&new["result"]["configOptions"], "sandbox-mode")["options"]
        .as_array()
        .expect("options")
        .iter()
        .filter_map(|o| o["value"].as_str())
        .collect();
    assert_eq!(ids, select);

    let (refused, _) = client.request(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "yolo"}),
    );
    assert_eq!(
        refused["error"],
        json!({
            "code": -32602,
            "message": "unknown sandbox-mode value \"yolo\"; the values are: read-only, \
                        workspace-write, danger-full-access"
        }),
        "{refused}"
    );

    let (switched, notes) = client.request(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "workspace-write"}),
    );
    assert_eq!(switched["result"], json!({}), "{switched}");
    let updates = normalized_updates(&notes);
    assert_eq!(updates.len(), 1, "{updates:#?}");
    assert_eq!(updates[0]["sessionUpdate"], "config_option_update");
    assert_eq!(
        current(&updates[0]["configOptions"], "sandbox-mode"),
        "workspace-write"
    );

    // The next command runs under the mode switched as a session mode.
    let (answer, _) = client.prompt(&session, "write out.txt");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let out = scratch.ws().join("out.txt");
    assert_eq!(std::fs::read_to_string(&out).expect("out.txt"), "hi\n");
    let log = scratch.log(&session);
    let written: Vec<&Value> = of_type(&log, "sandbox/mode");
    assert_eq!(written.len(), 1, "{log:#?}");
    assert_eq!(written[0]["mode"], "workspace-write");

    // Switched back as a config option: announced as a session mode.
    let params = json!({"sessionId": session, "configId": "sandbox-mode", "value": "read-only"});
    let (back, notes) = client.request("session/set_config_option", params);
    assert_eq!(
        current(&back["result"]["configOptions"], "sandbox-mode"),
        "read-only"
    );
    let updates = normalized_updates(&notes);
    assert_eq!(
        updates,
        [json!({"sessionUpdate": "current_mode_update", "currentModeId": "read-only"})]
    );
    // And session/load shows it both ways.
    drop(client);
    let mut again = AcpClient::start(&scratch, &script, &["--sandbox-mode", "read-only"]);
    again.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let (loaded, _) = again.request(
        "session/load",
        json!({"sessionId": session, "cwd": scratch.ws(), "mcpServers": []}),
    );
    assert_eq!(
        loaded["result"]["modes"]["currentModeId"], "workspace-write",
        "{loaded}"
    );
    assert_eq!(
        current(&loaded["result"]["configOptions"], "sandbox-mode"),
        "workspace-write",
        "the idle switch back was held, and a kill forgets it"
    );
}
