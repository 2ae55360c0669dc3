//! Starting a program as systemd starts a socket-activated service: the listening socket as
//! descriptor 3, and `LISTEN_PID` (the program's own pid) and `LISTEN_FDS=1` in its environment.
//! Used by confine-helper's service tests and by the packaged units' test, through `#[path]`.

use std::ffi::OsStr;
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

/// `program ARGS`, started by a shell that sets `LISTEN_PID` to its own pid (which `exec`
/// keeps) with `listener` at descriptor 3.
pub fn activated<S: AsRef<OsStr>>(program: &OsStr, args: &[S], listener: OwnedFd) -> Command {
    let mut shell = Command::new("sh");
    shell
        .args(["-c", "LISTEN_PID=$$ LISTEN_FDS=1 exec \"$0\" \"$@\""])
        .arg(program)
        .args(args);
    // SAFETY: dup2 and fcntl are async-signal-safe; `listener` lives in the closure as long as
    // the command.
    unsafe {
        shell.pre_exec(move || {
            if listener.as_raw_fd() == 3 {
                // dup2 onto itself would keep close-on-exec.
                let none = nix::fcntl::FdFlag::empty();
                nix::fcntl::fcntl(&listener, nix::fcntl::FcntlArg::F_SETFD(none))?;
            } else {
                // The duplicate at 3 is the child's; its number is all it needs.
                let _ = nix::unistd::dup2_raw(&listener, 3)?.into_raw_fd();
            }
            Ok(())
        });
    }
    shell
}

/// A Unix stream socket bound at `path`, listening unless `listening` is false, as a service
/// manager makes the socket it passes.
pub fn bound(path: &Path, listening: bool) -> OwnedFd {
    use nix::sys::socket::{AddressFamily, Backlog, SockFlag, SockType, UnixAddr};
    let sock = nix::sys::socket::socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .expect("socket");
    let addr = UnixAddr::new(path).expect("address");
    nix::sys::socket::bind(sock.as_raw_fd(), &addr).expect("bind");
    if listening {
        nix::sys::socket::listen(&sock, Backlog::new(64).expect("backlog")).expect("listen");
    }
    sock
}
