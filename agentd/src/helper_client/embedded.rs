//! Starting a private confine-helper on one end of a socketpair.
//!
//! The helper gets its end as its stdin, `--fd 0` (it moves the socket above the standard
//! streams before it reads anything and puts `/dev/null` in its place), `--ceiling PATH` when
//! agentd was given a ceiling file, and nothing else of agentd's: an empty environment, stdout
//! on `/dev/null`, and stderr shared so its messages reach the user. It runs in its own process
//! group so a Ctrl-C at the terminal reaches agentd alone, which then cancels commands in an
//! orderly way instead of losing the helper under them.
//!
//! The socket goes as stdin, not at a number of its own, because the standard streams are all
//! a child can be given without code of agentd's running between `fork` and `execve`: so the
//! helper is started by `posix_spawn`, which shares agentd's memory until the `execve` instead
//! of copying its page tables (about 0.2 ms of each `agentd run`), and no descriptor is ever
//! left inheritable in agentd for another thread's child to take.

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::fcntl::{FcntlArg, fcntl};
use tokio::net::UnixStream;
use tokio::process::{Child, Command};

use super::ClientError;

/// The lowest descriptor number agentd's end of the socketpair may have in agentd: above the
/// standard streams, which the child's are made of.
const ABOVE_STDIO: RawFd = 3;

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

/// Starts `path` as `confine-helper --fd 0 [--ceiling CEILING]` with one end of a fresh
/// socketpair as its stdin.
pub fn start_embedded(path: &Path, ceiling: Option<&Path>) -> Result<EmbeddedHelper, ClientError> {
    let start_error = |source: std::io::Error| ClientError::StartHelper {
        path: path.to_owned(),
        source,
    };
    // Both ends are close-on-exec, so no other child agentd starts can inherit either; the
    // helper's end reaches the helper only as the stdin it is given.
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().map_err(start_error)?;
    let theirs = above_stdio(theirs.into()).map_err(start_error)?;

    let mut command = Command::new(path);
    command.arg("--fd").arg("0");
    if let Some(ceiling) = ceiling {
        command.arg("--ceiling").arg(ceiling);
    }
    command
        .env_clear()
        .stdin(Stdio::from(theirs))
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .process_group(0)
        .kill_on_drop(false);
    // `command` drops its copy of the helper's end when it is dropped, after the spawn.
    let child = command.spawn().map_err(start_error)?;
    drop(command);
    let pid = child.id().unwrap_or_default();

    ours.set_nonblocking(true).map_err(start_error)?;
    let stream = UnixStream::from_std(ours).map_err(start_error)?;
    Ok(EmbeddedHelper { stream, child, pid })
}

/// A socket on fd 0, 1 or 2 would be one of the streams the child's stdio is made of; it is
/// moved above them. (Rust's runtime opens `/dev/null` on any of the three a program starts
/// without, so only a caller that closed one since can get there.)
fn above_stdio(fd: OwnedFd) -> std::io::Result<OwnedFd> {
    if fd.as_raw_fd() >= ABOVE_STDIO {
        return Ok(fd);
    }
    let raw = fcntl(fd.as_fd(), FcntlArg::F_DUPFD_CLOEXEC(ABOVE_STDIO))?;
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
