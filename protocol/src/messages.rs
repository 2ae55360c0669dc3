//! The messages agentd and confine-helper exchange.
//!
//! Every type that crosses the wire is declared inside one `wire!` block. The macro emits the
//! declarations unchanged and also their token text as [`SCHEMA_TEXT`]; the handshake's schema
//! hash is computed from that text, so a field or variant added on one side and not the other
//! changes the hash and the handshake refuses the pair instead of letting a restriction slip.
//!
//! postcard encodes enum variants by their index and struct fields by position. Two rules follow
//! and are pinned by the golden vectors in `tests/golden.txt`:
//! - variants are never reordered or removed, only appended;
//! - the first variant of every policy enum is its most restrictive meaning, so a zeroed or
//!   defaulted field means "deny", never "allow".

// A `Spawn` is far larger than a `Cancel`; each message is decoded once and moved along, so
// boxing the large variants would add an allocation per request and buy nothing.
#![allow(clippy::large_enum_variant)]

use serde::{Deserialize, Serialize};

/// Raw bytes: paths, argv elements and environment entries are not required to be UTF-8.
pub type Bytes = Vec<u8>;

macro_rules! wire {
    ($($item:item)*) => {
        $($item)*

        /// The token text of every wire type, in declaration order: the input of [`crate::SCHEMA_HASH`].
        pub const SCHEMA_TEXT: &str = stringify!($($item)*);
    };
}

wire! {
    /// The first frame each side sends, before anything else. Its layout is frozen: it must stay
    /// decodable by every past and future version so that a mismatch can be explained.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Hello {
        pub protocol_version: u32,
        pub schema_hash: u64,
        pub software: String,
    }

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
    }

    /// Which backend actually confined a command; `None` for danger-full-access.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub enum Backend {
        None,
        Bwrap,
        Landlock,
        Seatbelt,
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

    /// Where one of the command's standard streams comes from.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub enum StdioSpec {
        /// The helper opens `/dev/null`.
        Null,
        /// The next file descriptor passed with the frame (SCM_RIGHTS), in stdin, stdout, stderr order.
        Fd,
    }

    /// The command's standard streams.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Stdio {
        pub stdin: StdioSpec,
        pub stdout: StdioSpec,
        pub stderr: StdioSpec,
    }

    /// One environment variable for the command.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct EnvVar {
        pub name: Bytes,
        pub value: Bytes,
    }

    /// Run `argv` under `policy`. Ids are chosen by the requester and unique per connection.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Spawn {
        pub id: u64,
        pub argv: Vec<Bytes>,
        pub cwd: Bytes,
        pub env: Vec<EnvVar>,
        pub policy: Policy,
        pub backend: BackendChoice,
        pub limits: Limits,
        pub stdio: Stdio,
        /// One more descriptor follows the stdio ones: a Unix stream socket. The command's
        /// sandbox then gets a bridge listening on `127.0.0.1:`[`crate::PROXY_PORT`] in its own,
        /// empty network namespace, which for every connection made to it sends one end of a
        /// new socketpair over that socket (`SCM_RIGHTS`, with one byte) and relays the
        /// connection through the other: whoever holds the socket's peer decides where each
        /// connection goes (agentd's allow-list proxy). bwrap only, with the network denied;
        /// refused otherwise.
        pub proxy: bool,
    }

    /// Terminate the whole tree of request `id`: SIGTERM now, SIGKILL after `grace_ms`.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Cancel {
        pub id: u64,
        pub grace_ms: u32,
    }

    /// A backend an earlier helper found usable under `fingerprint` (the fingerprint a
    /// [`BackendReport`] carried). Only a hint: the helper skips that backend's functional
    /// probe if `fingerprint` is its own for the backend, and ignores it otherwise. A wrong
    /// hint can only make a command fail as a runner failure (the command still gets the
    /// backend's whole confinement); there are no negative hints.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct UsableBefore {
        pub backend: Backend,
        pub fingerprint: String,
    }

    /// What agentd sends after the handshake.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub enum Request {
        Spawn(Spawn),
        Cancel(Cancel),
        Info,
        /// Hints for the requests that follow on this connection; no reply.
        Hints(Vec<UsableBefore>),
    }

    /// How a command ended.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub enum ExitStatus {
        Code(i32),
        Signal(i32),
    }

    /// Why a command ended, beyond its own status.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub enum Ending {
        /// The command exited by itself.
        Exited,
        /// The wall-clock limit passed and the helper terminated the tree.
        TimedOut,
        /// A `Cancel` terminated the tree.
        Cancelled,
    }

    /// The request field a path in a refusal came from.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub enum PathRole {
        WritableRoot,
        SessionTemp,
        WorkingDirectory,
        Visible,
    }

    /// Whose files a path that is never writable holds.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub enum Owner {
        Helper,
        Requester,
    }

    /// Why the helper refused a request: one variant per rule, carrying the values its sentence
    /// names. Paths are carried as they are shown. `code()` names the rule for programs; the
    /// text (`Display`) is the sentence people read, unchanged since reasons were strings.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
    pub enum Refusal {
        #[error("argv is empty: there is no program to run")]
        EmptyArgv,
        #[error("argv[{index}] contains a NUL byte")]
        NulInArgv { index: u64 },
        #[error("argv[0] is empty: there is no program to run")]
        EmptyProgram,
        #[error("cwd must be an absolute path")]
        RelativeCwd,
        #[error("cwd contains a NUL byte")]
        NulInCwd,
        #[error("environment entry {index} has an invalid name (empty, or contains '=' or NUL)")]
        BadEnvName { index: u64 },
        #[error("environment entry {index} has a NUL byte in its value")]
        NulInEnvValue { index: u64 },
        #[error("policy.{field} contains a NUL byte")]
        NulInPolicy { field: String },
        #[error("the path of a file to read or write must be absolute")]
        RelativeFilePath,
        #[error("the path of a file to read or write contains a NUL byte")]
        NulInFilePath,
        #[error("request id {id} is already running on this connection")]
        IdInUse { id: u64 },
        #[error("{max} commands are already running on this connection")]
        TooManyCommands { max: u64 },
        /// A ceiling source could not be taken, so every request is refused; `why` is its error.
        #[error("{why}")]
        CeilingBroken { why: String },
        #[error("ceiling max_mode is {max}: {asked} is not allowed")]
        CeilingMode { max: Mode, asked: Mode },
        #[error("ceiling allow_network is false: network access is not allowed")]
        CeilingNetwork,
        /// `root` is under no entry of the `list`-th `writable_roots_under` (counted from 1).
        #[error("ceiling writable_roots_under (source {list}) does not include {root}")]
        CeilingNotUnder { list: u64, root: String },
        #[error("ceiling never_writable contains {never}: {root} may not be writable")]
        CeilingNeverWritable { never: String, root: String },
        #[error(
            "ceiling refuse_partial is true and {backend} cannot enforce: {}",
            crate::outcome::joined(.missing)
        )]
        CeilingPartial { backend: Backend, missing: Vec<Gap> },
        #[error("ceiling allow_unix_sockets is false: no Unix socket may be named for commands")]
        CeilingUnixSockets,
        /// The value is never part of the sentence: it may be the secret.
        #[error(
            "the environment variable {name} looks like a secret (its name contains {word}), \
             and confine-helper gives a command no secret its ceiling does not allow; to pass \
             it, add env_allow = [\"{name}\"] to a ceiling file ({system_file}, \
             $XDG_CONFIG_HOME/confine-helper/ceiling.toml or --ceiling PATH, which agentd \
             passes with --helper-ceiling PATH; when several set env_allow, each must list it)"
        )]
        SecretVariable { name: String, word: String, system_file: String },
        #[error(
            "the locale variable {name} does not hold a locale name (C, POSIX or \
             language[_territory][.codeset][@modifier], e.g. C.UTF-8 or en_US.UTF-8; for \
             LANGUAGE a list of them separated by ':'), so confine-helper does not pass it to a \
             command (its value is not shown: it may be a secret)"
        )]
        NotALocale { name: String },
        #[error(
            "{role} {root} would make {never} writable, which is never allowed in a confined mode"
        )]
        HoldsNeverRoot { role: PathRole, root: String, never: String },
        #[error("{role} {root} would make {never} ({owner}) writable, which is never allowed")]
        HoldsOwnedPath { role: PathRole, root: String, never: String, owner: Owner },
        #[error("{role} {path} is not an absolute path")]
        NotAbsolute { role: PathRole, path: String },
        #[error("{role} {path} is not a directory")]
        NotADirectory { role: PathRole, path: String },
        #[error(
            "{role} {path} has a symbolic link in its path, which the helper does not follow; \
             name the directory by its real path{}",
            crate::outcome::in_parens(.real)
        )]
        LinkInRoot { role: PathRole, path: String, real: Option<String> },
        /// The path could not be opened or inspected; `why` is the system's error.
        #[error("{role} {path}: {why}")]
        Unusable { role: PathRole, path: String, why: String },
        #[error("{role} {path} lies inside the denied read {denied}")]
        InsideDenied { role: PathRole, path: String, denied: String },
        #[error(
            "{role} {path} has a symbolic link on its path, which the helper does not follow; \
             name it by its real path"
        )]
        LinkOnPath { role: PathRole, path: String },
        #[error("writable root {root} lies inside {kept}, which stays read-only")]
        RootInsideKept { root: String, kept: String },
        #[error(
            "protected path {path} must be a relative path inside the writable roots, without '..'"
        )]
        BadProtected { path: String },
        #[error("denied read {path} is not an absolute path")]
        DeniedNotAbsolute { path: String },
        /// The denied read could not be opened or named; `why` is the system's error.
        #[error("denied read {path}: {why}")]
        DeniedUnusable { path: String, why: String },
        /// The kind of an opened denied read could not be learnt; `why` is the system's error.
        #[error("denied read: {why}")]
        DeniedUnknownKind { why: String },
        #[error(
            "denied read {path} contains {root}, which the command may write; deny paths inside \
             it instead"
        )]
        DeniedHoldsWritable { path: String, root: String },
        #[error(
            "denied read {path} is or has a symbolic link on its path, which the helper does not \
             follow; name it by its real path{}",
            crate::outcome::in_parens(.real)
        )]
        DeniedLink { path: String, real: Option<String> },
        #[error(
            "unix_sockets needs a private network namespace, which the {backend} backend does \
             not give: abstract socket names would be shared with the host; use the bwrap \
             backend (install bubblewrap) or drop unix_sockets"
        )]
        SocketsNeedNamespace { backend: Backend },
        #[error(
            "unix_sockets needs the network denied (the sandbox's own network namespace keeps \
             abstract socket names private); drop unix_sockets or deny the network"
        )]
        SocketsNeedNetworkDenied,
        #[error("unix_sockets entry {path} is not an absolute path")]
        SocketNotAbsolute { path: String },
        #[error(
            "unix_sockets entry {path} is longer than a Unix socket address holds ({max} bytes)"
        )]
        SocketNameTooLong { path: String, max: u64 },
        /// The socket could not be resolved or inspected; `why` is the system's error.
        #[error("unix_sockets entry {path}: {why}")]
        SocketUnusable { path: String, why: String },
        #[error("unix_sockets entry {path} is not a socket ({real})")]
        NotASocket { path: String, real: String },
        #[error(
            "unix_sockets entry {path} lies inside {root}, which the command may write: it could \
             put another socket there"
        )]
        SocketInWritable { path: String, root: String },
        #[error(
            "unix_sockets entry {path} is one of the helper's own files ({own}), which commands \
             never reach"
        )]
        SocketIsOwn { path: String, own: String },
        #[error(
            "unix_sockets entry {path} is {real}, longer than a Unix socket address holds ({max} \
             bytes)"
        )]
        SocketRealTooLong { path: String, real: String, max: u64 },
        #[error(
            "a proxy bridge was asked for with the network allowed; a command with the network \
             needs no proxy"
        )]
        ProxyWithNetwork,
        #[error(
            "the network allow-list under Landlock needs its TCP rules (ABI {needed}, Linux \
             6.7), which keep a command from listening on the host's ports; this kernel has ABI \
             {abi}: use the bwrap backend (install bubblewrap)"
        )]
        ProxyNeedsLandlockNet { needed: u32, abi: u32 },
        /// `why` says why the helper's own step inside bwrap's sandbox cannot run.
        #[error(
            "the network allow-list needs the helper's own layer inside the sandbox, which \
             cannot run here ({why})"
        )]
        ProxyNeedsInnerLayer { why: String },
        #[error(
            "local_binding needs a private network namespace, which the {backend} backend does \
             not give: its TCP rules name ports, not addresses, so a loopback-only network \
             cannot be enforced; use the bwrap backend (install bubblewrap) or drop local_binding"
        )]
        LocalBindingNeedsNamespace { backend: Backend },
        #[error(
            "local_binding needs a private network namespace, which the seatbelt backend does \
             not give: its rules can allow the host's loopback, not a loopback of the command's \
             own; drop local_binding"
        )]
        SeatbeltLocalBinding,
        /// The Seatbelt profile could not be written for this request; `why` names the path.
        #[error("{why}")]
        SeatbeltProfile { why: String },
    }

    /// One thing a backend did not enforce for a command, carrying the values its sentence
    /// names. `code()` names it for programs; the text (`Display`) is the sentence people read,
    /// unchanged since gaps were strings.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
    pub enum Gap {
        #[error("truncate of files outside writable roots (Landlock ABI < 3)")]
        Truncate,
        #[error("ioctl on devices (Landlock ABI < 5)")]
        DeviceIoctl,
        #[error("signals to processes outside the sandbox (Landlock ABI < 6)")]
        Signals,
        #[error(
            "file metadata outside writable roots: chmod, chown, utimes, xattrs (Landlock does \
             not control them)"
        )]
        FileMetadata,
        /// `why` says why the helper's own step inside bwrap's sandbox cannot run.
        #[error(
            "the Landlock layer inside the namespaces ({why}): FIFOs, sockets and devices \
             outside the writable roots are not kept read-only by mounts"
        )]
        InnerLandlock { why: String },
        #[error(
            "process isolation: other processes' command lines and System V IPC keys are \
             visible in /proc (no PID or IPC namespace)"
        )]
        ProcessVisibility,
        #[error(
            "denied read {path} inside the writable root {root} (Landlock cannot take part of a \
             writable root back)"
        )]
        DeniedInWritable { path: String, root: String },
        #[error(
            "names of the entries in the denied directory {path} (their contents stay denied; \
             Landlock grants listing to the whole tree beneath a directory)"
        )]
        DeniedNames { path: String },
        #[error(
            "protected path {path} (Landlock cannot keep part of a writable root read-only)"
        )]
        ProtectedInLandlock { path: String },
        /// `why` says why the cap cannot be counted for the command's tree alone.
        #[error("process cap ({processes} tasks at once): {why}")]
        ProcessCap { processes: u64, why: String },
        #[error(
            "process tree: a descendant that leaves the process group and loses its parent is \
             adopted by launchd and outlives the command (macOS has no subreaper)"
        )]
        ProcessTree,
        #[error("address-space limit (max_address_space): macOS does not enforce RLIMIT_AS")]
        AddressSpace,
        #[error(
            "the network allow-list: 127.0.0.1:{port} is the host's port (no network \
             namespace), so whatever listens there gets the command's connections"
        )]
        HostProxyPort { port: u16 },
        #[error(
            "session services: Mach services (launchd, LaunchServices, the pasteboard) stay \
             reachable, and through them a command can have a program started outside the \
             sandbox (launchctl, open)"
        )]
        SessionServices,
        #[error(
            "process isolation: other processes are listed with their command lines and \
             environments (sysctl KERN_PROCARGS2), and their scheduling is not guarded; Seatbelt \
             has no rule for either"
        )]
        ProcessListing,
        #[error(
            "POSIX shared memory and semaphores: one namespace for all of the user's processes, \
             so a command can open and change those of processes outside the sandbox"
        )]
        SharedMemory,
        #[error(
            "repository {dot}: there is none yet, so a command can create one whose config and \
             hooks git would use when run there later"
        )]
        NoRepository { dot: String },
        #[error(
            "submodule {path}: {at} does not exist, so a command can create a repository there \
             that git status in the superproject would enter"
        )]
        NoSubmodule { path: String, at: String },
        #[error("protected path {path}: {at} does not exist yet, so a command can create it")]
        NoProtected { path: String, at: String },
        /// `what` names the directory a repository's file points to.
        #[error("{what} {path} does not exist ({at} is missing), so a command can create it")]
        NoPointedDir { what: String, path: String, at: String },
        /// `why` says why the index cannot be read.
        #[error(
            "the submodules of {path} (its index {index} cannot be read: {why}), so their .git \
             entries are not kept read-only"
        )]
        UnreadIndex { path: String, index: String, why: String },
        #[error("submodules nested deeper than {max} levels below {root}")]
        DeepSubmodules { max: u64, root: String },
    }

    /// What the confinement actually enforced, as the helper can prove it.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub enum Enforcement {
        Full,
        Partial { missing: Vec<Gap> },
    }

    /// One confinement mechanism the helper applied to a command. A confined command gets
    /// two layers that each stop what the other does not cover: mount, PID, IPC and network
    /// namespaces (bwrap) or nothing, then Landlock, then the seccomp filter.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub enum Layer {
        Namespaces,
        Landlock,
        Seccomp,
    }

    /// Resources the command's main process and its waited-for children used.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Usage {
        pub wall_us: u64,
        pub user_us: u64,
        pub sys_us: u64,
        pub max_rss_kib: u64,
    }

    /// A cap on what a command's whole tree may hold at once.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Cap {
        pub max: u64,
        /// Whether the tree ran into it; `None` where the kernel does not say.
        pub reached: Option<bool>,
    }

    /// The caps a confined command's tree ran under; `None` where none was applied.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Caps {
        /// Tasks (processes and threads) at once.
        pub processes: Option<Cap>,
        /// Memory, in bytes.
        pub memory: Option<Cap>,
    }

    /// The command ran and ended; its whole tree is gone.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Exited {
        pub id: u64,
        pub status: ExitStatus,
        /// `execve` of the command itself failed with this errno (status is then 127 or 126).
        pub exec_errno: Option<i32>,
        pub ending: Ending,
        pub backend: Backend,
        /// `None` when nothing was confined (danger-full-access).
        pub enforcement: Option<Enforcement>,
        /// The layers that confined the command, in the order they were applied; empty when
        /// nothing was confined.
        pub layers: Vec<Layer>,
        pub usage: Usage,
        pub caps: Caps,
    }

    /// The runner step that failed; the command did not run.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub enum Stage {
        /// No usable backend for the requested mode.
        Unavailable,
        /// Creating the helper's own pipes for the command.
        Pipe,
        Fork,
        Setsid,
        /// Opening `/dev/null` or placing the passed stdio fds.
        Stdio,
        /// Closing inherited descriptors.
        CloseFds,
        Chdir,
        Signals,
        Rlimits,
        DeathSignal,
        NoNewPrivs,
        Capabilities,
        Landlock,
        Seccomp,
        /// The runner (bwrap) ended before the command started: it could not build the
        /// namespaces or the mounts.
        Namespace,
        /// Executing the runner (e.g. bwrap) itself.
        RunnerExec,
        /// The helper lost track of the command's supervisor.
        Supervise,
        /// Preparing the sandbox before fork: paths, rulesets, filters.
        Prepare,
        /// Joining the command's own cgroup (its process and memory caps).
        Cgroup,
        /// Making the user namespace the command's process cap is counted in.
        UserNamespace,
    }

    /// A runner step failed before the command could run. Reported out of band: the command
    /// never holds the channel this comes from, so it cannot forge one.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct RunnerFailed {
        pub id: u64,
        pub stage: Stage,
        pub errno: i32,
        pub detail: String,
    }

    /// The request was not run because it breaks a rule; `reason` names the rule.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Refused {
        pub id: u64,
        pub reason: Refusal,
    }

    /// The command's process exists and `execve` succeeded.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Started {
        pub id: u64,
        pub pid: u32,
    }

    /// One backend's verdict on this machine.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct BackendReport {
        pub backend: Backend,
        pub usable: bool,
        pub detail: String,
        /// The layers a command confined by this backend gets on this machine.
        pub layers: Vec<Layer>,
        /// When the backend is usable and its verdict may be kept: what the verdict depends
        /// on that only the helper knows (its build and binary, its user and capabilities, its
        /// namespaces, the Landlock ABI, the bwrap binary), to be sent back in a
        /// [`UsableBefore`] hint.
        pub fingerprint: Option<String>,
    }

    /// The most a request may ask of this helper: its ceiling.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Grant {
        /// The widest mode the helper runs.
        pub max_mode: Mode,
        /// Whether a confined command may be given the network.
        pub network: Network,
        /// The ceiling files that were read, in the order they narrowed.
        pub sources: Vec<String>,
        /// Why the ceiling is broken, when it is: every request is then refused, and the grant
        /// is the narrowest.
        pub broken: Option<String>,
    }

    /// What the helper is and can do.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct HelperInfo {
        pub software: String,
        pub pid: u32,
        pub backends: Vec<BackendReport>,
        pub landlock_abi: Option<u32>,
        pub grant: Grant,
    }

    /// What the helper sends after the handshake.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub enum Reply {
        Started(Started),
        Exited(Exited),
        RunnerFailed(RunnerFailed),
        Refused(Refused),
        Info(HelperInfo),
    }
}

impl Reply {
    /// The request this reply answers, if it answers one.
    pub fn request_id(&self) -> Option<u64> {
        match self {
            Reply::Started(m) => Some(m.id),
            Reply::Exited(m) => Some(m.id),
            Reply::RunnerFailed(m) => Some(m.id),
            Reply::Refused(m) => Some(m.id),
            Reply::Info(_) => None,
        }
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

impl Layer {
    /// The name users read in facts.
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Namespaces => "namespaces",
            Layer::Landlock => "landlock",
            Layer::Seccomp => "seccomp",
        }
    }
}

impl Stage {
    /// The stable name of the stage, as reported to users and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Unavailable => "unavailable",
            Stage::Pipe => "pipe",
            Stage::Fork => "fork",
            Stage::Setsid => "setsid",
            Stage::Stdio => "stdio",
            Stage::CloseFds => "close-fds",
            Stage::Chdir => "chdir",
            Stage::Signals => "signals",
            Stage::Rlimits => "rlimits",
            Stage::DeathSignal => "death-signal",
            Stage::NoNewPrivs => "no-new-privs",
            Stage::Capabilities => "capabilities",
            Stage::Landlock => "landlock",
            Stage::Seccomp => "seccomp",
            Stage::Namespace => "namespace",
            Stage::RunnerExec => "runner-exec",
            Stage::Supervise => "supervise",
            Stage::Prepare => "prepare",
            Stage::Cgroup => "cgroup",
            Stage::UserNamespace => "user-namespace",
        }
    }

    /// Whether a failure at this stage means the backend could not build a command's
    /// confinement: a verdict that it was usable is then stale, and is dropped by the helper and
    /// by whoever kept it.
    pub fn builds_confinement(self) -> bool {
        matches!(
            self,
            Stage::Namespace
                | Stage::RunnerExec
                | Stage::Landlock
                | Stage::Seccomp
                | Stage::NoNewPrivs
                | Stage::Capabilities
        )
    }

    /// Every stage, in wire order.
    pub const ALL: [Stage; 20] = [
        Stage::Unavailable,
        Stage::Pipe,
        Stage::Fork,
        Stage::Setsid,
        Stage::Stdio,
        Stage::CloseFds,
        Stage::Chdir,
        Stage::Signals,
        Stage::Rlimits,
        Stage::DeathSignal,
        Stage::NoNewPrivs,
        Stage::Capabilities,
        Stage::Landlock,
        Stage::Seccomp,
        Stage::Namespace,
        Stage::RunnerExec,
        Stage::Supervise,
        Stage::Prepare,
        Stage::Cgroup,
        Stage::UserNamespace,
    ];

    /// The stage with this wire index, for the helper's fixed-size child records.
    pub fn from_index(index: u32) -> Option<Stage> {
        Stage::ALL.get(usize::try_from(index).ok()?).copied()
    }

    /// This stage's wire index.
    pub fn index(self) -> u32 {
        self as u32
    }
}
