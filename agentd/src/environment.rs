//! Which environment variables a command gets.
//!
//! A command never inherits agentd's whole environment. It gets the variables named in
//! [`INHERITED_NAMES`] and the locale categories (`LC_ALL`, `LC_CTYPE`, …), and of those only the
//! ones that keep the rules agentd and confine-helper share ([`confine_protocol::environment`]):
//! a locale variable only while it holds a locale name, and no secret-looking name. An inherited
//! variable that breaks them stays behind without a word, as does everything else, tokens and
//! sockets included. On top come the caller's explicit settings (`agentd run --env NAME=VALUE`),
//! sent as given: an explicit variable was asked for, so one that breaks the rules is not dropped
//! here but refused by confine-helper, with the reason and how its ceiling can allow it.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

use confine_protocol::environment::{
    LOCALE_CATEGORIES, is_locale_category, is_locale_value, looks_secret,
};

/// Variables a command inherits from agentd by exact name (besides the locale categories).
pub const INHERITED_NAMES: [&str; 15] = [
    "PATH",
    "HOME",
    "LANG",
    "LANGUAGE",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "FORCE_COLOR",
    "USER",
    "LOGNAME",
    "SHELL",
    "TZ",
    "EDITOR",
    "VISUAL",
    "PAGER",
];

/// The inherited names as users read them: `PATH, HOME, …, PAGER and the locale categories
/// LC_ALL, …`, with the rule for locale values.
pub fn inherited_summary() -> String {
    format!(
        "{} and the locale categories {} (LANG, LANGUAGE and LC_* only while they hold a locale \
         name)",
        INHERITED_NAMES.join(", "),
        LOCALE_CATEGORIES.join(", ")
    )
}

/// Whether a variable of agentd's own environment is one a command may inherit, by name.
pub fn is_inherited(name: &OsStr) -> bool {
    let name = name.as_bytes();
    INHERITED_NAMES.iter().any(|n| n.as_bytes() == name) || is_locale_category(name)
}

/// Whether a variable of agentd's own environment is passed on to commands: an
/// [`is_inherited`] name that keeps the shared rules (a locale value where one belongs, no
/// secret-looking name).
pub fn passes_on(name: &OsStr, value: &OsStr) -> bool {
    is_inherited(name)
        && is_locale_value(name.as_bytes(), value.as_bytes())
        && !looks_secret(name.as_bytes())
}

/// The part of `vars` (normally [`std::env::vars_os`]) that a command inherits, in order.
pub fn inherited<I>(vars: I) -> Vec<(OsString, OsString)>
where
    I: IntoIterator<Item = (OsString, OsString)>,
{
    vars.into_iter()
        .filter(|(name, value)| passes_on(name, value))
        .collect()
}

/// A command's whole environment: the [`inherited`] part of `vars`, then each of `explicit` on
/// top, replacing any variable of the same name; of two explicit settings of one name the later
/// wins.
pub fn command_environment<I>(
    vars: I,
    explicit: &[(OsString, OsString)],
) -> Vec<(OsString, OsString)>
where
    I: IntoIterator<Item = (OsString, OsString)>,
{
    let mut env = inherited(vars);
    for (name, value) in explicit {
        env.retain(|(existing, _)| existing != name);
        env.push((name.clone(), value.clone()));
    }
    env
}

/// The home directory a command of environment `env` gets: its last `HOME`, when absolute (the
/// one confine-helper never lets a command's writable root hold).
pub fn home(env: &[(OsString, OsString)]) -> Option<&Path> {
    env.iter()
        .rev()
        .find(|(name, _)| name == "HOME")
        .map(|(_, value)| Path::new(value))
        .filter(|home| home.is_absolute())
}

/// An explicit `NAME=VALUE` that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssignmentError {
    #[error("expected NAME=VALUE, but there is no '=' in {0:?}")]
    NoEquals(String),
    #[error("expected NAME=VALUE, but the name before '=' is empty in {0:?}")]
    EmptyName(String),
}

/// Parses `NAME=VALUE`: the name is everything before the first `=` and must not be empty; the
/// value is the rest and may be empty or contain `=`.
pub fn parse_assignment(text: &OsStr) -> Result<(OsString, OsString), AssignmentError> {
    let bytes = text.as_bytes();
    let shown = || text.to_string_lossy().into_owned();
    let mut parts = bytes.splitn(2, |&b| b == b'=');
    let (Some(name), Some(value)) = (parts.next(), parts.next()) else {
        return Err(AssignmentError::NoEquals(shown()));
    };
    if name.is_empty() {
        return Err(AssignmentError::EmptyName(shown()));
    }
    Ok((
        OsString::from_vec(name.to_vec()),
        OsString::from_vec(value.to_vec()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(n, v)| (OsString::from(n), OsString::from(v)))
            .collect()
    }

    #[test]
    fn a_commands_home_is_its_last_absolute_home() {
        let env = vars(&[("HOME", "/home/u"), ("PATH", "/bin"), ("HOME", "/home/v")]);
        assert_eq!(home(&env), Some(Path::new("/home/v")));
        assert_eq!(home(&vars(&[("HOME", "rel")])), None);
        assert_eq!(home(&vars(&[("PATH", "/bin")])), None);
    }

    #[test]
    fn every_listed_name_is_inherited() {
        for name in INHERITED_NAMES {
            assert!(is_inherited(OsStr::new(name)), "{name}");
        }
    }

    #[test]
    fn the_summary_lists_every_name_and_category() {
        assert_eq!(
            inherited_summary(),
            "PATH, HOME, LANG, LANGUAGE, TERM, COLORTERM, NO_COLOR, FORCE_COLOR, USER, LOGNAME, \
             SHELL, TZ, EDITOR, VISUAL, PAGER and the locale categories LC_ALL, LC_ADDRESS, \
             LC_COLLATE, LC_CTYPE, LC_IDENTIFICATION, LC_MEASUREMENT, LC_MESSAGES, LC_MONETARY, \
             LC_NAME, LC_NUMERIC, LC_PAPER, LC_TELEPHONE, LC_TIME (LANG, LANGUAGE and LC_* only \
             while they hold a locale name)"
        );
    }

    #[test]
    fn no_inherited_name_looks_secret() {
        for name in INHERITED_NAMES.iter().chain(LOCALE_CATEGORIES.iter()) {
            assert!(!looks_secret(name.as_bytes()), "{name}");
        }
    }

    #[test]
    fn only_the_locale_categories_are_inherited_of_the_lc_names() {
        for name in ["LC_ALL", "LC_CTYPE", "LC_MESSAGES", "LC_TIME"] {
            assert!(is_inherited(OsStr::new(name)), "{name}");
        }
        for name in [
            "LC_",
            "XLC_ALL",
            "LC_DB_PASS",
            "LC_MY_TOKEN",
            "LC_FOO",
            "LC_all",
        ] {
            assert!(!is_inherited(OsStr::new(name)), "{name}");
        }
    }

    #[test]
    fn locale_variables_are_inherited_only_with_a_locale_name() {
        let env = inherited(vars(&[
            ("LC_ALL", "hunter2"),
            ("LC_MESSAGES", "C"),
            ("LANG", "C.UTF-8"),
            ("LC_TIME", "en_US.UTF-8; rm -rf"),
            ("LANGUAGE", "de_DE:de:en"),
            ("LC_CTYPE", "/etc/passwd"),
            ("LC_NUMERIC", ""),
            ("LC_DB_PASS", "de_DE"),
        ]));
        assert_eq!(
            env,
            vars(&[
                ("LC_MESSAGES", "C"),
                ("LANG", "C.UTF-8"),
                ("LANGUAGE", "de_DE:de:en"),
                ("LC_NUMERIC", ""),
            ])
        );
    }

    #[test]
    fn everything_else_stays_behind() {
        for name in [
            "OPENAI_API_KEY",
            "GITHUB_TOKEN",
            "SSH_AUTH_SOCK",
            "DBUS_SESSION_BUS_ADDRESS",
            "LD_PRELOAD",
            "PYTHONPATH",
            "XDG_RUNTIME_DIR",
            "PWD",
            "path",
            "Home",
            "PATHX",
            "",
        ] {
            assert!(!is_inherited(OsStr::new(name)), "{name}");
        }
    }

    #[test]
    fn inherited_keeps_only_the_allowed_in_order() {
        let env = inherited(vars(&[
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("PATH", "/usr/bin"),
            ("LD_PRELOAD", "/x.so"),
            ("LC_ALL", "C.UTF-8"),
            ("HOME", "/home/u"),
        ]));
        assert_eq!(
            env,
            vars(&[
                ("PATH", "/usr/bin"),
                ("LC_ALL", "C.UTF-8"),
                ("HOME", "/home/u")
            ])
        );
    }

    #[test]
    fn explicit_settings_go_on_top_and_the_later_wins() {
        // Even a secret-looking one: confine-helper, not agentd, refuses it, naming env_allow.
        let env = command_environment(
            vars(&[("PATH", "/usr/bin"), ("HOME", "/home/u"), ("GH_TOKEN", "t")]),
            &vars(&[
                ("PATH", "/opt/bin"),
                ("FOO", "1"),
                ("FOO", "2"),
                ("GH_TOKEN", "given"),
            ]),
        );
        assert_eq!(
            env,
            vars(&[
                ("HOME", "/home/u"),
                ("PATH", "/opt/bin"),
                ("FOO", "2"),
                ("GH_TOKEN", "given")
            ])
        );
    }

    #[test]
    fn non_utf8_names_and_values_are_kept_as_bytes() {
        let value = OsString::from_vec(vec![0xff, b'x']);
        let env = inherited([
            (OsString::from("TERM"), value.clone()),
            (
                OsString::from_vec(vec![b'L', b'C', b'_', 0xfe]),
                value.clone(),
            ),
            (OsString::from_vec(vec![0xfd]), value.clone()),
        ]);
        assert_eq!(env, [(OsString::from("TERM"), value)]);
    }

    #[test]
    fn an_assignment_splits_at_the_first_equals() {
        let parse = |s: &str| parse_assignment(OsStr::new(s));
        assert_eq!(parse("A=b"), Ok(("A".into(), "b".into())));
        assert_eq!(parse("A=b=c"), Ok(("A".into(), "b=c".into())));
        assert_eq!(parse("A="), Ok(("A".into(), "".into())));
        assert_eq!(
            parse("lower_case=x y"),
            Ok(("lower_case".into(), "x y".into()))
        );
    }

    #[test]
    fn a_malformed_assignment_is_an_error() {
        let parse = |s: &str| parse_assignment(OsStr::new(s));
        assert_eq!(parse("A"), Err(AssignmentError::NoEquals("A".into())));
        assert_eq!(parse(""), Err(AssignmentError::NoEquals("".into())));
        assert_eq!(parse("=x"), Err(AssignmentError::EmptyName("=x".into())));
        assert_eq!(parse("="), Err(AssignmentError::EmptyName("=".into())));
    }

    #[test]
    fn a_non_utf8_assignment_parses() {
        let text = OsString::from_vec(vec![b'N', b'=', 0xff]);
        assert_eq!(
            parse_assignment(&text),
            Ok(("N".into(), OsString::from_vec(vec![0xff])))
        );
    }
}
