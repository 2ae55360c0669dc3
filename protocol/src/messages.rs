//! The messages agentd and confine-helper exchange.
//!
//! Every type that crosses the wire is declared inside a `wire!` block: this file's, the
//! policy's (`policy.rs`) and the outcomes' (`outcome.rs`). The macro emits the declarations
//! unchanged and also their token text ([`crate::SCHEMA_TEXT`]); the handshake's schema hash is
//! computed from that text, so a field or variant added on one side and not the other
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

use crate::outcome::{Gap, Refusal};
use crate::policy::{Backend, BackendChoice, Bytes, Limits, Mode, Network, Policy};

wire! {
    MESSAGES_SCHEMA_TEXT;
    /// The first frame each side sends, before anything else. Its layout is frozen: it must stay
    /// decodable by every past and future version so that a mismatch can be explained.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Hello {
        pub protocol_version: u32,
        pub schema_hash: u64,
        pub software: String,
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
        /// connection goes (agentd's allow-list proxy); under the namespaces or bwrap backend
        /// (under Landlock the shim hands each `connect` over instead), with the network denied
        /// only; refused otherwise.
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

    /// What the confinement actually enforced, as the helper can prove it.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub enum Enforcement {
        Full,
        Partial { missing: Vec<Gap> },
    }

    /// One confinement mechanism the helper applied to a command. A confined command gets
    /// two layers that each stop what the other does not cover: mount, PID, IPC and network
    /// namespaces (the namespaces and bwrap backends) or nothing, then Landlock, then the
    /// seccomp filter.
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
        /// The namespaces or the mounts could not be built: bwrap ended before the command
        /// started, or the namespace backend's shim failed a step of its sandbox.
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
