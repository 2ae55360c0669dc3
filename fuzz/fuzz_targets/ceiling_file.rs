//! What the helper reads of a ceiling file (`confine_helper::fuzzing::ceiling`, the feature
//! `fuzzing`): the user's own ceiling lies in their configuration directory, which a command
//! given that directory (or danger-full-access) may write, and the helper reads it whole at
//! start. Its bytes are parsed as the helper parses them (TOML, then every key narrowing the
//! defaults).
//!
//! What must hold, whatever the bytes, is `confine-helper/tests/support/parser_bounds.rs`'s
//! (shared with `confine-helper/tests/parsers_random_input.rs`): nothing panics (the helper
//! would not start), and reading holds heap in proportion to the file, measured by a counting
//! global allocator. Time is bounded by libFuzzer's `-timeout`.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../confine-helper/tests/support/parser_bounds.rs"]
mod bounds;
#[path = "../../protocol/tests/support/heap.rs"]
mod heap;

fuzz_target!(|data: &[u8]| {
    // The helper reads the file as UTF-8 text; other bytes are a broken ceiling before parsing.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = bounds::check_ceiling(text, &"the input libFuzzer saves");
});
