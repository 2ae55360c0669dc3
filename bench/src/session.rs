//! The session section: what a session's log costs. `agentd acp` from its start to the answer
//! of `session/load` of a 10,000-event log; the log's fsync per tool call; agentd's resident
//! memory along a long session (`long_session.rs`).
//!
//! The loaded log is written with agentd's own types (`EventLog`, `Event`, the tools'
//! `describe`), turn after turn as the agent loop records one: the prompt, the turn's start,
//! two model steps around one tool call (a `bash` run or a `write_file` with its diff), the
//! turn's end. Its format is then agentd's by construction.

use std::path::{Path, PathBuf};
use std::time::Instant;

use agentd::api::session::new_id;
use agentd::api::session::{Before, Event, EventLog, LoggedDiff, LoggedToolCall, ToolStatus};
use serde_json::{Value, json};

use crate::acp::Acp;
use crate::error::BenchError;
use crate::measure::{Row, Table, interleave};
use crate::setup::Setup;
use crate::stats::{Samples, ms, thousands};

/// The events of the loaded log, `session/created` included.
const LOAD_EVENTS: usize = 10_000;
/// Rounds of the load (each a new agentd); the first is a warm-up.
const LOAD_ROUNDS: usize = 21;
/// The model's instructions as agentd records them with every request (the size of its own).
const INSTRUCTIONS: &str = "You are agentd, a coding agent working in the workspace WORKSPACE.\n\
Use the tools to inspect and change files and to run commands.\nCheck the [exit code: N] marker \
on every bash result; investigate failures before moving on. A line \"[sandbox: <what> denied \
under <mode> mode]\" means the sandbox refused that access (a file write, a write to git \
metadata, a file read, network access or a system interface): do not retry the command \
unchanged; when the result offers escalation, follow the bash tool's description, otherwise \
explain what is needed.\nKeep answers short and say what you changed.\n\n\
<!-- agentd-approval-policy:ask -->";
/// The model's name as the scripted model records it.
const MODEL: &str = "scripted model";

pub async fn session(setup: &Setup) -> Result<Table, BenchError> {
    let mut table = Table::new(&format!(
        "Session: `session/load` of {} events, the log's fsync, a long session's memory",
        thousands(LOAD_EVENTS)
    ));
    load(setup, &mut table).await?;
    fsync(setup, &mut table).await?;
    crate::long_session::long_session(setup, &mut table).await?;
    Ok(table)
}

/// The median and p95 of `samples` in one cell.
fn spread(samples: &Samples) -> String {
    format!("{} (p95 {})", ms(samples.median()), ms(samples.p95()))
}

/// The tool call of turn `turn` in `cwd`: a `bash` run on odd turns, a `write_file` with its
/// diff on even ones; its name, arguments, output and diff.
fn tool_call(turn: u64, cwd: &Path) -> (&'static str, String, String, Option<LoggedDiff>) {
    if turn % 2 == 1 {
        let listing: String = (1..=24)
            .map(|i| format!("test module_{i}::behaves_as_documented ... ok\n"))
            .collect();
        let output = format!("{listing}\ntest result: ok. 24 passed; 0 failed\n[exit code: 0]");
        let arguments = json!({"command": "cargo test --quiet"}).to_string();
        ("bash", arguments, output, None)
    } else {
        let file = written_file(turn, cwd);
        let before: String = (1..=30)
            .map(|i| format!("pub fn f{i}() -> u32 {{ {i} }}\n"))
            .collect();
        let after = before.replace("{ 7 }", "{ 70 }");
        let arguments = json!({"path": file, "content": after}).to_string();
        let output = format!("Overwrote {} ({} bytes)", file.display(), after.len());
        let diff = LoggedDiff::of(&file, Before::Text(before), &after);
        ("write_file", arguments, output, Some(diff))
    }
}

/// The file the `write_file` of turn `turn` in `cwd` writes.
fn written_file(turn: u64, cwd: &Path) -> PathBuf {
    cwd.join(format!("src/module_{turn}.rs"))
}

/// The facts of a completed tool call under the bwrap backend; a `write_file`'s also name the
/// file it wrote and the size of its arguments.
fn tool_facts(written: Option<(&Path, usize)>) -> Value {
    let mut facts = json!({
        "exit": {"code": 0}, "backend": "bwrap",
        "enforcement": {"level": "full", "missing": [], "layers": ["namespaces", "landlock", "seccomp"]},
        "denied": false, "denials": [], "runner_failure": null, "refused": null,
        "timed_out": false, "mode": "workspace-write", "cancelled": false,
    });
    if let (Some((path, bytes)), Some(fields)) = (written, facts.as_object_mut()) {
        fields.insert("path".to_owned(), json!(path));
        fields.insert("bytes".to_owned(), json!(bytes));
    }
    facts
}

/// The model request of step `step` of turn `turn` in `cwd`, as agentd records it.
fn model_request(turn: u64, step: u64, cwd: &Path) -> Event {
    Event::ModelRequest {
        turn,
        step,
        model: MODEL.to_owned(),
        instructions: INSTRUCTIONS.replace("WORKSPACE", &cwd.display().to_string()),
        tools: agentd::api::tools::NAMES.map(str::to_owned).to_vec(),
    }
}

/// The events of turn `turn` of a session in `cwd`, as the agent loop records a turn with one
/// tool call (see [`tool_call`]).
fn turn_events(turn: u64, cwd: &Path) -> Vec<Event> {
    let call_id = format!("call_{}_1", 2 * turn - 1);
    let (name, arguments, output, diff) = tool_call(turn, cwd);
    let described = agentd::api::tools::describe(name, &arguments);
    let file = written_file(turn, cwd);
    let facts = tool_facts(diff.is_some().then_some((file.as_path(), arguments.len())));
    vec![
        Event::PromptSubmitted {
            turn,
            text: format!("Turn {turn}: run the tests, then fix module {turn}."),
        },
        Event::TurnStarted { turn },
        model_request(turn, 1, cwd),
        Event::ModelOutput {
            turn,
            step: 1,
            text: "Let me check that first.".to_owned(),
            reasoning: None,
            tool_calls: vec![LoggedToolCall {
                id: call_id.clone(),
                name: name.to_owned(),
                arguments,
            }],
            finish: "tool_calls".to_owned(),
            incomplete: false,
        },
        Event::ToolCall {
            turn,
            call_id: call_id.clone(),
            tool: name.to_owned(),
            title: described.title,
            kind: described.kind.as_str().to_owned(),
            input: described.input,
            pending: false,
        },
        Event::ToolResult {
            turn,
            call_id,
            status: ToolStatus::Completed,
            output,
            facts,
            diff,
        },
        model_request(turn, 2, cwd),
        Event::ModelOutput {
            turn,
            step: 2,
            text: format!("Done: module {turn} passes its tests."),
            reasoning: None,
            tool_calls: Vec::new(),
            finish: "stop".to_owned(),
            incomplete: false,
        },
        Event::TurnEnded {
            turn,
            stop_reason: "end_turn".to_owned(),
        },
    ]
}

/// Writes a session of `LOAD_EVENTS` events in `cwd` under `state`; returns its id and size.
fn write_log(state: &Path, cwd: &Path) -> Result<(String, u64), BenchError> {
    let id = new_id();
    let failed = |e| fail!("cannot write the session log: {e}");
    let (mut log, _) = EventLog::create(state, &id, cwd).map_err(failed)?;
    let events = (1..).flat_map(|turn| turn_events(turn, cwd));
    for event in events.take(LOAD_EVENTS - 1) {
        log.append(event).map_err(failed)?;
    }
    log.sync().map_err(failed)?;
    let bytes = std::fs::metadata(log.path())
        .map_err(|e| fail!("{}: {e}", log.path().display()))?
        .len();
    Ok((id, bytes))
}

/// Times `agentd acp` from its start to the answer of `initialize`, then to the answer of
/// `session/load` of a 10,000-event log (whose history is sent before the answer).
async fn load(setup: &Setup, table: &mut Table) -> Result<(), BenchError> {
    let root = setup.scratch.join("session-load");
    let state = root.join("state");
    let (id, bytes) = write_log(&state, &setup.workspace)?;
    let script = root.join("model.toml");
    std::fs::write(&script, "[[turn]]\ntext = \"ok\"\n")
        .map_err(|e| fail!("cannot write {}: {e}", script.display()))?;
    let mut samples = [Samples::default(), Samples::default(), Samples::default()];
    let rounds = LOAD_ROUNDS.min(setup.rounds);
    for round in 0..rounds {
        let mut acp = Acp::start(setup, &root, &script).await?;
        acp.initialize().await?;
        let initialized = acp.started.elapsed();
        let asked = Instant::now();
        acp.request(
            "session/load",
            json!({"sessionId": id, "cwd": setup.workspace, "mcpServers": []}),
        )
        .await?;
        let (loaded, alone) = (acp.started.elapsed(), asked.elapsed());
        acp.finish().await;
        if round > 0 {
            for (samples, time) in samples.iter_mut().zip([initialized, loaded, alone]) {
                samples.0.push(time);
            }
        }
    }
    let [initialized, loaded, alone] = samples;
    let events = thousands(LOAD_EVENTS);
    table.rows = vec![
        Row {
            variant: "`agentd acp` start to `initialize` answered".into(),
            samples: initialized,
            baseline: true,
            note: format!(
                "{} rounds, each a new agentd; the same processes as the rows below",
                rounds - 1
            ),
        },
        Row {
            variant: format!("start to `session/load` of {events} events answered"),
            samples: loaded,
            baseline: false,
            note: "the history replayed to the client first, as the protocol orders".into(),
        },
        Row {
            variant: "`session/load` alone, request to answer".into(),
            samples: alone,
            baseline: false,
            note: "target ≤ 200 ms".into(),
        },
    ];
    table.figures.push((
        "the loaded log".into(),
        format!(
            "{events} events, {:.1} MiB, {} turns of one tool call each",
            bytes as f64 / f64::from(1u32 << 20),
            thousands((LOAD_EVENTS - 1) / turn_events(1, &setup.workspace).len())
        ),
    ));
    Ok(())
}

#[derive(Debug, Clone, Copy)]
enum Durability {
    Appended,
    Synced,
}

/// Times one tool call's events appended to a log as the agent loop appends them (the call
/// synced before it runs), against the same appends without the sync; interleaved.
async fn fsync(setup: &Setup, table: &mut Table) -> Result<(), BenchError> {
    let dir = setup.scratch.join("session-fsync");
    let cwd = &setup.workspace;
    let failed = |e| fail!("cannot append to the session log: {e}");
    let (mut log, _) = EventLog::create(&dir, &new_id(), cwd).map_err(failed)?;
    // The model's answer with the call, the call (synced), its result.
    let events: Vec<Event> = turn_events(1, cwd).into_iter().skip(3).take(3).collect();
    let samples = interleave(
        setup.rounds,
        &[Durability::Appended, Durability::Synced],
        async |durability: &Durability| {
            for (i, event) in events.iter().enumerate() {
                log.append(event.clone()).map_err(failed)?;
                if i == 1 && matches!(durability, Durability::Synced) {
                    log.sync().map_err(failed)?;
                }
            }
            Ok(())
        },
    )
    .await?;
    log.sync().map_err(failed)?;
    let [appended, synced] = samples.as_slice() else {
        return Err(fail!(
            "the log's appends were measured {} ways, not 2",
            samples.len()
        ));
    };
    let differences = Samples(
        synced
            .0
            .iter()
            .zip(&appended.0)
            .map(|(synced, appended)| synced.saturating_sub(*appended))
            .collect(),
    );
    let filesystem = filesystem_of(&dir).unwrap_or_else(|| "an unknown filesystem".into());
    table.figures.extend([
        (
            "a tool call's three events appended and the call synced, as agentd logs them".into(),
            spread(synced),
        ),
        (
            "the same three events appended, no sync".into(),
            spread(appended),
        ),
        (
            format!("the log's fsync per tool call (median of the pairwise differences), on {filesystem}"),
            ms(differences.median()),
        ),
    ]);
    Ok(())
}

/// The type of the filesystem that holds `path`, from the longest mount point above it.
fn filesystem_of(path: &Path) -> Option<String> {
    let path = path.canonicalize().ok()?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mounts
        .lines()
        .filter_map(|line| {
            let point = line.split(' ').nth(4)?;
            let fstype = line.split_once(" - ")?.1.split(' ').next()?;
            path.starts_with(point)
                .then(|| (point.len(), fstype.to_owned()))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, fstype)| fstype)
}
