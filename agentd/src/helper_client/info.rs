//! Asking the helper what it is and which backends it can use (`Info`), and keeping its
//! verdicts for the next helper ([`VerdictCache`]): after a command, or right behind one.

use std::sync::atomic::Ordering;

use confine_protocol::HelperInfo;

use super::{ClientError, Connection, HelperClient, InfoAnswer, Lost, taken};

impl HelperClient {
    /// Asks the helper what it is and which backends it can use on this machine.
    pub async fn info(&self) -> Result<HelperInfo, ClientError> {
        let (_, answer) = self.submit(Connection::submit_info).await?;
        self.learnt(answer).await
    }

    /// The helper's answer to an `Info`, learnt by the verdict cache.
    async fn learnt(&self, answer: InfoAnswer) -> Result<HelperInfo, ClientError> {
        match answer.await {
            Ok(Ok(info)) => {
                if let Some(cache) = self.verdict_cache() {
                    cache.learn(&info);
                }
                Ok(info)
            }
            Ok(Err(reason)) => Err(ClientError::ConnectionLost(reason)),
            Err(_) => Err(ClientError::ConnectionLost(Lost::Unanswered)),
        }
    }

    /// Sends an `Info` right after the next request, on its connection, so that
    /// [`HelperClient::learn_verdicts`] finds the answer there instead of asking after the
    /// request: one exchange with the helper fewer at the end of a run. Only with a verdict
    /// cache, the only user of the answer.
    pub fn learn_verdicts_with_next_request(&self) {
        if self.verdict_cache().is_some() {
            self.inner.ask_with_next.store(true, Ordering::Relaxed);
        }
    }

    /// Asks the live helper for its verdicts, so that the next helper skips its probe: for a
    /// caller that sends no `Info` of its own (`agentd run`), once its command has ended (or
    /// with its request, [`HelperClient::learn_verdicts_with_next_request`]). Also
    /// when hints were sent: the helper takes no hint whose fingerprint is not its own (a
    /// helper or bwrap upgraded since, say) and probes instead, and only its answer replaces
    /// the stale entries; the file is rewritten only when they change. The helper answers from
    /// the verdicts it holds, probing only a backend it was neither hinted nor has tried. A
    /// helper that cannot answer only costs the next helper a probe.
    pub async fn learn_verdicts(&self) {
        let cache = self.verdict_cache();
        // An answer from before a backend failed to build a command's confinement (which
        // dropped the entries) is older than that failure: it is not learnt, and the helper
        // is asked again, as without the early `Info`.
        let asked = taken(&self.inner.asked).filter(|(_, forgotten)| {
            cache.as_ref().map(|c| c.times_forgotten()) == Some(*forgotten)
        });
        if let Some((answer, _)) = asked {
            let _ = self.learnt(answer).await;
        } else if cache.is_some() && self.live_connection().is_some() {
            let _ = self.info().await;
        }
    }
}
