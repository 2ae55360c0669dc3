//! `sandbox.deny_read`: what no confined command may read, list or execute, as configured
//! ([`DenyRead`]) and as sent with each request ([`expand`]): absolute paths only, each the
//! real path of something that exists now. confine-helper enforces them (RFC 0014).
//!
//! An entry is an absolute path, `~` or `~/…` (from `$HOME`), or `**/` followed by a relative
//! path whose last component may hold the wildcard `*` ([`pattern::matches`], the ceiling's
//! too) (`**/.env`, `**/.env.*`,
//! `**/config/secrets.yml`): every entry of that name anywhere in the workspace and the extra
//! writable roots, found by walking them at each request (without following links). A match
//! that is a symbolic link is denied where it points, so a link cannot keep its target
//! readable and a planted link cannot get every later command refused.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use confine_protocol::pattern;

/// The most entries one request's walk looks at, over all roots; a tree larger than this fails
/// the request rather than leaving a match unfound.
pub const MAX_WALK: usize = 200_000;

/// One `deny_read` entry, resolved as far as configuration allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DenyRead {
    /// An absolute path (`~` expanded).
    Path(PathBuf),
    /// `**/…`: the relative path's components, the last possibly with `*`.
    Anywhere(Vec<String>),
}

impl DenyRead {
    /// The entry as the configuration writes it.
    pub fn shown(&self) -> String {
        match self {
            DenyRead::Path(path) => path.display().to_string(),
            DenyRead::Anywhere(parts) => format!("**/{}", parts.join("/")),
        }
    }
}

/// Why an entry is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    #[error(
        "is neither an absolute path, `~/…`, nor `**/` followed by a relative path (the \
         wildcard `*` only in its last component)"
    )]
    Shape,
    #[error("needs an absolute HOME to expand `~`")]
    NoHome,
}

/// Parses one entry; `home` expands `~`.
pub fn parse(entry: &str, home: Option<&Path>) -> Result<DenyRead, EntryError> {
    if let Some(rest) = entry.strip_prefix("**/") {
        let parts: Vec<&str> = rest.split('/').collect();
        let plain = |p: &&str| !p.is_empty() && *p != "." && *p != ".." && *p != "**";
        let wild = |p: &str| p.contains('*');
        let (last, dirs) = parts.split_last().ok_or(EntryError::Shape)?;
        if !parts.iter().all(plain) || dirs.iter().any(|p| wild(p)) || last.is_empty() {
            return Err(EntryError::Shape);
        }
        return Ok(DenyRead::Anywhere(
            parts.iter().map(|p| (*p).to_owned()).collect(),
        ));
    }
    if entry.contains('*') {
        return Err(EntryError::Shape);
    }
    let path = match entry.strip_prefix('~') {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => {
            let home = home.filter(|h| h.is_absolute()).ok_or(EntryError::NoHome)?;
            home.join(rest.trim_start_matches('/'))
        }
        Some(_) => return Err(EntryError::Shape),
        None => PathBuf::from(entry),
    };
    if !path.is_absolute() || path.components().any(|c| c == Component::ParentDir) {
        return Err(EntryError::Shape);
    }
    Ok(DenyRead::Path(path.components().collect()))
}

/// A request's denied reads could not be found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "sandbox.deny_read: more than {limit} entries under {} to look through for `**/` \
     patterns; nothing was run — name the denied paths instead of using `**/`, or deny the \
     directories that hold them",
    root.display()
)]
pub struct TooLarge {
    pub root: PathBuf,
    pub limit: usize,
}

/// The real paths to send for `list`: absolute entries resolved (when they exist), `**/`
/// patterns looked for under each of `roots`. Each path once.
pub fn expand(list: &[DenyRead], roots: &[PathBuf]) -> Result<Vec<PathBuf>, TooLarge> {
    expand_with_limit(list, roots, MAX_WALK)
}

fn expand_with_limit(
    list: &[DenyRead],
    roots: &[PathBuf],
    limit: usize,
) -> Result<Vec<PathBuf>, TooLarge> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut push = |path: PathBuf| {
        if !out.contains(&path) {
            out.push(path);
        }
    };
    let patterns: Vec<&[String]> = list
        .iter()
        .filter_map(|entry| match entry {
            DenyRead::Anywhere(parts) => Some(parts.as_slice()),
            DenyRead::Path(_) => None,
        })
        .collect();
    for entry in list {
        if let DenyRead::Path(path) = entry {
            push(path.canonicalize().unwrap_or_else(|_| path.clone()));
        }
    }
    if patterns.is_empty() {
        return Ok(out);
    }
    let mut seen = 0usize;
    for root in roots {
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                seen += 1;
                if seen > limit {
                    return Err(TooLarge {
                        root: root.clone(),
                        limit,
                    });
                }
                let path = entry.path();
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                if patterns.iter().any(|p| matches(p, &path)) {
                    if kind.is_symlink() {
                        // Denied where it points; a dangling link points nowhere to read.
                        if let Ok(real) = path.canonicalize() {
                            push(real);
                        }
                    } else {
                        push(path.clone());
                    }
                }
                if kind.is_dir() {
                    stack.push(path);
                }
            }
        }
    }
    Ok(out)
}

/// Whether `path` ends with `pattern`'s components, the last matched with wildcards.
fn matches(pattern: &[String], path: &Path) -> bool {
    let names: Vec<&OsStr> = path.iter().collect();
    if names.len() < pattern.len() {
        return false;
    }
    let tail = &names[names.len() - pattern.len()..];
    let (last, dirs) = match pattern.split_last() {
        Some(split) => split,
        None => return false,
    };
    dirs.iter()
        .zip(tail)
        .all(|(want, got)| want.as_bytes() == got.as_bytes())
        && pattern::matches(last.as_bytes(), tail[tail.len() - 1].as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::Scratch;

    #[test]
    fn entries_parse_or_say_what_they_may_be() {
        let home = Path::new("/home/u");
        assert_eq!(
            parse("~/.ssh", Some(home)),
            Ok(DenyRead::Path("/home/u/.ssh".into()))
        );
        assert_eq!(
            parse("/etc/secret/", None),
            Ok(DenyRead::Path("/etc/secret".into()))
        );
        assert_eq!(
            parse("**/.env.*", None),
            Ok(DenyRead::Anywhere(vec![".env.*".into()]))
        );
        assert_eq!(
            parse("**/config/secrets.yml", None),
            Ok(DenyRead::Anywhere(vec![
                "config".into(),
                "secrets.yml".into()
            ]))
        );
        for bad in [
            "relative", "**/", "**/a*/b", "**/../x", "/a/*.key", "~user/x", "/a/../b",
        ] {
            assert_eq!(parse(bad, Some(home)), Err(EntryError::Shape), "{bad}");
        }
        assert_eq!(parse("~/.aws", None), Err(EntryError::NoHome));
    }

    #[test]
    fn patterns_are_found_anywhere_under_the_roots_and_links_denied_where_they_point() {
        let scratch = Scratch::new("deny-walk");
        let ws = scratch.0.canonicalize().unwrap();
        std::fs::create_dir_all(ws.join("app/config")).unwrap();
        std::fs::write(ws.join(".env"), "A=1").unwrap();
        std::fs::write(ws.join("app/.env.local"), "B=2").unwrap();
        std::fs::write(ws.join("app/config/secrets.yml"), "s").unwrap();
        std::fs::write(ws.join("app/secrets.yml"), "not under config").unwrap();
        std::fs::write(ws.join("real.txt"), "r").unwrap();
        std::os::unix::fs::symlink(ws.join("real.txt"), ws.join("app/.env")).unwrap();
        let list = vec![
            parse("**/.env*", None).unwrap(),
            parse("**/config/secrets.yml", None).unwrap(),
            DenyRead::Path(ws.join("absent")),
        ];
        let mut found = expand(&list, std::slice::from_ref(&ws)).unwrap();
        found.sort();
        let mut want = vec![
            ws.join(".env"),
            ws.join("absent"),
            ws.join("app/.env.local"),
            ws.join("app/config/secrets.yml"),
            ws.join("real.txt"),
        ];
        want.sort();
        assert_eq!(found, want);
        // The control: nothing is denied when nothing matches.
        let none = expand(
            &[parse("**/nothing-here", None).unwrap()],
            std::slice::from_ref(&ws),
        )
        .unwrap();
        assert!(none.is_empty());
    }

    #[test]
    fn a_tree_too_large_to_search_fails_the_request() {
        let scratch = Scratch::new("deny-large");
        for i in 0..5 {
            std::fs::write(scratch.0.join(format!("f{i}")), "x").unwrap();
        }
        let list = [parse("**/.env", None).unwrap()];
        let err = expand_with_limit(&list, std::slice::from_ref(&scratch.0), 3).unwrap_err();
        assert_eq!(err.limit, 3);
        assert!(expand_with_limit(&list, std::slice::from_ref(&scratch.0), 5).is_ok());
    }
}
