//! How the helper serves, once its command line is read and the process sanitized: one
//! inherited connection (embedded mode, and a root service's helper for a peer), or a socket
//! (service mode: the admission rule, the socket, then the hand-off to a helper per peer or
//! the event loop).

use std::io;
use std::os::fd::RawFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use crate::confine::Context;
use crate::log;
use crate::server::Server;
use crate::{service, sys};

/// How much a service serves: its caps, and for a root service the idle limit its helpers
/// get and whether they go in a cgroup per uid.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Serving {
    pub(crate) caps: service::Caps,
    /// `--idle-limit`, when given.
    pub(crate) idle_limit: Option<Duration>,
    pub(crate) delegated_cgroup: bool,
}

/// Why serving ended in failure; logged, and the helper exits 1.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ServeError {
    /// The descriptor of `--fd` is not an open socket.
    #[error("--fd {fd}: {source}")]
    NotASocket { fd: RawFd, source: io::Error },
    /// The connection cannot be marked close-on-exec.
    #[error("--fd {fd}: {source}")]
    Cloexec { fd: RawFd, source: nix::Error },
    #[error("{0}")]
    Listen(#[from] service::ServiceError),
    /// A helper that is not root was asked to serve another uid.
    #[error(
        "this helper is not root, so it would run the commands of {0} as its own uid; run the \
         service as root (it serves each peer by a helper running as that peer), or give each \
         user a helper of their own"
    )]
    OtherUid(String),
    /// An option of a root service's hand-off for a service that serves its peers itself.
    #[error(
        "{0} is for a root service, which starts a helper per peer; this service serves its own \
         uid itself: drop {0}"
    )]
    HandoffOnly(&'static str),
    /// A root helper on macOS was asked to serve other uids.
    #[cfg(target_os = "macos")]
    #[error(
        "serving other users needs a helper per peer started by a root service, which this \
         helper does on Linux only; on macOS run a service as each user, admitting that user alone"
    )]
    NoHandoff,
    /// The event loop failed.
    #[error("{0}")]
    Run(#[source] io::Error),
}

pub(crate) fn embedded(
    fd: RawFd,
    ctx: Context,
    idle_limit: Option<Duration>,
) -> Result<(), ServeError> {
    let owned =
        sys::inherited_socket(fd).map_err(|source| ServeError::NotASocket { fd, source })?;
    let sock = UnixStream::from(owned);
    nix::fcntl::fcntl(
        &sock,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    )
    .map_err(|source| ServeError::Cloexec { fd, source })?;
    Server::embedded(sock, ctx, idle_limit)
        .run()
        .map_err(ServeError::Run)
}

/// Service mode (see `service`): a root helper that admits other uids hands each peer to a
/// helper running as it; a helper that is not root serves its own uid alone; a helper that
/// admits no uid but its own serves it itself.
pub(crate) fn serve(
    socket: PathBuf,
    (uids, group): (Vec<u32>, Option<String>),
    ceiling: Option<PathBuf>,
    serving: Serving,
    activated: Option<RawFd>,
    context: impl FnOnce() -> Context,
) -> Result<(), ServeError> {
    let group = group.as_deref().map(service::Group::named).transpose()?;
    let me = nix::unistd::geteuid();
    let admission = service::Admission { uids, group };
    let handoff = admission.admits_others(me.as_raw());
    if handoff && !me.is_root() {
        return Err(ServeError::OtherUid(admission.to_string()));
    }
    if !handoff && serving.idle_limit.is_some() {
        return Err(ServeError::HandoffOnly("--idle-limit"));
    }
    if !handoff && serving.delegated_cgroup {
        return Err(ServeError::HandoffOnly("--delegated-cgroup"));
    }
    #[cfg(target_os = "macos")]
    if handoff {
        return Err(ServeError::NoHandoff);
    }
    let listener = match activated {
        Some(fd) => service::inherited(fd, &socket, admission.group.as_ref())?,
        None => service::listen(&socket, admission.group.as_ref())?,
    };
    #[cfg(target_os = "linux")]
    if handoff {
        log!(
            "serving {} for {admission}, each peer by a helper running as that peer",
            socket.display()
        );
        let handoff = service::Handoff {
            ceiling,
            socket,
            caps: serving.caps,
            idle_limit: serving.idle_limit.unwrap_or(service::IDLE_LIMIT),
            delegated_cgroup: serving.delegated_cgroup,
        };
        return service::serve_by_handoff(listener, admission, handoff).map_err(ServeError::Run);
    }
    #[cfg(target_os = "macos")]
    let _ = ceiling;
    log!("serving {} for {admission}", socket.display());
    Server::service(listener, admission, serving.caps, context())
        .run()
        .map_err(ServeError::Run)
}

/// The listening socket systemd passed (`LISTEN_PID` is this process, `LISTEN_FDS` one
/// descriptor, number 3), if it passed one.
pub(crate) fn socket_activation() -> Result<Option<RawFd>, ActivationError> {
    let Some(pid) = std::env::var_os("LISTEN_PID") else {
        return Ok(None);
    };
    if pid.to_str() != Some(&std::process::id().to_string()) {
        return Ok(None);
    }
    match std::env::var_os("LISTEN_FDS")
        .as_deref()
        .and_then(|n| n.to_str())
    {
        Some("1") => Ok(Some(3)),
        other => Err(ActivationError {
            passed: other.unwrap_or("no number of").to_owned(),
        }),
    }
}

/// The service manager passed other than one socket.
#[derive(Debug, thiserror::Error)]
#[error(
    "the service manager passed {passed} sockets (LISTEN_FDS); the socket unit must have exactly \
     one ListenStream"
)]
pub(crate) struct ActivationError {
    /// `LISTEN_FDS` as it was set, or "no number of".
    passed: String,
}
