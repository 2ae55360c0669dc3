//! The report: one Markdown table per section, with the machine it ran on.

use std::fmt::Write;

use crate::measure::Table;
use crate::setup::Setup;
use crate::stats::ms;

/// The whole report as Markdown.
pub fn render(tables: &[Table], setup: &Setup, quick: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# agentd-bench\n");
    let _ = writeln!(out, "{}\n", machine());
    if quick {
        let _ = writeln!(
            out,
            "Quick run ({} rounds): the figures only show the benchmark works.\n",
            setup.rounds.saturating_sub(1)
        );
    } else {
        let _ = writeln!(
            out,
            "{} counted rounds after one warm-up, variants interleaved; ratio = median of the \
             per-round ratios to the section's first row.\n",
            setup.rounds.saturating_sub(1)
        );
    }
    for table in tables {
        let _ = writeln!(out, "## {}\n", table.title);
        if !table.rows.is_empty() {
            let _ = writeln!(out, "| variant | median | p95 | ratio | note |");
            let _ = writeln!(out, "|---|---:|---:|---:|---|");
            let baseline = table.rows.iter().find(|r| r.baseline);
            for row in &table.rows {
                let ratio = match baseline {
                    Some(b) if !row.baseline => {
                        format!("{:.2}×", row.samples.ratio_to(&b.samples))
                    }
                    _ => "1.00×".to_owned(),
                };
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {} |",
                    row.variant,
                    ms(row.samples.median()),
                    ms(row.samples.p95()),
                    ratio,
                    row.note
                );
            }
            out.push('\n');
        }
        if !table.figures.is_empty() {
            let _ = writeln!(out, "| what | value |");
            let _ = writeln!(out, "|---|---:|");
            for (what, value) in &table.figures {
                let _ = writeln!(out, "| {what} | {value} |");
            }
            out.push('\n');
        }
        for skipped in &table.skipped {
            let _ = writeln!(out, "- skipped: {skipped}");
        }
        if !table.skipped.is_empty() {
            out.push('\n');
        }
    }
    out
}

/// The machine in one line: CPU model, cores, memory, kernel.
fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_owned())
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kib| kib.parse::<f64>().ok())
        })
        .map_or("?".into(), |kib| {
            format!("{:.0} GiB", kib / 1024.0 / 1024.0)
        });
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    format!("Machine: {model}, {cores} cores, {memory}, Linux {kernel}.")
}
