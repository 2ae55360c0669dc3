//! The plans of the Linux backends: bwrap (namespaces, the seccomp filter, and the Landlock
//! layer `enter` applies inside), and Landlock with the seccomp filter.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use confine_protocol::{Backend, Gap, Layer, Mode, PathRole, Refusal, Spawn, Stage};

use super::context::{Context, inner_layer};
use super::not_run::{NotRun, fail, refuse, shown};
use super::plan::{Cleanup, Confinement, Connects, Plan, denied_reads, enforcement_of, temp_dir};
use super::request::{environment, protection};
use crate::connects::{Listed, Rules};
use crate::protect::Root;
use crate::sys::Resource;
use crate::{bpf, bwrap, landlock, paths, seccomp};

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
    pub(super) fn new(rules: Rules) -> Result<Connects, NotRun> {
        let notify =
            bpf::connect_notify_program().or_else(|e| fail(Stage::Seccomp, e.to_string()))?;
        Ok(Connects { notify, rules })
    }
}

/// Descriptors handed to bwrap, numbered as the command will see them.
#[derive(Debug, Default)]
pub(super) struct Passed(pub(super) Vec<OwnedFd>);

impl Passed {
    pub(super) fn add(&mut self, fd: OwnedFd) -> Result<i32, NotRun> {
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
pub(super) fn file_io_by_descriptor(
    argv: &[Vec<u8>],
    ctx: &Context,
    passed: &mut Passed,
    number: fn(i32) -> i32,
) -> Result<Vec<Vec<u8>>, NotRun> {
    let program = ctx
        .file_io_path
        .as_ref()
        .map(|path| path.as_os_str().as_encoded_bytes());
    match (argv.split_first(), &ctx.file_io, &ctx.file_io_path) {
        (Some((first, rest)), Some(fd), Some(path)) if program == Some(first.as_slice()) => {
            let fd = number(passed.add(duplicate(fd, path)?)?);
            let mut argv = vec![format!("/proc/self/fd/{fd}").into_bytes()];
            argv.extend(rest.iter().cloned());
            Ok(argv)
        }
        _ => Ok(argv.to_vec()),
    }
}

/// Where bwrap binds a command's private temp directory, hiding the host's.
pub(super) const TMP: &str = "/tmp";

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
        let role = if is_cwd {
            PathRole::WorkingDirectory
        } else {
            PathRole::Visible
        };
        let named = path.display().to_string();
        if !path.is_absolute() || raw.contains(&0) {
            return refuse(Refusal::NotAbsolute { role, path: named });
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
            return refuse(Refusal::InsideDenied {
                role,
                path: named,
                denied: d.path.display().to_string(),
            });
        }
        let fd = match paths::open_unfollowed(&path) {
            Ok(fd) => fd,
            Err(nix::Error::ENOENT) if !is_cwd => continue,
            Err(nix::Error::ELOOP) => {
                return refuse(Refusal::LinkOnPath { role, path: named });
            }
            Err(e) => {
                return refuse(Refusal::Unusable {
                    role,
                    path: named,
                    why: e.desc().to_owned(),
                });
            }
        };
        shown.retain(|(_, s)| !s.starts_with(&path));
        shown.push((fd, path));
    }
    Ok(shown)
}

/// The plan for `backend`, bwrap or Landlock (the namespace backend's is `super::namespaces`).
pub(super) fn plan(backend: Backend, start: Start<'_>) -> Result<Plan, NotRun> {
    match backend {
        Backend::Bwrap => bwrap_plan(start),
        Backend::Landlock => landlock_plan(start),
        Backend::None | Backend::Seatbelt | Backend::Namespaces => fail(
            Stage::Prepare,
            format!("{} has no plan here", backend.as_str()),
        ),
    }
}

/// The seccomp filter's variant for `backend`: which sockets the command may make, and
/// whether it keeps System V IPC (its own IPC namespace, under bwrap).
pub(super) fn filter_variant(backend: Backend, start: &Start<'_>) -> seccomp::Variant {
    let policy = &start.spawn.policy;
    let network_allowed = start.network_allowed;
    let loopback = (policy.local_binding || start.proxy.is_some()) && !network_allowed;
    seccomp::Variant {
        inet_sockets: network_allowed || loopback,
        tcp_only: host_proxy(backend, start),
        unix_sockets: start.listed.is_some(),
        read_only: policy.mode == Mode::ReadOnly,
        ipc_namespace: matches!(backend, Backend::Bwrap | Backend::Namespaces),
    }
}

/// Under Landlock the command shares the host's network: TCP to the proxy only, every
/// `connect` judged by its shim.
fn host_proxy(backend: Backend, start: &Start<'_>) -> bool {
    start.proxy.is_some() && backend == Backend::Landlock
}

/// The filter for `variant`, from the context's cache.
pub(super) fn filter(ctx: &Context, variant: seccomp::Variant) -> Result<bpf::Program, NotRun> {
    ctx.filter(variant)
        .or_else(|e| fail(Stage::Seccomp, e.to_string()))
}

/// The mounts bwrap makes from descriptors, each numbered as `passed` holds it.
#[derive(Default)]
pub(super) struct Mounts {
    /// The command's temp directory bound on /tmp: its descriptor and host path.
    pub(super) tmp: Option<bwrap::FdBind>,
    /// What the private /tmp would hide of what the command must see, bound read-only over it
    /// (before the roots, which may lie inside and stay writable).
    pub(super) shown: Vec<bwrap::FdBind>,
    pub(super) writable: Vec<bwrap::FdBind>,
    pub(super) pinned: Vec<bwrap::FdBind>,
    pub(super) read_only: Vec<bwrap::FdBind>,
    pub(super) denied_dirs: Vec<PathBuf>,
    /// Denied files, each covered by an empty read-only file.
    pub(super) denied_files: Vec<PathBuf>,
}

/// The writable roots: each passed to bwrap unless another contains it (it is writable
/// through that one already), and each duplicated for the Landlock layer inside, returned.
fn bind_roots(
    roots: &[Root],
    passed: &mut Passed,
    mounts: &mut Mounts,
) -> Result<Vec<OwnedFd>, NotRun> {
    let mut layer_writable = Vec::new();
    for root in roots {
        layer_writable.push(duplicate(&root.fd, &root.path)?);
        if !roots
            .iter()
            .any(|r| r.path != root.path && root.path.starts_with(&r.path))
        {
            mounts
                .writable
                .push(passed.add_bind(duplicate(&root.fd, &root.path)?, &root.path)?);
        }
    }
    Ok(layer_writable)
}

/// The command's temp directory under bwrap: its descriptor's number when it is bound on
/// `/tmp`, and the `TMPDIR` the command gets. A writable one is bound on /tmp (the workspace
/// and the roots, bound later, stay visible even when they lie under /tmp). A read-only one
/// is not: bound on /tmp it would hide a workspace under /tmp, which read-only mode sees
/// through `/` alone; the command finds it by TMPDIR, where `/` shows it.
fn bind_tmp(
    tmp: Option<super::plan::Temp>,
    passed: &mut Passed,
    layer_writable: &mut Vec<OwnedFd>,
) -> Result<(Option<bwrap::FdBind>, Option<PathBuf>), NotRun> {
    match tmp {
        Some(tmp) if tmp.writable => {
            layer_writable.push(duplicate(&tmp.fd, Path::new(TMP))?);
            let bound = passed.add_bind(tmp.fd, &tmp.path)?;
            Ok((Some(bound), Some(PathBuf::from(TMP))))
        }
        Some(tmp) => Ok((None, Some(tmp.path))),
        None => Ok((None, None)),
    }
}

/// The denied reads as the namespace backends hide them: a directory under an empty tmpfs, a
/// file under an empty read-only file, so reads find nothing and writes fail (`/dev/null` would
/// take them silently).
fn bind_denied(denied: Vec<super::deny::Denied>, mounts: &mut Mounts) {
    for d in denied {
        if d.dir {
            mounts.denied_dirs.push(d.path);
        } else {
            mounts.denied_files.push(d.path);
        }
    }
}

/// bwrap's empty files for the denied files: a sealed empty memfd each, which bwrap copies into
/// a file of its own (`--ro-bind-data`). The namespace backend's shim makes its own.
fn bwrap_empty_files(files: &[PathBuf], passed: &mut Passed) -> Result<Vec<bwrap::FdBind>, NotRun> {
    files
        .iter()
        .map(|path| {
            let empty = crate::sys::sealed_memfd(b"")
                .or_else(|e| fail(Stage::Prepare, format!("an empty memfd: {e}")))?;
            passed.add_bind(empty, path)
        })
        .collect()
}

/// The second layer under bwrap: Landlock, applied by `enter` inside the namespaces. The mount
/// layer already covers what this ABI's Landlock cannot (metadata, truncate, devices,
/// signals) and the network namespace the network, so the ruleset's own gaps are not gaps
/// here. Returns the command's argv (through `enter` when it can run) and the read end of
/// `enter`'s report pipe; without it, what is missing is added to `missing`.
fn inner_layer_argv(
    start: &mut Start<'_>,
    layer_writable: &[OwnedFd],
    passed: &mut Passed,
    missing: &mut Vec<Gap>,
) -> Result<(Vec<Vec<u8>>, Option<OwnedFd>), NotRun> {
    let (spawn, ctx) = (start.spawn, start.ctx);
    match inner_layer(ctx) {
        Ok(exe) => {
            let ruleset = inner_ruleset(ctx, layer_writable)?;
            let (report_rd, report_wr) =
                nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)
                    .or_else(|e| fail(Stage::Pipe, format!("enter's report pipe: {e}")))?;
            let exe_fd = passed.add(duplicate(exe, Path::new("/proc/self/exe"))?)?;
            let ruleset_fd = passed.add(ruleset.fd)?;
            let report_fd = passed.add(report_wr)?;
            let bridge_fd = start.proxy.take().map(|fd| passed.add(fd)).transpose()?;
            let fds = crate::enter::Fds {
                exe: exe_fd,
                ruleset: ruleset_fd,
                report: report_fd,
                bridge: bridge_fd,
            };
            let argv = file_io_by_descriptor(&spawn.argv, ctx, passed, |fd| fd)?;
            let processes = start.caps.in_user_namespace();
            Ok((crate::enter::argv(&fds, processes, &argv), Some(report_rd)))
        }
        // The bridge runs in `enter`: without it, no allow-list.
        Err(why) if start.proxy.is_some() => refuse(Refusal::ProxyNeedsInnerLayer {
            why: why.to_string(),
        }),
        Err(why) => {
            missing.push(Gap::InnerLandlock {
                why: why.to_string(),
            });
            start.caps.without_user_namespace(&format!(
                "the helper's own step inside the sandbox, which sets it, cannot run here \
                 ({why})"
            ));
            Ok((spawn.argv.clone(), None))
        }
    }
}

/// What both namespace plans (bwrap's and the helper's own) mount, gathered once: every
/// descriptor numbered as `passed` holds it.
pub(super) struct Gathered {
    pub(super) missing: Vec<Gap>,
    pub(super) cleanup: Cleanup,
    pub(super) passed: Passed,
    /// The descriptor of `/`.
    pub(super) root_fd: i32,
    pub(super) mounts: Mounts,
    /// What the Landlock layer inside lets the command write.
    pub(super) layer_writable: Vec<OwnedFd>,
    /// The command's `TMPDIR`.
    pub(super) tmpdir: Option<PathBuf>,
}

pub(super) fn gather(start: &Start<'_>) -> Result<Gathered, NotRun> {
    let (spawn, ctx, roots) = (start.spawn, start.ctx, start.roots);
    let protection = protection(spawn, roots)?;
    let mut cleanup = Cleanup::default();
    let tmp = temp_dir(spawn, ctx, &mut cleanup)?;
    let denied = denied_reads(spawn, roots, tmp.as_ref())?;
    let mut passed = Passed::default();
    let mut mounts = Mounts::default();
    let slash = paths::open_dir(Path::new("/"))
        .or_else(|e| fail(Stage::Prepare, format!("opening /: {e}")))?;
    let root_fd = passed.add(slash)?;
    let mut layer_writable = bind_roots(roots, &mut passed, &mut mounts)?;
    let (tmp_bind, tmpdir) = bind_tmp(tmp, &mut passed, &mut layer_writable)?;
    if tmp_bind.is_some() {
        for (fd, path) in hidden_by_tmp(spawn, roots, &denied)? {
            mounts.shown.push(passed.add_bind(fd, &path)?);
        }
    }
    mounts.tmp = tmp_bind;
    for bind in protection.pinned {
        mounts.pinned.push(passed.add_bind(bind.fd, &bind.path)?);
    }
    for bind in protection.read_only {
        mounts.read_only.push(passed.add_bind(bind.fd, &bind.path)?);
    }
    bind_denied(denied, &mut mounts);
    Ok(Gathered {
        missing: protection.missing,
        cleanup,
        passed,
        root_fd,
        mounts,
        layer_writable,
        tmpdir,
    })
}

/// The bwrap plan: namespaces and mounts made from descriptors, the seccomp filter bwrap
/// loads, and the Landlock layer `enter` applies inside.
fn bwrap_plan(mut start: Start<'_>) -> Result<Plan, NotRun> {
    let (spawn, ctx) = (start.spawn, start.ctx);
    let Some(bwrap_path) = &ctx.bwrap else {
        return fail(Stage::Unavailable, "bwrap is not installed".into());
    };
    let filter = filter(ctx, filter_variant(Backend::Bwrap, &start))?;
    let seccomp_fd = crate::sys::sealed_memfd(&bpf::to_bytes(&filter))
        .or_else(|e| fail(Stage::Seccomp, format!("seccomp program memfd: {e}")))?;
    let Gathered {
        mut missing,
        cleanup,
        mut passed,
        root_fd,
        mounts,
        layer_writable,
        tmpdir,
    } = gather(&start)?;
    let denied_files = bwrap_empty_files(&mounts.denied_files, &mut passed)?;
    let (command, report) =
        inner_layer_argv(&mut start, &layer_writable, &mut passed, &mut missing)?;
    let command_env = environment(spawn, ctx, tmpdir.as_deref());
    let args = bwrap::Args {
        network_allowed: start.network_allowed,
        tmp: mounts.tmp.as_ref().map(|(fd, _)| *fd),
        root_fd,
        shown: &mounts.shown,
        writable: &mounts.writable,
        pinned: &mounts.pinned,
        read_only: &mounts.read_only,
        denied_dirs: &mounts.denied_dirs,
        denied_files: &denied_files,
        masked: &ctx.masked,
        seccomp_fd: crate::sys::COMMAND_SECCOMP_FD,
        cwd: &spawn.cwd,
        env: &command_env,
        argv: &command,
    };
    Ok(Plan {
        backend: Backend::Bwrap,
        enforcement: Some(enforcement_of(missing)),
        layers: start.layers,
        argv: bwrap::argv(bwrap_path, &args),
        // bwrap itself runs on the host, before any confinement: it gets no variable from the
        // request (LD_PRELOAD would run code there); the command's environment travels as
        // --setenv arguments instead.
        env: Vec::new(),
        confinement: Confinement::Bwrap {
            seccomp: seccomp_fd,
            passed: passed.0,
            report,
        },
        rlimits: start.rlimits,
        caps: start.caps,
        cleanup,
        connects: own_network_connects(start.listed)?,
    })
}

/// Connect supervision for the listed Unix sockets of a sandbox with its own network
/// namespace (bwrap's, or the namespace backend's), when the request lists any.
pub(super) fn own_network_connects(
    listed: Option<Vec<Listed>>,
) -> Result<Option<Connects>, NotRun> {
    listed
        .map(|listed| {
            Connects::new(Rules {
                listed,
                own_network: true,
            })
        })
        .transpose()
}

/// The Landlock layer inside a namespace backend's sandbox: writes to `writable` alone. The
/// mount layer already covers what this ABI's Landlock cannot (metadata, truncate, devices,
/// signals) and the network namespace the network, and the mounts hide the denied reads (the
/// ruleset's rules would name the host's /dev, /proc and /tmp, which are other mounts in
/// there).
pub(super) fn inner_ruleset(
    ctx: &Context,
    writable: &[OwnedFd],
) -> Result<landlock::Ruleset, NotRun> {
    landlock::build(&landlock::RulesetSpec {
        abi: ctx.landlock_abi,
        writable,
        network_denied: false,
        denied: &[],
    })
    .or_else(|e| fail(Stage::Landlock, e.to_string()))
}

/// What Landlock does not enforce of the denied reads, and the denied reads its ruleset cuts
/// out of what it grants (those outside every writable root).
fn landlock_denied<'d>(
    denied: &'d [super::deny::Denied],
    roots: &[Root],
) -> (Vec<Gap>, Vec<&'d Path>) {
    let mut gaps = Vec::new();
    let mut cut: Vec<&Path> = Vec::new();
    for d in denied {
        if let Some(root) = roots.iter().find(|r| d.path.starts_with(&r.path)) {
            gaps.push(Gap::DeniedInWritable {
                path: shown(&d.path),
                root: shown(&root.path),
            });
        } else {
            if d.dir {
                gaps.push(Gap::DeniedNames {
                    path: shown(&d.path),
                });
            }
            cut.push(&d.path);
        }
    }
    (gaps, cut)
}

/// The Landlock plan: the ruleset and the seccomp filter the command applies to itself, with
/// the host's namespaces.
fn landlock_plan(start: Start<'_>) -> Result<Plan, NotRun> {
    let (spawn, ctx, roots) = (start.spawn, start.ctx, start.roots);
    let variant = filter_variant(Backend::Landlock, &start);
    let host_proxy = host_proxy(Backend::Landlock, &start);
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
    let (gaps, cut) = landlock_denied(&denied, roots);
    let ruleset = landlock::build(&landlock::RulesetSpec {
        abi: ctx.landlock_abi,
        writable: &writable,
        network_denied: !start.network_allowed,
        denied: &cut,
    })
    .or_else(|e| fail(Stage::Landlock, e.to_string()))?;
    let mut missing = ruleset.missing;
    missing.extend(gaps);
    missing.push(Gap::ProcessVisibility);
    missing.extend(
        protection
            .read_only
            .iter()
            .map(|b| Gap::ProtectedInLandlock {
                path: shown(&b.path),
            }),
    );
    missing.extend(protection.missing);
    let filter = filter(ctx, variant)?;
    let user_namespace = start
        .caps
        .in_user_namespace()
        .map(|n| crate::sys::UserNamespace::new(Some(n)));
    Ok(Plan {
        backend: Backend::Landlock,
        enforcement: Some(enforcement_of(missing)),
        layers: start.layers,
        argv: spawn.argv.clone(),
        env: environment(spawn, ctx, tmpdir.as_deref()),
        confinement: Confinement::Landlock {
            ruleset: ruleset.fd,
            filter,
            drop_caps: ctx.drop_caps,
            proxy: start.proxy,
            user_namespace,
        },
        rlimits: start.rlimits,
        caps: start.caps,
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
