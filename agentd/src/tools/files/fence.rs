//! The fence before a write: where a write of a path may land under a mode, checked in trusted
//! code so that the model hears why in a sentence rather than an errno. It is not the boundary:
//! the helper's confined writer is (`confined.rs`).

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use confine_protocol::{Mode, Policy};

use crate::denial::Kind;
use crate::profile::PROJECT_DIR;
use crate::real_path::{RealPathError, real_target};

/// Subpaths of the workspace that stay read-only in workspace-write mode, also when they do not
/// exist yet.
///
/// The same list confine-helper enforces for commands: one definition in the protocol crate.
pub use confine_protocol::PROTECTED_SUBPATHS as PROTECTED;

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
#[derive(Debug)]
pub(crate) enum Refusal {
    /// The mode does not allow writing there (a file write, or one to git metadata); the
    /// sentence says why.
    Denied(Kind, String),
    /// Where the write would land cannot be checked.
    Error(CheckError),
}

/// Why where a write would land cannot be checked.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CheckError {
    /// The path's real target cannot be found.
    #[error(transparent)]
    Target(#[from] RealPathError),
    /// The workspace's real path cannot be found.
    #[error("the workspace {} cannot be resolved: {source}", path.display())]
    Workspace {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The check, run off the async threads, did not finish.
    #[error("the file operation failed: {0}")]
    Interrupted(#[from] tokio::task::JoinError),
}

impl From<tokio::task::JoinError> for Refusal {
    fn from(error: tokio::task::JoinError) -> Refusal {
        Refusal::Error(CheckError::Interrupted(error))
    }
}

/// Where the writes of one file operation may land: the workspace and, in workspace-write,
/// the sandbox profile's further roots; inside them, the protected subpaths stay read-only.
/// Made from the very policy the operation is sent to the helper with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fence {
    pub workspace: PathBuf,
    /// The writable roots besides the workspace.
    pub roots: Vec<PathBuf>,
    /// Relative subpaths read-only inside every root, besides git metadata.
    pub protected: Vec<PathBuf>,
}

impl Fence {
    /// The fence of an operation in `workspace` sent with `policy`.
    pub(crate) fn of(workspace: &Path, policy: &Policy) -> Fence {
        let path = |bytes: &Vec<u8>| PathBuf::from(OsStr::from_bytes(bytes));
        Fence {
            workspace: workspace.to_path_buf(),
            roots: policy.writable_roots.iter().map(path).collect(),
            protected: policy.protected.iter().map(path).collect(),
        }
    }
}

/// Where a write of `given` may land under `mode`: the real path, with every symbolic link
/// resolved, so that what is checked is what is written.
///
/// - read-only: never.
/// - workspace-write: inside the canonical workspace or another of the fence's roots, and not
///   inside git metadata (a path with a `.git` component: the repository [`PROTECTED`] names,
///   and those of nested repositories) nor inside one of the fence's protected subpaths of
///   that root. The nearest existing ancestor is canonicalized and the rest appended, so a
///   symbolic link anywhere on the way (the file itself included) counts where it points, not
///   where it sits.
/// - danger-full-access: anywhere.
///
/// A symbolic link to nothing is refused in every mode: where a write through it would land
/// cannot be checked.
pub(crate) fn check_write(fence: &Fence, given: &str, mode: Mode) -> Result<PathBuf, Refusal> {
    if mode == Mode::ReadOnly {
        return Err(Refusal::Denied(
            Kind::FileWrite,
            format!("{given} was not written: in read-only mode no file can be changed"),
        ));
    }
    let workspace = &fence.workspace;
    let path = absolute(workspace, Path::new(given));
    let real = real_target(&path).map_err(|e| Refusal::Error(e.into()))?;
    if mode == Mode::DangerFullAccess {
        return Ok(real);
    }
    let root = fs::canonicalize(workspace).map_err(|source| {
        Refusal::Error(CheckError::Workspace {
            path: workspace.to_owned(),
            source,
        })
    })?;
    // A root that does not resolve holds nothing that could be written.
    let others: Vec<PathBuf> = fence
        .roots
        .iter()
        .filter_map(|r| fs::canonicalize(r).ok())
        .collect();
    let found = std::iter::once(&root)
        .chain(&others)
        .find_map(|r| real.strip_prefix(r).ok().map(|inside| (r, inside)));
    let Some((root_of, inside)) = found else {
        return Err(outside(given, &path, &real, &root, &others));
    };
    check_protected(fence, root_of, inside, &real)?;
    Ok(real)
}

/// The refusal of a write of `given` (at `path`, really `real`) outside the canonical workspace
/// `root` and the other writable roots `others`.
fn outside(given: &str, path: &Path, real: &Path, root: &Path, others: &[PathBuf]) -> Refusal {
    let is_link = fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    let what = if is_link {
        format!("{given} is a symbolic link to {}, which is", real.display())
    } else if real != path {
        format!("{given} resolves to {}, which is", real.display())
    } else {
        format!("{given} is")
    };
    let why = if others.is_empty() {
        format!(
            "{what} outside the workspace {}; in workspace-write mode only files inside the \
             workspace can be written",
            root.display()
        )
    } else {
        let others: Vec<String> = others.iter().map(|r| r.display().to_string()).collect();
        format!(
            "{what} outside the workspace {} and the writable roots {}; in workspace-write \
             mode only files inside them can be written",
            root.display(),
            others.join(", ")
        )
    };
    Refusal::Denied(Kind::FileWrite, why)
}

/// Refuses a write to `real`, at `inside` under the root `root_of`, when that lies in git
/// metadata or in one of the fence's protected subpaths.
fn check_protected(
    fence: &Fence,
    root_of: &Path,
    inside: &Path,
    real: &Path,
) -> Result<(), Refusal> {
    let mut metadata = root_of.to_path_buf();
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
    if let Some(protected) = fence.protected.iter().find(|p| inside.starts_with(p)) {
        let what = if protected.as_os_str() == PROJECT_DIR {
            "the project's own agentd configuration"
        } else {
            "a protected path"
        };
        return Err(Refusal::Denied(
            Kind::ProtectedPath,
            format!(
                "{} is inside {}, {what}, which stays read-only in workspace-write mode",
                real.display(),
                root_of.join(protected).display()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;
    use crate::test_support::workspace;

    /// The check of a write in `ws` with nothing but the workspace writable.
    fn check_write(ws: &Path, given: &str, mode: Mode) -> Result<PathBuf, Refusal> {
        let fence = Fence {
            workspace: ws.to_path_buf(),
            roots: Vec::new(),
            protected: Vec::new(),
        };
        super::check_write(&fence, given, mode)
    }

    fn denied(result: Result<PathBuf, Refusal>) -> String {
        match result {
            Err(Refusal::Denied(_, why)) => why,
            other => panic!("expected a denial, got {other:?}"),
        }
    }

    /// Where a write the fence allows lands.
    fn allowed(result: Result<PathBuf, Refusal>) -> PathBuf {
        result.unwrap_or_else(|refusal| panic!("expected it to be allowed, got {refusal:?}"))
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
            allowed(check_write(&ws, "src/new/deep/a.rs", Mode::WorkspaceWrite)),
            ws.join("src/new/deep/a.rs")
        );
        assert_eq!(
            allowed(check_write(
                &ws,
                ws.join("b").to_str().expect("utf-8"),
                Mode::WorkspaceWrite
            )),
            ws.join("b")
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
            allowed(check_write(&ws, "src/../a.txt", Mode::WorkspaceWrite)),
            ws.join("a.txt")
        );
        assert_eq!(
            allowed(check_write(&ws, "new/../a.txt", Mode::WorkspaceWrite)),
            ws.join("a.txt")
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
            allowed(check_write(&ws, "inner", Mode::WorkspaceWrite)),
            ws.join("src/real.txt")
        );
    }

    #[test]
    fn a_dangling_symlink_is_refused_in_every_mode() {
        let (_s, ws, outside) = workspace("files-dangling");
        symlink(outside.join("nothing"), ws.join("dangling")).expect("symlink");
        for mode in [Mode::WorkspaceWrite, Mode::DangerFullAccess] {
            match check_write(&ws, "dangling", mode) {
                Err(Refusal::Error(error)) => {
                    let dangling = ws.join("dangling");
                    assert!(
                        matches!(&error, CheckError::Target(RealPathError::DanglingLink(link))
                            if *link == dangling),
                        "{error:?}"
                    );
                    assert!(
                        error
                            .to_string()
                            .contains("symbolic link to a path that does not exist"),
                        "{error}"
                    );
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
    fn the_profiles_roots_are_writable_and_its_protected_paths_are_not() {
        let (_s, ws, outside) = workspace("files-profile");
        let cache = outside.join("cache");
        fs::create_dir_all(&cache).expect("mkdir");
        let fence = Fence {
            workspace: ws.clone(),
            roots: vec![cache.clone(), outside.join("missing")],
            protected: vec!["secrets".into(), PROJECT_DIR.into()],
        };
        let check = |given: &str| super::check_write(&fence, given, Mode::WorkspaceWrite);
        let in_cache = cache.join("wheel").display().to_string();
        assert_eq!(allowed(check(&in_cache)), cache.join("wheel"));
        assert_eq!(allowed(check("secretsfile")), ws.join("secretsfile"));
        let why = denied(check("secrets/key"));
        assert_eq!(
            why,
            format!(
                "{} is inside {}, a protected path, which stays read-only in workspace-write \
                 mode",
                ws.join("secrets/key").display(),
                ws.join("secrets").display()
            )
        );
        // Inside every root, not only the workspace.
        let in_cache_secret = cache.join("secrets/k").display().to_string();
        denied(check(&in_cache_secret));
        let why = denied(check(".agentd/config.toml"));
        assert!(
            why.contains("the project's own agentd configuration"),
            "{why}"
        );
        let why = denied(check("../outside/x"));
        assert!(
            why.contains(&format!("and the writable roots {}", cache.display())),
            "{why}"
        );
    }

    #[test]
    fn a_fence_takes_its_roots_and_protected_paths_from_the_policy() {
        let profile = crate::profile::SandboxProfile {
            writable_roots: vec!["/srv/extra".into()],
            protected: vec!["secrets".into()],
            ..Default::default()
        };
        let policy = profile.writes(
            Mode::WorkspaceWrite,
            Path::new("/w"),
            confine_protocol::Network::Deny,
        );
        assert_eq!(
            Fence::of(Path::new("/w"), &policy),
            Fence {
                workspace: "/w".into(),
                roots: vec!["/srv/extra".into()],
                protected: vec!["secrets".into()],
            }
        );
    }

    #[test]
    fn danger_full_access_writes_anywhere() {
        let (_s, ws, outside) = workspace("files-danger");
        assert_eq!(
            allowed(check_write(&ws, "../outside/x", Mode::DangerFullAccess)),
            outside.join("x")
        );
        assert!(check_write(&ws, ".git/hooks/x", Mode::DangerFullAccess).is_ok());
    }
}
