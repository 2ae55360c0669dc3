//! What a command may reach and how long it may run: the policy and limits of a `Spawn`, and
//! the backends that enforce them. Declared in a `wire!` block of its own (see `messages.rs`),
//! with the constructors every caller starts from.

use serde::{Deserialize, Serialize};

/// Raw bytes: paths, argv elements and environment entries are not required to be UTF-8.
pub type Bytes = Vec<u8>;

wire! {
    POLICY_SCHEMA_TEXT;
    /// How far a command may reach. Ordered from most to least restrictive.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
    pub enum Mode {
        ReadOnly,
        WorkspaceWrite,
        DangerFullAccess,
    }

    /// Whether a confined command may use the network.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub enum Network {
        Deny,
        Allow,
    }

    /// Which confinement backend a request asks for.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub enum BackendChoice {
        Auto,
        Bwrap,
        Landlock,
        Seatbelt,
        Namespaces,
    }

    /// Which backend actually confined a command; `None` for danger-full-access.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub enum Backend {
        None,
        Bwrap,
        Landlock,
        Seatbelt,
        /// The helper's own namespaces and mounts, Landlock and the seccomp filter inside
        /// (no bwrap).
        Namespaces,
    }

    /// What a command may touch. Empty lists grant nothing.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Policy {
        pub mode: Mode,
        pub workspace_root: Option<Bytes>,
        pub writable_roots: Vec<Bytes>,
        pub network: Network,
        /// Relative subpaths kept read-only inside every writable root, besides
        /// [`crate::PROTECTED_SUBPATHS`].
        pub protected: Vec<Bytes>,
        /// Absolute paths (the requester's own configuration, state and binary) that no
        /// writable root may contain or lie inside, whether they exist or not.
        pub never_writable: Vec<Bytes>,
        /// With the network denied: sockets on the loopback interface of the command's own,
        /// empty network namespace (bind, listen, connect to 127.0.0.1 and ::1). Nothing
        /// outside the sandbox is reachable through it; a backend without a network namespace
        /// refuses the request.
        pub local_binding: bool,
        /// Absolute paths the command may not read, list or execute, in every confined mode:
        /// files and directories that exist when the command starts. One that contains a
        /// writable root is refused.
        pub deny_read: Vec<Bytes>,
        /// A directory the requester keeps for a whole session: the command's `/tmp` (and
        /// `TMPDIR`) instead of a fresh one, writable in workspace-write and read-only in
        /// read-only mode. Checked like a writable root; the helper never removes it.
        pub session_temp: Option<Bytes>,
        /// Absolute paths of named Unix sockets a command may connect to, as the requester's
        /// configuration names them. Every other `connect` of a Unix socket is refused. The
        /// helper connects on the command's behalf (it supervises `connect`), so only these
        /// exact names reach these sockets; a backend that cannot supervise refuses the
        /// request.
        pub unix_sockets: Vec<Bytes>,
        /// Absolute real paths the command must see, read-only, wherever they are — also where
        /// its private `/tmp` would hide the host's: a configured program's files, say. Its
        /// working directory always is. The requester names them from its own configuration,
        /// never from a command; one inside a denied read, or with a link on its way, is
        /// refused.
        pub visible: Vec<Bytes>,
    }

    /// Resource limits of one command.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Limits {
        /// Wall-clock limit; the tree is terminated when it passes.
        pub timeout_ms: Option<u64>,
        /// Time between SIGTERM and SIGKILL when the timeout fires.
        pub kill_grace_ms: u32,
        /// The most tasks (processes and threads) the command's tree may have at once,
        /// counted for that tree alone. `None`: the helper's ceiling, else its default; the
        /// ceiling may lower it. Confined modes only.
        pub max_processes: Option<u64>,
        /// RLIMIT_FSIZE of the command, in bytes.
        pub max_file_size: Option<u64>,
        /// RLIMIT_AS of the command, in bytes.
        pub max_address_space: Option<u64>,
        /// The most memory the command's tree may use at once, in bytes, where the kernel
        /// counts it for the tree (a cgroup of its own). `None`: the helper's ceiling, else its
        /// default; the ceiling may lower it. Confined modes only.
        pub max_memory: Option<u64>,
    }
}

impl Policy {
    /// The most restrictive policy: read-only, no workspace, the network denied, and every list
    /// empty. Callers name what they grant on top of it, with struct update syntax or the
    /// `with_` methods, so a field added here is denied at every site until one grants it.
    pub fn read_only() -> Policy {
        Policy {
            mode: Mode::ReadOnly,
            workspace_root: None,
            writable_roots: Vec::new(),
            network: Network::Deny,
            protected: Vec::new(),
            never_writable: Vec::new(),
            local_binding: false,
            deny_read: Vec::new(),
            session_temp: None,
            unix_sockets: Vec::new(),
            visible: Vec::new(),
        }
    }

    /// This policy in `mode`.
    pub fn with_mode(self, mode: Mode) -> Policy {
        Policy { mode, ..self }
    }

    /// This policy with `root` as its workspace.
    pub fn with_workspace(self, root: Bytes) -> Policy {
        Policy {
            workspace_root: Some(root),
            ..self
        }
    }
}

impl Limits {
    /// No limit of the request's own: no timeout, no kill grace (SIGKILL at once), and the
    /// helper's defaults and ceiling for the rest.
    pub fn none() -> Limits {
        Limits {
            timeout_ms: None,
            kill_grace_ms: 0,
            max_processes: None,
            max_file_size: None,
            max_address_space: None,
            max_memory: None,
        }
    }

    /// These limits with `timeout_ms` as the wall-clock limit.
    pub fn with_timeout(self, timeout_ms: Option<u64>) -> Limits {
        Limits { timeout_ms, ..self }
    }

    /// These limits with `kill_grace_ms` between SIGTERM and SIGKILL.
    pub fn with_kill_grace(self, kill_grace_ms: u32) -> Limits {
        Limits {
            kill_grace_ms,
            ..self
        }
    }
}
