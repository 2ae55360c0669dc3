//! Paths held by descriptor.
//!
//! A path checked by name and used by name later can be swapped for a symbolic link in
//! between by any process that can write one of its parent directories. So the helper opens
//! each writable root and each protected path once, with `openat2` and
//! `RESOLVE_NO_SYMLINKS` (a link anywhere on the way is an error, not a detour), learns the
//! path it really names from the descriptor itself (`/proc/self/fd/N`), checks that, and then
//! hands the descriptor — not the name — to the backend. Files the helper reads inside a
//! writable root (git's metadata) are opened the same way, non-blocking, and only if they are
//! regular files, so a FIFO or a device put there cannot stall the helper.
//!
//! On macOS the same guarantees come from `O_NOFOLLOW_ANY` (a link anywhere on the way is
//! `ELOOP`; macOS 11), a `..` or absolute name refused before the call in place of
//! `RESOLVE_BENEATH`, `O_SYMLINK` for a link at the end, and `F_GETPATH` for the path a
//! descriptor names. macOS has no `O_PATH`: descriptors are opened for reading, non-blocking
//! (so a FIFO opens at once), which needs read permission; a socket file cannot be opened at
//! all, and is an error where Linux reports its kind.

use std::io;
#[cfg(target_os = "linux")]
use std::io::Read;
#[cfg(target_os = "linux")]
use std::os::fd::AsRawFd;
#[cfg(target_os = "linux")]
use std::os::fd::OwnedFd;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Component, Path, PathBuf};

#[cfg(target_os = "linux")]
use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};
#[cfg(target_os = "linux")]
use nix::sys::stat::Mode;
use nix::sys::stat::{SFlag, fstat};

// macOS's versions of the calls below (`paths_macos.rs`).
#[cfg(target_os = "macos")]
#[path = "paths_macos.rs"]
mod macos;
#[cfg(target_os = "macos")]
pub(crate) use macos::{
    fd_path, open_dir, open_entry, open_to_list, open_unfollowed, read_regular,
};

/// What a descriptor names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Dir,
    File,
    Symlink,
    /// A FIFO, socket or device.
    Special,
}

/// The kind of file `fd` names.
pub(crate) fn kind(fd: BorrowedFd<'_>) -> io::Result<Kind> {
    let st = fstat(fd)?;
    let format = SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits());
    Ok(match format {
        SFlag::S_IFDIR => Kind::Dir,
        SFlag::S_IFREG => Kind::File,
        SFlag::S_IFLNK => Kind::Symlink,
        _ => Kind::Special,
    })
}

/// `(st_dev, st_ino)` of `fd`.
pub(crate) fn identity(fd: BorrowedFd<'_>) -> io::Result<(u64, u64)> {
    let st = fstat(fd)?;
    #[cfg(target_os = "linux")]
    let dev = st.st_dev;
    // A signed 32-bit number on macOS: only compared, so its bits are kept as they are.
    #[cfg(target_os = "macos")]
    let dev = u64::from(st.st_dev.cast_unsigned());
    Ok((dev, st.st_ino))
}

/// The path the kernel has for `fd`, which is where it is now, whatever name it was opened by.
#[cfg(target_os = "linux")]
pub(crate) fn fd_path(fd: BorrowedFd<'_>) -> io::Result<PathBuf> {
    let path = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
    if !path.is_absolute() || path.as_os_str().as_encoded_bytes().ends_with(b" (deleted)") {
        return Err(io::Error::other(format!(
            "it has no path any more ({})",
            path.display()
        )));
    }
    Ok(path)
}

#[cfg(target_os = "linux")]
fn how(flags: OFlag, resolve: ResolveFlag) -> OpenHow {
    OpenHow::new()
        .flags(flags | OFlag::O_CLOEXEC)
        .mode(Mode::empty())
        .resolve(resolve)
}

/// Opens the absolute `path` as an `O_PATH` descriptor of a directory, refusing a symbolic
/// link on any component (`ELOOP`).
#[cfg(target_os = "linux")]
pub(crate) fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    Ok(openat2(
        nix::fcntl::AT_FDCWD,
        path,
        how(
            OFlag::O_PATH | OFlag::O_DIRECTORY,
            ResolveFlag::RESOLVE_NO_SYMLINKS,
        ),
    )?)
}

/// Opens the entry `name` beneath the directory `dir` as an `O_PATH` descriptor without
/// following any symbolic link: a link on the way is `ELOOP`, a link at the end is returned
/// itself ([`Kind::Symlink`]), `..` out of `dir` is `EXDEV`.
#[cfg(target_os = "linux")]
pub(crate) fn open_entry(dir: BorrowedFd<'_>, name: &Path) -> io::Result<OwnedFd> {
    Ok(openat2(
        dir,
        name,
        how(
            OFlag::O_PATH | OFlag::O_NOFOLLOW,
            ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS,
        ),
    )?)
}

/// Opens the absolute `path`, whatever it is, without following a symbolic link anywhere on it
/// (a link, the last component included, is `ELOOP`): `O_PATH` on Linux, for reading on macOS.
#[cfg(target_os = "linux")]
pub(crate) fn open_unfollowed(path: &Path) -> nix::Result<OwnedFd> {
    openat2(
        nix::fcntl::AT_FDCWD,
        path,
        how(
            OFlag::O_PATH | OFlag::O_NOFOLLOW,
            ResolveFlag::RESOLVE_NO_SYMLINKS,
        ),
    )
}

/// Why [`read_small`] returned nothing.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// There is no such entry.
    Missing,
    /// It exists but cannot be used.
    Unreadable(Unreadable),
}

/// Why a file that exists is not read; the text completes a sentence about the file.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unreadable {
    #[error("it is not a regular file ({0:?})")]
    NotRegular(Kind),
    #[error("it is larger than {0} bytes")]
    TooLarge(u64),
    #[error("{0}")]
    Io(#[source] io::Error),
}

/// Reads the regular file `name` beneath `dir`, at most `cap` bytes, without following a
/// symbolic link and without blocking: a FIFO, device or socket is refused before it is read.
pub(crate) fn read_small(dir: BorrowedFd<'_>, name: &Path, cap: u64) -> Result<Vec<u8>, ReadError> {
    match open_entry(dir, name) {
        Ok(fd) => read_regular(fd.as_fd(), cap),
        Err(e) if e.raw_os_error() == Some(nix::libc::ENOENT) => Err(ReadError::Missing),
        Err(e) => Err(ReadError::Unreadable(Unreadable::Io(e))),
    }
}

/// Reads the file an `O_PATH` descriptor names, if it is a regular file of at most `cap`
/// bytes. The descriptor is reopened through `/proc/self/fd`, which reaches exactly that file.
#[cfg(target_os = "linux")]
pub(crate) fn read_regular(fd: BorrowedFd<'_>, cap: u64) -> Result<Vec<u8>, ReadError> {
    use std::os::unix::fs::OpenOptionsExt;
    match kind(fd) {
        Ok(Kind::File) => {}
        Ok(other) => return Err(ReadError::Unreadable(Unreadable::NotRegular(other))),
        Err(e) => return Err(ReadError::Unreadable(Unreadable::Io(e))),
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY | nix::libc::O_CLOEXEC)
        .open(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .map_err(|e| ReadError::Unreadable(Unreadable::Io(e)))?;
    let mut bytes = Vec::new();
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ReadError::Unreadable(Unreadable::Io(e)))?;
    if bytes.len() as u64 > cap {
        return Err(ReadError::Unreadable(Unreadable::TooLarge(cap)));
    }
    Ok(bytes)
}

/// The directory `name` beneath `dir`, opened to list, no link anywhere on the way.
#[cfg(target_os = "linux")]
fn open_to_list(dir: BorrowedFd<'_>, name: &Path) -> nix::Result<OwnedFd> {
    openat2(
        dir,
        name,
        how(
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW,
            ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS,
        ),
    )
}

/// The names in the directory `name` beneath `dir` (without `.` and `..`), opened without
/// following a symbolic link; `Ok(None)` when there is no such entry.
pub(crate) fn list_dir(
    dir: BorrowedFd<'_>,
    name: &Path,
) -> io::Result<Option<Vec<std::ffi::OsString>>> {
    use std::os::unix::ffi::OsStrExt;
    let fd = match open_to_list(dir, name) {
        Ok(fd) => fd,
        Err(nix::Error::ENOENT) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let mut names = Vec::new();
    for entry in nix::dir::Dir::from_fd(fd)?.iter() {
        let entry = entry?;
        let bytes = entry.file_name().to_bytes();
        if bytes != b"." && bytes != b".." {
            names.push(std::ffi::OsStr::from_bytes(bytes).to_owned());
        }
    }
    Ok(Some(names))
}

/// `path` with symbolic links resolved as far as it exists, and the rest appended as written
/// (without `.` and `..` steps): how configured paths that may not exist yet are compared with
/// the real paths of writable roots.
pub(crate) fn resolve(path: &Path) -> PathBuf {
    let mut missing = Vec::new();
    let mut existing = path.to_path_buf();
    loop {
        if let Ok(real) = std::fs::canonicalize(&existing) {
            let mut out = real;
            for part in missing.iter().rev() {
                out.push(part);
            }
            return out;
        }
        match existing.components().next_back() {
            Some(Component::Normal(name)) => missing.push(name.to_owned()),
            Some(Component::ParentDir) => {
                // `x/..` where `x` does not exist: drop both, as the kernel would fail anyway.
                existing.pop();
            }
            _ => {}
        }
        if !existing.pop() {
            let mut out = PathBuf::from("/");
            for part in missing.iter().rev() {
                out.push(part);
            }
            return out;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::Scratch;

    #[test]
    fn a_symlink_on_the_way_is_refused_and_one_at_the_end_is_returned_itself() {
        let _scratch = Scratch::new("paths-links");
        let dir = _scratch.0.clone();
        std::fs::create_dir_all(dir.join("real/sub")).expect("mkdir");
        std::os::unix::fs::symlink(dir.join("real"), dir.join("link")).expect("symlink");
        assert!(open_dir(&dir.join("real/sub")).is_ok());
        let e = open_dir(&dir.join("link/sub")).expect_err("through a link");
        assert_eq!(e.raw_os_error(), Some(nix::libc::ELOOP));
        let root = open_dir(&dir).expect("open");
        let link = open_entry(root.as_fd(), Path::new("link")).expect("the link itself");
        assert_eq!(kind(link.as_fd()).expect("kind"), Kind::Symlink);
        assert!(open_entry(root.as_fd(), Path::new("link/sub")).is_err());
        assert!(open_entry(root.as_fd(), Path::new("../")).is_err());
        assert_eq!(
            fd_path(root.as_fd()).expect("path"),
            dir,
            "the descriptor knows its path"
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn small_reads_refuse_fifos_and_oversized_files_without_blocking() {
        let _scratch = Scratch::new("paths-reads");
        let dir = _scratch.0.clone();
        std::fs::write(dir.join("f"), "gitdir: x\n").expect("write");
        nix::unistd::mkfifo(&dir.join("fifo"), nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
        let root = open_dir(&dir).expect("open");
        assert_eq!(
            read_small(root.as_fd(), Path::new("f"), 64).expect("read"),
            b"gitdir: x\n"
        );
        assert!(matches!(
            read_small(root.as_fd(), Path::new("fifo"), 64),
            Err(ReadError::Unreadable(_))
        ));
        assert!(matches!(
            read_small(root.as_fd(), Path::new("f"), 4),
            Err(ReadError::Unreadable(_))
        ));
        assert!(matches!(
            read_small(root.as_fd(), Path::new("none"), 4),
            Err(ReadError::Missing)
        ));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn resolving_keeps_the_missing_rest_of_a_path() {
        let _scratch = Scratch::new("paths-resolve");
        let dir = _scratch.0.clone();
        std::fs::create_dir_all(dir.join("real")).expect("mkdir");
        std::os::unix::fs::symlink(dir.join("real"), dir.join("link")).expect("symlink");
        assert_eq!(resolve(&dir.join("link/not/yet")), dir.join("real/not/yet"));
        assert_eq!(resolve(&dir.join("link")), dir.join("real"));
        assert_eq!(
            resolve(Path::new("/nonexistent-x/y")),
            PathBuf::from("/nonexistent-x/y")
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
