//! What the helper's unit tests share: a scratch directory of their own, removed when dropped.

use std::path::PathBuf;

/// A fresh directory under the temporary directory, by its canonical path (the helper compares
/// canonical paths); removed with everything in it when dropped.
pub(crate) struct Scratch(pub(crate) PathBuf);

impl Scratch {
    pub(crate) fn new(tag: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("confine-helper-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create scratch dir");
        Scratch(std::fs::canonicalize(&dir).expect("canonical scratch dir"))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
