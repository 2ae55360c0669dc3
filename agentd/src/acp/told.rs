//! What the sandbox does not enforce, told once per opening of a session: the gaps of a call's
//! enforcement are those of the session's mode and roots, the same for every call under them,
//! so the person reads them once, in plain words, in a notice of its own before the first
//! result that shows them, and again only for a gap not told yet (RFC 0009). A `session/load`
//! tells again, before the first replayed result that shows them.

use std::collections::HashSet;
use std::sync::Mutex;

use agent_client_protocol::v1::schema::SessionUpdate;

use super::{shown, updates};
use crate::session::fold::ReplayItem;

/// The kind of the notice of what the sandbox does not enforce (`_meta.agentd.notice`).
pub const ENFORCEMENT: &str = "enforcement";

/// The enforcement gaps a session's person was told of since the session was opened.
#[derive(Debug, Default)]
pub struct ToldGaps(Mutex<HashSet<String>>);

impl ToldGaps {
    /// The notice to show before `item`, when it is a result with a gap not told yet. Not
    /// written on stderr: it is news for the person at the client, not a problem of the agent's
    /// setup (`agentd exec` prints it there itself).
    pub fn notice(&self, item: &ReplayItem) -> Option<SessionUpdate> {
        let ReplayItem::ToolResult { call_id, facts, .. } = item else {
            return None;
        };
        let mut told = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let text = enforcement(facts, &mut told)?;
        Some(updates::notice(
            ENFORCEMENT,
            &format!("{ENFORCEMENT}-{call_id}"),
            &text,
        ))
    }
}

/// The notice of what the sandbox did not enforce for a call (its `facts`), naming only the
/// gaps not yet in `told`, which it then holds; `None` when the call's enforcement was full or
/// every gap was told. The sandbox's gaps are those of the session's mode and roots, the same
/// for every call under them, so a person reads them once rather than on every result.
pub(super) fn enforcement(facts: &serde_json::Value, told: &mut HashSet<String>) -> Option<String> {
    let (backend, gaps) = shown::enforcement_gaps(facts)?;
    let new: Vec<&str> = gaps
        .into_iter()
        .filter(|gap| told.insert((*gap).to_owned()))
        .collect();
    if new.is_empty() {
        return None;
    }
    let lines: Vec<String> = new
        .iter()
        .map(|gap| format!("- {}.", shown::plain_gap(gap)))
        .collect();
    Some(format!(
        "The sandbox ({backend}) does not enforce everything in this session:\n{}\n",
        lines.join("\n")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_sandbox_does_not_enforce_is_told_once_then_only_what_is_new() {
        let facts = |missing: &[&str]| {
            serde_json::json!({
                "backend": "landlock",
                "enforcement": {"level": "partial", "missing": missing, "layers": ["landlock"]},
            })
        };
        let mut told = HashSet::new();
        let repository = "repository /ws/.git: there is none yet, so a command can create one";
        let first = enforcement(&facts(&[repository]), &mut told).expect("told first");
        assert_eq!(
            first,
            "The sandbox (landlock) does not enforce everything in this session:\n- a command \
             could create a git repository at /ws/.git (there is none yet), and git run there \
             later would use its config and hooks.\n"
        );
        assert_eq!(enforcement(&facts(&[repository]), &mut told), None, "once");
        let ioctl = "ioctl on devices (Landlock ABI < 5)";
        let second = enforcement(&facts(&[repository, ioctl]), &mut told).expect("a new gap");
        assert!(
            second.ends_with(":\n- ioctl on devices (Landlock ABI < 5).\n"),
            "{second}"
        );
        // The control: a fresh opening tells again.
        assert!(enforcement(&facts(&[repository]), &mut HashSet::new()).is_some());
    }
}
