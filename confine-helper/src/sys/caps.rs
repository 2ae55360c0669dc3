//! Capabilities: whether the helper holds any (it runs as root), and how the Landlock
//! backend's command drops every one of them before `execve`, for good.

use std::ffi::c_ulong;

use nix::errno::Errno;
use nix::libc;

use super::call::{self, CapData, CapHeader, LINUX_CAPABILITY_VERSION_3};

const SECBIT_NOROOT: c_ulong = 1 << 0;
const SECBIT_NOROOT_LOCKED: c_ulong = 1 << 1;
const SECBIT_NO_SETUID_FIXUP: c_ulong = 1 << 2;
const SECBIT_NO_SETUID_FIXUP_LOCKED: c_ulong = 1 << 3;
const SECBIT_KEEP_CAPS_LOCKED: c_ulong = 1 << 5;
/// Every capability number the bounding set can hold, and more: unknown ones fail with EINVAL.
const CAPABILITY_NUMBERS: std::ops::Range<c_ulong> = 0..64;

const HEADER: CapHeader = CapHeader {
    version: LINUX_CAPABILITY_VERSION_3,
    pid: 0,
};

/// Empties the bounding, ambient, inheritable, permitted and effective capability sets, and
/// locks securebits so that executing anything as uid 0 grants nothing back. Runs in the forked
/// command (and the namespace backend's bridge) before anything else confines it.
pub(super) fn drop_all() -> call::SysResult<()> {
    for cap in CAPABILITY_NUMBERS {
        match call::prctl(libc::PR_CAPBSET_DROP, cap) {
            Ok(()) | Err(Errno::EINVAL) => {}
            Err(e) => return Err(e),
        }
    }
    let bits = SECBIT_NOROOT
        | SECBIT_NOROOT_LOCKED
        | SECBIT_NO_SETUID_FIXUP
        | SECBIT_NO_SETUID_FIXUP_LOCKED
        | SECBIT_KEEP_CAPS_LOCKED;
    call::prctl(libc::PR_SET_SECUREBITS, bits)?;
    let clear_all = c_ulong::from(libc::PR_CAP_AMBIENT_CLEAR_ALL.unsigned_abs());
    call::prctl(libc::PR_CAP_AMBIENT, clear_all)?;
    let none = [CapData::default(); 2];
    call::capset(&HEADER, &none)
}

/// Whether this process holds any effective capability (it runs as root, or with file caps).
pub(crate) fn holds_capabilities() -> bool {
    call::capget(&HEADER)
        .is_ok_and(|data| data.iter().any(|d| d.effective != 0 || d.permitted != 0))
}
