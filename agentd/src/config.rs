//! agentd's configuration file.
//!
//! The file is optional: a missing file means every default. Anything it does contain must be
//! understood exactly, so unknown keys are errors rather than silently ignored: a misspelt
//! `helper.path` must not quietly fall back to some other confine-helper.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Everything the configuration file may set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// How to reach confine-helper.
    #[serde(default)]
    pub helper: HelperSection,
}

/// The `[helper]` table: which confine-helper to use.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HelperSection {
    /// The helper binary to spawn (embedded mode). A relative path is taken relative to the
    /// directory of the configuration file, so the file means the same from any working directory.
    pub path: Option<PathBuf>,
    /// The socket of a helper started on its own (service mode).
    pub socket: Option<PathBuf>,
    /// A ceiling file for the helper agentd starts (`confine-helper --fd 3 --ceiling PATH`).
    /// Relative to the file's directory, like `path`. Not for service mode: a service helper
    /// reads its own ceiling.
    pub ceiling: Option<PathBuf>,
}

/// A configuration and the file it came from (or would have come from).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadedConfig {
    /// The file consulted, whether or not it exists; `None` when neither `--config`,
    /// `$XDG_CONFIG_HOME` nor `$HOME` gives a location. Error messages name it so users know
    /// where to put a setting.
    pub path: Option<PathBuf>,
    /// The settings, with relative paths already resolved against the file's directory.
    pub config: Config,
}

/// The configuration file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the configuration file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "the configuration file {} given with --config does not exist; create it or drop --config",
        path.display()
    )]
    ExplicitMissing { path: PathBuf },
    #[error(
        "the configuration file {} is malformed: {}",
        path.display(),
        source.to_string().trim_end()
    )]
    Parse {
        path: PathBuf,
        #[source]
        source: toml::de::Error,
    },
    #[error(
        "the configuration file {} sets both helper.path and helper.socket; keep only the one \
         that says how to reach confine-helper",
        path.display()
    )]
    PathAndSocket { path: PathBuf },
    #[error(
        "the configuration file {} sets both helper.ceiling and helper.socket; a service helper \
         reads its own ceiling (`confine-helper serve --ceiling PATH`), so drop helper.ceiling",
        path.display()
    )]
    CeilingAndSocket { path: PathBuf },
}

/// Where the configuration file is looked for, as the environment says.
///
/// `--config PATH` wins; then `$XDG_CONFIG_HOME/agentd/config.toml` (only if absolute, as the XDG
/// specification requires); then `$HOME/.config/agentd/config.toml`.
pub fn config_path(
    explicit: Option<&Path>,
    xdg_config_home: Option<OsString>,
    home: Option<OsString>,
) -> Option<PathBuf> {
    if let Some(path) = explicit {
        return Some(path.to_owned());
    }
    let xdg = xdg_config_home
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute());
    if let Some(dir) = xdg {
        return Some(dir.join("agentd").join("config.toml"));
    }
    let home = home.map(PathBuf::from).filter(|dir| dir.is_absolute())?;
    Some(home.join(".config").join("agentd").join("config.toml"))
}

impl LoadedConfig {
    /// Loads the configuration for this process: `--config PATH` if given, else the XDG location.
    ///
    /// A file given explicitly must exist, because a mistyped `--config` should not silently mean
    /// "defaults"; the default location may be absent.
    pub fn load(explicit: Option<&Path>) -> Result<LoadedConfig, ConfigError> {
        let path = config_path(
            explicit,
            std::env::var_os("XDG_CONFIG_HOME"),
            std::env::var_os("HOME"),
        );
        let Some(path) = path else {
            return Ok(LoadedConfig::default());
        };
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if explicit.is_some() {
                    return Err(ConfigError::ExplicitMissing { path });
                }
                return Ok(LoadedConfig {
                    path: Some(path),
                    config: Config::default(),
                });
            }
            Err(source) => return Err(ConfigError::Read { path, source }),
        };
        Self::parse(path, &text)
    }

    /// Parses the text of the file at `path`.
    pub fn parse(path: PathBuf, text: &str) -> Result<LoadedConfig, ConfigError> {
        let mut config: Config = match toml::from_str(text) {
            Ok(config) => config,
            Err(source) => return Err(ConfigError::Parse { path, source }),
        };
        if config.helper.path.is_some() && config.helper.socket.is_some() {
            return Err(ConfigError::PathAndSocket { path });
        }
        if config.helper.ceiling.is_some() && config.helper.socket.is_some() {
            return Err(ConfigError::CeilingAndSocket { path });
        }
        let base = path.parent().unwrap_or(Path::new(""));
        for field in [
            &mut config.helper.path,
            &mut config.helper.socket,
            &mut config.helper.ceiling,
        ] {
            if let Some(value) = field.take() {
                *field = Some(base.join(value));
            }
        }
        Ok(LoadedConfig {
            path: Some(path),
            config,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<LoadedConfig, ConfigError> {
        LoadedConfig::parse(PathBuf::from("/etc/agentd/config.toml"), text)
    }

    #[test]
    fn an_empty_file_means_every_default() {
        let loaded = parse("").expect("empty file parses");
        assert_eq!(loaded.config, Config::default());
    }

    #[test]
    fn helper_path_and_socket_are_read() {
        let loaded = parse("[helper]\npath = \"/opt/confine-helper\"\n").expect("parses");
        assert_eq!(
            loaded.config.helper.path,
            Some(PathBuf::from("/opt/confine-helper"))
        );
        let loaded = parse("[helper]\nsocket = \"/run/confine/sock\"\n").expect("parses");
        assert_eq!(
            loaded.config.helper.socket,
            Some(PathBuf::from("/run/confine/sock"))
        );
    }

    #[test]
    fn relative_paths_are_taken_from_the_config_files_directory() {
        let loaded = parse("[helper]\npath = \"bin/confine-helper\"\n").expect("parses");
        assert_eq!(
            loaded.config.helper.path,
            Some(PathBuf::from("/etc/agentd/bin/confine-helper"))
        );
    }

    #[test]
    fn helper_ceiling_is_read_relative_to_the_config_files_directory() {
        let loaded = parse("[helper]\nceiling = \"ceiling.toml\"\n").expect("parses");
        assert_eq!(
            loaded.config.helper.ceiling,
            Some(PathBuf::from("/etc/agentd/ceiling.toml"))
        );
        let loaded = parse("[helper]\npath = \"/h\"\nceiling = \"/c.toml\"\n").expect("parses");
        assert_eq!(loaded.config.helper.ceiling, Some(PathBuf::from("/c.toml")));
    }

    #[test]
    fn helper_ceiling_with_a_socket_is_an_error() {
        let err = parse("[helper]\nsocket = \"/s\"\nceiling = \"/c.toml\"\n")
            .expect_err("a service helper has its own ceiling");
        assert!(matches!(err, ConfigError::CeilingAndSocket { .. }), "{err}");
        assert!(
            err.to_string().contains("confine-helper serve --ceiling"),
            "{err}"
        );
    }

    #[test]
    fn an_unknown_key_is_an_error_naming_the_file_and_line() {
        let err = parse("[helper]\npath = \"/x\"\npaht = \"/y\"\n").expect_err("typo rejected");
        let text = err.to_string();
        assert!(text.contains("/etc/agentd/config.toml"), "{text}");
        assert!(text.contains("line 3"), "{text}");
        assert!(text.contains("paht"), "{text}");
    }

    #[test]
    fn an_unknown_table_is_an_error() {
        let err = parse("[helpers]\npath = \"/x\"\n").expect_err("unknown table rejected");
        assert!(err.to_string().contains("line 1"), "{err}");
    }

    #[test]
    fn malformed_toml_is_an_error_naming_the_file_and_line() {
        let err = parse("\n\n[helper\n").expect_err("malformed");
        let text = err.to_string();
        assert!(text.contains("/etc/agentd/config.toml"), "{text}");
        assert!(text.contains("line 3"), "{text}");
    }

    #[test]
    fn a_wrongly_typed_value_is_an_error() {
        let err = parse("[helper]\npath = 3\n").expect_err("integer path rejected");
        assert!(err.to_string().contains("line 2"), "{err}");
    }

    #[test]
    fn both_path_and_socket_is_an_error() {
        let err = parse("[helper]\npath = \"/a\"\nsocket = \"/b\"\n").expect_err("ambiguous");
        assert!(matches!(err, ConfigError::PathAndSocket { .. }));
    }

    #[test]
    fn the_explicit_path_wins_over_the_environment() {
        let path = config_path(
            Some(Path::new("/tmp/c.toml")),
            Some("/xdg".into()),
            Some("/home/u".into()),
        );
        assert_eq!(path, Some(PathBuf::from("/tmp/c.toml")));
    }

    #[test]
    fn xdg_config_home_wins_over_home() {
        let path = config_path(None, Some("/xdg".into()), Some("/home/u".into()));
        assert_eq!(path, Some(PathBuf::from("/xdg/agentd/config.toml")));
    }

    #[test]
    fn a_relative_xdg_config_home_is_ignored() {
        let path = config_path(None, Some("rel".into()), Some("/home/u".into()));
        assert_eq!(
            path,
            Some(PathBuf::from("/home/u/.config/agentd/config.toml"))
        );
    }

    #[test]
    fn no_location_without_home_or_xdg() {
        assert_eq!(config_path(None, None, None), None);
    }

    #[test]
    fn an_explicit_config_that_does_not_exist_is_an_error() {
        let missing = Path::new("/nonexistent-agentd-dir/config.toml");
        let err = LoadedConfig::load(Some(missing)).expect_err("missing explicit file");
        assert!(matches!(err, ConfigError::ExplicitMissing { .. }), "{err}");
    }
}
