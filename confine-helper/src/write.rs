//! `confine-helper write-file`: the writer agentd's file tools use, run confined.
//!
//! A `WriteFile` request becomes a command like any other — same plan, same backend, same
//! kernel checks — whose program is this binary in `write-file` mode. So where the write may
//! land is decided by the kernel on every system call the writer makes, exactly as for a
//! `bash` command of the same mode: a concurrent command that swaps a directory on the path for
//! a symbolic link changes which name is reached, never what the sandbox allows. Nothing here
//! is a security check; it is an ordinary careful writer.
//!
//! The content is read from standard input to its end and written atomically: a new file in
//! the target's directory, its permissions copied from the old one, synced, renamed over the
//! target. A symbolic link at the target is written through (to the regular file it names); a
//! directory, FIFO, socket or device is refused, without ever being opened. The report is one
//! record on standard output, fields separated by NUL bytes:
//!
//! - `written` NUL `created` (`1` or `0`) NUL byte count NUL the path really written (what
//!   the kernel reports for the new file after the rename);
//! - `failed` NUL errno NUL a sentence saying what failed.

use std::ffi::OsStr;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{Mode, fchmod, fstatat};

/// A step that failed, with the errno the kernel gave.
struct Failed {
    errno: i32,
    what: String,
}

fn failed(errno: i32, what: impl Into<String>) -> Failed {
    Failed {
        errno,
        what: what.into(),
    }
}

fn io_failed(e: &io::Error, what: impl Into<String>) -> Failed {
    let what = what.into();
    failed(e.raw_os_error().unwrap_or(0), format!("{what}: {e}"))
}

fn nix_failed(e: nix::Error, what: impl Into<String>) -> Failed {
    let what = what.into();
    failed(e as i32, format!("{what}: {}", e.desc()))
}

/// Runs the writer: replaces `path` with standard input and reports on standard output.
pub fn main(path: &Path, make_parents: bool) -> ExitCode {
    let mut out = io::stdout().lock();
    let report = match write(path, make_parents) {
        Ok(written) => {
            let mut line = b"written\0".to_vec();
            line.extend_from_slice(if written.created { b"1\0" } else { b"0\0" });
            line.extend_from_slice(written.bytes.to_string().as_bytes());
            line.push(0);
            line.extend_from_slice(written.path.as_os_str().as_bytes());
            (line, ExitCode::SUCCESS)
        }
        Err(f) => {
            let mut line = format!("failed\0{}\0", f.errno).into_bytes();
            line.extend_from_slice(f.what.as_bytes());
            (line, ExitCode::FAILURE)
        }
    };
    if out.write_all(&report.0).and_then(|()| out.flush()).is_err() {
        return ExitCode::FAILURE;
    }
    report.1
}

struct Written {
    created: bool,
    bytes: u64,
    path: PathBuf,
}

fn write(path: &Path, make_parents: bool) -> Result<Written, Failed> {
    if !path.is_absolute() {
        return Err(failed(
            nix::libc::EINVAL,
            format!("{} is not an absolute path", path.display()),
        ));
    }
    let parent = path
        .parent()
        .ok_or_else(|| failed(nix::libc::EINVAL, "it has no parent directory"))?;
    if make_parents {
        std::fs::create_dir_all(parent).map_err(|e| {
            io_failed(
                &e,
                format!("cannot create the directory {}", parent.display()),
            )
        })?;
    }
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
    let existing = match fstatat(&dir_fd, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => Some(st),
        Err(nix::Error::ENOENT) => None,
        Err(e) => {
            return Err(nix_failed(
                e,
                format!("cannot inspect {}", target.display()),
            ));
        }
    };
    if let Some(st) = &existing {
        if st.st_mode & nix::libc::S_IFMT != nix::libc::S_IFREG {
            return Err(failed(
                nix::libc::EINVAL,
                format!(
                    "{} is {}, not a regular file",
                    target.display(),
                    kind_of(st.st_mode)
                ),
            ));
        }
    }
    let mut attempt = 0;
    let (temp, file) = loop {
        let temp = temp_name(attempt);
        match nix::fcntl::openat(
            &dir_fd,
            temp.as_os_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o666),
        ) {
            Ok(file) => break (temp, file),
            Err(nix::Error::EEXIST) if attempt + 1 < TEMP_ATTEMPTS => attempt += 1,
            Err(e) => {
                return Err(nix_failed(
                    e,
                    format!("cannot create a file in {}", dir.display()),
                ));
            }
        }
    };
    let result = fill_and_rename(&dir_fd, &temp, &name, file, existing.map(|st| st.st_mode));
    if result.is_err() {
        let _ = nix::unistd::unlinkat(
            &dir_fd,
            temp.as_os_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
    }
    let (bytes, file) = result?;
    let path = std::fs::read_link(format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(&file)
    ))
    .unwrap_or(target);
    Ok(Written {
        created: existing.is_none(),
        bytes,
        path,
    })
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

fn kind_of(mode: u32) -> &'static str {
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
        ".agentd-write-{}-{nanos:08x}-{attempt}.tmp",
        std::process::id()
    ))
}

/// How many names are tried before giving up on an existing one.
const TEMP_ATTEMPTS: u32 = 8;

/// Copies standard input into `file`, takes over the old file's permissions, syncs and renames
/// it over `name`. Returns the byte count and the still-open file.
fn fill_and_rename(
    dir: &OwnedFd,
    temp: &Path,
    name: &OsStr,
    file: OwnedFd,
    old_mode: Option<u32>,
) -> Result<(u64, std::fs::File), Failed> {
    let mut file = std::fs::File::from(file);
    let mut content = Vec::new();
    io::stdin()
        .lock()
        .read_to_end(&mut content)
        .map_err(|e| io_failed(&e, "cannot read the content"))?;
    file.write_all(&content)
        .map_err(|e| io_failed(&e, "cannot write the content"))?;
    if let Some(mode) = old_mode {
        fchmod(file.as_fd(), Mode::from_bits_truncate(mode & 0o7777))
            .map_err(|e| nix_failed(e, "cannot keep the file's permissions"))?;
    }
    file.sync_all()
        .map_err(|e| io_failed(&e, "cannot sync the file"))?;
    nix::fcntl::renameat(dir, temp.as_os_str(), dir, name)
        .map_err(|e| nix_failed(e, "cannot put the new file in place"))?;
    Ok((content.len() as u64, file))
}
