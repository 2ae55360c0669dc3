//! Where a path really leads, asked of the file system without opening anything: the nearest
//! existing ancestor canonicalized (`realpath(3)`: `lstat` and `readlink` only), the part that
//! does not exist yet applied to it. Used wherever agentd must judge a path by where it lands,
//! not by how it is spelt: the file tools' fence and denial classification.

use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

/// One step of the part of a path that does not exist yet.
enum Step {
    Up,
    Down(std::ffi::OsString),
}

/// `path` (absolute) with every symbolic link resolved: the nearest existing ancestor
/// canonicalized, the steps below it applied to that.
pub(crate) fn real_target(path: &Path) -> Result<PathBuf, String> {
    let mut existing = path.to_path_buf();
    let mut below = Vec::new();
    loop {
        match fs::symlink_metadata(&existing) {
            Ok(meta) => {
                let mut real = fs::canonicalize(&existing).map_err(|e| {
                    if meta.file_type().is_symlink() && e.kind() == io::ErrorKind::NotFound {
                        format!(
                            "{} is a symbolic link to a path that does not exist",
                            existing.display()
                        )
                    } else {
                        format!("{}: {e}", existing.display())
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
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                match existing.components().next_back() {
                    Some(Component::ParentDir) => below.push(Step::Up),
                    Some(Component::Normal(name)) => below.push(Step::Down(name.to_owned())),
                    Some(Component::CurDir) => {}
                    _ => return Err(format!("{}: {e}", path.display())),
                }
                if !existing.pop() {
                    return Err(format!("{}: {e}", path.display()));
                }
            }
            Err(e) => return Err(format!("{}: {e}", existing.display())),
        }
    }
}
