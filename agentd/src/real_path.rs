//! Where a path really leads, asked of the file system without opening anything: the nearest
//! existing ancestor canonicalized (`realpath(3)`: `lstat` and `readlink` only), the part that
//! does not exist yet applied to it. Used wherever agentd must judge a path by where it lands,
//! not by how it is spelt: the file tools' fence and denial classification.

use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

/// Why where a path leads cannot be told.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RealPathError {
    /// The path (or an ancestor of it) is a symbolic link to nothing.
    #[error("{} is a symbolic link to a path that does not exist", .0.display())]
    DanglingLink(PathBuf),
    /// The file system would not say.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// One step of the part of a path that does not exist yet.
enum Step {
    Up,
    Down(std::ffi::OsString),
}

/// `path` (absolute) with every symbolic link resolved: the nearest existing ancestor
/// canonicalized, the steps below it applied to that.
pub(crate) fn real_target(path: &Path) -> Result<PathBuf, RealPathError> {
    let mut existing = path.to_path_buf();
    let mut below = Vec::new();
    loop {
        match fs::symlink_metadata(&existing) {
            Ok(meta) => {
                let mut real = fs::canonicalize(&existing).map_err(|source| {
                    if meta.file_type().is_symlink() && source.kind() == io::ErrorKind::NotFound {
                        RealPathError::DanglingLink(existing.clone())
                    } else {
                        RealPathError::Io {
                            path: existing.clone(),
                            source,
                        }
                    }
                })?;
                for step in below.into_iter().rev() {
                    match step {
                        Step::Up => {
                            real.pop();
                        }
                        Step::Down(name) => real.push(name),
                    }
                }
                return Ok(real);
            }
            Err(source) if source.kind() == io::ErrorKind::NotFound => {
                let not_found = || RealPathError::Io {
                    path: path.to_owned(),
                    source,
                };
                match existing.components().next_back() {
                    Some(Component::ParentDir) => below.push(Step::Up),
                    Some(Component::Normal(name)) => below.push(Step::Down(name.to_owned())),
                    Some(Component::CurDir) => {}
                    _ => return Err(not_found()),
                }
                if !existing.pop() {
                    return Err(not_found());
                }
            }
            Err(source) => {
                return Err(RealPathError::Io {
                    path: existing,
                    source,
                });
            }
        }
    }
}
