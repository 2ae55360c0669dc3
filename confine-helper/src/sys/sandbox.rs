//! The namespace backend's sandbox, built by the command's shim, which is born in it (RFC 0023,
//! step 5): the helper starts the shim in new user, mount, pid, IPC and UTS
//! namespaces (and a network namespace unless the network is allowed), so the shim is the
//! first process of its pid namespace, and no program runs between the helper and the
//! command. The shim then, before it starts the command:
//! - maps its own user and group into its user namespace and caps its tasks there;
//! - copies the tree of every mount it binds, each from the host path the helper opened and
//!   checked, and keeps a copy only if it is that descriptor's file (a path swapped since the
//!   check fails the command);
//! - copies the whole tree of mounts read-only (`nosuid`, `nodev`), makes the copy its root
//!   (`pivot_root`, the host's root detached), and mounts on it in the order of the bwrap
//!   backend's arguments, later covering earlier: a new `/proc` with its kernel knobs read-only,
//!   a `/dev` of six device nodes, the command's `/tmp`, then the binds (what `/tmp` hides, the
//!   writable roots, the pinned directories, the protected paths), then the covers (an empty
//!   tmpfs on each masked path, an empty read-only tmpfs on each denied directory, an empty
//!   read-only file on each denied file). Every place is reached one component at a time with
//!   no link followed; a missing one under a mount of the sandbox's own (its `/tmp`) is made,
//!   as bwrap makes it;
//! - brings up the loopback interface of its own network namespace, and starts the proxy
//!   bridge as its child under the command's layers.
//!
//! The command is then the shim's clone as under Landlock, and applies the Landlock ruleset and
//! the seccomp filter to itself. Everything is built before the fork; the steps are system
//! calls on it and on stack arrays.

use std::ffi::{CStr, CString, c_int};

use nix::errno::Errno;
use nix::libc;

use super::call::{self, SysResult};
use super::exec::apply_layers;
use super::layout::{FD_FIRST_PASSED, MAX_PASSED_FDS, fd_at};
use super::mount_call::{
    ATTR_NODEV, ATTR_NOEXEC, ATTR_NOSUID, ATTR_RDONLY, attach_at, attach_on, clone_tree,
    create_file, detach, fchdir, identity, loopback_up, mkdirat, new_mount, pivot_here, set_attr,
    symlinkat,
};
use super::user_namespace::{UserNamespace, settle};

/// The namespaces the shim is born in, besides the network's.
const NAMESPACES: c_int = libc::CLONE_NEWUSER
    | libc::CLONE_NEWNS
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS;
/// A read-only bind: no writes, no set-id programs, no devices.
const READ_ONLY: u64 = ATTR_RDONLY | ATTR_NOSUID | ATTR_NODEV;
/// A writable bind: no set-id programs, no devices.
const WRITABLE: u64 = ATTR_NOSUID | ATTR_NODEV;
/// The device nodes of the sandbox's `/dev`, as bwrap's `--dev` gives them.
const DEVICES: [(&CStr, &CStr); 6] = [
    (c"/dev/null", c"null"),
    (c"/dev/zero", c"zero"),
    (c"/dev/full", c"full"),
    (c"/dev/random", c"random"),
    (c"/dev/urandom", c"urandom"),
    (c"/dev/tty", c"tty"),
];
/// The links of the sandbox's `/dev`, as bwrap makes them.
const DEVICE_LINKS: [(&CStr, &CStr); 6] = [
    (c"/proc/self/fd/0", c"stdin"),
    (c"/proc/self/fd/1", c"stdout"),
    (c"/proc/self/fd/2", c"stderr"),
    (c"/proc/self/fd", c"fd"),
    (c"/proc/kcore", c"core"),
    (c"pts/ptmx", c"ptmx"),
];
/// What of a new `/proc` is bound read-only over itself, as bwrap does.
const PROC_KNOBS: [&CStr; 4] = [
    c"/proc/sys",
    c"/proc/sysrq-trigger",
    c"/proc/irq",
    c"/proc/bus",
];
/// The longest name of one path component.
const NAME_MAX: usize = 255;

/// One tree bound into the sandbox.
#[derive(Debug)]
pub(crate) struct Bind {
    /// The descriptor the helper opened and checked, as an index into the passed descriptors.
    pub(crate) source: usize,
    /// The host path it was opened by.
    pub(crate) from: CString,
    /// Where it is bound in the sandbox.
    pub(crate) to: CString,
    pub(crate) writable: bool,
}

/// What covers a path of the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cover {
    /// An empty tmpfs, writable (a masked path) or read-only (a denied directory).
    Tmpfs { read_only: bool },
    /// An empty read-only file (a denied file).
    EmptyFile,
}

/// The proxy bridge of a sandbox that has one: the control socket (an index into the passed
/// descriptors), and what serves it in the bridge's process, which gets the socket at 3 and
/// writes one byte on 4 once it listens.
#[derive(Debug)]
pub(crate) struct Bridge {
    pub(crate) control: usize,
    pub(crate) serve: fn() -> c_int,
}

/// Everything the shim builds its sandbox from.
#[derive(Debug)]
pub(crate) struct Sandbox {
    /// The sandbox has a network namespace of its own (the network is not allowed).
    pub(crate) own_network: bool,
    /// The shim's user namespace: its maps, and its process cap (a helper that is not root).
    pub(crate) user: UserNamespace,
    /// In order, after `/proc` and `/dev`: the command's `/tmp` first, if it has one.
    pub(crate) binds: Vec<Bind>,
    /// In order, after the binds.
    pub(crate) covers: Vec<(CString, Cover)>,
    pub(crate) bridge: Option<Bridge>,
    /// The host's root (an index into the passed descriptors), from which the shim looks up
    /// the listed Unix sockets' paths.
    pub(crate) host_root: usize,
}

impl Sandbox {
    /// The namespaces the shim is born in.
    pub(super) fn namespaces(&self) -> c_int {
        NAMESPACES
            | if self.own_network {
                libc::CLONE_NEWNET
            } else {
                0
            }
    }
}

/// Builds the sandbox around the calling shim (see the module's comment), the bridge started
/// when it has one.
pub(super) fn enter(s: &Sandbox, layers: &Layers<'_>) -> SysResult<()> {
    settle(&s.user)?;
    super::mount_call::unshare(libc::CLONE_NEWCGROUP)?;
    let mut sources = [-1 as c_int; MAX_PASSED_FDS];
    // Every bind has a passed descriptor, so none is left out below; were one, nothing runs.
    if s.binds.len() > sources.len() {
        return Err(Errno::E2BIG);
    }
    for (slot, bind) in sources.iter_mut().zip(&s.binds) {
        *slot = checked_copy(bind)?;
    }
    let mut nodes = [-1 as c_int; DEVICES.len()];
    for (slot, (host, _)) in nodes.iter_mut().zip(DEVICES) {
        *slot = clone_tree(libc::AT_FDCWD, host, false)?;
    }
    let root = clone_tree(libc::AT_FDCWD, c"/", true)?;
    set_attr(root, READ_ONLY)?;
    attach_at(root, c"/")?;
    fchdir(root)?;
    pivot_here()?;
    call::chdir(c"/")?;
    let _ = call::close(root);
    let mut empties = [-1 as c_int; MAX_PASSED_FDS];
    empty_files(s, &mut empties)?;
    mount_proc()?;
    mount_dev(&nodes)?;
    for (bind, source) in s.binds.iter().zip(sources) {
        set_attr(source, if bind.writable { WRITABLE } else { READ_ONLY })?;
        let (_, _, kind) = identity(source)?;
        let target = reach(&bind.to, kind == libc::S_IFDIR)?;
        attach_on(source, target)?;
        let _ = call::close(target);
        let _ = call::close(source);
    }
    let mut empty = empties.iter();
    for (path, cover) in &s.covers {
        let (mount, is_dir) = match cover {
            Cover::Tmpfs { read_only } => {
                let tmpfs = new_mount(c"tmpfs", &[(c"mode", c"0755")])?;
                set_attr(tmpfs, if *read_only { READ_ONLY } else { WRITABLE })?;
                (tmpfs, true)
            }
            Cover::EmptyFile => (*empty.next().ok_or(Errno::EINVAL)?, false),
        };
        let target = reach(path, is_dir)?;
        attach_on(mount, target)?;
        let _ = call::close(target);
        let _ = call::close(mount);
    }
    if s.own_network {
        loopback_up()?;
    }
    match &s.bridge {
        Some(bridge) => start_bridge(bridge, layers),
        None => Ok(()),
    }
}

/// A copy of the tree at `bind.from`, if it is the file the helper opened (else `ESTALE`: the
/// path was swapped since the helper checked it).
fn checked_copy(bind: &Bind) -> SysResult<c_int> {
    let opened = fd_at(FD_FIRST_PASSED, bind.source).ok_or(Errno::EBADF)?;
    let copy = clone_tree(libc::AT_FDCWD, &bind.from, true)?;
    if identity(copy)? == identity(opened)? {
        Ok(copy)
    } else {
        let _ = call::close(copy);
        Err(Errno::ESTALE)
    }
}

/// One empty read-only file per denied file, copied from a tmpfs that is attached at `/dev`
/// only while they are copied (a copy is made of an attached mount) and then detached.
fn empty_files(s: &Sandbox, empties: &mut [c_int]) -> SysResult<()> {
    let count = s
        .covers
        .iter()
        .filter(|(_, c)| *c == Cover::EmptyFile)
        .count();
    if count == 0 {
        return Ok(());
    }
    let tmpfs = new_mount(c"tmpfs", &[(c"mode", c"0555")])?;
    create_file(tmpfs, c"empty", 0o444)?;
    set_attr(tmpfs, READ_ONLY | ATTR_NOEXEC)?;
    attach_at(tmpfs, c"/dev")?;
    let _ = call::close(tmpfs);
    for slot in empties.iter_mut().take(count) {
        *slot = clone_tree(libc::AT_FDCWD, c"/dev/empty", false)?;
    }
    detach(c"/dev")
}

/// A new `/proc` of the shim's pid namespace, its kernel knobs bound read-only over themselves.
fn mount_proc() -> SysResult<()> {
    let proc = new_mount(c"proc", &[])?;
    set_attr(proc, ATTR_NOSUID | ATTR_NODEV | ATTR_NOEXEC)?;
    attach_at(proc, c"/proc")?;
    let _ = call::close(proc);
    for knob in PROC_KNOBS {
        let copy = match clone_tree(libc::AT_FDCWD, knob, true) {
            Ok(copy) => copy,
            Err(Errno::ENOENT) => continue,
            Err(e) => return Err(e),
        };
        set_attr(copy, READ_ONLY)?;
        attach_at(copy, knob)?;
        let _ = call::close(copy);
    }
    Ok(())
}

/// A `/dev` tmpfs of mode 0755 (a sticky one would refuse `O_CREAT` on the nodes, which are
/// root's) with the six device nodes bound from the host's, bwrap's links, `shm` and a new
/// `devpts` instance.
fn mount_dev(nodes: &[c_int]) -> SysResult<()> {
    let dev = new_mount(c"tmpfs", &[(c"mode", c"0755")])?;
    set_attr(dev, ATTR_NOSUID)?;
    for (_, name) in DEVICES {
        create_file(dev, name, 0o666)?;
    }
    for (target, name) in DEVICE_LINKS {
        symlinkat(target, dev, name)?;
    }
    mkdirat(dev, c"shm", 0o755)?;
    mkdirat(dev, c"pts", 0o755)?;
    attach_at(dev, c"/dev")?;
    let _ = call::close(dev);
    for (node, (host, _)) in nodes.iter().zip(DEVICES) {
        attach_at(*node, host)?;
        let _ = call::close(*node);
    }
    let pts = new_mount(c"devpts", &[(c"ptmxmode", c"0666"), (c"mode", c"620")])?;
    set_attr(pts, ATTR_NOSUID | ATTR_NOEXEC)?;
    attach_at(pts, c"/dev/pts")?;
    call::close(pts)
}

/// The object at the absolute `path` of the sandbox, reached one component at a time with no
/// link followed (each opened `O_PATH | O_NOFOLLOW`, a link refused with `ELOOP` and anything but
/// a directory on the way with `ENOTDIR`), and made when missing: the directories on the way,
/// and the last as a directory when `is_dir`, else as an empty file, as bwrap makes a bind's
/// destination. Making fails where the sandbox is read-only, so only the command's own `/tmp`
/// and tmpfs get anything made.
fn reach(path: &CStr, is_dir: bool) -> SysResult<c_int> {
    let components = path
        .to_bytes()
        .split(|b| *b == b'/')
        .filter(|c| !c.is_empty());
    let last = components.clone().count();
    let mut at = call::open(c"/", libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)?;
    for (i, component) in components.enumerate() {
        let next = component_name(component)
            .and_then(|name| open_or_make(at, &name, i + 1 < last || is_dir));
        let _ = call::close(at);
        at = next?;
    }
    Ok(at)
}

/// One path component as a C string on the stack; `.`, `..` and over-long names refused.
fn component_name(component: &[u8]) -> SysResult<[u8; NAME_MAX + 1]> {
    let mut name = [0u8; NAME_MAX + 1];
    if component == b"." || component == b".." {
        return Err(Errno::EINVAL);
    }
    name.get_mut(..component.len())
        .filter(|_| component.len() <= NAME_MAX)
        .ok_or(Errno::ENAMETOOLONG)?
        .copy_from_slice(component);
    Ok(name)
}

/// `name` (NUL-terminated in its array) beneath `at`, opened with no link followed and made
/// first if missing; a link is `ELOOP`, and anything but a directory where one is wanted
/// `ENOTDIR`.
fn open_or_make(at: c_int, name: &[u8; NAME_MAX + 1], dir: bool) -> SysResult<c_int> {
    let name = CStr::from_bytes_until_nul(name).map_err(|_| Errno::EINVAL)?;
    let flags = libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let fd = match call::openat(at, name, flags) {
        Err(Errno::ENOENT) => {
            let made = if dir {
                mkdirat(at, name, 0o755)
            } else {
                create_file(at, name, 0o444)
            };
            match made {
                Ok(()) | Err(Errno::EEXIST) => call::openat(at, name, flags)?,
                Err(e) => return Err(e),
            }
        }
        other => other?,
    };
    let kind = identity(fd).map(|(_, _, kind)| kind);
    let refused = match kind {
        Ok(libc::S_IFLNK) => Some(Errno::ELOOP),
        Ok(kind) if dir && kind != libc::S_IFDIR => Some(Errno::ENOTDIR),
        Ok(_) => None,
        Err(e) => Some(e),
    };
    match refused {
        None => Ok(fd),
        Some(e) => {
            let _ = call::close(fd);
            Err(e)
        }
    }
}

/// What the command and the bridge apply to themselves, the shim's descriptors as laid out.
#[derive(Debug, Clone, Copy)]
pub(super) struct Layers<'a> {
    pub(super) ruleset: c_int,
    pub(super) filter: &'a [libc::sock_filter],
}

/// Starts the bridge as the shim's child, under the command's layers, and waits until it
/// listens: the command may use it from its first instruction.
fn start_bridge(bridge: &Bridge, layers: &Layers<'_>) -> SysResult<()> {
    let control = fd_at(FD_FIRST_PASSED, bridge.control).ok_or(Errno::EBADF)?;
    let [ready_rd, ready_wr] = call::pipe2_cloexec()?;
    // SAFETY: the shim is single-threaded; the child applies its layers, keeps two
    // descriptors and runs the bridge, which may allocate as any single-threaded child may.
    let pid = unsafe { call::fork() }?;
    if pid == 0 {
        let layered = call::setsid()
            .and_then(|()| apply_layers(layers.ruleset, layers.filter, true).map_err(|(_, e)| e));
        let code = match layered.and_then(|()| keep_only(&[control, ready_wr])) {
            Ok(()) => (bridge.serve)(),
            Err(_) => 1,
        };
        call::exit(code)
    }
    let _ = call::close(ready_wr);
    let mut byte = [0u8; 1];
    let got = call::read_full(ready_rd, &mut byte);
    let _ = call::close(ready_rd);
    if got == 1 { Ok(()) } else { Err(Errno::ECHILD) }
}

/// `keep` (at most four) moved to 3, 4, … in order, stdio on `/dev/null`, every other
/// descriptor closed: what a process the shim or `enter` starts beside the command holds.
pub(super) fn keep_only(keep: &[c_int]) -> SysResult<()> {
    let kept = c_int::try_from(keep.len()).map_err(|_| Errno::EMFILE)?;
    let park = 3 + kept + 64;
    let mut parked = [-1 as c_int; 4];
    if keep.len() > parked.len() {
        return Err(Errno::EMFILE);
    }
    for (slot, fd) in parked.iter_mut().zip(keep) {
        *slot = call::dup_cloexec_above(*fd, park)?;
    }
    for (to, fd) in (3..).zip(parked.iter().take(keep.len())) {
        call::dup2(*fd, to)?;
    }
    let above = libc::c_uint::try_from(3 + kept).map_err(|_| Errno::EMFILE)?;
    call::close_range(above, libc::c_uint::MAX, 0)?;
    let null = call::open(c"/dev/null", libc::O_RDWR)?;
    for std in 0..3 {
        call::dup2(null, std)?;
    }
    if null > 2 {
        call::close(null)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;

    use super::*;
    use crate::test_support::Scratch;

    fn c(path: &Path) -> CString {
        CString::new(path.as_os_str().as_bytes()).expect("no NUL")
    }

    /// What `reach` made of `path`: the kind of object it opened, or its error.
    fn reached(path: &Path, is_dir: bool) -> Result<libc::mode_t, Errno> {
        let fd = reach(&c(path), is_dir)?;
        let kind = identity(fd).map(|(_, _, kind)| kind);
        let _ = call::close(fd);
        kind
    }

    /// A destination is reached with no link followed, on the way or at its end, and what is
    /// missing is made; the controls reach the same places by their real paths.
    #[test]
    fn a_destination_is_reached_through_no_link_and_made_when_missing() {
        let scratch = Scratch::new("sandbox-reach");
        let real = scratch.0.join("real");
        std::fs::create_dir_all(real.join("dir")).expect("dirs");
        std::fs::write(real.join("file"), b"x").expect("file");
        std::os::unix::fs::symlink(&real, scratch.0.join("link")).expect("link");
        std::os::unix::fs::symlink("/etc/passwd", real.join("to-passwd")).expect("link");

        // Controls: the real paths.
        assert_eq!(reached(&real.join("dir"), true), Ok(libc::S_IFDIR));
        assert_eq!(reached(&real.join("file"), false), Ok(libc::S_IFREG));
        // A link on the way, at the end, or to a file: refused.
        let through = scratch.0.join("link/dir");
        assert_eq!(reached(&through, true), Err(Errno::ELOOP));
        assert_eq!(reached(&scratch.0.join("link"), true), Err(Errno::ELOOP));
        assert_eq!(reached(&real.join("to-passwd"), false), Err(Errno::ELOOP));
        // A file where a directory is wanted, on the way or at the end.
        assert_eq!(reached(&real.join("file/below"), true), Err(Errno::ENOTDIR));
        assert_eq!(reached(&real.join("file"), true), Err(Errno::ENOTDIR));
        // `.` and `..` are never walked.
        assert_eq!(reached(&real.join("../real/dir"), true), Err(Errno::EINVAL));
        // Missing: made, a directory or an empty file, and nothing made through the link.
        assert_eq!(reached(&real.join("new/sub"), true), Ok(libc::S_IFDIR));
        assert!(real.join("new/sub").is_dir());
        assert_eq!(reached(&real.join("new/empty"), false), Ok(libc::S_IFREG));
        assert_eq!(std::fs::read(real.join("new/empty")).expect("made"), b"");
        assert_eq!(
            reached(&scratch.0.join("link/made"), true),
            Err(Errno::ELOOP)
        );
        assert!(
            !real.join("made").exists(),
            "something was made through the link"
        );
    }
}
