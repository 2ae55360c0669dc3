//! The editor's live copy of a running command's output: what a foreground `bash` read so far,
//! kept as a terminal keeps it — the last [`LIVE_OUTPUT_CAP`] bytes — with a signal that it
//! changed, for the agent loop to show the editor while the command runs (`acp::live`).
//!
//! It is only a view. The model's copy is the command's head and tail
//! ([`HeadTail`](super::output::HeadTail), [`MODEL_OUTPUT_CAP`](super::MODEL_OUTPUT_CAP)),
//! read once the command ended and unchanged by this; the session log records neither, only the
//! result. Its text follows the rule of every tool output the editor gets: UTF-8, an invalid
//! byte replaced by U+FFFD, control characters passed as data (JSON escapes them on the wire),
//! and never a character cut in two — one the bound cut at the start is left out, one still
//! arriving at the end waits for its last bytes.

use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;

use super::output::{
    HeadTail, OutputSink, last, split_at_most, truncation_marker, without_cut_char_at_start,
};

/// The most of a running command's output the editor's live copy shows: the last 64 KiB.
pub const LIVE_OUTPUT_CAP: usize = 64 * 1024;

/// The live copy of one call's output, shared between the command that writes it and the loop
/// that shows it; cheap to clone.
#[derive(Debug, Clone)]
pub struct LiveOutput(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    tail: Mutex<Tail>,
    /// Told on every push; a push while nobody waits is kept for the next wait.
    changed: Notify,
}

/// The last bytes of the output, in bounded memory.
#[derive(Debug)]
struct Tail {
    /// The last bytes; may hold up to twice `cap` between trims.
    bytes: Vec<u8>,
    cap: usize,
    /// Bytes pushed in all.
    total: u64,
    /// Whether bytes came since the copy was last taken.
    fresh: bool,
}

impl Default for LiveOutput {
    fn default() -> LiveOutput {
        LiveOutput::new()
    }
}

impl LiveOutput {
    /// An empty copy keeping the last [`LIVE_OUTPUT_CAP`] bytes.
    pub fn new() -> LiveOutput {
        LiveOutput::with_cap(LIVE_OUTPUT_CAP)
    }

    /// An empty copy keeping the last `cap` bytes.
    pub fn with_cap(cap: usize) -> LiveOutput {
        LiveOutput(Arc::new(Shared {
            tail: Mutex::new(Tail {
                bytes: Vec::new(),
                cap,
                total: 0,
                fresh: false,
            }),
            changed: Notify::new(),
        }))
    }

    /// Adds output as it arrives, and says it changed.
    pub fn push(&self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.tail().push(bytes);
        self.0.changed.notify_one();
    }

    /// Resolves once output came since the last wait (at once if some came meanwhile).
    pub async fn changed(&self) {
        self.0.changed.notified().await;
    }

    /// The copy as the editor is shown it, if output came since it was last taken and there is
    /// something to show: the last bytes as text, after a [`truncation_marker`] line for the
    /// bytes the bound left out.
    pub fn take(&self) -> Option<String> {
        let mut tail = self.tail();
        if !tail.fresh {
            return None;
        }
        tail.fresh = false;
        let text = tail.render();
        (!text.is_empty()).then_some(text)
    }

    fn tail(&self) -> std::sync::MutexGuard<'_, Tail> {
        self.0.tail.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Tail {
    fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        self.fresh = true;
        if bytes.len() >= self.cap {
            self.bytes.clear();
            self.bytes.extend_from_slice(last(bytes, self.cap));
            return;
        }
        self.bytes.extend_from_slice(bytes);
        // As in `HeadTail::push`: trim only once the excess is as large as what is kept.
        if self.bytes.len() >= 2 * self.cap {
            let excess = self.bytes.len() - self.cap;
            self.bytes.drain(..excess);
        }
    }

    fn render(&self) -> String {
        let mut window = last(&self.bytes, self.cap);
        if (window.len() as u64) < self.total {
            window = without_cut_char_at_start(window);
        }
        let omitted = self.total - window.len() as u64;
        let window = split_at_most(window, window.len() - unfinished_char(window)).0;
        let mut text = String::new();
        if omitted > 0 {
            text.push_str(&truncation_marker(omitted));
            text.push('\n');
        }
        text.push_str(&String::from_utf8_lossy(window));
        text
    }
}

/// How many bytes at the end of `bytes` start a UTF-8 character whose last bytes have not come
/// yet.
fn unfinished_char(bytes: &[u8]) -> usize {
    for (&byte, back) in bytes.iter().rev().take(3).zip(1..) {
        if byte & 0b1100_0000 == 0b1000_0000 {
            continue;
        }
        let needs = match byte {
            0xc2..=0xdf => 2,
            0xe0..=0xef => 3,
            0xf0..=0xf4 => 4,
            _ => return 0,
        };
        return if needs > back { back } else { 0 };
    }
    0
}

/// A foreground command's output as it arrives: into the model's head and tail, and into the
/// editor's live copy when the call has one.
#[derive(Debug)]
pub(crate) struct Teed {
    pub model: HeadTail,
    pub live: Option<LiveOutput>,
}

impl OutputSink for Teed {
    fn push(&mut self, bytes: &[u8]) {
        self.model.push(bytes);
        if let Some(live) = &self.live {
            live.push(bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_is_taken_only_when_output_came() {
        let live = LiveOutput::new();
        assert_eq!(live.take(), None);
        live.push(b"one\n");
        live.push(b"two\n");
        assert_eq!(live.take().as_deref(), Some("one\ntwo\n"));
        assert_eq!(live.take(), None);
        live.push(b"");
        assert_eq!(live.take(), None);
        live.push(b"three\n");
        assert_eq!(live.take().as_deref(), Some("one\ntwo\nthree\n"));
    }

    #[test]
    fn a_flood_keeps_the_last_64_kib_in_bounded_memory() {
        let live = LiveOutput::new();
        let mut all = Vec::new();
        for i in 0..2000u32 {
            let chunk = format!("line {i:05} {}\n", "x".repeat(500));
            live.push(chunk.as_bytes());
            all.extend_from_slice(chunk.as_bytes());
            assert!(live.tail().bytes.len() < 2 * LIVE_OUTPUT_CAP);
        }
        // One push larger than the bound keeps only its end.
        let big = vec![b'y'; 3 * LIVE_OUTPUT_CAP];
        live.push(&big);
        all.extend_from_slice(&big);
        assert_eq!(live.tail().bytes.len(), LIVE_OUTPUT_CAP);
        let text = live.take().expect("fresh");
        let omitted = all.len() - LIVE_OUTPUT_CAP;
        assert_eq!(
            text,
            format!(
                "[output truncated: {omitted} bytes omitted]\n{}",
                "y".repeat(LIVE_OUTPUT_CAP)
            )
        );
    }

    #[test]
    fn the_copy_is_the_tail_after_a_marker() {
        let live = LiveOutput::with_cap(8);
        live.push(b"0123456789\nabc");
        assert_eq!(
            live.take().as_deref(),
            Some("[output truncated: 6 bytes omitted]\n6789\nabc")
        );
        live.push(b"d");
        assert_eq!(
            live.take().as_deref(),
            Some("[output truncated: 7 bytes omitted]\n789\nabcd")
        );
    }

    #[test]
    fn no_character_is_cut_in_two() {
        let live = LiveOutput::new();
        // "é" (c3 a9) arriving a byte at a time: nothing to show until it is whole.
        live.push(b"caf\xc3");
        assert_eq!(live.take().as_deref(), Some("caf"));
        live.push(b"\xa9");
        assert_eq!(live.take().as_deref(), Some("café"));
        // A lone lead byte alone shows nothing yet.
        let alone = LiveOutput::new();
        alone.push(b"\xe2\x82");
        assert_eq!(alone.take(), None);
        alone.push(b"\xac");
        assert_eq!(alone.take().as_deref(), Some("€"));
        // The bound cuts "€" (e2 82 ac): its continuation bytes are left out and counted.
        let cut = LiveOutput::with_cap(4);
        cut.push("a€bc".as_bytes());
        assert_eq!(
            cut.take().as_deref(),
            Some("[output truncated: 4 bytes omitted]\nbc")
        );
    }

    #[test]
    fn invalid_bytes_are_replaced_and_controls_kept_as_data() {
        let live = LiveOutput::new();
        live.push(b"a\xffb\n\x1b]52;c;eA==\x07\x1b[2J\r\xc2\x9b");
        assert_eq!(
            live.take().as_deref(),
            Some("a\u{fffd}b\n\u{1b}]52;c;eA==\u{7}\u{1b}[2J\r\u{9b}")
        );
    }

    #[test]
    fn the_tee_feeds_the_model_and_the_live_copy_the_same_bytes() {
        let live = LiveOutput::new();
        let mut teed = Teed {
            model: HeadTail::new(100),
            live: Some(live.clone()),
        };
        teed.push(b"out\n");
        teed.push(b"err\n");
        assert_eq!(teed.model.render(), "out\nerr\n");
        assert_eq!(live.take().as_deref(), Some("out\nerr\n"));
        let mut alone = Teed {
            model: HeadTail::new(100),
            live: None,
        };
        alone.push(b"out\n");
        assert_eq!(alone.model.render(), "out\n");
    }
}
