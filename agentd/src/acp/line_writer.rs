//! agentd's outgoing lines, written by a task of their own that joins every line already
//! queued into one write.
//!
//! The connection hands each message to the sink and waits for the sink's flush. Writing and
//! flushing stdout for each line cost two trips through tokio's blocking pool per message: a
//! `session/load` that replays 10,000 events (5,555 messages) spent most of its time there.
//! Here a send waits only for room in a bounded queue; the writer takes a line, then every line
//! queued behind it, and writes them with one `write` and one flush. Order is the queue's.
//! Closing the sink waits until the writer has written and flushed everything queued, so nothing
//! is lost when agentd ends; a failed write ends the writer, and the next send or the close
//! reports it.
//!
//! This queue alone does not hold a client that stops reading back: the ACP crate queues ahead
//! of it without bound. What does is the budget of [`Outgoing`], which every `session/update`
//! takes from before it is sent and which the writer gives back here, once the update's line is
//! written; when the writer ends it closes the budget, so that no sender waits for a client that
//! is gone. The writer's own buffer stays at [`MAX_BATCH_BYTES`]: a longer line is written from
//! where it is, so a long line leaves no large buffer behind.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::channel::mpsc;
use futures::{Sink, StreamExt};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::task::JoinHandle;

use super::outgoing::{self, Outgoing};

/// Lines queued before a send waits for the writer.
const QUEUED_LINES: usize = 256;
/// Bytes joined into one write at most: the writer's buffer (a longer line is written alone).
const MAX_BATCH_BYTES: usize = 1 << 20;

/// The sink of the lines agentd writes, one JSON-RPC message each, without line endings.
pub struct LineSink {
    queue: mpsc::Sender<String>,
    writer: Option<JoinHandle<io::Result<()>>>,
}

impl LineSink {
    /// Starts the writer of `out` on the current runtime; it gives the costs of the updates it
    /// writes back to `outgoing`.
    pub fn new<W>(out: W, outgoing: Arc<Outgoing>) -> LineSink
    where
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let (queue, lines) = mpsc::channel(QUEUED_LINES);
        LineSink {
            queue,
            writer: Some(tokio::spawn(write_lines(lines, out, outgoing))),
        }
    }

    /// Another way into the writer's queue, in order with the connection's lines: for the
    /// answers agentd's line reader gives itself (see `stdio`).
    pub fn lines(&self) -> mpsc::Sender<String> {
        self.queue.clone()
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

/// Writes every line `lines` gives, then closes `outgoing`'s budget, however it ended.
async fn write_lines<W>(
    mut lines: mpsc::Receiver<String>,
    mut out: W,
    outgoing: Arc<Outgoing>,
) -> io::Result<()>
where
    W: AsyncWrite + Unpin,
{
    let written = write_all_lines(&mut lines, &mut out, &outgoing).await;
    outgoing.close();
    written
}

/// Writes every line `lines` gives, each followed by a newline, joining those already queued up
/// to [`MAX_BATCH_BYTES`]; gives the costs of the updates back once they are written.
async fn write_all_lines<W>(
    lines: &mut mpsc::Receiver<String>,
    out: &mut W,
    outgoing: &Outgoing,
) -> io::Result<()>
where
    W: AsyncWrite + Unpin,
{
    let mut batch = Vec::with_capacity(MAX_BATCH_BYTES);
    // A line taken from the queue that did not fit in the batch: the next one starts with it.
    let mut held: Option<String> = None;
    loop {
        let line = match held.take() {
            Some(line) => line,
            None => match lines.next().await {
                Some(line) => line,
                None => return Ok(()),
            },
        };
        let mut updates = usize::from(outgoing::is_update_line(&line));
        if line.len() >= MAX_BATCH_BYTES {
            out.write_all(line.as_bytes()).await?;
            out.write_all(b"\n").await?;
        } else {
            batch.clear();
            append(&mut batch, &line);
            // Anything more queued, until the batch is full or the queue empty (or closed: its
            // rest is read at the top).
            while let Ok(next) = lines.try_recv() {
                if batch.len() + next.len() >= MAX_BATCH_BYTES {
                    held = Some(next);
                    break;
                }
                updates += usize::from(outgoing::is_update_line(&next));
                append(&mut batch, &next);
            }
            out.write_all(&batch).await?;
        }
        out.flush().await?;
        outgoing.written(updates);
    }
}

/// Adds `line` and its newline to `batch`.
fn append(batch: &mut Vec<u8>, line: &str) {
    batch.extend_from_slice(line.as_bytes());
    batch.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::SinkExt;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn every_line_arrives_in_order_and_close_waits_for_the_last() {
        let (ours, mut theirs) = tokio::io::duplex(64);
        let mut sink = LineSink::new(ours, Outgoing::unbounded());
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
    async fn lines_longer_than_a_batch_arrive_whole_and_in_order_among_short_ones() {
        let (ours, mut theirs) = tokio::io::duplex(64 * 1024);
        let mut sink = LineSink::new(ours, Outgoing::unbounded());
        let reader = tokio::spawn(async move {
            let mut text = String::new();
            theirs.read_to_string(&mut text).await.map(|_| text)
        });
        let sent: Vec<String> = (0..40)
            .map(|i| match i % 4 {
                0 => format!("{i}:{}", "L".repeat(MAX_BATCH_BYTES + i)),
                1 => format!("{i}:{}", "m".repeat(MAX_BATCH_BYTES / 2)),
                _ => format!("{i}:short"),
            })
            .collect();
        for line in &sent {
            sink.send(line.clone()).await.expect("send");
        }
        sink.close().await.expect("close");
        drop(sink);
        let text = reader.await.expect("reader").expect("read");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines, sent);
    }

    #[tokio::test]
    async fn a_reader_gone_is_an_error_not_a_hang() {
        let (ours, theirs) = tokio::io::duplex(16);
        drop(theirs);
        let mut sink = LineSink::new(ours, Outgoing::unbounded());
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
