//! What every section measures with: the commands' environment, the rows and tables a section
//! fills, the rounds that interleave its variants, and one confined command run to its end.

use std::time::Instant;

use agentd::api::helper_client::{HelperClient, Outcome, SpawnSpec};
use confine_protocol::ExitStatus;

use crate::error::BenchError;
use crate::stats::Samples;

/// The commands' `PATH`.
pub const PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// Commands at once in the concurrency section.
pub const CONCURRENT: usize = 64;
/// The size of the file the file tools section writes (and its floor).
pub const FILE_BYTES: usize = 4 * 1024;

/// One measured variant of a section.
#[derive(Debug, Clone)]
pub struct Row {
    pub variant: String,
    pub samples: Samples,
    /// The section's baseline has no ratio to itself.
    pub baseline: bool,
    pub note: String,
}

/// One section of the table.
#[derive(Debug, Clone)]
pub struct Table {
    pub title: String,
    pub rows: Vec<Row>,
    /// Rows that are a figure, not a time: (what, value).
    pub figures: Vec<(String, String)>,
    /// What was not measured, and why.
    pub skipped: Vec<String>,
}

impl Table {
    pub fn new(title: &str) -> Table {
        Table {
            title: title.to_owned(),
            rows: Vec::new(),
            figures: Vec::new(),
            skipped: Vec::new(),
        }
    }
}

/// Runs `spec` through the helper to its end; anything but exit status 0 is an error.
pub async fn run_spec(client: &HelperClient, spec: SpawnSpec) -> Result<(), BenchError> {
    let handle = client.spawn(spec).await.map_err(|e| fail!("spawn: {e}"))?;
    match handle.wait().await {
        Outcome::Exited(e) if e.status == ExitStatus::Code(0) => Ok(()),
        other => Err(fail!("a measured command did not succeed: {other:?}")),
    }
}

/// Runs `rounds` rounds of every variant in order (the first round uncounted); each variant's
/// run is timed alone.
pub async fn interleave<V, F>(
    rounds: usize,
    variants: &[V],
    mut run: F,
) -> Result<Vec<Samples>, BenchError>
where
    F: AsyncFnMut(&V) -> Result<(), BenchError>,
{
    let mut samples = vec![Samples::default(); variants.len()];
    for round in 0..rounds {
        for (variant, samples) in variants.iter().zip(samples.iter_mut()) {
            let started = Instant::now();
            run(variant).await?;
            if round > 0 {
                samples.0.push(started.elapsed());
            }
        }
    }
    Ok(samples)
}

pub fn rows(names: Vec<String>, samples: Vec<Samples>, notes: Vec<String>) -> Vec<Row> {
    names
        .into_iter()
        .zip(samples)
        .zip(notes)
        .enumerate()
        .map(|(i, ((variant, samples), note))| Row {
            variant,
            samples,
            baseline: i == 0,
            note,
        })
        .collect()
}
