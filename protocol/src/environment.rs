//! The rules for a command's environment that agentd and confine-helper both apply: which names
//! look like they carry a credential, what a locale variable may hold, and where a command is
//! looked up when its environment has no `PATH`.
//!
//! There is one copy of them, here, so the two sides cannot drift apart. agentd uses them to
//! decide what a command inherits of its own environment (an inherited variable that breaks them
//! is left behind without a word); the helper, the authority, refuses a request that carries a
//! variable breaking them, unless its ceiling's `env_allow` exempts a secret-looking name. Nothing
//! here is part of the wire format.
//!
//! Names are compared as bytes, ASCII case-insensitively: environment names need not be UTF-8.

/// Substrings of a name, in any case, that mark it as carrying a credential: API keys, tokens,
/// passwords and pass phrases (`PASS` covers `PASSWORD`, `PASSWD`, `PASSPHRASE` and the askpass
/// programs that hand them out), `PWD` as in `MYSQL_PWD`, credential files, authentication
/// material (`AUTH` covers `SSH_AUTH_SOCK`, `XAUTHORITY`, `NPM_AUTH_TOKEN`, `BASIC_AUTH`),
/// cookies, session identifiers and session bus or manager addresses, private keys.
///
/// Two exceptions keep common names that hold nothing secret: the names in
/// [`NOT_SECRET_NAMES`], and `AUTH` where it begins the word `AUTHOR` (`GIT_AUTHOR_NAME`), though
/// not `AUTHORITY` or `AUTHORIZATION`. Certificates (`SSL_CERT_FILE`, `NODE_EXTRA_CA_CERTS`) are
/// deliberately not on the list: they are public, and the private half of a key pair is caught
/// by `KEY` or `PRIVATE`. A false positive costs an explicit `env_allow` entry; a false negative
/// hands a credential to the command, so the list errs on the wide side.
pub const SECRET_WORDS: [&str; 11] = [
    "KEY",
    "SECRET",
    "TOKEN",
    "PASS",
    "PWD",
    "CREDENTIAL",
    "CREDS",
    "AUTH",
    "COOKIE",
    "SESSION",
    "PRIVATE",
];

/// Whole names, in any case, that reach a credential without containing one of
/// [`SECRET_WORDS`]: the GnuPG agent's address and the Kerberos credential cache.
pub const SECRET_NAMES: [&str; 2] = ["GPG_AGENT_INFO", "KRB5CCNAME"];

/// Whole names, in any case, that contain one of [`SECRET_WORDS`] but hold nothing secret: the
/// shell's working directories, and the kind of desktop session (not its identifier, nor its
/// bus or manager address, which stay secret).
pub const NOT_SECRET_NAMES: [&str; 6] = [
    "PWD",
    "OLDPWD",
    "XDG_SESSION_TYPE",
    "XDG_SESSION_CLASS",
    "XDG_SESSION_DESKTOP",
    "DESKTOP_SESSION",
];

/// The locale categories of POSIX and glibc: the only `LC_*` names that are locale variables.
pub const LOCALE_CATEGORIES: [&str; 13] = [
    "LC_ALL",
    "LC_ADDRESS",
    "LC_COLLATE",
    "LC_CTYPE",
    "LC_IDENTIFICATION",
    "LC_MEASUREMENT",
    "LC_MESSAGES",
    "LC_MONETARY",
    "LC_NAME",
    "LC_NUMERIC",
    "LC_PAPER",
    "LC_TELEPHONE",
    "LC_TIME",
];

/// The longest codeset of a locale name (`ISO-8859-15` has 11 bytes).
pub const MAX_CODESET: usize = 16;

/// The longest modifier of a locale name (`devanagari` has 10 bytes).
pub const MAX_MODIFIER: usize = 16;

/// The most locale names `LANGUAGE` may list.
pub const MAX_LANGUAGE_ENTRIES: usize = 16;

/// The `PATH` confine-helper looks a command up in when the request's environment has none;
/// agentd looks for the shell of its tools there too.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Whether `name` can be an environment variable's name (`DEEPSEEK_API_KEY`: a letter or `_`,
/// then letters, digits and `_`), as opposed to, say, a key pasted in its place.
pub fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The word of [`SECRET_WORDS`] or the name of [`SECRET_NAMES`] that makes `name` look like it
/// carries a credential; `None` if it does not.
pub fn secret_word(name: &[u8]) -> Option<&'static str> {
    let upper = name.to_ascii_uppercase();
    if NOT_SECRET_NAMES.iter().any(|n| n.as_bytes() == upper) {
        return None;
    }
    if let Some(whole) = SECRET_NAMES.iter().find(|n| n.as_bytes() == upper) {
        return Some(whole);
    }
    SECRET_WORDS.iter().copied().find(|word| {
        let word = word.as_bytes();
        tails(&upper)
            .filter(|rest| rest.starts_with(word))
            .any(|rest| !(word == b"AUTH" && names_an_author(rest)))
    })
}

/// `text` and every shorter tail of it down to its last byte: `ABC`, `BC`, `C`.
fn tails(text: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::successors(Some(text), |t| t.split_first().map(|(_, rest)| rest)).take(text.len())
}

/// Whether `name` looks like it carries a credential ([`secret_word`]).
pub fn looks_secret(name: &[u8]) -> bool {
    secret_word(name).is_some()
}

/// `AUTHOR`, `AUTHORS`, … but not `AUTHORITY` or `AUTHORIZATION`.
fn names_an_author(rest: &[u8]) -> bool {
    rest.starts_with(b"AUTHOR") && rest.get(b"AUTHOR".len()) != Some(&b'I')
}

/// Whether `name` is a locale variable: `LANG`, `LANGUAGE` or one of [`LOCALE_CATEGORIES`]. An
/// `LC_` name outside that list is an ordinary variable.
pub fn is_locale_variable(name: &[u8]) -> bool {
    name == b"LANG" || name == b"LANGUAGE" || is_locale_category(name)
}

/// Whether `name` is one of [`LOCALE_CATEGORIES`] (exactly, in upper case, as the C library
/// reads them).
pub fn is_locale_category(name: &[u8]) -> bool {
    LOCALE_CATEGORIES.iter().any(|c| c.as_bytes() == name)
}

/// Whether `value` is something the locale variable `name` may hold: for `LANGUAGE` a
/// colon-separated list of at most [`MAX_LANGUAGE_ENTRIES`] locale names (GNU gettext's
/// priority list, `de_DE:de:en`), for the others one [`is_locale_name`]. The empty value, which
/// the C library reads as unset, is always allowed. Variables that are not locale variables
/// may hold anything.
pub fn is_locale_value(name: &[u8], value: &[u8]) -> bool {
    if !is_locale_variable(name) || value.is_empty() {
        return true;
    }
    if name == b"LANGUAGE" {
        let entries = value.split(|&b| b == b':');
        return entries.clone().count() <= MAX_LANGUAGE_ENTRIES
            && entries.into_iter().all(is_locale_name);
    }
    is_locale_name(value)
}

/// Whether `value` is a locale name: `C`, `POSIX`, or `language[_territory][.codeset][@modifier]`
/// where `language` is 2 or 3 ASCII letters (ISO 639), `territory` 2 ASCII letters (ISO 3166) or
/// 3 digits (UN M.49, as in `es_419`), and `codeset` and `modifier` are 1 to [`MAX_CODESET`] and
/// [`MAX_MODIFIER`] ASCII letters, digits, `-` or `_`. `C` and `POSIX` take a codeset and a
/// modifier too (`C.UTF-8`). So `en_US.UTF-8`, `de_DE@euro` and `sr_RS.UTF-8@latin` are locale
/// names; a path, a list, anything with spaces, quotes or other punctuation is not.
pub fn is_locale_name(value: &[u8]) -> bool {
    let (rest, modifier) = split_last(value, b'@');
    let (rest, codeset) = split_last(rest, b'.');
    let (language, territory) = split_first(rest, b'_');
    let language_ok = match language {
        b"C" | b"POSIX" => territory.is_none(),
        _ => (2..=3).contains(&language.len()) && language.iter().all(u8::is_ascii_alphabetic),
    };
    let territory_ok = territory.is_none_or(|t| {
        t.len() == 2 && t.iter().all(u8::is_ascii_alphabetic)
            || t.len() == 3 && t.iter().all(u8::is_ascii_digit)
    });
    language_ok
        && territory_ok
        && codeset.is_none_or(|c| is_word(c, MAX_CODESET))
        && modifier.is_none_or(|m| is_word(m, MAX_MODIFIER))
}

/// `text` split at the first `separator`: what comes before, and what comes after if there was
/// one.
fn split_first(text: &[u8], separator: u8) -> (&[u8], Option<&[u8]>) {
    let mut parts = text.splitn(2, |&b| b == separator);
    match (parts.next(), parts.next()) {
        (Some(before), after @ Some(_)) => (before, after),
        _ => (text, None),
    }
}

/// `text` split at the last `separator`: what comes before, and what comes after if there was
/// one.
fn split_last(text: &[u8], separator: u8) -> (&[u8], Option<&[u8]>) {
    let mut parts = text.rsplitn(2, |&b| b == separator);
    match (parts.next(), parts.next()) {
        (after @ Some(_), Some(before)) => (before, after),
        _ => (text, None),
    }
}

/// 1 to `max` ASCII letters, digits, `-` or `_`.
fn is_word(text: &[u8], max: usize) -> bool {
    (1..=max).contains(&text.len())
        && text
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_names_look_secret_in_any_case() {
        for (name, word) in [
            ("OPENAI_API_KEY", "KEY"),
            ("AWS_SECRET_ACCESS_KEY", "KEY"),
            ("GITHUB_TOKEN", "TOKEN"),
            ("AWS_SESSION_TOKEN", "TOKEN"),
            ("DB_PASSWORD", "PASS"),
            ("LC_DB_PASS", "PASS"),
            ("MYSQL_PASSWD", "PASS"),
            ("GPG_PASSPHRASE", "PASS"),
            ("SSH_ASKPASS", "PASS"),
            ("MYSQL_PWD", "PWD"),
            ("GOOGLE_APPLICATION_CREDENTIALS", "CREDENTIAL"),
            ("AWS_SHARED_CREDENTIALS_FILE", "CREDENTIAL"),
            ("DEPLOY_CREDS", "CREDS"),
            ("SSH_AUTH_SOCK", "AUTH"),
            ("XAUTHORITY", "AUTH"),
            ("HTTP_AUTHORIZATION", "AUTH"),
            ("NPM_CONFIG__AUTH", "AUTH"),
            ("OAUTH_CLIENT", "AUTH"),
            ("BROWSER_COOKIE", "COOKIE"),
            ("DBUS_SESSION_BUS_ADDRESS", "SESSION"),
            ("SESSION_MANAGER", "SESSION"),
            ("XDG_SESSION_ID", "SESSION"),
            ("TLS_PRIVATE", "PRIVATE"),
            ("GPG_AGENT_INFO", "GPG_AGENT_INFO"),
            ("KRB5CCNAME", "KRB5CCNAME"),
            ("github_token", "TOKEN"),
            ("Db_Pass", "PASS"),
        ] {
            assert_eq!(secret_word(name.as_bytes()), Some(word), "{name}");
        }
    }

    #[test]
    fn common_names_that_hold_no_secret_do_not_look_secret() {
        for name in [
            "PATH",
            "HOME",
            "LANG",
            "LANGUAGE",
            "TERM",
            "USER",
            "SHELL",
            "TZ",
            "PWD",
            "OLDPWD",
            "pwd",
            "XDG_SESSION_TYPE",
            "XDG_SESSION_CLASS",
            "XDG_SESSION_DESKTOP",
            "DESKTOP_SESSION",
            "GIT_AUTHOR_NAME",
            "GIT_AUTHOR_EMAIL",
            "AUTHORS_FILE",
            "SSL_CERT_FILE",
            "SSL_CERT_DIR",
            "NODE_EXTRA_CA_CERTS",
            "CARGO_HOME",
            "",
        ] {
            assert_eq!(secret_word(name.as_bytes()), None, "{name}");
        }
        for category in LOCALE_CATEGORIES {
            assert!(!looks_secret(category.as_bytes()), "{category}");
        }
    }

    #[test]
    fn an_author_word_does_not_hide_another_secret_word() {
        assert_eq!(secret_word(b"GIT_AUTHOR_TOKEN"), Some("TOKEN"));
        assert_eq!(secret_word(b"AUTHOR_AUTH"), Some("AUTH"));
    }

    #[test]
    fn non_utf8_names_are_judged_by_their_ascii_part() {
        assert!(looks_secret(&[0xff, b'K', b'E', b'Y']));
        assert!(!looks_secret(&[0xff, b'X']));
    }

    #[test]
    fn locale_names_follow_the_grammar() {
        for name in [
            "C",
            "POSIX",
            "C.UTF-8",
            "C.utf8",
            "en",
            "en_US",
            "en_US.UTF-8",
            "en_US.ISO-8859-15@euro",
            "de_DE@euro",
            "sr_RS.UTF-8@latin",
            "ast_ES.UTF-8",
            "es_419.UTF-8",
            "ja_JP.eucJP",
            "ca_ES@valencia",
        ] {
            assert!(is_locale_name(name.as_bytes()), "{name}");
        }
    }

    #[test]
    fn what_is_not_a_locale_name() {
        for value in [
            "",
            "hunter2",
            "secret",
            "e",
            "english",
            "en_USA",
            "en_U1",
            "C_US",
            "POSIX_US.UTF-8",
            "en_US.",
            "en_US@",
            "en_US.UTF 8",
            "en_US.UTF-8;rm",
            "en US",
            "/usr/lib/locale/en_US",
            "../../etc",
            "en_US.UTF-8:de",
            "en_US.AVERYLONGCODESETNAME",
            "de_DE@averylongmodifiername",
            "\u{1b}]52;c;aGk=\u{7}",
            "en_US.UTF-8\n",
        ] {
            assert!(!is_locale_name(value.as_bytes()), "{value:?}");
        }
        assert!(!is_locale_name(&[b'e', b'n', 0xff]));
    }

    #[test]
    fn locale_variables_are_lang_language_and_the_categories() {
        for name in ["LANG", "LANGUAGE", "LC_ALL", "LC_MESSAGES", "LC_TIME"] {
            assert!(is_locale_variable(name.as_bytes()), "{name}");
        }
        for name in ["LC_DB_PASS", "LC_", "LC_all", "XLC_ALL", "LANGX", "lang"] {
            assert!(!is_locale_variable(name.as_bytes()), "{name}");
        }
    }

    #[test]
    fn locale_variables_hold_locale_names_and_others_anything() {
        assert!(is_locale_value(b"LC_ALL", b"C.UTF-8"));
        assert!(is_locale_value(b"LANG", b"de_DE@euro"));
        assert!(is_locale_value(b"LC_ALL", b""));
        assert!(!is_locale_value(b"LC_ALL", b"hunter2"));
        assert!(!is_locale_value(b"LANG", b"en_US.UTF-8:de"));
        assert!(is_locale_value(b"LANGUAGE", b"de_DE:de:en"));
        assert!(is_locale_value(b"LANGUAGE", b"en"));
        assert!(!is_locale_value(b"LANGUAGE", b"de::en"));
        assert!(!is_locale_value(b"LANGUAGE", b"de:hunter2"));
        let long = vec!["en"; MAX_LANGUAGE_ENTRIES + 1].join(":");
        assert!(!is_locale_value(b"LANGUAGE", long.as_bytes()));
        let longest = vec!["en"; MAX_LANGUAGE_ENTRIES].join(":");
        assert!(is_locale_value(b"LANGUAGE", longest.as_bytes()));
        assert!(is_locale_value(b"LC_DB_PASS", b"hunter2"));
        assert!(is_locale_value(b"TERM", b"xterm-256color"));
    }
}
