//! The sandbox profile's keys of `[sandbox]`: `writable_roots`, `cache` and `protected`, as
//! the file gives them ([`ProfileSection`]), and what they resolve to once the environment is
//! known ([`resolve`]): the `~` of a root taken from `$HOME`, each cache preset's directories
//! ([`super::cache`]).
//!
//! ```toml
//! [sandbox]
//! writable_roots = ["~/scratch", "/srv/data"]   # absolute, or from the home directory
//! cache = ["pip", "cargo"]                      # pip | npm | cargo | go
//! protected = ["secrets", "deploy/keys"]        # read-only inside every writable root
//! ```
//!
//! All three apply in workspace-write only (read-only stays read-only, danger-full-access needs
//! none). A project may add protected paths in its own `.agentd/config.toml` ([`super::project`]).
//!
//! `lift_deny_read` names built-in denied reads ([`credentials`]) to let commands read: each
//! must be one exactly, checked when the file is read.
//!
//! `unix_sockets` names the Unix sockets a confined command may connect to, in the forms of
//! `writable_roots` (and `~` expanded the same way, [`expand_home`]), but kept as written
//! otherwise: a program connects by name, and the helper resolves and checks the names itself.

use std::fmt;
use std::path::{Component, Path, PathBuf};

use toml::Spanned;

use super::cache::{self, CachePreset, ResolvedCache};
use super::checks::line_at;
use super::{ConfigError, Env};
use crate::credentials;
use crate::deny_read::{self, DenyRead, EntryError};
use crate::words::allowed;

/// A list of `[sandbox]` as the file writes it.
pub(super) type RawList = Option<Spanned<Vec<Spanned<String>>>>;

/// A value of the file and the line it is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lined<T> {
    pub value: T,
    pub line: usize,
}

/// Which file a value came from, as messages name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// agentd's configuration file.
    Config,
    /// A project's `.agentd/config.toml`.
    Project,
}

impl fmt::Display for FileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileKind::Config => "the configuration file",
            FileKind::Project => "the project file",
        })
    }
}

/// The profile's keys of `[sandbox]` as the file writes them.
pub(super) struct RawProfile {
    pub(super) writable_roots: RawList,
    pub(super) cache: RawList,
    pub(super) protected: RawList,
    pub(super) local_binding: Option<bool>,
    pub(super) deny_read: RawList,
    pub(super) lift_deny_read: RawList,
    pub(super) unix_sockets: RawList,
}

/// The profile's keys of `[sandbox]`, checked as far as the file alone allows; `None` where
/// the file does not set them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProfileSection {
    /// As written: absolute, `~` or `~/…` (expanded by [`resolve`]).
    pub writable_roots: Option<Vec<Lined<String>>>,
    pub cache: Option<Vec<Lined<CachePreset>>>,
    /// Relative subpaths, each component a plain name.
    pub protected: Option<Vec<PathBuf>>,
    /// Loopback sockets inside the sandbox's own network namespace.
    pub local_binding: Option<bool>,
    /// As written: absolute, `~/…` or `**/…` (checked; `~` expanded by [`resolve`]).
    pub deny_read: Option<Vec<Lined<String>>>,
    /// Built-in denied reads lifted, each named exactly as [`credentials::built_in`] lists it.
    pub lift_deny_read: Option<Vec<Lined<String>>>,
    /// As written: absolute, `~` or `~/…`, without NUL (`~` expanded by [`resolve`]).
    pub unix_sockets: Option<Vec<Lined<String>>>,
}

/// Why a `unix_sockets` entry is not one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SocketEntryError {
    #[error("is not an absolute path, `~` or `~/…`")]
    NotAbsolute,
    #[error("contains a NUL byte, which no path can")]
    Nul,
}

/// Whether `value` is written in a form [`expand_home`] takes: absolute, `~` or `~/…`.
pub fn absolute_or_home(value: &str) -> bool {
    value == "~" || value.starts_with("~/") || Path::new(value).is_absolute()
}

/// `value`, of a form [`absolute_or_home`] accepts, with a leading `~` taken from `home`;
/// `None` when that does not give an absolute path (no home, or a relative one).
pub fn expand_home(value: &str, home: Option<&Path>) -> Option<PathBuf> {
    let expanded = match value.strip_prefix('~') {
        // `~` alone is the home directory as HOME writes it, not with a `/` joined on.
        Some("") => home.map(Path::to_path_buf),
        Some(rest) => home.map(|home| home.join(rest.trim_start_matches('/'))),
        None => Some(PathBuf::from(value)),
    };
    expanded.filter(|path| path.is_absolute())
}

impl ProfileSection {
    /// Checks the three lists of the file at `path` whose text is `text`.
    pub(super) fn parse(
        raw: RawProfile,
        path: &Path,
        text: &str,
    ) -> Result<ProfileSection, ConfigError> {
        let RawProfile {
            writable_roots,
            cache,
            protected,
            local_binding,
            deny_read,
            lift_deny_read,
            unix_sockets,
        } = raw;
        let writable_roots = lined(writable_roots, text);
        check_roots(writable_roots.iter().flatten(), path)?;
        let cache = match lined(cache, text) {
            None => None,
            Some(words) => Some(cache_presets(words, path)?),
        };
        let protected = match lined(protected, text) {
            None => None,
            Some(list) => Some(subpaths(list, path, FileKind::Config)?),
        };
        let deny_read = lined(deny_read, text);
        check_deny_read(deny_read.iter().flatten(), path)?;
        let lift_deny_read = lined(lift_deny_read, text);
        check_lift_deny_read(lift_deny_read.iter().flatten(), path)?;
        let unix_sockets = lined(unix_sockets, text);
        check_unix_sockets(unix_sockets.iter().flatten(), path)?;
        Ok(ProfileSection {
            writable_roots,
            cache,
            protected,
            local_binding,
            deny_read,
            lift_deny_read,
            unix_sockets,
        })
    }
}

/// The entries of `list`, each with its line in `text`; `None` when the file does not set it.
fn lined(list: RawList, text: &str) -> Option<Vec<Lined<String>>> {
    list.map(|list| {
        list.into_inner()
            .into_iter()
            .map(|entry| Lined {
                line: line_at(text, entry.span().start),
                value: entry.into_inner(),
            })
            .collect::<Vec<_>>()
    })
}

/// `sandbox.writable_roots`: every root absolute or under `~`.
fn check_roots<'a>(
    roots: impl Iterator<Item = &'a Lined<String>>,
    path: &Path,
) -> Result<(), ConfigError> {
    for root in roots {
        let v = &root.value;
        if !absolute_or_home(v) {
            return Err(ConfigError::RootNotAbsolute {
                path: path.to_owned(),
                line: root.line,
                value: v.clone(),
            });
        }
    }
    Ok(())
}

/// `sandbox.cache`: the presets `words` name, each once, in the order first named.
fn cache_presets(
    words: Vec<Lined<String>>,
    path: &Path,
) -> Result<Vec<Lined<CachePreset>>, ConfigError> {
    let mut presets: Vec<Lined<CachePreset>> = Vec::new();
    for word in words {
        let preset =
            word.value
                .parse::<CachePreset>()
                .map_err(|unknown| ConfigError::NotAllowed {
                    path: path.to_owned(),
                    line: word.line,
                    key: "sandbox.cache",
                    value: word.value.clone(),
                    allowed: allowed(unknown.expected),
                })?;
        if !presets.iter().any(|p| p.value == preset) {
            presets.push(Lined {
                value: preset,
                line: word.line,
            });
        }
    }
    Ok(presets)
}

/// `sandbox.deny_read`: every entry of a shape a denied read takes.
fn check_deny_read<'a>(
    entries: impl Iterator<Item = &'a Lined<String>>,
    path: &Path,
) -> Result<(), ConfigError> {
    for entry in entries {
        // The shape now; `~` once HOME is known.
        if let Err(reason) = deny_read::parse(&entry.value, Some(Path::new("/"))) {
            return Err(deny_read_error(path, entry, reason));
        }
    }
    Ok(())
}

/// `sandbox.lift_deny_read`: every entry the name of a built-in denied read.
fn check_lift_deny_read<'a>(
    entries: impl Iterator<Item = &'a Lined<String>>,
    path: &Path,
) -> Result<(), ConfigError> {
    for entry in entries {
        if credentials::named(&entry.value).is_none() {
            return Err(ConfigError::LiftDenyRead {
                path: path.to_owned(),
                line: entry.line,
                value: entry.value.clone(),
                known: credentials::names(),
            });
        }
    }
    Ok(())
}

/// `sandbox.unix_sockets`: every entry absolute or under `~`, without a NUL.
fn check_unix_sockets<'a>(
    entries: impl Iterator<Item = &'a Lined<String>>,
    path: &Path,
) -> Result<(), ConfigError> {
    for entry in entries {
        let reason = if entry.value.contains('\0') {
            SocketEntryError::Nul
        } else if !absolute_or_home(&entry.value) {
            SocketEntryError::NotAbsolute
        } else {
            continue;
        };
        return Err(ConfigError::UnixSocket {
            path: path.to_owned(),
            line: entry.line,
            value: entry.value.clone(),
            reason,
        });
    }
    Ok(())
}

/// Each of `list` as a relative subpath (`secrets`, `deploy/keys`), each once; an absolute
/// path, a `..` or `.` component, or an empty one is the error naming `path` (a `kind` file).
pub(super) fn subpaths(
    list: Vec<Lined<String>>,
    path: &Path,
    kind: FileKind,
) -> Result<Vec<PathBuf>, ConfigError> {
    let mut out: Vec<PathBuf> = Vec::new();
    for entry in list {
        let given = Path::new(&entry.value);
        let plain = given
            .components()
            .all(|part| matches!(part, Component::Normal(_)));
        if entry.value.is_empty() || !plain || entry.value.split('/').any(|p| p == ".") {
            return Err(ConfigError::NotASubpath {
                kind,
                path: path.to_owned(),
                line: entry.line,
                value: entry.value,
            });
        }
        let normal: PathBuf = given.components().collect();
        if !out.contains(&normal) {
            out.push(normal);
        }
    }
    Ok(out)
}

fn deny_read_error(path: &Path, entry: &Lined<String>, reason: EntryError) -> ConfigError {
    ConfigError::DenyRead {
        path: path.to_owned(),
        line: entry.line,
        value: entry.value.clone(),
        reason,
    }
}

/// What the profile's keys say once the environment is known.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolvedProfile {
    pub writable_roots: Vec<PathBuf>,
    pub cache: Vec<ResolvedCache>,
    pub protected: Vec<PathBuf>,
    pub deny_read: Vec<DenyRead>,
    /// The line of each of `deny_read`, in order.
    pub deny_read_lines: Vec<usize>,
    /// `~` expanded, otherwise as written.
    pub unix_sockets: Vec<PathBuf>,
}

/// Expands the roots' and the sockets' `~` from `$HOME` and resolves the cache presets, from the
/// environment `env`; errors name the file `path` and the entry's line.
pub(super) fn resolve(
    section: &ProfileSection,
    path: &Path,
    env: Env<'_>,
) -> Result<ResolvedProfile, ConfigError> {
    let home = env("HOME").filter(|home| !home.is_empty());
    let needs_home = |key, what, entry: &Lined<String>| ConfigError::NeedsHome {
        path: path.to_owned(),
        line: entry.line,
        key,
        what,
        value: entry.value.clone(),
        home: home.as_ref().map(|h| h.to_string_lossy().into_owned()),
    };
    let home_dir = home.as_deref().map(Path::new);
    let mut writable_roots: Vec<PathBuf> = Vec::new();
    for root in section.writable_roots.iter().flatten() {
        let Some(dir) = expand_home(&root.value, home_dir) else {
            return Err(needs_home("writable_roots", "root", root));
        };
        let dir: PathBuf = dir.components().collect();
        if !writable_roots.contains(&dir) {
            writable_roots.push(dir);
        }
    }
    let mut cache = Vec::new();
    for preset in section.cache.iter().flatten() {
        let dirs = cache::resolve(preset.value, env).map_err(|source| ConfigError::Cache {
            path: path.to_owned(),
            line: preset.line,
            preset: preset.value.as_str(),
            source,
        })?;
        cache.push(ResolvedCache {
            preset: preset.value,
            dirs,
        });
    }
    let mut deny_read: Vec<DenyRead> = Vec::new();
    let mut deny_read_lines: Vec<usize> = Vec::new();
    for entry in section.deny_read.iter().flatten() {
        let denied = deny_read::parse(&entry.value, home_dir)
            .map_err(|reason| deny_read_error(path, entry, reason))?;
        if !deny_read.contains(&denied) {
            deny_read.push(denied);
            deny_read_lines.push(entry.line);
        }
    }
    let mut unix_sockets: Vec<PathBuf> = Vec::new();
    for entry in section.unix_sockets.iter().flatten() {
        let Some(socket) = expand_home(&entry.value, home_dir) else {
            return Err(needs_home("unix_sockets", "socket", entry));
        };
        if !unix_sockets.contains(&socket) {
            unix_sockets.push(socket);
        }
    }
    Ok(ResolvedProfile {
        writable_roots,
        cache,
        protected: section.protected.clone().unwrap_or_default(),
        deny_read,
        deny_read_lines,
        unix_sockets,
    })
}

#[cfg(test)]
#[path = "sandbox_tests.rs"]
mod tests;
