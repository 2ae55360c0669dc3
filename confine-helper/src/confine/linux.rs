//! The plans of the Linux backends: bwrap (namespaces, the seccomp filter, and the Landlock
//! layer `enter` applies inside), and Landlock with the seccomp filter.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use confine_protocol::{Backend, Layer, Mode, Spawn, Stage};

use super::context::{Context, inner_layer};
use super::not_run::{NotRun, fail, refuse};
use super::plan::{Cleanup, Confinement, Connects, Plan, denied_reads, enforcement_of, temp_dir};
use super::request::{environment, protection};
use crate::connects::{Listed, Rules};
use crate::protect::Root;
use crate::sys::Resource;
use crate::{bwrap, landlock, paths, seccomp};

/// What both Linux plans start from, decided by `plan_backend` for every backend.
pub(super) struct Start<'a> {
    pub(super) spawn: &'a Spawn,
    pub(super) ctx: &'a Context,
    pub(super) roots: &'a [Root],
    /// The proxy bridge's socket, when the request has the allow-list.
    pub(super) proxy: Option<OwnedFd>,
    /// The request's `unix_sockets`, checked.
    pub(super) listed: Option<Vec<Listed>>,
    pub(super) rlimits: Vec<(Resource, u64)>,
    pub(super) caps: super::caps::Planned,
    pub(super) layers: Vec<Layer>,
    pub(super) network_allowed: bool,
}

impl Connects {
    fn new(rules: Rules) -> Result<Connects, NotRun> {
        let notify =
            seccomp::connect_notify_program().or_else(|e| fail(Stage::Seccomp, e.to_string()))?;
        Ok(Connects { notify, rules })
    }
}

/// What the Landlock backend cannot hide without namespaces: the command cannot signal, trace
/// or read the memory, environment or descriptors of outside processes, but `/proc` still lists
/// them with their command lines, and `/proc/sysvipc` the keys of their IPC objects.
pub(crate) const PROCESS_VISIBILITY_GAP: &str = "process isolation: other processes' command lines and \
    System V IPC keys are visible in /proc (no PID or IPC namespace)";

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
/// `argv`, with the file reader and writer beside the helper ([`Context::file_io_path`]) named
/// by a descriptor of it passed to `enter`, when `argv` runs exactly that program; any other
/// `argv` as it is. By its path it may not be there at all: a helper installed under `/tmp` is
/// hidden by a workspace-write command's own `/tmp`. `enter` executes the descriptor's
/// `/proc/self/fd` name, which the kernel opens before it closes the descriptor on `execve`.
fn file_io_by_descriptor(
    argv: &[Vec<u8>],
    ctx: &Context,
    passed: &mut Passed,
) -> Result<Vec<Vec<u8>>, NotRun> {
    let program = ctx
        .file_io_path
        .as_ref()
        .map(|path| path.as_os_str().as_encoded_bytes());
    match (argv.split_first(), &ctx.file_io, &ctx.file_io_path) {
        (Some((first, rest)), Some(fd), Some(path)) if program == Some(first.as_slice()) => {
            let fd = passed.add(duplicate(fd, path)?)?;
            let mut argv = vec![format!("/proc/self/fd/{fd}").into_bytes()];
            argv.extend(rest.iter().cloned());
            Ok(argv)
        }
        _ => Ok(argv.to_vec()),
    }
}

/// Where bwrap binds a command's private temp directory, hiding the host's.
const TMP: &str = "/tmp";

/// What a command must see though its private `/tmp` hides it (bwrap, with a writable temp
/// directory on `/tmp`): its working directory and the request's `visible` paths that lie
/// under `/tmp` and outside every writable root (those are bound anyway), each opened as named
/// with no link on its way, to be bound read-only over the private directory. Nothing else of
/// the host's `/tmp` shows, whoever owns it. A working directory that is `/tmp` itself is the
/// command's own `/tmp`. A visible path that does not exist shows nothing; a working directory
/// that does not exist, one with a link on its way, and one inside a denied read are refused.
fn hidden_by_tmp(
    spawn: &Spawn,
    roots: &[Root],
    denied: &[super::deny::Denied],
) -> Result<Vec<(OwnedFd, PathBuf)>, NotRun> {
    use std::os::unix::ffi::OsStrExt;
    let tmp = Path::new(TMP);
    let cwd = std::iter::once((spawn.cwd.as_slice(), true));
    let visible = spawn.policy.visible.iter().map(|p| (p.as_slice(), false));
    let mut shown: Vec<(OwnedFd, PathBuf)> = Vec::new();
    for (raw, is_cwd) in cwd.chain(visible) {
        let path = PathBuf::from(std::ffi::OsStr::from_bytes(raw));
        let what = if is_cwd {
            "the working directory"
        } else {
            "visible path"
        };
        if !path.is_absolute() || raw.contains(&0) {
            return refuse(format!("{what} {} is not an absolute path", path.display()));
        }
        let hidden = path.starts_with(tmp) && path != tmp;
        let covered = |p: &Path| {
            roots.iter().any(|r| p.starts_with(&r.path))
                || shown.iter().any(|(_, s)| p.starts_with(s))
        };
        if !hidden || covered(&path) {
            continue;
        }
        if let Some(d) = denied.iter().find(|d| path.starts_with(&d.path)) {
            return refuse(format!(
                "{what} {} lies inside the denied read {}",
                path.display(),
                d.path.display()
            ));
        }
        let fd = match paths::open_unfollowed(&path) {
            Ok(fd) => fd,
            Err(nix::Error::ENOENT) if !is_cwd => continue,
            Err(nix::Error::ELOOP) => {
                return refuse(format!(
                    "{what} {} has a symbolic link on its path, which the helper does not \
                     follow; name it by its real path",
                    path.display()
                ));
            }
            Err(e) => return refuse(format!("{what} {}: {}", path.display(), e.desc())),
        };
        shown.retain(|(_, s)| !s.starts_with(&path));
        shown.push((fd, path));
    }
    Ok(shown)
}

/// The plan for `backend`, bwrap or Landlock.
pub(super) fn plan(backend: Backend, start: Start<'_>) -> Result<Plan, NotRun> {
    let Start {
        spawn,
        ctx,
        roots,
        proxy,
        listed,
        rlimits,
        mut caps,
        layers,
        network_allowed,
    } = start;
    let loopback = (spawn.policy.local_binding || proxy.is_some()) && !network_allowed;
    // Under Landlock the command shares the host's network: TCP to the proxy only.
    let host_proxy = proxy.is_some() && backend == Backend::Landlock;
    let variant = seccomp::Variant {
        inet_sockets: network_allowed || loopback,
        tcp_only: host_proxy,
        unix_sockets: listed.is_some(),
        read_only: spawn.policy.mode == Mode::ReadOnly,
        ipc_namespace: backend == Backend::Bwrap,
    };
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
            // What the private /tmp would hide of what the command must see, bound read-only
            // over it (before the roots, which may lie inside and stay writable).
            let mut shown = Vec::new();
            if tmp_fd.is_some() {
                for (fd, path) in hidden_by_tmp(spawn, roots, &denied)? {
                    shown.push(passed.add_bind(fd, &path)?);
                }
            }
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
                    let argv = file_io_by_descriptor(&spawn.argv, ctx, &mut passed)?;
                    let processes = caps.in_user_namespace();
                    (crate::enter::argv(&fds, processes, &argv), Some(report_rd))
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
                    caps.without_user_namespace(&format!(
                        "the helper's own step inside the sandbox, which sets it, cannot run \
                         here ({why})"
                    ));
                    (spawn.argv.clone(), None)
                }
            };
            let command_env = environment(spawn, ctx, tmpdir.as_deref());
            let args = bwrap::Args {
                network_allowed,
                tmp: tmp_fd,
                root_fd,
                shown: &shown,
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
                caps,
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
                    user_namespace: caps.in_user_namespace().map(crate::sys::UserNamespace::new),
                },
                rlimits,
                caps,
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
        Backend::None | Backend::Seatbelt => fail(
            Stage::Prepare,
            format!("{} is not a Linux backend", backend.as_str()),
        ),
    }
}
