//! `confine-file-io edit`: an edit in one confined run. The program reads the file, as the
//! reader does (at most the size given), says on standard error how much it read and what, and
//! sends that much on standard output; then it waits on standard input for agentd's answer: `w`
//! followed by the new content to write it, or nothing at all to leave the file as it is.
//! Before it puts the new content in place it looks at the name again: a file that is no
//! longer the one it read (another file, or the same one changed since: its size, its times)
//! is left alone and the edit fails, so a change made while agentd made the edit is not
//! overwritten (one that lands in the few system calls between that last look and the rename
//! still can be: no system call replaces a file only if it is unchanged). The new file is put
//! in place as the writer puts one ([`Spot::put`]).
//!
//! Its standard error carries, fields separated by NUL bytes, either one failure of the read,
//! `failed` NUL errno NUL a sentence (the reader's), or the read's record ended by a NUL,
//! `read` NUL bytes NUL the real path NUL, which says how many bytes standard output carries
//! (the read is counted, since standard output does not end while the program waits), and
//! after the answer one more record: `edited` NUL bytes written NUL the path really written;
//! `kept` (the answer was empty); or `unwritten` NUL errno NUL a sentence.

use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::failure::{Failed, failed, failure_record, io_failed, report, tagged_failure};
use crate::files::{read_content, read_to};
use crate::place::Spot;

/// Why an edit ended without writing.
enum Failure {
    /// The read failed: nothing was sent.
    Read(Failed),
    /// The read went well and was sent; then this.
    Write(Failed),
}

/// Runs an edit of `path` (at most `max_bytes` read) and reports on standard error.
pub(crate) fn edit_main(path: &Path, max_bytes: u64) -> ExitCode {
    let (record, ok) = match edit(path, max_bytes) {
        Ok(Some((written, path))) => {
            let mut line = format!("edited\0{written}\0").into_bytes();
            line.extend_from_slice(path.as_os_str().as_bytes());
            (line, true)
        }
        Ok(None) => (b"kept".to_vec(), true),
        Err(Failure::Read(f)) => (failure_record(&f), false),
        Err(Failure::Write(f)) => (tagged_failure(b"unwritten", &f), false),
    };
    report(&mut io::stderr().lock(), record, ok)
}

/// The edit: `Some` (bytes written, the real path) when the answer was written, `None` when it
/// was empty.
fn edit(path: &Path, max_bytes: u64) -> Result<Option<(u64, PathBuf)>, Failure> {
    if !path.is_absolute() {
        let what = format!("{} is not an absolute path", path.display());
        return Err(Failure::Read(failed(nix::libc::EINVAL, what)));
    }
    let spot = Spot::of(path).map_err(Failure::Read)?;
    let at_name = spot.at_name().unwrap_or_else(|| spot.target.clone());
    let mut old = Vec::new();
    let (read, real, was) = read_to(&at_name, max_bytes, &mut old).map_err(Failure::Read)?;
    send(read, &real, &old).map_err(Failure::Write)?;
    let answer = read_content().map_err(Failure::Write)?;
    let Some((&b'w', content)) = answer.split_first() else {
        if answer.is_empty() {
            return Ok(None);
        }
        let what = "the answer to an edit must be empty or start with `w`";
        return Err(Failure::Write(failed(nix::libc::EINVAL, what)));
    };
    let now = spot.existing().map_err(Failure::Write)?;
    let unchanged = real == at_name
        && std::fs::symlink_metadata(&at_name).is_ok_and(|now| same_file(&was, &now));
    let Some(now) = now.filter(|_| unchanged) else {
        let what = format!(
            "{} changed while the edit was made (it is not the file that was read); nothing \
             was written",
            spot.target.display()
        );
        return Err(Failure::Write(failed(nix::libc::EAGAIN, what)));
    };
    let path = spot
        .put(content, Some(now.st_mode))
        .map_err(Failure::Write)?;
    Ok(Some((content.len() as u64, path)))
}

/// Says on standard error what was read, ended by a NUL, then sends it on standard output.
fn send(read: u64, real: &Path, old: &[u8]) -> Result<(), Failed> {
    let mut record = format!("read\0{read}\0").into_bytes();
    record.extend_from_slice(real.as_os_str().as_bytes());
    record.push(0);
    let sent = io::stderr()
        .lock()
        .write_all(&record)
        .and_then(|()| io::stdout().lock().write_all(old))
        .and_then(|()| io::stdout().lock().flush());
    sent.map_err(|e| io_failed(&e, "cannot send the file"))
}

/// Whether `now` is still the file `was` described: the same file, of the same size, not
/// modified nor changed since.
fn same_file(was: &std::fs::Metadata, now: &std::fs::Metadata) -> bool {
    (was.dev(), was.ino(), was.size()) == (now.dev(), now.ino(), now.size())
        && (was.mtime(), was.mtime_nsec()) == (now.mtime(), now.mtime_nsec())
        && (was.ctime(), was.ctime_nsec()) == (now.ctime(), now.ctime_nsec())
}
