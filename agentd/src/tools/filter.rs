//! The one resolver of which tools an agent has: its [`ToolScope`] (the tool filters from the
//! top level down to it) against the live [`ToolRegistry`]. The schemas the model is offered
//! ([`super::offered`]) and what a call may run ([`super::run_scoped`]) both come from
//! [`ToolScope::resolve`], so an agent can never call a tool it was not shown.
//!
//! A [`ToolFilter`] applies `allow`, then `deny`: without `allow` every filtered tool passes
//! (so a deny-only filter admits tools registered after it was written), `allow = []` passes
//! none, and `deny` removes from what passed. A scope passes a tool only when every filter on it
//! does, so a child never has a tool its parent lacks. Reserved tools (`task`) are not filtered:
//! the scope says whether the agent may start children. `docs/tool-filter.md` is the table of
//! these rules, generated from this resolver by its tests.

use std::fmt;

use super::registry::{Admission, ToolRegistry, ToolSet, reserved_because};

/// Which list of a filter a name is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterList {
    Allow,
    Deny,
}

impl fmt::Display for FilterList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FilterList::Allow => "allow",
            FilterList::Deny => "deny",
        })
    }
}

/// A tool filter could not be made. Where it came from (a persona, a file, a line) is added by
/// the caller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    #[error(
        "filters nothing; give allow (the only tools it may use) or deny (tools it may not \
         use), or drop the filter"
    )]
    Empty,
    #[error("{list} lists {name:?}, which is not a tool agentd has; the tools are: {known}")]
    Unknown {
        list: FilterList,
        /// Where in its list the name is, counting from 0.
        index: usize,
        name: String,
        known: String,
    },
    #[error("{list} lists {name:?}, which is reserved: {because}")]
    Reserved {
        list: FilterList,
        index: usize,
        name: String,
        because: &'static str,
    },
}

/// One agent's restriction of the tools: `allow` then `deny`, checked against a registry when
/// made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFilter {
    allow: Option<Vec<String>>,
    deny: Vec<String>,
}

impl ToolFilter {
    /// A filter of the tools of `registry`. Fails when it filters nothing (neither list, or only
    /// an empty `deny`) or names a tool `registry` does not have or a reserved one.
    pub fn new(
        allow: Option<Vec<String>>,
        deny: Option<Vec<String>>,
        registry: &ToolRegistry,
    ) -> Result<ToolFilter, FilterError> {
        let deny = deny.unwrap_or_default();
        if allow.is_none() && deny.is_empty() {
            return Err(FilterError::Empty);
        }
        let lists = [
            (FilterList::Allow, allow.as_deref()),
            (FilterList::Deny, Some(&deny)),
        ];
        for (list, names) in lists {
            for (index, name) in names.unwrap_or_default().iter().enumerate() {
                check_name(registry, list, index, name)?;
            }
        }
        Ok(ToolFilter { allow, deny })
    }

    /// The `allow` list; `None` when the filter has none (every filtered tool passes it).
    pub fn allow(&self) -> Option<&[String]> {
        self.allow.as_deref()
    }

    pub fn deny(&self) -> &[String] {
        &self.deny
    }

    /// Whether a filtered tool `name` passes: allowed (or no `allow`), then not denied.
    pub fn passes(&self, name: &str) -> bool {
        let allowed = self
            .allow
            .as_ref()
            .is_none_or(|allow| allow.iter().any(|a| a == name));
        allowed && !self.deny.iter().any(|d| d == name)
    }
}

impl fmt::Display for ToolFilter {
    /// As a configuration file writes it: `{ allow = ["read_file"], deny = ["bash"] }`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |names: &[String]| {
            let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
            format!("[{}]", quoted.join(", "))
        };
        let mut parts = Vec::new();
        if let Some(allow) = &self.allow {
            parts.push(format!("allow = {}", list(allow)));
        }
        if !self.deny.is_empty() {
            parts.push(format!("deny = {}", list(&self.deny)));
        }
        write!(f, "{{ {} }}", parts.join(", "))
    }
}

fn check_name(
    registry: &ToolRegistry,
    list: FilterList,
    index: usize,
    name: &str,
) -> Result<(), FilterError> {
    if let Some(because) = reserved_because(name) {
        return Err(FilterError::Reserved {
            list,
            index,
            name: name.to_owned(),
            because,
        });
    }
    match registry.admission(name) {
        Some(Admission::Filtered) => Ok(()),
        _ => Err(FilterError::Unknown {
            list,
            index,
            name: name.to_owned(),
            known: registry.filterable(),
        }),
    }
}

/// Where an agent stands: the filters from the top level down to it, and whether it may start
/// children (which admits the reserved `task`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolScope {
    filters: Vec<ToolFilter>,
    delegation: bool,
    /// The top-level agent's scope, which has the session's own tools (`update_plan`).
    top: bool,
}

impl ToolScope {
    /// The top-level agent: no filter; it may start children.
    pub fn top() -> ToolScope {
        ToolScope {
            filters: Vec::new(),
            delegation: true,
            top: true,
        }
    }

    /// The scope of a child: this scope's filters and the child's own, if it has one (so the
    /// child's tools are at most this scope's), with `delegation` saying whether the child may
    /// start children of its own.
    pub fn child(&self, filter: Option<&ToolFilter>, delegation: bool) -> ToolScope {
        let mut filters = self.filters.clone();
        filters.extend(filter.cloned());
        ToolScope {
            filters,
            delegation,
            top: false,
        }
    }

    /// The filters from the top level down, outermost first.
    pub fn filters(&self) -> &[ToolFilter] {
        &self.filters
    }

    /// Whether the agent may start children.
    pub fn delegation(&self) -> bool {
        self.delegation
    }

    /// The tools this scope has among those `registry` holds now, in the registry's order:
    /// every filtered tool that passes every filter, and each reserved tool its rule admits.
    pub fn resolve(&self, registry: &ToolRegistry) -> ToolSet {
        let names = registry
            .entries()
            .filter(|(name, admission)| match admission {
                Admission::Filtered => self.filters.iter().all(|f| f.passes(name)),
                Admission::Reserved => self.delegation,
                Admission::TopLevel => self.top,
            })
            .map(|(name, _)| name.to_owned())
            .collect();
        ToolSet::from_names(names)
    }

    /// Whether a call of `name` may run: `Err` says why not, to the model.
    pub fn admit(&self, registry: &ToolRegistry, name: &str) -> Result<(), NotOffered> {
        let offered = self.resolve(registry);
        if offered.contains(name) {
            return Ok(());
        }
        if registry.contains(name) {
            Err(NotOffered::Hidden {
                name: name.to_owned(),
                offered,
            })
        } else {
            Err(NotOffered::Unknown {
                name: name.to_owned(),
                offered,
            })
        }
    }
}

/// A call of a tool the agent was not offered. The text is what the model reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotOffered {
    /// No such tool: the same text a session without filters has always answered.
    #[error("unknown tool \"{name}\"; the tools are: {offered}")]
    Unknown { name: String, offered: ToolSet },
    /// The session has the tool but this agent's scope hides it.
    #[error(
        "the tool \"{name}\" is not available to this agent; its tools are: {}",
        listed(offered)
    )]
    Hidden { name: String, offered: ToolSet },
}

fn listed(offered: &ToolSet) -> String {
    if offered.is_empty() {
        "none".to_owned()
    } else {
        offered.to_string()
    }
}

#[cfg(test)]
#[path = "filter_tests.rs"]
mod tests;
