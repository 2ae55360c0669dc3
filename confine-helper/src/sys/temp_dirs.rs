//! Per-command temp directories under the helper's private base (`/tmp/confine-helper-<uid>`, on
//! macOS `/private/tmp/confine-helper-<uid>`): made for a command, removed at its end, and — for
//! a helper killed before it could remove them — removed by the next helper of the same user.
//!
//! A directory's name says whose it is: `cmd-<pid namespace>-<helper pid>-<random>` (the pid
//! namespace is `0` on macOS, which has none). A helper removes at its start the directories of
//! helpers of its own pid namespace that no longer run (`kill(pid, 0)` fails with `ESRCH`); a
//! pid that runs again, as anything, keeps its directories, and directories of other pid
//! namespaces or of the older naming are left alone. Removal never follows a link a command
//! made inside its directory.

use std::io;
use std::path::{Path, PathBuf};

use nix::libc;

/// Creates a fresh 0700 directory for one command under `base` (itself created 0700 and
/// checked to be this user's real directory, not a symlink someone planted).
pub(crate) fn private_temp_dir(base: &Path) -> io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new().mode(0o700).create(base) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    if !is_private_dir(&std::fs::symlink_metadata(base)?) {
        return Err(io::Error::other(format!(
            "{} is not a private directory of uid {}",
            base.display(),
            nix::unistd::geteuid()
        )));
    }
    let dir = base.join(owned_name(TEMP_DIR_PREFIX)?);
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    Ok(dir)
}

/// How a per-command temp directory's name starts.
const TEMP_DIR_PREFIX: &str = "cmd-";

/// A fresh name that says which helper made it: `<prefix><pid namespace>-<helper pid>-<random>`
/// ([`orphaned`] reads it back).
pub(crate) fn owned_name(prefix: &str) -> io::Result<String> {
    let random = random_bytes()?;
    Ok(format!(
        "{prefix}{}-{}-{:016x}",
        own_pid_namespace(),
        std::process::id(),
        u64::from_ne_bytes(random)
    ))
}

/// Whether `name` is an [`owned_name`] with `prefix` of a helper of this pid namespace that no
/// longer runs.
pub(crate) fn orphaned(name: &str, prefix: &str) -> bool {
    owner_of(name, prefix).is_some_and(|(ns, pid)| {
        ns == own_pid_namespace() && pid != std::process::id() && !helper_alive(pid)
    })
}

/// Whether `meta` (taken without following a link) is a directory of this process's user that
/// nobody else can read, write or enter.
fn is_private_dir(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    meta.is_dir() && meta.uid() == nix::unistd::geteuid().as_raw() && meta.mode() & 0o077 == 0
}

/// Eight random bytes from the kernel.
#[cfg(target_os = "linux")]
fn random_bytes() -> io::Result<[u8; 8]> {
    let mut random = [0u8; 8];
    // SAFETY: getrandom fills at most the live 8-byte buffer.
    let got = unsafe { libc::getrandom(random.as_mut_ptr().cast(), random.len(), 0) };
    if usize::try_from(got).ok() != Some(random.len()) {
        return Err(io::Error::last_os_error());
    }
    Ok(random)
}

/// Eight random bytes from the kernel.
#[cfg(target_os = "macos")]
fn random_bytes() -> io::Result<[u8; 8]> {
    let mut random = [0u8; 8];
    // SAFETY: getentropy fills exactly the live 8-byte buffer (at most 256 bytes are allowed).
    if unsafe { libc::getentropy(random.as_mut_ptr().cast(), random.len()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(random)
}

/// Removes the per-command directories under `base` left by helpers of this pid namespace that
/// no longer run. Returns how many were removed.
pub(crate) fn sweep_orphaned_temp_dirs(base: &Path) -> usize {
    // Only the helper's own private base, never a directory someone else made or linked.
    if !std::fs::symlink_metadata(base).is_ok_and(|m| is_private_dir(&m)) {
        return 0;
    }
    let Ok(entries) = std::fs::read_dir(base) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_str().is_some_and(|n| orphaned(n, TEMP_DIR_PREFIX)) {
            continue;
        }
        if std::fs::remove_dir_all(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// The pid namespace and helper pid a name `<prefix><ns>-<pid>-<random>` names.
fn owner_of(name: &str, prefix: &str) -> Option<(u64, u32)> {
    let mut parts = name.strip_prefix(prefix)?.splitn(3, '-');
    let ns = parts.next()?.parse().ok()?;
    let pid = parts.next()?.parse().ok()?;
    parts.next()?;
    Some((ns, pid))
}

/// Whether a process `pid` exists (of any user: `EPERM` means it does).
fn helper_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return true;
    };
    !matches!(
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
        Err(nix::errno::Errno::ESRCH)
    )
}

/// The inode of this process's pid namespace (`0` when it cannot be read: then only
/// directories also named with `0` are ever swept).
#[cfg(target_os = "linux")]
fn own_pid_namespace() -> u64 {
    std::fs::read_link("/proc/self/ns/pid")
        .ok()
        .and_then(|link| {
            let text = link.to_str()?.to_owned();
            text.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
        })
        .unwrap_or(0)
}

/// macOS has one pid space: every helper's directories are named with `0`.
#[cfg(target_os = "macos")]
fn own_pid_namespace() -> u64 {
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_directories_of_helpers_that_no_longer_run_here_are_swept() {
        let base =
            std::env::temp_dir().join(format!("confine-helper-sweep-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let mine = private_temp_dir(&base).expect("a directory of this helper");
        std::fs::write(mine.join("kept"), b"x").expect("write");
        let ns = own_pid_namespace();
        // A pid that no longer runs: a child that has been reaped.
        let mut child = std::process::Command::new("true").spawn().expect("spawn");
        let gone = child.id();
        child.wait().expect("wait");
        let orphaned = base.join(format!("cmd-{ns}-{gone}-00000000000000aa"));
        std::fs::create_dir(&orphaned).expect("orphaned dir");
        // A command's link inside it must not be followed.
        let outside = base.with_extension("outside");
        std::fs::create_dir_all(&outside).expect("outside");
        std::fs::write(outside.join("precious"), b"x").expect("write");
        std::os::unix::fs::symlink(&outside, orphaned.join("link")).expect("link");
        // Nor a link that stands where a directory would, named as an orphaned one.
        let planted = base.join(format!("cmd-{ns}-{gone}-00000000000000ee"));
        std::os::unix::fs::symlink(&outside, &planted).expect("planted link");
        let other_ns = base.join(format!("cmd-{}-{gone}-00000000000000bb", ns + 1));
        let old_name = base.join("cmd-00000000000000cc");
        let alive = base.join(format!("cmd-{ns}-1-00000000000000dd"));
        for dir in [&other_ns, &old_name, &alive] {
            std::fs::create_dir(dir).expect("dir");
        }
        assert_eq!(sweep_orphaned_temp_dirs(&base), 2);
        assert!(!orphaned.exists(), "the orphaned directory is gone");
        assert!(
            std::fs::symlink_metadata(&planted).is_err(),
            "the planted link itself is gone"
        );
        assert!(
            outside.join("precious").exists(),
            "the link was not followed"
        );
        for dir in [&mine, &other_ns, &old_name, &alive] {
            assert!(dir.exists(), "{} was kept", dir.display());
        }
        std::fs::remove_dir_all(&base).expect("cleanup");
        std::fs::remove_dir_all(&outside).expect("cleanup");
    }

    #[test]
    fn a_base_others_can_enter_is_not_swept() {
        use std::os::unix::fs::PermissionsExt;
        let base =
            std::env::temp_dir().join(format!("confine-helper-shared-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        private_temp_dir(&base).expect("a private base");
        let mut child = std::process::Command::new("true").spawn().expect("spawn");
        let gone = child.id();
        child.wait().expect("wait");
        let orphaned = base.join(format!(
            "cmd-{}-{gone}-00000000000000aa",
            own_pid_namespace()
        ));
        std::fs::create_dir(&orphaned).expect("orphaned dir");
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        assert!(
            private_temp_dir(&base).is_err(),
            "no directory is made there"
        );
        assert_eq!(sweep_orphaned_temp_dirs(&base), 0);
        assert!(orphaned.exists(), "nothing was removed from a shared base");
        // The control: the same base, private again, is swept.
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        assert_eq!(sweep_orphaned_temp_dirs(&base), 1);
        assert!(!orphaned.exists(), "the orphaned directory is gone");
        std::fs::remove_dir_all(&base).expect("cleanup");
    }
}
