//! `agentd sessions list`, `agentd sessions show ID` and `agentd sessions audit ID`: what the
//! session logs under the state directory say, read without changing them, and safe to print:
//! a log holds what commands printed and what a model wrote, so every line is passed through
//! [`terminal::visible`].

use std::path::{Path, PathBuf};

use super::audit;
use crate::session::audit::trail;
use crate::session::fold::{Summary, summarize, transcript};
use crate::session::log::{self, LogError, list_ids, read_log, read_log_around_damage};
use crate::terminal;

/// `sessions show` could not show the session.
#[derive(Debug, thiserror::Error)]
pub enum ShowError {
    #[error(
        "there is no session {id} in {}; `agentd sessions list` shows the sessions there",
        dir.display()
    )]
    Unknown { id: String, dir: PathBuf },
    #[error(
        "{prefix} begins the ids of {} sessions in {} ({}); give more of the id",
        matches.len(),
        dir.display(),
        matches.join(", ")
    )]
    Ambiguous {
        prefix: String,
        dir: PathBuf,
        matches: Vec<String>,
    },
    #[error(transparent)]
    Log(LogError),
    /// The trail could not be written as JSON (it holds nothing that cannot be).
    #[error("cannot write the audit trail of session {id} as JSON: {source}")]
    Json {
        id: String,
        source: serde_json::Error,
    },
}

/// How `sessions audit` prints the trail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditFormat {
    Text,
    Json,
}

/// What `sessions list` found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Listing {
    /// For standard output: one line per session, the most recently updated first, or one line
    /// saying there are none; terminal-safe.
    pub lines: Vec<String>,
    /// For standard error: warnings (a torn last line, which a crash can leave).
    pub warnings: Vec<String>,
    /// For standard error: logs that could not be read, naming file and line.
    pub errors: Vec<String>,
}

/// Lists the sessions under `dir`.
pub fn list(dir: &Path) -> Result<Listing, LogError> {
    let mut listing = Listing::default();
    let mut summaries: Vec<Summary> = Vec::new();
    for id in list_ids(dir)? {
        match read_log(dir, &id) {
            Ok((records, report)) => {
                if let Some(bytes) = report.dropped_torn_bytes {
                    listing.warnings.push(torn_warning(dir, &id, bytes));
                }
                summaries.push(summarize(&records));
            }
            Err(e) => listing.errors.push(e.to_string()),
        }
    }
    if summaries.is_empty() {
        if listing.errors.is_empty() {
            listing
                .lines
                .push(terminal::visible(&format!("no sessions in {}", dir.display())).into_owned());
        }
        return Ok(listing);
    }
    summaries.sort_by(|a, b| (b.updated_ms, &b.id).cmp(&(a.updated_ms, &a.id)));
    let turns: Vec<String> = summaries
        .iter()
        .map(|s| match s.turns {
            1 => "1 turn".to_owned(),
            n => format!("{n} turns"),
        })
        .collect();
    let width = turns.iter().map(String::len).max().unwrap_or(0);
    for (summary, turns) in summaries.iter().zip(turns) {
        let line = format!(
            "{}  {}  {turns:>width$}  {}  {}",
            summary.id,
            utc_minute(summary.updated_ms),
            summary.cwd.display(),
            summary.title.as_deref().unwrap_or("(no prompt yet)"),
        );
        listing.lines.push(terminal::visible(&line).into_owned());
    }
    Ok(listing)
}

/// The transcript of session `id` under `dir`, terminal-safe, and any warning about its log.
/// `id` may be the beginning of one session's id only.
pub fn show(dir: &Path, id: &str) -> Result<(String, Vec<String>), ShowError> {
    let id = &resolve(dir, id)?;
    let (records, report) = read_log(dir, id).map_err(|e| match e {
        LogError::NotFound(id) => ShowError::Unknown {
            id,
            dir: dir.to_owned(),
        },
        e => ShowError::Log(e),
    })?;
    let warnings = report
        .dropped_torn_bytes
        .map(|bytes| torn_warning(dir, id, bytes))
        .into_iter()
        .collect();
    Ok((
        terminal::visible(&transcript(&records)).into_owned(),
        warnings,
    ))
}

/// The audit trail of session `id` under `dir` (see [`crate::session::audit`]) as `format`
/// says, terminal-safe, and any warning about its log: a torn last line, and each malformed
/// line, which is left out and the rest audited. `id` may be the beginning of one session's id
/// only.
pub fn audit(
    dir: &Path,
    id: &str,
    format: AuditFormat,
) -> Result<(String, Vec<String>), ShowError> {
    let id = &resolve(dir, id)?;
    let (records, report) = read_log_around_damage(dir, id).map_err(|e| match e {
        LogError::NotFound(id) => ShowError::Unknown {
            id,
            dir: dir.to_owned(),
        },
        e => ShowError::Log(e),
    })?;
    let mut warnings: Vec<String> = report
        .dropped_torn_bytes
        .map(|bytes| torn_warning(dir, id, bytes))
        .into_iter()
        .collect();
    warnings.extend(report.skipped.iter().map(|line| {
        format!("warning: {line}; the line is left out, so the trail may lack what it held")
    }));
    let entries = trail(&records);
    let out = match format {
        AuditFormat::Text => audit::text(&entries),
        AuditFormat::Json => audit::json(&entries).map_err(|source| ShowError::Json {
            id: id.clone(),
            source,
        })?,
    };
    Ok((out, warnings))
}

/// The one session id under `dir` that `given` is, or begins; only ids the directory lists
/// are ever returned, so nothing the user typed reaches a path.
pub(super) fn resolve(dir: &Path, given: &str) -> Result<String, ShowError> {
    let ids = list_ids(dir).map_err(ShowError::Log)?;
    if ids.iter().any(|id| id == given) {
        return Ok(given.to_owned());
    }
    let mut matches: Vec<String> = if given.is_empty() {
        Vec::new()
    } else {
        ids.into_iter().filter(|id| id.starts_with(given)).collect()
    };
    match matches.len() {
        1 => Ok(matches.remove(0)),
        0 => Err(ShowError::Unknown {
            id: given.to_owned(),
            dir: dir.to_owned(),
        }),
        _ => {
            matches.sort();
            Err(ShowError::Ambiguous {
                prefix: given.to_owned(),
                dir: dir.to_owned(),
                matches,
            })
        }
    }
}

fn torn_warning(dir: &Path, id: &str, bytes: usize) -> String {
    let path = log::path_of(dir, id).unwrap_or_else(|_| dir.join(id));
    format!(
        "warning: {}: the last line is incomplete ({bytes} bytes, left by an interrupted write) \
         and is not shown",
        path.display()
    )
}

pub use crate::clock::utc_minute;

#[cfg(test)]
mod tests {
    use std::fs::OpenOptions;
    use std::io::Write;

    use super::*;
    use crate::session::{Event, EventLog};
    use crate::test_support::Scratch;

    fn session(dir: &Path, cwd: &str, prompts: &[&str]) -> String {
        let id = log::new_id();
        drop(EventLog::create(dir, &id, Path::new(cwd)).expect("create"));
        let (mut log, _, _) = EventLog::open(dir, &id).expect("open");
        for (i, text) in prompts.iter().enumerate() {
            let turn = i as u64 + 1;
            log.append(Event::PromptSubmitted {
                turn,
                text: (*text).to_owned(),
            })
            .expect("prompt");
            log.append(Event::TurnStarted { turn }).expect("turn");
            log.append(Event::TurnEnded {
                turn,
                stop_reason: "end_turn".into(),
            })
            .expect("end");
        }
        log.sync().expect("sync");
        id
    }

    /// Sets every record of session `id` to `at_ms`, so the test decides the order by time
    /// instead of waiting for the clock.
    fn stamp(dir: &Path, id: &str, at_ms: u64) {
        let path = dir.join(format!("{id}.jsonl"));
        let text = std::fs::read_to_string(&path).expect("log");
        let lines: Vec<String> = text
            .lines()
            .map(|line| {
                let mut record: serde_json::Value = serde_json::from_str(line).expect("record");
                record["at_ms"] = serde_json::json!(at_ms);
                record.to_string()
            })
            .collect();
        std::fs::write(&path, lines.join("\n") + "\n").expect("rewrite");
    }

    #[test]
    fn an_empty_or_missing_directory_says_so_and_names_it() {
        let scratch = Scratch::new("sessions-empty");
        let missing = scratch.0.join("nothing-here");
        let listing = list(&missing).expect("lists");
        assert_eq!(
            listing.lines,
            [format!("no sessions in {}", missing.display())]
        );
        assert!(listing.warnings.is_empty() && listing.errors.is_empty());
    }

    #[test]
    fn sessions_are_listed_one_per_line_newest_first() {
        let scratch = Scratch::new("sessions-list");
        let dir = scratch.0.join("sessions");
        let older = session(&dir, "/srv/a", &["fix the build\nand more", "again"]);
        let newer = session(&dir, "/srv/b", &[]);
        stamp(&dir, &older, 1_000);
        stamp(&dir, &newer, 2_000);
        // Appending to the older session (now, long after both stamps) makes it the most
        // recently updated.
        let (mut log, _, _) = EventLog::open(&dir, &older).expect("open");
        log.append(Event::TurnStarted { turn: 3 }).expect("append");
        drop(log);

        let listing = list(&dir).expect("lists");
        assert!(listing.warnings.is_empty() && listing.errors.is_empty());
        assert_eq!(listing.lines.len(), 2, "{:?}", listing.lines);
        let first = &listing.lines[0];
        let last = &listing.lines[1];
        assert!(first.starts_with(&format!("{older}  ")), "{first}");
        assert!(
            first.ends_with("  3 turns  /srv/a  fix the build"),
            "{first}"
        );
        assert!(last.starts_with(&format!("{newer}  ")), "{last}");
        assert!(
            last.ends_with("  0 turns  /srv/b  (no prompt yet)"),
            "{last}"
        );
        // YYYY-MM-DD HH:MM after the id.
        let date = &first[older.len() + 2..older.len() + 18];
        let shape: String = date
            .chars()
            .map(|c| if c.is_ascii_digit() { 'd' } else { c })
            .collect();
        assert_eq!(shape, "dddd-dd-dd dd:dd", "{first}");
    }

    #[test]
    fn a_malformed_log_is_reported_with_file_and_line_and_the_others_still_listed() {
        let scratch = Scratch::new("sessions-malformed");
        let dir = scratch.0.join("sessions");
        let good = session(&dir, "/w", &["hello"]);
        let bad = session(&dir, "/w", &["hello"]);
        let path = log::path_of(&dir, &bad).expect("path");
        let mut file = OpenOptions::new().append(true).open(&path).expect("open");
        file.write_all(b"not json\n{}\n").expect("write");
        drop(file);

        let listing = list(&dir).expect("lists");
        assert_eq!(listing.lines.len(), 1);
        assert!(listing.lines[0].starts_with(&good), "{:?}", listing.lines);
        assert_eq!(listing.errors.len(), 1);
        let error = &listing.errors[0];
        assert!(error.contains(&format!("{}:5:", path.display())), "{error}");

        let err = show(&dir, &bad).expect_err("malformed");
        assert!(
            err.to_string().contains(&format!("{}:5:", path.display())),
            "{err}"
        );
    }

    #[test]
    fn a_torn_last_line_is_a_warning_and_the_rest_is_shown() {
        let scratch = Scratch::new("sessions-torn");
        let dir = scratch.0.join("sessions");
        let id = session(&dir, "/w", &["list the files"]);
        let path = log::path_of(&dir, &id).expect("path");
        let before = std::fs::read(&path).expect("read");
        let mut file = OpenOptions::new().append(true).open(&path).expect("open");
        file.write_all(br#"{"v":1,"seq":9,"at_ms":5,"type":"turn/st"#)
            .expect("tear");
        drop(file);

        let (text, warnings) = show(&dir, &id).expect("shows");
        assert!(text.contains("[turn 1] user: list the files"), "{text}");
        assert!(text.contains("[turn 1] ended: end_turn"), "{text}");
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].contains(&path.display().to_string()),
            "{warnings:?}"
        );

        let listing = list(&dir).expect("lists");
        assert_eq!(listing.lines.len(), 1);
        assert_eq!(listing.warnings, warnings);
        // Reading leaves the log as it was.
        assert!(std::fs::read(&path).expect("read").starts_with(&before));
    }

    #[test]
    fn show_prints_the_transcript() {
        let scratch = Scratch::new("sessions-show");
        let dir = scratch.0.join("sessions");
        let id = session(&dir, "/srv/p", &["hello there"]);
        let (text, warnings) = show(&dir, &id).expect("shows");
        assert!(warnings.is_empty());
        assert!(
            text.starts_with(&format!("session {id} in /srv/p")),
            "{text}"
        );
        assert!(text.contains("[turn 1] user: hello there"), "{text}");
    }

    #[test]
    fn show_and_list_print_controls_from_the_log_visibly() {
        let scratch = Scratch::new("sessions-controls");
        let dir = scratch.0.join("sessions");
        let id = session(&dir, "/w", &["title \x1b[2J"]);
        let (mut log, _, _) = EventLog::open(&dir, &id).expect("open");
        log.append(Event::ToolResult {
            turn: 1,
            call_id: "c1".into(),
            status: crate::session::ToolStatus::Completed,
            output: "copied\x1b]52;c;cm0gLXJmIH4=\x07\nup\x1b[2A\u{9b}K\rover\x08\x7f\tend".into(),
            facts: serde_json::json!({}),
            diff: None,
        })
        .expect("result");
        drop(log);

        let (text, _) = show(&dir, &id).expect("shows");
        assert!(
            !text
                .chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t'),
            "{text:?}"
        );
        assert!(text.contains("[turn 1] user: title \\x1b[2J"), "{text}");
        assert!(
            text.contains(
                "    copied\\x1b]52;c;cm0gLXJmIH4=\\x07\n    up\\x1b[2A\\u{9b}K\\x0dover\\x08\\x7f\tend"
            ),
            "{text}"
        );
        let listing = list(&dir).expect("lists");
        assert!(listing.lines[0].ends_with("title \\x1b[2J"), "{listing:?}");
    }

    #[test]
    fn an_unknown_id_names_the_directory_looked_in() {
        let scratch = Scratch::new("sessions-unknown");
        let dir = scratch.0.join("sessions");
        session(&dir, "/w", &[]);
        let err = show(&dir, "0123abcd").expect_err("unknown");
        let text = err.to_string();
        assert!(text.contains("0123abcd"), "{text}");
        assert!(text.contains(&dir.display().to_string()), "{text}");
        assert!(show(&dir, "../etc/passwd").is_err());
    }

    #[test]
    fn show_takes_the_beginning_of_one_id_and_names_every_match_of_an_ambiguous_one() {
        let scratch = Scratch::new("sessions-prefix");
        let dir = scratch.0.join("sessions");
        let a = session(&dir, "/w", &["first"]);
        let b = session(&dir, "/w", &["second"]);
        // The ids share their beginning (the time they were made) and differ later.
        let common = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
        let (text, _) = show(&dir, &a[..=common]).expect("a's unique beginning");
        assert!(text.contains("first") && !text.contains("second"), "{text}");
        // The control: the whole id shows the same.
        assert_eq!(show(&dir, &a).expect("a").0, text);
        let err = show(&dir, &a[..common]).expect_err("both begin so");
        assert!(matches!(&err, ShowError::Ambiguous { matches, .. } if matches.len() == 2));
        let said = err.to_string();
        assert!(said.contains(&a) && said.contains(&b), "{said}");
        assert!(matches!(show(&dir, ""), Err(ShowError::Unknown { .. })));
    }
}
