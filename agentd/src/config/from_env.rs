//! The values the environment gives the effective configuration: `AGENTD_*` variables read as
//! strings, paths and words, the default state directory, the home directory of the built-in
//! denied reads, and relative paths made absolute against where they came from.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use confine_protocol::UnknownWord;

use super::file::absolute_dir;
use super::{ConfigError, Env, Source};
use crate::words::allowed;

/// The home directory the built-in denied reads are taken from: `$HOME`, as `~` is everywhere
/// in the configuration, when it is absolute; else the user's entry in the password database,
/// so that an unset `HOME` does not leave the user's credentials readable.
pub(super) fn credentials_home(env: Env<'_>) -> Option<PathBuf> {
    let home = env("HOME").map(PathBuf::from).filter(|h| h.is_absolute());
    home.or_else(|| {
        nix::unistd::User::from_uid(nix::unistd::getuid())
            .ok()
            .flatten()
            .map(|user| user.dir)
            .filter(|dir| dir.is_absolute())
    })
}

/// Where session logs go by default: `$XDG_STATE_HOME/agentd/sessions` (only if absolute), else
/// `$HOME/.local/state/agentd/sessions`.
pub fn default_state_dir(
    xdg_state_home: Option<OsString>,
    home: Option<OsString>,
) -> Option<PathBuf> {
    if let Some(dir) = absolute_dir(xdg_state_home) {
        return Some(dir.join("agentd").join("sessions"));
    }
    let home = absolute_dir(home)?;
    Some(
        home.join(".local")
            .join("state")
            .join("agentd")
            .join("sessions"),
    )
}

/// The value of `var`, or `None` when unset or empty.
pub(super) fn env_string(env: Env<'_>, var: &'static str) -> Result<Option<String>, ConfigError> {
    match env(var) {
        None => Ok(None),
        Some(value) if value.is_empty() => Ok(None),
        Some(value) => value
            .into_string()
            .map(Some)
            .map_err(|_| ConfigError::EnvNotUnicode { var }),
    }
}

pub(super) fn env_path(env: Env<'_>, var: &'static str) -> Result<Option<PathBuf>, ConfigError> {
    Ok(env(var)
        .filter(|value| !value.is_empty())
        .map(PathBuf::from))
}

pub(super) fn env_word<T: FromStr<Err = UnknownWord>>(
    env: Env<'_>,
    var: &'static str,
) -> Result<Option<T>, ConfigError> {
    let Some(value) = env_string(env, var)? else {
        return Ok(None);
    };
    match value.parse() {
        Ok(word) => Ok(Some(word)),
        Err(unknown) => Err(ConfigError::EnvNotAllowed {
            var,
            value,
            allowed: allowed(unknown.expected),
        }),
    }
}

pub(super) fn absolute(path: &Path, origin: &Source) -> Result<PathBuf, ConfigError> {
    std::path::absolute(path).map_err(|source| ConfigError::Absolute {
        path: path.to_owned(),
        origin: origin.clone(),
        source,
    })
}
