//! agentd's ACP input path under arbitrary lines from a client: the bytes go, in one process,
//! through what `agentd acp` runs on its stdin (`agentd::api::acp::serve_on`: agentd's line reader,
//! the ACP crate's JSON-RPC parsing and dispatch, agentd's handlers and their parsing of every
//! method's params), against an agent built from flags as `agentd acp` builds it.
//!
//! Each input is served by a fresh agent with an empty state directory. Before it, the client
//! sends `initialize` and `session/new`; every `$SID` in the input is replaced by that session's
//! id, so that the session methods (`session/prompt`, `session/set_mode`,
//! `session/set_config_option`, `session/load`, `session/cancel`, `session/close`) get past the
//! lookup to their own parsing. After it comes one more request.
//!
//! What must hold, whatever the lines:
//! - nothing panics, in the dispatch loop or in a task it started;
//! - agentd writes only JSON objects, one per line;
//! - the request after the input is answered: no line stops agentd serving;
//! - when the client hangs up, agentd closes its sessions and returns without an error.
//!
//! The model is a script of one text turn and there is no helper (its socket does not exist),
//! so a prompt is answered without the network and nothing is ever run.

#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use agentd::api::acp::AcpOptions;
use agentd::api::cli::{Cli, Command};
use clap::Parser;
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::runtime::Runtime;
use tokio::sync::mpsc;

/// Longer than any answer takes on a loaded machine; past it agentd counts as stuck.
const PATIENCE: Duration = Duration::from_secs(60);
/// What the input says where it means the session `session/new` made.
const SESSION_TOKEN: &[u8] = b"$SID";
/// The id of the request after the input.
const LAST_ID: &str = "fuzz-last-request";

struct Harness {
    runtime: Runtime,
    root: PathBuf,
    /// Built once: what they hold is read-only to a session (the scripted model answers by the
    /// history alone), all but the state directory, which is emptied before each input.
    options: AcpOptions,
}

fn harness() -> &'static Harness {
    static HARNESS: OnceLock<Harness> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let root = std::env::temp_dir().join(format!("agentd-fuzz-acp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("ws")).expect("the workspace");
        std::fs::write(root.join("agentd.toml"), "").expect("the configuration file");
        std::fs::write(root.join("script.toml"), "[[turn]]\ntext = \"Hello.\"\n")
            .expect("the model script");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let options = options(&root);
        Harness {
            runtime,
            root,
            options,
        }
    })
}

/// The options `agentd acp` would serve with, from these flags.
fn options(root: &Path) -> AcpOptions {
    let path = |name: &str| root.join(name).into_os_string();
    let cli = Cli::try_parse_from([
        "agentd".into(),
        "acp".into(),
        "--sandbox-mode".into(),
        "read-only".into(),
        "--state-dir".into(),
        path("state"),
        "--config".into(),
        path("agentd.toml"),
        "--model-script".into(),
        path("script.toml"),
        "--helper-socket".into(),
        path("no-helper.sock"),
    ])
    .expect("the flags parse");
    let Command::Acp(acp) = cli.command else {
        unreachable!("the command is acp");
    };
    let config = acp.agent.effective().expect("the configuration loads");
    AcpOptions::from_config(&config, acp.sandbox_mode).expect("the options build")
}

/// The client's side of one connection: its lines out, agentd's lines in.
struct Client {
    out: tokio::io::WriteHalf<tokio::io::DuplexStream>,
    lines: mpsc::UnboundedReceiver<Value>,
}

impl Client {
    async fn write(&mut self, bytes: &[u8]) {
        self.out
            .write_all(bytes)
            .await
            .expect("agentd reads its input");
    }

    async fn request(&mut self, id: &str, method: &str, params: Value) -> Value {
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.write(format!("{line}\n").as_bytes()).await;
        self.response(id).await
    }

    /// Reads agentd's lines until the response to `id`.
    async fn response(&mut self, id: &str) -> Value {
        loop {
            let message = tokio::time::timeout(PATIENCE, self.lines.recv())
                .await
                .unwrap_or_else(|_| panic!("no answer to {id} within {PATIENCE:?}"))
                .unwrap_or_else(|| panic!("agentd stopped writing before answering {id}"));
            if message.get("method").is_none() && message["id"] == id {
                return message;
            }
        }
    }
}

/// `input` with every [`SESSION_TOKEN`] replaced by `session`.
fn with_session(input: &[u8], session: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    let mut rest = input;
    while !rest.is_empty() {
        if rest.starts_with(SESSION_TOKEN) {
            out.extend_from_slice(session.as_bytes());
            rest = &rest[SESSION_TOKEN.len()..];
        } else {
            out.push(rest[0]);
            rest = &rest[1..];
        }
    }
    out
}

async fn serve_one(harness: &Harness, input: &[u8]) {
    let options = harness.options.clone();
    let _ = std::fs::remove_dir_all(&options.state_dir);
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let (their_in, their_out) = tokio::io::split(theirs);
    let served = tokio::spawn(agentd::api::acp::serve_on(options, their_in, their_out));
    let (our_in, out) = tokio::io::split(ours);
    let (tx, lines) = mpsc::unbounded_channel();
    let reader = tokio::spawn(async move {
        let mut lines = BufReader::new(our_in).lines();
        while let Some(line) = lines.next_line().await.expect("agentd writes UTF-8 lines") {
            let message: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("agentd wrote a line that is not JSON ({e}): {line}"));
            assert!(message.is_object(), "agentd wrote a non-object: {line}");
            let _ = tx.send(message);
        }
    });
    let mut client = Client { out, lines };

    let init = client
        .request(
            "fuzz-initialize",
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )
        .await;
    assert!(init.get("result").is_some(), "initialize failed: {init}");
    let cwd = harness.root.join("ws");
    let new = client
        .request(
            "fuzz-new",
            "session/new",
            json!({"cwd": cwd, "mcpServers": []}),
        )
        .await;
    let session = new["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("session/new failed: {new}"))
        .to_owned();

    client.write(&with_session(input, &session)).await;
    let last = json!({"jsonrpc": "2.0", "id": LAST_ID, "method": "session/list", "params": {}});
    client.write(format!("\n{last}\n").as_bytes()).await;
    let answer = client.response(LAST_ID).await;
    assert!(
        answer.get("result").is_some() || answer["error"]["code"].is_i64(),
        "the request after the input got neither a result nor an error: {answer}"
    );

    // The hang-up: agentd reads the end of its input.
    client.out.shutdown().await.expect("the input closes");
    let ended = tokio::time::timeout(PATIENCE, served)
        .await
        .unwrap_or_else(|_| panic!("agentd did not return within {PATIENCE:?} of the hang-up"))
        .expect("the serving task did not panic");
    assert!(ended.is_ok(), "agentd ended with an error: {ended:?}");
    reader.await.expect("the reading task did not panic");
}

fuzz_target!(|data: &[u8]| {
    let harness = harness();
    harness.runtime.block_on(serve_one(harness, data));
});
