use std::ffi::OsString;
use std::path::PathBuf;

use crate::agents::{DEFAULT_MAX_DEPTH, Depth, GENERAL, Persona, PersonaModel};
use crate::config::{ConfigError, Effective, Flags, LoadedConfig, PersonaError};
use crate::model::ProviderKind;
use crate::tools::{FilterError, ToolRegistry, ToolScope};

const FILE: &str = "/etc/agentd/agentd.toml";

fn parse(text: &str) -> Result<LoadedConfig, ConfigError> {
    LoadedConfig::parse(PathBuf::from(FILE), text)
}

fn persona_error(text: &str) -> PersonaError {
    match parse(text) {
        Err(ConfigError::Persona(err)) => err,
        other => panic!("{text}: not a persona error: {other:?}"),
    }
}

fn no_env(_: &str) -> Option<OsString> {
    None
}

/// A persona table with the two required keys and `extra`.
fn with(extra: &str) -> String {
    format!("[agents.reviewer]\ndescription = \"Reviews\"\ninstructions = \"Review.\"\n{extra}")
}

/// The first TOML example of RFC 0007, wherever the RFC is in its life.
fn rfc_example() -> String {
    let rfcs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../rfcs");
    let text = ["proposed", "implemented"]
        .iter()
        .find_map(|dir| {
            std::fs::read_to_string(rfcs.join(dir).join("0007-agent-scope-and-subagents.md")).ok()
        })
        .expect("RFC 0007 is in rfcs/proposed or rfcs/implemented");
    let start = text.find("```toml\n").expect("a TOML example") + "```toml\n".len();
    let end = start + text[start..].find("```").expect("the example ends");
    text[start..end].to_owned()
}

#[test]
fn the_documented_persona_is_read() {
    // The example RFC 0007 shows, so the RFC cannot say what the parser does not do.
    let text = &rfc_example();
    let loaded = parse(text).expect("parses");
    let reviewer = loaded.config.agents.get("reviewer").expect("reviewer");
    assert_eq!(
        reviewer.description,
        "Reviews a change and reports problems"
    );
    assert_eq!(
        reviewer.instructions,
        "You review the change you are given. Report problems; change nothing."
    );
    assert_eq!(reviewer.max_depth, Depth::new(2));
    let Some(PersonaModel::Own(model)) = reviewer.model.as_ref() else {
        panic!("a model table: {:?}", reviewer.model);
    };
    assert_eq!(model.provider, Some(ProviderKind::Scripted));
    assert_eq!(
        model.script.as_deref(),
        Some(std::path::Path::new("/etc/agentd/review-turns.toml")),
        "relative to the file's directory"
    );
    let tools = ToolScope::top()
        .child(reviewer.tools.as_ref(), false)
        .resolve(&ToolRegistry::builtin());
    assert_eq!(tools.to_string(), "bash_output, bash_kill, read_file");
    // The built-in general is still there.
    assert_eq!(loaded.config.agents.get(GENERAL), Some(&Persona::general()));
}

#[test]
fn general_exists_without_any_persona_and_a_configured_one_replaces_it() {
    let empty = parse("").expect("parses").config.agents;
    assert_eq!(empty.to_string(), GENERAL);
    assert!(empty.is_built_in(GENERAL));

    let mine = parse(
        "[agents.general]\ndescription = \"Mine\"\ninstructions = \"Do as I say.\"\nmax_depth = 1\n",
    )
    .expect("parses");
    let general = mine.config.agents.get(GENERAL).expect("general");
    assert_eq!(general.description, "Mine");
    assert!(!mine.config.agents.is_built_in(GENERAL));

    let effective = Effective::merge(&Flags::default(), mine, &no_env).expect("merges");
    assert_eq!(
        effective.persona_source(GENERAL),
        crate::config::Source::File(PathBuf::from(FILE))
    );
    let default =
        Effective::merge(&Flags::default(), parse("").expect("parses"), &no_env).expect("merges");
    assert_eq!(
        default.persona_source(GENERAL),
        crate::config::Source::Default
    );
}

#[test]
fn a_missing_or_empty_required_key_names_the_persona_the_key_and_the_line() {
    let err = persona_error("\n[agents.reviewer]\ninstructions = \"Review.\"\n");
    assert_eq!(
        err.to_string(),
        "the configuration file /etc/agentd/agentd.toml, line 2: agents.reviewer has no \
         description; add description = \"...\" (one sentence saying what the persona is for: \
         the model reads it when it picks one)"
    );
    let err = persona_error("[agents.reviewer]\ndescription = \"Reviews\"\n");
    assert!(matches!(
        &err,
        PersonaError::Missing {
            key: "instructions",
            line: 1,
            ..
        }
    ));
    let err = persona_error("[agents.reviewer]\ndescription = \"Reviews\"\ninstructions = \" \"\n");
    assert_eq!(
        err.to_string(),
        "the configuration file /etc/agentd/agentd.toml, line 3: agents.reviewer.instructions = \
         \" \" is not allowed; it must not be empty (the instructions its agent runs with)"
    );
}

#[test]
fn a_name_that_is_not_a_persona_name_is_refused() {
    let err = persona_error("[agents.\"two words\"]\ndescription = \"d\"\ninstructions = \"i\"\n");
    assert_eq!(
        err.to_string(),
        "the configuration file /etc/agentd/agentd.toml, line 1: agents.\"two words\" is not a \
         persona name; use letters, digits, `_` and `-`"
    );
}

#[test]
fn unknown_keys_and_wrong_types_are_parse_errors_naming_the_line() {
    for (text, line, word) in [
        (with("descripton = \"x\"\n"), "line 4", "descripton"),
        (with("tools = { alow = [\"bash\"] }\n"), "line 4", "alow"),
        (with("tools = [\"bash\"]\n"), "line 4", "tools"),
        (with("model = { modle = \"m\" }\n"), "line 4", "modle"),
        // A model is a table or a name, never a number.
        (with("model = 3\n"), "line 4", "model"),
        (with("description = 3\n"), "line", "description"),
    ] {
        let err = parse(&text).expect_err(&text);
        assert!(matches!(err, ConfigError::Parse { .. }), "{text}: {err}");
        let message = err.to_string();
        assert!(message.contains(FILE), "{message}");
        assert!(message.contains(line), "{text}: {message}");
        assert!(message.contains(word), "{text}: {message}");
    }
    // `agents` must be a table of tables.
    assert!(matches!(
        parse("agents = 1\n"),
        Err(ConfigError::Parse { .. })
    ));
}

#[test]
fn an_empty_tool_filter_fails_at_load() {
    for (extra, written) in [
        ("tools = {}\n", "{}"),
        ("tools = { deny = [] }\n", "{ deny = [] }"),
        ("[agents.reviewer.tools]\n", "{}"),
        ("[agents.reviewer.tools]\ndeny = []\n", "{ deny = [] }"),
    ] {
        let err = persona_error(&with(extra));
        assert!(
            matches!(&err, PersonaError::EmptyFilter { source, .. } if **source == FilterError::Empty),
            "{err}"
        );
        let message = err.to_string();
        assert!(message.contains("line 4"), "{message}");
        assert!(
            message.contains(&format!(
                "agents.reviewer.tools = {written} filters nothing"
            )),
            "{message}"
        );
    }
    // allow = [] is a filter: it hides every tool.
    let loaded = parse(&with("tools = { allow = [] }\n")).expect("parses");
    let reviewer = loaded.config.agents.get("reviewer").expect("reviewer");
    assert!(
        ToolScope::top()
            .child(reviewer.tools.as_ref(), false)
            .resolve(&ToolRegistry::builtin())
            .is_empty()
    );
}

#[test]
fn an_unknown_or_reserved_tool_name_fails_at_load_naming_its_line() {
    let err = persona_error(&with(
        "tools = { allow = [\n  \"read_file\",\n  \"bsh\",\n] }\n",
    ));
    assert_eq!(
        err.to_string(),
        "the configuration file /etc/agentd/agentd.toml, line 6: agents.reviewer.tools.allow \
         lists \"bsh\", which is not a tool agentd has; the tools are: bash, bash_output, \
         bash_kill, read_file, write_file, edit_file"
    );
    let err = persona_error(&with("tools = { deny = [\"task\"] }\n"));
    assert_eq!(
        err.to_string(),
        "the configuration file /etc/agentd/agentd.toml, line 4: agents.reviewer.tools.deny \
         lists \"task\", which is reserved: whether an agent may start child agents is decided \
         by max_depth, not by a tool filter"
    );
}

#[test]
fn every_bad_max_depth_is_rejected_naming_the_value_and_where_it_came_from() {
    for value in [
        "-1",
        "-0",
        "-0.0",
        "1.5",
        "2.0",
        "nan",
        "inf",
        "-inf",
        "9007199254740992",
        "\"2\"",
        "true",
        "{ n = 1 }",
        "[1]",
    ] {
        let err = persona_error(&with(&format!("max_depth = {value}\n")));
        assert!(matches!(err, PersonaError::Depth(_)), "{value}: {err}");
        let message = err.to_string();
        assert!(
            message.starts_with(&format!(
                "agents.reviewer.max_depth = {value} in the configuration file \
                 /etc/agentd/agentd.toml, line 4 is not a depth ("
            )),
            "{message}"
        );
        assert!(
            message.ends_with("a depth is a whole number from 0 to 9007199254740991"),
            "{message}"
        );
    }
    let err = persona_error(&with("max_depth = 0\n"));
    assert_eq!(
        err.to_string(),
        "the configuration file /etc/agentd/agentd.toml, line 4: agents.reviewer.max_depth = 0 \
         is not allowed; a persona runs as a child, at depth 1 or deeper, so it could never \
         start; use at least 1 (without max_depth it is 1)"
    );
    let loaded = parse(&with("max_depth = 9007199254740991\n")).expect("the largest depth");
    let reviewer = loaded.config.agents.get("reviewer").expect("reviewer");
    assert_eq!(reviewer.depth_cap(), Depth::MAX);
    let plain = parse(&with("")).expect("parses");
    let reviewer = plain.config.agents.get("reviewer").expect("reviewer");
    assert_eq!(reviewer.max_depth, None);
    assert_eq!(reviewer.depth_cap(), DEFAULT_MAX_DEPTH);
}

#[test]
fn a_persona_model_is_checked_like_a_whole_model_table() {
    let err = persona_error(&with(
        "model = { base_url = \"http://x/v1\", model = \"m\", api_key_env = \"sk-secret\" }\n",
    ));
    assert!(
        matches!(err, PersonaError::ApiKeyEnvNotAName { .. }),
        "{err}"
    );
    assert!(!err.to_string().contains("sk-secret"), "{err}");
    for (model, problem) in [
        ("{ model = \"m\" }", "has no base_url"),
        ("{ base_url = \"http://x/v1\" }", "has no model"),
        ("{ max_tokens = 10 }", "has neither base_url nor model"),
        ("{ provider = \"scripted\" }", "has no script"),
        (
            "{ base_url = \"http://x/v1\", model = \"m\", script = \"t.toml\" }",
            "has a script",
        ),
        (
            "{ base_url = \"http://x/v1\", model = \"m\", context_window = 8192 }",
            "sets context_window, but a child agent's history is never compacted; drop it",
        ),
    ] {
        let err = persona_error(&with(&format!("model = {model}\n")));
        let message = err.to_string();
        assert!(matches!(err, PersonaError::Model { .. }), "{message}");
        assert!(
            message.contains(&format!("line 4: agents.reviewer.model {problem}")),
            "{message}"
        );
        assert!(
            message.contains("does not inherit keys from [model]"),
            "{message}"
        );
    }
    let loaded = parse(&with(
        "[agents.reviewer.model]\nbase_url = \"http://localhost:11434/v1\"\nmodel = \"qwen3\"\n",
    ))
    .expect("a model table");
    let model = loaded
        .config
        .agents
        .get("reviewer")
        .and_then(|p| p.model.clone());
    let Some(PersonaModel::Own(model)) = model else {
        panic!("a model table: {model:?}");
    };
    assert_eq!(model.model.as_deref(), Some("qwen3"));
}

// ---- config show ----

#[test]
fn show_prints_every_persona_with_its_source() {
    let text = format!(
        "{}\ntools = {{ allow = [\"read_file\", \"bash\"], deny = [\"bash\"] }}\nmax_depth = 2\n\
         model = {{ base_url = \"https://u:pw@x.example/v1\", model = \"m\", api_key_env = \"K\" }}\n",
        with("").trim_end()
    );
    let effective = Effective::merge(&Flags::default(), parse(&text).expect("parses"), &no_env)
        .expect("merges");
    let shown = effective.show_with(&no_env, None);
    let start = shown.find("agents.").expect("personas shown");
    let end = shown[start..]
        .find("\n\n")
        .map_or(shown.len(), |i| start + i + 1);
    assert_eq!(
        &shown[start..end],
        "\
agents.general.description = \"A general-purpose helper for a delegated sub-task: it works on the one task it is given, with the tools it has, and answers with what it found or did.\"  (default)
agents.general.instructions = \"You are a general-purpose helper working on one sub-task tha…\" (1 line, 340 characters)  (default)
agents.general.model = unset (the session's model)  (default)
agents.general.tools = unset (its parent's tools)  (default)
agents.general.max_depth = 1  (default)
agents.reviewer.description = \"Reviews\"  (/etc/agentd/agentd.toml)
agents.reviewer.instructions = \"Review.\" (1 line, 7 characters)  (/etc/agentd/agentd.toml)
agents.reviewer.model.provider = \"openai\"  (/etc/agentd/agentd.toml)
agents.reviewer.model.base_url = \"https://***@x.example/v1\"  (/etc/agentd/agentd.toml)
agents.reviewer.model.model = \"m\"  (/etc/agentd/agentd.toml)
agents.reviewer.model.api_key_env = \"K\"  (/etc/agentd/agentd.toml)
agents.reviewer.model api key: $K (NOT SET)
agents.reviewer.tools = { allow = [\"read_file\", \"bash\"], deny = [\"bash\"] } (under the top level: read_file)  (/etc/agentd/agentd.toml)
agents.reviewer.max_depth = 2  (/etc/agentd/agentd.toml)
"
    );
    assert!(!shown.contains("pw@"), "{shown}");
}
