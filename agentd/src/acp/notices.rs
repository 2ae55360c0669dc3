//! What a session tells the person besides its turns: why it runs read-only although its mode
//! says workspace-write ([`tell_opening`], right after the `session/new` or `session/load`
//! answer), what did not start of its MCP servers, and what its sandbox does not enforce
//! ([`enforcement`], before the first result that shows it). Each is told once per opening of
//! the session ([`tell`]): a line on stderr and a message of its own to the editor
//! ([`updates::notice`]), not recorded, so a `session/load` tells again what still holds.

use std::collections::HashSet;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::SessionUpdate;
use confine_protocol::Mode;

use super::sessions::Session;
use super::{shown, updates};
use crate::composition::Composition;
use crate::knobs::sandbox;
use crate::session::Record;

/// Why a session whose log and configuration (`default`) say workspace-write runs read-only,
/// for the editor: `None` unless its workspace is why (`composition` refuses workspace-write
/// for it).
pub(super) fn opening(
    composition: &Composition,
    records: &[Record],
    default: Mode,
) -> Option<String> {
    let why = composition.workspace_refusal()?;
    (sandbox::effective(records, default) == Mode::WorkspaceWrite).then(|| {
        format!("This session runs read-only, although its sandbox mode is workspace-write: {why}.")
    })
}

/// Tells the editor of a session just opened why it runs read-only although its mode says
/// workspace-write; nothing otherwise.
pub(super) async fn tell_opening(session: &Session, cx: &ConnectionTo<Client>) {
    let notice = session.with_records(|records| {
        opening(session.tools.composition(), records, session.defaults.mode)
    });
    if let Some(notice) = notice {
        tell(session, WORKSPACE, &[notice], cx).await;
    }
}

/// The kind of the notice of [`tell_opening`].
const WORKSPACE: &str = "workspace";
/// The kind of the notice of what the MCP servers did not do.
pub(super) const MCP: &str = "mcp";
/// The kind of the notice of what the sandbox does not enforce.
const ENFORCEMENT: &str = "enforcement";

/// Tells the person `notices` of `session`, of `kind`, once: a line each on stderr, one
/// message of its own to the editor.
pub(super) async fn tell(
    session: &Session,
    kind: &str,
    notices: &[String],
    cx: &ConnectionTo<Client>,
) {
    if notices.is_empty() {
        return;
    }
    for notice in notices {
        eprintln!("agentd: session {}: {notice}", session.id);
    }
    let text = format!("{}\n", notices.join("\n"));
    let _ = session.show(cx, updates::notice(kind, kind, &text)).await;
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

/// [`enforcement`]'s notice as the editor is shown it before the result of call `call_id`, and
/// as a line on stderr.
pub(super) fn enforcement_update(session_id: &str, call_id: &str, text: &str) -> SessionUpdate {
    eprintln!("agentd: session {session_id}: {}", text.trim_end());
    updates::notice(ENFORCEMENT, &format!("{ENFORCEMENT}-{call_id}"), text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::helper_client::WorkspaceRefusal;
    use crate::session::Event;
    use crate::session::SessionLog;
    use crate::test_support::MemoryLog;

    #[test]
    fn the_opening_notice_says_why_workspace_write_runs_read_only_and_only_then() {
        let log = MemoryLog::new();
        let home = Composition::everything().for_workspace(Some(WorkspaceRefusal::Root));
        let notice = opening(&home, &log.records(), Mode::WorkspaceWrite).expect("told");
        assert!(
            notice.starts_with(
                "This session runs read-only, although its sandbox mode is workspace-write: the \
                 workspace / would make the whole file system writable"
            ),
            "{notice}"
        );
        assert_eq!(opening(&home, &log.records(), Mode::ReadOnly), None);
        assert_eq!(opening(&home, &log.records(), Mode::DangerFullAccess), None);
        log.push(Event::SandboxModeSet {
            mode: Mode::WorkspaceWrite,
        });
        assert!(
            opening(&home, &log.records(), Mode::ReadOnly).is_some(),
            "a logged switch"
        );
        // The control: the same log in a workspace that may be writable.
        let project = Composition::everything();
        assert_eq!(
            opening(&project, &log.records(), Mode::WorkspaceWrite),
            None
        );
    }

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
