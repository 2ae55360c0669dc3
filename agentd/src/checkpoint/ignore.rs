//! Which paths the workspace ignores, so a checkpoint leaves them out (and lists them): the
//! rules of every `.gitignore` on the way down and of `.git/info/exclude`, and with no
//! repository the directories `node_modules` and `target` as well.
//!
//! A clear subset of gitignore's syntax: blank lines and `#` comments; `!` re-includes (the
//! last matching rule wins, a deeper file's rules over a shallower's); a trailing `/` matches
//! directories only; a pattern with a `/` before its end is anchored to the directory of its
//! file, one without matches a name at any depth below it; `*` matches any run of characters
//! within one name (`confine_protocol::pattern`, the wildcard `deny_read` uses), and a `**`
//! segment any number of directories. Not supported, and matched literally: `?`, `[…]`
//! classes and backslash escapes (but a leading `\#` or `\!`). Trailing spaces are dropped.
//! As in git, nothing inside an ignored directory is looked at, so a `!` cannot bring back a
//! file below one.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use confine_protocol::pattern;

/// The directories left out of a workspace that is no repository.
pub(super) const NO_REPOSITORY_DEFAULTS: &[u8] = b"node_modules/\ntarget/\n";

/// One rule of an ignore file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rule {
    negate: bool,
    dir_only: bool,
    anchored: bool,
    segments: Vec<Vec<u8>>,
}

/// The rules of one file, and the directory (relative to the root) they apply below.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Rules {
    base: PathBuf,
    rules: Vec<Rule>,
}

impl Rules {
    /// The rules of the ignore file `text` in the directory `base`.
    pub fn parse(base: &Path, text: &[u8]) -> Rules {
        let rules = text
            .split(|b| *b == b'\n')
            .filter_map(|line| rule(line.strip_suffix(b"\r").unwrap_or(line)))
            .collect();
        Rules {
            base: base.to_owned(),
            rules,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

fn rule(line: &[u8]) -> Option<Rule> {
    let mut line = line;
    while let Some(rest) = line.strip_suffix(b" ") {
        line = rest;
    }
    if line.is_empty() || line.starts_with(b"#") {
        return None;
    }
    let (negate, line) = match line.strip_prefix(b"!") {
        Some(rest) => (true, rest),
        None => (false, line.strip_prefix(b"\\").unwrap_or(line)),
    };
    let (dir_only, line) = match line.strip_suffix(b"/") {
        Some(rest) => (true, rest),
        None => (false, line),
    };
    let anchored = line.contains(&b'/');
    let line = line.strip_prefix(b"/").unwrap_or(line);
    if line.is_empty() {
        return None;
    }
    let segments: Vec<Vec<u8>> = line
        .split(|b| *b == b'/')
        .filter(|s| !s.is_empty())
        .map(<[u8]>::to_vec)
        .collect();
    Some(Rule {
        negate,
        dir_only,
        anchored,
        segments,
    })
}

/// The rules in force at one directory of a walk: its ancestors' files and its own.
#[derive(Debug, Clone, Default)]
pub(super) struct Stack {
    files: Vec<Rules>,
}

impl Stack {
    pub fn push(&mut self, rules: Rules) {
        self.files.push(rules);
    }

    /// Whether `rel` (relative to the root; a directory when `is_dir`) is ignored.
    pub fn ignored(&self, rel: &Path, is_dir: bool) -> bool {
        for rules in self.files.iter().rev() {
            let Ok(below) = rel.strip_prefix(&rules.base) else {
                continue;
            };
            let names: Vec<&[u8]> = below.iter().map(OsStr::as_bytes).collect();
            for rule in rules.rules.iter().rev() {
                if rule.dir_only && !is_dir {
                    continue;
                }
                if matches(rule, &names) {
                    return !rule.negate;
                }
            }
        }
        false
    }
}

fn matches(rule: &Rule, names: &[&[u8]]) -> bool {
    if rule.anchored {
        return segments_match(&rule.segments, names);
    }
    match (rule.segments.as_slice(), names.last()) {
        ([only], Some(last)) => pattern::matches(only, last),
        _ => false,
    }
}

/// Whether `names` match `segments` whole, a `**` segment standing for any number of names.
fn segments_match(segments: &[Vec<u8>], names: &[&[u8]]) -> bool {
    match segments.split_first() {
        None => names.is_empty(),
        Some((first, rest)) if first.as_slice() == b"**" => {
            let mut tails = std::iter::successors(Some(names), |tail| {
                tail.split_first().map(|(_, others)| others)
            });
            tails.any(|tail| segments_match(rest, tail))
        }
        Some((first, rest)) => match names.split_first() {
            Some((name, others)) => pattern::matches(first, name) && segments_match(rest, others),
            None => false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack(text: &str) -> Stack {
        let mut stack = Stack::default();
        stack.push(Rules::parse(Path::new(""), text.as_bytes()));
        stack
    }

    #[test]
    fn the_supported_subset_matches_as_git_does() {
        let s = stack("# comment\n*.log\n/build\ndist/\ndocs/*.tmp\n**/gen/out\n!keep.log\n");
        for (path, dir, ignored) in [
            ("a.log", false, true),
            ("deep/er/b.log", false, true),
            ("keep.log", false, false),
            ("build", true, true),
            ("sub/build", true, false),
            ("dist", true, true),
            ("dist", false, false),
            ("x/dist", true, true),
            ("docs/a.tmp", false, true),
            ("docs/sub/a.tmp", false, false),
            ("gen/out", false, true),
            ("a/b/gen/out", true, true),
            ("src/main.rs", false, false),
        ] {
            assert_eq!(s.ignored(Path::new(path), dir), ignored, "{path} dir={dir}");
        }
    }

    #[test]
    fn a_deeper_file_wins_and_applies_only_below_itself() {
        let mut s = stack("*.txt\n");
        s.push(Rules::parse(Path::new("sub"), b"!*.txt\nsecret\n"));
        assert!(s.ignored(Path::new("a.txt"), false));
        assert!(!s.ignored(Path::new("sub/a.txt"), false));
        assert!(s.ignored(Path::new("sub/secret"), false));
        assert!(!s.ignored(Path::new("secret"), false));
    }

    #[test]
    fn without_a_repository_node_modules_and_target_are_left_out() {
        let s = stack(std::str::from_utf8(NO_REPOSITORY_DEFAULTS).unwrap_or_default());
        assert!(s.ignored(Path::new("web/node_modules"), true));
        assert!(s.ignored(Path::new("target"), true));
        assert!(
            !s.ignored(Path::new("target"), false),
            "a file named target is kept"
        );
    }
}
