//! What a model reads from a command: its output cut to size, then the markers saying how the
//! command ended, each on its own line, `[exit code: N]` always last.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use confine_protocol::{ExitStatus, Mode, Stage};

use crate::helper_client::FailedAt;
use tokio::io::AsyncWrite;

use crate::command::{self, Facts, RunnerFailure};
use crate::denial::{Denial, Kind};

/// The most of a command's output a model reads in one result: the first and last halves are
/// kept, the middle is replaced by [`truncation_marker`].
pub const MODEL_OUTPUT_CAP: usize = 30_000;

/// The most unread output a background task keeps; older unread output is dropped first.
pub const BACKGROUND_OUTPUT_CAP: usize = 1024 * 1024;

/// The line standing for `omitted` bytes of output left out.
pub fn truncation_marker(omitted: u64) -> String {
    format!("[output truncated: {omitted} bytes omitted]")
}

/// The line saying the confinement denied an access of `kind` under `mode`: `[sandbox: <what>
/// denied under <mode> mode]`, `<what>` in the words of [`denied_access`].
pub fn denial_marker(kind: Kind, mode: Mode) -> String {
    let what = denied_access(kind, mode);
    format!("[sandbox: {what} denied under {} mode]", mode.as_str())
}

/// What the confinement denied, in words: an access of `kind` under `mode`.
pub fn denied_access(kind: Kind, mode: Mode) -> &'static str {
    match kind {
        Kind::FileWrite if mode == Mode::ReadOnly => "file write",
        Kind::FileWrite => "file write outside the writable roots",
        Kind::ProtectedPath => "file write to git metadata",
        Kind::FileRead => "file read",
        Kind::Network => "network access",
        Kind::Socket => "Unix socket",
        Kind::SystemInterface => "system interface (Unix sockets, tracing, mounts and the like)",
    }
}

/// How every [`escalation_hint`] starts: the line is an instruction to the model, and the
/// editor is shown a line for a person instead (see `acp::shown`).
pub const ESCALATION_HINT_PREFIX: &str = "[sandbox: escalation available — ";

/// The line after the denial markers when an escalation can lift the denial: which of the
/// `granted` modes to ask for (the narrowest that lifts it), and for a denial no file mode
/// lifts, why only danger-full-access does. `None` when no granted mode lifts it: no lever is
/// offered that the helper would not pull.
pub(crate) fn escalation_hint(denial: &Denial, granted: &[Mode]) -> Option<String> {
    let retry = "retry this exact command once with sandbox_permissions";
    let asks = "the approval prompt asks the user";
    let Some(needed) = denial.lifted_by else {
        let choice = match granted {
            [] => return None,
            [Mode::WorkspaceWrite] => "(workspace-write, if it writes only inside the workspace)",
            [Mode::DangerFullAccess] => "\"danger-full-access\"",
            _ => {
                "(workspace-write if it writes only inside the workspace, else danger-full-access)"
            }
        };
        return Some(format!(
            "{ESCALATION_HINT_PREFIX}{retry} {choice} + justification; {asks}]"
        ));
    };
    let mode = granted.iter().copied().filter(|m| *m >= needed).min()?;
    Some(match (needed, mode) {
        (Mode::WorkspaceWrite, Mode::WorkspaceWrite) => format!(
            "{ESCALATION_HINT_PREFIX}the denied writes are inside the workspace: {retry} \
             \"workspace-write\" + justification; {asks}]"
        ),
        (Mode::DangerFullAccess, _) => {
            let what: Vec<&str> = denial
                .kinds
                .iter()
                .map(|kind| match kind {
                    Kind::FileWrite => "these file writes",
                    Kind::ProtectedPath => "writes to git metadata",
                    Kind::FileRead => "this read",
                    Kind::Network => "network access",
                    Kind::Socket => "this Unix socket",
                    Kind::SystemInterface => "these system interfaces",
                })
                .collect();
            let network = if denial.kinds.contains(&Kind::Network) {
                " (no file mode does: the network is denied in every confined mode while the \
                 configuration's sandbox.network is \"deny\")"
            } else {
                ""
            };
            format!(
                "{ESCALATION_HINT_PREFIX}only danger-full-access allows {}{network}: {retry} \
                 \"danger-full-access\" + justification if the task needs it; {asks}]",
                what.join(" and ")
            )
        }
        (_, mode) => format!(
            "{ESCALATION_HINT_PREFIX}{retry} \"{}\" + justification; {asks}]",
            mode.as_str()
        ),
    })
}

/// The exit marker: `[exit code: N]`.
pub fn exit_marker(code: i32) -> String {
    format!("[exit code: {code}]")
}

/// A command's exit code as shells report it: its own code, or 128+N for signal N.
pub fn exit_code(status: ExitStatus) -> i32 {
    match status {
        ExitStatus::Code(code) => code,
        ExitStatus::Signal(signal) => 128 + signal,
    }
}

/// Where a command's output goes while it runs.
pub(crate) trait OutputSink: Send {
    fn push(&mut self, bytes: &[u8]);
}

/// An [`AsyncWrite`] over a shared [`OutputSink`], so stdout and stderr can be copied into one
/// buffer as they arrive (with [`command::copy_output`]).
pub(crate) struct Collector(pub Arc<Mutex<dyn OutputSink>>);

impl AsyncWrite for Collector {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// The head and the tail of a stream of bytes, in bounded memory: the first `cap / 2` bytes
/// and the last `cap - cap / 2`; everything in between is only counted.
#[derive(Debug)]
pub(crate) struct HeadTail {
    head: Vec<u8>,
    head_cap: usize,
    /// The bytes after the head; may hold up to twice `tail_cap` between trims.
    tail: Vec<u8>,
    tail_cap: usize,
    /// Bytes pushed in all.
    total: u64,
}

impl HeadTail {
    pub fn new(cap: usize) -> HeadTail {
        let head_cap = cap / 2;
        HeadTail {
            head: Vec::new(),
            head_cap,
            tail: Vec::new(),
            tail_cap: cap - head_cap,
            total: 0,
        }
    }

    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let room = self.head_cap - self.head.len();
        let (into_head, rest) = split_at_most(bytes, room);
        self.head.extend_from_slice(into_head);
        bytes = rest;
        if bytes.len() >= self.tail_cap {
            self.tail.clear();
            self.tail.extend_from_slice(last(bytes, self.tail_cap));
            return;
        }
        self.tail.extend_from_slice(bytes);
        // Trimming moves the kept bytes, so only do it once the excess is as large as them.
        if self.tail.len() >= 2 * self.tail_cap {
            let excess = self.tail.len() - self.tail_cap;
            self.tail.drain(..excess);
        }
    }

    /// The text: everything if it fits, else the head, [`truncation_marker`] on its own line,
    /// and the tail. Invalid UTF-8 is replaced; a character cut at either edge of the omitted
    /// part is left out and counted as omitted.
    pub fn render(&self) -> String {
        let kept_tail = last(&self.tail, self.tail_cap);
        let kept = (self.head.len() + kept_tail.len()) as u64;
        if kept == self.total {
            let mut all = self.head.clone();
            all.extend_from_slice(kept_tail);
            return String::from_utf8_lossy(&all).into_owned();
        }
        let head = without_cut_char_at_end(&self.head);
        let tail = without_cut_char_at_start(kept_tail);
        let omitted = self.total - head.len() as u64 - tail.len() as u64;
        let mut text = String::from_utf8_lossy(head).into_owned();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&truncation_marker(omitted));
        text.push('\n');
        text.push_str(&String::from_utf8_lossy(tail));
        text
    }
}

impl OutputSink for HeadTail {
    fn push(&mut self, bytes: &[u8]) {
        HeadTail::push(self, bytes);
    }
}

/// `bytes` cut after its first `n` bytes: those, and the rest (all of it and nothing when it
/// has no more than `n`).
pub(super) fn split_at_most(bytes: &[u8], n: usize) -> (&[u8], &[u8]) {
    bytes.split_at_checked(n).unwrap_or((bytes, &[]))
}

/// The last `n` bytes of `bytes` (all of it when it has no more).
pub(super) fn last(bytes: &[u8], n: usize) -> &[u8] {
    split_at_most(bytes, bytes.len().saturating_sub(n)).1
}

/// `bytes` without a UTF-8 sequence cut short at its end.
fn without_cut_char_at_end(bytes: &[u8]) -> &[u8] {
    match std::str::from_utf8(bytes) {
        Err(e) if e.error_len().is_none() => split_at_most(bytes, e.valid_up_to()).0,
        _ => bytes,
    }
}

/// `bytes` without the continuation bytes of a UTF-8 sequence whose start was cut off.
pub(super) fn without_cut_char_at_start(bytes: &[u8]) -> &[u8] {
    let cut = bytes
        .iter()
        .take(3)
        .take_while(|&&b| b & 0b1100_0000 == 0b1000_0000)
        .count();
    split_at_most(bytes, cut).1
}

/// A background task's output not read yet, at most `cap` bytes: when more arrives before it
/// is read, the oldest unread bytes are dropped and counted.
#[derive(Debug)]
pub(crate) struct Spool {
    unread: Vec<u8>,
    dropped: u64,
    cap: usize,
}

impl Spool {
    pub fn new(cap: usize) -> Spool {
        Spool {
            unread: Vec::new(),
            dropped: 0,
            cap,
        }
    }

    pub fn push(&mut self, bytes: &[u8]) {
        self.unread.extend_from_slice(bytes);
        // As in `HeadTail::push`: trim only once the excess is as large as what is kept.
        if self.unread.len() >= 2 * self.cap {
            self.trim();
        }
    }

    fn trim(&mut self) {
        let excess = self.unread.len().saturating_sub(self.cap);
        self.unread.drain(..excess);
        self.dropped += excess as u64;
    }

    /// Everything unread, rendered as a model reads it (at most [`MODEL_OUTPUT_CAP`] bytes,
    /// with a [`truncation_marker`] first for what was dropped unread), and marks it read.
    pub fn take_text(&mut self) -> String {
        self.trim();
        let mut view = HeadTail::new(MODEL_OUTPUT_CAP);
        view.push(&self.unread);
        let mut text = String::new();
        if self.dropped > 0 {
            text.push_str(&truncation_marker(self.dropped));
            text.push('\n');
        }
        text.push_str(&view.render());
        self.unread.clear();
        self.dropped = 0;
        text
    }
}

/// What a model reads about how the command ended, after its output: one line per marker.
///
/// A command that ran gets, in this order: the shell's message when the command could not be
/// executed, `[terminated by signal N]`, `[timed out after N ms]`, `[cancelled]`, a
/// [`denial_marker`] per kind denied, then the [`escalation_hint`] when one of the modes in
/// `escalation` lifts the denial and the command did not succeed (one that exited 0 worked
/// around what it was denied, as pip does without its cache: retrying it with more access fixes
/// nothing), and last [`exit_marker`]. A command that did not run gets `[cancelled]` if it was,
/// then the refusal or runner-failure text ([`runner_failure_text`]) and no exit marker; a
/// runner failure outranks a denial.
pub(crate) fn end_markers(
    facts: &Facts,
    mode: Mode,
    timeout_ms: Option<u64>,
    program: &str,
    escalation: &[Mode],
) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(reason) = &facts.refused {
        lines.push(format!("[sandbox: refused: {reason}]"));
        return lines;
    }
    if let Some(failure) = &facts.runner_failure {
        if facts.cancelled {
            lines.push("[cancelled]".to_owned());
        }
        lines.push(runner_failure_text(failure, facts.started, mode));
        return lines;
    }
    let Some(status) = facts.exit else {
        // Nothing ran and nothing failed: only a cancel before the start does that.
        lines.push("[cancelled: the command was not started]".to_owned());
        return lines;
    };
    if let Some(errno) = facts.exec_errno {
        lines.push(command::exec_failure_note(program, errno));
    }
    if let ExitStatus::Signal(signal) = status {
        lines.push(format!("[terminated by signal {signal}]"));
    }
    if facts.timed_out {
        match timeout_ms {
            Some(ms) => lines.push(format!("[timed out after {ms} ms]")),
            None => lines.push("[timed out]".to_owned()),
        }
    }
    if facts.cancelled {
        lines.push("[cancelled]".to_owned());
    }
    lines.extend(facts.caps_reached_notes().iter().map(|n| format!("[{n}]")));
    if let Some(denial) = &facts.denial {
        lines.extend(denial.kinds.iter().map(|&kind| denial_marker(kind, mode)));
        lines.extend(
            facts
                .credential_notes
                .iter()
                .map(|n| format!("[sandbox: {n}]")),
        );
        if status != ExitStatus::Code(0) {
            lines.extend(escalation_hint(denial, escalation));
        }
    }
    lines.push(exit_marker(exit_code(status)));
    lines
}

/// Whether the command ran and exited 0 by itself.
pub(crate) fn succeeded(facts: &Facts) -> bool {
    facts.exit == Some(ExitStatus::Code(0))
        && facts.runner_failure.is_none()
        && facts.refused.is_none()
        && !facts.timed_out
        && !facts.cancelled
}

/// The output followed by the lines, each on its own line.
pub(crate) fn join(output: &str, lines: &[String]) -> String {
    let mut text = output.to_owned();
    for line in lines {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(line);
    }
    text
}

/// What a model reads when the sandbox runner failed, so the command's own outcome is unknown
/// or it did not run at all: never a denial, always said to be a sandbox problem.
pub(crate) fn runner_failure_text(failure: &RunnerFailure, started: bool, mode: Mode) -> String {
    let mode = mode.as_str();
    if failure.stage == FailedAt::Step(Stage::Unavailable) {
        return format!(
            "[sandbox unavailable: this command was to run in {mode} mode, but no usable sandbox \
             backend exists on this machine, and agentd refuses to run it unconfined — the \
             command did not run. To fix: {}, or switch the session to danger-full-access to run \
             commands without confinement.]\nRunner failure: {}",
            crate::composition::install_hint(),
            failure.detail
        );
    }
    let marker = if started && failure.stage == FailedAt::HelperExited {
        format!(
            "[sandbox: the sandbox runner itself failed under {mode} mode while the command was \
             running — its outcome is unknown; this is a sandbox problem, not a command failure]"
        )
    } else {
        format!(
            "[sandbox: the sandbox runner itself failed under {mode} mode — the command did not \
             run; this is a sandbox problem, not a command failure]"
        )
    };
    format!(
        "{marker}\nRunner failure: {}",
        command::runner_failure_note(failure, started)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use confine_protocol::{Backend, Enforcement};

    fn ran(status: ExitStatus) -> Facts {
        Facts {
            exit: Some(status),
            backend: Some(Backend::Bwrap),
            enforcement: Some(Enforcement::Full),
            started: true,
            ..Facts::default()
        }
    }

    fn markers(facts: &Facts) -> Vec<String> {
        end_markers(facts, Mode::ReadOnly, Some(5000), "bash", &[])
    }

    const BOTH: &[Mode] = &[Mode::WorkspaceWrite, Mode::DangerFullAccess];
    const DFA: &[Mode] = &[Mode::DangerFullAccess];

    #[test]
    fn a_denied_read_of_a_built_in_credential_store_says_so_and_how_to_lift_it() {
        let scratch = crate::test_support::Scratch::new("output-credential");
        let home = scratch.0.canonicalize().expect("home");
        std::fs::create_dir(home.join(".ssh")).expect("mkdir");
        let key = home.join(".ssh/id_rsa");
        std::fs::write(&key, "key").expect("key");
        let mut policy = crate::helper_client::SpawnSpec::new(["cat"]).policy;
        policy.mode = Mode::ReadOnly;
        policy.workspace_root = Some(home.join("ws").as_os_str().as_encoded_bytes().to_vec());
        let stderr = format!("cat: {}: Permission denied\n", key.display());
        let judged = |credentials: Vec<crate::credentials::Credential>| {
            let mut scope = crate::denial::Scope::of(&home, &policy);
            scope.credentials = credentials;
            let facts = Facts {
                backend: Some(Backend::Landlock),
                ..ran(ExitStatus::Code(1))
            };
            markers(&facts.with_stderr_tail(stderr.clone().into_bytes(), &scope))
        };
        let lines = judged(crate::credentials::resolve(&home, &[]));
        let note = format!(
            "[sandbox: {} is a credential store (SSH private keys) kept unreadable by default; \
             to let commands read it, add lift_deny_read = [\"~/.ssh/*\"] to [sandbox] in \
             agentd.toml]",
            key.display()
        );
        assert_eq!(
            lines,
            [
                "[sandbox: file read denied under read-only mode]".to_owned(),
                note,
                "[exit code: 1]".to_owned(),
            ]
        );
        // The control: the same denial of a path no built-in entry in force denies (lifted).
        let lifted = judged(crate::credentials::resolve(&home, &["~/.ssh/*"]));
        assert_eq!(
            lifted,
            [
                "[sandbox: file read denied under read-only mode]",
                "[exit code: 1]"
            ]
        );
    }

    fn denied(kinds: &[Kind], lifted_by: Option<Mode>) -> Facts {
        Facts {
            denial: Some(Denial {
                kinds: kinds.to_vec(),
                lifted_by,
                paths: Vec::new(),
                worked_around: Vec::new(),
            }),
            ..ran(ExitStatus::Code(2))
        }
    }

    #[test]
    fn short_output_is_kept_whole() {
        let mut out = HeadTail::new(10);
        out.push(b"0123");
        out.push(b"456789");
        assert_eq!(out.render(), "0123456789");
    }

    #[test]
    fn long_output_keeps_head_and_tail_with_the_count_between() {
        let mut out = HeadTail::new(10);
        for chunk in [&b"abc"[..], b"defgh", b"ijklmnopqrstuvwxyz"] {
            out.push(chunk);
        }
        assert_eq!(
            out.render(),
            "abcde\n[output truncated: 16 bytes omitted]\nvwxyz"
        );
    }

    #[test]
    fn many_small_pushes_give_the_same_cut_as_one_large() {
        let data: Vec<u8> = (0..100_000u32).map(|i| b'a' + (i % 26) as u8).collect();
        let mut whole = HeadTail::new(MODEL_OUTPUT_CAP);
        whole.push(&data);
        let mut pieces = HeadTail::new(MODEL_OUTPUT_CAP);
        for chunk in data.chunks(7) {
            pieces.push(chunk);
        }
        assert_eq!(whole.render(), pieces.render());
        let text = whole.render();
        assert!(text.contains("\n[output truncated: 70000 bytes omitted]\n"));
        assert_eq!(
            text.len(),
            30_000 + "\n[output truncated: 70000 bytes omitted]\n".len()
        );
    }

    #[test]
    fn a_character_cut_at_the_edges_is_counted_as_omitted() {
        let mut out = HeadTail::new(6);
        // "ab" + "é" (2 bytes) | ... | "€" (3 bytes) + "z": cut inside both.
        out.push("abéxxxxxxxxx€z".as_bytes());
        let text = out.render();
        assert!(!text.contains('\u{fffd}'), "{text}");
        assert!(text.starts_with("ab\n[output truncated: "), "{text}");
        assert!(text.ends_with("]\nz"), "{text}");
        // 17 bytes in all, 3 kept.
        assert!(
            text.contains("[output truncated: 14 bytes omitted]"),
            "{text}"
        );
    }

    #[test]
    fn the_spool_keeps_the_newest_unread_output() {
        let mut spool = Spool::new(8);
        spool.push(b"0123456789");
        spool.push(b"abcdefghij");
        assert_eq!(
            spool.take_text(),
            "[output truncated: 12 bytes omitted]\ncdefghij"
        );
        assert_eq!(spool.take_text(), "");
        spool.push(b"xy");
        assert_eq!(spool.take_text(), "xy");
    }

    #[test]
    fn a_clean_exit_has_only_the_exit_marker() {
        assert_eq!(markers(&ran(ExitStatus::Code(0))), ["[exit code: 0]"]);
        assert!(succeeded(&ran(ExitStatus::Code(0))));
        assert!(!succeeded(&ran(ExitStatus::Code(1))));
    }

    #[test]
    fn a_denial_comes_right_before_the_exit_marker() {
        let facts = denied(&[Kind::FileWrite], Some(Mode::WorkspaceWrite));
        assert_eq!(
            markers(&facts),
            [
                "[sandbox: file write denied under read-only mode]",
                "[exit code: 2]"
            ]
        );
    }

    #[test]
    fn the_marker_names_the_kind_of_denial() {
        let cases = [
            (
                Kind::FileWrite,
                Mode::WorkspaceWrite,
                "[sandbox: file write outside the writable roots denied under workspace-write \
                 mode]",
            ),
            (
                Kind::ProtectedPath,
                Mode::WorkspaceWrite,
                "[sandbox: file write to git metadata denied under workspace-write mode]",
            ),
            (
                Kind::FileRead,
                Mode::ReadOnly,
                "[sandbox: file read denied under read-only mode]",
            ),
            (
                Kind::Network,
                Mode::WorkspaceWrite,
                "[sandbox: network access denied under workspace-write mode]",
            ),
            (
                Kind::SystemInterface,
                Mode::ReadOnly,
                "[sandbox: system interface (Unix sockets, tracing, mounts and the like) denied \
                 under read-only mode]",
            ),
        ];
        for (kind, mode, marker) in cases {
            assert_eq!(denial_marker(kind, mode), marker);
        }
    }

    #[test]
    fn each_kind_gets_its_marker_and_one_hint_follows_them_when_escalation_is_offered() {
        let facts = denied(
            &[Kind::FileWrite, Kind::Network],
            Some(Mode::DangerFullAccess),
        );
        let lines = end_markers(&facts, Mode::WorkspaceWrite, None, "bash", DFA);
        assert_eq!(
            lines,
            [
                "[sandbox: file write outside the writable roots denied under workspace-write \
                 mode]",
                "[sandbox: network access denied under workspace-write mode]",
                "[sandbox: escalation available — only danger-full-access allows these file \
                 writes and network access (no file mode does: the network is denied in every \
                 confined mode while the configuration's sandbox.network is \"deny\"): retry \
                 this exact command once with sandbox_permissions \"danger-full-access\" + \
                 justification if the task needs it; the approval prompt asks the user]",
                "[exit code: 2]",
            ]
        );
        let without = end_markers(&facts, Mode::WorkspaceWrite, None, "bash", &[]);
        assert_eq!(without.len(), 3, "{without:?}");
        assert!(!without.iter().any(|l| l.contains("escalation")));
        assert_eq!(
            end_markers(
                &ran(ExitStatus::Code(1)),
                Mode::ReadOnly,
                None,
                "bash",
                BOTH
            ),
            ["[exit code: 1]"]
        );
    }

    #[test]
    fn a_command_that_succeeded_despite_a_denial_gets_the_marker_but_no_hint_and_succeeded() {
        let facts = Facts {
            exit: Some(ExitStatus::Code(0)),
            ..denied(&[Kind::FileWrite], Some(Mode::DangerFullAccess))
        };
        assert_eq!(
            end_markers(&facts, Mode::WorkspaceWrite, None, "bash", BOTH),
            [
                "[sandbox: file write outside the writable roots denied under workspace-write \
                 mode]",
                "[exit code: 0]",
            ]
        );
        assert!(succeeded(&facts));
    }

    #[test]
    fn the_hint_names_the_narrowest_granted_mode_that_lifts_the_denial() {
        let hint = |kinds: &[Kind], lifted_by, granted: &[Mode]| {
            let facts = denied(kinds, lifted_by);
            escalation_hint(facts.denial.as_ref().expect("denied"), granted)
        };
        assert_eq!(
            hint(&[Kind::FileWrite], Some(Mode::WorkspaceWrite), BOTH).as_deref(),
            Some(
                "[sandbox: escalation available — the denied writes are inside the workspace: \
                 retry this exact command once with sandbox_permissions \"workspace-write\" + \
                 justification; the approval prompt asks the user]"
            )
        );
        let git = hint(&[Kind::ProtectedPath], Some(Mode::DangerFullAccess), DFA).expect("a hint");
        assert!(
            git.contains("only danger-full-access allows writes to git metadata: retry"),
            "{git}"
        );
        assert!(!git.contains("network"), "{git}");
        assert_eq!(
            hint(&[Kind::FileWrite], None, BOTH).as_deref(),
            Some(
                "[sandbox: escalation available — retry this exact command once with \
                 sandbox_permissions (workspace-write if it writes only inside the workspace, \
                 else danger-full-access) + justification; the approval prompt asks the user]"
            )
        );
        // No lever the helper would not pull: a ceiling of workspace-write grants nothing that
        // lifts a network denial, and nothing at all is no hint at all.
        assert_eq!(
            hint(
                &[Kind::Network],
                Some(Mode::DangerFullAccess),
                &[Mode::WorkspaceWrite]
            ),
            None
        );
        assert_eq!(hint(&[Kind::FileWrite], None, &[]), None);
        assert_eq!(
            hint(&[Kind::FileWrite], None, &[Mode::WorkspaceWrite]).as_deref(),
            Some(
                "[sandbox: escalation available — retry this exact command once with \
                 sandbox_permissions (workspace-write, if it writes only inside the workspace) \
                 + justification; the approval prompt asks the user]"
            )
        );
    }

    #[test]
    fn a_signal_is_reported_with_128_plus_n() {
        assert_eq!(
            markers(&ran(ExitStatus::Signal(9))),
            ["[terminated by signal 9]", "[exit code: 137]"]
        );
    }

    #[test]
    fn a_timeout_names_the_limit() {
        let mut facts = ran(ExitStatus::Signal(15));
        facts.timed_out = true;
        assert_eq!(
            markers(&facts),
            [
                "[terminated by signal 15]",
                "[timed out after 5000 ms]",
                "[exit code: 143]"
            ]
        );
        assert!(!succeeded(&facts));
    }

    #[test]
    fn a_cancel_is_reported_before_the_exit_marker() {
        let mut facts = ran(ExitStatus::Signal(15));
        facts.cancelled = true;
        assert_eq!(
            markers(&facts),
            [
                "[terminated by signal 15]",
                "[cancelled]",
                "[exit code: 143]"
            ]
        );
    }

    #[test]
    fn an_exec_failure_reads_like_a_shell() {
        let mut facts = ran(ExitStatus::Code(127));
        facts.exec_errno = Some(nix::libc::ENOENT);
        assert_eq!(
            markers(&facts),
            ["bash: command not found", "[exit code: 127]"]
        );
    }

    #[test]
    fn an_unavailable_sandbox_says_why_and_how_to_fix_and_is_never_a_denial() {
        let facts = Facts {
            runner_failure: Some(RunnerFailure {
                stage: FailedAt::Step(Stage::Unavailable),
                errno: 0,
                detail: "no usable sandbox backend".to_owned(),
            }),
            // Even if something claimed so: the runner failure wins.
            denial: Some(Denial {
                kinds: vec![Kind::FileWrite],
                lifted_by: None,
                paths: Vec::new(),
                worked_around: Vec::new(),
            }),
            ..Facts::default()
        };
        let lines = markers(&facts);
        assert_eq!(lines.len(), 1);
        let text = &lines[0];
        assert!(text.starts_with("[sandbox unavailable: "), "{text}");
        assert!(text.contains("read-only mode"), "{text}");
        assert!(text.contains("refuses to run it unconfined"), "{text}");
        assert!(text.contains("danger-full-access"), "{text}");
        assert!(
            text.ends_with("\nRunner failure: no usable sandbox backend"),
            "{text}"
        );
        assert!(!text.contains("denied under"), "{text}");
        assert!(!text.contains("[exit code"), "{text}");
    }

    #[test]
    fn another_runner_failure_is_a_sandbox_problem_with_its_detail() {
        let facts = Facts {
            runner_failure: Some(RunnerFailure {
                stage: FailedAt::Step(Stage::Namespace),
                errno: nix::libc::EPERM,
                detail: "unshare failed".to_owned(),
            }),
            ..Facts::default()
        };
        let lines = end_markers(&facts, Mode::WorkspaceWrite, None, "bash", DFA);
        assert_eq!(
            lines,
            [
                "[sandbox: the sandbox runner itself failed under workspace-write mode — the \
                 command did not run; this is a sandbox problem, not a command failure]\n\
                 Runner failure: the sandbox runner failed at stage namespace (Operation not \
                 permitted): unshare failed; the command did not run"
            ]
        );
    }

    #[test]
    fn a_refusal_names_the_reason() {
        let facts = Facts {
            refused: Some("mode above the ceiling".to_owned()),
            ..Facts::default()
        };
        assert_eq!(
            markers(&facts),
            ["[sandbox: refused: mode above the ceiling]"]
        );
        assert!(!succeeded(&facts));
    }

    #[test]
    fn markers_go_on_their_own_lines_after_the_output() {
        let lines = vec!["[exit code: 0]".to_owned()];
        assert_eq!(join("", &lines), "[exit code: 0]");
        assert_eq!(join("x\n", &lines), "x\n[exit code: 0]");
        assert_eq!(join("x", &lines), "x\n[exit code: 0]");
        let two = vec!["[a]".to_owned(), "[b]".to_owned()];
        assert_eq!(join("x", &two), "x\n[a]\n[b]");
    }
}
