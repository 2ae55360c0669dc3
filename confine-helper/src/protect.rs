//! Which paths inside the writable roots stay read-only, found by descriptor.
//!
//! For every writable root the helper keeps read-only its repository (see [`crate::git`]) and
//! the request's own protected subpaths. Every path is walked from the root's descriptor one
//! component at a time with `RESOLVE_NO_SYMLINKS`: a symbolic link on the way cannot be kept
//! read-only reliably and fails the run, before anything runs. The walk yields descriptors,
//! which the bwrap backend binds (`--ro-bind-fd`), never names it checked earlier:
//!
//! - the protected path itself, bound read-only onto itself;
//! - every directory between the root and it, bound read-write onto itself ("pinned"), so it is
//!   a mount point in the sandbox and cannot be renamed away and replaced (`EBUSY`).
//!
//! Nothing is created in the user's tree. A protected path that does not exist cannot be kept
//! from being created: it is listed in [`Protection::missing`] and becomes part of the
//! `Partial` enforcement fact. Reads of git's files are non-blocking and only of regular files
//! ([`crate::paths`]), so nothing a command leaves in a repository can stall the helper.

use std::collections::HashSet;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use confine_protocol::Gap;

use crate::git;
use crate::paths::{self, Kind, ReadError, Unreadable};

/// The most protected paths and pinned directories one command may need; each is a
/// descriptor passed to bwrap.
pub(crate) const MAX_BINDS: usize = 256;
/// How deep submodules of submodules are followed.
const MAX_DEPTH: usize = 8;
/// The largest index file read for its submodules.
const MAX_INDEX: u64 = 256 * 1024 * 1024;
/// The largest `.git` file, `commondir` or worktree `gitdir` file read.
const MAX_POINTER: u64 = 4096;

/// A writable root, opened once.
#[derive(Debug)]
pub(crate) struct Root {
    /// The real path, as the kernel reports it for `fd`.
    pub(crate) path: PathBuf,
    pub(crate) fd: OwnedFd,
}

/// A path to bind onto itself, with the descriptor that names it.
#[derive(Debug)]
pub(crate) struct Bind {
    pub(crate) path: PathBuf,
    /// What bwrap mounts; Seatbelt's rules name the path.
    #[cfg_attr(not(target_os = "linux"), expect(dead_code, reason = "bwrap's alone"))]
    pub(crate) fd: OwnedFd,
}

/// What keeps the protected paths read-only, and what cannot be kept so.
#[derive(Debug, Default)]
pub(crate) struct Protection {
    /// Directories on the way to a protected path, parents first: bound read-write.
    pub(crate) pinned: Vec<Bind>,
    /// Protected paths: bound read-only, after every pinned directory.
    pub(crate) read_only: Vec<Bind>,
    /// Sentences naming what could not be protected because it does not exist (yet).
    pub(crate) missing: Vec<Gap>,
    /// The protected paths among `missing` that do not exist, each with its sentence's index
    /// there: a backend whose rules name paths (Seatbelt) keeps them from being created.
    pub(crate) absent: Vec<(PathBuf, usize)>,
}

/// Why the protected paths cannot be kept read-only at all; nothing is run. The text is the
/// detail of a `RunnerFailed{prepare}`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProtectError {
    /// `at`, on the way to the protected path `target`, is a symbolic link.
    #[error("cannot enforce read-only path {target}: {at} is a symbolic link")]
    Symlink { target: PathBuf, at: PathBuf },
    #[error("cannot duplicate the descriptor of {path}: {source}")]
    Dup { path: PathBuf, source: io::Error },
    /// Keeping `path` read-only would take more than [`MAX_BINDS`] binds.
    #[error(
        "cannot enforce read-only path {path}: more than {MAX_BINDS} paths would have to be \
         kept read-only (repositories with very many submodules are not supported)"
    )]
    TooMany { path: PathBuf },
    #[error("cannot enforce read-only path {path}: it is not a plain relative path")]
    NotPlain { path: PathBuf },
    #[error("cannot enforce read-only path {target}: opening {at}: {source}")]
    Open {
        target: PathBuf,
        at: PathBuf,
        source: io::Error,
    },
    /// Learning what `path` is (its kind, its identity, its entries) failed.
    #[error("{path}: {source}")]
    Inspect { path: PathBuf, source: io::Error },
    /// A pointer file names a writable root itself as `what`.
    #[error("cannot enforce read-only path {path}: {what} is a writable root itself")]
    PointsAtRoot { path: PathBuf, what: &'static str },
    /// `what`, named by a pointer file outside every writable root, cannot be opened.
    #[error("cannot read {what} {path}: {source}; nothing was run")]
    Pointed {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("cannot read the .git file {path}: {source}; nothing was run")]
    GitFile { path: PathBuf, source: Unreadable },
    #[error("cannot read {path}: {source}; nothing was run")]
    Commondir { path: PathBuf, source: Unreadable },
    #[error("cannot enforce read-only path {path}: it is neither a directory nor a file")]
    NotDirOrFile { path: PathBuf },
}

/// Why a repository's index yields no submodules: it cannot be read, or not parsed.
#[derive(Debug, thiserror::Error)]
enum IndexUnread {
    #[error(transparent)]
    Read(Unreadable),
    #[error(transparent)]
    Parse(git::IndexError),
}

/// Finds what must stay read-only in `roots`: the repository at the top of each and the
/// request's `extra` relative subpaths. `Err` is why it cannot be enforced at all.
pub(crate) fn protect(roots: &[Root], extra: &[PathBuf]) -> Result<Protection, ProtectError> {
    let mut walk = Walk {
        roots,
        out: Protection::default(),
        visited: HashSet::new(),
    };
    for root in roots {
        walk.repository(root, PathBuf::new(), 0)?;
        for name in extra {
            if let Found::Missing(at) = walk.keep_read_only(root, name)? {
                walk.absent(
                    root.path.join(name),
                    Gap::NoProtected {
                        path: root.path.join(name).display().to_string(),
                        at: at.display().to_string(),
                    },
                );
            }
        }
    }
    Ok(walk.finish())
}

struct Walk<'a> {
    roots: &'a [Root],
    out: Protection,
    /// Git directories already followed, by `(dev, ino)`: worktrees and submodules can point
    /// back at each other.
    visited: HashSet<(u64, u64)>,
}

/// What stands at a path that was to be kept read-only.
enum Found {
    /// It exists; the descriptor is for reading it.
    Present(OwnedFd, Kind),
    /// A component of it is a file, which is kept read-only: nothing can appear beneath.
    Blocked,
    /// This component (absolute) does not exist.
    Missing(PathBuf),
}

/// Where a git directory is, and a descriptor to read it.
struct GitDir {
    path: PathBuf,
    fd: OwnedFd,
}

fn symlink_error(target: &Path, at: &Path) -> ProtectError {
    ProtectError::Symlink {
        target: target.to_owned(),
        at: at.to_owned(),
    }
}

fn dup(fd: &OwnedFd, at: &Path) -> Result<OwnedFd, ProtectError> {
    fd.try_clone().map_err(|source| ProtectError::Dup {
        path: at.to_owned(),
        source,
    })
}

impl<'a> Walk<'a> {
    /// Names `path`, a protected path that does not exist, as the `gap`.
    fn absent(&mut self, path: PathBuf, gap: Gap) {
        self.out.absent.push((path, self.out.missing.len()));
        self.out.missing.push(gap);
    }

    fn binds(&self) -> usize {
        self.out.pinned.len() + self.out.read_only.len()
    }

    fn covered(&self, path: &Path) -> bool {
        self.out.read_only.iter().any(|b| path.starts_with(&b.path))
    }

    fn push(&mut self, read_only: bool, path: PathBuf, fd: OwnedFd) -> Result<(), ProtectError> {
        if self.covered(&path) || (!read_only && self.out.pinned.iter().any(|b| b.path == path)) {
            return Ok(());
        }
        if self.binds() >= MAX_BINDS {
            return Err(ProtectError::TooMany { path });
        }
        let list = if read_only {
            &mut self.out.read_only
        } else {
            &mut self.out.pinned
        };
        list.push(Bind { path, fd });
        Ok(())
    }

    /// Keeps `rel` (plain components) beneath root `index` read-only, pinning every
    /// directory on the way.
    fn keep_read_only(&mut self, root: &'a Root, rel: &Path) -> Result<Found, ProtectError> {
        let target = root.path.join(rel);
        let parts: Vec<_> = rel.components().collect();
        if parts.is_empty() || parts.iter().any(|c| !matches!(c, Component::Normal(_))) {
            return Err(ProtectError::NotPlain {
                path: rel.to_owned(),
            });
        }
        let mut dir = dup(&root.fd, &root.path)?;
        let mut at = root.path.clone();
        for (i, part) in parts.iter().enumerate() {
            at.push(part);
            let fd = match paths::open_entry(dir.as_fd(), Path::new(part)) {
                Ok(fd) => fd,
                Err(e) if e.raw_os_error() == Some(nix::libc::ENOENT) => {
                    return Ok(Found::Missing(at));
                }
                Err(source) => return Err(ProtectError::Open { target, at, source }),
            };
            let kind = paths::kind(fd.as_fd()).map_err(|source| ProtectError::Inspect {
                path: at.clone(),
                source,
            })?;
            let last = i + 1 == parts.len();
            match kind {
                Kind::Symlink => return Err(symlink_error(&target, &at)),
                Kind::Dir if !last => {
                    let keep = dup(&fd, &at)?;
                    self.push(false, at.clone(), keep)?;
                    dir = fd;
                }
                _ if last => {
                    let keep = dup(&fd, &at)?;
                    self.push(true, at, keep)?;
                    return Ok(Found::Present(fd, kind));
                }
                _ => {
                    self.push(true, at, fd)?;
                    return Ok(Found::Blocked);
                }
            }
        }
        Ok(Found::Blocked)
    }

    /// The deepest root containing the absolute `path`, and `path` relative to it.
    fn root_of(&self, path: &Path) -> Option<(&'a Root, PathBuf)> {
        self.roots
            .iter()
            .filter_map(|r| path.strip_prefix(&r.path).ok().map(|rel| (r, rel)))
            .max_by_key(|(_, rel)| std::cmp::Reverse(rel.components().count()))
            .map(|(r, rel)| (r, rel.to_path_buf()))
    }

    /// `named` (absolute) with symbolic links resolved only where no command can change them:
    /// outside every writable root. git follows the name again each time it runs, so a link
    /// inside a root on the way to a git directory could be re-pointed by a command after any
    /// check: that cannot be enforced.
    fn resolve_outside_roots(&self, named: &Path) -> Result<PathBuf, ProtectError> {
        let mut real = PathBuf::from("/");
        let mut parts = named.components();
        while let Some(part) = parts.next() {
            match part {
                Component::Normal(name) => real.push(name),
                Component::ParentDir => {
                    // `real` has no link in it, so its parent is the real parent.
                    real.pop();
                    continue;
                }
                _ => continue,
            }
            match std::fs::symlink_metadata(&real) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    if self.root_of(&real).is_some() {
                        return Err(symlink_error(named, &real));
                    }
                    match std::fs::canonicalize(&real) {
                        Ok(target) => real = target,
                        // A link to nothing: what it names does not exist.
                        Err(_) => break,
                    }
                }
                Ok(_) => {}
                Err(_) => {
                    // It does not exist: the rest is taken as written.
                    for rest in parts {
                        if let Component::Normal(name) = rest {
                            real.push(name);
                        }
                    }
                    break;
                }
            }
        }
        Ok(real)
    }

    /// A git directory named by a pointer file: kept read-only when it lies in a writable
    /// root, opened for reading either way. `None` when it does not exist.
    fn pointed_dir(
        &mut self,
        named: &Path,
        what: &'static str,
    ) -> Result<Option<GitDir>, ProtectError> {
        let real = self.resolve_outside_roots(named)?;
        match self.root_of(&real) {
            Some((root, rel)) if !rel.as_os_str().is_empty() => {
                match self.keep_read_only(root, &rel)? {
                    Found::Present(fd, Kind::Dir) => Ok(Some(GitDir { path: real, fd })),
                    Found::Present(..) | Found::Blocked => Ok(None),
                    Found::Missing(at) => {
                        let gap = Gap::NoPointedDir {
                            what: what.to_owned(),
                            path: real.display().to_string(),
                            at: at.display().to_string(),
                        };
                        self.absent(real, gap);
                        Ok(None)
                    }
                }
            }
            Some(_) => Err(ProtectError::PointsAtRoot { path: real, what }),
            None => match paths::open_dir(&real) {
                Ok(fd) => Ok(Some(GitDir { path: real, fd })),
                Err(e) if e.raw_os_error() == Some(nix::libc::ENOENT) => Ok(None),
                Err(source) => Err(ProtectError::Pointed {
                    what,
                    path: real,
                    source,
                }),
            },
        }
    }

    /// The repository whose worktree is `worktree` (relative to root `index`): its `.git`
    /// entry, git directory, common directory, submodules and linked worktrees.
    fn repository(
        &mut self,
        root: &'a Root,
        worktree: PathBuf,
        depth: usize,
    ) -> Result<(), ProtectError> {
        let root_path = root.path.clone();
        let dot = worktree.join(".git");
        let gitdir = match self.keep_read_only(root, &dot)? {
            Found::Missing(at) => {
                self.no_repository(root, &worktree, &at, depth)?;
                return Ok(());
            }
            Found::Blocked => return Ok(()),
            Found::Present(fd, Kind::Dir) => GitDir {
                path: root_path.join(&dot),
                fd,
            },
            Found::Present(fd, Kind::File) => {
                let content = match paths::read_regular(fd.as_fd(), MAX_POINTER) {
                    Ok(content) => content,
                    Err(ReadError::Missing) => return Ok(()),
                    Err(ReadError::Unreadable(source)) => {
                        return Err(ProtectError::GitFile {
                            path: root_path.join(&dot),
                            source,
                        });
                    }
                };
                let Some(target) = git::gitfile_target(&content, &root_path.join(&worktree)) else {
                    // git does not take it as a repository either.
                    return Ok(());
                };
                match self.pointed_dir(&target, "the git directory of a .git file")? {
                    Some(gitdir) => gitdir,
                    None => return Ok(()),
                }
            }
            Found::Present(..) => {
                return Err(ProtectError::NotDirOrFile {
                    path: root_path.join(&dot),
                });
            }
        };
        self.git_dir(root, &worktree, gitdir, depth)
    }

    /// A repository's `.git` is missing: at the top of a root a command could create one; for a
    /// submodule, its directory is kept read-only so that none can be created in it.
    fn no_repository(
        &mut self,
        root: &'a Root,
        worktree: &Path,
        at: &Path,
        depth: usize,
    ) -> Result<(), ProtectError> {
        let dot = root.path.join(worktree).join(".git");
        if depth == 0 {
            let gap = Gap::NoRepository {
                dot: dot.display().to_string(),
            };
            self.absent(dot, gap);
            return Ok(());
        }
        if at != dot {
            let gap = Gap::NoSubmodule {
                path: root.path.join(worktree).display().to_string(),
                at: at.display().to_string(),
            };
            self.absent(dot, gap);
            return Ok(());
        }
        // The submodule's directory exists but is not populated: keep it read-only.
        self.keep_read_only(root, worktree).map(drop)
    }

    fn git_dir(
        &mut self,
        root: &'a Root,
        worktree: &Path,
        gitdir: GitDir,
        depth: usize,
    ) -> Result<(), ProtectError> {
        let id = paths::identity(gitdir.fd.as_fd()).map_err(|source| ProtectError::Inspect {
            path: gitdir.path.clone(),
            source,
        })?;
        if !self.visited.insert(id) {
            return Ok(());
        }
        let common = match paths::read_small(gitdir.fd.as_fd(), Path::new("commondir"), MAX_POINTER)
        {
            Ok(content) => match git::commondir_target(&content, &gitdir.path) {
                Some(target) => {
                    self.pointed_dir(&target, "the common directory of a repository")?
                }
                None => None,
            },
            Err(ReadError::Missing) => None,
            Err(ReadError::Unreadable(source)) => {
                return Err(ProtectError::Commondir {
                    path: gitdir.path.join("commondir"),
                    source,
                });
            }
        };
        self.submodules(root, worktree, &gitdir, depth)?;
        let common = common.unwrap_or(gitdir);
        self.linked_worktrees(&common, depth)
    }

    /// Every gitlink of the repository's index (and of the shared index of a split index).
    fn submodules(
        &mut self,
        root: &'a Root,
        worktree: &Path,
        gitdir: &GitDir,
        depth: usize,
    ) -> Result<(), ProtectError> {
        let mut gitlinks = Vec::new();
        let mut file = PathBuf::from("index");
        loop {
            let parsed = match paths::read_small(gitdir.fd.as_fd(), &file, MAX_INDEX) {
                Ok(bytes) => git::parse_index(&bytes).map_err(IndexUnread::Parse),
                Err(ReadError::Missing) => break,
                Err(ReadError::Unreadable(why)) => Err(IndexUnread::Read(why)),
            };
            match parsed {
                Ok(parsed) => {
                    gitlinks.extend(parsed.gitlinks);
                    match parsed.shared {
                        Some(shared) if file.as_os_str() == "index" => file = shared.into(),
                        _ => break,
                    }
                }
                Err(why) => {
                    self.out.missing.push(Gap::UnreadIndex {
                        path: root.path.join(worktree).display().to_string(),
                        index: gitdir.path.join(&file).display().to_string(),
                        why: why.to_string(),
                    });
                    break;
                }
            }
        }
        if !gitlinks.is_empty() && depth >= MAX_DEPTH {
            self.out.missing.push(Gap::DeepSubmodules {
                max: u64::try_from(MAX_DEPTH).unwrap_or(u64::MAX),
                root: root.path.display().to_string(),
            });
            return Ok(());
        }
        for link in gitlinks {
            self.repository(root, worktree.join(link), depth + 1)?;
        }
        Ok(())
    }

    /// The `.git` files of the linked worktrees listed in `common/worktrees/*/gitdir`, where
    /// they lie in a writable root, with their own repositories.
    fn linked_worktrees(&mut self, common: &GitDir, depth: usize) -> Result<(), ProtectError> {
        let names =
            paths::list_dir(common.fd.as_fd(), Path::new("worktrees")).map_err(|source| {
                ProtectError::Inspect {
                    path: common.path.join("worktrees"),
                    source,
                }
            })?;
        for name in names.unwrap_or_default() {
            let admin = Path::new("worktrees").join(&name);
            let content =
                match paths::read_small(common.fd.as_fd(), &admin.join("gitdir"), MAX_POINTER) {
                    Ok(content) => content,
                    Err(_) => continue,
                };
            let Some(gitfile) = git::worktree_gitfile(&content, &common.path.join(&admin)) else {
                continue;
            };
            let gitfile = self.resolve_outside_roots(&gitfile)?;
            let (Some(parent), Some(".git")) = (
                gitfile.parent(),
                gitfile.file_name().and_then(|n| n.to_str()),
            ) else {
                continue;
            };
            if let Some((root, worktree)) = self.root_of(parent)
                && depth < MAX_DEPTH
            {
                self.repository(root, worktree, depth + 1)?;
            }
        }
        Ok(())
    }

    /// Drops binds made redundant by a read-only one above them, and orders what is left.
    fn finish(mut self) -> Protection {
        let depth = |b: &Bind| b.path.components().count();
        self.out.read_only.sort_by_key(depth);
        let mut read_only: Vec<Bind> = Vec::new();
        for bind in self.out.read_only {
            if !read_only.iter().any(|r| bind.path.starts_with(&r.path)) {
                read_only.push(bind);
            }
        }
        self.out
            .pinned
            .retain(|p| !read_only.iter().any(|r| p.path.starts_with(&r.path)));
        self.out.pinned.sort_by_key(depth);
        self.out.read_only = read_only;
        self.out
    }
}

#[cfg(test)]
#[path = "protect_tests.rs"]
mod tests;
