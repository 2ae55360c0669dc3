//! The closed vocabularies of agentd's own values that a session log records: the approval
//! policy and the outcome of an approval request, and how the log spells a protocol [`Mode`].
//! A leaf: it depends on nothing else in agentd, so the session log ([`crate::session`]), the
//! configuration, the knobs and the approval seam can all name these values.

use confine_protocol::{BackendChoice, Mode, Network};
use serde::{Deserialize, Serialize};

/// `approval.policy`, and the value of a session's `approval/policy` event (spelt `ask` or
/// `never` in both).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalPolicy {
    /// Ask the user when a command needs more than the sandbox allows, and before every call of
    /// a tool in `approval.ask_before`.
    #[default]
    Ask,
    /// Never ask: every request for approval is rejected without asking anyone, so what the
    /// sandbox denies stays denied and the tools in `approval.ask_before` do not run.
    Never,
}

/// How an approval request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The action may go ahead, this once.
    AllowedOnce,
    /// Someone said no (or the policy `never` did).
    Rejected,
    /// The turn was cancelled, or the person asked dismissed the question.
    Cancelled,
    /// Nobody could be asked.
    Unavailable,
}

impl Outcome {
    /// Every outcome, in the order the vocabulary lists them.
    pub const ALL: [Outcome; 4] = [
        Outcome::AllowedOnce,
        Outcome::Rejected,
        Outcome::Cancelled,
        Outcome::Unavailable,
    ];

    /// The outcome's word: `allowed-once`, `rejected`, `cancelled` or `unavailable`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::AllowedOnce => "allowed-once",
            Outcome::Rejected => "rejected",
            Outcome::Cancelled => "cancelled",
            Outcome::Unavailable => "unavailable",
        }
    }

    /// The outcome spelt `word`, if it is one.
    pub fn from_word(word: &str) -> Option<Outcome> {
        Outcome::ALL.into_iter().find(|o| o.as_str() == word)
    }
}

/// A setting with a closed set of values, each spelt one way.
pub trait Vocabulary: Copy + PartialEq + Sized + 'static {
    /// Every value and its spelling, in the order messages list them.
    const WORDS: &'static [(&'static str, Self)];

    /// The value spelt `word`, if any.
    fn from_word(word: &str) -> Option<Self> {
        Self::WORDS
            .iter()
            .find(|(w, _)| *w == word)
            .map(|(_, v)| *v)
    }

    /// How this value is spelt.
    fn word(self) -> &'static str {
        Self::WORDS
            .iter()
            .find(|(_, v)| *v == self)
            .map_or("?", |(w, _)| w)
    }

    /// The allowed spellings, for messages: `"a", "b" or "c"`.
    fn allowed() -> String {
        let words: Vec<String> = Self::WORDS.iter().map(|(w, _)| format!("{w:?}")).collect();
        match words.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => words.concat(),
        }
    }
}

impl Vocabulary for Mode {
    const WORDS: &'static [(&'static str, Mode)] = &[
        ("read-only", Mode::ReadOnly),
        ("workspace-write", Mode::WorkspaceWrite),
        ("danger-full-access", Mode::DangerFullAccess),
    ];
}

impl Vocabulary for Network {
    const WORDS: &'static [(&'static str, Network)] =
        &[("deny", Network::Deny), ("allow", Network::Allow)];
}

impl Vocabulary for BackendChoice {
    const WORDS: &'static [(&'static str, BackendChoice)] = &[
        ("auto", BackendChoice::Auto),
        ("bwrap", BackendChoice::Bwrap),
        ("landlock", BackendChoice::Landlock),
        ("seatbelt", BackendChoice::Seatbelt),
    ];
}

impl Vocabulary for ApprovalPolicy {
    const WORDS: &'static [(&'static str, ApprovalPolicy)] = &[
        ("ask", ApprovalPolicy::Ask),
        ("never", ApprovalPolicy::Never),
    ];
}

/// (De)serializes a [`Mode`] as its configuration word (`read-only`, `workspace-write`,
/// `danger-full-access`), for the session log.
pub mod mode_word {
    use super::*;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(mode: &Mode, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(mode.word())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Mode, D::Error> {
        let word = String::deserialize(deserializer)?;
        Mode::from_word(&word).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown sandbox mode {word:?}: expected {}",
                Mode::allowed()
            ))
        })
    }
}
