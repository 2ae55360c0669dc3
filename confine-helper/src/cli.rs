//! Command line, and the order of the first steps: parse, sanitize, then serve.
//!
//! Arguments are the only input read before the process is sanitized; they say which inherited
//! descriptor is the connection, so it is the one descriptor kept open.

use std::ffi::OsString;
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use crate::confine::Context;
use crate::log;
use crate::server::serve_inherited;
use crate::{ceiling, sys};

const USAGE: &str = "\
usage:
  confine-helper --fd N [--ceiling PATH] [--served-from SOCKET [--idle-limit SECONDS]]
      serve agentd over the connected Unix socket inherited as descriptor N (embedded mode;
      N is 0 or above 2: a socket given as stdin is moved off it, /dev/null takes its place);
      --served-from names the service socket confine-service accepted it on, --idle-limit how
      long a connection that runs nothing and sends nothing is kept (0: for ever)
  confine-helper enter --ruleset FD --report FD -- PROGRAM [ARGS...]
      apply a Landlock ruleset and execute PROGRAM (the second layer inside a bwrap sandbox)
  confine-helper --version

The ceiling is read from /etc/confine-helper/ceiling.toml, then the user's
$XDG_CONFIG_HOME/confine-helper/ceiling.toml, then --ceiling PATH; each can only narrow.
Which backends work here, and why not: agentd probe.";

/// What the command line asked for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Invocation {
    Embedded {
        fd: RawFd,
        ceiling: Option<PathBuf>,
        /// The service socket `confine-service` accepted the connection on.
        served_from: Option<PathBuf>,
        /// How long a connection of a root service's peer is kept idle; zero keeps it.
        idle_limit: Option<Duration>,
    },
    Version,
    Help,
}

/// What is wrong with the command line; printed before the usage, and the helper exits 2.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum UsageError {
    #[error("arguments must be UTF-8")]
    NotUtf8,
    /// `flag` takes a number and got `value`.
    #[error("{flag} needs a number, got {value:?}")]
    NotANumber { flag: &'static str, value: String },
    #[error("--idle-limit is for a helper a root service starts, with --served-from")]
    IdleWithoutService,
    #[error("--fd {0}: descriptors 1 and 2 are for messages, not a socket")]
    Stdio(RawFd),
    /// This flag is the last argument.
    #[error("{0} needs a value")]
    NoValue(String),
    /// An option after `--fd N`.
    #[error("unknown option {0:?}")]
    Option(String),
    #[error("no mode given")]
    NoMode,
    #[error("unknown argument {0:?}")]
    Argument(String),
    /// `probe`, which agentd prints now.
    #[error(
        "`probe` is agentd's: run `agentd probe [--json]` (`--helper PATH` to ask this helper, \
         `--helper-ceiling PATH` with a ceiling file)"
    )]
    Probe,
}

/// Parses the helper's small command line.
pub(crate) fn parse(args: &[OsString]) -> Result<Invocation, UsageError> {
    // `--help` or `-h` anywhere before a `--` (`probe --help`) asks for the
    // usage, as alone; after `--` it is a path or the command's own argument.
    if args
        .iter()
        .take_while(|a| *a != "--")
        .any(|a| a == "--help" || a == "-h")
    {
        return Ok(Invocation::Help);
    }
    let text: Vec<&str> = args
        .iter()
        .map(|a| a.to_str().ok_or(UsageError::NotUtf8))
        .collect::<Result<_, _>>()?;
    match text.as_slice() {
        ["--fd", n, rest @ ..] => embedded_args(n, rest),
        ["probe", ..] => Err(UsageError::Probe),
        ["--version"] | ["-V"] => Ok(Invocation::Version),
        ["--help"] | ["-h"] => Ok(Invocation::Help),
        [] => Err(UsageError::NoMode),
        [other, ..] => Err(UsageError::Argument((*other).to_owned())),
    }
}

/// `--fd N` and its options: embedded mode.
fn embedded_args(n: &str, rest: &[&str]) -> Result<Invocation, UsageError> {
    let fd: RawFd = n.parse().map_err(|_| UsageError::NotANumber {
        flag: "--fd",
        value: (*n).to_owned(),
    })?;
    if fd != 0 && fd < 3 {
        return Err(UsageError::Stdio(fd));
    }
    let (mut ceiling, mut served_from, mut idle_limit) = (None, None, None);
    let mut rest = rest;
    loop {
        match rest {
            [] => break,
            ["--ceiling", path, more @ ..] => (ceiling, rest) = (Some(path.into()), more),
            ["--served-from", path, more @ ..] => {
                (served_from, rest) = (Some(PathBuf::from(path)), more);
            }
            ["--idle-limit", secs, more @ ..] => {
                (idle_limit, rest) = (Some(seconds("--idle-limit", secs)?), more);
            }
            [flag @ ("--ceiling" | "--served-from" | "--idle-limit")] => {
                return Err(UsageError::NoValue((*flag).to_owned()));
            }
            [other, ..] => return Err(UsageError::Option((*other).to_owned())),
        }
    }
    if idle_limit.is_some() && served_from.is_none() {
        return Err(UsageError::IdleWithoutService);
    }
    Ok(Invocation::Embedded {
        fd,
        ceiling,
        served_from,
        idle_limit,
    })
}

/// The number `flag` takes.
fn number(flag: &'static str, value: &str) -> Result<u64, UsageError> {
    value.parse().map_err(|_| UsageError::NotANumber {
        flag,
        value: value.to_owned(),
    })
}

/// A duration in seconds.
fn seconds(flag: &'static str, value: &str) -> Result<Duration, UsageError> {
    number(flag, value).map(Duration::from_secs)
}

/// The helper's entry point.
pub fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    // Inside a bwrap sandbox, between the namespaces and the command: nothing to sanitize (bwrap
    // gave it exactly the command's descriptors and environment), nothing else to do.
    #[cfg(target_os = "linux")]
    if let Some((verb, rest)) = args.split_first()
        && verb == "enter"
    {
        return match crate::enter::parse(rest) {
            Ok(enter) => crate::enter::main(&enter),
            Err(e) => {
                eprintln!("confine-helper: {e}");
                ExitCode::from(126)
            }
        };
    }
    let invocation = match parse(&args) {
        Ok(invocation) => invocation,
        Err(e) => {
            eprintln!("confine-helper: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let keep = match invocation {
        Invocation::Embedded { fd, .. } => fd,
        _ => -1,
    };
    // The only environment read: where the user's ceiling lives. Then it is cleared.
    let homes = Homes {
        xdg: std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from),
        env_home: std::env::var_os("HOME").map(PathBuf::from),
    };
    let keep = match sanitize(keep) {
        Ok(keep) => keep,
        Err(e) => {
            eprintln!("confine-helper: cannot sanitize the process: {e}");
            return ExitCode::FAILURE;
        }
    };
    run(invocation, homes, keep)
}

/// What the helper reads of its environment before it clears it.
struct Homes {
    xdg: Option<PathBuf>,
    env_home: Option<PathBuf>,
}

/// Runs `invocation` in the sanitized process; an embedded helper serves on `fd`, where its
/// socket is now.
fn run(invocation: Invocation, homes: Homes, fd: RawFd) -> ExitCode {
    let Homes { xdg, env_home } = homes;
    let result = match invocation {
        Invocation::Version => {
            println!(
                "confine-helper {} (protocol v{}, schema {:016x})",
                env!("CARGO_PKG_VERSION"),
                confine_protocol::PROTOCOL_VERSION,
                confine_protocol::SCHEMA_HASH
            );
            return ExitCode::SUCCESS;
        }
        Invocation::Help => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Invocation::Embedded {
            ceiling,
            served_from,
            idle_limit,
            ..
        } => {
            if served_from.is_some() && !nix::unistd::geteuid().is_root() && can_become_root() {
                log!("started for a service peer, yet able to become root again: refusing");
                return ExitCode::FAILURE;
            }
            let dir = served_from
                .as_deref()
                .and_then(Path::parent)
                .map(PathBuf::from);
            let mut ctx = context(xdg, env_home, ceiling, dir);
            ctx.takes_hints = true;
            ctx.sweep_orphans();
            serve_inherited(fd, ctx, idle_limit.filter(|limit| !limit.is_zero()))
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// The helper's view of itself: ceiling, homes and its own paths that must stay unwritable.
fn context(
    xdg: Option<PathBuf>,
    env_home: Option<PathBuf>,
    explicit: Option<PathBuf>,
    socket_dir: Option<PathBuf>,
) -> Context {
    let uid = nix::unistd::geteuid();
    let passwd_home = std::fs::read(PASSWD)
        .ok()
        .and_then(|passwd| passwd_home(&passwd, uid.as_raw()))
        .or_else(|| {
            nix::unistd::User::from_uid(uid)
                .ok()
                .flatten()
                .map(|u| u.dir)
        });
    let home = passwd_home.clone().or(env_home.clone());
    let user_file = ceiling::user_file(xdg.as_deref(), home.as_deref());
    let explicit = explicit.map(|p| std::fs::canonicalize(&p).unwrap_or(p));
    let ceiling = ceiling::load(user_file.as_deref(), explicit.as_deref());
    if let Some(broken) = &ceiling.broken {
        log!("{broken}; every request will be refused until it is fixed");
    }
    let mut own = vec![PathBuf::from("/etc/confine-helper")];
    own.extend(
        std::env::current_exe()
            .ok()
            .map(|p| std::fs::canonicalize(&p).unwrap_or(p)),
    );
    own.extend(
        user_file
            .as_deref()
            .and_then(|f| f.parent())
            .map(PathBuf::from),
    );
    own.extend(explicit);
    own.extend(socket_dir.clone());
    let homes: Vec<PathBuf> = [passwd_home, env_home]
        .into_iter()
        .flatten()
        .map(|h| std::fs::canonicalize(&h).unwrap_or(h))
        .collect();
    Context::new(ceiling, homes, own, socket_dir.into_iter().collect())
}

/// The user database's file.
const PASSWD: &str = "/etc/passwd";

/// The home directory the first line of `passwd` (`/etc/passwd`) that names user `uid` gives,
/// if it is absolute. The helper reads the file itself before it asks the C library's name
/// services: the packaged helper is linked statically, and a static program's name services
/// load the system's module for any database but files, which must match the C library it was
/// built with. Only a user the file does not list (one of a network directory) is looked up
/// through them.
fn passwd_home(passwd: &[u8], uid: u32) -> Option<PathBuf> {
    passwd.split(|b| *b == b'\n').find_map(|line| {
        let fields: Vec<&[u8]> = line.split(|b| *b == b':').collect();
        let [_, _, id, _, _, dir, ..] = fields[..] else {
            return None;
        };
        let id: u32 = std::str::from_utf8(id).ok()?.parse().ok()?;
        (id == uid && dir.starts_with(b"/"))
            .then(|| PathBuf::from(std::ffi::OsStr::from_bytes(dir)))
    })
}

/// Closes inherited descriptors, clears the environment, sets inherited ignored signals back to
/// their default and keeps other processes of the user out (undumpable on Linux, no debugger on
/// macOS), before anything is read from a peer. Returns the number `keep` has now.
fn sanitize(keep: RawFd) -> std::io::Result<RawFd> {
    let keep = sys::sanitize_fds(keep)?;
    sys::clear_environment();
    sys::reset_inherited_signals();
    sys::forbid_tracing()?;
    Ok(keep)
}

/// Whether this process, started as a peer's uid, could set its uid back to root.
fn can_become_root() -> bool {
    nix::unistd::setuid(nix::unistd::Uid::from_raw(0)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_home_is_the_first_absolute_one_the_user_database_gives_the_uid() {
        let passwd = b"root:x:0:0:root:/root:/bin/bash\n\
            +nis::::::\n\
            short:x:1000\n\
            rel:x:1001:1001::relative/home:/bin/sh\n\
            ann:x:1000:1000:Ann,,,:/home/ann:/bin/bash\n\
            again:x:1000:1000::/home/other:/bin/sh\n\
            space:x:1002:1002::/home/with space:/bin/sh";
        assert_eq!(passwd_home(passwd, 0), Some(PathBuf::from("/root")));
        assert_eq!(passwd_home(passwd, 1000), Some(PathBuf::from("/home/ann")));
        assert_eq!(
            passwd_home(passwd, 1002),
            Some(PathBuf::from("/home/with space"))
        );
        // A relative home is none, a uid with no line has none, and neither does a file that
        // is not the user database.
        assert_eq!(passwd_home(passwd, 1001), None);
        assert_eq!(passwd_home(passwd, 4242), None);
        assert_eq!(passwd_home(b"\xff\xfe:::\n\n", 0), None);
        // Control: the machine's own file gives this process's user the home the C library's
        // name services give it, where the user is in the file.
        let uid = nix::unistd::geteuid();
        let from_file = std::fs::read(PASSWD)
            .ok()
            .and_then(|p| passwd_home(&p, uid.as_raw()));
        if let Some(from_file) = from_file {
            let from_libc = nix::unistd::User::from_uid(uid)
                .ok()
                .flatten()
                .map(|u| u.dir);
            assert_eq!(Some(from_file), from_libc);
        }
    }

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn embedded_mode_takes_stdin_or_a_descriptor_above_stdio() {
        for fd in [0, 3] {
            assert_eq!(
                parse(&args(&["--fd", &fd.to_string()])),
                Ok(Invocation::Embedded {
                    fd,
                    ceiling: None,
                    served_from: None,
                    idle_limit: None
                })
            );
        }
        for taken in ["1", "2", "-1"] {
            assert_eq!(
                parse(&args(&["--fd", taken])),
                Err(UsageError::Stdio(taken.parse().expect("a number")))
            );
        }
        assert!(parse(&args(&["--fd", "x"])).is_err());
        assert_eq!(
            parse(&args(&[
                "--fd",
                "5",
                "--served-from",
                "/run/c/h.sock",
                "--ceiling",
                "/c.toml"
            ])),
            Ok(Invocation::Embedded {
                fd: 5,
                ceiling: Some("/c.toml".into()),
                served_from: Some("/run/c/h.sock".into()),
                idle_limit: None
            })
        );
        assert!(parse(&args(&["--fd", "5", "--served-from"])).is_err());
        // A root service's helper is given how long it keeps an idle connection; an embedded
        // helper, serving agentd alone, is not.
        assert_eq!(
            parse(&args(&[
                "--fd",
                "5",
                "--served-from",
                "/run/c/h.sock",
                "--idle-limit",
                "7"
            ])),
            Ok(Invocation::Embedded {
                fd: 5,
                ceiling: None,
                served_from: Some("/run/c/h.sock".into()),
                idle_limit: Some(Duration::from_secs(7))
            })
        );
        assert_eq!(
            parse(&args(&["--fd", "5", "--idle-limit", "7"])),
            Err(UsageError::IdleWithoutService)
        );
    }

    #[test]
    fn unknown_or_incomplete_arguments_are_rejected() {
        assert!(parse(&args(&[])).is_err());
        // Service mode is confine-service's.
        assert_eq!(
            parse(&args(&["serve", "--socket", "/s"])),
            Err(UsageError::Argument("serve".into()))
        );
        assert!(parse(&args(&["run"])).is_err());
    }

    #[test]
    fn help_after_a_mode_is_the_usage_and_after_dashes_an_argument() {
        for list in [
            &["--help"][..],
            &["-h"],
            &["probe", "--help"],
            &["--fd", "3", "--help"],
        ] {
            assert_eq!(parse(&args(list)), Ok(Invocation::Help), "{list:?}");
        }
        assert_ne!(
            parse(&args(&["--fd", "3", "--", "--help"])),
            Ok(Invocation::Help),
            "after dashes, --help is an argument"
        );
    }

    #[test]
    fn usage_errors_read_as_before() {
        let text = |list: &[&str]| parse(&args(list)).map_err(|e| e.to_string());
        assert_eq!(
            parse(&args(&["--fd", "x"])),
            Err(UsageError::NotANumber {
                flag: "--fd",
                value: "x".into()
            })
        );
        assert_eq!(
            text(&["--fd", "x"]),
            Err("--fd needs a number, got \"x\"".into())
        );
        assert_eq!(
            text(&["--fd", "2"]),
            Err("--fd 2: descriptors 1 and 2 are for messages, not a socket".into())
        );
        assert_eq!(
            text(&["--fd", "3", "--ceiling"]),
            Err("--ceiling needs a value".into())
        );
        // The probe's printing is agentd's; the helper names where it went.
        assert_eq!(parse(&args(&["probe", "--json"])), Err(UsageError::Probe));
        assert!(
            text(&["probe"])
                .unwrap_err()
                .starts_with("`probe` is agentd's: run `agentd probe [--json]`")
        );
        assert_eq!(text(&["run"]), Err("unknown argument \"run\"".into()));
    }
}
