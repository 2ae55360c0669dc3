//! Named models over the real `agentd acp` wire, with two scripted models (`[model]` and
//! `[models.fast]`, each its own script): the `model` config option advertised only when there
//! is a choice, a switch answered by the other model from the next request on (also in the
//! middle of a turn), the `model/selected` event, the selection kept by `session/load` in a new
//! agentd and dropped when its model is no longer configured, the refusal of an unknown value,
//! and a persona naming a model.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use support::acp::{AcpClient, Permission, Scratch, normalized_updates};

/// The default model: each turn says so. A turn N answers a request whose history holds N - 1
/// answers, whichever model gave them.
const DEFAULT_TURNS: &str = r#"
[[turn]]
text = "The default model answers."

[[turn]]
text = "The default model answers again."

[[turn]]
text = "The default model answers a third time."
"#;

const FAST_TURNS: &str = r#"
[[turn]]
text = "The fast model answers first."

[[turn]]
text = "The fast model answers."

[[turn]]
text = "The fast model answers after the reload."
"#;

/// `[model]` and `[models.fast]`, each a scripted model whose script is in the configuration's
/// directory; `extra` is added to the file.
fn two_models(scratch: &Scratch, extra: &str) {
    scratch.config(&format!(
        "[model]\nprovider = \"scripted\"\nscript = \"default.toml\"\n\n\
         [models.fast]\nprovider = \"scripted\"\nscript = \"fast.toml\"\n{extra}"
    ));
    write_script(scratch, "default.toml", DEFAULT_TURNS);
    write_script(scratch, "fast.toml", FAST_TURNS);
}

fn write_script(scratch: &Scratch, name: &str, text: &str) -> PathBuf {
    let path = scratch.root.join("config").join("agentd").join(name);
    std::fs::write(&path, text).expect("script");
    path
}

fn option<'a>(options: &'a Value, id: &str) -> Option<&'a Value> {
    options.as_array()?.iter().find(|o| o["id"] == id)
}

fn current_model(options: &Value) -> String {
    option(options, "model").expect("the model option")["currentValue"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// `session/set_config_option` of `model`; returns the whole answer.
fn select(client: &mut AcpClient, session: &str, value: &str) -> Value {
    client
        .request(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "model", "value": value}),
        )
        .0
}

/// The agent's text the editor was shown, joined.
fn agent_text(notes: &[Value]) -> String {
    normalized_updates(notes)
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect()
}

fn of_type<'a>(log: &'a [Value], kind: &str) -> Vec<&'a Value> {
    log.iter().filter(|e| e["type"] == kind).collect()
}

/// The `model` of each top-level `model/request`, by turn and step.
fn requested(log: &[Value]) -> Vec<(u64, u64, String)> {
    of_type(log, "model/request")
        .into_iter()
        .filter(|r| r.get("agent_id").is_none())
        .map(|r| {
            (
                r["turn"].as_u64().unwrap_or_default(),
                r["step"].as_u64().unwrap_or_default(),
                r["model"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn kill(client: &mut AcpClient) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(client.child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill -9 agentd");
    let _ = client.child.wait();
}

fn load(client: &mut AcpClient, scratch: &Scratch, session: &str) -> Value {
    client.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    client
        .request(
            "session/load",
            json!({"sessionId": session, "cwd": scratch.ws(), "mcpServers": []}),
        )
        .0
}

#[test]
fn a_switch_is_answered_by_the_other_model_and_kept_by_session_load() {
    let scratch = Scratch::new("models-switch");
    two_models(&scratch, "");
    let mut client = AcpClient::start_configured(&scratch, &[]);
    let (session, new) = client.new_session(&scratch.ws());
    let options = &new["configOptions"];
    assert_eq!(
        option(options, "model"),
        Some(&json!({
            "id": "model",
            "name": "Model",
            "description": "The model that answers this session's next requests.",
            "category": "model",
            "type": "select",
            "currentValue": "default",
            "options": [
                {"value": "default", "name": "default (default.toml)"},
                {"value": "fast", "name": "fast (fast.toml)"},
            ],
        })),
        "{options}"
    );
    assert_eq!(
        options.as_array().map(Vec::len),
        Some(3),
        "after the two knobs"
    );

    let (answer, notes) = client.prompt(&session, "Who answers?");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(agent_text(&notes), "The default model answers.");

    // Idle: held and shown, written at the next prompt.
    let switched = select(&mut client, &session, "fast");
    assert_eq!(current_model(&switched["result"]["configOptions"]), "fast");
    assert!(of_type(&scratch.log(&session), "model/selected").is_empty());
    let (answer, notes) = client.prompt(&session, "And now?");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(agent_text(&notes), "The fast model answers.");

    let log = scratch.log(&session);
    let selected = of_type(&log, "model/selected");
    assert_eq!(selected.len(), 1, "{log:#?}");
    assert_eq!(selected[0]["name"], "fast");
    let at = log
        .iter()
        .position(|e| e["type"] == "model/selected")
        .expect("the selection");
    assert_eq!(log[at - 1]["type"], "prompt/submitted");
    assert_eq!(log[at - 1]["turn"], 2);
    let models = requested(&log);
    assert_eq!(models.len(), 2, "{models:?}");
    assert!(models[0].2.ends_with("default.toml"), "{models:?}");
    assert!(models[1].2.ends_with("fast.toml"), "{models:?}");

    // A new agentd: the loaded session shows and uses the model it selected.
    kill(&mut client);
    let mut second = AcpClient::start_configured(&scratch, &[]);
    let loaded = load(&mut second, &scratch, &session);
    assert_eq!(
        current_model(&loaded["result"]["configOptions"]),
        "fast",
        "{loaded}"
    );
    let (answer, notes) = second.prompt(&session, "Still you?");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(
        agent_text(&notes),
        "The fast model answers after the reload."
    );
    let models = requested(&scratch.log(&session));
    assert!(models[2].2.ends_with("fast.toml"), "{models:?}");
}

/// The control: with one model there is nothing to choose, and no `model` option.
#[test]
fn with_one_model_no_model_option_is_advertised() {
    let scratch = Scratch::new("models-one");
    scratch.config("[model]\nprovider = \"scripted\"\nscript = \"default.toml\"\n");
    write_script(&scratch, "default.toml", DEFAULT_TURNS);
    let mut client = AcpClient::start_configured(&scratch, &[]);
    let (session, new) = client.new_session(&scratch.ws());
    let ids: Vec<&Value> = new["configOptions"]
        .as_array()
        .expect("options")
        .iter()
        .map(|o| &o["id"])
        .collect();
    assert_eq!(ids, [&json!("sandbox-mode"), &json!("approval-policy")]);
    let refused = select(&mut client, &session, "default");
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert_eq!(
        refused["error"]["message"],
        "unknown config option \"model\"; the options are: sandbox-mode, approval-policy"
    );
    let (answer, notes) = client.prompt(&session, "Who answers?");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(agent_text(&notes), "The default model answers.");
    assert!(of_type(&scratch.log(&session), "model/selected").is_empty());
}

#[test]
fn an_unknown_model_is_refused_naming_the_models_and_records_nothing() {
    let scratch = Scratch::new("models-unknown");
    two_models(&scratch, "");
    let mut client = AcpClient::start_configured(&scratch, &[]);
    let session = client.open_session(&scratch.ws());
    let refused = select(&mut client, &session, "slow");
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert_eq!(
        refused["error"]["message"],
        "unknown model value \"slow\"; the models are: default, fast"
    );
    // The control: a configured model is accepted, and the refusal changed nothing.
    let accepted = select(&mut client, &session, "fast");
    assert_eq!(current_model(&accepted["result"]["configOptions"]), "fast");
    client.prompt(&session, "Who answers?");
    let log = scratch.log(&session);
    let names: Vec<&Value> = of_type(&log, "model/selected")
        .iter()
        .map(|e| &e["name"])
        .collect();
    assert_eq!(names, [&json!("fast")], "{log:#?}");
}

/// A switch while the turn waits (here, for a permission answer) is written at once and
/// reaches the turn's next request.
#[test]
fn a_switch_during_a_turn_reaches_its_next_request() {
    let scratch = Scratch::new("models-mid-turn");
    two_models(&scratch, "\n[approval]\nask_before = [\"write_file\"]\n");
    write_script(
        &scratch,
        "default.toml",
        r#"
[[turn]]
[[turn.tool_calls]]
name = "write_file"
arguments = { path = "note.txt", content = "hi\n" }

[[turn]]
text = "The default model goes on."
"#,
    );
    let mut client = AcpClient::start_configured(&scratch, &[]);
    client.permission = Permission::Ignore;
    let session = client.open_session(&scratch.ws());
    let prompt = client.send(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "Write a note."}]}),
    );
    let asked = loop {
        let message = client
            .next(Duration::from_secs(60))
            .expect("the permission request");
        if message["method"] == "session/request_permission" {
            break message["id"].clone();
        }
    };
    let switched = select(&mut client, &session, "fast");
    assert_eq!(current_model(&switched["result"]["configOptions"]), "fast");
    let log = scratch.log(&session);
    assert_eq!(
        of_type(&log, "model/selected").len(),
        1,
        "written at once: {log:#?}"
    );
    client.respond(
        &asked,
        json!({"outcome": {"outcome": "selected", "optionId": "reject-once"}}),
    );
    let (answer, notes) = client.until_response(prompt, Duration::from_secs(60));
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(agent_text(&notes), "The fast model answers.");
    assert!(
        !scratch.ws().join("note.txt").exists(),
        "the write was rejected"
    );
    let models = requested(&scratch.log(&session));
    assert_eq!(models.len(), 2, "{models:?}");
    assert_eq!((models[0].0, models[0].1), (1, 1));
    assert!(models[0].2.ends_with("default.toml"), "{models:?}");
    assert_eq!((models[1].0, models[1].1), (1, 2), "the same turn");
    assert!(models[1].2.ends_with("fast.toml"), "{models:?}");
}

/// A session whose selected model was removed from the configuration uses the default again,
/// says so on stderr, and shows the default.
#[test]
fn a_selected_model_no_longer_configured_falls_back_to_the_default() {
    let scratch = Scratch::new("models-gone");
    two_models(&scratch, "");
    let mut client = AcpClient::start_configured(&scratch, &[]);
    let session = client.open_session(&scratch.ws());
    select(&mut client, &session, "fast");
    let (_, notes) = client.prompt(&session, "Who answers?");
    assert_eq!(agent_text(&notes), "The fast model answers first.");
    kill(&mut client);

    scratch.config(
        "[model]\nprovider = \"scripted\"\nscript = \"default.toml\"\n\n\
         [models.slow]\nprovider = \"scripted\"\nscript = \"fast.toml\"\n",
    );
    let stderr = scratch.root.join("agentd.stderr");
    let mut second = AcpClient::start_configured_logging(&scratch, &[], &stderr);
    let loaded = load(&mut second, &scratch, &session);
    assert_eq!(
        current_model(&loaded["result"]["configOptions"]),
        "default",
        "{loaded}"
    );
    let (_, notes) = second.prompt(&session, "And now?");
    assert_eq!(agent_text(&notes), "The default model answers again.");
    let notes = std::fs::read_to_string(&stderr).expect("stderr");
    let lines: Vec<&str> = notes
        .lines()
        .filter(|l| l.contains("no longer configured"))
        .collect();
    assert_eq!(
        lines,
        [format!(
            "agentd: session {session}: the model \"fast\" it selected is no longer configured; \
             it uses the default model \"default\""
        )],
        "{notes}"
    );
}

/// A persona may name a model: its child runs on that model while the session stays on its
/// own.
#[test]
fn a_persona_naming_a_model_runs_its_child_on_that_model() {
    let scratch = Scratch::new("models-persona");
    two_models(
        &scratch,
        "\n[agents.scribe]\ndescription = \"Answers from the fast model\"\n\
         instructions = \"You answer in one sentence.\"\nmodel = \"fast\"\n",
    );
    write_script(
        &scratch,
        "default.toml",
        r#"
[[turn]]
[[turn.tool_calls]]
name = "task"
arguments = { persona = "scribe", prompt = "Say something.", description = "ask the scribe" }

[[turn]]
text = "Done."

[[agents.scribe.turn]]
text = "The session's model answers for the scribe."
"#,
    );
    write_script(
        &scratch,
        "fast.toml",
        "[[agents.scribe.turn]]\ntext = \"The fast model answers for the scribe.\"\n",
    );
    let mut client = AcpClient::start_configured(&scratch, &[]);
    let session = client.open_session(&scratch.ws());
    let (answer, _) = client.prompt(&session, "Ask the scribe.");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let log = scratch.log(&session);
    let ended = of_type(&log, "agent/ended");
    assert_eq!(ended.len(), 1, "{log:#?}");
    assert_eq!(ended[0]["answer"], "The fast model answers for the scribe.");
    let child: Vec<&str> = of_type(&log, "model/request")
        .iter()
        .filter(|r| r.get("agent_id").is_some())
        .filter_map(|r| r["model"].as_str())
        .collect();
    assert_eq!(child.len(), 1, "{log:#?}");
    assert!(child[0].ends_with("fast.toml"), "{child:?}");
    // The control: the session's own requests went to its default model.
    let top = requested(&log);
    assert!(
        top.iter().all(|(_, _, m)| m.ends_with("default.toml")),
        "{top:?}"
    );
}

/// A model whose provider cannot be built (here its key variable is not set) is listed like
/// any other, and refused with the reason when selected; the control, a model that can be
/// built, is accepted.
#[test]
fn a_model_that_cannot_be_built_is_listed_and_refused_when_selected() {
    let scratch = Scratch::new("models-broken");
    two_models(
        &scratch,
        "\n[models.remote]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"big\"\n\
         api_key_env = \"AGENTD_TEST_UNSET_KEY\"\n",
    );
    let mut client = AcpClient::start_configured(&scratch, &[]);
    let (session, new) = client.new_session(&scratch.ws());
    let listed = &option(&new["configOptions"], "model").expect("offered")["options"];
    assert_eq!(
        listed,
        &json!([
            {"value": "default", "name": "default (default.toml)"},
            {"value": "fast", "name": "fast (fast.toml)"},
            {"value": "remote", "name": "remote (big)"},
        ])
    );
    let refused = select(&mut client, &session, "remote");
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert_eq!(
        refused["error"]["message"],
        "the model \"remote\" cannot be used: the API key variable AGENTD_TEST_UNSET_KEY (named \
         by model.api_key_env) is not set or empty; export it with the key, or drop \
         model.api_key_env if the server needs no key; fix that and start agentd again to \
         select it"
    );
    let accepted = select(&mut client, &session, "fast");
    assert_eq!(current_model(&accepted["result"]["configOptions"]), "fast");
    let (_, notes) = client.prompt(&session, "Who answers?");
    assert_eq!(agent_text(&notes), "The fast model answers first.");
    let log = scratch.log(&session);
    let names: Vec<&Value> = of_type(&log, "model/selected")
        .iter()
        .map(|e| &e["name"])
        .collect();
    assert_eq!(names, [&json!("fast")]);
}
