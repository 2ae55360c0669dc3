//! What a request asks for, checked against the ceiling and the helper's own rules: its
//! writable roots (opened once, held by descriptor), its environment, its limits and its
//! protected paths.

use std::ffi::OsStr;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use confine_protocol::{
    Backend, EnvVar, Mode, Network, Owner, PROTECTED_SUBPATHS as PROTECTED, PathRole, Refusal,
    Spawn, Stage,
};
use nix::libc;

use super::context::Context;
use super::not_run::{NotRun, fail, real_of, refuse, shown};
use crate::ceiling::{Ceiling, EnvVerdict};
use crate::connects::{Listed, MAX_PATH_LEN};
use crate::paths;
use crate::protect::{self, Protection, Root};

fn path_of(bytes: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(bytes))
}

/// The paths no writable root may contain or lie inside, for this request: the helper's own,
/// the requester's (`Policy::never_writable`), resolved.
fn never_writable(spawn: &Spawn, ctx: &Context) -> Vec<(PathBuf, Owner)> {
    let mut never: Vec<(PathBuf, Owner)> = ctx
        .own_paths
        .iter()
        .map(|p| (p.clone(), Owner::Helper))
        .collect();
    never.extend(
        spawn
            .policy
            .never_writable
            .iter()
            .map(|raw| path_of(raw))
            .filter(|p| p.is_absolute())
            .map(|p| (paths::resolve(&p), Owner::Requester)),
    );
    never
}

/// The directories that may never be a writable root nor lie inside one: the helper's own
/// list, and the `HOME` the command gets, where its shell finds `~/.bashrc`, resolved.
fn never_roots(spawn: &Spawn, ctx: &Context) -> Vec<PathBuf> {
    let mut dirs = ctx.never_roots.clone();
    dirs.extend(
        spawn
            .env
            .iter()
            .filter(|v| v.name == b"HOME")
            .map(|v| path_of(&v.value))
            .filter(|p| p.is_absolute())
            .map(|p| paths::resolve(&p)),
    );
    dirs
}

/// Checks the request against the ceiling and opens its writable roots, once each: every check
/// is made on the path the kernel reports for the descriptor, and the descriptor is what the
/// backend later makes writable.
pub(crate) fn writable_roots(spawn: &Spawn, ctx: &Context) -> Result<Vec<Root>, NotRun> {
    let network = spawn.policy.network == Network::Allow;
    if let Err(reason) = ctx.ceiling.check_mode(spawn.policy.mode, network) {
        return refuse(reason);
    }
    if spawn.policy.mode != Mode::WorkspaceWrite {
        return Ok(Vec::new());
    }
    let requested = spawn
        .policy
        .workspace_root
        .iter()
        .chain(spawn.policy.writable_roots.iter());
    let never = never_writable(spawn, ctx);
    let never_roots = never_roots(spawn, ctx);
    let mut roots: Vec<Root> = Vec::new();
    for raw in requested {
        let root = open_root(&path_of(raw), PathRole::WritableRoot)?;
        check_root(&root, PathRole::WritableRoot, ctx, &never, &never_roots)?;
        if !roots.iter().any(|r| r.path == root.path) {
            roots.push(root);
        }
    }
    Ok(roots)
}

/// The session's temp directory (`Policy::session_temp`) in a confined mode, opened and checked
/// exactly like a writable root: it is one in workspace-write.
pub(crate) fn session_temp(spawn: &Spawn, ctx: &Context) -> Result<Option<Root>, NotRun> {
    let Some(raw) = &spawn.policy.session_temp else {
        return Ok(None);
    };
    if spawn.policy.mode == Mode::DangerFullAccess {
        return Ok(None);
    }
    let root = open_root(&path_of(raw), PathRole::SessionTemp)?;
    let never = never_writable(spawn, ctx);
    check_root(
        &root,
        PathRole::SessionTemp,
        ctx,
        &never,
        &never_roots(spawn, ctx),
    )?;
    Ok(Some(root))
}

/// Refuses `root` (in the `role`) when it would make a directory that is never writable writable,
/// or when the ceiling forbids it.
fn check_root(
    root: &Root,
    role: PathRole,
    ctx: &Context,
    never: &[(PathBuf, Owner)],
    never_roots: &[PathBuf],
) -> Result<(), NotRun> {
    if let Some(p) = never_roots.iter().find(|p| p.starts_with(&root.path)) {
        return refuse(Refusal::HoldsNeverRoot {
            role,
            root: shown(&root.path),
            never: shown(p),
        });
    }
    if let Err(reason) = ctx.ceiling.check_root(&root.path) {
        return refuse(reason);
    }
    if let Some((p, owner)) = never
        .iter()
        .find(|(p, _)| p.starts_with(&root.path) || root.path.starts_with(p))
    {
        return refuse(Refusal::HoldsOwnedPath {
            role,
            root: shown(&root.path),
            never: shown(p),
            owner: *owner,
        });
    }
    Ok(())
}

/// Opens one requested root as it is named, without following any symbolic link on its path: a
/// link could have been planted by a command (one of another session, writing where this root
/// lies), and a root it redirected would be checked where the link points. The requester names
/// roots by their real paths (agentd resolves the workspace once, when a session starts); every
/// check is made on the path the kernel then reports for the descriptor.
fn open_root(given: &Path, role: PathRole) -> Result<Root, NotRun> {
    if !given.is_absolute() {
        return refuse(Refusal::NotAbsolute {
            role,
            path: shown(given),
        });
    }
    let fd = match paths::open_dir(given) {
        Ok(fd) => fd,
        Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => {
            return refuse(Refusal::NotADirectory {
                role,
                path: shown(given),
            });
        }
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return refuse(Refusal::LinkInRoot {
                role,
                path: shown(given),
                real: real_of(given),
            });
        }
        Err(e) => return refuse(unusable(role, given, &e)),
    };
    let path =
        paths::fd_path(fd.as_fd()).map_err(|e| NotRun::Refused(unusable(role, given, &e)))?;
    Ok(Root { path, fd })
}

/// The refusal of a root (in the `role`) that could not be opened or named.
fn unusable(role: PathRole, given: &Path, e: &dyn std::fmt::Display) -> Refusal {
    Refusal::Unusable {
        role,
        path: shown(given),
        why: e.to_string(),
    }
}

/// The most bytes a Unix socket address holds, as a refusal names it.
fn socket_address_len() -> u64 {
    u64::try_from(MAX_PATH_LEN).unwrap_or(u64::MAX)
}

/// The request's `unix_sockets`, checked, when `backend` confines and can supervise `connect`
/// so that only they are reached: bwrap, with its own network namespace, where abstract names are the
/// sandbox's own; Seatbelt, whose rules name the sockets a command may connect to (macOS has no
/// abstract names). Landlock shares the host's, where a command allowed Unix sockets could bind
/// abstract names that host programs connect to; with the network allowed bwrap shares it too.
pub(crate) fn confined_unix_sockets(
    spawn: &Spawn,
    ctx: &Context,
    backend: Backend,
    roots: &[Root],
    network_allowed: bool,
) -> Result<Option<Vec<Listed>>, NotRun> {
    if spawn.policy.unix_sockets.is_empty() || backend == Backend::None {
        return Ok(None);
    }
    if backend == Backend::Landlock {
        return refuse(Refusal::SocketsNeedNamespace { backend });
    }
    if network_allowed {
        return refuse(Refusal::SocketsNeedNetworkDenied);
    }
    unix_sockets(spawn, ctx, roots).map(Some)
}

/// The request's named Unix sockets, each resolved now to the socket the shim will connect a
/// command to when it names it. Refused: a name that is not absolute or too long for a socket
/// address, something that is not a socket, and a socket the command could swap — one inside a
/// writable root or the session's temp directory — or one of the helper's own (its service
/// socket would let a command ask for unconfined commands). A name with nothing behind it yet
/// is kept: connecting to it fails as a missing socket does.
fn unix_sockets(spawn: &Spawn, ctx: &Context, roots: &[Root]) -> Result<Vec<Listed>, NotRun> {
    let names = &spawn.policy.unix_sockets;
    if names.is_empty() {
        return Ok(Vec::new());
    }
    if !ctx.ceiling.allow_unix_sockets {
        return refuse(Refusal::CeilingUnixSockets);
    }
    let mut writable: Vec<PathBuf> = roots.iter().map(|r| r.path.clone()).collect();
    writable.extend(spawn.policy.session_temp.as_deref().map(path_of));
    let own: Vec<&PathBuf> = ctx.own_paths.iter().chain(&ctx.masked).collect();
    let mut listed = Vec::new();
    for name in names {
        let given = path_of(name);
        let path = shown(&given);
        if !given.is_absolute() || name.contains(&0) {
            return refuse(Refusal::SocketNotAbsolute { path });
        }
        if name.len() > MAX_PATH_LEN {
            return refuse(Refusal::SocketNameTooLong {
                path,
                max: socket_address_len(),
            });
        }
        let real = match std::fs::canonicalize(&given) {
            Ok(real) => real,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                listed.push(Listed::new(name.clone(), None));
                continue;
            }
            Err(e) => {
                return refuse(Refusal::SocketUnusable {
                    path,
                    why: e.to_string(),
                });
            }
        };
        let is_socket = match std::fs::metadata(&real) {
            Ok(m) => std::os::unix::fs::FileTypeExt::is_socket(&m.file_type()),
            Err(e) => {
                return refuse(Refusal::SocketUnusable {
                    path,
                    why: e.to_string(),
                });
            }
        };
        if !is_socket {
            return refuse(Refusal::NotASocket {
                path,
                real: shown(&real),
            });
        }
        if let Some(root) = writable.iter().find(|w| real.starts_with(w)) {
            return refuse(Refusal::SocketInWritable {
                path,
                root: shown(root),
            });
        }
        if let Some(p) = own.iter().find(|p| real.starts_with(p)) {
            return refuse(Refusal::SocketIsOwn {
                path,
                own: shown(p),
            });
        }
        let real_bytes = real.as_os_str().as_bytes();
        if real_bytes.len() > MAX_PATH_LEN {
            return refuse(Refusal::SocketRealTooLong {
                path,
                real: shown(&real),
                max: socket_address_len(),
            });
        }
        listed.push(Listed::new(name.clone(), Some(real_bytes)));
    }
    Ok(listed)
}

/// Refuses a request one of whose variables the ceiling refuses ([`Ceiling::env_verdict`]):
/// everything a request carries was asked for, so nothing that breaks the rules is dropped
/// without a word. (agentd leaves such variables of its own environment behind before it asks.)
pub(crate) fn check_environment(spawn: &Spawn, ctx: &Context) -> Result<(), NotRun> {
    for var in &spawn.env {
        let Ok(name) = std::str::from_utf8(&var.name) else {
            continue;
        };
        if let EnvVerdict::Refused(refusal) = ctx.ceiling.env_verdict(name, &var.value) {
            return refuse(refusal);
        }
    }
    Ok(())
}

/// The environment the command gets: the request's, less `TMPDIR`, names that are not UTF-8
/// and what the ceiling drops or refuses ([`check_environment`] has refused the request for
/// the latter already), with `TMPDIR` set to the private temp area (or removed when there is
/// none).
pub(crate) fn environment(spawn: &Spawn, ctx: &Context, tmpdir: Option<&Path>) -> Vec<EnvVar> {
    let mut env: Vec<EnvVar> = spawn
        .env
        .iter()
        .filter(|v| v.name != b"TMPDIR")
        .filter(|v| {
            std::str::from_utf8(&v.name)
                .is_ok_and(|name| ctx.ceiling.env_verdict(name, &v.value) == EnvVerdict::Passes)
        })
        .cloned()
        .collect();
    if let Some(dir) = tmpdir {
        env.push(EnvVar {
            name: b"TMPDIR".to_vec(),
            value: dir.as_os_str().as_bytes().to_vec(),
        });
    }
    env
}

/// RLIMITs: core dumps always off, the rest the lower of request and ceiling.
pub(crate) fn rlimits(spawn: &Spawn, ceiling: &Ceiling) -> Vec<(crate::sys::Resource, u64)> {
    let lower = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let mut limits = vec![(libc::RLIMIT_CORE, 0)];
    // The process cap is not among them: set here it would count every process of the user
    // (`caps`).
    let wanted = [
        (
            libc::RLIMIT_FSIZE,
            lower(spawn.limits.max_file_size, ceiling.max_file_size),
        ),
        (
            libc::RLIMIT_AS,
            lower(spawn.limits.max_address_space, ceiling.max_address_space),
        ),
    ];
    limits.extend(wanted.into_iter().filter_map(|(r, v)| v.map(|v| (r, v))));
    limits
}
/// What keeps the protected paths of `roots` read-only; a root inside one is refused.
pub(crate) fn protection(spawn: &Spawn, roots: &[Root]) -> Result<Protection, NotRun> {
    if roots.is_empty() {
        return Ok(Protection::default());
    }
    let extra = protected_names(spawn)?;
    let protection =
        protect::protect(roots, &extra).or_else(|e| fail(Stage::Prepare, e.to_string()))?;
    for root in roots {
        if let Some(kept) = protection
            .read_only
            .iter()
            .find(|b| root.path.starts_with(&b.path))
        {
            return refuse(Refusal::RootInsideKept {
                root: shown(&root.path),
                kept: shown(&kept.path),
            });
        }
    }
    Ok(protection)
}
/// The request's own protected subpaths, each a relative path without `..`; the built-in
/// `.git` is the repository walk of [`protect`] and needs no entry.
fn protected_names(spawn: &Spawn) -> Result<Vec<PathBuf>, NotRun> {
    let mut names: Vec<PathBuf> = Vec::new();
    for raw in &spawn.policy.protected {
        let p = path_of(raw);
        let relative = p.strip_prefix("/").unwrap_or(&p).to_owned();
        if relative.as_os_str().is_empty()
            || relative
                .components()
                .any(|c| !matches!(c, Component::Normal(_)))
        {
            return refuse(Refusal::BadProtected { path: shown(&p) });
        }
        if !PROTECTED.iter().any(|b| Path::new(b) == relative) && !names.contains(&relative) {
            names.push(relative);
        }
    }
    Ok(names)
}
