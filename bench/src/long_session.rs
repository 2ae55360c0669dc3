//! agentd's resident memory along one long session: `agentd acp` with a scripted model driven
//! through many prompts, each a turn with one `bash` call through the helper, its memory read
//! at a few turns (with that turn's time) so that what it grows by per turn shows beside what
//! the session's history grows by.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::acp::Acp;
use crate::error::BenchError;
use crate::measure::Table;
use crate::memory::{mib, rss_kib};
use crate::setup::Setup;
use crate::stats::{ms, thousands};

/// The prompts of a full run's long session.
pub const FULL_TURNS: usize = 1000;
/// The prompts of a quick run's.
pub const QUICK_TURNS: usize = 20;
/// The turns after which agentd's memory is read (and after the last).
const CHECKPOINTS: [usize; 4] = [10, 100, 500, 1000];

/// The model's script: every prompt is answered by a step that calls `bash` and a step that
/// ends the turn, so the script lists two turns per prompt (the scripted model picks its turn
/// by the number of answers in the history; it does not repeat).
fn script(prompts: usize) -> String {
    let mut script = String::new();
    for prompt in 1..=prompts {
        script.push_str(&format!(
            "[[turn]]\ntext = \"Checking the build for turn {prompt}.\"\n\
             [[turn.tool_calls]]\nname = \"bash\"\n\
             arguments = {{ command = \"echo turn {prompt}: build ok\" }}\n\n\
             [[turn]]\ntext = \"Turn {prompt}: the build is fine.\"\n\n"
        ));
    }
    script
}

fn kib(bytes: u64) -> f64 {
    bytes as f64 / 1024.0
}

/// agentd's memory read after a turn: (the turn, resident KiB, the log's bytes, the turn's time).
type Mark = (usize, u64, u64, Duration);

pub async fn long_session(setup: &Setup, table: &mut Table) -> Result<(), BenchError> {
    let turns = setup.long_session_turns;
    let root = setup.scratch.join("long-session");
    std::fs::create_dir_all(&root).map_err(|e| fail!("cannot create {}: {e}", root.display()))?;
    let model = root.join("model.toml");
    std::fs::write(&model, script(turns))
        .map_err(|e| fail!("cannot write {}: {e}", model.display()))?;
    let mut acp = Acp::start(setup, &root, &model).await?;
    acp.initialize().await?;
    let id = acp.new_session(&setup.workspace).await?;
    let pid = acp.pid().ok_or_else(|| fail!("agentd acp has no pid"))?;
    let unknown = || fail!("cannot read the resident memory of agentd (pid {pid})");
    let opened = rss_kib(pid).ok_or_else(unknown)?;
    let log = root.join("state").join(format!("{id}.jsonl"));
    let log_bytes = || std::fs::metadata(&log).map_or(0, |m| m.len());
    let mut marks: Vec<Mark> = Vec::new();
    let started = Instant::now();
    for turn in 1..=turns {
        let text = format!("Turn {turn}: check that the build still passes.");
        let turn_started = Instant::now();
        let answer = acp
            .request(
                "session/prompt",
                json!({"sessionId": id, "prompt": [{"type": "text", "text": text}]}),
            )
            .await?;
        if answer.get("stopReason").and_then(Value::as_str) != Some("end_turn") {
            return Err(fail!("turn {turn} of the long session ended with {answer}"));
        }
        if CHECKPOINTS.contains(&turn) || turn == turns {
            let took = turn_started.elapsed();
            marks.push((turn, rss_kib(pid).ok_or_else(unknown)?, log_bytes(), took));
        }
    }
    let per_turn = started.elapsed() / u32::try_from(turns.max(1)).unwrap_or(u32::MAX);
    acp.finish().await;
    report(table, turns, opened, &marks, per_turn);
    Ok(())
}

/// The long session's figures: agentd's memory when the session opened and at every mark, what
/// it and the log grow by per turn, a turn's mean time, and how much history agentd keeps.
fn report(table: &mut Table, turns: usize, opened: u64, marks: &[Mark], per_turn: Duration) {
    let of = match turns {
        FULL_TURNS => format!("of {}", thousands(turns)),
        _ => format!(
            "of {turns} (a quick run: {turns} turns, not {})",
            thousands(FULL_TURNS)
        ),
    };
    table.figures.push((
        "agentd, the long session open, before its first prompt".into(),
        mib(opened),
    ));
    for (turn, rss, _, took) in marks {
        table.figures.push((
            format!("agentd after turn {} {of}", thousands(*turn)),
            format!("{}, that turn {}", mib(*rss), ms(*took)),
        ));
    }
    table.figures.extend(growth(marks));
    table.figures.push((
        "one turn of the long session (a prompt, one `bash` call through the helper, two model \
         steps), mean"
            .into(),
        ms(per_turn),
    ));
    table.figures.push((
        "the history agentd keeps".into(),
        "all of it: no `model.context_window` is configured (agentd's default), so the history \
         is never compacted; every record of the session stays in memory and each model \
         request carries the whole history"
            .into(),
    ));
}

/// What agentd's memory and the session's log grow by per turn, from the turn-100 reading on
/// (or the first, in a short run: the start-up's allocations and the first turns' warm-up are
/// behind) to the last; none when the last is that reading.
fn growth(marks: &[Mark]) -> Option<(String, String)> {
    let from = marks.iter().find(|m| m.0 >= 100).or(marks.first());
    let (Some(&(a, rss_a, log_a, _)), Some(&(b, rss_b, log_b, _))) = (from, marks.last()) else {
        return None;
    };
    if b <= a {
        return None;
    }
    let turns_between = (b - a) as f64;
    Some((
        format!("growth per turn, turn {} to {}", thousands(a), thousands(b)),
        format!(
            "{:.1} KiB of memory; the session log {:.1} KiB",
            (rss_b as f64 - rss_a as f64) / turns_between,
            (kib(log_b) - kib(log_a)) / turns_between
        ),
    ))
}
