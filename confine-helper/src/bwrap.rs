//! The bubblewrap backend: the exact bwrap argument vector for one command.
//!
//! The order of mounts is the security property: `/` read-only first, fresh `/dev` and `/proc`,
//! a fresh `/tmp` (workspace-write), the writable roots, then the protected subpaths, then the
//! masks — later mounts win, so nothing writable can shadow a protected path. Every string from
//! the request goes after `--` or as the value of an option, never where bwrap would parse it as
//! an option.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::confine::ProtectBinds;

/// Where bwrap is looked for. Only system locations: a bwrap the user could replace would
/// decide what the sandbox is.
pub const SEARCH: [&str; 3] = ["/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"];

/// The first installed bwrap that only root can change (owned by root, no group or other
/// write bit, in a directory with the same properties), if any: a bwrap someone else could
/// replace would decide what the sandbox is.
pub fn find() -> Option<PathBuf> {
    SEARCH
        .iter()
        .map(PathBuf::from)
        .find(|p| root_controlled(p))
}

fn root_controlled(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(real) = std::fs::canonicalize(path) else {
        return false;
    };
    let locked =
        |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.uid() == 0 && m.mode() & 0o022 == 0);
    real.is_file() && locked(&real) && real.parent().is_some_and(locked)
}

/// What varies between bwrap invocations.
#[derive(Debug)]
pub struct Args<'a> {
    pub network_allowed: bool,
    /// A fresh tmpfs on /tmp (workspace-write).
    pub tmpfs_tmp: bool,
    pub writable: &'a [PathBuf],
    pub binds: &'a ProtectBinds,
    pub masked: &'a [PathBuf],
    /// The descriptor number, in the command, that holds the seccomp program.
    pub seccomp_fd: i32,
    pub cwd: &'a [u8],
    /// The command's environment, set inside the sandbox; bwrap's own is empty.
    pub env: &'a [confine_protocol::EnvVar],
    pub argv: &'a [Vec<u8>],
}

/// The complete argument vector, `bwrap` first.
pub fn argv(bwrap: &Path, a: &Args<'_>) -> Vec<Vec<u8>> {
    let path = |p: &Path| p.as_os_str().as_bytes().to_vec();
    let mut out: Vec<Vec<u8>> = vec![path(bwrap)];
    let mut flags = vec![
        "--new-session",
        "--die-with-parent",
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
    ];
    if !a.network_allowed {
        flags.push("--unshare-net");
    }
    flags.extend([
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
    ]);
    out.extend(flags.iter().map(|f| f.as_bytes().to_vec()));
    if a.tmpfs_tmp {
        out.extend([b"--tmpfs".to_vec(), b"/tmp".to_vec()]);
    }
    for root in a.writable {
        out.extend([b"--bind".to_vec(), path(root), path(root)]);
    }
    for dir in &a.binds.pinned {
        out.extend([b"--bind".to_vec(), path(dir), path(dir)]);
    }
    for p in &a.binds.read_only {
        out.extend([b"--ro-bind".to_vec(), path(p), path(p)]);
    }
    for m in a.masked {
        out.extend([b"--tmpfs".to_vec(), path(m)]);
    }
    out.extend([b"--chdir".to_vec(), a.cwd.to_vec()]);
    out.extend([b"--seccomp".to_vec(), a.seccomp_fd.to_string().into_bytes()]);
    out.push(b"--clearenv".to_vec());
    for var in a.env {
        out.extend([b"--setenv".to_vec(), var.name.clone(), var.value.clone()]);
    }
    out.push(b"--".to_vec());
    out.extend(a.argv.iter().cloned());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(argv: &[Vec<u8>]) -> String {
        argv.iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn read_only_with_network_denied_has_the_exact_argv() {
        let binds = ProtectBinds::default();
        let argv = argv(
            Path::new("/usr/bin/bwrap"),
            &Args {
                network_allowed: false,
                tmpfs_tmp: false,
                writable: &[],
                binds: &binds,
                masked: &[],
                seccomp_fd: 3,
                cwd: b"/work",
                env: &[confine_protocol::EnvVar {
                    name: b"PATH".to_vec(),
                    value: b"/usr/bin:/bin".to_vec(),
                }],
                argv: &[b"--bind".to_vec(), b"-c".to_vec()],
            },
        );
        assert_eq!(
            text(&argv),
            "/usr/bin/bwrap --new-session --die-with-parent --unshare-user --unshare-pid \
             --unshare-ipc --unshare-uts --unshare-cgroup-try --unshare-net --cap-drop ALL \
             --ro-bind / / --dev /dev --proc /proc --chdir /work --seccomp 3 --clearenv \
             --setenv PATH /usr/bin:/bin -- --bind -c"
        );
    }

    #[test]
    fn protected_paths_are_mounted_after_writable_roots_and_masks_last() {
        let binds = ProtectBinds {
            pinned: vec![PathBuf::from("/w/.git")],
            read_only: vec![PathBuf::from("/w/.git/hooks"), PathBuf::from("/w/.agentd")],
        };
        let argv = argv(
            Path::new("/usr/bin/bwrap"),
            &Args {
                network_allowed: true,
                tmpfs_tmp: true,
                writable: &[PathBuf::from("/w")],
                binds: &binds,
                masked: &[PathBuf::from("/run/confine")],
                seccomp_fd: 3,
                cwd: b"/w",
                env: &[],
                argv: &[b"true".to_vec()],
            },
        );
        let t = text(&argv);
        assert!(!t.contains("--unshare-net"));
        assert!(
            t.contains(
                "--tmpfs /tmp --bind /w /w --bind /w/.git /w/.git --ro-bind /w/.git/hooks \
             /w/.git/hooks --ro-bind /w/.agentd /w/.agentd --tmpfs /run/confine --chdir /w"
            ),
            "{t}"
        );
        assert!(t.ends_with("-- true"));
    }
}
