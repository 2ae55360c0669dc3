//! From a request to a confinement plan: the ceiling, writable roots held by descriptor,
//! protected paths, the backend and its arguments, the environment and the limits — all
//! decided in the helper before anything forks.
mod context;
mod deny;
mod not_run;
mod request;
pub(crate) mod verdict_cache;

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use confine_protocol::{Backend, Enforcement, EnvVar, Layer, Mode, Network, Spawn, Stage};
use nix::libc;

use crate::connects::Rules;
use crate::protect::Root;
use crate::{bwrap, landlock, paths, seatbelt, seccomp};
use context::inner_layer;
pub(crate) use context::{Context, Unusable, candidates, layers, static_verdict, unavailable};
pub(crate) use deny::{Grant, read_rules};
pub(crate) use not_run::{NotRun, exec_failure_code};
use not_run::{fail, refuse};
use request::confined_unix_sockets;
use request::session_temp;
pub(crate) use request::{check_environment, writable_roots};
use request::{environment, protection, rlimits};

/// How the forked command is confined.
#[derive(Debug)]
pub(crate) enum Confinement {
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
        /// The requester's proxy socket, which the shim keeps: the allow-list under Landlock.
        proxy: Option<OwnedFd>,
    },
}

/// Everything `command::start` needs beyond the request.
#[derive(Debug)]
pub(crate) struct Plan {
    pub(crate) backend: Backend,
    pub(crate) enforcement: Option<Enforcement>,
    /// The layers the command gets, in the order they are applied.
    pub(crate) layers: Vec<Layer>,
    pub(crate) argv: Vec<Vec<u8>>,
    pub(crate) env: Vec<EnvVar>,
    pub(crate) confinement: Confinement,
    pub(crate) rlimits: Vec<(u32, u64)>,
    pub(crate) cleanup: Cleanup,
    /// The command's `connect` calls go to its shim (`unix_sockets`, the allow-list under
    /// Landlock).
    pub(crate) connects: Option<Connects>,
}

/// What connect supervision needs: the filter that hands every `connect` to the shim, and the
/// rules the shim judges by ([`crate::connects`]).
#[derive(Debug)]
pub(crate) struct Connects {
    pub(crate) notify: seccompiler::BpfProgram,
    pub(crate) rules: Rules,
}

impl Connects {
    fn new(rules: Rules) -> Result<Connects, NotRun> {
        let notify =
            seccomp::connect_notify_program().or_else(|e| fail(Stage::Seccomp, e.to_string()))?;
        Ok(Connects { notify, rules })
    }
}

/// Host-side things a plan created and the command's end removes: only the per-command temp
/// directory, outside the user's tree. Nothing is ever created inside a writable root.
#[derive(Debug, Default)]
pub(crate) struct Cleanup {
    pub(crate) temp_dir: Option<PathBuf>,
}

impl Cleanup {
    /// Removes what the plan created.
    pub(crate) fn run(&mut self) {
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
/// Builds the plan for `backend`, which the caller has selected (and probed), and states what it
/// cannot enforce.
pub(crate) fn plan(
    spawn: &Spawn,
    ctx: &Context,
    backend: Backend,
    roots: &[Root],
    proxy: Option<OwnedFd>,
) -> Result<Plan, NotRun> {
    let mut plan = plan_backend(spawn, ctx, backend, roots, proxy)?;
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
        let offset = i32::try_from(self.0.len())
            .or_else(|e| fail(Stage::Prepare, format!("descriptor number: {e}")))?;
        self.0.push(fd);
        Ok(crate::sys::COMMAND_FIRST_PASSED_FD + offset)
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
/// The Landlock ABI whose rules control TCP binds and connects (Linux 6.7).
const LANDLOCK_NET_ABI: u32 = 4;

pub(crate) const PROCESS_VISIBILITY_GAP: &str = "process isolation: other processes' command lines and \
    System V IPC keys are visible in /proc (no PID or IPC namespace)";

/// The proxy's socket, when the request has one and `backend` can keep the command to the proxy:
/// bwrap gives it a network namespace of its own, where the bridge listens; under Landlock the
/// shim answers its every `connect` and Landlock's TCP rules keep it from listening.
fn bridge_socket(
    spawn: &Spawn,
    ctx: &Context,
    backend: Backend,
    network_allowed: bool,
    proxy: Option<OwnedFd>,
) -> Result<Option<OwnedFd>, NotRun> {
    if !spawn.proxy || backend == Backend::None {
        return Ok(None);
    }
    if network_allowed {
        return refuse(
            "a proxy bridge was asked for with the network allowed; a command with the network \
             needs no proxy"
                .into(),
        );
    }
    if backend == Backend::Landlock && ctx.landlock_abi < LANDLOCK_NET_ABI {
        return refuse(format!(
            "the network allow-list under Landlock needs its TCP rules (ABI {LANDLOCK_NET_ABI}, \
             Linux 6.7), which keep a command from listening on the host's ports; this kernel \
             has ABI {}: use the bwrap backend (install bubblewrap)",
            ctx.landlock_abi
        ));
    }
    match proxy {
        Some(fd) => Ok(Some(fd)),
        None => fail(
            Stage::Prepare,
            "the proxy bridge's socket did not arrive with the request".into(),
        ),
    }
}

/// `argv`, with the helper's own binary (the file reader and writer) named by the descriptor
/// `enter` holds of it. By its path it may not be there at all: a helper installed under `/tmp`
/// is hidden by a workspace-write command's own `/tmp`. `enter` executes the descriptor's
/// `/proc/self/fd` name, which the kernel opens before it closes the descriptor on `execve`.
fn own_program_by_descriptor(argv: &[Vec<u8>], ctx: &Context, exe_fd: i32) -> Vec<Vec<u8>> {
    let own = ctx
        .self_exe
        .as_ref()
        .map(|exe| exe.as_os_str().as_encoded_bytes());
    match argv.split_first() {
        Some((program, rest)) if own == Some(program.as_slice()) => {
            let mut argv = vec![format!("/proc/self/fd/{exe_fd}").into_bytes()];
            argv.extend(rest.iter().cloned());
            argv
        }
        _ => argv.to_vec(),
    }
}

/// The command's `/tmp` as the host names it.
#[derive(Debug)]
struct Temp {
    fd: OwnedFd,
    path: PathBuf,
    /// Writable (workspace-write), else bound read-only.
    writable: bool,
}

/// The command's `/tmp`: the session's directory when the request names one (writable in
/// workspace-write, read-only in read-only mode), else in workspace-write a private one removed
/// when the command ends, else none.
fn temp_dir(spawn: &Spawn, ctx: &Context, cleanup: &mut Cleanup) -> Result<Option<Temp>, NotRun> {
    let writable = spawn.policy.mode == Mode::WorkspaceWrite;
    if let Some(root) = session_temp(spawn, ctx)? {
        return Ok(Some(Temp {
            fd: root.fd,
            path: root.path,
            writable,
        }));
    }
    if !writable {
        return Ok(None);
    }
    let dir = crate::sys::private_temp_dir(&ctx.temp_base)
        .or_else(|e| fail(Stage::Prepare, format!("per-command temp dir: {e}")))?;
    cleanup.temp_dir = Some(dir.clone());
    let fd = paths::open_dir(&dir)
        .or_else(|e| fail(Stage::Prepare, format!("opening {}: {e}", dir.display())))?;
    Ok(Some(Temp {
        fd,
        path: dir,
        writable: true,
    }))
}

/// The request's denied reads that exist, checked against everything the command may write.
fn denied_reads(
    spawn: &Spawn,
    roots: &[Root],
    tmp: Option<&Temp>,
) -> Result<Vec<deny::Denied>, NotRun> {
    let mut writable: Vec<&Path> = roots.iter().map(|r| r.path.as_path()).collect();
    writable.extend(tmp.filter(|t| t.writable).map(|t| t.path.as_path()));
    deny::denied(spawn, &writable)
}

fn plan_backend(
    spawn: &Spawn,
    ctx: &Context,
    backend: Backend,
    roots: &[Root],
    proxy: Option<OwnedFd>,
) -> Result<Plan, NotRun> {
    let rlimits = rlimits(spawn, &ctx.ceiling);
    let network_allowed = spawn.policy.network == Network::Allow;
    let proxy = bridge_socket(spawn, ctx, backend, network_allowed, proxy)?;
    let loopback = (spawn.policy.local_binding || proxy.is_some()) && !network_allowed;
    if spawn.policy.local_binding && !network_allowed && backend == Backend::Landlock {
        return refuse(format!(
            "local_binding needs a private network namespace, which the {} backend does not \
             give: its TCP rules name ports, not addresses, so a loopback-only network cannot \
             be enforced; use the bwrap backend (install bubblewrap) or drop local_binding",
            backend.as_str()
        ));
    }
    let listed = confined_unix_sockets(spawn, ctx, backend, roots, network_allowed)?;
    // Under Landlock the command shares the host's network: TCP to the proxy only.
    let host_proxy = proxy.is_some() && backend == Backend::Landlock;
    let variant = seccomp::Variant {
        inet_sockets: network_allowed || loopback,
        tcp_only: host_proxy,
        unix_sockets: listed.is_some(),
        read_only: spawn.policy.mode == Mode::ReadOnly,
        ipc_namespace: backend == Backend::Bwrap,
    };
    let layers = layers(backend, ctx);
    match backend {
        Backend::Bwrap => {
            let Some(bwrap_path) = &ctx.bwrap else {
                return fail(Stage::Unavailable, "bwrap is not installed".into());
            };
            let filter = ctx
                .filter(variant)
                .or_else(|e| fail(Stage::Seccomp, e.to_string()))?;
            let seccomp_fd = crate::sys::sealed_memfd(&seccomp::to_bytes(&filter))
                .or_else(|e| fail(Stage::Seccomp, format!("seccomp program memfd: {e}")))?;
            let protection = protection(spawn, roots)?;
            let mut missing = protection.missing;
            let mut cleanup = Cleanup::default();
            let tmp = temp_dir(spawn, ctx, &mut cleanup)?;
            let denied = denied_reads(spawn, roots, tmp.as_ref())?;
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
            // A writable temp directory is bound on /tmp (the workspace and the roots, bound
            // later, stay visible even when they lie under /tmp). A read-only one is not:
            // bound on /tmp it would hide a workspace under /tmp, which read-only mode sees
            // through `/` alone; the command finds it by TMPDIR, where `/` shows it.
            let mut tmpdir = None;
            let tmp_fd = match tmp {
                Some(tmp) if tmp.writable => {
                    layer_writable.push(duplicate(&tmp.fd, Path::new("/tmp"))?);
                    tmpdir = Some(PathBuf::from("/tmp"));
                    Some(passed.add(tmp.fd)?)
                }
                Some(tmp) => {
                    tmpdir = Some(tmp.path);
                    None
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
            let (mut denied_dirs, mut denied_files) = (Vec::new(), Vec::new());
            for d in denied {
                if d.dir {
                    denied_dirs.push(d.path);
                } else {
                    // An empty file of bwrap's own, read-only: reads find nothing and writes
                    // fail (`/dev/null` would take them silently).
                    let empty = crate::sys::sealed_memfd(b"")
                        .or_else(|e| fail(Stage::Prepare, format!("an empty memfd: {e}")))?;
                    denied_files.push(passed.add_bind(empty, &d.path)?);
                }
            }
            // The second layer: Landlock, applied by `enter` inside the namespaces. The mount
            // layer already covers what this ABI's Landlock cannot (metadata, truncate, devices,
            // signals) and the network namespace the network, so the ruleset's own gaps are not
            // gaps here.
            let (command, report) = match inner_layer(ctx) {
                Ok(exe) => {
                    let ruleset = landlock::build(&landlock::Plan {
                        abi: ctx.landlock_abi,
                        writable: &layer_writable,
                        network_denied: false,
                        // The mounts hide the denied reads; the ruleset's rules would name the
                        // host's /dev, /proc and /tmp, which are other mounts in here.
                        denied: &[],
                    })
                    .or_else(|e| fail(Stage::Landlock, e.to_string()))?;
                    let (report_rd, report_wr) = nix::unistd::pipe2(
                        nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK,
                    )
                    .or_else(|e| fail(Stage::Pipe, format!("enter's report pipe: {e}")))?;
                    let exe_fd = passed.add(duplicate(exe, Path::new("/proc/self/exe"))?)?;
                    let ruleset_fd = passed.add(ruleset.fd)?;
                    let report_fd = passed.add(report_wr)?;
                    let bridge_fd = proxy.map(|fd| passed.add(fd)).transpose()?;
                    let fds = crate::enter::Fds {
                        exe: exe_fd,
                        ruleset: ruleset_fd,
                        report: report_fd,
                        bridge: bridge_fd,
                    };
                    let argv = own_program_by_descriptor(&spawn.argv, ctx, exe_fd);
                    (crate::enter::argv(&fds, &argv), Some(report_rd))
                }
                // The bridge runs in `enter`: without it, no allow-list.
                Err(why) if proxy.is_some() => {
                    return refuse(format!(
                        "the network allow-list needs the helper's own layer inside the \
                         sandbox, which cannot run here ({why})"
                    ));
                }
                Err(why) => {
                    missing.push(format!(
                        "the Landlock layer inside the namespaces ({why}): FIFOs, sockets and \
                         devices outside the writable roots are not kept read-only by mounts"
                    ));
                    (spawn.argv.clone(), None)
                }
            };
            let command_env = environment(spawn, ctx, tmpdir.as_deref());
            let args = bwrap::Args {
                network_allowed,
                tmp: tmp_fd,
                root_fd,
                writable: &writable,
                pinned: &pinned,
                read_only: &read_only,
                denied_dirs: &denied_dirs,
                denied_files: &denied_files,
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
                connects: listed
                    .map(|listed| {
                        Connects::new(Rules {
                            listed,
                            own_network: true,
                        })
                    })
                    .transpose()?,
            })
        }
        Backend::Landlock => {
            let protection = protection(spawn, roots)?;
            let mut cleanup = Cleanup::default();
            let mut writable: Vec<OwnedFd> = Vec::new();
            for root in roots {
                writable.push(duplicate(&root.fd, &root.path)?);
            }
            let tmp = temp_dir(spawn, ctx, &mut cleanup)?;
            let denied = denied_reads(spawn, roots, tmp.as_ref())?;
            let tmpdir = tmp.as_ref().map(|t| t.path.clone());
            if let Some(tmp) = tmp.filter(|t| t.writable) {
                writable.push(tmp.fd);
            }
            let mut gaps = Vec::new();
            let mut cut: Vec<&Path> = Vec::new();
            for d in &denied {
                if let Some(root) = roots.iter().find(|r| d.path.starts_with(&r.path)) {
                    gaps.push(format!(
                        "denied read {} inside the writable root {} (Landlock cannot take part \
                         of a writable root back)",
                        d.path.display(),
                        root.path.display()
                    ));
                } else {
                    if d.dir {
                        gaps.push(format!(
                            "names of the entries in the denied directory {} (their contents \
                             stay denied; Landlock grants listing to the whole tree beneath a \
                             directory)",
                            d.path.display()
                        ));
                    }
                    cut.push(&d.path);
                }
            }
            let ruleset = landlock::build(&landlock::Plan {
                abi: ctx.landlock_abi,
                writable: &writable,
                network_denied: !network_allowed,
                denied: &cut,
            })
            .or_else(|e| fail(Stage::Landlock, e.to_string()))?;
            let mut missing = ruleset.missing;
            missing.extend(gaps);
            missing.push(PROCESS_VISIBILITY_GAP.to_owned());
            missing.extend(protection.read_only.iter().map(|b| {
                format!(
                    "protected path {} (Landlock cannot keep part of a writable root read-only)",
                    b.path.display()
                )
            }));
            missing.extend(protection.missing);
            let filter = ctx
                .filter(variant)
                .or_else(|e| fail(Stage::Seccomp, e.to_string()))?;
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
                    proxy,
                },
                rlimits,
                cleanup,
                connects: host_proxy
                    .then(|| {
                        Connects::new(Rules {
                            listed: Vec::new(),
                            own_network: false,
                        })
                    })
                    .transpose()?,
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
            connects: None,
        }),
        Backend::Seatbelt => {
            let protection = protection(spawn, roots)?;
            let mut cleanup = Cleanup::default();
            let tmp = temp_dir(spawn, ctx, &mut cleanup)?;
            let denied = denied_reads(spawn, roots, tmp.as_ref())?;
            let mut checked =
                seatbelt::Checked::new(spawn, roots, protection, &ctx.own_paths, listed);
            checked.deny_read = denied.into_iter().map(|d| d.path).collect();
            checked.temp = tmp.as_ref().map(|t| (t.path.clone(), t.writable));
            let (argv, missing) = checked.command()?;
            Ok(Plan {
                backend,
                enforcement: Some(enforcement_of(missing)),
                layers,
                argv,
                env: environment(spawn, ctx, tmp.as_ref().map(|t| t.path.as_path())),
                confinement: Confinement::None,
                rlimits,
                cleanup,
                connects: None,
            })
        }
    }
}
