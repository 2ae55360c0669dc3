//! The walk that records (or only scans) the roots: by descriptor, each directory opened
//! relative to its parent with `O_NOFOLLOW`, as `deny_read`'s walk does, so a link or a rename
//! swapped in by a command running alongside can never send it outside a root. Links are
//! recorded as links (their target's bytes); FIFOs, sockets and devices are never opened and
//! only listed as left out; a regular file is opened `O_NONBLOCK | O_NOFOLLOW` and checked
//! regular with `fstat` before a byte of it is read. `.git` and the protected paths are
//! skipped; ignored paths ([`super::ignore`]) and files over the size cap are left out and
//! listed.
//!
//! With a shadow (the session's previous checkpoint), a regular file whose size, mode-free
//! stat (mtime, ctime, inode, device) is unchanged, and that had not changed in the last
//! [`RACY`] (by default) before that checkpoint's walk began, keeps its recorded hash unread.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::dir::Dir;
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat, readlinkat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat, fstatat};

use super::ignore::{NO_REPOSITORY_DEFAULTS, Rules, Stack};
use super::manifest::{Entry, Kind, Manifest, Omitted, Stamp};
use super::objects::{Objects, copy_hashing};
use super::{CheckpointError, LeftOutWhy, Scope};
use crate::deny_read::{MAX_DEPTH, open_dir};

/// The most entries one walk records, over all roots.
pub(super) const MAX_ENTRIES: usize = 1_000_000;
/// The largest `.gitignore` (or `.git/info/exclude`) read; a larger one is not read.
const MAX_IGNORE_FILE: u64 = 1024 * 1024;
/// How long before a checkpoint's walk began a file must have last changed for its stat to
/// be trusted next time: file times come from a coarse clock, and some file systems keep them
/// to the second or two.
pub const RACY: std::time::Duration = std::time::Duration::from_secs(2);
/// The name skipped everywhere: a repository's own files are never recorded nor restored.
const GIT: &str = ".git";

/// What a walk does with a regular file's content.
pub(super) enum Sink<'a> {
    /// Stores it as an object (recording).
    Store(&'a Objects),
    /// Only hashes it (scanning, to compare).
    Hash,
}

/// What a walk found.
pub(super) struct Walked {
    pub manifest: Manifest,
    /// How many files' content was read.
    pub reads: u64,
}

/// Walks `scope`'s roots now. `shadow`'s hashes stand for unchanged files; `cap` bounds the
/// content recorded.
pub(super) fn walk(
    roots: &[PathBuf],
    scope: &Scope,
    shadow: Option<&Manifest>,
    sink: Sink<'_>,
    cap: u64,
    started_ns: i128,
    racy: std::time::Duration,
) -> Result<Walked, CheckpointError> {
    let index: HashMap<PathBuf, &Entry> = shadow.map(Manifest::by_path).unwrap_or_default();
    let trusted_before = shadow.map_or(i128::MIN, |s| {
        s.started_ns - i128::try_from(racy.as_nanos()).unwrap_or(i128::MAX)
    });
    let mut walker = Walker {
        scope,
        index,
        trusted_before,
        sink,
        cap,
        used: 0,
        seen: 0,
        reads: 0,
        manifest: Manifest {
            started_ns,
            roots: roots.to_vec(),
            ..Manifest::default()
        },
    };
    for (i, root) in roots.iter().enumerate() {
        if !root.is_absolute() {
            return Err(CheckpointError::NotAbsolute { path: root.clone() });
        }
        let dir = match Dir::open(
            root,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        ) {
            Ok(dir) => dir,
            // A root that does not exist holds nothing to record.
            Err(Errno::ENOENT) => continue,
            Err(e) => {
                return Err(CheckpointError::Walk {
                    path: root.clone(),
                    source: e.into(),
                });
            }
        };
        let mut stack = Stack::default();
        let repository = fstatat(&dir, GIT, AtFlags::AT_SYMLINK_NOFOLLOW).is_ok();
        if !repository {
            stack.push(Rules::parse(Path::new(""), NO_REPOSITORY_DEFAULTS));
        } else if let Some(text) = exclude_file(&dir) {
            stack.push(Rules::parse(Path::new(""), &text));
        }
        walker.dir(i, dir, Path::new(""), stack, 0)?;
    }
    Ok(Walked {
        manifest: walker.manifest,
        reads: walker.reads,
    })
}

struct Walker<'a> {
    scope: &'a Scope,
    index: HashMap<PathBuf, &'a Entry>,
    trusted_before: i128,
    sink: Sink<'a>,
    cap: u64,
    used: u64,
    seen: usize,
    reads: u64,
    manifest: Manifest,
}

/// A file's permission bits. (`mode_t` is narrower than `u32` on macOS.)
#[allow(clippy::useless_conversion)]
fn mode_of(st: &FileStat) -> u32 {
    u32::from(st.st_mode) & 0o7777
}

fn kind_of(st: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT
}

impl Walker<'_> {
    fn leave_out(&mut self, root: usize, rel: PathBuf, why: LeftOutWhy) {
        self.manifest.left_out.push(Omitted { root, rel, why });
    }

    fn protected(&self, root: usize, rel: &Path) -> bool {
        let abs = self.manifest.path(root, rel);
        self.scope
            .protected
            .iter()
            .any(|p| if p.is_absolute() { *p == abs } else { p == rel })
    }

    /// Walks `dir` (at `rel` below root `root`) with the ignore rules `stack`.
    fn dir(
        &mut self,
        root: usize,
        dir: Dir,
        rel: &Path,
        mut stack: Stack,
        depth: usize,
    ) -> Result<(), CheckpointError> {
        let here = self.manifest.path(root, rel);
        let failed = |source: Errno| CheckpointError::Walk {
            path: here.clone(),
            source: source.into(),
        };
        if let Some(text) = ignore_file(&dir, OsStr::new(".gitignore")) {
            let rules = Rules::parse(rel, &text);
            if !rules.is_empty() {
                stack.push(rules);
            }
        }
        let mut dir = dir;
        let mut names: Vec<OsString> = Vec::new();
        for entry in dir.iter() {
            let entry = entry.map_err(failed)?;
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            if name != "." && name != ".." && name != GIT {
                names.push(name.to_owned());
            }
        }
        names.sort();
        for name in names {
            self.seen += 1;
            if self.seen > MAX_ENTRIES {
                return Err(CheckpointError::TooLarge {
                    root: self.manifest.roots.get(root).cloned().unwrap_or_default(),
                    limit: MAX_ENTRIES,
                });
            }
            let child = rel.join(&name);
            if self.protected(root, &child) {
                continue;
            }
            let st = match fstatat(&dir, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                // Gone since it was listed: it is not there to record.
                Err(Errno::ENOENT) => continue,
                Err(e) => return Err(failed(e)),
            };
            let kind = kind_of(&st);
            if stack.ignored(&child, kind == SFlag::S_IFDIR) {
                self.leave_out(root, child, LeftOutWhy::Ignored);
                continue;
            }
            match kind {
                SFlag::S_IFDIR => self.subdir(root, &dir, &name, child, &st, &stack, depth)?,
                SFlag::S_IFLNK => match readlinkat(&dir, name.as_os_str()) {
                    Ok(target) => {
                        let data = target.as_bytes().to_vec();
                        self.manifest.entries.push(Entry {
                            root,
                            rel: child,
                            kind: Kind::Link,
                            mode: mode_of(&st),
                            size: data.len() as u64,
                            stamp: Stamp::of(&st),
                            data,
                        });
                    }
                    Err(Errno::ENOENT | Errno::EINVAL) => {}
                    Err(e) => return Err(failed(e)),
                },
                SFlag::S_IFREG => self.file(root, &dir, &name, child, &st)?,
                _ => self.leave_out(root, child, LeftOutWhy::NotRegular),
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn subdir(
        &mut self,
        root: usize,
        parent: &Dir,
        name: &OsStr,
        rel: PathBuf,
        st: &FileStat,
        stack: &Stack,
        depth: usize,
    ) -> Result<(), CheckpointError> {
        if depth + 1 > MAX_DEPTH {
            return Err(CheckpointError::Walk {
                path: self.manifest.path(root, &rel),
                source: std::io::Error::other(format!(
                    "directories nest more than {MAX_DEPTH} deep"
                )),
            });
        }
        let child = match open_dir(Some(parent), Path::new(name)) {
            Ok(child) => child,
            // Replaced or removed since it was looked at: not there to record.
            Err(Errno::ENOENT | Errno::ENOTDIR | Errno::ELOOP) => return Ok(()),
            Err(Errno::EACCES) => {
                self.leave_out(root, rel, LeftOutWhy::Unreadable);
                return Ok(());
            }
            Err(e) => {
                return Err(CheckpointError::Walk {
                    path: self.manifest.path(root, &rel),
                    source: e.into(),
                });
            }
        };
        self.manifest.entries.push(Entry {
            root,
            rel: rel.clone(),
            kind: Kind::Dir,
            mode: mode_of(st),
            size: 0,
            stamp: Stamp::of(st),
            data: Vec::new(),
        });
        self.dir(root, child, &rel, stack.clone(), depth + 1)
    }

    fn file(
        &mut self,
        root: usize,
        dir: &Dir,
        name: &OsStr,
        rel: PathBuf,
        st: &FileStat,
    ) -> Result<(), CheckpointError> {
        let size = u64::try_from(st.st_size).unwrap_or(0);
        if self.used.saturating_add(size) > self.cap {
            self.manifest.over_cap = true;
            self.leave_out(root, rel, LeftOutWhy::OverCap);
            return Ok(());
        }
        let stamp = Stamp::of(st);
        let abs = self.manifest.path(root, &rel);
        if let Some(known) = self.index.get(&abs).filter(|known| {
            known.kind == Kind::File
                && known.size == size
                && known.stamp == stamp
                && stamp.latest_ns() < self.trusted_before
        }) {
            self.used += size;
            let data = known.data.clone();
            self.manifest.entries.push(Entry {
                root,
                rel,
                kind: Kind::File,
                mode: mode_of(st),
                size,
                stamp,
                data,
            });
            return Ok(());
        }
        let mut file = match open_regular(dir, name) {
            Ok(Some(file)) => file,
            Ok(None) => {
                self.leave_out(root, rel, LeftOutWhy::NotRegular);
                return Ok(());
            }
            Err(Errno::ENOENT | Errno::ELOOP | Errno::ENXIO) => return Ok(()),
            Err(Errno::EACCES | Errno::EPERM) => {
                self.leave_out(root, rel, LeftOutWhy::Unreadable);
                return Ok(());
            }
            Err(e) => {
                return Err(CheckpointError::Walk {
                    path: abs,
                    source: e.into(),
                });
            }
        };
        let opened = fstat(&file).map_err(|e| CheckpointError::Walk {
            path: abs.clone(),
            source: e.into(),
        })?;
        self.reads += 1;
        let read = match &self.sink {
            Sink::Store(objects) => objects.put(&mut file),
            Sink::Hash => copy_hashing(&mut file, None),
        };
        let (hash, read) = read.map_err(|source| CheckpointError::Walk {
            path: abs.clone(),
            source,
        })?;
        self.used += read;
        self.manifest.entries.push(Entry {
            root,
            rel,
            kind: Kind::File,
            mode: mode_of(&opened),
            size: read,
            stamp: Stamp::of(&opened),
            data: hash.into_bytes(),
        });
        Ok(())
    }
}

/// Opens `name` in `dir` for reading without following a link or waiting on a FIFO, and only
/// if it is a regular file (`None` when it is not: nothing of it was read).
pub(super) fn open_regular(dir: &impl AsFd, name: &OsStr) -> Result<Option<File>, Errno> {
    let fd: OwnedFd = openat(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    let st = fstat(&fd)?;
    if kind_of(&st) != SFlag::S_IFREG {
        return Ok(None);
    }
    Ok(Some(File::from(fd)))
}

/// The text of the ignore file `name` in `dir`, if it is a regular file of a sensible size.
fn ignore_file(dir: &impl AsFd, name: &OsStr) -> Option<Vec<u8>> {
    let file = open_regular(dir, name).ok()??;
    let mut text = Vec::new();
    file.take(MAX_IGNORE_FILE).read_to_end(&mut text).ok()?;
    Some(text)
}

/// `.git/info/exclude` of the root `dir`, reached without following a link.
fn exclude_file(dir: &Dir) -> Option<Vec<u8>> {
    let git = open_dir(Some(dir), Path::new(GIT)).ok()?;
    let info = open_dir(Some(&git), Path::new("info")).ok()?;
    ignore_file(&info, OsStr::new("exclude"))
}

/// Opens the regular file `rel` below `root` without following a link anywhere on the way:
/// `None` when it is not there, or not a regular file.
pub(super) fn open_below(root: &Path, rel: &Path) -> Option<File> {
    let mut dir = Dir::open(
        root,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let names: Vec<&OsStr> = rel.iter().collect();
    let (last, dirs) = names.split_last()?;
    for name in dirs {
        dir = open_dir(Some(&dir), Path::new(name)).ok()?;
    }
    open_regular(&dir, last).ok()?
}
