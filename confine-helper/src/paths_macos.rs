//! The macOS side of `paths.rs`, whose module comment says what it guarantees and how:
//! `O_NOFOLLOW_ANY` for a link anywhere on the way, a `..` or absolute name refused before the
//! call, `O_SYMLINK` for a link at the end, `F_GETPATH` for the path a descriptor names.
//! Declared as the child of `paths.rs` on macOS only, which re-exports what the rest of the
//! helper calls: the Linux binary holds none of it.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;

use super::{Kind, ReadError, Unreadable, kind};

/// The path the kernel has for `fd`, which is where it is now, whatever name it was opened by.
pub(crate) fn fd_path(fd: BorrowedFd<'_>) -> io::Result<PathBuf> {
    let mut path = PathBuf::new();
    nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETPATH(&mut path))?;
    if !path.is_absolute() {
        return Err(io::Error::other(format!(
            "it has no path any more ({})",
            path.display()
        )));
    }
    Ok(path)
}

/// Opens the absolute `path`, whatever it is, without following a symbolic link anywhere on it
/// (a link, the last component included, is `ELOOP`): `O_PATH` on Linux, for reading on macOS.
pub(crate) fn open_unfollowed(path: &Path) -> nix::Result<OwnedFd> {
    let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY | no_links();
    nix::fcntl::open(path, flags, Mode::empty())
}

/// `O_NOFOLLOW_ANY`: a symbolic link on any component, the last included, is `ELOOP`.
fn no_links() -> OFlag {
    OFlag::from_bits_retain(nix::libc::O_NOFOLLOW_ANY) | OFlag::O_CLOEXEC
}

/// `RESOLVE_BENEATH` by hand: with no link followed, only an absolute name or a `..` step can
/// leave the directory (`EXDEV`, as Linux says it).
fn beneath(name: &Path) -> nix::Result<()> {
    if name
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
    {
        Ok(())
    } else {
        Err(nix::Error::EXDEV)
    }
}

/// Opens the absolute `path` as a descriptor of a directory, refusing a symbolic link on any
/// component (`ELOOP`).
pub(crate) fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    Ok(nix::fcntl::open(
        path,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | no_links(),
        Mode::empty(),
    )?)
}

/// Opens the entry `name` beneath the directory `dir` without following any symbolic link: a
/// link on the way is `ELOOP`, a link at the end is returned itself ([`Kind::Symlink`]), `..`
/// out of `dir` is `EXDEV`. Opened for reading, non-blocking, without becoming a controlling
/// terminal.
pub(crate) fn open_entry(dir: BorrowedFd<'_>, name: &Path) -> io::Result<OwnedFd> {
    beneath(name)?;
    let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY;
    match openat(dir, name, flags | no_links(), Mode::empty()) {
        // A link on the way, or only at the end: the parent, opened as strictly, tells which;
        // the last component alone is then opened as itself.
        Err(nix::Error::ELOOP) => {
            let last = name.file_name().ok_or(nix::Error::ELOOP)?;
            let parent = match name.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            let parent = openat(
                dir,
                parent,
                OFlag::O_RDONLY | OFlag::O_DIRECTORY | no_links(),
                Mode::empty(),
            )?;
            let itself = OFlag::from_bits_retain(nix::libc::O_SYMLINK) | OFlag::O_CLOEXEC;
            Ok(openat(parent.as_fd(), last, flags | itself, Mode::empty())?)
        }
        other => Ok(other?),
    }
}

/// Reads the file a descriptor names, if it is a regular file of at most `cap` bytes, from its
/// start (the descriptor was opened for reading).
pub(crate) fn read_regular(fd: BorrowedFd<'_>, cap: u64) -> Result<Vec<u8>, ReadError> {
    use std::os::unix::fs::FileExt;
    match kind(fd) {
        Ok(Kind::File) => {}
        Ok(other) => return Err(ReadError::Unreadable(Unreadable::NotRegular(other))),
        Err(e) => return Err(ReadError::Unreadable(Unreadable::Io(e))),
    }
    let file = std::fs::File::from(
        fd.try_clone_to_owned()
            .map_err(|e| ReadError::Unreadable(Unreadable::Io(e)))?,
    );
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = file
            .read_at(&mut chunk, bytes.len() as u64)
            .map_err(|e| ReadError::Unreadable(Unreadable::Io(e)))?;
        if n == 0 {
            break;
        }
        bytes.extend_from_slice(chunk.get(..n).unwrap_or(&chunk));
        if bytes.len() as u64 > cap {
            return Err(ReadError::Unreadable(Unreadable::TooLarge(cap)));
        }
    }
    Ok(bytes)
}

/// The directory `name` beneath `dir`, opened to list, no link anywhere on the way.
pub(crate) fn open_to_list(dir: BorrowedFd<'_>, name: &Path) -> nix::Result<OwnedFd> {
    beneath(name)?;
    openat(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | no_links(),
        Mode::empty(),
    )
}
