//! One append-only JSONL file per session.
//!
//! Appends are single `write` calls of whole lines. [`EventLog::sync`] fsyncs; callers sync at
//! turn boundaries and before side effects that must survive a crash (a tool call is logged and
//! synced before it runs). A crash can leave a torn last line: loading drops it with a warning
//! and truncates the file back to the last whole line, so the next append starts clean. A write
//! the file system takes only in part (a full disk) is cut off the same way at once, and again
//! before the next append if that cut failed: a later append never lands after a torn line,
//! where it would make a malformed line in the middle. Any other malformed line is an error
//! naming the file and line — nothing is silently skipped.

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use super::event::{EVENT_VERSION, Event, Record};
use crate::depth::{Depth, DepthOrigin, InvalidDepth};

/// Why a log could not be opened or read.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("session {0} does not exist")]
    NotFound(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}: not a session event: {source}")]
    Malformed {
        path: PathBuf,
        line: usize,
        source: serde_json::Error,
    },
    #[error(
        "{path}:{line}: written by a newer agentd (event version {found}, this one reads {EVENT_VERSION})"
    )]
    TooNew {
        path: PathBuf,
        line: usize,
        found: u32,
    },
    /// A stored depth that is not one (a damaged or hand-edited line); the message names the
    /// value, the file and the line.
    #[error("{0}")]
    BadDepth(Box<InvalidDepth>),
    #[error("{path}: the first event is not session/created")]
    NoHeader { path: PathBuf },
    #[error("invalid session id {0:?}")]
    BadId(String),
    /// The directory of session logs cannot be made, written in or read: a read-only home or
    /// state directory, a path through a file. Said like a configuration error, with the
    /// settings that choose another directory.
    #[error(
        "cannot {what} the directory of session logs {}: {source}; {}, or use another one: \
         --state-dir DIR, AGENTD_STATE_DIR=DIR or session.state_dir in agentd.toml choose it, \
         and without them it is $XDG_STATE_HOME/agentd/sessions (else \
         ~/.local/state/agentd/sessions), so setting XDG_STATE_HOME moves it too",
        dir.display(),
        what.fix()
    )]
    StateDir {
        dir: PathBuf,
        what: StateDirUse,
        source: std::io::Error,
    },
}

/// What agentd could not do with the directory of session logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateDirUse {
    /// Make it (and the directories above it).
    Create,
    /// Make a session's log in it.
    Write,
    /// List the logs in it.
    Read,
}

impl StateDirUse {
    /// What makes the directory usable for this.
    fn fix(self) -> &'static str {
        match self {
            StateDirUse::Create | StateDirUse::Write => "make it a directory agentd can write",
            StateDirUse::Read => "make it a directory agentd can read",
        }
    }
}

impl std::fmt::Display for StateDirUse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StateDirUse::Create => "create",
            StateDirUse::Write => "create a session log in",
            StateDirUse::Read => "read",
        })
    }
}

/// An open session log, positioned for appending.
#[derive(Debug)]
pub struct EventLog {
    path: PathBuf,
    file: File,
    next_seq: u64,
    /// The length of the whole lines in the file.
    len: u64,
    /// A failed append may have left part of its line after them.
    torn: bool,
}

/// What loading a log found besides its records.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// A torn last line was dropped (its byte length).
    pub dropped_torn_bytes: Option<usize>,
    /// The malformed lines left out, each said as [`LogError::Malformed`] says it (file, line,
    /// why); only [`read_log_around_damage`] leaves any out, every other read fails on one.
    pub skipped: Vec<String>,
}

/// What a read does with a malformed line that is not the last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Damage {
    /// Fail, naming the file and line: a session is never replayed without a record.
    Refuse,
    /// Leave it out and say so in the report: for reading what the rest holds.
    Skip,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Session ids are what agentd generates: hex digits and dashes. Anything else could name a
/// path outside the sessions directory.
pub fn check_id(id: &str) -> Result<(), LogError> {
    let ok =
        !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(LogError::BadId(id.to_owned()))
    }
}

/// A fresh random session id.
pub fn new_id() -> String {
    let mut bytes = [0u8; 16];
    if let Ok(mut f) = File::open("/dev/urandom") {
        let _ = std::io::Read::read_exact(&mut f, &mut bytes);
    }
    let ms = now_ms();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{ms:012x}-{}", &hex[..20])
}

/// The mode of a session log: the user's only.
const PRIVATE_FILE: u32 = 0o600;
/// The mode of a directory agentd makes for session logs.
const PRIVATE_DIR: u32 = 0o700;

/// The log file of session `id` under `dir`.
pub fn path_of(dir: &Path, id: &str) -> Result<PathBuf, LogError> {
    check_id(id)?;
    Ok(dir.join(format!("{id}.jsonl")))
}

impl EventLog {
    /// Creates the log of a new session and writes (and syncs) its first event, returned.
    pub fn create(dir: &Path, id: &str, cwd: &Path) -> Result<(EventLog, Record), LogError> {
        let unusable = |what| {
            move |source| LogError::StateDir {
                dir: dir.to_owned(),
                what,
                source,
            }
        };
        // Only the user reads what a session holds (prompts, file contents, command output):
        // the directories agentd makes are 0700, the logs 0600.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(PRIVATE_DIR)
            .create(dir)
            .map_err(unusable(StateDirUse::Create))?;
        let path = path_of(dir, id)?;
        let file = OpenOptions::new()
            .append(true)
            .create_new(true)
            .mode(PRIVATE_FILE)
            .open(&path)
            .map_err(unusable(StateDirUse::Write))?;
        let mut log = EventLog {
            path,
            file,
            next_seq: 0,
            len: 0,
            torn: false,
        };
        let header = Event::SessionCreated {
            id: id.to_owned(),
            cwd: cwd.to_owned(),
            agent: format!("agentd {}", env!("CARGO_PKG_VERSION")),
        };
        let first = match log
            .append(header)
            .and_then(|first| log.sync().map(|()| first))
        {
            Ok(first) => first,
            // A log without its header would never load: a session that could not start leaves
            // none.
            Err(e) => {
                let _ = std::fs::remove_file(&log.path);
                return Err(e);
            }
        };
        // The directory entry must survive a crash too.
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        Ok((log, first))
    }

    /// Opens an existing log for appending, returning every record in it.
    pub fn open(dir: &Path, id: &str) -> Result<(EventLog, Vec<Record>, LoadReport), LogError> {
        let path = path_of(dir, id)?;
        if !path.exists() {
            return Err(missing(dir, id));
        }
        let (records, report, good_len) = read_records(&path, Damage::Refuse)?;
        let mut file = OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(|source| LogError::Io {
                path: path.clone(),
                source,
            })?;
        // A log written before logs were private is made so when it is opened again.
        let private = std::fs::Permissions::from_mode(PRIVATE_FILE);
        file.set_permissions(private)
            .map_err(|source| LogError::Io {
                path: path.clone(),
                source,
            })?;
        if report.dropped_torn_bytes.is_some() {
            file.set_len(good_len as u64)
                .and_then(|()| file.seek(SeekFrom::End(0)).map(drop))
                .and_then(|()| file.sync_all())
                .map_err(|source| LogError::Io {
                    path: path.clone(),
                    source,
                })?;
        }
        let next_seq = records.last().map_or(0, |r| r.seq + 1);
        Ok((
            EventLog {
                path,
                file,
                next_seq,
                len: good_len as u64,
                torn: false,
            },
            records,
            report,
        ))
    }

    /// Appends one event as one line. Not synced: see [`EventLog::sync`].
    pub fn append(&mut self, event: Event) -> Result<Record, LogError> {
        self.append_as(None, event)
    }

    /// Appends one event of the child agent `agent` (`None`: the top level's or the
    /// session's), tagged with it. Not synced.
    pub fn append_as(&mut self, agent: Option<&str>, event: Event) -> Result<Record, LogError> {
        let record = Record {
            v: EVENT_VERSION,
            seq: self.next_seq,
            at_ms: now_ms(),
            agent: agent.map(str::to_owned),
            event,
        };
        let mut line = serde_json::to_vec(&record).map_err(|source| LogError::Malformed {
            path: self.path.clone(),
            line: 0,
            source,
        })?;
        line.push(b'\n');
        self.cut_torn()?;
        if let Err(source) = self.file.write_all(&line) {
            self.torn = true;
            // At once if it can; else before the next append (which fails while it cannot).
            let _ = self.cut_torn();
            return Err(LogError::Io {
                path: self.path.clone(),
                source,
            });
        }
        self.len += line.len() as u64;
        self.next_seq += 1;
        Ok(record)
    }

    /// Cuts the file back to its whole lines after a failed append.
    fn cut_torn(&mut self) -> Result<(), LogError> {
        if self.torn {
            self.file.set_len(self.len).map_err(|source| LogError::Io {
                path: self.path.clone(),
                source,
            })?;
            self.torn = false;
        }
        Ok(())
    }

    /// Makes every appended event durable.
    pub fn sync(&mut self) -> Result<(), LogError> {
        self.file.sync_data().map_err(|source| LogError::Io {
            path: self.path.clone(),
            source,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Reads a log without opening it for writing (for listing and showing).
pub fn read_log(dir: &Path, id: &str) -> Result<(Vec<Record>, LoadReport), LogError> {
    let path = path_of(dir, id)?;
    if !path.exists() {
        return Err(missing(dir, id));
    }
    read_records(&path, Damage::Refuse).map(|(records, report, _)| (records, report))
}

/// Reads a log as [`read_log`] does, but leaves out a malformed line instead of failing, and
/// names each in [`LoadReport::skipped`]: for reading what the rest of a damaged log holds
/// (`agentd sessions audit`), never for replaying a session. The first record must still be
/// the session's, and a line of a newer agentd still fails the read.
pub fn read_log_around_damage(dir: &Path, id: &str) -> Result<(Vec<Record>, LoadReport), LogError> {
    let path = path_of(dir, id)?;
    if !path.exists() {
        return Err(missing(dir, id));
    }
    read_records(&path, Damage::Skip).map(|(records, report, _)| (records, report))
}

/// Why the log of session `id` is not in `dir`: the directory cannot be read (a path through a
/// file, a directory agentd may not search), or there is no such session in it (a directory not
/// made yet holds none).
fn missing(dir: &Path, id: &str) -> LogError {
    let unusable = match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => None,
        Ok(_) => Some(std::io::Error::from(std::io::ErrorKind::NotADirectory)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => Some(e),
    };
    match unusable {
        Some(source) => LogError::StateDir {
            dir: dir.to_owned(),
            what: StateDirUse::Read,
            source,
        },
        None => LogError::NotFound(id.to_owned()),
    }
}

/// Why one line of a log is not a record.
enum LineError {
    /// Not JSON, or not an event this agentd knows.
    Json(serde_json::Error),
    /// Written by a newer agentd: the line's event version.
    TooNew(u64),
    /// An `agent/started` whose depth is not a depth.
    Depth(InvalidDepth),
}

/// One line (`line_no` of the log at `path`) as a record, its event version checked before its
/// shape, and a child agent's stored depth through the checks every depth passes.
fn parse_line(line: &[u8], path: &Path, line_no: usize) -> Result<Record, LineError> {
    let value: serde_json::Value = serde_json::from_slice(line).map_err(LineError::Json)?;
    let v = value
        .get("v")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0);
    if v > u64::from(EVENT_VERSION) {
        return Err(LineError::TooNew(v));
    }
    if value.get("type").and_then(serde_json::Value::as_str) == Some("agent/started") {
        let origin = DepthOrigin::new(
            "depth",
            format!(
                "the agent/started record of the session log {}, line {line_no}",
                path.display()
            ),
        );
        let stored = value.get("depth").unwrap_or(&serde_json::Value::Null);
        Depth::from_json(stored, &origin).map_err(LineError::Depth)?;
    }
    serde_json::from_value(value).map_err(LineError::Json)
}

/// Parses every line. A last line without its newline that does not parse is torn: dropped and
/// reported; any other that does not parse is as `damage` says. Returns the byte length of the
/// whole lines read.
fn read_records(path: &Path, damage: Damage) -> Result<(Vec<Record>, LoadReport, usize), LogError> {
    let bytes = std::fs::read(path).map_err(|source| LogError::Io {
        path: path.to_owned(),
        source,
    })?;
    let mut records = Vec::new();
    let mut report = LoadReport::default();
    let mut offset = 0usize;
    let mut line_no = 0usize;
    for piece in bytes.split_inclusive(|b| *b == b'\n') {
        line_no += 1;
        let (line, complete) = match piece.strip_suffix(b"\n") {
            Some(line) => (line, true),
            None => (piece, false),
        };
        match parse_line(line, path, line_no) {
            Ok(record) => records.push(record),
            Err(_) if !complete => {
                report.dropped_torn_bytes = Some(line.len());
                break;
            }
            Err(LineError::TooNew(found)) => {
                return Err(LogError::TooNew {
                    path: path.to_owned(),
                    line: line_no,
                    found: u32::try_from(found).unwrap_or(u32::MAX),
                });
            }
            Err(LineError::Depth(invalid)) if damage == Damage::Skip => {
                report
                    .skipped
                    .push(LogError::BadDepth(Box::new(invalid)).to_string());
            }
            Err(LineError::Depth(invalid)) => return Err(LogError::BadDepth(Box::new(invalid))),
            Err(LineError::Json(source)) => {
                let malformed = LogError::Malformed {
                    path: path.to_owned(),
                    line: line_no,
                    source,
                };
                match damage {
                    Damage::Skip => report.skipped.push(malformed.to_string()),
                    Damage::Refuse => return Err(malformed),
                }
            }
        }
        offset += line.len() + usize::from(complete);
    }
    if !matches!(
        records.first().map(|r| &r.event),
        Some(Event::SessionCreated { .. })
    ) {
        return Err(LogError::NoHeader {
            path: path.to_owned(),
        });
    }
    Ok((records, report, offset))
}

/// The ids of every session under `dir`, oldest first (ids start with their creation time).
pub fn list_ids(dir: &Path) -> Result<Vec<String>, LogError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(LogError::StateDir {
                dir: dir.to_owned(),
                what: StateDirUse::Read,
                source,
            });
        }
    };
    let mut ids: Vec<String> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let id = name.strip_suffix(".jsonl")?.to_owned();
            check_id(&id).ok().map(|()| id)
        })
        .collect();
    ids.sort();
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::Scratch;

    /// A directory for logs that does not exist yet, removed with the returned guard.
    fn scratch(tag: &str) -> (Scratch, PathBuf) {
        let scratch = Scratch::new(&format!("log-{tag}"));
        let dir = scratch.0.join("sessions");
        (scratch, dir)
    }

    fn mode_of(path: &Path) -> u32 {
        std::fs::metadata(path)
            .expect("metadata")
            .permissions()
            .mode()
            & 0o777
    }

    #[test]
    fn logs_and_the_directories_made_for_them_are_the_users_only() {
        let (scratch, _) = scratch("private");
        // Made under the usual umask (022), which alone would leave both readable by anyone.
        let dir = scratch.0.join("state/agentd/sessions");
        let id = new_id();
        let (log, _) = EventLog::create(&dir, &id, Path::new("/srv/ws")).expect("create");
        drop(log);
        assert_eq!(mode_of(&dir), 0o700);
        assert_eq!(
            mode_of(&scratch.0.join("state/agentd")),
            0o700,
            "parents made too"
        );
        let path = path_of(&dir, &id).expect("path");
        assert_eq!(mode_of(&path), 0o600);
        // A log an older agentd left readable is made private when it is opened again.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        assert_eq!(mode_of(&path), 0o644, "the control");
        EventLog::open(&dir, &id).expect("open");
        assert_eq!(mode_of(&path), 0o600);
    }

    #[test]
    fn a_state_directory_that_cannot_be_made_or_read_is_said_with_the_settings_that_move_it() {
        let (scratch, _) = scratch("state-dir");
        // A path through a regular file fails for root too (ENOTDIR), unlike a read-only mode.
        let file = scratch.0.join("file");
        std::fs::write(&file, "x").expect("file");
        let dir = file.join("sessions");
        let Err(created) = EventLog::create(&dir, &new_id(), Path::new("/srv/ws")) else {
            panic!("a log under a regular file was created");
        };
        assert!(
            matches!(&created, LogError::StateDir { what: StateDirUse::Create, dir: d, .. } if *d == dir),
            "{created:?}"
        );
        let message = created.to_string();
        assert!(
            message.starts_with(&format!(
                "cannot create the directory of session logs {}: ",
                dir.display()
            )),
            "{message}"
        );
        for setting in [
            "--state-dir DIR",
            "AGENTD_STATE_DIR",
            "session.state_dir",
            "XDG_STATE_HOME",
        ] {
            assert!(message.contains(setting), "{setting}: {message}");
        }
        let listed = list_ids(&dir).expect_err("a listing under a regular file");
        assert!(
            listed
                .to_string()
                .starts_with("cannot read the directory of session logs"),
            "{listed}"
        );
        for unread in [
            read_log(&dir, "0123-abcd").map(drop),
            EventLog::open(&dir, "0123-abcd").map(drop),
        ] {
            assert!(
                matches!(
                    unread,
                    Err(LogError::StateDir {
                        what: StateDirUse::Read,
                        ..
                    })
                ),
                "{unread:?}"
            );
        }
        // The control: the same calls in a directory.
        let usable = scratch.0.join("state/sessions");
        let id = new_id();
        EventLog::create(&usable, &id, Path::new("/srv/ws")).expect("create");
        assert_eq!(list_ids(&usable).expect("list").len(), 1);
        read_log(&usable, &id).expect("read");
        assert!(matches!(
            read_log(&usable, "0123-abcd"),
            Err(LogError::NotFound(_))
        ));
    }

    #[test]
    fn a_created_log_reopens_with_every_event_in_order() {
        let (_scratch, dir) = scratch("reopen");
        let id = new_id();
        let (mut log, _) = EventLog::create(&dir, &id, Path::new("/srv/ws")).expect("create");
        log.append(Event::TurnStarted { turn: 1 }).expect("append");
        log.append(Event::PromptSubmitted {
            turn: 1,
            text: "hi".into(),
        })
        .expect("append");
        log.sync().expect("sync");
        drop(log);
        let (mut log, records, report) = EventLog::open(&dir, &id).expect("open");
        assert_eq!(report, LoadReport::default());
        assert_eq!(records.len(), 3);
        assert_eq!(records.iter().map(|r| r.seq).collect::<Vec<_>>(), [0, 1, 2]);
        let next = log.append(Event::TurnStarted { turn: 2 }).expect("append");
        assert_eq!(next.seq, 3);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_torn_last_line_is_dropped_with_a_warning_and_cut_from_the_file() {
        let (_scratch, dir) = scratch("torn");
        let id = new_id();
        let (mut log, _) = EventLog::create(&dir, &id, Path::new("/w")).expect("create");
        log.append(Event::TurnStarted { turn: 1 }).expect("append");
        let path = log.path().to_owned();
        drop(log);
        let mut f = OpenOptions::new().append(true).open(&path).expect("open");
        f.write_all(br#"{"v":1,"seq":2,"at_ms":5,"type":"turn/st"#)
            .expect("tear");
        drop(f);
        let (mut log, records, report) = EventLog::open(&dir, &id).expect("open");
        assert_eq!(records.len(), 2);
        assert!(report.dropped_torn_bytes.is_some());
        log.append(Event::TurnStarted { turn: 2 }).expect("append");
        drop(log);
        let (records, report) = read_log(&dir, &id).expect("read");
        assert_eq!(
            records.len(),
            3,
            "the new event follows the last whole line"
        );
        assert_eq!(report, LoadReport::default());
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn after_a_failed_append_the_next_one_starts_after_the_last_whole_line() {
        let (_scratch, dir) = scratch("failed-append");
        let id = new_id();
        let (mut log, _) = EventLog::create(&dir, &id, Path::new("/w")).expect("create");
        log.append(Event::TurnStarted { turn: 1 }).expect("append");
        let path = log.path().to_owned();
        // What a full disk leaves: part of a line, and a cut that failed too (a read-only
        // handle can neither write nor cut).
        let mut other = OpenOptions::new().append(true).open(&path).expect("open");
        other
            .write_all(br#"{"v":1,"seq":2,"at_ms":5,"ty"#)
            .expect("part");
        let writable = std::mem::replace(&mut log.file, File::open(&path).expect("read-only"));
        assert!(log.append(Event::TurnStarted { turn: 2 }).is_err());
        log.file = writable;
        log.append(Event::TurnStarted { turn: 3 }).expect("append");
        drop(log);
        let (records, report) = read_log(&dir, &id).expect("read");
        assert_eq!(report, LoadReport::default(), "no torn line left");
        let seqs: Vec<u64> = records.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, [0, 1, 2]);
        assert_eq!(records[2].event, Event::TurnStarted { turn: 3 });
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_malformed_line_in_the_middle_is_an_error_naming_the_line() {
        let (_scratch, dir) = scratch("malformed");
        let id = new_id();
        let (log, _) = EventLog::create(&dir, &id, Path::new("/w")).expect("create");
        let path = log.path().to_owned();
        drop(log);
        let mut f = OpenOptions::new().append(true).open(&path).expect("open");
        f.write_all(b"garbage\n{}\n").expect("write");
        drop(f);
        let err = read_log(&dir, &id).unwrap_err().to_string();
        assert!(err.contains(":2:"), "{err}");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_log_from_a_newer_agentd_is_refused() {
        let (_scratch, dir) = scratch("newer");
        let id = new_id();
        let (log, _) = EventLog::create(&dir, &id, Path::new("/w")).expect("create");
        let path = log.path().to_owned();
        drop(log);
        let mut f = OpenOptions::new().append(true).open(&path).expect("open");
        f.write_all(b"{\"v\":99,\"seq\":1,\"at_ms\":1,\"type\":\"x/y\"}\n")
            .expect("write");
        drop(f);
        assert!(matches!(
            read_log(&dir, &id),
            Err(LogError::TooNew { found: 99, .. })
        ));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_stored_depth_is_read_back_through_the_depth_checks() {
        let (_scratch, dir) = scratch("depth");
        let started = |depth: &str| {
            format!(
                "{{\"v\":1,\"seq\":1,\"at_ms\":1,\"type\":\"agent/started\",\"agent\":\
                 \"agent-1\",\"parent\":\"agent-0\",\"depth\":{depth},\"persona\":\"general\",\
                 \"call_id\":\"call_1_1\"}}\n"
            )
        };
        let log_with = |depth: &str| {
            let id = new_id();
            let (log, _) = EventLog::create(&dir, &id, Path::new("/w")).expect("create");
            let path = log.path().to_owned();
            drop(log);
            let mut f = OpenOptions::new().append(true).open(&path).expect("open");
            f.write_all(started(depth).as_bytes()).expect("write");
            (id, path)
        };
        // The control: a depth that is one reads back.
        let (id, _) = log_with("1");
        let (records, _) = read_log(&dir, &id).expect("a depth of 1 reads back");
        assert!(matches!(
            records[1].event,
            Event::AgentStarted { depth: 1, .. }
        ));
        for (written, shown, reason) in [
            ("-1", "-1", "it is negative"),
            ("-0", "-0.0", "it is negative zero"),
            ("1.5", "1.5", "it has a fractional part"),
            ("1.0", "1.0", "it is written as a floating-point number"),
            ("9007199254740992", "9007199254740992", "it is larger than"),
            ("\"1\"", "\"1\"", "it is a string, not a number"),
            ("null", "null", "it is null, not a number"),
            ("{}", "{}", "it is an object, not a number"),
        ] {
            let (id, path) = log_with(written);
            let err = read_log(&dir, &id).expect_err(written);
            assert!(matches!(err, LogError::BadDepth(_)), "{written}: {err:?}");
            let text = err.to_string();
            let expected = format!(
                "depth = {shown} in the agent/started record of the session log {}, line 2 is \
                 not a depth ({reason}",
                path.display()
            );
            assert!(text.starts_with(&expected), "{written}: {text}");
            // Opening it for a session is refused the same way.
            assert!(
                matches!(EventLog::open(&dir, &id), Err(LogError::BadDepth(_))),
                "{written}"
            );
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn ids_that_could_escape_the_directory_are_rejected() {
        for bad in ["../x", "a/b", "", "x.jsonl", "ABC g"] {
            assert!(check_id(bad).is_err(), "{bad}");
        }
        assert!(check_id(&new_id()).is_ok());
    }

    #[test]
    fn listing_returns_sessions_oldest_first_and_ignores_other_files() {
        let (_scratch, dir) = scratch("list");
        let a = new_id();
        EventLog::create(&dir, &a, Path::new("/w")).expect("a");
        std::fs::write(dir.join("notes.txt"), "x").expect("other file");
        assert_eq!(list_ids(&dir).expect("list"), vec![a]);
        assert!(
            list_ids(&dir.join("missing"))
                .expect("missing dir")
                .is_empty()
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
