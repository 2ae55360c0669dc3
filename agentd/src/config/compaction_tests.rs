//! `model.context_window` and the `[compaction]` table: read, checked with the file and the line
//! in every error, resolved into the sessions' policy, and printed by `config show`.

use std::ffi::OsString;
use std::path::PathBuf;

use super::*;
use crate::config::{ConfigError, Effective, Flags, LoadedConfig, Source};

const FILE: &str = "/etc/agentd/agentd.toml";
const MODEL: &str = "[model]\nbase_url = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"\n";

fn parse(text: &str) -> Result<LoadedConfig, ConfigError> {
    LoadedConfig::parse(PathBuf::from(FILE), text)
}

fn no_env(_: &str) -> Option<OsString> {
    None
}

fn effective(text: &str) -> Effective {
    Effective::merge(&Flags::default(), parse(text).expect("parses"), &no_env).expect("merges")
}

fn file() -> Source {
    Source::File(PathBuf::from(FILE))
}

#[test]
fn without_a_context_window_the_history_is_never_compacted() {
    let config = effective(MODEL);
    assert_eq!(config.context_window.value, None);
    assert_eq!(config.compaction(), None);
    assert_eq!(effective("").compaction(), None);
}

#[test]
fn a_context_window_alone_compacts_at_the_default_share_keeping_two_turns() {
    let config = effective(&format!("{MODEL}context_window = 10000\n"));
    assert_eq!(config.context_window.value, Some(10000));
    assert_eq!(config.context_window.source, file());
    assert_eq!(config.compact_at.source, Source::Default);
    assert_eq!(
        config.compaction(),
        Some(CompactionPolicy {
            context_window: 10000,
            compact_at: 8000,
            keep_turns: DEFAULT_KEEP_TURNS,
        })
    );
}

#[test]
fn the_threshold_or_an_absolute_compact_at_and_keep_turns_are_read() {
    let config = effective(&format!(
        "{MODEL}context_window = 10000\n[compaction]\nthreshold = 0.5\nkeep_turns = 0\n"
    ));
    let policy = config.compaction().expect("a policy");
    assert_eq!((policy.compact_at, policy.keep_turns), (5000, 0));
    assert_eq!(config.keep_turns.source, file());

    let config = effective(&format!(
        "{MODEL}context_window = 10000\n[compaction]\ncompact_at = 7000\n"
    ));
    assert_eq!(config.compact_at.value, CompactAt::Tokens(7000));
    let policy = config.compaction().expect("a policy");
    assert_eq!((policy.compact_at, policy.keep_turns), (7000, 2));
}

#[test]
fn a_bad_compaction_value_names_the_file_the_line_the_key_and_what_is_allowed() {
    let window = format!("{MODEL}context_window = 10000\n[compaction]\n");
    let cases = [
        (
            "threshold = 1.5",
            "line 6: compaction.threshold = 1.5 is not allowed",
            "at most 1",
        ),
        (
            "threshold = 0.0",
            "line 6: compaction.threshold = 0 is not allowed",
            "above 0",
        ),
        (
            "threshold = -0.2",
            "compaction.threshold = -0.2",
            "such as 0.8",
        ),
        (
            "compact_at = 20000",
            "line 6: compaction.compact_at = 20000 is not allowed",
            "at most model.context_window (10000)",
        ),
        ("compact_at = 0", "compaction.compact_at = 0", "at least 1"),
        (
            "threshold = 0.5\ncompact_at = 100",
            "line 7: compaction.compact_at = 100 is not allowed",
            "not both",
        ),
    ];
    for (table, what, allowed) in cases {
        let text = format!("{window}{table}\n");
        let err = parse(&text).expect_err(&text);
        let message = err.to_string();
        assert!(matches!(err, ConfigError::Compaction { .. }), "{message}");
        assert!(message.contains(FILE), "{message}");
        assert!(message.contains(what), "{message}");
        assert!(message.contains(allowed), "{message}");
    }
}

#[test]
fn a_compaction_table_without_a_context_window_says_to_set_one() {
    let text = format!("{MODEL}\n[compaction]\nkeep_turns = 3\n");
    let err = parse(&text).expect_err("no window");
    let message = err.to_string();
    assert!(
        matches!(err, ConfigError::CompactionWithoutWindow { .. }),
        "{message}"
    );
    assert!(message.contains(&format!("{FILE}, line 5")), "{message}");
    assert!(
        message.contains("set model.context_window = TOKENS in [model] or drop [compaction]"),
        "{message}"
    );
    let err = parse("[compaction]\nthreshold = 0.5\n").expect_err("no model");
    assert!(
        matches!(err, ConfigError::CompactionWithoutWindow { .. }),
        "{err}"
    );
}

#[test]
fn an_unknown_compaction_key_or_a_zero_window_is_an_error_naming_the_line() {
    let err = parse(&format!(
        "{MODEL}context_window = 100\n[compaction]\nkeep = 1\n"
    ))
    .expect_err("typo");
    assert!(
        err.to_string().contains("line 6") && err.to_string().contains("keep"),
        "{err}"
    );
    let err = parse(&format!("{MODEL}context_window = 0\n")).expect_err("zero");
    let message = err.to_string();
    assert!(message.contains("line 4"), "{message}");
    assert!(message.contains("drop it to never compact"), "{message}");
}

#[test]
fn config_show_prints_the_window_the_threshold_and_the_kept_turns() {
    let text = effective(&format!("{MODEL}context_window = 10000\n")).show_with(&no_env, None);
    assert!(
        text.contains(&format!(
            "model.context_window = 10000  ({FILE})\n\
             compaction.threshold = 0.8 (compacts above an estimated 8000 tokens)  (default)\n\
             compaction.keep_turns = 2  (default)\n"
        )),
        "{text}"
    );
    let text = effective(&format!(
        "{MODEL}context_window = 10000\n[compaction]\ncompact_at = 6000\nkeep_turns = 1\n"
    ))
    .show_with(&no_env, None);
    assert!(
        text.contains(&format!(
            "compaction.compact_at = 6000  ({FILE})\ncompaction.keep_turns = 1  ({FILE})\n"
        )),
        "{text}"
    );
    let text = effective(MODEL).show_with(&no_env, None);
    assert!(
        text.contains("model.context_window = unset  (default: the history is never compacted;"),
        "{text}"
    );
    assert!(!text.contains("compaction."), "{text}");
}
