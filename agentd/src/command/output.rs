//! A command's output: the pipes it writes into, and the copying of what comes out of them to
//! wherever it goes (agentd's own streams, or a tool's buffer), keeping the end of stderr.

use std::io;
use std::os::fd::OwnedFd;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::unix::pipe;

use super::STDERR_TAIL;

/// One read from the command's pipes: a whole default Linux pipe buffer.
const READ_CHUNK: usize = 64 * 1024;

/// The most output gathered into one write to the sink.
const WRITE_BATCH: usize = 1024 * 1024;

/// Copies a pipe to a sink as the bytes come, until end-of-file, keeping the last
/// [`STDERR_TAIL`] bytes in `tail` if given. If the sink fails (say, a closed pipe downstream),
/// the read end is closed too, so the command gets SIGPIPE just as it would in a shell pipeline.
///
/// Reads are [`READ_CHUNK`] bytes; whatever is waiting in the pipe is gathered and written in
/// one batch (up to [`WRITE_BATCH`]), because each write to tokio's stdout costs a round trip to a
/// blocking thread. The sink is flushed before waiting on an empty pipe, so a buffering sink
/// never holds back output while the command pauses.
pub(crate) async fn copy_output<W>(from: pipe::Receiver, to: &mut W, mut tail: Option<&mut Vec<u8>>)
where
    W: AsyncWrite + Unpin,
{
    let mut batch = vec![0u8; WRITE_BATCH];
    loop {
        let (len, state) = gather(&from, &mut batch);
        // A read never reports more bytes than it was given room for.
        let Some(gathered) = batch.get(..len) else {
            return;
        };
        if !gathered.is_empty() {
            if let Some(tail) = tail.as_deref_mut() {
                keep_tail(tail, gathered);
            }
            if to.write_all(gathered).await.is_err() {
                return;
            }
        }
        match state {
            // More is waiting; only give other work in this task its turn now and then.
            Gathered::Full => tokio::task::coop::consume_budget().await,
            Gathered::Dry => {
                let readable = from.readable();
                tokio::pin!(readable);
                // Flushing costs a round trip, so only pay it when the wait is real.
                let ready = tokio::select! {
                    biased;
                    ready = &mut readable => ready,
                    () = std::future::ready(()) => {
                        if to.flush().await.is_err() {
                            return;
                        }
                        readable.await
                    }
                };
                if let Err(e) = ready {
                    eprintln!("agentd: reading the command's output failed: {e}");
                    return;
                }
            }
            Gathered::Ended => {
                let _ = to.flush().await;
                return;
            }
            Gathered::Failed(e) => {
                eprintln!("agentd: reading the command's output failed: {e}");
                let _ = to.flush().await;
                return;
            }
        }
    }
}

/// Why [`gather`] stopped.
enum Gathered {
    /// The batch is full.
    Full,
    /// Nothing more is waiting in the pipe.
    Dry,
    /// End-of-file: every writer closed the pipe.
    Ended,
    Failed(io::Error),
}

/// Reads what the pipe holds into `batch` without waiting.
fn gather(from: &pipe::Receiver, batch: &mut [u8]) -> (usize, Gathered) {
    let mut len = 0;
    // The room left, one read's worth at a time; none once the batch is full.
    while let Some(room) = batch
        .get_mut(len..)
        .and_then(|left| left.chunks_mut(READ_CHUNK).next())
    {
        match from.try_read(room) {
            Ok(0) => return (len, Gathered::Ended),
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return (len, Gathered::Dry),
            Err(e) => return (len, Gathered::Failed(e)),
        }
    }
    (len, Gathered::Full)
}

fn keep_tail(tail: &mut Vec<u8>, bytes: &[u8]) {
    let last = bytes.rchunks(STDERR_TAIL).next().unwrap_or_default();
    tail.extend_from_slice(last);
    let excess = tail.len().saturating_sub(STDERR_TAIL);
    tail.drain(..excess);
}

/// A pipe for one of the command's output streams: agentd's read end, and the write end that
/// goes to the helper with the request.
pub(crate) fn output_pipe() -> io::Result<(pipe::Receiver, OwnedFd)> {
    let (read, write) = cloexec_pipe()?;
    Ok((pipe::Receiver::from_owned_fd(read)?, write))
}

/// An output pipe of `agentd run`'s one command, made as large as the system lets a user make
/// one: each copy to agentd's own stream then carries what the command wrote meanwhile (up to
/// 1 MiB rather than 64 KiB), so a fast writer costs far fewer trips. Only for the one command
/// of `agentd run`: pipes a user holds count against a per-user budget
/// (`/proc/sys/fs/pipe-user-pages-soft`), which many concurrent commands would exhaust for the
/// user's other programs. Best effort: a refused size leaves the default.
pub(crate) fn wide_output_pipe() -> io::Result<(pipe::Receiver, OwnedFd)> {
    let (read, write) = cloexec_pipe()?;
    #[cfg(target_os = "linux")]
    let _ = nix::fcntl::fcntl(&read, nix::fcntl::FcntlArg::F_SETPIPE_SZ(WIDE_PIPE_BYTES));
    Ok((pipe::Receiver::from_owned_fd(read)?, write))
}

/// The capacity asked for a wide output pipe: the default `/proc/sys/fs/pipe-max-size`.
#[cfg(target_os = "linux")]
const WIDE_PIPE_BYTES: nix::libc::c_int = 1 << 20;

/// A pipe for a command's stdin: the read end to hand to confine-helper, and agentd's
/// writing end. Both close on exec.
pub(crate) fn input_pipe() -> io::Result<(OwnedFd, pipe::Sender)> {
    let (read, write) = cloexec_pipe()?;
    Ok((read, pipe::Sender::from_owned_fd(write)?))
}

#[cfg(not(target_vendor = "apple"))]
fn cloexec_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?)
}

// No pipe2 on Apple systems. agentd starts no process but the helper, and only from the async
// runtime, so the window between pipe and fcntl is not raced by a fork of our own.
#[cfg(target_vendor = "apple")]
fn cloexec_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    let (read, write) = nix::unistd::pipe()?;
    for fd in [&read, &write] {
        fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
    }
    Ok((read, write))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stderr_tail_keeps_the_last_8_kib() {
        let mut tail = Vec::new();
        keep_tail(&mut tail, &[b'a'; 6000]);
        keep_tail(&mut tail, &[b'b'; 6000]);
        assert_eq!(tail.len(), STDERR_TAIL);
        assert_eq!(tail[..STDERR_TAIL - 6000], [b'a'; STDERR_TAIL - 6000]);
        assert!(tail[STDERR_TAIL - 6000..].iter().all(|&b| b == b'b'));
        keep_tail(&mut tail, &[b'c'; 70_000]);
        assert_eq!(tail, vec![b'c'; STDERR_TAIL]);
    }
}
