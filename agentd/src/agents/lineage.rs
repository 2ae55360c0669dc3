//! Where one agent stands in its session's tree of agents ([`Lineage`]): its depth, the depth
//! cap in force for it, and its tool scope. A child's lineage is made from its parent's and its
//! persona's, and making it is the check that the child may start at all: it is refused, before
//! anything of the child exists, when the child would be deeper than its cap.
//!
//! Restrictions only narrow on the way down. The cap in force for an agent is the smallest of
//! its own persona's cap and its parent's (the top level has none); its tools are those that
//! pass its persona's filter and every filter above it. An agent may start a child when one more
//! level still fits its cap, and that alone decides whether it has the reserved `task` tool.

use super::persona::{DEFAULT_MAX_DEPTH, Persona};
use crate::depth::{Depth, TooDeep, check_child_start};
use crate::tools::ToolScope;

/// The depth cap in force and the persona it comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Cap {
    depth: Depth,
    persona: String,
    configured: bool,
}

/// One agent's place in the tree: depth, depth cap, tool scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lineage {
    depth: Depth,
    /// `None` at the top level, which no persona caps.
    cap: Option<Cap>,
    scope: ToolScope,
}

/// A child that may not start here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the persona {persona:?} cannot be started here: {source}; the cap is {}",
    cap_origin(cap_persona, *cap_configured)
)]
pub struct StartRefused {
    pub persona: String,
    /// The persona whose cap is in force.
    pub cap_persona: String,
    /// Whether that persona sets `max_depth` (else its cap is [`DEFAULT_MAX_DEPTH`]).
    pub cap_configured: bool,
    pub source: TooDeep,
}

fn cap_origin(persona: &str, configured: bool) -> String {
    if configured {
        format!("agents.{persona}.max_depth")
    } else {
        format!(
            "the default of the persona {persona:?}, which sets no max_depth ({DEFAULT_MAX_DEPTH})"
        )
    }
}

impl Lineage {
    /// The top-level agent: depth 0, no cap, every tool.
    pub fn top() -> Lineage {
        Lineage {
            depth: Depth::TOP,
            cap: None,
            scope: ToolScope::top(),
        }
    }

    pub fn depth(&self) -> Depth {
        self.depth
    }

    /// The depth cap in force, `None` at the top level.
    #[cfg(test)]
    pub fn cap(&self) -> Option<Depth> {
        self.cap.as_ref().map(|cap| cap.depth)
    }

    /// The tool filters from the top level down to this agent; resolve it against the session's
    /// registry for the tools it has.
    pub fn scope(&self) -> &ToolScope {
        &self.scope
    }

    /// Whether this agent may start a child (of a persona whose own cap allows it).
    pub fn may_start_children(&self) -> bool {
        self.scope.delegation()
    }

    /// The lineage of a child of this agent with `persona`, or why it may not start: its depth
    /// would pass the smaller of this agent's cap and the persona's.
    pub fn child(&self, persona: &Persona) -> Result<Lineage, StartRefused> {
        let own = Cap {
            depth: persona.depth_cap(),
            persona: persona.name.clone(),
            configured: persona.max_depth.is_some(),
        };
        let cap = match &self.cap {
            Some(parent) if parent.depth < own.depth => parent.clone(),
            _ => own,
        };
        let depth = check_child_start(self.depth, cap.depth).map_err(|source| StartRefused {
            persona: persona.name.clone(),
            cap_persona: cap.persona.clone(),
            cap_configured: cap.configured,
            source,
        })?;
        let delegation = check_child_start(depth, cap.depth).is_ok();
        Ok(Lineage {
            depth,
            scope: self.scope.child(persona.tools.as_ref(), delegation),
            cap: Some(cap),
        })
    }
}

#[cfg(test)]
#[path = "lineage_tests.rs"]
mod tests;
