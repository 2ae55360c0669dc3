//! Who holds a FIFO in a test's workspace, seen from the host: whether some process reads it,
//! and which processes have it open (from `/proc`). A command of a session that blocks reading
//! a FIFO is how the tests tell, without timing, whether it still runs.

use std::path::Path;

/// The FIFO at `path` opened for writing without blocking; `None` when no process has it open
/// for reading (ENXIO).
pub fn open_for_writing(path: &Path) -> std::io::Result<Option<std::fs::File>> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(path)
    {
        Ok(file) => Ok(Some(file)),
        Err(e) if e.raw_os_error() == Some(nix::libc::ENXIO) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Every process with a descriptor on the file at `path`, found in `/proc`.
pub fn holders_of(path: &Path) -> Vec<u32> {
    use std::os::unix::fs::MetadataExt;
    let Ok(target) = std::fs::metadata(path) else {
        return Vec::new();
    };
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in procs.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        let holds = fds.flatten().any(|fd| {
            std::fs::metadata(fd.path())
                .is_ok_and(|m| m.dev() == target.dev() && m.ino() == target.ino())
        });
        if holds {
            found.push(pid);
        }
    }
    found
}
