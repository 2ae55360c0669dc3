//! The stable codes and the words of the typed outcomes ([`Refusal`], [`Gap`]): programs decide
//! by the code, people read the sentence (`Display`, declared with each variant), and neither
//! changes when the other does. A code is never reused for another meaning; the list is pinned
//! by `tests/outcome_codes.txt`.

use std::fmt;

use crate::{Gap, Owner, PathRole, Refusal};

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
            Refusal::RelativeFilePath => "relative-file-path",
            Refusal::NulInFilePath => "nul-in-file-path",
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
            Gap::SessionServices => "session-services",
            Gap::ProcessListing => "process-listing",
            Gap::SharedMemory => "shared-memory",
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
