//! What a run measures and where its binaries are, as every section reads it.

use std::path::PathBuf;

/// What a run measures and where its binaries are.
#[derive(Debug, Clone)]
pub struct Setup {
    /// Rounds per section (the first is a warm-up, not counted).
    pub rounds: usize,
    /// Bytes of output in the throughput section.
    pub output_bytes: u64,
    /// Prompts in the long session whose memory the session section follows.
    pub long_session_turns: usize,
    /// Files of the checkpoint section's workspace (10,000; 1,000 in a quick run).
    pub checkpoint_files: usize,
    pub agentd: PathBuf,
    pub helper: PathBuf,
    pub bwrap: Option<PathBuf>,
    pub codex: Option<PathBuf>,
    pub srt: Option<PathBuf>,
    /// The run's own directory, removed at its end: the workspace and agentd's files beside it.
    pub scratch: PathBuf,
    /// `scratch/ws`.
    pub workspace: PathBuf,
    /// The sections to run (`--only`); empty runs them all.
    pub only: Vec<String>,
}

impl Setup {
    /// Whether the section named `name` runs.
    pub fn runs(&self, name: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| o == name)
    }
}
