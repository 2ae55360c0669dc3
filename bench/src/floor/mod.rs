//! The floors the benchmark's rows are read against: the least work each section's guarantees
//! need, done by a process of the benchmark's own (`agentd-bench --floor-server`), which the
//! benchmark asks for each command as agentd asks the helper, and which answers once the
//! command has ended. The floors:
//!
//! - **supervised spawn** (`spawn.rs`): the request, the command started by `clone(CLONE_VM |
//!   CLONE_VFORK)` (no memory copied) with nothing done before its `execve`, its `wait`, the
//!   answer. No policy, no supervisor of the tree;
//! - **Landlock** (`spawn.rs`): the same, the command entering a Landlock ruleset built for the
//!   request (read and execute everywhere, no write) under `no_new_privs` before it executes.
//!   No seccomp filter: the helper's read-only filter adds its load on top (RFC 0023, step 3);
//! - **namespaces** (`namespace.rs`): the bwrap backend's namespaces and read-only mounts, made
//!   by the command's own process with the kernel's mount API;
//! - **a warm sandbox** (`warm.rs`): those namespaces and mounts made once, each command a
//!   supervised spawn inside;
//! - **64 at once**: 64 of the Landlock floor's commands, or 64 sandboxes of the namespace
//!   floor's, all started before any is waited for (the concurrent section's floors);
//! - **a confined write** (`write.rs`): the file tools' floor;
//! - **one process** (`agentd-bench --floor-once BYTE`): one of the above in a program started
//!   for it, the whole-process section's floors.
//!
//! The requests and answers are one byte each, on the server's stdin and stdout.

use std::io::{Read, Write};
use std::process::ExitCode;

mod namespace;
mod spawn;
mod warm;
mod write;

pub(crate) use spawn::landlock_abi;
use spawn::{CONCURRENT, Scratch, TRUE, landlock_start, landlocked, many, run, wait};

/// The argument that makes `agentd-bench` this server.
pub const SERVER_ARG: &str = "--floor-server";
/// The request byte of a supervised spawn.
pub const SPAWN: u8 = b's';
/// The request byte of a spawn under Landlock.
pub const LANDLOCK: u8 = b'l';
/// The request byte of [`CONCURRENT`] spawns under Landlock at once.
pub const MANY_LANDLOCK: u8 = b'm';
/// The request byte of a spawn in namespaces of its own (`namespace.rs`).
pub const NAMESPACES: u8 = b'n';
/// The request byte of [`CONCURRENT`] spawns in namespaces of their own at once.
pub const MANY_NAMESPACES: u8 = b'N';
/// The request byte of a spawn in the warm sandbox (`warm.rs`).
pub const WARM: u8 = b'W';
/// The request byte of a file written by a process under Landlock (`write.rs`).
pub const WRITE: u8 = b'w';
/// The argument that makes `agentd-bench` run one floor command and end.
pub const ONCE_ARG: &str = "--floor-once";
/// The answer when the command could not be run or did not succeed.
const FAILED: u8 = 1;

/// Serves requests on stdin until it closes; the benchmark runs it as `--floor-server DIR`,
/// `DIR` the writable directory of the floors that need one (the benchmark's, which it removes:
/// the server is killed when the benchmark is done with it, and removes nothing itself).
pub fn serve(dir: Option<&std::ffi::OsStr>) -> ExitCode {
    let Some(tmp) = dir.map(std::path::Path::new).filter(|d| d.is_dir()) else {
        return ExitCode::FAILURE;
    };
    let mut warm: Option<warm::Warm> = None;
    let mut input = std::io::stdin().lock();
    let mut output = std::io::stdout().lock();
    let mut request = [0u8; 1];
    while input.read_exact(&mut request).is_ok() {
        let answer = match request[0] {
            WARM => warm_run(&mut warm, tmp),
            other => answer(other, tmp),
        };
        let Some(answer) = answer else {
            return ExitCode::FAILURE;
        };
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

/// One command in the warm sandbox, made at the first request.
fn warm_run(warm: &mut Option<warm::Warm>, tmp: &std::path::Path) -> Option<u8> {
    if warm.is_none() {
        *warm = warm::Warm::start(tmp);
    }
    Some(warm.as_mut().and_then(|w| w.run()).unwrap_or(FAILED))
}

/// One floor command, by its request byte, in a process of its own: `agentd-bench
/// --floor-once BYTE`, the whole-process section's floors (a program started that confines a
/// command, waits for it and ends).
pub fn once(request: Option<&std::ffi::OsStr>) -> ExitCode {
    let request = request.and_then(|r| match r.as_encoded_bytes() {
        [byte] => Some(*byte),
        _ => None,
    });
    let Ok(tmp) = Scratch::new("once") else {
        return ExitCode::FAILURE;
    };
    match request.and_then(|r| answer(r, &tmp.0)) {
        Some(0) => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    }
}

/// The answer to `request`, with `tmp` as the writable directory of the floors that need one;
/// `None` for an unknown request.
fn answer(request: u8, tmp: &std::path::Path) -> Option<u8> {
    let answer = match request {
        SPAWN => run(None, &[TRUE]),
        LANDLOCK => landlocked(&[TRUE]),
        MANY_LANDLOCK => many(|| landlock_start(&[TRUE])),
        NAMESPACES => namespace::start(&[TRUE], tmp).and_then(wait),
        MANY_NAMESPACES => namespace::run_many(CONCURRENT, tmp),
        WRITE => write::write(tmp),
        _ => return None,
    };
    Some(answer.unwrap_or(FAILED))
}

/// The floors' server as the benchmark sees it: a child `agentd-bench --floor-server`, asked
/// over its stdin and answered on its stdout.
pub struct Server {
    _child: tokio::process::Child,
    input: tokio::process::ChildStdin,
    output: tokio::process::ChildStdout,
}

impl Server {
    /// Starts the server with `dir` (made here, under the run's scratch, which the run
    /// removes) as the floors' writable directory.
    pub fn start(dir: &std::path::Path) -> Result<Server, crate::error::BenchError> {
        let exe = std::env::current_exe().map_err(|e| fail!("the benchmark's own path: {e}"))?;
        std::fs::create_dir_all(dir).map_err(|e| fail!("cannot create {}: {e}", dir.display()))?;
        let mut child = tokio::process::Command::new(exe)
            .arg(SERVER_ARG)
            .arg(dir)
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

    /// One command (or [`CONCURRENT`]) of the floor `request`, until it has ended.
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
