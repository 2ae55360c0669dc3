//! What this machine offers the sandbox, judged without asking confine-helper: whether a
//! root-owned bubblewrap builds its namespaces here, whether the kernel offers Landlock, and
//! whether this user may make the namespaces the helper's own backend makes (`namespaces`).
//!
//! Tests that run a backend only where it can work take the answer from here, never from the
//! helper's own report (`HelperInfo.backends`): a helper that wrongly called a backend unusable
//! would otherwise turn every test of that backend into a SKIP and a pass. Each crate's
//! availability test (`confine-helper/tests/availability.rs`, `tests/tests/availability.rs`,
//! kernel-e2e's T00) checks the other direction: where this module says a backend works, the
//! helper must say it is usable. Used through `#[path]` by the helper's tests, the scenario
//! tests and the confinement suite.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Arc;

/// Where the helper looks for bwrap (`confine-helper/src/bwrap.rs`, `SEARCH`): a bwrap anywhere
/// else is not one the helper runs, so it does not count here either.
pub const BWRAP_PATHS: [&str; 3] = ["/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"];

/// Why a sandbox backend does not work on this machine: what is missing, and what would mend it.
#[derive(Debug, Clone)]
pub enum Unavailable {
    /// No bwrap at any of [`BWRAP_PATHS`].
    BwrapMissing,
    /// The installed bwrap (its real path) could be changed by someone other than root.
    BwrapNotRoots(PathBuf),
    /// bwrap could not be started.
    BwrapWontRun {
        bwrap: PathBuf,
        error: Arc<std::io::Error>,
    },
    /// bwrap ran but could not make its namespaces: its exit status and stderr.
    NoNamespaces {
        bwrap: PathBuf,
        status: ExitStatus,
        stderr: String,
    },
    /// The kernel has no Landlock.
    LandlockMissing,
    /// Landlock is built in but not among the enabled LSMs.
    LandlockDisabled,
    /// The kernel answered the version query with an error.
    LandlockQuery(Arc<std::io::Error>),
    /// The kernel answered the version query with a version no `u32` holds.
    LandlockAbi {
        abi: std::ffi::c_long,
        error: std::num::TryFromIntError,
    },
    /// No util-linux `unshare` where confined commands look for programs ([`COMMAND_PATH`]),
    /// so no user namespace can be tried.
    UnshareMissing,
    /// `unshare` could not be started.
    UnshareWontRun {
        unshare: PathBuf,
        error: Arc<std::io::Error>,
    },
    /// `unshare` ran but could not make the namespaces: its exit status and stderr.
    NoUserNamespaces {
        unshare: PathBuf,
        status: ExitStatus,
        stderr: String,
    },
    /// Not Linux.
    NotLinux,
}

impl Unavailable {
    /// Whether what is missing is Landlock (the rest is bwrap or the user namespaces): which
    /// of the two a run requires decides whether a skip of the `namespaces` backend, which
    /// needs both, fails.
    pub fn is_landlock(&self) -> bool {
        matches!(
            self,
            Unavailable::LandlockMissing
                | Unavailable::LandlockDisabled
                | Unavailable::LandlockQuery(_)
                | Unavailable::LandlockAbi { .. }
                | Unavailable::NotLinux
        )
    }
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unavailable::BwrapMissing => write!(
                f,
                "bwrap is not installed at {} (apt-get install bubblewrap)",
                BWRAP_PATHS.join(", ")
            ),
            Unavailable::BwrapNotRoots(real) => write!(
                f,
                "{} is not owned by root or is writable by others, so the helper would not run it",
                real.display()
            ),
            Unavailable::BwrapWontRun { bwrap, error } => {
                write!(f, "cannot run {}: {error}", bwrap.display())
            }
            Unavailable::NoNamespaces {
                bwrap,
                status,
                stderr,
            } => write!(
                f,
                "{} cannot make its namespaces here ({status}): {stderr}; an unprivileged user \
                 namespace is needed (kernel.unprivileged_userns_clone, user.max_user_namespaces, \
                 or an AppArmor rule for bwrap)",
                bwrap.display()
            ),
            Unavailable::LandlockMissing => {
                f.write_str("this kernel is built without Landlock (5.13 or later has it)")
            }
            Unavailable::LandlockDisabled => f.write_str(
                "Landlock is built in but not enabled: add it to the kernel's lsm= list",
            ),
            Unavailable::LandlockQuery(errno) => {
                write!(f, "the kernel's Landlock version query failed: {errno}")
            }
            Unavailable::LandlockAbi { abi, error } => write!(f, "Landlock ABI {abi}: {error}"),
            Unavailable::UnshareMissing => write!(
                f,
                "unshare (util-linux) is not in {COMMAND_PATH}, so no user namespace can be tried"
            ),
            Unavailable::UnshareWontRun { unshare, error } => {
                write!(f, "cannot run {}: {error}", unshare.display())
            }
            Unavailable::NoUserNamespaces {
                unshare,
                status,
                stderr,
            } => write!(
                f,
                "{} cannot make the namespaces here ({status}): {stderr}; an unprivileged user \
                 namespace is needed (kernel.unprivileged_userns_clone, user.max_user_namespaces, \
                 kernel.apparmor_restrict_unprivileged_userns)",
                unshare.display()
            ),
            Unavailable::NotLinux => f.write_str("Landlock is Linux's"),
        }
    }
}

impl std::error::Error for Unavailable {}

/// The first installed bwrap only root can change (owned by root, no group or other write bit,
/// nor on its directory): the only kind the helper agrees to run.
pub fn bwrap_binary() -> Result<PathBuf, Unavailable> {
    use std::os::unix::fs::MetadataExt;
    let locked =
        |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.uid() == 0 && m.mode() & 0o022 == 0);
    let installed: Vec<PathBuf> = BWRAP_PATHS
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    installed
        .iter()
        .find(|real| real.is_file() && locked(real) && real.parent().is_some_and(locked))
        .cloned()
        .ok_or_else(|| match installed.first() {
            None => Unavailable::BwrapMissing,
            Some(real) => Unavailable::BwrapNotRoots(real.clone()),
        })
}

/// Whether bwrap makes the namespaces the helper asks of it (a user, pid, IPC, UTS and network
/// namespace, `/` read-only, a fresh `/dev` and `/proc`) and runs `true` in them, run as the
/// user `as_user` sets on the command (the current one when it sets none).
pub fn bwrap_runs(as_user: impl FnOnce(&mut Command)) -> Result<(), Unavailable> {
    let bwrap = bwrap_binary()?;
    let args = [
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-net",
        "--die-with-parent",
        "--new-session",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--",
        "true",
    ];
    runs(&bwrap, &args, as_user).map_err(|failed| match failed {
        Failed::WontRun(error) => Unavailable::BwrapWontRun { bwrap, error },
        Failed::Exited { status, stderr } => Unavailable::NoNamespaces {
            bwrap,
            status,
            stderr,
        },
    })
}

/// How a program run to see whether something works ([`runs`]) failed.
enum Failed {
    /// It could not be started.
    WontRun(Arc<std::io::Error>),
    /// It ran and failed: its exit status and stderr.
    Exited { status: ExitStatus, stderr: String },
}

/// Runs `program` with `args` (stdin and stdout closed, stderr kept), as the user `as_user` sets
/// on the command (the current one when it sets none), and whether it succeeded.
fn runs(program: &Path, args: &[&str], as_user: impl FnOnce(&mut Command)) -> Result<(), Failed> {
    let mut command = Command::new(program);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    as_user(&mut command);
    let out = command
        .output()
        .map_err(|error| Failed::WontRun(Arc::new(error)))?;
    if out.status.success() {
        return Ok(());
    }
    Err(Failed::Exited {
        status: out.status,
        stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
    })
}

/// The kernel's Landlock ABI version, asked of the kernel itself (`landlock_create_ruleset`'s
/// version query): at least 1 where Landlock is built in and enabled among the LSMs.
#[cfg(target_os = "linux")]
pub fn landlock_abi() -> Result<u32, Unavailable> {
    use nix::libc;
    /// `LANDLOCK_CREATE_RULESET_VERSION` of `<linux/landlock.h>`.
    const VERSION_QUERY: libc::c_uint = 1;
    // SAFETY: with the version flag the kernel reads neither the (null) attribute pointer nor
    // its (zero) size; it returns the ABI version or -1 and sets errno.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            VERSION_QUERY,
        )
    };
    if abi >= 1 {
        return u32::try_from(abi).map_err(|error| Unavailable::LandlockAbi { abi, error });
    }
    let errno = std::io::Error::last_os_error();
    Err(match errno.raw_os_error() {
        Some(libc::ENOSYS) => Unavailable::LandlockMissing,
        Some(libc::EOPNOTSUPP) => Unavailable::LandlockDisabled,
        _ => Unavailable::LandlockQuery(Arc::new(errno)),
    })
}

/// Landlock is Linux's.
#[cfg(not(target_os = "linux"))]
pub fn landlock_abi() -> Result<u32, Unavailable> {
    Err(Unavailable::NotLinux)
}

/// Whether the user `as_user` sets on the command (the current one when it sets none) may make
/// the namespaces the helper's own backend makes: a user namespace with the user's own ids
/// mapped in it, and inside it mount (a fresh `/proc` mounted), pid, IPC, UTS, cgroup and
/// network namespaces. Made by util-linux's `unshare` running `true`, as bwrap is run for the
/// bwrap backend ([`bwrap_runs`]).
pub fn user_namespaces_run(as_user: impl FnOnce(&mut Command)) -> Result<(), Unavailable> {
    let unshare = std::env::split_paths(COMMAND_PATH)
        .map(|dir| dir.join("unshare"))
        .find(|p| p.is_file())
        .ok_or(Unavailable::UnshareMissing)?;
    let args = [
        "--user",
        "--map-root-user",
        "--mount",
        "--pid",
        "--fork",
        "--mount-proc",
        "--ipc",
        "--uts",
        "--cgroup",
        "--net",
        "--",
        "true",
    ];
    runs(&unshare, &args, as_user).map_err(|failed| match failed {
        Failed::WontRun(error) => Unavailable::UnshareWontRun { unshare, error },
        Failed::Exited { status, stderr } => Unavailable::NoUserNamespaces {
            unshare,
            status,
            stderr,
        },
    })
}

/// Whether bwrap works here for the current user, judged once per process.
pub fn bwrap() -> Result<(), Unavailable> {
    static VERDICT: std::sync::OnceLock<Result<(), Unavailable>> = std::sync::OnceLock::new();
    VERDICT.get_or_init(|| bwrap_runs(|_| {})).clone()
}

/// Whether Landlock works here, judged once per process.
pub fn landlock() -> Result<(), Unavailable> {
    static VERDICT: std::sync::OnceLock<Result<(), Unavailable>> = std::sync::OnceLock::new();
    VERDICT.get_or_init(|| landlock_abi().map(drop)).clone()
}

/// Whether the current user may make the namespaces the helper's own backend makes
/// ([`user_namespaces_run`]), judged once per process.
pub fn user_namespaces() -> Result<(), Unavailable> {
    static VERDICT: std::sync::OnceLock<Result<(), Unavailable>> = std::sync::OnceLock::new();
    VERDICT.get_or_init(|| user_namespaces_run(|_| {})).clone()
}

/// Whether the helper's own namespaces (the `namespaces` backend) work here for the current
/// user, judged once per process: Landlock, the layer the command applies inside them, and
/// the namespaces themselves ([`user_namespaces`]). Which of the two is missing
/// ([`Unavailable::is_landlock`]) says what a run requires of it: `AGENTD_REQUIRE_LANDLOCK` or
/// `AGENTD_REQUIRE_USER_NAMESPACE` (`skip.rs`), as kernel-e2e judges the backend.
pub fn namespaces() -> Result<(), Unavailable> {
    landlock().and_then(|()| user_namespaces())
}

/// The PATH a confined command gets unless told otherwise (the helper's `DEFAULT_PATH`, and
/// what these tests give their commands).
pub const COMMAND_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Whether an executable `program` is in a directory of `path` (a `PATH`-style list).
pub fn in_path(program: &str, path: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path).any(|dir| {
        std::fs::metadata(dir.join(program))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// Whether `program` is where a confined command looks for it ([`COMMAND_PATH`]).
pub fn on_path(program: &str) -> bool {
    in_path(program, COMMAND_PATH)
}
