//! What is wrong with a checkpoint manifest that cannot be read back: the manifest's reader
//! says it, and the store's errors carry it.

/// What is wrong with a manifest that cannot be read back, as [`CheckpointError::Damaged`]
/// says it.
///
/// [`CheckpointError::Damaged`]: super::CheckpointError::Damaged
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Damage {
    #[error("it does not end where a field ends")]
    Torn,
    #[error("it ends before the {0}")]
    EndsBefore(&'static str),
    #[error("the {0} is not a number")]
    NotANumber(&'static str),
    #[error("it is not a version 1 checkpoint manifest")]
    Version,
    #[error("a {0} is negative")]
    Negative(&'static str),
    #[error("an unknown {0}")]
    Unknown(&'static str),
    #[error("a mode is not octal")]
    ModeNotOctal,
    #[error("a stamp is malformed")]
    Stamp,
    #[error("an entry names no root or no path")]
    NoRootOrPath,
    #[error("an unknown record {0}")]
    Record(String),
}
