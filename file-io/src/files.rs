//! `confine-file-io write` and `read`: the writer and reader agentd's file tools use, run
//! confined, and the pieces the edit (`edit.rs`) shares with them.
//!
//! agentd asks confine-helper to `Spawn` this program under the policy a `bash` command of the
//! same mode gets — same plan, same backend, same kernel checks. So where a
//! write may land, and what a read may see, is decided by the kernel on every system call the
//! process makes, exactly as for a `bash` command of the same mode: a concurrent command that
//! swaps a directory on the path for a symbolic link changes which name is reached, never what
//! the sandbox allows. A read sees the command's own world too: its `/proc` (not agentd's
//! environment), its `/tmp`, its masks. Nothing here is a security check; these are ordinary
//! careful file operations.
//!
//! The writer reads the content from standard input to its end before it makes anything, then
//! writes it atomically: a new file in the target's directory, its permissions copied from the
//! old one, synced, then given the target's name. On Linux the new file has no name until then
//! (`O_TMPFILE`), so a kill at any point leaves nothing in the user's tree, but for the two
//! system calls between linking it under a temporary name and renaming that over an existing
//! target; elsewhere it has a temporary name while it is written. A temporary name a killed
//! writer left is removed by the next write in that directory once it is ten minutes old. A
//! symbolic link at the target is written through (to the regular file it names); a directory,
//! FIFO, socket or device is refused, without ever being opened. Its report is one record on
//! standard output, fields separated by NUL bytes:
//!
//! - `written` NUL `created` (`1` or `0`) NUL byte count NUL the path really written (what
//!   the kernel reports for the new file after the rename);
//! - `failed` NUL errno NUL a sentence saying what failed.
//!
//! Asked with `--previous BYTES`, the writer also keeps what it replaced, for the editor's diff:
//! just before it puts the new file in place it copies the old one, as the reader would read it
//! (at most that many bytes), to standard output, and its report goes to standard error, with
//! one more field before the path: `none` (there was no file: `created` is `1`), `whole` (what
//! standard output carries is the whole old content) or `unread` (the old file was larger,
//! could not be read, or was no longer the file at that name when opened: standard output
//! carries nothing to use). One run, one sandbox, where a read before the write took two.
//!
//! The reader opens the path as a path (`O_PATH`, following links), checks that it is a regular
//! file of at most the given size, and only then opens it for reading through `/proc/self/fd`,
//! so a FIFO or device is never opened (on macOS, which has no `O_PATH`, the path is opened for
//! reading without waiting, and only a regular file is read); it copies the content to standard
//! output and reports on standard error: `read` NUL byte count NUL the real path, or `failed`
//! as above.

use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::failure::{Failed, failed, failure_record, io_failed, report};
use crate::place::Spot;
#[cfg(target_os = "macos")]
use crate::place::real_path;

/// Runs the reader: copies `path` (at most `max_bytes`) to standard output and reports on
/// standard error.
pub(crate) fn read_main(path: &Path, max_bytes: u64) -> ExitCode {
    let (record, ok) = match read(path, max_bytes) {
        Ok((bytes, real)) => {
            let mut line = format!("read\0{bytes}\0").into_bytes();
            line.extend_from_slice(real.as_os_str().as_bytes());
            (line, true)
        }
        Err(f) => (failure_record(&f), false),
    };
    report(&mut io::stderr().lock(), record, ok)
}

/// The file `path` names, following links, opened only as a path (`O_PATH`): nothing of a
/// FIFO or a device is opened before its kind is known.
#[cfg(target_os = "linux")]
fn locate(path: &Path) -> Result<std::fs::File, Failed> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_PATH | nix::libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| io_failed(&e, format!("cannot open {}", path.display())))
}

/// The file `path` names, following links, opened for reading without waiting and without
/// becoming a controlling terminal: macOS has no `O_PATH`, so a FIFO is opened (at once, with
/// no writer needed) and a device too before their kind is known; neither is read.
#[cfg(target_os = "macos")]
fn locate(path: &Path) -> Result<std::fs::File, Failed> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY | nix::libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| io_failed(&e, format!("cannot open {}", path.display())))
}

/// The located regular file, opened for reading through `/proc/self/fd` (which reaches exactly
/// that file), and its real path.
#[cfg(target_os = "linux")]
fn reopen(located: std::fs::File, path: &Path) -> Result<(std::fs::File, PathBuf), Failed> {
    use std::os::unix::fs::OpenOptionsExt;
    let proc_path = format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(&located)
    );
    let real = std::fs::read_link(&proc_path).unwrap_or_else(|_| path.to_owned());
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY | nix::libc::O_CLOEXEC)
        .open(&proc_path)
        .map_err(|e| io_failed(&e, format!("cannot read {}", path.display())))?;
    Ok((file, real))
}

/// The located regular file, already open for reading, and its real path.
#[cfg(target_os = "macos")]
fn reopen(located: std::fs::File, path: &Path) -> Result<(std::fs::File, PathBuf), Failed> {
    let real = real_path(&located).unwrap_or_else(|| path.to_owned());
    Ok((located, real))
}

fn read(path: &Path, max_bytes: u64) -> Result<(u64, PathBuf), Failed> {
    read_to(path, max_bytes, &mut io::stdout().lock()).map(|(copied, real, _)| (copied, real))
}

/// Copies the regular file `path` (at most `max_bytes`) to `out`; returns how much, its real
/// path and what it was when opened.
pub(crate) fn read_to(
    path: &Path,
    max_bytes: u64,
    out: &mut dyn Write,
) -> Result<(u64, PathBuf, std::fs::Metadata), Failed> {
    use std::os::unix::fs::FileTypeExt;
    let located = locate(path)?;
    let meta = located
        .metadata()
        .map_err(|e| io_failed(&e, format!("cannot inspect {}", path.display())))?;
    let kind = meta.file_type();
    if !kind.is_file() {
        let what = if kind.is_dir() {
            "a directory; list it with bash (ls)"
        } else if kind.is_fifo() {
            "a FIFO, not a regular file, and is not opened"
        } else if kind.is_socket() {
            "a socket, not a regular file, and is not opened"
        } else {
            "a device, not a regular file, and is not opened"
        };
        return Err(failed(nix::libc::EINVAL, format!("it is {what}")));
    }
    if meta.len() > max_bytes {
        return Err(failed(
            nix::libc::EFBIG,
            format!(
                "it is {} bytes, more than the {} MiB this tool takes in; read parts of it with \
                 bash (head, tail, sed -n)",
                meta.len(),
                max_bytes / (1024 * 1024)
            ),
        ));
    }
    let (file, real) = reopen(located, path)?;
    let copied = io::copy(&mut file.take(max_bytes + 1), out)
        .map_err(|e| io_failed(&e, format!("cannot read {}", path.display())))?;
    if copied > max_bytes {
        return Err(failed(
            nix::libc::EFBIG,
            format!("it grew past {max_bytes} bytes while it was read"),
        ));
    }
    Ok((copied, real, meta))
}

/// Runs the writer: replaces `path` with standard input and reports on standard output; or,
/// when `previous` gives a size, copies the file it replaces (at most that many bytes) to
/// standard output first and reports on standard error, as the reader does.
pub(crate) fn write_main(path: &Path, make_parents: bool, previous: Option<u64>) -> ExitCode {
    let (record, ok) = match write(path, make_parents, previous) {
        Ok(written) => {
            let mut line = b"written\0".to_vec();
            line.extend_from_slice(if written.created { b"1\0" } else { b"0\0" });
            line.extend_from_slice(written.bytes.to_string().as_bytes());
            line.push(0);
            if let Some(previous) = written.previous {
                line.extend_from_slice(previous.word().as_bytes());
                line.push(0);
            }
            line.extend_from_slice(written.path.as_os_str().as_bytes());
            (line, true)
        }
        Err(f) => (failure_record(&f), false),
    };
    if previous.is_some() {
        report(&mut io::stderr().lock(), record, ok)
    } else {
        report(&mut io::stdout().lock(), record, ok)
    }
}

struct Written {
    created: bool,
    bytes: u64,
    path: PathBuf,
    /// What became of the file it replaced, when asked for it.
    previous: Option<Previous>,
}

/// The file a write replaced, as the writer found it just before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Previous {
    /// There was none: the write created the file.
    None,
    /// Its whole content is on standard output.
    Whole,
    /// It was there but not copied (larger than asked for, not readable, or no longer the file
    /// at that name when opened); whatever reached standard output is not its content.
    Unread,
}

impl Previous {
    fn word(self) -> &'static str {
        match self {
            Previous::None => "none",
            Previous::Whole => "whole",
            Previous::Unread => "unread",
        }
    }
}

fn write(path: &Path, make_parents: bool, previous: Option<u64>) -> Result<Written, Failed> {
    if !path.is_absolute() {
        return Err(failed(
            nix::libc::EINVAL,
            format!("{} is not an absolute path", path.display()),
        ));
    }
    let parent = path
        .parent()
        .ok_or_else(|| failed(nix::libc::EINVAL, "it has no parent directory"))?;
    let content = read_content()?;
    if make_parents {
        std::fs::create_dir_all(parent).map_err(|e| {
            io_failed(
                &e,
                format!("cannot create the directory {}", parent.display()),
            )
        })?;
    }
    let spot = Spot::of(path)?;
    let existing = spot.existing()?;
    let previous = previous.map(|max_bytes| match existing {
        None => Previous::None,
        Some(_) => copy_previous(&spot, max_bytes),
    });
    let path = spot.put(&content, existing.map(|st| st.st_mode))?;
    Ok(Written {
        created: existing.is_none(),
        bytes: content.len() as u64,
        path,
        previous,
    })
}

/// Copies the regular file at `spot` (at most `max_bytes`) to standard output, as the reader
/// would read it; [`Previous::Unread`] when it cannot, or when the file it opened is not the one
/// at that name in that directory (a link swapped in since it was looked at).
fn copy_previous(spot: &Spot, max_bytes: u64) -> Previous {
    let Some(at_name) = spot.at_name() else {
        return Previous::Unread;
    };
    match read(&at_name, max_bytes) {
        Ok((_, real)) if real == at_name => Previous::Whole,
        _ => Previous::Unread,
    }
}

/// The whole content, read from standard input before anything is made: a writer killed while
/// agentd still sends it leaves nothing behind.
pub(crate) fn read_content() -> Result<Vec<u8>, Failed> {
    let mut content = Vec::new();
    io::stdin()
        .lock()
        .read_to_end(&mut content)
        .map_err(|e| io_failed(&e, "cannot read the content"))?;
    Ok(content)
}
