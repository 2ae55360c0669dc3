//! `confine-file-io`: the file reader, writer and editor agentd's file tools and checkpoint
//! restore use, a program of its own that only ever runs confined.
//!
//! agentd never runs it itself: it asks confine-helper to `Spawn` it, under the policy and
//! backend a `bash` command of the same mode would get, so every system call it makes is
//! checked by the kernel against that sandbox. Nothing in it decides what may be read or
//! written, and a wrong answer of its own can only make a file operation fail or report
//! wrongly: it is not part of the helper's trusted core nor of its line count
//! (`confine-helper/README.md`, RFC 0001 "Code map and size"). confine-helper knows it only as
//! the program beside its own binary, which it executes inside a bwrap sandbox by a descriptor
//! it holds, as its own `enter` step (a program under `/tmp` is hidden by a command's private
//! `/tmp` otherwise).
//!
//! ```text
//! confine-file-io write [--parents] [--previous BYTES] -- PATH
//!                                               replace PATH with standard input
//! confine-file-io read --max BYTES -- PATH      copy the regular file PATH to standard output
//! confine-file-io edit --max BYTES -- PATH      read PATH, then write agentd's answer to it
//! ```
//!
//! What each does and the report it prints are in [`files`] and, for the edit, [`edit`]. A
//! wrong command line exits 2 with the usage on standard error.

#![warn(clippy::too_many_lines)]
#![cfg_attr(not(test), warn(clippy::indexing_slicing))]
#![warn(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap
)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod edit;
mod failure;
mod files;
mod place;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "\
usage:
  confine-file-io write [--parents] [--previous BYTES] -- PATH
      replace PATH with standard input, atomically; report on standard output, or, with
      --previous, copy the file replaced (at most BYTES) to standard output and report on
      standard error
  confine-file-io read --max BYTES -- PATH
      copy the regular file PATH (at most BYTES) to standard output; report on standard error
  confine-file-io edit --max BYTES -- PATH
      copy PATH as read does, end standard output, then replace PATH with what follows a `w`
      on standard input (nothing: leave it), unless it changed meanwhile; report on standard
      error
agentd runs this program confined, through confine-helper; it is not meant to be run by hand.";

/// The exit code of a wrong command line.
const USAGE_EXIT: u8 = 2;

/// What the command line asked for.
#[derive(Debug, PartialEq, Eq)]
enum Invocation {
    Write {
        path: PathBuf,
        make_parents: bool,
        /// Copy the file replaced, at most this many bytes, to standard output.
        previous: Option<u64>,
    },
    Read {
        path: PathBuf,
        max_bytes: u64,
    },
    Edit {
        path: PathBuf,
        max_bytes: u64,
    },
}

/// What is wrong with the command line.
#[derive(Debug, PartialEq, Eq)]
enum UsageError {
    Write,
    Read,
    Edit,
    MaxBytes(OsString),
    NoMode,
}

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UsageError::Write => f.write_str("write takes [--parents] [--previous BYTES] -- PATH"),
            UsageError::Read => f.write_str("read takes --max BYTES -- PATH"),
            UsageError::Edit => f.write_str("edit takes --max BYTES -- PATH"),
            UsageError::MaxBytes(value) => {
                write!(
                    f,
                    "--max and --previous need a number of bytes, got {value:?}"
                )
            }
            UsageError::NoMode => f.write_str("the first argument must be write, read or edit"),
        }
    }
}

/// Parses the command line (without the program's name). Paths need not be UTF-8.
fn parse(args: &[OsString]) -> Result<Invocation, UsageError> {
    let Some((mode, rest)) = args.split_first() else {
        return Err(UsageError::NoMode);
    };
    if mode == "write" {
        return parse_write(rest);
    }
    if mode == "read" || mode == "edit" {
        let wrong = if mode == "read" {
            UsageError::Read
        } else {
            UsageError::Edit
        };
        let [flag, max, dashes, path] = rest else {
            return Err(wrong);
        };
        if flag != "--max" || dashes != "--" {
            return Err(wrong);
        }
        let (path, max_bytes) = (PathBuf::from(path), bytes(max)?);
        return Ok(if mode == "read" {
            Invocation::Read { path, max_bytes }
        } else {
            Invocation::Edit { path, max_bytes }
        });
    }
    Err(UsageError::NoMode)
}

/// `write`'s arguments: `--parents` and `--previous BYTES`, each at most once and in either
/// order, then `--` and the path.
fn parse_write(mut rest: &[OsString]) -> Result<Invocation, UsageError> {
    let mut make_parents = false;
    let mut previous = None;
    loop {
        match rest {
            [dashes, path] if dashes == "--" => {
                return Ok(Invocation::Write {
                    path: PathBuf::from(path),
                    make_parents,
                    previous,
                });
            }
            [flag, tail @ ..] if flag == "--parents" && !make_parents => {
                make_parents = true;
                rest = tail;
            }
            [flag, size, tail @ ..] if flag == "--previous" && previous.is_none() => {
                previous = Some(bytes(size)?);
                rest = tail;
            }
            _ => return Err(UsageError::Write),
        }
    }
}

/// A number of bytes given on the command line.
fn bytes(value: &OsString) -> Result<u64, UsageError> {
    value
        .to_str()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| UsageError::MaxBytes(value.clone()))
}

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    match parse(&args) {
        Ok(Invocation::Write {
            path,
            make_parents,
            previous,
        }) => files::write_main(&path, make_parents, previous),
        Ok(Invocation::Read { path, max_bytes }) => files::read_main(&path, max_bytes),
        Ok(Invocation::Edit { path, max_bytes }) => edit::edit_main(&path, max_bytes),
        Err(e) => {
            eprintln!("confine-file-io: {e}\n{USAGE}");
            ExitCode::from(USAGE_EXIT)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<OsString> {
        words.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_modes_parse_and_anything_else_is_a_usage_error() {
        assert_eq!(
            parse(&args(&["write", "--parents", "--", "/w/a b"])),
            Ok(Invocation::Write {
                path: PathBuf::from("/w/a b"),
                make_parents: true,
                previous: None
            })
        );
        for words in [
            &["write", "--previous", "64", "--parents", "--", "/w/x"][..],
            &["write", "--parents", "--previous", "64", "--", "/w/x"],
        ] {
            assert_eq!(
                parse(&args(words)),
                Ok(Invocation::Write {
                    path: PathBuf::from("/w/x"),
                    make_parents: true,
                    previous: Some(64)
                }),
                "{words:?}"
            );
        }
        assert_eq!(
            parse(&args(&["write", "--", "--help"])),
            Ok(Invocation::Write {
                path: PathBuf::from("--help"),
                make_parents: false,
                previous: None
            })
        );
        assert_eq!(
            parse(&args(&["read", "--max", "10", "--", "/w/x"])),
            Ok(Invocation::Read {
                path: PathBuf::from("/w/x"),
                max_bytes: 10
            })
        );
        assert_eq!(parse(&args(&["write", "/w/x"])), Err(UsageError::Write));
        assert_eq!(
            parse(&args(&["write", "--", "/a", "/b"])),
            Err(UsageError::Write)
        );
        assert_eq!(
            parse(&args(&["read", "--max", "ten", "--", "/w/x"])),
            Err(UsageError::MaxBytes(OsString::from("ten")))
        );
        for words in [
            &["write", "--parents", "--parents", "--", "/w/x"][..],
            &["write", "--previous", "1", "--previous", "2", "--", "/w/x"],
            &["write", "--", "/w/x", "--previous", "1"],
        ] {
            assert_eq!(parse(&args(words)), Err(UsageError::Write), "{words:?}");
        }
        assert_eq!(
            parse(&args(&["write", "--previous", "-1", "--", "/w/x"])),
            Err(UsageError::MaxBytes(OsString::from("-1")))
        );
        assert_eq!(
            parse(&args(&["write", "--previous", "--", "/w/x"])),
            Err(UsageError::MaxBytes(OsString::from("--")))
        );
        assert_eq!(parse(&args(&[])), Err(UsageError::NoMode));
        assert_eq!(parse(&args(&["--help"])), Err(UsageError::NoMode));
    }
}
