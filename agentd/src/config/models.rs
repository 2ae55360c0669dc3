//! Named models: the `[models.NAME]` tables of the configuration file and its top-level
//! `default_model`, checked when the file loads, with errors naming the file, the line, the
//! model and the key.
//!
//! ```toml
//! [model]                      # the default model, called "default" in the editor's select
//! base_url = "https://api.deepseek.com/v1"
//! model = "deepseek-chat"
//! api_key_env = "DEEPSEEK_API_KEY"
//!
//! [models.fast]                # another model a session may switch to, or a persona name
//! base_url = "http://localhost:11434/v1"
//! model = "qwen3"
//! ```
//!
//! Each table is `[model]`-shaped and read by the same parser; it inherits nothing from
//! `[model]`, and since nothing else fills its keys in (the `AGENTD_*` variables and
//! `--model-script` reach `[model]` only), the keys its provider needs are checked at load, as
//! a persona's own model table is. A name is letters, digits, `-`, `_` and `.`; `default` is
//! the name of `[model]` and no table may take it.
//!
//! Without a `[model]` (none in the file, nothing from the variables or flags) the default is
//! the table `default_model = "NAME"` picks; `default_model` beside a `[model]` that sets a key
//! is refused as two answers to one question.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use toml::Spanned;

use super::checks::{is_variable_name, line_at};
use crate::model::{ModelConfig, ProviderKind};

/// The name `[model]` has among the models (in the editor's select and in `model/selected`).
pub const DEFAULT_MODEL_NAME: &str = "default";

/// The `[models]` table as written: model tables by name.
pub(super) type RawModels = BTreeMap<String, Spanned<ModelConfig>>;

/// One `[models.NAME]` table, checked, its script taken from the file's directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedModel {
    /// Letters, digits, `-`, `_` and `.`; never [`DEFAULT_MODEL_NAME`].
    pub name: String,
    pub model: ModelConfig,
}

/// Whether `name` may name a model: a non-empty word of letters, digits, `-`, `_` and `.`.
pub fn is_model_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The named models or the default model choice of the file are wrong. Every message names
/// the file and the line, and says what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelsError {
    #[error(
        "the configuration file {}, line {line}: models.{name:?} is not a model name; use \
         letters, digits, `-`, `_` and `.`",
        path.display()
    )]
    NotAName {
        path: PathBuf,
        line: usize,
        name: String,
    },
    #[error(
        "the configuration file {}, line {line}: [models.default] is not allowed: \"default\" is \
         the name of the [model] table; give this model another name",
        path.display()
    )]
    Reserved { path: PathBuf, line: usize },
    #[error(
        "the configuration file {}, line {line}: models.{name}.api_key_env must be the name of \
         an environment variable (like DEEPSEEK_API_KEY), not the key itself; put the key in \
         that variable",
        path.display()
    )]
    ApiKeyEnvNotAName {
        path: PathBuf,
        line: usize,
        name: String,
    },
    #[error(
        "the configuration file {}, line {line}: models.{name} {problem}; a named model is a \
         whole [model] table and does not inherit keys from [model]",
        path.display()
    )]
    Incomplete {
        path: PathBuf,
        line: usize,
        name: String,
        problem: &'static str,
    },
    #[error(
        "the configuration file {}, line {line}: default_model = {name:?} names no model; the \
         models are: {known}",
        path.display()
    )]
    UnknownDefault {
        path: PathBuf,
        line: usize,
        name: String,
        known: String,
    },
    #[error(
        "the configuration file {}, line {line}: default_model is set, but so is the [model] \
         table, which is the default model whenever it sets anything; drop default_model, or \
         move [model] to a [models.NAME] table",
        path.display()
    )]
    DefaultBesideModel { path: PathBuf, line: usize },
    #[error(
        "the configuration file {} has named models ({known}) but no default model: add a \
         [model] table, or set default_model = \"NAME\" (a top-level key) to one of them",
        path.display()
    )]
    NoDefault { path: PathBuf, known: String },
}

/// What is missing or extra in a whole `[model]`-shaped table whose keys nothing else fills in
/// (a named model's, a persona's own): the keys its provider needs, `base_url` and `model` for
/// `openai`, `script` for `scripted`, and a `script` the provider would not read. `None` when
/// it is complete.
pub(super) fn incomplete(model: &ModelConfig) -> Option<&'static str> {
    match model.provider.unwrap_or_default() {
        ProviderKind::Scripted if model.script.is_none() => {
            Some("has no script (provider = \"scripted\" needs one)")
        }
        ProviderKind::Scripted => None,
        ProviderKind::Openai if model.script.is_some() => {
            Some("has a script, which only provider = \"scripted\" reads")
        }
        ProviderKind::Openai => match (&model.base_url, &model.model) {
            (None, None) => Some("has neither base_url nor model"),
            (None, Some(_)) => Some("has no base_url"),
            (Some(_), None) => Some("has no model"),
            (Some(_), Some(_)) => None,
        },
    }
}

/// The `[models.NAME]` tables of the file at `path` (text `text`), checked, sorted by name.
pub(super) fn named_models(
    raw: RawModels,
    path: &Path,
    text: &str,
) -> Result<Vec<NamedModel>, ModelsError> {
    let base = path.parent().unwrap_or(Path::new(""));
    let mut out = Vec::new();
    for (name, table) in raw {
        let line = line_at(text, table.span().start);
        if name == DEFAULT_MODEL_NAME {
            return Err(ModelsError::Reserved {
                path: path.to_owned(),
                line,
            });
        }
        if !is_model_name(&name) {
            return Err(ModelsError::NotAName {
                path: path.to_owned(),
                line,
                name,
            });
        }
        let mut model = table.into_inner();
        if let Some(var) = &model.api_key_env
            && !is_variable_name(var)
        {
            return Err(ModelsError::ApiKeyEnvNotAName {
                path: path.to_owned(),
                line,
                name,
            });
        }
        if let Some(problem) = incomplete(&model) {
            return Err(ModelsError::Incomplete {
                path: path.to_owned(),
                line,
                name,
                problem,
            });
        }
        model.script = model.script.take().map(|script| base.join(script));
        out.push(NamedModel { name, model });
    }
    Ok(out)
}

/// The file's `default_model`, checked against its named models and its `[model]`: `model`
/// is the file's `[model]` table, whose keys (if it sets any) make it the default.
pub(super) fn default_model(
    raw: Option<Spanned<String>>,
    model: Option<&ModelConfig>,
    named: &[NamedModel],
    path: &Path,
    text: &str,
) -> Result<Option<String>, ModelsError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let line = line_at(text, raw.span().start);
    if model.is_some_and(|m| *m != ModelConfig::default()) {
        return Err(ModelsError::DefaultBesideModel {
            path: path.to_owned(),
            line,
        });
    }
    let name = raw.into_inner();
    if !named.iter().any(|m| m.name == name) {
        return Err(ModelsError::UnknownDefault {
            path: path.to_owned(),
            line,
            name,
            known: known_names(named),
        });
    }
    Ok(Some(name))
}

/// The names of the named models, for messages; `none` without any.
pub(super) fn known_names(named: &[NamedModel]) -> String {
    if named.is_empty() {
        return "none (there is no [models.NAME] table)".to_owned();
    }
    named
        .iter()
        .map(|m| m.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
#[path = "models_tests.rs"]
mod tests;
