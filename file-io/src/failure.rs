//! A step that failed, and the report each mode ends with.

use std::io::{self, Write};
use std::process::ExitCode;

/// A step that failed, with the errno the kernel gave.
pub(crate) struct Failed {
    errno: i32,
    what: String,
}

pub(crate) fn failed(errno: i32, what: impl Into<String>) -> Failed {
    Failed {
        errno,
        what: what.into(),
    }
}

pub(crate) fn io_failed(e: &io::Error, what: impl Into<String>) -> Failed {
    let what = what.into();
    failed(e.raw_os_error().unwrap_or(0), format!("{what}: {e}"))
}

pub(crate) fn nix_failed(e: nix::Error, what: impl Into<String>) -> Failed {
    let what = what.into();
    failed(e as i32, format!("{what}: {}", e.desc()))
}

/// Writes `record` to `out`; the exit code says whether the operation and the report went well.
pub(crate) fn report(out: &mut dyn Write, record: Vec<u8>, ok: bool) -> ExitCode {
    if out.write_all(&record).and_then(|()| out.flush()).is_err() || !ok {
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

pub(crate) fn failure_record(f: &Failed) -> Vec<u8> {
    tagged_failure(b"failed", f)
}

/// A failure's record under `tag`: `tag` NUL errno NUL the sentence.
pub(crate) fn tagged_failure(tag: &[u8], f: &Failed) -> Vec<u8> {
    let mut line = tag.to_vec();
    line.extend_from_slice(format!("\0{}\0", f.errno).as_bytes());
    line.extend_from_slice(f.what.as_bytes());
    line
}
