//! The paths a line of stderr names, as programs print them beside an error.
//!
//! Programs name the path they failed on in a few shapes: quoted (`touch: cannot touch '/x'`,
//! `PermissionError: … Permission denied: '/x'`, `EACCES: permission denied, open '/x'`,
//! `` failed to open `/x` ``, `‘/x’` in UTF-8 locales), or as the colon-separated field before
//! the error text (`cat: /x: Permission denied`, `sh: 1: cannot create /x: …`, `bash: line 1:
//! /x: …`, Go's `open /x: permission denied`). Quoted names win: when a line has any, the field
//! before the error text is often not a path (`npm error Error: EACCES: …`). What is found here
//! is only a name: nothing is opened, and the caller asks the host about it with `access` and
//! `stat` only.

use super::dialect::PATH_VERBS;

/// Quote pairs programs put around names.
const QUOTES: &[(char, char)] = &[('\'', '\''), ('"', '"'), ('`', '`'), ('‘', '’'), ('“', '”')];

/// The paths `line` names, the error text starting at byte `at`; at most a few, in the order
/// found.
pub fn paths(line: &str, at: usize) -> Vec<String> {
    let quoted = quoted(line, at);
    if !quoted.is_empty() {
        return quoted;
    }
    field_before(line.get(..at).unwrap_or(line))
        .into_iter()
        .collect()
}

/// Names in quotes that look like paths: not URLs, not blank, and not the quoted error text
/// itself (Rust's `message: "Permission denied"`), which starts at byte `at`.
fn quoted(line: &str, at: usize) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = line;
    let mut before: Option<char> = None;
    while let Some(c) = rest.chars().next() {
        let after = &rest[c.len_utf8()..];
        let opens = QUOTES.iter().find(|(open, _)| *open == c);
        // An ASCII apostrophe inside a word ("can't") opens nothing.
        let in_word = c == '\'' && before.is_some_and(char::is_alphanumeric);
        if let (Some((_, close)), false) = (opens, in_word)
            && let Some(end) = after.find(*close)
        {
            let name = &after[..end];
            let start = line.len() - after.len();
            let holds_the_error = (start..=start + end).contains(&at);
            if looks_like_a_path(name) && !holds_the_error {
                found.push(name.to_owned());
            }
            before = Some(*close);
            rest = &after[end + close.len_utf8()..];
            continue;
        }
        before = Some(c);
        rest = after;
    }
    found
}

fn looks_like_a_path(name: &str) -> bool {
    !name.trim().is_empty() && !name.contains("://") && name.trim() == name
}

/// The path in the field before the error text: the field itself when it is one word and not
/// the program's name, else its last word when that has a `/` or follows a verb of
/// [`PATH_VERBS`].
fn field_before(text: &str) -> Option<String> {
    let text = text.trim_end().trim_end_matches(':').trim_end();
    let fields: Vec<&str> = text.split(": ").collect();
    let last = fields.last()?.trim();
    let words: Vec<&str> = last.split_whitespace().collect();
    let (last_word, before_it) = words.split_last()?;
    let word = last_word.trim_matches(|c| QUOTES.iter().any(|(o, q)| c == *o || c == *q));
    if word.is_empty() || word.contains("://") {
        return None;
    }
    let first_field = fields.len() == 1;
    let path = if before_it.is_empty() {
        !first_field || word.contains('/')
    } else {
        let after_a_verb = before_it
            .iter()
            .any(|w| PATH_VERBS.contains(&w.trim_end_matches(',')));
        word.contains('/') || (after_a_verb && !first_field)
    };
    path.then(|| word.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(line: &str, text: &str) -> Vec<String> {
        let at = line.find(text).expect("the text is in the line");
        paths(line, at)
    }

    #[test]
    fn coreutils_and_shells_name_the_path_before_the_error() {
        let cases = [
            ("cat: /etc/shadow: Permission denied", "/etc/shadow"),
            ("cat: notes.txt: Permission denied", "notes.txt"),
            ("sh: 1: cannot create /root/x: Permission denied", "/root/x"),
            (
                "sh: 1: cannot create out.txt: Read-only file system",
                "out.txt",
            ),
            ("bash: line 1: /root/x: Permission denied", "/root/x"),
            ("bash: x: Permission denied", "x"),
            ("tee: /root/x: Permission denied", "/root/x"),
            (
                "error: could not lock config file .git/config: Read-only file system",
                ".git/config",
            ),
            (
                "error: unable to create file a.txt: Permission denied",
                "a.txt",
            ),
            ("open /root/x: permission denied", "/root/x"),
            (
                "go: creating work dir: mkdir /tmp/go-build1: read-only file system",
                "/tmp/go-build1",
            ),
        ];
        for (line, path) in cases {
            let text = ["Permission denied", "Read-only", "permission", "read-only"]
                .into_iter()
                .find(|t| line.contains(t))
                .expect("a text");
            assert_eq!(named(line, text), [path], "{line}");
        }
    }

    #[test]
    fn quoted_names_win() {
        let cases = [
            ("touch: cannot touch '/x': Permission denied", vec!["/x"]),
            (
                "mkdir: cannot create directory ‘/usr/x’: Permission denied",
                vec!["/usr/x"],
            ),
            (
                "PermissionError: [Errno 13] Permission denied: '/root/c'",
                vec!["/root/c"],
            ),
            (
                "npm error Error: EACCES: permission denied, mkdir '/usr/lib/node_modules/x'",
                vec!["/usr/lib/node_modules/x"],
            ),
            (
                "error: failed to open `/root/x`: Permission denied (os error 13)",
                vec!["/root/x"],
            ),
            (
                "mv: cannot move 'a' to '/root/b': Permission denied",
                vec!["a", "/root/b"],
            ),
            (
                "fatal: Unable to create '/w/.git/index.lock': Read-only file system.",
                vec!["/w/.git/index.lock"],
            ),
        ];
        for (line, expected) in cases {
            let text = ["Permission denied", "permission denied", "Read-only"]
                .into_iter()
                .find(|t| line.contains(t))
                .expect("a text");
            assert_eq!(named(line, text), expected, "{line}");
        }
    }

    #[test]
    fn words_that_are_not_paths_are_not_named() {
        let cases = [
            (
                "error: permission denied: you are not a maintainer",
                ": permission denied",
            ),
            (
                "PermissionError: [Errno 1] Operation not permitted",
                "Operation",
            ),
            ("probe: ptrace 1234: Operation not permitted", "Operation"),
            ("bash: kill: (1) - Operation not permitted", "Operation"),
            (
                "fatal: unable to access 'https://example.com/x.git/': Permission denied",
                "Permission",
            ),
            ("sh: 1: can't create: Permission denied", "Permission"),
            ("Permission denied", "Permission"),
        ];
        for (line, text) in cases {
            assert_eq!(named(line, text), Vec::<String>::new(), "{line}");
        }
    }
}
