//! When a knob switch from the editor is written to the session log.
//!
//! While a turn is open a switch is appended at once, so the next tool call or model request of
//! that turn uses it. While the session is idle it is held — the last switch per knob wins — and
//! written when the next prompt opens a turn ([`Switches::flush`]), through each knob's own
//! write path, which skips a value equal to the effective one: switches that cancel out anchor
//! nothing. The editor is shown the held value meanwhile (`pending ?? fold ?? default`). A
//! held switch lives in memory only: a crash before the flush forgets it, and the reloaded
//! session shows what its log says.
//!
//! A session whose workspace may not be writable (opened in `/`, in the home directory, over
//! agentd's own files) runs read-only where its default or its log says workspace-write
//! ([`Defaults::runnable`]), in [`effective`], the one place the knobs' values are read.
//!
//! One exception: a narrowing of the mode that stops a running background task or MCP server
//! (see [`crate::narrowing`]) is written at once, idle or not. The stop is a side effect that happens
//! now, and the log must hold its cause before the record of the stop.

use std::sync::Mutex;

use confine_protocol::Mode;

use super::config_options::Switch;
use crate::knobs::model::ModelNames;
use crate::knobs::{policy, sandbox};
use crate::narrowing;
use crate::session::{LogError, SessionLog};
use crate::words::ApprovalPolicy;

/// The knobs' values when the log has no switch (the configuration's), the models a session
/// may select, and whether its workspace may be writable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Defaults {
    pub mode: Mode,
    pub policy: ApprovalPolicy,
    pub models: ModelNames,
    /// `false` when workspace-write would make writable what no command may write: the session
    /// then runs read-only instead.
    pub workspace_writable: bool,
}

impl Defaults {
    /// The mode a session whose default or log says `mode` runs under: `mode`, but read-only for
    /// workspace-write where the workspace may not be writable.
    pub fn runnable(&self, mode: Mode) -> Mode {
        match mode {
            Mode::WorkspaceWrite if !self.workspace_writable => Mode::ReadOnly,
            other => other,
        }
    }
}

/// One session's held switches, and whether a turn is open.
#[derive(Debug, Default)]
pub struct Switches(Mutex<Held>);

#[derive(Debug, Default)]
struct Held {
    turn_open: bool,
    mode: Option<Mode>,
    policy: Option<ApprovalPolicy>,
    model: Option<String>,
}

/// The effective values: the log's last switches, else the defaults; the mode as it can run
/// ([`Defaults::runnable`]).
pub fn effective(log: &dyn SessionLog, defaults: &Defaults) -> (Mode, ApprovalPolicy) {
    crate::session::read(log, |records| {
        (
            defaults.runnable(sandbox::effective(records, defaults.mode)),
            policy::effective(records, defaults.policy),
        )
    })
}

impl Switches {
    fn held(&self) -> Result<std::sync::MutexGuard<'_, Held>, LogError> {
        self.0
            .lock()
            .map_err(|_| LogError::NotFound("(poisoned switch state)".into()))
    }

    /// What the editor is shown: each knob's held switch, else its effective value.
    pub fn current(&self, log: &dyn SessionLog, defaults: &Defaults) -> (Mode, ApprovalPolicy) {
        let (held_mode, held_policy) = match self.held() {
            Ok(held) => (held.mode, held.policy),
            Err(_) => (None, None),
        };
        let (mode, policy) = effective(log, defaults);
        (held_mode.unwrap_or(mode), held_policy.unwrap_or(policy))
    }

    /// The model the editor is shown: the held switch, else the effective model.
    pub fn current_model(&self, log: &dyn SessionLog, defaults: &Defaults) -> String {
        let held = self.held().ok().and_then(|held| held.model.clone());
        held.unwrap_or_else(|| {
            crate::session::read(log, |records| defaults.models.effective(records).to_owned())
        })
    }

    /// Switches a knob: appended now while a turn is open, held otherwise. A switch to the value
    /// the editor already sees changes nothing. A narrowing of the mode is appended now also
    /// while idle if `stops_a_task` says a running task would stop at the mode it narrows to.
    /// Returns that mode when the switch narrowed the mode the editor saw.
    pub fn switch(
        &self,
        log: &dyn SessionLog,
        defaults: &Defaults,
        switch: Switch,
        stops_a_task: &dyn Fn(Mode) -> bool,
    ) -> Result<Option<Mode>, LogError> {
        let mut held = self.held()?;
        let (mode, policy) = effective(log, defaults);
        let (mode, policy) = (held.mode.unwrap_or(mode), held.policy.unwrap_or(policy));
        let model = match &held.model {
            Some(model) => model.clone(),
            None => {
                crate::session::read(log, |records| defaults.models.effective(records).to_owned())
            }
        };
        let narrowed = match &switch {
            Switch::Mode(m) if narrowing::narrows(mode, *m) => Some(*m),
            _ => None,
        };
        match switch {
            Switch::Mode(m) if m == mode => {}
            Switch::Policy(p) if p == policy => {}
            Switch::Model(name) if name == model => {}
            Switch::Mode(m) if held.turn_open || narrowed.is_some_and(stops_a_task) => {
                sandbox::set(log, defaults.mode, m)?;
                held.mode = None;
            }
            Switch::Policy(p) if held.turn_open => {
                policy::set(log, defaults.policy, p)?;
            }
            Switch::Model(name) if held.turn_open => {
                defaults.models.set(log, &name)?;
            }
            Switch::Mode(m) => held.mode = Some(m),
            Switch::Policy(p) => held.policy = Some(p),
            Switch::Model(name) => held.model = Some(name),
        }
        Ok(narrowed)
    }

    /// A turn opens: writes the held switches and lets later ones be written at once.
    pub fn flush(&self, log: &dyn SessionLog, defaults: &Defaults) -> Result<(), LogError> {
        let mut held = self.held()?;
        held.turn_open = true;
        if let Some(mode) = held.mode.take() {
            sandbox::set(log, defaults.mode, mode)?;
        }
        if let Some(policy) = held.policy.take() {
            policy::set(log, defaults.policy, policy)?;
        }
        if let Some(model) = held.model.take() {
            defaults.models.set(log, &model)?;
        }
        Ok(())
    }

    /// The turn is over: switches are held again.
    pub fn hold(&self) {
        if let Ok(mut held) = self.held() {
            held.turn_open = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::Event;
    use crate::test_support::MemoryLog;

    fn defaults() -> Defaults {
        Defaults {
            mode: Mode::ReadOnly,
            policy: ApprovalPolicy::Ask,
            models: ModelNames::new("default".into(), ["fast".into()]),
            workspace_writable: true,
        }
    }

    /// No background task runs.
    const NO_TASK: &dyn Fn(Mode) -> bool = &|_| false;

    fn knob_events(log: &MemoryLog) -> Vec<Event> {
        log.events()
            .into_iter()
            .filter(|e| {
                matches!(
                    e,
                    Event::SandboxModeSet { .. } | Event::ApprovalPolicySet { .. }
                )
            })
            .collect()
    }

    #[test]
    fn an_idle_switch_is_held_shown_and_written_at_the_next_turn() {
        let (log, switches) = (MemoryLog::new(), Switches::default());
        switches
            .switch(
                &log,
                &defaults(),
                Switch::Mode(Mode::WorkspaceWrite),
                NO_TASK,
            )
            .expect("switch");
        assert!(knob_events(&log).is_empty(), "held, not written");
        assert_eq!(
            switches.current(&log, &defaults()),
            (Mode::WorkspaceWrite, ApprovalPolicy::Ask),
            "the editor sees the held value"
        );
        assert_eq!(
            effective(&log, &defaults()).0,
            Mode::ReadOnly,
            "tools do not"
        );
        switches.flush(&log, &defaults()).expect("flush");
        assert_eq!(
            knob_events(&log),
            [Event::SandboxModeSet {
                mode: Mode::WorkspaceWrite
            }]
        );
        assert_eq!(effective(&log, &defaults()).0, Mode::WorkspaceWrite);
    }

    #[test]
    fn where_the_workspace_may_not_be_writable_workspace_write_runs_read_only() {
        let log = MemoryLog::new();
        let unwritable = Defaults {
            mode: Mode::WorkspaceWrite,
            workspace_writable: false,
            ..defaults()
        };
        assert_eq!(
            effective(&log, &unwritable).0,
            Mode::ReadOnly,
            "the default"
        );
        log.push(Event::SandboxModeSet {
            mode: Mode::DangerFullAccess,
        });
        assert_eq!(
            effective(&log, &unwritable).0,
            Mode::DangerFullAccess,
            "unconfined does not depend on the workspace"
        );
        log.push(Event::SandboxModeSet {
            mode: Mode::WorkspaceWrite,
        });
        assert_eq!(
            effective(&log, &unwritable).0,
            Mode::ReadOnly,
            "a logged switch"
        );
        // The control: the same log where the workspace may be writable.
        let writable = Defaults {
            workspace_writable: true,
            ..unwritable
        };
        assert_eq!(effective(&log, &writable).0, Mode::WorkspaceWrite);
    }

    #[test]
    fn the_last_idle_switch_per_knob_wins() {
        let (log, switches) = (MemoryLog::new(), Switches::default());
        for mode in [Mode::WorkspaceWrite, Mode::DangerFullAccess] {
            switches
                .switch(&log, &defaults(), Switch::Mode(mode), NO_TASK)
                .expect("switch");
        }
        switches
            .switch(
                &log,
                &defaults(),
                Switch::Policy(ApprovalPolicy::Never),
                NO_TASK,
            )
            .expect("switch");
        switches.flush(&log, &defaults()).expect("flush");
        assert_eq!(
            knob_events(&log),
            [
                Event::SandboxModeSet {
                    mode: Mode::DangerFullAccess
                },
                Event::ApprovalPolicySet {
                    policy: ApprovalPolicy::Never
                },
            ]
        );
    }

    #[test]
    fn idle_switches_that_cancel_out_anchor_nothing() {
        let (log, switches) = (MemoryLog::new(), Switches::default());
        switches
            .switch(
                &log,
                &defaults(),
                Switch::Mode(Mode::WorkspaceWrite),
                NO_TASK,
            )
            .expect("switch");
        switches
            .switch(&log, &defaults(), Switch::Mode(Mode::ReadOnly), NO_TASK)
            .expect("switch");
        switches
            .switch(
                &log,
                &defaults(),
                Switch::Policy(ApprovalPolicy::Never),
                NO_TASK,
            )
            .expect("switch");
        switches
            .switch(
                &log,
                &defaults(),
                Switch::Policy(ApprovalPolicy::Ask),
                NO_TASK,
            )
            .expect("switch");
        switches.flush(&log, &defaults()).expect("flush");
        assert!(knob_events(&log).is_empty(), "{:?}", log.events());
    }

    #[test]
    fn a_switch_while_a_turn_is_open_is_written_at_once_and_a_no_op_records_nothing() {
        let (log, switches) = (MemoryLog::new(), Switches::default());
        switches.flush(&log, &defaults()).expect("the turn opens");
        switches
            .switch(&log, &defaults(), Switch::Mode(Mode::ReadOnly), NO_TASK)
            .expect("no-op");
        assert!(knob_events(&log).is_empty());
        switches
            .switch(
                &log,
                &defaults(),
                Switch::Policy(ApprovalPolicy::Never),
                NO_TASK,
            )
            .expect("switch");
        assert_eq!(
            knob_events(&log),
            [Event::ApprovalPolicySet {
                policy: ApprovalPolicy::Never
            }]
        );
        switches.hold();
        switches
            .switch(
                &log,
                &defaults(),
                Switch::Policy(ApprovalPolicy::Ask),
                NO_TASK,
            )
            .expect("held");
        assert_eq!(knob_events(&log).len(), 1, "idle again: held");
    }

    #[test]
    fn a_held_switch_not_flushed_is_forgotten_with_the_process() {
        let log = MemoryLog::new();
        {
            let before_crash = Switches::default();
            before_crash
                .switch(
                    &log,
                    &defaults(),
                    Switch::Mode(Mode::DangerFullAccess),
                    NO_TASK,
                )
                .expect("held");
        }
        let after_restart = Switches::default();
        assert_eq!(
            after_restart.current(&log, &defaults()),
            (Mode::ReadOnly, ApprovalPolicy::Ask)
        );
    }

    #[test]
    fn an_idle_narrowing_that_stops_a_task_is_written_at_once() {
        let (log, switches) = (MemoryLog::new(), Switches::default());
        switches.flush(&log, &defaults()).expect("a turn opens");
        switches
            .switch(
                &log,
                &defaults(),
                Switch::Mode(Mode::DangerFullAccess),
                NO_TASK,
            )
            .expect("switch");
        switches.hold();
        // Held: a widening, then a narrowing that stops nothing.
        switches
            .switch(&log, &defaults(), Switch::Mode(Mode::ReadOnly), NO_TASK)
            .expect("switch");
        assert_eq!(knob_events(&log).len(), 1, "{:?}", log.events());
        let stops_below_workspace_write: &dyn Fn(Mode) -> bool = &|to| to < Mode::WorkspaceWrite;
        switches
            .switch(
                &log,
                &defaults(),
                Switch::Mode(Mode::WorkspaceWrite),
                stops_below_workspace_write,
            )
            .expect("a widening of the held value");
        assert_eq!(knob_events(&log).len(), 1, "still held");
        let narrowed = switches
            .switch(
                &log,
                &defaults(),
                Switch::Mode(Mode::ReadOnly),
                stops_below_workspace_write,
            )
            .expect("switch");
        assert_eq!(narrowed, Some(Mode::ReadOnly));
        assert_eq!(
            knob_events(&log),
            [
                Event::SandboxModeSet {
                    mode: Mode::DangerFullAccess
                },
                Event::SandboxModeSet {
                    mode: Mode::ReadOnly
                },
            ]
        );
        assert_eq!(
            switches.current(&log, &defaults()).0,
            Mode::ReadOnly,
            "nothing is held any more"
        );
        switches.flush(&log, &defaults()).expect("the next turn");
        assert_eq!(knob_events(&log).len(), 2);
    }

    #[test]
    fn only_a_switch_below_the_shown_mode_is_a_narrowing() {
        let (log, switches) = (MemoryLog::new(), Switches::default());
        let all: &dyn Fn(Mode) -> bool = &|_| true;
        let mode = Switch::Mode;
        let switch = |to: Switch| switches.switch(&log, &defaults(), to, all).expect("switch");
        assert_eq!(switch(mode(Mode::ReadOnly)), None, "the same mode");
        assert_eq!(switch(mode(Mode::DangerFullAccess)), None, "a widening");
        assert_eq!(
            switch(Switch::Policy(ApprovalPolicy::Never)),
            None,
            "the policy"
        );
        assert_eq!(
            switch(mode(Mode::WorkspaceWrite)),
            Some(Mode::WorkspaceWrite),
            "below the held danger-full-access"
        );
    }

    #[test]
    fn a_model_switch_is_held_shown_written_at_the_next_turn_and_at_once_in_a_turn() {
        let (log, switches, defaults) = (MemoryLog::new(), Switches::default(), defaults());
        let selected = |log: &MemoryLog| -> Vec<Event> {
            log.events()
                .into_iter()
                .filter(|e| matches!(e, Event::ModelSelected { .. }))
                .collect()
        };
        let model = |name: &str| Switch::Model(name.to_owned());
        switches
            .switch(&log, &defaults, model("fast"), NO_TASK)
            .expect("switch");
        assert!(selected(&log).is_empty(), "held, not written");
        assert_eq!(switches.current_model(&log, &defaults), "fast", "shown");
        assert_eq!(defaults.models.effective(&log.records()), "default");
        switches.flush(&log, &defaults).expect("a turn opens");
        assert_eq!(
            selected(&log),
            [Event::ModelSelected {
                name: "fast".into()
            }]
        );
        // During the turn: written at once, for the turn's next request.
        switches
            .switch(&log, &defaults, model("default"), NO_TASK)
            .expect("switch");
        assert_eq!(defaults.models.effective(&log.records()), "default");
        assert_eq!(selected(&log).len(), 2);
        switches.hold();
        // Idle switches that cancel out anchor nothing.
        for name in ["fast", "default"] {
            switches
                .switch(&log, &defaults, model(name), NO_TASK)
                .expect("switch");
        }
        switches.flush(&log, &defaults).expect("the next turn");
        assert_eq!(selected(&log).len(), 2, "{:?}", log.events());
    }

    #[test]
    fn sessions_do_not_share_switches() {
        let (a, b) = (MemoryLog::new(), MemoryLog::new());
        let (sa, sb) = (Switches::default(), Switches::default());
        sa.flush(&a, &defaults()).expect("a's turn opens");
        sa.switch(&a, &defaults(), Switch::Mode(Mode::WorkspaceWrite), NO_TASK)
            .expect("switch");
        sb.switch(
            &b,
            &defaults(),
            Switch::Policy(ApprovalPolicy::Never),
            NO_TASK,
        )
        .expect("held in b");
        assert_eq!(
            sa.current(&a, &defaults()),
            (Mode::WorkspaceWrite, ApprovalPolicy::Ask)
        );
        assert_eq!(
            sb.current(&b, &defaults()),
            (Mode::ReadOnly, ApprovalPolicy::Never)
        );
        assert!(knob_events(&b).is_empty());
    }
}
