//! `agentd demo`: a newcomer's first look. It starts the real `agentd acp` with a scripted
//! model in a fresh workspace, talks to it the way an editor does, and prints what happened:
//! a file read, a write inside the workspace, and a write outside it that the sandbox refuses.
//! Then it checks the host: the inside write exists, the outside one does not. Everything it
//! prints goes through [`crate::terminal::visible`].

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use agent_client_protocol::ErrorCode;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};

/// `println!` through [`crate::terminal::visible`]: the demo prints what the agent and its
/// commands sent, which must be shown, never obeyed by the terminal.
macro_rules! say {
    ($($arg:tt)*) => {
        println!("{}", crate::terminal::visible(&format!($($arg)*)))
    };
}

/// The scripted model of the demo.
pub const SCRIPT: &str = r#"
[[turn]]
text = "Let me read the notes first."
[[turn.tool_calls]]
name = "read_file"
arguments = { path = "notes.txt" }

[[turn]]
text = "Now I write a summary inside the workspace."
[[turn.tool_calls]]
name = "bash"
arguments = { command = "printf 'agentd was here\\n' > summary.txt && cat summary.txt" }

[[turn]]
text = "Finally something the sandbox must refuse: a write to your home directory."
[[turn.tool_calls]]
name = "bash"
arguments = { command = "echo escaped > ~/agentd-demo-escape.txt" }

[[turn]]
text = "The sandbox refused the write outside the workspace, as it should."
"#;

const ESCAPE_FILE: &str = "agentd-demo-escape.txt";

/// Why the demo could not run to its end.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("creating {}: {source}", path.display())]
    CreateWorkspace {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("writing the demo notes: {0}")]
    WriteNotes(#[source] std::io::Error),
    #[error("writing the demo script: {0}")]
    WriteScript(#[source] std::io::Error),
    #[error("starting {} acp: {source}", agentd.display())]
    Start {
        agentd: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The started agent has no pipe for the named stream.
    #[error("no {0}")]
    NoPipe(&'static str),
    #[error("writing to the agent: {0}")]
    Write(#[source] std::io::Error),
    #[error("reading from the agent: {0}")]
    Read(#[source] std::io::Error),
    #[error("the agent did not answer {method} within 2 minutes")]
    Timeout { method: String },
    #[error("the agent exited before answering {method}")]
    Exited { method: String },
    #[error("the agent sent something that is not JSON ({source}): {line}")]
    NotJson {
        line: String,
        #[source]
        source: serde_json::Error,
    },
    /// The agent answered a request with a JSON-RPC error, shown as it came.
    #[error("{method} failed: {error}")]
    Failed { method: String, error: Value },
    #[error("the agent did not open a session")]
    NoSession,
}

/// What the demo needs from the command line.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// The `agentd` executable to start as the ACP agent.
    pub agentd: PathBuf,
    /// Extra arguments for `agentd acp` (helper location, config file).
    pub acp_args: Vec<std::ffi::OsString>,
    pub sandbox_mode: &'static str,
}

/// Runs the demo, printing to stdout. Returns whether everything happened as expected.
pub async fn run(options: DemoOptions) -> Result<bool, DemoError> {
    let root = std::env::temp_dir().join(format!("agentd-demo-{}", std::process::id()));
    let ws = root.join("workspace");
    let state = root.join("sessions");
    std::fs::create_dir_all(&ws).map_err(|source| DemoError::CreateWorkspace {
        path: ws.clone(),
        source,
    })?;
    std::fs::write(
        ws.join("notes.txt"),
        "This workspace is the only place the agent may write.\n",
    )
    .map_err(DemoError::WriteNotes)?;
    let script = root.join("model-script.toml");
    std::fs::write(&script, SCRIPT).map_err(DemoError::WriteScript)?;
    let outcome = drive(&options, &ws, &state, &script).await;
    let _ = std::fs::remove_dir_all(&root);
    outcome
}

async fn drive(
    options: &DemoOptions,
    ws: &Path,
    state: &Path,
    script: &Path,
) -> Result<bool, DemoError> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    if let Some(home) = &home {
        let _ = std::fs::remove_file(home.join(ESCAPE_FILE));
    }
    say!("agentd demo: a scripted model works in {}", ws.display());
    say!("sandbox mode: {}\n", options.sandbox_mode);
    let mut agent = Agent::start(options, ws, state, script)?;
    agent
        .request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )
        .await?;
    let new = agent
        .request("session/new", json!({"cwd": ws, "mcpServers": []}))
        .await?;
    let session = new
        .get("sessionId")
        .and_then(Value::as_str)
        .ok_or(DemoError::NoSession)?
        .to_owned();
    let prompt = "Show me what you can do.";
    say!("you: {prompt}");
    let answer = agent
        .request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": prompt}]}),
        )
        .await?;
    agent.flush_text();
    let stop = answer
        .get("stopReason")
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_owned();
    say!("\nturn ended: {stop}");
    let exited = agent.stop().await;

    say!("\nchecking the host:");
    let inside = ws.join("summary.txt").is_file();
    say!(
        "  {} the write inside the workspace landed (summary.txt)",
        mark(inside)
    );
    let outside = home
        .as_ref()
        .map(|h| !h.join(ESCAPE_FILE).exists())
        .unwrap_or(true);
    say!(
        "  {} the write to ~/{ESCAPE_FILE} did not happen",
        mark(outside)
    );
    let denied = agent.denials > 0;
    say!("  {} the sandbox reported the denial", mark(denied));
    say!(
        "  {} agentd acp exited by itself at the end of its input",
        mark(exited)
    );
    say!(
        "\nEvery session is recorded as an event log; `agentd sessions list` shows yours \
         (the demo's lived in a temporary directory, removed now)."
    );
    Ok(inside && outside && denied && exited && stop == "end_turn")
}

/// The text of `value`'s `content`, as an ACP content block holds it.
fn content_text(value: &Value) -> Option<&str> {
    value.get("content")?.get("text")?.as_str()
}

fn mark(ok: bool) -> &'static str {
    if ok { "ok  " } else { "FAIL" }
}

/// The agent process and the client side of the connection.
struct Agent {
    child: Child,
    /// `None` once closed: the end of input is what tells `agentd acp` to exit.
    stdin: Option<ChildStdin>,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    next_id: u64,
    text: String,
    denials: usize,
}

impl Agent {
    fn start(
        options: &DemoOptions,
        ws: &Path,
        state: &Path,
        script: &Path,
    ) -> Result<Agent, DemoError> {
        let mut child = Command::new(&options.agentd)
            .arg("acp")
            .arg("--model-script")
            .arg(script)
            .arg("--state-dir")
            .arg(state)
            .arg("--sandbox-mode")
            .arg(options.sandbox_mode)
            .args(&options.acp_args)
            .current_dir(ws)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| DemoError::Start {
                agentd: options.agentd.clone(),
                source,
            })?;
        let stdin = child.stdin.take().ok_or(DemoError::NoPipe("stdin"))?;
        let stdout = child.stdout.take().ok_or(DemoError::NoPipe("stdout"))?;
        Ok(Agent {
            child,
            stdin: Some(stdin),
            lines: BufReader::new(stdout).lines(),
            next_id: 0,
            text: String::new(),
            denials: 0,
        })
    }

    async fn request(&mut self, method: &str, params: Value) -> Result<Value, DemoError> {
        let id = self.next_id;
        self.next_id += 1;
        let mut line =
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        line.push('\n');
        self.write(&line).await?;
        loop {
            let next = tokio::time::timeout(Duration::from_secs(120), self.lines.next_line())
                .await
                .map_err(|_| DemoError::Timeout {
                    method: method.to_owned(),
                })?
                .map_err(DemoError::Read)?
                .ok_or_else(|| DemoError::Exited {
                    method: method.to_owned(),
                })?;
            let message: Value = match serde_json::from_str(&next) {
                Ok(message) => message,
                Err(source) => return Err(DemoError::NotJson { line: next, source }),
            };
            if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                if let Some(error) = message.get("error") {
                    return Err(DemoError::Failed {
                        method: method.to_owned(),
                        error: error.clone(),
                    });
                }
                return Ok(message.get("result").cloned().unwrap_or(Value::Null));
            }
            if message.get("method").is_some() && message.get("id").is_some() {
                self.answer(&message).await?;
                continue;
            }
            self.show(&message);
        }
    }

    /// Answers a request of the agent: a permission prompt (which only a configuration that
    /// lists a tool in `approval.ask_before` causes) is allowed once, as a user would to see the
    /// demo through; anything else is not supported.
    async fn answer(&mut self, request: &Value) -> Result<(), DemoError> {
        let id = request["id"].clone();
        let reply = if request["method"] == "session/request_permission" {
            self.flush_text();
            say!("    permission asked: the demo allows it once");
            json!({"jsonrpc": "2.0", "id": id, "result": {"outcome": {"outcome": "selected", "optionId": "allow-once"}}})
        } else {
            let code = ErrorCode::METHOD_NOT_FOUND.value();
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": "not supported by the demo"}})
        };
        let mut line = reply.to_string();
        line.push('\n');
        self.write(&line).await
    }

    async fn write(&mut self, line: &str) -> Result<(), DemoError> {
        let stdin = self.stdin.as_mut().ok_or(DemoError::NoPipe("stdin"))?;
        stdin
            .write_all(line.as_bytes())
            .await
            .map_err(DemoError::Write)
    }

    /// Prints one notification the way an editor would show it.
    fn show(&mut self, message: &Value) {
        let update = message
            .get("params")
            .and_then(|params| params.get("update"))
            .unwrap_or(&Value::Null);
        match update["sessionUpdate"].as_str() {
            // agentd's own notice (what the sandbox does not enforce here): its own lines.
            Some("agent_message_chunk") if update.pointer("/_meta/agentd/notice").is_some() => {
                self.flush_text();
                let text = content_text(update).unwrap_or_default();
                for line in text.lines() {
                    say!("agentd: {line}");
                }
            }
            Some("agent_message_chunk") => {
                self.text.push_str(content_text(update).unwrap_or_default());
            }
            Some("tool_call") => {
                self.flush_text();
                say!(
                    "  tool {}: {}",
                    update["kind"].as_str().unwrap_or("?"),
                    update["title"].as_str().unwrap_or("?")
                );
            }
            Some("tool_call_update") => {
                let raw = &update["rawOutput"];
                if raw["denied"] == json!(true) {
                    self.denials += 1;
                }
                let status = update["status"].as_str().unwrap_or("?");
                let output = update
                    .get("content")
                    .and_then(|content| content.get(0))
                    .and_then(content_text)
                    .unwrap_or_default();
                match raw["backend"].as_str() {
                    Some(backend) => say!("    -> {status} (sandbox backend: {backend})"),
                    None => say!("    -> {status}"),
                }
                for line in output.lines() {
                    say!("       {line}");
                }
            }
            _ => {}
        }
    }

    fn flush_text(&mut self) {
        if !self.text.is_empty() {
            say!("agent: {}", std::mem::take(&mut self.text));
        }
    }

    /// Ends the agent's input and waits for it to exit, as an editor closing would; kills it
    /// if it has not within a grace. Whether it exited by itself, successfully.
    async fn stop(&mut self) -> bool {
        // Dropped, not shut down: a pipe's shutdown leaves it open, and agentd would wait.
        drop(self.stdin.take());
        match tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await {
            Ok(Ok(status)) => status.success(),
            _ => {
                let _ = self.child.kill().await;
                false
            }
        }
    }
}
