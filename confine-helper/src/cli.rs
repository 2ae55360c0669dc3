//! Command line, and the order of the first steps: parse, sanitize, then serve.
//!
//! Arguments are the only input read before the process is sanitized; they say which inherited
//! descriptor is the connection, so it is the one descriptor kept open.

use std::ffi::OsString;
use std::os::fd::RawFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::log;
use crate::server::{PeerRule, Server};
use crate::{service, sys};

const USAGE: &str = "\
usage:
  confine-helper --fd N
      serve agentd over the connected Unix socket inherited as descriptor N (embedded mode)
  confine-helper serve --socket PATH [--allow-uid UID]...
      listen on PATH (its directory must be private: 0700) and serve peers whose uid is allowed
      (default: this process's own uid)
  confine-helper --version";

/// What the command line asked for.
#[derive(Debug, PartialEq, Eq)]
pub enum Invocation {
    Embedded {
        fd: RawFd,
    },
    Serve {
        socket: PathBuf,
        allowed_uids: Vec<u32>,
    },
    Version,
    Help,
}

/// Parses the helper's small command line.
pub fn parse(args: &[OsString]) -> Result<Invocation, String> {
    let text: Vec<&str> = args
        .iter()
        .map(|a| a.to_str().ok_or("arguments must be UTF-8"))
        .collect::<Result<_, _>>()?;
    match text.as_slice() {
        ["--fd", n] => {
            let fd: RawFd = n
                .parse()
                .map_err(|_| format!("--fd needs a number, got {n:?}"))?;
            if fd < 3 {
                return Err(format!(
                    "--fd {fd}: descriptors 0-2 are stdio, not a socket"
                ));
            }
            Ok(Invocation::Embedded { fd })
        }
        ["serve", rest @ ..] => {
            let mut socket = None;
            let mut allowed_uids = Vec::new();
            let mut it = rest.iter();
            while let Some(flag) = it.next() {
                let value = it.next().ok_or(format!("{flag} needs a value"))?;
                match *flag {
                    "--socket" => socket = Some(PathBuf::from(value)),
                    "--allow-uid" => allowed_uids.push(
                        value
                            .parse()
                            .map_err(|_| format!("--allow-uid needs a number, got {value:?}"))?,
                    ),
                    other => return Err(format!("unknown option {other:?} for serve")),
                }
            }
            let socket = socket.ok_or("serve needs --socket PATH")?;
            if allowed_uids.is_empty() {
                allowed_uids.push(nix::unistd::geteuid().as_raw());
            }
            Ok(Invocation::Serve {
                socket,
                allowed_uids,
            })
        }
        ["--version"] | ["-V"] => Ok(Invocation::Version),
        ["--help"] | ["-h"] => Ok(Invocation::Help),
        [] => Err("no mode given".into()),
        [other, ..] => Err(format!("unknown argument {other:?}")),
    }
}

/// The helper's entry point.
pub fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let invocation = match parse(&args) {
        Ok(invocation) => invocation,
        Err(e) => {
            eprintln!("confine-helper: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let keep = match invocation {
        Invocation::Embedded { fd } => fd,
        _ => -1,
    };
    if let Err(e) = sanitize(keep) {
        eprintln!("confine-helper: cannot sanitize the process: {e}");
        return ExitCode::FAILURE;
    }
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
        Invocation::Embedded { fd } => embedded(fd),
        Invocation::Serve {
            socket,
            allowed_uids,
        } => serve(socket, allowed_uids),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// Closes inherited descriptors, clears the environment and makes the process undumpable,
/// before anything is read from a peer.
fn sanitize(keep: RawFd) -> std::io::Result<()> {
    sys::sanitize_fds(keep)?;
    sys::clear_environment();
    nix::sys::prctl::set_dumpable(false)?;
    Ok(())
}

fn embedded(fd: RawFd) -> Result<(), String> {
    let owned = sys::inherited_socket(fd).map_err(|e| format!("--fd {fd}: {e}"))?;
    let sock = UnixStream::from(owned);
    nix::fcntl::fcntl(
        &sock,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    )
    .map_err(|e| format!("--fd {fd}: {e}"))?;
    Server::embedded(sock).run().map_err(|e| e.to_string())
}

fn serve(socket: PathBuf, allowed_uids: Vec<u32>) -> Result<(), String> {
    let listener = service::listen(&socket).map_err(|e| e.to_string())?;
    log!("serving {} for uids {:?}", socket.display(), allowed_uids);
    Server::service(listener, PeerRule { allowed_uids })
        .run()
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn embedded_mode_takes_a_descriptor_above_stdio() {
        assert_eq!(
            parse(&args(&["--fd", "3"])),
            Ok(Invocation::Embedded { fd: 3 })
        );
        assert!(parse(&args(&["--fd", "1"])).is_err());
        assert!(parse(&args(&["--fd", "x"])).is_err());
    }

    #[test]
    fn serve_allows_only_its_own_uid_by_default() {
        let me = nix::unistd::geteuid().as_raw();
        assert_eq!(
            parse(&args(&["serve", "--socket", "/run/x/s"])),
            Ok(Invocation::Serve {
                socket: "/run/x/s".into(),
                allowed_uids: vec![me]
            })
        );
        assert_eq!(
            parse(&args(&[
                "serve",
                "--socket",
                "/s",
                "--allow-uid",
                "7",
                "--allow-uid",
                "8"
            ])),
            Ok(Invocation::Serve {
                socket: "/s".into(),
                allowed_uids: vec![7, 8]
            })
        );
    }

    #[test]
    fn unknown_or_incomplete_arguments_are_rejected() {
        assert!(parse(&args(&[])).is_err());
        assert!(parse(&args(&["serve"])).is_err());
        assert!(parse(&args(&["serve", "--socket"])).is_err());
        assert!(parse(&args(&["serve", "--socket", "/s", "--bogus", "1"])).is_err());
        assert!(parse(&args(&["run"])).is_err());
    }
}
