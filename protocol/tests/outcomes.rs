//! The typed outcomes' codes and sentences, pinned: `tests/outcome_codes.txt` lists every
//! `Refusal` and `Gap` code with the sentence its sample shows. A code is never reused or
//! renamed, and the sentences are the ones agentd's transcripts and the external clients have
//! always seen, so any change shows up as a diff of that file.
//!
//! Regenerate with `UPDATE_OUTCOMES=1 cargo test -p confine-protocol --test outcomes`; like the
//! golden vectors, that run rewrites the file and fails on purpose. Review the diff: a removed
//! or renamed code is a break, a changed sentence changes what people read. A variant that
//! nothing constructs any more leaves the enum, and its code stays listed in [`RETIRED`], so it
//! is never given another meaning.

#[path = "support/outcomes.rs"]
mod outcomes;

use std::collections::BTreeSet;
use std::path::PathBuf;

use outcomes::{first_gap, first_refusal, next_gap, next_refusal};

fn walk<T>(first: T, next: impl Fn(&T) -> Option<T>) -> Vec<T> {
    let mut out = vec![first];
    while let Some(value) = out.last().and_then(&next) {
        out.push(value);
    }
    out
}

/// Codes of variants that left the protocol, with the protocol version that dropped them: never
/// reused.
const RETIRED: [(&str, &str, u32); 2] = [
    ("refusal", "relative-file-path", 9),
    ("refusal", "nul-in-file-path", 9),
];

/// One line per variant: its kind, its code and the sentence of its sample; then the retired
/// codes.
fn render() -> String {
    let mut text = String::from(
        "# Every Refusal and Gap code with the sentence of its sample (tests/support/outcomes.rs).\n\
         # Codes are never reused or renamed. Regenerate with UPDATE_OUTCOMES=1 cargo test -p \
         confine-protocol --test outcomes\n",
    );
    for r in walk(first_refusal(), next_refusal) {
        text.push_str(&format!("refusal {}: {r}\n", r.code()));
    }
    for g in walk(first_gap(), next_gap) {
        text.push_str(&format!("gap {}: {g}\n", g.code()));
    }
    for (kind, code, version) in RETIRED {
        text.push_str(&format!(
            "retired {kind} {code}: left in protocol {version}\n"
        ));
    }
    text
}

#[test]
fn a_retired_code_is_never_given_again() {
    let refusals: Vec<&str> = walk(first_refusal(), next_refusal)
        .iter()
        .map(|r| r.code())
        .collect();
    let gaps: Vec<&str> = walk(first_gap(), next_gap)
        .iter()
        .map(|g| g.code())
        .collect();
    for (kind, code, _) in RETIRED {
        let live = if kind == "refusal" { &refusals } else { &gaps };
        assert!(!live.contains(&code), "{kind} {code} is retired");
    }
    // The control: a live code is found where this test looks.
    assert!(refusals.contains(&"seatbelt-as-root") && gaps.contains(&"unverified-macos"));
}

fn pinned_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/outcome_codes.txt")
}

#[test]
fn every_code_is_unique_and_kebab_case() {
    let codes: Vec<&str> = walk(first_refusal(), next_refusal)
        .iter()
        .map(|r| r.code())
        .chain(walk(first_gap(), next_gap).iter().map(|g| g.code()))
        .collect();
    let refusals = walk(first_refusal(), next_refusal).len();
    let unique: BTreeSet<&str> = codes[..refusals].iter().copied().collect();
    assert_eq!(
        unique.len(),
        refusals,
        "a refusal code is used twice: {codes:?}"
    );
    let unique: BTreeSet<&str> = codes[refusals..].iter().copied().collect();
    assert_eq!(
        unique.len(),
        codes.len() - refusals,
        "a gap code is used twice: {codes:?}"
    );
    for code in &codes {
        assert!(
            !code.is_empty()
                && code.split('-').all(|w| {
                    !w.is_empty()
                        && w.bytes()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
                }),
            "{code} is not kebab-case"
        );
    }
}

#[test]
fn codes_and_sentences_are_the_pinned_ones() {
    let rendered = render();
    let path = pinned_path();
    if std::env::var_os("UPDATE_OUTCOMES").is_some_and(|v| !v.is_empty() && v != "0") {
        std::fs::write(&path, &rendered).unwrap();
        panic!(
            "UPDATE_OUTCOMES is set: rewrote {}; review the diff and rerun without it",
            path.display()
        );
    }
    let pinned = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read {}: {e}; create it with UPDATE_OUTCOMES=1",
            path.display()
        )
    });
    let pinned_codes: BTreeSet<&str> = pinned
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(':').next())
        .map(|c| c.strip_prefix("retired ").unwrap_or(c))
        .collect();
    let codes: BTreeSet<&str> = rendered
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(':').next())
        .map(|c| c.strip_prefix("retired ").unwrap_or(c))
        .collect();
    let gone: Vec<&&str> = pinned_codes.difference(&codes).collect();
    assert!(
        gone.is_empty(),
        "codes removed or renamed (never allowed): {gone:?}"
    );
    assert_eq!(
        rendered,
        pinned,
        "the codes or sentences differ from {}",
        path.display()
    );
}

/// The sentences the helper's tests and kernel-e2e look for, from the variants that carry them.
#[test]
fn sentences_hold_what_the_wire_tests_match() {
    use confine_protocol::{Backend, Gap, PathRole, Refusal};
    let cases: [(String, &str); 6] = [
        (
            Refusal::LocalBindingNeedsNamespace {
                backend: Backend::Landlock,
            }
            .to_string(),
            "local_binding needs a private network namespace, which the landlock backend",
        ),
        (
            Refusal::SocketsNeedNamespace {
                backend: Backend::Landlock,
            }
            .to_string(),
            "use the namespaces or bwrap backend (bwrap: install bubblewrap) or drop unix_sockets",
        ),
        (
            Refusal::NotAbsolute {
                role: PathRole::SessionTemp,
                path: "tmp".to_owned(),
            }
            .to_string(),
            "session temp directory tmp is not an absolute path",
        ),
        (
            Refusal::LinkInRoot {
                role: PathRole::WritableRoot,
                path: "/a".to_owned(),
                real: None,
            }
            .to_string(),
            "name the directory by its real path",
        ),
        (Gap::ProcessVisibility.to_string(), "process isolation: "),
        (
            Refusal::CeilingPartial {
                backend: Backend::Landlock,
                missing: vec![Gap::Truncate, Gap::DeviceIoctl],
            }
            .to_string(),
            "ceiling refuse_partial is true and landlock cannot enforce: truncate of files \
             outside writable roots (Landlock ABI < 3); ioctl on devices (Landlock ABI < 5)",
        ),
    ];
    for (text, expected) in cases {
        assert!(text.contains(expected), "{text:?} lacks {expected:?}");
    }
}
