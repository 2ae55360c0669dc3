use super::*;

fn origin() -> DepthOrigin {
    DepthOrigin::new(
        "agents.reviewer.max_depth",
        "the configuration file /etc/agentd/agentd.toml, line 4",
    )
}

/// `max_depth = TEXT` as the configuration file reads it.
fn toml_depth(text: &str) -> Result<Depth, InvalidDepth> {
    #[derive(serde::Deserialize)]
    struct File {
        max_depth: toml::Value,
    }
    let file: File = toml::from_str(&format!("max_depth = {text}\n")).expect("valid TOML");
    Depth::from_toml(&file.max_depth, text, &origin())
}

fn json_depth(text: &str) -> Result<Depth, InvalidDepth> {
    let value: serde_json::Value = serde_json::from_str(text).expect("valid JSON");
    Depth::from_json(&value, &origin())
}

#[test]
fn whole_numbers_from_zero_to_the_largest_safe_integer_are_depths() {
    for (text, n) in [
        ("0", 0),
        ("+0", 0),
        ("1", 1),
        ("2", 2),
        ("9007199254740991", MAX_DEPTH),
    ] {
        assert_eq!(toml_depth(text).map(Depth::get), Ok(n), "toml {text}");
    }
    for (text, n) in [("0", 0), ("3", 3), ("9007199254740991", MAX_DEPTH)] {
        assert_eq!(json_depth(text).map(Depth::get), Ok(n), "json {text}");
        assert_eq!(
            Depth::from_json_text(&format!(" {text}\n"), &origin()).map(Depth::get),
            Ok(n),
            "json text {text}"
        );
    }
    assert_eq!(Depth::new(MAX_DEPTH), Some(Depth::MAX));
    assert_eq!(Depth::new(MAX_DEPTH + 1), None);
    assert_eq!(Depth::TOP.get(), 0);
}

/// Every rejection names the key, the value as written, the place and the rule.
fn assert_rejected(result: Result<Depth, InvalidDepth>, written: &str, reason: Reason) {
    let err = result.expect_err(written);
    assert_eq!(err.reason, reason, "{written}");
    assert_eq!(err.written, written);
    let text = err.to_string();
    assert_eq!(
        text,
        format!(
            "agents.reviewer.max_depth = {written} in the configuration file \
             /etc/agentd/agentd.toml, line 4 is not a depth ({reason}); a depth is a whole \
             number from 0 to 9007199254740991"
        )
    );
}

#[test]
fn every_bad_toml_value_is_rejected_with_its_reason() {
    for (text, reason) in [
        ("-1", Reason::Negative),
        ("-9223372036854775808", Reason::Negative),
        ("-0", Reason::NegativeZero),
        ("-0.0", Reason::NegativeZero),
        ("1.5", Reason::Fractional),
        ("-1.5", Reason::Negative),
        ("2.0", Reason::Float),
        ("1e3", Reason::Float),
        ("nan", Reason::NotFinite),
        ("-nan", Reason::NotFinite),
        ("inf", Reason::NotFinite),
        ("-inf", Reason::NotFinite),
        ("9007199254740992", Reason::TooLarge),
        ("9223372036854775807", Reason::TooLarge),
        ("1e300", Reason::TooLarge),
        ("\"2\"", Reason::NotANumber("a string")),
        ("true", Reason::NotANumber("a boolean")),
        ("1979-05-27", Reason::NotANumber("a date")),
        ("[1]", Reason::NotANumber("an array")),
        ("{ depth = 1 }", Reason::NotANumber("a table")),
    ] {
        assert_rejected(toml_depth(text), text, reason);
    }
}

#[test]
fn every_bad_json_value_is_rejected_with_its_reason() {
    for (text, written, reason) in [
        ("-1", "-1", Reason::Negative),
        ("-0", "-0.0", Reason::NegativeZero),
        ("-0.0", "-0.0", Reason::NegativeZero),
        ("0.5", "0.5", Reason::Fractional),
        ("2.0", "2.0", Reason::Float),
        ("9007199254740992", "9007199254740992", Reason::TooLarge),
        (
            "18446744073709551615",
            "18446744073709551615",
            Reason::TooLarge,
        ),
        ("1e400", "null", Reason::NotFinite),
        ("\"2\"", "\"2\"", Reason::NotANumber("a string")),
        ("false", "false", Reason::NotANumber("a boolean")),
        ("null", "null", Reason::NotANumber("null")),
        ("[]", "[]", Reason::NotANumber("an array")),
        (
            "{\"depth\":1}",
            "{\"depth\":1}",
            Reason::NotANumber("an object"),
        ),
    ] {
        match serde_json::from_str::<serde_json::Value>(text) {
            Ok(value) => assert_rejected(Depth::from_json(&value, &origin()), written, reason),
            // serde_json refuses numbers beyond f64 itself; the text reader reports them.
            Err(_) => {
                let err = Depth::from_json_text(text, &origin()).expect_err(text);
                assert!(matches!(err.reason, Reason::Malformed(_)), "{text}: {err}");
            }
        }
    }
}

#[test]
fn json_text_keeps_the_value_as_written_and_rejects_what_is_not_json() {
    for (text, reason) in [
        ("-0", Reason::NegativeZero),
        ("-0.0", Reason::NegativeZero),
        ("1.25", Reason::Fractional),
        ("-3", Reason::Negative),
        ("\"1\"", Reason::NotANumber("a string")),
    ] {
        assert_rejected(Depth::from_json_text(text, &origin()), text, reason);
    }
    for text in ["", "1x", "0x10", "01", "NaN", "Infinity", "{", "1 2"] {
        let err = Depth::from_json_text(text, &origin()).expect_err(text);
        assert!(matches!(err.reason, Reason::Malformed(_)), "{text}: {err}");
        assert!(err.to_string().contains("is malformed ("), "{err}");
        assert!(
            err.to_string().contains("agents.reviewer.max_depth"),
            "{err}"
        );
    }
}

#[test]
fn a_child_starts_one_deeper_and_only_within_the_cap() {
    let depth = |n| Depth::new(n).expect("a depth");
    assert_eq!(check_child_start(Depth::TOP, depth(1)), Ok(depth(1)));
    assert_eq!(check_child_start(depth(1), depth(2)), Ok(depth(2)));
    let refused = check_child_start(depth(2), depth(2)).expect_err("too deep");
    assert_eq!(
        refused,
        TooDeep {
            parent: depth(2),
            child: 3,
            cap: depth(2)
        }
    );
    assert_eq!(
        refused.to_string(),
        "a child of an agent at depth 2 would be at depth 3, deeper than the cap of 2 (the top \
         level is depth 0 and each child is one deeper than its parent)"
    );
    assert!(check_child_start(Depth::TOP, Depth::TOP).is_err());
}

#[test]
fn the_largest_depth_has_no_child_and_nothing_overflows() {
    assert_eq!(Depth::MAX.child(), None);
    let refused = check_child_start(Depth::MAX, Depth::MAX).expect_err("no deeper depth");
    assert_eq!(refused.child, MAX_DEPTH + 1);
    let below = Depth::new(MAX_DEPTH - 1).expect("a depth");
    assert_eq!(check_child_start(below, Depth::MAX), Ok(Depth::MAX));
}
