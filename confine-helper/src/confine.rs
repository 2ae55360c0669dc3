//! From a request to a confinement plan: the ceiling, writable roots held by descriptor,
//! protected paths, the backend and its arguments, the environment and the limits — all
//! decided in the helper before anything forks.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use confine_protocol::{
    Backend, BackendChoice, Enforcement, EnvVar, Layer, Mode, Network, Spawn, Stage,
};
use nix::libc;

use crate::ceiling::{Ceiling, EnvVerdict};
use crate::command::NotRun;
use crate::paths;
use crate::protect::{self, Protection, Root};
use crate::{bwrap, landlock, seccomp};

pub use confine_protocol::PROTECTED_SUBPATHS as PROTECTED;

/// What the helper knows about itself and this machine, computed once.
#[derive(Debug)]
pub struct Context {
    pub ceiling: Ceiling,
    /// Directories that are never a writable root nor inside one, resolved: `/tmp`, `/dev/shm`
    /// and the user's home directories (passwd entry and the helper's own `$HOME`).
    pub never_roots: Vec<PathBuf>,
    /// The helper's binary, ceiling files and socket directory, resolved: never inside a
    /// writable root.
    pub own_paths: Vec<PathBuf>,
    /// Directories masked with an empty tmpfs inside every bwrap sandbox.
    pub masked: Vec<PathBuf>,
    pub bwrap: Option<PathBuf>,
    pub landlock_abi: u32,
    /// The helper holds capabilities (it runs as root): the Landlock child drops them.
    pub drop_caps: bool,
    pub temp_base: PathBuf,
    /// The helper's own binary, which runs confined as the writer of `WriteFile` requests.
    pub self_exe: Option<PathBuf>,
    /// The running binary itself (`/proc/self/exe`), opened once: bwrap executes it from this
    /// descriptor as the `enter` step, whatever is at its path later.
    pub exe: Option<OwnedFd>,
    verdicts: RefCell<HashMap<Backend, Result<(), String>>>,
    filters: RefCell<HashMap<seccomp::Variant, seccompiler::BpfProgram>>,
}

/// How the forked command is confined.
#[derive(Debug)]
pub enum Confinement {
    None,
    /// The argv already starts with bwrap; this descriptor holds the seccomp program, and
    /// `passed` the descriptors its mounts are made from (`--bind-fd`) and those `enter` uses
    /// (this binary, the Landlock ruleset, the report pipe), numbered from
    /// [`crate::sys::COMMAND_FIRST_PASSED_FD`] on as the argv names them. `report` is the read
    /// end of `enter`'s report pipe.
    Bwrap {
        seccomp: OwnedFd,
        passed: Vec<OwnedFd>,
        report: Option<OwnedFd>,
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
    /// The layers the command gets, in the order they are applied.
    pub layers: Vec<Layer>,
    pub argv: Vec<Vec<u8>>,
    pub env: Vec<EnvVar>,
    pub confinement: Confinement,
    pub rlimits: Vec<(u32, u64)>,
    pub cleanup: Cleanup,
}

/// Host-side things a plan created and the command's end removes: only the per-command temp
/// directory, outside the user's tree. Nothing is ever created inside a writable root.
#[derive(Debug, Default)]
pub struct Cleanup {
    pub temp_dir: Option<PathBuf>,
}

impl Cleanup {
    /// Removes what the plan created.
    pub fn run(&mut self) {
        if let Some(dir) = self.temp_dir.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        self.run();
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
        let self_exe = std::env::current_exe()
            .ok()
            .and_then(|p| std::fs::canonicalize(p).ok());
        let mut own_paths: Vec<PathBuf> = own_paths.iter().map(|p| paths::resolve(p)).collect();
        // The binary that builds the sandbox must never end up writable by a command.
        own_paths.extend(bwrap.iter().filter_map(|p| std::fs::canonicalize(p).ok()));
        own_paths.extend(self_exe.clone());
        Context {
            ceiling,
            never_roots: [Path::new("/tmp"), Path::new("/dev/shm")]
                .into_iter()
                .chain(homes.iter().map(PathBuf::as_path))
                .map(paths::resolve)
                .collect(),
            own_paths,
            masked,
            bwrap,
            landlock_abi: landlock::kernel_abi(),
            drop_caps: crate::sys::holds_capabilities(),
            temp_base: PathBuf::from(format!("/tmp/confine-helper-{uid}")),
            self_exe,
            exe: nix::fcntl::open(
                c"/proc/self/exe",
                nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_CLOEXEC,
                nix::sys::stat::Mode::empty(),
            )
            .ok(),
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

/// The paths no writable root may contain or lie inside, for this request: the helper's own,
/// the requester's (`Policy::never_writable`), resolved.
fn never_writable(spawn: &Spawn, ctx: &Context) -> Vec<(PathBuf, &'static str)> {
    let mut never: Vec<(PathBuf, &'static str)> = ctx
        .own_paths
        .iter()
        .map(|p| (p.clone(), "the helper's own files"))
        .collect();
    never.extend(
        spawn
            .policy
            .never_writable
            .iter()
            .map(|raw| path_of(raw))
            .filter(|p| p.is_absolute())
            .map(|p| (paths::resolve(&p), "the requester's own files")),
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
pub fn writable_roots(spawn: &Spawn, ctx: &Context) -> Result<Vec<Root>, NotRun> {
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
        let root = open_root(&path_of(raw))?;
        if let Some(p) = never_roots.iter().find(|p| p.starts_with(&root.path)) {
            return refuse(format!(
                "writable root {} would make {} writable, which is never allowed in a confined mode",
                root.path.display(),
                p.display()
            ));
        }
        if let Err(reason) = ctx.ceiling.check_root(&root.path) {
            return refuse(reason);
        }
        if let Some((p, whose)) = never
            .iter()
            .find(|(p, _)| p.starts_with(&root.path) || root.path.starts_with(p))
        {
            return refuse(format!(
                "writable root {} would make {} ({whose}) writable, which is never allowed",
                root.path.display(),
                p.display()
            ));
        }
        if !roots.iter().any(|r| r.path == root.path) {
            roots.push(root);
        }
    }
    Ok(roots)
}

/// Opens one requested root as it is named, without following any symbolic link on its path: a
/// link could have been planted by a command (one of another session, writing where this root
/// lies), and a root it redirected would be checked where the link points. The requester names
/// roots by their real paths (agentd resolves the workspace once, when a session starts); every
/// check is made on the path the kernel then reports for the descriptor.
fn open_root(given: &Path) -> Result<Root, NotRun> {
    if !given.is_absolute() {
        return refuse(format!(
            "writable root {} is not an absolute path",
            given.display()
        ));
    }
    let fd = match paths::open_dir(given) {
        Ok(fd) => fd,
        Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => {
            return refuse(format!(
                "writable root {} is not a directory",
                given.display()
            ));
        }
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            let real = std::fs::canonicalize(given)
                .map(|real| format!(" ({})", real.display()))
                .unwrap_or_default();
            return refuse(format!(
                "writable root {} has a symbolic link in its path, which the helper does not \
                 follow; name the directory by its real path{real}",
                given.display()
            ));
        }
        Err(e) => return refuse(format!("writable root {}: {e}", given.display())),
    };
    let path = paths::fd_path(fd.as_fd())
        .map_err(|e| NotRun::Refused(format!("writable root {}: {e}", given.display())))?;
    Ok(Root { path, fd })
}

/// Refuses a request one of whose variables the ceiling refuses ([`Ceiling::env_verdict`]):
/// everything a request carries was asked for, so nothing that breaks the rules is dropped
/// without a word. (agentd leaves such variables of its own environment behind before it asks.)
pub fn check_environment(spawn: &Spawn, ctx: &Context) -> Result<(), NotRun> {
    for var in &spawn.env {
        let Ok(name) = std::str::from_utf8(&var.name) else {
            continue;
        };
        if let EnvVerdict::Refused(refusal) = ctx.ceiling.env_verdict(name, &var.value) {
            return refuse(refusal.to_string());
        }
    }
    Ok(())
}

/// The environment the command gets: the request's, less `TMPDIR`, names that are not UTF-8
/// and what the ceiling drops or refuses ([`check_environment`] has refused the request for
/// the latter already), with `TMPDIR` set to the private temp area (or removed when there is
/// none).
pub fn environment(spawn: &Spawn, ctx: &Context, tmpdir: Option<&Path>) -> Vec<EnvVar> {
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
    roots: &[Root],
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

/// Descriptors handed to bwrap, numbered as the command will see them.
#[derive(Debug, Default)]
struct Passed(Vec<OwnedFd>);

impl Passed {
    fn add(&mut self, fd: OwnedFd) -> Result<i32, NotRun> {
        if self.0.len() >= crate::sys::MAX_PASSED_FDS {
            return fail(
                Stage::Prepare,
                format!(
                    "more than {} mounts would be needed; nothing was run",
                    crate::sys::MAX_PASSED_FDS
                ),
            );
        }
        self.0.push(fd);
        Ok(crate::sys::COMMAND_FIRST_PASSED_FD + (self.0.len() - 1) as i32)
    }

    fn add_bind(&mut self, fd: OwnedFd, path: &Path) -> Result<(i32, PathBuf), NotRun> {
        Ok((self.add(fd)?, path.to_owned()))
    }
}

fn duplicate(fd: &OwnedFd, path: &Path) -> Result<OwnedFd, NotRun> {
    fd.try_clone().or_else(|e| {
        fail(
            Stage::Prepare,
            format!("duplicating the descriptor of {}: {e}", path.display()),
        )
    })
}

/// What keeps the protected paths of `roots` read-only; a root inside one is refused.
fn protection(spawn: &Spawn, roots: &[Root]) -> Result<Protection, NotRun> {
    if roots.is_empty() {
        return Ok(Protection::default());
    }
    let extra = protected_names(spawn)?;
    let protection = protect::protect(roots, &extra).or_else(|e| fail(Stage::Prepare, e))?;
    for root in roots {
        if let Some(kept) = protection
            .read_only
            .iter()
            .find(|b| root.path.starts_with(&b.path))
        {
            return refuse(format!(
                "writable root {} lies inside {}, which stays read-only",
                root.path.display(),
                kept.path.display()
            ));
        }
    }
    Ok(protection)
}

fn enforcement_of(missing: Vec<String>) -> Enforcement {
    if missing.is_empty() {
        Enforcement::Full
    } else {
        Enforcement::Partial { missing }
    }
}

/// What the Landlock backend cannot hide without namespaces: the command cannot signal, trace
/// or read the memory, environment or descriptors of outside processes, but `/proc` still lists
/// them with their command lines, and `/proc/sysvipc` the keys of their IPC objects.
pub const PROCESS_VISIBILITY_GAP: &str = "process isolation: other processes' command lines and \
    System V IPC keys are visible in /proc (no PID or IPC namespace)";

/// The command's private temp directory (workspace-write only), removed when it ends.
fn temp_dir(
    spawn: &Spawn,
    ctx: &Context,
    cleanup: &mut Cleanup,
) -> Result<Option<OwnedFd>, NotRun> {
    if spawn.policy.mode != Mode::WorkspaceWrite {
        return Ok(None);
    }
    let dir = crate::sys::private_temp_dir(&ctx.temp_base)
        .or_else(|e| fail(Stage::Prepare, format!("per-command temp dir: {e}")))?;
    cleanup.temp_dir = Some(dir.clone());
    let fd = paths::open_dir(&dir)
        .or_else(|e| fail(Stage::Prepare, format!("opening {}: {e}", dir.display())))?;
    Ok(Some(fd))
}

/// Why bwrap's sandbox gets no Landlock layer on this machine, if it does not.
fn no_inner_layer(ctx: &Context) -> Option<String> {
    if ctx.landlock_abi == 0 {
        Some("this kernel does not offer Landlock".into())
    } else if ctx.exe.is_none() {
        Some("the helper cannot open its own binary to run inside the sandbox".into())
    } else {
        None
    }
}

/// The layers a command confined by `backend` gets on this machine.
pub fn layers(backend: Backend, ctx: &Context) -> Vec<Layer> {
    match backend {
        Backend::Bwrap if no_inner_layer(ctx).is_none() => {
            vec![Layer::Namespaces, Layer::Landlock, Layer::Seccomp]
        }
        Backend::Bwrap => vec![Layer::Namespaces, Layer::Seccomp],
        Backend::Landlock => vec![Layer::Landlock, Layer::Seccomp],
        Backend::None | Backend::Seatbelt => Vec::new(),
    }
}

fn plan_backend(
    spawn: &Spawn,
    ctx: &Context,
    backend: Backend,
    roots: &[Root],
) -> Result<Plan, NotRun> {
    let rlimits = rlimits(spawn, &ctx.ceiling);
    let network_allowed = spawn.policy.network == Network::Allow;
    let variant = seccomp::Variant {
        network_allowed,
        read_only: spawn.policy.mode == Mode::ReadOnly,
        ipc_namespace: backend == Backend::Bwrap,
    };
    let layers = layers(backend, ctx);
    match backend {
        Backend::Bwrap => {
            let Some(bwrap_path) = &ctx.bwrap else {
                return fail(Stage::Unavailable, "bwrap is not installed".into());
            };
            let filter = ctx.filter(variant).or_else(|e| fail(Stage::Seccomp, e))?;
            let seccomp_fd = crate::sys::sealed_memfd(&seccomp::to_bytes(&filter))
                .or_else(|e| fail(Stage::Seccomp, format!("seccomp program memfd: {e}")))?;
            let protection = protection(spawn, roots)?;
            let mut missing = protection.missing;
            let mut cleanup = Cleanup::default();
            let tmp = temp_dir(spawn, ctx, &mut cleanup)?;
            let mut passed = Passed::default();
            let slash = paths::open_dir(Path::new("/"))
                .or_else(|e| fail(Stage::Prepare, format!("opening /: {e}")))?;
            let root_fd = passed.add(slash)?;
            let mut writable = Vec::new();
            let mut layer_writable: Vec<OwnedFd> = Vec::new();
            for root in roots {
                layer_writable.push(duplicate(&root.fd, &root.path)?);
                // A root inside another is writable through it already.
                if !roots
                    .iter()
                    .any(|r| r.path != root.path && root.path.starts_with(&r.path))
                {
                    writable.push(passed.add_bind(duplicate(&root.fd, &root.path)?, &root.path)?);
                }
            }
            let tmp_fd = match tmp {
                Some(fd) => {
                    layer_writable.push(duplicate(&fd, Path::new("/tmp"))?);
                    Some(passed.add(fd)?)
                }
                None => None,
            };
            let mut pinned = Vec::new();
            for bind in protection.pinned {
                pinned.push(passed.add_bind(bind.fd, &bind.path)?);
            }
            let mut read_only = Vec::new();
            for bind in protection.read_only {
                read_only.push(passed.add_bind(bind.fd, &bind.path)?);
            }
            // The second layer: Landlock, applied by `enter` inside the namespaces. The mount
            // layer already covers what this ABI's Landlock cannot (metadata, truncate, devices,
            // signals) and the network namespace the network, so the ruleset's own gaps are not
            // gaps here.
            let (command, report) = match (no_inner_layer(ctx), &ctx.exe) {
                (None, Some(exe)) => {
                    let ruleset = landlock::build(&landlock::Plan {
                        abi: ctx.landlock_abi,
                        writable: &layer_writable,
                        network_denied: false,
                    })
                    .or_else(|e| fail(Stage::Landlock, e))?;
                    let (report_rd, report_wr) = nix::unistd::pipe2(
                        nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK,
                    )
                    .or_else(|e| fail(Stage::Pipe, format!("enter's report pipe: {e}")))?;
                    let exe_fd = passed.add(duplicate(exe, Path::new("/proc/self/exe"))?)?;
                    let ruleset_fd = passed.add(ruleset.fd)?;
                    let report_fd = passed.add(report_wr)?;
                    (
                        crate::enter::argv(exe_fd, ruleset_fd, report_fd, &spawn.argv),
                        Some(report_rd),
                    )
                }
                (why, _) => {
                    missing.push(format!(
                        "the Landlock layer inside the namespaces ({}): FIFOs, sockets and \
                         devices outside the writable roots are not kept read-only by mounts",
                        why.unwrap_or_default()
                    ));
                    (spawn.argv.clone(), None)
                }
            };
            let tmpdir = tmp_fd.map(|_| PathBuf::from("/tmp"));
            let command_env = environment(spawn, ctx, tmpdir.as_deref());
            let args = bwrap::Args {
                network_allowed,
                tmp: tmp_fd,
                root_fd,
                writable: &writable,
                pinned: &pinned,
                read_only: &read_only,
                masked: &ctx.masked,
                seccomp_fd: crate::sys::COMMAND_SECCOMP_FD,
                cwd: &spawn.cwd,
                env: &command_env,
                argv: &command,
            };
            Ok(Plan {
                backend,
                enforcement: Some(enforcement_of(missing)),
                layers,
                argv: bwrap::argv(bwrap_path, &args),
                // bwrap itself runs on the host, before any confinement: it gets no variable
                // from the request (LD_PRELOAD would run code there); the command's environment
                // travels as --setenv arguments instead.
                env: Vec::new(),
                confinement: Confinement::Bwrap {
                    seccomp: seccomp_fd,
                    passed: passed.0,
                    report,
                },
                rlimits,
                cleanup,
            })
        }
        Backend::Landlock => {
            let protection = protection(spawn, roots)?;
            let mut cleanup = Cleanup::default();
            let mut writable: Vec<OwnedFd> = Vec::new();
            for root in roots {
                writable.push(duplicate(&root.fd, &root.path)?);
            }
            writable.extend(temp_dir(spawn, ctx, &mut cleanup)?);
            let ruleset = landlock::build(&landlock::Plan {
                abi: ctx.landlock_abi,
                writable: &writable,
                network_denied: !network_allowed,
            })
            .or_else(|e| fail(Stage::Landlock, e))?;
            let mut missing = ruleset.missing;
            missing.push(PROCESS_VISIBILITY_GAP.to_owned());
            missing.extend(protection.read_only.iter().map(|b| {
                format!(
                    "protected path {} (Landlock cannot keep part of a writable root read-only)",
                    b.path.display()
                )
            }));
            missing.extend(protection.missing);
            let filter = ctx.filter(variant).or_else(|e| fail(Stage::Seccomp, e))?;
            let tmpdir = cleanup.temp_dir.clone();
            Ok(Plan {
                backend,
                enforcement: Some(enforcement_of(missing)),
                layers,
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
            layers,
            argv: spawn.argv.clone(),
            env: environment(spawn, ctx, None),
            confinement: Confinement::None,
            rlimits,
            cleanup: Cleanup::default(),
        }),
        Backend::Seatbelt => fail(Stage::Unavailable, "seatbelt is the macOS backend".into()),
    }
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
            return refuse(format!(
                "protected path {} must be a relative path inside the writable roots, without '..'",
                p.display()
            ));
        }
        if !PROTECTED.iter().any(|b| Path::new(b) == relative) && !names.contains(&relative) {
            names.push(relative);
        }
    }
    Ok(names)
}
