//! What a soak watches of a process from outside, through `/proc`: its open descriptors and
//! resident memory (which must not grow once it is warm), its children (none may be left, and no
//! zombie), the mounts it sees, and the helper's per-command temp directories. It needs only the
//! standard library and nix's `geteuid`, so agentd's soak (`tests/tests/soak.rs`, which includes
//! this file by path) and the helper's (`confine-helper/tests/soak.rs`) judge by the same rules;
//! agentd's memory bounds (`tests/tests/acp_backpressure.rs`, `acp_bad_input.rs`) read it too.

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// How much a footprint may grow between warm-up and the end: this share of the warm figure…
pub const GROWTH_PERCENT: u64 = 10;
/// …plus this many descriptors. Idle between commands, the count should come back exactly; two
/// allow for a descriptor a library opens lazily (a cached `/dev/urandom`, say) and keeps.
pub const FD_SLACK: u64 = 2;
/// …plus this much resident memory. RSS moves by whole pages, and the allocator keeps freed
/// pages of its arenas as it likes: 512 KiB (128 pages) is noise for a process of a few MiB, and
/// small beside the growth a leak of one allocation per command makes over thousands of them
/// (100 bytes a command is ~1 MiB per 10,000).
pub const RSS_SLACK_KIB: u64 = 512;

/// A process's descriptors and resident memory at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footprint {
    /// `None` where this user may not list them: the helper makes itself undumpable, and the
    /// kernel then shows its `/proc/PID/fd` to root alone.
    pub fds: Option<u64>,
    pub rss_kib: u64,
}

impl std::fmt::Display for Footprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.fds {
            Some(fds) => write!(f, "{fds} fds, {} KiB RSS", self.rss_kib),
            None => write!(f, "{} KiB RSS (fds not visible)", self.rss_kib),
        }
    }
}

/// The footprint of `pid` now.
pub fn footprint(pid: u32) -> Footprint {
    let fds = match std::fs::read_dir(format!("/proc/{pid}/fd")) {
        Ok(entries) => Some(entries.count() as u64),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => None,
        Err(e) => panic!("listing /proc/{pid}/fd: {e}"),
    };
    let rss_kib = status_kib(pid, "VmRSS");
    Footprint { fds, rss_kib }
}

/// A memory figure of `/proc/PID/status` in KiB: `VmRSS` (resident now), `VmHWM` (the peak of
/// resident memory so far).
pub fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("reading /proc/{pid}/status: {e}"));
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// The footprint of `pid` once its descriptors are back within what [`assert_stable`] allows
/// over `warm`, or after [`MAKER_LIMIT`]: the helper closes a reaped command's descriptors
/// (its pipes, a cgroup's) just after its wait for the shim (RFC 0023, step 7: the cgroup can
/// only go once the shim has left it), so a look straight after the last shim is gone can land
/// between the two. A descriptor that stays open past the limit is still counted.
pub fn settled_footprint(pid: u32, warm: Footprint) -> Footprint {
    let deadline = std::time::Instant::now() + MAKER_LIMIT;
    let mut now = footprint(pid);
    while let (Some(warm_fds), Some(fds)) = (warm.fds, now.fds) {
        if fds <= allowed(warm_fds, FD_SLACK) || std::time::Instant::now() >= deadline {
            break;
        }
        std::thread::yield_now();
        now = footprint(pid);
    }
    now
}

/// The highest descriptor count and resident memory among `samples`.
pub fn peak(samples: impl IntoIterator<Item = Footprint>) -> Footprint {
    let mut top = Footprint {
        fds: Some(0),
        rss_kib: 0,
    };
    for sample in samples {
        top.fds = top.fds.zip(sample.fds).map(|(a, b)| a.max(b));
        top.rss_kib = top.rss_kib.max(sample.rss_kib);
    }
    top
}

/// The most `warm` may grow to by the rules above.
fn allowed(warm: u64, slack: u64) -> u64 {
    warm + warm * GROWTH_PERCENT / 100 + slack
}

/// Asserts that `end` has not grown past `warm` by more than the rules above allow. Shrinking is
/// not a leak and passes. Descriptors this user may not see are skipped, saying so.
pub fn assert_stable(what: &str, warm: Footprint, end: Footprint) {
    match (warm.fds, end.fds) {
        (Some(warm), Some(end)) => assert!(
            end <= allowed(warm, FD_SLACK),
            "{what}: descriptors grew from {warm} after warm-up to {end} at the end (at most {} \
             allowed)",
            allowed(warm, FD_SLACK)
        ),
        _ => crate::support::skip::skip_part(
            what,
            "descriptors",
            crate::support::skip::Need::Root,
            "the process is undumpable and this user is not root, so its /proc/PID/fd cannot be \
             listed",
        ),
    }
    assert!(
        end.rss_kib <= allowed(warm.rss_kib, RSS_SLACK_KIB),
        "{what}: resident memory grew from {} KiB after warm-up to {} KiB at the end (at most \
         {} KiB allowed)",
        warm.rss_kib,
        end.rss_kib,
        allowed(warm.rss_kib, RSS_SLACK_KIB)
    );
}

/// One process whose parent is the one watched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Child {
    pub pid: u32,
    /// The state letter of `/proc/PID/stat`: `Z` is a zombie.
    pub state: char,
    pub name: String,
}

/// Every process whose parent is `pid` now.
pub fn children(pid: u32) -> Vec<Child> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in entries.flatten() {
        let Some(child) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        // A process that ended between the listing and the read is no child any more.
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        // `PID (NAME) STATE PPID …`; NAME may hold spaces and parentheses, the last `)` ends it.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let mut rest = stat[close + 1..].split_whitespace();
        let state = rest.next().and_then(|s| s.chars().next()).unwrap_or('?');
        let ppid: Option<u32> = rest.next().and_then(|p| p.parse().ok());
        if ppid == Some(pid) {
            out.push(Child {
                pid: child,
                state,
                name: stat[open + 1..close].to_owned(),
            });
        }
    }
    out
}

/// How long a helper may take to end and reap the one child it starts on its own between
/// commands: the maker of the next command's namespaces (RFC 0023, step 6), which ends within
/// a few milliseconds of its start.
pub const MAKER_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Asserts that `pid` has no child left: every command it ran was reaped, none is a zombie. A
/// child seen first may be the maker the helper starts when a command ends; it must be gone
/// within [`MAKER_LIMIT`], reaped, and nothing may be left then.
pub fn assert_no_children(what: &str, pid: u32) {
    let deadline = std::time::Instant::now() + MAKER_LIMIT;
    let mut left = children(pid);
    while !left.is_empty() && std::time::Instant::now() < deadline {
        std::thread::yield_now();
        left = children(pid);
    }
    let zombies: Vec<&Child> = left.iter().filter(|c| c.state == 'Z').collect();
    assert!(
        zombies.is_empty(),
        "{what}: zombies left under pid {pid}: {zombies:?}"
    );
    assert!(
        left.is_empty(),
        "{what}: processes left under pid {pid}: {left:?}"
    );
}

/// The mounts `pid` sees, one `/proc/PID/mountinfo` line each (an undumpable process's are for
/// root alone: the helper's soak reads its own, in the namespace the helper shares).
pub fn mounts(pid: u32) -> BTreeSet<String> {
    std::fs::read_to_string(format!("/proc/{pid}/mountinfo"))
        .unwrap_or_else(|e| panic!("reading /proc/{pid}/mountinfo: {e}"))
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Asserts that the mounts seen now are those of `before`.
pub fn assert_same_mounts(what: &str, pid: u32, before: &BTreeSet<String>) {
    let now = mounts(pid);
    let added: Vec<&String> = now.difference(before).collect();
    let removed: Vec<&String> = before.difference(&now).collect();
    assert!(
        added.is_empty() && removed.is_empty(),
        "{what}: the mounts changed; added {added:?}, removed {removed:?}"
    );
}

/// The helper's per-command temp directories (`/tmp/confine-helper-UID/cmd-…`, one for each
/// workspace-write command while it runs) as they were when the soak began.
#[derive(Debug)]
pub struct TempDirs {
    base: PathBuf,
    before: BTreeSet<String>,
}

impl TempDirs {
    /// Notes what is in the effective user's temp base now.
    pub fn before() -> TempDirs {
        let uid = nix::unistd::geteuid().as_raw();
        let base = PathBuf::from(format!("/tmp/confine-helper-{uid}"));
        let before = entries(&base);
        TempDirs { base, before }
    }

    /// Asserts that no directory of helper `helper` (its pid is in their names:
    /// `cmd-<pid namespace>-<pid>-<random>`) is left that was not there before, and none holding
    /// a file named `marker` (which every soak command that could write its temp directory left
    /// in it, if the soak's commands leave one): every command's temp directory was removed
    /// when it ended. Other helpers of this uid share the directory; their entries are theirs,
    /// and are not looked at.
    pub fn assert_none_left(&self, what: &str, helper: u32, marker: Option<&str>) {
        let pid = helper.to_string();
        let ours = |name: &&String| name.split('-').nth(2) == Some(pid.as_str());
        let now: BTreeSet<String> = entries(&self.base).iter().filter(ours).cloned().collect();
        let marked: Vec<&String> = now
            .iter()
            .filter(|name| marker.is_some_and(|m| self.base.join(name).join(m).exists()))
            .collect();
        assert!(
            marked.is_empty(),
            "{what}: temp directories of the soak's commands left in {}: {marked:?}",
            self.base.display()
        );
        let added: Vec<&String> = now.difference(&self.before).collect();
        assert!(
            added.is_empty(),
            "{what}: directories of helper {helper} left in {} that were not there before: \
             {added:?}",
            self.base.display()
        );
    }
}

fn entries(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}
