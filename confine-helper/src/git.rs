//! What of a git repository must stay read-only, read from git's own files.
//!
//! git takes code to run later — hooks, `core.fsmonitor`, `core.sshCommand`, filters, a
//! rebase's `exec` lines — from its git directory, and finds that directory through
//! indirections a command could redirect: a `.git` *file* (`gitdir: …`, used by worktrees,
//! submodules and `--separate-git-dir`), `commondir` inside a git directory, and the `.git` of
//! every submodule that `git status` in the superproject enters. The helper therefore keeps
//! read-only, for the repository at the top of each writable root: the `.git` entry itself, the
//! git directory it names, that directory's common directory, the `.git` entry (or, when it is
//! not populated, the directory) of every submodule its index lists, and the `.git` files of its
//! linked worktrees. This module only parses; [`crate::protect`] walks the tree.
//!
//! The whole git directory is read-only, not just `config` and `hooks`: git creates arbitrary
//! names at its top (`index.lock`, …), and any name creatable there could be `commondir`,
//! `config.worktree`, `modules/…` or `rebase-merge/`; and a writable index lets a command
//! register a gitlink to a repository it made, which `git status` then enters and whose
//! `core.fsmonitor` it runs. RFC 0002 has the argument.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// The target of a `.git` file (`gitdir: PATH`), taken relative to the directory `base` that
/// holds the file.
pub(crate) fn gitfile_target(content: &[u8], base: &Path) -> Option<PathBuf> {
    let rest = content.strip_prefix(b"gitdir: ")?;
    let line = rest.split(|b| *b == b'\n').next()?;
    let line = trim_end(line);
    if line.is_empty() {
        return None;
    }
    Some(base.join(OsStr::from_bytes(line)))
}

/// The common directory named by a `commondir` file of the git directory `gitdir`.
pub(crate) fn commondir_target(content: &[u8], gitdir: &Path) -> Option<PathBuf> {
    let line = trim_end(content.split(|b| *b == b'\n').next()?);
    if line.is_empty() {
        return None;
    }
    Some(gitdir.join(OsStr::from_bytes(line)))
}

/// The worktree `.git` file a linked worktree's `worktrees/NAME/gitdir` points to, relative to
/// that `worktrees/NAME` directory.
pub(crate) fn worktree_gitfile(content: &[u8], admin_dir: &Path) -> Option<PathBuf> {
    commondir_target(content, admin_dir)
}

fn trim_end(mut line: &[u8]) -> &[u8] {
    while let Some((last, rest)) = line.split_last() {
        if last.is_ascii_whitespace() {
            line = rest;
        } else {
            break;
        }
    }
    line
}

/// What the helper needs from an index file.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Index {
    /// Paths (relative to the worktree) of the gitlinks: submodules.
    pub(crate) gitlinks: Vec<PathBuf>,
    /// The file name of the shared index a split index refers to (`sharedindex.HEX`).
    pub(crate) shared: Option<String>,
}

const GITLINK: u32 = 0o160000;
const MODE_TYPE: u32 = 0o170000;
/// ctime, mtime, dev, ino, mode, uid, gid, size: ten 32-bit words.
const STAT_BYTES: usize = 40;
const NAME_MASK: u16 = 0x0fff;
/// The longest entry name taken, `PATH_MAX`: no longer path can be opened. Version 4 builds
/// each name on the previous one, a few bytes an entry; without a cap a crafted index of n
/// bytes would make names, and gitlinks, of n bytes each, n² in all.
const MAX_NAME: usize = 4096;
const EXTENDED: u16 = 0x4000;

/// Why an index file yields no gitlinks; the text is part of a `Partial` enforcement fact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum IndexError {
    #[error("it does not start with an index header")]
    NoHeader,
    #[error("index version {0} is not known")]
    Version(u32),
    /// The entry starting at this byte offset.
    #[error("entry at byte {0} is malformed")]
    Entry(usize),
    #[error("the index is shorter than its checksum")]
    NoChecksum,
    /// The extension starting at this byte offset.
    #[error("extension at byte {0} is malformed")]
    Extension(usize),
    #[error("the index's extensions do not end at its checksum")]
    Trailing,
}

/// The gitlinks of an index file (versions 2, 3 and 4; SHA-1 or SHA-256 object names).
///
/// The object-name length is not in the index itself; the one under which every entry's
/// recorded name length matches its name is taken, and an index that parses under neither is
/// an error.
pub(crate) fn parse_index(bytes: &[u8]) -> Result<Index, IndexError> {
    if bytes.len() < 12 || bytes.get(..4) != Some(b"DIRC".as_slice()) {
        return Err(IndexError::NoHeader);
    }
    let version = be32(bytes, 4).unwrap_or(0);
    if !(2..=4).contains(&version) {
        return Err(IndexError::Version(version));
    }
    let count = be32(bytes, 8).unwrap_or(0) as usize;
    let under = |hash: usize| -> Result<Index, IndexError> {
        let (gitlinks, end) = entries(bytes, version, count, hash)?;
        let shared = extensions(bytes, end, hash)?;
        Ok(Index { gitlinks, shared })
    };
    // SHA-1 first; when neither parses, the SHA-256 reading's error is the one reported.
    under(20).or_else(|_| under(32))
}

fn be32(bytes: &[u8], at: usize) -> Option<u32> {
    let word = bytes.get(at..at + 4)?;
    Some(u32::from_be_bytes(word.try_into().ok()?))
}

fn be16(bytes: &[u8], at: usize) -> Option<u16> {
    let word = bytes.get(at..at + 2)?;
    Some(u16::from_be_bytes(word.try_into().ok()?))
}

/// git's offset varint (version 4 path prefix lengths).
fn varint(bytes: &[u8], at: &mut usize) -> Option<usize> {
    let mut byte = *bytes.get(*at)?;
    *at += 1;
    let mut value = usize::from(byte & 0x7f);
    while byte & 0x80 != 0 {
        byte = *bytes.get(*at)?;
        *at += 1;
        value = value.checked_add(1)?.checked_mul(128)? + usize::from(byte & 0x7f);
    }
    Some(value)
}

fn entries(
    bytes: &[u8],
    version: u32,
    count: usize,
    hash: usize,
) -> Result<(Vec<PathBuf>, usize), IndexError> {
    let mut at = 12;
    let mut previous: Vec<u8> = Vec::new();
    let mut gitlinks = Vec::new();
    for _ in 0..count {
        let start = at;
        let bad = IndexError::Entry(start);
        let mode = be32(bytes, start + 24).ok_or(bad)?;
        let flags = be16(bytes, start + STAT_BYTES + hash).ok_or(bad)?;
        let mut name_at = start + STAT_BYTES + hash + 2;
        if flags & EXTENDED != 0 {
            if version < 3 {
                return Err(bad);
            }
            name_at += 2;
        }
        let (name, next) = if version == 4 {
            let mut cursor = name_at;
            let strip = varint(bytes, &mut cursor).ok_or(bad)?;
            let rest = bytes.get(cursor..).ok_or(bad)?;
            let nul = rest.iter().position(|b| *b == 0).ok_or(bad)?;
            let keep = previous.len().checked_sub(strip).ok_or(bad)?;
            let mut name = previous.get(..keep).ok_or(bad)?.to_vec();
            name.extend_from_slice(rest.get(..nul).ok_or(bad)?);
            (name, cursor + nul + 1)
        } else {
            let rest = bytes.get(name_at..).ok_or(bad)?;
            let nul = rest.iter().position(|b| *b == 0).ok_or(bad)?;
            // Entries are padded with 1 to 8 NULs to a multiple of 8 bytes.
            let size = (name_at - start + nul + 8) & !7;
            (rest.get(..nul).ok_or(bad)?.to_vec(), start + size)
        };
        let recorded = usize::from(flags & NAME_MASK);
        if name.is_empty()
            || name.len() > MAX_NAME
            || (recorded != usize::from(NAME_MASK) && recorded != name.len())
        {
            return Err(bad);
        }
        if next > bytes.len() {
            return Err(bad);
        }
        if mode & MODE_TYPE == GITLINK
            && let Some(path) = relative(&name)
        {
            gitlinks.push(path);
        }
        previous = name;
        at = next;
    }
    Ok((gitlinks, at))
}

/// Walks the extensions between the entries and the trailing checksum, which must end exactly
/// there; returns the shared index a split index's `link` extension names, if any.
fn extensions(bytes: &[u8], mut at: usize, hash: usize) -> Result<Option<String>, IndexError> {
    let end = bytes
        .len()
        .checked_sub(hash)
        .ok_or(IndexError::NoChecksum)?;
    let mut shared = None;
    while at < end {
        let malformed = IndexError::Extension(at);
        let signature = bytes.get(at..at + 4).ok_or(malformed)?;
        let size = be32(bytes, at + 4).ok_or(malformed)? as usize;
        let data_end = (at + 8).checked_add(size).ok_or(malformed)?;
        let data = bytes.get(at + 8..data_end).ok_or(malformed)?;
        if signature == b"link" {
            let name = data.get(..hash).ok_or(malformed)?;
            if name.iter().any(|b| *b != 0) {
                let hex: String = name.iter().map(|b| format!("{b:02x}")).collect();
                shared = Some(format!("sharedindex.{hex}"));
            }
        }
        at = data_end;
    }
    if at != end {
        return Err(IndexError::Trailing);
    }
    Ok(shared)
}

/// A path from an index as a relative path of plain components, or `None` if it is not one
/// (git itself refuses such entries).
fn relative(name: &[u8]) -> Option<PathBuf> {
    let path = PathBuf::from(OsStr::from_bytes(name));
    let plain = !name.is_empty()
        && path
            .components()
            .all(|c| matches!(c, Component::Normal(part) if part != ".git"));
    plain.then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An index entry as git writes it (version 2 or 3 layout), with a zero stat block.
    fn entry(mode: u32, name: &str, hash: usize) -> Vec<u8> {
        let mut e = vec![0x5au8; STAT_BYTES + hash];
        e[24..28].copy_from_slice(&mode.to_be_bytes());
        e.extend_from_slice(&u16::try_from(name.len()).expect("short name").to_be_bytes());
        e.extend_from_slice(name.as_bytes());
        let size = (STAT_BYTES + hash + 2 + name.len() + 8) & !7;
        e.resize(size, 0);
        e
    }

    fn index(version: u32, entries: &[Vec<u8>], hash: usize) -> Vec<u8> {
        let mut out = b"DIRC".to_vec();
        out.extend_from_slice(&version.to_be_bytes());
        out.extend_from_slice(
            &u32::try_from(entries.len())
                .expect("few entries")
                .to_be_bytes(),
        );
        for e in entries {
            out.extend_from_slice(e);
        }
        out.extend(std::iter::repeat_n(0xab, hash));
        out
    }

    #[test]
    fn gitlinks_are_found_in_sha1_and_sha256_indexes() {
        for hash in [20, 32] {
            let bytes = index(
                2,
                &[
                    entry(0o100644, "README", hash),
                    entry(0o160000, "vendor/lib", hash),
                    entry(0o100755, "x.sh", hash),
                ],
                hash,
            );
            let parsed = parse_index(&bytes).expect("parses");
            assert_eq!(parsed.gitlinks, vec![PathBuf::from("vendor/lib")], "{hash}");
            assert_eq!(parsed.shared, None);
        }
    }

    #[test]
    fn version_4_prefix_compressed_names_are_expanded() {
        let hash = 20;
        let mut entries = Vec::new();
        for (mode, strip, suffix) in [
            (0o100644u32, 0u8, "sub/a"),
            (0o160000, 1, "mod"),
            (0o160000, 3, "other"),
        ] {
            let mut e = vec![0x5au8; STAT_BYTES + hash];
            e[24..28].copy_from_slice(&mode.to_be_bytes());
            let full = match suffix {
                "sub/a" => "sub/a".len(),
                "mod" => "sub/mod".len(),
                _ => "sub/other".len(),
            };
            e.extend_from_slice(&u16::try_from(full).expect("short name").to_be_bytes());
            e.push(strip);
            e.extend_from_slice(suffix.as_bytes());
            e.push(0);
            entries.push(e);
        }
        let parsed = parse_index(&index(4, &entries, hash)).expect("parses");
        assert_eq!(
            parsed.gitlinks,
            vec![PathBuf::from("sub/mod"), PathBuf::from("sub/other")]
        );
    }

    #[test]
    fn a_split_index_names_its_shared_index() {
        let hash = 20;
        let mut bytes = index(2, &[entry(0o160000, "m", hash)], 0);
        bytes.extend_from_slice(b"link");
        bytes.extend_from_slice(&(u32::try_from(hash).expect("hash size") + 4).to_be_bytes());
        bytes.extend(std::iter::repeat_n(0x0f, hash));
        bytes.extend_from_slice(&[0, 0, 0, 0]);
        bytes.extend(std::iter::repeat_n(0xab, hash));
        let parsed = parse_index(&bytes).expect("parses");
        assert_eq!(parsed.gitlinks, vec![PathBuf::from("m")]);
        assert_eq!(
            parsed.shared.as_deref(),
            Some("sharedindex.0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f")
        );
    }

    #[test]
    fn a_real_index_written_by_git_is_read() {
        let scratch = crate::test_support::Scratch::new("git-index");
        let dir = scratch.0.clone();
        let git = |args: &[&str]| {
            std::process::Command::new("git")
                .args(args)
                .current_dir(&dir)
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .output()
        };
        std::fs::create_dir_all(&dir).expect("mkdir");
        if git(&["init", "-q"]).is_err() {
            crate::skip::skip(
                "a_real_index_written_by_git_is_read",
                crate::skip::Need::Git,
                "git is not installed",
            );
            return;
        }
        std::fs::write(dir.join("f"), "x").expect("write");
        git(&["update-index", "--add", "f"]).expect("add");
        git(&[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{},deps/m", "1".repeat(40)),
        ])
        .expect("gitlink");
        for version in ["2", "3", "4"] {
            git(&["update-index", "--index-version", version]).expect("version");
            let bytes = std::fs::read(dir.join(".git/index")).expect("index");
            let parsed = parse_index(&bytes).expect("parses");
            assert_eq!(parsed.gitlinks, vec![PathBuf::from("deps/m")], "v{version}");
        }
    }

    #[test]
    fn garbage_and_hostile_paths_are_not_taken() {
        assert_eq!(parse_index(b""), Err(IndexError::NoHeader));
        let unknown = parse_index(b"DIRC\0\0\0\x09\0\0\0\0");
        assert_eq!(unknown, Err(IndexError::Version(9)));
        assert_eq!(
            unknown.map_err(|e| e.to_string()),
            Err("index version 9 is not known".to_owned())
        );
        let mut truncated = index(2, &[entry(0o160000, "m", 20)], 20);
        truncated.truncate(30);
        let malformed = parse_index(&truncated).map_err(|e| e.to_string());
        assert_eq!(malformed, Err("entry at byte 12 is malformed".to_owned()));
        let hostile = index(
            2,
            &[
                entry(0o160000, "../out", 20),
                entry(0o160000, "/abs", 20),
                entry(0o160000, "a/.git", 20),
            ],
            20,
        );
        assert_eq!(parse_index(&hostile).expect("parses").gitlinks.len(), 0);
    }

    #[test]
    fn gitfiles_and_commondirs_are_relative_to_where_they_are() {
        assert_eq!(
            gitfile_target(b"gitdir: ../.git/modules/m\n", Path::new("/w/m")),
            Some(PathBuf::from("/w/m/../.git/modules/m"))
        );
        assert_eq!(
            gitfile_target(b"gitdir: /abs/wt  \r\n", Path::new("/w")),
            Some(PathBuf::from("/abs/wt"))
        );
        assert_eq!(gitfile_target(b"nonsense", Path::new("/w")), None);
        assert_eq!(gitfile_target(b"gitdir: \n", Path::new("/w")), None);
        assert_eq!(
            commondir_target(b"../..\n", Path::new("/m/.git/worktrees/x")),
            Some(PathBuf::from("/m/.git/worktrees/x/../.."))
        );
    }
}
