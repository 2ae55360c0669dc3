//! A restore's plan: from where the roots differ from a checkpoint now, the steps that put
//! them back ([`Ops`], carried out by [`super::restore`]) and the diff a person reads first.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

use super::compare::{Difference, Now};
use super::diff_text::DIFF_TEXT_CAP;
use super::diff_text::{Side, file_diff};
use super::manifest::{Kind, Manifest};
use super::objects::Objects;
use super::walk::open_below;
use super::{Change, CheckpointError, Scope};

/// What restoring to a checkpoint would change now, for a person to see before it happens;
/// [`super::restore`] carries it out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestorePlan {
    pub label: String,
    /// From the state now to the checkpoint's: `added` is what the restore creates, `deleted`
    /// what it removes.
    pub changes: Vec<Change>,
    /// A unified diff of the text files (binary and large files named as such).
    pub diff: String,
    pub(super) ops: Ops,
}

/// The operations a plan carries out, all by absolute path, all confined.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct Ops {
    pub(super) remove: Vec<PathBuf>,
    pub(super) mkdir: Vec<PathBuf>,
    /// Target, link.
    pub(super) links: Vec<(OsString, PathBuf)>,
    /// Object, file.
    pub(super) writes: Vec<(String, PathBuf)>,
    /// What the walk after the restore skips, as the one before it did.
    pub(super) protected: Vec<PathBuf>,
}

/// The plan of restoring to `then` (checkpoint `label`) from the state `found` differs by.
pub(super) fn plan(
    objects: &Objects,
    label: &str,
    then: &Manifest,
    found: Vec<Difference>,
    scope: &Scope,
) -> Result<RestorePlan, CheckpointError> {
    let mut ops = Ops {
        protected: scope.protected.clone(),
        ..Ops::default()
    };
    let mut diff = String::new();
    for d in &found {
        let now_kind = match &d.now {
            Now::Is(e) => Some(e.kind),
            _ => None,
        };
        let kind_changes = match (&d.now, &d.then) {
            (Now::Is(n), Some(t)) => n.kind != t.kind || (t.kind == Kind::Link && !n.same_as(t)),
            (Now::Is(_), None) => true,
            (Now::Unknown(super::LeftOutWhy::NotRegular), Some(_)) => true,
            _ => false,
        };
        if kind_changes && !ops.remove.iter().any(|r| d.path.starts_with(r)) {
            ops.remove.push(d.path.clone());
        }
        let removed = kind_changes;
        if let Some(t) = &d.then {
            let same_kind = now_kind == Some(t.kind) && !removed;
            match t.kind {
                Kind::Dir => {
                    if !same_kind {
                        ops.mkdir.push(d.path.clone());
                    }
                }
                Kind::Link => {
                    if !same_kind {
                        let target = OsString::from_vec(t.data.clone());
                        ops.links.push((target, d.path.clone()));
                    }
                }
                Kind::File => {
                    let hash = String::from_utf8_lossy(&t.data).into_owned();
                    let content_same =
                        matches!(&d.now, Now::Is(n) if same_kind && n.data == t.data);
                    if !content_same {
                        if !objects.exists(&hash) {
                            return Err(CheckpointError::MissingObject {
                                hash,
                                path: d.path.clone(),
                            });
                        }
                        ops.writes.push((hash, d.path.clone()));
                    }
                }
            }
        }
        let same_content = matches!((&d.now, &d.then),
            (Now::Is(n), Some(t)) if n.kind == t.kind && n.data == t.data);
        let shows_file = !same_content
            && (d.then.as_ref().is_some_and(|t| t.kind == Kind::File)
                || now_kind == Some(Kind::File));
        if shows_file {
            diff.push_str(&file_diff(
                &d.path.to_string_lossy(),
                &now_side(then, d),
                &then_side(objects, d),
            ));
        } else {
            diff.push_str(&format!("{}: {}\n", d.path.display(), describe(d)));
        }
    }
    Ok(RestorePlan {
        label: label.to_owned(),
        changes: found
            .into_iter()
            .map(|d| Change {
                path: d.path,
                kind: d.kind,
            })
            .collect(),
        diff,
        ops,
    })
}

/// A difference that is no file's content, in words.
fn describe(d: &Difference) -> String {
    let what = |kind: Kind, data: &[u8]| match kind {
        Kind::Dir => "a directory".to_owned(),
        Kind::Link => format!("a link to {}", String::from_utf8_lossy(data)),
        Kind::File => "a file".to_owned(),
    };
    let now = match &d.now {
        Now::Absent => "nothing".to_owned(),
        Now::Is(e) => what(e.kind, &e.data),
        Now::Unknown(why) => format!("left out ({})", why.as_str()),
    };
    let then = match &d.then {
        None => "nothing".to_owned(),
        Some(e) => what(e.kind, &e.data),
    };
    if let (Now::Is(n), Some(t)) = (&d.now, &d.then)
        && now == then
    {
        format!("mode now {:o}; after the restore {:o}", n.mode, t.mode)
    } else {
        format!("now {now}; after the restore {then}")
    }
}

/// What the file is now, for the diff: read without following a link.
fn now_side(then: &Manifest, d: &Difference) -> Side {
    match &d.now {
        Now::Absent => Side::Absent,
        Now::Is(e) if e.kind == Kind::File => match then.roots.get(d.root) {
            Some(root) => match open_below(root, &d.rel) {
                Some(file) => read_capped(file),
                None => Side::Other("gone".into()),
            },
            None => Side::Other("unknown".into()),
        },
        Now::Is(e) if e.kind == Kind::Link => {
            Side::Other(format!("a link to {}", String::from_utf8_lossy(&e.data)))
        }
        Now::Is(_) => Side::Other("a directory".into()),
        Now::Unknown(why) => Side::Other(format!("left out ({})", why.as_str())),
    }
}

/// What the file is in the checkpoint, for the diff.
fn then_side(objects: &Objects, d: &Difference) -> Side {
    match &d.then {
        None => Side::Absent,
        Some(e) if e.kind == Kind::File => match objects.open(&String::from_utf8_lossy(&e.data)) {
            Ok(file) => read_capped(file),
            Err(_) => Side::Other("missing from the store".into()),
        },
        Some(e) if e.kind == Kind::Link => {
            Side::Other(format!("a link to {}", String::from_utf8_lossy(&e.data)))
        }
        Some(_) => Side::Other("a directory".into()),
    }
}

/// A file's bytes, up to one more than a diff shows.
fn read_capped(file: std::fs::File) -> Side {
    use std::io::Read;
    let mut bytes = Vec::new();
    let cap = u64::try_from(DIFF_TEXT_CAP).unwrap_or(u64::MAX) + 1;
    match file.take(cap).read_to_end(&mut bytes) {
        Ok(_) => Side::Bytes(bytes),
        Err(e) => Side::Other(format!("unreadable ({e})")),
    }
}
