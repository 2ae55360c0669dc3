//! The catalogue, section by section (ids from the security catalogue, §4).
//!
//! Each case runs the attack confined, checks the host and the facts, then runs the same attack
//! in danger-full-access as a control that must succeed: a deny that the control cannot undo
//! proves nothing about the sandbox.

use crate::case::Case;
use crate::matrix::Backend;

mod availability;
mod checks;
mod credentials;
mod denials;
mod filesystem;
mod ipc;
mod layers;
mod lifecycle;
mod macos;
mod network;
mod policy;
mod process;
mod profile;
mod protected;
mod secrets;

/// The program the Seatbelt backend runs commands under.
pub(crate) const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// The cases that do not apply to Seatbelt, each with why: they test what the Linux backends are
/// made of (namespaces, seccomp, Landlock's rules, `/proc`, bwrap's mounts, the shim's `connect`
/// supervision, cgroups), need a fixture only Linux has, or test what Seatbelt reports as a gap
/// and does not enforce. Every other case of the catalogue runs on Seatbelt, with the macOS
/// cases of `macos.rs`.
pub(crate) const NOT_SEATBELT: &[(&str, &str)] = &[
    ("T08", "reopening through /proc: macOS has no /proc"),
    (
        "T11",
        "a writable submount needs a tmpfs mount, a Linux fixture",
    ),
    (
        "T14",
        "the root swap races the Linux helper's descriptor checks (RFC 0002)",
    ),
    (
        "T31",
        "vsock, packet, netlink and bluetooth sockets are Linux socket families",
    ),
    ("T32", "io_uring is Linux's"),
    ("T35", "a D-Bus session bus is a Linux fixture"),
    ("T40", "abstract Unix sockets are Linux's"),
    (
        "T46",
        "TIOCLINUX and the seccomp filter's ioctl rules are Linux's",
    ),
    ("T48", "no_new_privs, seccomp and capabilities are Linux's"),
    ("T49", "user namespaces are Linux's"),
    ("T50", "the mount API and clone3 are Linux system calls"),
    ("T52", "memfd_create is Linux's"),
    (
        "T54",
        "the process cap is counted by a cgroup or the user's RLIMIT_NPROC on Linux",
    ),
    (
        "T55",
        "macOS does not enforce RLIMIT_AS: the address-space gap says so",
    ),
    (
        "T57",
        "macOS has no subreaper: the process-tree gap says so",
    ),
    (
        "T82",
        "scheduling of other processes is not guarded on macOS: the process-listing gap",
    ),
    (
        "T89",
        "a sandbox the command cannot start in is the runner's failure",
    ),
    ("T90", "pidfds, file handles and userfaultfd are Linux's"),
    (
        "T91",
        "the process cap is counted by a cgroup or the user's RLIMIT_NPROC on Linux",
    ),
    ("T92", "the memory cap is a cgroup's"),
    ("T93", "the namespace backend's shim is Linux's"),
    (
        "P02",
        "local_binding is refused under Seatbelt (seatbelt-local-binding)",
    ),
    (
        "P04",
        "the allow-list's port is the host's under Seatbelt, which agentd holds for one \
         command at a time, and the allow-list cases run beside each other (host-proxy-port; \
         RFC 0022)",
    ),
    (
        "P05",
        "the allow-list's port is the host's under Seatbelt, which agentd holds for one \
         command at a time, and the allow-list cases run beside each other (host-proxy-port; \
         RFC 0022)",
    ),
    (
        "P08",
        "the allow-list's port is the host's under Seatbelt, which agentd holds for one \
         command at a time, and the allow-list cases run beside each other (host-proxy-port; \
         RFC 0022)",
    ),
];

/// Why case `id` is not run on `backend`, if it is not.
pub(crate) fn not_for(backend: Backend, id: &str) -> Option<String> {
    if backend != Backend::Seatbelt {
        return None;
    }
    NOT_SEATBELT
        .iter()
        .find(|(case, _)| *case == id)
        .map(|(_, why)| format!("not a Seatbelt case: {why}"))
}

/// Every case, in catalogue order.
pub fn all() -> Vec<Case> {
    [
        availability::CASES,
        filesystem::CASES,
        protected::CASES,
        secrets::CASES,
        network::CASES,
        ipc::CASES,
        process::CASES,
        lifecycle::CASES,
        policy::CASES,
        layers::CASES,
        denials::CASES,
        profile::CASES,
        credentials::CASES,
        macos_cases(),
    ]
    .concat()
}

/// The macOS escapes (`macos.rs`): in macOS's catalogue alone.
fn macos_cases() -> &'static [Case] {
    if cfg!(target_os = "macos") {
        macos::CASES
    } else {
        &[]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_case_kept_from_seatbelt_is_in_the_catalogue_once_with_a_reason() {
        let ids: Vec<&str> = all().iter().map(|c| c.id).collect();
        for (id, why) in NOT_SEATBELT {
            assert!(ids.contains(id), "{id} is no case of the catalogue");
            assert!(!why.is_empty(), "{id} has no reason");
            assert_eq!(
                NOT_SEATBELT.iter().filter(|(i, _)| i == id).count(),
                1,
                "{id}"
            );
        }
        // Most of the catalogue runs on Seatbelt, and the other backends skip nothing here.
        let kept = ids
            .iter()
            .filter(|id| not_for(Backend::Seatbelt, id).is_some());
        assert!(kept.count() * 2 < ids.len(), "{NOT_SEATBELT:?}");
        for backend in [Backend::Bwrap, Backend::Landlock, Backend::Namespaces] {
            assert!(ids.iter().all(|id| not_for(backend, id).is_none()));
        }
        assert!(
            not_for(Backend::Seatbelt, "T01").is_none(),
            "the control: T01 runs"
        );
    }
}
