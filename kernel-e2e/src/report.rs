//! The suite's output: one line per case, grouped by backend, each group closed by its tally,
//! and the grand total as the very last line.

use std::fmt::Write as _;
use std::time::Duration;

use crate::agentd::Run;
use crate::matrix::{Backend, Mode};

/// How one case ended in one cell.
#[derive(Debug, Clone)]
pub enum Verdict {
    Pass,
    Fail { reason: String, runs: Vec<Run> },
    Skip(String),
}

/// One case in one cell, finished.
#[derive(Debug, Clone)]
pub struct CaseResult {
    pub backend: Backend,
    pub mode: Mode,
    pub user: String,
    /// Where the user comes in the matrix (the suite's own user first).
    pub user_rank: usize,
    /// Where the case comes in the catalogue.
    pub case_rank: usize,
    pub id: &'static str,
    pub title: &'static str,
    pub verdict: Verdict,
    /// Lines the case added about what it observed ([`crate::case::Cx::note`]).
    pub notes: Vec<String>,
    pub elapsed: Duration,
}

/// Passed, failed, skipped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
}

impl Tally {
    pub fn add(&mut self, verdict: &Verdict) {
        match verdict {
            Verdict::Pass => self.passed += 1,
            Verdict::Fail { .. } => self.failed += 1,
            Verdict::Skip(_) => self.skipped += 1,
        }
    }

    /// The summary line the suite is read by.
    pub fn line(&self) -> String {
        format!(
            "kernel-e2e: {} passed, {} failed, {} skipped",
            self.passed, self.failed, self.skipped
        )
    }

    /// A backend whose every case skipped (or that ran none) proved nothing: that is a failure.
    pub fn proved_nothing(&self) -> bool {
        self.passed + self.failed == 0
    }
}

/// Renders every result: per backend its cases and its tally, then the total. Returns the text
/// and whether the suite as a whole passed.
pub fn render(
    results: &mut [CaseResult],
    backends: &[Backend],
    elapsed: Duration,
    workers: usize,
) -> (String, bool) {
    results.sort_by_key(|r| (r.backend, r.case_rank, r.mode, r.user_rank));
    let mut text = String::new();
    let mut total = Tally::default();
    let mut ok = true;
    for &backend in backends {
        let mut tally = Tally::default();
        let _ = writeln!(text, "backend {backend}:");
        for result in results.iter().filter(|r| r.backend == backend) {
            tally.add(&result.verdict);
            let cell = format!("({}, {}, {})", result.backend, result.mode, result.user);
            match &result.verdict {
                Verdict::Pass => {
                    let _ = writeln!(text, "PASS {}: {} {cell}", result.id, result.title);
                    for note in &result.notes {
                        let _ = writeln!(text, "    note: {note}");
                    }
                }
                Verdict::Skip(reason) => {
                    let _ = writeln!(text, "SKIP {}: {reason} {cell}", result.id);
                }
                Verdict::Fail { reason, runs } => {
                    let _ = writeln!(text, "FAIL {}: {} {cell}", result.id, result.title);
                    for line in reason.lines() {
                        let _ = writeln!(text, "    {line}");
                    }
                    for note in &result.notes {
                        let _ = writeln!(text, "    note: {note}");
                    }
                    for run in runs {
                        let _ = writeln!(text, "{}", run.describe());
                    }
                }
            }
        }
        if tally.proved_nothing() {
            let _ = writeln!(
                text,
                "backend {backend} ran no case to completion: every case skipped, so nothing was proved"
            );
            ok = false;
        }
        ok &= tally.failed == 0;
        let _ = writeln!(text, "{}", tally.line());
        total.passed += tally.passed;
        total.failed += tally.failed;
        total.skipped += tally.skipped;
    }
    let _ = writeln!(
        text,
        "all backends ({:.1}s on {workers} workers):",
        elapsed.as_secs_f64()
    );
    let _ = writeln!(text, "{}", total.line());
    (text, ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(backend: Backend, verdict: Verdict) -> CaseResult {
        CaseResult {
            backend,
            mode: Mode::ReadOnly,
            user: "root".into(),
            user_rank: 0,
            case_rank: 0,
            id: "T01",
            title: "a title",
            verdict,
            notes: Vec::new(),
            elapsed: Duration::ZERO,
        }
    }

    #[test]
    fn the_total_is_the_last_line_and_each_backend_has_one_tally() {
        let mut results = vec![
            result(Backend::Bwrap, Verdict::Pass),
            result(Backend::Landlock, Verdict::Skip("no python".into())),
            result(Backend::Landlock, Verdict::Pass),
        ];
        let (text, ok) = render(
            &mut results,
            &[Backend::Bwrap, Backend::Landlock],
            Duration::ZERO,
            4,
        );
        assert!(ok);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines.last(),
            Some(&"kernel-e2e: 2 passed, 0 failed, 1 skipped")
        );
        let tallies = lines
            .iter()
            .filter(|l| l.starts_with("kernel-e2e: "))
            .count();
        assert_eq!(tallies, 3);
        assert!(text.contains("SKIP T01: no python (landlock, read-only, root)"));
    }

    #[test]
    fn a_backend_where_everything_skipped_fails_the_suite() {
        let mut results = vec![
            result(Backend::Bwrap, Verdict::Pass),
            result(Backend::Landlock, Verdict::Skip("landlock is off".into())),
        ];
        let (_, ok) = render(
            &mut results,
            &[Backend::Bwrap, Backend::Landlock],
            Duration::ZERO,
            4,
        );
        assert!(!ok);
    }

    #[test]
    fn a_failure_fails_the_suite() {
        let mut results = vec![result(
            Backend::Bwrap,
            Verdict::Fail {
                reason: "canary changed".into(),
                runs: Vec::new(),
            },
        )];
        let (text, ok) = render(&mut results, &[Backend::Bwrap], Duration::ZERO, 4);
        assert!(!ok);
        assert!(text.contains("FAIL T01: a title (bwrap, read-only, root)\n    canary changed"));
    }
}
