//! The cache presets of `[sandbox] cache`: each names a tool whose cache directories the
//! commands of a session may write in workspace-write mode, found where the tool itself looks,
//! from the environment of the user agentd runs as. [`resolve`] is a pure function of that
//! environment.
//!
//! | preset | directories |
//! |---|---|
//! | `pip` | `$PIP_CACHE_DIR`, else `$XDG_CACHE_HOME/pip`, else `~/.cache/pip` |
//! | `npm` | `$npm_config_cache` (or `$NPM_CONFIG_CACHE`), else `~/.npm` |
//! | `cargo` | `$CARGO_HOME/registry` and `$CARGO_HOME/git` (`CARGO_HOME` default `~/.cargo`) |
//! | `go` | `$GOMODCACHE`, else `$GOPATH/pkg/mod` (the first entry of `GOPATH`, default `~/go`); and `$GOCACHE` (none when `off`), else `$XDG_CACHE_HOME/go-build`, else `~/.cache/go-build` |
//!
//! Never `~/.cargo` itself nor `~/.cargo/bin`, nor `$GOPATH/bin`: a command that could write
//! there could plant programs the user later runs unconfined. An empty variable counts as unset;
//! a relative `XDG_CACHE_HOME` is ignored, as the XDG specification says. pip and npm expand a
//! leading `~/` in their variables, as they do themselves; every other value must be absolute.
//! The tools' own configuration files (`pip.conf`, `.npmrc`, cargo's `config.toml`, `go env
//! -w`) are not read.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use super::Env;

/// A tool whose caches `[sandbox] cache` may make writable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CachePreset {
    Pip,
    Npm,
    Cargo,
    Go,
}

confine_protocol::vocabulary!(CachePreset, "cache preset", CACHE_PRESET_WORDS, [
    Pip => "pip",
    Npm => "npm",
    Cargo => "cargo",
    Go => "go",
]);

/// One directory a preset resolved to, and the rule that gave it (`$PIP_CACHE_DIR`,
/// `$XDG_CACHE_HOME/pip`, `~/.cache/pip`, …), which `config show` prints beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheDirRule {
    pub path: PathBuf,
    pub rule: &'static str,
}

/// A preset and the directories it resolved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedCache {
    pub preset: CachePreset,
    pub dirs: Vec<CacheDirRule>,
}

/// Why a preset's directories cannot be found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CacheError {
    /// A variable that names a directory holds a relative path.
    #[error("{var}={} is not an absolute path; make it absolute or unset it", value.display())]
    Relative { var: &'static str, value: PathBuf },
    /// The default lies in the home directory, and `HOME` is not set (or not absolute).
    #[error(
        "its directory would be {default}, but HOME is not set to an absolute path; set HOME, \
         or set {instead}"
    )]
    NoHome {
        default: &'static str,
        instead: &'static str,
    },
}

/// The directories of `preset`, as the tool finds them in the environment `env`.
pub fn resolve(preset: CachePreset, env: Env<'_>) -> Result<Vec<CacheDirRule>, CacheError> {
    let look = Look { env };
    match preset {
        CachePreset::Pip => {
            let dir = match look.expanded("PIP_CACHE_DIR")? {
                Some(dir) => rule(dir, "$PIP_CACHE_DIR"),
                None => match look.xdg_cache() {
                    Some(cache) => rule(cache.join("pip"), "$XDG_CACHE_HOME/pip"),
                    None => rule(
                        look.home("~/.cache/pip", "PIP_CACHE_DIR or XDG_CACHE_HOME")?
                            .join(".cache/pip"),
                        "~/.cache/pip",
                    ),
                },
            };
            Ok(vec![dir])
        }
        CachePreset::Npm => {
            let dir = match look.expanded("npm_config_cache")? {
                Some(dir) => rule(dir, "$npm_config_cache"),
                None => match look.expanded("NPM_CONFIG_CACHE")? {
                    Some(dir) => rule(dir, "$NPM_CONFIG_CACHE"),
                    None => rule(
                        look.home("~/.npm", "npm_config_cache")?.join(".npm"),
                        "~/.npm",
                    ),
                },
            };
            Ok(vec![dir])
        }
        CachePreset::Cargo => {
            let (home, registry, git) = match look.absolute("CARGO_HOME")? {
                Some(home) => (home, "$CARGO_HOME/registry", "$CARGO_HOME/git"),
                None => (
                    look.home("~/.cargo/registry", "CARGO_HOME")?.join(".cargo"),
                    "~/.cargo/registry",
                    "~/.cargo/git",
                ),
            };
            Ok(vec![
                rule(home.join("registry"), registry),
                rule(home.join("git"), git),
            ])
        }
        CachePreset::Go => {
            let modules = match look.absolute("GOMODCACHE")? {
                Some(dir) => rule(dir, "$GOMODCACHE"),
                None => match look.first_gopath()? {
                    Some(gopath) => rule(gopath.join("pkg/mod"), "$GOPATH/pkg/mod"),
                    None => rule(
                        look.home("~/go/pkg/mod", "GOMODCACHE or GOPATH")?
                            .join("go/pkg/mod"),
                        "~/go/pkg/mod",
                    ),
                },
            };
            let mut dirs = vec![modules];
            let off = look.value("GOCACHE").is_some_and(|v| v == "off");
            if !off {
                let build = match look.absolute("GOCACHE")? {
                    Some(dir) => rule(dir, "$GOCACHE"),
                    None => match look.xdg_cache() {
                        Some(cache) => rule(cache.join("go-build"), "$XDG_CACHE_HOME/go-build"),
                        None => rule(
                            look.home("~/.cache/go-build", "GOCACHE or XDG_CACHE_HOME")?
                                .join(".cache/go-build"),
                            "~/.cache/go-build",
                        ),
                    },
                };
                dirs.push(build);
            }
            Ok(dirs)
        }
    }
}

fn rule(path: PathBuf, rule: &'static str) -> CacheDirRule {
    CacheDirRule { path, rule }
}

/// Reads the variables a preset follows.
struct Look<'a> {
    env: Env<'a>,
}

impl Look<'_> {
    /// The value of `var`, or `None` when unset or empty.
    fn value(&self, var: &str) -> Option<OsString> {
        (self.env)(var).filter(|value| !value.is_empty())
    }

    /// `$HOME`, when absolute; else the error naming the default `default` and what to set
    /// instead.
    fn home(&self, default: &'static str, instead: &'static str) -> Result<PathBuf, CacheError> {
        self.value("HOME")
            .map(PathBuf::from)
            .filter(|home| home.is_absolute())
            .ok_or(CacheError::NoHome { default, instead })
    }

    /// `$XDG_CACHE_HOME`, when absolute.
    fn xdg_cache(&self) -> Option<PathBuf> {
        self.value("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .filter(|dir| dir.is_absolute())
    }

    /// `var` as a directory, which must be absolute.
    fn absolute(&self, var: &'static str) -> Result<Option<PathBuf>, CacheError> {
        match self.value(var).map(PathBuf::from) {
            None => Ok(None),
            Some(dir) if dir.is_absolute() => Ok(Some(dir)),
            Some(value) => Err(CacheError::Relative { var, value }),
        }
    }

    /// `var` as a directory with a leading `~/` (or a lone `~`) taken from `$HOME`, as pip and
    /// npm read it; then it must be absolute.
    fn expanded(&self, var: &'static str) -> Result<Option<PathBuf>, CacheError> {
        let Some(value) = self.value(var) else {
            return Ok(None);
        };
        let bytes = value.as_bytes();
        let home = || self.value("HOME").map(PathBuf::from);
        let dir = match bytes {
            b"~" => home(),
            [b'~', b'/', rest @ ..] => home().map(|h| h.join(std::ffi::OsStr::from_bytes(rest))),
            _ => Some(PathBuf::from(&value)),
        };
        match dir {
            Some(dir) if dir.is_absolute() => Ok(Some(dir)),
            _ => Err(CacheError::Relative {
                var,
                value: PathBuf::from(value),
            }),
        }
    }

    /// The first entry of `$GOPATH` (where Go keeps its module cache), which must be absolute.
    fn first_gopath(&self) -> Result<Option<PathBuf>, CacheError> {
        let Some(value) = self.value("GOPATH") else {
            return Ok(None);
        };
        match std::env::split_paths(&value).next() {
            Some(first) if first.is_absolute() => Ok(Some(first)),
            _ => Err(CacheError::Relative {
                var: "GOPATH",
                value: PathBuf::from(value),
            }),
        }
    }
}

#[cfg(test)]
#[path = "cache_tests.rs"]
mod tests;
