//! File contents, each stored once under its SHA-256 (`objects/ab/cdef…`), written whole under
//! a temporary name and renamed into place, so a crash leaves at most a stray temporary file
//! (swept by [`Objects::sweep`]) and never a wrong object.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use ring::digest::{Context, SHA256};

/// The bytes read at a time when hashing or copying a file.
const CHUNK: usize = 256 * 1024;
/// How old a temporary object must be before a sweep takes it for a crash's leftover.
const STALE_TEMP: Duration = Duration::from_secs(60 * 60);
/// The mode of everything the store writes: its user's alone.
pub(super) const PRIVATE_FILE: u32 = 0o600;
/// The directory of temporary objects.
const TEMP_DIR: &str = "tmp";

/// The object directory of a store.
#[derive(Debug, Clone)]
pub(super) struct Objects {
    dir: PathBuf,
}

/// A temporary name unique to this process.
fn temp_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `name` can be an object's hash (64 lowercase hex digits).
pub(super) fn is_hash(name: &[u8]) -> bool {
    name.len() == 64 && name.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

impl Objects {
    pub fn at(dir: PathBuf) -> Objects {
        Objects { dir }
    }

    /// Where the object `hash` is.
    pub fn path(&self, hash: &str) -> PathBuf {
        let (fan, rest) = hash.split_at(2.min(hash.len()));
        self.dir.join(fan).join(rest)
    }

    pub fn open(&self, hash: &str) -> io::Result<File> {
        File::open(self.path(hash))
    }

    pub fn exists(&self, hash: &str) -> bool {
        self.path(hash).exists()
    }

    /// Reads `file` to its end, storing it as an object unless one with its hash exists;
    /// returns the hash and the bytes read.
    pub fn put(&self, file: &mut File) -> io::Result<(String, u64)> {
        let temp_dir = self.dir.join(TEMP_DIR);
        std::fs::create_dir_all(&temp_dir)?;
        let temp = temp_dir.join(temp_name());
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(PRIVATE_FILE)
            .open(&temp)?;
        let copied = copy_hashing(file, Some(&mut out));
        drop(out);
        let (hash, size) = match copied {
            Ok(done) => done,
            Err(e) => {
                let _ = std::fs::remove_file(&temp);
                return Err(e);
            }
        };
        let target = self.path(&hash);
        if target.exists() {
            std::fs::remove_file(&temp)?;
            return Ok((hash, size));
        }
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::rename(&temp, &target)?;
        Ok((hash, size))
    }

    /// Removes temporary objects a crashed record left (those older than an hour: a record
    /// running now may be writing a younger one).
    pub fn sweep(&self, now: SystemTime) {
        let Ok(listing) = std::fs::read_dir(self.dir.join(TEMP_DIR)) else {
            return;
        };
        for entry in listing.flatten() {
            let stale = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|at| now.duration_since(at).is_ok_and(|age| age > STALE_TEMP));
            if stale {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }

    /// Every object stored: its hash, path and size.
    pub fn all(&self) -> io::Result<Vec<(String, PathBuf, u64)>> {
        let mut out = Vec::new();
        let listing = match std::fs::read_dir(&self.dir) {
            Ok(listing) => listing,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(e),
        };
        for fan in listing {
            let fan = fan?;
            let name = fan.file_name();
            if name.len() != 2 || !fan.file_type()?.is_dir() {
                continue;
            }
            for object in std::fs::read_dir(fan.path())? {
                let object = object?;
                let hash = format!(
                    "{}{}",
                    name.to_string_lossy(),
                    object.file_name().to_string_lossy()
                );
                if is_hash(hash.as_bytes()) {
                    out.push((hash, object.path(), object.metadata()?.len()));
                }
            }
        }
        Ok(out)
    }
}

/// Hashes `file` to its end, copying it to `out` when given.
pub(super) fn copy_hashing(
    file: &mut File,
    mut out: Option<&mut File>,
) -> io::Result<(String, u64)> {
    let mut context = Context::new(&SHA256);
    let mut buf = vec![0u8; CHUNK];
    let mut size = 0u64;
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        // A read never reports more bytes than it was given room for.
        let (chunk, _) = buf.split_at_checked(n).ok_or(io::ErrorKind::InvalidData)?;
        context.update(chunk);
        if let Some(out) = out.as_deref_mut() {
            out.write_all(chunk)?;
        }
        size += n as u64;
    }
    Ok((hex(context.finish().as_ref()), size))
}
