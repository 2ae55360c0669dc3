//! Backend verdicts kept across helper processes (RFC 0017, "The probe verdict cache"), sent to
//! each new helper as hints.
//!
//! A new embedded helper would otherwise run a functional probe (`true` in a sandbox) before its
//! first confined command: for bwrap, a whole sandbox, which is most of the cost of a one-shot
//! `agentd run`. Only *usable* verdicts are kept, each under the fingerprint the helper reported
//! for it in `Info` (its build and binary, its user, its namespaces, the Landlock ABI, the bwrap
//! binary) and the machine's own as agentd sees it (the boot, this user, the user-namespace
//! sysctls). The helper takes a hint only when its fingerprint is the helper's own, and then
//! only skips the probe: the command still runs under the backend's full confinement. So an
//! entry that is stale (the machine changed in a way the fingerprints miss) or forged (written
//! by the same user) can only make a command fail at execution as a runner failure, which also
//! drops every entry: it never makes a command run less confined. A negative verdict is never
//! kept, so no entry can move `auto` away from its first usable backend.
//!
//! The file is `$XDG_CACHE_HOME/agentd/helper-verdicts` (else `~/.cache/agentd/…`), mode 0600
//! in a 0700 directory owned by agentd's user; anything else about it and it is ignored. The
//! directory is one of agentd's own paths, so no writable root may contain it.

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use confine_protocol::{Backend, HelperInfo, UsableBefore};

/// The first line of the file; a file with another first line is ignored.
const HEADER: &str = "agentd helper verdict cache 1";
/// The second line's prefix: the machine's fingerprint the entries were kept under.
const MACHINE: &str = "machine ";
/// An entry line's prefix, followed by the backend and the helper's fingerprint.
const USABLE: &str = "usable ";
/// The file's name in its directory.
const FILE_NAME: &str = "helper-verdicts";
/// A file larger than this is not a cache agentd wrote.
const MAX_FILE_BYTES: u64 = 16 << 10;
/// The mode bits that let anyone but the owner in.
const OTHERS: u32 = 0o077;
/// The sysctls that decide whether an unprivileged user namespace can be made.
const USERNS_SYSCTLS: [&str; 3] = [
    "/proc/sys/user/max_user_namespaces",
    "/proc/sys/kernel/unprivileged_userns_clone",
    "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
];
/// Where the boot's id is read.
const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

/// The kept verdicts of one agentd: where the file is, this machine's fingerprint, and the
/// usable backends with the helper's fingerprint for each.
#[derive(Debug)]
pub struct VerdictCache {
    path: PathBuf,
    machine: String,
    /// Whether the entries are sent as hints (`agentd probe` sends none: it always probes).
    sends_hints: bool,
    held: Mutex<Vec<UsableBefore>>,
    /// How many times the entries were dropped ([`VerdictCache::forget`]).
    forgotten: AtomicU64,
}

impl VerdictCache {
    /// The cache in `dir` (made 0700 if missing); `None` when `dir` is not private to this user
    /// or the machine's fingerprint cannot be read. `sends_hints` is false for a diagnosis that
    /// must probe afresh and only rewrite the file.
    pub fn open(dir: &Path, sends_hints: bool) -> Option<VerdictCache> {
        private_dir(dir)?;
        let cache = VerdictCache {
            path: dir.join(FILE_NAME),
            machine: machine_fingerprint()?,
            sends_hints,
            held: Mutex::new(Vec::new()),
            forgotten: AtomicU64::new(0),
        };
        *cache.held() = cache.read();
        Some(cache)
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Vec<UsableBefore>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The hints for a new helper.
    pub fn hints(&self) -> Vec<UsableBefore> {
        if self.sends_hints {
            self.held().clone()
        } else {
            Vec::new()
        }
    }

    /// Keeps the usable verdicts (with a fingerprint) of an `Info` reply in place of the held
    /// ones, rewriting the file when that changes it.
    pub fn learn(&self, info: &HelperInfo) {
        let usable: Vec<UsableBefore> = info
            .backends
            .iter()
            .filter(|b| b.usable)
            .filter_map(|b| {
                let fingerprint = b.fingerprint.clone()?;
                // One line each, in a file of lines.
                (!fingerprint.contains('\n')).then_some(UsableBefore {
                    backend: b.backend,
                    fingerprint,
                })
            })
            .collect();
        self.replace(usable);
    }

    /// Drops every entry after a backend failed to build a command's confinement (the reply
    /// does not say which backend; a dropped entry only costs the next helper a probe).
    pub fn forget(&self) {
        self.forgotten.fetch_add(1, Ordering::Relaxed);
        self.replace(Vec::new());
    }

    /// How many times the entries were dropped so far: an `Info` answered before a drop is
    /// older than the failure that caused it, and is not learnt.
    pub fn times_forgotten(&self) -> u64 {
        self.forgotten.load(Ordering::Relaxed)
    }

    fn replace(&self, entries: Vec<UsableBefore>) {
        let mut held = self.held();
        if *held != entries {
            *held = entries;
            // A cache that cannot be written only costs the next helper a probe.
            let _ = self.write(&held);
        }
    }

    /// The entries the file holds under this machine's fingerprint; nothing when the file is
    /// missing, not this user's own, writable by others, too large or not ours.
    fn read(&self) -> Vec<UsableBefore> {
        let Ok(mut file) = File::options()
            .read(true)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
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
        if lines.next() != Some(HEADER)
            || lines.next().and_then(|l| l.strip_prefix(MACHINE)) != Some(self.machine.as_str())
        {
            return Vec::new();
        }
        lines
            .filter_map(|line| {
                let (name, fingerprint) = line.strip_prefix(USABLE)?.split_once(' ')?;
                let backend = [Backend::Bwrap, Backend::Landlock, Backend::Namespaces]
                    .into_iter()
                    .find(|b| b.as_str() == name)?;
                Some(UsableBefore {
                    backend,
                    fingerprint: fingerprint.to_owned(),
                })
            })
            .collect()
    }

    /// Replaces the file with `entries`: written to a new file beside it, then renamed over
    /// it, so a reader sees the old file or the new one.
    fn write(&self, entries: &[UsableBefore]) -> std::io::Result<()> {
        let mut text = format!("{HEADER}\n{MACHINE}{}\n", self.machine);
        for entry in entries {
            text.push_str(&format!(
                "{USABLE}{} {}\n",
                entry.backend.as_str(),
                entry.fingerprint
            ));
        }
        let temp = self
            .path
            .with_file_name(format!("{FILE_NAME}.{}.new", std::process::id()));
        let _ = std::fs::remove_file(&temp);
        let mut file = File::options()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
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

/// The cache directory for an agentd whose environment said `xdg_cache` and `home`.
pub fn dir(xdg_cache: Option<&Path>, home: Option<&Path>) -> Option<PathBuf> {
    match xdg_cache.filter(|p| p.is_absolute()) {
        Some(base) => Some(base.join("agentd")),
        None => home
            .filter(|p| p.is_absolute())
            .map(|h| h.join(".cache").join("agentd")),
    }
}

/// Makes `dir` (0700) if it is missing; it must then be a real directory of this user that
/// nobody else can enter.
fn private_dir(dir: &Path) -> Option<()> {
    if std::fs::symlink_metadata(dir).is_err() {
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir);
    }
    let meta = std::fs::symlink_metadata(dir).ok()?;
    (meta.is_dir() && meta.uid() == nix::unistd::geteuid().as_raw() && meta.mode() & OTHERS == 0)
        .then_some(())
}

/// What every verdict depends on that agentd sees itself, as one line: the boot, this user
/// (whom an embedded helper runs as) and the user-namespace sysctls.
fn machine_fingerprint() -> Option<String> {
    let boot = std::fs::read_to_string(BOOT_ID).ok()?;
    let sysctls: Vec<String> = USERNS_SYSCTLS
        .iter()
        .map(|p| std::fs::read_to_string(p).map_or_else(|_| "-".into(), |v| v.trim().to_owned()))
        .collect();
    let line = format!(
        "boot={} uid={}:{} userns={}",
        boot.trim(),
        nix::unistd::geteuid(),
        nix::unistd::getegid(),
        sysctls.join(",")
    );
    (!line.contains('\n')).then_some(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use confine_protocol::{BackendReport, Grant, Mode, Network};
    use std::os::unix::fs::PermissionsExt;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("agentd-verdicts-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn report(backend: Backend, usable: bool, fingerprint: Option<&str>) -> BackendReport {
        BackendReport {
            backend,
            usable,
            detail: String::new(),
            layers: Vec::new(),
            fingerprint: fingerprint.map(str::to_owned),
        }
    }

    fn info(backends: Vec<BackendReport>) -> HelperInfo {
        HelperInfo {
            software: "confine-helper".into(),
            pid: 1,
            backends,
            landlock_abi: Some(7),
            grant: Grant {
                max_mode: Mode::WorkspaceWrite,
                network: Network::Deny,
                sources: Vec::new(),
                broken: None,
            },
        }
    }

    fn hint(backend: Backend, fingerprint: &str) -> UsableBefore {
        UsableBefore {
            backend,
            fingerprint: fingerprint.into(),
        }
    }

    #[test]
    fn only_usable_verdicts_with_a_fingerprint_are_kept_for_the_next_agentd() {
        let dir = scratch("kept");
        let first = VerdictCache::open(&dir, true).unwrap();
        assert!(first.hints().is_empty());
        first.learn(&info(vec![
            report(Backend::Bwrap, true, Some("fp-b")),
            report(Backend::Landlock, false, Some("fp-l")),
            report(Backend::Seatbelt, true, None),
            report(Backend::Namespaces, true, Some("fp-n")),
        ]));
        let meta = std::fs::metadata(dir.join(FILE_NAME)).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(
            std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        let second = VerdictCache::open(&dir, true).unwrap();
        assert_eq!(
            second.hints(),
            vec![
                hint(Backend::Bwrap, "fp-b"),
                hint(Backend::Namespaces, "fp-n")
            ]
        );
        // A diagnosis probes afresh: it sends no hint, though it reads and rewrites the file.
        assert!(VerdictCache::open(&dir, false).unwrap().hints().is_empty());
        // A backend that failed to build a command's confinement drops the entries.
        second.forget();
        assert!(VerdictCache::open(&dir, true).unwrap().hints().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn entries_under_another_machine_fingerprint_are_not_sent() {
        let dir = scratch("machine");
        let cache = VerdictCache::open(&dir, true).unwrap();
        cache.learn(&info(vec![report(Backend::Landlock, true, Some("fp-l"))]));
        let text = std::fs::read_to_string(dir.join(FILE_NAME)).unwrap();
        // Control: the file as written is read back.
        assert_eq!(VerdictCache::open(&dir, true).unwrap().hints().len(), 1);
        std::fs::write(dir.join(FILE_NAME), text.replace(" userns=", " userns=9")).unwrap();
        assert!(VerdictCache::open(&dir, true).unwrap().hints().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_others_can_write_a_shared_directory_or_a_symlink_is_ignored() {
        let dir = scratch("perms");
        let first = VerdictCache::open(&dir, true).unwrap();
        first.learn(&info(vec![report(Backend::Landlock, true, Some("fp-l"))]));
        let file = dir.join(FILE_NAME);
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o622)).unwrap();
        assert!(VerdictCache::open(&dir, true).unwrap().hints().is_empty());
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(VerdictCache::open(&dir, true).unwrap().hints().len(), 1);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(VerdictCache::open(&dir, true).is_none());
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        // A symlink in place of the file is not followed.
        std::fs::remove_file(&file).unwrap();
        let elsewhere = scratch("elsewhere");
        VerdictCache::open(&elsewhere, true)
            .unwrap()
            .learn(&info(vec![report(Backend::Landlock, true, Some("fp-l"))]));
        std::os::unix::fs::symlink(elsewhere.join(FILE_NAME), &file).unwrap();
        assert!(VerdictCache::open(&dir, true).unwrap().hints().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::remove_dir_all(&elsewhere).unwrap();
    }

    #[test]
    fn the_directory_follows_xdg_then_the_home() {
        assert_eq!(
            dir(Some(Path::new("/c")), Some(Path::new("/h"))),
            Some(PathBuf::from("/c/agentd"))
        );
        assert_eq!(
            dir(Some(Path::new("rel")), Some(Path::new("/h"))),
            Some(PathBuf::from("/h/.cache/agentd"))
        );
        assert_eq!(dir(None, None), None);
    }
}
