//! Paths as the Seatbelt profile writes them: checked, quoted, and for the deny rules as a
//! regex that matches every spelling the volume takes for the same path.

use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// Why no profile can say what was asked; nothing is run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ProfileError {
    #[error(
        "{what} {path} is not valid UTF-8, and a Seatbelt profile names paths as UTF-8 text; \
         nothing was run: rename it, or leave it out of the policy"
    )]
    NotUtf8 { what: &'static str, path: String },
    #[error(
        "{what} {path} holds a control character (a newline, a tab, NUL, ...), which the helper \
         never writes into a Seatbelt profile; nothing was run: rename it, or leave it out of \
         the policy"
    )]
    Control { what: &'static str, path: String },
    #[error(
        "{what} {path} is not a plain absolute path (it must start with /, without ., .., an \
         empty component or a trailing /); nothing was run"
    )]
    NotPlain { what: &'static str, path: String },
    #[error("danger-full-access runs without a sandbox: it has no Seatbelt profile")]
    Unconfined,
}

/// `path`'s text, checked: UTF-8 (the profile is text), no control character (NUL would cut the
/// string where the sandbox reads it; no path a request may name needs one, and the rest are
/// refused with it so the profile stays one rule per line), and plain (a name Seatbelt would
/// match as written).
pub(super) fn checked_text<'p>(
    path: &'p Path,
    what: &'static str,
) -> Result<&'p str, ProfileError> {
    let Some(text) = path.to_str() else {
        return Err(ProfileError::NotUtf8 {
            what,
            path: String::from_utf8_lossy(path.as_os_str().as_bytes()).into_owned(),
        });
    };
    if text.chars().any(char::is_control) {
        return Err(ProfileError::Control {
            what,
            path: text.escape_debug().to_string(),
        });
    }
    // Compared as bytes: `Path`'s own equality ignores `.`, repeated and trailing slashes.
    let plain = path.is_absolute()
        && path.components().collect::<PathBuf>().as_os_str() == path.as_os_str()
        && path
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    if !plain {
        return Err(ProfileError::NotPlain {
            what,
            path: text.to_owned(),
        });
    }
    Ok(text)
}

/// `text` as an SBPL string literal: quoted, `\` and `"` escaped.
pub(super) fn string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        if matches!(c, '\\' | '"') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// `path` as an SBPL string literal, refused as [`checked_text`] says.
pub(super) fn quoted(path: &Path, what: &'static str) -> Result<String, ProfileError> {
    checked_text(path, what).map(string)
}

/// The Data volume's mount point: since macOS 10.15 `/Users/dev` is also
/// `/System/Volumes/Data/Users/dev` (a firmlink), a second spelling of the same file.
pub(super) const DATA_VOLUME: &str = "/System/Volumes/Data";

/// How far a [`any_case`] regex reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reach {
    /// The path alone.
    Itself,
    /// The path and everything beneath it.
    Beneath,
}

/// `text` written into a regex so that it matches whatever the case of its letters: APFS and
/// HFS+ are case-insensitive by default, so `.GIT` is `.git` there. An ASCII letter becomes a
/// class (`[gG]`), another letter with one other case a group (`(é|É)`); the regex's own
/// characters are escaped, everything else stands for itself.
pub(super) fn fold_case(text: &str, out: &mut String) {
    for c in text.chars() {
        if c.is_ascii_alphabetic() {
            out.push('[');
            out.push(c.to_ascii_lowercase());
            out.push(c.to_ascii_uppercase());
            out.push(']');
            continue;
        }
        if "\\.^$*+?()[]{}|".contains(c) {
            out.push('\\');
            out.push(c);
            continue;
        }
        let mut lower = c.to_lowercase();
        let mut upper = c.to_uppercase();
        let other = match (lower.next(), lower.next(), upper.next(), upper.next()) {
            (Some(l), None, Some(u), None) if l != u => Some(if l == c { u } else { l }),
            _ => None,
        };
        match other {
            Some(other) => {
                out.push('(');
                out.push(c);
                out.push('|');
                out.push(other);
                out.push(')');
            }
            None => out.push(c),
        }
    }
}

/// `path` as an SBPL `(regex "...")` filter that matches it in any case of its letters, also
/// spelled under [`DATA_VOLUME`]; with [`Reach::Beneath`] everything beneath it too.
pub(super) fn any_case(
    path: &Path,
    what: &'static str,
    reach: Reach,
) -> Result<String, ProfileError> {
    let text = checked_text(path, what)?;
    let mut re = String::from("^");
    if !text
        .to_ascii_lowercase()
        .starts_with(&DATA_VOLUME.to_ascii_lowercase())
    {
        re.push('(');
        fold_case(DATA_VOLUME, &mut re);
        re.push_str(")?");
    }
    // `/` alone: every path is beneath it.
    let body = if text == "/" { "" } else { text };
    fold_case(body, &mut re);
    re.push_str(match reach {
        Reach::Itself if body.is_empty() => "/$",
        Reach::Itself => "$",
        Reach::Beneath => "(/.*)?$",
    });
    Ok(format!("(regex {})", string(&re)))
}
