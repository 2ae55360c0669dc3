//! One cancellation signal per prompt turn, shared by the model call, the tools and the
//! permission waits: cancelling it once reaches every holder, and late holders see it too.

use tokio::sync::watch;

/// The side that cancels.
#[derive(Debug, Clone)]
pub struct Canceller(watch::Sender<bool>);

/// The side that is cancelled: cheap to clone, awaitable, and checkable without waiting.
#[derive(Debug, Clone)]
pub struct Cancel(watch::Receiver<bool>);

/// A fresh, not yet cancelled, pair.
pub fn pair() -> (Canceller, Cancel) {
    let (tx, rx) = watch::channel(false);
    (Canceller(tx), Cancel(rx))
}

impl Canceller {
    /// Cancels every [`Cancel`] of this pair, now and later.
    pub fn cancel(&self) {
        self.0.send_replace(true);
    }

    /// A receiving side for one more holder.
    pub fn subscribe(&self) -> Cancel {
        Cancel(self.0.subscribe())
    }
}

impl Cancel {
    /// A signal that is never cancelled.
    pub fn never() -> Cancel {
        // With its sender gone the channel can never say "cancelled".
        let (_, rx) = watch::channel(false);
        Cancel(rx)
    }

    pub fn is_cancelled(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once cancelled; never resolves if the canceller is gone without cancelling.
    pub async fn cancelled(&self) {
        let mut rx = self.0.clone();
        if rx.wait_for(|c| *c).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn cancelling_reaches_every_holder_including_late_ones() {
        let (canceller, cancel) = pair();
        let early = cancel.clone();
        assert!(!early.is_cancelled());
        let waiter = tokio::spawn(async move { early.cancelled().await });
        canceller.cancel();
        waiter.await.expect("the waiter woke");
        assert!(canceller.subscribe().is_cancelled());
        assert!(cancel.is_cancelled());
    }

    #[tokio::test]
    async fn a_dropped_canceller_never_fires() {
        let (canceller, cancel) = pair();
        drop(canceller);
        assert!(!cancel.is_cancelled());
        let outcome =
            tokio::time::timeout(std::time::Duration::from_millis(20), cancel.cancelled()).await;
        assert!(outcome.is_err());
    }
}
