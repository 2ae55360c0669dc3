//! Bytes both ways between a client and the host it reached, until both sides have finished
//! or nothing has moved either way for the idle timeout.
//!
//! The two directions run on their own, so that neither waits for the other (both sides of a
//! TLS or HTTP/2 connection may write at once); one side's end of sending is passed on as a
//! shutdown of the other's writing, and the other direction goes on (a client that has sent
//! its request still reads the answer). An error either way ends both.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::{Instant, sleep_until};

/// How long a relayed connection may be silent both ways before the proxy ends it: long, so
/// that a slow build's download is not cut, but not forever.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// The buffer of one direction.
const BUFFER: usize = 16 * 1024;

/// Why a relay ended other than by both sides finishing.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error("nothing moved either way for {0:?}")]
    Idle(Duration),
    #[error("relaying: {0}")]
    Io(#[source] io::Error),
}

/// When something last moved, in milliseconds since the relay began.
#[derive(Debug)]
struct Activity {
    start: Instant,
    last: AtomicU64,
}

impl Activity {
    fn touch(&self) {
        let elapsed = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(elapsed, Ordering::Relaxed);
    }

    /// Returns once nothing has moved for `idle`.
    async fn idle_for(&self, idle: Duration) {
        loop {
            let last = self.start + Duration::from_millis(self.last.load(Ordering::Relaxed));
            if Instant::now() >= last + idle {
                return;
            }
            sleep_until(last + idle).await;
        }
    }
}

/// Relays between `a` and `b` until both have finished sending, one fails, or nothing moves
/// for `idle`.
pub async fn relay<A, B>(a: A, b: B, idle: Duration) -> Result<(), RelayError>
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let activity = Activity {
        start: Instant::now(),
        last: AtomicU64::new(0),
    };
    let (a_read, a_write) = tokio::io::split(a);
    let (b_read, b_write) = tokio::io::split(b);
    let both = futures::future::try_join(
        pump(a_read, b_write, &activity),
        pump(b_read, a_write, &activity),
    );
    tokio::select! {
        ended = both => ended.map(|_| ()).map_err(RelayError::Io),
        () = activity.idle_for(idle) => Err(RelayError::Idle(idle)),
    }
}

/// One direction: what `from` sends goes to `to`, and its end becomes `to`'s shutdown.
async fn pump<R, W>(mut from: R, mut to: W, activity: &Activity) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buffer = vec![0u8; BUFFER];
    loop {
        let read = from.read(&mut buffer).await?;
        if read == 0 {
            // The other side may have gone already, and then cannot be told: this direction
            // is over either way.
            let _ = to.shutdown().await;
            return Ok(());
        }
        activity.touch();
        // A read never reports more bytes than it was given room for.
        let (chunk, _) = buffer
            .split_at_checked(read)
            .ok_or(io::ErrorKind::InvalidData)?;
        to.write_all(chunk).await?;
        to.flush().await?;
        activity.touch();
    }
}

#[cfg(test)]
#[path = "relay_tests.rs"]
mod tests;
