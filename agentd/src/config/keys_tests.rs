use std::cell::RefCell;
use std::collections::BTreeSet;
use std::ffi::OsString;

use clap::Parser;
use serde::Deserialize;

use super::*;
#[path = "../../../tests/shared/serde_fields.rs"]
mod serde_fields;
use crate::cli::{Cli, Command, ConfigCommand};
use crate::config::agents::{RawFilter, RawPersona};
use crate::config::checkpoints::RawCheckpoints;
use crate::config::compaction::RawCompaction;
use crate::config::file::{HelperSection, RawApproval, RawFile, RawLimits, RawSandbox, RawSession};
use crate::config::mcp::{RawMcp, RawServer};
use crate::config::sandbox_env::RawEnv;
use crate::config::{Effective, Flags, LoadedConfig};
use crate::model::ModelConfig;
use serde_fields::struct_fields;

/// Every table of the file with the struct that parses it.
fn tables() -> Vec<(&'static str, &'static [&'static str])> {
    vec![
        ("", struct_fields::<RawFile>()),
        ("model", struct_fields::<ModelConfig>()),
        ("sandbox", struct_fields::<RawSandbox>()),
        ("sandbox.env", struct_fields::<RawEnv>()),
        ("approval", struct_fields::<RawApproval>()),
        ("helper", struct_fields::<HelperSection>()),
        ("session", struct_fields::<RawSession>()),
        ("limits", struct_fields::<RawLimits>()),
        ("compaction", struct_fields::<RawCompaction>()),
        ("checkpoints", struct_fields::<RawCheckpoints>()),
        ("agents.NAME", struct_fields::<RawPersona>()),
        ("agents.NAME.tools", struct_fields::<RawFilter>()),
        ("mcp", struct_fields::<RawMcp>()),
        ("mcp.servers", struct_fields::<RawServer>()),
    ]
}

/// Tables whose keys are names the file chooses (`NAME`).
const NAMED: [&str; 2] = ["models", "agents"];

/// The keys the table lists directly inside `table`, and the sub-tables it lists keys of.
fn children(table: &str) -> BTreeSet<&'static str> {
    KEYS.iter()
        .filter_map(|key| match table {
            "" => Some(key.path),
            _ => key.path.strip_prefix(table)?.strip_prefix('.'),
        })
        .map(|rest| rest.split('.').next().unwrap_or(rest))
        .collect()
}

#[test]
fn every_table_lists_exactly_the_keys_its_struct_accepts() {
    for (table, fields) in tables() {
        let fields: BTreeSet<&str> = fields.iter().copied().collect();
        assert!(
            !fields.is_empty(),
            "the probe found no fields for [{table}]"
        );
        assert_eq!(children(table), fields, "[{table}]");
    }
}

#[test]
fn every_key_sits_in_a_table_whose_struct_is_checked() {
    let checked: Vec<&str> = tables().into_iter().map(|(table, _)| table).collect();
    for key in KEYS {
        let table = key.table();
        assert!(
            checked.contains(&table) || NAMED.contains(&table),
            "{} is in [{table}], which no struct is checked against",
            key.path
        );
        assert!(!key.doc.is_empty(), "{} has no description", key.path);
    }
    for named in NAMED {
        assert_eq!(children(named), BTreeSet::from(["NAME"]), "[{named}]");
    }
}

#[test]
fn the_probe_sees_a_field_the_table_lacks() {
    #[derive(Deserialize)]
    #[allow(dead_code)]
    struct Wider {
        mode: Option<String>,
        network: Option<String>,
        backend: Option<String>,
        new_key: Option<bool>,
    }
    let fields: BTreeSet<&str> = struct_fields::<Wider>().iter().copied().collect();
    assert!(fields.contains("new_key"));
    assert_ne!(children("sandbox"), fields);
}

/// A value `config show` takes for each variable and flag.
fn sample(name: &str) -> &'static str {
    match name {
        "AGENTD_SANDBOX_MODE" | "--sandbox-mode" => "read-only",
        "AGENTD_APPROVAL_POLICY" => "never",
        "AGENTD_MODEL" => "some-model",
        "AGENTD_BASE_URL" => "http://127.0.0.1:9/v1",
        "AGENTD_API_KEY_ENV" => "SOME_KEY",
        "AGENTD_HELPER" | "--helper" => "/opt/confine-helper",
        "AGENTD_FILE_IO" => "/opt/confine-file-io",
        "AGENTD_STATE_DIR" | "--state-dir" => "/srv/state",
        "--helper-socket" => "/run/confine-helper/socket",
        "--helper-ceiling" => "/etc/agentd/ceiling.toml",
        "--model-script" => "/srv/turns.toml",
        other => panic!("no sample value for {other}"),
    }
}

/// `config show`'s line for `key`, if it prints one.
fn line_of<'a>(shown: &'a str, key: &str) -> Option<&'a str> {
    shown.lines().find(|line| {
        line.strip_prefix(key)
            .is_some_and(|rest| rest.starts_with(" = "))
    })
}

#[test]
fn the_variables_are_exactly_those_the_layering_reads() {
    let read = RefCell::new(BTreeSet::new());
    let env = |name: &str| -> Option<OsString> {
        read.borrow_mut().insert(name.to_owned());
        None
    };
    Effective::merge(&Flags::default(), LoadedConfig::default(), &env).expect("defaults");
    let read: BTreeSet<String> = read
        .into_inner()
        .into_iter()
        .filter(|name| name.starts_with("AGENTD_"))
        .collect();
    let listed: BTreeSet<String> = KEYS
        .iter()
        .filter_map(|k| k.env)
        .map(String::from)
        .collect();
    assert_eq!(read, listed);
}

#[test]
fn each_variable_shows_as_the_source_of_its_key() {
    for key in KEYS {
        let Some(var) = key.env else { continue };
        let env = |name: &str| (name == var).then(|| OsString::from(sample(var)));
        let effective =
            Effective::merge(&Flags::default(), LoadedConfig::default(), &env).expect(var);
        let shown = effective.show_with(&env, None);
        let line = line_of(&shown, key.path).unwrap_or_else(|| panic!("{}:\n{shown}", key.path));
        assert!(line.ends_with(&format!("(${var})")), "{line}");
    }
}

#[test]
fn each_flag_shows_as_the_source_of_its_key_or_is_a_session_flag() {
    let no_env = |_: &str| None;
    let mut shown_as_source = 0;
    for key in KEYS {
        let Some(flag) = key.flag else { continue };
        let word = flag.split(' ').next().unwrap_or(flag);
        let show = Cli::try_parse_from(["agentd", "config", "show", word, sample(word)]);
        let Ok(Cli {
            command: Command::Config(ConfigCommand::Show(args)),
        }) = show
        else {
            // Not a configuration flag: one of the commands that start sessions takes it.
            for command in ["acp", "exec"] {
                let parsed = Cli::try_parse_from(["agentd", command, word, sample(word), "p"]);
                let parsed = parsed
                    .or_else(|_| Cli::try_parse_from(["agentd", command, word, sample(word)]));
                assert!(parsed.is_ok(), "agentd {command} does not take {flag}");
            }
            continue;
        };
        let effective =
            Effective::merge(&args.flags(), LoadedConfig::default(), &no_env).expect(flag);
        let shown = effective.show_with(&no_env, None);
        let line = line_of(&shown, key.path).unwrap_or_else(|| panic!("{}:\n{shown}", key.path));
        assert!(line.ends_with(&format!("({word})")), "{line}");
        shown_as_source += 1;
    }
    assert!(shown_as_source >= 5, "{shown_as_source}");
}

/// A file that sets a little of every table, so that `config show` prints its keys.
const FULL: &str = r#"
[model]
base_url = "http://127.0.0.1:9/v1"
model = "m"
context_window = 1000

[models.fast]
base_url = "http://127.0.0.1:9/v1"
model = "f"

[compaction]
keep_turns = 2

[sandbox]
network = "allow-list"
allowed_domains = ["example.org"]

[agents.reviewer]
description = "Reviews"
instructions = "Review."

[[mcp.servers]]
name = "notes"
command = ["true"]
"#;

/// The key a line of `config show` is about, with chosen names put back to `NAME` and a named
/// model's keys to those of `[model]`; `None` for the built-in persona, whose values are not
/// defaults of a key.
fn key_of(shown: &str) -> Option<String> {
    let parts: Vec<&str> = shown.split('.').collect();
    match parts.as_slice() {
        ["agents", "general", ..] => None,
        ["agents", _, rest @ ..] => Some(format!("agents.NAME.{}", rest.join("."))),
        ["models", _, rest @ ..] => Some(format!("model.{}", rest.join("."))),
        _ => Some(shown.to_owned()),
    }
}

/// A value without the explanation `config show` adds after it: `"auto" (here: …)` is
/// `"auto"`.
fn bare(value: &str) -> &str {
    value.split(" (").next().unwrap_or(value)
}

#[test]
fn every_key_config_show_prints_is_listed_with_the_default_it_prints() {
    let no_env = |_: &str| None;
    let dir = std::env::temp_dir();
    let full = LoadedConfig::parse(dir.join("agentd.toml"), FULL).expect("the full file");
    let mut defaults_checked = BTreeSet::new();
    for loaded in [LoadedConfig::default(), full] {
        let effective = Effective::merge(&Flags::default(), loaded, &no_env).expect("merge");
        // The settings end at the first empty line; a `[model]` example to copy may follow.
        let shown = effective.show_with(&no_env, None);
        for line in shown.lines().take_while(|line| !line.is_empty()) {
            let Some((shown_key, rest)) = line.split_once(" = ") else {
                continue;
            };
            if shown_key.contains(' ') || line.starts_with(' ') {
                continue;
            }
            let Some(key) = key_of(shown_key) else {
                continue;
            };
            let is_table = KEYS.iter().any(|k| k.path.starts_with(&format!("{key}.")));
            let Some(listed) = KEYS.iter().find(|k| k.path == key) else {
                assert!(
                    is_table,
                    "config show prints {shown_key}, which KEYS lacks: {line}"
                );
                continue;
            };
            let Some((value, source)) = rest.rsplit_once("  (") else {
                continue;
            };
            if source.starts_with("default") && !listed.default.contains('$') {
                assert_eq!(bare(value), bare(listed.default), "{line}");
                defaults_checked.insert(key);
            }
        }
    }
    assert!(defaults_checked.len() >= 30, "{defaults_checked:?}");
}
