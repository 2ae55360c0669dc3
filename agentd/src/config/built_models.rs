//! The configured models, built from the effective configuration: the default first, then the
//! named ones, each with its provider or why it cannot be built (see `models.rs` for the
//! tables, RFC 0013).

use std::path::Path;
use std::sync::Arc;

use super::DEFAULT_MODEL_NAME;
use super::compaction::CompactionPolicy;
use super::effective::Effective;
use crate::agents::PersonaModel;
use crate::model::{ModelConfig, ModelError, Provider, build_provider};

/// Each persona's own model, or why it cannot be built, by persona name.
pub type PersonaProviders =
    std::collections::BTreeMap<String, Result<Arc<dyn Provider>, Arc<ModelError>>>;

/// One configured model, built: what a session may select.
#[derive(Clone)]
pub struct BuiltModel {
    /// `default` for `[model]`, else the `[models.NAME]` name.
    pub name: String,
    /// What an editor shows for it: the name and the model the server knows, `fast (qwen3)`
    /// (a scripted model shows its script's file name).
    pub label: String,
    /// The provider, or why it cannot be built (the error of a turn that uses it).
    pub provider: Result<Arc<dyn Provider>, Arc<ModelError>>,
    /// How a session using it compacts its history; `None`, never, without its
    /// `context_window`.
    pub compaction: Option<CompactionPolicy>,
}

impl std::fmt::Debug for BuiltModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuiltModel")
            .field("name", &self.name)
            .field("label", &self.label)
            .field("provider", &self.provider.as_ref().map(|p| p.describe()))
            .field("compaction", &self.compaction)
            .finish()
    }
}

impl Effective {
    /// The table of the default model (`None`: nothing configures one).
    pub(super) fn default_table(&self) -> Option<&ModelConfig> {
        self.models_in_order().first().and_then(|(_, table)| *table)
    }

    /// Every configured model by name, the default first and then the named ones by name: the
    /// order of the editor's `model` select. Always at least the default, whose table is
    /// `None` when nothing configures one.
    pub fn models_in_order(&self) -> Vec<(&str, Option<&ModelConfig>)> {
        let default = self.default_model.value.as_str();
        let named = |name: &str| self.models.iter().find(|m| m.name == name);
        let mut out = match named(default) {
            Some(m) => vec![(default, Some(&m.model))],
            None => vec![(DEFAULT_MODEL_NAME, self.model.as_ref())],
        };
        out.extend(
            self.models
                .iter()
                .filter(|m| m.name != default)
                .map(|m| (m.name.as_str(), Some(&m.model))),
        );
        out
    }

    /// Builds the default model's provider. Without any model configured this is the error
    /// that says what to add, and where.
    pub fn provider(&self) -> Result<Arc<dyn Provider>, ModelError> {
        let empty = ModelConfig::default();
        build_provider(self.default_table().unwrap_or(&empty), self.file.as_deref())
    }

    /// Builds every configured model once, in [`Effective::models_in_order`]'s order. A model
    /// that cannot be built (its key variable unset, say) is kept with its error: a session
    /// that uses it fails its turn with that text.
    pub fn build_models(&self) -> Vec<BuiltModel> {
        let empty = ModelConfig::default();
        self.models_in_order()
            .into_iter()
            .map(|(name, table)| {
                let table = table.unwrap_or(&empty);
                BuiltModel {
                    name: name.to_owned(),
                    label: format!("{name} ({})", model_id(table)),
                    provider: build_provider(table, self.file.as_deref()).map_err(Arc::new),
                    compaction: self.compaction_for(table),
                }
            })
            .collect()
    }

    /// Builds the model of every persona with a `model` table of its own, by persona name; a
    /// persona without one uses the session's model, and one naming a model uses that model
    /// (both built by [`Effective::build_models`]). A model that cannot be built (its key
    /// variable unset, say) is the error its child fails with.
    pub fn persona_providers(&self) -> PersonaProviders {
        self.personas
            .iter()
            .filter_map(|persona| {
                let Some(PersonaModel::Own(model)) = persona.model.as_ref() else {
                    return None;
                };
                let built = build_provider(model, self.file.as_deref()).map_err(Arc::new);
                Some((persona.name.clone(), built))
            })
            .collect()
    }
}

/// The model a table names, as an editor shows it next to its name: the server's model name,
/// else a scripted model's script file, else that nothing names one.
fn model_id(table: &ModelConfig) -> String {
    if let Some(model) = &table.model {
        return model.clone();
    }
    match table.script.as_deref().and_then(Path::file_name) {
        Some(file) => file.to_string_lossy().into_owned(),
        None => "not configured".to_owned(),
    }
}
