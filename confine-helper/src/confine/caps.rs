//! The caps on a confined command's whole tree: how many tasks (processes and threads) it may
//! have at once, and how much memory it may use, so that one command — a fork bomb, a runaway
//! build — cannot take the machine down.
//!
//! The process cap is counted for the command's tree alone, by one of two mechanisms:
//! - a helper running as any user but root: `RLIMIT_NPROC` set inside a user namespace of the
//!   command's own, where the kernel counts only that namespace's tasks against it (set before
//!   the namespace exists, it would count every process of the user instead). Under bwrap the
//!   namespace is bwrap's and `enter` sets the limit; under Landlock the command makes one
//!   itself before it is confined. The kernel does not say whether a tree ran into it.
//! - a helper running as root, which the kernel exempts from `RLIMIT_NPROC`: a cgroup of the
//!   command's own ([`crate::cgroup`]), which caps memory too and says afterwards whether the
//!   tree ran into either cap.
//!
//! Where neither can be had, the command still runs, and the enforcement fact names the cap as
//! missing. Memory is capped only in a cgroup: no other kernel mechanism counts a tree's memory.

use confine_protocol::{Backend, Cap, Caps, Gap, Spawn};

use super::context::Context;
#[cfg(target_os = "linux")]
use crate::cgroup::CommandCgroup;

/// The process cap of a request that names none, below any ceiling.
pub(crate) const DEFAULT_MAX_PROCESSES: u64 = 2048;
/// Of the machine's memory, the share a request that names no memory cap may use (1/N).
#[cfg(target_os = "linux")]
const DEFAULT_MEMORY_SHARE: u64 = 2;

/// How a command's caps are applied.
#[derive(Debug)]
pub(crate) enum Applied {
    /// No cap can be applied here (named in the enforcement fact).
    None,
    /// `RLIMIT_NPROC` of this value inside a user namespace of the command's own.
    UserNamespace(u64),
    /// A cgroup of the command's own, which the shim joins.
    #[cfg(target_os = "linux")]
    Cgroup(CommandCgroup),
}

/// A request's caps: what they are, how they are applied, and what cannot be.
#[derive(Debug)]
pub(crate) struct Planned {
    pub(crate) caps: Caps,
    pub(crate) applied: Applied,
    /// The enforcement fact's gap when the process cap cannot be applied.
    pub(crate) missing: Option<Gap>,
}

impl Planned {
    /// No caps: an unconfined command.
    pub(crate) fn none() -> Planned {
        Planned {
            caps: Caps {
                processes: None,
                memory: None,
            },
            applied: Applied::None,
            missing: None,
        }
    }

    /// The value `enter` or the command sets as `RLIMIT_NPROC` in its own user namespace.
    #[cfg(target_os = "linux")]
    pub(crate) fn in_user_namespace(&self) -> Option<u64> {
        match self.applied {
            Applied::UserNamespace(n) => Some(n),
            _ => None,
        }
    }

    /// The caps as they held, once the tree is gone: a cgroup says whether it ran into each
    /// (it is removed when dropped, after the shim is reaped).
    pub(crate) fn at_end(&self) -> Caps {
        #[cfg_attr(
            target_os = "macos",
            expect(unused_mut, reason = "only a cgroup (Linux) says")
        )]
        let mut caps = self.caps;
        #[cfg(target_os = "linux")]
        if let Applied::Cgroup(cgroup) = &self.applied {
            let (processes, memory) = cgroup.reached();
            if let Some(cap) = caps.processes.as_mut() {
                cap.reached = processes;
            }
            if let Some(cap) = caps.memory.as_mut() {
                cap.reached = memory;
            }
        }
        caps
    }

    /// The user namespace cannot be had after all (bwrap without `enter`): the cap is missing.
    pub(crate) fn without_user_namespace(&mut self, why: &str) {
        if let Applied::UserNamespace(n) = self.applied {
            self.applied = Applied::None;
            self.caps.processes = None;
            self.missing = Some(Gap::ProcessCap {
                processes: n,
                why: why.to_owned(),
            });
        }
    }
}

/// The smaller of a request's value (or `default`) and the ceiling's.
fn capped(asked: Option<u64>, default: u64, ceiling: Option<u64>) -> u64 {
    let asked = asked.unwrap_or(default);
    ceiling.map_or(asked, |c| c.min(asked))
}

/// The caps of `spawn` under `backend` and how they are applied here.
pub(crate) fn plan(spawn: &Spawn, ctx: &Context, backend: Backend) -> Planned {
    if backend == Backend::None {
        return Planned::none();
    }
    let processes = capped(
        spawn.limits.max_processes,
        DEFAULT_MAX_PROCESSES,
        ctx.ceiling.max_processes,
    );
    let planned = Planned {
        caps: Caps {
            processes: Some(Cap {
                max: processes,
                reached: None,
            }),
            memory: None,
        },
        applied: Applied::UserNamespace(processes),
        missing: None,
    };
    #[cfg(target_os = "macos")]
    {
        let _ = ctx;
        let mut planned = planned;
        planned.without_user_namespace(
            "macOS counts processes per user, never for one command's tree",
        );
        planned
    }
    #[cfg(target_os = "linux")]
    linux(spawn, ctx, backend, planned)
}

/// The caps on Linux: a user namespace of the command's own, or a cgroup as root.
#[cfg(target_os = "linux")]
fn linux(spawn: &Spawn, ctx: &Context, backend: Backend, mut planned: Planned) -> Planned {
    let processes = planned
        .caps
        .processes
        .map_or(DEFAULT_MAX_PROCESSES, |c| c.max);
    if !nix::unistd::geteuid().is_root() {
        if backend == Backend::Landlock && !ctx.user_namespace_usable() {
            planned.without_user_namespace(
                "this user may not make a user namespace here, where the cap would be counted \
                 for the command alone",
            );
        }
        return planned;
    }
    let cgroups = ctx.cgroups();
    if !cgroups.counts_processes() {
        planned.without_user_namespace(
            "the helper runs as root, which RLIMIT_NPROC does not bind, and finds no cgroup \
             with the pids controller that it may make the command's own under",
        );
        return planned;
    }
    let memory = cgroups.counts_memory().then(|| {
        let half = ctx
            .memory_total()
            .map_or(u64::MAX, |m| m / DEFAULT_MEMORY_SHARE);
        capped(spawn.limits.max_memory, half, ctx.ceiling.max_memory)
    });
    match cgroups.create(processes, memory) {
        Ok(cgroup) => {
            planned.caps.memory = memory.map(|max| Cap { max, reached: None });
            planned.applied = Applied::Cgroup(cgroup);
        }
        // A cgroup file system that does not take a new cgroup (read-only in a container, say)
        // is no reason to refuse every command: the cap is named missing.
        Err(e) => planned.without_user_namespace(&format!(
            "the helper runs as root, which RLIMIT_NPROC does not bind, and cannot make the \
             command's own cgroup ({e})"
        )),
    }
    planned
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_gets_the_default_or_its_own_cap_and_never_more_than_the_ceilings() {
        assert_eq!(capped(None, 2048, None), 2048);
        assert_eq!(capped(Some(64), 2048, None), 64);
        assert_eq!(capped(Some(10_000), 2048, None), 10_000);
        assert_eq!(capped(None, 2048, Some(100)), 100);
        assert_eq!(capped(Some(10_000), 2048, Some(4096)), 4096);
        assert_eq!(capped(Some(8), 2048, Some(4096)), 8);
    }
}
