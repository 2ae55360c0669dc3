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
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};

use nix::errno::Errno;
use nix::libc;

use super::call::{self, SysResult};
use super::exec::apply_layers;
use super::layout::{FD_FIRST_PASSED, MAX_PASSED_FDS, fd_at};
use super::mount_call::{
    ATTR_NODEV, ATTR_NOEXEC, ATTR_NOSUID, ATTR_RDONLY, attach_at, attach_on, clone_tree,
    create_file, detach, fchdir, fork_into, identity, loopback_up, mkdirat, new_mount, pivot_here,
    set_attr, setns, symlinkat, unshare,
};
use super::socket_call::{recv_fd, send_fd, socketpair_cloexec};
use super::user_namespace::{UserNamespace, map, settle};

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
    /// The user and network namespaces made ahead for this command, when the helper has them.
    pub(crate) ahead: Option<Ahead>,
}

/// A user namespace mapped as the shim maps its own and a network namespace of it with only
/// its loopback up, made ahead of one command by a child of the helper, so that their making
/// (about half a millisecond, most of it the network namespace's) is not on the command's
/// path. Nothing runs in them before the command they are lent to, and each serves one.
#[derive(Debug)]
pub(crate) struct Ahead {
    user: OwnedFd,
    net: OwnedFd,
}

/// The child making the next [`Ahead`], and the socket it sends their descriptors on.
#[derive(Debug)]
pub(crate) struct Making {
    pid: libc::pid_t,
    from: OwnedFd,
}

impl Making {
    /// Forks the maker; `None` when it cannot be (the command then makes its own).
    pub(crate) fn start() -> Option<Making> {
        let user = UserNamespace::new(None);
        let [ours, theirs] = socketpair_cloexec().ok()?;
        // SAFETY: the helper is single-threaded; the child runs `make` on data built before
        // the fork and exits. A fork, not a child sharing this memory: writing its own maps
        // makes the maker dumpable for a moment, and dumpability belongs to the memory.
        match unsafe { call::fork() } {
            Ok(0) => make(&user, theirs),
            Ok(pid) => {
                let _ = call::close(theirs);
                // SAFETY: the socket pair's end just made, owned by nothing else.
                let from = unsafe { OwnedFd::from_raw_fd(ours) };
                Some(Making { pid, from })
            }
            Err(_) => {
                let _ = (call::close(ours), call::close(theirs));
                None
            }
        }
    }

    /// Readable once the maker has sent the pair or ended without it.
    pub(crate) fn fd(&self) -> c_int {
        self.from.as_raw_fd()
    }

    /// The pair, once [`Making::fd`] is readable. The maker is reaped first, so whatever it
    /// sent is there.
    pub(crate) fn finish(self) -> Option<Ahead> {
        let _ = call::wait4_pid(self.pid);
        let mut received = [recv_fd(self.fd()), recv_fd(self.fd())]
            .into_iter()
            // SAFETY: a descriptor the kernel just installed in this process's table.
            .map(|fd| fd.map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }));
        let (user, net) = (received.next()?.ok()?, received.next()?.ok()?);
        Some(Ahead { user, net })
    }
}

/// The maker: the new namespaces, the maps, the loopback up, then their descriptors sent on
/// `to`, the only descriptor of the helper's it keeps (at 3).
fn make(ns: &UserNamespace, to: c_int) -> ! {
    const TO: c_int = 3;
    let made = (|| {
        keep_only(&[to])?;
        unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET)?;
        map(ns)?;
        loopback_up()?;
        for kind in [c"/proc/self/ns/user", c"/proc/self/ns/net"] {
            send_fd(TO, call::open(kind, libc::O_RDONLY | libc::O_CLOEXEC)?)?;
        }
        Ok::<(), Errno>(())
    })();
    call::exit(c_int::from(made.is_err()))
}

/// Starts the shim in `ahead`'s user and network namespaces and new mount, pid, IPC and UTS
/// namespaces, as the helper's child and the first process of its pid namespace: a child that
/// shares the helper's memory joins the two (the helper's user owns them, so its credentials
/// may) and makes the shim with `CLONE_PARENT`, a copy of the helper's memory as it is now,
/// which runs `shim`. Returns the shim's pid.
///
/// # Safety
/// As for `fork`: the caller is single-threaded, and `shim` never returns.
pub(super) unsafe fn born_ahead<F: FnOnce()>(ahead: &Ahead, shim: F) -> SysResult<libc::pid_t> {
    let stack = call::ChildStack::new()?;
    // The shim's pid, or the errno of the step that failed, negated.
    let born = AtomicI32::new(0);
    let (user, net) = (ahead.user.as_raw_fd(), ahead.net.as_raw_fd());
    let flags = (NAMESPACES & !libc::CLONE_NEWUSER) | libc::CLONE_PARENT;
    // SAFETY: the child writes only `born` and its own stack before it exits; the shim it
    // makes is a copy, and runs `shim`, which the caller says never returns.
    let middle = unsafe {
        call::clone_vfork(&stack, false, || {
            let started = setns(user, libc::CLONE_NEWUSER)
                .and_then(|()| setns(net, libc::CLONE_NEWNET))
                // SAFETY: this child is single-threaded.
                .and_then(|()| fork_into(flags));
            match started {
                Ok(0) => shim(),
                Ok(pid) => born.store(pid, Ordering::SeqCst),
                Err(e) => born.store(-(e as i32), Ordering::SeqCst),
            }
            call::exit(0)
        })
    }?;
    let _ = call::wait4_pid(middle);
    // Joining the user namespace changed the child's credentials, which sets the dumpability
    // of the memory it shared, the helper's, to the machine's `suid_dumpable`: not dumpable
    // again (1 would let the user's processes trace the helper). Not an error to return: a
    // shim may have been born, and an error makes another.
    let _ = call::prctl(libc::PR_SET_DUMPABLE, 0);
    match born.load(Ordering::SeqCst) {
        pid if pid > 0 => Ok(pid),
        errno => Err(Errno::from_raw(errno.saturating_neg())),
    }
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
pub(super) fn enter(s: &Sandbox, layers: &Layers<'_>, made_ahead: bool) -> SysResult<()> {
    settle(&s.user, made_ahead)?;
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
    if s.own_network && !made_ahead {
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

    /// The name of the namespace `path` (a `/proc` link) stands for, read with no allocation
    /// (the shim of the test below is a fork of a process with other threads).
    fn link(path: &CStr, buf: &mut [u8; 64]) -> usize {
        // SAFETY: a NUL-terminated path and a live buffer of the length given.
        let n = unsafe { libc::readlink(path.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        usize::try_from(n).unwrap_or(0)
    }

    /// Whether a TCP connection to a listener on 127.0.0.1 of this network namespace is made:
    /// its loopback is up. System calls only, as above.
    fn loopback_answers() -> bool {
        // SAFETY: new sockets of this process and live, correctly sized addresses.
        unsafe {
            let listener = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
            let mut addr: libc::sockaddr_in = std::mem::zeroed();
            addr.sin_family = libc::sa_family_t::try_from(libc::AF_INET).unwrap_or(0);
            addr.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
            let mut len =
                libc::socklen_t::try_from(std::mem::size_of::<libc::sockaddr_in>()).unwrap_or(0);
            let at = (&raw mut addr).cast::<libc::sockaddr>();
            if libc::bind(listener, at, len) != 0
                || libc::listen(listener, 1) != 0
                || libc::getsockname(listener, at, &raw mut len) != 0
            {
                return false;
            }
            let client = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
            libc::connect(client, at, len) == 0
        }
    }

    /// Two pairs made ahead are namespaces of their own, neither this process's nor each
    /// other's; a shim born in one is the first process of a new pid namespace, in exactly
    /// that pair, with its loopback up, and is this process's child (`CLONE_PARENT`).
    #[test]
    fn a_shim_born_ahead_is_pid_one_in_the_pair_made_for_it_and_each_pair_is_new() {
        if !crate::sys::user_namespace_usable() {
            eprintln!("SKIP a_shim_born_ahead: this user cannot make user namespaces here");
            return;
        }
        let made = |_| Making::start().expect("forked").finish().expect("made");
        let pairs: Vec<Ahead> = (0..2).map(made).collect();
        let mut ours = [[0u8; 64]; 2];
        let own = [
            link(c"/proc/self/ns/user", &mut ours[0]),
            link(c"/proc/self/ns/net", &mut ours[1]),
        ];
        let mut seen = Vec::new();
        for ahead in &pairs {
            let name = |fd: &OwnedFd| {
                std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
                    .expect("a namespace")
                    .into_os_string()
                    .into_string()
                    .expect("text")
            };
            let (user, net) = (name(&ahead.user), name(&ahead.net));
            assert!(
                user.starts_with("user:[") && net.starts_with("net:["),
                "{user} {net}"
            );
            assert_ne!(user.as_bytes(), ours[0].get(..own[0]).expect("ours"));
            assert_ne!(net.as_bytes(), ours[1].get(..own[1]).expect("ours"));
            assert!(
                !seen.contains(&net) && !seen.contains(&user),
                "a pair served twice"
            );
            seen.extend([user.clone(), net.clone()]);

            let [from_shim, to_test] = call::pipe2_cloexec().expect("pipe");
            let shim = || {
                let mut user = [0u8; 64];
                let mut net = [0u8; 64];
                let lengths = [
                    link(c"/proc/self/ns/user", &mut user),
                    link(c"/proc/self/ns/net", &mut net),
                ];
                let pid = call::getpid().to_ne_bytes();
                let up = [u8::from(loopback_answers())];
                for (bytes, n) in [(&user[..], lengths[0]), (&net[..], lengths[1])] {
                    let _ = call::write(to_test, &[u8::try_from(n).unwrap_or(0)]);
                    let _ = call::write(to_test, bytes.get(..n).unwrap_or_default());
                }
                let _ = (call::write(to_test, &pid), call::write(to_test, &up));
                call::exit(0)
            };
            // SAFETY: the shim runs system calls on stack buffers and exits.
            let pid = unsafe { born_ahead(ahead, shim) }.expect("born");
            let _ = call::close(to_test);
            let mut report = Vec::new();
            let mut buf = [0u8; 512];
            while let Ok(n @ 1..) = call::read(from_shim, &mut buf) {
                report.extend_from_slice(buf.get(..n).expect("read"));
            }
            let _ = call::close(from_shim);
            let (_, status, _) = call::wait4_pid(pid).expect("the shim is this process's child");
            assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
            let mut rest = report.as_slice();
            let mut field = || {
                let (&n, tail) = rest.split_first().expect("a length");
                let (name, tail) = tail.split_at(usize::from(n));
                rest = tail;
                String::from_utf8(name.to_vec()).expect("text")
            };
            assert_eq!((field(), field()), (user, net), "born in its own pair");
            assert_eq!(
                rest,
                [1i32.to_ne_bytes().as_slice(), &[1]].concat(),
                "pid 1, loopback up"
            );
        }
    }
}
