//! Backend verdicts kept across helper processes (RFC 0017, "The probe verdict cache").
//!
//! A new embedded helper would otherwise run a functional probe (`true` in a sandbox) before
//! its first confined command: for bwrap, a whole sandbox, which is most of the cost of a
//! one-shot `agentd run`. Only *usable* verdicts are kept, each under a fingerprint of
//! everything the probe's outcome depends on: this helper's build and binary, the user, the
//! boot, the namespaces the helper runs in, the user-namespace sysctls, the Landlock ABI and,
//! for bwrap, the bwrap binary itself. An entry only lets the helper skip the probe; the
//! command still runs under the backend's full confinement. So an entry that is stale (the
//! machine changed in a way the fingerprint misses) or forged (written by the same user) can
//! only make a command fail at execution as a runner failure, which also drops the entry: it
//! never makes a command run less confined. A negative verdict is never kept, so no entry can
//! move `auto` away from bwrap.
//!
//! The file is `$XDG_CACHE_HOME/confine-helper/verdicts` (else `~/.cache/…` of the passwd
//! entry), mode 0600 in a 0700 directory owned by the helper's user; anything else about it
//! and it is ignored. Its directory is one of the helper's own paths, so no writable root may
//! contain it.

use std::cell::RefCell;
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use confine_protocol::Backend;
use nix::libc;

/// The first line of the file; a file with another first line is ignored.
const HEADER: &str = "confine-helper verdict cache 1";
/// The file's name in its directory.
const FILE_NAME: &str = "verdicts";
/// A file larger than this is not a cache this helper wrote.
const MAX_FILE_BYTES: u64 = 16 << 10;
/// The sysctls that decide whether an unprivileged user namespace can be made.
#[cfg(target_os = "linux")]
const USERNS_SYSCTLS: [&str; 3] = [
    "/proc/sys/user/max_user_namespaces",
    "/proc/sys/kernel/unprivileged_userns_clone",
    "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
];
/// The namespaces a probe's outcome depends on.
#[cfg(target_os = "linux")]
const NAMESPACES: [&str; 4] = ["user", "mnt", "pid", "net"];

/// The cache of one helper process: where the file is, the fingerprints of this process, and
/// the backends known usable under them.
#[derive(Debug)]
pub(crate) struct VerdictCache {
    path: PathBuf,
    /// `(backend, fingerprint)` for each backend this helper can cache.
    fingerprints: Vec<(Backend, String)>,
    /// The backends the file holds as usable under this process's fingerprints.
    usable: RefCell<Vec<Backend>>,
    /// Whether entries read from the file are trusted (false for `confine-helper probe`, which
    /// always probes afresh and rewrites the file).
    trusted: bool,
}

/// Whether the cache's entries are used, or only rewritten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Use {
    ReadAndWrite,
    WriteOnly,
}

impl VerdictCache {
    /// The cache in `dir` for this helper, whose bwrap is `bwrap` and whose kernel offers
    /// Landlock ABI `landlock_abi`; `None` when `dir` is not private to this user.
    pub(crate) fn open(
        dir: &Path,
        bwrap: Option<&Path>,
        landlock_abi: u32,
        holds_caps: bool,
        how: Use,
    ) -> Option<VerdictCache> {
        private_dir(dir)?;
        let common = common_fingerprint(landlock_abi, holds_caps)?;
        let mut fingerprints = vec![(Backend::Landlock, common.clone())];
        if let Some(bwrap) = bwrap.and_then(|b| Some(format!("{common} bwrap={}", identity(b)?))) {
            fingerprints.push((Backend::Bwrap, bwrap));
        }
        let cache = VerdictCache {
            path: dir.join(FILE_NAME),
            fingerprints,
            usable: RefCell::new(Vec::new()),
            trusted: how == Use::ReadAndWrite,
        };
        *cache.usable.borrow_mut() = cache.read();
        Some(cache)
    }

    /// Whether `backend` is known usable: its probe can be skipped.
    pub(crate) fn usable(&self, backend: Backend) -> bool {
        self.trusted && self.usable.borrow().contains(&backend)
    }

    /// Records a probe's outcome (or, with `false`, forgets a backend that failed at
    /// execution), rewriting the file when that changes it.
    pub(crate) fn record(&self, backend: Backend, usable: bool) {
        let changed = {
            let mut held = self.usable.borrow_mut();
            let had = held.contains(&backend);
            if usable && !had {
                held.push(backend);
            } else if !usable {
                held.retain(|b| *b != backend);
            }
            had != usable
        };
        if changed {
            // A cache that cannot be written only costs the next helper a probe.
            let _ = self.write();
        }
    }

    fn fingerprint(&self, backend: Backend) -> Option<&str> {
        self.fingerprints
            .iter()
            .find(|(b, _)| *b == backend)
            .map(|(_, f)| f.as_str())
    }

    /// The backends the file holds as usable under this process's fingerprints; nothing when
    /// the file is missing, not this user's own, writable by others, too large or not ours.
    fn read(&self) -> Vec<Backend> {
        let Ok(mut file) = File::options()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&self.path)
        else {
            return Vec::new();
        };
        let euid = nix::unistd::geteuid().as_raw();
        let owned = file.metadata().is_ok_and(|m| {
            m.is_file() && m.uid() == euid && m.mode() & 0o022 == 0 && m.len() <= MAX_FILE_BYTES
        });
        let mut text = String::new();
        if !owned
            || Read::by_ref(&mut file)
                .take(MAX_FILE_BYTES)
                .read_to_string(&mut text)
                .is_err()
        {
            return Vec::new();
        }
        let mut lines = text.lines();
        if lines.next() != Some(HEADER) {
            return Vec::new();
        }
        lines
            .filter_map(|line| {
                let (name, fingerprint) = line.strip_prefix("usable ")?.split_once(' ')?;
                let backend = [Backend::Bwrap, Backend::Landlock]
                    .into_iter()
                    .find(|b| b.as_str() == name)?;
                (self.fingerprint(backend) == Some(fingerprint)).then_some(backend)
            })
            .collect()
    }

    /// Replaces the file with this process's usable entries: written to a new file beside it,
    /// then renamed over it, so a reader sees the old file or the new one.
    fn write(&self) -> std::io::Result<()> {
        let mut text = format!("{HEADER}\n");
        for backend in self.usable.borrow().iter() {
            if let Some(fingerprint) = self.fingerprint(*backend) {
                text.push_str(&format!("usable {} {fingerprint}\n", backend.as_str()));
            }
        }
        let temp = self
            .path
            .with_file_name(format!("{FILE_NAME}.{}.new", std::process::id()));
        let _ = std::fs::remove_file(&temp);
        let mut file = File::options()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&temp)?;
        let written = file
            .write_all(text.as_bytes())
            .and_then(|()| std::fs::rename(&temp, &self.path));
        if written.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        written
    }
}

/// The cache directory for a helper whose environment said `xdg_cache` and whose user's home
/// is `home`.
pub(crate) fn dir(xdg_cache: Option<&Path>, home: Option<&Path>) -> Option<PathBuf> {
    match xdg_cache.filter(|p| p.is_absolute()) {
        Some(base) => Some(base.join("confine-helper")),
        None => home
            .filter(|p| p.is_absolute())
            .map(|h| h.join(".cache").join("confine-helper")),
    }
}

/// Makes `dir` (0700) if it is missing; it must then be a real directory of this user that
/// nobody else can write.
fn private_dir(dir: &Path) -> Option<()> {
    if std::fs::symlink_metadata(dir).is_err() {
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir);
    }
    crate::sys::is_private_dir(&std::fs::symlink_metadata(dir).ok()?).then_some(())
}

/// What every backend's verdict depends on, as one line. The binary is the running one (the
/// link's target is this process's own executable, whatever is at its path now). Linux's: on
/// macOS Seatbelt is taken unprobed, so there is nothing to keep and no cache is opened.
#[cfg(target_os = "macos")]
fn common_fingerprint(landlock_abi: u32, holds_caps: bool) -> Option<String> {
    let _ = (landlock_abi, holds_caps);
    None
}

/// What every backend's verdict depends on, as one line. The binary is the running one (the
/// link's target is this process's own executable, whatever is at its path now).
#[cfg(target_os = "linux")]
fn common_fingerprint(landlock_abi: u32, holds_caps: bool) -> Option<String> {
    let exe = file_identity(&std::fs::metadata("/proc/self/exe").ok()?);
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let namespaces: Vec<String> = NAMESPACES
        .iter()
        .map(|ns| {
            std::fs::read_link(format!("/proc/self/ns/{ns}"))
                .map(|l| l.display().to_string())
                .unwrap_or_else(|_| "-".into())
        })
        .collect();
    let sysctls: Vec<String> = USERNS_SYSCTLS
        .iter()
        .map(|p| std::fs::read_to_string(p).map_or_else(|_| "-".into(), |v| v.trim().to_owned()))
        .collect();
    let line = format!(
        "helper={}/{}/{:016x} exe={exe} uid={}:{} caps={holds_caps} boot={} ns={} userns={} \
         landlock={landlock_abi}",
        env!("CARGO_PKG_VERSION"),
        confine_protocol::PROTOCOL_VERSION,
        confine_protocol::SCHEMA_HASH,
        nix::unistd::geteuid(),
        nix::unistd::getegid(),
        boot.trim(),
        namespaces.join(","),
        sysctls.join(","),
    );
    // One line, in a file of lines: nothing above could hold a newline, but never trust that.
    (!line.contains('\n')).then_some(line)
}

/// A path's bytes in hex and its file's identity.
fn identity(path: &Path) -> Option<String> {
    use std::os::unix::ffi::OsStrExt;
    let meta = std::fs::metadata(path).ok()?;
    let hex: String = path
        .as_os_str()
        .as_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Some(format!("{hex}:{}", file_identity(&meta)))
}

/// Device, inode, mode, owner, size and both times of a file: a replaced or changed binary has
/// another identity.
fn file_identity(meta: &std::fs::Metadata) -> String {
    format!(
        "{}:{}:{:o}:{}:{}:{}.{}:{}.{}",
        meta.dev(),
        meta.ino(),
        meta.mode(),
        meta.uid(),
        meta.size(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_os = "linux")]
    use std::os::unix::fs::PermissionsExt;

    // A cache exists only where backends are probed: Linux.
    #[cfg(target_os = "linux")]
    fn cache(dir: &Path, how: Use) -> VerdictCache {
        VerdictCache::open(dir, Some(Path::new("/bin/sh")), 7, false, how).unwrap()
    }

    #[cfg(target_os = "linux")]
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "confine-helper-verdicts-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_usable_verdict_is_kept_for_the_next_process_and_a_failure_drops_it() {
        let dir = scratch("kept");
        let first = cache(&dir, Use::ReadAndWrite);
        assert!(!first.usable(Backend::Bwrap));
        first.record(Backend::Bwrap, true);
        let meta = std::fs::metadata(dir.join(FILE_NAME)).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(
            std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        let second = cache(&dir, Use::ReadAndWrite);
        assert!(second.usable(Backend::Bwrap));
        assert!(!second.usable(Backend::Landlock));
        // `probe` rewrites but never trusts.
        assert!(!cache(&dir, Use::WriteOnly).usable(Backend::Bwrap));
        second.record(Backend::Bwrap, false);
        assert!(!cache(&dir, Use::ReadAndWrite).usable(Backend::Bwrap));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn an_entry_under_another_fingerprint_is_not_usable() {
        let dir = scratch("other");
        cache(&dir, Use::ReadAndWrite).record(Backend::Bwrap, true);
        let text = std::fs::read_to_string(dir.join(FILE_NAME)).unwrap();
        // Another bwrap binary, another kernel ABI: each is another fingerprint.
        let other_bwrap = VerdictCache::open(
            &dir,
            Some(Path::new("/bin/ls")),
            7,
            false,
            Use::ReadAndWrite,
        )
        .unwrap();
        assert!(!other_bwrap.usable(Backend::Bwrap));
        let other_abi = VerdictCache::open(
            &dir,
            Some(Path::new("/bin/sh")),
            6,
            false,
            Use::ReadAndWrite,
        )
        .unwrap();
        assert!(!other_abi.usable(Backend::Bwrap));
        // An edited fingerprint is not this process's.
        std::fs::write(
            dir.join(FILE_NAME),
            text.replace("landlock=7", "landlock=8"),
        )
        .unwrap();
        assert!(!cache(&dir, Use::ReadAndWrite).usable(Backend::Bwrap));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_others_can_write_or_a_shared_directory_is_ignored() {
        let dir = scratch("perms");
        let first = cache(&dir, Use::ReadAndWrite);
        first.record(Backend::Landlock, true);
        let file = dir.join(FILE_NAME);
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o622)).unwrap();
        assert!(!cache(&dir, Use::ReadAndWrite).usable(Backend::Landlock));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(cache(&dir, Use::ReadAndWrite).usable(Backend::Landlock));
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(VerdictCache::open(&dir, None, 7, false, Use::ReadAndWrite).is_none());
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        // A symlink in place of the file is not followed.
        std::fs::remove_file(&file).unwrap();
        let elsewhere = scratch("elsewhere");
        let real = cache(&elsewhere, Use::ReadAndWrite);
        real.record(Backend::Landlock, true);
        std::os::unix::fs::symlink(elsewhere.join(FILE_NAME), &file).unwrap();
        assert!(!cache(&dir, Use::ReadAndWrite).usable(Backend::Landlock));
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::remove_dir_all(&elsewhere).unwrap();
    }

    #[test]
    fn the_directory_follows_xdg_then_the_home() {
        assert_eq!(
            dir(Some(Path::new("/c")), Some(Path::new("/h"))),
            Some(PathBuf::from("/c/confine-helper"))
        );
        assert_eq!(
            dir(Some(Path::new("rel")), Some(Path::new("/h"))),
            Some(PathBuf::from("/h/.cache/confine-helper"))
        );
        assert_eq!(dir(None, None), None);
    }
}
