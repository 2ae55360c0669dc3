//! How hosts match the lists, and which entries the lists refuse.

use std::net::{IpAddr, Ipv4Addr};

use super::*;

fn policy(allowed: &[&str], denied: &[&str]) -> Policy {
    Policy::new(allowed, denied).expect("a valid policy")
}

fn reason(policy: &Policy, host: &str) -> Reason {
    policy.decide(host).1
}

fn allows(policy: &Policy, host: &str) -> bool {
    reason(policy, host).allows()
}

fn exact(name: &str) -> Pattern {
    Pattern::Exact(name.to_owned())
}

#[test]
fn an_exact_entry_allows_that_name_and_no_other() {
    let p = policy(&["example.com"], &[]);
    assert_eq!(
        reason(&p, "example.com"),
        Reason::Allowed(exact("example.com"))
    );
    for other in [
        "www.example.com",
        "example.org",
        "badexample.com",
        "example.com.evil",
    ] {
        assert_eq!(reason(&p, other), Reason::NotAllowed, "{other}");
    }
}

#[test]
fn a_wildcard_allows_names_below_it_but_not_the_apex() {
    let p = policy(&["*.example.com"], &[]);
    let below = Reason::Allowed(Pattern::Below("example.com".to_owned()));
    assert_eq!(reason(&p, "api.example.com"), below);
    assert_eq!(reason(&p, "a.b.example.com"), below);
    assert_eq!(reason(&p, "example.com"), Reason::NotAllowed);
    assert_eq!(reason(&p, "badexample.com"), Reason::NotAllowed);
    assert_eq!(reason(&p, "example.com.evil.test"), Reason::NotAllowed);
}

#[test]
fn the_apex_and_its_names_below_need_both_entries() {
    let p = policy(&["example.com", "*.example.com"], &[]);
    assert!(allows(&p, "example.com"));
    assert!(allows(&p, "www.example.com"));
}

#[test]
fn matching_ignores_case_and_one_trailing_dot_on_both_sides() {
    let p = policy(&["Example.COM.", "*.Docs.Example.org"], &[]);
    for host in ["example.com", "EXAMPLE.com", "example.com.", "ExAmPlE.CoM."] {
        assert_eq!(
            reason(&p, host),
            Reason::Allowed(exact("example.com")),
            "{host}"
        );
    }
    assert!(allows(&p, "API.docs.example.ORG."));
    assert_eq!(reason(&p, "example.com.."), Reason::NotAName);
    assert_eq!(
        p.decide("Example.Com.").0,
        Host::Name("example.com".to_owned())
    );
}

#[test]
fn denied_wins_over_allowed() {
    let p = policy(
        &["*.example.com", "example.com"],
        &["secret.example.com", "*.internal.example.com"],
    );
    assert_eq!(
        reason(&p, "secret.example.com"),
        Reason::Denied(exact("secret.example.com"))
    );
    assert_eq!(
        reason(&p, "db.internal.example.com"),
        Reason::Denied(Pattern::Below("internal.example.com".to_owned()))
    );
    // The control: what the denied entries do not hold stays allowed.
    assert!(allows(&p, "www.example.com"));
    assert!(allows(&p, "internal.example.com"));
    assert!(allows(&p, "example.com"));

    let both = policy(&["api.example.com"], &["*.example.com"]);
    assert!(!allows(&both, "api.example.com"));
}

#[test]
fn ip_literals_and_numeric_forms_are_refused() {
    let p = policy(&["example.com", "*.example.com"], &[]);
    for host in [
        "127.0.0.1",
        "::1",
        "[::1]",
        "[::ffff:127.0.0.1]",
        "10.0.0.1",
        "[2001:db8::1]",
    ] {
        assert_eq!(reason(&p, host), Reason::AddressNotListed, "{host}");
    }
    // What resolvers would read as an address, and other things that are not names.
    for host in [
        "2130706433",
        "0x7f.1",
        "0x7f000001",
        "0X7F000001",
        "127.1",
        "0177.0.0.1",
        "127.000.0.1",
        "127.0.0.1.",
        "1.2.3.04",
        "example.0x",
        "example.123",
        "[::1",
        "::1]",
        "[example.com]",
        "fe80::1%eth0",
        "",
        ".",
        "a..b",
        ".example.com",
        "-example.com",
        "example-.com",
        "exa mple.com",
        "example.com:443",
        "user@example.com",
        "example.com/path",
        "exämple.com",
        "example.com\0",
        "*.example.com",
    ] {
        assert_eq!(reason(&p, host), Reason::NotAName, "{host:?}");
    }
    let long_label = format!("{}.com", "a".repeat(64));
    assert_eq!(reason(&p, &long_label), Reason::NotAName);
    let long_name = format!("{}com", "abcdefghi.".repeat(26));
    assert_eq!(reason(&p, &long_name), Reason::NotAName);
}

#[test]
fn names_that_only_look_numeric_in_part_are_names() {
    let p = policy(
        &["1password.com", "*.0x1.example", "xn--bcher-kva.example"],
        &[],
    );
    assert!(allows(&p, "1password.com"));
    assert!(allows(&p, "123.0x1.example"));
    assert!(allows(&p, "xn--bcher-kva.example"), "punycode as given");
    assert!(
        !allows(&p, "bücher.example"),
        "the Unicode form is not its punycode"
    );
    assert_eq!(reason(&p, "_dmarc.example.com"), Reason::NotAllowed);
}

#[test]
fn an_ip_literal_is_allowed_only_when_listed_exactly() {
    let p = policy(&["127.0.0.1", "[::1]", "2001:db8::1"], &[]);
    let v4 = Reason::Allowed(Pattern::Ip(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    assert_eq!(reason(&p, "127.0.0.1"), v4);
    assert!(allows(&p, "::1"));
    assert!(allows(&p, "[::1]"));
    assert!(allows(&p, "[2001:db8:0::1]"));
    for host in [
        "127.0.0.2",
        "[::ffff:127.0.0.1]",
        "2130706433",
        "127.1",
        "localhost",
    ] {
        assert!(!allows(&p, host), "{host}");
    }
    let denied = policy(&["127.0.0.1"], &["127.0.0.1"]);
    assert_eq!(
        reason(&denied, "127.0.0.1"),
        Reason::Denied(Pattern::Ip(IpAddr::V4(Ipv4Addr::LOCALHOST)))
    );
}

#[test]
fn empty_lists_refuse_everything() {
    let p = Policy::new::<[&str; 0], [&str; 0]>([], []).expect("empty lists");
    assert_eq!(reason(&p, "example.com"), Reason::NotAllowed);
    assert_eq!(reason(&p, "127.0.0.1"), Reason::AddressNotListed);
}

#[test]
fn bad_entries_are_errors_naming_the_list_and_the_entry() {
    let cases: &[(&str, EntryProblem)] = &[
        ("", EntryProblem::Empty),
        (" example.com", EntryProblem::Whitespace),
        ("https://example.com", EntryProblem::Scheme),
        ("example.com:443", EntryProblem::Port),
        ("[::1]:443", EntryProblem::Port),
        ("127.0.0.1:80", EntryProblem::Port),
        ("*", EntryProblem::MisplacedWildcard),
        ("*example.com", EntryProblem::MisplacedWildcard),
        ("foo*.example.com", EntryProblem::MisplacedWildcard),
        ("a.*.example.com", EntryProblem::MisplacedWildcard),
        ("*.*.example.com", EntryProblem::MisplacedWildcard),
        ("example.*", EntryProblem::MisplacedWildcard),
        ("*.", EntryProblem::WildcardOfNonName),
        ("*.127.0.0.1", EntryProblem::WildcardOfNonName),
        ("*.[::1]", EntryProblem::WildcardOfNonName),
        ("127.1", EntryProblem::NotAHost),
        ("2130706433", EntryProblem::NotAHost),
        ("exa_mple..com", EntryProblem::NotAHost),
        ("bücher.example", EntryProblem::NotAHost),
    ];
    for (entry, problem) in cases {
        let error = Policy::new([*entry], [] as [&str; 0]).expect_err(entry);
        assert_eq!(
            error,
            PolicyError {
                key: ALLOWED_KEY,
                entry: (*entry).to_owned(),
                problem: problem.clone()
            }
        );
    }
    let error = Policy::new(["example.com"], ["ok.example.com", "foo*.com"]).expect_err("bad");
    assert_eq!(
        error.to_string(),
        "denied_domains entry \"foo*.com\" has a `*` that is not a leading `*.`; write \
         \"*.example.com\" for every name below example.com (and \"example.com\" for the name \
         itself)"
    );
    let error = Policy::new(["example.com:443"], [] as [&str; 0]).expect_err("a port");
    assert_eq!(
        error.to_string(),
        "allowed_domains entry \"example.com:443\" has a port; an entry names a host only, and \
         every port of an allowed host is allowed"
    );
}

#[test]
fn reasons_read_as_a_sentence_naming_the_key() {
    let p = policy(&["*.example.com"], &["bad.example.com"]);
    assert_eq!(
        reason(&p, "a.example.com").to_string(),
        "allowed by \"*.example.com\" in allowed_domains"
    );
    assert_eq!(
        reason(&p, "bad.example.com").to_string(),
        "denied by \"bad.example.com\" in denied_domains"
    );
    assert_eq!(
        reason(&p, "other.test").to_string(),
        "not in allowed_domains"
    );
}
