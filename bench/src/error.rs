//! Why a measurement could not be taken. The benchmark stops at the first one and prints it; no
//! caller tells one failure from another, so the error is the sentence that names what failed
//! and on what.

/// A measurement that could not be taken, said as the benchmark prints it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BenchError(pub String);

/// A [`BenchError`] from a format string.
macro_rules! fail {
    ($($arg:tt)+) => {
        $crate::error::BenchError(format!($($arg)+))
    };
}
