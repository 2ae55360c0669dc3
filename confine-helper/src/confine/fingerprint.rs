//! What a backend's verdict depends on that only the helper knows (RFC 0017, "The probe
//! verdict cache"): its build and running binary, its user and capabilities, the namespaces it
//! runs in, the Landlock ABI and, for bwrap, the bwrap binary itself.
//!
//! agentd keeps the usable verdicts, each under the fingerprint an `Info` reply carried and the
//! parts of the machine it can see itself (the boot, the user-namespace sysctls), and sends
//! them back as hints. A hint only lets the helper skip a backend's functional probe, and only
//! when its fingerprint is this one; the command still runs under the backend's full
//! confinement. So a stale or forged hint can only make a command fail at execution as a
//! runner failure, which drops it: it never makes a command run less confined, and as there are
//! no negative hints, none can move `auto` away from bwrap.

use std::path::Path;

use confine_protocol::Backend;

/// The namespaces a probe's outcome depends on.
#[cfg(target_os = "linux")]
const NAMESPACES: [&str; 4] = ["user", "mnt", "pid", "net"];

/// The fingerprint of `backend` for this helper, whose bwrap is `bwrap` and whose kernel
/// offers Landlock ABI `landlock_abi`; `None` where a verdict is not worth keeping (no bwrap
/// to name, or on macOS, where Seatbelt is taken unprobed).
pub(crate) fn of(
    backend: Backend,
    bwrap: Option<&Path>,
    landlock_abi: u32,
    holds_caps: bool,
) -> Option<String> {
    let common = common(landlock_abi, holds_caps)?;
    match backend {
        Backend::Landlock | Backend::Namespaces => Some(common),
        Backend::Bwrap => Some(format!("{common} bwrap={}", identity(bwrap?)?)),
        Backend::None | Backend::Seatbelt => None,
    }
}

/// On macOS Seatbelt is taken unprobed, so there is nothing to keep.
#[cfg(target_os = "macos")]
fn common(landlock_abi: u32, holds_caps: bool) -> Option<String> {
    let _ = (landlock_abi, holds_caps);
    None
}

/// What every backend's verdict depends on, as one line. The binary is the running one (the
/// link's target is this process's own executable, whatever is at its path now).
#[cfg(target_os = "linux")]
fn common(landlock_abi: u32, holds_caps: bool) -> Option<String> {
    let exe = file_identity(&std::fs::metadata("/proc/self/exe").ok()?);
    let namespaces: Vec<String> = NAMESPACES
        .iter()
        .map(|ns| {
            std::fs::read_link(format!("/proc/self/ns/{ns}"))
                .map(|l| l.display().to_string())
                .unwrap_or_else(|_| "-".into())
        })
        .collect();
    let line = format!(
        "helper={}/{}/{:016x} exe={exe} uid={}:{} caps={holds_caps} ns={} landlock={landlock_abi}",
        env!("CARGO_PKG_VERSION"),
        confine_protocol::PROTOCOL_VERSION,
        confine_protocol::SCHEMA_HASH,
        nix::unistd::geteuid(),
        nix::unistd::getegid(),
        namespaces.join(","),
    );
    // One line, kept in a file of lines: nothing above could hold a newline, but never trust it.
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
    use std::os::unix::fs::MetadataExt;
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
    #[cfg(target_os = "linux")]
    use super::*;

    // Fingerprints exist only where backends are probed: Linux.
    #[cfg(target_os = "linux")]
    #[test]
    fn another_bwrap_or_another_abi_is_another_fingerprint() {
        let sh = of(Backend::Bwrap, Some(Path::new("/bin/sh")), 7, false).unwrap();
        assert_eq!(
            of(Backend::Bwrap, Some(Path::new("/bin/sh")), 7, false).as_deref(),
            Some(sh.as_str())
        );
        assert_ne!(
            of(Backend::Bwrap, Some(Path::new("/bin/ls")), 7, false),
            Some(sh.clone())
        );
        assert_ne!(
            of(Backend::Bwrap, Some(Path::new("/bin/sh")), 6, false),
            Some(sh.clone())
        );
        assert_ne!(
            of(Backend::Landlock, Some(Path::new("/bin/sh")), 7, false),
            Some(sh)
        );
        assert_eq!(of(Backend::Bwrap, None, 7, false), None);
    }
}
