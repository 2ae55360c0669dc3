//! MCP servers over the real wire and the real kernel: a stdio server given in `session/new`
//! (`tests/external/mcp_server.py`) runs through confine-helper under the session's mode, so
//! in read-only the kernel refuses its write (the file is not on the host, the model reads that
//! the server reported an error) while in workspace-write the same call writes the file; its
//! tools are offered to the model as `mcp__notes__…`; `approval.ask_before` asks before one;
//! a narrowing restarts the server narrower; a server from `[[mcp.servers]]` gets its own
//! variables and one with a secret-looking variable is refused; a server that exits at start
//! and an SSE server leave the session usable, the client told once why. A streamable HTTP
//! server (`tests/external/mcp_http_server.py`, which logs every request it receives) is
//! started and called only as far as the session's network policy reaches its host: with the
//! network allowed, in danger-full-access, under the allow-list for an allowed name — and never
//! reached with the network denied, for a host the allow-list refuses, or after a narrowing
//! that denies it. Without python3 every test says SKIP; so does a backend this machine lacks
//! (judged without the helper).

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::acp::{AcpClient, Permission, Scratch};

/// The test server.
fn server_py() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("external/mcp_server.py")
}

/// Whether python3 runs here (on the PATH agentd's commands get); a SKIP line for the running
/// test when not.
fn python() -> bool {
    let found = Command::new("python3")
        .arg("-c")
        .arg("pass")
        .env("PATH", support::available::COMMAND_PATH)
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        support::skip::skip(
            &support::skip::this_test(),
            support::skip::Need::Python3,
            "python3 is not installed (apt-get install python3)",
        );
    }
    found
}

/// The `mcpServers` entry of a stdio server running the test server with `args`.
fn stdio(name: &str, args: &[&str], env: Value) -> Value {
    let mut argv = vec![server_py().display().to_string()];
    argv.extend(args.iter().map(|a| (*a).to_owned()));
    json!({ "name": name, "command": "python3", "args": argv, "env": env })
}

/// `initialize`, then `session/new` in the workspace with `servers`; returns the session id.
fn open_with(client: &mut AcpClient, scratch: &Scratch, servers: Value) -> String {
    let (init, _) = client.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    let (new, _) = client.request(
        "session/new",
        json!({"cwd": scratch.ws(), "mcpServers": servers}),
    );
    new["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("session/new failed: {new}"))
        .to_owned()
}

/// The first agent message after the answer to `session/new`: what the client is told of the
/// servers that did not start.
fn told(client: &mut AcpClient) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let message = client
            .next(left)
            .expect("the client is told which servers did not start");
        let update = &message["params"]["update"];
        if update["sessionUpdate"] == "agent_message_chunk" {
            return update["content"]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
        }
    }
}

/// A call of `tool` with `arguments` (a TOML inline table), as a script turn.
fn calling(tool: &str, arguments: &str) -> String {
    format!("[[turn]]\n[[turn.tool_calls]]\nname = \"{tool}\"\narguments = {arguments}\n\n")
}

const DONE: &str = "[[turn]]\ntext = \"Done.\"\n\n";

/// A script of `turns` whose model records the tools of every request in `offered.jsonl`.
fn script(scratch: &Scratch, turns: &str) -> (PathBuf, PathBuf) {
    let record = scratch.root.join("offered.jsonl");
    let text = format!("record = \"{}\"\n\n{turns}", record.display());
    (scratch.script(&text), record)
}

/// The `tool/result` records of a session's log.
fn results(scratch: &Scratch, session: &str) -> Vec<Value> {
    scratch
        .log(session)
        .into_iter()
        .filter(|r| r["type"] == "tool/result")
        .collect()
}

fn write_note(path: &str, text: &str) -> String {
    calling(
        "mcp__notes__write_note",
        &format!("{{ path = \"{path}\", text = \"{text}\" }}"),
    )
}

/// The agent messages among some notifications, joined.
fn agent_messages(notes: &[Value]) -> String {
    notes
        .iter()
        .map(|n| &n["params"]["update"])
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect()
}

#[test]
fn the_kernel_refuses_an_mcp_servers_write_in_read_only_and_workspace_write_allows_it() {
    if !python() {
        return;
    }
    for backend in support::backends() {
        denied_then_allowed(backend);
    }
}

/// The test above under `backend`, one that works here.
fn denied_then_allowed(backend: &str) {
    let scratch = Scratch::new(&format!("mcp-modes-{backend}"));
    scratch.config(&format!("[sandbox]\nbackend = \"{backend}\"\n"));
    let (script, record) = script(
        &scratch,
        &format!("{}{DONE}", write_note("note.txt", "hello")),
    );
    let note = scratch.ws().join("note.txt");

    let mut client = AcpClient::start(&scratch, &script, &["--sandbox-mode", "read-only"]);
    let session = open_with(
        &mut client,
        &scratch,
        json!([stdio("notes", &[], json!([]))]),
    );
    let (answer, notes) = client.prompt(&session, "write the note");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let said = agent_messages(&notes);
    assert!(
        !said.contains("cannot confine it on this machine"),
        "{backend} works here, but the server was not confined by it: {said}"
    );
    assert!(!note.exists(), "the kernel refused the server's write");
    let denied = &results(&scratch, &session)[0];
    assert_eq!(denied["status"], "failed", "{denied}");
    let output = denied["output"].as_str().expect("output");
    assert!(output.starts_with("could not write note.txt: "), "{output}");
    assert!(
        output.ends_with("\n[the MCP server notes reported an error]"),
        "{output}"
    );
    assert_eq!(denied["facts"]["mode"], "read-only");
    assert_eq!(denied["facts"]["mcp_server"], "notes");
    assert_eq!(denied["facts"]["is_error"], true);
    // Shown as a call titled by server and tool, of kind `other` (ACP's default, left out on
    // the wire), and recorded like every call.
    let call = notes
        .iter()
        .map(|n| &n["params"]["update"])
        .find(|u| u["sessionUpdate"] == "tool_call")
        .expect("the call was announced");
    assert_eq!(call["title"], "notes: write_note");
    assert_eq!(
        call["rawInput"],
        json!({"path": "note.txt", "text": "hello"})
    );
    let logged = scratch
        .log(&session)
        .into_iter()
        .find(|r| r["type"] == "tool/call")
        .expect("the call is in the log");
    assert_eq!(logged["tool"], "mcp__notes__write_note");
    assert_eq!(logged["kind"], "other");
    // The model was offered the tool with the server's schema, beside agentd's own.
    let offered = std::fs::read_to_string(&record).expect("recorded requests");
    let first: Value =
        serde_json::from_str(offered.lines().next().expect("a request")).expect("json");
    let names: Vec<&str> = first
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"bash"), "{names:?}");
    assert!(names.contains(&"mcp__notes__write_note"), "{names:?}");
    assert!(names.contains(&"mcp__notes__echo"), "{names:?}");
    let tool = first
        .as_array()
        .and_then(|all| all.iter().find(|t| t["name"] == "mcp__notes__write_note"))
        .expect("write_note");
    assert_eq!(tool["parameters"]["required"], json!(["path", "text"]));
    assert_eq!(
        tool["description"],
        "Write a note to a file relative to the server's directory."
    );
    drop(client);

    // The control: the same call in workspace-write writes the note.
    let mut client = AcpClient::start(&scratch, &script, &["--sandbox-mode", "workspace-write"]);
    let session = open_with(
        &mut client,
        &scratch,
        json!([stdio("notes", &[], json!([]))]),
    );
    let (answer, _) = client.prompt(&session, "write the note");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(
        std::fs::read_to_string(&note).expect("the note was written"),
        "hello"
    );
    let written = &results(&scratch, &session)[0];
    assert_eq!(written["status"], "completed", "{written}");
    assert_eq!(written["output"], "wrote 5 characters to note.txt");
    assert_eq!(written["facts"]["mode"], "workspace-write");
}

#[test]
fn ask_before_an_mcp_tool_asks_and_a_rejected_call_does_not_reach_the_server() {
    if !python() {
        return;
    }
    let scratch = Scratch::new("mcp-ask");
    scratch.config(
        "[approval]\nask_before = [\"mcp__notes__write_note\", \"mcp__notes__writenote\"]\n",
    );
    let (script, _) = script(
        &scratch,
        &format!(
            "{}{}{DONE}",
            write_note("rejected.txt", "no"),
            write_note("allowed.txt", "yes")
        ),
    );
    let mut client = AcpClient::start(&scratch, &script, &["--sandbox-mode", "workspace-write"]);
    client.answers.push_back(Permission::Reject);
    client.answers.push_back(Permission::AllowOnce);
    let session = open_with(
        &mut client,
        &scratch,
        json!([stdio("notes", &[], json!([]))]),
    );
    // A misspelt entry would ask before nothing: the client is told.
    assert_eq!(
        told(&mut client),
        "approval.ask_before lists mcp__notes__writenote, which names no tool of this session's \
         MCP servers.\n"
    );
    let (answer, _) = client.prompt(&session, "write both");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(client.permission_requests.len(), 2);
    let asked = &client.permission_requests[0]["params"]["toolCall"];
    assert_eq!(asked["title"], "notes: write_note", "{asked}");
    assert!(
        !scratch.ws().join("rejected.txt").exists(),
        "rejected: never ran"
    );
    // The control: allowed once, the same tool writes.
    assert_eq!(
        std::fs::read_to_string(scratch.ws().join("allowed.txt")).expect("allowed"),
        "yes"
    );
    let results = results(&scratch, &session);
    assert_eq!(results[0]["status"], "failed");
    assert_eq!(results[1]["status"], "completed");
}

#[test]
fn a_narrowing_restarts_the_server_under_the_narrower_mode() {
    if !python() {
        return;
    }
    let scratch = Scratch::new("mcp-narrow");
    let (script, _) = script(
        &scratch,
        &format!(
            "{}{DONE}{}{DONE}",
            write_note("before.txt", "wide"),
            write_note("after.txt", "narrow")
        ),
    );
    let mut client = AcpClient::start(&scratch, &script, &["--sandbox-mode", "workspace-write"]);
    let session = open_with(
        &mut client,
        &scratch,
        json!([stdio("notes", &[], json!([]))]),
    );
    let (answer, _) = client.prompt(&session, "write before");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(scratch.ws().join("before.txt").exists(), "written wide");
    let (switched, _) = client.request(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "sandbox-mode", "value": "read-only"}),
    );
    assert!(switched.get("result").is_some(), "{switched}");
    let (answer, _) = client.prompt(&session, "write after");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(
        !scratch.ws().join("after.txt").exists(),
        "the server no longer runs under workspace-write"
    );
    let after = &results(&scratch, &session)[1];
    assert_eq!(after["facts"]["mode"], "read-only", "{after}");
    assert_eq!(after["facts"]["is_error"], true, "{after}");
}

#[test]
fn a_configured_server_gets_its_variables_and_one_with_a_secret_looking_variable_is_refused() {
    if !python() {
        return;
    }
    let scratch = Scratch::new("mcp-config");
    let server = server_py().display().to_string();
    scratch.config(&format!(
        "[[mcp.servers]]\nname = \"notes\"\ncommand = [\"python3\", {server:?}]\n\
         env = {{ MCP_ECHO_PREFIX = \"notes says: \" }}\n\n\
         [[mcp.servers]]\nname = \"leaky\"\ncommand = [\"python3\", {server:?}]\n\
         env = {{ SERVICE_API_TOKEN = \"t0ken\" }}\n"
    ));
    let (script, record) = script(
        &scratch,
        &format!("{}{DONE}", calling("mcp__notes__echo", "{ text = \"hi\" }")),
    );
    let mut client = AcpClient::start(&scratch, &script, &["--sandbox-mode", "read-only"]);
    let session = open_with(&mut client, &scratch, json!([]));
    let notice = told(&mut client);
    assert!(
        notice
            .starts_with("The MCP server leaky did not start: confine-helper refused to start it"),
        "{notice}"
    );
    assert!(notice.contains("SERVICE_API_TOKEN"), "{notice}");
    assert!(!notice.contains("t0ken"), "never the value: {notice}");
    // The control: the server without one runs, with its own variable.
    let (answer, _) = client.prompt(&session, "echo");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let echoed = &results(&scratch, &session)[0];
    assert_eq!(echoed["status"], "completed", "{echoed}");
    assert_eq!(echoed["output"], "notes says: hi");
    let offered = std::fs::read_to_string(&record).expect("recorded requests");
    assert!(offered.contains("mcp__notes__echo"), "{offered}");
    assert!(!offered.contains("mcp__leaky__"), "{offered}");
}

#[test]
fn a_server_that_exits_at_start_and_an_sse_server_leave_the_session_usable() {
    if !python() {
        return;
    }
    let scratch = Scratch::new("mcp-broken");
    let (script, record) = script(
        &scratch,
        &format!(
            "{}{DONE}",
            calling("mcp__notes__echo", "{ text = \"still here\" }")
        ),
    );
    let mut client = AcpClient::start(&scratch, &script, &["--sandbox-mode", "read-only"]);
    let servers = json!([
        stdio("broken", &["--exit-at-start"], json!([])),
        {"type": "sse", "name": "web", "url": "http://127.0.0.1:9/sse", "headers": []},
        stdio("notes", &[], json!([])),
    ]);
    let session = open_with(&mut client, &scratch, servers);
    let notice = told(&mut client);
    let lines: Vec<&str> = notice.lines().collect();
    assert_eq!(lines.len(), 2, "{notice}");
    assert_eq!(
        lines[0],
        "The MCP server web is not started: its transport, HTTP with SSE (MCP 2024-11-05), is \
         not supported; give the server's streamable HTTP endpoint as an \"http\" server instead.",
        "{notice}"
    );
    assert_eq!(
        lines[1],
        "The MCP server broken did not start: it exited with code 3; its stderr ends with: \
         mcp_server.py: told to exit at start."
    );
    let (answer, _) = client.prompt(&session, "echo");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let echoed = &results(&scratch, &session)[0];
    assert_eq!(echoed["output"], "still here", "{echoed}");
    let offered = std::fs::read_to_string(&record).expect("recorded requests");
    assert!(!offered.contains("mcp__broken__"), "{offered}");
    assert!(!offered.contains("mcp__web__"), "{offered}");
}

/// The python processes whose arguments hold `tag`: the test servers started with it.
fn servers_tagged(tag: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            let program = Path::new(std::ffi::OsStr::new(std::str::from_utf8(args[0]).ok()?));
            let python = program
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("python"));
            (python && args.contains(&tag.as_bytes())).then_some(pid)
        })
        .collect()
}

/// A session whose `notes` server was started with `tag` and has answered one call; returns
/// the session and the server's pid.
fn running_server(client: &mut AcpClient, scratch: &Scratch, tag: &str) -> (String, u32) {
    let session = open_with(client, scratch, json!([stdio("notes", &[tag], json!([]))]));
    let (answer, _) = client.prompt(&session, "echo");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let pids = servers_tagged(tag);
    assert_eq!(pids.len(), 1, "one server runs for the session: {pids:?}");
    (session, pids[0])
}

#[test]
fn closing_the_session_or_the_connection_stops_its_server() {
    if !python() {
        return;
    }
    let scratch = Scratch::new("mcp-stop");
    let (script, _) = script(
        &scratch,
        &format!("{}{DONE}", calling("mcp__notes__echo", "{ text = \"up\" }")),
    );
    let tag = format!("--tag=closed-{}", std::process::id());
    let mut client = AcpClient::start(&scratch, &script, &["--sandbox-mode", "read-only"]);
    let (session, pid) = running_server(&mut client, &scratch, &tag);
    assert!(
        support::alive(pid),
        "the server runs while the session is open"
    );
    let (closed, _) = client.request("session/close", json!({ "sessionId": session }));
    assert!(closed.get("result").is_some(), "{closed}");
    assert!(
        support::wait_gone(pid, Duration::from_secs(10)),
        "session/close stopped the server"
    );

    let tag = format!("--tag=hung-up-{}", std::process::id());
    let mut client = AcpClient::start(&scratch, &script, &["--sandbox-mode", "read-only"]);
    let (_, pid) = running_server(&mut client, &scratch, &tag);
    assert!(
        support::alive(pid),
        "the server runs while the client is connected"
    );
    client.hang_up();
    assert!(
        support::wait_gone(pid, Duration::from_secs(10)),
        "the connection's end stopped the server"
    );
}

#[test]
fn a_loaded_session_starts_the_servers_its_client_gives_again() {
    if !python() {
        return;
    }
    let scratch = Scratch::new("mcp-load");
    let echo = calling("mcp__notes__echo", "{ text = \"again\" }");
    let (script, _) = script(&scratch, &format!("{echo}{DONE}{echo}{DONE}"));
    let mut first = AcpClient::start(&scratch, &script, &["--sandbox-mode", "read-only"]);
    let session = open_with(
        &mut first,
        &scratch,
        json!([stdio("notes", &[], json!([]))]),
    );
    let (answer, _) = first.prompt(&session, "echo");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    drop(first);

    // A new agentd: the session's log comes back, and its servers start again. Two servers of
    // one name would name the same tools: the second is not started, and the client is told.
    let mut second = AcpClient::start(&scratch, &script, &["--sandbox-mode", "read-only"]);
    let (init, _) = second.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    let servers = json!([
        stdio("notes", &[], json!([])),
        stdio("notes", &[], json!([]))
    ]);
    let (loaded, _) = second.request(
        "session/load",
        json!({"sessionId": session, "cwd": scratch.ws(), "mcpServers": servers}),
    );
    assert!(loaded.get("result").is_some(), "{loaded}");
    assert_eq!(
        told(&mut second),
        "The MCP server notes is not started: another server of this session already names its \
         tools mcp__notes__…; give each server its own name.\n"
    );
    let (answer, _) = second.prompt(&session, "echo again");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let results = results(&scratch, &session);
    assert_eq!(results.len(), 2);
    assert_eq!(results[1]["output"], "again", "{}", results[1]);
}

#[test]
fn an_mcp_image_reaches_the_editor_as_an_image_and_the_model_reads_it_named() {
    if !python() {
        return;
    }
    let scratch = Scratch::new("mcp-image");
    let image = calling("mcp__notes__tiny_image", "{}");
    let (script, _) = script(&scratch, &format!("{image}{DONE}"));
    let mut client = AcpClient::start(&scratch, &script, &["--sandbox-mode", "read-only"]);
    let session = open_with(
        &mut client,
        &scratch,
        json!([stdio("notes", &[], json!([]))]),
    );
    let (answer, notes) = client.prompt(&session, "show the image");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let shown = |notes: &[Value]| -> Vec<Value> {
        notes
            .iter()
            .map(|n| &n["params"]["update"])
            .filter(|u| u["sessionUpdate"] == "tool_call_update")
            .filter_map(|u| u["content"].as_array())
            .flatten()
            .map(|c| c["content"].clone())
            .collect()
    };
    let live = shown(&notes);
    let png = live
        .iter()
        .find(|c| c["type"] == "image")
        .unwrap_or_else(|| panic!("no image among {live:?}"));
    assert_eq!(png["mimeType"], "image/png");
    assert!(
        png["data"].as_str().is_some_and(|d| d.starts_with("iVBOR")),
        "{png}"
    );
    assert!(
        live.iter()
            .any(|c| c["type"] == "resource_link" && c["uri"] == "file:///srv/tiny.png"),
        "{live:?}"
    );
    // The model reads the parts named, never their bytes.
    let result = &results(&scratch, &session)[0];
    assert_eq!(
        result["output"],
        "a tiny image:\n[image: image/png]\n[resource link: file:///srv/tiny.png]"
    );
    // A replay shows the same.
    drop(client);
    let mut again = AcpClient::start(&scratch, &script, &["--sandbox-mode", "read-only"]);
    let (_, replay) = again.load_session(&scratch.ws(), &session);
    assert_eq!(shown(&replay), live);
}

/// A host HTTP server on 127.0.0.1 answering `body`; counts the requests it answered.
fn host_server(body: &'static str) -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let port = listener.local_addr().expect("address").port();
    let served = std::sync::Arc::new(AtomicUsize::new(0));
    let count = served.clone();
    // The thread ends with the test's process.
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut head = [0u8; 4096];
            let _ = stream.read(&mut head);
            let reply = format!(
                "HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(reply.as_bytes());
            count.fetch_add(1, Ordering::SeqCst);
        }
    });
    (port, served)
}

#[test]
fn under_the_allow_list_a_server_reaches_the_allowed_host_through_the_proxy_only() {
    if !python() {
        return;
    }
    if let Err((need, why)) = support::backend_works("namespaces") {
        support::skip::skip(&support::skip::this_test(), need, why);
        return;
    }
    let scratch = Scratch::new("mcp-allow-list");
    scratch.config(
        "[sandbox]\nbackend = \"namespaces\"\nnetwork = \"allow-list\"\n\
         allowed_domains = [\"localhost\"]\nallow_local_addresses = true\n",
    );
    let (port, served) = host_server("hello from the host");
    let fetch = |host: &str| {
        calling(
            "mcp__notes__fetch",
            &format!("{{ url = \"http://{host}:{port}/\" }}"),
        )
    };
    let (script, _) = script(
        &scratch,
        &format!("{}{}{DONE}", fetch("localhost"), fetch("refused.invalid")),
    );
    let mut client = AcpClient::start(&scratch, &script, &["--sandbox-mode", "read-only"]);
    let session = open_with(
        &mut client,
        &scratch,
        json!([stdio("notes", &[], json!([]))]),
    );
    let (answer, notes) = client.prompt(&session, "fetch both");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let said = agent_messages(&notes);
    assert!(
        !said.contains("cannot confine it on this machine") && !said.contains("did not start"),
        "the helper's own namespaces work here, but the server was not confined by them: {said}"
    );
    let results = results(&scratch, &session);
    assert_eq!(results.len(), 2, "{results:#?}");
    assert_eq!(results[0]["status"], "completed", "{}", results[0]);
    assert_eq!(results[0]["output"], "hello from the host");
    assert_eq!(
        results[0]["facts"]["proxy"]["decisions"][0]["host"], "localhost",
        "{}",
        results[0]
    );
    assert_eq!(
        results[0]["facts"]["proxy"]["decisions"][0]["allowed"],
        true
    );
    assert_eq!(results[1]["status"], "failed", "{}", results[1]);
    let refused = results[1]["output"].as_str().unwrap_or_default();
    assert!(refused.contains("403"), "{refused}");
    assert_eq!(
        results[1]["facts"]["proxy"]["decisions"][0]["allowed"],
        false
    );
    // Only the allowed request reached the host.
    assert_eq!(served.load(std::sync::atomic::Ordering::SeqCst), 1);
}

/// The streamable HTTP test server, running on the host until dropped; every request it
/// received is a line of its log.
struct WebServer {
    child: std::process::Child,
    port: u16,
    log: PathBuf,
}

impl WebServer {
    /// Starts it, answering as an event stream when `sse`; `tag` names its log.
    fn start(scratch: &Scratch, tag: &str, sse: bool) -> WebServer {
        use std::io::BufRead;
        let log = scratch.root.join(format!("{tag}.jsonl"));
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("external/mcp_http_server.py");
        let mut command = Command::new("python3");
        command.arg(script).arg("--log").arg(&log);
        if sse {
            command.arg("--sse");
        }
        let mut child = command
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start the HTTP test server");
        let stdout = child.stdout.take().expect("its stdout");
        let mut line = String::new();
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read its port");
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("a port: {line:?}"));
        WebServer { child, port, log }
    }

    fn url(&self, host: &str) -> String {
        format!("http://{host}:{}/mcp", self.port)
    }

    /// The `mcpServers` entry of this server named `name`, at `host`, with an `X-Test` header.
    fn entry(&self, name: &str, host: &str) -> Value {
        json!({"type": "http", "name": name, "url": self.url(host),
               "headers": [{"name": "X-Test", "value": name}]})
    }

    /// Every request it received, in order.
    fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).expect("a log line is JSON"))
            .collect()
    }

    /// The JSON-RPC methods of the requests it received.
    fn methods(&self) -> Vec<String> {
        self.requests()
            .iter()
            .map(|r| r["body"]["method"].as_str().unwrap_or("?").to_owned())
            .collect()
    }
}

impl Drop for WebServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a server is asked when a session starts it and then calls its tool once.
const STARTED_AND_CALLED: [&str; 4] = [
    "initialize",
    "notifications/initialized",
    "tools/list",
    "tools/call",
];

#[test]
fn with_the_network_allowed_an_http_servers_tool_is_called_and_answers_as_json_or_a_stream() {
    if !python() {
        return;
    }
    let scratch = Scratch::new("mcp-http-allowed");
    scratch.config("[sandbox]\nnetwork = \"allow\"\n");
    let json_server = WebServer::start(&scratch, "json", false);
    let stream_server = WebServer::start(&scratch, "stream", true);
    let (script, record) = script(
        &scratch,
        &format!(
            "{}{}{DONE}",
            calling("mcp__web__write_note", "{ text = \"hello\" }"),
            calling("mcp__stream__write_note", "{ text = \"streamed\" }"),
        ),
    );
    let mut client = AcpClient::start(&scratch, &script, &["--sandbox-mode", "read-only"]);
    let servers = json!([
        json_server.entry("web", "127.0.0.1"),
        stream_server.entry("stream", "127.0.0.1")
    ]);
    let session = open_with(&mut client, &scratch, servers);
    let (answer, notes) = client.prompt(&session, "note it");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let results = results(&scratch, &session);
    assert_eq!(results.len(), 2, "{results:#?}");
    assert_eq!(results[0]["status"], "completed", "{}", results[0]);
    assert_eq!(results[0]["output"], "noted: hello (note 1)");
    assert_eq!(results[0]["facts"]["mcp_server"], "web");
    assert_eq!(results[0]["facts"]["mode"], "read-only");
    assert!(
        results[0]["facts"].get("proxy").is_none(),
        "no allow-list here"
    );
    assert_eq!(results[1]["status"], "completed", "{}", results[1]);
    assert_eq!(results[1]["output"], "noted: streamed (note 1)");
    // Announced, titled and offered like a stdio server's tool.
    let titles: Vec<&Value> = notes
        .iter()
        .map(|n| &n["params"]["update"])
        .filter(|u| u["sessionUpdate"] == "tool_call")
        .map(|u| &u["title"])
        .collect();
    assert_eq!(
        titles,
        [&json!("web: write_note"), &json!("stream: write_note")]
    );
    let offered = std::fs::read_to_string(&record).expect("recorded requests");
    assert!(offered.contains("mcp__web__write_note"), "{offered}");
    // What reached each server: the start and one call, the session's id and its own header
    // with every request after `initialize`.
    for (server, name) in [(&json_server, "web"), (&stream_server, "stream")] {
        assert_eq!(server.methods(), STARTED_AND_CALLED, "{name}");
        let requests = server.requests();
        assert!(requests[0]["session"].is_null(), "{}", requests[0]);
        for request in &requests {
            assert_eq!(request["x_test"], name, "{request}");
        }
        for request in &requests[1..] {
            assert_eq!(request["session"], "sess-1", "{request}");
            assert_eq!(request["protocol_version"], "2025-06-18", "{request}");
        }
    }
}

#[test]
fn with_the_network_denied_an_http_server_is_not_started_and_never_reached() {
    if !python() {
        return;
    }
    let scratch = Scratch::new("mcp-http-denied");
    let server = WebServer::start(&scratch, "web", false);
    let (script, record) = script(
        &scratch,
        &format!(
            "{}{DONE}",
            calling("mcp__web__write_note", "{ text = \"hello\" }")
        ),
    );
    let mut client = AcpClient::start(&scratch, &script, &["--sandbox-mode", "workspace-write"]);
    let session = open_with(
        &mut client,
        &scratch,
        json!([server.entry("web", "127.0.0.1")]),
    );
    assert_eq!(
        told(&mut client),
        "The MCP server web did not start: the session's network is denied, so agentd does not \
         connect to 127.0.0.1; set sandbox.network = \"allow\", or \"allow-list\" with 127.0.0.1 \
         in sandbox.allowed_domains, or switch the session to danger-full-access.\n"
    );
    let (answer, _) = client.prompt(&session, "note it");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let offered = std::fs::read_to_string(&record).expect("recorded requests");
    assert!(!offered.contains("mcp__web__"), "{offered}");
    assert_eq!(results(&scratch, &session)[0]["status"], "failed");
    drop(client);
    assert_eq!(
        server.requests(),
        Vec::<Value>::new(),
        "nothing reached the server"
    );

    // The control: the same server in danger-full-access, which has the network, is reached.
    let mut client = AcpClient::start(&scratch, &script, &["--sandbox-mode", "danger-full-access"]);
    let session = open_with(
        &mut client,
        &scratch,
        json!([server.entry("web", "127.0.0.1")]),
    );
    let (answer, _) = client.prompt(&session, "note it");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let called = &results(&scratch, &session)[0];
    assert_eq!(called["status"], "completed", "{called}");
    assert_eq!(called["output"], "noted: hello (note 1)");
    assert_eq!(server.methods(), STARTED_AND_CALLED);
}

#[test]
fn under_the_allow_list_an_http_server_at_an_allowed_name_is_called_and_one_elsewhere_is_not() {
    if !python() {
        return;
    }
    let scratch = Scratch::new("mcp-http-allow-list");
    let allowed = WebServer::start(&scratch, "allowed", false);
    let refused = WebServer::start(&scratch, "refused", false);
    scratch.config(&format!(
        "[sandbox]\nnetwork = \"allow-list\"\nallowed_domains = [\"localhost\"]\n\
         allow_local_addresses = true\n\n\
         [[mcp.servers]]\nname = \"web\"\nurl = \"{}\"\nheaders = {{ X-Test = \"configured\" }}\n",
        allowed.url("localhost")
    ));
    let (script, record) = script(
        &scratch,
        &format!(
            "{}{DONE}",
            calling("mcp__web__write_note", "{ text = \"hello\" }")
        ),
    );
    let mut client = AcpClient::start(&scratch, &script, &["--sandbox-mode", "read-only"]);
    let session = open_with(
        &mut client,
        &scratch,
        json!([refused.entry("elsewhere", "127.0.0.1")]),
    );
    assert_eq!(
        told(&mut client),
        "The MCP server elsewhere did not start: the network allow-list refuses \"127.0.0.1\": \
         an IP address not in allowed_domains; ask for the host by name; add it to \
         sandbox.allowed_domains to let the session reach it.\n"
    );
    let (answer, _) = client.prompt(&session, "note it");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let called = &results(&scratch, &session)[0];
    assert_eq!(called["status"], "completed", "{called}");
    assert_eq!(called["output"], "noted: hello (note 1)");
    // Every connection of the start and the call went through the allow-list, and each
    // decision is recorded with the call.
    let decisions = &called["facts"]["proxy"];
    assert_eq!(decisions["total"], 4, "{decisions}");
    assert_eq!(decisions["decisions"][0]["host"], "localhost");
    assert_eq!(decisions["decisions"][0]["allowed"], true);
    let offered = std::fs::read_to_string(&record).expect("recorded requests");
    assert!(!offered.contains("mcp__elsewhere__"), "{offered}");
    assert_eq!(allowed.methods(), STARTED_AND_CALLED);
    assert_eq!(allowed.requests()[3]["x_test"], "configured");
    assert_eq!(
        refused.requests(),
        Vec::<Value>::new(),
        "nothing reached it"
    );
}

#[test]
fn a_narrowing_that_denies_the_network_stops_an_http_server_and_its_next_call_is_refused() {
    if !python() {
        return;
    }
    let scratch = Scratch::new("mcp-http-narrow");
    let server = WebServer::start(&scratch, "web", false);
    let (script, _) = script(
        &scratch,
        &format!(
            "{}{DONE}{}{DONE}",
            calling("mcp__web__write_note", "{ text = \"before\" }"),
            calling("mcp__web__write_note", "{ text = \"after\" }")
        ),
    );
    let mut client = AcpClient::start(&scratch, &script, &["--sandbox-mode", "danger-full-access"]);
    let session = open_with(
        &mut client,
        &scratch,
        json!([server.entry("web", "127.0.0.1")]),
    );
    let (answer, _) = client.prompt(&session, "note before");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let (switched, _) = client.request(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "sandbox-mode", "value": "workspace-write"}),
    );
    assert!(switched.get("result").is_some(), "{switched}");
    let (answer, _) = client.prompt(&session, "note after");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let results = results(&scratch, &session);
    assert_eq!(results[0]["status"], "completed", "{}", results[0]);
    assert_eq!(results[1]["status"], "failed", "{}", results[1]);
    assert_eq!(
        results[1]["output"],
        "the MCP server web could not be started for this call: the session's network is \
         denied, so agentd does not connect to 127.0.0.1; set sandbox.network = \"allow\", or \
         \"allow-list\" with 127.0.0.1 in sandbox.allowed_domains, or switch the session to \
         danger-full-access"
    );
    assert_eq!(results[1]["facts"]["mode"], "workspace-write");
    // The first call reached it; nothing after the narrowing did.
    assert_eq!(server.methods(), STARTED_AND_CALLED);
}

#[test]
fn a_server_whose_script_lies_under_tmp_outside_the_workspace_starts_in_workspace_write() {
    if !python() {
        return;
    }
    // The script where someone trying things keeps a checkout: under /tmp, which a
    // workspace-write command's own /tmp hides where the backend mounts one (the helper's own
    // namespaces, bwrap), away from the workspace.
    let checkout = Scratch::new_in(Path::new("/tmp"), "mcp-script-under-tmp");
    let script_copy = checkout.ws().join("mcp_server.py");
    std::fs::copy(server_py(), &script_copy).expect("copy the server");
    for backend in support::backends() {
        let scratch = Scratch::new_in(
            &support::acp::scratch_base(),
            &format!("mcp-under-tmp-{backend}"),
        );
        scratch.config(&format!("[sandbox]\nbackend = \"{backend}\"\n"));
        let (script, _) = script(
            &scratch,
            &format!("{}{DONE}", write_note("note.txt", "hello")),
        );
        let mut client =
            AcpClient::start(&scratch, &script, &["--sandbox-mode", "workspace-write"]);
        let server = json!({
            "name": "notes",
            "command": "python3",
            "args": [script_copy.display().to_string()],
            "env": [],
        });
        let session = open_with(&mut client, &scratch, json!([server]));
        let (answer, notes) = client.prompt(&session, "write the note");
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
        let said = agent_messages(&notes);
        assert!(
            !said.contains("cannot confine it on this machine"),
            "{backend} works here, but the server was not confined by it: {said}"
        );
        assert!(
            !said.contains("did not start"),
            "{backend}: the server under /tmp did not start: {said}"
        );
        assert_eq!(
            std::fs::read_to_string(scratch.ws().join("note.txt"))
                .ok()
                .as_deref(),
            Some("hello"),
            "{backend}: the server wrote its note: {said}"
        );
    }
}
