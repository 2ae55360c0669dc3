//! What the helper knows about itself and this machine, computed once, and what it decides
//! from that alone: which backends a request may use, which are usable, and their layers.

#[cfg(target_os = "linux")]
use std::cell::OnceCell;
use std::cell::RefCell;
use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use confine_protocol::{
    Backend, BackendChoice, ExitStatus, Layer, Mode, Reply, Stage, UsableBefore,
};

use super::not_run::NotRun;
use crate::ceiling::Ceiling;
use crate::paths;
#[cfg(target_os = "linux")]
use crate::{bpf, bwrap, landlock, seccomp};

/// What the helper knows about itself and this machine, computed once.
#[derive(Debug)]
pub(crate) struct Context {
    pub(crate) ceiling: Ceiling,
    /// Directories that are never a writable root nor inside one, resolved: `/tmp`, `/dev/shm`
    /// and the user's home directories (passwd entry and the helper's own `$HOME`).
    pub(crate) never_roots: Vec<PathBuf>,
    /// The helper's binary, ceiling files and socket directory, resolved: never inside a
    /// writable root.
    pub(crate) own_paths: Vec<PathBuf>,
    /// Directories masked with an empty tmpfs inside every bwrap sandbox.
    pub(crate) masked: Vec<PathBuf>,
    pub(crate) bwrap: Option<PathBuf>,
    pub(crate) landlock_abi: u32,
    /// The helper holds capabilities (it runs as root): the Landlock child drops them.
    pub(crate) drop_caps: bool,
    pub(crate) temp_base: PathBuf,
    /// The file reader and writer agentd runs confined ([`FILE_IO_PROGRAM`] beside the helper's
    /// own binary), resolved: a command whose program is this path runs it by [`Self::file_io`].
    ///
    /// [`FILE_IO_PROGRAM`]: confine_protocol::FILE_IO_PROGRAM
    #[cfg(target_os = "linux")]
    pub(crate) file_io_path: Option<PathBuf>,
    /// That program, opened once: bwrap's sandbox executes it from this descriptor, as it does
    /// the helper's `enter` step, since by its path it may be hidden there.
    #[cfg(target_os = "linux")]
    pub(crate) file_io: Option<OwnedFd>,
    /// The running binary itself (`/proc/self/exe`), opened once: bwrap executes it from this
    /// descriptor as the `enter` step, whatever is at its path later.
    pub(crate) exe: Option<OwnedFd>,
    verdicts: RefCell<HashMap<Backend, Result<(), Unusable>>>,
    /// Whether this helper takes agentd's hints (an embedded helper, whose one peer is the
    /// only one a wrong hint could make fail; a service serves many).
    pub(crate) takes_hints: bool,
    /// The backends agentd's hints say are usable, under this helper's fingerprints.
    hinted: RefCell<Vec<Backend>>,
    #[cfg(target_os = "linux")]
    filters: RefCell<HashMap<seccomp::Variant, bpf::Program>>,
    /// Where commands' own cgroups can go (a root helper's caps), found at first use.
    #[cfg(target_os = "linux")]
    cgroups: OnceCell<crate::cgroup::Cgroups>,
    /// Whether this user may make a user namespace (a Landlock command's process cap), found
    /// at first use.
    #[cfg(target_os = "linux")]
    user_namespace: OnceCell<bool>,
    /// The machine's memory in bytes, read at first use.
    #[cfg(target_os = "linux")]
    memory_total: OnceCell<Option<u64>>,
}
impl Context {
    pub(crate) fn new(
        ceiling: Ceiling,
        homes: Vec<PathBuf>,
        own_paths: Vec<PathBuf>,
        masked: Vec<PathBuf>,
    ) -> Context {
        let uid = nix::unistd::geteuid().as_raw();
        #[cfg(target_os = "linux")]
        let bwrap = bwrap::find();
        // bwrap, Landlock and the capabilities the Landlock command drops are Linux's.
        #[cfg(target_os = "macos")]
        let bwrap: Option<PathBuf> = None;
        let self_exe = std::env::current_exe()
            .ok()
            .and_then(|p| std::fs::canonicalize(p).ok());
        let file_io_path = self_exe.as_deref().and_then(Path::parent).and_then(|dir| {
            std::fs::canonicalize(dir.join(confine_protocol::FILE_IO_PROGRAM)).ok()
        });
        let mut own_paths: Vec<PathBuf> = own_paths.iter().map(|p| paths::resolve(p)).collect();
        // The binary that builds the sandbox must never end up writable by a command.
        own_paths.extend(bwrap.iter().filter_map(|p| std::fs::canonicalize(p).ok()));
        own_paths.extend(self_exe);
        // Nor the program agentd's file operations run, whose next run may have a wider policy.
        own_paths.extend(file_io_path.clone());
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
            #[cfg(target_os = "linux")]
            landlock_abi: landlock::kernel_abi(),
            #[cfg(target_os = "macos")]
            landlock_abi: 0,
            #[cfg(target_os = "linux")]
            drop_caps: crate::sys::holds_capabilities(),
            #[cfg(target_os = "macos")]
            drop_caps: false,
            // macOS's /tmp is a link to /private/tmp, and no link is followed to a directory
            // the helper makes writable.
            #[cfg(target_os = "linux")]
            temp_base: PathBuf::from(format!("/tmp/confine-helper-{uid}")),
            #[cfg(target_os = "macos")]
            temp_base: PathBuf::from(format!("/private/tmp/confine-helper-{uid}")),
            #[cfg(target_os = "linux")]
            file_io: file_io_path.as_deref().and_then(|path| {
                nix::fcntl::open(
                    path,
                    nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_CLOEXEC,
                    nix::sys::stat::Mode::empty(),
                )
                .ok()
            }),
            #[cfg(target_os = "linux")]
            file_io_path,
            #[cfg(target_os = "linux")]
            exe: nix::fcntl::open(
                c"/proc/self/exe",
                nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_CLOEXEC,
                nix::sys::stat::Mode::empty(),
            )
            .ok(),
            #[cfg(target_os = "macos")]
            exe: None,
            verdicts: RefCell::new(unprobed().into_iter().collect()),
            takes_hints: false,
            hinted: RefCell::new(Vec::new()),
            #[cfg(target_os = "linux")]
            filters: RefCell::new(HashMap::new()),
            #[cfg(target_os = "linux")]
            cgroups: OnceCell::new(),
            #[cfg(target_os = "linux")]
            user_namespace: OnceCell::new(),
            #[cfg(target_os = "linux")]
            memory_total: OnceCell::new(),
        }
    }

    /// Removes what helpers of this user killed before their commands ended left behind: their
    /// commands' temp directories and, as root, their commands' cgroups.
    pub(crate) fn sweep_orphans(&self) {
        crate::sys::sweep_orphaned_temp_dirs(&self.temp_base);
        #[cfg(target_os = "linux")]
        if nix::unistd::geteuid().is_root() {
            self.cgroups().sweep();
        }
    }

    /// Where commands' own cgroups can go; looked for once, and only by a root helper.
    #[cfg(target_os = "linux")]
    pub(crate) fn cgroups(&self) -> &crate::cgroup::Cgroups {
        self.cgroups.get_or_init(|| {
            if nix::unistd::geteuid().is_root() {
                crate::cgroup::Cgroups::find()
            } else {
                crate::cgroup::Cgroups::default()
            }
        })
    }

    /// Whether this user may make a user namespace here; tried once.
    #[cfg(target_os = "linux")]
    pub(crate) fn user_namespace_usable(&self) -> bool {
        *self
            .user_namespace
            .get_or_init(crate::sys::user_namespace_usable)
    }

    /// The machine's memory in bytes (`MemTotal`), if it can be read.
    #[cfg(target_os = "linux")]
    pub(crate) fn memory_total(&self) -> Option<u64> {
        *self.memory_total.get_or_init(|| {
            let info = std::fs::read_to_string("/proc/meminfo").ok()?;
            let kib = info.lines().find_map(|l| l.strip_prefix("MemTotal:"))?;
            let kib: u64 = kib.trim().strip_suffix("kB")?.trim().parse().ok()?;
            kib.checked_mul(1024)
        })
    }

    /// A backend's cached verdict, if it has been probed.
    pub(crate) fn verdict(&self, backend: Backend) -> Option<Result<(), Unusable>> {
        self.verdicts.borrow().get(&backend).cloned()
    }

    pub(crate) fn set_verdict(&self, backend: Backend, verdict: Result<(), Unusable>) {
        self.verdicts.borrow_mut().insert(backend, verdict);
    }

    /// Whether agentd's hint says another helper process already found `backend` usable here
    /// (its probe can be skipped).
    pub(crate) fn usable_before(&self, backend: Backend) -> bool {
        self.keeps_verdict(backend) && self.hinted.borrow().contains(&backend)
    }

    /// Takes the hints whose fingerprint is this helper's own for their backend; ignores the
    /// others, and all of them when this helper takes none.
    pub(crate) fn take_hints(&self, hints: &[UsableBefore]) {
        if !self.takes_hints {
            return;
        }
        for hint in hints {
            if self.fingerprint(hint.backend).as_deref() == Some(hint.fingerprint.as_str()) {
                self.hinted.borrow_mut().push(hint.backend);
            }
        }
    }

    /// The fingerprint under which `backend`'s usable verdict may be kept, when it may.
    pub(crate) fn fingerprint(&self, backend: Backend) -> Option<String> {
        self.keeps_verdict(backend)
            .then(|| {
                super::fingerprint::of(
                    backend,
                    self.bwrap.as_deref(),
                    self.landlock_abi,
                    self.drop_caps,
                )
            })
            .flatten()
    }

    /// Whether a kept verdict for `backend` is safe to trust: a backend that failed to build a
    /// command's confinement must say so as a runner failure, which drops the verdict. bwrap
    /// does only with the Landlock layer, whose report tells a sandbox never built from a
    /// command that failed; without it bwrap's own failure reads as the command's exit 1.
    fn keeps_verdict(&self, backend: Backend) -> bool {
        backend != Backend::Bwrap || inner_layer(self).is_ok()
    }

    /// Drops `backend`'s verdict and its hint after it failed to build a command's
    /// confinement: the next request that needs it probes it again.
    pub(crate) fn forget_verdict(&self, backend: Backend) {
        self.verdicts.borrow_mut().remove(&backend);
        self.hinted.borrow_mut().retain(|b| *b != backend);
    }

    /// The seccomp filter for `variant`, built once.
    #[cfg(target_os = "linux")]
    pub(crate) fn filter(
        &self,
        variant: seccomp::Variant,
    ) -> Result<bpf::Program, bpf::FilterError> {
        if let Some(program) = self.filters.borrow().get(&variant) {
            return Ok(program.clone());
        }
        let program = seccomp::build(variant)?;
        self.filters.borrow_mut().insert(variant, program.clone());
        Ok(program)
    }
}
/// The backends `choice` allows, in preference order.
pub(crate) fn candidates(choice: BackendChoice) -> Vec<Backend> {
    match choice {
        #[cfg(not(target_os = "macos"))]
        BackendChoice::Auto => vec![Backend::Namespaces, Backend::Bwrap, Backend::Landlock],
        #[cfg(target_os = "macos")]
        BackendChoice::Auto => vec![Backend::Seatbelt],
        BackendChoice::Bwrap => vec![Backend::Bwrap],
        BackendChoice::Landlock => vec![Backend::Landlock],
        BackendChoice::Seatbelt => vec![Backend::Seatbelt],
        BackendChoice::Namespaces => vec![Backend::Namespaces],
    }
}

/// Why a backend cannot be used: known before any probe, or what its probe found. The text is
/// the backend's `detail` in `HelperInfo` and part of `RunnerFailed{unavailable}`. Verdicts are
/// cached for the helper's lifetime, so this is `Clone`: a failed system call is kept as its
/// errno, not as an `io::Error`.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum Unusable {
    #[cfg(target_os = "linux")]
    #[error("bwrap is not installed (looked in {})", bwrap::SEARCH.join(", "))]
    NoBwrap,
    #[cfg(target_os = "linux")]
    #[error("this kernel does not offer Landlock (needs Linux 5.13+ with landlock in lsm=)")]
    NoLandlock,
    /// bwrap or Landlock asked for on macOS.
    #[cfg(target_os = "macos")]
    #[error("{} is a Linux backend; on macOS the backend is seatbelt", .0.as_str())]
    LinuxOnly(Backend),
    #[cfg(not(target_os = "macos"))]
    #[error("seatbelt is the macOS backend; this is Linux")]
    Seatbelt,
    #[cfg(target_os = "macos")]
    #[error(
        "sandbox-exec is missing (looked for {})",
        super::seatbelt::SANDBOX_EXEC
    )]
    NoSandboxExec,
    #[error("not a confinement backend")]
    NotABackend,
    /// The probe's run was refused (by the ceiling's `refuse_partial`, say).
    #[error("{0}")]
    Refused(confine_protocol::Refusal),
    /// A runner step failed, before the probe started or as it ran; `stderr` is what the runner
    /// said on its way out, trimmed (empty when nothing was read).
    #[error("{} failed: {detail}{}", .stage.as_str(), said(.stderr))]
    RunnerFailed {
        stage: Stage,
        detail: String,
        stderr: String,
    },
    /// The probe did not start, with a reply that is neither of the above, shown as is.
    #[error("{0:?}")]
    NotStarted(Box<Reply>),
    #[error("{0}")]
    Pipe(#[source] nix::Error),
    /// Waiting for the probe failed with this errno.
    #[error("{}", std::io::Error::from_raw_os_error(*.0))]
    Poll(i32),
    /// The confined `true` ran and did not exit 0.
    #[error("a confined `true` ended with {status:?}{}", said(.stderr))]
    Ended { status: ExitStatus, stderr: String },
    #[error("unexpected probe result {0:?}")]
    Unexpected(Box<Reply>),
}

/// What the runner said, as it follows a verdict: nothing, or `: ` and the text.
fn said(stderr: &str) -> String {
    if stderr.is_empty() {
        String::new()
    } else {
        format!(": {stderr}")
    }
}

/// Why a backend cannot be used before any probe, if that is already known.
pub(crate) fn static_verdict(backend: Backend, ctx: &Context) -> Result<(), Unusable> {
    match backend {
        #[cfg(target_os = "linux")]
        Backend::Bwrap if ctx.bwrap.is_none() => Err(Unusable::NoBwrap),
        #[cfg(target_os = "linux")]
        Backend::Landlock | Backend::Namespaces if ctx.landlock_abi == 0 => {
            Err(Unusable::NoLandlock)
        }
        #[cfg(target_os = "macos")]
        Backend::Bwrap | Backend::Landlock | Backend::Namespaces => {
            let _ = ctx;
            Err(Unusable::LinuxOnly(backend))
        }
        Backend::Seatbelt => seatbelt_verdict(),
        Backend::None => Err(Unusable::NotABackend),
        #[cfg(target_os = "linux")]
        _ => Ok(()),
    }
}

/// Seatbelt's verdict, known without a probe: on macOS, usable when `sandbox-exec` is there.
fn seatbelt_verdict() -> Result<(), Unusable> {
    #[cfg(target_os = "macos")]
    return if Path::new(super::seatbelt::SANDBOX_EXEC).exists() {
        Ok(())
    } else {
        Err(Unusable::NoSandboxExec)
    };
    #[cfg(not(target_os = "macos"))]
    Err(Unusable::Seatbelt)
}

/// The verdicts a helper starts with, taken unprobed: on macOS Seatbelt's, the sole candidate
/// (nothing could be chosen instead). A profile `sandbox-exec` refuses fails that command as a
/// runner failure, which drops the verdict, and the next command probes it.
fn unprobed() -> Vec<(Backend, Result<(), Unusable>)> {
    if cfg!(target_os = "macos") {
        vec![(Backend::Seatbelt, seatbelt_verdict())]
    } else {
        Vec::new()
    }
}

/// What gives a machine a usable backend.
#[cfg(not(target_os = "macos"))]
const FIX: &str = "install bubblewrap (e.g. apt-get install bubblewrap) with unprivileged user \
    namespaces enabled, or use a kernel with Landlock enabled";
#[cfg(target_os = "macos")]
const FIX: &str = "restore /usr/bin/sandbox-exec, which is part of macOS (the seatbelt backend)";

/// The message of `RunnerFailed{unavailable}`: what was tried, why each failed, what to do.
pub(crate) fn unavailable(mode: Mode, tried: &[(Backend, Unusable)]) -> NotRun {
    let reasons: Vec<String> = tried
        .iter()
        .map(|(b, why)| format!("{}: {why}", b.as_str()))
        .collect();
    NotRun::RunnerFailed(
        Stage::Unavailable,
        0,
        format!(
            "no usable sandbox backend for {} ({}); nothing was run unconfined. To fix: {FIX}, \
             or run with danger-full-access to run without confinement",
            mode.as_str(),
            reasons.join("; ")
        ),
    )
}
/// Why bwrap's sandbox gets no Landlock layer on this machine; the text is part of a
/// `Partial` enforcement fact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NoInnerLayer {
    #[error("this kernel does not offer Landlock")]
    NoLandlock,
    #[error("the helper cannot open its own binary to run inside the sandbox")]
    NoExe,
}

/// The helper's own binary, which bwrap runs as the Landlock layer inside its namespaces; or
/// why bwrap's sandbox gets no Landlock layer on this machine.
pub(crate) fn inner_layer(ctx: &Context) -> Result<&OwnedFd, NoInnerLayer> {
    if ctx.landlock_abi == 0 {
        return Err(NoInnerLayer::NoLandlock);
    }
    ctx.exe.as_ref().ok_or(NoInnerLayer::NoExe)
}

/// The layers a command confined by `backend` gets on this machine.
pub(crate) fn layers(backend: Backend, ctx: &Context) -> Vec<Layer> {
    match backend {
        Backend::Bwrap if inner_layer(ctx).is_ok() => {
            vec![Layer::Namespaces, Layer::Landlock, Layer::Seccomp]
        }
        Backend::Bwrap => vec![Layer::Namespaces, Layer::Seccomp],
        Backend::Landlock => vec![Layer::Landlock, Layer::Seccomp],
        Backend::Namespaces => vec![Layer::Namespaces, Layer::Landlock, Layer::Seccomp],
        Backend::None | Backend::Seatbelt => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_os = "linux")]
    use super::*;

    // The verdicts' texts name the Linux backends.
    #[cfg(target_os = "linux")]
    #[test]
    fn verdicts_read_as_the_runner_said_them() {
        let failed = Unusable::RunnerFailed {
            stage: Stage::Namespace,
            detail: "bwrap ended before enter ran".into(),
            stderr: String::new(),
        };
        assert_eq!(
            failed.to_string(),
            "namespace failed: bwrap ended before enter ran"
        );
        let ended = Unusable::Ended {
            status: ExitStatus::Code(1),
            stderr: "bwrap: No permissions to create a new namespace".into(),
        };
        assert_eq!(
            ended.to_string(),
            "a confined `true` ended with Code(1): bwrap: No permissions to create a new namespace"
        );
        assert_eq!(
            Unusable::Poll(nix::libc::EBADF).to_string(),
            std::io::Error::from_raw_os_error(nix::libc::EBADF).to_string()
        );
        assert_eq!(
            Unusable::Pipe(nix::Error::EMFILE).to_string(),
            nix::Error::EMFILE.to_string()
        );
        let tried = [(Backend::Landlock, Unusable::NoLandlock)];
        let NotRun::RunnerFailed(Stage::Unavailable, 0, why) = unavailable(Mode::ReadOnly, &tried)
        else {
            panic!("not unavailable");
        };
        assert!(
            why.starts_with(
                "no usable sandbox backend for read-only (landlock: this kernel does not offer \
                 Landlock (needs Linux 5.13+ with landlock in lsm=)); nothing was run unconfined."
            ),
            "{why}"
        );
    }
}
