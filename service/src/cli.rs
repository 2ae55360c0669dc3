//! Command line, and the order of the first steps: parse, keep inherited descriptors out of
//! the helpers, find the helper, check the rule against who runs the service, then listen.

use std::os::fd::RawFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use crate::admit::Admission;
use crate::handoff::{Handoff, IDLE_LIMIT, serve};
use crate::log::log;
use crate::{socket, sys};

const USAGE: &str = "usage: confine-service --socket PATH [--allow-uid UID]... [--group GROUP]
  [--ceiling PATH] [--max-per-user N] [--max-connections N] [--idle-limit SECONDS]
  [--delegated-cgroup] [--helper PATH] | --version      (see confine-service(8))";

const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The descriptor systemd passes the first socket as (`SD_LISTEN_FDS_START`).
const LISTEN_FDS_START: RawFd = 3;
/// Any of the execute bits of a mode.
const EXECUTABLE: u32 = 0o111;

/// What the command line asked for: the hand-off as given (an empty `helper` is the one
/// beside this program; an empty `socket` is missing), and the admission rule.
#[derive(Debug, Default)]
struct Options {
    handoff: Handoff,
    uids: Vec<u32>,
    group: Option<String>,
    idle_limit: Option<Duration>,
}

/// What stops the service from starting; printed, and it exits 2 (usage) or 1.
#[derive(Debug, thiserror::Error)]
enum StartError {
    /// This flag or argument is wrong as given, and why.
    #[error("{0} {1}")]
    Usage(String, &'static str),
    /// The helper at this path cannot be executed, and why.
    #[error("the helper {0} {1}: install it beside confine-service, or name it with --helper")]
    Helper(PathBuf, String),
    /// Whom the rule admits beyond this non-root service's own uid.
    #[error(
        "this service is not root, so it would run the commands of {0} as its own uid; run it \
         as root (each peer's helper then runs as that peer), or give each user a service"
    )]
    OtherUid(String),
    #[error("{0} is for a root service, whose helpers run as its peers: drop {0}")]
    RootOnly(&'static str),
    /// What `LISTEN_FDS` says.
    #[error("the service manager passed {0:?} sockets (LISTEN_FDS); the unit must pass one")]
    Activation(Option<String>),
    #[error("cannot keep inherited descriptors out of the helpers: {0}")]
    Descriptors(std::io::Error),
    #[error("{0}")]
    Socket(#[from] socket::ServiceError),
    #[error("{0}")]
    Run(std::io::Error),
}

/// Parses the command line; `None` asks for the usage or the version (printed here).
fn parse(args: &[String]) -> Result<Option<Options>, StartError> {
    let mut options = Options::default();
    let handoff = &mut options.handoff;
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let usage = |why| StartError::Usage(flag.clone(), why);
        let value = match flag.as_str() {
            "--help" | "-h" => return Ok(None).inspect(|_| println!("{USAGE}")),
            "--version" | "-V" => {
                return Ok(None).inspect(|_| println!("confine-service {VERSION}"));
            }
            "--delegated-cgroup" => "",
            _ if !flag.starts_with("--") => return Err(usage("is not an option")),
            _ => it.next().ok_or_else(|| usage("needs a value"))?,
        };
        match flag.as_str() {
            "--delegated-cgroup" => handoff.delegated_cgroup = true,
            "--socket" => handoff.socket = value.into(),
            "--ceiling" => handoff.ceiling = Some(value.into()),
            "--helper" => handoff.helper = value.into(),
            "--group" => options.group = Some(value.to_owned()),
            "--max-per-user" => handoff.caps.per_user = cap(flag, value)?,
            "--max-connections" => handoff.caps.total = cap(flag, value)?,
            "--idle-limit" => options.idle_limit = Some(Duration::from_secs(number(flag, value)?)),
            "--allow-uid" => options.uids.push(number(flag, value)?),
            _ => return Err(usage("is not an option")),
        }
    }
    Ok(Some(options))
}

/// The number `flag` takes.
fn number<N: std::str::FromStr>(flag: &str, value: &str) -> Result<N, StartError> {
    value
        .parse()
        .map_err(|_| StartError::Usage(flag.to_owned(), "needs a number"))
}

/// A cap on connections: a number above 0 (a service that takes no connection serves nobody).
fn cap(flag: &str, value: &str) -> Result<usize, StartError> {
    let n = number(flag, value)?;
    (n > 0)
        .then_some(n)
        .ok_or_else(|| StartError::Usage(flag.to_owned(), "must be above 0"))
}

/// The listening socket systemd passed (`LISTEN_PID` is this process, `LISTEN_FDS` one
/// descriptor), if it passed one.
fn socket_activation() -> Result<Option<RawFd>, StartError> {
    if std::env::var("LISTEN_PID").ok() != Some(std::process::id().to_string()) {
        return Ok(None);
    }
    match std::env::var("LISTEN_FDS").ok() {
        Some(n) if n == "1" => Ok(Some(LISTEN_FDS_START)),
        n => Err(StartError::Activation(n)),
    }
}

/// The helper every peer is served by: `--helper`, or the `confine-helper` beside this
/// program (never one found on `PATH`); it must be a regular file someone may execute.
fn helper(given: &Path) -> Result<PathBuf, StartError> {
    let beside = std::env::current_exe().map(|own| own.with_file_name("confine-helper"));
    let given_path = Some(given.to_owned()).filter(|p| !p.as_os_str().is_empty());
    let path = given_path.map_or(beside, Ok).and_then(std::path::absolute);
    let path = path.map_err(|e| StartError::Helper(given.to_owned(), e.to_string()))?;
    let why = match std::fs::metadata(&path) {
        Err(e) => format!("cannot be read: {e}"),
        Ok(meta) if !meta.is_file() => "is not a regular file".to_owned(),
        Ok(meta) if meta.permissions().mode() & EXECUTABLE == 0 => "is not executable".to_owned(),
        Ok(_) => return Ok(path),
    };
    Err(StartError::Helper(path, why))
}

/// Everything before serving: what may fail is checked before the socket is made.
fn start(options: Options, activated: Option<RawFd>) -> Result<(), StartError> {
    sys::cloexec_inherited().map_err(StartError::Descriptors)?;
    let mut handoff = options.handoff;
    handoff.helper = helper(&handoff.helper)?;
    if handoff.socket.as_os_str().is_empty() {
        return Err(StartError::Usage("--socket PATH".into(), "is required"));
    }
    let me = nix::unistd::geteuid();
    let mut uids = options.uids;
    if uids.is_empty() {
        uids.push(me.as_raw());
    }
    let group = options.group.as_deref().map(socket::group_named);
    let group = group.transpose()?;
    let admission = Admission { uids, group };
    let as_peers = admission.admits_others(me.as_raw());
    if as_peers && !me.is_root() {
        return Err(StartError::OtherUid(admission.to_string()));
    }
    if !as_peers && options.idle_limit.is_some() {
        return Err(StartError::RootOnly("--idle-limit"));
    }
    if !as_peers && handoff.delegated_cgroup {
        return Err(StartError::RootOnly("--delegated-cgroup"));
    }
    let (socket, group) = (&handoff.socket, admission.group.as_ref());
    let listener = match activated {
        Some(fd) => socket::inherited(fd, socket, group)?,
        None => socket::listen(socket, group)?,
    };
    // A user's own service keeps its connections for as long as they are open, as a helper
    // agentd starts does; a root service frees the place of an idle one.
    let (how, idle_limit) = match as_peers {
        true => (
            "each peer by a helper running as that peer",
            options.idle_limit,
        ),
        false => (
            "each connection by a helper of its own",
            Some(Duration::ZERO),
        ),
    };
    handoff.idle_limit = idle_limit.unwrap_or(IDLE_LIMIT);
    log!("serving {} for {admission}, {how}", socket.display());
    serve(&listener, &admission, &handoff).map_err(StartError::Run)
}

/// The service's entry point.
pub(crate) fn main() -> ExitCode {
    let args = std::env::args_os()
        .skip(1)
        .map(std::ffi::OsString::into_string);
    let args = args.collect::<Result<Vec<_>, _>>();
    let args = args.map_err(|_| StartError::Usage("arguments".into(), "must be UTF-8"));
    let options = match args.and_then(|args| parse(&args)) {
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
        parse(&list.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>())
    }

    #[test]
    fn options_are_read_and_bad_values_named() {
        let options = parsed(&["--socket", "/s", "--allow-uid", "7", "--max-per-user", "2"]);
        let options = options.expect("parse").expect("options");
        assert_eq!(options.handoff.socket, PathBuf::from("/s"));
        assert_eq!((options.uids, options.handoff.caps.per_user), (vec![7], 2));
        assert_eq!(options.handoff.caps.total, crate::admit::MAX_CONNECTIONS);
        let zero = parsed(&["--max-connections", "0"]).expect_err("zero");
        assert_eq!(zero.to_string(), "--max-connections must be above 0");
        let word = parsed(&["--allow-uid", "me"]).expect_err("word");
        assert_eq!(word.to_string(), "--allow-uid needs a number");
        assert!(parsed(&["--socket"]).is_err_and(|e| e.to_string() == "--socket needs a value"));
        assert!(parsed(&["serve"]).is_err_and(|e| e.to_string() == "serve is not an option"));
    }

    #[test]
    fn the_helper_must_be_an_executable_file() {
        let dir = std::env::temp_dir().join(format!("confine-service-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let file = dir.join("confine-helper");
        std::fs::write(&file, "").expect("write");
        let why = |p: &Path| helper(p).expect_err("refused").to_string();
        assert!(why(&dir.join("missing")).contains("cannot be read"));
        assert!(why(&dir).contains("is not a regular file"));
        assert!(why(&file).contains("is not executable"));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        assert_eq!(helper(&file).expect("taken"), file);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
