//! From a request to a confinement plan: the ceiling, canonical writable roots, protected
//! subpaths, the backend and its arguments, the environment and the limits — all decided in the
//! helper before anything forks.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use confine_protocol::{Backend, BackendChoice, Enforcement, EnvVar, Mode, Network, Spawn, Stage};
use nix::fcntl::{Flock, FlockArg};
use nix::libc;

use crate::ceiling::Ceiling;
use crate::command::NotRun;
use crate::{bwrap, landlock, seccomp};

pub use confine_protocol::PROTECTED_SUBPATHS as PROTECTED;

/// What the helper knows about itself and this machine, computed once.
#[derive(Debug)]
pub struct Context {
    pub ceiling: Ceiling,
    /// The user's home directories (passwd entry and `$HOME`): never writable when confined.
    pub homes: Vec<PathBuf>,
    /// The helper's binary, ceiling files and socket directory: never inside a writable root.
    pub own_paths: Vec<PathBuf>,
    /// Directories masked with an empty tmpfs inside every bwrap sandbox.
    pub masked: Vec<PathBuf>,
    pub bwrap: Option<PathBuf>,
    pub landlock_abi: u32,
    /// The helper holds capabilities (it runs as root): the Landlock child drops them.
    pub drop_caps: bool,
    pub temp_base: PathBuf,
    verdicts: RefCell<HashMap<Backend, Result<(), String>>>,
    filters: RefCell<HashMap<seccomp::Variant, seccompiler::BpfProgram>>,
}

/// How the forked command is confined.
#[derive(Debug)]
pub enum Confinement {
    None,
    /// The argv already starts with bwrap; this descriptor holds the seccomp program.
    Bwrap {
        seccomp: OwnedFd,
    },
    Landlock {
        ruleset: OwnedFd,
        filter: seccompiler::BpfProgram,
        drop_caps: bool,
    },
}

/// Everything `command::start` needs beyond the request.
#[derive(Debug)]
pub struct Plan {
    pub backend: Backend,
    pub enforcement: Option<Enforcement>,
    pub argv: Vec<Vec<u8>>,
    pub env: Vec<EnvVar>,
    pub confinement: Confinement,
    pub rlimits: Vec<(u32, u64)>,
    pub cleanup: Cleanup,
}

/// Host-side things a plan created and the command's end removes.
#[derive(Debug, Default)]
pub struct Cleanup {
    pub temp_dir: Option<PathBuf>,
    /// Placeholders this command uses; removed by whichever user of one ends last.
    pub mount_points: Vec<PathBuf>,
    /// A shared lock on each placeholder in use, held until the command ends: while any helper
    /// holds one, no other helper removes that placeholder.
    locks: Vec<Flock<File>>,
}

/// Placeholders are created without write bits: that is how a later command — of this helper
/// or of another one — tells a placeholder (empty, read-only, ours) from the user's own file.
const PLACEHOLDER_DIR_MODE: u32 = 0o555;
const PLACEHOLDER_FILE_MODE: u32 = 0o444;

impl Cleanup {
    /// Removes what the plan created: the temp dir, and placeholders no command (of any helper)
    /// uses any more.
    pub fn run(&mut self) {
        self.locks.clear();
        if let Some(dir) = self.temp_dir.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
        // Deepest first, so a directory is empty by the time it is tried.
        for point in self.mount_points.drain(..).rev() {
            remove_unused_placeholder(&point);
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        self.run();
    }
}

/// Opens `path` without following a final symlink, for locking.
fn open_no_follow(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// Removes `path` if it is a placeholder nobody holds a lock on.
fn remove_unused_placeholder(path: &Path) {
    let Ok(file) = open_no_follow(path) else {
        return;
    };
    let Ok(exclusive) = Flock::lock(file, FlockArg::LockExclusiveNonblock) else {
        // Another command, maybe of another helper, still uses it; the last one removes it.
        return;
    };
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if is_placeholder(&meta, path) {
            let _ = if meta.is_dir() {
                std::fs::remove_dir(path)
            } else {
                std::fs::remove_file(path)
            };
        }
    }
    drop(exclusive);
}

/// Empty, without write bits, and owned by this user: a placeholder some command made.
fn is_placeholder(meta: &std::fs::Metadata, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let ours = meta.uid() == nix::unistd::geteuid().as_raw();
    let read_only = meta.mode() & 0o222 == 0;
    let empty = if meta.is_dir() {
        std::fs::read_dir(path).is_ok_and(|mut entries| entries.next().is_none())
    } else {
        meta.is_file() && meta.len() == 0
    };
    ours && read_only && empty
}

/// A shared lock on the placeholder at `path`, checked to still be the same file once held.
/// `NotFound` when it was removed meanwhile: the caller makes a new one.
fn lock_placeholder(path: &Path) -> std::io::Result<Flock<File>> {
    use std::os::unix::fs::MetadataExt;
    let file = open_no_follow(path)?;
    let shared =
        Flock::lock(file, FlockArg::LockShared).map_err(|(_, e)| std::io::Error::from(e))?;
    let held = shared.metadata()?;
    match std::fs::symlink_metadata(path) {
        Ok(now) if now.dev() == held.dev() && now.ino() == held.ino() => Ok(shared),
        _ => Err(std::io::ErrorKind::NotFound.into()),
    }
}

impl Context {
    pub fn new(
        ceiling: Ceiling,
        homes: Vec<PathBuf>,
        own_paths: Vec<PathBuf>,
        masked: Vec<PathBuf>,
    ) -> Context {
        let uid = nix::unistd::geteuid().as_raw();
        let bwrap = bwrap::find();
        let mut own_paths = own_paths;
        // The binary that builds the sandbox must never end up writable by a command.
        own_paths.extend(bwrap.iter().filter_map(|p| std::fs::canonicalize(p).ok()));
        Context {
            ceiling,
            homes,
            own_paths,
            masked,
            bwrap,
            landlock_abi: landlock::kernel_abi(),
            drop_caps: crate::sys::holds_capabilities(),
            temp_base: PathBuf::from(format!("/tmp/confine-helper-{uid}")),
            verdicts: RefCell::new(HashMap::new()),
            filters: RefCell::new(HashMap::new()),
        }
    }

    /// A backend's cached verdict, if it has been probed.
    pub fn verdict(&self, backend: Backend) -> Option<Result<(), String>> {
        self.verdicts.borrow().get(&backend).cloned()
    }

    pub fn set_verdict(&self, backend: Backend, verdict: Result<(), String>) {
        self.verdicts.borrow_mut().insert(backend, verdict);
    }

    fn filter(&self, variant: seccomp::Variant) -> Result<seccompiler::BpfProgram, String> {
        if let Some(program) = self.filters.borrow().get(&variant) {
            return Ok(program.clone());
        }
        let program = seccomp::build(variant)?;
        self.filters.borrow_mut().insert(variant, program.clone());
        Ok(program)
    }
}

fn refuse<T>(reason: String) -> Result<T, NotRun> {
    Err(NotRun::Refused(reason))
}

fn fail<T>(stage: Stage, detail: String) -> Result<T, NotRun> {
    Err(NotRun::RunnerFailed(stage, 0, detail))
}

fn path_of(bytes: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(bytes))
}

/// Checks the request against the ceiling and canonicalizes its writable roots.
pub fn writable_roots(spawn: &Spawn, ctx: &Context) -> Result<Vec<PathBuf>, NotRun> {
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
    let mut roots: Vec<PathBuf> = Vec::new();
    for raw in requested {
        let given = path_of(raw);
        if !given.is_absolute() {
            return refuse(format!(
                "writable root {} is not an absolute path",
                given.display()
            ));
        }
        let root = match std::fs::canonicalize(&given) {
            Ok(root) => root,
            Err(e) => return refuse(format!("writable root {}: {e}", given.display())),
        };
        if !root.is_dir() {
            return refuse(format!(
                "writable root {} is not a directory",
                root.display()
            ));
        }
        let fixed = [Path::new("/tmp"), Path::new("/dev/shm")];
        let mut never = fixed
            .into_iter()
            .chain(ctx.homes.iter().map(PathBuf::as_path));
        if let Some(p) = never.find(|p| p.starts_with(&root)) {
            return refuse(format!(
                "writable root {} would make {} writable, which is never allowed in a confined mode",
                root.display(),
                p.display()
            ));
        }
        if let Err(reason) = ctx.ceiling.check_root(&root, &ctx.own_paths) {
            return refuse(reason);
        }
        if !roots.contains(&root) {
            roots.push(root);
        }
    }
    Ok(roots)
}

/// The environment the command gets: the request's, less what the ceiling drops, with `TMPDIR`
/// set to the private temp area (or removed when there is none).
pub fn environment(spawn: &Spawn, ctx: &Context, tmpdir: Option<&Path>) -> Vec<EnvVar> {
    let mut env: Vec<EnvVar> = spawn
        .env
        .iter()
        .filter(|v| v.name != b"TMPDIR")
        .filter(|v| std::str::from_utf8(&v.name).is_ok_and(|name| ctx.ceiling.env_passes(name)))
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
pub fn rlimits(spawn: &Spawn, ceiling: &Ceiling) -> Vec<(u32, u64)> {
    let lower = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let mut limits = vec![(libc::RLIMIT_CORE, 0)];
    let wanted = [
        (
            libc::RLIMIT_NPROC,
            lower(spawn.limits.max_processes, ceiling.max_processes),
        ),
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

/// The backends `choice` allows, in preference order.
pub fn candidates(choice: BackendChoice) -> Vec<Backend> {
    match choice {
        BackendChoice::Auto => vec![Backend::Bwrap, Backend::Landlock],
        BackendChoice::Bwrap => vec![Backend::Bwrap],
        BackendChoice::Landlock => vec![Backend::Landlock],
        BackendChoice::Seatbelt => vec![Backend::Seatbelt],
    }
}

/// Why a backend cannot be used before any probe, if that is already known.
pub fn static_verdict(backend: Backend, ctx: &Context) -> Result<(), String> {
    match backend {
        Backend::Bwrap if ctx.bwrap.is_none() => Err(format!(
            "bwrap is not installed (looked in {})",
            bwrap::SEARCH.join(", ")
        )),
        Backend::Landlock if ctx.landlock_abi == 0 => Err(
            "this kernel does not offer Landlock (needs Linux 5.13+ with landlock in lsm=)".into(),
        ),
        Backend::Seatbelt => Err("seatbelt is the macOS backend; this is Linux".into()),
        Backend::None => Err("not a confinement backend".into()),
        _ => Ok(()),
    }
}

/// The message of `RunnerFailed{unavailable}`: what was tried, why each failed, what to do.
pub fn unavailable(mode: Mode, tried: &[(Backend, String)]) -> NotRun {
    let reasons: Vec<String> = tried
        .iter()
        .map(|(b, why)| format!("{}: {why}", b.as_str()))
        .collect();
    NotRun::RunnerFailed(
        Stage::Unavailable,
        0,
        format!(
            "no usable sandbox backend for {} ({}); nothing was run unconfined. To fix: install \
             bubblewrap (e.g. apt-get install bubblewrap) with unprivileged user namespaces \
             enabled, or use a kernel with Landlock enabled, or run with danger-full-access to \
             run without confinement",
            mode.as_str(),
            reasons.join("; ")
        ),
    )
}

/// Builds the plan for `backend`, which the caller has selected (and probed), and states what it
/// cannot enforce.
pub fn plan(
    spawn: &Spawn,
    ctx: &Context,
    backend: Backend,
    roots: &[PathBuf],
) -> Result<Plan, NotRun> {
    let mut plan = plan_backend(spawn, ctx, backend, roots)?;
    let Some(enforcement) = plan.enforcement.take() else {
        return Ok(plan);
    };
    let mut missing = match enforcement {
        Enforcement::Full => Vec::new(),
        Enforcement::Partial { missing } => missing,
    };
    // Root is exempt from RLIMIT_NPROC: a process limit asked for does not bind.
    let nproc = plan.rlimits.iter().any(|(r, _)| *r == libc::RLIMIT_NPROC);
    if nproc && nix::unistd::geteuid().is_root() {
        missing.push("process limit (max_processes): root is exempt from RLIMIT_NPROC".to_owned());
    }
    if missing.is_empty() {
        plan.enforcement = Some(Enforcement::Full);
        return Ok(plan);
    }
    if ctx.ceiling.refuse_partial {
        return refuse(format!(
            "ceiling refuse_partial is true and {} cannot enforce: {}",
            backend.as_str(),
            missing.join("; ")
        ));
    }
    plan.enforcement = Some(Enforcement::Partial { missing });
    Ok(plan)
}

fn plan_backend(
    spawn: &Spawn,
    ctx: &Context,
    backend: Backend,
    roots: &[PathBuf],
) -> Result<Plan, NotRun> {
    let rlimits = rlimits(spawn, &ctx.ceiling);
    let network_allowed = spawn.policy.network == Network::Allow;
    let variant = seccomp::Variant {
        network_allowed,
        read_only: spawn.policy.mode == Mode::ReadOnly,
    };
    let protected = protected_names(spawn)?;
    match backend {
        Backend::Bwrap => {
            let Some(bwrap_path) = &ctx.bwrap else {
                return fail(Stage::Unavailable, "bwrap is not installed".into());
            };
            let filter = ctx.filter(variant).or_else(|e| fail(Stage::Seccomp, e))?;
            let seccomp_fd = crate::sys::sealed_memfd(&seccomp::to_bytes(&filter))
                .or_else(|e| fail(Stage::Seccomp, format!("seccomp program memfd: {e}")))?;
            let mut cleanup = Cleanup::default();
            let binds = protect_for_bwrap(roots, &protected, &mut cleanup)?;
            let tmpdir = (spawn.policy.mode == Mode::WorkspaceWrite).then(|| PathBuf::from("/tmp"));
            let command_env = environment(spawn, ctx, tmpdir.as_deref());
            let args = bwrap::Args {
                network_allowed,
                tmpfs_tmp: tmpdir.is_some(),
                writable: roots,
                binds: &binds,
                masked: &ctx.masked,
                seccomp_fd: crate::sys::COMMAND_SECCOMP_FD,
                cwd: &spawn.cwd,
                env: &command_env,
                argv: &spawn.argv,
            };
            Ok(Plan {
                backend,
                enforcement: Some(Enforcement::Full),
                argv: bwrap::argv(bwrap_path, &args),
                // bwrap itself runs on the host, before any confinement: it gets no variable
                // from the request (LD_PRELOAD would run code there); the command's environment
                // travels as --setenv arguments instead.
                env: Vec::new(),
                confinement: Confinement::Bwrap {
                    seccomp: seccomp_fd,
                },
                rlimits,
                cleanup,
            })
        }
        Backend::Landlock => {
            let mut cleanup = Cleanup::default();
            let mut writable = roots.to_vec();
            if spawn.policy.mode == Mode::WorkspaceWrite {
                let dir = crate::sys::private_temp_dir(&ctx.temp_base)
                    .or_else(|e| fail(Stage::Prepare, format!("per-command temp dir: {e}")))?;
                cleanup.temp_dir = Some(dir.clone());
                writable.push(dir);
            }
            let ruleset = landlock::build(&landlock::Plan {
                abi: ctx.landlock_abi,
                writable: &writable,
                network_denied: !network_allowed,
            })
            .or_else(|e| fail(Stage::Landlock, e))?;
            let mut missing = ruleset.missing;
            if !roots.is_empty() {
                missing.extend(
                    protected
                        .iter()
                        .map(|p| format!("protected subpath {}", p.display())),
                );
            }
            let enforcement = if missing.is_empty() {
                Enforcement::Full
            } else {
                Enforcement::Partial { missing }
            };
            let filter = ctx.filter(variant).or_else(|e| fail(Stage::Seccomp, e))?;
            let tmpdir = cleanup.temp_dir.clone();
            Ok(Plan {
                backend,
                enforcement: Some(enforcement),
                argv: spawn.argv.clone(),
                env: environment(spawn, ctx, tmpdir.as_deref()),
                confinement: Confinement::Landlock {
                    ruleset: ruleset.fd,
                    filter,
                    drop_caps: ctx.drop_caps,
                },
                rlimits,
                cleanup,
            })
        }
        Backend::None => Ok(Plan {
            backend,
            enforcement: None,
            argv: spawn.argv.clone(),
            env: environment(spawn, ctx, None),
            confinement: Confinement::None,
            rlimits,
            cleanup: Cleanup::default(),
        }),
        Backend::Seatbelt => fail(Stage::Unavailable, "seatbelt is the macOS backend".into()),
    }
}

/// The protected subpaths of this request: the built-in list plus the policy's own, each a
/// relative path without `..`.
fn protected_names(spawn: &Spawn) -> Result<Vec<PathBuf>, NotRun> {
    let mut names: Vec<PathBuf> = PROTECTED.iter().map(PathBuf::from).collect();
    for raw in &spawn.policy.protected {
        let p = path_of(raw);
        let relative = p.strip_prefix("/").unwrap_or(&p).to_owned();
        if relative.as_os_str().is_empty()
            || relative
                .components()
                .any(|c| !matches!(c, Component::Normal(_)))
        {
            return refuse(format!(
                "protected path {} must be a relative path inside the writable roots, without '..'",
                p.display()
            ));
        }
        if !names.contains(&relative) {
            names.push(relative);
        }
    }
    Ok(names)
}

/// Bind mounts that keep protected subpaths read-only under bwrap.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ProtectBinds {
    /// Existing directories between a root and a protected path, bound onto themselves so
    /// they become mount points that cannot be renamed away.
    pub pinned: Vec<PathBuf>,
    /// Paths bound read-only over themselves.
    pub read_only: Vec<PathBuf>,
}

/// Walks each protected subpath inside each root. An existing path is bound read-only; the
/// first missing component is created on the host (an empty directory, or an empty file for a
/// final component named like a file) and bound read-only, so it cannot be created inside; a
/// symlink anywhere on the way cannot be enforced and fails the run.
fn protect_for_bwrap(
    roots: &[PathBuf],
    names: &[PathBuf],
    cleanup: &mut Cleanup,
) -> Result<ProtectBinds, NotRun> {
    let mut binds = ProtectBinds::default();
    for root in roots {
        for name in names {
            let parts: Vec<_> = name.components().collect();
            let mut cur = root.clone();
            for (i, part) in parts.iter().enumerate() {
                cur.push(part);
                if binds.read_only.iter().any(|r| cur.starts_with(r)) {
                    // Already inside a read-only bind of this plan.
                    break;
                }
                let last = i + 1 == parts.len();
                match inspect(&cur, last && looks_like_file(name), cleanup) {
                    Ok(Found::Symlink) => {
                        return fail(
                            Stage::Prepare,
                            format!(
                                "cannot enforce read-only path {}: {} is a symlink",
                                root.join(name).display(),
                                cur.display()
                            ),
                        );
                    }
                    Ok(Found::Placeholder) => {
                        push_unique(&mut binds.read_only, cur.clone());
                        break;
                    }
                    Ok(Found::Dir) if !last => {
                        push_unique(&mut binds.pinned, cur.clone());
                    }
                    Ok(Found::Dir | Found::File) => {
                        // The protected path itself, or a file where a directory would be (a
                        // `.git` file of a worktree): nothing can be created beneath it.
                        push_unique(&mut binds.read_only, cur.clone());
                        break;
                    }
                    Err(e) => {
                        return fail(Stage::Prepare, format!("preparing {}: {e}", cur.display()));
                    }
                }
            }
        }
    }
    Ok(binds)
}

/// What stands at a protected path component.
enum Found {
    Symlink,
    /// A placeholder, made now or by another running command, locked for this one.
    Placeholder,
    Dir,
    File,
}

/// Looks at `path`, making a placeholder there (a file if `as_file`) when nothing is; a
/// placeholder found or made is locked and recorded in `cleanup`. Retries when another helper
/// removes or makes one at the same moment.
fn inspect(path: &Path, as_file: bool, cleanup: &mut Cleanup) -> std::io::Result<Found> {
    for _ in 0..4 {
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_symlink() => return Ok(Found::Symlink),
            Ok(meta) if is_placeholder(&meta, path) => {}
            Ok(meta) if meta.is_dir() => return Ok(Found::Dir),
            Ok(_) => return Ok(Found::File),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                match create_placeholder(path, as_file) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        }
        match lock_placeholder(path) {
            Ok(lock) => {
                cleanup.locks.push(lock);
                cleanup.mount_points.push(path.to_owned());
                return Ok(Found::Placeholder);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other(
        "it kept appearing and disappearing while other commands started",
    ))
}

fn push_unique(list: &mut Vec<PathBuf>, path: PathBuf) {
    if !list.contains(&path) {
        list.push(path);
    }
}

/// `.git/config` and `.gitmodules` are files; everything else protected is a directory.
fn looks_like_file(name: &Path) -> bool {
    matches!(
        name.file_name().and_then(|n| n.to_str()),
        Some("config" | ".gitmodules")
    )
}

fn create_placeholder(path: &Path, as_file: bool) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    if as_file {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(PLACEHOLDER_FILE_MODE)
            .open(path)
            .map(drop)
    } else {
        std::fs::DirBuilder::new()
            .mode(PLACEHOLDER_DIR_MODE)
            .create(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("confine-plan-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        dir
    }

    #[test]
    fn missing_protected_paths_get_a_mount_point_that_is_removed_afterwards() {
        let root = scratch("missing");
        let mut cleanup = Cleanup::default();
        let names: Vec<PathBuf> = PROTECTED.iter().map(PathBuf::from).collect();
        let binds =
            protect_for_bwrap(std::slice::from_ref(&root), &names, &mut cleanup).expect("binds");
        assert!(binds.read_only.contains(&root.join(".git")), "{binds:?}");
        assert!(binds.read_only.contains(&root.join(".gitmodules")));
        assert!(binds.read_only.contains(&root.join(".agentd")));
        assert!(root.join(".git").is_dir());
        assert!(root.join(".gitmodules").is_file());
        cleanup.run();
        assert!(!root.join(".git").exists());
        assert!(!root.join(".gitmodules").exists());
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn existing_protected_paths_are_bound_read_only_and_their_parents_pinned() {
        let root = scratch("existing");
        std::fs::create_dir_all(root.join(".git/hooks")).expect("mkdir");
        std::fs::write(root.join(".git/config"), "[core]\n").expect("write");
        let mut cleanup = Cleanup::default();
        let names: Vec<PathBuf> = PROTECTED.iter().map(PathBuf::from).collect();
        let binds =
            protect_for_bwrap(std::slice::from_ref(&root), &names, &mut cleanup).expect("binds");
        assert_eq!(binds.pinned, vec![root.join(".git")]);
        assert!(binds.read_only.contains(&root.join(".git/hooks")));
        assert!(binds.read_only.contains(&root.join(".git/config")));
        cleanup.run();
        assert!(
            root.join(".git/hooks").is_dir(),
            "existing paths are never removed"
        );
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn a_placeholder_in_use_by_one_command_is_shared_and_outlives_it() {
        let root = scratch("shared");
        let names: Vec<PathBuf> = PROTECTED.iter().map(PathBuf::from).collect();
        let mut first = Cleanup::default();
        protect_for_bwrap(std::slice::from_ref(&root), &names, &mut first).expect("first");
        let mut second = Cleanup::default();
        let binds =
            protect_for_bwrap(std::slice::from_ref(&root), &names, &mut second).expect("second");
        assert!(binds.read_only.contains(&root.join(".git")), "{binds:?}");
        assert!(
            binds.pinned.is_empty(),
            "a placeholder is bound read-only, not pinned"
        );
        first.run();
        assert!(
            root.join(".git").is_dir(),
            "the second command still uses it"
        );
        assert!(root.join(".gitmodules").is_file());
        second.run();
        assert!(!root.join(".git").exists());
        assert!(!root.join(".gitmodules").exists());
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn a_symlink_on_a_protected_path_cannot_be_enforced() {
        let root = scratch("symlink");
        std::os::unix::fs::symlink("/tmp", root.join(".agentd")).expect("symlink");
        let mut cleanup = Cleanup::default();
        let names = vec![PathBuf::from(".agentd")];
        match protect_for_bwrap(std::slice::from_ref(&root), &names, &mut cleanup) {
            Err(NotRun::RunnerFailed(Stage::Prepare, _, detail)) => {
                assert!(detail.contains("cannot enforce read-only path"), "{detail}");
            }
            other => panic!("expected a runner failure, got {other:?}"),
        }
        let _ = std::fs::remove_dir_all(root);
    }
}
