//! The listening socket, and the file-system half of who may reach it.
//!
//! Without a group, the socket is 0600 in a private directory (0700, the helper's): only its
//! own uid can reach it. With a group (`--group NAME`), the socket is `owner:NAME` 0660 — on
//! Linux `connect` needs write permission on the socket file, so its mode and group are the
//! gate — in a directory of the helper's that nobody else may write (created 0750
//! `owner:NAME`; systemd's socket unit makes it 0755). Either way nobody but the helper's uid
//! can replace the socket, and `SO_PEERCRED` still decides every connection ([`super::admit`]).
//!
//! Under systemd the socket is the one the socket unit made, passed as descriptor 3
//! (`LISTEN_FDS`); it is taken only after the same checks, and refused if it is not the Unix
//! stream socket at `--socket`, listening, or if its file is open to more than the rule says.

use std::os::fd::{OwnedFd, RawFd};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use nix::sys::socket::{SockType, UnixAddr, getsockname, getsockopt, sockopt};
use nix::sys::stat::{Mode, umask};
use nix::unistd::{Gid, chown};

/// The group whose members may reach the socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Group {
    pub(crate) name: String,
    pub(crate) gid: u32,
}

impl Group {
    /// The group named `name`, from the group database.
    pub(crate) fn named(name: &str) -> Result<Group, ServiceError> {
        match nix::unistd::Group::from_name(name) {
            Ok(Some(group)) => Ok(Group {
                name: group.name,
                gid: group.gid.as_raw(),
            }),
            Ok(None) => Err(ServiceError::NoGroup(name.to_owned())),
            Err(e) => Err(ServiceError::GroupLookup(name.to_owned(), e)),
        }
    }
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
    /// `why` ends with what to do.
    #[error("socket directory {path} is not safe: {why}")]
    UnsafeDir { path: PathBuf, why: String },
    #[error("socket {path} is not safe: {why}")]
    UnsafeSocket { path: PathBuf, why: String },
    #[error("another confine-helper is already serving {0}")]
    InUse(PathBuf),
    #[error("{0} exists and is not a socket; refusing to replace it")]
    NotASocket(PathBuf),
    #[error("cannot listen on {path}: {source}")]
    Bind {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no group named {0}; create it (addgroup --system {0}) or name another with --group")]
    NoGroup(String),
    #[error("cannot look up group {0}: {1}")]
    GroupLookup(String, nix::Error),
    #[error("the socket passed by the service manager (descriptor {fd}) {why}")]
    Inherited { fd: RawFd, why: String },
}

/// Creates (or checks) the socket's directory and binds the socket in it: 0600, or 0660 and
/// owned by `group` when there is one.
pub(crate) fn listen(path: &Path, group: Option<&Group>) -> Result<UnixListener, ServiceError> {
    let dir = parent(path)?;
    if !dir.exists() {
        let mode = if group.is_some() { 0o750 } else { 0o700 };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(mode)
            .create(dir)
            .and_then(|()| set_group(dir, group))
            .and_then(|()| std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)))
            .map_err(|source| ServiceError::CreateDir {
                path: dir.to_owned(),
                source,
            })?;
    }
    check_dir(dir, group)?;
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if UnixStream::connect(path).is_ok() {
                return Err(ServiceError::InUse(path.to_owned()));
            }
            std::fs::remove_file(path).map_err(|source| bind_error(path, source))?;
        }
        Ok(_) => return Err(ServiceError::NotASocket(path.to_owned())),
        Err(_) => {}
    }
    let (umask_bits, mode) = if group.is_some() {
        (0o117, 0o660)
    } else {
        (0o177, 0o600)
    };
    let old = umask(Mode::from_bits_truncate(umask_bits));
    let bound = UnixListener::bind(path);
    umask(old);
    let listener = bound.map_err(|source| bind_error(path, source))?;
    set_group(path, group)
        .and_then(|()| std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)))
        .and_then(|()| listener.set_nonblocking(true))
        .map_err(|source| bind_error(path, source))?;
    Ok(listener)
}

/// Takes the listening socket a service manager passed as descriptor `fd`, after checking that
/// it is the Unix stream socket at `path`, listening, in a safe directory, with a file no more
/// open than `listen` would have made it. It is made close-on-exec and non-blocking.
pub(crate) fn inherited(
    fd: RawFd,
    path: &Path,
    group: Option<&Group>,
) -> Result<UnixListener, ServiceError> {
    let refuse = |why: String| ServiceError::Inherited { fd, why };
    // The descriptor was handed to this process (LISTEN_PID) and nothing else in it owns it.
    let owned = crate::sys::inherited_socket(fd).map_err(|e| refuse(e.to_string()))?;
    check_inherited(&owned, path).map_err(|e| refuse(e.to_string()))?;
    check_dir(parent(path)?, group)?;
    check_socket_file(path, group)?;
    let listener = UnixListener::from(owned);
    nix::fcntl::fcntl(
        &listener,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    )
    .map_err(|e| refuse(e.to_string()))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| refuse(e.to_string()))?;
    Ok(listener)
}

fn check_inherited(sock: &OwnedFd, path: &Path) -> Result<(), NotTheSocket> {
    if getsockopt(sock, sockopt::SockType)? != SockType::Stream {
        return Err(NotTheSocket::NotStream);
    }
    if !getsockopt(sock, sockopt::AcceptConn)? {
        return Err(NotTheSocket::NotListening);
    }
    let addr: UnixAddr =
        getsockname(std::os::fd::AsRawFd::as_raw_fd(sock)).map_err(NotTheSocket::NoAddress)?;
    let bound = addr.path().map(Path::to_owned);
    if bound.as_deref() != Some(path) {
        return Err(NotTheSocket::Elsewhere {
            bound: bound.map_or_else(
                || "an unnamed or abstract address".to_owned(),
                |p| p.display().to_string(),
            ),
            socket: path.to_owned(),
        });
    }
    Ok(())
}

/// How an inherited descriptor is not the listening socket `--socket` names.
#[derive(Debug, thiserror::Error)]
enum NotTheSocket {
    #[error("{0}")]
    Option(#[from] nix::Error),
    #[error("is not a stream socket")]
    NotStream,
    #[error("is not listening")]
    NotListening,
    #[error("has no Unix address: {0}")]
    NoAddress(nix::Error),
    #[error("is bound to {bound}, not to --socket {}", socket.display())]
    Elsewhere { bound: String, socket: PathBuf },
}

fn parent(path: &Path) -> Result<&Path, ServiceError> {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .ok_or_else(|| ServiceError::NoParent(path.to_owned()))
}

fn bind_error(path: &Path, source: std::io::Error) -> ServiceError {
    ServiceError::Bind {
        path: path.to_owned(),
        source,
    }
}

fn set_group(path: &Path, group: Option<&Group>) -> std::io::Result<()> {
    match group {
        Some(group) => chown(path, None, Some(Gid::from_raw(group.gid))).map_err(Into::into),
        None => Ok(()),
    }
}

/// The directory: ours, not a link, and nobody else may write it. Without a group, nobody else
/// may even enter it; with one, its members must be able to enter it.
fn check_dir(dir: &Path, group: Option<&Group>) -> Result<(), ServiceError> {
    let meta = std::fs::symlink_metadata(dir).map_err(|source| ServiceError::Inspect {
        path: dir.to_owned(),
        source,
    })?;
    let mode = meta.mode() & 0o7777;
    let why = if !meta.is_dir() {
        Some("it is not a directory (or is a symlink)".to_owned())
    } else if meta.uid() != nix::unistd::geteuid().as_raw() {
        Some(format!(
            "it is owned by uid {}, not {}",
            meta.uid(),
            nix::unistd::geteuid()
        ))
    } else {
        match group {
            None if mode & 0o077 != 0 => Some(format!(
                "its mode is {mode:o}, so other users can reach the socket"
            )),
            Some(_) if mode & 0o022 != 0 => Some(format!(
                "its mode is {mode:o}, so others could replace the socket; chmod go-w it"
            )),
            Some(g) if mode & 0o001 == 0 && !(mode & 0o010 != 0 && meta.gid() == g.gid) => {
                Some(format!(
                    "members of group {} cannot enter it (mode {mode:o}, group {}); \
                     chgrp {} it and chmod g+x it",
                    g.name,
                    meta.gid(),
                    g.name
                ))
            }
            _ => None,
        }
    };
    // Without a group, the fix is always the same private directory.
    let fix = match group {
        None => {
            "; use a directory only this user can enter (chmod 700), or choose another \
                 --socket path"
        }
        Some(_) => "",
    };
    match why {
        None => Ok(()),
        Some(why) => Err(ServiceError::UnsafeDir {
            path: dir.to_owned(),
            why: format!("{why}{fix}"),
        }),
    }
}

/// A socket file made by someone else (the service manager): ours, no access for others, and
/// group access only for `group`.
fn check_socket_file(path: &Path, group: Option<&Group>) -> Result<(), ServiceError> {
    let meta = std::fs::symlink_metadata(path).map_err(|source| ServiceError::Inspect {
        path: path.to_owned(),
        source,
    })?;
    let mode = meta.mode() & 0o7777;
    let why = if !meta.file_type().is_socket() {
        Some("it is not a socket".to_owned())
    } else if meta.uid() != nix::unistd::geteuid().as_raw() {
        Some(format!("it is owned by uid {}", meta.uid()))
    } else if mode & 0o007 != 0 {
        Some(format!("its mode is {mode:o}: other users could connect"))
    } else if mode & 0o070 != 0 && group.is_none_or(|g| g.gid != meta.gid()) {
        Some(format!(
            "its mode is {mode:o} and its group (gid {}) is not the one --group names",
            meta.gid()
        ))
    } else {
        None
    };
    match why {
        None => Ok(()),
        Some(why) => Err(ServiceError::UnsafeSocket {
            path: path.to_owned(),
            why,
        }),
    }
}
