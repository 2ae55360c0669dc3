//! One checkpoint on disk: every path recorded, with what restoring it needs (kind, mode, the
//! content's object or the link's target) and its stat as the shadow index the next record
//! compares with, so an unchanged file costs a `stat`.
//!
//! The format is agentd's own and small: a sequence of fields, each ended by a NUL byte (no
//! path holds one), grouped in records by a leading tag: `V` version; `T` when the walk began
//! (nanoseconds since the epoch); `R` a root; `E` an entry; `O` a path left out; `C` whether
//! the cap left files out. Paths and link targets are kept as bytes, whatever they are.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::LeftOutWhy;
use super::damage::Damage;

/// The version this code writes and reads.
const VERSION: &[u8] = b"1";

/// What a recorded path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    File,
    Link,
    Dir,
}

impl Kind {
    fn word(self) -> &'static [u8] {
        match self {
            Kind::File => b"f",
            Kind::Link => b"l",
            Kind::Dir => b"d",
        }
    }

    fn parse(word: &[u8]) -> Option<Kind> {
        match word {
            b"f" => Some(Kind::File),
            b"l" => Some(Kind::Link),
            b"d" => Some(Kind::Dir),
            _ => None,
        }
    }
}

/// A file's stat, as the shadow index compares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Stamp {
    pub mtime: (i64, i64),
    pub ctime: (i64, i64),
    pub ino: u64,
    pub dev: u64,
}

impl Stamp {
    pub fn of(st: &nix::sys::stat::FileStat) -> Stamp {
        Stamp {
            mtime: (st.st_mtime, st.st_mtime_nsec),
            ctime: (st.st_ctime, st.st_ctime_nsec),
            ino: st.st_ino,
            #[allow(clippy::useless_conversion)]
            dev: u64::from(st.st_dev),
        }
    }

    /// The later of mtime and ctime, in nanoseconds since the epoch.
    pub fn latest_ns(&self) -> i128 {
        let ns = |(s, n): (i64, i64)| i128::from(s) * 1_000_000_000 + i128::from(n);
        ns(self.mtime).max(ns(self.ctime))
    }
}

/// One recorded path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    /// Index into [`Manifest::roots`].
    pub root: usize,
    /// Relative to its root; never empty.
    pub rel: PathBuf,
    pub kind: Kind,
    /// Permission bits (`0o7777`).
    pub mode: u32,
    pub size: u64,
    pub stamp: Stamp,
    /// A file's content hash (hex), a link's target; empty for a directory.
    pub data: Vec<u8>,
}

impl Entry {
    /// Whether `other` is the same as far as a restore is concerned: kind, content or target,
    /// and (but for links, whose mode means nothing) mode.
    pub fn same_as(&self, other: &Entry) -> bool {
        self.kind == other.kind
            && self.data == other.data
            && (self.kind == Kind::Link || self.mode == other.mode)
    }
}

/// A path left out of a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Omitted {
    pub root: usize,
    pub rel: PathBuf,
    pub why: LeftOutWhy,
}

/// A whole checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct Manifest {
    /// When the walk began, in nanoseconds since the epoch: a file changed at or after it may
    /// have changed again within the same timestamp, so its stat is not trusted next time.
    pub started_ns: i128,
    pub roots: Vec<PathBuf>,
    /// Sorted by root, then path.
    pub entries: Vec<Entry>,
    pub left_out: Vec<Omitted>,
    pub over_cap: bool,
}

impl Manifest {
    /// The absolute path of an entry of root `root` at `rel`.
    pub fn path(&self, root: usize, rel: &Path) -> PathBuf {
        match self.roots.get(root) {
            Some(base) => base.join(rel),
            None => rel.to_owned(),
        }
    }

    /// Its entries by absolute path.
    pub fn by_path(&self) -> HashMap<PathBuf, &Entry> {
        self.entries
            .iter()
            .map(|e| (self.path(e.root, &e.rel), e))
            .collect()
    }

    /// The absolute paths it left out.
    pub fn left_out_paths(&self) -> Vec<PathBuf> {
        self.left_out
            .iter()
            .map(|o| self.path(o.root, &o.rel))
            .collect()
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.entries.len() * 96);
        let field = |out: &mut Vec<u8>, bytes: &[u8]| {
            out.extend_from_slice(bytes);
            out.push(0);
        };
        field(&mut out, b"V");
        field(&mut out, VERSION);
        field(&mut out, b"T");
        field(&mut out, self.started_ns.to_string().as_bytes());
        for root in &self.roots {
            field(&mut out, b"R");
            field(&mut out, root.as_os_str().as_bytes());
        }
        for e in &self.entries {
            field(&mut out, b"E");
            field(&mut out, e.root.to_string().as_bytes());
            field(&mut out, e.rel.as_os_str().as_bytes());
            field(&mut out, e.kind.word());
            field(&mut out, format!("{:o}", e.mode).as_bytes());
            field(&mut out, e.size.to_string().as_bytes());
            let s = &e.stamp;
            let stamp = format!(
                "{} {} {} {} {} {}",
                s.mtime.0, s.mtime.1, s.ctime.0, s.ctime.1, s.ino, s.dev
            );
            field(&mut out, stamp.as_bytes());
            field(&mut out, &e.data);
        }
        for o in &self.left_out {
            field(&mut out, b"O");
            field(&mut out, o.root.to_string().as_bytes());
            field(&mut out, o.rel.as_os_str().as_bytes());
            field(&mut out, o.why.as_str().as_bytes());
        }
        field(&mut out, b"C");
        field(&mut out, if self.over_cap { b"1" } else { b"0" });
        out
    }

    /// Reads what [`Manifest::encode`] wrote; `None` names what is wrong.
    pub fn decode(bytes: &[u8]) -> Result<Manifest, Damage> {
        let body = bytes.strip_suffix(&[0]).ok_or(Damage::Torn)?;
        let mut fields = body.split(|b| *b == 0);
        let mut next = |what: &'static str| fields.next().ok_or(Damage::EndsBefore(what));
        let mut manifest = Manifest::default();
        let number = |bytes: &[u8], what: &'static str| -> Result<i128, Damage> {
            std::str::from_utf8(bytes)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or(Damage::NotANumber(what))
        };
        if next("version tag")? != b"V" || next("version")? != VERSION {
            return Err(Damage::Version);
        }
        while let Ok(tag) = next("tag") {
            match tag {
                b"T" => manifest.started_ns = number(next("time")?, "time")?,
                b"R" => manifest
                    .roots
                    .push(PathBuf::from(OsStr::from_bytes(next("root")?))),
                b"E" => {
                    let root = usize::try_from(number(next("root")?, "root")?)
                        .map_err(|_| Damage::Negative("root index"))?;
                    let rel = PathBuf::from(OsStr::from_bytes(next("path")?));
                    let kind = Kind::parse(next("kind")?).ok_or(Damage::Unknown("kind"))?;
                    let mode = std::str::from_utf8(next("mode")?)
                        .ok()
                        .and_then(|m| u32::from_str_radix(m, 8).ok())
                        .ok_or(Damage::ModeNotOctal)?;
                    let size = u64::try_from(number(next("size")?, "size")?)
                        .map_err(|_| Damage::Negative("size"))?;
                    let stamp = parse_stamp(next("stamp")?).ok_or(Damage::Stamp)?;
                    let data = next("data")?.to_vec();
                    if root >= manifest.roots.len() || rel.as_os_str().is_empty() {
                        return Err(Damage::NoRootOrPath);
                    }
                    manifest.entries.push(Entry {
                        root,
                        rel,
                        kind,
                        mode,
                        size,
                        stamp,
                        data,
                    });
                }
                b"O" => {
                    let root = usize::try_from(number(next("root")?, "root")?)
                        .map_err(|_| Damage::Negative("root index"))?;
                    let rel = PathBuf::from(OsStr::from_bytes(next("path")?));
                    let why = std::str::from_utf8(next("reason")?)
                        .ok()
                        .and_then(LeftOutWhy::parse)
                        .ok_or(Damage::Unknown("reason"))?;
                    manifest.left_out.push(Omitted { root, rel, why });
                }
                b"C" => manifest.over_cap = next("cap")? == b"1",
                other => {
                    return Err(Damage::Record(String::from_utf8_lossy(other).into_owned()));
                }
            }
        }
        Ok(manifest)
    }
}

fn parse_stamp(bytes: &[u8]) -> Option<Stamp> {
    let text = std::str::from_utf8(bytes).ok()?;
    let n: Vec<&str> = text.split(' ').collect();
    let [ms, mn, cs, cn, ino, dev] = n.as_slice() else {
        return None;
    };
    Some(Stamp {
        mtime: (ms.parse().ok()?, mn.parse().ok()?),
        ctime: (cs.parse().ok()?, cn.parse().ok()?),
        ino: ino.parse().ok()?,
        dev: dev.parse().ok()?,
    })
}
