//! What confine-helper does for the file tools: it runs the file reader or writer
//! (`confine-file-io`) as a command under exactly the plan a `bash` command of the call's mode
//! gets; here is how they are asked, and what their reports and ends mean.

use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use confine_protocol::{Mode, Policy};
use tokio::net::unix::pipe::Receiver;

use super::text::as_text;
use crate::command::Facts;
use crate::denial::host::Access;
use crate::denial::{self, Scope};
use crate::helper_client::{CommandHandle, EditSpec, KeepPrevious, Outcome, ReadSpec, WriteSpec};
use crate::session::Before;
use crate::tools::env::ToolEnv;

/// How long a confined read or write may take.
const FILE_OP_TIMEOUT_MS: u64 = 60_000;
/// The largest report the writer sends.
const REPORT_CAP: u64 = 64 * 1024;

/// The largest file `read_file` and `edit_file` take in; larger ones are for `bash` with
/// `head`, `tail` or `sed -n`.
pub const MAX_TEXT_FILE: u64 = 32 * 1024 * 1024;

/// Why a read or write did not happen.
pub(super) enum OpError {
    /// The sandbox refused it: the sentence, and the run's facts.
    Denied(String, Box<Facts>),
    /// Anything else.
    Failed(String, Option<Box<Facts>>),
}

impl OpError {
    pub(super) fn failed(why: impl std::fmt::Display) -> OpError {
        OpError::Failed(why.to_string(), None)
    }
}

/// The policy a file operation of this session runs under: its commands' ([`ToolEnv::policy`])
/// without their sockets. The helper's reader and writer open no socket, and a backend that
/// cannot keep loopback sockets or named Unix sockets to the sandbox refuses a request that asks
/// for them: a file operation must not fail for a setting it does not use.
fn policy(env: &ToolEnv, mode: Mode) -> Result<Policy, OpError> {
    let mut policy = env.policy(mode).map_err(OpError::failed)?;
    policy.local_binding = false;
    policy.unix_sockets.clear();
    Ok(policy)
}

/// Everything from `pipe` up to `cap` bytes (one more shows it was over).
async fn drain(mut pipe: Receiver, cap: u64) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let mut bytes = Vec::new();
    let _ = (&mut pipe).take(cap).read_to_end(&mut bytes).await;
    bytes
}

/// Waits for a confined file operation to end while reading its report (and its content, for
/// a read); returns the run's facts, the report and the content.
async fn settle(
    handle: CommandHandle,
    policy: &Policy,
    report: Receiver,
    content: Option<Receiver>,
) -> (Facts, Vec<u8>, Vec<u8>) {
    let content = async {
        match content {
            Some(pipe) => drain(pipe, MAX_TEXT_FILE + 1).await,
            None => Vec::new(),
        }
    };
    let (outcome, report, content) =
        tokio::join!(handle.wait(), drain(report, REPORT_CAP), content);
    let started = matches!(outcome, Outcome::Exited(_));
    (
        Facts::from_outcome(outcome, started).given(policy),
        report,
        content,
    )
}

/// What a confined file operation tried, for judging its failure.
struct Tried<'a> {
    scope: Scope,
    path: &'a Path,
    access: Access,
}

impl Tried<'_> {
    fn of<'a>(env: &ToolEnv, policy: &Policy, path: &'a Path, access: Access) -> Tried<'a> {
        Tried {
            scope: env.scope(env.workspace(), policy),
            path,
            access,
        }
    }
}

/// The `N` fields after `tag` of a report, or why the operation failed.
fn interpret<const N: usize>(
    facts: Facts,
    report: &[u8],
    tag: &[u8],
    tried: &Tried<'_>,
) -> Result<(Box<Facts>, [Vec<u8>; N]), OpError> {
    let mut facts = Box::new(facts);
    if let Some(reason) = &facts.refused {
        let why = format!("the sandbox refused it: {reason}");
        return Err(OpError::Failed(why, Some(facts)));
    }
    if let Some(failure) = &facts.runner_failure {
        let why = crate::command::runner_failure_note(failure, facts.started);
        return Err(OpError::Failed(why, Some(facts)));
    }
    if facts.timed_out {
        let why = format!("it did not finish within {} s", FILE_OP_TIMEOUT_MS / 1000);
        return Err(OpError::Failed(why, Some(facts)));
    }
    let fields: Vec<&[u8]> = report.split(|b| *b == 0).collect();
    if let Some((first, rest)) = fields.split_first()
        && *first == tag
        && facts.exec_errno.is_none()
        && let Ok(rest) = <&[&[u8]; N]>::try_from(rest)
    {
        return Ok((facts, (*rest).map(<[u8]>::to_vec)));
    }
    match fields.as_slice() {
        [b"failed", errno, what] => {
            let errno: i32 = std::str::from_utf8(errno)
                .ok()
                .and_then(|e| e.parse().ok())
                .unwrap_or(0);
            let what = String::from_utf8_lossy(what).into_owned();
            let denial = facts.backend.and_then(|backend| {
                denial::of_file_access(backend, &tried.scope, tried.path, tried.access, errno)
            });
            match denial {
                Some(denial) => {
                    facts.credential_notes =
                        crate::credentials::lift_notes(&denial.paths, &tried.scope.credentials);
                    facts.denial = Some(denial);
                    Err(OpError::Denied(what, facts))
                }
                None => Err(OpError::Failed(what, Some(facts))),
            }
        }
        _ => {
            let why = match facts.exec_errno {
                Some(errno) => format!(
                    "confine-helper could not start the file {} (confine-file-io) inside the \
                     sandbox ({})",
                    if tag == b"read" { "reader" } else { "writer" },
                    nix::errno::Errno::from_raw(errno).desc()
                ),
                None => {
                    "the file tool's program (confine-file-io) ended without saying what it did"
                        .to_owned()
                }
            };
            Err(OpError::Failed(why, Some(facts)))
        }
    }
}

fn path_field(field: &[u8]) -> PathBuf {
    PathBuf::from(std::ffi::OsStr::from_bytes(field))
}

/// What a read found: the text, the file the kernel says was read, and the run's facts (`None`
/// when the editor read it).
pub(super) struct Read {
    pub(super) text: String,
    pub(super) path: PathBuf,
    pub(super) facts: Option<Box<Facts>>,
}

/// A pipe for what the file program sends back (`what`, of the `program`'s).
fn pipe_from(program: &str, what: &str) -> Result<(Receiver, OwnedFd), OpError> {
    crate::command::output_pipe().map_err(|e| {
        OpError::failed(format!(
            "cannot create a pipe for the {program}'s {what}: {e}"
        ))
    })
}

/// A confined read of `path` under `mode`, as the reader or an edit (`program`) makes it: the
/// request, its policy, and where the content and the report arrive.
fn read_request(
    env: &ToolEnv,
    path: &Path,
    mode: Mode,
    program: &str,
) -> Result<(ReadSpec, Policy, Receiver, Receiver), OpError> {
    let (content, content_wr) = pipe_from(program, "content")?;
    let (report, report_wr) = pipe_from(program, "report")?;
    let policy = policy(env, mode)?;
    let spec = ReadSpec {
        path: path.to_owned(),
        max_bytes: MAX_TEXT_FILE,
        policy: policy.clone(),
        backend: env.backend(),
        timeout_ms: Some(FILE_OP_TIMEOUT_MS),
        content: content_wr,
        report: report_wr,
    };
    Ok((spec, policy, content, report))
}

/// Has the helper's reader read `path`, confined under `mode`.
pub(super) async fn confined_read(env: &ToolEnv, path: &Path, mode: Mode) -> Result<Read, OpError> {
    let (spec, policy, content, report) = read_request(env, path, mode, "reader")?;
    let handle = env
        .helper()
        .read_file(spec)
        .await
        .map_err(OpError::failed)?;
    let (facts, report, bytes) = settle(handle, &policy, report, Some(content)).await;
    let tried = Tried::of(env, &policy, path, Access::Read);
    let (facts, [_, path]) = interpret(facts, &report, b"read", &tried)?;
    let text =
        as_text(bytes).map_err(|why| OpError::Failed(why.to_string(), Some(facts.clone())))?;
    Ok(Read {
        text,
        path: path_field(&path),
        facts: Some(facts),
    })
}

/// A write that was made: where, and under which confinement.
pub(super) struct Written {
    /// The file the kernel says was written.
    pub(super) path: PathBuf,
    pub(super) created: bool,
    /// What the file held just before, as the writer found it, when it was asked to keep it.
    pub(super) previous: Option<Before>,
    /// The run's facts (only the helper's writer writes, so always there).
    pub(super) facts: Option<Box<Facts>>,
}

/// Whether a write keeps the file it replaces, for the diff of a call whose text before is
/// not known yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Keep {
    Previous,
    Nothing,
}

/// The content as an anonymous file the writer reads from its start.
fn content_file(content: &[u8]) -> io::Result<OwnedFd> {
    #[cfg(target_os = "linux")]
    let fd = {
        use nix::sys::memfd::{MFdFlags, memfd_create};
        memfd_create(c"agentd-write", MFdFlags::MFD_CLOEXEC)?
    };
    #[cfg(target_os = "macos")]
    let fd = unlinked_file()?;
    let mut unwritten = content;
    while !unwritten.is_empty() {
        let written = nix::unistd::write(&fd, unwritten)?;
        // A write never reports more bytes than it was given.
        unwritten = unwritten.get(written..).unwrap_or_default();
    }
    nix::unistd::lseek(&fd, 0, nix::unistd::Whence::SeekSet)?;
    Ok(fd)
}

/// macOS has no memfd: a new file of this user's alone in the temp directory, removed at once,
/// so that only the descriptor names it.
#[cfg(target_os = "macos")]
fn unlinked_file() -> io::Result<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let path = std::env::temp_dir().join(format!(
        "agentd-write-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    std::fs::remove_file(&path)?;
    Ok(OwnedFd::from(file))
}

/// Has the helper's writer replace `target` with `content`, confined under `mode`; with
/// [`Keep::Previous`] it also copies what it replaces, in the same run (one sandbox where a
/// read first would take two).
pub(super) async fn confined_write(
    env: &ToolEnv,
    target: &Path,
    content: &[u8],
    mode: Mode,
    keep: Keep,
) -> Result<Written, OpError> {
    let policy = policy(env, mode)?;
    let content = content_file(content)
        .map_err(|e| OpError::failed(format!("cannot stage the content: {e}")))?;
    let (report, report_wr) = pipe_from("writer", "report")?;
    let (previous, previous_wr) = match keep {
        Keep::Previous => {
            let (previous, previous_wr) = pipe_from("writer", "copy of the old file")?;
            let keep = KeepPrevious {
                content: previous_wr,
                max_bytes: MAX_TEXT_FILE,
            };
            (Some(previous), Some(keep))
        }
        Keep::Nothing => (None, None),
    };
    let spec = WriteSpec {
        path: target.to_owned(),
        make_parents: true,
        policy: policy.clone(),
        backend: env.backend(),
        timeout_ms: Some(FILE_OP_TIMEOUT_MS),
        content,
        report: report_wr,
        previous: previous_wr,
    };
    let handle = env
        .helper()
        .write_file(spec)
        .await
        .map_err(OpError::failed)?;
    let (facts, report, old) = settle(handle, &policy, report, previous).await;
    let tried = Tried::of(env, &policy, target, Access::Write);
    let (facts, created, previous, path) = match keep {
        Keep::Nothing => {
            let (facts, [created, _, path]) = interpret(facts, &report, b"written", &tried)?;
            (facts, created, None, path)
        }
        Keep::Previous => {
            let (facts, [created, _, found, path]) = interpret(facts, &report, b"written", &tried)?;
            (facts, created, Some(previous_of(&found, old)), path)
        }
    };
    Ok(Written {
        path: path_field(&path),
        created: created == b"1",
        previous,
        facts: Some(facts),
    })
}

/// The text before, from the writer's word for the file it replaced (`none`, `whole` or
/// `unread`) and what it copied: text only when it copied the whole file and that is text.
fn previous_of(word: &[u8], copied: Vec<u8>) -> Before {
    match word {
        b"none" => Before::Created,
        b"whole" => as_text(copied).map_or(Before::Unread, Before::Text),
        _ => Before::Unread,
    }
}

/// How an edit made in one confined run ended, when it did not fail.
pub(super) enum EditEnd {
    /// The answer was written.
    Written(Written),
    /// The file was read, and nothing written: where the kernel says it was read, and the
    /// run's facts.
    Kept(PathBuf, Box<Facts>),
}

/// Has the helper's file program edit `target`, confined under `mode`, in one run: it reads
/// the file, `decide` answers with the new content (or `None` to leave it), and the program
/// writes that unless the file changed meanwhile (`confine-file-io edit`).
pub(super) async fn confined_edit(
    env: &ToolEnv,
    target: &Path,
    mode: Mode,
    decide: impl FnOnce(Vec<u8>) -> Option<Vec<u8>>,
) -> Result<EditEnd, OpError> {
    let (read, policy, content, report) = read_request(env, target, mode, "edit")?;
    let (answer_rd, answer) = crate::command::input_pipe()
        .map_err(|e| OpError::failed(format!("cannot create a pipe for the edit's answer: {e}")))?;
    let spec = EditSpec {
        read,
        answer: answer_rd,
    };
    let handle = env
        .helper()
        .edit_file(spec)
        .await
        .map_err(OpError::failed)?;
    let (outcome, (read, last)) =
        tokio::join!(handle.wait(), converse(report, content, answer, decide));
    let started = matches!(outcome, Outcome::Exited(_));
    let facts = Facts::from_outcome(outcome, started).given(&policy);
    let Some(path) = read else {
        // No read was said: the report is the read's failure (or says nothing).
        let tried = Tried::of(env, &policy, target, Access::Read);
        let (facts, [_, path]) = interpret(facts, &last, b"read", &tried)?;
        return Ok(EditEnd::Kept(path_field(&path), facts));
    };
    if last == b"kept" {
        let tried = Tried::of(env, &policy, target, Access::Read);
        let (facts, []) = interpret(facts, &last, b"kept", &tried)?;
        return Ok(EditEnd::Kept(path, facts));
    }
    // The write's failures come tagged `unwritten`.
    let last = match last.strip_prefix(b"unwritten") {
        Some(rest) => [b"failed".as_slice(), rest].concat(),
        None => last,
    };
    let tried = Tried::of(env, &policy, target, Access::Write);
    let (facts, [_, path]) = interpret(facts, &last, b"edited", &tried)?;
    Ok(EditEnd::Written(Written {
        path: path_field(&path),
        created: false,
        previous: None,
        facts: Some(facts),
    }))
}

/// The edit's exchange with the program: its read's record (the real path; `None` when it
/// said none), then as many bytes of content as it says, `decide`'s answer, and the rest of the
/// report (the whole report when no read was said).
async fn converse(
    mut report: Receiver,
    mut content: Receiver,
    mut answer: tokio::net::unix::pipe::Sender,
    decide: impl FnOnce(Vec<u8>) -> Option<Vec<u8>>,
) -> (Option<PathBuf>, Vec<u8>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // The read's record ends with its third NUL, and the program says nothing more until it
    // has the answer; a record of anything else runs to the report's end.
    let mut said = Vec::new();
    let mut chunk = [0u8; 4096];
    let header_end = loop {
        if let Some(end) = read_record_end(&said) {
            break Some(end);
        }
        match report.read(&mut chunk).await {
            Ok(n) if n > 0 && said.len() < REPORT_CAP as usize => {
                said.extend_from_slice(chunk.get(..n).unwrap_or_default());
            }
            _ => break None,
        }
    };
    let read = header_end.and_then(|end| {
        let fields: Vec<&[u8]> = said.get(..end)?.split(|b| *b == 0).collect();
        let [_, bytes, path] = fields.as_slice() else {
            return None;
        };
        let bytes = std::str::from_utf8(bytes).ok()?.parse::<u64>().ok()?;
        (bytes <= MAX_TEXT_FILE).then(|| (bytes, path_field(path)))
    });
    let Some((bytes, path)) = read else {
        drop(answer);
        said.extend_from_slice(&drain(report, REPORT_CAP).await);
        return (None, said);
    };
    // What came after the record (nothing, unless the program misbehaves) leads the rest.
    let early = header_end
        .and_then(|end| said.get(end + 1..))
        .unwrap_or_default()
        .to_vec();
    let mut old = Vec::new();
    let whole = (&mut content).take(bytes).read_to_end(&mut old).await;
    if whole.is_ok_and(|n| n as u64 == bytes)
        && let Some(new) = decide(old)
    {
        // A program that ended meanwhile reads no answer: its report says what happened.
        let _ = answer.write_all(b"w").await;
        let _ = answer.write_all(&new).await;
    }
    drop(answer);
    let mut last = early;
    last.extend_from_slice(&drain(report, REPORT_CAP).await);
    (Some(path), last)
}

/// Where the read's record in `said` ends (its third NUL), when `said` holds one whole.
fn read_record_end(said: &[u8]) -> Option<usize> {
    if !said.starts_with(b"read\0") {
        return None;
    }
    said.iter()
        .enumerate()
        .filter(|(_, b)| **b == 0)
        .nth(2)
        .map(|(at, _)| at)
}
