//! "Always" answers over the real wire and the real kernel: an escalation allowed always is not
//! asked again for the same command — also after `session/load` in a new agentd — while a
//! different command is asked; a rule never outlives the helper's ceiling; a reject-always
//! rejects the next call of its tool without asking.

mod support;

use serde_json::{Value, json};
use support::acp::{AcpClient, Permission, Scratch};

const WHY: &str = "the answer has to be saved";

/// An escalating `bash` call of `command` to `mode`, as a script turn.
fn escalating(command: &str, mode: &str) -> String {
    format!(
        "[[turn]]\n[[turn.tool_calls]]\nname = \"bash\"\narguments = {{ command = {command:?}, \
         sandbox_permissions = \"{mode}\", justification = \"{WHY}\" }}\n\n"
    )
}

const DONE: &str = "[[turn]]\ntext = \"Done.\"\n\n";

/// A new agentd on the same state that has loaded `session`.
fn reload(scratch: &Scratch, script: &std::path::Path, extra: &[&str], session: &str) -> AcpClient {
    let mut args = vec!["--sandbox-mode", "read-only"];
    args.extend_from_slice(extra);
    let mut client = AcpClient::start(scratch, script, &args);
    client.load_session(&scratch.ws(), session);
    client
}

/// The log's records of `kind`.
fn of_type(log: &[Value], kind: &str) -> Vec<Value> {
    log.iter().filter(|r| r["type"] == kind).cloned().collect()
}

/// The command each permission request of `client` asked about.
fn asked_commands(client: &AcpClient) -> Vec<String> {
    client
        .permission_requests
        .iter()
        .map(|r| {
            r["params"]["toolCall"]["rawInput"]["command"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

#[test]
fn an_always_allowed_escalation_is_not_asked_again_after_load_and_another_command_is() {
    let scratch = Scratch::new("rules-allow-always");
    let again = "echo again >> out.txt";
    let other = "echo other > other.txt";
    let script = scratch.script(&format!(
        "{}{DONE}{}{}{DONE}",
        escalating(again, "workspace-write"),
        escalating(again, "workspace-write"),
        escalating(other, "workspace-write"),
    ));

    let mut first = AcpClient::start(&scratch, &script, &["--sandbox-mode", "read-only"]);
    first
        .answers
        .push_back(Permission::Kind("allow_always".into()));
    first.permission = Permission::Reject;
    let session = first.open_session(&scratch.ws());
    let (answer, _) = first.prompt(&session, "save it");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(asked_commands(&first), [again]);
    assert!(first.unoffered.is_empty(), "allow_always was offered");
    let offered = &first.permission_requests[0]["params"]["options"];
    assert_eq!(
        offered[1],
        json!({"optionId": "allow-always", "kind": "allow_always",
               "name": "Always allow `echo again >> out.txt` with workspace-write in this session"})
    );
    assert_eq!(
        std::fs::read_to_string(scratch.ws().join("out.txt")).expect("the escalated write"),
        "again\n"
    );
    let log = scratch.log(&session);
    let rules = of_type(&log, "approval/rule");
    assert_eq!(rules.len(), 1, "{rules:?}");
    assert_eq!(rules[0]["command"], again);
    assert_eq!(rules[0]["mode"], "workspace-write");
    assert_eq!(rules[0]["allow"], true);
    drop(first);

    // A new agentd: the rule comes back with the session.
    let mut second = reload(&scratch, &script, &[], &session);
    second.permission = Permission::Reject;
    let (answer, _) = second.prompt(&session, "save it again, and the other");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(
        asked_commands(&second),
        [other],
        "the same command is not asked again; a different one is"
    );
    assert_eq!(
        std::fs::read_to_string(scratch.ws().join("out.txt")).expect("out.txt"),
        "again\nagain\n",
        "the rule let the same command run under workspace-write"
    );
    assert!(
        !scratch.ws().join("other.txt").exists(),
        "the other command was rejected"
    );
    let log = scratch.log(&session);
    let decided = of_type(&log, "approval/decided");
    let by_rule: Vec<&Value> = decided.iter().map(|d| &d["rule"]).collect();
    assert_eq!(
        by_rule,
        [&Value::Null, &rules[0]["id"], &Value::Null],
        "asked, decided by the rule, asked: {decided:?}"
    );
    assert_eq!(decided[1]["outcome"], "allowed-always");
    assert_eq!(decided[2]["outcome"], "rejected");
}

#[test]
fn a_rule_never_widens_past_the_helpers_ceiling() {
    let scratch = Scratch::new("rules-ceiling");
    // Outside the workspace: only danger-full-access may write it.
    let outside = scratch.root.join("outside.txt");
    let command = format!("echo x > {}", outside.display());
    let script = scratch.script(&format!(
        "{}{DONE}{}{DONE}",
        escalating(&command, "danger-full-access"),
        escalating(&command, "danger-full-access"),
    ));
    // The control: without a ceiling, the person's "always" lets it run.
    let mut first = AcpClient::start(&scratch, &script, &["--sandbox-mode", "read-only"]);
    first.permission = Permission::Kind("allow_always".into());
    let session = first.open_session(&scratch.ws());
    first.prompt(&session, "write outside");
    assert_eq!(first.permission_requests.len(), 1);
    assert!(outside.exists(), "allowed always, it ran");
    std::fs::remove_file(&outside).expect("reset");
    drop(first);

    // The same session under a helper that grants at most workspace-write.
    let ceiling = scratch.root.join("ceiling.toml");
    std::fs::write(&ceiling, "max_mode = \"workspace-write\"\n").expect("ceiling");
    let ceiling = ceiling.display().to_string();
    let mut second = reload(&scratch, &script, &["--helper-ceiling", &ceiling], &session);
    second.permission = Permission::AllowOnce;
    let (answer, notes) = second.prompt(&session, "write outside again");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(second.permission_requests.is_empty(), "nobody was asked");
    assert!(!outside.exists(), "the rule did not widen past the ceiling");
    let shown = serde_json::to_string(&notes).expect("json");
    assert!(
        shown.contains("sandbox escalation to \\\"danger-full-access\\\" cannot be granted"),
        "{shown}"
    );
    let log = scratch.log(&session);
    assert_eq!(
        of_type(&log, "approval/decided").len(),
        1,
        "only the first was asked"
    );
}

#[test]
fn reject_always_for_a_file_tool_rejects_its_next_write_of_that_file_and_asks_for_another() {
    let scratch = Scratch::new("rules-reject-always");
    scratch.config("[approval]\nask_before = [\"write_file\"]\n");
    let write = |path: &str| {
        format!(
            "[[turn]]\n[[turn.tool_calls]]\nname = \"write_file\"\narguments = {{ path = \
             \"{path}\", content = \"x\" }}\n\n"
        )
    };
    // The same file by another spelling, then another file.
    let script = scratch.script(&format!(
        "{}{}{}{DONE}",
        write("a.txt"),
        write("./sub/../a.txt"),
        write("b.txt")
    ));
    let mut client = AcpClient::start(&scratch, &script, &["--sandbox-mode", "workspace-write"]);
    client
        .answers
        .push_back(Permission::Kind("reject_always".into()));
    // Were it asked again, it would be allowed: the control that the rule, not the answer,
    // rejects the second call.
    client.permission = Permission::AllowOnce;
    let session = client.open_session(&scratch.ws());
    let (answer, _) = client.prompt(&session, "write them");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(
        client.permission_requests.len(),
        2,
        "a.txt once, then b.txt, which the rule does not cover"
    );
    let always = &client.permission_requests[0]["params"]["options"][3]["name"];
    let real = std::fs::canonicalize(scratch.ws()).expect("ws");
    assert_eq!(
        always,
        &json!(format!(
            "Always reject write_file on {} in this session",
            real.join("a.txt").display()
        ))
    );
    assert!(!scratch.ws().join("a.txt").exists());
    assert!(scratch.ws().join("b.txt").exists());
    let log = scratch.log(&session);
    let outcomes: Vec<Value> = of_type(&log, "approval/decided")
        .iter()
        .map(|d| d["outcome"].clone())
        .collect();
    assert_eq!(
        outcomes,
        [
            json!("rejected-always"),
            json!("rejected-always"),
            json!("allowed-once")
        ]
    );
}
