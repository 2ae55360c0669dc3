//! What the floors share: the supervised spawn (a `clone(CLONE_VM | CLONE_VFORK)` of the
//! command, nothing done before its `execve` but what its floor adds), Landlock rulesets made
//! with the kernel's calls, the wait, and a scratch directory of the floors' own.

use std::ffi::{CStr, c_int, c_void};

use nix::libc;

/// How many commands [`many`] starts before it waits: the concurrent section's count.
pub(super) const CONCURRENT: usize = crate::measure::CONCURRENT;
/// The command every floor runs.
pub(super) const TRUE: &CStr = c"/bin/true";
/// The child stack of a clone.
const STACK_SIZE: usize = 64 * 1024;

/// Landlock's filesystem rights by the ABI that added them: 13 in ABI 1, `REFER` in 2,
/// `TRUNCATE` in 3, `IOCTL_DEV` in 5.
pub(super) fn handled_rights(abi: i64) -> u64 {
    let mut rights = (1u64 << 13) - 1;
    for (since, bit) in [(2, 13), (3, 14), (5, 15)] {
        if abi >= since {
            rights |= 1 << bit;
        }
    }
    rights
}

/// `LANDLOCK_ACCESS_FS_EXECUTE | READ_FILE | READ_DIR`.
pub(super) const READ_RIGHTS: u64 = 1 | 1 << 2 | 1 << 3;

/// The kernel's Landlock ABI version, if it has Landlock; asked once, as the helper asks it
/// once, so that no floor command pays the query.
pub(crate) fn landlock_abi() -> Option<i64> {
    static ABI: std::sync::OnceLock<Option<i64>> = std::sync::OnceLock::new();
    *ABI.get_or_init(|| {
        // SAFETY: the version query (flag 1) passes no attribute and returns a number.
        let abi = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<c_void>(),
                0usize,
                1u32,
            )
        };
        (abi >= 1).then_some(abi)
    })
}

/// `struct landlock_ruleset_attr` as ABI 1 knows it (the kernel takes a shorter struct).
#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
}

/// `struct landlock_path_beneath_attr` (packed, as the kernel declares it).
#[repr(C, packed)]
struct PathBeneath {
    allowed_access: u64,
    parent_fd: i32,
}

/// `argv` (its first word the program's path) under a Landlock ruleset of its own, waited for;
/// 0 when it succeeded.
pub(super) fn landlocked(argv: &[&CStr]) -> Option<u8> {
    landlock_start(argv).and_then(wait)
}

/// [`CONCURRENT`] commands `start` starts, all started before any is waited for; 0 when every
/// one succeeded.
pub(super) fn many(start: impl Fn() -> Option<libc::pid_t>) -> Option<u8> {
    let started: Vec<Option<libc::pid_t>> = (0..CONCURRENT).map(|_| start()).collect();
    let answers: Vec<Option<u8>> = started.iter().flatten().map(|pid| wait(*pid)).collect();
    let all = started.iter().all(Option::is_some) && answers.iter().all(|a| *a == Some(0));
    Some(u8::from(!all))
}

/// Starts `argv` under a Landlock ruleset built for it (read and execute everywhere); its pid.
pub(super) fn landlock_start(argv: &[&CStr]) -> Option<libc::pid_t> {
    let ruleset = new_ruleset(landlock_abi()?)?;
    let answer = add_rule(ruleset, c"/", READ_RIGHTS).and_then(|()| start(Some(ruleset), argv));
    // SAFETY: the ruleset was made above and is not used after this.
    unsafe { libc::close(ruleset) };
    answer
}

/// A new Landlock ruleset handling every filesystem right of `abi`; its descriptor.
pub(super) fn new_ruleset(abi: i64) -> Option<c_int> {
    let attr = RulesetAttr {
        handled_access_fs: handled_rights(abi),
    };
    // SAFETY: the kernel reads `size_of::<RulesetAttr>()` bytes of the live attribute.
    let ruleset = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &raw const attr,
            std::mem::size_of::<RulesetAttr>(),
            0u32,
        )
    };
    c_int::try_from(ruleset).ok().filter(|fd| *fd >= 0)
}

/// Adds to `ruleset` a rule giving `rights` beneath `path`.
pub(super) fn add_rule(ruleset: c_int, path: &CStr, rights: u64) -> Option<()> {
    // SAFETY: a NUL-terminated path; the descriptor is closed below.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    let rule = PathBeneath {
        allowed_access: rights,
        parent_fd: fd,
    };
    // SAFETY: the kernel reads one packed rule from the live value.
    let added = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset,
            1u32, // LANDLOCK_RULE_PATH_BENEATH
            &raw const rule,
            0u32,
        )
    };
    // SAFETY: the descriptor opened above, not used after this.
    unsafe { libc::close(fd) };
    (added == 0).then_some(())
}

/// What the clone's child needs, built before it.
struct ChildArgs {
    /// The Landlock ruleset it enters, if any.
    ruleset: Option<c_int>,
    /// Null-terminated; the first word is the program's path.
    argv: Vec<*const libc::c_char>,
    envp: [*const libc::c_char; 1],
}

/// The child: `no_new_privs`, the ruleset, then the program; async-signal-safe calls only.
extern "C" fn child(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `ChildArgs` of `start`, alive while its parent waits (the clone
    // returns only once this process has executed or ended).
    let args = unsafe { &*arg.cast::<ChildArgs>() };
    // SAFETY: integer arguments; then a descriptor number; then NUL-terminated strings and
    // null-terminated arrays that live in the waiting parent's frame; `_exit` ends the child
    // without running anything of the parent's.
    unsafe {
        if let Some(ruleset) = args.ruleset
            && (libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) != 0)
        {
            libc::_exit(127);
        }
        // The program's path: the first word of a list that always holds one.
        let Some(program) = args.argv.first() else {
            libc::_exit(127)
        };
        libc::execve(*program, args.argv.as_ptr(), args.envp.as_ptr());
        libc::_exit(127)
    }
}

/// [`start`]s `argv` and waits for it; 0 when it succeeded.
pub(super) fn run(ruleset: Option<c_int>, argv: &[&CStr]) -> Option<u8> {
    start(ruleset, argv).and_then(wait)
}

/// Starts [`child`] with `clone(CLONE_VM | CLONE_VFORK)`, which returns once it has executed
/// or ended; its pid.
fn start(ruleset: Option<c_int>, argv: &[&CStr]) -> Option<libc::pid_t> {
    argv.first()?;
    let args = ChildArgs {
        ruleset,
        argv: argv_of(argv),
        envp: [std::ptr::null()],
    };
    // SAFETY: `child` reads only `args`, which outlives the clone, and executes or exits.
    unsafe { clone_vfork(child, (&raw const args).cast_mut().cast(), 0) }
}

/// `argv` as `execve` takes it: pointers to its strings (which must outlive the list), then
/// a null.
pub(super) fn argv_of(argv: &[&CStr]) -> Vec<*const libc::c_char> {
    argv.iter()
        .map(|a| a.as_ptr())
        .chain([std::ptr::null()])
        .collect()
}

/// A child stack, and its top as the clone takes it (the stack grows down, 16-byte aligned).
pub(super) fn new_stack() -> (Vec<u8>, *mut c_void) {
    let mut stack = vec![0u8; STACK_SIZE];
    let top = stack.as_mut_ptr().wrapping_add(STACK_SIZE) as usize & !15;
    (stack, top as *mut c_void)
}

/// Runs `child(arg)` in a new process made by `clone(CLONE_VM | CLONE_VFORK | flags)` on a
/// stack of its own; the clone returns once that process has executed or ended. Its pid.
///
/// # Safety
/// `child` must make only system calls, read only what `arg` points to (alive until this
/// returns), and execute or `_exit`, never return into this process's code.
pub(super) unsafe fn clone_vfork(
    child: extern "C" fn(*mut c_void) -> c_int,
    arg: *mut c_void,
    flags: c_int,
) -> Option<libc::pid_t> {
    let (stack, top) = new_stack();
    // SAFETY: the caller's promise; CLONE_VFORK returns only once the child no longer runs on
    // `stack`, which is dropped after.
    let pid = unsafe {
        libc::clone(
            child,
            top,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD | flags,
            arg,
        )
    };
    drop(stack);
    (pid > 0).then_some(pid)
}

/// Waits for `pid`; 0 when it exited with status 0.
pub(super) fn wait(pid: libc::pid_t) -> Option<u8> {
    let mut status: c_int = 0;
    // SAFETY: waits for a child of this process, into a live integer.
    let waited = unsafe { libc::waitpid(pid, &raw mut status, 0) };
    (waited == pid).then(|| u8::from(!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0)))
}

/// A directory of the server's own under the temp directory, removed when dropped.
pub(super) struct Scratch(pub(super) std::path::PathBuf);

impl Scratch {
    /// `agentd-bench-floor-LABEL-PID` under the temp directory, made anew.
    pub(super) fn new(label: &str) -> std::io::Result<Scratch> {
        let dir =
            std::env::temp_dir().join(format!("agentd-bench-floor-{label}-{}", std::process::id()));
        std::fs::create_dir(&dir)?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Landlock floor's command reads and executes but cannot write, while the same shell
    /// started by the unconfined floor writes (the control): the floor does the work of a
    /// read-only sandbox, not less.
    #[test]
    fn the_landlock_floor_runs_its_command_and_keeps_it_from_writing() {
        if landlock_abi().is_none() {
            println!("SKIP: this kernel has no Landlock");
            return;
        }
        let dir = Scratch::new("test").expect("scratch");
        let target = dir.0.join("written");
        let script = std::ffi::CString::new(format!(": > '{}'", target.display())).expect("path");
        let argv = [c"/bin/sh", c"-c", script.as_c_str()];
        assert_eq!(landlocked(&[TRUE]), Some(0), "the floor runs /bin/true");
        assert_eq!(
            landlocked(&argv),
            Some(1),
            "the write fails under the ruleset"
        );
        assert!(!target.exists());
        assert_eq!(
            run(None, &argv),
            Some(0),
            "control: the unconfined floor writes"
        );
        assert!(target.exists());
    }

    #[test]
    fn sixty_four_landlocked_commands_all_run() {
        if landlock_abi().is_none() {
            println!("SKIP: this kernel has no Landlock");
            return;
        }
        assert_eq!(many(|| landlock_start(&[TRUE])), Some(0));
        // Control: a command that fails is answered as failed.
        assert_eq!(landlocked(&[c"/bin/false"]), Some(1));
    }

    #[test]
    fn the_rights_grow_with_the_abi() {
        assert_eq!(handled_rights(1), 0x1fff);
        assert_eq!(handled_rights(2), 0x3fff);
        assert_eq!(handled_rights(4), 0x7fff);
        assert_eq!(handled_rights(7), 0xffff);
    }
}
