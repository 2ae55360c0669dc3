//! The bridge from a session's tree of child agents to its log: an [`AgentEvents`] sink that
//! writes `agent/started`, `agent/ended`, `agent/output` and `agent/injection-dropped`, and
//! the names a child's records are tagged with. Apart from the session so that neither holds
//! the other strongly: the sink reaches the log through a weak link.

use std::collections::HashMap;
use std::sync::{Mutex, Weak};

use crate::agents::lifecycle::{AgentEvent, AgentEvents, AgentId, Failure, Outcome, PublishError};
use crate::session::{AgentOutcome, Event, Record, SessionLog, fold};

/// The session log went away (the session was dropped) before an agent event was written.
#[derive(Debug, thiserror::Error)]
#[error("the session's log is gone")]
pub struct LogGone;

/// Writes a session's agent events to its log.
pub struct LogEvents {
    log: Weak<dyn SessionLog>,
    /// Agents started in earlier runs of this session (their `agent/started` records): a
    /// child's tag continues their numbering, so tags stay unique in the log.
    base: u64,
    /// The `task` call each parent is starting a child for, taken by its `Started`.
    calls: Mutex<HashMap<AgentId, String>>,
}

impl std::fmt::Debug for LogEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogEvents")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl LogEvents {
    /// The sink of a session whose log holds `records` so far.
    pub fn new(log: Weak<dyn SessionLog>, records: &[Record]) -> LogEvents {
        let base = records
            .iter()
            .filter(|r| matches!(r.event, Event::AgentStarted { .. }))
            .count() as u64;
        LogEvents {
            log,
            base,
            calls: Mutex::new(HashMap::new()),
        }
    }

    /// The tag of `id` in the log: `agent-0` for the top level, children numbered on from the
    /// session's earlier children.
    pub fn tag(&self, id: AgentId) -> String {
        if id == AgentId::TOP {
            return fold::TOP_AGENT.to_owned();
        }
        format!("agent-{}", self.base + id.get())
    }

    /// Says which `task` call of `parent` the next child started below it answers. An agent
    /// runs its tool calls one at a time, so each parent starts at most one child at once.
    pub fn expect_start(&self, parent: AgentId, call_id: &str) {
        if let Ok(mut calls) = self.calls.lock() {
            calls.insert(parent, call_id.to_owned());
        }
    }

    fn event(&self, event: AgentEvent) -> Event {
        match event {
            AgentEvent::Started {
                id,
                parent,
                depth,
                persona,
            } => {
                let call_id = self
                    .calls
                    .lock()
                    .ok()
                    .and_then(|mut calls| calls.remove(&parent))
                    .unwrap_or_default();
                Event::AgentStarted {
                    agent: self.tag(id),
                    parent: self.tag(parent),
                    depth: u64::from(depth),
                    persona,
                    call_id,
                }
            }
            AgentEvent::Ended { id, outcome } => {
                let (outcome, answer, reason) = match outcome {
                    Outcome::Completed(answer) => (AgentOutcome::Completed, Some(answer), None),
                    Outcome::Failed(Failure::Error(reason)) => {
                        (AgentOutcome::Failed, None, Some(reason))
                    }
                    Outcome::Failed(Failure::Panicked(message)) => (
                        AgentOutcome::Failed,
                        None,
                        Some(format!("panicked: {message}")),
                    ),
                    Outcome::Cancelled => (AgentOutcome::Cancelled, None, None),
                };
                Event::AgentEnded {
                    agent: self.tag(id),
                    outcome,
                    answer,
                    reason,
                }
            }
            AgentEvent::Output { id, text } => Event::AgentOutput {
                agent: self.tag(id),
                text,
            },
            AgentEvent::InjectionDropped { id, text } => Event::AgentInjectionDropped {
                agent: self.tag(id),
                text,
            },
        }
    }
}

impl AgentEvents for LogEvents {
    fn publish(&self, event: AgentEvent) -> Result<(), PublishError> {
        let log = self
            .log
            .upgrade()
            .ok_or_else(|| PublishError::new(LogGone))?;
        log.append(self.event(event), true)
            .map(drop)
            .map_err(PublishError::new)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::agents::lifecycle::AgentTree;
    use crate::test_support::MemoryLog;

    #[tokio::test]
    async fn a_childs_life_is_logged_with_its_task_call_and_answer() {
        let log = Arc::new(MemoryLog::new());
        let weak: Weak<dyn SessionLog> = Arc::downgrade(&(log.clone() as Arc<dyn SessionLog>));
        let events = Arc::new(LogEvents::new(weak, &log.records()));
        let tree = AgentTree::new(events.clone());
        events.expect_start(AgentId::TOP, "call-7");
        let child = tree
            .start(AgentId::TOP, "general", 1, |_ctx| async {
                Ok::<_, crate::agents::lifecycle::ChildError>("done".to_owned())
            })
            .expect("starts");
        assert_eq!(child.outcome().await, Outcome::Completed("done".into()));
        child.teardown().await.expect("torn down");
        let logged: Vec<Event> = log.records().into_iter().skip(1).map(|r| r.event).collect();
        assert_eq!(
            logged,
            [
                Event::AgentStarted {
                    agent: "agent-1".into(),
                    parent: "agent-0".into(),
                    depth: 1,
                    persona: "general".into(),
                    call_id: "call-7".into(),
                },
                Event::AgentEnded {
                    agent: "agent-1".into(),
                    outcome: AgentOutcome::Completed,
                    answer: Some("done".into()),
                    reason: None,
                },
            ]
        );
        // A later run of the session numbers its children on.
        let again = LogEvents::new(Weak::<MemoryLog>::new(), &log.records());
        assert_eq!(again.tag(child.id()), "agent-2");
        assert_eq!(again.tag(AgentId::TOP), "agent-0");
    }

    #[test]
    fn a_child_is_offered_its_scopes_tools_without_escalation() {
        use crate::agents::{Lineage, Persona};
        use crate::tools::{ToolFilter, ToolRegistry};
        let scratch = crate::test_support::Scratch::new("acp-agents-offered");
        let env = crate::tools::ToolEnv::new(
            crate::helper_client::HelperClient::new(crate::helper_client::HelperEndpoint::Service(
                scratch.0.join("none.sock"),
            )),
            scratch.0.clone(),
            Vec::new(),
            confine_protocol::Network::Deny,
            confine_protocol::BackendChoice::Auto,
            None,
        )
        .with_spec_options(crate::tools::SpecOptions::confining());
        let mut persona = Persona::general();
        let child = Lineage::top().child(&persona).expect("a child");
        let specs = crate::tools::offered_confined(&env, child.scope());
        let bash = specs.iter().find(|s| s.name == "bash").expect("bash");
        assert!(!bash.parameters.to_string().contains("sandbox_permissions"));
        let top = crate::tools::offered(
            &env,
            &crate::tools::ToolScope::top(),
            confine_protocol::Mode::ReadOnly,
        );
        let top_bash = top.iter().find(|s| s.name == "bash").expect("bash");
        assert!(
            top_bash
                .parameters
                .to_string()
                .contains("sandbox_permissions")
        );
        persona.tools = Some(
            ToolFilter::new(None, Some(vec!["bash".into()]), &ToolRegistry::builtin())
                .expect("a filter"),
        );
        let denied = Lineage::top().child(&persona).expect("a child");
        let specs = crate::tools::offered_confined(&env, denied.scope());
        assert!(specs.iter().all(|s| s.name != "bash"), "{specs:?}");
        let refused = denied
            .scope()
            .admit(&env.registry(), "bash")
            .expect_err("bash is refused");
        assert!(
            refused.to_string().contains("not available to this agent"),
            "{refused}"
        );
    }
}
