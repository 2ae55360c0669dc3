//! The sandbox profile over the real `agentd acp` wire and the real kernel, with a scripted
//! model: `[sandbox] cache` and `writable_roots` make directories outside the workspace
//! writable in workspace-write (the facts name them), `protected` keeps a path inside the
//! workspace read-only, a project's `.agentd/config.toml` adds protected paths and cannot itself
//! be written by a command. Each denial is paired with a control that lands, and each test runs
//! on the scenarios' Linux backends (`support::BACKENDS`) where this machine has them (judged
//! without the helper; SKIP where it has not). HOME is the scratch area's, so every preset
//! resolves inside it.
//!
//! Under Landlock a protected path inside a writable root cannot be kept read-only (RFC 0002's
//! parity table): there the facts must say so, naming it, and the file tools' fence still
//! refuses the write.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{Value, json};
use support::acp::{AcpClient, Scratch, normalized_updates, scratch_base};

/// One tool call of the script: the tool and its arguments as `(name, value)` pairs.
type Call<'a> = (&'a str, &'a [(&'a str, &'a str)]);

/// A script with one turn per call, then a closing text.
fn script(calls: &[Call<'_>]) -> String {
    let mut text = String::new();
    for (tool, args) in calls {
        // A JSON string is a valid TOML basic string.
        let args: Vec<String> = args
            .iter()
            .map(|(k, v)| format!("{k} = {}", serde_json::to_string(v).expect("json")))
            .collect();
        text.push_str(&format!(
            "[[turn]]\n[[turn.tool_calls]]\nname = \"{tool}\"\narguments = {{ {} }}\n\n",
            args.join(", ")
        ));
    }
    text.push_str("[[turn]]\ntext = \"Done.\"\n");
    text
}

/// Runs `calls` in one workspace-write session with `config` (and the backend) as agentd.toml;
/// returns their `tool_call_update`s in order, each with what the model read of it as
/// `modelText`. `backend` is one that works here ([`support::backends`]).
fn run_on(backend: &str, scratch: &Scratch, config: &str, calls: &[Call<'_>]) -> Vec<Value> {
    scratch.config(&format!("[sandbox]\nbackend = \"{backend}\"\n{config}"));
    let script = scratch.script(&script(calls));
    let mut client = AcpClient::start(scratch, &script, &["--sandbox-mode", "workspace-write"]);
    let session = client.open_session(&scratch.ws());
    let (answer, notes) = client.prompt(&session, "go");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let log = scratch.log(&session);
    let results: Vec<Value> = normalized_updates(&notes)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update")
        .map(|mut update| {
            let logged = log
                .iter()
                .find(|r| r["type"] == "tool/result" && r["call_id"] == update["toolCallId"]);
            update["modelText"] = logged.map_or(Value::Null, |r| r["output"].clone());
            update
        })
        .collect();
    assert_eq!(results.len(), calls.len(), "{results:#?}");
    assert_eq!(
        results[0]["_meta"]["agentd"]["facts"]["backend"], backend,
        "{backend} works here, but the call did not run under it: {}",
        results[0]
    );
    results
}

/// The same, for `bash` commands only.
fn commands_on(backend: &str, scratch: &Scratch, config: &str, commands: &[&str]) -> Vec<Value> {
    let args: Vec<[(&str, &str); 1]> = commands.iter().map(|c| [("command", *c)]).collect();
    let calls: Vec<Call<'_>> = args.iter().map(|a| ("bash", a.as_slice())).collect();
    run_on(backend, scratch, config, &calls)
}

/// What the model read of a result.
fn text(result: &Value) -> String {
    result["modelText"].as_str().unwrap_or_default().to_owned()
}

fn missing(result: &Value) -> Vec<String> {
    result["_meta"]["agentd"]["facts"]["enforcement"]["missing"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m.as_str().map(str::to_owned))
        .collect()
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

#[test]
fn a_cache_preset_makes_its_directory_writable_and_without_it_the_write_is_denied_by_path() {
    for backend in support::backends() {
        let command = "printf x > \"$HOME/.cache/pip/probe\"";
        // With the preset: agentd creates the directory (it does not exist yet), the write
        // lands, and the facts name the root.
        let with = Scratch::new_in(&scratch_base(), &format!("profile-pip-{backend}"));
        let pip = with.root.join("home/.cache/pip");
        assert!(!pip.exists());
        let results = commands_on(backend, &with, "cache = [\"pip\"]\n", &[command]);
        assert_eq!(results[0]["status"], "completed", "{}", text(&results[0]));
        assert_eq!(read(&pip.join("probe")).as_deref(), Some("x"));
        let mode = std::fs::metadata(&pip)
            .expect("created")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        assert_eq!(
            results[0]["_meta"]["agentd"]["facts"]["writable_roots"],
            json!([pip.display().to_string()])
        );

        // The control: the same write without the preset is denied, names the path, and
        // leaves nothing on the host.
        let without = Scratch::new_in(&scratch_base(), &format!("profile-nopip-{backend}"));
        let pip = without.root.join("home/.cache/pip");
        std::fs::create_dir_all(&pip).expect("the directory exists: only the sandbox refuses");
        let results = commands_on(backend, &without, "", &[command]);
        assert_eq!(results[0]["status"], "failed", "{}", text(&results[0]));
        assert_eq!(
            results[0]["_meta"]["agentd"]["facts"]["denials"],
            json!(["file-write"])
        );
        assert_eq!(
            results[0]["_meta"]["agentd"]["facts"]["denied_paths"],
            json!([pip.join("probe").display().to_string()])
        );
        assert!(
            results[0]["_meta"]["agentd"]["facts"]
                .get("writable_roots")
                .is_none()
        );
        assert!(
            !pip.join("probe").exists(),
            "the denied write reached the host"
        );
    }
}

#[test]
fn a_writable_root_is_writable_by_commands_and_file_tools_and_without_it_is_denied() {
    for backend in support::backends() {
        let with = Scratch::new_in(&scratch_base(), &format!("profile-root-{backend}"));
        let extra = with.root.join("home/extra");
        std::fs::create_dir_all(&extra).expect("extra");
        let written = extra.join("by-tool").display().to_string();
        let calls: [Call<'_>; 2] = [
            ("bash", &[("command", "printf x > ~/extra/by-command")]),
            (
                "write_file",
                &[("path", written.as_str()), ("content", "y")],
            ),
        ];
        let results = run_on(backend, &with, "writable_roots = [\"~/extra\"]\n", &calls);
        for result in &results {
            assert_eq!(result["status"], "completed", "{}", text(result));
            assert_eq!(
                result["_meta"]["agentd"]["facts"]["writable_roots"],
                json!([extra.display().to_string()])
            );
        }
        assert_eq!(read(&extra.join("by-command")).as_deref(), Some("x"));
        assert_eq!(read(&extra.join("by-tool")).as_deref(), Some("y"));

        // The control: without the root, both are refused and nothing lands.
        let without = Scratch::new_in(&scratch_base(), &format!("profile-noroot-{backend}"));
        let extra = without.root.join("home/extra");
        std::fs::create_dir_all(&extra).expect("extra");
        let written = extra.join("by-tool").display().to_string();
        let calls: [Call<'_>; 2] = [
            ("bash", &[("command", "printf x > ~/extra/by-command")]),
            (
                "write_file",
                &[("path", written.as_str()), ("content", "y")],
            ),
        ];
        let results = run_on(backend, &without, "", &calls);
        assert_eq!(results[0]["status"], "failed", "{}", text(&results[0]));
        assert_eq!(
            results[0]["_meta"]["agentd"]["facts"]["denied_paths"],
            json!([extra.join("by-command").display().to_string()])
        );
        assert_eq!(results[1]["status"], "failed", "{}", text(&results[1]));
        assert!(
            text(&results[1]).contains("outside the workspace"),
            "{}",
            text(&results[1])
        );
        assert!(!extra.join("by-command").exists());
        assert!(!extra.join("by-tool").exists());
    }
}

#[test]
fn a_protected_path_stays_read_only_while_its_sibling_is_written() {
    // Two directories with a file each, in a fresh scratch area.
    let fixture = |tag: &str| {
        let scratch = Scratch::new_in(&scratch_base(), tag);
        for dir in ["secrets", "notes"] {
            std::fs::create_dir(scratch.ws().join(dir)).expect("mkdir");
            std::fs::write(scratch.ws().join(dir).join("key"), "orig").expect("fixture");
        }
        scratch
    };
    for backend in support::backends() {
        let scratch = fixture(&format!("profile-protected-{backend}"));
        let ws = scratch.ws();
        let calls: [Call<'_>; 3] = [
            ("bash", &[("command", "printf x > secrets/key")]),
            ("write_file", &[("path", "secrets/key"), ("content", "y")]),
            ("bash", &[("command", "printf x > notes/key")]),
        ];
        let results = run_on(backend, &scratch, "protected = [\"secrets\"]\n", &calls);
        let secret = ws.join("secrets/key");
        // The file tools' fence refuses on every backend.
        assert_eq!(results[1]["status"], "failed", "{}", text(&results[1]));
        assert!(
            text(&results[1]).contains("a protected path, which stays read-only"),
            "{}",
            text(&results[1])
        );
        if support::mounts(backend) {
            assert_eq!(results[0]["status"], "failed", "{}", text(&results[0]));
            assert_eq!(
                results[0]["_meta"]["agentd"]["facts"]["denials"],
                json!(["protected-path"])
            );
            assert_eq!(
                results[0]["_meta"]["agentd"]["facts"]["denied_paths"],
                json!([secret.display().to_string()])
            );
            assert_eq!(
                read(&secret).as_deref(),
                Some("orig"),
                "the protected file changed"
            );
        } else {
            let named = format!("protected path {}", ws.join("secrets").display());
            assert!(
                missing(&results[0]).iter().any(|m| m.starts_with(&named)),
                "Landlock must say it cannot keep it read-only: {:?}",
                missing(&results[0])
            );
        }
        // The sibling is written.
        assert_eq!(results[2]["status"], "completed", "{}", text(&results[2]));
        assert_eq!(read(&ws.join("notes/key")).as_deref(), Some("x"));
        // The control: the same calls without `protected` write the file.
        let control = fixture(&format!("profile-protected-control-{backend}"));
        let results = run_on(backend, &control, "", &calls);
        for result in &results {
            assert_eq!(result["status"], "completed", "{}", text(result));
        }
        assert_eq!(
            read(&control.ws().join("secrets/key")).as_deref(),
            Some("y")
        );
    }
}

#[test]
fn the_project_file_adds_a_protected_path_and_cannot_itself_be_written() {
    let original = "[sandbox]\nprotected = [\"private\"]\n";
    // Two directories with a file each in a fresh scratch area; with `project`, the project
    // file protecting one of them.
    let fixture = |tag: &str, project: bool| {
        let scratch = Scratch::new_in(&scratch_base(), tag);
        let ws = scratch.ws();
        if project {
            std::fs::create_dir(ws.join(".agentd")).expect(".agentd");
            std::fs::write(ws.join(".agentd/config.toml"), original).expect("project file");
        }
        for dir in ["private", "public"] {
            std::fs::create_dir(ws.join(dir)).expect("mkdir");
            std::fs::write(ws.join(dir).join("data"), "orig").expect("fixture");
        }
        scratch
    };
    for backend in support::backends() {
        let scratch = fixture(&format!("profile-project-{backend}"), true);
        let ws = scratch.ws();
        let project = ws.join(".agentd/config.toml");
        let commands = [
            "printf x > private/data",
            "printf '[sandbox]\\n' > .agentd/config.toml",
            "printf x > public/data",
        ];
        let results = commands_on(backend, &scratch, "", &commands);
        if support::mounts(backend) {
            for (result, path) in results
                .iter()
                .zip([ws.join("private/data"), project.clone()])
            {
                assert_eq!(result["status"], "failed", "{}", text(result));
                assert_eq!(
                    result["_meta"]["agentd"]["facts"]["denials"],
                    json!(["protected-path"])
                );
                assert_eq!(
                    result["_meta"]["agentd"]["facts"]["denied_paths"],
                    json!([path.display().to_string()])
                );
            }
            assert_eq!(read(&ws.join("private/data")).as_deref(), Some("orig"));
            assert_eq!(
                read(&project).as_deref(),
                Some(original),
                "the project file changed"
            );
        } else {
            for path in ["private", ".agentd"] {
                let named = format!("protected path {}", ws.join(path).display());
                assert!(
                    missing(&results[0]).iter().any(|m| m.starts_with(&named)),
                    "Landlock must say it cannot keep {path} read-only: {:?}",
                    missing(&results[0])
                );
            }
        }
        // The unprotected sibling is written.
        assert_eq!(results[2]["status"], "completed", "{}", text(&results[2]));
        assert_eq!(read(&ws.join("public/data")).as_deref(), Some("x"));
        // The control: without the project file, the same write of the path it protected
        // lands. (`.agentd` itself stays read-only in workspace-write whether a file is there
        // or not.)
        let control = fixture(&format!("profile-project-control-{backend}"), false);
        let results = commands_on(backend, &control, "", &commands[..1]);
        assert_eq!(results[0]["status"], "completed", "{}", text(&results[0]));
        assert_eq!(
            read(&control.ws().join("private/data")).as_deref(),
            Some("x")
        );
    }
}

#[test]
fn a_project_file_that_says_more_than_protected_stops_the_prompt_until_it_is_fixed() {
    let scratch = Scratch::new_in(&scratch_base(), "profile-project-key");
    let ws = scratch.ws();
    let project = ws.join(".agentd/config.toml");
    std::fs::create_dir(ws.join(".agentd")).expect(".agentd");
    std::fs::write(&project, "[sandbox]\nmode = \"danger-full-access\"\n").expect("project");
    let script = scratch.script("[[turn]]\ntext = \"Noted.\"\n");
    let mut client = AcpClient::start(&scratch, &script, &[]);
    let session = client.open_session(&ws);
    let (answer, _) = client.prompt(&session, "hello");
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    assert_eq!(
        answer["error"]["message"],
        format!(
            "the project file {}, line 2: sandbox.mode is not read from a project file; only \
             [sandbox] protected is (a project file may only add protected paths): remove it, \
             or set it in agentd.toml",
            project.display()
        )
    );
    assert!(
        !scratch
            .log(&session)
            .iter()
            .any(|r| r["type"] == "prompt/submitted"),
        "a refused prompt is not recorded"
    );
    // The control: once the file says only what it may, the same session answers.
    std::fs::write(&project, "[sandbox]\nprotected = [\"private\"]\n").expect("fixed");
    let (answer, _) = client.prompt(&session, "hello");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
}

#[test]
fn a_cache_directory_that_cannot_be_created_stops_the_session_from_starting() {
    let scratch = Scratch::new_in(&scratch_base(), "profile-pip-blocked");
    scratch.config("[sandbox]\ncache = [\"pip\"]\n");
    // A file where the cache's parent directory would be.
    let cache = scratch.root.join("home/.cache");
    std::fs::write(&cache, "").expect("a file in the way");
    let script = scratch.script("[[turn]]\ntext = \"Noted.\"\n");
    let mut client = AcpClient::start(&scratch, &script, &[]);
    let (init, _) = client.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    let (answer, _) = client.request(
        "session/new",
        json!({"cwd": scratch.ws(), "mcpServers": []}),
    );
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(&format!(
            "cannot create the directory {} of the cache preset \"pip\" (sandbox.cache): ",
            cache.join("pip").display()
        )) && message.ends_with("; create it yourself, or drop the preset"),
        "{answer}"
    );
    // The control: with the way clear, the session starts and the directory is there.
    std::fs::remove_file(&cache).expect("rm");
    let (answer, _) = client.request(
        "session/new",
        json!({"cwd": scratch.ws(), "mcpServers": []}),
    );
    assert!(answer["result"]["sessionId"].is_string(), "{answer}");
    assert!(cache.join("pip").is_dir());
}

#[test]
fn sandbox_env_sets_and_passes_variables_to_every_command() {
    for backend in support::backends() {
        // agentd's own environment has XDG_CONFIG_HOME (the harness's), which a command does
        // not inherit; `pass` hands it on, `set` sets one more.
        let show = "printf '%s|%s' \"$PROFILE_SET\" \"$XDG_CONFIG_HOME\"";
        let scratch = Scratch::new_in(&scratch_base(), &format!("profile-env-{backend}"));
        let config = "[sandbox.env]\npass = [\"XDG_CONFIG_HOME\"]\nset = { PROFILE_SET = \"set by the \
                      profile\" }\n";
        let results = commands_on(backend, &scratch, config, &[show]);
        let config_home = scratch.root.join("config").display().to_string();
        assert_eq!(
            text(&results[0]),
            format!("set by the profile|{config_home}\n[exit code: 0]")
        );
        // The control: without [sandbox.env], neither reaches the command.
        let plain = Scratch::new_in(&scratch_base(), &format!("profile-noenv-{backend}"));
        let results = commands_on(backend, &plain, "", &[show]);
        assert_eq!(text(&results[0]), "|\n[exit code: 0]");
    }
}

#[test]
fn file_tools_work_under_socket_settings_their_backend_refuses_for_commands() {
    for backend in support::backends() {
        let scratch = Scratch::new_in(&scratch_base(), &format!("profile-sockets-{backend}"));
        let written = scratch.ws().join("note.txt").display().to_string();
        let calls: [Call<'_>; 3] = [
            (
                "write_file",
                &[("path", written.as_str()), ("content", "kept")],
            ),
            ("read_file", &[("path", written.as_str())]),
            ("bash", &[("command", "true")]),
        ];
        let config = "local_binding = true\nunix_sockets = [\"/run/agentd-test-absent.sock\"]\n";
        let results = run_on(backend, &scratch, config, &calls);
        // The helper's reader and writer open no socket: the settings do not reach them.
        assert_eq!(results[0]["status"], "completed", "{}", text(&results[0]));
        assert_eq!(results[1]["status"], "completed", "{}", text(&results[1]));
        assert!(text(&results[1]).contains("kept"), "{}", text(&results[1]));
        assert_eq!(read(Path::new(&written)).as_deref(), Some("kept"));
        // The control: the settings are in force for commands, which Landlock refuses.
        match backend {
            "landlock" => {
                assert_eq!(results[2]["status"], "failed", "{}", text(&results[2]));
                let refused = results[2]["_meta"]["agentd"]["facts"]["refused"]
                    .as_str()
                    .unwrap_or("");
                assert!(refused.contains("bwrap"), "{}", results[2]);
            }
            _ => assert_eq!(results[2]["status"], "completed", "{}", text(&results[2])),
        }
    }
}
