//! The warm sandbox's floor: the namespaces and the root of the namespace floor
//! (`namespace.rs`) made once, in a process that then starts each command inside as the
//! supervised spawn does.

use std::ffi::{c_int, c_void};
use std::os::fd::AsRawFd;
use std::path::Path;

use nix::libc;

use super::namespace::{ChildArgs, NAMESPACES};
use super::spawn::new_stack;

/// A warm sandbox: a process made once in the floor's namespaces and root (the first of its
/// pid namespace), which starts each command asked of it inside, by the supervised spawn's
/// `clone(CLONE_VM | CLONE_VFORK)`, waits for it and answers. The other shape a namespace
/// backend could take: one sandbox per session and policy, its cost paid once.
#[derive(Debug)]
pub struct Warm {
    /// The request pipe's write end: one byte per command.
    requests: std::fs::File,
    /// The answer pipe's read end: one byte per command, 0 when it succeeded.
    answers: std::fs::File,
}

impl Warm {
    /// Makes the warm sandbox with `tmp` as its `/tmp`.
    pub fn start(tmp: &Path) -> Option<Warm> {
        let (request_read, request_write) = pipe()?;
        let (answer_read, answer_write) = pipe()?;
        // The command's stack too is made here: the warm process, a copy of a process that
        // may have other threads, allocates nothing.
        let (command_stack, command_top) = new_stack();
        let args = WarmArgs {
            sandbox: ChildArgs::new(&[c"/bin/true"], tmp)?,
            requests: request_read.as_raw_fd(),
            answers: answer_write.as_raw_fd(),
            command_top,
        };
        let (stack, top) = new_stack();
        // SAFETY: no CLONE_VM: the child runs `warm` on a copy of this single-threaded
        // process's memory (the stack included) and never returns into its caller.
        let pid = unsafe {
            libc::clone(
                warm,
                top,
                NAMESPACES | libc::SIGCHLD,
                (&raw const args).cast_mut().cast::<c_void>(),
            )
        };
        drop((stack, command_stack));
        (pid > 0).then(|| Warm {
            requests: request_write.into(),
            answers: answer_read.into(),
        })
    }

    /// One `/bin/true` in the warm sandbox, until it has ended; 0 when it succeeded.
    pub fn run(&mut self) -> Option<u8> {
        use std::io::{Read, Write};
        self.requests.write_all(b"r").ok()?;
        let mut answer = [0u8; 1];
        self.answers.read_exact(&mut answer).ok()?;
        Some(answer[0])
    }
}

/// A command of the warm sandbox: executed at once.
extern "C" fn execute(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the warm process's `ChildArgs`, alive while it waits; only system calls
    // follow.
    unsafe { (*arg.cast::<ChildArgs>()).execute() }
}

/// A pipe, both ends closed on `execve`.
fn pipe() -> Option<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).ok()
}

/// What the warm sandbox's process needs.
struct WarmArgs {
    sandbox: ChildArgs,
    requests: c_int,
    answers: c_int,
    /// The top of the stack each command's clone starts on.
    command_top: *mut c_void,
}

/// The warm sandbox's process: the sandbox built as the floor's child builds it, then one
/// supervised spawn of `/bin/true` per request byte until the requests end.
extern "C" fn warm(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `WarmArgs` of `Warm::start`, in this process's copy of its memory.
    let args = unsafe { &*arg.cast::<WarmArgs>() };
    // SAFETY: system calls on this process's own strings and descriptors.
    unsafe {
        if args.sandbox.enter().is_none() {
            libc::_exit(127);
        }
    }
    let mut request = [0u8; 1];
    // SAFETY: reads into and writes from live one-byte buffers on this process's pipes.
    while unsafe { libc::read(args.requests, request.as_mut_ptr().cast(), 1) } == 1 {
        // SAFETY: the command runs `execute` on the stack made for it, reads only `args`,
        // and executes or exits before the clone returns (CLONE_VFORK).
        let pid = unsafe {
            libc::clone(
                execute,
                args.command_top,
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                (&raw const args.sandbox).cast_mut().cast::<c_void>(),
            )
        };
        let answer = [(pid > 0)
            .then_some(pid)
            .and_then(super::spawn::wait)
            .unwrap_or(1)];
        // SAFETY: as above.
        if unsafe { libc::write(args.answers, answer.as_ptr().cast(), 1) } != 1 {
            break;
        }
    }
    // SAFETY: ends this process without running anything of the server's.
    unsafe { libc::_exit(0) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::floor::spawn::Scratch;

    /// The warm sandbox runs command after command; one that could not be built answers
    /// nothing (the control).
    #[test]
    fn the_warm_sandbox_runs_one_command_per_request() {
        let tmp = Scratch::new("ns-warm").expect("scratch");
        let usable = super::super::namespace::start(&[c"/bin/true"], &tmp.0)
            .and_then(super::super::spawn::wait)
            == Some(0);
        if !usable {
            println!("SKIP: this process cannot make user and mount namespaces here");
            return;
        }
        let mut warm = Warm::start(&tmp.0).expect("a warm sandbox");
        assert_eq!(warm.run(), Some(0));
        assert_eq!(warm.run(), Some(0));
        let mut broken = Warm::start(&tmp.0.join("missing")).expect("its process starts");
        assert_eq!(broken.run(), None, "a sandbox never built answers nothing");
    }
}
