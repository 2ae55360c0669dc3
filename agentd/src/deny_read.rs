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
//!
//! The walk is the one place a command could hide a match from, by changing the tree it
//! walks (a command may write the workspace): so it fails closed. Each directory is opened
//! by descriptor relative to its parent, never by path and never through a link, so neither a
//! path longer than the kernel takes nor a link swapped in can turn it aside; a directory it
//! cannot open or list fails the request, naming it ([`ExpandError`]) — unless no command could
//! read it either (another user's, not searchable by this one). A match whose path is too long
//! to be sent fails the request too.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use confine_protocol::pattern;
use nix::dir::{Dir, Type};
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{Mode, SFlag, fstatat};
use nix::unistd::{AccessFlags, faccessat, geteuid};

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

/// Why a request's denied reads could not all be found. Nothing is run then: a pattern that
/// could not be looked for everywhere it might match is never sent as if it had been.
#[derive(Debug, thiserror::Error)]
pub enum ExpandError {
    #[error(
        "sandbox.deny_read: more than {limit} entries under {} to look through for `**/` \
         patterns; nothing was run — name the denied paths instead of using `**/`, or deny the \
         directories that hold them",
        shown(root)
    )]
    TooLarge { root: PathBuf, limit: usize },
    #[error(
        "sandbox.deny_read: cannot look through {} for `**/` patterns ({source}); nothing was \
         run — a command could read what it holds; make it readable and searchable again (for \
         example `chmod u+rx` on it) or remove it",
        shown(path)
    )]
    Unsearchable {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "sandbox.deny_read: directories nest more than {MAX_DEPTH} deep under {}; nothing was \
         run — a `**/` pattern cannot be looked for that deep; remove or flatten them",
        shown(path)
    )]
    TooDeep { path: PathBuf },
    #[error(
        "sandbox.deny_read: {} matches a `**/` pattern, but its path is longer than the kernel \
         can name ({PATH_MAX} bytes), so it cannot be denied; nothing was run — move or remove \
         it",
        shown(path)
    )]
    TooLong { path: PathBuf },
    #[error(
        "sandbox.deny_read: the tree under {} kept changing while it was looked through for \
         `**/` patterns ({} tries); nothing was run — try again once nothing else is moving \
         directories there",
        shown(root),
        WALK_TRIES
    )]
    Changing { root: PathBuf },
}

/// The longest path the kernel takes (`PATH_MAX`, its terminating NUL included).
pub const PATH_MAX: usize = 4096;
/// The deepest a walk goes below a root; each level holds one open directory.
pub const MAX_DEPTH: usize = 256;
/// How many times a walk starts again when a directory it listed is gone or replaced before it
/// could be opened (a build running alongside); then the request fails.
const WALK_TRIES: usize = 3;
/// The most of a path an error shows.
const SHOWN_PATH_BYTES: usize = 200;

/// A path for an error: its start, when it is longer than anyone would read.
fn shown(path: &Path) -> String {
    let bytes = path.as_os_str().as_bytes();
    let Some((head, _)) = bytes
        .split_at_checked(SHOWN_PATH_BYTES)
        .filter(|(_, rest)| !rest.is_empty())
    else {
        return path.display().to_string();
    };
    let head = String::from_utf8_lossy(head);
    format!("{head}… ({} bytes)", bytes.len())
}

/// The real paths to send for `list`: absolute entries resolved (when they exist), `**/`
/// patterns looked for under each of `roots`. Each path once.
pub fn expand(list: &[DenyRead], roots: &[PathBuf]) -> Result<Vec<PathBuf>, ExpandError> {
    expand_with_limit(list, roots, MAX_WALK)
}

fn expand_with_limit(
    list: &[DenyRead],
    roots: &[PathBuf],
    limit: usize,
) -> Result<Vec<PathBuf>, ExpandError> {
    let mut out: Vec<PathBuf> = Vec::new();
    for entry in list {
        if let DenyRead::Path(path) = entry {
            push(
                &mut out,
                path.canonicalize().unwrap_or_else(|_| path.clone()),
            );
        }
    }
    let patterns: Vec<&[String]> = list
        .iter()
        .filter_map(|entry| match entry {
            DenyRead::Anywhere(parts) => Some(parts.as_slice()),
            DenyRead::Path(_) => None,
        })
        .collect();
    if patterns.is_empty() {
        return Ok(out);
    }
    let mut walk = Walk {
        patterns: &patterns,
        limit,
        seen: 0,
        found: Vec::new(),
    };
    for root in roots {
        walk.root(root)?;
    }
    for path in walk.found {
        push(&mut out, path);
    }
    Ok(out)
}

fn push(out: &mut Vec<PathBuf>, path: PathBuf) {
    if !out.contains(&path) {
        out.push(path);
    }
}

/// One request's search for `**/` patterns, by descriptor: each directory is opened relative
/// to its parent without following a link, so no link or rename can send the walk elsewhere
/// and no path is too long to walk; anything that keeps a directory from being looked through
/// fails the request.
struct Walk<'a> {
    patterns: &'a [&'a [String]],
    limit: usize,
    seen: usize,
    found: Vec<PathBuf>,
}

/// Why one pass over a root stopped.
enum Stop {
    Failed(ExpandError),
    /// A listed directory was gone or no longer a directory when it was opened.
    Changed,
}

impl From<ExpandError> for Stop {
    fn from(e: ExpandError) -> Stop {
        Stop::Failed(e)
    }
}

impl Walk<'_> {
    fn root(&mut self, root: &Path) -> Result<(), ExpandError> {
        let (seen, found) = (self.seen, self.found.len());
        for _ in 0..WALK_TRIES {
            let dir = match open_dir(None, root) {
                Ok(dir) => dir,
                // A root that does not exist holds nothing to deny.
                Err(Errno::ENOENT) => return Ok(()),
                Err(e) => {
                    return Err(ExpandError::Unsearchable {
                        path: root.to_path_buf(),
                        source: e.into(),
                    });
                }
            };
            match self.dir(root, dir, root, 0) {
                Ok(()) => return Ok(()),
                Err(Stop::Failed(e)) => return Err(e),
                Err(Stop::Changed) => {
                    self.seen = seen;
                    self.found.truncate(found);
                }
            }
        }
        Err(ExpandError::Changing {
            root: root.to_path_buf(),
        })
    }

    /// Looks through `dir` (open as `path`), `depth` levels below `root`.
    fn dir(&mut self, root: &Path, mut dir: Dir, path: &Path, depth: usize) -> Result<(), Stop> {
        let unsearchable = |source: Errno| ExpandError::Unsearchable {
            path: path.to_path_buf(),
            source: source.into(),
        };
        let mut entries: Vec<(OsString, Option<Type>)> = Vec::new();
        for entry in dir.iter() {
            let entry = entry.map_err(unsearchable)?;
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            if name == "." || name == ".." {
                continue;
            }
            entries.push((name.to_owned(), entry.file_type()));
        }
        for (name, kind) in entries {
            self.seen += 1;
            if self.seen > self.limit {
                return Err(ExpandError::TooLarge {
                    root: root.to_path_buf(),
                    limit: self.limit,
                }
                .into());
            }
            let entry = path.join(&name);
            let kind = match kind {
                Some(kind) => kind,
                None => match kind_at(&dir, &name) {
                    Ok(kind) => kind,
                    // Gone since it was listed: a file holds nothing now; a directory may
                    // have moved where the walk has already been.
                    Err(Errno::ENOENT) => return Err(Stop::Changed),
                    Err(e) => return Err(unsearchable(e).into()),
                },
            };
            if self.patterns.iter().any(|p| matches(p, &entry)) {
                self.matched(&entry, kind)?;
            }
            if kind != Type::Directory {
                continue;
            }
            if depth + 1 > MAX_DEPTH {
                return Err(ExpandError::TooDeep { path: entry }.into());
            }
            match open_dir(Some(&dir), Path::new(&name)) {
                Ok(child) => self.dir(root, child, &entry, depth + 1)?,
                Err(Errno::ENOENT | Errno::ENOTDIR | Errno::ELOOP) => return Err(Stop::Changed),
                Err(Errno::EACCES) if out_of_reach(&dir, &name) => {}
                Err(e) => {
                    return Err(ExpandError::Unsearchable {
                        path: entry,
                        source: e.into(),
                    }
                    .into());
                }
            }
        }
        Ok(())
    }

    /// Records a match: as named, or where it points when it is a link.
    fn matched(&mut self, entry: &Path, kind: Type) -> Result<(), ExpandError> {
        let denied = if kind == Type::Symlink {
            match entry.canonicalize() {
                Ok(real) => real,
                // A link to nothing, or to itself, points at nothing to read.
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
                Err(e) if e.raw_os_error() == Some(Errno::ELOOP as i32) => return Ok(()),
                Err(source) => {
                    return Err(ExpandError::Unsearchable {
                        path: entry.to_path_buf(),
                        source,
                    });
                }
            }
        } else {
            entry.to_path_buf()
        };
        if denied.as_os_str().len() >= PATH_MAX {
            return Err(ExpandError::TooLong { path: denied });
        }
        self.found.push(denied);
        Ok(())
    }
}

/// Opens a directory (relative to `parent` when given) for listing, refusing a link.
pub(crate) fn open_dir(parent: Option<&Dir>, path: &Path) -> Result<Dir, Errno> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    match parent {
        Some(parent) => Dir::openat(parent, path, flags | OFlag::O_NOFOLLOW, Mode::empty()),
        None => Dir::open(path, flags, Mode::empty()),
    }
}

/// The kind of `name` in `dir`, for a file system whose listing does not say.
fn kind_at(dir: &Dir, name: &OsStr) -> Result<Type, Errno> {
    let stat = fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW)?;
    Ok(
        match SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT {
            SFlag::S_IFDIR => Type::Directory,
            SFlag::S_IFLNK => Type::Symlink,
            _ => Type::File,
        },
    )
}

/// Whether a directory this user may not open is beyond every command's reach too: another
/// user owns it (so no command can change its mode) and it grants this user no search. One of
/// this user's own, or one it may search but not list, could be read by a command that knows
/// or guesses the names.
fn out_of_reach(dir: &Dir, name: &OsStr) -> bool {
    let Ok(stat) = fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) else {
        return false;
    };
    let searchable = faccessat(
        dir,
        name,
        AccessFlags::X_OK,
        AtFlags::AT_EACCESS | AtFlags::AT_SYMLINK_NOFOLLOW,
    );
    stat.st_uid != geteuid().as_raw() && searchable == Err(Errno::EACCES)
}

/// Whether `path` ends with `pattern`'s components, the last matched with wildcards.
fn matches(pattern: &[String], path: &Path) -> bool {
    let names: Vec<&OsStr> = path.iter().collect();
    let Some(tail) = names
        .len()
        .checked_sub(pattern.len())
        .and_then(|skip| names.get(skip..))
    else {
        return false;
    };
    let (Some((last, dirs)), Some((got_last, got_dirs))) =
        (pattern.split_last(), tail.split_last())
    else {
        return false;
    };
    dirs.iter()
        .zip(got_dirs)
        .all(|(want, got)| want.as_bytes() == got.as_bytes())
        && pattern::matches(last.as_bytes(), got_last.as_bytes())
}

#[cfg(test)]
mod tests {
    use std::os::fd::OwnedFd;

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

    /// Makes `levels` nested directories named `name` under `root`, by descriptor (their path
    /// may be longer than a path can be), and returns the innermost, open.
    fn nest(root: &Path, name: &str, levels: usize) -> OwnedFd {
        let mut dir: OwnedFd = nix::fcntl::open(root, OFlag::O_DIRECTORY, Mode::empty()).unwrap();
        for _ in 0..levels {
            nix::sys::stat::mkdirat(&dir, name, Mode::S_IRWXU).unwrap();
            dir = nix::fcntl::openat(&dir, name, OFlag::O_DIRECTORY, Mode::empty()).unwrap();
        }
        dir
    }

    #[test]
    fn a_match_deeper_than_a_path_can_name_fails_the_request() {
        let scratch = Scratch::new("deny-deep");
        let list = [parse("**/.env", None).unwrap()];
        let long = "d".repeat(250);
        for (levels, too_long) in [(3, false), (20, true)] {
            let root = scratch.0.join(format!("levels-{levels}"));
            std::fs::create_dir(&root).unwrap();
            let bottom = nest(&root, &long, levels);
            let env = nix::fcntl::openat(
                &bottom,
                ".env",
                OFlag::O_CREAT | OFlag::O_WRONLY,
                Mode::S_IRUSR,
            )
            .unwrap();
            drop(env);
            let found = expand(&list, std::slice::from_ref(&root));
            if too_long {
                let err = found.unwrap_err();
                assert!(matches!(err, ExpandError::TooLong { .. }), "{err}");
                // The error shows the start of the path, not all 5,000 bytes of it.
                assert!(err.to_string().len() < 600, "{err}");
            } else {
                // The control: the same tree, shallow enough, has its match found.
                let found = found.unwrap();
                assert_eq!(found.len(), 1);
                assert!(found[0].ends_with(".env"), "{found:?}");
            }
        }
    }

    #[test]
    fn directories_nested_past_the_depth_limit_fail_the_request() {
        let scratch = Scratch::new("deny-depth");
        let list = [parse("**/.env", None).unwrap()];
        for (levels, too_deep) in [(MAX_DEPTH, false), (MAX_DEPTH + 1, true)] {
            let root = scratch.0.join(format!("levels-{levels}"));
            std::fs::create_dir(&root).unwrap();
            drop(nest(&root, "d", levels));
            let found = expand(&list, std::slice::from_ref(&root));
            if too_deep {
                assert!(
                    matches!(found, Err(ExpandError::TooDeep { .. })),
                    "{found:?}"
                );
            } else {
                assert_eq!(found.unwrap(), Vec::<PathBuf>::new());
            }
        }
    }

    #[test]
    fn a_tree_too_large_to_search_fails_the_request() {
        let scratch = Scratch::new("deny-large");
        for i in 0..5 {
            std::fs::write(scratch.0.join(format!("f{i}")), "x").unwrap();
        }
        let list = [parse("**/.env", None).unwrap()];
        let err = expand_with_limit(&list, std::slice::from_ref(&scratch.0), 3).unwrap_err();
        assert!(
            matches!(err, ExpandError::TooLarge { limit: 3, .. }),
            "{err}"
        );
        assert!(expand_with_limit(&list, std::slice::from_ref(&scratch.0), 5).is_ok());
    }
}
