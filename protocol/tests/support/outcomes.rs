//! One sample of every variant of the typed outcomes, walked in wire order: the golden vectors
//! and the code and text checks share it. Each walk's `match` is exhaustive, so a new variant
//! does not compile until its sample exists.

// Each test crate that includes this module uses only some of the walks.
#![allow(dead_code)]

use confine_protocol::*;

/// The first Refusal of the walk.
pub fn first_refusal() -> Refusal {
    Refusal::EmptyArgv
}

/// The Refusal after `refusal` in wire order, with sample values.
pub fn next_refusal(refusal: &Refusal) -> Option<Refusal> {
    Some(match refusal {
        Refusal::EmptyArgv => Refusal::NulInArgv { index: 2 },
        Refusal::NulInArgv { .. } => Refusal::EmptyProgram,
        Refusal::EmptyProgram => Refusal::RelativeCwd,
        Refusal::RelativeCwd => Refusal::NulInCwd,
        Refusal::NulInCwd => Refusal::BadEnvName { index: 2 },
        Refusal::BadEnvName { .. } => Refusal::NulInEnvValue { index: 2 },
        Refusal::NulInEnvValue { .. } => Refusal::NulInPolicy {
            field: "deny_read[0]".to_owned(),
        },
        Refusal::NulInPolicy { .. } => Refusal::IdInUse { id: 9 },
        Refusal::IdInUse { .. } => Refusal::TooManyCommands { max: 108 },
        Refusal::TooManyCommands { .. } => Refusal::CeilingBroken {
            why: "Permission denied (os error 13)".to_owned(),
        },
        Refusal::CeilingBroken { .. } => Refusal::CeilingMode {
            max: Mode::ReadOnly,
            asked: Mode::WorkspaceWrite,
        },
        Refusal::CeilingMode { .. } => Refusal::CeilingNetwork,
        Refusal::CeilingNetwork => Refusal::CeilingNotUnder {
            list: 1,
            root: "/ws".to_owned(),
        },
        Refusal::CeilingNotUnder { .. } => Refusal::CeilingNeverWritable {
            never: "/home/u/.config/agentd".to_owned(),
            root: "/ws".to_owned(),
        },
        Refusal::CeilingNeverWritable { .. } => Refusal::CeilingPartial {
            backend: Backend::Landlock,
            missing: vec![Gap::Truncate, Gap::ProcessVisibility],
        },
        Refusal::CeilingPartial { .. } => Refusal::CeilingUnixSockets,
        Refusal::CeilingUnixSockets => Refusal::SecretVariable {
            name: "AWS_SECRET".to_owned(),
            word: "SECRET".to_owned(),
            system_file: "/etc/confine-helper/ceiling.toml".to_owned(),
        },
        Refusal::SecretVariable { .. } => Refusal::NotALocale {
            name: "AWS_SECRET".to_owned(),
        },
        Refusal::NotALocale { .. } => Refusal::HoldsNeverRoot {
            role: PathRole::WritableRoot,
            root: "/ws".to_owned(),
            never: "/home/u/.config/agentd".to_owned(),
        },
        Refusal::HoldsNeverRoot { .. } => Refusal::HoldsOwnedPath {
            role: PathRole::WritableRoot,
            root: "/ws".to_owned(),
            never: "/home/u/.config/agentd".to_owned(),
            owner: Owner::Requester,
        },
        Refusal::HoldsOwnedPath { .. } => Refusal::NotAbsolute {
            role: PathRole::WritableRoot,
            path: "/ws/a".to_owned(),
        },
        Refusal::NotAbsolute { .. } => Refusal::NotADirectory {
            role: PathRole::WritableRoot,
            path: "/ws/a".to_owned(),
        },
        Refusal::NotADirectory { .. } => Refusal::LinkInRoot {
            role: PathRole::WritableRoot,
            path: "/ws/a".to_owned(),
            real: Some("/ws/real".to_owned()),
        },
        Refusal::LinkInRoot { .. } => Refusal::Unusable {
            role: PathRole::WritableRoot,
            path: "/ws/a".to_owned(),
            why: "Permission denied (os error 13)".to_owned(),
        },
        Refusal::Unusable { .. } => Refusal::InsideDenied {
            role: PathRole::WritableRoot,
            path: "/ws/a".to_owned(),
            denied: "/ws/secret".to_owned(),
        },
        Refusal::InsideDenied { .. } => Refusal::LinkOnPath {
            role: PathRole::WritableRoot,
            path: "/ws/a".to_owned(),
        },
        Refusal::LinkOnPath { .. } => Refusal::RootInsideKept {
            root: "/ws".to_owned(),
            kept: "/ws/.git".to_owned(),
        },
        Refusal::RootInsideKept { .. } => Refusal::BadProtected {
            path: "/ws/a".to_owned(),
        },
        Refusal::BadProtected { .. } => Refusal::DeniedNotAbsolute {
            path: "/ws/a".to_owned(),
        },
        Refusal::DeniedNotAbsolute { .. } => Refusal::DeniedUnusable {
            path: "/ws/a".to_owned(),
            why: "Permission denied (os error 13)".to_owned(),
        },
        Refusal::DeniedUnusable { .. } => Refusal::DeniedUnknownKind {
            why: "Permission denied (os error 13)".to_owned(),
        },
        Refusal::DeniedUnknownKind { .. } => Refusal::DeniedHoldsWritable {
            path: "/ws/a".to_owned(),
            root: "/ws".to_owned(),
        },
        Refusal::DeniedHoldsWritable { .. } => Refusal::DeniedLink {
            path: "/ws/a".to_owned(),
            real: Some("/ws/real".to_owned()),
        },
        Refusal::DeniedLink { .. } => Refusal::SocketsNeedNamespace {
            backend: Backend::Landlock,
        },
        Refusal::SocketsNeedNamespace { .. } => Refusal::SocketsNeedNetworkDenied,
        Refusal::SocketsNeedNetworkDenied => Refusal::SocketNotAbsolute {
            path: "/ws/a".to_owned(),
        },
        Refusal::SocketNotAbsolute { .. } => Refusal::SocketNameTooLong {
            path: "/ws/a".to_owned(),
            max: 108,
        },
        Refusal::SocketNameTooLong { .. } => Refusal::SocketUnusable {
            path: "/ws/a".to_owned(),
            why: "Permission denied (os error 13)".to_owned(),
        },
        Refusal::SocketUnusable { .. } => Refusal::NotASocket {
            path: "/ws/a".to_owned(),
            real: "/ws/real".to_owned(),
        },
        Refusal::NotASocket { .. } => Refusal::SocketInWritable {
            path: "/ws/a".to_owned(),
            root: "/ws".to_owned(),
        },
        Refusal::SocketInWritable { .. } => Refusal::SocketIsOwn {
            path: "/ws/a".to_owned(),
            own: "/run/confine-helper".to_owned(),
        },
        Refusal::SocketIsOwn { .. } => Refusal::SocketRealTooLong {
            path: "/ws/a".to_owned(),
            real: "/ws/real".to_owned(),
            max: 108,
        },
        Refusal::SocketRealTooLong { .. } => Refusal::ProxyWithNetwork,
        Refusal::ProxyWithNetwork => Refusal::ProxyNeedsLandlockNet { needed: 4, abi: 3 },
        Refusal::ProxyNeedsLandlockNet { .. } => Refusal::ProxyNeedsInnerLayer {
            why: "Permission denied (os error 13)".to_owned(),
        },
        Refusal::ProxyNeedsInnerLayer { .. } => Refusal::LocalBindingNeedsNamespace {
            backend: Backend::Landlock,
        },
        Refusal::LocalBindingNeedsNamespace { .. } => Refusal::SeatbeltLocalBinding,
        Refusal::SeatbeltLocalBinding => Refusal::SeatbeltProfile {
            why: "Permission denied (os error 13)".to_owned(),
        },
        Refusal::SeatbeltProfile { .. } => Refusal::SeatbeltAsRoot,
        Refusal::SeatbeltAsRoot => return None,
    })
}

/// The first Gap of the walk.
pub fn first_gap() -> Gap {
    Gap::Truncate
}

/// The Gap after `gap` in wire order, with sample values.
pub fn next_gap(gap: &Gap) -> Option<Gap> {
    Some(match gap {
        Gap::Truncate => Gap::DeviceIoctl,
        Gap::DeviceIoctl => Gap::Signals,
        Gap::Signals => Gap::FileMetadata,
        Gap::FileMetadata => Gap::InnerLandlock {
            why: "Permission denied (os error 13)".to_owned(),
        },
        Gap::InnerLandlock { .. } => Gap::ProcessVisibility,
        Gap::ProcessVisibility => Gap::DeniedInWritable {
            path: "/ws/a".to_owned(),
            root: "/ws".to_owned(),
        },
        Gap::DeniedInWritable { .. } => Gap::DeniedNames {
            path: "/ws/a".to_owned(),
        },
        Gap::DeniedNames { .. } => Gap::ProtectedInLandlock {
            path: "/ws/a".to_owned(),
        },
        Gap::ProtectedInLandlock { .. } => Gap::ProcessCap {
            processes: 2048,
            why: "Permission denied (os error 13)".to_owned(),
        },
        Gap::ProcessCap { .. } => Gap::ProcessTree,
        Gap::ProcessTree => Gap::AddressSpace,
        Gap::AddressSpace => Gap::HostProxyPort { port: 3128 },
        Gap::HostProxyPort { .. } => Gap::SessionServices {
            services: "com.apple.trustd (certificate trust)".to_owned(),
        },
        Gap::SessionServices { .. } => Gap::ProcessListing,
        Gap::ProcessListing => Gap::SharedMemory,
        Gap::SharedMemory => Gap::UnverifiedMacos {
            version: "15.1".to_owned(),
        },
        Gap::UnverifiedMacos { .. } => Gap::NoRepository {
            dot: "/ws/.git".to_owned(),
        },
        Gap::NoRepository { .. } => Gap::NoSubmodule {
            path: "/ws/a".to_owned(),
            at: "/ws/sub".to_owned(),
        },
        Gap::NoSubmodule { .. } => Gap::NoProtected {
            path: "/ws/a".to_owned(),
            at: "/ws/sub".to_owned(),
        },
        Gap::NoProtected { .. } => Gap::NoPointedDir {
            what: "the common directory of a repository".to_owned(),
            path: "/ws/a".to_owned(),
            at: "/ws/sub".to_owned(),
        },
        Gap::NoPointedDir { .. } => Gap::UnreadIndex {
            path: "/ws/a".to_owned(),
            index: "/ws/.git/index".to_owned(),
            why: "Permission denied (os error 13)".to_owned(),
        },
        Gap::UnreadIndex { .. } => Gap::DeepSubmodules {
            max: 108,
            root: "/ws".to_owned(),
        },
        Gap::DeepSubmodules { .. } => return None,
    })
}

/// The PathRole after `path_role` in wire order.
pub fn next_path_role(path_role: &PathRole) -> Option<PathRole> {
    Some(match path_role {
        PathRole::WritableRoot => PathRole::SessionTemp,
        PathRole::SessionTemp => PathRole::WorkingDirectory,
        PathRole::WorkingDirectory => PathRole::Visible,
        PathRole::Visible => return None,
    })
}

/// The Owner after `owner` in wire order.
pub fn next_owner(owner: &Owner) -> Option<Owner> {
    Some(match owner {
        Owner::Helper => Owner::Requester,
        Owner::Requester => return None,
    })
}
