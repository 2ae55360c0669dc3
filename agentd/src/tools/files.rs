//! `read_file`, `write_file` and `edit_file`: agentd reads and writes the file itself (or has
//! the editor do it through [`ClientFs`]), after checking the path against the call's mode.
//! These checks are a policy fence in trusted code, not a kernel boundary; see the module
//! documentation of [`crate::tools`].

use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use confine_protocol::Mode;
use serde_json::json;

use super::args::{EditArgs, ReadArgs, WriteArgs};
use super::output::denial_marker;
use super::spec::READ_CAP;
use super::{ClientFs, ToolEnv, ToolResult};

/// Subpaths of the workspace that stay read-only in workspace-write mode, also when they do not
/// exist yet.
///
/// The same list confine-helper enforces for commands: one definition in the protocol crate.
pub use confine_protocol::PROTECTED_SUBPATHS as PROTECTED;

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
    /// The mode does not allow writing there; the sentence says why.
    Denied(String),
    /// The path cannot be written for another reason.
    Error(String),
}

/// Where a write of `given` may land under `mode`: the real path, with every symbolic link
/// resolved, so that what is checked is what is written.
///
/// - read-only: never.
/// - workspace-write: inside the canonical workspace and outside [`PROTECTED`]. The nearest
///   existing ancestor is canonicalized and the rest appended, so a symbolic link anywhere on
///   the way (the file itself included) counts where it points, not where it sits.
/// - danger-full-access: anywhere.
///
/// A symbolic link to nothing is refused in every mode: where a write through it would land
/// cannot be checked.
pub(crate) fn check_write(workspace: &Path, given: &str, mode: Mode) -> Result<PathBuf, Refusal> {
    if mode == Mode::ReadOnly {
        return Err(Refusal::Denied(format!(
            "{given} was not written: in read-only mode no file can be changed"
        )));
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
        return Err(Refusal::Denied(format!(
            "{what} outside the workspace {}; in workspace-write mode only files inside the \
             workspace can be written",
            root.display()
        )));
    };
    if let Some(protected) = PROTECTED.iter().find(|p| inside.starts_with(p)) {
        return Err(Refusal::Denied(format!(
            "{} is inside {}, which stays read-only in workspace-write mode",
            real.display(),
            root.join(protected).display()
        )));
    }
    Ok(real)
}

/// One step of the part of a path that does not exist yet.
enum Step {
    Up,
    Down(std::ffi::OsString),
}

/// `path` (absolute) with every symbolic link resolved: the nearest existing ancestor
/// canonicalized, the steps below it applied to that.
fn real_target(path: &Path) -> Result<PathBuf, String> {
    let mut existing = path.to_path_buf();
    let mut below = Vec::new();
    loop {
        match fs::symlink_metadata(&existing) {
            Ok(meta) => {
                let mut real = fs::canonicalize(&existing).map_err(|e| {
                    if meta.file_type().is_symlink() && e.kind() == io::ErrorKind::NotFound {
                        format!(
                            "{} is a symbolic link to a path that does not exist",
                            existing.display()
                        )
                    } else {
                        format!("{}: {e}", existing.display())
                    }
                })?;
                for step in below.into_iter().rev() {
                    match step {
                        Step::Up => {
                            real.pop();
                        }
                        Step::Down(name) => real.push(name),
                    }
                }
                return Ok(real);
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                match existing.components().next_back() {
                    Some(Component::ParentDir) => below.push(Step::Up),
                    Some(Component::Normal(name)) => below.push(Step::Down(name.to_owned())),
                    Some(Component::CurDir) => {}
                    _ => return Err(format!("{}: {e}", path.display())),
                }
                if !existing.pop() {
                    return Err(format!("{}: {e}", path.display()));
                }
            }
            Err(e) => return Err(format!("{}: {e}", existing.display())),
        }
    }
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

/// Reads a whole local text file of at most [`MAX_TEXT_FILE`] bytes.
fn read_local(path: &Path) -> Result<String, String> {
    let file = fs::File::open(path).map_err(|e| e.to_string())?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if meta.is_dir() {
        return Err("it is a directory; list it with bash (ls)".to_owned());
    }
    if meta.len() > MAX_TEXT_FILE {
        return Err(format!(
            "it is {} bytes, more than the {} MiB this tool takes in; read parts of it with bash \
             (head, tail, sed -n)",
            meta.len(),
            MAX_TEXT_FILE / (1024 * 1024)
        ));
    }
    let mut bytes = Vec::new();
    file.take(MAX_TEXT_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    as_text(bytes)
}

/// Writes `content` to `target` atomically: a new file in the same directory, renamed over the
/// target. Missing parent directories are created. A symbolic link at `target` is never
/// followed: it is refused, checked once more right before the rename (which would replace the
/// link itself, not what it points to).
pub(crate) fn write_atomically(target: &Path, content: &[u8]) -> Result<(), String> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = target
        .parent()
        .ok_or_else(|| "it has no parent directory".to_owned())?;
    fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create the directory {}: {e}", dir.display()))?;
    let is_link =
        |path: &Path| fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    let permissions = match fs::symlink_metadata(target) {
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err("it is a symbolic link, which is not followed".to_owned());
        }
        Ok(meta) if meta.is_dir() => return Err("it is a directory".to_owned()),
        Ok(meta) => Some(meta.permissions()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e.to_string()),
    };
    let temp = dir.join(format!(
        ".agentd-write-{}-{}.tmp",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let written = (|| -> io::Result<()> {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o666)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&temp)?;
        file.write_all(content)?;
        if let Some(permissions) = permissions {
            file.set_permissions(permissions)?;
        }
        file.sync_all()?;
        if is_link(target) {
            return Err(io::Error::other(
                "it became a symbolic link while being written, which is not followed",
            ));
        }
        fs::rename(&temp, target)
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&temp);
        return Err(e.to_string());
    }
    Ok(())
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

fn facts(mode: Mode, path: &Path) -> serde_json::Value {
    json!({ "mode": mode.as_str(), "path": path.to_string_lossy() })
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

/// Reads the text at `path`, through the editor when it offers that.
async fn read_text(client: Option<&dyn ClientFs>, path: &Path) -> Result<String, String> {
    match client {
        Some(client) => client.read_text(path).await.and_then(checked_text),
        None => {
            let path = path.to_path_buf();
            blocking(move || read_local(&path)).await
        }
    }
}

/// Writes `content` to `target` (already checked), through the editor when it offers that.
async fn write_text(
    client: Option<&dyn ClientFs>,
    target: &Path,
    content: String,
) -> Result<(), String> {
    match client {
        Some(client) => {
            if let Some(dir) = target.parent() {
                let dir = dir.to_path_buf();
                blocking(move || {
                    fs::create_dir_all(&dir)
                        .map_err(|e| format!("cannot create the directory {}: {e}", dir.display()))
                })
                .await?;
            }
            client.write_text(target, &content).await
        }
        None => {
            let target = target.to_path_buf();
            blocking(move || write_atomically(&target, content.as_bytes())).await
        }
    }
}

/// [`check_write`] off the async threads; also says whether the target exists already.
async fn write_target(env: &ToolEnv, given: &str, mode: Mode) -> Result<(PathBuf, bool), Refusal> {
    let (workspace, given) = (env.workspace().to_path_buf(), given.to_owned());
    let checked = blocking(move || {
        Ok(check_write(&workspace, &given, mode).map(|target| {
            let exists = fs::symlink_metadata(&target).is_ok();
            (target, exists)
        }))
    });
    checked.await.unwrap_or_else(|why| Err(Refusal::Error(why)))
}

/// The result of a refused write.
fn refused(refusal: Refusal, mode: Mode, given: &str, verb: &str) -> ToolResult {
    match refusal {
        Refusal::Denied(why) => ToolResult::failed(
            format!("{why}\n{}", denial_marker(mode)),
            json!({ "mode": mode.as_str(), "path": given, "denied": true }),
        ),
        Refusal::Error(why) => ToolResult::failed(
            format!("cannot {verb} {given}: {why}"),
            json!({ "mode": mode.as_str(), "path": given }),
        ),
    }
}

pub(crate) async fn read_file(env: &ToolEnv, args: ReadArgs, mode: Mode) -> ToolResult {
    let path = absolute(env.workspace(), Path::new(&args.path));
    let text = match read_text(env.client_fs(), &path).await {
        Ok(text) => text,
        Err(why) => {
            return ToolResult::failed(
                format!("cannot read {}: {why}", path.display()),
                facts(mode, &path),
            );
        }
    };
    match window(&text, args.offset, args.limit, READ_CAP) {
        Ok(shown) => {
            let mut facts = facts(mode, &path);
            facts["lines"] = json!([shown.first, shown.last]);
            facts["total_lines"] = json!(shown.total);
            ToolResult::completed(shown.render(), facts)
        }
        Err(why) => ToolResult::failed(
            format!("cannot read {}: {why}", path.display()),
            facts(mode, &path),
        ),
    }
}

pub(crate) async fn write_file(env: &ToolEnv, args: WriteArgs, mode: Mode) -> ToolResult {
    let (target, existed) = match write_target(env, &args.path, mode).await {
        Ok(target) => target,
        Err(refusal) => return refused(refusal, mode, &args.path, "write"),
    };
    let bytes = args.content.len();
    match write_text(env.client_fs(), &target, args.content).await {
        Ok(()) => {
            let mut facts = facts(mode, &target);
            facts["bytes"] = json!(bytes);
            let verb = if existed { "Overwrote" } else { "Created" };
            ToolResult::completed(
                format!("{verb} {} ({bytes} bytes)", target.display()),
                facts,
            )
        }
        Err(why) => ToolResult::failed(
            format!("cannot write {}: {why}", target.display()),
            facts(mode, &target),
        ),
    }
}

pub(crate) async fn edit_file(env: &ToolEnv, args: EditArgs, mode: Mode) -> ToolResult {
    let target = match write_target(env, &args.path, mode).await {
        Ok((target, _)) => target,
        Err(refusal) => return refused(refusal, mode, &args.path, "edit"),
    };
    let fail = |why: String| {
        ToolResult::failed(
            format!("cannot edit {}: {why}", target.display()),
            facts(mode, &target),
        )
    };
    let text = match read_text(env.client_fs(), &target).await {
        Ok(text) => text,
        Err(why) => return fail(why),
    };
    let (edited, replacements) =
        match apply_edit(&text, &args.old_string, &args.new_string, args.replace_all) {
            Ok(edit) => edit,
            Err(why) => return fail(why),
        };
    let bytes = edited.len();
    match write_text(env.client_fs(), &target, edited).await {
        Ok(()) => {
            let mut facts = facts(mode, &target);
            facts["bytes"] = json!(bytes);
            facts["replacements"] = json!(replacements);
            let plural = if replacements == 1 { "" } else { "s" };
            ToolResult::completed(
                format!(
                    "Edited {}: {replacements} replacement{plural}",
                    target.display()
                ),
                facts,
            )
        }
        Err(why) => fail(why),
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
            Err(Refusal::Denied(why)) => why,
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
    fn protected_subpaths_stay_read_only_also_when_missing_or_reached_by_a_link() {
        let (_s, ws, _) = workspace("files-protected");
        fs::create_dir_all(ws.join(".git/hooks")).expect("mkdir");
        for path in [
            ".git/hooks/pre-commit",
            ".git/config",
            ".gitmodules",
            ".agentd/state",
            "src/../.git/hooks/x",
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
        // Other files under .git, and look-alike names, are ordinary.
        assert!(check_write(&ws, ".git/HEAD", Mode::WorkspaceWrite).is_ok());
        assert!(check_write(&ws, ".gitmodules.bak", Mode::WorkspaceWrite).is_ok());
        assert!(check_write(&ws, "src/.agentd", Mode::WorkspaceWrite).is_ok());
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
    fn an_atomic_write_replaces_the_file_keeping_its_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let (_s, ws, _) = workspace("files-atomic");
        let path = ws.join("script.sh");
        fs::write(&path, "old").expect("write");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o751)).expect("chmod");
        write_atomically(&path, b"new").expect("written");
        assert_eq!(fs::read_to_string(&path).expect("read"), "new");
        let mode = fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o751);
        write_atomically(&ws.join("a/b/c.txt"), b"deep").expect("parents created");
        assert_eq!(
            fs::read_to_string(ws.join("a/b/c.txt")).expect("read"),
            "deep"
        );
        let leftovers: Vec<_> = fs::read_dir(&ws)
            .expect("list")
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn an_atomic_write_never_follows_a_symlink_at_the_end() {
        let (_s, ws, outside) = workspace("files-nofollow");
        fs::write(outside.join("target"), "keep").expect("write");
        symlink(outside.join("target"), ws.join("link")).expect("symlink");
        let why = write_atomically(&ws.join("link"), b"new").expect_err("refused");
        assert!(why.contains("symbolic link"), "{why}");
        assert_eq!(
            fs::read_to_string(outside.join("target")).expect("read"),
            "keep"
        );
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
        let (_s, ws, _) = workspace("files-binary");
        fs::write(ws.join("bin"), b"ab\0cd").expect("write");
        fs::write(ws.join("latin1"), b"caf\xe9\n").expect("write");
        fs::write(ws.join("ok"), "café\n").expect("write");
        assert!(
            read_local(&ws.join("bin"))
                .expect_err("binary")
                .contains("binary")
        );
        assert!(
            read_local(&ws.join("latin1"))
                .expect_err("latin-1")
                .contains("not UTF-8 text (invalid byte at offset 3)")
        );
        assert_eq!(read_local(&ws.join("ok")), Ok("café\n".to_owned()));
        assert!(read_local(&ws).expect_err("dir").contains("directory"));
    }
}
