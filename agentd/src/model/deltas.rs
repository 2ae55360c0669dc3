//! Where a provider delivers the parts of a turn while it produces it: a queue of at most
//! [`DELTAS_AHEAD`] deltas, so that a reader that falls behind holds the provider back.
//!
//! The reader is the turn, which shows each delta to the editor through the connection's
//! budget (`acp::outgoing`): when the editor stops reading, the turn waits, this queue fills,
//! and the provider waits in [`Deltas::send`] instead of reading more of the model's answer (the
//! HTTP provider stops reading its socket, and the server's writes block). Nothing is lost: the
//! provider goes on where it stopped once the reader takes the next delta.

use tokio::sync::mpsc;

use super::Delta;

/// The deltas a provider may deliver before the reader takes them.
pub const DELTAS_AHEAD: usize = 64;

/// The sending end a provider is given; [`Deltas::channel`] makes one with its reader.
#[derive(Debug)]
pub struct Deltas(Option<mpsc::Sender<Delta>>);

impl Deltas {
    /// A queue of [`DELTAS_AHEAD`] deltas and its reader. Once this end is dropped (the
    /// provider's call ended) the reader has every delta and then nothing more.
    pub fn channel() -> (Deltas, mpsc::Receiver<Delta>) {
        let (tx, rx) = mpsc::channel(DELTAS_AHEAD);
        (Deltas(Some(tx)), rx)
    }

    /// A sending end nobody reads: for a call whose parts are not shown (a child agent's, a
    /// summary), which then never waits.
    pub fn ignored() -> Deltas {
        Deltas(None)
    }

    /// Delivers `delta`, waiting while the reader is [`DELTAS_AHEAD`] behind. A reader that is
    /// gone takes nothing, and this never waits again.
    pub async fn send(&mut self, delta: Delta) {
        if let Some(tx) = &self.0
            && tx.send(delta).await.is_err()
        {
            self.0 = None;
        }
    }
}
