//! What the model is told at every request: who it is, where it works, how to read tool results,
//! the project's own guidance (its `AGENTS.md` files), and the session's approval policy. Built
//! in one place and logged with each `model/request`, so what the model was told replays from
//! the log.
//!
//! The sandbox mode is deliberately not stated: a model told it works read-only tends to refuse
//! work before trying it, while a denied attempt is harmless and says exactly what was refused
//! (the denial marker). The approval policy is stated as [`policy::section`] says. One-time
//! notices come at the end: a change of the policy since the model was last told
//! ([`policy::notice`]), and background tasks a narrowing of the mode stopped since the last
//! request ([`crate::narrowing::notice`]).

use std::path::Path;

use crate::knobs::policy;
use crate::words::ApprovalPolicy;

/// The instructions for one model request under `approval`, with the project's `guidance`
/// (its `AGENTS.md` files, [`super::project_docs`]) and this step's notices, in order.
pub fn for_request(
    cwd: &Path,
    guidance: Option<&str>,
    approval: ApprovalPolicy,
    notices: &[String],
) -> String {
    let mut text = format!(
        "You are agentd, a coding agent working in the workspace {cwd}.\n\
         Use the tools to inspect and change files and to run commands.\n\
         Check the [exit code: N] marker on every bash result; investigate failures before \
         moving on. A line \"[sandbox: <what> denied under <mode> mode]\" means the sandbox \
         refused that access (a file write, a write to git metadata, a file read, network access \
         or a system interface): do not retry the command unchanged; when the result offers \
         escalation, follow the bash tool's description, otherwise explain what is needed.\n\
         Keep answers short and say what you changed.\n\n{guidance}{section}",
        cwd = cwd.display(),
        guidance = guidance.map(|g| format!("{g}\n\n")).unwrap_or_default(),
        section = policy::section(approval),
    );
    for notice in notices {
        text.push_str("\n\n");
        text.push_str(notice);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sandbox_mode_is_not_stated() {
        for approval in [ApprovalPolicy::Ask, ApprovalPolicy::Never] {
            let text = for_request(Path::new("/w"), None, approval, &[]);
            for word in ["read-only", "workspace-write", "danger-full-access"] {
                assert!(!text.contains(word), "{word} in {text}");
            }
            assert!(text.contains("Check the [exit code: N] marker"), "{text}");
        }
    }

    #[test]
    fn the_approval_section_is_stated_under_never_and_a_marker_under_ask() {
        let ask = for_request(Path::new("/w"), None, ApprovalPolicy::Ask, &[]);
        assert!(
            ask.ends_with("\n\n<!-- agentd-approval-policy:ask -->"),
            "{ask}"
        );
        assert!(!ask.contains("Approval prompts are disabled"), "{ask}");
        let never = for_request(Path::new("/w"), None, ApprovalPolicy::Never, &[]);
        assert!(
            never.ends_with(&format!(
                "<!-- agentd-approval-policy:never -->\n{}",
                policy::NEVER_TEXT
            )),
            "{never}"
        );
        assert_eq!(policy::told(&never), Some(ApprovalPolicy::Never));
        assert_eq!(policy::told(&ask), Some(ApprovalPolicy::Ask));
    }

    #[test]
    fn the_project_guidance_comes_after_agentds_rules_and_before_the_policy() {
        let text = for_request(
            Path::new("/w"),
            Some("Project guidance: run make."),
            ApprovalPolicy::Ask,
            &[],
        );
        assert!(
            text.contains("say what you changed.\n\nProject guidance: run make.\n\n<!-- agentd"),
            "{text}"
        );
        assert_eq!(policy::told(&text), Some(ApprovalPolicy::Ask));
    }

    #[test]
    fn notices_come_last_in_order_and_do_not_change_what_was_told() {
        let notice = "The approval policy changed from \"ask\" to \"never\" (changed by the user).";
        let stopped = "Background task task-1 was stopped because …";
        let text = for_request(
            Path::new("/w"),
            None,
            ApprovalPolicy::Never,
            &[notice.to_owned(), stopped.to_owned()],
        );
        assert!(
            text.ends_with(&format!("\n\n{notice}\n\n{stopped}")),
            "{text}"
        );
        assert_eq!(policy::told(&text), Some(ApprovalPolicy::Never));
    }
}
