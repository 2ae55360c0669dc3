//! Service mode: the listening socket and who may connect to it.
//!
//! The socket's directory must be private (0700, ours) because the directory, not the socket
//! file, is what keeps other users from reaching it; the socket itself is 0600. Every peer is
//! then checked by `SO_PEERCRED` against the allowed uids.

use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use nix::sys::stat::{Mode, umask};

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
