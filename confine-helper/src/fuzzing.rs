//! The helper's parsers of bytes a command (or a repository it cloned) may have written, for
//! the fuzz targets (`fuzz/fuzz_targets/git_files.rs`, `ceiling_file.rs`) and the randomized
//! test (`tests/parsers_random_input.rs`) alone: built with the feature `fuzzing`, which no
//! shipped build enables, hidden from the documentation and no part of the helper's interface.
//! Each is the parser itself, called as the helper calls it; nothing here decides anything.

use std::path::{Path, PathBuf};

pub use crate::ceiling::ValueError;
pub use crate::git::IndexError;

/// The gitlinks of an index file and the shared index a split index names
/// ([`crate::git::parse_index`]), or why it yields none.
pub fn index(bytes: &[u8]) -> Result<(Vec<PathBuf>, Option<String>), IndexError> {
    crate::git::parse_index(bytes).map(|index| (index.gitlinks, index.shared))
}

/// The target of a `.git` file in the directory `base` ([`crate::git::gitfile_target`]).
pub fn gitfile(content: &[u8], base: &Path) -> Option<PathBuf> {
    crate::git::gitfile_target(content, base)
}

/// The common directory a `commondir` file of `gitdir` names ([`crate::git::commondir_target`]).
pub fn commondir(content: &[u8], gitdir: &Path) -> Option<PathBuf> {
    crate::git::commondir_target(content, gitdir)
}

/// The `.git` file a linked worktree's `gitdir` file in `admin` names
/// ([`crate::git::worktree_gitfile`]).
pub fn worktree_gitfile(content: &[u8], admin: &Path) -> Option<PathBuf> {
    crate::git::worktree_gitfile(content, admin)
}

/// A ceiling file's text read into a ceiling as the helper loads one: parsed, then narrowing
/// the defaults; why it is broken when it is.
pub fn ceiling(text: &str) -> Result<(), CeilingError> {
    let file = crate::ceiling::parse(text)?;
    crate::ceiling::Ceiling::default().narrow(file)?;
    Ok(())
}

/// Why a ceiling file's text is broken, in the words the helper's refusal uses.
#[derive(Debug, thiserror::Error)]
pub enum CeilingError {
    /// Not TOML, or not the ceiling's fields.
    #[error("{0}")]
    Syntax(#[from] toml::de::Error),
    #[error("{0}")]
    Value(#[from] ValueError),
}
