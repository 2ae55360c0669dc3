//! The stable codes and the words of the typed outcomes ([`Refusal`], [`Gap`]): programs decide
//! by the code, people read the sentence (`Display`, declared with each variant), and neither
//! changes when the other does. A code is never reused for another meaning; the list is pinned
//! by `tests/outcome_codes.txt`.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::policy::{Backend, Mode};

wire! {
    OUTCOME_SCHEMA_TEXT;
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
             not give: abstract socket names would be shared with the host; use the namespaces \
             or bwrap backend (bwrap: install bubblewrap) or drop unix_sockets"
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
             {abi}: use the namespaces or bwrap backend (bwrap: install bubblewrap)"
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
             cannot be enforced; use the namespaces or bwrap backend (bwrap: install bubblewrap) \
             or drop local_binding"
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
        #[error(
            "the seatbelt backend does not run commands as root: its profile is proved for an \
             ordinary user only, and root reaches what it does not name (nvram, sysctl writes, \
             the system's services); run agentd and confine-helper as your own user"
        )]
        SeatbeltAsRoot,
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
        /// `services` names the Mach services the Seatbelt profile lets a command reach.
        #[error(
            "session services: the command reaches the Mach services {services}, which act \
             outside the sandbox on its behalf; the Seatbelt profile cannot confine what they do"
        )]
        SessionServices { services: String },
        #[error(
            "process isolation: other processes' names and ids are listed (sysctl kern.proc), \
             and their scheduling is not guarded; Seatbelt has no rule for either (their \
             command lines, kern.procargs, are denied)"
        )]
        ProcessListing,
        #[error(
            "POSIX semaphores: one namespace for all of the user's processes, so a command can \
             open and change those of processes outside the sandbox (POSIX shared memory is \
             denied)"
        )]
        SharedMemory,
        /// `version` is the running macOS's product version.
        #[error(
            "not yet verified on this macOS version ({version}): the Seatbelt profile has not \
             passed the kernel-e2e suite on it, so what it denies is designed, not proved"
        )]
        UnverifiedMacos { version: String },
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
}

impl Refusal {
    /// The rule's stable name, kebab-case.
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::EmptyArgv => "empty-argv",
            Refusal::NulInArgv { .. } => "nul-in-argv",
            Refusal::EmptyProgram => "empty-program",
            Refusal::RelativeCwd => "relative-cwd",
            Refusal::NulInCwd => "nul-in-cwd",
            Refusal::BadEnvName { .. } => "bad-env-name",
            Refusal::NulInEnvValue { .. } => "nul-in-env-value",
            Refusal::NulInPolicy { .. } => "nul-in-policy",
            Refusal::IdInUse { .. } => "id-in-use",
            Refusal::TooManyCommands { .. } => "too-many-commands",
            Refusal::CeilingBroken { .. } => "ceiling-broken",
            Refusal::CeilingMode { .. } => "ceiling-mode",
            Refusal::CeilingNetwork => "ceiling-network",
            Refusal::CeilingNotUnder { .. } => "ceiling-not-under",
            Refusal::CeilingNeverWritable { .. } => "ceiling-never-writable",
            Refusal::CeilingPartial { .. } => "ceiling-partial",
            Refusal::CeilingUnixSockets => "ceiling-unix-sockets",
            Refusal::SecretVariable { .. } => "secret-variable",
            Refusal::NotALocale { .. } => "not-a-locale",
            Refusal::HoldsNeverRoot { .. } => "holds-never-root",
            Refusal::HoldsOwnedPath { .. } => "holds-owned-path",
            Refusal::NotAbsolute { .. } => "not-absolute",
            Refusal::NotADirectory { .. } => "not-a-directory",
            Refusal::LinkInRoot { .. } => "link-in-root",
            Refusal::Unusable { .. } => "unusable-path",
            Refusal::InsideDenied { .. } => "inside-denied-read",
            Refusal::LinkOnPath { .. } => "link-on-path",
            Refusal::RootInsideKept { .. } => "root-inside-kept",
            Refusal::BadProtected { .. } => "bad-protected-path",
            Refusal::DeniedNotAbsolute { .. } => "denied-not-absolute",
            Refusal::DeniedUnusable { .. } => "denied-unusable",
            Refusal::DeniedUnknownKind { .. } => "denied-unknown-kind",
            Refusal::DeniedHoldsWritable { .. } => "denied-holds-writable",
            Refusal::DeniedLink { .. } => "denied-link",
            Refusal::SocketsNeedNamespace { .. } => "sockets-need-namespace",
            Refusal::SocketsNeedNetworkDenied => "sockets-need-network-denied",
            Refusal::SocketNotAbsolute { .. } => "socket-not-absolute",
            Refusal::SocketNameTooLong { .. } => "socket-name-too-long",
            Refusal::SocketUnusable { .. } => "socket-unusable",
            Refusal::NotASocket { .. } => "not-a-socket",
            Refusal::SocketInWritable { .. } => "socket-in-writable",
            Refusal::SocketIsOwn { .. } => "socket-is-own",
            Refusal::SocketRealTooLong { .. } => "socket-real-too-long",
            Refusal::ProxyWithNetwork => "proxy-with-network",
            Refusal::ProxyNeedsLandlockNet { .. } => "proxy-needs-landlock-net",
            Refusal::ProxyNeedsInnerLayer { .. } => "proxy-needs-inner-layer",
            Refusal::LocalBindingNeedsNamespace { .. } => "local-binding-needs-namespace",
            Refusal::SeatbeltLocalBinding => "seatbelt-local-binding",
            Refusal::SeatbeltProfile { .. } => "seatbelt-profile",
            Refusal::SeatbeltAsRoot => "seatbelt-as-root",
        }
    }
}

impl Gap {
    /// The gap's stable name, kebab-case.
    pub fn code(&self) -> &'static str {
        match self {
            Gap::Truncate => "truncate",
            Gap::DeviceIoctl => "device-ioctl",
            Gap::Signals => "signals",
            Gap::FileMetadata => "file-metadata",
            Gap::InnerLandlock { .. } => "inner-landlock",
            Gap::ProcessVisibility => "process-visibility",
            Gap::DeniedInWritable { .. } => "denied-in-writable",
            Gap::DeniedNames { .. } => "denied-names",
            Gap::ProtectedInLandlock { .. } => "protected-in-landlock",
            Gap::ProcessCap { .. } => "process-cap",
            Gap::ProcessTree => "process-tree",
            Gap::AddressSpace => "address-space",
            Gap::HostProxyPort { .. } => "host-proxy-port",
            Gap::SessionServices { .. } => "session-services",
            Gap::ProcessListing => "process-listing",
            Gap::SharedMemory => "shared-memory",
            Gap::UnverifiedMacos { .. } => "unverified-macos",
            Gap::NoRepository { .. } => "no-repository",
            Gap::NoSubmodule { .. } => "no-submodule",
            Gap::NoProtected { .. } => "no-protected-path",
            Gap::NoPointedDir { .. } => "no-pointed-dir",
            Gap::UnreadIndex { .. } => "unread-index",
            Gap::DeepSubmodules { .. } => "deep-submodules",
        }
    }
}

impl fmt::Display for PathRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PathRole::WritableRoot => "writable root",
            PathRole::SessionTemp => "session temp directory",
            PathRole::WorkingDirectory => "the working directory",
            PathRole::Visible => "visible path",
        })
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Owner::Helper => "the helper's own files",
            Owner::Requester => "the requester's own files",
        })
    }
}

/// The gaps of a refusal, in one line.
pub(crate) fn joined(gaps: &[Gap]) -> String {
    let sentences: Vec<String> = gaps.iter().map(Gap::to_string).collect();
    sentences.join("; ")
}

/// ` (real)` after a path named through a link, when its real path is known.
pub(crate) fn in_parens(real: &Option<String>) -> String {
    real.as_ref().map(|r| format!(" ({r})")).unwrap_or_default()
}
