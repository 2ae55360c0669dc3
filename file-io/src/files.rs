//! `confine-file-io write` and `read`: the writer and reader agentd's file tools use, run
//! confined.
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

/// Writes `record` to `out`; the exit code says whether the operation and the report went well.
fn report(out: &mut dyn Write, record: Vec<u8>, ok: bool) -> ExitCode {
    if out.write_all(&record).and_then(|()| out.flush()).is_err() || !ok {
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

fn failure_record(f: &Failed) -> Vec<u8> {
    let mut line = format!("failed\0{}\0", f.errno).into_bytes();
    line.extend_from_slice(f.what.as_bytes());
    line
}

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

/// The path the kernel has for an open file: `/proc/self/fd`'s link on Linux.
#[cfg(target_os = "linux")]
fn real_path(file: &impl AsFd) -> Option<PathBuf> {
    std::fs::read_link(format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(&file.as_fd())
    ))
    .ok()
}

/// The path the kernel has for an open file: `F_GETPATH` on macOS.
#[cfg(target_os = "macos")]
fn real_path(file: &impl AsFd) -> Option<PathBuf> {
    let mut real = PathBuf::new();
    nix::fcntl::fcntl(file, nix::fcntl::FcntlArg::F_GETPATH(&mut real)).ok()?;
    Some(real)
}

fn read(path: &Path, max_bytes: u64) -> Result<(u64, PathBuf), Failed> {
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
    let copied = io::copy(&mut file.take(max_bytes + 1), &mut io::stdout().lock())
        .map_err(|e| io_failed(&e, format!("cannot read {}", path.display())))?;
    if copied > max_bytes {
        return Err(failed(
            nix::libc::EFBIG,
            format!("it grew past {max_bytes} bytes while it was read"),
        ));
    }
    Ok((copied, real))
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
    if let Some(st) = &existing
        && st.st_mode & nix::libc::S_IFMT != nix::libc::S_IFREG
    {
        return Err(failed(
            nix::libc::EINVAL,
            format!(
                "{} is {}, not a regular file",
                target.display(),
                kind_of(st.st_mode)
            ),
        ));
    }
    let previous = previous.map(|max_bytes| match existing {
        None => Previous::None,
        Some(_) => copy_previous(&dir_fd, &name, max_bytes),
    });
    sweep_stale(&dir_fd);
    place(
        &dir_fd,
        &dir,
        &name,
        &content,
        existing.map(|st| st.st_mode),
    )?;
    // The kernel's path of the directory, with the name the file now has there (an unnamed
    // file's own descriptor keeps the path it was made with).
    let dir_file = std::fs::File::from(dir_fd);
    let path = real_path(&dir_file).map_or(target, |dir| dir.join(&name));
    Ok(Written {
        created: existing.is_none(),
        bytes: content.len() as u64,
        path,
        previous,
    })
}

/// Copies the regular file `name` in `dir` (at most `max_bytes`) to standard output, as the
/// reader would read it; [`Previous::Unread`] when it cannot, or when the file it opened is not
/// the one at that name in that directory (a link swapped in since it was looked at).
fn copy_previous(dir: &OwnedFd, name: &OsStr, max_bytes: u64) -> Previous {
    let Some(dir_path) = real_path(dir) else {
        return Previous::Unread;
    };
    let at_name = dir_path.join(name);
    match read(&at_name, max_bytes) {
        Ok((_, real)) if real == at_name => Previous::Whole,
        _ => Previous::Unread,
    }
}

/// The whole content, read from standard input before anything is made: a writer killed while
/// agentd still sends it leaves nothing behind.
fn read_content() -> Result<Vec<u8>, Failed> {
    let mut content = Vec::new();
    io::stdin()
        .lock()
        .read_to_end(&mut content)
        .map_err(|e| io_failed(&e, "cannot read the content"))?;
    Ok(content)
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
