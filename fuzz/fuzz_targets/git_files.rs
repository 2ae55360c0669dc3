//! What the helper reads of a repository a command may have written or cloned: the index
//! (versions 2, 3 and 4, SHA-1 and SHA-256 object names, split indexes and their `link`
//! extension), `.git` files, `commondir` and a linked worktree's `gitdir` file, each through the
//! parser the helper calls (`confine_helper::fuzzing`, the feature `fuzzing`).
//!
//! What must hold, whatever the bytes, is `confine-helper/tests/support/parser_bounds.rs`'s,
//! shared with the randomized test `confine-helper/tests/parsers_random_input.rs`: no panic,
//! heap (measured by a counting global allocator) and results in proportion to the input,
//! gitlinks that are plain relative paths, pointer files that yield their first line where they
//! lie. Time is bounded by libFuzzer's `-timeout`: each parse is one pass over its input.
//!
//! Input layout: the first byte (mod 4) says which file the rest is: 0 an index, 1 a `.git`
//! file, 2 a `commondir`, 3 a worktree's `gitdir`.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

#[path = "../../confine-helper/tests/support/parser_bounds.rs"]
mod bounds;
#[path = "../../protocol/tests/support/heap.rs"]
mod heap;

use bounds::Pointer;

/// Where the pointer files lie.
const BASE: &str = "/srv/repo/.git/worktrees/w";

fuzz_target!(|data: &[u8]| {
    let Some((&which, bytes)) = data.split_first() else {
        return;
    };
    let context = "the input libFuzzer saves";
    let pointer = match which % 4 {
        0 => {
            let _ = bounds::check_index(bytes, &context);
            return;
        }
        1 => Pointer::GitFile,
        2 => Pointer::CommonDir,
        _ => Pointer::WorktreeGitdir,
    };
    bounds::check_pointer(pointer, bytes, Path::new(BASE), &context);
});
