//! `[sandbox.env]`: variables every command of a session (and of `agentd run`) gets besides
//! the inherited ones.
//!
//! ```toml
//! [sandbox.env]
//! pass = ["CARGO_TARGET_DIR", "PIP_INDEX_URL"]   # taken from agentd's own environment
//! set = { RUST_BACKTRACE = "1" }                 # set to this value
//! ```
//!
//! Both are explicit settings, as `agentd run --env NAME=VALUE` is: a passed variable that is
//! not in agentd's environment is left out, and one whose name looks like a secret is refused by
//! confine-helper with the reason (its ceiling's `env_allow` can allow it) — never sent without
//! a word and never dropped without one. `set` beats `pass` for one name; `agentd run --env`
//! beats both.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use super::ConfigError;
use super::checks::{is_variable_name, line_at};

/// `[sandbox.env]` as the file writes it.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEnv {
    pass: Option<Vec<Spanned<String>>>,
    set: Option<BTreeMap<Spanned<String>, Spanned<String>>>,
}

/// `[sandbox.env]`, checked: every name a variable name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvSection {
    /// Names taken from agentd's environment, in the file's order.
    pub pass: Vec<String>,
    /// Names and values, by name.
    pub set: Vec<(String, String)>,
}

impl EnvSection {
    pub(super) fn parse(raw: RawEnv, path: &Path, text: &str) -> Result<EnvSection, ConfigError> {
        let check = |name: &Spanned<String>, key: &'static str| {
            if is_variable_name(name.get_ref()) {
                Ok(name.get_ref().clone())
            } else {
                Err(ConfigError::NotAVariableName {
                    path: path.to_owned(),
                    line: line_at(text, name.span().start),
                    key,
                    name: name.get_ref().clone(),
                })
            }
        };
        let mut section = EnvSection::default();
        for name in raw.pass.unwrap_or_default() {
            let name = check(&name, "sandbox.env.pass")?;
            if !section.pass.contains(&name) {
                section.pass.push(name);
            }
        }
        for (name, value) in raw.set.unwrap_or_default() {
            section
                .set
                .push((check(&name, "sandbox.env.set")?, value.into_inner()));
        }
        Ok(section)
    }

    pub fn is_empty(&self) -> bool {
        self.pass.is_empty() && self.set.is_empty()
    }

    /// The explicit settings it gives a command, with the passed values taken from `lookup`
    /// (agentd's own environment): each passed name that is there, then each set one.
    pub fn explicit(&self, lookup: impl Fn(&str) -> Option<OsString>) -> Vec<(OsString, OsString)> {
        let passed = self
            .pass
            .iter()
            .filter(|name| !self.set.iter().any(|(set, _)| set == *name))
            .filter_map(|name| Some((OsString::from(name), lookup(name)?)));
        let set = self
            .set
            .iter()
            .map(|(name, value)| (OsString::from(name), OsString::from(value)));
        passed.chain(set).collect()
    }
}

/// agentd's own environment, as [`EnvSection::explicit`] looks it up.
pub fn process_lookup(name: &str) -> Option<OsString> {
    std::env::var_os(OsStr::new(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<EnvSection, ConfigError> {
        #[derive(Deserialize)]
        struct File {
            env: RawEnv,
        }
        let file: File = toml::from_str(text).expect("toml");
        EnvSection::parse(file.env, Path::new("/c/agentd.toml"), text)
    }

    #[test]
    fn pass_and_set_give_explicit_settings_set_winning() {
        let section = parse(
            "[env]\npass = [\"A\", \"B\", \"A\", \"C\"]\nset = { C = \"from set\", D = \"d\" }\n",
        )
        .expect("parses");
        assert_eq!(section.pass, ["A", "B", "C"]);
        let lookup = |name: &str| match name {
            "A" => Some(OsString::from("a")),
            "C" => Some(OsString::from("from env")),
            _ => None,
        };
        let explicit: Vec<(String, String)> = section
            .explicit(lookup)
            .into_iter()
            .map(|(n, v)| {
                (
                    n.into_string().expect("utf8"),
                    v.into_string().expect("utf8"),
                )
            })
            .collect();
        assert_eq!(
            explicit,
            [
                ("A".to_owned(), "a".to_owned()),
                ("C".to_owned(), "from set".to_owned()),
                ("D".to_owned(), "d".to_owned()),
            ],
            "B is not in the environment; C's set value wins"
        );
    }

    #[test]
    fn a_name_that_is_not_a_variable_name_is_refused_with_its_line() {
        let err = parse("[env]\npass = [\n  \"OK\",\n  \"NOT OK\",\n]\n").expect_err("bad name");
        assert_eq!(
            err.to_string(),
            "the configuration file /c/agentd.toml, line 4: sandbox.env.pass lists \"NOT OK\", \
             which is not a variable name (letters, digits and `_`, not starting with a digit)"
        );
        let err = parse("[env]\nset = { \"1X\" = \"v\" }\n").expect_err("bad name");
        assert!(
            err.to_string().contains("sandbox.env.set lists \"1X\""),
            "{err}"
        );
    }
}
