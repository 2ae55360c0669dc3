//! The tools a session has ([`ToolRegistry`]), replacing a constant list: what a tool filter is
//! checked against when the configuration loads, and what it is resolved against, live, every
//! time an agent's tools are offered or a call is admitted (see [`super::filter`]).
//!
//! A registered tool is admitted in one of two ways ([`Admission`]). Most are *filtered*: an
//! agent has them unless a tool filter on its way down from the top level hides them. A few
//! names are *reserved* ([`RESERVED`]): a filter may not name them, because something else
//! decides whether an agent has them: `task` (starting a child agent), which an agent has when
//! its depth cap lets it start a child (RFC 0007), and `update_plan`, which only the top-level
//! agent has: the plan is the session's, shown to the editor (RFC 0003).

use std::fmt;

use super::spec::NAMES;

pub use super::spec::{TASK, UPDATE_PLAN};

/// The names no tool filter may name, each decided by its own rule.
pub const RESERVED: [&str; 2] = [TASK, UPDATE_PLAN];

/// Why a filter may not name a reserved tool, for the message that refuses it.
pub fn reserved_because(name: &str) -> Option<&'static str> {
    match name {
        TASK => Some(
            "whether an agent may start child agents is decided by max_depth, not by a tool \
             filter",
        ),
        UPDATE_PLAN => Some(
            "the plan is the session's, shown to the editor: only the top-level agent has \
             update_plan",
        ),
        _ => None,
    }
}

/// How an agent comes to have a registered tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Unless a tool filter above or at the agent hides it.
    Filtered,
    /// By the tool's own rule (for `task`: the agent may start a child), never by a filter.
    Reserved,
    /// The top-level agent's alone (`update_plan`), never by a filter.
    TopLevel,
}

/// A tool could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    #[error("the tool {name:?} is registered twice")]
    Duplicate { name: String },
    #[error("{name:?} is not a tool name (letters, digits, `_` and `-`)")]
    NotAName { name: String },
}

/// The tools one session has, in the order they were registered (the order the model sees).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolRegistry {
    tools: Vec<(String, Admission)>,
}

impl Default for ToolRegistry {
    fn default() -> ToolRegistry {
        ToolRegistry::builtin()
    }
}

impl ToolRegistry {
    /// A registry with no tool.
    pub fn empty() -> ToolRegistry {
        ToolRegistry { tools: Vec::new() }
    }

    /// The tools agentd has without anything registered on top: bash, bash_output, bash_kill,
    /// read_file, write_file, edit_file. What configuration files are checked against.
    pub fn builtin() -> ToolRegistry {
        ToolRegistry {
            tools: NAMES
                .iter()
                .map(|name| ((*name).to_owned(), Admission::Filtered))
                .collect(),
        }
    }

    /// Adds a tool at the end. A name in [`RESERVED`] is admitted by its own rule; any other
    /// by the filters.
    pub fn register(&mut self, name: &str) -> Result<(), RegistryError> {
        if !is_tool_name(name) {
            return Err(RegistryError::NotAName {
                name: name.to_owned(),
            });
        }
        if self.contains(name) {
            return Err(RegistryError::Duplicate {
                name: name.to_owned(),
            });
        }
        let admission = match name {
            UPDATE_PLAN => Admission::TopLevel,
            _ if RESERVED.contains(&name) => Admission::Reserved,
            _ => Admission::Filtered,
        };
        self.tools.push((name.to_owned(), admission));
        Ok(())
    }

    /// This registry with `name` added; see [`ToolRegistry::register`].
    pub fn with(mut self, name: &str) -> Result<ToolRegistry, RegistryError> {
        self.register(name)?;
        Ok(self)
    }

    /// Every registered name, in registration order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(|(name, _)| name.as_str())
    }

    /// The registered tools with how each is admitted, in registration order.
    pub fn entries(&self) -> impl Iterator<Item = (&str, Admission)> {
        self.tools
            .iter()
            .map(|(name, admission)| (name.as_str(), *admission))
    }

    pub fn contains(&self, name: &str) -> bool {
        self.tools.iter().any(|(known, _)| known == name)
    }

    /// How `name` is admitted, `None` when it is not registered.
    pub fn admission(&self, name: &str) -> Option<Admission> {
        self.tools
            .iter()
            .find(|(known, _)| known == name)
            .map(|(_, admission)| *admission)
    }

    /// The names a filter may name, comma-separated, for messages.
    pub fn filterable(&self) -> String {
        let names: Vec<&str> = self
            .entries()
            .filter(|(_, admission)| *admission == Admission::Filtered)
            .map(|(name, _)| name)
            .collect();
        names.join(", ")
    }
}

/// The tools one agent has: a subset of a registry, in its order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolSet(Vec<String>);

impl ToolSet {
    pub(super) fn from_names(names: Vec<String>) -> ToolSet {
        ToolSet(names)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.0.iter().any(|known| known == name)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }
}

impl fmt::Display for ToolSet {
    /// The names, comma-separated, as messages list them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join(", "))
    }
}

/// Letters, digits, `_` and `-`: what a tool's name may be made of.
pub fn is_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_registry_is_the_six_tools_in_the_order_the_model_sees_them() {
        let registry = ToolRegistry::builtin();
        let names: Vec<&str> = registry.names().collect();
        assert_eq!(
            names,
            [
                "bash",
                "bash_output",
                "bash_kill",
                "read_file",
                "write_file",
                "edit_file"
            ]
        );
        assert!(
            registry
                .entries()
                .all(|(_, admission)| admission == Admission::Filtered)
        );
        assert!(!registry.contains(TASK), "task is registered by its owner");
    }

    #[test]
    fn registering_appends_and_refuses_duplicates_and_bad_names() {
        let mut registry = ToolRegistry::builtin();
        registry.register("lint").expect("registers");
        assert_eq!(registry.names().last(), Some("lint"));
        assert_eq!(registry.admission("lint"), Some(Admission::Filtered));
        assert_eq!(
            registry.register("bash"),
            Err(RegistryError::Duplicate {
                name: "bash".into()
            })
        );
        assert_eq!(
            registry.register("rm -rf"),
            Err(RegistryError::NotAName {
                name: "rm -rf".into()
            })
        );
        assert!(registry.register("").is_err());
    }

    #[test]
    fn task_is_reserved_and_admitted_by_its_own_rule() {
        let registry = ToolRegistry::builtin().with(TASK).expect("registers");
        assert_eq!(registry.admission(TASK), Some(Admission::Reserved));
        assert!(reserved_because(TASK).is_some());
        assert!(!registry.filterable().contains(TASK));
        assert_eq!(registry.admission("nope"), None);
    }
}
