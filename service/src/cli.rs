//! Command line, and the order of the first steps: parse, keep inherited descriptors out of
//! the helpers, find the helper, check the rule against who runs the service, then listen.

use std::ffi::OsString;
use std::os::fd::RawFd;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::admit::Admission;
use crate::handoff::{Handoff, IDLE_LIMIT, serve};
use crate::live::Caps;
use crate::{log, socket, sys};

const USAGE: &str = "\
usage:
  confine-service --socket PATH [--allow-uid UID]... [--group GROUP] [--ceiling PATH]
                  [--max-per-user N] [--max-connections N] [--idle-limit SECONDS]
                  [--delegated-cgroup] [--helper PATH]
      listen on PATH (its directory must be private: 0700; with --group, the socket is 0660
      and GROUP's) and serve peers whose uid is allowed (default: this process's own uid) or
      who are members of GROUP, at most N connections per uid (default 16) and N in all
      (default 256), each by a confine-helper of its own (--helper, default: the
      confine-helper beside this program). Run as root, each peer's helper runs as that peer,
      with the limits of the peer's process, closes a connection idle for SECONDS (default
      300) and, with --delegated-cgroup, runs in a cgroup per uid under the service's own;
      under systemd the service takes the socket the socket unit passes (LISTEN_FDS)
  confine-service --version";

/// The descriptor systemd passes the first socket as (`SD_LISTEN_FDS_START`).
const LISTEN_FDS_START: RawFd = 3;

/// What the command line asked for.
#[derive(Debug, Default, PartialEq, Eq)]
struct Options {
    socket: Option<PathBuf>,
    uids: Vec<u32>,
    group: Option<String>,
    ceiling: Option<PathBuf>,
    caps: Caps,
    idle_limit: Option<Duration>,
    delegated_cgroup: bool,
    helper: Option<PathBuf>,
}

/// What stops the service from starting; printed, and it exits 2 (usage) or 1.
#[derive(Debug, thiserror::Error)]
enum StartError {
    #[error("{flag} needs a number, got {value:?}")]
    NotANumber { flag: String, value: String },
    #[error("{0} must be above 0: a service that takes no connection serves nobody")]
    Zero(String),
    #[error("{0} needs a value")]
    NoValue(String),
    #[error("unknown option {0:?}")]
    Option(String),
    #[error("arguments must be UTF-8")]
    NotUtf8,
    #[error("--socket PATH is required")]
    NoSocket,
    #[error(
        "the helper {path} {why}: install confine-helper beside confine-service, or name it \
         with --helper PATH"
    )]
    Helper { path: PathBuf, why: String },
    #[error(
        "this service is not root, so it would run the commands of {0} as its own uid; run it \
         as root (it serves each peer by a helper running as that peer), or give each user a \
         service of their own"
    )]
    OtherUid(String),
    #[error(
        "{0} is for a root service, whose helpers run as its peers; this service serves its \
         own uid: drop {0}"
    )]
    RootOnly(&'static str),
    #[error(
        "the service manager passed {0} sockets (LISTEN_FDS); the socket unit must have \
         exactly one ListenStream"
    )]
    Activation(String),
    #[error("cannot keep inherited descriptors out of the helpers: {0}")]
    Descriptors(std::io::Error),
    #[error("{0}")]
    Socket(#[from] socket::ServiceError),
    #[error("{0}")]
    Run(std::io::Error),
}

/// Parses the command line; `None` asks for the usage or the version (printed here).
fn parse(args: &[OsString]) -> Result<Option<Options>, StartError> {
    let text: Vec<&str> = args
        .iter()
        .map(|a| a.to_str().ok_or(StartError::NotUtf8))
        .collect::<Result<_, _>>()?;
    let mut options = Options::default();
    let mut it = text.iter();
    while let Some(flag) = it.next() {
        match *flag {
            "--help" | "-h" => {
                println!("{USAGE}");
                return Ok(None);
            }
            "--version" | "-V" => {
                println!("confine-service {}", env!("CARGO_PKG_VERSION"));
                return Ok(None);
            }
            "--delegated-cgroup" => {
                options.delegated_cgroup = true;
                continue;
            }
            _ => {}
        }
        let value = *it
            .next()
            .ok_or_else(|| StartError::NoValue(flag.to_string()))?;
        match *flag {
            "--socket" => options.socket = Some(value.into()),
            "--ceiling" => options.ceiling = Some(value.into()),
            "--helper" => options.helper = Some(value.into()),
            "--group" => options.group = Some(value.to_owned()),
            "--max-per-user" => options.caps.per_user = cap(flag, value)?,
            "--max-connections" => options.caps.total = cap(flag, value)?,
            "--idle-limit" => options.idle_limit = Some(Duration::from_secs(number(flag, value)?)),
            "--allow-uid" => options.uids.push(number(flag, value)?),
            other => return Err(StartError::Option(other.to_owned())),
        }
    }
    Ok(Some(options))
}

/// The number `flag` takes.
fn number<N: std::str::FromStr>(flag: &str, value: &str) -> Result<N, StartError> {
    value.parse().map_err(|_| StartError::NotANumber {
        flag: flag.to_owned(),
        value: value.to_owned(),
    })
}

/// A cap on connections: a number above 0.
fn cap(flag: &str, value: &str) -> Result<usize, StartError> {
    match number(flag, value)? {
        0 => Err(StartError::Zero(flag.to_owned())),
        n => Ok(n),
    }
}

/// The listening socket systemd passed (`LISTEN_PID` is this process, `LISTEN_FDS` one
/// descriptor), if it passed one.
fn socket_activation() -> Result<Option<RawFd>, StartError> {
    let ours = std::env::var_os("LISTEN_PID")
        .is_some_and(|pid| pid.to_str() == Some(&std::process::id().to_string()));
    if !ours {
        return Ok(None);
    }
    match std::env::var("LISTEN_FDS").as_deref() {
        Ok("1") => Ok(Some(LISTEN_FDS_START)),
        Ok(other) => Err(StartError::Activation(other.to_owned())),
        Err(_) => Err(StartError::Activation("no number of".to_owned())),
    }
}

/// The helper every peer is served by: `--helper`, or the `confine-helper` beside this
/// program (never one found on `PATH`); it must be a regular file someone may execute.
fn helper(explicit: Option<PathBuf>) -> Result<PathBuf, StartError> {
    let path = match explicit {
        Some(path) => path,
        None => std::env::current_exe()
            .map(|own| own.with_file_name("confine-helper"))
            .map_err(|e| StartError::Helper {
                path: "beside this program".into(),
                why: format!("cannot be found: this program's own path is unknown: {e}"),
            })?,
    };
    let refuse = |why: String| StartError::Helper {
        path: path.clone(),
        why,
    };
    let meta = std::fs::metadata(&path).map_err(|e| refuse(format!("cannot be read: {e}")))?;
    if !meta.is_file() {
        return Err(refuse("is not a regular file".to_owned()));
    }
    if meta.permissions().mode() & 0o111 == 0 {
        return Err(refuse("is not executable".to_owned()));
    }
    if !path.is_absolute() {
        return std::path::absolute(&path).map_err(|e| refuse(e.to_string()));
    }
    Ok(path)
}

/// Everything before serving: what may fail is checked before the socket is made.
fn start(options: Options, activated: Option<RawFd>) -> Result<(), StartError> {
    sys::cloexec_inherited().map_err(StartError::Descriptors)?;
    let helper = helper(options.helper)?;
    let socket = options.socket.ok_or(StartError::NoSocket)?;
    let group = options.group.as_deref().map(socket::Group::named);
    let me = nix::unistd::geteuid();
    let mut uids = options.uids;
    if uids.is_empty() {
        uids.push(me.as_raw());
    }
    let admission = Admission {
        uids,
        group: group.transpose()?,
    };
    let as_peers = admission.admits_others(me.as_raw());
    if as_peers && !me.is_root() {
        return Err(StartError::OtherUid(admission.to_string()));
    }
    if !as_peers && options.idle_limit.is_some() {
        return Err(StartError::RootOnly("--idle-limit"));
    }
    if !as_peers && options.delegated_cgroup {
        return Err(StartError::RootOnly("--delegated-cgroup"));
    }
    let listener = match activated {
        Some(fd) => socket::inherited(fd, &socket, admission.group.as_ref())?,
        None => socket::listen(&socket, admission.group.as_ref())?,
    };
    let how = if as_peers {
        "each peer by a helper running as that peer"
    } else {
        "each connection by a helper of its own"
    };
    log!("serving {} for {admission}, {how}", socket.display());
    let handoff = Handoff {
        helper,
        ceiling: options.ceiling,
        socket,
        caps: options.caps,
        // A user's own service keeps its connections for as long as they are open, as a
        // helper agentd starts does; a root service frees the place of an idle one.
        idle_limit: match as_peers {
            true => options.idle_limit.unwrap_or(IDLE_LIMIT),
            false => Duration::ZERO,
        },
        delegated_cgroup: options.delegated_cgroup,
    };
    serve(&listener, &admission, &handoff).map_err(StartError::Run)
}

/// The service's entry point.
pub(crate) fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let options = match parse(&args) {
        Ok(Some(options)) => options,
        Ok(None) => return ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("confine-service: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match socket_activation().and_then(|activated| start(options, activated)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log!("{e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(list: &[&str]) -> Result<Option<Options>, StartError> {
        parse(&list.iter().map(OsString::from).collect::<Vec<_>>())
    }

    #[test]
    fn options_are_read_and_bad_values_named() {
        let options = parsed(&["--socket", "/s", "--allow-uid", "7", "--max-per-user", "2"]);
        let options = options.expect("parse").expect("options");
        assert_eq!(options.socket, Some(PathBuf::from("/s")));
        assert_eq!((options.uids, options.caps.per_user), (vec![7], 2));
        let zero = parsed(&["--max-connections", "0"]).expect_err("zero");
        assert!(
            zero.to_string()
                .contains("--max-connections must be above 0")
        );
        let word = parsed(&["--allow-uid", "me"]).expect_err("word");
        assert!(word.to_string().contains("--allow-uid needs a number"));
        assert!(matches!(parsed(&["--socket"]), Err(StartError::NoValue(_))));
        assert!(matches!(parsed(&["serve"]), Err(StartError::NoValue(_))));
    }

    #[test]
    fn the_helper_must_be_an_executable_file() {
        let dir = std::env::temp_dir().join(format!("confine-service-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let file = dir.join("confine-helper");
        std::fs::write(&file, "").expect("write");
        let why =
            |p: &std::path::Path| helper(Some(p.to_owned())).expect_err("refused").to_string();
        assert!(why(&dir.join("missing")).contains("cannot be read"));
        assert!(why(&dir).contains("is not a regular file"));
        assert!(why(&file).contains("is not executable"));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        assert_eq!(helper(Some(file.clone())).expect("taken"), file);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
