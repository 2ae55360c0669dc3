//! A session's sandbox mode: the `sandbox/mode` event, its fold and its one write path.
//!
//! The mode a tool call runs under is [`effective`]: the last `sandbox/mode` event of the
//! session, or else the configured default. Nothing else is kept anywhere: a restarted agentd
//! finds the same mode by replaying the log, and one session's switch cannot reach another
//! session, whose log does not hold it. [`set`] is the only code that appends the event.

use confine_protocol::Mode;

use crate::session::{Event, LogError, Record, SessionLog};

/// The session's sandbox mode: the last `sandbox/mode` event in `records`, else `default`.
pub fn effective(records: &[Record], default: Mode) -> Mode {
    records
        .iter()
        .rev()
        .find_map(|r| match r.event {
            Event::SandboxModeSet { mode } => Some(mode),
            _ => None,
        })
        .unwrap_or(default)
}

/// Switches the session to `mode`: appends `sandbox/mode` unless `mode` already is the effective
/// one (a no-op records nothing). Returns whether it appended.
pub fn set(log: &dyn SessionLog, default: Mode, mode: Mode) -> Result<bool, LogError> {
    if effective(&log.records(), default) == mode {
        return Ok(false);
    }
    log.append(Event::SandboxModeSet { mode }, true)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::MemoryLog;

    #[test]
    fn the_effective_mode_is_the_last_switch_or_the_default() {
        let log = MemoryLog::new();
        assert_eq!(effective(&log.records(), Mode::ReadOnly), Mode::ReadOnly);
        log.push(Event::SandboxModeSet {
            mode: Mode::WorkspaceWrite,
        });
        log.push(Event::TurnStarted { turn: 1 });
        assert_eq!(
            effective(&log.records(), Mode::ReadOnly),
            Mode::WorkspaceWrite
        );
        log.push(Event::SandboxModeSet {
            mode: Mode::DangerFullAccess,
        });
        assert_eq!(
            effective(&log.records(), Mode::ReadOnly),
            Mode::DangerFullAccess
        );
    }

    #[test]
    fn the_write_path_appends_a_switch_and_records_nothing_for_a_no_op() {
        let log = MemoryLog::new();
        assert!(!set(&log, Mode::ReadOnly, Mode::ReadOnly).expect("set"));
        assert_eq!(log.records().len(), 1, "only the header");
        assert!(set(&log, Mode::ReadOnly, Mode::WorkspaceWrite).expect("set"));
        assert!(!set(&log, Mode::ReadOnly, Mode::WorkspaceWrite).expect("set"));
        assert!(set(&log, Mode::ReadOnly, Mode::ReadOnly).expect("set"));
        let modes: Vec<Mode> = log
            .records()
            .iter()
            .filter_map(|r| match r.event {
                Event::SandboxModeSet { mode } => Some(mode),
                _ => None,
            })
            .collect();
        assert_eq!(modes, [Mode::WorkspaceWrite, Mode::ReadOnly]);
    }

    #[test]
    fn the_event_is_spelt_with_the_configuration_words() {
        let event = Event::SandboxModeSet {
            mode: Mode::WorkspaceWrite,
        };
        let json = serde_json::to_value(&event).expect("json");
        assert_eq!(
            json,
            serde_json::json!({"type": "sandbox/mode", "mode": "workspace-write"})
        );
        assert_eq!(serde_json::from_value::<Event>(json).expect("parse"), event);
        let bad = serde_json::json!({"type": "sandbox/mode", "mode": "yolo"});
        assert!(serde_json::from_value::<Event>(bad).is_err());
    }
}
