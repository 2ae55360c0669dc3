//! `agentd-bench`: what confinement costs per command, measured side by side with a bare spawn
//! and with the tools people would use instead, in one run on this machine.
//!
//! `cargo build --release -p agentd -p confine-helper -p agentd-bench && target/release/agentd-bench`
//! prints the table (and writes it with `--out FILE`); `--quick` runs a few rounds only, to show
//! the benchmark still works. The binaries it measures are the ones beside it. Codex's
//! `codex sandbox` and Anthropic's `srt` are measured when they are installed (on `PATH`, or
//! named by `AGENTD_BENCH_CODEX` / `AGENTD_BENCH_SRT`), and reported as skipped otherwise.
//!
//! Sections: per command inside one long-lived agentd (the agent's path: one helper
//! connection, many commands; beside it the floors of `floor/`, the least a supervised command
//! needs); whole processes (`agentd run` against bare `/bin/true`, the
//! `bwrap` CLI, Codex and srt); 64 commands at once; output throughput; the file tools' confined
//! writes against a plain write; resident memory; a session's log (`session/load` of 10,000
//! events, its fsync per tool call) and agentd's memory along a long session.

#![warn(clippy::too_many_lines)]
#![cfg_attr(not(test), warn(clippy::indexing_slicing))]

#[macro_use]
mod error;

mod acp;
mod checkpoints;
mod files;
mod floor;
mod long_session;
mod measure;
mod memory;
mod output;
mod sections;
mod session;
mod setup;
mod stats;
mod table;

use std::path::PathBuf;
use std::process::ExitCode;

use crate::error::BenchError;
use setup::Setup;

const USAGE: &str = "usage: agentd-bench [--quick] [--rounds N] [--out FILE] [--only SECTION,...]\n\
                     sections: per-command, whole-process, concurrent, output, files, memory, session, \
                     checkpoints";

/// What the command line asks for.
struct Options {
    /// `--quick`: a few rounds only.
    quick: bool,
    /// `--rounds`: rounds per section instead of the run's default.
    rounds: Option<usize>,
    /// `--out`: a file the table is written to as well.
    out: Option<PathBuf>,
    /// `--only`: the sections to run; empty runs them all.
    only: Vec<String>,
}

fn main() -> ExitCode {
    // The floors' server, which the sections start (floor/mod.rs).
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == floor::SERVER_ARG)
    {
        return floor::serve(std::env::args_os().nth(2).as_deref());
    }
    // One floor command in a process of its own (the whole-process section's floors).
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == floor::ONCE_ARG)
    {
        return floor::once(std::env::args_os().nth(2).as_deref());
    }
    match options() {
        Ok(options) => run(options),
        Err(code) => code,
    }
}

/// The command line read; `Err` is how the process ends instead (the usage printed, or an
/// argument it does not take named).
fn options() -> Result<Options, ExitCode> {
    let mut options = Options {
        quick: false,
        rounds: None,
        out: None,
        only: Vec::new(),
    };
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--quick") => options.quick = true,
            Some("--rounds") => match args.next().and_then(|n| n.to_str()?.parse().ok()) {
                Some(n) if n > 1 => options.rounds = Some(n),
                _ => {
                    eprintln!("agentd-bench: --rounds takes a number above 1\n{USAGE}");
                    return Err(ExitCode::from(2));
                }
            },
            Some("--out") => match args.next() {
                Some(path) => options.out = Some(PathBuf::from(path)),
                None => {
                    eprintln!("{USAGE}");
                    return Err(ExitCode::from(2));
                }
            },
            Some("--only") => match args.next().and_then(|s| s.into_string().ok()) {
                Some(list) => options.only.extend(list.split(',').map(str::to_owned)),
                None => {
                    eprintln!("agentd-bench: --only takes section names\n{USAGE}");
                    return Err(ExitCode::from(2));
                }
            },
            Some("--help" | "-h") => {
                println!("{USAGE}");
                return Err(ExitCode::SUCCESS);
            }
            _ => {
                eprintln!("agentd-bench: unknown argument {arg:?}\n{USAGE}");
                return Err(ExitCode::from(2));
            }
        }
    }
    if let Some(unknown) = options
        .only
        .iter()
        .find(|o| !sections::SECTIONS.contains(&o.as_str()))
    {
        eprintln!("agentd-bench: no section is called {unknown:?}\n{USAGE}");
        return Err(ExitCode::from(2));
    }
    Ok(options)
}

/// Runs the sections `options` asks for, prints the table and writes it where asked.
fn run(options: Options) -> ExitCode {
    let Options {
        quick,
        rounds,
        out,
        only,
    } = options;
    let setup = match setup(quick) {
        Ok(setup) => Setup {
            rounds: rounds.unwrap_or(setup.rounds),
            only,
            ..setup
        },
        Err(why) => {
            eprintln!("agentd-bench: {why}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("agentd-bench: no runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(sections::all(&setup));
    let _ = std::fs::remove_dir_all(&setup.scratch);
    let tables = match result {
        Ok(tables) => tables,
        Err(why) => {
            eprintln!("agentd-bench: {why}");
            return ExitCode::FAILURE;
        }
    };
    let text = table::render(&tables, &setup, quick);
    print!("{text}");
    if let Some(path) = out
        && let Err(e) = std::fs::write(&path, &text)
    {
        eprintln!("agentd-bench: cannot write {}: {e}", path.display());
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

fn setup(quick: bool) -> Result<Setup, BenchError> {
    let exe = std::env::current_exe().map_err(|e| fail!("where am I: {e}"))?;
    let dir = exe
        .parent()
        .ok_or_else(|| fail!("the benchmark's binary has no directory"))?
        .to_path_buf();
    let beside = |name: &str| -> Result<PathBuf, BenchError> {
        let path = dir.join(name);
        if path.is_file() {
            Ok(path)
        } else {
            Err(fail!(
                "{} is missing: build it with `cargo build --release -p agentd -p confine-helper \
                 -p agentd-bench` (the benchmark measures the binaries beside it)",
                path.display()
            ))
        }
    };
    let scratch = std::env::temp_dir().join(format!("agentd-bench-{}", std::process::id()));
    let workspace = scratch.join("ws");
    std::fs::create_dir_all(&workspace)
        .map_err(|e| fail!("cannot create {}: {e}", workspace.display()))?;
    Ok(Setup {
        rounds: if quick { 4 } else { 101 },
        output_bytes: if quick { 64 << 20 } else { 1 << 30 },
        long_session_turns: if quick {
            long_session::QUICK_TURNS
        } else {
            long_session::FULL_TURNS
        },
        checkpoint_files: if quick {
            checkpoints::QUICK_FILES
        } else {
            checkpoints::FULL_FILES
        },
        agentd: beside("agentd")?,
        helper: beside("confine-helper")?,
        bwrap: on_path("bwrap", None),
        codex: on_path("codex", Some("AGENTD_BENCH_CODEX")),
        srt: on_path("srt", Some("AGENTD_BENCH_SRT")),
        scratch,
        workspace,
        only: Vec::new(),
    })
}

/// `name` as the variable `env` names it, else found on `PATH`.
fn on_path(name: &str, env: Option<&str>) -> Option<PathBuf> {
    if let Some(path) = env.and_then(std::env::var_os).map(PathBuf::from) {
        return path.is_file().then_some(path);
    }
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|dir| PathBuf::from(dir).join(name))
        .find(|path| path.is_file())
}
