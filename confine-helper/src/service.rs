//! Service mode: the listening socket and who may connect to it.
//!
//! The socket's directory must be private (0700, ours) because the directory, not the socket
//! file, is what keeps other users from reaching it; the socket itself is 0600. Every peer is
//! then checked by `SO_PEERCRED` against the allowed uids.
//!
//! A connection the helper cannot accept (it has no descriptor left) stays in the backlog while
//! the listener rests for [`ACCEPT_PAUSE`]: polled again at once, it would wake the loop over and
//! over, logging a failed accept each time, until a descriptor is freed.

use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::stat::{Mode, umask};

use crate::log;

/// How long the listener rests after a failed accept.
pub(crate) const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// Whether the listener rests after a failed accept, and whether that failure was logged.
#[derive(Debug, Default)]
pub(crate) struct Pause {
    until: Option<Instant>,
    /// Logged once per run of failures; the next accepted connection ends the run.
    logged: bool,
}

impl Pause {
    /// When the listener is polled again, while it rests.
    pub(crate) fn until(&self) -> Option<Instant> {
        self.until
    }

    /// Ends the rest once its time has come.
    pub(crate) fn wake(&mut self, now: Instant) {
        if self.until.is_some_and(|until| until <= now) {
            self.until = None;
        }
    }
}

/// Accepts every pending connection. A peer whose uid (by `SO_PEERCRED`) is not in
/// `allowed_uids` is logged and dropped without a word; each accepted one comes with the label
/// its log lines carry. A failed accept makes the listener rest (`pause`).
pub(crate) fn accept(
    listener: &UnixListener,
    allowed_uids: &[u32],
    pause: &mut Pause,
) -> Vec<(UnixStream, String)> {
    let mut accepted = Vec::new();
    loop {
        let sock = match listener.accept() {
            Ok((sock, _)) => sock,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                if !pause.logged {
                    log!(
                        "accept failed: {e}; waiting connections are retried every {} ms \
                         (logged once until one is accepted)",
                        ACCEPT_PAUSE.as_millis()
                    );
                    pause.logged = true;
                }
                pause.until = Some(Instant::now() + ACCEPT_PAUSE);
                break;
            }
        };
        pause.logged = false;
        let cred =
            match nix::sys::socket::getsockopt(&sock, nix::sys::socket::sockopt::PeerCredentials) {
                Ok(cred) => cred,
                Err(e) => {
                    log!("refused a peer whose credentials cannot be read: {e}");
                    continue;
                }
            };
        if !allowed_uids.contains(&cred.uid()) {
            log!(
                "refused peer uid {} (pid {}): not in the allowed uids {:?}",
                cred.uid(),
                cred.pid(),
                allowed_uids
            );
            continue;
        }
        accepted.push((sock, format!("peer uid {} pid {}", cred.uid(), cred.pid())));
    }
    accepted
}

/// Why the service socket could not be set up.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ServiceError {
    #[error("socket path {0} has no parent directory")]
    NoParent(PathBuf),
    #[error("cannot create socket directory {path}: {source}")]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot inspect {path}: {source}")]
    Inspect {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "socket directory {path} is not safe: {why}; use a directory only this user can enter \
         (chmod 700), or choose another --socket path"
    )]
    UnsafeDir { path: PathBuf, why: String },
    #[error("another confine-helper is already serving {0}")]
    InUse(PathBuf),
    #[error("{0} exists and is not a socket; refusing to replace it")]
    NotASocket(PathBuf),
    #[error("cannot listen on {path}: {source}")]
    Bind {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Creates (or checks) the private directory and binds a 0600 socket in it.
pub(crate) fn listen(path: &Path) -> Result<UnixListener, ServiceError> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .ok_or_else(|| ServiceError::NoParent(path.to_owned()))?;
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|source| ServiceError::CreateDir {
                path: dir.to_owned(),
                source,
            })?;
    }
    check_private_dir(dir)?;
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if UnixStream::connect(path).is_ok() {
                return Err(ServiceError::InUse(path.to_owned()));
            }
            std::fs::remove_file(path).map_err(|source| ServiceError::Bind {
                path: path.to_owned(),
                source,
            })?;
        }
        Ok(_) => return Err(ServiceError::NotASocket(path.to_owned())),
        Err(_) => {}
    }
    let old = umask(Mode::from_bits_truncate(0o177));
    let bound = UnixListener::bind(path);
    umask(old);
    let listener = bound.map_err(|source| ServiceError::Bind {
        path: path.to_owned(),
        source,
    })?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(|source| {
        ServiceError::Bind {
            path: path.to_owned(),
            source,
        }
    })?;
    listener
        .set_nonblocking(true)
        .map_err(|source| ServiceError::Bind {
            path: path.to_owned(),
            source,
        })?;
    Ok(listener)
}

fn check_private_dir(dir: &Path) -> Result<(), ServiceError> {
    let meta = std::fs::symlink_metadata(dir).map_err(|source| ServiceError::Inspect {
        path: dir.to_owned(),
        source,
    })?;
    let unsafe_dir = |why: String| {
        Err(ServiceError::UnsafeDir {
            path: dir.to_owned(),
            why,
        })
    };
    if !meta.is_dir() {
        return unsafe_dir("it is not a directory (or is a symlink)".into());
    }
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me {
        return unsafe_dir(format!("it is owned by uid {}, not {me}", meta.uid()));
    }
    if meta.mode() & 0o077 != 0 {
        return unsafe_dir(format!(
            "its mode is {:o}, so other users can reach the socket",
            meta.mode() & 0o7777
        ));
    }
    Ok(())
}
