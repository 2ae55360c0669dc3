//! The namespace backend's floor: the least work a command needs to run as the bwrap backend
//! runs it read-only with the network denied, done with the kernel's mount API in the process
//! that becomes the command, with no program executed in between.
//!
//! One `clone(CLONE_VM | CLONE_VFORK)` makes the command's process in new user, mount, pid,
//! network, IPC, UTS and cgroup namespaces. Before it executes the command, that process maps
//! its own user and group, copies the whole mount tree read-only (`open_tree` of `/` with its
//! submounts, one recursive `mount_setattr`), mounts a new `/proc` and a `/dev` of six device
//! nodes on a tmpfs, binds a directory of the server's writable at `/tmp`, makes the copy its
//! root (`pivot_root`, the old root detached), starts a session of its own, asks to die with
//! its parent, and drops every capability under `no_new_privs`. What this floor leaves out of
//! the backend it stands for: a Landlock ruleset (the Landlock floor shows it costs nothing
//! measurable) and the seccomp filter (whose load the helper adds on every backend); an init
//! process of the sandbox's own (here the command is the pid namespace's first process); the
//! writable roots, protected and denied paths beyond `/tmp`, which are a bind each.

use std::ffi::{CStr, CString, c_int, c_void};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::libc;

use super::spawn::{argv_of, clone_vfork, new_stack};

/// The namespaces the command's process is made in.
pub(super) const NAMESPACES: c_int = libc::CLONE_NEWUSER
    | libc::CLONE_NEWNS
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWCGROUP;

/// `open_tree`: a copy of the tree, detached, closed on `execve`.
const OPEN_TREE_CLONE: u32 = 1;
const OPEN_TREE_CLOEXEC: u32 = libc::O_CLOEXEC as u32;
/// `AT_RECURSIVE`: with the mounts beneath.
const AT_RECURSIVE: u32 = 0x8000;
const AT_EMPTY_PATH: u32 = libc::AT_EMPTY_PATH as u32;
/// `move_mount`: the source is the descriptor itself.
const MOVE_MOUNT_F_EMPTY_PATH: u32 = 4;
/// `fsconfig`: set a string option; create the superblock.
const FSCONFIG_SET_STRING: u32 = 1;
const FSCONFIG_CMD_CREATE: u32 = 6;
const FSMOUNT_CLOEXEC: u32 = 1;
/// `MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV`.
const READ_ONLY: u64 = 1 | 2 | 4;
/// `MOUNT_ATTR_NOSUID`: no set-id programs (the device tree, whose nodes must open).
const NO_SETID: u64 = 2;
/// `MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV`: a writable mount with no set-id programs or devices.
const NO_SETID_NO_DEV: u64 = 2 | 4;

/// The device nodes the sandbox's `/dev` holds, as bwrap's `--dev` gives them.
const DEVICES: [&CStr; 6] = [c"null", c"zero", c"full", c"random", c"urandom", c"tty"];
const HOST_DEVICES: [&CStr; 6] = [
    c"/dev/null",
    c"/dev/zero",
    c"/dev/full",
    c"/dev/random",
    c"/dev/urandom",
    c"/dev/tty",
];

/// `struct mount_attr`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// `struct __user_cap_header_struct` and one half of `struct __user_cap_data_struct` twice.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: c_int,
}
#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// What the clone's child needs, all built before it: it may not allocate.
pub(super) struct ChildArgs {
    argv: Vec<*const libc::c_char>,
    envp: [*const libc::c_char; 1],
    uid_map: CString,
    gid_map: CString,
    /// The directory bound writable at `/tmp`.
    tmp: CString,
}

impl ChildArgs {
    /// `argv` (its strings must outlive the value) with `tmp` as the sandbox's `/tmp`.
    pub(super) fn new(argv: &[&CStr], tmp: &Path) -> Option<ChildArgs> {
        argv.first()?;
        // SAFETY: these calls take no arguments and cannot fail.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        Some(ChildArgs {
            argv: argv_of(argv),
            envp: [std::ptr::null()],
            uid_map: CString::new(format!("{uid} {uid} 1")).ok()?,
            gid_map: CString::new(format!("{gid} {gid} 1")).ok()?,
            tmp: CString::new(tmp.as_os_str().as_bytes()).ok()?,
        })
    }
}

/// Starts `argv` in the namespace floor's sandbox, with `tmp` as its `/tmp`; its pid. The
/// clone returns once the child has executed or ended.
pub fn start(argv: &[&CStr], tmp: &Path) -> Option<libc::pid_t> {
    let args = ChildArgs::new(argv, tmp)?;
    // SAFETY: `child` makes only system calls on `args`, which outlives the clone, and
    // executes or exits.
    unsafe { clone_vfork(child, (&raw const args).cast_mut().cast(), NAMESPACES) }
}

/// `count` of `/bin/true` in sandboxes of the floor's, built at once: each clone returns at
/// once (no `CLONE_VFORK`), so the sandboxes are built in parallel as separate processes
/// build theirs, then all are waited for; 0 when every one succeeded.
pub fn run_many(count: usize, tmp: &Path) -> Option<u8> {
    let args = ChildArgs::new(&[c"/bin/true"], tmp)?;
    let stacks: Vec<(Vec<u8>, *mut c_void)> = (0..count).map(|_| new_stack()).collect();
    let started: Vec<libc::pid_t> = stacks
        .iter()
        .map(|(_, top)| {
            // SAFETY: each child runs `child` on a stack of its own and only reads `args`;
            // `args` and every stack live until every child has been waited for below.
            unsafe {
                libc::clone(
                    child,
                    *top,
                    libc::CLONE_VM | NAMESPACES | libc::SIGCHLD,
                    (&raw const args).cast_mut().cast::<c_void>(),
                )
            }
        })
        .collect();
    let answers: Vec<Option<u8>> = started
        .iter()
        .filter(|pid| **pid > 0)
        .map(|pid| super::spawn::wait(*pid))
        .collect();
    drop(stacks);
    let all = started.iter().all(|pid| *pid > 0) && answers.iter().all(|a| *a == Some(0));
    Some(u8::from(!all))
}

/// The child: the sandbox built, then the program; raw system calls only, and `_exit(127)` at
/// the first that fails.
extern "C" fn child(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `ChildArgs` of `start` or `run_many`, alive until this child has
    // executed or ended.
    let args = unsafe { &*arg.cast::<ChildArgs>() };
    // SAFETY: only system calls, in the clone's child.
    unsafe {
        if args.enter().is_none() {
            libc::_exit(127);
        }
        args.execute()
    }
}

impl ChildArgs {
    /// Enters the sandbox: the identity mapped, the root built, the privileges dropped.
    ///
    /// # Safety
    /// Only system calls: callable in a clone's child.
    pub(super) unsafe fn enter(&self) -> Option<()> {
        // SAFETY: system calls on this process's own strings and descriptors.
        unsafe {
            map_identity(self)?;
            build_root(&self.tmp)?;
            drop_privileges()
        }
    }

    /// Executes the program; `_exit(127)` if that fails.
    ///
    /// # Safety
    /// Only system calls: callable in a clone's child.
    pub(super) unsafe fn execute(&self) -> ! {
        // SAFETY: NUL-terminated strings in null-terminated arrays of this value; `_exit` ends
        // the process without running anything of its parent's.
        unsafe {
            // The program's path: the first word of a list that always holds one.
            if let Some(program) = self.argv.first() {
                libc::execve(*program, self.argv.as_ptr(), self.envp.as_ptr());
            }
            libc::_exit(127)
        }
    }
}

/// Writes `bytes` to the file `path` names.
///
/// # Safety
/// Only system calls: callable in the clone's child.
unsafe fn write_file(path: &CStr, bytes: &CStr) -> Option<()> {
    // SAFETY: a NUL-terminated path; the descriptor is closed below.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    let len = bytes.to_bytes().len();
    // SAFETY: `len` bytes of a live string.
    let written = unsafe { libc::write(fd, bytes.as_ptr().cast(), len) };
    // SAFETY: the descriptor opened above.
    unsafe { libc::close(fd) };
    (usize::try_from(written).ok() == Some(len)).then_some(())
}

/// The process's own user and group mapped into its user namespace (setgroups denied first,
/// as an unprivileged map requires).
///
/// # Safety
/// Only system calls.
unsafe fn map_identity(args: &ChildArgs) -> Option<()> {
    // SAFETY: NUL-terminated strings.
    unsafe {
        write_file(c"/proc/self/setgroups", c"deny")?;
        write_file(c"/proc/self/uid_map", &args.uid_map)?;
        write_file(c"/proc/self/gid_map", &args.gid_map)
    }
}

/// A descriptor a system call returned, or `None` for an error.
fn fd(ret: libc::c_long) -> Option<c_int> {
    c_int::try_from(ret).ok().filter(|fd| *fd >= 0)
}

/// A detached copy of the mount at `path` (with its submounts if `recursive`).
///
/// # Safety
/// Only system calls.
unsafe fn clone_tree(dirfd: c_int, path: &CStr, recursive: bool) -> Option<c_int> {
    let flags = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | if recursive { AT_RECURSIVE } else { 0 };
    // SAFETY: a NUL-terminated path.
    fd(unsafe { libc::syscall(libc::SYS_open_tree, dirfd, path.as_ptr(), flags) })
}

/// Attaches the detached mount `mount` at `path` beneath `dirfd`.
///
/// # Safety
/// Only system calls.
unsafe fn attach(mount: c_int, dirfd: c_int, path: &CStr) -> Option<()> {
    // SAFETY: NUL-terminated paths and descriptors of this process.
    let moved = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            mount,
            c"".as_ptr(),
            dirfd,
            path.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    (moved == 0).then_some(())
}

/// Sets `attr_set` on the mount `mount` and every mount beneath it.
///
/// # Safety
/// Only system calls.
unsafe fn set_attr(mount: c_int, attr_set: u64) -> Option<()> {
    let attr = MountAttr {
        attr_set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: the kernel reads the live attribute.
    let set = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            mount,
            c"".as_ptr(),
            AT_EMPTY_PATH | AT_RECURSIVE,
            &raw const attr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    (set == 0).then_some(())
}

/// A new detached mount of the filesystem type `fstype` (`proc`, `tmpfs`), with the string
/// options `options` (key, value) set before it is made.
///
/// # Safety
/// Only system calls.
unsafe fn new_mount(fstype: &CStr, options: &[(&CStr, &CStr)]) -> Option<c_int> {
    // SAFETY: a NUL-terminated name; the context's descriptor is closed below.
    let context = fd(unsafe { libc::syscall(libc::SYS_fsopen, fstype.as_ptr(), 1u32) })?;
    let configured = options.iter().all(|(key, value)| {
        // SAFETY: NUL-terminated key and value for a string option.
        let set = unsafe {
            libc::syscall(
                libc::SYS_fsconfig,
                context,
                FSCONFIG_SET_STRING,
                key.as_ptr(),
                value.as_ptr().cast::<c_void>(),
                0,
            )
        };
        set == 0
    });
    // SAFETY: the create command takes no key or value.
    let created = configured
        && unsafe {
            libc::syscall(
                libc::SYS_fsconfig,
                context,
                FSCONFIG_CMD_CREATE,
                std::ptr::null::<libc::c_char>(),
                std::ptr::null::<c_void>(),
                0,
            )
        } == 0;
    // SAFETY: the context made above.
    let mount = created
        .then(|| fd(unsafe { libc::syscall(libc::SYS_fsmount, context, FSMOUNT_CLOEXEC, 0u32) }))
        .flatten();
    // SAFETY: the context made above, not used after this.
    unsafe { libc::close(context) };
    mount
}

/// A tmpfs holding an empty file for each of [`DEVICES`], the host's node bound on each.
///
/// # Safety
/// Only system calls.
unsafe fn device_tree() -> Option<c_int> {
    // SAFETY: system calls on this process's descriptors and NUL-terminated names.
    unsafe {
        // Mode 0755, not tmpfs's sticky 1777: an existing node in a sticky directory of
        // another owner cannot be opened with O_CREAT (a shell's `>`), and the nodes are root's.
        let dev = new_mount(c"tmpfs", &[(c"mode", c"0755")])?;
        for (name, host) in DEVICES.iter().zip(HOST_DEVICES) {
            let file = libc::openat(dev, name.as_ptr(), libc::O_CREAT | libc::O_CLOEXEC, 0o666);
            if file < 0 {
                return None;
            }
            libc::close(file);
            let node = clone_tree(libc::AT_FDCWD, host, false)?;
            attach(node, dev, name)?;
            libc::close(node);
        }
        Some(dev)
    }
}

/// The sandbox's root: the host's tree copied read-only, a new `/proc`, the device tree at
/// `/dev`, `tmp` writable at `/tmp`; made the root and the old one detached.
///
/// # Safety
/// Only system calls.
unsafe fn build_root(tmp: &CStr) -> Option<()> {
    // SAFETY: system calls on this process's descriptors and NUL-terminated names.
    unsafe {
        let root = clone_tree(libc::AT_FDCWD, c"/", true)?;
        set_attr(root, READ_ONLY)?;
        let proc = new_mount(c"proc", &[])?;
        attach(proc, root, c"proc")?;
        let dev = device_tree()?;
        set_attr(dev, NO_SETID)?;
        attach(dev, root, c"dev")?;
        let tmp = clone_tree(libc::AT_FDCWD, tmp, false)?;
        set_attr(tmp, NO_SETID_NO_DEV)?;
        attach(tmp, root, c"tmp")?;
        attach(root, libc::AT_FDCWD, c"/")?;
        if libc::fchdir(root) != 0
            || libc::syscall(libc::SYS_pivot_root, c".".as_ptr(), c".".as_ptr()) != 0
            || libc::umount2(c".".as_ptr(), libc::MNT_DETACH) != 0
            || libc::chdir(c"/".as_ptr()) != 0
        {
            return None;
        }
        Some(())
    }
}

/// A session of its own, death with its parent, `no_new_privs` and no capability left.
///
/// # Safety
/// Only system calls.
unsafe fn drop_privileges() -> Option<()> {
    let header = CapHeader {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
        pid: 0,
    };
    let data = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: integer arguments; then the kernel reads the live header and two data halves.
    let ok = unsafe {
        libc::setsid() >= 0
            && libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) == 0
            && libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
            && libc::syscall(libc::SYS_capset, &raw const header, data.as_ptr()) == 0
    };
    ok.then_some(())
}

#[cfg(test)]
mod tests {
    use super::super::spawn::{Scratch, wait};
    use super::*;

    /// `argv` in the floor's sandbox with `tmp` as its `/tmp`; 0 when it succeeded.
    fn run(argv: &[&CStr], tmp: &Path) -> Option<u8> {
        start(argv, tmp).and_then(wait)
    }

    /// `sh -c SCRIPT` unconfined; 0 when it succeeded.
    fn unconfined(script: &CStr) -> u8 {
        let status = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(script.to_str().expect("text"))
            .status()
            .expect("sh runs");
        u8::from(!status.success())
    }

    /// The floor does the work of the bwrap backend's read-only sandbox, not less: the host's
    /// files cannot be written, `/tmp` is the directory bound there, the command is the first
    /// process of a pid namespace of its own and `/dev/null` opens. Each check has its control,
    /// the same shell unconfined, which writes, and is not the first process.
    #[test]
    fn the_namespace_floor_runs_its_command_read_only_in_namespaces_of_its_own() {
        let tmp = Scratch::new("ns-tmp").expect("scratch");
        if run(&[c"/bin/true"], &tmp.0) != Some(0) {
            println!("SKIP: this process cannot make user and mount namespaces here");
            return;
        }
        // A directory of the host outside /tmp, which the sandbox sees, read-only.
        let Some(host) = HostScratch::new() else {
            println!("SKIP: no writable directory outside the temporary directory");
            return;
        };
        let target = host.0.join("written");
        let seen_not_written = CString::new(format!(
            "test -d '{}' && ! (: > '{}') 2>/dev/null",
            host.0.display(),
            target.display()
        ))
        .expect("path");
        assert_eq!(
            run(&[c"/bin/sh", c"-c", &seen_not_written], &tmp.0),
            Some(0)
        );
        assert!(!target.exists(), "the floor's command wrote to the host");
        let write = CString::new(format!(": > '{}'", target.display())).expect("path");
        assert_eq!(unconfined(&write), 0, "control: the same write unconfined");
        assert!(target.exists());

        let inside = c"echo x > /dev/null && : > /tmp/made-inside && test $$ = 1";
        assert_eq!(run(&[c"/bin/sh", c"-c", inside], &tmp.0), Some(0));
        assert!(
            tmp.0.join("made-inside").exists(),
            "/tmp is the bound directory"
        );
        assert_eq!(
            unconfined(c"test $$ = 1"),
            1,
            "control: unconfined, the shell is not the first process"
        );
    }

    /// Sixty-four sandboxes built at once all run their command; and when the sandbox cannot
    /// be built (its `/tmp` does not exist), the answer says so (the control).
    #[test]
    fn sandboxes_built_at_once_all_run() {
        let tmp = Scratch::new("ns-many").expect("scratch");
        if run(&[c"/bin/true"], &tmp.0) != Some(0) {
            println!("SKIP: this process cannot make user and mount namespaces here");
            return;
        }
        assert_eq!(run_many(64, &tmp.0), Some(0));
        assert_eq!(run_many(2, &tmp.0.join("missing")), Some(1));
    }

    /// A directory outside the temporary directory, which the sandbox replaces: beside the
    /// crate, or in `/var/tmp` when the checkout is itself under the temporary directory;
    /// removed when the test ends.
    struct HostScratch(std::path::PathBuf);

    impl HostScratch {
        fn new() -> Option<HostScratch> {
            let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
            let base =
                if crate_dir.starts_with(std::env::temp_dir()) || crate_dir.starts_with("/tmp") {
                    Path::new("/var/tmp")
                } else {
                    crate_dir
                };
            let dir = base.join(format!(".agentd-bench-floor-test-{}", std::process::id()));
            std::fs::create_dir(&dir).ok()?;
            Some(HostScratch(dir))
        }
    }

    impl Drop for HostScratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
