//! The file tools' floor: the least work a confined write needs. A process of its own (a
//! `clone(CLONE_VM | CLONE_VFORK)` of the server, which cannot confine itself and go on
//! serving) enters a Landlock ruleset that lets it read everywhere and write only beneath the
//! directory, under `no_new_privs`, then creates the file there, writes
//! [`FILE_BYTES`](crate::measure::FILE_BYTES) and ends. What it leaves out of the helper's
//! writer: the program executed for the write, the seccomp filter, the checks of the path
//! against the protected and denied paths, and the report of what was written.

use std::ffi::{CString, c_int, c_void};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::libc;

use super::spawn::{
    READ_RIGHTS, add_rule, clone_vfork, handled_rights, landlock_abi, new_ruleset, wait,
};

/// What the clone's child needs, built before it.
struct ChildArgs<'a> {
    ruleset: c_int,
    file: CString,
    bytes: &'a [u8],
}

/// Writes the floor's file beneath `dir` from a process under a ruleset that allows writes
/// only there; 0 when every byte was written.
pub fn write(dir: &Path) -> Option<u8> {
    write_under(dir, &dir.join("floor.txt"))
}

/// Writes `file` from a process under a ruleset that allows reads everywhere and writes only
/// beneath `dir`; 0 when every byte was written.
fn write_under(dir: &Path, file: &Path) -> Option<u8> {
    let abi = landlock_abi()?;
    let ruleset = new_ruleset(abi)?;
    let answer = rules_and_write(ruleset, abi, dir, file);
    // SAFETY: the ruleset made above, not used after this.
    unsafe { libc::close(ruleset) };
    answer
}

/// Adds the two rules (read everywhere, everything beneath `dir`) and runs the writer.
fn rules_and_write(ruleset: c_int, abi: i64, dir: &Path, file: &Path) -> Option<u8> {
    let dir_name = CString::new(dir.as_os_str().as_bytes()).ok()?;
    add_rule(ruleset, c"/", READ_RIGHTS)?;
    add_rule(ruleset, &dir_name, handled_rights(abi))?;
    let bytes = vec![b'x'; crate::measure::FILE_BYTES];
    let args = ChildArgs {
        ruleset,
        file: CString::new(file.as_os_str().as_bytes()).ok()?,
        bytes: &bytes,
    };
    // SAFETY: `child` reads only `args`, which outlives the clone, and exits.
    unsafe { clone_vfork(child, (&raw const args).cast_mut().cast(), 0) }.and_then(wait)
}

/// The child: `no_new_privs`, the ruleset, the file created and written; `_exit(0)` only if
/// every byte was written.
extern "C" fn child(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `ChildArgs` of `rules_and_write`, alive while its parent waits.
    let args = unsafe { &*arg.cast::<ChildArgs<'_>>() };
    // SAFETY: integer arguments, a descriptor, a NUL-terminated path and a live buffer; `_exit`
    // ends the child without running anything of the parent's.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            || libc::syscall(libc::SYS_landlock_restrict_self, args.ruleset, 0u32) != 0
        {
            libc::_exit(127);
        }
        let fd = libc::open(
            args.file.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o644,
        );
        if fd < 0 {
            libc::_exit(1);
        }
        let written = libc::write(fd, args.bytes.as_ptr().cast(), args.bytes.len());
        let closed = libc::close(fd);
        let whole = usize::try_from(written).ok() == Some(args.bytes.len());
        libc::_exit(if whole && closed == 0 { 0 } else { 1 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::floor::spawn::Scratch;

    /// The floor writes its file where its ruleset allows, and the same ruleset keeps it from
    /// writing anywhere else (a directory it was not given, which the server itself can write).
    #[test]
    fn the_write_floor_writes_only_beneath_its_directory() {
        if landlock_abi().is_none() {
            println!("SKIP: this kernel has no Landlock");
            return;
        }
        let allowed = Scratch::new("write-allowed").expect("scratch");
        assert_eq!(write(&allowed.0), Some(0));
        let written = std::fs::read(allowed.0.join("floor.txt")).expect("the file");
        assert_eq!(written.len(), crate::measure::FILE_BYTES);

        let other = Scratch::new("write-other").expect("scratch");
        let outside = other.0.join("floor.txt");
        assert_eq!(
            write_under(&allowed.0, &outside),
            Some(1),
            "the write outside its directory fails"
        );
        assert!(!outside.exists());
        // Control: the server writes there itself.
        std::fs::write(&outside, b"x").expect("control write");
    }
}
