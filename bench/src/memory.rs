//! The memory and start-up section: resident memory of the helper and of agentd, and
//! agentd's start to `initialize` answered.

use std::process::Stdio;
use std::time::{Duration, Instant};

use agentd::helper_client::{HelperClient, SpawnSpec};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::Setup;
use crate::sections::{CONCURRENT, PATH, Table};

/// How long a command in flight for the memory figure sleeps (it is cancelled once counted).
const IN_FLIGHT_SLEEP: &str = "30";

/// Resident memory of `pid`, from `/proc/PID/status`.
fn rss(pid: u32) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(format!("{:.1} MiB", kib / 1024.0))
}

pub async fn memory(setup: &Setup, client: &HelperClient) -> Result<Table, String> {
    let mut table = Table::new("Resident memory and start-up");
    let helper = client.helper_pid().ok_or("no helper pid")?;
    table.figures.push((
        "confine-helper, idle".into(),
        rss(helper).unwrap_or_else(|| "unknown".into()),
    ));
    let mut handles = Vec::new();
    for _ in 0..CONCURRENT {
        let mut spec = SpawnSpec::new(["sleep", IN_FLIGHT_SLEEP]);
        spec.env = vec![("PATH".into(), PATH.into())];
        let mut handle = client
            .spawn(spec)
            .await
            .map_err(|e| format!("spawn: {e}"))?;
        handle
            .started()
            .await
            .ok_or("a command in flight did not start")?;
        handles.push(handle);
    }
    table.figures.push((
        format!("confine-helper, {CONCURRENT} commands in flight"),
        rss(helper).unwrap_or_else(|| "unknown".into()),
    ));
    for handle in handles {
        handle.cancel(Duration::ZERO);
        let _ = handle.wait().await;
    }
    let (started, rss) = agentd_acp(setup).await?;
    table.figures.push((
        "`agentd acp` start to `initialize` answered".into(),
        crate::stats::ms(started),
    ));
    table
        .figures
        .push(("agentd, idle with one session".into(), rss));
    table.skipped.push(
        "agentd after a 1,000-turn session, `session/load` of a 10,000-event log and the log's \
         fsync per tool call: not measured yet"
            .into(),
    );
    Ok(table)
}

/// Starts `agentd acp` with a scripted model; returns the time to the answer of `initialize`
/// and its resident memory once a session is open.
async fn agentd_acp(setup: &Setup) -> Result<(Duration, String), String> {
    let root = setup.scratch.join("acp");
    let script = root.join("model.toml");
    std::fs::create_dir_all(root.join("state")).map_err(|e| format!("acp dirs: {e}"))?;
    std::fs::write(&script, "[[turn]]\ntext = \"ok\"\n").map_err(|e| format!("script: {e}"))?;
    let started = Instant::now();
    let mut child = tokio::process::Command::new(&setup.agentd)
        .arg("acp")
        .arg("--model-script")
        .arg(&script)
        .arg("--state-dir")
        .arg(root.join("state"))
        .env_clear()
        .env("PATH", PATH)
        .env("HOME", &root)
        .env("XDG_CONFIG_HOME", root.join("config"))
        .current_dir(&setup.workspace)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start agentd acp: {e}"))?;
    let pid = child.id().ok_or("agentd acp has no pid")?;
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let mut lines = BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
    let mut ask = async |id: u32, message: String| -> Result<(), String> {
        stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .map_err(|e| format!("writing to agentd: {e}"))?;
        let needle = format!("\"id\":{id},");
        while let Some(line) = lines
            .next_line()
            .await
            .map_err(|e| format!("reading agentd: {e}"))?
        {
            if line.contains(&needle) {
                return match line.contains("\"result\"") {
                    true => Ok(()),
                    false => Err(format!("agentd refused request {id}: {line}")),
                };
            }
        }
        Err(format!("agentd ended before answering request {id}"))
    };
    ask(
        1,
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}"#
            .into(),
    )
    .await?;
    let to_initialize = started.elapsed();
    let cwd = setup.workspace.display().to_string();
    ask(
        2,
        format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"session/new","params":{{"cwd":"{cwd}","mcpServers":[]}}}}"#
        ),
    )
    .await?;
    let memory = rss(pid).unwrap_or_else(|| "unknown".into());
    let _ = child.kill().await;
    Ok((to_initialize, memory))
}
