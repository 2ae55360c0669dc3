//! The floors the per-command rows are read against: the least work a supervised command needs,
//! done by a process of the benchmark's own (`agentd-bench --floor-server`), which the benchmark
//! asks for each command as agentd asks the helper, and which answers once the command has
//! ended. Two floors:
//!
//! - **supervised spawn**: the request, the command started by `clone(CLONE_VM | CLONE_VFORK)`
//!   (no memory copied) with nothing done before its `execve`, its `wait`, the answer. No
//!   policy, no supervisor of the tree;
//! - **Landlock**: the same, the command entering a Landlock ruleset built for the request
//!   (read and execute everywhere, no write) under `no_new_privs` before it executes. No seccomp
//!   filter: the helper's read-only filter adds its load on top (RFC 0023, step 3);
//! - **64 under Landlock at once**: 64 of the Landlock floor's commands, all started before any
//!   is waited for (the concurrent section's floor).
//!
//! The requests and answers are one byte each, on the server's stdin and stdout.

use std::ffi::{CStr, c_int, c_void};
use std::io::{Read, Write};
use std::process::ExitCode;

use nix::libc;

/// The argument that makes `agentd-bench` this server.
pub const SERVER_ARG: &str = "--floor-server";
/// The request byte of a supervised spawn.
pub const SPAWN: u8 = b's';
/// The request byte of a spawn under Landlock.
pub const LANDLOCK: u8 = b'l';
/// The request byte of [`CONCURRENT`] spawns under Landlock at once.
pub const MANY_LANDLOCK: u8 = b'm';
/// How many commands [`MANY_LANDLOCK`] starts before it waits: the concurrent section's count.
const CONCURRENT: usize = crate::measure::CONCURRENT;
/// The command every floor runs.
const TRUE: &CStr = c"/bin/true";
/// The answer when the command could not be run or did not succeed.
const FAILED: u8 = 1;
/// The child stack of the Landlock floor's clone.
const STACK_SIZE: usize = 64 * 1024;

/// Landlock's filesystem rights by the ABI that added them: 13 in ABI 1, `REFER` in 2,
/// `TRUNCATE` in 3, `IOCTL_DEV` in 5.
fn handled_rights(abi: i64) -> u64 {
    let mut rights = (1u64 << 13) - 1;
    for (since, bit) in [(2, 13), (3, 14), (5, 15)] {
        if abi >= since {
            rights |= 1 << bit;
        }
    }
    rights
}

/// `LANDLOCK_ACCESS_FS_EXECUTE | READ_FILE | READ_DIR`.
const READ_RIGHTS: u64 = 1 | 1 << 2 | 1 << 3;

/// The kernel's Landlock ABI version, if it has Landlock; asked once, as the helper asks it
/// once, so that no floor command pays the query.
pub fn landlock_abi() -> Option<i64> {
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

/// Serves requests on stdin until it closes; the benchmark runs it as `--floor-server`.
pub fn serve() -> ExitCode {
    let mut input = std::io::stdin().lock();
    let mut output = std::io::stdout().lock();
    let mut request = [0u8; 1];
    while input.read_exact(&mut request).is_ok() {
        let answer = match request[0] {
            SPAWN => run(None, &[TRUE]),
            LANDLOCK => landlocked(&[TRUE]),
            MANY_LANDLOCK => many_landlocked(),
            _ => return ExitCode::FAILURE,
        }
        .unwrap_or(FAILED);
        if output
            .write_all(&[answer])
            .and_then(|()| output.flush())
            .is_err()
        {
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

/// `argv` (its first word the program's path) under a Landlock ruleset of its own, waited for;
/// 0 when it succeeded.
fn landlocked(argv: &[&CStr]) -> Option<u8> {
    landlock_start(argv).and_then(wait)
}

/// [`CONCURRENT`] of [`landlocked`]'s `/bin/true`, all started before any is waited for; 0
/// when every one succeeded.
fn many_landlocked() -> Option<u8> {
    let started: Vec<Option<libc::pid_t>> =
        (0..CONCURRENT).map(|_| landlock_start(&[TRUE])).collect();
    let answers: Vec<Option<u8>> = started.iter().flatten().map(|pid| wait(*pid)).collect();
    let all = started.iter().all(Option::is_some) && answers.iter().all(|a| *a == Some(0));
    Some(u8::from(!all))
}

/// Starts `argv` under a Landlock ruleset built for it (read and execute everywhere); its pid.
fn landlock_start(argv: &[&CStr]) -> Option<libc::pid_t> {
    let abi = landlock_abi()?;
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
    let ruleset = c_int::try_from(ruleset).ok().filter(|fd| *fd >= 0)?;
    let answer = add_root_and_start(ruleset, argv);
    // SAFETY: the ruleset was made above and is not used after this.
    unsafe { libc::close(ruleset) };
    answer
}

fn add_root_and_start(ruleset: c_int, argv: &[&CStr]) -> Option<libc::pid_t> {
    // SAFETY: a NUL-terminated path; the descriptor is closed below.
    let root = unsafe { libc::open(c"/".as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if root < 0 {
        return None;
    }
    let rule = PathBeneath {
        allowed_access: READ_RIGHTS,
        parent_fd: root,
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
    unsafe { libc::close(root) };
    if added != 0 {
        return None;
    }
    start(Some(ruleset), argv)
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
        libc::execve(args.argv[0], args.argv.as_ptr(), args.envp.as_ptr());
        libc::_exit(127)
    }
}

/// [`start`]s `argv` and waits for it; 0 when it succeeded.
fn run(ruleset: Option<c_int>, argv: &[&CStr]) -> Option<u8> {
    start(ruleset, argv).and_then(wait)
}

/// Starts [`child`] with `clone(CLONE_VM | CLONE_VFORK)`, which returns once it has executed
/// or ended; its pid.
fn start(ruleset: Option<c_int>, argv: &[&CStr]) -> Option<libc::pid_t> {
    argv.first()?;
    let mut stack = vec![0u8; STACK_SIZE];
    let mut args = ChildArgs {
        ruleset,
        argv: argv
            .iter()
            .map(|a| a.as_ptr())
            .chain([std::ptr::null()])
            .collect(),
        envp: [std::ptr::null()],
    };
    // The stack grows down: the child starts at its top, 16-byte aligned.
    let top = stack.as_mut_ptr().wrapping_add(STACK_SIZE) as usize & !15;
    // SAFETY: the child runs `child` on a stack of its own, writes nothing its waiting parent
    // reads, and executes or exits; CLONE_VFORK returns only then, so `args` and `stack`
    // outlive its use of them.
    let pid = unsafe {
        libc::clone(
            child,
            top as *mut c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (&raw mut args).cast::<c_void>(),
        )
    };
    drop(stack);
    (pid > 0).then_some(pid)
}

/// Waits for `pid`; 0 when it exited with status 0.
fn wait(pid: libc::pid_t) -> Option<u8> {
    let mut status: c_int = 0;
    // SAFETY: waits for a child of this process, into a live integer.
    let waited = unsafe { libc::waitpid(pid, &raw mut status, 0) };
    (waited == pid).then(|| u8::from(!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0)))
}

/// The floors' server as the benchmark sees it: a child `agentd-bench --floor-server`, asked
/// over its stdin and answered on its stdout.
pub struct Server {
    _child: tokio::process::Child,
    input: tokio::process::ChildStdin,
    output: tokio::process::ChildStdout,
}

impl Server {
    pub fn start() -> Result<Server, crate::error::BenchError> {
        let exe = std::env::current_exe().map_err(|e| fail!("the benchmark's own path: {e}"))?;
        let mut child = tokio::process::Command::new(exe)
            .arg(SERVER_ARG)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| fail!("cannot start the floors' server: {e}"))?;
        let (Some(input), Some(output)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(fail!("the floors' server has no pipes"));
        };
        Ok(Server {
            _child: child,
            input,
            output,
        })
    }

    /// One command of the floor `request` ([`SPAWN`] or [`LANDLOCK`]), until it has ended.
    pub async fn run(&mut self, request: u8) -> Result<(), crate::error::BenchError> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        self.input
            .write_all(&[request])
            .await
            .map_err(|e| fail!("the floors' server: {e}"))?;
        let mut answer = [0u8; 1];
        self.output
            .read_exact(&mut answer)
            .await
            .map_err(|e| fail!("the floors' server: {e}"))?;
        match answer[0] {
            0 => Ok(()),
            _ => Err(fail!("a floor's command did not succeed")),
        }
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
        let dir = Scratch(
            std::env::temp_dir().join(format!("agentd-bench-floor-{}", std::process::id())),
        );
        std::fs::create_dir_all(&dir.0).expect("scratch");
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

    /// A scratch directory, removed when the test ends, passed or not.
    struct Scratch(std::path::PathBuf);

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn sixty_four_landlocked_commands_all_run() {
        if landlock_abi().is_none() {
            println!("SKIP: this kernel has no Landlock");
            return;
        }
        assert_eq!(many_landlocked(), Some(0));
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
