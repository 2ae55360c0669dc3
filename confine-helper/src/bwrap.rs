//! The bubblewrap backend: the exact bwrap argument vector for one command.
//!
//! The order of mounts is the security property: `/` read-only first, fresh `/dev` and `/proc`,
//! the command's `/tmp` in workspace-write (a private directory, or the session's), what of the
//! host's `/tmp` the command must see (read-only), the writable roots, the pinned directories, then the protected paths, then the masks and the
//! denied reads (an empty read-only tmpfs on a directory, an empty read-only file on a file) —
//! later mounts win, so nothing writable can shadow a protected path or a denied read. Every
//! mount of a host path is made from a descriptor the helper opened and
//! checked (`--bind-fd`, `--ro-bind-fd`), never from a name bwrap would resolve again; bwrap
//! also checks that what it mounted at each destination is that descriptor's file. Every string
//! from the request goes after `--` or as the value of an option, never where bwrap would parse
//! it as an option.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Where bwrap is looked for. Only system locations: a bwrap the user could replace would
/// decide what the sandbox is.
pub(crate) const SEARCH: [&str; 3] = ["/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"];

/// The first installed bwrap that only root can change (owned by root, no group or other
/// write bit, in a directory with the same properties), if any: a bwrap someone else could
/// replace would decide what the sandbox is.
pub(crate) fn find() -> Option<PathBuf> {
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

/// A descriptor number (as the command sees it) and the path it is bound on.
pub(crate) type FdBind = (i32, PathBuf);

/// What varies between bwrap invocations.
#[derive(Debug)]
pub(crate) struct Args<'a> {
    pub(crate) network_allowed: bool,
    /// The command's temp directory, bound read-write on /tmp (workspace-write).
    pub(crate) tmp: Option<i32>,
    /// The descriptor of `/`, bound read-only.
    pub(crate) root_fd: i32,
    /// What the command must see that its `/tmp` would hide (its working directory, the
    /// request's visible paths), bound read-only over it.
    pub(crate) shown: &'a [FdBind],
    pub(crate) writable: &'a [FdBind],
    /// Directories on the way to protected paths, bound read-write onto themselves.
    pub(crate) pinned: &'a [FdBind],
    pub(crate) read_only: &'a [FdBind],
    /// Denied directories, each covered by an empty read-only tmpfs.
    pub(crate) denied_dirs: &'a [PathBuf],
    /// Denied files, each covered by an empty read-only file bwrap makes from the descriptor.
    pub(crate) denied_files: &'a [FdBind],
    pub(crate) masked: &'a [PathBuf],
    /// The descriptor number, in the command, that holds the seccomp program.
    pub(crate) seccomp_fd: i32,
    pub(crate) cwd: &'a [u8],
    /// The command's environment, set inside the sandbox; bwrap's own is empty.
    pub(crate) env: &'a [confine_protocol::EnvVar],
    pub(crate) argv: &'a [Vec<u8>],
}

/// The complete argument vector, `bwrap` first.
pub(crate) fn argv(bwrap: &Path, a: &Args<'_>) -> Vec<Vec<u8>> {
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
    flags.extend(["--cap-drop", "ALL"]);
    out.extend(flags.iter().map(|f| f.as_bytes().to_vec()));
    let fd_bind = |out: &mut Vec<Vec<u8>>, flag: &str, (fd, dest): (i32, &Path)| {
        out.extend([
            flag.as_bytes().to_vec(),
            fd.to_string().into_bytes(),
            path(dest),
        ]);
    };
    fd_bind(&mut out, "--ro-bind-fd", (a.root_fd, Path::new("/")));
    out.extend(["--dev", "/dev", "--proc", "/proc"].map(|f| f.as_bytes().to_vec()));
    if let Some(fd) = a.tmp {
        fd_bind(&mut out, "--bind-fd", (fd, Path::new("/tmp")));
    }
    for (fd, dest) in a.shown {
        fd_bind(&mut out, "--ro-bind-fd", (*fd, dest));
    }
    for (fd, dest) in a.writable.iter().chain(a.pinned) {
        fd_bind(&mut out, "--bind-fd", (*fd, dest));
    }
    for (fd, dest) in a.read_only {
        fd_bind(&mut out, "--ro-bind-fd", (*fd, dest));
    }
    for m in a.masked {
        out.extend([b"--tmpfs".to_vec(), path(m)]);
    }
    for d in a.denied_dirs {
        out.extend([
            b"--tmpfs".to_vec(),
            path(d),
            b"--remount-ro".to_vec(),
            path(d),
        ]);
    }
    for (fd, dest) in a.denied_files {
        fd_bind(&mut out, "--ro-bind-data", (*fd, dest));
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
        let argv = argv(
            Path::new("/usr/bin/bwrap"),
            &Args {
                network_allowed: false,
                tmp: None,
                root_fd: 4,
                shown: &[],
                writable: &[],
                pinned: &[],
                read_only: &[],
                denied_dirs: &[],
                denied_files: &[],
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
             --ro-bind-fd 4 / --dev /dev --proc /proc --chdir /work --seccomp 3 --clearenv \
             --setenv PATH /usr/bin:/bin -- --bind -c"
        );
    }

    #[test]
    fn what_tmp_hides_is_shown_before_the_roots_and_protected_paths_after_them_and_denials_last() {
        let argv = argv(
            Path::new("/usr/bin/bwrap"),
            &Args {
                network_allowed: true,
                tmp: Some(9),
                root_fd: 4,
                shown: &[(11, PathBuf::from("/tmp/checkout/tool.py"))],
                writable: &[(5, PathBuf::from("/w"))],
                pinned: &[(6, PathBuf::from("/w/deps"))],
                read_only: &[
                    (7, PathBuf::from("/w/.git")),
                    (8, PathBuf::from("/w/deps/m/.git")),
                ],
                denied_dirs: &[PathBuf::from("/home/u/.ssh")],
                denied_files: &[(10, PathBuf::from("/w/.env"))],
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
                "--ro-bind-fd 4 / --dev /dev --proc /proc --bind-fd 9 /tmp \
                 --ro-bind-fd 11 /tmp/checkout/tool.py --bind-fd 5 /w --bind-fd 6 /w/deps --ro-bind-fd 7 /w/.git --ro-bind-fd 8 /w/deps/m/.git \
                 --tmpfs /run/confine --tmpfs /home/u/.ssh --remount-ro /home/u/.ssh \
                 --ro-bind-data 10 /w/.env --chdir /w"
            ),
            "{t}"
        );
        assert!(t.ends_with("-- true"));
    }
}
