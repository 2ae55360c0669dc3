//! `read_file`, `write_file` and `edit_file`.
//!
//! agentd neither reads nor writes a file for the model itself: it hands the request to
//! confine-helper, which runs its own reader or writer as a command under exactly the plan a
//! `bash` command of the call's mode gets ([`HelperClient::read_file`],
//! [`HelperClient::write_file`]). What a read may see and where a write may land is decided by
//! the kernel: a concurrent command that swaps a directory on the path for a symbolic link can
//! change which name is reached, never what the sandbox allows, and a read of
//! `/proc/self/environ` sees the reader's own (empty) environment, not agentd's. The result
//! names the file the kernel says was read or written.
//!
//! The editor's own file access ([`super::ClientFs`]) is used only in danger-full-access, where
//! nothing is confined: it reads and writes as the editor, wherever the path points when it
//! gets there. In confined modes the editor learns of a write from the tool call's location.
//!
//! [`check_write`] runs before a write, as a fence in trusted code: it refuses, with a clear
//! sentence, what the sandbox would refuse anyway (outside the workspace, git metadata), so the
//! model hears why rather than an errno. It is not the boundary.
//!
//! [`HelperClient::read_file`]: crate::helper_client::HelperClient::read_file
//! [`HelperClient::write_file`]: crate::helper_client::HelperClient::write_file

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use confine_protocol::{Mode, Policy};
use serde_json::json;

use super::args::{EditArgs, ReadArgs, WriteArgs};
use super::output::denial_marker;
use super::spec::READ_CAP;
use super::{ToolEnv, ToolResult};
use crate::command::Facts;
use crate::denial::host::Access;
use crate::denial::{self, Kind, Scope};
use crate::helper_client::{CommandHandle, Outcome, ReadSpec, WriteSpec};
use crate::real_path::real_target;

/// Subpaths of the workspace that stay read-only in workspace-write mode, also when they do not
/// exist yet.
///
/// The same list confine-helper enforces for commands: one definition in the protocol crate.
pub use confine_protocol::PROTECTED_SUBPATHS as PROTECTED;

/// How long a confined read or write may take.
const FILE_OP_TIMEOUT_MS: u64 = 60_000;
/// The largest report the writer sends.
const REPORT_CAP: u64 = 64 * 1024;

/// The largest file `read_file` and `edit_file` take in; larger ones are for `bash` with
/// `head`, `tail` or `sed -n`.
pub const MAX_TEXT_FILE: u64 = 32 * 1024 * 1024;

/// `given` as an absolute path: relative paths are taken from the workspace. Nothing is
/// resolved.
pub(crate) fn absolute(workspace: &Path, given: &Path) -> PathBuf {
    if given.is_absolute() {
        given.to_path_buf()
    } else {
        workspace.join(given)
    }
}

/// Why a write was not done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The mode does not allow writing there (a file write, or one to git metadata); the
    /// sentence says why.
    Denied(Kind, String),
    /// The path cannot be written for another reason.
    Error(String),
}

/// Where a write of `given` may land under `mode`: the real path, with every symbolic link
/// resolved, so that what is checked is what is written.
///
/// - read-only: never.
/// - workspace-write: inside the canonical workspace and not inside git metadata (a path with a
///   `.git` component: the repository [`PROTECTED`] names, and those of nested repositories).
///   The nearest existing ancestor is canonicalized and the rest appended, so a symbolic link
///   anywhere on the way (the file itself included) counts where it points, not where it sits.
/// - danger-full-access: anywhere.
///
/// A symbolic link to nothing is refused in every mode: where a write through it would land
/// cannot be checked.
pub(crate) fn check_write(workspace: &Path, given: &str, mode: Mode) -> Result<PathBuf, Refusal> {
    if mode == Mode::ReadOnly {
        return Err(Refusal::Denied(
            Kind::FileWrite,
            format!("{given} was not written: in read-only mode no file can be changed"),
        ));
    }
    let path = absolute(workspace, Path::new(given));
    let real = real_target(&path).map_err(Refusal::Error)?;
    if mode == Mode::DangerFullAccess {
        return Ok(real);
    }
    let root = fs::canonicalize(workspace).map_err(|e| {
        Refusal::Error(format!(
            "the workspace {} cannot be resolved: {e}",
            workspace.display()
        ))
    })?;
    let Ok(inside) = real.strip_prefix(&root) else {
        let is_link = fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink());
        let what = if is_link {
            format!("{given} is a symbolic link to {}, which is", real.display())
        } else if real != path {
            format!("{given} resolves to {}, which is", real.display())
        } else {
            format!("{given} is")
        };
        return Err(Refusal::Denied(
            Kind::FileWrite,
            format!(
                "{what} outside the workspace {}; in workspace-write mode only files inside the \
                 workspace can be written",
                root.display()
            ),
        ));
    };
    let mut metadata = root.clone();
    for part in inside.components() {
        metadata.push(part);
        if PROTECTED.iter().any(|p| part.as_os_str() == *p) {
            return Err(Refusal::Denied(
                Kind::ProtectedPath,
                format!(
                    "{} is inside {}, git metadata, which stays read-only in workspace-write mode",
                    real.display(),
                    metadata.display()
                ),
            ));
        }
    }
    Ok(real)
}

/// The lines of a text a `read_file` call returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Window<'a> {
    pub text: &'a str,
    /// The first line shown, counting from 1.
    pub first: u64,
    /// The last line shown (whole or cut); `first - 1` when nothing was.
    pub last: u64,
    pub total: u64,
    /// The last line shown was cut at the byte cap.
    pub cut: bool,
}

impl Window<'_> {
    /// The text with a last line saying how to read on, when it stops before the end.
    pub fn render(&self) -> String {
        let mut out = self.text.to_owned();
        let note = if self.total == 0 {
            Some("[the file is empty]".to_owned())
        } else if self.cut {
            Some(format!(
                "[line {} is longer than {} KiB and was cut; read it with bash, e.g. cut or fold]",
                self.last,
                READ_CAP / 1024
            ))
        } else if self.last < self.total {
            Some(format!(
                "[showed lines {}-{} of {}; read on with offset={}]",
                self.first,
                self.last,
                self.total,
                self.last + 1
            ))
        } else {
            None
        };
        if let Some(note) = note {
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(&note);
        }
        out
    }
}

/// Lines `offset` (from 1) on of `text`, at most `limit` of them and `cap` bytes, whole lines
/// only unless the first one alone is longer than `cap`.
pub(crate) fn window(
    text: &str,
    offset: u64,
    limit: Option<u64>,
    cap: usize,
) -> Result<Window<'_>, String> {
    let total = text.split_inclusive('\n').count() as u64;
    if total == 0 && offset == 1 {
        return Ok(Window {
            text: "",
            first: 1,
            last: 0,
            total: 0,
            cut: false,
        });
    }
    if offset > total {
        return Err(format!(
            "offset {offset} is past the end of the file, which has {total} line{}",
            if total == 1 { "" } else { "s" }
        ));
    }
    let mut lines = text.split_inclusive('\n');
    let skipped: usize = lines
        .by_ref()
        .take(usize::try_from(offset - 1).unwrap_or(usize::MAX))
        .map(str::len)
        .sum();
    let rest = &text[skipped..];
    let mut len = 0;
    let mut shown = 0u64;
    for line in lines {
        if limit.is_some_and(|limit| shown >= limit) || len + line.len() > cap {
            break;
        }
        len += line.len();
        shown += 1;
    }
    if shown == 0 {
        // The first line alone is over the cap: show its beginning.
        let mut cut = cap.min(rest.len());
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        return Ok(Window {
            text: &rest[..cut],
            first: offset,
            last: offset,
            total,
            cut: true,
        });
    }
    Ok(Window {
        text: &rest[..len],
        first: offset,
        last: offset + shown - 1,
        total,
        cut: false,
    })
}

/// `bytes` as text, or why it is not.
fn as_text(bytes: Vec<u8>) -> Result<String, String> {
    if bytes.contains(&0) {
        return Err("it is a binary file (it contains NUL bytes)".to_owned());
    }
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "it is not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })
}

/// Checks text that came from the editor the way local files are checked.
fn checked_text(text: String) -> Result<String, String> {
    if text.contains('\0') {
        return Err("it is a binary file (it contains NUL bytes)".to_owned());
    }
    Ok(text)
}

/// What kind of file `meta` describes, for a refusal.
fn kind_of(meta: &fs::Metadata) -> &'static str {
    let kind = meta.file_type();
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else {
        "not a regular file"
    }
}

/// Opens `path` for reading only if it is a regular file: first as a path (`O_PATH`, which
/// opens nothing), then, once checked, for reading through `/proc/self/fd`, which reaches
/// exactly the file checked. `Ok(None)` when it does not exist.
fn open_regular(path: &Path) -> Result<Option<(fs::File, fs::Metadata)>, String> {
    let located = fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_PATH)
        .open(path);
    let located = match located {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let meta = located.metadata().map_err(|e| e.to_string())?;
    if meta.is_dir() {
        return Err("it is a directory; list it with bash (ls)".to_owned());
    }
    if !meta.is_file() {
        return Err(format!(
            "it is {}, not a regular file, and is not opened",
            kind_of(&meta)
        ));
    }
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(format!("/proc/self/fd/{}", located.as_raw_fd()))
        .map_err(|e| e.to_string())?;
    Ok(Some((file, meta)))
}

/// The replacement `edit_file` makes: the new text and how many occurrences were replaced.
pub(crate) fn apply_edit(
    text: &str,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<(String, usize), String> {
    let count = text.matches(old).count();
    match count {
        0 => Err(
            "old_string was not found in the file (0 occurrences); it must match exactly, \
             whitespace and indentation included: read the file again and copy the text"
                .to_owned(),
        ),
        1 => Ok((text.replacen(old, new, 1), 1)),
        n if replace_all => Ok((text.replace(old, new), n)),
        n => Err(format!(
            "old_string occurs {n} times in the file; include more surrounding text to make it \
             unique, or set replace_all to replace all {n}"
        )),
    }
}

/// Runs blocking file work off the async threads.
async fn blocking<T, F>(work: F) -> Result<T, String>
where
    F: FnOnce() -> Result<T, String> + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|e| Err(format!("the file operation failed: {e}")))
}

/// Why a read or write did not happen.
enum OpError {
    /// The sandbox refused it: the sentence, and the run's facts.
    Denied(String, Box<Facts>),
    /// Anything else.
    Failed(String, Option<Box<Facts>>),
}

impl OpError {
    fn failed(why: impl Into<String>) -> OpError {
        OpError::Failed(why.into(), None)
    }
}

/// The policy a file operation of this session runs under: the workspace, as for its commands.
fn policy(env: &ToolEnv, mode: Mode) -> Policy {
    Policy {
        mode,
        workspace_root: Some(env.workspace().as_os_str().as_bytes().to_vec()),
        writable_roots: Vec::new(),
        network: env.network(),
        protected: Vec::new(),
        never_writable: Vec::new(),
    }
}

/// Everything from `pipe` up to `cap` bytes (one more shows it was over).
async fn drain(mut pipe: tokio::net::unix::pipe::Receiver, cap: u64) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let mut bytes = Vec::new();
    let _ = (&mut pipe).take(cap).read_to_end(&mut bytes).await;
    bytes
}

/// Waits for a confined file operation to end while reading its report (and its content, for
/// a read); returns the run's facts, the report and the content.
async fn settle(
    handle: CommandHandle,
    report: tokio::net::unix::pipe::Receiver,
    content: Option<tokio::net::unix::pipe::Receiver>,
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
    (Facts::from_outcome(outcome, started), report, content)
}

/// What a confined file operation tried, for judging its failure.
struct Tried<'a> {
    scope: Scope,
    path: &'a Path,
    access: Access,
}

impl Tried<'_> {
    fn of<'a>(env: &ToolEnv, mode: Mode, path: &'a Path, access: Access) -> Tried<'a> {
        Tried {
            scope: Scope::of(env.workspace(), &policy(env, mode)),
            path,
            access,
        }
    }
}

/// The fields after `tag` of a report of `count` fields, or why the operation failed.
fn interpret(
    facts: Facts,
    report: &[u8],
    tag: &[u8],
    count: usize,
    tried: &Tried<'_>,
) -> Result<(Box<Facts>, Vec<Vec<u8>>), OpError> {
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
    match fields.as_slice() {
        [first, rest @ ..]
            if *first == tag && rest.len() == count && facts.exec_errno.is_none() =>
        {
            Ok((facts, rest.iter().map(|f| f.to_vec()).collect()))
        }
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
                    facts.denial = Some(denial);
                    Err(OpError::Denied(what, facts))
                }
                None => Err(OpError::Failed(what, Some(facts))),
            }
        }
        _ => {
            let why = match facts.exec_errno {
                Some(errno) => format!(
                    "confine-helper could not start its file {} inside the sandbox ({})",
                    if tag == b"read" { "reader" } else { "writer" },
                    nix::errno::Errno::from_raw(errno).desc()
                ),
                None => "confine-helper's file tool ended without saying what it did".to_owned(),
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
struct Read {
    text: String,
    path: PathBuf,
    facts: Option<Box<Facts>>,
}

/// Reads the text at `path`: through the editor in danger-full-access when it offers that
/// (a local file that is not a regular file is refused first, so it cannot be made to block),
/// else confined by the helper. The editor reads as the editor, wherever a path points: in
/// confined modes that would see what no command may see (its own `/proc/self/environ`, say).
async fn read_text(env: &ToolEnv, path: &Path, mode: Mode) -> Result<Read, OpError> {
    if let (Mode::DangerFullAccess, Some(client)) = (mode, env.client_fs()) {
        let local = path.to_path_buf();
        blocking(move || open_regular(&local).map(drop))
            .await
            .map_err(OpError::failed)?;
        let text = client
            .read_text(path)
            .await
            .and_then(checked_text)
            .map_err(OpError::failed)?;
        return Ok(Read {
            text,
            path: path.to_owned(),
            facts: None,
        });
    }
    confined_read(env, path, mode).await
}

/// Has the helper's reader read `path`, confined under `mode`.
async fn confined_read(env: &ToolEnv, path: &Path, mode: Mode) -> Result<Read, OpError> {
    let pipe = |what: &str| {
        crate::command::output_pipe().map_err(|e| {
            OpError::failed(format!("cannot create a pipe for the reader's {what}: {e}"))
        })
    };
    let (content, content_wr) = pipe("content")?;
    let (report, report_wr) = pipe("report")?;
    let spec = ReadSpec {
        path: path.to_owned(),
        max_bytes: MAX_TEXT_FILE,
        policy: policy(env, mode),
        backend: env.backend(),
        timeout_ms: Some(FILE_OP_TIMEOUT_MS),
        content: content_wr,
        report: report_wr,
    };
    let handle = env
        .helper()
        .read_file(spec)
        .await
        .map_err(|e| OpError::failed(e.to_string()))?;
    let (facts, report, bytes) = settle(handle, report, Some(content)).await;
    let tried = Tried::of(env, mode, path, Access::Read);
    let (facts, fields) = interpret(facts, &report, b"read", 2, &tried)?;
    let text = as_text(bytes).map_err(|why| OpError::Failed(why, Some(facts.clone())))?;
    Ok(Read {
        text,
        path: path_field(&fields[1]),
        facts: Some(facts),
    })
}

/// A write that was made: where, and under which confinement.
struct Written {
    /// The file the kernel says was written.
    path: PathBuf,
    created: bool,
    /// The run's facts; `None` when the editor wrote it.
    facts: Option<Box<Facts>>,
}

/// Writes `content` to `target` (checked by [`check_write`]): through the editor in
/// danger-full-access when it offers that, else confined by the helper.
async fn write_text(
    env: &ToolEnv,
    target: &Path,
    content: String,
    mode: Mode,
) -> Result<Written, OpError> {
    if let (Mode::DangerFullAccess, Some(client)) = (mode, env.client_fs()) {
        let created = fs::symlink_metadata(target).is_err();
        if let Some(dir) = target.parent() {
            let dir = dir.to_path_buf();
            blocking(move || {
                fs::create_dir_all(&dir)
                    .map_err(|e| format!("cannot create the directory {}: {e}", dir.display()))
            })
            .await
            .map_err(OpError::failed)?;
        }
        client
            .write_text(target, &content)
            .await
            .map_err(OpError::failed)?;
        return Ok(Written {
            path: target.to_owned(),
            created,
            facts: None,
        });
    }
    confined_write(env, target, content.as_bytes(), mode).await
}

/// The content as an anonymous file the writer reads from its start.
fn content_file(content: &[u8]) -> io::Result<OwnedFd> {
    use nix::sys::memfd::{MFdFlags, memfd_create};
    let fd = memfd_create(c"agentd-write", MFdFlags::MFD_CLOEXEC)?;
    let mut written = 0;
    while written < content.len() {
        written += nix::unistd::write(&fd, &content[written..])?;
    }
    nix::unistd::lseek(&fd, 0, nix::unistd::Whence::SeekSet)?;
    Ok(fd)
}

/// Has the helper's writer replace `target` with `content`, confined under `mode`.
async fn confined_write(
    env: &ToolEnv,
    target: &Path,
    content: &[u8],
    mode: Mode,
) -> Result<Written, OpError> {
    let content = content_file(content)
        .map_err(|e| OpError::failed(format!("cannot stage the content: {e}")))?;
    let (report, report_wr) = crate::command::output_pipe().map_err(|e| {
        OpError::failed(format!("cannot create a pipe for the writer's report: {e}"))
    })?;
    let spec = WriteSpec {
        path: target.to_owned(),
        make_parents: true,
        policy: policy(env, mode),
        backend: env.backend(),
        timeout_ms: Some(FILE_OP_TIMEOUT_MS),
        content,
        report: report_wr,
    };
    let handle = env
        .helper()
        .write_file(spec)
        .await
        .map_err(|e| OpError::failed(e.to_string()))?;
    let (facts, report, _) = settle(handle, report, None).await;
    let tried = Tried::of(env, mode, target, Access::Write);
    let (facts, fields) = interpret(facts, &report, b"written", 3, &tried)?;
    Ok(Written {
        path: path_field(&fields[2]),
        created: fields[0] == b"1",
        facts: Some(facts),
    })
}

/// [`check_write`] off the async threads.
async fn write_target(env: &ToolEnv, given: &str, mode: Mode) -> Result<PathBuf, Refusal> {
    let (workspace, given) = (env.workspace().to_path_buf(), given.to_owned());
    let checked = blocking(move || Ok(check_write(&workspace, &given, mode)));
    checked.await.unwrap_or_else(|why| Err(Refusal::Error(why)))
}

/// The result of a write the fence refused.
fn refused(refusal: Refusal, mode: Mode, given: &str, verb: &str) -> ToolResult {
    match refusal {
        Refusal::Denied(kind, why) => ToolResult::failed(
            format!("{why}\n{}", denial_marker(kind, mode)),
            json!({
                "mode": mode.as_str(),
                "path": given,
                "denied": true,
                "denials": [kind.as_str()],
            }),
        ),
        Refusal::Error(why) => ToolResult::failed(
            format!("cannot {verb} {given}: {why}"),
            json!({ "mode": mode.as_str(), "path": given }),
        ),
    }
}

/// The facts of a file operation: the run's (when confined), the mode and the path.
fn file_facts(mode: Mode, path: &Path, run: Option<&Facts>) -> serde_json::Value {
    let mut facts = run.map_or_else(|| json!({}), Facts::to_value);
    facts["mode"] = json!(mode.as_str());
    facts["path"] = json!(path.to_string_lossy());
    facts
}

/// The result of a read or write that did not happen.
fn op_failed(error: OpError, mode: Mode, path: &Path, verb: &str) -> ToolResult {
    match error {
        OpError::Denied(why, run) => {
            let markers: Vec<String> = run
                .denial
                .iter()
                .flat_map(|denial| &denial.kinds)
                .map(|&kind| denial_marker(kind, mode))
                .collect();
            ToolResult::failed(
                format!(
                    "cannot {verb} {}: {why}\n{}",
                    path.display(),
                    markers.join("\n")
                ),
                file_facts(mode, path, Some(&run)),
            )
        }
        OpError::Failed(why, run) => ToolResult::failed(
            format!("cannot {verb} {}: {why}", path.display()),
            file_facts(mode, path, run.as_deref()),
        ),
    }
}

pub(crate) async fn read_file(env: &ToolEnv, args: ReadArgs, mode: Mode) -> ToolResult {
    let path = absolute(env.workspace(), Path::new(&args.path));
    let read = match read_text(env, &path, mode).await {
        Ok(read) => read,
        Err(error) => return op_failed(error, mode, &path, "read"),
    };
    let mut facts = file_facts(mode, &read.path, read.facts.as_deref());
    match window(&read.text, args.offset, args.limit, READ_CAP) {
        Ok(shown) => {
            facts["lines"] = json!([shown.first, shown.last]);
            facts["total_lines"] = json!(shown.total);
            ToolResult::completed(shown.render(), facts)
        }
        Err(why) => ToolResult::failed(format!("cannot read {}: {why}", path.display()), facts),
    }
}

pub(crate) async fn write_file(env: &ToolEnv, args: WriteArgs, mode: Mode) -> ToolResult {
    let target = match write_target(env, &args.path, mode).await {
        Ok(target) => target,
        Err(refusal) => return refused(refusal, mode, &args.path, "write"),
    };
    let bytes = args.content.len();
    match write_text(env, &target, args.content, mode).await {
        Ok(written) => {
            let mut facts = file_facts(mode, &written.path, written.facts.as_deref());
            facts["bytes"] = json!(bytes);
            let verb = if written.created {
                "Created"
            } else {
                "Overwrote"
            };
            ToolResult::completed(
                format!("{verb} {} ({bytes} bytes)", written.path.display()),
                facts,
            )
        }
        Err(error) => op_failed(error, mode, &target, "write"),
    }
}

pub(crate) async fn edit_file(env: &ToolEnv, args: EditArgs, mode: Mode) -> ToolResult {
    let target = match write_target(env, &args.path, mode).await {
        Ok(target) => target,
        Err(refusal) => return refused(refusal, mode, &args.path, "edit"),
    };
    let read = match read_text(env, &target, mode).await {
        Ok(read) => read,
        Err(error) => return op_failed(error, mode, &target, "edit"),
    };
    let (edited, replacements) = match apply_edit(
        &read.text,
        &args.old_string,
        &args.new_string,
        args.replace_all,
    ) {
        Ok(edit) => edit,
        Err(why) => {
            return ToolResult::failed(
                format!("cannot edit {}: {why}", target.display()),
                file_facts(mode, &read.path, read.facts.as_deref()),
            );
        }
    };
    let bytes = edited.len();
    match write_text(env, &target, edited, mode).await {
        Ok(written) => {
            let mut facts = file_facts(mode, &written.path, written.facts.as_deref());
            facts["bytes"] = json!(bytes);
            facts["replacements"] = json!(replacements);
            let plural = if replacements == 1 { "" } else { "s" };
            ToolResult::completed(
                format!(
                    "Edited {}: {replacements} replacement{plural}",
                    written.path.display()
                ),
                facts,
            )
        }
        Err(error) => op_failed(error, mode, &target, "edit"),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;
    use crate::test_support::Scratch;

    /// A workspace inside a scratch directory, with `outside` beside it.
    fn workspace(name: &str) -> (Scratch, PathBuf, PathBuf) {
        let scratch = Scratch::new(name);
        let root = fs::canonicalize(&scratch.0).expect("canonical scratch");
        let ws = root.join("ws");
        let outside = root.join("outside");
        fs::create_dir_all(ws.join("src")).expect("mkdir ws");
        fs::create_dir_all(&outside).expect("mkdir outside");
        (scratch, ws, outside)
    }

    fn denied(result: Result<PathBuf, Refusal>) -> String {
        match result {
            Err(Refusal::Denied(_, why)) => why,
            other => panic!("expected a denial, got {other:?}"),
        }
    }

    #[test]
    fn read_only_mode_writes_nothing() {
        let (_s, ws, _) = workspace("files-ro");
        let why = denied(check_write(&ws, "a.txt", Mode::ReadOnly));
        assert!(why.contains("read-only mode"), "{why}");
    }

    #[test]
    fn relative_paths_land_in_the_workspace_and_missing_directories_are_fine() {
        let (_s, ws, _) = workspace("files-rel");
        assert_eq!(
            check_write(&ws, "src/new/deep/a.rs", Mode::WorkspaceWrite),
            Ok(ws.join("src/new/deep/a.rs"))
        );
        assert_eq!(
            check_write(
                &ws,
                ws.join("b").to_str().expect("utf-8"),
                Mode::WorkspaceWrite
            ),
            Ok(ws.join("b"))
        );
    }

    #[test]
    fn dot_dot_out_of_the_workspace_is_refused_and_within_it_resolved() {
        let (_s, ws, outside) = workspace("files-dotdot");
        let why = denied(check_write(&ws, "../outside/x", Mode::WorkspaceWrite));
        assert!(why.contains("outside the workspace"), "{why}");
        assert!(
            why.contains(&outside.join("x").display().to_string()),
            "{why}"
        );
        // Through a directory that does not exist yet, too.
        denied(check_write(
            &ws,
            "new/../../outside/x",
            Mode::WorkspaceWrite,
        ));
        assert_eq!(
            check_write(&ws, "src/../a.txt", Mode::WorkspaceWrite),
            Ok(ws.join("a.txt"))
        );
        assert_eq!(
            check_write(&ws, "new/../a.txt", Mode::WorkspaceWrite),
            Ok(ws.join("a.txt"))
        );
    }

    #[test]
    fn a_symlinked_directory_pointing_out_is_refused() {
        let (_s, ws, outside) = workspace("files-dirlink");
        symlink(&outside, ws.join("out")).expect("symlink");
        let why = denied(check_write(&ws, "out/x", Mode::WorkspaceWrite));
        assert!(why.contains("outside the workspace"), "{why}");
        denied(check_write(&ws, "out/new/x", Mode::WorkspaceWrite));
    }

    #[test]
    fn a_symlinked_file_pointing_out_is_refused_and_one_pointing_in_is_written_through() {
        let (_s, ws, outside) = workspace("files-filelink");
        fs::write(outside.join("target"), "x").expect("write");
        symlink(outside.join("target"), ws.join("link")).expect("symlink");
        let why = denied(check_write(&ws, "link", Mode::WorkspaceWrite));
        assert!(why.contains("link is a symbolic link to"), "{why}");

        fs::write(ws.join("src/real.txt"), "x").expect("write");
        symlink("src/real.txt", ws.join("inner")).expect("symlink");
        assert_eq!(
            check_write(&ws, "inner", Mode::WorkspaceWrite),
            Ok(ws.join("src/real.txt"))
        );
    }

    #[test]
    fn a_dangling_symlink_is_refused_in_every_mode() {
        let (_s, ws, outside) = workspace("files-dangling");
        symlink(outside.join("nothing"), ws.join("dangling")).expect("symlink");
        for mode in [Mode::WorkspaceWrite, Mode::DangerFullAccess] {
            match check_write(&ws, "dangling", mode) {
                Err(Refusal::Error(why)) => {
                    assert!(
                        why.contains("symbolic link to a path that does not exist"),
                        "{why}"
                    )
                }
                other => panic!("{mode:?}: {other:?}"),
            }
        }
        // A dangling link as a directory on the way, too.
        assert!(check_write(&ws, "dangling/x", Mode::WorkspaceWrite).is_err());
    }

    #[test]
    fn git_metadata_stays_read_only_also_when_missing_or_reached_by_a_link() {
        let (_s, ws, _) = workspace("files-protected");
        fs::create_dir_all(ws.join(".git/hooks")).expect("mkdir");
        for path in [
            ".git/hooks/pre-commit",
            ".git/config",
            ".git/HEAD",
            ".git/commondir",
            "src/../.git/hooks/x",
            "deps/lib/.git",
            "deps/lib/.git/config",
        ] {
            let why = denied(check_write(&ws, path, Mode::WorkspaceWrite));
            assert!(why.contains("stays read-only"), "{path}: {why}");
        }
        symlink(ws.join(".git/hooks"), ws.join("hooks")).expect("symlink");
        denied(check_write(
            &ws,
            "hooks/post-checkout",
            Mode::WorkspaceWrite,
        ));
        // Look-alike names, and files git only reads as content, are ordinary.
        assert!(check_write(&ws, ".gitmodules", Mode::WorkspaceWrite).is_ok());
        assert!(check_write(&ws, ".gitignore", Mode::WorkspaceWrite).is_ok());
        assert!(check_write(&ws, "src/.git-notes", Mode::WorkspaceWrite).is_ok());
        assert!(check_write(&ws, ".agentd/notes", Mode::WorkspaceWrite).is_ok());
    }

    #[test]
    fn danger_full_access_writes_anywhere() {
        let (_s, ws, outside) = workspace("files-danger");
        assert_eq!(
            check_write(&ws, "../outside/x", Mode::DangerFullAccess),
            Ok(outside.join("x"))
        );
        assert!(check_write(&ws, ".git/hooks/x", Mode::DangerFullAccess).is_ok());
    }

    #[test]
    fn an_edit_replaces_exactly_one_occurrence_unless_told_all() {
        assert_eq!(
            apply_edit("a b c", "b", "B", false),
            Ok(("a B c".to_owned(), 1))
        );
        let e = apply_edit("x x x", "x", "y", false).expect_err("ambiguous");
        assert!(e.contains("occurs 3 times"), "{e}");
        assert_eq!(
            apply_edit("x x x", "x", "y", true),
            Ok(("y y y".to_owned(), 3))
        );
        let e = apply_edit("abc", "d", "e", true).expect_err("missing");
        assert!(e.contains("not found"), "{e}");
        assert!(e.contains("0 occurrences"), "{e}");
        // Occurrences do not overlap.
        assert_eq!(
            apply_edit("aaaa", "aa", "b", true),
            Ok(("bb".to_owned(), 2))
        );
    }

    #[test]
    fn a_window_shows_whole_lines_and_says_how_to_read_on() {
        let text = "one\ntwo\nthree\nfour";
        let all = window(text, 1, None, READ_CAP).expect("window");
        assert_eq!(all.render(), text);
        let middle = window(text, 2, Some(2), READ_CAP).expect("window");
        assert_eq!(
            middle.render(),
            "two\nthree\n[showed lines 2-3 of 4; read on with offset=4]"
        );
        let last = window(text, 4, Some(10), READ_CAP).expect("window");
        assert_eq!(last.render(), "four");
        let capped = window(text, 1, None, 9).expect("window");
        assert_eq!(
            capped.render(),
            "one\ntwo\n[showed lines 1-2 of 4; read on with offset=3]"
        );
    }

    #[test]
    fn a_window_past_the_end_or_of_an_empty_file_says_so() {
        let e = window("a\nb\n", 3, None, READ_CAP).expect_err("past the end");
        assert_eq!(e, "offset 3 is past the end of the file, which has 2 lines");
        assert_eq!(
            window("", 1, None, READ_CAP).expect("empty").render(),
            "[the file is empty]"
        );
        assert!(window("", 2, None, READ_CAP).is_err());
    }

    #[test]
    fn a_line_longer_than_the_cap_is_cut_at_a_character_boundary() {
        let text = "ééééé\nnext\n";
        let shown = window(text, 1, None, 5).expect("window");
        assert_eq!(shown.text, "éé");
        assert!(shown.cut);
        assert!(shown.render().contains("[line 1 is longer than"));
    }

    #[test]
    fn binary_and_non_utf8_files_are_refused() {
        assert!(
            as_text(b"ab\0cd".to_vec())
                .expect_err("binary")
                .contains("binary")
        );
        assert!(
            as_text(b"caf\xe9\n".to_vec())
                .expect_err("latin-1")
                .contains("not UTF-8 text (invalid byte at offset 3)")
        );
        assert_eq!(
            as_text("café\n".as_bytes().to_vec()),
            Ok("café\n".to_owned())
        );
    }

    #[test]
    fn before_the_editor_reads_fifos_and_devices_are_refused_without_being_opened() {
        let (_s, ws, _) = workspace("files-fifo");
        nix::unistd::mkfifo(&ws.join("fifo"), nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
        symlink("/dev/zero", ws.join("zero")).expect("symlink");
        // Opening a FIFO for reading with nobody writing would block forever: the test
        // finishing at all is half the proof.
        let why = open_regular(&ws.join("fifo")).expect_err("fifo");
        assert!(why.contains("a FIFO, not a regular file"), "{why}");
        let why = open_regular(&ws.join("zero")).expect_err("device");
        assert!(why.contains("a device, not a regular file"), "{why}");
        assert!(open_regular(&ws).expect_err("dir").contains("directory"));
        assert!(matches!(open_regular(&ws.join("none")), Ok(None)));
    }
}
