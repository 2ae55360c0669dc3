//! What this agentd can actually grant, learned from confine-helper once at start: the helper's
//! ceiling (widest mode, network) and whether a backend that confines is usable for the
//! configured backend choice; and, for a session, whether its workspace may be writable at all
//! (a session opened in `/`, in the home directory or over agentd's own files may not be
//! workspace-write: [`Composition::for_workspace`]).
//!
//! Every lever agentd shows follows it — the sandbox-mode select, the bash tool's
//! `sandbox_permissions`, `session/set_config_option` — so the model and the user are never
//! offered a mode the helper would then refuse. The helper stays the authority: it checks every
//! request against its ceiling again, so a composition that is out of date (a ceiling edited
//! while agentd runs) can only make agentd offer less than the helper allows, or be refused by
//! the helper, never run more.

use confine_protocol::{Backend, BackendChoice, HelperInfo, Mode, Network};

use crate::helper_client::WorkspaceRefusal;

/// What the helper grants and what this machine can confine with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Composition {
    /// The widest mode the helper runs.
    pub max_mode: Mode,
    /// Whether the helper lets a confined command have the network.
    pub network: Network,
    /// The helper's ceiling files, for messages that say where the limit comes from.
    pub ceiling_sources: Vec<String>,
    /// `None` when a backend that confines is usable for the configured choice; otherwise why
    /// none is, as the helper reported each backend.
    pub unconfinable: Option<String>,
    /// Why the workspace may not be writable, for a session whose workspace-write would make
    /// writable what no command may write (the helper would refuse its every command).
    pub workspace: Option<WorkspaceRefusal>,
}

/// How to get a sandbox backend on this platform: what every message that finds none says.
pub fn install_hint() -> &'static str {
    if cfg!(target_os = "linux") {
        "install bubblewrap (bwrap) with unprivileged user namespaces enabled, or use a kernel \
         with Landlock enabled"
    } else if cfg!(target_os = "macos") {
        "make sandbox-exec available"
    } else {
        "no sandbox backend exists for this platform yet"
    }
}

impl Composition {
    /// The narrowest composition: nothing confined can run. What agentd assumes until the
    /// helper has answered.
    pub fn nothing() -> Composition {
        Composition {
            max_mode: Mode::ReadOnly,
            network: Network::Deny,
            ceiling_sources: Vec::new(),
            unconfinable: Some("confine-helper has not been asked yet".into()),
            workspace: None,
        }
    }

    /// Everything: for tests of code that does not depend on the helper's answer.
    pub fn everything() -> Composition {
        Composition {
            max_mode: Mode::DangerFullAccess,
            network: Network::Allow,
            ceiling_sources: Vec::new(),
            unconfinable: None,
            workspace: None,
        }
    }

    /// The composition the helper's report describes, for commands that ask for `choice`.
    pub fn from_info(info: &HelperInfo, choice: BackendChoice) -> Composition {
        let wanted = |backend: Backend| match choice {
            BackendChoice::Auto => matches!(
                backend,
                Backend::Bwrap | Backend::Landlock | Backend::Namespaces
            ),
            BackendChoice::Bwrap => backend == Backend::Bwrap,
            BackendChoice::Landlock => backend == Backend::Landlock,
            BackendChoice::Seatbelt => backend == Backend::Seatbelt,
            BackendChoice::Namespaces => backend == Backend::Namespaces,
        };
        let candidates: Vec<_> = info.backends.iter().filter(|b| wanted(b.backend)).collect();
        let unconfinable = if candidates.iter().any(|b| b.usable) {
            None
        } else if candidates.is_empty() {
            Some(format!(
                "confine-helper ({}) has no {} backend on this machine",
                info.software,
                match choice {
                    BackendChoice::Auto => "confining",
                    other => other.as_str(),
                }
            ))
        } else {
            Some(
                candidates
                    .iter()
                    .map(|b| format!("{}: {}", b.backend.as_str(), b.detail))
                    .collect::<Vec<_>>()
                    .join("; "),
            )
        };
        Composition {
            max_mode: info.grant.max_mode,
            network: info.grant.network,
            ceiling_sources: info.grant.sources.clone(),
            unconfinable,
            workspace: None,
        }
    }

    /// This composition for a session in a workspace that `refusal` (when given) says may not be
    /// writable: workspace-write is neither offered nor switched to, nor escalated to, and its
    /// refusal says why.
    pub fn for_workspace(self, refusal: Option<WorkspaceRefusal>) -> Composition {
        Composition {
            workspace: refusal,
            ..self
        }
    }

    /// Why `mode` cannot be offered, or `None` when it can: above the helper's ceiling, a
    /// confined mode with no backend to confine it, or workspace-write in a workspace that may
    /// not be writable.
    pub fn refusal(&self, mode: Mode) -> Option<String> {
        if let Some(why) = self.ceiling_refusal(mode) {
            return Some(why);
        }
        if mode == Mode::WorkspaceWrite
            && let Some(why) = self.workspace_refusal()
        {
            return Some(why);
        }
        if mode != Mode::DangerFullAccess
            && let Some(why) = &self.unconfinable
        {
            return Some(format!(
                "{} needs a sandbox, and no usable sandbox backend exists ({why}); to fix: \
                 {}",
                mode.as_str(),
                install_hint()
            ));
        }
        None
    }

    /// Why the session's workspace may not be writable, if it may not: the reason, the path and
    /// where a session's workspace comes from.
    pub fn workspace_refusal(&self) -> Option<String> {
        let refusal = self.workspace.as_ref()?;
        Some(format!(
            "{refusal} (a session's workspace is the directory the editor opens it in: open it in \
             a project's directory to let it write)"
        ))
    }

    /// Why the helper's ceiling refuses `mode`, if it does.
    pub fn ceiling_refusal(&self, mode: Mode) -> Option<String> {
        (mode > self.max_mode).then(|| {
            format!(
                "{} is above what confine-helper grants: its ceiling allows at most {} ({}); \
                 raise max_mode there to allow it",
                mode.as_str(),
                self.max_mode.as_str(),
                self.ceiling_where()
            )
        })
    }

    /// Whether `mode` can be offered.
    pub fn offers(&self, mode: Mode) -> bool {
        self.refusal(mode).is_none()
    }

    /// The modes a session whose current mode is `current` can be switched to, in order: every
    /// mode the helper would run, and the current one (shown as the select's value, even when a
    /// switch back to it would now be refused).
    pub fn modes(&self, current: Mode) -> Vec<Mode> {
        Mode::ALL
            .iter()
            .copied()
            .filter(|mode| *mode == current || self.offers(*mode))
            .collect()
    }

    /// The modes an escalation from `effective` can name: strictly wider, and granted.
    pub fn escalations(&self, effective: Mode) -> Vec<Mode> {
        Mode::ALL
            .iter()
            .copied()
            .filter(|mode| *mode > effective && self.offers(*mode))
            .collect()
    }

    /// The ceiling files, as a message names them.
    pub fn ceiling_where(&self) -> String {
        if self.ceiling_sources.is_empty() {
            "no ceiling file is installed, so the limit is the built-in one".into()
        } else {
            format!("ceiling files: {}", self.ceiling_sources.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use confine_protocol::{BackendReport, Grant};

    fn info(max_mode: Mode, usable: bool) -> HelperInfo {
        HelperInfo {
            software: "confine-helper 0.1.0".into(),
            pid: 1,
            backends: vec![
                BackendReport {
                    backend: Backend::Bwrap,
                    usable,
                    detail: if usable {
                        "usable"
                    } else {
                        "bwrap is not installed"
                    }
                    .into(),
                    layers: Vec::new(),
                    fingerprint: None,
                },
                BackendReport {
                    backend: Backend::Landlock,
                    usable: false,
                    detail: "this kernel does not offer Landlock".into(),
                    layers: Vec::new(),
                    fingerprint: None,
                },
            ],
            landlock_abi: None,
            grant: Grant {
                max_mode,
                network: Network::Deny,
                sources: vec!["/etc/confine-helper/ceiling.toml".into()],
                broken: None,
            },
        }
    }

    #[test]
    fn a_read_only_ceiling_offers_only_read_only_and_no_escalation() {
        let c = Composition::from_info(&info(Mode::ReadOnly, true), BackendChoice::Auto);
        assert_eq!(c.modes(Mode::ReadOnly), [Mode::ReadOnly]);
        assert!(c.escalations(Mode::ReadOnly).is_empty());
        let why = c.refusal(Mode::WorkspaceWrite).expect("refused");
        assert!(why.contains("at most read-only"), "{why}");
        assert!(why.contains("/etc/confine-helper/ceiling.toml"), "{why}");
    }

    #[test]
    fn escalations_are_strictly_wider_and_within_the_ceiling() {
        let c = Composition::from_info(&info(Mode::WorkspaceWrite, true), BackendChoice::Auto);
        assert_eq!(c.escalations(Mode::ReadOnly), [Mode::WorkspaceWrite]);
        assert!(c.escalations(Mode::WorkspaceWrite).is_empty());
        let all = Composition::from_info(&info(Mode::DangerFullAccess, true), BackendChoice::Auto);
        assert_eq!(
            all.escalations(Mode::ReadOnly),
            [Mode::WorkspaceWrite, Mode::DangerFullAccess]
        );
        assert_eq!(
            all.modes(Mode::WorkspaceWrite),
            [Mode::ReadOnly, Mode::WorkspaceWrite, Mode::DangerFullAccess]
        );
    }

    #[test]
    fn without_a_usable_backend_only_unconfined_runs_and_the_reason_says_how_to_fix() {
        let c = Composition::from_info(&info(Mode::DangerFullAccess, false), BackendChoice::Auto);
        assert_eq!(
            c.modes(Mode::WorkspaceWrite),
            [Mode::WorkspaceWrite, Mode::DangerFullAccess]
        );
        assert_eq!(c.escalations(Mode::ReadOnly), [Mode::DangerFullAccess]);
        let why = c.refusal(Mode::ReadOnly).expect("refused");
        assert!(why.contains("bwrap: bwrap is not installed"), "{why}");
        assert!(why.contains("install bubblewrap"), "{why}");
    }

    #[test]
    fn a_workspace_that_may_not_be_writable_offers_neither_workspace_write_nor_its_escalation() {
        let all = Composition::from_info(&info(Mode::DangerFullAccess, true), BackendChoice::Auto);
        let home = all.clone().for_workspace(Some(WorkspaceRefusal::Home {
            workspace: "/home/u".into(),
            home: "/home/u".into(),
        }));
        assert_eq!(
            home.modes(Mode::ReadOnly),
            [Mode::ReadOnly, Mode::DangerFullAccess]
        );
        assert_eq!(home.escalations(Mode::ReadOnly), [Mode::DangerFullAccess]);
        let why = home.refusal(Mode::WorkspaceWrite).expect("refused");
        assert!(why.contains("the home directory /home/u"), "{why}");
        // The control: the same helper, in a project's directory.
        assert!(all.for_workspace(None).offers(Mode::WorkspaceWrite));
    }

    #[test]
    fn a_forced_backend_the_helper_does_not_have_confines_nothing() {
        let c =
            Composition::from_info(&info(Mode::DangerFullAccess, true), BackendChoice::Seatbelt);
        assert!(
            c.refusal(Mode::ReadOnly)
                .is_some_and(|w| w.contains("no seatbelt backend"))
        );
        let forced =
            Composition::from_info(&info(Mode::DangerFullAccess, true), BackendChoice::Bwrap);
        assert!(forced.offers(Mode::WorkspaceWrite));
        let landlock =
            Composition::from_info(&info(Mode::DangerFullAccess, true), BackendChoice::Landlock);
        assert!(!landlock.offers(Mode::WorkspaceWrite));
        let namespaces = Composition::from_info(
            &info(Mode::DangerFullAccess, true),
            BackendChoice::Namespaces,
        );
        assert!(
            namespaces
                .refusal(Mode::ReadOnly)
                .is_some_and(|w| w.contains("no namespaces backend"))
        );
    }

    #[test]
    fn auto_and_a_forced_namespaces_accept_the_namespace_backend() {
        let mut only = info(Mode::DangerFullAccess, false);
        only.backends.push(BackendReport {
            backend: Backend::Namespaces,
            usable: true,
            detail: "usable".into(),
            layers: Vec::new(),
            fingerprint: None,
        });
        for choice in [BackendChoice::Auto, BackendChoice::Namespaces] {
            let c = Composition::from_info(&only, choice);
            assert!(c.offers(Mode::WorkspaceWrite), "{choice}");
        }
        let bwrap = Composition::from_info(&only, BackendChoice::Bwrap);
        assert!(!bwrap.offers(Mode::WorkspaceWrite));
    }
}
