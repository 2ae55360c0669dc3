//! An effective value with where it came from, and the layering of the file over the
//! defaults that every value starts from.

use std::path::PathBuf;

use super::Source;

/// An effective value and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting<T> {
    pub value: T,
    pub source: Source,
}

impl<T> Setting<T> {
    pub(super) fn new(value: T, source: Source) -> Setting<T> {
        Setting { value, source }
    }

    pub(super) fn default(value: T) -> Setting<T> {
        Setting::new(value, Source::Default)
    }

    /// The value, when something set it (a file, a variable, a flag) rather than the default.
    pub fn configured(&self) -> Option<T>
    where
        T: Clone,
    {
        (self.source != Source::Default).then(|| self.value.clone())
    }
}

/// The file's value if it sets one, else `default`.
pub(super) fn layered<T>(value: Option<T>, default: T, file: &Option<PathBuf>) -> Setting<T> {
    match (value, file) {
        (Some(value), Some(path)) => Setting::new(value, Source::File(path.clone())),
        (Some(value), None) => Setting::default(value),
        (None, _) => Setting::default(default),
    }
}
