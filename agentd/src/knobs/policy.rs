//! A session's approval policy, `ask` or `never`: the `approval/policy` event, its fold, its
//! one write path, and what the model is told about it.
//!
//! The effective policy is [`effective`]: the last `approval/policy` event of the session, or
//! else the configured default. As for the sandbox mode, nothing else is kept: replay gives a
//! restarted agentd the same policy, and a session's switch never reaches another session.
//!
//! The model is told the policy in every request by [`section`], which always carries a marker
//! (`<!-- agentd-approval-policy:ask -->`) and, under `never`, a sentence telling the model that
//! approval prompts are disabled. The section is part of the instructions logged with each
//! `model/request`, so what the model was last told is [`told`] from the log. When the policy
//! differs from that, the next request carries a [`notice`] saying so, once.

use crate::session::{Event, LogError, Record, SessionLog};
use crate::words::ApprovalPolicy;

/// The session's approval policy: the last `approval/policy` event in `records`, else `default`.
pub fn effective(records: &[Record], default: ApprovalPolicy) -> ApprovalPolicy {
    records
        .iter()
        .rev()
        .find_map(|r| match r.event {
            Event::ApprovalPolicySet { policy } => Some(policy),
            _ => None,
        })
        .unwrap_or(default)
}

/// Switches the session to `policy`: appends `approval/policy` unless `policy` already is the
/// effective one (a no-op records nothing). Returns whether it appended.
pub fn set(
    log: &dyn SessionLog,
    default: ApprovalPolicy,
    policy: ApprovalPolicy,
) -> Result<bool, LogError> {
    if effective(&log.records(), default) == policy {
        return Ok(false);
    }
    log.append(Event::ApprovalPolicySet { policy }, true)?;
    Ok(true)
}

const MARKER_START: &str = "<!-- agentd-approval-policy:";
const MARKER_END: &str = " -->";

/// What the model is told under `never`.
pub const NEVER_TEXT: &str = "Approval prompts are disabled in this session: actions that \
    require approval are rejected automatically — do not request sandbox escalation (do not set \
    `sandbox_permissions`).";

/// The marker that records, in the logged instructions, which policy the model was told.
pub fn marker(policy: ApprovalPolicy) -> String {
    format!("{MARKER_START}{}{MARKER_END}", policy.as_str())
}

/// The instructions' section about the policy: the marker, and under `never` what it means.
/// Under `ask` there is nothing to say beyond the marker: a prompt simply reaches the user.
pub fn section(policy: ApprovalPolicy) -> String {
    match policy {
        ApprovalPolicy::Ask => marker(policy),
        ApprovalPolicy::Never => format!("{}\n{NEVER_TEXT}", marker(policy)),
    }
}

/// The policy the last marker in `instructions` names, if any.
pub fn told(instructions: &str) -> Option<ApprovalPolicy> {
    let start = instructions.rfind(MARKER_START)? + MARKER_START.len();
    let rest = &instructions[start..];
    rest[..rest.find(MARKER_END)?].parse().ok()
}

/// The notice for the next model request when the policy is now `current` but the model was
/// last told something else: `The approval policy changed from "<told>" to "<current>"
/// (<cause>).`, where the cause is the user if an `approval/policy` event was recorded since
/// that request, and the operator's configuration otherwise (the default changed while the
/// session was not running).
///
/// Silent when the model was never told (the first request of a session, or a log from before
/// the marker existed) and when the policy is back to what it was told (switches that cancel
/// out). Several switches since the last request make one notice, from what it was told to what
/// is now.
pub fn notice(records: &[Record], current: ApprovalPolicy) -> Option<String> {
    let (last_request, instructions) =
        records
            .iter()
            .enumerate()
            .rev()
            .find_map(|(i, r)| match &r.event {
                Event::ModelRequest { instructions, .. } => Some((i, instructions)),
                _ => None,
            })?;
    let was = told(instructions)?;
    if was == current {
        return None;
    }
    let by_user = records
        .iter()
        .skip(last_request)
        .any(|r| matches!(r.event, Event::ApprovalPolicySet { .. }));
    let cause = if by_user {
        "changed by the user"
    } else {
        "changed by the operator/config"
    };
    Some(format!(
        "The approval policy changed from \"{}\" to \"{}\" ({cause}).",
        was.as_str(),
        current.as_str()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::MemoryLog;

    use ApprovalPolicy::{Ask, Never};

    fn request(log: &MemoryLog, told: ApprovalPolicy) {
        log.push(Event::ModelRequest {
            turn: 1,
            step: 1,
            model: "scripted".into(),
            instructions: format!("You are agentd.\n\n{}", section(told)),
            tools: vec![],
        });
    }

    fn switch(log: &MemoryLog, policy: ApprovalPolicy) {
        log.push(Event::ApprovalPolicySet { policy });
    }

    #[test]
    fn the_effective_policy_is_the_last_switch_or_the_default() {
        let log = MemoryLog::new();
        assert_eq!(effective(&log.records(), Ask), Ask);
        assert_eq!(effective(&log.records(), Never), Never);
        switch(&log, Never);
        assert_eq!(effective(&log.records(), Ask), Never);
        switch(&log, Ask);
        assert_eq!(effective(&log.records(), Never), Ask);
    }

    #[test]
    fn the_write_path_appends_a_switch_and_records_nothing_for_a_no_op() {
        let log = MemoryLog::new();
        assert!(!set(&log, Ask, Ask).expect("set"));
        assert!(set(&log, Ask, Never).expect("set"));
        assert!(!set(&log, Ask, Never).expect("set"));
        assert_eq!(
            log.events()[1..],
            [Event::ApprovalPolicySet { policy: Never }]
        );
        let json = serde_json::to_value(&log.events()[1]).expect("json");
        assert_eq!(
            json,
            serde_json::json!({"type": "approval/policy", "policy": "never"})
        );
    }

    #[test]
    fn the_section_states_never_with_its_marker_and_ask_as_the_marker_alone() {
        assert_eq!(section(Ask), "<!-- agentd-approval-policy:ask -->");
        assert_eq!(
            section(Never),
            "<!-- agentd-approval-policy:never -->\nApproval prompts are disabled in this \
             session: actions that require approval are rejected automatically — do not request \
             sandbox escalation (do not set `sandbox_permissions`)."
        );
        assert_eq!(told(&format!("x\n{}\ny", section(Never))), Some(Never));
        assert_eq!(
            told(&format!("{}{}", section(Never), section(Ask))),
            Some(Ask)
        );
        assert_eq!(told("no marker here"), None);
        assert_eq!(told("<!-- agentd-approval-policy:maybe -->"), None);
    }

    #[test]
    fn a_session_that_was_never_told_hears_no_notice() {
        let log = MemoryLog::new();
        switch(&log, Never);
        assert_eq!(notice(&log.records(), Never), None);
        // A request logged before the marker existed told nothing either.
        log.push(Event::ModelRequest {
            turn: 1,
            step: 1,
            model: "m".into(),
            instructions: "old instructions".into(),
            tools: vec![],
        });
        assert_eq!(notice(&log.records(), Ask), None);
    }

    #[test]
    fn a_switch_by_the_user_is_narrated_once() {
        let log = MemoryLog::new();
        request(&log, Ask);
        assert_eq!(notice(&log.records(), Ask), None, "nothing changed");
        switch(&log, Never);
        assert_eq!(
            notice(&log.records(), Never).as_deref(),
            Some("The approval policy changed from \"ask\" to \"never\" (changed by the user).")
        );
        request(&log, Never);
        assert_eq!(notice(&log.records(), Never), None, "told now");
    }

    #[test]
    fn a_changed_default_is_narrated_as_the_operators() {
        let log = MemoryLog::new();
        request(&log, Ask);
        // agentd restarted with `approval.policy = "never"`: no event, a new default.
        assert_eq!(
            notice(&log.records(), Never).as_deref(),
            Some(
                "The approval policy changed from \"ask\" to \"never\" (changed by the \
                 operator/config)."
            )
        );
        // A user's switch older than the last request is not this change's cause.
        let log = MemoryLog::new();
        switch(&log, Ask);
        request(&log, Ask);
        assert!(
            notice(&log.records(), Never)
                .expect("a notice")
                .contains("operator/config")
        );
    }

    #[test]
    fn switches_that_cancel_out_are_silent_and_several_make_one_notice() {
        let log = MemoryLog::new();
        request(&log, Ask);
        switch(&log, Never);
        switch(&log, Ask);
        assert_eq!(notice(&log.records(), Ask), None);
        switch(&log, Never);
        let said = notice(&log.records(), Never).expect("a notice");
        assert_eq!(said.matches("The approval policy changed").count(), 1);
        assert!(said.contains("from \"ask\" to \"never\""), "{said}");
    }
}
