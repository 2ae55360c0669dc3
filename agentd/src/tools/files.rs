//! `read_file`, `write_file` and `edit_file`.
//!
//! agentd neither reads nor writes a file for the model itself: it hands the request to
//! confine-helper (or, for some reads, to the editor, below), which runs the file reader or
//! writer (`confine-file-io`) as a command under exactly the plan a
//! `bash` command of the call's mode gets ([`HelperClient::read_file`],
//! [`HelperClient::write_file`]). What a read may see and where a write may land is decided by
//! the kernel: a concurrent command that swaps a directory on the path for a symbolic link can
//! change which name is reached, never what the sandbox allows, and a read of
//! `/proc/self/environ` sees the reader's own (empty) environment, not agentd's. The result
//! names the file the kernel says was read or written.
//!
//! A write also keeps, for the editor, the change it made ([`LoggedDiff`], RFC 0009): the text
//! after, and the text before — for `edit_file` what it read; for `write_file` what the writer
//! found as it replaced the file, copied in the same confined run (nothing for a file it
//! created), or, for a call a person approves, what a read found when the change was proposed.
//! The model's text is the same with or without it.
//!
//! A call no one is asked about is one confined run: `write_file` the writer, which keeps what
//! it replaces; `edit_file` a run that reads the file, takes the edit agentd makes in its text
//! and writes it, unless the file changed meanwhile (`files/edit.rs`).
//!
//! A write a person approves is computed before anything is written ([`Proposal`]): where it
//! lands (the real path the fence resolved), the text before (read by the helper's reader under
//! the call's mode) and the exact text after. That change is shown to the person, and the write
//! then writes exactly that text, to that path or not at all ([`commit`]).
//!
//! The editor's own file access ([`super::ClientFs`]) is used only to read, for `read_file`
//! and agentd's own context, and only where no denied read could apply ([`editor_may_read`]):
//! in danger-full-access, where nothing is hidden from a command, or when the session denies
//! no read and the path lies, as given and as resolved now, inside the workspace and outside
//! what a confined command cannot see ([`HIDDEN_FROM_COMMANDS`]). The editor
//! never writes: every write is the helper's confined writer's, in every mode, and the editor
//! learns of it from the tool call's diff and location.
//!
//! [`check_write`] runs before a write, as a fence in trusted code: it refuses, with a clear
//! sentence, what the sandbox would refuse anyway (outside the workspace and the sandbox
//! profile's roots, git metadata, the profile's protected paths), so the model hears why rather
//! than an errno. It is not the boundary.
//!
//! This file routes each call and words its result; the fence is `files/fence.rs`, the
//! helper's reader and writer `files/confined.rs`, the tool and diff of a change
//! `files/change.rs`, and what is done with a file's text (the window a read shows, the
//! replacement an edit makes) `files/text.rs`.
//!
//! [`HelperClient::read_file`]: crate::helper_client::HelperClient::read_file
//! [`HelperClient::write_file`]: crate::helper_client::HelperClient::write_file

mod change;
mod confined;
mod edit;
mod fence;
mod said;
mod text;

use std::fs;
use std::path::{Path, PathBuf};

use confine_protocol::Mode;
use serde_json::json;

use super::args::{EditArgs, ReadArgs, WriteArgs};
use super::call::ToolResult;
use super::env::ToolEnv;
use super::output::denial_marker;
use super::spec::{READ_CAP, READ_LINES};
use crate::session::{Before, LoggedDiff};
use change::{Change, Tool, diff_of, kept};
use confined::{Keep, OpError, Read, confined_read, confined_write};
use fence::{Fence, Refusal, absolute, check_write};
use said::{file_facts, op_failed, refused, said_written};
use text::{OpenError, apply_edit, checked_text, open_regular, window};

/// Why file work done here, around the editor's read, failed.
#[derive(Debug, thiserror::Error)]
enum LocalError {
    /// The work, run off the async threads, did not finish.
    #[error("the file operation failed: {0}")]
    Interrupted(#[from] tokio::task::JoinError),
    /// The file the editor is to read is not opened.
    #[error(transparent)]
    Open(#[from] OpenError),
}

/// Runs blocking file work off the async threads.
async fn blocking<T, E, F>(work: F) -> Result<T, E>
where
    F: FnOnce() -> Result<T, E> + Send + 'static,
    T: Send + 'static,
    E: From<tokio::task::JoinError> + Send + 'static,
{
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|e| Err(e.into()))
}

/// What a confined command sees a fresh, private copy of, never the host's (RFC 0002): the
/// kernel's views of processes (another process's environment, agentd's own among them), the
/// devices, and `/tmp`. A path under one of them is read through the editor only when the
/// workspace itself lies there (then the command sees it too: the workspace is bound in).
const HIDDEN_FROM_COMMANDS: [&str; 4] = ["/proc", "/sys", "/dev", "/tmp"];

/// Whether a read `profile` denies could be reached through `workspace`: a `**/` pattern (it
/// matches inside it), or a denied path, as found now, inside the workspace or holding it.
fn denied_near(profile: &crate::profile::SandboxProfile, workspace: &Path) -> bool {
    use crate::deny_read::DenyRead;
    let real = workspace
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_path_buf());
    let near = |denied: &Path| denied.starts_with(&real) || real.starts_with(denied);
    let configured = profile.deny_read.iter().any(|entry| match entry {
        DenyRead::Anywhere(_) => true,
        DenyRead::Path(path) => near(&path.canonicalize().unwrap_or_else(|_| path.clone())),
    });
    configured
        || crate::credentials::expand(&profile.credentials, &[])
            .iter()
            .any(|(denied, _)| near(denied))
}

/// Whether the editor may answer a read of `path` under `mode` ([`ToolEnv::client_fs`] offers
/// reads): only where no denied read could apply, since the editor reads as the editor,
/// wherever the path points when it gets there. In danger-full-access nothing is hidden from a
/// command. In workspace-write never: a command of the session could swap the path after any
/// check. In read-only no command of the session writes (a narrowing stopped the wider ones),
/// and no denied read may be within reach of the workspace ([`denied_near`]: no `**/` pattern,
/// and no denied path, as found now, inside the workspace or holding it — a denied path that a
/// command of the session links to, or swaps a directory for, between any check here and the
/// editor's read would otherwise be read; one elsewhere, the built-in credential stores of a
/// project directory's user, is never reached through a path inside the workspace), and the
/// path, made absolute, must
/// have no `..` and lie inside the workspace both as given and as resolved now, and not under
/// what else a confined command cannot read ([`HIDDEN_FROM_COMMANDS`]: a session opened at `/`
/// has `/proc` in its workspace).
async fn editor_may_read(env: &ToolEnv, path: &Path, mode: Mode) -> bool {
    match mode {
        Mode::DangerFullAccess => return true,
        // A command of the session may write the workspace, so it may swap the path for a link
        // between any check here and the editor's read: a link to what the editor can read and
        // a command cannot (the host's /tmp, another process's environment). Read confined.
        Mode::WorkspaceWrite => return false,
        Mode::ReadOnly => {}
    }
    let workspace = env.workspace().to_path_buf();
    let profile = env.profile();
    let near = {
        let workspace = workspace.clone();
        blocking(move || Ok::<_, tokio::task::JoinError>(denied_near(&profile, &workspace))).await
    };
    if near.unwrap_or(true) {
        return false;
    }
    let hidden = |path: &Path| {
        HIDDEN_FROM_COMMANDS
            .iter()
            .any(|root| path.starts_with(root) && !workspace.starts_with(root))
    };
    let lexical = path.starts_with(&workspace)
        && !hidden(path)
        && !path
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir));
    if !lexical {
        return false;
    }
    let local = path.to_path_buf();
    blocking(move || {
        Ok::<_, tokio::task::JoinError>(
            fs::canonicalize(&local)
                .is_ok_and(|real| real == local && real.starts_with(&workspace)),
        )
    })
    .await
    .unwrap_or(false)
}

/// Reads the text at `path` for `read_file`: through the editor where it offers reads and
/// [`editor_may_read`] allows it (a local file that is not a regular file is refused first, so
/// it cannot be made to block), else confined by the helper.
async fn read_text(env: &ToolEnv, path: &Path, mode: Mode) -> Result<Read, OpError> {
    if let Some(client) = env.client_fs()
        && editor_may_read(env, path, mode).await
    {
        let local = path.to_path_buf();
        blocking(move || open_regular(&local).map(drop).map_err(LocalError::from))
            .await
            .map_err(OpError::failed)?;
        let text = client.read_text(path).await.map_err(OpError::failed)?;
        let text = checked_text(text).map_err(OpError::failed)?;
        return Ok(Read {
            text,
            path: path.to_owned(),
            facts: None,
        });
    }
    confined_read(env, path, mode).await
}

/// The text of `path` for agentd's own context (a project's `AGENTS.md`), read as `read_file`
/// reads it under `mode`: by the editor where [`editor_may_read`] allows it, else confined by
/// the helper. `Err`
/// is why not, as a sentence: the sandbox's refusal, a file that is not text, or one over `cap`
/// bytes (read whole or not at all).
pub(crate) async fn read_context(
    env: &ToolEnv,
    path: &Path,
    mode: Mode,
    cap: usize,
) -> Result<String, Unread> {
    let read = read_text(env, path, mode).await.map_err(|e| match e {
        OpError::Denied(why, _) | OpError::Failed(why, _) => Unread::Read(why),
    })?;
    Unread::within(read.text, cap)
}

/// Why a file given as context (a project's guidance, a prompt's resource) is not stated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unread {
    /// The confined read was refused or failed: the read tool's own sentence.
    #[error("{0}")]
    Read(String),
    #[error("it is {size} bytes, more than the {cap} bytes left for it")]
    TooLarge { size: usize, cap: usize },
    #[error("only file: links to an absolute path are read")]
    NotAFileLink,
    #[error("it is binary")]
    Binary,
}

impl Unread {
    /// `text`, when it fits in the `cap` bytes left.
    pub(crate) fn within(text: String, cap: usize) -> Result<String, Unread> {
        if text.len() > cap {
            return Err(Unread::TooLarge {
                size: text.len(),
                cap,
            });
        }
        Ok(text)
    }
}

/// [`check_write`] off the async threads.
async fn write_target(env: &ToolEnv, given: &str, mode: Mode) -> Result<PathBuf, Refusal> {
    let fence = Fence::of(env.workspace(), &env.writes(mode));
    let given = given.to_owned();
    blocking(move || check_write(&fence, &given, mode)).await
}

/// The result of a confined read of a built-in credential store, which bwrap shows as an empty
/// file: the sentence saying what it is and how to lift it, instead of an empty text the model
/// would take for the file's content. `None` for any other read.
async fn credential_read(env: &ToolEnv, read: &Read, mode: Mode) -> Option<ToolResult> {
    let facts = read.facts.as_deref()?;
    if mode == Mode::DangerFullAccess {
        return None;
    }
    let credentials = env.profile().credentials;
    let path = read.path.clone();
    let denying = blocking(move || {
        Ok::<_, tokio::task::JoinError>(crate::credentials::denying(&credentials, &path))
    })
    .await
    .ok()
    .flatten()?;
    let note = crate::credentials::lift_note(&read.path, denying);
    Some(ToolResult::failed(
        format!(
            "cannot read {}: {note}\n{}",
            read.path.display(),
            denial_marker(crate::denial::Kind::FileRead, mode)
        ),
        file_facts(mode, &read.path, Some(facts)).into(),
    ))
}

pub(crate) async fn read_file(env: &ToolEnv, args: ReadArgs, mode: Mode) -> ToolResult {
    let path = absolute(env.workspace(), Path::new(&args.path));
    let read = match read_text(env, &path, mode).await {
        Ok(read) => read,
        Err(error) => return op_failed(error, mode, &path, "read"),
    };
    if let Some(refused) = credential_read(env, &read, mode).await {
        return refused;
    }
    let mut facts = file_facts(mode, &read.path, read.facts.as_deref());
    if read.facts.is_none() {
        facts.insert("read_by".to_owned(), json!("editor"));
    }
    let limit = args.limit.or(Some(READ_LINES));
    match window(&read.text, args.offset, limit, READ_CAP) {
        Ok(shown) => {
            facts.insert("lines".to_owned(), json!([shown.first, shown.last]));
            facts.insert("total_lines".to_owned(), json!(shown.total));
            ToolResult::completed(shown.render(), facts.into())
        }
        Err(why) => ToolResult::failed(
            format!("cannot read {}: {why}", path.display()),
            facts.into(),
        ),
    }
}

/// The change a `write_file` or `edit_file` call will make, computed before anything is
/// written: what a person asked to approve the call is shown, and exactly what `commit`
/// writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    /// The call's tool.
    tool: Tool,
    /// The path as the call gave it.
    given: String,
    /// Where the write lands: the real path the fence resolved, with every link followed. The
    /// write lands there or nowhere.
    target: PathBuf,
    /// The path as given names the target only through a link or a `..`: a person is told
    /// where the write lands.
    elsewhere: bool,
    /// The text before, read by the helper's reader under the call's mode.
    before: Before,
    /// The exact text the write writes.
    after: String,
    /// How many replacements an edit makes.
    replacements: usize,
}

impl Proposal {
    /// The file the write lands on: the real path, which is what an "always" answer covers.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Where the write lands, when the path as the call gave it names that file only through a
    /// link or a `..` (`None` when it names it as it is).
    pub fn lands_elsewhere(&self) -> Option<&Path> {
        self.elsewhere.then_some(self.target.as_path())
    }

    /// The change as a person is shown it: the text before (none for a new file) and the
    /// exact text after.
    pub fn diff(&self) -> LoggedDiff {
        diff_of(
            &self.target,
            self.before.clone(),
            kept(&self.after).as_deref(),
        )
    }
}

/// The write a `write_file` call proposes under `mode`; `Err` is the result it answers when it
/// cannot be made (the fence refused the path).
pub(crate) async fn propose_write(
    env: &ToolEnv,
    args: WriteArgs,
    mode: Mode,
) -> Result<Proposal, ToolResult> {
    let target = write_target(env, &args.path, mode)
        .await
        .map_err(|refusal| refused(refusal, mode, &args.path, "write"))?;
    let before = text_before(env, &target, mode).await;
    Ok(Proposal {
        tool: Tool::Write,
        elsewhere: absolute(env.workspace(), Path::new(&args.path)) != target,
        given: args.path,
        target,
        before,
        after: args.content,
        replacements: 0,
    })
}

/// The edit an `edit_file` call proposes under `mode`: the file read by the helper's reader
/// and the replacement made in that text. `Err` is the result it answers instead.
pub(crate) async fn propose_edit(
    env: &ToolEnv,
    args: EditArgs,
    mode: Mode,
) -> Result<Proposal, ToolResult> {
    let target = write_target(env, &args.path, mode)
        .await
        .map_err(|refusal| refused(refusal, mode, &args.path, "edit"))?;
    let read = confined_read(env, &target, mode)
        .await
        .map_err(|error| op_failed(error, mode, &target, "edit"))?;
    let (after, replacements) = apply_edit(
        &read.text,
        &args.old_string,
        &args.new_string,
        args.replace_all,
    )
    .map_err(|why| {
        ToolResult::failed(
            format!("cannot edit {}: {why}", target.display()),
            file_facts(mode, &read.path, read.facts.as_deref()).into(),
        )
    })?;
    Ok(Proposal {
        tool: Tool::Edit,
        elsewhere: absolute(env.workspace(), Path::new(&args.path)) != target,
        given: args.path,
        target,
        before: Before::Text(read.text),
        after,
        replacements,
    })
}

/// Writes `proposal` under `mode` with the helper's confined writer: exactly its text, to its
/// target. The fence is asked again under `mode` (the mode may have changed while a person was
/// asked); a path that now resolves elsewhere (a link swapped in since) writes nothing.
pub(crate) async fn commit(env: &ToolEnv, proposal: Proposal, mode: Mode) -> ToolResult {
    let Proposal {
        tool,
        given,
        target,
        elsewhere: _,
        before,
        after,
        replacements,
    } = proposal;
    let verb = tool.verb();
    let now = match write_target(env, &given, mode).await {
        Ok(now) => now,
        Err(refusal) => return refused(refusal, mode, &given, verb),
    };
    if now != target {
        return ToolResult::failed(
            format!(
                "cannot {verb} {given}: it now resolves to {}, not to {} as when the change was \
                 prepared; nothing was written",
                now.display(),
                target.display()
            ),
            json!({ "mode": mode.as_str(), "path": given }),
        );
    }
    write_and_say(env, tool, &target, Some(before), after, replacements, mode).await
}

/// Has the helper's writer write `after` to `target` under `mode`, and words the result. The
/// text before is `before`, read when the change was proposed, or, when `None`, what the
/// writer found as it replaced the file, kept in the same run.
async fn write_and_say(
    env: &ToolEnv,
    tool: Tool,
    target: &Path,
    before: Option<Before>,
    after: String,
    replacements: usize,
    mode: Mode,
) -> ToolResult {
    let verb = tool.verb();
    let bytes = after.len();
    let kept_after = kept(&after);
    let keep = before.as_ref().map_or(Keep::Previous, |_| Keep::Nothing);
    let mut written = match confined_write(env, target, after.as_bytes(), mode, keep).await {
        Ok(written) => written,
        Err(error) => return op_failed(error, mode, target, verb),
    };
    let before = match (written.previous.take(), before) {
        (Some(found), _) => found,
        (None, _) if written.created => Before::Created,
        // It existed after all when the writer came: what it held is not known.
        (None, Some(Before::Created) | None) => Before::Unread,
        (None, Some(before)) => before,
    };
    let change = Change {
        tool,
        before,
        bytes,
        kept_after,
        replacements,
    };
    said_written(&written, change, mode)
}

/// A `write_file` call no one is asked about: the fence, then one confined run of the writer,
/// which keeps what it replaces for the diff (a call a person approves reads it first, to show
/// it: [`propose_write`]).
pub(crate) async fn write_file(env: &ToolEnv, args: WriteArgs, mode: Mode) -> ToolResult {
    match write_target(env, &args.path, mode).await {
        Ok(target) => write_and_say(env, Tool::Write, &target, None, args.content, 0, mode).await,
        Err(refusal) => refused(refusal, mode, &args.path, "write"),
    }
}

/// An `edit_file` call no one is asked about: the fence, then one confined run that reads the
/// file, takes the edit made in its text and writes it unless the file changed meanwhile (a
/// call a person approves reads first, to show the change: [`propose_edit`]).
pub(crate) async fn edit_file(env: &ToolEnv, args: EditArgs, mode: Mode) -> ToolResult {
    match write_target(env, &args.path, mode).await {
        Ok(target) => edit::in_one_run(env, &target, &args, mode).await,
        Err(refusal) => refused(refusal, mode, &args.path, "edit"),
    }
}

/// What `target` holds before a write replaces it: nothing for a file that does not exist
/// (it will be created), its text as the helper's reader reads it under `mode`, or unread (it
/// exists but is not text, or the read failed). Whether the write created the file is the
/// writer's word, not this.
async fn text_before(env: &ToolEnv, target: &Path, mode: Mode) -> Before {
    let local = target.to_path_buf();
    let exists =
        blocking(move || Ok::<_, tokio::task::JoinError>(local.symlink_metadata().is_ok()))
            .await
            .unwrap_or(true);
    if !exists {
        return Before::Created;
    }
    match confined_read(env, target, mode).await {
        Ok(read) => Before::Text(read.text),
        Err(_) => Before::Unread,
    }
}
