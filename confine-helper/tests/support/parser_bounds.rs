//! What the helper's parsers of bytes a command may have written must hold, whatever the bytes:
//! the one statement of it, for the randomized test (`tests/parsers_random_input.rs`) and the
//! fuzz targets (`fuzz/fuzz_targets/git_files.rs`, `ceiling_file.rs`), which include this file
//! through `#[path]`. It makes the heap counter (the protocol tests' `heap.rs`, which the
//! including crate declares at its root as `heap`) that crate's global allocator.
//!
//! - nothing panics;
//! - a parse holds heap in proportion to the bytes it was given, never to a count or length
//!   they claim, and returns no more;
//! - every gitlink is a relative path of plain components, none `.git`, at most `PATH_MAX`
//!   bytes; a shared index is named `sharedindex.` and 40 or 64 lower-case hex digits;
//! - a `.git` file yields its first line after `gitdir: `, trimmed, joined to its directory, or
//!   nothing; `commondir` and a worktree's `gitdir` file their first line the same way.

#![allow(dead_code)]

use std::ffi::OsStr;
use std::fmt::Display;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use confine_helper::fuzzing;

use crate::heap;

#[global_allocator]
static ALLOCATOR: heap::Counting = heap::Counting;

/// Heap bytes a parse may hold, and bytes it may return, per input byte: an index entry takes
/// at least 62 bytes and yields at most one gitlink of at most [`MAX_NAME`] bytes (a
/// `PathBuf`'s 24 besides), and a `Vec` grown element by element holds at most twice its
/// elements.
pub const HEAP_PER_INPUT_BYTE: usize = 160;
/// What a parse may hold besides: the name being built, an error's message, toml's tables, the
/// directory a pointer file's target is joined to.
pub const HEAP_SLACK: usize = 64 * 1024;
/// The longest name of an index entry the helper takes: `PATH_MAX`.
pub const MAX_NAME: usize = 4096;
/// What a `PathBuf` takes besides its bytes.
const PATH_BUF: usize = 24;

/// The most heap a parse of `len` bytes may hold, and the most it may return.
pub fn bound(len: usize) -> usize {
    len * HEAP_PER_INPUT_BYTE + HEAP_SLACK
}

/// The first line of `content`, without its trailing whitespace.
pub fn first_line(content: &[u8]) -> &[u8] {
    let line = content.split(|b| *b == b'\n').next().unwrap_or_default();
    let end = line
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(0, |i| i + 1);
    &line[..end]
}

/// Whether the helper may take `name` as a gitlink's path: relative, plain components, no
/// `.git`, at most [`MAX_NAME`] bytes.
pub fn plain(name: &[u8]) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && Path::new(OsStr::from_bytes(name))
            .components()
            .all(|c| matches!(c, Component::Normal(part) if part != ".git"))
}

/// Parses `bytes` as an index, checking every property; returns what it yielded. `context`
/// ends every failure's message (the seed that replays it).
pub fn check_index(
    bytes: &[u8],
    context: &dyn Display,
) -> Result<(Vec<PathBuf>, Option<String>), String> {
    let (parsed, held) = heap::measured(|| fuzzing::index(bytes).map_err(|e| e.to_string()));
    let bound = bound(bytes.len());
    assert!(
        held <= bound,
        "parsing {} index bytes held {held} heap bytes (bound {bound}); {context}",
        bytes.len()
    );
    if let Ok((gitlinks, shared)) = &parsed {
        let returned: usize = gitlinks
            .iter()
            .map(|p| p.as_os_str().len() + PATH_BUF)
            .sum();
        assert!(
            returned <= bound,
            "{} index bytes yielded {returned} bytes of gitlinks; {context}",
            bytes.len()
        );
        for link in gitlinks {
            assert!(
                plain(link.as_os_str().as_bytes()),
                "a gitlink that is no plain relative path: {link:?}; {context}"
            );
        }
        if let Some(shared) = shared {
            let hex = shared
                .strip_prefix("sharedindex.")
                .unwrap_or_else(|| panic!("shared index {shared:?}; {context}"));
            assert!(
                [40, 64].contains(&hex.len())
                    && hex
                        .bytes()
                        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
                "shared index {shared:?}; {context}"
            );
        }
    }
    parsed
}

/// The pointer files of a repository the helper follows.
#[derive(Debug, Clone, Copy)]
pub enum Pointer {
    /// A `.git` file: `gitdir: PATH`.
    GitFile,
    /// A git directory's `commondir`: `PATH`.
    CommonDir,
    /// A linked worktree's `gitdir` file in the common directory: `PATH`.
    WorktreeGitdir,
}

/// Parses `content` as the pointer file `which` lying in `base`, checking its heap and that it
/// yields its first line (after `gitdir: ` for a `.git` file), trimmed, joined to `base`, or
/// nothing when that line is empty.
pub fn check_pointer(which: Pointer, content: &[u8], base: &Path, context: &dyn Display) {
    let (target, held) = heap::measured(|| match which {
        Pointer::GitFile => fuzzing::gitfile(content, base),
        Pointer::CommonDir => fuzzing::commondir(content, base),
        Pointer::WorktreeGitdir => fuzzing::worktree_gitfile(content, base),
    });
    let bound = bound(content.len());
    assert!(
        held <= bound,
        "{which:?}: {} bytes held {held} heap bytes (bound {bound}); {context}",
        content.len()
    );
    let line = match which {
        Pointer::GitFile => content.strip_prefix(b"gitdir: ").map(first_line),
        Pointer::CommonDir | Pointer::WorktreeGitdir => Some(first_line(content)),
    };
    let expected = line
        .filter(|line| !line.is_empty())
        .map(|line| base.join(OsStr::from_bytes(line)));
    assert_eq!(target, expected, "{which:?}: {content:?}; {context}");
}

/// Reads `text` as a ceiling file, as the helper loads one (parsed, then narrowing the
/// defaults), checking its heap; returns why it is broken when it is.
pub fn check_ceiling(text: &str, context: &dyn Display) -> Result<(), String> {
    let (read, held) = heap::measured(|| fuzzing::ceiling(text).map_err(|e| e.to_string()));
    let bound = bound(text.len());
    assert!(
        held <= bound,
        "reading {} ceiling bytes held {held} heap bytes (bound {bound}); {context}",
        text.len()
    );
    read
}
