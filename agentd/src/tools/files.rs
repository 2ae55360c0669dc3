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
//! A write also keeps, for the editor, the change it made ([`LoggedDiff`], RFC 0009): the text
//! after, and the text before — for `edit_file` what it read, for `write_file` what a read of
//! the same call made just before the write found (nothing for a file the writer created). The
//! model's text is the same with or without it.
//!
//! The editor's own file access ([`super::ClientFs`]) is used only in danger-full-access, where
//! nothing is confined: it reads and writes as the editor, wherever the path points when it
//! gets there. In confined modes the editor learns of a write from the tool call's location.
//!
//! [`check_write`] runs before a write, as a fence in trusted code: it refuses, with a clear
//! sentence, what the sandbox would refuse anyway (outside the workspace and the sandbox
//! profile's roots, git metadata, the profile's protected paths), so the model hears why rather
//! than an errno. It is not the boundary.
//!
//! This file routes each call and words its result; the fence is `files/fence.rs`, the
//! helper's reader and writer `files/confined.rs`, and what is done with a file's text (the
//! window a read shows, the replacement an edit makes) `files/text.rs`.
//!
//! [`HelperClient::read_file`]: crate::helper_client::HelperClient::read_file
//! [`HelperClient::write_file`]: crate::helper_client::HelperClient::write_file

mod confined;
mod fence;
mod text;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use confine_protocol::Mode;
use serde_json::json;

use super::args::{EditArgs, ReadArgs, WriteArgs};
use super::call::ToolResult;
use super::env::ToolEnv;
use super::output::denial_marker;
use super::spec::{READ_CAP, READ_LINES};
use crate::command::Facts;
use crate::session::{Before, DIFF_TEXT_CAP, LoggedDiff};
use confined::{OpError, Read, Written, confined_read, confined_write};
use fence::{Fence, Refusal, absolute, check_write};
use text::{OpenError, apply_edit, checked_text, open_regular, window};

pub use confined::MAX_TEXT_FILE;
pub use fence::PROTECTED;

/// Why file work done here, around the editor's read or write, failed.
#[derive(Debug, thiserror::Error)]
enum LocalError {
    /// The work, run off the async threads, did not finish.
    #[error("the file operation failed: {0}")]
    Interrupted(#[from] tokio::task::JoinError),
    /// The file the editor is to read is not opened.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// The directory of a file the editor is to write cannot be made.
    #[error("cannot create the directory {}: {source}", dir.display())]
    CreateDir {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
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

/// Reads the text at `path`: through the editor in danger-full-access when it offers that
/// (a local file that is not a regular file is refused first, so it cannot be made to block),
/// else confined by the helper. The editor reads as the editor, wherever a path points: in
/// confined modes that would see what no command may see (its own `/proc/self/environ`, say).
async fn read_text(env: &ToolEnv, path: &Path, mode: Mode) -> Result<Read, OpError> {
    if let (Mode::DangerFullAccess, Some(client)) = (mode, env.client_fs()) {
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
/// reads it under `mode`: confined by the helper, or by the editor in danger-full-access. `Err`
/// is why not, as a sentence: the sandbox's refusal, a file that is not text, or one over `cap`
/// bytes (read whole or not at all).
pub(crate) async fn read_context(
    env: &ToolEnv,
    path: &Path,
    mode: Mode,
    cap: usize,
) -> Result<String, String> {
    let read = read_text(env, path, mode).await.map_err(|e| match e {
        OpError::Denied(why, _) | OpError::Failed(why, _) => why,
    })?;
    if read.text.len() > cap {
        return Err(format!(
            "it is {} bytes, more than the {cap} bytes left for it",
            read.text.len()
        ));
    }
    Ok(read.text)
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
                fs::create_dir_all(&dir).map_err(|source| LocalError::CreateDir { dir, source })
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

/// [`check_write`] off the async threads.
async fn write_target(env: &ToolEnv, given: &str, mode: Mode) -> Result<PathBuf, Refusal> {
    let fence = Fence::of(env.workspace(), &env.writes(mode));
    let given = given.to_owned();
    blocking(move || check_write(&fence, &given, mode)).await
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
    let limit = args.limit.or(Some(READ_LINES));
    match window(&read.text, args.offset, limit, READ_CAP) {
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
    let before = text_before(env, &target, mode).await;
    let bytes = args.content.len();
    let after = kept(&args.content);
    match write_text(env, &target, args.content, mode).await {
        Ok(written) => {
            let mut facts = file_facts(mode, &written.path, written.facts.as_deref());
            facts["bytes"] = json!(bytes);
            let verb = if written.created {
                "Created"
            } else {
                "Overwrote"
            };
            let before = match before {
                _ if written.created => Before::Created,
                Some(text) => Before::Text(text),
                None => Before::Unread,
            };
            let diff = diff_of(&written.path, before, after.as_deref());
            ToolResult::completed(
                format!("{verb} {} ({bytes} bytes)", written.path.display()),
                facts,
            )
            .with_diff(diff)
        }
        Err(error) => op_failed(error, mode, &target, "write"),
    }
}

/// A copy of what a write writes, when a diff can keep it (the writer takes the content).
fn kept(content: &str) -> Option<String> {
    (content.len() <= DIFF_TEXT_CAP).then(|| content.to_owned())
}

/// The change a write made to `path`: `after` is `None` when it was over the cap.
fn diff_of(path: &Path, before: Before, after: Option<&str>) -> LoggedDiff {
    match after {
        Some(after) => LoggedDiff::of(path, before, after),
        None => LoggedDiff::too_large(path),
    }
}

/// The text `target` holds before a write replaces it, for the editor's diff; `None` when it
/// was not read (it does not exist, or is not text). Read as a read of the call would be: by
/// the helper, confined under `mode`, or by the editor in danger-full-access, where a file
/// that does not exist is not asked for. Whether the write created the file is the writer's
/// word, not this.
async fn text_before(env: &ToolEnv, target: &Path, mode: Mode) -> Option<String> {
    if mode == Mode::DangerFullAccess {
        let local = target.to_path_buf();
        let exists = tokio::task::spawn_blocking(move || local.exists())
            .await
            .unwrap_or(false);
        if !exists {
            return None;
        }
    }
    read_text(env, target, mode)
        .await
        .ok()
        .map(|read| read.text)
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
    let after = kept(&edited);
    match write_text(env, &target, edited, mode).await {
        Ok(written) => {
            let mut facts = file_facts(mode, &written.path, written.facts.as_deref());
            facts["bytes"] = json!(bytes);
            facts["replacements"] = json!(replacements);
            let plural = if replacements == 1 { "" } else { "s" };
            let diff = diff_of(&written.path, Before::Text(read.text), after.as_deref());
            ToolResult::completed(
                format!(
                    "Edited {}: {replacements} replacement{plural}",
                    written.path.display()
                ),
                facts,
            )
            .with_diff(diff)
        }
        Err(error) => op_failed(error, mode, &target, "edit"),
    }
}
