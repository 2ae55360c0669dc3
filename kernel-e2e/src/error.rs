//! Why the suite, or a step of a case, could not do what it set out to: an account or a backend
//! it needs, agentd's report, or a step that failed (the sentence names what and on what). A
//! case turns any of them into its failure; the suite prints them.

use crate::accounts::AccountError;
use crate::available::Unavailable;

/// Why a step of the suite failed.
#[derive(Debug, thiserror::Error)]
pub enum E2eError {
    /// A user or group the suite needs could not be had.
    #[error(transparent)]
    Account(#[from] AccountError),
    /// A sandbox backend does not work here.
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
    /// agentd's facts line breaks the contract.
    #[error(transparent)]
    Facts(#[from] FactsError),
    /// A step (running a program, preparing a file, asking agentd) failed, as the sentence says.
    #[error("{0}")]
    Failed(String),
}

/// How agentd's facts line breaks the contract: which part, said as a sentence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FactsError(pub String);

/// A [`FactsError`] from a format string.
macro_rules! facts_error {
    ($($arg:tt)+) => {
        $crate::error::FactsError(format!($($arg)+))
    };
}

/// An [`E2eError::Failed`] from a format string.
macro_rules! trouble {
    ($($arg:tt)+) => {
        $crate::error::E2eError::Failed(format!($($arg)+))
    };
}
