//! What a directory holds, as the tests that check a program left nothing behind in it compare
//! it. Used through `#[path]` by confine-file-io's tests (the program run directly) and by
//! confine-helper's (the same program run confined): a `#[path]` include makes neither crate
//! depend on the other.

use std::path::Path;

/// The names in `dir`, sorted.
pub fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}
