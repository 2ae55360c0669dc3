//! `agentd acp` driven the way an editor drives it: started with a scripted model and a state
//! directory of the run's own, one JSON-RPC request at a time over its stdio. The memory and
//! session sections time its start, its answers and its resident memory through this.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use crate::error::BenchError;
use crate::measure::PATH;
use crate::setup::Setup;

/// How long agentd may take to end once its input is closed before it is killed.
const END_GRACE: Duration = Duration::from_secs(5);
/// The request agentd makes of a client when a tool call needs a person's approval.
const PERMISSION: &str = "\"session/request_permission\"";

/// One running `agentd acp` and the client end of its stdio.
#[derive(Debug)]
pub struct Acp {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Lines<BufReader<ChildStdout>>,
    next_id: u64,
    /// When the process was spawned.
    pub started: Instant,
}

impl Acp {
    /// Starts `agentd acp` answering with the model script `script`, keeping its sessions in
    /// `root/state`; `root` is its home, and its configuration directory (`root/config`) is
    /// empty, so the person's own settings change nothing. It runs in the run's workspace.
    pub async fn start(setup: &Setup, root: &Path, script: &Path) -> Result<Acp, BenchError> {
        std::fs::create_dir_all(root.join("state"))
            .map_err(|e| fail!("cannot create {}: {e}", root.join("state").display()))?;
        let started = Instant::now();
        let mut child = tokio::process::Command::new(&setup.agentd)
            .arg("acp")
            .arg("--model-script")
            .arg(script)
            .arg("--state-dir")
            .arg(root.join("state"))
            .env_clear()
            .env("PATH", PATH)
            .env("HOME", root)
            .env("XDG_CONFIG_HOME", root.join("config"))
            .current_dir(&setup.workspace)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| fail!("cannot start agentd acp: {e}"))?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| fail!("agentd acp has no stdin"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| fail!("agentd acp has no stdout"))?;
        Ok(Acp {
            child,
            stdin: Some(stdin),
            lines: BufReader::new(stdout).lines(),
            next_id: 1,
            started,
        })
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Sends one request and reads agentd's output up to its answer (the notifications before
    /// it are read and dropped); returns the answer's `result`.
    pub async fn request(&mut self, method: &str, params: Value) -> Result<Value, BenchError> {
        let id = self.next_id;
        self.next_id += 1;
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| fail!("agentd's input is closed"))?;
        stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .map_err(|e| fail!("writing to agentd: {e}"))?;
        // Only lines that may be the answer are parsed: parsing every notification would time
        // the client too. A string field cannot hold the needle unescaped.
        let needle = format!("\"id\":{id},");
        while let Some(line) = self
            .lines
            .next_line()
            .await
            .map_err(|e| fail!("reading agentd: {e}"))?
        {
            // A request of agentd's (a permission, say) would wait for an answer forever.
            if !line.contains(&needle) && !line.contains(PERMISSION) {
                continue;
            }
            let mut message: Value = serde_json::from_str(&line)
                .map_err(|e| fail!("agentd sent a line that is not JSON ({e}): {line}"))?;
            match (message.get("id"), message.get("method")) {
                (Some(_), Some(asked)) => {
                    return Err(fail!(
                        "agentd asked the client {asked} while answering {method}; the \
                         benchmark's client answers no requests: {line}"
                    ));
                }
                (Some(answered), None) if *answered == json!(id) => {}
                _ => continue,
            }
            return match message.get_mut("result") {
                Some(result) => Ok(result.take()),
                None => Err(fail!("agentd refused {method}: {line}")),
            };
        }
        Err(fail!("agentd ended before answering {method}"))
    }

    pub async fn initialize(&mut self) -> Result<(), BenchError> {
        self.request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )
        .await
        .map(drop)
    }

    /// Opens a session in `cwd`; returns its id.
    pub async fn new_session(&mut self, cwd: &Path) -> Result<String, BenchError> {
        let answer = self
            .request("session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await?;
        answer
            .get("sessionId")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| fail!("session/new answered without a session id: {answer}"))
    }

    /// Closes agentd's input, so it ends as it does when its editor goes (its sessions' temp
    /// directories removed), and waits for it; kills it if it does not end.
    pub async fn finish(mut self) {
        self.stdin = None;
        if tokio::time::timeout(END_GRACE, self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}
