//! The output section: a command's output read by agentd from its own pipe, confined in each
//! way against a bare pipe.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::process::Stdio;

use agentd::api::helper_client::{HelperClient, SpawnSpec};
use confine_protocol::{Backend, BackendChoice, Mode};

use crate::error::BenchError;
use crate::measure::{PATH, Table, interleave, rows, run_spec};
use crate::setup::Setup;
use crate::stats::Samples;

/// One way of producing the output.
#[derive(Debug, Clone, Copy)]
enum Writer {
    Bare,
    Helper(Mode, BackendChoice),
}

/// Reads `from` to its end on a blocking thread; returns the byte count.
async fn drain(from: OwnedFd) -> Result<u64, BenchError> {
    tokio::task::spawn_blocking(move || {
        let mut file = std::fs::File::from(from);
        let mut buf = vec![0u8; 1 << 16];
        let mut total = 0u64;
        loop {
            match file.read(&mut buf) {
                Ok(0) => return Ok(total),
                Ok(n) => total += n as u64,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(fail!("reading the output: {e}")),
            }
        }
    })
    .await
    .map_err(|e| fail!("the reader stopped: {e}"))?
}

fn pipe() -> Result<(OwnedFd, OwnedFd), BenchError> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| fail!("pipe: {e}"))
}

/// `head -c BYTES /dev/zero` into a pipe agentd reads: bare, through the helper unconfined,
/// under Landlock, and under the default backend.
pub async fn throughput(
    setup: &Setup,
    client: &HelperClient,
    backends: &[Backend],
) -> Result<Table, BenchError> {
    let bytes = setup.output_bytes;
    let mut table = Table::new(&format!(
        "Output: {} MiB from `head -c` read by agentd",
        bytes >> 20
    ));
    let count = bytes.to_string();
    let rounds = (setup.rounds / 20).max(3);
    let mut variants = vec![
        ("bare pipe".to_owned(), Writer::Bare),
        (
            "through the helper, danger-full-access".to_owned(),
            Writer::Helper(Mode::DangerFullAccess, BackendChoice::Auto),
        ),
    ];
    if backends.contains(&Backend::Landlock) {
        variants.push((
            "confined, read-only, landlock".to_owned(),
            Writer::Helper(Mode::ReadOnly, BackendChoice::Landlock),
        ));
    }
    variants.push((
        "confined, read-only (auto)".to_owned(),
        Writer::Helper(Mode::ReadOnly, BackendChoice::Auto),
    ));
    let kinds: Vec<Writer> = variants.iter().map(|(_, w)| *w).collect();
    let samples = interleave(rounds, &kinds, async |writer: &Writer| {
        let (read, write) = pipe()?;
        let reader = tokio::spawn(drain(read));
        match writer {
            Writer::Bare => {
                let status = tokio::process::Command::new("head")
                    .args(["-c", &count, "/dev/zero"])
                    .stdout(Stdio::from(write))
                    .status()
                    .await
                    .map_err(|e| fail!("head: {e}"))?;
                if !status.success() {
                    return Err(fail!("head failed: {status}"));
                }
            }
            Writer::Helper(mode, backend) => {
                let mut spec = SpawnSpec::new(["head", "-c", &count, "/dev/zero"]);
                spec.env = vec![("PATH".into(), PATH.into())];
                spec.policy.mode = *mode;
                spec.backend = *backend;
                spec.stdout = Some(write);
                run_spec(client, spec).await?;
            }
        }
        let got = reader.await.map_err(|e| fail!("reader: {e}"))??;
        if got == bytes {
            Ok(())
        } else {
            Err(fail!("read {got} bytes of {bytes}"))
        }
    })
    .await?;
    let rate = |s: &Samples| {
        let secs = s.median().as_secs_f64();
        if secs > 0.0 {
            format!("{:.0} MiB/s", (bytes as f64 / secs) / f64::from(1u32 << 20))
        } else {
            String::new()
        }
    };
    let notes = samples.iter().map(rate).collect();
    let names = variants.into_iter().map(|(n, _)| n).collect();
    table.rows = rows(names, samples, notes);
    Ok(table)
}
