//! Where two states of the roots differ (two checkpoints, or a checkpoint and now), path by
//! path, with what each holds: what `changes`, a plan and the scan after a restore read.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use super::manifest::{Entry, Manifest};
use super::{ChangeKind, LeftOutWhy};

/// One path where two states differ, with what each holds.
pub(super) struct Difference {
    /// Absolute.
    pub path: PathBuf,
    /// Which root, and where below it.
    pub root: usize,
    pub rel: PathBuf,
    pub now: Now,
    pub then: Option<Entry>,
    pub kind: ChangeKind,
}

/// What a path holds now.
pub(super) enum Now {
    Absent,
    Is(Entry),
    /// Not looked at now (left out: ignored, unreadable, or a FIFO, socket or device).
    Unknown(LeftOutWhy),
}

/// Whether `path` or a directory above it is one of `set`.
fn under(set: &HashSet<PathBuf>, path: &Path) -> bool {
    !set.is_empty() && path.ancestors().any(|a| set.contains(a))
}

/// Where `now` differs from `then`, leaving out what `then` left out (a restore never touches
/// it). Sorted by path.
pub(super) fn differences(now: &Manifest, then: &Manifest) -> Vec<Difference> {
    let then_out: HashSet<PathBuf> = then.left_out_paths().into_iter().collect();
    let now_out: HashMap<PathBuf, LeftOutWhy> = now
        .left_out
        .iter()
        .map(|o| (now.path(o.root, &o.rel), o.why))
        .collect();
    let now_out_set: HashSet<PathBuf> = now_out.keys().cloned().collect();
    let now_by = now.by_path();
    let then_by = then.by_path();
    let mut out = Vec::new();
    for e in &then.entries {
        let path = then.path(e.root, &e.rel);
        let kind = match now_by.get(&path) {
            Some(n) if n.kind != e.kind => ChangeKind::TypeChanged,
            Some(n) if !n.same_as(e) => ChangeKind::Modified,
            Some(_) => continue,
            None => match now_out.get(&path) {
                Some(LeftOutWhy::NotRegular) => ChangeKind::TypeChanged,
                Some(_) => ChangeKind::Modified,
                None if under(&now_out_set, &path) => ChangeKind::Modified,
                None => ChangeKind::Added,
            },
        };
        let now_state = match now_by.get(&path) {
            Some(n) => Now::Is((*n).clone()),
            None => match now_out.get(&path) {
                Some(why) => Now::Unknown(*why),
                None if under(&now_out_set, &path) => Now::Unknown(LeftOutWhy::Ignored),
                None => Now::Absent,
            },
        };
        out.push(Difference {
            path,
            root: e.root,
            rel: e.rel.clone(),
            now: now_state,
            then: Some(e.clone()),
            kind,
        });
    }
    for n in &now.entries {
        let path = now.path(n.root, &n.rel);
        if then_by.contains_key(&path) || under(&then_out, &path) {
            continue;
        }
        out.push(Difference {
            path,
            root: n.root,
            rel: n.rel.clone(),
            now: Now::Is(n.clone()),
            then: None,
            kind: ChangeKind::Deleted,
        });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}
