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

use crate::deny_read::DenyRead;
use crate::knobs::policy;
use crate::profile::SandboxProfile;
use crate::words::ApprovalPolicy;

/// What the sandbox profile changes for the model, when it changes anything: the further
/// directories writable where the workspace is, the paths never readable, the Unix sockets
/// commands may connect to, and the hosts the network allow-list reaches. `None` for a profile without them (the model is told nothing
/// it would not find out itself).
pub fn profile_section(profile: &SandboxProfile) -> Option<String> {
    let mut lines = Vec::new();
    let roots = profile.roots();
    if !roots.is_empty() {
        let roots: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
        lines.push(format!(
            "Where commands may write the workspace, they may also write: {}.",
            roots.join(", ")
        ));
    }
    if !profile.deny_read.is_empty() {
        let denied: Vec<String> = profile.deny_read.iter().map(DenyRead::shown).collect();
        lines.push(format!(
            "These are never readable to commands or the file tools: {}; do not try.",
            denied.join(", ")
        ));
    }
    if !profile.unix_sockets.is_empty() {
        let sockets: Vec<String> = profile
            .unix_sockets
            .iter()
            .map(|s| s.display().to_string())
            .collect();
        lines.push(format!(
            "Commands may connect to these Unix sockets: {}; connecting to any other Unix socket \
             is refused.",
            sockets.join(", ")
        ));
    }
    if let Some(list) = &profile.allow_list {
        let hosts: Vec<String> = list.allowed().iter().map(ToString::to_string).collect();
        let hosts = if hosts.is_empty() {
            "none".to_owned()
        } else {
            hosts.join(", ")
        };
        lines.push(format!(
            "Commands reach the network only through a proxy (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY \
             are set), which allows these hosts: {hosts}; any other host is refused with HTTP \
             403."
        ));
    }
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// The instructions for one model request under `approval`, with the project's `guidance`
/// (its `AGENTS.md` files, [`super::project_docs`]), what the sandbox `profile` changes
/// ([`profile_section`]) and this step's notices, in order.
pub fn for_request(
    cwd: &Path,
    guidance: Option<&str>,
    profile: Option<&str>,
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
         Keep answers short and say what you changed.\n\n{profile}{guidance}{section}",
        cwd = cwd.display(),
        profile = profile.map(|p| format!("{p}\n\n")).unwrap_or_default(),
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
            let text = for_request(Path::new("/w"), None, None, approval, &[]);
            for word in ["read-only", "workspace-write", "danger-full-access"] {
                assert!(!text.contains(word), "{word} in {text}");
            }
            assert!(text.contains("Check the [exit code: N] marker"), "{text}");
        }
    }

    #[test]
    fn the_approval_section_is_stated_under_never_and_a_marker_under_ask() {
        let ask = for_request(Path::new("/w"), None, None, ApprovalPolicy::Ask, &[]);
        assert!(
            ask.ends_with("\n\n<!-- agentd-approval-policy:ask -->"),
            "{ask}"
        );
        assert!(!ask.contains("Approval prompts are disabled"), "{ask}");
        let never = for_request(Path::new("/w"), None, None, ApprovalPolicy::Never, &[]);
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
            None,
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

    #[test]
    fn the_profile_is_told_only_when_it_changes_something_and_before_the_project_guidance() {
        assert_eq!(profile_section(&SandboxProfile::default()), None);
        let profile = SandboxProfile {
            writable_roots: vec!["/srv/scratch".into()],
            deny_read: vec![crate::deny_read::parse("**/.env", None).expect("entry")],
            allow_list: Some(std::sync::Arc::new(
                crate::proxy::Policy::new(["pypi.org", "*.pythonhosted.org"], [""; 0])
                    .expect("policy"),
            )),
            ..SandboxProfile::default()
        };
        let section = profile_section(&profile).expect("a section");
        assert_eq!(
            section,
            "Where commands may write the workspace, they may also write: /srv/scratch.\n\
             These are never readable to commands or the file tools: **/.env; do not try.\n\
             Commands reach the network only through a proxy (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY \
             are set), which allows these hosts: pypi.org, *.pythonhosted.org; any other host is \
             refused with HTTP 403."
        );
        let text = for_request(
            Path::new("/w"),
            Some("Guidance."),
            Some(&section),
            ApprovalPolicy::Ask,
            &[],
        );
        assert!(
            text.contains(&format!(
                "say what you changed.\n\n{section}\n\nGuidance.\n\n"
            )),
            "{text}"
        );
    }

    #[test]
    fn the_unix_sockets_are_told_with_what_happens_to_any_other_only_when_there_are_some() {
        let profile = SandboxProfile {
            unix_sockets: vec![
                "/var/run/docker.sock".into(),
                "/home/u/.ssh/agent.sock".into(),
            ],
            ..SandboxProfile::default()
        };
        assert_eq!(
            profile_section(&profile).as_deref(),
            Some(
                "Commands may connect to these Unix sockets: /var/run/docker.sock, \
                 /home/u/.ssh/agent.sock; connecting to any other Unix socket is refused."
            )
        );
        let with_reads = SandboxProfile {
            deny_read: vec![crate::deny_read::parse("**/.env", None).expect("entry")],
            ..profile
        };
        assert_eq!(
            profile_section(&with_reads).as_deref(),
            Some(
                "These are never readable to commands or the file tools: **/.env; do not try.\n\
                 Commands may connect to these Unix sockets: /var/run/docker.sock, \
                 /home/u/.ssh/agent.sock; connecting to any other Unix socket is refused."
            )
        );
        // Without them, nothing is added (the profile above without sockets is told as before).
        let without = SandboxProfile {
            unix_sockets: Vec::new(),
            ..with_reads
        };
        assert_eq!(
            profile_section(&without).as_deref(),
            Some("These are never readable to commands or the file tools: **/.env; do not try.")
        );
    }
}
