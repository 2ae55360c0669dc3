use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::agents::PersonaModel;
use crate::config::{
    ConfigError, DEFAULT_MODEL_NAME, Effective, Flags, LoadedConfig, ModelsError, PersonaError,
    Source,
};
use crate::model::ProviderKind;

const FILE: &str = "/etc/agentd/agentd.toml";

fn parse(text: &str) -> Result<LoadedConfig, ConfigError> {
    LoadedConfig::parse(PathBuf::from(FILE), text)
}

fn no_env(_: &str) -> Option<OsString> {
    None
}

fn merge(text: &str, env: &dyn Fn(&str) -> Option<OsString>) -> Result<Effective, ConfigError> {
    Effective::merge(&Flags::default(), parse(text).expect("parses"), env)
}

fn effective(text: &str) -> Effective {
    merge(text, &no_env).expect("merges")
}

fn models_error(text: &str) -> ModelsError {
    match parse(text) {
        Err(ConfigError::Models(err)) => err,
        other => panic!("{text}: not a models error: {other:?}"),
    }
}

const MODEL: &str = "[model]\nbase_url = \"http://x/v1\"\nmodel = \"big\"\n";

const FAST: &str = "[models.fast]\nbase_url = \"http://localhost:11434/v1\"\nmodel = \"qwen3\"\n";

const SCRIPTED: &str = "[models.\"local-1.5\"]\nprovider = \"scripted\"\nscript = \"turns.toml\"\n";

fn names(config: &Effective) -> Vec<&str> {
    config.models_in_order().iter().map(|(n, _)| *n).collect()
}

#[test]
fn named_models_are_read_by_the_model_parser_after_the_default() {
    let text = format!("{MODEL}{FAST}{SCRIPTED}");
    let config = effective(&text);
    assert_eq!(names(&config), ["default", "fast", "local-1.5"]);
    assert_eq!(config.default_model.value, DEFAULT_MODEL_NAME);
    assert_eq!(config.default_model.source, Source::Default);
    let local = &config.models[1];
    assert_eq!(local.name, "local-1.5");
    assert_eq!(local.model.provider, Some(ProviderKind::Scripted));
    assert_eq!(
        local.model.script.as_deref(),
        Some(Path::new("/etc/agentd/turns.toml")),
        "relative to the file's directory"
    );
    let fast = &config.models[0];
    assert_eq!(fast.model.model.as_deref(), Some("qwen3"));
    let labels: Vec<String> = config.build_models().into_iter().map(|m| m.label).collect();
    assert_eq!(
        labels,
        ["default (big)", "fast (qwen3)", "local-1.5 (turns.toml)"]
    );
}

#[test]
fn default_model_picks_a_named_model_when_model_sets_nothing() {
    for model in ["", "[model]\n"] {
        let text = format!("default_model = \"fast\"\n{model}{FAST}{SCRIPTED}");
        let config = effective(&text);
        assert_eq!(names(&config), ["fast", "local-1.5"], "{text}");
        assert_eq!(config.default_model.value, "fast");
        assert_eq!(config.default_model.source, Source::File(FILE.into()));
        assert_eq!(config.model, None, "an empty [model] sets nothing");
        let built = config.build_models();
        assert_eq!(built.len(), 2, "no \"default\" beside it");
        assert!(
            config
                .provider()
                .expect("the default is built")
                .describe()
                .starts_with("qwen3 at"),
            "the default's provider is fast's"
        );
    }
}

#[test]
fn default_model_beside_a_model_table_that_sets_a_key_is_refused() {
    let err = models_error(&format!("default_model = \"fast\"\n{MODEL}{FAST}"));
    assert_eq!(
        err.to_string(),
        "the configuration file /etc/agentd/agentd.toml, line 1: default_model is set, but so \
         is the [model] table, which is the default model whenever it sets anything; drop \
         default_model, or move [model] to a [models.NAME] table"
    );
}

#[test]
fn a_default_model_naming_no_model_names_the_known_ones() {
    let err = models_error(&format!("default_model = \"fats\"\n{FAST}{SCRIPTED}"));
    assert_eq!(
        err.to_string(),
        "the configuration file /etc/agentd/agentd.toml, line 1: default_model = \"fats\" names \
         no model; the models are: fast, local-1.5"
    );
    let err = models_error("default_model = \"fast\"\n");
    assert!(
        err.to_string()
            .ends_with("the models are: none (there is no [models.NAME] table)"),
        "{err}"
    );
}

#[test]
fn the_name_default_is_reserved_for_the_model_table() {
    let err = models_error(&format!(
        "{MODEL}\n[models.default]\nmodel = \"m\"\nbase_url = \"u\"\n"
    ));
    assert_eq!(
        err.to_string(),
        "the configuration file /etc/agentd/agentd.toml, line 5: [models.default] is not \
         allowed: \"default\" is the name of the [model] table; give this model another name"
    );
}

#[test]
fn a_model_name_is_a_word_of_letters_digits_dashes_underscores_and_dots() {
    for (name, line) in [("two words", 2), ("", 2), ("a/b", 2), ("ü", 2)] {
        let text =
            format!("{MODEL_LESS}[models.{name:?}]\nprovider = \"scripted\"\nscript = \"t\"\n");
        let err = models_error(&text);
        assert_eq!(
            err.to_string(),
            format!(
                "the configuration file /etc/agentd/agentd.toml, line {line}: models.{name:?} is \
                 not a model name; use letters, digits, `-`, `_` and `.`"
            )
        );
    }
    // The control: every allowed character.
    let text =
        format!("{MODEL}[models.\"Qwen_3-8b.q4\"]\nprovider = \"scripted\"\nscript = \"t\"\n");
    assert_eq!(names(&effective(&text)), ["default", "Qwen_3-8b.q4"]);
}

/// A first line, so that a table's line is not 1.
const MODEL_LESS: &str = "# no [model]\n";

#[test]
fn a_named_model_gets_the_checks_of_a_whole_table() {
    for (table, problem) in [
        ("model = \"m\"\n", "has no base_url"),
        ("base_url = \"http://x/v1\"\n", "has no model"),
        ("max_tokens = 10\n", "has neither base_url nor model"),
        (
            "provider = \"scripted\"\n",
            "has no script (provider = \"scripted\" needs one)",
        ),
        (
            "base_url = \"u\"\nmodel = \"m\"\nscript = \"t.toml\"\n",
            "has a script, which only provider = \"scripted\" reads",
        ),
    ] {
        let err = models_error(&format!("{MODEL}[models.fast]\n{table}"));
        assert_eq!(
            err.to_string(),
            format!(
                "the configuration file /etc/agentd/agentd.toml, line 4: models.fast {problem}; \
                 a named model is a whole [model] table and does not inherit keys from [model]"
            )
        );
    }
    let err = models_error(&format!(
        "{MODEL}[models.fast]\nbase_url = \"u\"\nmodel = \"m\"\napi_key_env = \"sk-secret\"\n"
    ));
    assert!(
        err.to_string()
            .contains("models.fast.api_key_env must be the name"),
        "{err}"
    );
    assert!(!err.to_string().contains("sk-secret"), "{err}");
    // Unknown keys and bad values are the parser's errors, with the line.
    let err = parse(&format!("{MODEL}[models.fast]\nmodle = \"m\"\n")).expect_err("typo");
    assert!(matches!(err, ConfigError::Parse { .. }), "{err}");
    assert!(
        err.to_string().contains("line 5") && err.to_string().contains("modle"),
        "{err}"
    );
}

#[test]
fn named_models_without_a_default_are_an_error_saying_how_to_pick_one() {
    let err = merge(&format!("{FAST}{SCRIPTED}"), &no_env).expect_err("no default");
    assert_eq!(
        err.to_string(),
        "the configuration file /etc/agentd/agentd.toml has named models (fast, local-1.5) but \
         no default model: add a [model] table, or set default_model = \"NAME\" (a top-level \
         key) to one of them"
    );
    // The control: the environment configures [model], which is then the default.
    let env = |name: &str| match name {
        "AGENTD_BASE_URL" => Some(OsString::from("http://env/v1")),
        "AGENTD_MODEL" => Some(OsString::from("env-model")),
        _ => None,
    };
    let config = merge(&format!("{FAST}{SCRIPTED}"), &env).expect("merges");
    assert_eq!(names(&config), ["default", "fast", "local-1.5"]);
}

#[test]
fn a_model_table_from_the_environment_is_the_default_even_beside_default_model() {
    let env = |name: &str| (name == "AGENTD_MODEL").then(|| OsString::from("env-model"));
    let config = merge(&format!("default_model = \"fast\"\n{FAST}"), &env).expect("merges");
    assert_eq!(config.default_model.value, "default");
    assert_eq!(names(&config), ["default", "fast"]);
}

#[test]
fn compaction_may_rest_on_a_named_models_context_window() {
    let text = format!(
        "default_model = \"fast\"\n{FAST}context_window = 1000\n[compaction]\ncompact_at = 900\n"
    );
    let config = effective(&text);
    let policy = config.compaction().expect("fast compacts");
    assert_eq!((policy.context_window, policy.compact_at), (1000, 900));
    let shown = config.show_with(&no_env, None);
    assert!(
        shown.contains(
            "models = fast  (one model: no `model` option)\n\
             default_model = \"fast\"  (/etc/agentd/agentd.toml)\n"
        ),
        "{shown}"
    );
    assert!(
        shown.contains(
            "model.context_window = unset  (default: [model] never compacts; the named models \
             with a context_window compact as below)\ncompaction.compact_at = 900  (/etc/agentd/agentd.toml)\n"
        ),
        "{shown}"
    );
    let err = parse(&format!(
        "{MODEL}context_window = 5000\n{FAST}context_window = 800\n[compaction]\ncompact_at = 900\n"
    ))
    .expect_err("above the smaller window");
    assert!(
        err.to_string()
            .contains("at most model.context_window (800)"),
        "{err}"
    );
    // A model without a window never compacts, whatever the others have.
    let config = effective(&format!(
        "{MODEL}context_window = 5000\n{FAST}[compaction]\n"
    ));
    let built = config.build_models();
    assert!(built[0].compaction.is_some());
    assert!(built[1].compaction.is_none());
}

/// A persona table with the two required keys and `extra`.
fn persona(extra: &str) -> String {
    format!("[agents.reviewer]\ndescription = \"Reviews\"\ninstructions = \"Review.\"\n{extra}")
}

#[test]
fn a_persona_may_name_a_model() {
    let text = format!("{MODEL}{FAST}{}", persona("model = \"fast\"\n"));
    let config = effective(&text);
    let reviewer = config.personas.get("reviewer").expect("reviewer");
    assert_eq!(reviewer.model, Some(PersonaModel::Named("fast".into())));
    assert!(
        config.persona_providers().is_empty(),
        "a named model is built once, as a model, not per persona"
    );
    let shown = config.show_with(&no_env, None);
    assert!(
        shown.contains(
            "agents.reviewer.model = \"fast\" (the model [models.fast])  (/etc/agentd/agentd.toml)"
        ),
        "{shown}"
    );
}

#[test]
fn a_persona_naming_an_unknown_model_names_the_known_ones() {
    let cases = [
        (
            format!("{MODEL}{FAST}{SCRIPTED}"),
            "fats",
            "fast, local-1.5",
            13,
        ),
        (format!("{MODEL}{FAST}"), "default", "fast", 10),
        (
            MODEL.to_owned(),
            "fast",
            "none (there is no [models.NAME] table)",
            7,
        ),
    ];
    for (models, name, known, line) in cases {
        let text = format!("{models}{}", persona(&format!("model = {name:?}\n")));
        let err = match parse(&text) {
            Err(ConfigError::Persona(err)) => err,
            other => panic!("{text}: {other:?}"),
        };
        assert!(matches!(err, PersonaError::UnknownModel { .. }), "{err}");
        assert_eq!(
            err.to_string(),
            format!(
                "the configuration file /etc/agentd/agentd.toml, line {line}: \
                 agents.reviewer.model = {name:?} names no model; the named models are: {known}. \
                 Name one of them, write the model as a table, or drop model to use the \
                 session's model"
            ),
            "{text}"
        );
    }
}

#[test]
fn config_show_prints_the_named_models_and_the_default_with_their_source() {
    let text = format!("default_model = \"fast\"\n{FAST}api_key_env = \"FAST_KEY\"\n{SCRIPTED}");
    let shown = effective(&text).show_with(&no_env, None);
    let start = shown.find("model = unset").expect("the models");
    let end = start
        + shown[start..]
            .find("model.context_window")
            .expect("then compaction");
    assert_eq!(
        &shown[start..end],
        "\
model = unset  (the default is [models.fast], see default_model)
models = fast, local-1.5  (a session may switch between them: the `model` option)
default_model = \"fast\"  (/etc/agentd/agentd.toml)
models.fast.provider = \"openai\"  (/etc/agentd/agentd.toml)
models.fast.base_url = \"http://localhost:11434/v1\"  (/etc/agentd/agentd.toml)
models.fast.model = \"qwen3\"  (/etc/agentd/agentd.toml)
models.fast.api_key_env = \"FAST_KEY\"  (/etc/agentd/agentd.toml)
models.fast api key: $FAST_KEY (NOT SET)
models.local-1.5.provider = \"scripted\"  (/etc/agentd/agentd.toml)
models.local-1.5.script = \"/etc/agentd/turns.toml\"  (/etc/agentd/agentd.toml)
"
    );
    assert!(!shown.contains("No model is configured"), "{shown}");
    let shown = effective(&format!("{MODEL}{FAST}")).show_with(&no_env, None);
    assert!(
        shown.contains("default_model = \"default\" (the [model] table)  (default)"),
        "{shown}"
    );
    // Without named models nothing of them is shown.
    let shown = effective(MODEL).show_with(&no_env, None);
    assert!(
        !shown.contains("models") && !shown.contains("default_model"),
        "{shown}"
    );
}
