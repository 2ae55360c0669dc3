//! The client's side of a connection until the proxy knows where it wants to go: every read
//! bounded in size and under one deadline, so that no input — too long, too slow, cut short —
//! can hold a connection slot or memory for longer than that.
//!
//! Bytes read past the handshake (a client may send its first TLS record right behind its
//! `CONNECT`) are kept and handed on with the stream.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::{Instant, timeout, timeout_at};

/// The most bytes an HTTP request head may have, the blank line included.
pub const MAX_HEAD: usize = 16 * 1024;

/// How long a client has to finish its handshake, from its first byte to the last.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long one write of the proxy's own may take: a reply to the client (an answer, a
/// refusal, an error), or what it sends the host before relaying.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// The most bytes one read of the handshake asks for.
const READ_CHUNK: usize = 4096;

/// Why a handshake could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    #[error("the client did not finish its request within {0:?}")]
    Timeout(Duration),
    #[error("the client closed the connection before its request was complete")]
    Closed,
    #[error("the request head is over {MAX_HEAD} bytes")]
    TooLarge,
    #[error("reading the client's request: {0}")]
    Io(#[source] io::Error),
}

/// A client's stream during its handshake.
#[derive(Debug)]
pub struct Handshake<S> {
    stream: S,
    /// Read and not yet taken.
    buffer: Vec<u8>,
    deadline: Instant,
    limit: Duration,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Handshake<S> {
    /// Starts the handshake's clock.
    pub fn new(stream: S, limit: Duration) -> Handshake<S> {
        Handshake {
            stream,
            buffer: Vec::new(),
            deadline: Instant::now() + limit,
            limit,
        }
    }

    /// Reads once more into the buffer.
    async fn fill(&mut self) -> Result<(), HandshakeError> {
        let mut chunk = [0u8; READ_CHUNK];
        let read = timeout_at(self.deadline, self.stream.read(&mut chunk))
            .await
            .map_err(|_| HandshakeError::Timeout(self.limit))?
            .map_err(HandshakeError::Io)?;
        if read == 0 {
            return Err(HandshakeError::Closed);
        }
        self.buffer.extend(chunk.iter().take(read));
        Ok(())
    }

    /// The next byte, left in place.
    pub async fn peek(&mut self) -> Result<u8, HandshakeError> {
        loop {
            if let Some(&byte) = self.buffer.first() {
                return Ok(byte);
            }
            self.fill().await?;
        }
    }

    /// Exactly the next `n` bytes.
    pub async fn take(&mut self, n: usize) -> Result<Vec<u8>, HandshakeError> {
        while self.buffer.len() < n {
            self.fill().await?;
        }
        Ok(self.buffer.drain(..n).collect())
    }

    /// Exactly the next `N` bytes.
    pub async fn array<const N: usize>(&mut self) -> Result<[u8; N], HandshakeError> {
        loop {
            if let Some(&out) = self.buffer.first_chunk::<N>() {
                self.buffer.drain(..N);
                return Ok(out);
            }
            self.fill().await?;
        }
    }

    /// The next byte.
    pub async fn byte(&mut self) -> Result<u8, HandshakeError> {
        let byte = self.peek().await?;
        self.buffer.remove(0);
        Ok(byte)
    }

    /// An HTTP request head: everything through the first empty line, at most [`MAX_HEAD`]
    /// bytes.
    pub async fn head(&mut self) -> Result<Vec<u8>, HandshakeError> {
        let mut searched = 0;
        loop {
            if let Some(end) = head_end(&self.buffer, searched) {
                return Ok(self.buffer.drain(..end).collect());
            }
            if self.buffer.len() >= MAX_HEAD {
                return Err(HandshakeError::TooLarge);
            }
            // The end may straddle two reads: look again from just before where the last
            // search stopped.
            searched = self.buffer.len().saturating_sub(3);
            self.fill().await?;
        }
    }

    /// Writes a reply to the client, within [`WRITE_TIMEOUT`].
    pub async fn reply(&mut self, bytes: &[u8]) -> io::Result<()> {
        let write = async {
            self.stream.write_all(bytes).await?;
            self.stream.flush().await
        };
        timeout(WRITE_TIMEOUT, write)
            .await
            .unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into()))
    }

    /// The stream and what was read of it past the handshake.
    pub fn into_parts(self) -> (S, Vec<u8>) {
        (self.stream, self.buffer)
    }
}

/// Where the head in `buffer` ends (past its empty line), looking from `from` on, if it does
/// within [`MAX_HEAD`]. A line ends in `\n`, with or without a `\r` before it.
fn head_end(buffer: &[u8], from: usize) -> Option<usize> {
    let window = buffer.chunks(MAX_HEAD).next().unwrap_or_default();
    (from..window.len()).find_map(|i| {
        let rest = window.get(i..)?;
        if rest.starts_with(b"\n\r\n") {
            Some(i + 3)
        } else if rest.starts_with(b"\n\n") {
            Some(i + 2)
        } else {
            None
        }
    })
}
