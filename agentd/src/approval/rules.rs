//! "Always" answers: what a person allowed or rejected for the rest of a session.
//!
//! A request that may be answered "always" carries its [`Scope`]: the tool, and for `bash` the
//! exact command the person was shown, and for an escalation the mode it asks for. An "always"
//! answer becomes an `approval/rule` record; from then on, a request of the same scope in the
//! same session is decided by the newest such rule without asking anyone. The rules are a fold
//! over the session's records, so they hold again after `session/load`, and nothing but a
//! person's answer, recorded by the seam, makes one.
//!
//! Scopes match exactly: a rule for `npm install` with workspace-write says nothing about
//! `npm install` with danger-full-access, about `npm install --force`, or about `npm install`
//! under the session's own mode. A rule never widens anything by itself: the escalation gate
//! (offered, strictly wider, granted by the helper's ceiling) and the policy `never` come
//! before any rule is read.

use crate::session::{Event, Record};

pub use crate::session::Scope;

/// The record of an "always" answer to request `id` for `scope`.
pub fn record(scope: &Scope, id: &str, allow: bool) -> Event {
    Event::ApprovalRule {
        id: id.to_owned(),
        scope: scope.clone(),
        allow,
    }
}

/// The rule that decides a request of `scope`, from a session's records: the newest
/// `approval/rule` of exactly that scope, as its id and whether it allows.
pub fn deciding(records: &[Record], scope: &Scope) -> Option<(String, bool)> {
    records.iter().rev().find_map(|r| match &r.event {
        Event::ApprovalRule {
            id,
            scope: rule,
            allow,
        } if rule == scope => Some((id.clone(), *allow)),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use confine_protocol::Mode;

    fn at(seq: u64, event: Event) -> Record {
        Record {
            v: crate::session::EVENT_VERSION,
            seq,
            at_ms: 0,
            agent: None,
            event,
        }
    }

    #[test]
    fn a_rule_decides_exactly_its_scope_and_the_newest_wins() {
        let install = Scope::command("bash", "npm install", Some(Mode::WorkspaceWrite));
        let records = vec![
            at(0, record(&install, "r1", true)),
            at(1, record(&Scope::tool("write_file"), "r2", false)),
        ];
        assert_eq!(deciding(&records, &install), Some(("r1".into(), true)));
        assert_eq!(
            deciding(&records, &Scope::tool("write_file")),
            Some(("r2".into(), false))
        );
        let others = [
            Scope::command("bash", "npm install", Some(Mode::DangerFullAccess)),
            Scope::command("bash", "npm install", None),
            Scope::command("bash", "npm install --force", Some(Mode::WorkspaceWrite)),
            Scope::command("bash", "npm  install", Some(Mode::WorkspaceWrite)),
            Scope::tool("edit_file"),
            Scope::tool("bash"),
        ];
        for other in &others {
            assert_eq!(deciding(&records, other), None, "{other:?}");
        }
        let mut later = records.clone();
        later.push(at(2, record(&install, "r3", false)));
        assert_eq!(deciding(&later, &install), Some(("r3".into(), false)));
    }

    #[test]
    fn a_file_rule_decides_that_one_file_for_that_tool_and_mode() {
        let notes = Scope::file("edit_file", std::path::Path::new("/srv/ws/notes.txt"), None);
        let records = vec![at(0, record(&notes, "r1", true))];
        assert_eq!(deciding(&records, &notes), Some(("r1".into(), true)));
        for other in [
            Scope::file("edit_file", std::path::Path::new("/srv/ws/other.txt"), None),
            Scope::file(
                "write_file",
                std::path::Path::new("/srv/ws/notes.txt"),
                None,
            ),
            Scope::file(
                "edit_file",
                std::path::Path::new("/srv/ws/notes.txt"),
                Some(Mode::DangerFullAccess),
            ),
            Scope::tool("edit_file"),
        ] {
            assert_eq!(deciding(&records, &other), None, "{other:?}");
        }
        assert_eq!(notes.name(), "edit_file on /srv/ws/notes.txt");
        let json = serde_json::to_value(record(&notes, "r1", true)).expect("json");
        assert_eq!(
            json,
            serde_json::json!({"type": "approval/rule", "id": "r1", "tool": "edit_file",
                               "path": "/srv/ws/notes.txt", "allow": true})
        );
        assert_eq!(
            serde_json::from_value::<Event>(json).expect("back"),
            record(&notes, "r1", true)
        );
    }

    #[test]
    fn a_scope_is_named_as_the_person_saw_it() {
        assert_eq!(
            Scope::command("bash", "npm install", Some(Mode::WorkspaceWrite)).name(),
            "`npm install` with workspace-write"
        );
        assert_eq!(
            Scope::command("bash", "make\n  all", None).name(),
            "`make all`"
        );
        assert_eq!(Scope::tool("write_file").name(), "write_file");
        let long = Scope::command("bash", &"x".repeat(100), None).name();
        assert_eq!(long.chars().count(), 62);
        assert!(long.ends_with("…`"));
    }

    #[test]
    fn the_rule_record_round_trips_through_the_log_words() {
        let rule = record(
            &Scope::command("bash", "touch f", Some(Mode::DangerFullAccess)),
            "r",
            true,
        );
        let json = serde_json::to_value(&rule).expect("json");
        assert_eq!(
            json,
            serde_json::json!({
                "type": "approval/rule", "id": "r", "tool": "bash", "command": "touch f",
                "mode": "danger-full-access", "allow": true,
            })
        );
        assert_eq!(serde_json::from_value::<Event>(json).expect("back"), rule);
        let tool_wide = record(&Scope::tool("write_file"), "w", false);
        let json = serde_json::to_value(&tool_wide).expect("json");
        assert_eq!(
            json,
            serde_json::json!({"type": "approval/rule", "id": "w", "tool": "write_file", "allow": false})
        );
        assert_eq!(
            serde_json::from_value::<Event>(json).expect("back"),
            tool_wide
        );
    }
}
