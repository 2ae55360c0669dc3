//! Finding the confine-helper binary for embedded mode.
//!
//! The order is fixed and explicit choices are final: a `--helper`, `$AGENTD_HELPER` or
//! `helper.path` that does not point at an executable is an error, never a reason to go looking elsewhere, because running a
//! different helper than the one the user named would be a silent change of what confines their
//! commands. Only the implicit places (next to agentd, then `PATH`) are searched.

use std::fmt;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The helper binary's file name.
pub const HELPER_NAME: &str = "confine-helper";

/// What the search may consult. Built from the process with [`LocateInputs::from_process`];
/// tests build it by hand.
#[derive(Debug, Clone, Default)]
pub struct LocateInputs {
    /// `--helper PATH`.
    pub flag: Option<PathBuf>,
    /// `$AGENTD_HELPER`, already made absolute.
    pub env_value: Option<PathBuf>,
    /// `helper.path` from the configuration file, already resolved against the file's directory.
    pub config_value: Option<PathBuf>,
    /// The configuration file consulted (named in the advice on how to fix a failed search).
    pub config_file: Option<PathBuf>,
    /// The directory of agentd's own executable.
    pub exe_dir: Option<PathBuf>,
    /// The value of `PATH`.
    pub path_var: Option<std::ffi::OsString>,
}

/// The directory of agentd's own executable.
pub fn agentd_dir() -> Option<PathBuf> {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_owned))
}

/// Where a candidate came from; named in messages so users know which setting to change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// `--helper PATH`.
    Flag,
    /// `$AGENTD_HELPER`.
    Env,
    /// `helper.path` in the configuration file.
    Config,
    /// Beside agentd's own executable.
    NextToAgentd,
    /// A directory of `PATH`.
    PathVar,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Origin::Flag => "--helper",
            Origin::Env => "$AGENTD_HELPER",
            Origin::Config => "helper.path in the configuration file",
            Origin::NextToAgentd => "next to agentd",
            Origin::PathVar => "PATH",
        })
    }
}

/// One place the search consulted, in the order it did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Looked {
    pub origin: Origin,
    /// The path tried, or `None` when the setting was not given.
    pub path: Option<PathBuf>,
}

/// confine-helper could not be found or is not usable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocateError {
    /// Nothing was found anywhere.
    NotFound {
        looked: Vec<Looked>,
        config_file: Option<PathBuf>,
    },
    /// A path given explicitly does not exist.
    Missing { origin: Origin, path: PathBuf },
    /// Something is there but it is not an executable regular file.
    NotExecutable { origin: Origin, path: PathBuf },
}

impl std::error::Error for LocateError {}

impl fmt::Display for LocateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LocateError::NotFound {
                looked,
                config_file,
            } => {
                writeln!(f, "{HELPER_NAME} was not found; looked, in order, at:")?;
                for place in looked {
                    match &place.path {
                        Some(path) => writeln!(f, "  {}: {}", place.origin, path.display())?,
                        None => writeln!(f, "  {}: not set", place.origin)?,
                    }
                }
                let config = match config_file {
                    Some(path) => format!("set `helper.path` in {}", path.display()),
                    None => {
                        "set `helper.path` in a configuration file given with --config".to_owned()
                    }
                };
                write!(
                    f,
                    "To fix this, pass --helper PATH, set AGENTD_HELPER, {config}, or install it \
                     with `cargo install --path confine-helper`."
                )
            }
            LocateError::Missing { origin, path } => write!(
                f,
                "{HELPER_NAME} given by {origin} does not exist: {}; point it at the \
                 {HELPER_NAME} binary",
                path.display()
            ),
            LocateError::NotExecutable { origin, path } => write!(
                f,
                "{} (found via {origin}) is not an executable regular file; point --helper or \
                 helper.path at the {HELPER_NAME} binary, or fix its permissions",
                path.display()
            ),
        }
    }
}

/// Finds confine-helper: `--helper`, then `$AGENTD_HELPER`, then the configuration file, then
/// next to agentd, then each absolute directory of `PATH`.
pub fn locate_helper(inputs: &LocateInputs) -> Result<PathBuf, LocateError> {
    if let Some(path) = &inputs.flag {
        return check_explicit(Origin::Flag, path);
    }
    if let Some(path) = &inputs.env_value {
        return check_explicit(Origin::Env, path);
    }
    if let Some(path) = &inputs.config_value {
        return check_explicit(Origin::Config, path);
    }
    let mut looked = vec![
        Looked {
            origin: Origin::Flag,
            path: None,
        },
        Looked {
            origin: Origin::Env,
            path: None,
        },
        Looked {
            origin: Origin::Config,
            path: None,
        },
    ];
    let beside = inputs.exe_dir.iter().map(|dir| (Origin::NextToAgentd, dir));
    // Empty and relative PATH entries mean "the current directory", which would let whatever
    // directory agentd happens to run in supply the program that confines commands.
    let path_dirs: Vec<PathBuf> = inputs
        .path_var
        .as_deref()
        .map(|value| std::env::split_paths(value).collect())
        .unwrap_or_default();
    let on_path = path_dirs
        .iter()
        .filter(|dir| dir.is_absolute())
        .map(|dir| (Origin::PathVar, dir));
    for (origin, dir) in beside.chain(on_path) {
        let candidate = dir.join(HELPER_NAME);
        match probe(&candidate) {
            Probe::Absent => looked.push(Looked {
                origin,
                path: Some(candidate),
            }),
            Probe::Executable => return Ok(candidate),
            Probe::NotExecutable => {
                return Err(LocateError::NotExecutable {
                    origin,
                    path: candidate,
                });
            }
        }
    }
    Err(LocateError::NotFound {
        looked,
        config_file: inputs.config_file.clone(),
    })
}

fn check_explicit(origin: Origin, path: &Path) -> Result<PathBuf, LocateError> {
    match probe(path) {
        // Absolute, because the helper is started with an empty environment: a bare name would
        // otherwise be looked up on a PATH that no longer exists.
        Probe::Executable => Ok(std::path::absolute(path).unwrap_or_else(|_| path.to_owned())),
        Probe::Absent => Err(LocateError::Missing {
            origin,
            path: path.to_owned(),
        }),
        Probe::NotExecutable => Err(LocateError::NotExecutable {
            origin,
            path: path.to_owned(),
        }),
    }
}

/// What is at a path where a program is looked for.
pub(super) enum Probe {
    Absent,
    Executable,
    NotExecutable,
}

pub(super) fn probe(path: &Path) -> Probe {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() && meta.permissions().mode() & 0o111 != 0 => Probe::Executable,
        Ok(_) => Probe::NotExecutable,
        Err(e) if e.kind() == io::ErrorKind::NotFound => Probe::Absent,
        // A component that is not a directory, or a directory we may not search, hides nothing
        // runnable either.
        Err(_) => Probe::Absent,
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;
    use std::fs;

    use super::*;
    use crate::test_support::Scratch;

    fn join_path_var<I: IntoIterator<Item = P>, P: AsRef<OsStr>>(dirs: I) -> std::ffi::OsString {
        std::env::join_paths(dirs).expect("test directories contain no separator")
    }

    fn helper_in(scratch: &Scratch, name: &str, mode: u32) -> PathBuf {
        let path = scratch.dir(name).join(HELPER_NAME);
        fs::write(&path, b"#!/bin/sh\n").expect("write helper");
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).expect("chmod");
        path
    }

    #[test]
    fn the_flag_wins_over_everything_else() {
        let s = Scratch::new("locate-flag");
        let flag = helper_in(&s, "flag", 0o755);
        let config = helper_in(&s, "config", 0o755);
        let beside = helper_in(&s, "beside", 0o755);
        let inputs = LocateInputs {
            flag: Some(flag.clone()),
            config_value: Some(config),
            exe_dir: beside.parent().map(Path::to_owned),
            ..LocateInputs::default()
        };
        assert_eq!(locate_helper(&inputs), Ok(flag));
    }

    #[test]
    fn the_environment_wins_over_the_config_value_and_loses_to_the_flag() {
        let s = Scratch::new("locate-env");
        let flag = helper_in(&s, "flag", 0o755);
        let env = helper_in(&s, "env", 0o755);
        let config = helper_in(&s, "config", 0o755);
        let mut inputs = LocateInputs {
            env_value: Some(env.clone()),
            config_value: Some(config),
            ..LocateInputs::default()
        };
        assert_eq!(locate_helper(&inputs), Ok(env));
        inputs.flag = Some(flag.clone());
        assert_eq!(locate_helper(&inputs), Ok(flag));
        inputs.flag = None;
        inputs.env_value = Some(s.0.join("nope"));
        let err = locate_helper(&inputs).expect_err("explicit and missing");
        assert!(err.to_string().contains("$AGENTD_HELPER"), "{err}");
    }

    #[test]
    fn the_config_value_wins_over_the_search() {
        let s = Scratch::new("locate-config");
        let config = helper_in(&s, "config", 0o755);
        let beside = helper_in(&s, "beside", 0o755);
        let inputs = LocateInputs {
            config_value: Some(config.clone()),
            exe_dir: beside.parent().map(Path::to_owned),
            ..LocateInputs::default()
        };
        assert_eq!(locate_helper(&inputs), Ok(config));
    }

    #[test]
    fn next_to_agentd_wins_over_path() {
        let s = Scratch::new("locate-beside");
        let beside = helper_in(&s, "beside", 0o755);
        let on_path = helper_in(&s, "onpath", 0o755);
        let inputs = LocateInputs {
            exe_dir: beside.parent().map(Path::to_owned),
            path_var: Some(join_path_var(on_path.parent())),
            ..LocateInputs::default()
        };
        assert_eq!(locate_helper(&inputs), Ok(beside));
    }

    #[test]
    fn path_directories_are_searched_in_order() {
        let s = Scratch::new("locate-path");
        let empty = s.dir("empty");
        let first = helper_in(&s, "first", 0o755);
        let second = helper_in(&s, "second", 0o755);
        let inputs = LocateInputs {
            exe_dir: Some(s.dir("exe")),
            path_var: Some(join_path_var([
                empty.as_path(),
                first.parent().unwrap_or(&empty),
                second.parent().unwrap_or(&empty),
            ])),
            ..LocateInputs::default()
        };
        assert_eq!(locate_helper(&inputs), Ok(first));
    }

    #[test]
    fn relative_path_entries_are_not_searched() {
        let inputs = LocateInputs {
            path_var: Some(join_path_var(["relative/dir", ""])),
            ..LocateInputs::default()
        };
        let Err(LocateError::NotFound { looked, .. }) = locate_helper(&inputs) else {
            panic!("expected NotFound");
        };
        assert!(
            looked.iter().all(|l| l.origin != Origin::PathVar),
            "{looked:?}"
        );
    }

    #[test]
    fn not_found_lists_every_place_in_order_and_says_how_to_fix_it() {
        let s = Scratch::new("locate-notfound");
        let exe = s.dir("exe");
        let a = s.dir("a");
        let b = s.dir("b");
        let inputs = LocateInputs {
            config_file: Some(PathBuf::from("/home/u/.config/agentd/agentd.toml")),
            exe_dir: Some(exe.clone()),
            path_var: Some(join_path_var([&a, &b])),
            ..LocateInputs::default()
        };
        let err = locate_helper(&inputs).expect_err("nothing installed");
        let expected = format!(
            "confine-helper was not found; looked, in order, at:\n\
             \x20 --helper: not set\n\
             \x20 $AGENTD_HELPER: not set\n\
             \x20 helper.path in the configuration file: not set\n\
             \x20 next to agentd: {}\n\
             \x20 PATH: {}\n\
             \x20 PATH: {}\n\
             To fix this, pass --helper PATH, set AGENTD_HELPER, set `helper.path` in \
             /home/u/.config/agentd/agentd.toml, or install it with \
             `cargo install --path confine-helper`.",
            exe.join(HELPER_NAME).display(),
            a.join(HELPER_NAME).display(),
            b.join(HELPER_NAME).display(),
        );
        assert_eq!(err.to_string(), expected);
    }

    #[test]
    fn a_missing_flag_path_is_an_error_and_nothing_else_is_tried() {
        let s = Scratch::new("locate-missingflag");
        let beside = helper_in(&s, "beside", 0o755);
        let inputs = LocateInputs {
            flag: Some(s.0.join("nope")),
            exe_dir: beside.parent().map(Path::to_owned),
            ..LocateInputs::default()
        };
        let err = locate_helper(&inputs).expect_err("explicit path missing");
        assert!(matches!(
            err,
            LocateError::Missing {
                origin: Origin::Flag,
                ..
            }
        ));
        assert!(err.to_string().contains("nope"), "{err}");
    }

    #[test]
    fn a_non_executable_file_found_on_the_search_is_an_error_naming_it() {
        let s = Scratch::new("locate-noexec");
        let beside = helper_in(&s, "beside", 0o644);
        let on_path = helper_in(&s, "onpath", 0o755);
        let inputs = LocateInputs {
            exe_dir: beside.parent().map(Path::to_owned),
            path_var: Some(join_path_var(on_path.parent())),
            ..LocateInputs::default()
        };
        let err = locate_helper(&inputs).expect_err("not executable");
        assert_eq!(
            err,
            LocateError::NotExecutable {
                origin: Origin::NextToAgentd,
                path: beside.clone()
            }
        );
        assert!(err.to_string().contains(&beside.display().to_string()));
    }

    #[test]
    fn a_directory_given_as_the_helper_is_an_error() {
        let s = Scratch::new("locate-dir");
        let dir = s.dir("confine-helper");
        let inputs = LocateInputs {
            config_value: Some(dir.clone()),
            ..LocateInputs::default()
        };
        assert_eq!(
            locate_helper(&inputs),
            Err(LocateError::NotExecutable {
                origin: Origin::Config,
                path: dir
            })
        );
    }
}
