//! What `agentd run` runs and how ([`RunArgs`]): its flags merged with the configuration.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use confine_protocol::{BackendChoice, Mode, Network};

use crate::config::{SocketEntryError, absolute_or_home, expand_home};
use crate::deny_read::DenyRead;
use crate::profile::SandboxProfile;

/// What to run and how, as `agentd run` takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunArgs {
    /// The command and its arguments.
    pub argv: Vec<OsString>,
    pub mode: Mode,
    /// The workspace root; `None` means the current directory.
    pub workspace: Option<PathBuf>,
    /// Where the command runs; `None`: the current directory inside the workspace, else the
    /// workspace.
    pub cwd: Option<PathBuf>,
    pub network: Network,
    pub backend: BackendChoice,
    /// Wall-clock limit in whole seconds.
    pub timeout_secs: Option<u64>,
    /// Directories writable besides the workspace (workspace-write); relative ones are taken
    /// from agentd's current directory. confine-helper canonicalizes and checks them.
    pub writable_roots: Vec<PathBuf>,
    /// Relative subpaths that stay read-only inside every writable root, on top of the helper's
    /// built-in list. confine-helper validates them.
    pub protected: Vec<PathBuf>,
    /// Denied reads besides the configuration's.
    pub deny_read: Vec<DenyRead>,
    /// Loopback sockets inside the sandbox (or the configuration's `local_binding`).
    pub local_binding: bool,
    /// Named Unix sockets the command may connect to besides the configuration's; relative
    /// ones are taken from agentd's current directory.
    pub unix_sockets: Vec<PathBuf>,
    /// The most tasks the command's tree may have at once; confine-helper's default, lowered
    /// to its ceiling, when `None`.
    pub max_processes: Option<u64>,
    /// RLIMIT_FSIZE of the command, in bytes; confine-helper lowers it to its ceiling.
    pub max_file_size: Option<u64>,
    /// RLIMIT_AS of the command, in bytes; confine-helper lowers it to its ceiling.
    pub max_address_space: Option<u64>,
    /// The most memory the command's tree may use at once, in bytes, where confine-helper can
    /// count it; its default, lowered to its ceiling, when `None`.
    pub max_memory: Option<u64>,
    /// Variables set explicitly, on top of the inherited allow-list
    /// ([`environment::command_environment`]); of two settings of one name the later wins.
    pub env: Vec<(OsString, OsString)>,
    /// Print the facts as one JSON object on the last line of stderr.
    pub json: bool,
    /// The configuration's sandbox profile, which `writable_roots` and `protected` add to.
    pub profile: SandboxProfile,
}

impl RunArgs {
    /// Read-only, current directory as workspace, no network, automatic backend, no timeout,
    /// no further writable roots or protected paths, no resource limits, no explicit variables.
    pub fn new<I, S>(argv: I) -> RunArgs
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        RunArgs {
            argv: argv.into_iter().map(Into::into).collect(),
            mode: Mode::ReadOnly,
            workspace: None,
            cwd: None,
            network: Network::Deny,
            backend: BackendChoice::Auto,
            timeout_secs: None,
            writable_roots: Vec::new(),
            protected: Vec::new(),
            deny_read: Vec::new(),
            local_binding: false,
            unix_sockets: Vec::new(),
            max_processes: None,
            max_file_size: None,
            max_address_space: None,
            max_memory: None,
            env: Vec::new(),
            json: false,
            profile: SandboxProfile::default(),
        }
    }

    /// The configuration's sandbox profile with the flags' roots, denied reads and Unix sockets
    /// (taken from `cwd` when relative) and protected paths added.
    pub fn profile(&self, cwd: &Path) -> SandboxProfile {
        let args = self;
        let mut profile = args.profile.clone();
        profile
            .writable_roots
            .extend(args.writable_roots.iter().map(|root| cwd.join(root)));
        profile.protect(args.protected.iter().cloned());
        profile.local_binding |= args.local_binding;
        for denied in &args.deny_read {
            let denied = match denied {
                DenyRead::Path(path) => DenyRead::Path(cwd.join(path)),
                anywhere => anywhere.clone(),
            };
            if !profile.deny_read.contains(&denied) {
                profile.deny_read.push(denied);
            }
        }
        for socket in &args.unix_sockets {
            let socket = cwd.join(socket);
            if !profile.unix_sockets.contains(&socket) {
                profile.unix_sockets.push(socket);
            }
        }
        profile
    }
}

/// One `--deny-read`: as in the configuration file, with `~` from `$HOME`; a relative path is
/// taken from the current directory when the command runs.
pub(super) fn deny_read_entry(entry: &str) -> Result<DenyRead, BadEntry> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    if !entry.starts_with(['/', '~', '*']) && !entry.contains('*') {
        return Ok(DenyRead::Path(PathBuf::from(entry)));
    }
    crate::deny_read::parse(entry, home.as_deref()).map_err(|e| BadEntry::DenyRead {
        entry: entry.to_owned(),
        why: e,
    })
}

/// One `--unix-socket`: as in the configuration file, with `~` from `$HOME`; a relative path is
/// taken from the current directory when the command runs.
pub(super) fn unix_socket_entry(entry: &str) -> Result<PathBuf, BadEntry> {
    if entry.is_empty() {
        return Err(BadEntry::EmptySocket);
    }
    if !entry.starts_with('~') {
        return Ok(PathBuf::from(entry));
    }
    if !absolute_or_home(entry) {
        return Err(BadEntry::SocketNotAbsolute {
            entry: entry.to_owned(),
            why: SocketEntryError::NotAbsolute,
        });
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    expand_home(entry, home.as_deref()).ok_or_else(|| BadEntry::NoHome {
        entry: entry.to_owned(),
    })
}

/// Why a `--deny-read` or `--unix-socket` cannot be taken, as clap reports it.
#[derive(Debug, thiserror::Error)]
pub(super) enum BadEntry {
    #[error("{entry:?} {why}")]
    DenyRead {
        entry: String,
        why: crate::deny_read::EntryError,
    },
    #[error("an empty path names no socket; give the socket's path")]
    EmptySocket,
    #[error("{entry:?} {why}; write ~/path from your home directory")]
    SocketNotAbsolute {
        entry: String,
        why: SocketEntryError,
    },
    #[error("{entry:?} needs an absolute HOME to expand `~`; set HOME or give the full path")]
    NoHome { entry: String },
}
