//! A running command's output, shown to the editor while it runs (RFC 0011): the call's
//! [`LiveOutput`] as a `tool_call_update` of the call, at most once every [`LIVE_INTERVAL`].
//!
//! The pace: an update is sent [`LIVE_INTERVAL`] after output came that was not shown yet,
//! carrying everything that came meanwhile (coalesced), so updates of one call are at least that
//! far apart however fast the command writes, and a command that ends sooner shows only its
//! result. Each update carries the whole live copy (the last 64 KiB), since ACP's `content`
//! replaces what the call showed before; the result's update, derived from the log as always,
//! replaces it in turn. Nothing is shown once the call ended or the turn was cancelled.
//!
//! The updates are not recorded: they are progress, and what `session/load` shows of the call
//! is its result, which is also what the editor shows of it last.
//!
//! An update waits for the connection's budget like any other (`outgoing`): while the editor
//! does not read, the one due waits, the command runs on and its live copy keeps only its newest
//! bytes, so that what the editor is shown once it reads again is the copy as it is then. Each
//! update replaces the last, so none that was skipped is missed; the command is never held back
//! by the editor (its output also feeds the model's copy, and its timeout runs on).

use std::time::Duration;

use crate::cancel::Cancel;
use crate::tools::{LiveOutput, ToolResult};

/// The least time between two live updates of one call, and from the output that starts one to
/// the update.
pub const LIVE_INTERVAL: Duration = Duration::from_millis(200);

/// Runs a tool call (`call`) while showing its live output with `show`; returns the call's
/// result. `show` is never called once the call ended or `cancel` fired, and one still waiting
/// then is dropped: what the editor is shown next of the call is its result.
pub async fn showing<F, S>(
    call: F,
    live: &LiveOutput,
    cancel: &Cancel,
    mut show: impl FnMut(String) -> S,
) -> ToolResult
where
    F: Future<Output = ToolResult>,
    S: Future<Output = ()>,
{
    tokio::pin!(call);
    tokio::select! {
        biased;
        result = &mut call => return result,
        () = stream(live, cancel, LIVE_INTERVAL, &mut show) => {}
    }
    call.await
}

/// Shows `live` with `show` each time output came, `interval` after it came, until `cancel`
/// fires; never returns before. Output that comes while `show` waits is shown by the next one.
async fn stream<S: Future<Output = ()>>(
    live: &LiveOutput,
    cancel: &Cancel,
    interval: Duration,
    show: &mut impl FnMut(String) -> S,
) {
    loop {
        tokio::select! {
            biased;
            () = cancel.cancelled() => return,
            () = live.changed() => {}
        }
        tokio::select! {
            biased;
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
        if let Some(text) = live.take() {
            tokio::select! {
                biased;
                () = cancel.cancelled() => return,
                () = show(text) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! Each test runs on tokio's paused clock: the `sleep`s in a test's `driving` or `call`
    //! future are the command's own timeline (when it prints, when it ends), the input whose
    //! pace is under test; no test waits in real time, and none sleeps to let another task
    //! catch up — each assertion comes after the futures under test have ended.

    use std::sync::{Arc, Mutex};

    use tokio::time::Instant;

    use super::*;
    use crate::cancel;
    use crate::session::ToolStatus;
    use crate::tools::LIVE_OUTPUT_CAP;

    /// What was shown, each with when (from the start of the test, in the paused clock).
    type Shown = Arc<Mutex<Vec<(Duration, String)>>>;

    fn recorder(start: Instant) -> (Shown, impl FnMut(String) -> std::future::Ready<()>) {
        let shown: Shown = Arc::default();
        let log = shown.clone();
        let show = move |text: String| {
            log.lock().expect("shown").push((start.elapsed(), text));
            std::future::ready(())
        };
        (shown, show)
    }

    fn result() -> ToolResult {
        ToolResult::completed("done".to_owned(), serde_json::json!({}))
    }

    fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    #[tokio::test(start_paused = true)]
    async fn output_is_shown_an_interval_after_it_came_coalesced() {
        let start = Instant::now();
        let (shown, mut show) = recorder(start);
        let live = LiveOutput::new();
        let (canceller, cancel) = cancel::pair();
        let driving = async {
            live.push(b"one\n");
            tokio::time::sleep(ms(50)).await;
            live.push(b"two\n");
            tokio::time::sleep(ms(1000)).await;
            live.push(b"three\n");
            tokio::time::sleep(ms(1000)).await;
            canceller.cancel();
        };
        tokio::join!(stream(&live, &cancel, LIVE_INTERVAL, &mut show), driving);
        let shown = shown.lock().expect("shown").clone();
        assert_eq!(
            shown,
            [
                (ms(200), "one\ntwo\n".to_owned()),
                (ms(1250), "one\ntwo\nthree\n".to_owned()),
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_flood_is_shown_at_most_once_an_interval_and_bounded() {
        let start = Instant::now();
        let (shown, mut show) = recorder(start);
        let live = LiveOutput::new();
        let (canceller, cancel) = cancel::pair();
        let line = format!("{}\n", "z".repeat(1023));
        let driving = async {
            // 1 KiB every 5 ms for 3 s: 600 KiB.
            for _ in 0..600 {
                live.push(line.as_bytes());
                tokio::time::sleep(ms(5)).await;
            }
            canceller.cancel();
        };
        tokio::join!(stream(&live, &cancel, LIVE_INTERVAL, &mut show), driving);
        let shown = shown.lock().expect("shown").clone();
        assert!(shown.len() <= 15, "{} updates in 3 s", shown.len());
        assert!(shown.len() >= 10, "{} updates in 3 s", shown.len());
        for pair in shown.windows(2) {
            assert!(
                pair[1].0 - pair[0].0 >= LIVE_INTERVAL,
                "{:?}",
                (pair[0].0, pair[1].0)
            );
        }
        let marker = "[output truncated: ";
        let (_, last) = shown.last().expect("an update");
        assert!(last.starts_with(marker), "{}", &last[..40]);
        let body = last.split_once('\n').map_or("", |(_, body)| body);
        assert_eq!(body.len(), LIVE_OUTPUT_CAP);
        assert!(body.ends_with(&line));
    }

    #[tokio::test(start_paused = true)]
    async fn while_an_update_waits_for_the_editor_no_other_is_made_and_the_next_is_the_newest() {
        let start = Instant::now();
        let live = LiveOutput::new();
        let (canceller, cancel) = cancel::pair();
        // The editor takes an update once it reads again: when the test gives a permit.
        let reading = Arc::new(tokio::sync::Semaphore::new(0));
        let shown: Shown = Arc::default();
        // Told when the second update has been shown: the test then ends the command.
        let second = Arc::new(tokio::sync::Notify::new());
        let mut show = {
            let (shown, reading, second) = (shown.clone(), reading.clone(), second.clone());
            move |text: String| {
                let (shown, reading, second) = (shown.clone(), reading.clone(), second.clone());
                async move {
                    if let Ok(permit) = reading.acquire().await {
                        permit.forget();
                    }
                    let mut shown = shown.lock().expect("shown");
                    shown.push((start.elapsed(), text));
                    if shown.len() == 2 {
                        second.notify_one();
                    }
                }
            }
        };
        let driving = async {
            // 3 s of output, 15 intervals, while the editor does not read.
            for i in 0..600 {
                live.push(format!("line {i}\n").as_bytes());
                tokio::time::sleep(ms(5)).await;
            }
            reading.add_permits(100);
            second.notified().await;
            canceller.cancel();
        };
        tokio::join!(stream(&live, &cancel, LIVE_INTERVAL, &mut show), driving);
        let shown = shown.lock().expect("shown").clone();
        // The first, due at 200 ms, waited until the editor read at 3 s; the second came an
        // interval later with everything printed meanwhile, not the backlog of the intervals
        // it missed. (The control, an editor that
        // reads: `a_flood_is_shown_at_most_once_an_interval_and_bounded`, 10 to 15 updates.)
        assert_eq!(shown.len(), 2, "{shown:?}");
        assert_eq!(shown[0].0, ms(3000));
        assert!(shown[0].1.starts_with("line 0\n") && !shown[0].1.contains("line 41\n"));
        assert_eq!(shown[1].0, ms(3200));
        assert!(shown[1].1.starts_with("line 0\n") && shown[1].1.ends_with("line 599\n"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_command_shows_nothing() {
        let start = Instant::now();
        let (shown, mut show) = recorder(start);
        let live = LiveOutput::new();
        let (canceller, cancel) = cancel::pair();
        let driving = async {
            tokio::time::sleep(Duration::from_secs(10)).await;
            canceller.cancel();
        };
        tokio::join!(stream(&live, &cancel, LIVE_INTERVAL, &mut show), driving);
        assert!(shown.lock().expect("shown").is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancel_stops_the_stream_before_output_is_shown() {
        let start = Instant::now();
        let (shown, mut show) = recorder(start);
        let live = LiveOutput::new();
        let (canceller, cancel) = cancel::pair();
        let driving = async {
            live.push(b"one\n");
            tokio::time::sleep(ms(100)).await;
            canceller.cancel();
            live.push(b"two\n");
        };
        tokio::join!(stream(&live, &cancel, LIVE_INTERVAL, &mut show), driving);
        assert!(shown.lock().expect("shown").is_empty());
        // Also when the call goes on after the cancel (a command given its grace to end).
        let (shown, show) = recorder(start);
        let call = async {
            live.push(b"three\n");
            tokio::time::sleep(ms(1000)).await;
            result()
        };
        let ended = showing(call, &live, &cancel, show).await;
        assert_eq!(ended.status, ToolStatus::Completed);
        assert!(shown.lock().expect("shown").is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_is_shown_once_the_call_ended() {
        let start = Instant::now();
        let live = LiveOutput::new();
        // A call that ends before its output was due: only its result will show.
        let (shown, show) = recorder(start);
        let call = async {
            live.push(b"quick\n");
            tokio::time::sleep(ms(50)).await;
            result()
        };
        let ended = showing(call, &live, &Cancel::never(), show).await;
        assert_eq!(ended.text, "done");
        assert!(shown.lock().expect("shown").is_empty());
        // A call that runs on: its output shows while it runs, and nothing after it ended, not
        // even what it wrote last.
        let live = LiveOutput::new();
        let (shown, show) = recorder(start);
        let call = async {
            live.push(b"first\n");
            tokio::time::sleep(ms(500)).await;
            live.push(b"last\n");
            result()
        };
        showing(call, &live, &Cancel::never(), show).await;
        let shown = shown.lock().expect("shown").clone();
        assert_eq!(shown, [(ms(250), "first\n".to_owned())]);
    }
}
