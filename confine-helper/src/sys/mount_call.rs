//! The system calls the namespace backend's shim builds its sandbox with ([`super::sandbox`]):
//! the namespaces, the kernel's mount API (`open_tree`, `move_mount`, `mount_setattr`,
//! `fsopen`, `fsconfig`, `fsmount`), `pivot_root`, and the loopback interface brought up.
//! Each is one `unsafe` block on the caller's own strings and descriptors; none allocates.

use std::ffi::{CStr, c_int, c_void};

use nix::errno::Errno;
use nix::libc;

use super::call::{SysResult, check};

/// `open_tree`: a detached copy of the mount, not the mount itself.
const OPEN_TREE_CLONE: c_int = 1;
/// `AT_RECURSIVE`: with every mount beneath.
const AT_RECURSIVE: c_int = 0x8000;
/// `move_mount`: the source is the descriptor itself; the target is the descriptor itself.
const MOVE_MOUNT_F_EMPTY_PATH: c_int = 4;
const MOVE_MOUNT_T_EMPTY_PATH: c_int = 0x40;
/// `fsconfig` commands: set a string option; create the superblock.
const FSCONFIG_SET_STRING: c_int = 1;
const FSCONFIG_CMD_CREATE: c_int = 6;
/// `fsopen` and `fsmount`: close-on-exec.
const FS_CLOEXEC: c_int = 1;

/// `MOUNT_ATTR_RDONLY`, `MOUNT_ATTR_NOSUID`, `MOUNT_ATTR_NODEV`, `MOUNT_ATTR_NOEXEC`.
pub(super) const ATTR_RDONLY: u64 = 1;
pub(super) const ATTR_NOSUID: u64 = 2;
pub(super) const ATTR_NODEV: u64 = 4;
pub(super) const ATTR_NOEXEC: u64 = 8;

/// `struct mount_attr`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

fn descriptor(ret: libc::c_long) -> SysResult<c_int> {
    let fd = check(ret)?;
    c_int::try_from(fd).map_err(|_| Errno::EBADF)
}

/// `unshare(flags)`.
pub(super) fn unshare(flags: c_int) -> SysResult<()> {
    // SAFETY: integer flags only.
    check(unsafe { libc::unshare(flags) }).map(drop)
}

/// `setns(fd, kind)`: joins the namespace `fd` is open on.
pub(super) fn setns(fd: c_int, kind: c_int) -> SysResult<()> {
    // SAFETY: integer arguments only.
    check(unsafe { libc::setns(fd, kind) }).map(drop)
}

/// A child in new namespaces (`flags`), with no stack of its own: as `fork`, the child
/// continues from here on a copy of the caller's memory and gets 0.
///
/// # Safety
/// As for `fork`: the caller is single-threaded.
pub(super) unsafe fn fork_into(flags: c_int) -> SysResult<libc::pid_t> {
    let signal = c_int::try_from(libc::SIGCHLD.unsigned_abs()).map_err(|_| Errno::EINVAL)?;
    let flags = libc::c_ulong::try_from(flags | signal).map_err(|_| Errno::EINVAL)?;
    let null = std::ptr::null_mut::<c_void>();
    // SAFETY: no stack, parent or child tid, or TLS is given: the kernel copies the caller as
    // `fork` does; the caller upholds the rest.
    let pid = check(unsafe { libc::syscall(libc::SYS_clone, flags, null, null, null, 0) })?;
    libc::pid_t::try_from(pid).map_err(|_| Errno::EINVAL)
}

/// A detached copy of the mount at `path` beneath `dir` (`path` empty: `dir` itself), with the
/// mounts beneath it when `recursive`; the last component is not followed.
pub(super) fn clone_tree(dir: c_int, path: &CStr, recursive: bool) -> SysResult<c_int> {
    let empty = if path.is_empty() {
        libc::AT_EMPTY_PATH
    } else {
        0
    };
    let flags = OPEN_TREE_CLONE
        | libc::O_CLOEXEC
        | libc::AT_SYMLINK_NOFOLLOW
        | empty
        | if recursive { AT_RECURSIVE } else { 0 };
    let flags = libc::c_uint::try_from(flags).map_err(|_| Errno::EINVAL)?;
    // SAFETY: a NUL-terminated path and a descriptor of this process.
    descriptor(unsafe { libc::syscall(libc::SYS_open_tree, dir, path.as_ptr(), flags) })
}

/// Attaches the detached mount `mount` on the object `target` is open on.
pub(super) fn attach_on(mount: c_int, target: c_int) -> SysResult<()> {
    let flags = libc::c_uint::try_from(MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH)
        .map_err(|_| Errno::EINVAL)?;
    // SAFETY: empty NUL-terminated paths and descriptors of this process.
    let moved = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            mount,
            c"".as_ptr(),
            target,
            c"".as_ptr(),
            flags,
        )
    };
    check(moved).map(drop)
}

/// Attaches the detached mount `mount` at `path` (absolute), following no link at its end.
pub(super) fn attach_at(mount: c_int, path: &CStr) -> SysResult<()> {
    let flags = libc::c_uint::try_from(MOVE_MOUNT_F_EMPTY_PATH).map_err(|_| Errno::EINVAL)?;
    // SAFETY: NUL-terminated paths and a descriptor of this process.
    let moved = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            mount,
            c"".as_ptr(),
            libc::AT_FDCWD,
            path.as_ptr(),
            flags,
        )
    };
    check(moved).map(drop)
}

/// Sets `attr` on the mount `mount` and every mount beneath it.
pub(super) fn set_attr(mount: c_int, attr: u64) -> SysResult<()> {
    let value = MountAttr {
        attr_set: attr,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let flags =
        libc::c_uint::try_from(libc::AT_EMPTY_PATH | AT_RECURSIVE).map_err(|_| Errno::EINVAL)?;
    // SAFETY: the kernel reads the live value, of the size given.
    let set = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            mount,
            c"".as_ptr(),
            flags,
            &raw const value,
            std::mem::size_of::<MountAttr>(),
        )
    };
    check(set).map(drop)
}

/// A new detached mount of the filesystem `fstype`, with the string options `options`.
pub(super) fn new_mount(fstype: &CStr, options: &[(&CStr, &CStr)]) -> SysResult<c_int> {
    // SAFETY: a NUL-terminated name.
    let context =
        descriptor(unsafe { libc::syscall(libc::SYS_fsopen, fstype.as_ptr(), FS_CLOEXEC) })?;
    let made = (|| {
        for (key, value) in options {
            // SAFETY: NUL-terminated key and value of a string option.
            check(unsafe {
                libc::syscall(
                    libc::SYS_fsconfig,
                    context,
                    FSCONFIG_SET_STRING,
                    key.as_ptr(),
                    value.as_ptr(),
                    0,
                )
            })?;
        }
        let null = std::ptr::null::<c_void>();
        // SAFETY: the create command takes no key or value.
        check(unsafe {
            libc::syscall(
                libc::SYS_fsconfig,
                context,
                FSCONFIG_CMD_CREATE,
                null,
                null,
                0,
            )
        })?;
        // SAFETY: the context made above.
        descriptor(unsafe { libc::syscall(libc::SYS_fsmount, context, FS_CLOEXEC, 0) })
    })();
    let _ = super::call::close(context);
    made
}

/// `pivot_root(".", ".")` from the new root, then the old root, stacked on it, detached.
pub(super) fn pivot_here() -> SysResult<()> {
    // SAFETY: NUL-terminated paths.
    check(unsafe { libc::syscall(libc::SYS_pivot_root, c".".as_ptr(), c".".as_ptr()) })?;
    // SAFETY: a NUL-terminated path.
    check(unsafe { libc::umount2(c".".as_ptr(), libc::MNT_DETACH) }).map(drop)
}

/// Detaches the mount at `path`.
pub(super) fn detach(path: &CStr) -> SysResult<()> {
    // SAFETY: a NUL-terminated path.
    check(unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) }).map(drop)
}

/// `fchdir(fd)`.
pub(super) fn fchdir(fd: c_int) -> SysResult<()> {
    // SAFETY: a descriptor of this process.
    check(unsafe { libc::fchdir(fd) }).map(drop)
}

/// The device and inode number of the object `fd` is open on, and its type (`S_IFMT` bits).
pub(super) fn identity(fd: c_int) -> SysResult<(u64, u64, libc::mode_t)> {
    // SAFETY: all-zero bytes are a valid `stat`.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: the kernel writes the live value.
    check(unsafe { libc::fstat(fd, &raw mut st) })?;
    Ok((st.st_dev, st.st_ino, st.st_mode & libc::S_IFMT))
}

/// `mkdirat(dir, name, mode)`.
pub(super) fn mkdirat(dir: c_int, name: &CStr, mode: libc::mode_t) -> SysResult<()> {
    // SAFETY: a NUL-terminated name and a descriptor of this process.
    check(unsafe { libc::mkdirat(dir, name.as_ptr(), mode) }).map(drop)
}

/// Creates the empty file `name` beneath `dir` with `mode`, unless it exists.
pub(super) fn create_file(dir: c_int, name: &CStr, mode: libc::mode_t) -> SysResult<()> {
    let flags = libc::O_CREAT | libc::O_WRONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: a NUL-terminated name and a descriptor of this process.
    let fd = check(unsafe { libc::openat(dir, name.as_ptr(), flags, libc::c_uint::from(mode)) })?;
    super::call::close(fd)
}

/// `symlinkat(target, dir, name)`.
pub(super) fn symlinkat(target: &CStr, dir: c_int, name: &CStr) -> SysResult<()> {
    // SAFETY: NUL-terminated strings and a descriptor of this process.
    check(unsafe { libc::symlinkat(target.as_ptr(), dir, name.as_ptr()) }).map(drop)
}

/// Brings the loopback interface of this network namespace up; the kernel gives it its
/// addresses as it comes up.
pub(super) fn loopback_up() -> SysResult<()> {
    // SAFETY: a new socket of this process, closed below.
    let sock =
        check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: all-zero bytes are a valid `ifreq`.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (to, from) in req.ifr_name.iter_mut().zip(c"lo".to_bytes()) {
        *to = libc::c_char::from_ne_bytes([*from]);
    }
    let flags = libc::c_short::try_from(libc::IFF_UP | libc::IFF_RUNNING).unwrap_or(1);
    req.ifr_ifru.ifru_flags = flags;
    // SAFETY: the kernel reads the live request.
    let up = check(unsafe { libc::ioctl(sock, libc::SIOCSIFFLAGS, &raw mut req) });
    let _ = super::call::close(sock);
    up.map(drop)
}
