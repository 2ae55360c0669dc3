//! Personas: what a child agent may be. Each has a name, a description (what the model reads
//! when it picks one), the instructions the child runs with, and optionally its own model, a
//! tool filter and a depth cap; its model is a table of its own or the name of a configured
//! model ([`PersonaModel`]). They are configured as `[agents.NAME]` tables
//! (`crate::config` reads and checks them); [`Personas`] is the set a session offers, which
//! always has one called [`GENERAL`].

use std::fmt;

use crate::depth::Depth;
use crate::model::ModelConfig;
use crate::tools::ToolFilter;

/// The name of the persona that exists unless the configuration defines its own of that name.
pub const GENERAL: &str = "general";

/// The depth cap of a persona that sets no `max_depth`: its agent runs at depth 1 at most, so
/// only the top level can start it and it starts no children of its own.
pub const DEFAULT_MAX_DEPTH: Depth = match Depth::new(1) {
    Some(depth) => depth,
    None => Depth::TOP,
};

const GENERAL_DESCRIPTION: &str = "A general-purpose helper for a delegated sub-task: it works \
on the one task it is given, with the tools it has, and answers with what it found or did.";

const GENERAL_INSTRUCTIONS: &str = "You are a general-purpose helper working on one sub-task \
that another agent delegated to you. Do that task, and only that task, with the tools you have. \
When you are done, answer with a short, complete report of what you found or changed, including \
anything you could not do and why: your answer is the only thing the delegating agent sees.";

/// One persona, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Persona {
    /// Letters, digits, `_` and `-`.
    pub name: String,
    /// One sentence the model reads when it chooses a persona; not empty.
    pub description: String,
    /// The instructions the child runs with; not empty.
    pub instructions: String,
    /// A table of its own or one of the named models; `None`: the session's model.
    pub model: Option<PersonaModel>,
    /// `None`: the child has its parent's tools.
    pub tools: Option<ToolFilter>,
    /// At least 1; `None`: [`DEFAULT_MAX_DEPTH`].
    pub max_depth: Option<Depth>,
}

impl Persona {
    /// The built-in `general` persona.
    pub fn general() -> Persona {
        Persona {
            name: GENERAL.to_owned(),
            description: GENERAL_DESCRIPTION.to_owned(),
            instructions: GENERAL_INSTRUCTIONS.to_owned(),
            model: None,
            tools: None,
            max_depth: None,
        }
    }

    /// The depth cap this persona sets: its `max_depth`, else [`DEFAULT_MAX_DEPTH`].
    pub fn depth_cap(&self) -> Depth {
        self.max_depth.unwrap_or(DEFAULT_MAX_DEPTH)
    }
}

/// The model a persona's agents run on, when it names one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PersonaModel {
    /// A whole `[model]`-shaped table of the persona's own.
    Own(ModelConfig),
    /// The name of one of the `[models.NAME]` tables, checked when the configuration loads.
    Named(String),
}

/// There is no persona of that name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("there is no persona {name:?}; the personas are: {known}")]
pub struct UnknownPersona {
    pub name: String,
    pub known: String,
}

/// The personas of a session, by name: the configured ones, and [`GENERAL`] unless one of them
/// has that name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Personas {
    /// Sorted by name, names unique.
    list: Vec<Persona>,
    general_built_in: bool,
}

impl Default for Personas {
    /// Only the built-in `general`.
    fn default() -> Personas {
        Personas::new(Vec::new())
    }
}

impl Personas {
    /// The configured personas and, unless one of them is called `general`, the built-in one.
    /// Of two with the same name the first is kept (a configuration file cannot have two).
    pub fn new(configured: Vec<Persona>) -> Personas {
        let mut list = configured;
        list.sort_by(|a, b| a.name.cmp(&b.name));
        list.dedup_by(|later, first| later.name == first.name);
        let general_built_in = !list.iter().any(|p| p.name == GENERAL);
        if general_built_in {
            list.push(Persona::general());
            list.sort_by(|a, b| a.name.cmp(&b.name));
        }
        Personas {
            list,
            general_built_in,
        }
    }

    pub fn get(&self, name: &str) -> Option<&Persona> {
        self.list.iter().find(|p| p.name == name)
    }

    /// The persona `name`, or the error naming every persona there is.
    pub fn lookup(&self, name: &str) -> Result<&Persona, UnknownPersona> {
        self.get(name).ok_or_else(|| UnknownPersona {
            name: name.to_owned(),
            known: self.to_string(),
        })
    }

    /// Every persona, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Persona> {
        self.list.iter()
    }

    /// Whether `name` is agentd's own persona rather than a configured one.
    pub fn is_built_in(&self, name: &str) -> bool {
        self.general_built_in && name == GENERAL
    }
}

impl fmt::Display for Personas {
    /// The names, comma-separated.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.list.iter().map(|p| p.name.as_str()).collect();
        f.write_str(&names.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn persona(name: &str) -> Persona {
        Persona {
            name: name.to_owned(),
            description: format!("the {name}"),
            instructions: "do it".to_owned(),
            model: None,
            tools: None,
            max_depth: None,
        }
    }

    #[test]
    fn general_exists_when_nothing_is_configured() {
        let personas = Personas::default();
        let general = personas.lookup(GENERAL).expect("general");
        assert_eq!(general, &Persona::general());
        assert!(personas.is_built_in(GENERAL));
        assert!(general.description.contains("general-purpose helper"));
        assert!(general.instructions.contains("delegated"));
        assert_eq!(general.depth_cap(), DEFAULT_MAX_DEPTH);
        assert_eq!(DEFAULT_MAX_DEPTH.get(), 1);
    }

    #[test]
    fn configured_personas_extend_the_set_and_one_called_general_replaces_it() {
        let personas = Personas::new(vec![persona("reviewer"), persona("docs")]);
        assert_eq!(personas.to_string(), "docs, general, reviewer");
        assert!(personas.is_built_in(GENERAL));
        assert!(!personas.is_built_in("docs"));

        let mine = Personas::new(vec![persona(GENERAL)]);
        assert_eq!(mine.to_string(), "general");
        assert_eq!(
            mine.lookup(GENERAL).expect("general").description,
            "the general"
        );
        assert!(!mine.is_built_in(GENERAL));
    }

    #[test]
    fn an_unknown_persona_names_every_one_there_is() {
        let personas = Personas::new(vec![persona("reviewer")]);
        let err = personas.lookup("critic").expect_err("unknown");
        assert_eq!(
            err.to_string(),
            "there is no persona \"critic\"; the personas are: general, reviewer"
        );
    }

    #[test]
    fn a_persona_without_max_depth_has_the_default_cap() {
        let mut deep = persona("deep");
        deep.max_depth = Depth::new(3);
        assert_eq!(deep.depth_cap().get(), 3);
        assert_eq!(persona("plain").depth_cap(), DEFAULT_MAX_DEPTH);
    }
}
