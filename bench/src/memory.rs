//! The memory and start-up section: resident memory of the helper and of agentd, and
//! agentd's start to `initialize` answered.

use std::time::Duration;

use agentd::api::helper_client::{HelperClient, SpawnSpec};

use crate::acp::Acp;
use crate::error::BenchError;
use crate::measure::{CONCURRENT, PATH, Table};
use crate::setup::Setup;

/// How long a command in flight for the memory figure sleeps (it is cancelled once counted).
const IN_FLIGHT_SLEEP: &str = "30";

/// Resident memory of `pid` in KiB, from `/proc/PID/status`.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// `kib` KiB in MiB, as the report writes memory.
pub fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// Resident memory of `pid`, in MiB.
fn rss(pid: u32) -> Option<String> {
    rss_kib(pid).map(mib)
}

pub async fn memory(setup: &Setup, client: &HelperClient) -> Result<Table, BenchError> {
    let mut table = Table::new("Resident memory and start-up");
    let helper = client.helper_pid().ok_or_else(|| fail!("no helper pid"))?;
    table.figures.push((
        "confine-helper, idle".into(),
        rss(helper).unwrap_or_else(|| "unknown".into()),
    ));
    let mut handles = Vec::new();
    for _ in 0..CONCURRENT {
        let mut spec = SpawnSpec::new(["sleep", IN_FLIGHT_SLEEP]);
        spec.env = vec![("PATH".into(), PATH.into())];
        let mut handle = client.spawn(spec).await.map_err(|e| fail!("spawn: {e}"))?;
        handle
            .started()
            .await
            .ok_or_else(|| fail!("a command in flight did not start"))?;
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
    Ok(table)
}

/// Starts `agentd acp` with a scripted model; returns the time to the answer of `initialize`
/// and its resident memory once a session is open.
async fn agentd_acp(setup: &Setup) -> Result<(Duration, String), BenchError> {
    let root = setup.scratch.join("acp");
    let script = root.join("model.toml");
    std::fs::create_dir_all(&root).map_err(|e| fail!("acp dirs: {e}"))?;
    std::fs::write(&script, "[[turn]]\ntext = \"ok\"\n").map_err(|e| fail!("script: {e}"))?;
    let mut acp = Acp::start(setup, &root, &script).await?;
    acp.initialize().await?;
    let to_initialize = acp.started.elapsed();
    acp.new_session(&setup.workspace).await?;
    let memory = acp.pid().and_then(rss).unwrap_or_else(|| "unknown".into());
    acp.finish().await;
    Ok((to_initialize, memory))
}
