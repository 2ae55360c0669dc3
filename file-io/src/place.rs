//! Where a write lands and how the new file is put there: atomically, with the old file's
//! permissions, synced, and nothing left behind by a writer killed at any point but a
//! temporary name the next write in that directory removes once it is stale.

use std::ffi::OsStr;
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{Mode, fchmod, fstatat};

use crate::failure::{Failed, failed, io_failed, nix_failed};

/// The path the kernel has for an open file: `/proc/self/fd`'s link on Linux.
#[cfg(target_os = "linux")]
pub(crate) fn real_path(file: &impl AsFd) -> Option<PathBuf> {
    std::fs::read_link(format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(&file.as_fd())
    ))
    .ok()
}

/// The path the kernel has for an open file: `F_GETPATH` on macOS.
#[cfg(target_os = "macos")]
pub(crate) fn real_path(file: &impl AsFd) -> Option<PathBuf> {
    let mut real = PathBuf::new();
    nix::fcntl::fcntl(file, nix::fcntl::FcntlArg::F_GETPATH(&mut real)).ok()?;
    Some(real)
}

/// Where a write lands: the directory, open, and the name in it.
pub(crate) struct Spot {
    /// The file the path names, a symbolic link at it resolved ([`target_of`]).
    pub(crate) target: PathBuf,
    dir: PathBuf,
    dir_fd: OwnedFd,
    name: std::ffi::OsString,
}

impl Spot {
    /// The spot of `path`, whose directory exists.
    pub(crate) fn of(path: &Path) -> Result<Spot, Failed> {
        let target = target_of(path)?;
        let (dir, name) = match (target.parent(), target.file_name()) {
            (Some(dir), Some(name)) => (dir.to_owned(), name.to_owned()),
            _ => return Err(failed(nix::libc::EINVAL, "it names no file")),
        };
        let dir_fd = nix::fcntl::open(
            &dir,
            OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| nix_failed(e, format!("cannot open the directory {}", dir.display())))?;
        Ok(Spot {
            target,
            dir,
            dir_fd,
            name,
        })
    }

    /// What is at the name now, without following a link: nothing, or a regular file (anything
    /// else is refused, never opened).
    pub(crate) fn existing(&self) -> Result<Option<nix::sys::stat::FileStat>, Failed> {
        let st = match fstatat(
            &self.dir_fd,
            self.name.as_os_str(),
            AtFlags::AT_SYMLINK_NOFOLLOW,
        ) {
            Ok(st) => st,
            Err(nix::Error::ENOENT) => return Ok(None),
            Err(e) => {
                let what = format!("cannot inspect {}", self.target.display());
                return Err(nix_failed(e, what));
            }
        };
        if st.st_mode & nix::libc::S_IFMT != nix::libc::S_IFREG {
            return Err(failed(
                nix::libc::EINVAL,
                format!(
                    "{} is {}, not a regular file",
                    self.target.display(),
                    kind_of(st.st_mode)
                ),
            ));
        }
        Ok(Some(st))
    }

    /// The name as the kernel reaches it: the directory's real path and the name.
    pub(crate) fn at_name(&self) -> Option<PathBuf> {
        real_path(&self.dir_fd).map(|dir| dir.join(&self.name))
    }

    /// Puts `content` in place at the name, with the old file's mode when there was one;
    /// returns the path really written.
    pub(crate) fn put(
        self,
        content: &[u8],
        old_mode: Option<nix::libc::mode_t>,
    ) -> Result<PathBuf, Failed> {
        sweep_stale(&self.dir_fd);
        place(&self.dir_fd, &self.dir, &self.name, content, old_mode)?;
        // The kernel's path of the directory, with the name the file now has there (an
        // unnamed file's own descriptor keeps the path it was made with).
        Ok(self.at_name().unwrap_or(self.target))
    }
}

/// Puts `content` in place as `name` in `dir`, atomically.
///
/// On Linux the file is made without a name (`O_TMPFILE`), filled and synced, then given its
/// name: linked as `name` when there is none, else linked under a temporary name and renamed
/// over it. A kill before that leaves nothing; one between the link and the rename (two system
/// calls) leaves the temporary name, which the next write in that directory removes
/// ([`sweep_stale`]). A file system without `O_TMPFILE` gets [`place_named`].
#[cfg(target_os = "linux")]
fn place(
    dir: &OwnedFd,
    dir_path: &Path,
    name: &OsStr,
    content: &[u8],
    old_mode: Option<nix::libc::mode_t>,
) -> Result<(), Failed> {
    let unnamed = nix::fcntl::openat(
        dir,
        ".",
        OFlag::O_TMPFILE | OFlag::O_WRONLY | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o666),
    );
    let file = match unnamed {
        Ok(file) => file,
        Err(nix::Error::EOPNOTSUPP | nix::Error::EISDIR | nix::Error::EINVAL) => {
            return place_named(dir, dir_path, name, content, old_mode);
        }
        Err(e) => {
            return Err(nix_failed(
                e,
                format!("cannot create a file in {}", dir_path.display()),
            ));
        }
    };
    let file = fill(file, content, old_mode)?;
    let proc_path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&file));
    let link = |to: &OsStr| {
        nix::unistd::linkat(dir, proc_path.as_str(), dir, to, AtFlags::AT_SYMLINK_FOLLOW)
    };
    if old_mode.is_none() {
        match link(name) {
            Ok(()) => return Ok(()),
            // Made since it was looked at: replaced like an old one.
            Err(nix::Error::EEXIST) => {}
            Err(e) => return Err(nix_failed(e, "cannot put the new file in place")),
        }
    }
    let mut attempt = 0;
    let temp = loop {
        let temp = temp_name(attempt);
        match link(temp.as_os_str()) {
            Ok(()) => break temp,
            Err(nix::Error::EEXIST) if attempt + 1 < TEMP_ATTEMPTS => attempt += 1,
            Err(e) => return Err(nix_failed(e, "cannot put the new file in place")),
        }
    };
    rename_over(dir, &temp, name)
}

/// macOS has no `O_TMPFILE`: [`place_named`].
#[cfg(target_os = "macos")]
fn place(
    dir: &OwnedFd,
    dir_path: &Path,
    name: &OsStr,
    content: &[u8],
    old_mode: Option<nix::libc::mode_t>,
) -> Result<(), Failed> {
    place_named(dir, dir_path, name, content, old_mode)
}

/// Puts `content` in place through a new file under a temporary name in `dir`, renamed over
/// `name` once filled and synced. A kill in between leaves the temporary name, which the next
/// write in that directory removes ([`sweep_stale`]).
fn place_named(
    dir: &OwnedFd,
    dir_path: &Path,
    name: &OsStr,
    content: &[u8],
    old_mode: Option<nix::libc::mode_t>,
) -> Result<(), Failed> {
    let mut attempt = 0;
    let (temp, file) = loop {
        let temp = temp_name(attempt);
        match nix::fcntl::openat(
            dir,
            temp.as_os_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o666),
        ) {
            Ok(file) => break (temp, file),
            Err(nix::Error::EEXIST) if attempt + 1 < TEMP_ATTEMPTS => attempt += 1,
            Err(e) => {
                return Err(nix_failed(
                    e,
                    format!("cannot create a file in {}", dir_path.display()),
                ));
            }
        }
    };
    if let Err(f) = fill(file, content, old_mode) {
        remove(dir, &temp);
        return Err(f);
    }
    rename_over(dir, &temp, name)
}

/// Writes `content` into `file`, takes over the old file's permissions and syncs it.
fn fill(
    file: OwnedFd,
    content: &[u8],
    old_mode: Option<nix::libc::mode_t>,
) -> Result<std::fs::File, Failed> {
    let mut file = std::fs::File::from(file);
    file.write_all(content)
        .map_err(|e| io_failed(&e, "cannot write the content"))?;
    if let Some(mode) = old_mode {
        fchmod(file.as_fd(), Mode::from_bits_truncate(mode & 0o7777))
            .map_err(|e| nix_failed(e, "cannot keep the file's permissions"))?;
    }
    file.sync_all()
        .map_err(|e| io_failed(&e, "cannot sync the file"))?;
    Ok(file)
}

/// Renames `temp` over `name` in `dir`; removes `temp` if that fails.
fn rename_over(dir: &OwnedFd, temp: &Path, name: &OsStr) -> Result<(), Failed> {
    nix::fcntl::renameat(dir, temp.as_os_str(), dir, name).map_err(|e| {
        remove(dir, temp);
        nix_failed(e, "cannot put the new file in place")
    })
}

fn remove(dir: &OwnedFd, temp: &Path) {
    let _ = nix::unistd::unlinkat(
        dir,
        temp.as_os_str(),
        nix::unistd::UnlinkatFlags::NoRemoveDir,
    );
}

/// The start and end of every temporary name the writer makes ([`temp_name`]).
const TEMP_PREFIX: &str = ".agentd-write-";
const TEMP_SUFFIX: &str = ".tmp";
/// A temporary name untouched for this long belongs to a writer that was killed: no live
/// writer keeps one longer than it takes to write and sync content it already holds.
const STALE_TEMP: std::time::Duration = std::time::Duration::from_secs(10 * 60);

/// Removes what killed writers left in `dir`: regular files with a temporary name of the
/// writer's, last modified more than [`STALE_TEMP`] ago. Anything it cannot read or remove is
/// left as it is.
fn sweep_stale(dir: &OwnedFd) {
    let Ok(listed) = nix::dir::Dir::openat(
        dir,
        ".",
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) else {
        return;
    };
    let Ok(now) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) else {
        return;
    };
    for entry in listed.into_iter().flatten() {
        let name = OsStr::from_bytes(entry.file_name().to_bytes());
        let bytes = name.as_bytes();
        if !bytes.starts_with(TEMP_PREFIX.as_bytes()) || !bytes.ends_with(TEMP_SUFFIX.as_bytes()) {
            continue;
        }
        let Ok(st) = fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) else {
            continue;
        };
        let modified = u64::try_from(st.st_mtime).unwrap_or(u64::MAX);
        let stale = now.as_secs().saturating_sub(modified) > STALE_TEMP.as_secs();
        if st.st_mode & nix::libc::S_IFMT == nix::libc::S_IFREG && stale {
            remove(dir, Path::new(name));
        }
    }
}

/// Where a write of `path` goes: `path` itself, or, when it is a symbolic link, the regular
/// file it names.
fn target_of(path: &Path) -> Result<PathBuf, Failed> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => match std::fs::canonicalize(path) {
            Ok(real) => Ok(real),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(failed(
                nix::libc::ENOENT,
                format!(
                    "{} is a symbolic link to a path that does not exist",
                    path.display()
                ),
            )),
            Err(e) => Err(io_failed(&e, format!("cannot resolve {}", path.display()))),
        },
        Ok(_) => Ok(path.to_owned()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(path.to_owned()),
        Err(e) => Err(io_failed(&e, format!("cannot inspect {}", path.display()))),
    }
}

fn kind_of(mode: nix::libc::mode_t) -> &'static str {
    match mode & nix::libc::S_IFMT {
        nix::libc::S_IFDIR => "a directory",
        nix::libc::S_IFIFO => "a FIFO",
        nix::libc::S_IFSOCK => "a socket",
        nix::libc::S_IFCHR | nix::libc::S_IFBLK => "a device",
        nix::libc::S_IFLNK => "a symbolic link",
        _ => "a special file",
    }
}

/// A fresh name for the new file; `attempt` varies it when one is taken.
fn temp_name(attempt: u32) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    PathBuf::from(format!(
        "{TEMP_PREFIX}{}-{nanos:08x}-{attempt}{TEMP_SUFFIX}",
        std::process::id()
    ))
}

/// How many names are tried before giving up on an existing one.
const TEMP_ATTEMPTS: u32 = 8;
