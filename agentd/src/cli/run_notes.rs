//! `agentd run`'s notes on what the sandbox denied.

use std::path::PathBuf;

use confine_protocol::{ExitStatus, Mode};

use crate::command::Facts;
use crate::denial::Kind;

/// The notes on what the sandbox denied a command run under `mode`, if anything: one per kind
/// ([`denial_note`]), then the paths denied, each with what a tool did instead when it reported
/// working around it. A command can succeed and still have been denied something (pip without
/// its cache): then the first note says that it succeeded, so that nobody reads the denial as
/// the cause of a failure.
pub(super) fn denial_notes(facts: &Facts, mode: Mode) -> Vec<String> {
    let Some(denial) = &facts.denial else {
        return Vec::new();
    };
    let succeeded = facts.exit == Some(ExitStatus::Code(0));
    let mut notes: Vec<String> = denial
        .kinds
        .iter()
        .map(|&kind| denial_note(kind, mode, &facts.unix_sockets))
        .collect();
    if succeeded && let Some(first) = notes.first_mut() {
        *first = format!("the command succeeded, but {first}");
    }
    if !denial.paths.is_empty() {
        let paths: Vec<String> = denial
            .paths
            .iter()
            .map(|path| {
                let shown = path.display();
                match denial.worked_around.iter().find(|w| &w.path == path) {
                    Some(around) => format!("{shown} ({})", around.instead),
                    None => shown.to_string(),
                }
            })
            .collect();
        notes.push(format!("denied: {}", paths.join(", ")));
    }
    notes.extend(facts.credential_notes.iter().cloned());
    notes
}

/// What the sandbox denied, and which of `agentd run`'s options would allow it; a command that
/// was let connect to `unix_sockets` has them named, since only those were reachable.
fn denial_note(kind: Kind, mode: Mode, unix_sockets: &[PathBuf]) -> String {
    let unconfined = "--mode danger-full-access runs the command unconfined";
    match kind {
        Kind::FileWrite if mode == Mode::ReadOnly => format!(
            "the sandbox denied a file write: read-only mode writes nothing (--mode \
             workspace-write makes the workspace writable, --writable-root DIR another \
             directory; {unconfined})"
        ),
        Kind::FileWrite => format!(
            "the sandbox denied a file write outside the writable roots (--writable-root DIR \
             adds one, as do sandbox.writable_roots and sandbox.cache in agentd.toml; \
             {unconfined})"
        ),
        Kind::ProtectedPath => format!(
            "the sandbox denied a write to a protected path (git metadata, .agentd, or a \
             protected path of --protect, sandbox.protected or .agentd/config.toml), read-only \
             in every confined mode ({unconfined})"
        ),
        Kind::FileRead => format!(
            "the sandbox denied a file read (sandbox.deny_read, --deny-read and the built-in \
             credential stores that sandbox.lift_deny_read does not lift deny some paths in \
             every confined mode; {unconfined})"
        ),
        Kind::Network => "the sandbox denied network access (--network allow permits it; \
                          --local-binding permits loopback sockets inside the sandbox)"
            .into(),
        Kind::Socket if unix_sockets.is_empty() => format!(
            "the sandbox denied a Unix socket: confined commands may connect only to those \
             sandbox.unix_sockets or --unix-socket PATH names, none here ({unconfined})"
        ),
        Kind::Socket => {
            let named: Vec<String> = unix_sockets
                .iter()
                .map(|s| s.display().to_string())
                .collect();
            format!(
                "the sandbox denied a Unix socket: confined commands may connect only to those \
                 sandbox.unix_sockets or --unix-socket PATH names, here {} ({unconfined})",
                named.join(", ")
            )
        }
        Kind::SystemInterface => format!(
            "the sandbox denied a system interface: Unix sockets, tracing, mounts and the like \
             are filtered in every confined mode ({unconfined})"
        ),
    }
}
