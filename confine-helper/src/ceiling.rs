//! The ceiling: the helper's own limit on what any request may ask for, whatever agentd says.
//!
//! Sources, in order: the built-in default (the widest), `/etc/confine-helper/ceiling.toml`,
//! `$XDG_CONFIG_HOME/confine-helper/ceiling.toml` (else `~/.config/…` of the helper's user), and
//! `--ceiling PATH`. Each source can only narrow what the sources before it allowed: modes take
//! the minimum, booleans the conjunction, path lists add constraints, limits the minimum. A source
//! that cannot be trusted or parsed does not fall back to something wider: every request is
//! refused with the reason, so a broken ceiling fails closed.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use confine_protocol::pattern;
use confine_protocol::{Mode, Refusal, UnknownWord, environment};
use serde::Deserialize;

/// One ceiling file as written. Every field is optional; absent means "no narrowing here".
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct File {
    max_mode: Option<String>,
    allow_network: Option<bool>,
    allow_unix_sockets: Option<bool>,
    writable_roots_under: Option<Vec<PathBuf>>,
    never_writable: Option<Vec<PathBuf>>,
    env_allow: Option<Vec<String>>,
    env_deny: Option<Vec<String>>,
    max_processes: Option<u64>,
    max_file_size: Option<u64>,
    max_address_space: Option<u64>,
    max_memory: Option<u64>,
    refuse_partial: Option<bool>,
}

/// The effective ceiling after every source.
#[derive(Debug, Clone)]
pub(crate) struct Ceiling {
    pub(crate) max_mode: Mode,
    pub(crate) allow_network: bool,
    /// A request may list named Unix sockets to connect to (`Policy::unix_sockets`).
    pub(crate) allow_unix_sockets: bool,
    /// Each inner list is one source's constraint: a writable root must be under one of its
    /// entries, for every list.
    pub(crate) writable_roots_under: Vec<Vec<PathBuf>>,
    pub(crate) never_writable: Vec<PathBuf>,
    /// Each inner list is one source's exemptions from the secret filter; a name is exempt only
    /// if every list matches it.
    pub(crate) env_allow: Vec<Vec<String>>,
    pub(crate) env_deny: Vec<String>,
    pub(crate) max_processes: Option<u64>,
    pub(crate) max_file_size: Option<u64>,
    pub(crate) max_address_space: Option<u64>,
    pub(crate) max_memory: Option<u64>,
    pub(crate) refuse_partial: bool,
    /// Files that were read, for `probe`.
    pub(crate) sources: Vec<PathBuf>,
    /// Set when a source could not be trusted or read: every request is refused with it.
    /// Shared, because every refusal carries it.
    pub(crate) broken: Option<Arc<SourceError>>,
}

/// Why a ceiling source cannot be taken. Nothing wider is used instead: every request is
/// refused with this.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SourceError {
    #[error("ceiling file {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("ceiling file {path} is owned by uid {uid}, which may not set this helper's ceiling")]
    Owner { path: PathBuf, uid: u32 },
    /// `mode` is the file's permission bits.
    #[error("ceiling file {path} is writable by group or others (mode {mode:o}); chmod go-w it")]
    Writable { path: PathBuf, mode: u32 },
    /// Not TOML, or not the ceiling's fields; toml's text ends in a newline, left off here.
    #[error("ceiling file {path}: {}", .source.to_string().trim_end())]
    Syntax {
        path: PathBuf,
        source: toml::de::Error,
    },
    #[error("ceiling file {path}: {source}")]
    Value { path: PathBuf, source: ValueError },
}

/// A field of a ceiling file whose value cannot be taken.
#[derive(Debug, thiserror::Error)]
pub enum ValueError {
    #[error("max_mode: {0}")]
    MaxMode(#[source] UnknownWord),
    #[error("writable_roots_under entry {0} is not absolute")]
    RootsUnder(PathBuf),
    #[error("never_writable entry {0} is not absolute")]
    NeverWritable(PathBuf),
}

impl Default for Ceiling {
    fn default() -> Self {
        Ceiling {
            max_mode: Mode::DangerFullAccess,
            allow_network: true,
            allow_unix_sockets: true,
            writable_roots_under: Vec::new(),
            never_writable: Vec::new(),
            env_allow: Vec::new(),
            env_deny: Vec::new(),
            max_processes: None,
            max_file_size: None,
            max_address_space: None,
            max_memory: None,
            refuse_partial: false,
            sources: Vec::new(),
            broken: None,
        }
    }
}

/// The system-wide ceiling file.
pub(crate) const SYSTEM_FILE: &str = "/etc/confine-helper/ceiling.toml";

/// Where the user's ceiling file is, given the helper's environment as it was at start and the
/// user's home directory.
pub(crate) fn user_file(xdg_config_home: Option<&Path>, home: Option<&Path>) -> Option<PathBuf> {
    let base = match xdg_config_home.filter(|p| p.is_absolute()) {
        Some(dir) => dir.to_owned(),
        None => home?.join(".config"),
    };
    Some(base.join("confine-helper").join("ceiling.toml"))
}

/// Loads every source. `explicit` is `--ceiling PATH`, which must exist.
pub(crate) fn load(user: Option<&Path>, explicit: Option<&Path>) -> Ceiling {
    let mut ceiling = Ceiling::default();
    let me = nix::unistd::geteuid().as_raw();
    let system = (PathBuf::from(SYSTEM_FILE), false, vec![0]);
    let sources = [
        Some(system),
        user.map(|p| (p.to_owned(), false, vec![0, me])),
        explicit.map(|p| (p.to_owned(), true, vec![0, me])),
    ];
    for (path, required, owners) in sources.into_iter().flatten() {
        match read_source(&path, required, &owners) {
            Ok(Some(file)) => {
                if let Err(source) = ceiling.narrow(file) {
                    let path = path.clone();
                    ceiling.broken = Some(Arc::new(SourceError::Value { path, source }));
                }
                ceiling.sources.push(path);
            }
            Ok(None) => {}
            Err(e) => ceiling.broken = Some(Arc::new(e)),
        }
        if ceiling.broken.is_some() {
            break;
        }
    }
    ceiling
}

fn read_source(path: &Path, required: bool, owners: &[u32]) -> Result<Option<File>, SourceError> {
    let io = |source| SourceError::Io {
        path: path.to_owned(),
        source,
    };
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound && !required => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    if !owners.contains(&meta.uid()) {
        return Err(SourceError::Owner {
            path: path.to_owned(),
            uid: meta.uid(),
        });
    }
    if meta.mode() & 0o022 != 0 {
        return Err(SourceError::Writable {
            path: path.to_owned(),
            mode: meta.mode() & 0o7777,
        });
    }
    let text = std::fs::read_to_string(path).map_err(io)?;
    parse(&text)
        .map(Some)
        .map_err(|source| SourceError::Syntax {
            path: path.to_owned(),
            source,
        })
}

pub(crate) fn parse(text: &str) -> Result<File, toml::de::Error> {
    toml::from_str(text)
}

fn min_limit(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

impl Ceiling {
    pub(crate) fn narrow(&mut self, file: File) -> Result<(), ValueError> {
        if let Some(mode) = file.max_mode {
            let mode: Mode = mode.parse().map_err(ValueError::MaxMode)?;
            self.max_mode = self.max_mode.min(mode);
        }
        if let Some(allow) = file.allow_network {
            self.allow_network &= allow;
        }
        if let Some(allow) = file.allow_unix_sockets {
            self.allow_unix_sockets &= allow;
        }
        if let Some(roots) = file.writable_roots_under {
            if let Some(bad) = roots.iter().find(|p| !p.is_absolute()) {
                return Err(ValueError::RootsUnder(bad.clone()));
            }
            // Compared with the real paths of roots, so resolved here, once.
            self.writable_roots_under
                .push(roots.iter().map(|p| crate::paths::resolve(p)).collect());
        }
        if let Some(paths) = file.never_writable {
            if let Some(bad) = paths.iter().find(|p| !p.is_absolute()) {
                return Err(ValueError::NeverWritable(bad.clone()));
            }
            self.never_writable
                .extend(paths.iter().map(|p| crate::paths::resolve(p)));
        }
        if let Some(allow) = file.env_allow {
            self.env_allow.push(allow);
        }
        if let Some(deny) = file.env_deny {
            self.env_deny.extend(deny);
        }
        self.max_processes = min_limit(self.max_processes, file.max_processes);
        self.max_file_size = min_limit(self.max_file_size, file.max_file_size);
        self.max_address_space = min_limit(self.max_address_space, file.max_address_space);
        self.max_memory = min_limit(self.max_memory, file.max_memory);
        self.refuse_partial |= file.refuse_partial.unwrap_or(false);
        Ok(())
    }

    /// The rule a request for `mode` with `network` breaks, if any.
    pub(crate) fn check_mode(&self, mode: Mode, network_allowed: bool) -> Result<(), Refusal> {
        if let Some(broken) = &self.broken {
            return Err(Refusal::CeilingBroken {
                why: broken.to_string(),
            });
        }
        if mode > self.max_mode {
            return Err(Refusal::CeilingMode {
                max: self.max_mode,
                asked: mode,
            });
        }
        if network_allowed && mode != Mode::DangerFullAccess && !self.allow_network {
            return Err(Refusal::CeilingNetwork);
        }
        Ok(())
    }

    /// The rule the writable root `root` (its real path) breaks, if any.
    pub(crate) fn check_root(&self, root: &Path) -> Result<(), Refusal> {
        for (i, prefixes) in self.writable_roots_under.iter().enumerate() {
            if !prefixes.iter().any(|p| root.starts_with(p)) {
                return Err(Refusal::CeilingNotUnder {
                    list: u64::try_from(i + 1).unwrap_or(u64::MAX),
                    root: root.display().to_string(),
                });
            }
        }
        for never in &self.never_writable {
            if root.starts_with(never) || never.starts_with(root) {
                return Err(Refusal::CeilingNeverWritable {
                    never: never.display().to_string(),
                    root: root.display().to_string(),
                });
            }
        }
        Ok(())
    }

    /// What becomes of one variable of a request: `env_deny` drops it; a locale variable that
    /// holds no locale name, or a secret-looking name that `env_allow` does not exempt, refuses
    /// the request (the rules are [`confine_protocol::environment`]'s); anything else passes.
    pub(crate) fn env_verdict(&self, name: &str, value: &[u8]) -> EnvVerdict {
        if self.env_deny.iter().any(|p| matches_pattern(p, name)) {
            return EnvVerdict::Dropped;
        }
        if !environment::is_locale_value(name.as_bytes(), value) {
            return EnvVerdict::Refused(Refusal::NotALocale {
                name: name.to_owned(),
            });
        }
        let Some(word) = environment::secret_word(name.as_bytes()) else {
            return EnvVerdict::Passes;
        };
        let allowed = !self.env_allow.is_empty()
            && self
                .env_allow
                .iter()
                .all(|list| list.iter().any(|p| matches_pattern(p, name)));
        if allowed {
            EnvVerdict::Passes
        } else {
            EnvVerdict::Refused(Refusal::SecretVariable {
                name: name.to_owned(),
                word: word.to_owned(),
                system_file: SYSTEM_FILE.to_owned(),
            })
        }
    }
}

/// What the helper does with one variable of a request ([`Ceiling::env_verdict`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EnvVerdict {
    /// The command gets it.
    Passes,
    /// `env_deny` names it: the command runs without it.
    Dropped,
    /// Nothing runs.
    Refused(Refusal),
}

/// `*` matches any run of characters; everything else matches itself ([`pattern::matches`]).
fn matches_pattern(pattern: &str, name: &str) -> bool {
    pattern::matches(pattern.as_bytes(), name.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn narrowed(texts: &[&str]) -> Ceiling {
        let mut c = Ceiling::default();
        for t in texts {
            c.narrow(parse(t).expect("parse")).expect("narrow");
        }
        c
    }

    #[test]
    fn each_source_can_only_narrow_the_mode_and_network() {
        let c = narrowed(&[
            "max_mode = \"workspace-write\"",
            "max_mode = \"danger-full-access\"",
        ]);
        assert_eq!(c.max_mode, Mode::WorkspaceWrite);
        let c = narrowed(&["allow_network = false", "allow_network = true"]);
        assert!(!c.allow_network);
        assert!(matches!(
            c.check_mode(Mode::ReadOnly, true),
            Err(Refusal::CeilingNetwork)
        ));
        assert!(c.check_mode(Mode::ReadOnly, false).is_ok());
        let c = narrowed(&["allow_unix_sockets = false", "allow_unix_sockets = true"]);
        assert!(!c.allow_unix_sockets);
        assert!(Ceiling::default().allow_unix_sockets);
    }

    #[test]
    fn a_mode_above_the_ceiling_is_refused_naming_the_rule() {
        let c = narrowed(&["max_mode = \"read-only\""]);
        let err = c.check_mode(Mode::WorkspaceWrite, false).unwrap_err();
        assert_eq!(
            err.to_string(),
            "ceiling max_mode is read-only: workspace-write is not allowed"
        );
    }

    #[test]
    fn writable_roots_must_satisfy_every_source_and_avoid_never_writable_paths() {
        let c = narrowed(&[
            "writable_roots_under = [\"/home\", \"/srv\"]",
            "writable_roots_under = [\"/home/u\"]\nnever_writable = [\"/home/u/keep\"]",
        ]);
        assert!(c.check_root(Path::new("/home/u/proj")).is_ok());
        assert!(c.check_root(Path::new("/srv/x")).is_err());
        assert!(c.check_root(Path::new("/home/u/keep/sub")).is_err());
        assert!(c.check_root(Path::new("/home/u")).is_err(), "contains keep");
    }

    #[test]
    fn entries_reached_through_a_symlink_are_resolved_when_loaded() {
        let scratch = crate::test_support::Scratch::new("ceiling-link");
        let dir = scratch.0.clone();
        std::fs::create_dir_all(dir.join("real/keep")).expect("mkdir");
        std::os::unix::fs::symlink(dir.join("real"), dir.join("link")).expect("symlink");
        let c = narrowed(&[&format!(
            "writable_roots_under = [\"{0}/link\"]\nnever_writable = [\"{0}/link/keep\"]",
            dir.display()
        )]);
        assert!(c.check_root(&dir.join("real/proj")).is_ok());
        let err = c.check_root(&dir.join("real/keep/x")).unwrap_err();
        assert!(matches!(
            &err,
            Refusal::CeilingNeverWritable { never, .. }
                if *never == dir.join("real/keep").display().to_string()
        ));
        assert_eq!(
            err.to_string(),
            format!(
                "ceiling never_writable contains {0}/real/keep: {0}/real/keep/x may not be \
                 writable",
                dir.display()
            )
        );
    }

    #[test]
    fn path_checks_compare_whole_components() {
        let c = narrowed(&["writable_roots_under = [\"/home/u\"]"]);
        assert!(c.check_root(Path::new("/home/user2")).is_err());
    }

    fn verdict(c: &Ceiling, name: &str, value: &str) -> EnvVerdict {
        c.env_verdict(name, value.as_bytes())
    }

    #[test]
    fn secrets_are_refused_unless_every_allow_list_names_them() {
        let c = Ceiling::default();
        assert_eq!(verdict(&c, "PATH", "/usr/bin"), EnvVerdict::Passes);
        for secret in [
            "OPENAI_API_KEY",
            "AWS_SECRET_ACCESS_KEY",
            "GITHUB_TOKEN",
            "SSH_AUTH_SOCK",
            "DBUS_SESSION_BUS_ADDRESS",
            "DB_PASSWORD",
            "LC_DB_PASS",
            "MYSQL_PASSWD",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "NPM_AUTH",
        ] {
            assert!(
                matches!(
                    verdict(&c, secret, "x"),
                    EnvVerdict::Refused(Refusal::SecretVariable { .. })
                ),
                "{secret}"
            );
        }
        let c = narrowed(&["env_allow = [\"GITHUB_*\"]"]);
        assert_eq!(verdict(&c, "GITHUB_TOKEN", "t"), EnvVerdict::Passes);
        let c = narrowed(&["env_allow = [\"GITHUB_*\"]", "env_allow = []"]);
        assert!(matches!(
            verdict(&c, "GITHUB_TOKEN", "t"),
            EnvVerdict::Refused(_)
        ));
        let c = narrowed(&["env_deny = [\"FOO*\"]"]);
        assert_eq!(verdict(&c, "FOOBAR", "1"), EnvVerdict::Dropped);
        assert_eq!(verdict(&c, "BARFOO", "1"), EnvVerdict::Passes);
    }

    #[test]
    fn a_secret_refusal_says_how_to_allow_it_and_never_shows_the_value() {
        let c = Ceiling::default();
        let EnvVerdict::Refused(refusal) = verdict(&c, "DB_PASSWORD", "hunter2") else {
            panic!("DB_PASSWORD passed");
        };
        let reason = refusal.to_string();
        assert!(reason.contains("DB_PASSWORD"), "{reason}");
        assert!(reason.contains("contains PASS"), "{reason}");
        assert!(reason.contains("env_allow = [\"DB_PASSWORD\"]"), "{reason}");
        assert!(!reason.contains("hunter2"), "{reason}");
    }

    #[test]
    fn locale_variables_must_hold_locale_names() {
        let c = Ceiling::default();
        for (name, value) in [
            ("LC_ALL", "C.UTF-8"),
            ("LC_MESSAGES", "C"),
            ("LANG", "sr_RS.UTF-8@latin"),
            ("LANGUAGE", "de_DE:de:en"),
            ("LC_ALL", ""),
        ] {
            assert_eq!(
                verdict(&c, name, value),
                EnvVerdict::Passes,
                "{name}={value}"
            );
        }
        for (name, value) in [
            ("LC_ALL", "hunter2"),
            ("LANG", "/etc/x"),
            ("LC_TIME", "a b"),
        ] {
            let EnvVerdict::Refused(refusal) = verdict(&c, name, value) else {
                panic!("{name}={value} passed");
            };
            assert_eq!(
                refusal,
                Refusal::NotALocale {
                    name: name.to_owned()
                }
            );
            let reason = refusal.to_string();
            assert!(!reason.contains(value), "{reason}");
        }
        // env_allow exempts from the secret filter only: it does not make a value a locale.
        let c = narrowed(&["env_allow = [\"LC_ALL\"]"]);
        assert!(matches!(
            verdict(&c, "LC_ALL", "hunter2"),
            EnvVerdict::Refused(Refusal::NotALocale { .. })
        ));
    }

    #[test]
    fn unknown_fields_and_bad_values_are_errors() {
        assert!(parse("max_mod = \"read-only\"").is_err());
        let mut c = Ceiling::default();
        assert!(
            c.narrow(parse("max_mode = \"everything\"").expect("parse"))
                .is_err()
        );
        assert!(
            c.narrow(parse("never_writable = [\"relative\"]").expect("parse"))
                .is_err()
        );
    }

    #[test]
    fn a_file_that_cannot_be_taken_breaks_the_ceiling_in_the_same_words() {
        use std::os::unix::fs::PermissionsExt;
        let scratch = crate::test_support::Scratch::new("ceiling-source");
        let dir = scratch.0.clone();
        let file = dir.join("ceiling.toml");
        let broken = |text: &str, mode: u32| {
            std::fs::write(&file, text).expect("write");
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).expect("chmod");
            let c = load(None, Some(&file));
            let refusal = c.check_mode(Mode::ReadOnly, false).expect_err("broken");
            assert!(
                matches!(refusal, Refusal::CeilingBroken { .. }),
                "{refusal:?}"
            );
            refusal.to_string()
        };
        let name = file.display();
        assert_eq!(
            broken("", 0o664),
            format!("ceiling file {name} is writable by group or others (mode 664); chmod go-w it")
        );
        let syntax = toml::from_str::<File>("max_mod = 1").expect_err("unknown field");
        assert_eq!(
            broken("max_mod = 1", 0o644),
            format!("ceiling file {name}: {}", syntax.to_string().trim_end())
        );
        assert_eq!(
            broken("never_writable = [\"rel\"]", 0o644),
            format!("ceiling file {name}: never_writable entry rel is not absolute")
        );
        assert_eq!(
            broken("max_mode = \"all\"", 0o644),
            format!(
                "ceiling file {name}: max_mode: mode \"all\" is not one of read-only, \
                 workspace-write, danger-full-access"
            )
        );
        std::fs::remove_file(&file).expect("rm");
        let missing = load(None, Some(&file)).broken.map(|b| b.to_string());
        assert_eq!(
            missing,
            Some(format!(
                "ceiling file {name}: No such file or directory (os error 2)"
            ))
        );
    }

    #[test]
    fn patterns_match_with_stars() {
        assert!(matches_pattern("A*", "ABC"));
        assert!(matches_pattern("*KEY*", "MY_KEY_X"));
        assert!(!matches_pattern("A*C", "AB"));
        assert!(matches_pattern("LC_*", "LC_ALL"));
    }
}
