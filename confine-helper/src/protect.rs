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
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use crate::git;
use crate::paths::{self, Kind, ReadError};

/// The most protected paths and pinned directories one command may need; each is a
/// descriptor passed to bwrap.
pub const MAX_BINDS: usize = 256;
/// How deep submodules of submodules are followed.
const MAX_DEPTH: usize = 8;
/// The largest index file read for its submodules.
const MAX_INDEX: u64 = 256 * 1024 * 1024;
/// The largest `.git` file, `commondir` or worktree `gitdir` file read.
const MAX_POINTER: u64 = 4096;

/// A writable root, opened once.
#[derive(Debug)]
pub struct Root {
    /// The real path, as the kernel reports it for `fd`.
    pub path: PathBuf,
    pub fd: OwnedFd,
}

/// A path to bind onto itself, with the descriptor that names it.
#[derive(Debug)]
pub struct Bind {
    pub path: PathBuf,
    pub fd: OwnedFd,
}

/// What keeps the protected paths read-only, and what cannot be kept so.
#[derive(Debug, Default)]
pub struct Protection {
    /// Directories on the way to a protected path, parents first: bound read-write.
    pub pinned: Vec<Bind>,
    /// Protected paths: bound read-only, after every pinned directory.
    pub read_only: Vec<Bind>,
    /// Sentences naming what could not be protected because it does not exist (yet).
    pub missing: Vec<String>,
}

/// Finds what must stay read-only in `roots`: the repository at the top of each and the
/// request's `extra` relative subpaths. `Err` is why it cannot be enforced at all.
pub fn protect(roots: &[Root], extra: &[PathBuf]) -> Result<Protection, String> {
    let mut walk = Walk {
        roots,
        out: Protection::default(),
        visited: HashSet::new(),
    };
    for (index, root) in roots.iter().enumerate() {
        walk.repository(index, PathBuf::new(), 0)?;
        for name in extra {
            if let Found::Missing(at) = walk.keep_read_only(index, name)? {
                walk.out.missing.push(format!(
                    "protected path {}: {} does not exist yet, so a command can create it",
                    root.path.join(name).display(),
                    at.display()
                ));
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

fn symlink_error(target: &Path, at: &Path) -> String {
    format!(
        "cannot enforce read-only path {}: {} is a symbolic link",
        target.display(),
        at.display()
    )
}

fn dup(fd: &OwnedFd, at: &Path) -> Result<OwnedFd, String> {
    fd.try_clone()
        .map_err(|e| format!("cannot duplicate the descriptor of {}: {e}", at.display()))
}

impl Walk<'_> {
    fn binds(&self) -> usize {
        self.out.pinned.len() + self.out.read_only.len()
    }

    fn covered(&self, path: &Path) -> bool {
        self.out.read_only.iter().any(|b| path.starts_with(&b.path))
    }

    fn push(&mut self, read_only: bool, path: PathBuf, fd: OwnedFd) -> Result<(), String> {
        if self.covered(&path) || (!read_only && self.out.pinned.iter().any(|b| b.path == path)) {
            return Ok(());
        }
        if self.binds() >= MAX_BINDS {
            return Err(format!(
                "cannot enforce read-only path {}: more than {MAX_BINDS} paths would have to be \
                 kept read-only (repositories with very many submodules are not supported)",
                path.display()
            ));
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
    fn keep_read_only(&mut self, index: usize, rel: &Path) -> Result<Found, String> {
        let root = &self.roots[index];
        let target = root.path.join(rel);
        let parts: Vec<_> = rel.components().collect();
        if parts.is_empty() || parts.iter().any(|c| !matches!(c, Component::Normal(_))) {
            return Err(format!(
                "cannot enforce read-only path {}: it is not a plain relative path",
                rel.display()
            ));
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
                Err(e) => {
                    return Err(format!(
                        "cannot enforce read-only path {}: opening {}: {e}",
                        target.display(),
                        at.display()
                    ));
                }
            };
            let kind = paths::kind(fd.as_fd()).map_err(|e| format!("{}: {e}", at.display()))?;
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
    fn root_of(&self, path: &Path) -> Option<(usize, PathBuf)> {
        self.roots
            .iter()
            .enumerate()
            .filter_map(|(i, r)| path.strip_prefix(&r.path).ok().map(|rel| (i, rel)))
            .max_by_key(|(_, rel)| std::cmp::Reverse(rel.components().count()))
            .map(|(i, rel)| (i, rel.to_path_buf()))
    }

    /// `named` (absolute) with symbolic links resolved only where no command can change them:
    /// outside every writable root. git follows the name again each time it runs, so a link
    /// inside a root on the way to a git directory could be re-pointed by a command after any
    /// check: that cannot be enforced.
    fn resolve_outside_roots(&self, named: &Path) -> Result<PathBuf, String> {
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
    fn pointed_dir(&mut self, named: &Path, what: &str) -> Result<Option<GitDir>, String> {
        let real = self.resolve_outside_roots(named)?;
        match self.root_of(&real) {
            Some((index, rel)) if !rel.as_os_str().is_empty() => {
                match self.keep_read_only(index, &rel)? {
                    Found::Present(fd, Kind::Dir) => Ok(Some(GitDir { path: real, fd })),
                    Found::Present(..) | Found::Blocked => Ok(None),
                    Found::Missing(at) => {
                        self.out.missing.push(format!(
                            "{what} {} does not exist ({} is missing), so a command can create it",
                            real.display(),
                            at.display()
                        ));
                        Ok(None)
                    }
                }
            }
            Some(_) => Err(format!(
                "cannot enforce read-only path {}: {what} is a writable root itself",
                real.display()
            )),
            None => match paths::open_dir(&real) {
                Ok(fd) => Ok(Some(GitDir { path: real, fd })),
                Err(e) if e.raw_os_error() == Some(nix::libc::ENOENT) => Ok(None),
                Err(e) => Err(format!(
                    "cannot read {what} {}: {e}; nothing was run",
                    real.display()
                )),
            },
        }
    }

    /// The repository whose worktree is `worktree` (relative to root `index`): its `.git`
    /// entry, git directory, common directory, submodules and linked worktrees.
    fn repository(&mut self, index: usize, worktree: PathBuf, depth: usize) -> Result<(), String> {
        let root_path = self.roots[index].path.clone();
        let dot = worktree.join(".git");
        let gitdir = match self.keep_read_only(index, &dot)? {
            Found::Missing(at) => {
                self.no_repository(index, &worktree, &at, depth)?;
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
                    Err(ReadError::Unusable(why)) => {
                        return Err(format!(
                            "cannot read the .git file {}: {why}; nothing was run",
                            root_path.join(&dot).display()
                        ));
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
                return Err(format!(
                    "cannot enforce read-only path {}: it is neither a directory nor a file",
                    root_path.join(&dot).display()
                ));
            }
        };
        self.git_dir(index, &worktree, gitdir, depth)
    }

    /// A repository's `.git` is missing: at the top of a root a command could create one; for a
    /// submodule, its directory is kept read-only so that none can be created in it.
    fn no_repository(
        &mut self,
        index: usize,
        worktree: &Path,
        at: &Path,
        depth: usize,
    ) -> Result<(), String> {
        let root = self.roots[index].path.clone();
        if depth == 0 {
            self.out.missing.push(format!(
                "repository {}: there is none yet, so a command can create one whose config and \
                 hooks git would use when run there later",
                root.join(".git").display()
            ));
            return Ok(());
        }
        if at != root.join(worktree).join(".git") {
            self.out.missing.push(format!(
                "submodule {}: {} does not exist, so a command can create a repository there \
                 that git status in the superproject would enter",
                root.join(worktree).display(),
                at.display()
            ));
            return Ok(());
        }
        // The submodule's directory exists but is not populated: keep it read-only.
        self.keep_read_only(index, worktree).map(drop)
    }

    fn git_dir(
        &mut self,
        index: usize,
        worktree: &Path,
        gitdir: GitDir,
        depth: usize,
    ) -> Result<(), String> {
        let id = paths::identity(gitdir.fd.as_fd())
            .map_err(|e| format!("{}: {e}", gitdir.path.display()))?;
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
            Err(ReadError::Unusable(why)) => {
                return Err(format!(
                    "cannot read {}: {why}; nothing was run",
                    gitdir.path.join("commondir").display()
                ));
            }
        };
        self.submodules(index, worktree, &gitdir, depth)?;
        let common = common.unwrap_or(gitdir);
        self.linked_worktrees(&common, depth)
    }

    /// Every gitlink of the repository's index (and of the shared index of a split index).
    fn submodules(
        &mut self,
        index: usize,
        worktree: &Path,
        gitdir: &GitDir,
        depth: usize,
    ) -> Result<(), String> {
        let mut gitlinks = Vec::new();
        let mut file = PathBuf::from("index");
        loop {
            let parsed = match paths::read_small(gitdir.fd.as_fd(), &file, MAX_INDEX) {
                Ok(bytes) => git::parse_index(&bytes),
                Err(ReadError::Missing) => break,
                Err(ReadError::Unusable(why)) => Err(why),
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
                    self.out.missing.push(format!(
                        "the submodules of {} (its index {} cannot be read: {why}), so their \
                         .git entries are not kept read-only",
                        self.roots[index].path.join(worktree).display(),
                        gitdir.path.join(&file).display()
                    ));
                    break;
                }
            }
        }
        if !gitlinks.is_empty() && depth >= MAX_DEPTH {
            self.out.missing.push(format!(
                "submodules nested deeper than {MAX_DEPTH} levels below {}",
                self.roots[index].path.display()
            ));
            return Ok(());
        }
        for link in gitlinks {
            self.repository(index, worktree.join(link), depth + 1)?;
        }
        Ok(())
    }

    /// The `.git` files of the linked worktrees listed in `common/worktrees/*/gitdir`, where
    /// they lie in a writable root, with their own repositories.
    fn linked_worktrees(&mut self, common: &GitDir, depth: usize) -> Result<(), String> {
        let names = paths::list_dir(common.fd.as_fd(), Path::new("worktrees"))
            .map_err(|e| format!("{}: {e}", common.path.join("worktrees").display()))?;
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
            if let Some((index, worktree)) = self.root_of(parent) {
                if depth < MAX_DEPTH {
                    self.repository(index, worktree, depth + 1)?;
                }
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
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("confine-protect-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::canonicalize(&dir).expect("canonical")
    }

    fn root(path: &Path) -> Root {
        Root {
            path: path.to_owned(),
            fd: paths::open_dir(path).expect("open root"),
        }
    }

    fn paths_of(binds: &[Bind]) -> Vec<PathBuf> {
        binds.iter().map(|b| b.path.clone()).collect()
    }

    fn git(dir: &Path, args: &[&str]) -> bool {
        std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .env("GIT_ALLOW_PROTOCOL", "file")
            .output()
            .is_ok_and(|o| o.status.success())
    }

    #[test]
    fn a_missing_repository_is_reported_and_nothing_is_created() {
        let dir = scratch("missing");
        let p = protect(&[root(&dir)], &[]).expect("protect");
        assert!(p.read_only.is_empty() && p.pinned.is_empty());
        assert_eq!(p.missing.len(), 1, "{:?}", p.missing);
        assert!(
            p.missing[0].contains("there is none yet"),
            "{:?}",
            p.missing
        );
        let entries: Vec<_> = std::fs::read_dir(&dir).expect("list").collect();
        assert!(entries.is_empty(), "nothing appears in the tree");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn the_whole_git_directory_is_read_only() {
        let dir = scratch("gitdir");
        std::fs::create_dir_all(dir.join(".git/hooks")).expect("mkdir");
        let p = protect(&[root(&dir)], &[]).expect("protect");
        assert_eq!(paths_of(&p.read_only), vec![dir.join(".git")]);
        assert!(p.pinned.is_empty());
        assert!(p.missing.is_empty(), "{:?}", p.missing);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_symlinked_git_cannot_be_enforced() {
        let dir = scratch("symlink");
        std::os::unix::fs::symlink("/tmp", dir.join(".git")).expect("symlink");
        let e = protect(&[root(&dir)], &[]).expect_err("refused");
        assert!(e.contains("is a symbolic link"), "{e}");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_git_file_protects_itself_and_the_directory_it_names_inside_a_root() {
        let dir = scratch("gitfile");
        std::fs::create_dir_all(dir.join("store/repo.git")).expect("mkdir");
        std::fs::create_dir_all(dir.join("ws")).expect("mkdir");
        std::fs::write(dir.join("ws/.git"), "gitdir: ../store/repo.git\n").expect("write");
        let p = protect(&[root(&dir.join("ws")), root(&dir.join("store"))], &[]).expect("protect");
        let ro = paths_of(&p.read_only);
        assert!(ro.contains(&dir.join("ws/.git")), "{ro:?}");
        assert!(ro.contains(&dir.join("store/repo.git")), "{ro:?}");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn submodules_and_linked_worktrees_keep_their_git_entries_read_only() {
        let dir = scratch("submodules");
        let (up, ws) = (dir.join("up"), dir.join("ws"));
        std::fs::create_dir_all(&up).expect("mkdir");
        std::fs::create_dir_all(&ws).expect("mkdir");
        if !git(&up, &["init", "-q"]) {
            eprintln!(
                "SKIP submodules_and_linked_worktrees_keep_their_git_entries_read_only: no git"
            );
            return;
        }
        std::fs::write(up.join("f"), "x").expect("write");
        assert!(git(&up, &["add", "f"]) && git(&up, &["commit", "-qm", "up"]));
        assert!(git(&ws, &["init", "-q"]));
        let url = up.to_string_lossy().into_owned();
        assert!(git(
            &ws,
            &[
                "-c",
                "protocol.file.allow=always",
                "submodule",
                "add",
                "-q",
                &url,
                "deps/up"
            ]
        ));
        // A gitlink whose directory was never populated.
        std::fs::create_dir_all(ws.join("deps/empty")).expect("mkdir");
        let head = std::process::Command::new("git")
            .args(["rev-parse", "HEAD"])
            .current_dir(&up)
            .output()
            .expect("rev-parse");
        let head = String::from_utf8_lossy(&head.stdout).trim().to_owned();
        assert!(git(
            &ws,
            &[
                "update-index",
                "--add",
                "--cacheinfo",
                &format!("160000,{head},deps/empty")
            ]
        ));
        assert!(git(
            &ws,
            &[
                "update-index",
                "--add",
                "--cacheinfo",
                &format!("160000,{head},deps/gone")
            ]
        ));
        assert!(git(&ws, &["commit", "-qm", "ws"]));
        assert!(git(&ws, &["worktree", "add", "-q", "wt"]));

        let p = protect(&[root(&ws)], &[]).expect("protect");
        let ro = paths_of(&p.read_only);
        for expected in [
            ws.join(".git"),
            ws.join("deps/up/.git"),
            ws.join("deps/empty"),
            ws.join("wt/.git"),
        ] {
            assert!(ro.contains(&expected), "{expected:?} not in {ro:?}");
        }
        let pinned = paths_of(&p.pinned);
        assert!(pinned.contains(&ws.join("deps")), "{pinned:?}");
        assert!(pinned.contains(&ws.join("deps/up")), "{pinned:?}");
        assert!(pinned.contains(&ws.join("wt")), "{pinned:?}");
        assert!(
            p.missing.iter().any(|m| m.contains("deps/gone")),
            "{:?}",
            p.missing
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_git_file_naming_its_git_directory_through_a_link_in_a_root_cannot_be_enforced() {
        let dir = scratch("gitfile-link");
        std::fs::create_dir_all(dir.join("ws/store/repo.git")).expect("mkdir");
        std::os::unix::fs::symlink(dir.join("ws/store"), dir.join("ws/via")).expect("symlink");
        std::fs::write(dir.join("ws/.git"), "gitdir: via/repo.git\n").expect("write");
        // A command could re-point `via` after any check, and git follows it on every run.
        let e = protect(&[root(&dir.join("ws"))], &[]).expect_err("refused");
        assert!(e.contains("is a symbolic link"), "{e}");
        // The same link outside every root is only the user's to change: followed.
        std::fs::remove_file(dir.join("ws/via")).expect("rm");
        std::fs::create_dir_all(dir.join("elsewhere/repo.git")).expect("mkdir");
        std::os::unix::fs::symlink(dir.join("elsewhere"), dir.join("via")).expect("symlink");
        std::fs::write(dir.join("ws/.git"), "gitdir: ../via/repo.git\n").expect("write");
        let p = protect(&[root(&dir.join("ws"))], &[]).expect("protect");
        assert_eq!(paths_of(&p.read_only), vec![dir.join("ws/.git")]);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_fifo_where_git_keeps_a_pointer_fails_the_run_instead_of_blocking() {
        let dir = scratch("fifo");
        std::fs::create_dir_all(dir.join(".git")).expect("mkdir");
        nix::unistd::mkfifo(&dir.join(".git/commondir"), nix::sys::stat::Mode::S_IRWXU)
            .expect("mkfifo");
        let e = protect(&[root(&dir)], &[]).expect_err("refused");
        assert!(e.contains("commondir"), "{e}");
        std::fs::remove_file(dir.join(".git/commondir")).expect("rm");
        nix::unistd::mkfifo(&dir.join(".git/index"), nix::sys::stat::Mode::S_IRWXU)
            .expect("mkfifo");
        let p = protect(&[root(&dir)], &[]).expect("an unreadable index is reported, not fatal");
        assert!(
            p.missing.iter().any(|m| m.contains("index")),
            "{:?}",
            p.missing
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn extra_protected_paths_are_walked_and_missing_ones_reported() {
        let dir = scratch("extra");
        std::fs::create_dir_all(dir.join("a/b")).expect("mkdir");
        std::fs::write(dir.join("file"), "").expect("write");
        let extra = [
            PathBuf::from("a/b"),
            PathBuf::from("file/below"),
            PathBuf::from("none/x"),
        ];
        let p = protect(&[root(&dir)], &extra).expect("protect");
        let ro = paths_of(&p.read_only);
        assert!(ro.contains(&dir.join("a/b")), "{ro:?}");
        assert!(ro.contains(&dir.join("file")), "{ro:?}");
        assert_eq!(paths_of(&p.pinned), vec![dir.join("a")]);
        assert!(
            p.missing.iter().any(|m| m.contains("none")),
            "{:?}",
            p.missing
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
