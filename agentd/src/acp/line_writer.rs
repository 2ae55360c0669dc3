//! agentd's outgoing lines, written by a task of their own that joins every line already
//! queued into one write.
//!
//! The connection hands each message to the sink and waits for the sink's flush. Writing and
//! flushing stdout for each line cost two trips through tokio's blocking pool per message: a
//! `session/load` that replays 10,000 events (5,555 messages) spent most of its time there.
//! Here a send waits only for room in a bounded queue (so a client that stops reading still
//! holds agentd back); the writer takes a line, then every line queued behind it, and writes
//! them with one `write` and one flush. Order is the queue's. Closing the sink waits until the
//! writer has written and flushed everything queued, so nothing is lost when agentd ends; a
//! failed write ends the writer, and the next send or the close reports it.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::channel::mpsc;
use futures::{Sink, StreamExt};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::task::JoinHandle;

/// Lines queued before a send waits for the writer.
const QUEUED_LINES: usize = 256;
/// Bytes joined into one write at most (a single longer line is written whole).
const MAX_BATCH_BYTES: usize = 1 << 20;

/// The sink of the lines agentd writes, one JSON-RPC message each, without line endings.
pub struct LineSink {
    queue: mpsc::Sender<String>,
    writer: Option<JoinHandle<io::Result<()>>>,
}

impl LineSink {
    /// Starts the writer of `out` on the current runtime.
    pub fn new<W>(out: W) -> LineSink
    where
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let (queue, lines) = mpsc::channel(QUEUED_LINES);
        LineSink {
            queue,
            writer: Some(tokio::spawn(write_lines(lines, out))),
        }
    }

    /// Why the writer stopped taking lines: its own error, once it has ended.
    fn writer_gone(&mut self, cx: &mut Context<'_>) -> io::Error {
        match self.writer.as_mut().map(|w| Pin::new(w).poll(cx)) {
            Some(Poll::Ready(Ok(Err(e)))) => {
                self.writer = None;
                e
            }
            _ => ended(),
        }
    }
}

/// The error of a send after the writer has ended, when its own error is not at hand.
fn ended() -> io::Error {
    io::Error::new(
        io::ErrorKind::BrokenPipe,
        "agentd's output writer has ended",
    )
}

impl Sink<String> for LineSink {
    type Error = io::Error;

    fn poll_ready(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.queue.poll_ready(cx) {
            Poll::Ready(Ok(())) => Poll::Ready(Ok(())),
            Poll::Ready(Err(_)) => Poll::Ready(Err(self.writer_gone(cx))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn start_send(mut self: Pin<&mut Self>, line: String) -> io::Result<()> {
        self.queue.start_send(line).map_err(|_| ended())
    }

    /// Queued is as far as a flush goes: the writer writes without being asked.
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.queue.close_channel();
        let Some(writer) = self.writer.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        match Pin::new(writer).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(done) => {
                self.writer = None;
                Poll::Ready(done.unwrap_or_else(|e| Err(io::Error::other(e))))
            }
        }
    }
}

/// Writes every line `lines` gives, each followed by a newline, joining those already queued.
async fn write_lines<W>(mut lines: mpsc::Receiver<String>, mut out: W) -> io::Result<()>
where
    W: AsyncWrite + Unpin,
{
    let mut batch = Vec::new();
    while let Some(line) = lines.next().await {
        batch.clear();
        batch.extend_from_slice(line.as_bytes());
        batch.push(b'\n');
        while batch.len() < MAX_BATCH_BYTES {
            match lines.try_recv() {
                Ok(line) => {
                    batch.extend_from_slice(line.as_bytes());
                    batch.push(b'\n');
                }
                // Nothing more queued, or the queue closed (its rest is read at the top).
                _ => break,
            }
        }
        out.write_all(&batch).await?;
        out.flush().await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::SinkExt;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn every_line_arrives_in_order_and_close_waits_for_the_last() {
        let (ours, mut theirs) = tokio::io::duplex(64);
        let mut sink = LineSink::new(ours);
        let reader = tokio::spawn(async move {
            let mut text = String::new();
            theirs.read_to_string(&mut text).await.map(|_| text)
        });
        for i in 0..2_000 {
            sink.send(format!("{{\"n\":{i}}}")).await.expect("send");
        }
        sink.close().await.expect("close");
        drop(sink);
        let text = reader.await.expect("reader").expect("read");
        let lines: Vec<String> = text.lines().map(str::to_owned).collect();
        let expected: Vec<String> = (0..2_000).map(|i| format!("{{\"n\":{i}}}")).collect();
        assert_eq!(lines, expected);
        assert!(text.ends_with('\n'));
    }

    #[tokio::test]
    async fn a_reader_gone_is_an_error_not_a_hang() {
        let (ours, theirs) = tokio::io::duplex(16);
        drop(theirs);
        let mut sink = LineSink::new(ours);
        let mut failed = false;
        // The first lines may only be queued; the writer's failure reaches a later send or the
        // close.
        for _ in 0..(QUEUED_LINES * 2) {
            if sink.send("x".repeat(64)).await.is_err() {
                failed = true;
                break;
            }
        }
        if !failed {
            failed = sink.close().await.is_err();
        }
        assert!(failed, "writing to a closed reader must fail");
    }
}
