//! The one wildcard both sides use: `*` matches any run of bytes, everything else matches
//! itself. The ceiling's `env_allow`/`env_deny` names (confine-helper) and `deny_read`'s `**/`
//! names (agentd) are matched with it, so a pattern means the same wherever it is written.

/// Whether `name` matches `pattern` as a whole.
pub fn matches(pattern: &[u8], name: &[u8]) -> bool {
    let mut parts = pattern.splitn(2, |&b| b == b'*');
    let (Some(head), Some(tail)) = (parts.next(), parts.next()) else {
        return pattern == name;
    };
    let Some(rest) = name.strip_prefix(head) else {
        return false;
    };
    if !tail.contains(&b'*') {
        return rest.ends_with(tail);
    }
    tails(rest).any(|rest| matches(tail, rest))
}

/// `text` and every shorter tail of it, down to the empty one: `ab`, `b`, then nothing.
fn tails(text: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::successors(Some(text), |t| t.split_first().map(|(_, rest)| rest))
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn a_star_matches_any_run_and_the_rest_matches_itself() {
        for (pattern, name) in [
            ("A*", "ABC"),
            ("*KEY*", "MY_KEY_X"),
            ("LC_*", "LC_ALL"),
            (".env*", ".env.local"),
            ("*.pem", "key.pem"),
            ("a*b*c", "axxbyyc"),
            ("*", ""),
            ("exact", "exact"),
        ] {
            assert!(
                matches(pattern.as_bytes(), name.as_bytes()),
                "{pattern} {name}"
            );
        }
        for (pattern, name) in [
            ("A*C", "AB"),
            (".env", ".envrc"),
            ("*.pem", "pem"),
            ("a*b*c", "axxbyy"),
            ("a?c", "abc"),
        ] {
            assert!(
                !matches(pattern.as_bytes(), name.as_bytes()),
                "{pattern} {name}"
            );
        }
        // Names need not be UTF-8.
        assert!(matches(b".env*", b".env\xff"));
    }
}
