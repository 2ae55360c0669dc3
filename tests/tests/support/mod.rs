//! Finding the built binaries and small helpers shared by the scenarios.

#![allow(dead_code)]

pub mod acp;
#[path = "../../shared/available.rs"]
pub mod available;
pub mod fifo;
pub mod model_server;
#[path = "../../shared/skip.rs"]
pub mod skip;
#[path = "../../shared/users.rs"]
pub mod users;

use std::path::PathBuf;

/// The Linux backends the scenarios run on, as agentd's configuration (`[sandbox] backend`)
/// names them: the helper's own namespaces (what `auto` picks where they work) and Landlock
/// alone. bwrap, which builds the same namespaces and mounts, is covered by kernel-e2e, its
/// differential test against `namespaces` and the helper's own tests; here only
/// `availability.rs` runs it ([`LINUX_BACKENDS`]), and [`backend_works`] still judges it.
pub const BACKENDS: [&str; 2] = ["namespaces", "landlock"];

/// Every Linux backend, in the order `auto` tries them (the helper's candidates).
pub const LINUX_BACKENDS: [&str; 3] = ["namespaces", "bwrap", "landlock"];

/// Whether `backend` works on this machine, judged without the helper (`available.rs`); what
/// is missing and why when it does not.
pub fn backend_works(backend: &str) -> Result<(), (skip::Need, String)> {
    match backend {
        "namespaces" => available::namespaces().map_err(|why| {
            let need = if why.is_landlock() {
                skip::Need::Landlock
            } else {
                skip::Need::UserNamespace
            };
            (need, why.to_string())
        }),
        "bwrap" => available::bwrap().map_err(|why| (skip::Need::Bwrap, why.to_string())),
        "landlock" => available::landlock().map_err(|why| (skip::Need::Landlock, why.to_string())),
        other => Err((
            skip::Need::Backend,
            format!("{other} is not a Linux backend"),
        )),
    }
}

/// Whether `backend` gives a command namespaces and mounts of its own (bwrap, the helper's own
/// namespaces): a protected path bound read-only, a private `/tmp`, a network namespace of the
/// command's own. Landlock alone gives none of them.
pub fn mounts(backend: &str) -> bool {
    matches!(backend, "namespaces" | "bwrap")
}

/// The backends the running test runs on: those that work here, judged without the helper
/// (so that a helper which wrongly calls one unusable fails the test instead of skipping it).
/// Each missing one is a SKIP line; the test's own when none works.
pub fn backends() -> Vec<&'static str> {
    let test = skip::this_test();
    let usable: Vec<&'static str> = BACKENDS
        .into_iter()
        .filter(|backend| match backend_works(backend) {
            Ok(()) => true,
            Err((need, why)) => {
                skip::skip_part(&test, backend, need, why);
                false
            }
        })
        .collect();
    if usable.is_empty() {
        skip::skip(
            &test,
            skip::Need::Backend,
            "neither the helper's own namespaces nor Landlock works here",
        );
    }
    usable
}

/// The workspace's root: the parent of this crate's directory.
pub fn workspace() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives in the workspace")
        .to_owned()
}

/// The cargo target directory holding this test binary's sibling executables.
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    // target/<profile>/deps/<test binary>
    exe.parent()
        .and_then(|deps| deps.parent())
        .map(PathBuf::from)
        .expect("target directory")
}

/// A built binary of the workspace, with a message naming the command that builds it.
pub fn binary(name: &str) -> PathBuf {
    let path = bin_dir().join(name);
    assert!(
        path.is_file(),
        "{} is missing: build it with `cargo build --workspace` (cargo test --workspace builds it)",
        path.display()
    );
    path
}

/// Whether process `pid` exists (a zombie counts as gone).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rfind(')')
            .and_then(|i| stat.get(i + 2..i + 3))
            .is_some_and(|state| state != "Z"),
        Err(_) => false,
    }
}

/// Waits until process `pid` is gone, up to `limit`, using a pidfd (no polling).
/// Returns whether it went.
pub fn wait_gone(pid: u32, limit: std::time::Duration) -> bool {
    use nix::libc;
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return !alive(pid);
    }
    // SAFETY: the kernel just returned this descriptor; nothing else owns it.
    let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) };
    let mut fds = [nix::poll::PollFd::new(
        std::os::fd::AsFd::as_fd(&fd),
        nix::poll::PollFlags::POLLIN,
    )];
    let ms = u16::try_from(limit.as_millis()).unwrap_or(u16::MAX);
    let ready = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(ms)).unwrap_or(0);
    ready > 0 || !alive(pid)
}

/// Blocks until `name` exists in `dir`, up to `limit`: an inotify event, not a poll. Returns
/// whether it appeared.
pub fn wait_for_file(dir: &std::path::Path, name: &str, limit: std::time::Duration) -> bool {
    use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
    let Ok(inotify) = Inotify::init(InitFlags::IN_CLOEXEC | InitFlags::IN_NONBLOCK) else {
        return dir.join(name).exists();
    };
    if inotify
        .add_watch(dir, AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO)
        .is_err()
    {
        return dir.join(name).exists();
    }
    let deadline = std::time::Instant::now() + limit;
    while !dir.join(name).exists() {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return false;
        }
        let fd = std::os::fd::AsFd::as_fd(&inotify);
        let mut fds = [nix::poll::PollFd::new(fd, nix::poll::PollFlags::POLLIN)];
        let ms = u16::try_from(left.as_millis()).unwrap_or(u16::MAX);
        let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(ms));
        let _ = inotify.read_events();
    }
    true
}
