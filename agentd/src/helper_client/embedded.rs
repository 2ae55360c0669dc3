//! Starting a private confine-helper on one end of a socketpair.
//!
//! The helper gets its end as fd 3 (and `--ceiling PATH` when agentd was given a ceiling file)
//! and nothing else of agentd's: an empty environment, stdin
//! and stdout on `/dev/null`, and stderr shared so its messages reach the user. It runs in its
//! own process group so a Ctrl-C at the terminal reaches agentd alone, which then cancels
//! commands in an orderly way instead of losing the helper under them.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use tokio::net::UnixStream;
use tokio::process::{Child, Command};

use super::ClientError;

/// The descriptor number the helper is told to use (`--fd 3`).
const HELPER_FD: RawFd = 3;

/// How long a helper that closed the socket during the handshake gets to exit by itself before
/// it is killed; only so that its own exit status can be reported.
const EXIT_GRACE: Duration = Duration::from_secs(1);

/// A started helper whose handshake has not happened yet.
#[derive(Debug)]
pub struct EmbeddedHelper {
    /// agentd's end of the socketpair.
    pub stream: UnixStream,
    pub child: Child,
    pub pid: u32,
}

/// Starts `path` as `confine-helper --fd 3 [--ceiling CEILING]` with one end of a fresh
/// socketpair.
pub fn start_embedded(path: &Path, ceiling: Option<&Path>) -> Result<EmbeddedHelper, ClientError> {
    let start_error = |source: std::io::Error| ClientError::StartHelper {
        path: path.to_owned(),
        source,
    };
    // Both ends are close-on-exec, so no other child agentd starts can inherit either.
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().map_err(start_error)?;
    let theirs = above_stdio(theirs.into()).map_err(start_error)?;
    let theirs_raw = theirs.as_raw_fd();

    let mut command = Command::new(path);
    command.arg("--fd").arg(HELPER_FD.to_string());
    if let Some(ceiling) = ceiling {
        command.arg("--ceiling").arg(ceiling);
    }
    command
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .process_group(0)
        .kill_on_drop(false);
    // SAFETY: the closure runs in the forked child before exec, where only async-signal-safe
    // work is allowed. It allocates nothing and takes no locks: it calls fcntl(2) or dup2(2)
    // on descriptor numbers captured by value. `theirs` is kept open in the parent until
    // `spawn` returns, so `theirs_raw` names the socket in the child too. The descriptor
    // dup2 creates (fd 3) is deliberately left open for the helper, so it is released with
    // `into_raw_fd` rather than closed.
    unsafe {
        command.pre_exec(move || {
            let source = BorrowedFd::borrow_raw(theirs_raw);
            if theirs_raw == HELPER_FD {
                // dup2 onto itself is a no-op that would leave close-on-exec set.
                fcntl(source, FcntlArg::F_SETFD(FdFlag::empty()))?;
            } else {
                // dup2 clears close-on-exec on the new descriptor.
                let _helper_fd: RawFd = nix::unistd::dup2_raw(source, HELPER_FD)?.into_raw_fd();
            }
            Ok(())
        });
    }
    let child = command.spawn().map_err(start_error)?;
    drop(theirs);
    let pid = child.id().unwrap_or_default();

    ours.set_nonblocking(true).map_err(start_error)?;
    let stream = UnixStream::from_std(ours).map_err(start_error)?;
    Ok(EmbeddedHelper { stream, child, pid })
}

/// The child's stdio is set up before the pre-exec hook runs, so a socket sitting on fd 0, 1 or 2
/// (possible when agentd itself was started with one of those closed) would be overwritten.
fn above_stdio(fd: OwnedFd) -> std::io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    let raw = fcntl(fd.as_fd(), FcntlArg::F_DUPFD_CLOEXEC(HELPER_FD))?;
    // SAFETY: F_DUPFD_CLOEXEC just returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// Waits for the helper in the background so it never lingers as a zombie, and says so if it
/// ended abnormally.
pub fn reap(mut child: Child, pid: u32) {
    tokio::spawn(async move {
        match child.wait().await {
            Ok(status) if status.success() => {}
            Ok(status) => eprintln!("agentd: confine-helper (pid {pid}) {}", describe(status)),
            Err(e) => eprintln!("agentd: cannot wait for confine-helper (pid {pid}): {e}"),
        }
    });
}

/// How a helper that closed its connection ended, waited for at most [`EXIT_GRACE`] (it is
/// exiting): `Some(None)` for a clean exit, `Some(Some(how))` otherwise, `None` if it has not
/// ended yet.
pub async fn ended(child: &mut Child) -> Option<Option<String>> {
    match tokio::time::timeout(EXIT_GRACE, child.wait()).await {
        Ok(Ok(status)) if status.success() => Some(None),
        Ok(Ok(status)) => Some(Some(describe(status))),
        Ok(Err(e)) => Some(Some(format!("cannot be waited for: {e}"))),
        Err(_) => None,
    }
}

/// Stops a helper whose handshake failed and describes how it ended.
pub async fn stop(mut child: Child) -> String {
    let status = match tokio::time::timeout(EXIT_GRACE, child.wait()).await {
        Ok(waited) => waited,
        Err(_) => {
            let _ = child.start_kill();
            child.wait().await
        }
    };
    match status {
        Ok(status) => format!("confine-helper {}", describe(status)),
        Err(e) => format!("cannot wait for confine-helper: {e}"),
    }
}

fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        (None, None) => format!("ended: {status}"),
    }
}
