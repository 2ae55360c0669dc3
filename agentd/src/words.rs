//! The closed vocabularies of agentd's own values that a session log records: the approval
//! policy and the outcome of an approval request, and how the log spells a protocol [`Mode`].
//! A leaf: it depends on nothing else in agentd, so the session log ([`crate::session`]), the
//! configuration, the knobs and the approval seam can all name these values.
//!
//! Every word agentd reads or prints is parsed and spelt by one vocabulary: the protocol's
//! ([`confine_protocol::vocabulary`]) for modes, networks and backends, and the same macro here
//! for the approval policy and the approval outcome. [`allowed`] lists a vocabulary's words the way messages do.

use std::fmt;

use confine_protocol::Mode;
use serde::{Deserialize, Serialize};

/// `approval.policy`, and the value of a session's `approval/policy` event (spelt `ask` or
/// `never` in both, and everywhere else: see [`APPROVAL_POLICY_WORDS`]).
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
    /// The action may go ahead, and so may every later one of the same scope in this session
    /// (the person chose "always", or a rule they made earlier decided).
    AllowedAlways,
    /// Someone said no (or the policy `never` did).
    Rejected,
    /// Someone said no to this and to every later action of the same scope in this session.
    RejectedAlways,
    /// The turn was cancelled, or the person asked dismissed the question.
    Cancelled,
    /// Nobody could be asked.
    Unavailable,
}

confine_protocol::vocabulary!(Outcome, "approval outcome", OUTCOME_WORDS, [
    AllowedOnce => "allowed-once",
    AllowedAlways => "allowed-always",
    Rejected => "rejected",
    RejectedAlways => "rejected-always",
    Cancelled => "cancelled",
    Unavailable => "unavailable",
]);

impl Outcome {
    /// The action may go ahead.
    pub fn allows(self) -> bool {
        matches!(self, Outcome::AllowedOnce | Outcome::AllowedAlways)
    }

    /// The "always" answer this is, as a rule's decision: `Some(true)` allows, `Some(false)`
    /// rejects, `None` for an answer of this request only.
    pub fn always(self) -> Option<bool> {
        match self {
            Outcome::AllowedAlways => Some(true),
            Outcome::RejectedAlways => Some(false),
            _ => None,
        }
    }

    /// The same answer for this request only.
    pub fn once(self) -> Outcome {
        match self {
            Outcome::AllowedAlways => Outcome::AllowedOnce,
            Outcome::RejectedAlways => Outcome::Rejected,
            other => other,
        }
    }
}

confine_protocol::vocabulary!(ApprovalPolicy, "approval policy", APPROVAL_POLICY_WORDS, [
    Ask => "ask",
    Never => "never",
]);

/// The words of a vocabulary as messages list them: `"a", "b" or "c"`.
pub fn allowed<T: fmt::Display>(all: &[T]) -> String {
    let words: Vec<String> = all.iter().map(|w| format!("{:?}", w.to_string())).collect();
    match words.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => words.concat(),
    }
}

/// (De)serializes a [`Mode`] as its configuration word (`read-only`, `workspace-write`,
/// `danger-full-access`), for the session log.
pub mod mode_word {
    use super::*;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(mode: &Mode, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(mode.as_str())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Mode, D::Error> {
        let word = String::deserialize(deserializer)?;
        word.parse().map_err(|_| {
            serde::de::Error::custom(format!(
                "unknown sandbox mode {word:?}: expected {}",
                allowed(Mode::ALL)
            ))
        })
    }
}

/// As [`mode_word`], for a mode that may be absent.
pub mod optional_mode_word {
    use super::*;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(mode: &Option<Mode>, serializer: S) -> Result<S::Ok, S::Error> {
        match mode {
            Some(mode) => super::mode_word::serialize(mode, serializer),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Mode>, D::Error> {
        #[derive(Deserialize)]
        struct Word(#[serde(with = "super::mode_word")] Mode);
        Ok(Option::<Word>::deserialize(deserializer)?.map(|Word(mode)| mode))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_list_the_words_quoted_with_or_before_the_last() {
        assert_eq!(
            allowed(Mode::ALL),
            "\"read-only\", \"workspace-write\" or \"danger-full-access\""
        );
        assert_eq!(allowed(ApprovalPolicy::ALL), "\"ask\" or \"never\"");
        assert_eq!(allowed(&["only"]), "\"only\"");
    }

    #[test]
    fn the_log_spells_the_policy_with_its_words() {
        for policy in ApprovalPolicy::ALL {
            let json = serde_json::to_value(policy).expect("json");
            assert_eq!(json, serde_json::json!(policy.as_str()));
            assert_eq!(policy.as_str().parse::<ApprovalPolicy>(), Ok(*policy));
        }
        assert!(
            "Never".parse::<ApprovalPolicy>().is_err(),
            "words are exact"
        );
    }
}
