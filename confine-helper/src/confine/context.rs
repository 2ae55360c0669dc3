//! What the helper knows about itself and this machine, computed once, and what it decides
//! from that alone: which backends a request may use, which are usable, and their layers.

use std::cell::RefCell;
use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use confine_protocol::{Backend, BackendChoice, Layer, Mode, Stage};

use super::not_run::NotRun;
use crate::ceiling::Ceiling;
use crate::{bwrap, landlock, paths, seccomp};

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
    /// The helper's own binary, which runs confined as the writer of `WriteFile` requests.
    pub(crate) self_exe: Option<PathBuf>,
    /// The running binary itself (`/proc/self/exe`), opened once: bwrap executes it from this
    /// descriptor as the `enter` step, whatever is at its path later.
    pub(crate) exe: Option<OwnedFd>,
    verdicts: RefCell<HashMap<Backend, Result<(), String>>>,
    filters: RefCell<HashMap<seccomp::Variant, seccompiler::BpfProgram>>,
}
impl Context {
    pub(crate) fn new(
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
    pub(crate) fn verdict(&self, backend: Backend) -> Option<Result<(), String>> {
        self.verdicts.borrow().get(&backend).cloned()
    }

    pub(crate) fn set_verdict(&self, backend: Backend, verdict: Result<(), String>) {
        self.verdicts.borrow_mut().insert(backend, verdict);
    }

    /// The seccomp filter for `variant`, built once.
    pub(crate) fn filter(
        &self,
        variant: seccomp::Variant,
    ) -> Result<seccompiler::BpfProgram, seccomp::FilterError> {
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
        BackendChoice::Auto => vec![Backend::Bwrap, Backend::Landlock],
        BackendChoice::Bwrap => vec![Backend::Bwrap],
        BackendChoice::Landlock => vec![Backend::Landlock],
        BackendChoice::Seatbelt => vec![Backend::Seatbelt],
    }
}

/// Why a backend cannot be used before any probe, if that is already known.
pub(crate) fn static_verdict(backend: Backend, ctx: &Context) -> Result<(), String> {
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
pub(crate) fn unavailable(mode: Mode, tried: &[(Backend, String)]) -> NotRun {
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
/// The helper's own binary, which bwrap runs as the Landlock layer inside its namespaces; or
/// why bwrap's sandbox gets no Landlock layer on this machine.
pub(crate) fn inner_layer(ctx: &Context) -> Result<&OwnedFd, &'static str> {
    if ctx.landlock_abi == 0 {
        return Err("this kernel does not offer Landlock");
    }
    ctx.exe
        .as_ref()
        .ok_or("the helper cannot open its own binary to run inside the sandbox")
}

/// The layers a command confined by `backend` gets on this machine.
pub(crate) fn layers(backend: Backend, ctx: &Context) -> Vec<Layer> {
    match backend {
        Backend::Bwrap if inner_layer(ctx).is_ok() => {
            vec![Layer::Namespaces, Layer::Landlock, Layer::Seccomp]
        }
        Backend::Bwrap => vec![Layer::Namespaces, Layer::Seccomp],
        Backend::Landlock => vec![Layer::Landlock, Layer::Seccomp],
        Backend::None | Backend::Seatbelt => Vec::new(),
    }
}
