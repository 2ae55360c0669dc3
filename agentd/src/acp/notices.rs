//! What a session tells the person besides its turns: why it runs read-only although its mode
//! says workspace-write ([`tell_opening`], right after the `session/new` or `session/load`
//! answer), and what did not start of its MCP servers. Each is told once per opening of the
//! session ([`tell`]): a line on stderr and a message of its own to the editor
//! ([`updates::notice`]), not recorded, so a `session/load` tells again what still holds. What
//! the sandbox does not enforce is told the same way, without the line on stderr
//! ([`super::told`]).

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use confine_protocol::Mode;

use super::sessions::Session;
use super::updates;
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
}
