//! How `agentd run` hears SIGINT and SIGTERM: as interrupts of the job, not as the end of
//! agentd, so that the command is cancelled and its end reported.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};

use tokio::sync::mpsc;

/// Forwards SIGINT and SIGTERM of this process as interrupts for [`super::run::run_job`], and keeps the
/// number of the first one received (0 until then).
///
/// Installing the handlers replaces the default of dying at once: from here on the job decides
/// what an interrupt means (cancel the command, then report how it ended).
pub fn forward_signals() -> io::Result<(mpsc::UnboundedReceiver<()>, Arc<AtomicI32>)> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let (tx, rx) = mpsc::unbounded_channel();
    let first = Arc::new(AtomicI32::new(0));
    let received = first.clone();
    tokio::spawn(async move {
        loop {
            let signal = tokio::select! {
                Some(()) = interrupt.recv() => nix::libc::SIGINT,
                Some(()) = terminate.recv() => nix::libc::SIGTERM,
                else => return,
            };
            let _ = received.compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst);
            if tx.send(()).is_err() {
                return;
            }
        }
    });
    Ok((rx, first))
}
