//! The listening socket, and the file-system half of who may reach it.
//!
//! Without a group, the socket is 0600 in a private directory (0700, the service's): only its
//! own uid can reach it. With a group (`--group NAME`), the socket is `owner:NAME` 0660 — on
//! Linux `connect` needs write permission on the socket file, so its mode and group are the
//! gate — in a directory of the service's that nobody else may write (created 0750
//! `owner:NAME`; systemd's socket unit makes it 0755). Either way nobody but the service's uid
//! can replace the socket, and `SO_PEERCRED` still decides every connection ([`crate::admit`]).
//!
//! Under systemd the socket is the one the socket unit made, passed as descriptor 3
//! (`LISTEN_FDS`); it is taken only after the same checks, and refused if it is not the Unix
//! stream socket at `--socket`, listening, or if its file is open to more than the rule says.

use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use nix::sys::socket::{SockType, UnixAddr, getsockname, getsockopt, sockopt};
use nix::sys::stat::{Mode, umask};
use nix::unistd::{Group, chown, geteuid};

/// The permission bits of the socket file and of the directory made for it: private, or open
/// to the group.
const PRIVATE: (u32, u32) = (0o600, 0o700);
const GROUP: (u32, u32) = (0o660, 0o750);
/// Bits of a mode: the group's, others', and write for both.
const GROUP_BITS: u32 = 0o070;
const OTHER_BITS: u32 = 0o007;
const NOT_OWNER_WRITE: u32 = 0o022;
const GROUP_SEARCH: u32 = 0o010;
const OTHER_SEARCH: u32 = 0o001;

/// The group named `name` (`--group`), whose members may reach the socket.
pub(crate) fn group_named(name: &str) -> Result<Group, ServiceError> {
    match Group::from_name(name) {
        Ok(group) => group.ok_or_else(|| ServiceError::NoGroup(name.to_owned())),
        Err(e) => Err(ServiceError::GroupLookup(name.to_owned(), e)),
    }
}

/// Why the service socket could not be set up.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ServiceError {
    #[error("socket path {0} has no parent directory")]
    NoParent(PathBuf),
    /// `what` failed on `path`: creating, inspecting or binding it.
    #[error("cannot {what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// `why` ends with what to do.
    #[error("socket directory {path} is not safe: {why}")]
    UnsafeDir { path: PathBuf, why: String },
    #[error("socket {path} is not safe: {why}")]
    UnsafeSocket { path: PathBuf, why: String },
    #[error("another confine-service is already serving {0}")]
    InUse(PathBuf),
    #[error("{0} exists and is not a socket; refusing to replace it")]
    NotASocket(PathBuf),
    #[error("no group named {0}; create it (addgroup --system {0}) or name another with --group")]
    NoGroup(String),
    #[error("cannot look up group {0}: {1}")]
    GroupLookup(String, nix::Error),
    #[error("the socket passed by the service manager (descriptor {fd}) {why}")]
    Inherited { fd: RawFd, why: String },
}

/// An error of `what` on `path`.
fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> ServiceError {
    let path = path.to_owned();
    move |source| ServiceError::Io { what, path, source }
}

/// Creates (or checks) the socket's directory and binds the socket in it: 0600, or 0660 and
/// owned by `group` when there is one.
pub(crate) fn listen(path: &Path, group: Option<&Group>) -> Result<UnixListener, ServiceError> {
    let dir = parent(path)?;
    let (sock_mode, dir_mode) = if group.is_some() { GROUP } else { PRIVATE };
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(dir_mode)
            .create(dir)
            .and_then(|()| set_mode(dir, group, dir_mode))
            .map_err(io("create socket directory", dir))?;
    }
    check_dir(dir, group)?;
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if UnixStream::connect(path).is_ok() {
                return Err(ServiceError::InUse(path.to_owned()));
            }
            std::fs::remove_file(path).map_err(io("listen on", path))?;
        }
        Ok(_) => return Err(ServiceError::NotASocket(path.to_owned())),
        Err(_) => {}
    }
    // Never open wider than its mode, not even between `bind` and `chmod`.
    let old = umask(Mode::from_bits_truncate(!sock_mode & 0o777));
    let bound = UnixListener::bind(path);
    umask(old);
    let listener = bound.map_err(io("listen on", path))?;
    set_mode(path, group, sock_mode)
        .and_then(|()| listener.set_nonblocking(true))
        .map_err(io("listen on", path))?;
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
    let query = |e: nix::Error| refuse(e.to_string());
    let kind = getsockopt(&owned, sockopt::SockType).map_err(query)?;
    if kind != SockType::Stream || !getsockopt(&owned, sockopt::AcceptConn).map_err(query)? {
        return Err(refuse("is not listening, or is no stream socket".into()));
    }
    let bound = getsockname::<UnixAddr>(owned.as_raw_fd()).map_err(query)?;
    if bound.path() != Some(path) {
        let why = format!("is bound to {:?}, not to --socket {path:?}", bound.path());
        return Err(refuse(why));
    }
    check_dir(parent(path)?, group)?;
    check_socket_file(path, group)?;
    let listener = UnixListener::from(owned);
    let cloexec = fcntl(&listener, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)).map_err(Into::into);
    let ready = cloexec.and_then(|_| listener.set_nonblocking(true));
    ready.map(|()| listener).map_err(|e| refuse(e.to_string()))
}

fn parent(path: &Path) -> Result<&Path, ServiceError> {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .ok_or_else(|| ServiceError::NoParent(path.to_owned()))
}

/// Gives `path` to `group` (if any), then `mode`.
fn set_mode(path: &Path, group: Option<&Group>, mode: u32) -> std::io::Result<()> {
    if let Some(group) = group {
        chown(path, None, Some(group.gid))?;
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// The directory: ours, not a link, and nobody else may write it. Without a group, nobody else
/// may even enter it; with one, its members must be able to enter it.
fn check_dir(dir: &Path, group: Option<&Group>) -> Result<(), ServiceError> {
    let meta = std::fs::symlink_metadata(dir).map_err(io("inspect", dir))?;
    let mode = meta.mode() & 0o7777;
    let why = if !meta.is_dir() {
        "it is not a directory (or is a symlink)".to_owned()
    } else if meta.uid() != geteuid().as_raw() {
        format!("it is owned by uid {}, not {}", meta.uid(), geteuid())
    } else {
        match group {
            None if mode & (GROUP_BITS | OTHER_BITS) != 0 => format!(
                "its mode is {mode:o}, so other users can reach the socket; use a directory \
                 only this user can enter (chmod 700), or choose another --socket path"
            ),
            Some(_) if mode & NOT_OWNER_WRITE != 0 => {
                format!("its mode is {mode:o}, so others could replace the socket; chmod go-w it")
            }
            Some(g)
                if mode & OTHER_SEARCH == 0
                    && !(mode & GROUP_SEARCH != 0 && meta.gid() == g.gid.as_raw()) =>
            {
                format!(
                    "members of group {0} cannot enter it (mode {mode:o}, group {1}); chgrp \
                     {0} it and chmod g+x it",
                    g.name,
                    meta.gid()
                )
            }
            _ => return Ok(()),
        }
    };
    let path = dir.to_owned();
    Err(ServiceError::UnsafeDir { path, why })
}

/// A socket file made by someone else (the service manager): ours, no access for others, and
/// group access only for `group`.
fn check_socket_file(path: &Path, group: Option<&Group>) -> Result<(), ServiceError> {
    let meta = std::fs::symlink_metadata(path).map_err(io("inspect", path))?;
    let mode = meta.mode() & 0o7777;
    let why = if !meta.file_type().is_socket() {
        "it is not a socket".to_owned()
    } else if meta.uid() != geteuid().as_raw() {
        format!("it is owned by uid {}", meta.uid())
    } else if mode & OTHER_BITS != 0 {
        format!("its mode is {mode:o}: other users could connect")
    } else if mode & GROUP_BITS != 0 && group.is_none_or(|g| g.gid.as_raw() != meta.gid()) {
        format!(
            "its mode is {mode:o} and its group (gid {}) is not the one --group names",
            meta.gid()
        )
    } else {
        return Ok(());
    };
    let path = path.to_owned();
    Err(ServiceError::UnsafeSocket { path, why })
}
