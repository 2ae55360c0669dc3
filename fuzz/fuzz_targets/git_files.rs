//! What the helper reads of a repository a command may have written or cloned: the index
//! (versions 2, 3 and 4, SHA-1 and SHA-256 object names, split indexes and their `link`
//! extension), `.git` files, `commondir` and a linked worktree's `gitdir` file, each through the
//! parser the helper calls (`confine_helper::fuzzing`, the feature `fuzzing`).
//!
//! What must hold, whatever the bytes:
//! - nothing panics;
//! - a parse holds heap in proportion to the bytes it was given (at most 160 bytes per input
//!   byte and 64 KiB), measured by a counting global allocator, and returns no more;
//! - every gitlink is a relative path of plain components, none `.git`, at most 4096 bytes;
//!   a shared index is named `sharedindex.` and 40 or 64 lower-case hex digits;
//! - a `.git` file yields its first line after `gitdir: `, trimmed, joined to its directory, or
//!   nothing; `commondir` and `gitdir` files their first line the same way.
//!
//! Time is bounded by libFuzzer's `-timeout`: each parse is one pass over its input.
//!
//! Input layout: the first byte (mod 4) says which file the rest is: 0 an index, 1 a `.git`
//! file, 2 a `commondir`, 3 a worktree's `gitdir`.

#![no_main]

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

use confine_helper::fuzzing;
use libfuzzer_sys::fuzz_target;

#[path = "../../protocol/tests/support/heap.rs"]
mod heap;

#[global_allocator]
static ALLOCATOR: heap::Counting = heap::Counting;

/// Heap bytes a parse may hold per input byte (`tests/parsers_random_input.rs` says why).
const HEAP_PER_INPUT_BYTE: usize = 160;
/// What a parse may hold besides: the name being built, an error's message.
const HEAP_SLACK: usize = 64 * 1024;
/// The longest gitlink the helper takes.
const MAX_NAME: usize = 4096;

/// Where the pointer files lie.
const BASE: &str = "/work/repo/.git/worktrees/w";

fn first_line(content: &[u8]) -> &[u8] {
    let line = content.split(|b| *b == b'\n').next().unwrap_or_default();
    let end = line
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(0, |i| i + 1);
    &line[..end]
}

fn check_index(bytes: &[u8], bound: usize) {
    let (parsed, held) = heap::measured(|| fuzzing::index(bytes));
    assert!(held <= bound, "{} bytes held {held} (bound {bound})", bytes.len());
    let Ok((gitlinks, shared)) = parsed else {
        return;
    };
    let returned: usize = gitlinks.iter().map(|p| p.as_os_str().len() + 24).sum();
    assert!(returned <= bound, "{} bytes yielded {returned}", bytes.len());
    for link in &gitlinks {
        let plain = !link.as_os_str().is_empty()
            && link.as_os_str().len() <= MAX_NAME
            && link
                .components()
                .all(|c| matches!(c, Component::Normal(part) if part != ".git"));
        assert!(plain, "a gitlink that is no plain relative path: {link:?}");
    }
    if let Some(shared) = shared {
        let hex = shared.strip_prefix("sharedindex.").expect("sharedindex.");
        assert!(
            [40, 64].contains(&hex.len())
                && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
            "{shared:?}"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, bytes)) = data.split_first() else {
        return;
    };
    let bound = bytes.len() * HEAP_PER_INPUT_BYTE + HEAP_SLACK;
    let base = Path::new(BASE);
    let (target, expected) = match which % 4 {
        0 => return check_index(bytes, bound),
        1 => {
            let (target, held) = heap::measured(|| fuzzing::gitfile(bytes, base));
            assert!(held <= bound, "held {held} (bound {bound})");
            let line = bytes.strip_prefix(b"gitdir: ").map(first_line);
            (target, line)
        }
        2 => {
            let (target, held) = heap::measured(|| fuzzing::commondir(bytes, base));
            assert!(held <= bound, "held {held} (bound {bound})");
            (target, Some(first_line(bytes)))
        }
        _ => {
            let (target, held) = heap::measured(|| fuzzing::worktree_gitfile(bytes, base));
            assert!(held <= bound, "held {held} (bound {bound})");
            (target, Some(first_line(bytes)))
        }
    };
    let expected = expected
        .filter(|line| !line.is_empty())
        .map(|line| base.join(OsStr::from_bytes(line)));
    assert_eq!(target, expected, "{bytes:?}");
});
