//! The words users type and read for the policy enums: one spelling per value, shared by every
//! place that parses or prints them (the helper's ceiling, agentd's configuration, command line
//! and ACP options, the facts). Not part of the wire: the schema hash covers the enums, not
//! their names.

use crate::{Backend, BackendChoice, Mode, Network};

/// A word that is not one of a vocabulary's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} {word:?} is not one of {}", expected.join(", "))]
pub struct UnknownWord {
    /// What the word was meant to name (`mode`, `network`, …).
    pub kind: &'static str,
    pub word: String,
    /// Every word of the vocabulary, in order.
    pub expected: &'static [&'static str],
}

/// Gives a fieldless enum its vocabulary: `pub const $words` (every word, in order), and on the
/// type `ALL` (every value, in the same order), `as_str`, [`Display`](std::fmt::Display) and
/// [`FromStr`](std::str::FromStr) with [`UnknownWord`] as its error. Exported so that agentd
/// spells its own vocabularies the same way: `confine_protocol::vocabulary!(Type, "kind",
/// TYPE_WORDS, [Variant => "word", …]);` in the module that defines `Type`.
#[macro_export]
macro_rules! vocabulary {
    ($ty:ident, $kind:literal, $words:ident, [$($variant:ident => $word:literal),+ $(,)?]) => {
        /// Every word of this vocabulary, in declaration order.
        pub const $words: &[&str] = &[$($word),+];

        impl $ty {
            /// Every value, in declaration order.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];

            /// The word users type and read.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $word),+
                }
            }
        }

        impl ::std::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $ty {
            type Err = $crate::vocabulary::UnknownWord;

            fn from_str(word: &str) -> ::std::result::Result<Self, Self::Err> {
                match word {
                    $($word => ::std::result::Result::Ok($ty::$variant),)+
                    _ => ::std::result::Result::Err($crate::vocabulary::UnknownWord {
                        kind: $kind,
                        word: ::std::borrow::ToOwned::to_owned(word),
                        expected: $words,
                    }),
                }
            }
        }
    };
}

vocabulary!(Mode, "mode", MODE_WORDS, [
    ReadOnly => "read-only",
    WorkspaceWrite => "workspace-write",
    DangerFullAccess => "danger-full-access",
]);

vocabulary!(Network, "network", NETWORK_WORDS, [
    Deny => "deny",
    Allow => "allow",
]);

vocabulary!(BackendChoice, "backend", BACKEND_CHOICE_WORDS, [
    Auto => "auto",
    Bwrap => "bwrap",
    Landlock => "landlock",
    Seatbelt => "seatbelt",
    Namespaces => "namespaces",
]);

vocabulary!(Backend, "backend", BACKEND_WORDS, [
    None => "none",
    Bwrap => "bwrap",
    Landlock => "landlock",
    Seatbelt => "seatbelt",
    Namespaces => "namespaces",
]);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_parses_back_to_its_value() {
        for mode in Mode::ALL {
            assert_eq!(mode.as_str().parse::<Mode>(), Ok(*mode));
            assert_eq!(mode.to_string(), mode.as_str());
        }
        for network in Network::ALL {
            assert_eq!(network.as_str().parse::<Network>(), Ok(*network));
        }
        for choice in BackendChoice::ALL {
            assert_eq!(choice.as_str().parse::<BackendChoice>(), Ok(*choice));
        }
        for backend in Backend::ALL {
            assert_eq!(backend.as_str().parse::<Backend>(), Ok(*backend));
        }
    }

    #[test]
    fn an_unknown_word_names_the_vocabulary() {
        let e = "yolo".parse::<Mode>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "mode \"yolo\" is not one of read-only, workspace-write, danger-full-access"
        );
        assert!("Deny".parse::<Network>().is_err(), "words are exact");
    }

    #[test]
    fn modes_are_listed_narrowest_first() {
        assert!(Mode::ALL.windows(2).all(|w| w[0] < w[1]));
    }
}
