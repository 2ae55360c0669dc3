//! The models sessions may use: every configured model (`[model]` as `default`, each
//! `[models.NAME]`), built once when agentd starts, with its label for the editor and how a
//! session using it compacts its history. A session's own choice among them is its `model`
//! knob ([`crate::knobs::model`]); the editor sees it as the `model` config option, offered only
//! when there is more than one to choose from.
//!
//! A model whose provider cannot be built (its key variable unset, say) is still listed and
//! labelled like any other: the label says what the model is, not whether it works here. It is
//! refused when an editor selects it, with the reason, and a session whose log selected it
//! earlier fails its turn with that reason, as a session of a broken default model does.

use std::sync::Arc;

use crate::config::{BuiltModel, Effective};
use crate::knobs::model::ModelNames;
use crate::model::{ModelError, Provider};

/// Every configured model, the default first; never empty.
#[derive(Debug, Clone)]
pub struct Models {
    default: BuiltModel,
    others: Vec<BuiltModel>,
}

impl Models {
    /// The models of the configuration, built.
    pub fn from_config(config: &Effective) -> Models {
        let mut built = config.build_models().into_iter();
        let default = built.next().unwrap_or_else(|| BuiltModel {
            name: crate::config::DEFAULT_MODEL_NAME.to_owned(),
            label: crate::config::DEFAULT_MODEL_NAME.to_owned(),
            provider: config.provider().map_err(Arc::new),
            compaction: None,
        });
        Models {
            default,
            others: built.collect(),
        }
    }

    /// Every model, the default first.
    pub fn iter(&self) -> impl Iterator<Item = &BuiltModel> {
        std::iter::once(&self.default).chain(self.others.iter())
    }

    /// The names a session may select, for its knob.
    pub fn names(&self) -> ModelNames {
        ModelNames::new(
            self.default.name.clone(),
            self.others.iter().map(|m| m.name.clone()),
        )
    }

    /// The default model.
    pub fn default_model(&self) -> &BuiltModel {
        &self.default
    }

    /// The model `name`, if configured.
    pub fn get(&self, name: &str) -> Option<&BuiltModel> {
        self.iter().find(|m| m.name == name)
    }

    /// The model `name`, else the default (a session's knob only ever names a configured
    /// one; see [`ModelNames::effective`]).
    pub fn select(&self, name: &str) -> &BuiltModel {
        self.get(name).unwrap_or(&self.default)
    }

    /// Whether the editor is offered a choice: only with more than one model.
    pub fn offered(&self) -> bool {
        !self.others.is_empty()
    }

    /// The provider of `model`, or why it cannot be used: with a choice of models, the reason
    /// names the model, so a person knows which table to fix.
    pub fn provider_of(&self, model: &BuiltModel) -> Result<Arc<dyn Provider>, Unusable> {
        model.provider.clone().map_err(|why| Unusable {
            name: self.offered().then(|| model.name.clone()),
            why,
        })
    }
}

/// A model whose provider could not be built: the text a turn using it fails with and a switch
/// to it is refused with. `name` is given when there is a choice of models.
#[derive(Debug, Clone)]
pub struct Unusable {
    pub name: Option<String>,
    pub why: Arc<ModelError>,
}

impl std::fmt::Display for Unusable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.name {
            Some(name) => write!(f, "the model {name:?} cannot be used: {}", self.why),
            None => write!(f, "{}", self.why),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Flags, LoadedConfig};

    fn models(text: &str) -> Models {
        let loaded = LoadedConfig::parse("/etc/agentd/agentd.toml".into(), text).expect("parses");
        let config = Effective::merge(&Flags::default(), loaded, &|_| None).expect("merges");
        Models::from_config(&config)
    }

    #[test]
    fn one_model_is_no_choice_and_its_failure_reads_as_before() {
        let models = models("[model]\nmodel = \"m\"\n");
        assert!(!models.offered());
        assert_eq!(models.names().names(), ["default"]);
        let err = models
            .provider_of(models.default_model())
            .expect_err("no base_url");
        assert!(
            err.to_string()
                .starts_with("the model is not configured: model.base_url is missing"),
            "{err}"
        );
    }

    #[test]
    fn with_a_choice_a_broken_model_is_listed_and_its_failure_names_it() {
        let models = models(
            "[model]\nbase_url = \"http://x/v1\"\nmodel = \"big\"\n\
             [models.fast]\nbase_url = \"http://y/v1\"\nmodel = \"qwen3\"\napi_key_env = \"FAST_KEY\"\n",
        );
        assert!(models.offered());
        assert_eq!(models.names().names(), ["default", "fast"]);
        let labels: Vec<&str> = models.iter().map(|m| m.label.as_str()).collect();
        assert_eq!(
            labels,
            ["default (big)", "fast (qwen3)"],
            "no mark on the broken one"
        );
        let fast = models.get("fast").expect("fast");
        let err = models.provider_of(fast).expect_err("FAST_KEY is not set");
        assert_eq!(
            err.to_string(),
            "the model \"fast\" cannot be used: the API key variable FAST_KEY (named by \
             model.api_key_env) is not set or empty; export it with the key, or drop \
             model.api_key_env if the server needs no key"
        );
        assert!(models.provider_of(models.default_model()).is_ok());
        assert_eq!(models.select("gone").name, "default");
    }
}
