//! What the helper reads of a ceiling file (`confine_helper::fuzzing::ceiling`, the feature
//! `fuzzing`): the user's own ceiling lies in their configuration directory, which a command
//! given that directory (or danger-full-access) may write, and the helper reads it whole at
//! start. Its bytes are parsed as the helper parses them (TOML, then every key narrowing the
//! defaults).
//!
//! What must hold, whatever the bytes: nothing panics (the helper would not start), and reading
//! holds heap in proportion to the file (at most 160 bytes per input byte and 64 KiB), measured
//! by a counting global allocator. Time is bounded by libFuzzer's `-timeout`.

#![no_main]

use confine_helper::fuzzing;
use libfuzzer_sys::fuzz_target;

#[path = "../../protocol/tests/support/heap.rs"]
mod heap;

#[global_allocator]
static ALLOCATOR: heap::Counting = heap::Counting;

/// Heap bytes reading may hold per input byte (`tests/parsers_random_input.rs` says why).
const HEAP_PER_INPUT_BYTE: usize = 160;
/// What reading may hold besides: toml's tables, an error's message.
const HEAP_SLACK: usize = 64 * 1024;

fuzz_target!(|data: &[u8]| {
    // The helper reads the file as UTF-8 text; other bytes are a broken ceiling before parsing.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (_, held) = heap::measured(|| fuzzing::ceiling(text));
    let bound = data.len() * HEAP_PER_INPUT_BYTE + HEAP_SLACK;
    assert!(held <= bound, "{} bytes held {held} (bound {bound})", data.len());
});
