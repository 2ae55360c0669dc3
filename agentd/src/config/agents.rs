//! The `[agents.NAME]` tables of the configuration file: the personas a child agent may be,
//! checked when the file loads, with errors naming the file, the line, the persona, the key and
//! the bad value (see [`crate::agents`] for what a persona is).
//!
//! ```toml
//! [agents.reviewer]
//! description = "Reviews a change and reports problems"   # the model reads it to pick one
//! instructions = """
//! You review the change you are given. Report problems; change nothing."""
//! tools = { deny = ["bash", "write_file", "edit_file"] }    # optional: allow, deny or both
//! max_depth = 1                                            # optional: the deepest it may run
//! model = { base_url = "http://localhost:11434/v1", model = "qwen3" }   # optional
//! # model = "fast"                                         # or one of the [models.NAME]
//! ```
//!
//! `model` is a whole `[model]`-shaped table read by the same parser, which does not inherit
//! keys from `[model]`, or the name of one of the `[models.NAME]` tables (see
//! [`super::models`]). Without one the persona uses the session's model (the one the session
//! has selected). Configured personas extend the built-in `general`, which a persona of that
//! name replaces.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use toml::Spanned;

use super::checks::{is_variable_name, line_at};
use super::models::{DEFAULT_MODEL_NAME, NamedModel, incomplete, known_names};
use crate::agents::{
    DEFAULT_MAX_DEPTH, Depth, DepthOrigin, InvalidDepth, Persona, PersonaModel, Personas,
};
use crate::model::ModelConfig;
use crate::tools::{FilterError, FilterList, ToolFilter, ToolRegistry, is_tool_name};

/// The `[agents]` table as written: persona tables by name.
pub(super) type RawAgents = BTreeMap<String, Spanned<RawPersona>>;

/// One `[agents.NAME]` table as written. Everything is optional here so that a missing key gets
/// a message of its own.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPersona {
    description: Option<Spanned<String>>,
    instructions: Option<Spanned<String>>,
    model: Option<Spanned<RawPersonaModel>>,
    tools: Option<Spanned<RawFilter>>,
    max_depth: Option<Spanned<toml::Value>>,
}

/// A persona's `model` as written: a table, read by `[model]`'s parser (so its errors name
/// the key and the line as `[model]`'s do), or a name.
#[derive(Debug)]
enum RawPersonaModel {
    Table(ModelConfig),
    Name(String),
}

impl<'de> Deserialize<'de> for RawPersonaModel {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<RawPersonaModel, D::Error> {
        struct Either;
        impl<'de> Visitor<'de> for Either {
            type Value = RawPersonaModel;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(
                    "a [model]-shaped table, or the name of one of the [models.NAME] tables",
                )
            }

            fn visit_str<E: de::Error>(self, name: &str) -> Result<RawPersonaModel, E> {
                Ok(RawPersonaModel::Name(name.to_owned()))
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawPersonaModel, A::Error> {
                ModelConfig::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(RawPersonaModel::Table)
            }
        }
        deserializer.deserialize_any(Either)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFilter {
    allow: Option<Vec<Spanned<String>>>,
    deny: Option<Vec<Spanned<String>>>,
}

/// A persona of the configuration file is wrong. Every message names the file, the line, the
/// persona and the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PersonaError {
    #[error(
        "the configuration file {}, line {line}: agents.{name:?} is not a persona name; use \
         letters, digits, `_` and `-`",
        path.display()
    )]
    NotAName {
        path: PathBuf,
        line: usize,
        name: String,
    },
    #[error(
        "the configuration file {}, line {line}: agents.{persona} has no {key}; add {key} = \
         \"...\" ({what})",
        path.display()
    )]
    Missing {
        path: PathBuf,
        line: usize,
        persona: String,
        key: &'static str,
        what: &'static str,
    },
    #[error(
        "the configuration file {}, line {line}: agents.{persona}.{key} = {value:?} is not \
         allowed; it must not be empty ({what})",
        path.display()
    )]
    Blank {
        path: PathBuf,
        line: usize,
        persona: String,
        key: &'static str,
        value: String,
        what: &'static str,
    },
    #[error(
        "the configuration file {}, line {line}: agents.{persona}.tools = {written} {source}",
        path.display()
    )]
    EmptyFilter {
        path: PathBuf,
        line: usize,
        persona: String,
        written: String,
        source: Box<FilterError>,
    },
    #[error(
        "the configuration file {}, line {line}: agents.{persona}.tools.{source}",
        path.display()
    )]
    Filter {
        path: PathBuf,
        line: usize,
        persona: String,
        source: Box<FilterError>,
    },
    #[error(transparent)]
    Depth(#[from] InvalidDepth),
    #[error(
        "the configuration file {}, line {line}: agents.{persona}.max_depth = 0 is not allowed; \
         a persona runs as a child, at depth 1 or deeper, so it could never start; use at least \
         1 (without max_depth it is {DEFAULT_MAX_DEPTH})",
        path.display()
    )]
    ZeroDepth {
        path: PathBuf,
        line: usize,
        persona: String,
    },
    #[error(
        "the configuration file {}, line {line}: agents.{persona}.model.api_key_env must be the \
         name of an environment variable (like DEEPSEEK_API_KEY), not the key itself; put the \
         key in that variable",
        path.display()
    )]
    ApiKeyEnvNotAName {
        path: PathBuf,
        line: usize,
        persona: String,
    },
    #[error(
        "the configuration file {}, line {line}: agents.{persona}.model {problem}; a persona's \
         model is a whole [model] table and does not inherit keys from [model]",
        path.display()
    )]
    Model {
        path: PathBuf,
        line: usize,
        persona: String,
        problem: String,
    },
    #[error(
        "the configuration file {}, line {line}: agents.{persona}.model = {name:?} names no \
         model; the named models are: {known}. Name one of them, write the model as a table, or \
         drop model to use the session's model",
        path.display()
    )]
    UnknownModel {
        path: PathBuf,
        line: usize,
        persona: String,
        name: String,
        known: String,
    },
}

const DESCRIPTION: &str = "one sentence saying what the persona is for: the model reads it when \
                           it picks one";
const INSTRUCTIONS: &str = "the instructions its agent runs with";

/// The personas of the file at `path` whose text is `text`: checked, with the built-in `general`
/// added unless one is configured. Tool filters are checked against the built-in tools, model
/// names against the file's `models`.
pub(super) fn personas(
    raw: RawAgents,
    models: &[NamedModel],
    path: &Path,
    text: &str,
) -> Result<Personas, PersonaError> {
    let registry = ToolRegistry::builtin();
    let mut list = Vec::new();
    for (name, table) in raw {
        let line = line_at(text, table.span().start);
        let checker = PersonaChecker {
            path,
            text,
            persona: &name,
        };
        if !is_tool_name(&name) {
            return Err(PersonaError::NotAName {
                path: path.to_owned(),
                line,
                name,
            });
        }
        let raw = table.into_inner();
        let description = checker.text_key("description", DESCRIPTION, raw.description, line)?;
        let instructions =
            checker.text_key("instructions", INSTRUCTIONS, raw.instructions, line)?;
        let tools = match raw.tools {
            None => None,
            Some(tools) => Some(checker.filter(tools, &registry)?),
        };
        let max_depth = match raw.max_depth {
            None => None,
            Some(value) => Some(checker.depth(value)?),
        };
        let model = match raw.model {
            None => None,
            Some(model) => Some(checker.model(model, models)?),
        };
        list.push(Persona {
            name,
            description,
            instructions,
            model,
            tools,
            max_depth,
        });
    }
    Ok(Personas::new(list))
}

/// Checks the keys of one persona, naming it, the file and the line in errors.
struct PersonaChecker<'a> {
    path: &'a Path,
    text: &'a str,
    persona: &'a str,
}

impl PersonaChecker<'_> {
    fn line(&self, offset: usize) -> usize {
        line_at(self.text, offset)
    }

    /// The text the file gives between the byte offsets of a span.
    fn written(&self, span: std::ops::Range<usize>) -> &str {
        self.text.get(span).unwrap_or_default()
    }

    fn text_key(
        &self,
        key: &'static str,
        what: &'static str,
        value: Option<Spanned<String>>,
        table_line: usize,
    ) -> Result<String, PersonaError> {
        let Some(value) = value else {
            return Err(PersonaError::Missing {
                path: self.path.to_owned(),
                line: table_line,
                persona: self.persona.to_owned(),
                key,
                what,
            });
        };
        if value.get_ref().trim().is_empty() {
            return Err(PersonaError::Blank {
                path: self.path.to_owned(),
                line: self.line(value.span().start),
                persona: self.persona.to_owned(),
                key,
                value: value.into_inner(),
                what,
            });
        }
        Ok(value.into_inner())
    }

    fn filter(
        &self,
        tools: Spanned<RawFilter>,
        registry: &ToolRegistry,
    ) -> Result<ToolFilter, PersonaError> {
        let table_line = self.line(tools.span().start);
        let raw = tools.into_inner();
        // What an empty filter is, however it was written (inline or as a table).
        let written = if raw.deny.is_some() {
            "{ deny = [] }"
        } else {
            "{}"
        };
        let lines = |list: &Option<Vec<Spanned<String>>>| -> Vec<usize> {
            list.iter()
                .flatten()
                .map(|name| self.line(name.span().start))
                .collect()
        };
        let (allow_lines, deny_lines) = (lines(&raw.allow), lines(&raw.deny));
        let names = |list: Option<Vec<Spanned<String>>>| {
            list.map(|names| names.into_iter().map(Spanned::into_inner).collect())
        };
        ToolFilter::new(names(raw.allow), names(raw.deny), registry).map_err(|source| {
            let line = match &source {
                FilterError::Empty => {
                    return PersonaError::EmptyFilter {
                        path: self.path.to_owned(),
                        line: table_line,
                        persona: self.persona.to_owned(),
                        written: written.to_owned(),
                        source: Box::new(source),
                    };
                }
                FilterError::Unknown { list, index, .. }
                | FilterError::Reserved { list, index, .. } => {
                    let lines = match list {
                        FilterList::Allow => &allow_lines,
                        FilterList::Deny => &deny_lines,
                    };
                    lines.get(*index).copied().unwrap_or(table_line)
                }
            };
            PersonaError::Filter {
                path: self.path.to_owned(),
                line,
                persona: self.persona.to_owned(),
                source: Box::new(source),
            }
        })
    }

    fn depth(&self, value: Spanned<toml::Value>) -> Result<Depth, PersonaError> {
        let line = self.line(value.span().start);
        let origin = DepthOrigin::new(
            format!("agents.{}.max_depth", self.persona),
            format!(
                "the configuration file {}, line {line}",
                self.path.display()
            ),
        );
        let written = self.written(value.span()).to_owned();
        let depth = Depth::from_toml(value.get_ref(), &written, &origin)?;
        if depth == Depth::TOP {
            return Err(PersonaError::ZeroDepth {
                path: self.path.to_owned(),
                line,
                persona: self.persona.to_owned(),
            });
        }
        Ok(depth)
    }

    /// A model table gets the checks `[model]` gets when the file loads, and the keys its
    /// provider needs (which `[model]` leaves to when the provider is built, since the
    /// environment may add them); a name must be one of `models`.
    fn model(
        &self,
        model: Spanned<RawPersonaModel>,
        models: &[NamedModel],
    ) -> Result<PersonaModel, PersonaError> {
        let line = self.line(model.span().start);
        let mut model = match model.into_inner() {
            RawPersonaModel::Name(name) => {
                if name == DEFAULT_MODEL_NAME || !models.iter().any(|m| m.name == name) {
                    return Err(PersonaError::UnknownModel {
                        path: self.path.to_owned(),
                        line,
                        persona: self.persona.to_owned(),
                        name,
                        known: known_names(models),
                    });
                }
                return Ok(PersonaModel::Named(name));
            }
            RawPersonaModel::Table(model) => model,
        };
        if let Some(var) = &model.api_key_env
            && !is_variable_name(var)
        {
            return Err(PersonaError::ApiKeyEnvNotAName {
                path: self.path.to_owned(),
                line,
                persona: self.persona.to_owned(),
            });
        }
        let problem = |problem: &str| PersonaError::Model {
            path: self.path.to_owned(),
            line,
            persona: self.persona.to_owned(),
            problem: problem.to_owned(),
        };
        if model.context_window.is_some() {
            return Err(problem(
                "sets context_window, but a child agent's history is never compacted; drop it",
            ));
        }
        if let Some(missing) = incomplete(&model) {
            return Err(problem(missing));
        }
        let base = self.path.parent().unwrap_or(Path::new(""));
        model.script = model.script.take().map(|script| base.join(script));
        Ok(PersonaModel::Own(model))
    }
}

#[cfg(test)]
#[path = "agents_tests.rs"]
mod tests;
