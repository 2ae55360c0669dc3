//! How each backend's denials read in a command's stderr: one table of (text, meaning, backends),
//! and the words that say what a line was about.
//!
//! A backend denies through the kernel's error codes, and programs print those as `strerror`
//! words them ("Read-only file system"), as Go and libuv (node, npm) spell them ("open /x:
//! permission denied", "EACCES: permission denied, open '/x'"), or, for the network, as the
//! resolver or the client words the failure that follows ("Temporary failure in name
//! resolution", "Could not resolve host"). Which codes a backend produces, and for what, is a
//! fact of the backend, checked on the real kernel by `kernel-e2e`:
//!
//! - bwrap: writes outside the writable roots meet read-only mounts (`EROFS`); the empty network
//!   namespace makes the network unreachable; the seccomp filter answers `EPERM`; and Landlock,
//!   applied inside the namespace too, answers `EACCES` for what mounts do not cover (special
//!   files, TCP `connect`/`bind`).
//! - namespaces: the helper's own namespaces and mounts, with the same binds bwrap makes and
//!   Landlock and the seccomp filter inside, so the same codes as bwrap for the same reasons.
//! - landlock: denied file accesses and, with the network denied, TCP `connect`/`bind` are
//!   `EACCES`; the seccomp filter (every socket family with the network denied, `AF_UNIX`
//!   always, tracing, mounts, metadata in read-only mode) and Landlock's scopes (signals) answer
//!   `EPERM`.
//! - seatbelt: the profile answers `EPERM` for files as for everything else.
//!
//! The table is the one place to change when a backend's dialect changes.

use confine_protocol::{Backend, Network};

/// What a text means when a backend's command prints it; the line's paths and the host then
/// decide whether the sandbox was the cause (see the parent module).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Meaning {
    /// A write a read-only mount refused (`EROFS`).
    ReadOnlyMount,
    /// A file access the backend's rules refused (`EACCES`; Seatbelt's `EPERM`). Without a path,
    /// a TCP `connect` or `bind` when the line is about the network.
    FileAccess,
    /// A call the seccomp filter or Landlock's scopes refused (`EPERM`): a system interface; with
    /// a path and a metadata verb, a metadata change (filtered in read-only mode).
    Filtered,
    /// The network failed as it does when the sandbox has none; counts only when the policy
    /// denied the network.
    NoNetwork,
}

/// One way a denial shows in a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pattern {
    /// Matched case-sensitively, anywhere in the line.
    pub text: &'static str,
    pub meaning: Meaning,
    /// The backends whose commands see it.
    pub backends: &'static [Backend],
}

/// The backends that confine with read-only mounts of their own.
const MOUNTS: &[Backend] = &[Backend::Bwrap, Backend::Namespaces];
const LINUX: &[Backend] = &[Backend::Bwrap, Backend::Namespaces, Backend::Landlock];
const SEATBELT: &[Backend] = &[Backend::Seatbelt];
const CONFINING: &[Backend] = &[
    Backend::Bwrap,
    Backend::Namespaces,
    Backend::Landlock,
    Backend::Seatbelt,
];

const fn p(text: &'static str, meaning: Meaning, backends: &'static [Backend]) -> Pattern {
    Pattern {
        text,
        meaning,
        backends,
    }
}

/// Every backend's dialect, in the order lines are matched: the network's texts first, since a
/// line that names the network and an error code is about the network. The lowercase spellings
/// (Go, libuv) are matched only after `": "`, where those libraries put them, so that a program's
/// own sentence ("operation not permitted by policy") does not count.
pub const DIALECT: &[Pattern] = &[
    // The resolver finds no server to ask (glibc EAI_AGAIN; node; curl and git; ssh; wget).
    p(
        "Temporary failure in name resolution",
        Meaning::NoNetwork,
        CONFINING,
    ),
    p("EAI_AGAIN", Meaning::NoNetwork, CONFINING),
    p("Could not resolve host", Meaning::NoNetwork, CONFINING),
    p(
        "unable to resolve host address",
        Meaning::NoNetwork,
        CONFINING,
    ),
    // ENETUNREACH in an empty network namespace (strerror; Go).
    p("Network is unreachable", Meaning::NoNetwork, CONFINING),
    p(": network is unreachable", Meaning::NoNetwork, CONFINING),
    // A client's words for a connection that could not be made (curl; urllib3, so pip and
    // requests; node; Go).
    p("Couldn't connect to server", Meaning::NoNetwork, CONFINING),
    p(
        "Failed to establish a new connection",
        Meaning::NoNetwork,
        CONFINING,
    ),
    p("connect EACCES", Meaning::NoNetwork, CONFINING),
    p("connect EPERM", Meaning::NoNetwork, CONFINING),
    p("dial tcp", Meaning::NoNetwork, CONFINING),
    p("dial udp", Meaning::NoNetwork, CONFINING),
    // EROFS.
    p("Read-only file system", Meaning::ReadOnlyMount, MOUNTS),
    p(": read-only file system", Meaning::ReadOnlyMount, MOUNTS),
    // EACCES.
    p("Permission denied", Meaning::FileAccess, LINUX),
    p(": permission denied", Meaning::FileAccess, LINUX),
    // EPERM.
    p("Operation not permitted", Meaning::Filtered, LINUX),
    p(": operation not permitted", Meaning::Filtered, LINUX),
    p("Operation not permitted", Meaning::FileAccess, SEATBELT),
    p(": operation not permitted", Meaning::FileAccess, SEATBELT),
];

/// The first pattern of `backend`'s dialect that `line` shows; the network's patterns only when
/// `network` is denied.
pub fn find(backend: Backend, network: Network, line: &str) -> Option<&'static Pattern> {
    DIALECT.iter().find(|pattern| {
        pattern.backends.contains(&backend)
            && (pattern.meaning != Meaning::NoNetwork || network == Network::Deny)
            && line.contains(pattern.text)
    })
}

/// Lines containing one of these are not sandbox denials even though they contain a denial
/// text: they are a remote end refusing, not the local kernel. Each entry is as specific as it
/// can be, so that a real denial on the same kind of line (say Rust's
/// "Permission denied (os error 13)") still counts.
pub const NOT_SANDBOX_DENIALS: &[&str] = &[
    // ssh: the server rejected every authentication method ("Permission denied (publickey).",
    // "Permission denied (publickey,password).", …); one entry per method ssh can list first.
    "Permission denied (publickey",
    "Permission denied (password",
    "Permission denied (keyboard-interactive",
    "Permission denied (hostbased",
    "Permission denied (gssapi",
    // ssh: a wrong password at the prompt.
    "Permission denied, please try again",
];

/// Words by which a line (or the lines just before it, for a traceback) shows that a path-less
/// `EACCES` or `EPERM` came from a network call: Python's socket calls and urllib, resolvers.
pub const NETWORK_CONTEXT: &[&str] = &[
    "connect(",
    "create_connection",
    "getaddrinfo",
    "urlopen",
    "HTTPConnection",
    "HTTPSConnection",
    "AF_INET",
    // Python creating, binding or listening on a socket, as a traceback's source lines show it
    // (`socket.socket()` is AF_INET; `python3 -c` shows no source, so such a denial stays a
    // system interface).
    "socket.socket(",
    ".bind((",
    ".listen(",
    // Node's `net` errors ("listen EACCES: permission denied 127.0.0.1:8000").
    "listen EACCES",
    "listen EPERM",
    "bind EACCES",
    "bind EPERM",
];

/// Words by which the same context shows the call was about a Unix socket, which the filter
/// refuses in every confined mode: then it is a `socket` denial, not the network.
pub const UNIX_SOCKET_CONTEXT: &[&str] = &[
    "AF_UNIX",
    "socket.AF_UNIX",
    "AddressFamily.AF_UNIX",
    // Node's `net` errors on a pathname socket ("connect EPERM /var/run/docker.sock").
    "connect EPERM /",
    "connect EACCES /",
];

/// How many lines before a path-less denial line are searched for [`NETWORK_CONTEXT`]: the
/// frames of a Python traceback, back to its [`TRACEBACK_START`], or else a few lines.
pub const CONTEXT_LINES: usize = 4;

/// The line a Python traceback starts with; its frames name the calls that failed.
pub const TRACEBACK_START: &str = "Traceback (most recent call last):";

/// The most lines searched back for a [`TRACEBACK_START`].
pub const TRACEBACK_LINES: usize = 64;

/// Programs whose denials are reads, as they start their messages ("cat: x: Permission
/// denied"), and phrases that say a read was refused.
pub const READ_PROGRAMS: &[&str] = &[
    "cat",
    "head",
    "tail",
    "less",
    "more",
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "wc",
    "sort",
    "uniq",
    "diff",
    "cmp",
    "od",
    "xxd",
    "hexdump",
    "strings",
    "tac",
    "nl",
    "cut",
    "md5sum",
    "sha1sum",
    "sha256sum",
    "sha512sum",
    "b2sum",
    "cksum",
    "ls",
    "du",
    "find",
    "tree",
    "file",
    "source",
];

/// Phrases that say the refused access was a read.
pub const READ_PHRASES: &[&str] = &[
    "for reading",
    "cannot read",
    "could not read",
    "failed to read",
    "unable to read",
    "cannot open directory",
    "cannot access",
    "opendir",
    "scandir",
    // dash's input redirection ("sh: 1: cannot open x: Permission denied"); its output
    // redirection says "cannot create".
    "cannot open ",
];

/// Phrases that say the refused access removed or renamed a name, which the parent directory
/// decides.
pub const REMOVE_PHRASES: &[&str] = &[
    "cannot remove",
    "failed to remove",
    "cannot move",
    "cannot rename",
    "unlink",
    "rmdir",
    "rename",
];

/// Phrases that say an `EPERM` on a path was a change of its metadata, which the seccomp filter
/// refuses in read-only mode (chmod, chown, touch, setfattr, chattr, and their libraries).
pub const METADATA_PHRASES: &[&str] = &[
    "changing permissions",
    "changing ownership",
    "changing group",
    "setting times",
    "cannot touch",
    "chmod",
    "chown",
    "lchown",
    "utime",
    "xattr",
    "setfattr",
    "chattr",
];

/// Words that, in the field before a denial text, announce the path as its last word ("cannot
/// create x", "open x", "unable to create file x").
pub const PATH_VERBS: &[&str] = &[
    "create", "creat", "open", "write", "mkdir", "touch", "remove", "unlink", "rename", "move",
    "stat", "lstat", "access", "lock", "copy", "link", "symlink", "chmod", "chown", "read",
    "truncate",
];
