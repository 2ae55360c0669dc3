//! A cgroup of each command's own, for a helper that runs as root: the kernel counts the whole
//! tree's tasks and memory there, caps them (`pids.max`, `memory.max`) and says afterwards
//! whether the tree ran into a cap (`pids.events`, `memory.events`).
//!
//! Root needs it: the kernel exempts root from `RLIMIT_NPROC`, the per-namespace process cap
//! other users get (`confine::caps`). Where the helper may make cgroups is found once
//! ([`Cgroups::find`]): on the unified hierarchy, under the nearest cgroup at or above its own
//! whose children get the controller (`cgroup.subtree_control` lists it); on a v1 hierarchy of
//! the controller, under its own cgroup there. A command's cgroup is named like its temp
//! directory (`confine-helper-<pid namespace>-<helper pid>-<random>`), joined by the shim
//! before it forks the command (it writes `0` to `cgroup.procs` through a descriptor opened
//! here), read and removed at the command's end; a helper killed before that leaves it empty
//! (the shim killed the tree), and the next helper removes it ([`Cgroups::sweep`]).

use std::fs;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

/// How a command's cgroup's name starts.
const NAME_PREFIX: &str = "confine-helper-";

/// The kernel's hierarchies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

/// A cgroup under which the helper makes its commands' cgroups.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Parent {
    dir: PathBuf,
    version: Version,
}

/// Where this helper may make its commands' cgroups, for each cap.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Cgroups {
    pids: Option<Parent>,
    memory: Option<Parent>,
}

/// A command's own cgroup (one directory per hierarchy it needs), made before its fork.
#[derive(Debug)]
pub(crate) struct CommandCgroup {
    /// `(directory, version, holds the process cap, holds the memory cap)`.
    dirs: Vec<(PathBuf, Version, bool, bool)>,
    /// `cgroup.procs` of each directory, opened for writing: the shim joins through them.
    procs: Vec<OwnedFd>,
}

impl Cgroups {
    /// Where the cgroups of this process's commands can go, read from `/proc/self/mountinfo`
    /// and `/proc/self/cgroup`.
    pub(crate) fn find() -> Cgroups {
        let (Ok(mounts), Ok(own)) = (
            fs::read_to_string("/proc/self/mountinfo"),
            fs::read_to_string("/proc/self/cgroup"),
        ) else {
            return Cgroups::default();
        };
        Cgroups::from_tables(&mounts, &own, |dir| {
            fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap_or_default()
        })
    }

    /// [`Cgroups::find`] on given tables; `controllers_of` reads a v2 cgroup's
    /// `cgroup.subtree_control`.
    fn from_tables(mounts: &str, own: &str, controllers_of: impl Fn(&Path) -> String) -> Cgroups {
        let unified = mount_of(mounts, |fstype, _| fstype == "cgroup2")
            .zip(own_path(own, |controllers| controllers.is_empty()))
            .and_then(|((point, root), path)| Some((beneath(&point, &root, &path)?, point)));
        let v2 = |controller: &str| {
            let (own, point) = unified.as_ref()?;
            own.ancestors()
                .take_while(|dir| dir.starts_with(point))
                .find(|dir| {
                    controllers_of(dir)
                        .split_whitespace()
                        .any(|c| c == controller)
                })
                .map(|dir| Parent {
                    dir: dir.to_path_buf(),
                    version: Version::V2,
                })
        };
        let v1 = |controller: &str| {
            let has = |options: &str| options.split(',').any(|o| o == controller);
            let (point, root) =
                mount_of(mounts, |fstype, options| fstype == "cgroup" && has(options))?;
            let path = own_path(own, |controllers| has(controllers))?;
            beneath(&point, &root, &path).map(|dir| Parent {
                dir,
                version: Version::V1,
            })
        };
        Cgroups {
            pids: v2("pids").or_else(|| v1("pids")),
            memory: v2("memory").or_else(|| v1("memory")),
        }
    }

    /// Whether a process cap can be put on a command here.
    pub(crate) fn counts_processes(&self) -> bool {
        self.pids.is_some()
    }

    /// Whether a memory cap can be put on a command here.
    pub(crate) fn counts_memory(&self) -> bool {
        self.memory.is_some()
    }

    /// Makes a command's cgroup with `processes` tasks at most and, where memory can be
    /// capped, `memory` bytes at most. Nothing is left behind if a step fails.
    pub(crate) fn create(&self, processes: u64, memory: Option<u64>) -> io::Result<CommandCgroup> {
        let name = crate::sys::owned_name(NAME_PREFIX)?;
        let pids = self
            .pids
            .as_ref()
            .ok_or_else(|| io::Error::other("no cgroup counts processes here"))?;
        let memory = memory.zip(self.memory.as_ref());
        let mut made = CommandCgroup {
            dirs: Vec::new(),
            procs: Vec::new(),
        };
        let shared = memory.is_some_and(|(_, parent)| parent == pids);
        made.add(
            pids,
            &name,
            Some(processes),
            memory.filter(|_| shared).map(|m| m.0),
        )?;
        if let Some((bytes, parent)) = memory.filter(|_| !shared) {
            made.add(parent, &name, None, Some(bytes))?;
        }
        Ok(made)
    }

    /// Removes the cgroups of helpers of this pid namespace that no longer run. Returns how
    /// many were removed.
    pub(crate) fn sweep(&self) -> usize {
        let mut parents: Vec<&Parent> = self.pids.iter().chain(&self.memory).collect();
        parents.dedup();
        let mut removed = 0;
        for parent in parents {
            let Ok(entries) = fs::read_dir(&parent.dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                if name
                    .to_str()
                    .is_some_and(|n| crate::sys::orphaned(n, NAME_PREFIX))
                    && fs::remove_dir(entry.path()).is_ok()
                {
                    removed += 1;
                }
            }
        }
        removed
    }
}

impl CommandCgroup {
    /// Makes `parent/name` with the caps given, and opens its `cgroup.procs`.
    fn add(
        &mut self,
        parent: &Parent,
        name: &str,
        processes: Option<u64>,
        memory: Option<u64>,
    ) -> io::Result<()> {
        let dir = parent.dir.join(name);
        let failed = |what: &str, e: io::Error| {
            io::Error::new(e.kind(), format!("{what} {}: {e}", dir.display()))
        };
        fs::create_dir(&dir).map_err(|e| failed("cannot make the cgroup", e))?;
        self.dirs.push((
            dir.clone(),
            parent.version,
            processes.is_some(),
            memory.is_some(),
        ));
        if let Some(n) = processes {
            write(&dir, "pids.max", n).map_err(|e| failed("cannot cap the processes of", e))?;
        }
        if let Some(bytes) = memory {
            let (limit, swap) = match parent.version {
                Version::V2 => ("memory.max", "memory.swap.max"),
                Version::V1 => ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes"),
            };
            write(&dir, limit, bytes).map_err(|e| failed("cannot cap the memory of", e))?;
            // Where swap is counted, the cap holds memory and swap together: a tree at its cap
            // must not push the host into swap instead. Without swap accounting there is
            // nothing to set.
            let swap_cap = match parent.version {
                Version::V2 => 0,
                Version::V1 => bytes,
            };
            let _ = write(&dir, swap, swap_cap);
        }
        let procs = nix::fcntl::open(
            &dir.join("cgroup.procs"),
            OFlag::O_WRONLY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| failed("cannot open cgroup.procs of", e.into()))?;
        self.procs.push(procs);
        Ok(())
    }

    /// The `cgroup.procs` descriptors the shim joins through.
    pub(crate) fn procs(&self) -> &[OwnedFd] {
        &self.procs
    }

    /// Whether the tree ran into its process cap and its memory cap, from the kernel's
    /// counts; `None` where a count cannot be read.
    pub(crate) fn reached(&self) -> (Option<bool>, Option<bool>) {
        let mut processes = None;
        let mut memory = None;
        for (dir, version, pids, mem) in &self.dirs {
            if *pids {
                processes = event(&dir.join("pids.events"), "max");
            }
            if *mem {
                // v1 keeps no one count of it: the kills its cap made, the highest use against
                // the cap, and the charges refused at the memory limit or (where swap is
                // counted) at the memory-and-swap limit each say it.
                let counted = match version {
                    Version::V2 => vec![
                        event(&dir.join("memory.events"), "max"),
                        event(&dir.join("memory.events"), "oom_kill"),
                    ],
                    Version::V1 => vec![
                        event(&dir.join("memory.oom_control"), "oom_kill"),
                        number(&dir.join("memory.max_usage_in_bytes"))
                            .zip(number(&dir.join("memory.limit_in_bytes")))
                            .map(|(peak, cap)| peak >= cap),
                        number(&dir.join("memory.failcnt")).map(|n| n > 0),
                        number(&dir.join("memory.memsw.failcnt")).map(|n| n > 0),
                    ],
                };
                memory = counted.iter().flatten().copied().reduce(|a, b| a || b);
            }
        }
        (processes, memory)
    }
}

impl Drop for CommandCgroup {
    /// The shim has killed and reaped the tree by now, so each cgroup is empty; one that is
    /// not is left to the next helper's sweep.
    fn drop(&mut self) {
        self.procs.clear();
        for (dir, ..) in self.dirs.iter().rev() {
            let _ = fs::remove_dir(dir);
        }
    }
}

/// Writes `value` to the control file `file` of `dir`.
fn write(dir: &Path, file: &str, value: u64) -> io::Result<()> {
    fs::write(dir.join(file), value.to_string())
}

/// The number a one-number control file holds.
fn number(file: &Path) -> Option<u64> {
    fs::read_to_string(file).ok()?.trim().parse().ok()
}

/// Whether the count of `key` in a `key value` events file is above zero.
fn event(file: &Path, key: &str) -> Option<bool> {
    let text = fs::read_to_string(file).ok()?;
    text.lines().find_map(|line| {
        let (name, count) = line.split_once(' ')?;
        (name == key).then(|| count.trim().parse::<u64>().ok().map(|n| n > 0))?
    })
}

/// The mount point and mounted root of the first mount in `mountinfo` whose file system type
/// and super options `wanted` accepts.
fn mount_of(mountinfo: &str, wanted: impl Fn(&str, &str) -> bool) -> Option<(PathBuf, PathBuf)> {
    mountinfo.lines().find_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        let fields: Vec<&str> = before.split(' ').collect();
        let mut rest = after.split(' ');
        let fstype = rest.next()?;
        let _source = rest.next()?;
        let options = rest.next().unwrap_or("");
        let (root, point) = (fields.get(3)?, fields.get(4)?);
        wanted(fstype, options).then(|| (unescape(point), unescape(root)))
    })
}

/// mountinfo's octal escapes of space, tab, newline and backslash undone.
fn unescape(field: &str) -> PathBuf {
    let mut out = Vec::with_capacity(field.len());
    let mut rest = field.as_bytes();
    while let Some((&first, after)) = rest.split_first() {
        let code = after
            .get(..3)
            .filter(|_| first == b'\\')
            .and_then(|d| std::str::from_utf8(d).ok())
            .and_then(|d| u8::from_str_radix(d, 8).ok());
        match code {
            Some(byte) => {
                out.push(byte);
                rest = after.get(3..).unwrap_or_default();
            }
            None => {
                out.push(first);
                rest = after;
            }
        }
    }
    PathBuf::from(<std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(out))
}

/// This process's cgroup path on the hierarchy whose `/proc/self/cgroup` controller list
/// `wanted` accepts (empty for the unified one).
fn own_path(own: &str, wanted: impl Fn(&str) -> bool) -> Option<PathBuf> {
    own.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let (_id, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        wanted(controllers).then(|| PathBuf::from(path))
    })
}

/// Where the cgroup `path` (as `/proc/self/cgroup` names it) is under a mount of the
/// hierarchy's `root` at `point`; `None` when the mount does not show it.
fn beneath(point: &Path, root: &Path, path: &Path) -> Option<PathBuf> {
    let inside = path.strip_prefix(root).ok()?;
    Some(point.join(inside))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID_MOUNTS: &str = "\
30 25 0:26 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw
35 30 0:31 / /sys/fs/cgroup/pids rw,nosuid - cgroup cgroup rw,pids
36 30 0:32 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory
";
    const HYBRID_OWN: &str = "\
9:name=systemd:/
8:pids:/
4:memory:/jobs/one
0::/
";

    #[test]
    fn a_hybrid_machine_caps_on_its_v1_hierarchies_under_the_helpers_own_cgroups() {
        let found = Cgroups::from_tables(HYBRID_MOUNTS, HYBRID_OWN, |_| String::new());
        assert_eq!(
            found,
            Cgroups {
                pids: Some(Parent {
                    dir: "/sys/fs/cgroup/pids/".into(),
                    version: Version::V1
                }),
                memory: Some(Parent {
                    dir: "/sys/fs/cgroup/memory/jobs/one".into(),
                    version: Version::V1
                }),
            }
        );
    }

    #[test]
    fn the_unified_hierarchy_caps_under_the_nearest_cgroup_whose_children_get_the_controller() {
        let mounts = "31 25 0:27 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n";
        let own = "0::/user.slice/user-0.slice/session-3.scope\n";
        let controllers = |dir: &Path| {
            match dir.to_str() {
                Some("/sys/fs/cgroup/user.slice/user-0.slice") => "cpu memory pids",
                Some("/sys/fs/cgroup/user.slice") => "memory pids",
                Some("/sys/fs/cgroup") => "cpu io memory pids",
                _ => "",
            }
            .to_owned()
        };
        let found = Cgroups::from_tables(mounts, own, controllers);
        let slice = Parent {
            dir: "/sys/fs/cgroup/user.slice/user-0.slice".into(),
            version: Version::V2,
        };
        assert_eq!(found.pids, Some(slice.clone()));
        assert_eq!(found.memory, Some(slice));
        // The control: with no controller handed down anywhere, nothing can be capped.
        let none = Cgroups::from_tables(mounts, own, |_| String::new());
        assert_eq!(none, Cgroups::default());
        assert!(!none.counts_processes() && !none.counts_memory());
    }

    #[test]
    fn a_mount_of_part_of_a_hierarchy_shows_only_the_cgroups_beneath_its_root() {
        let mounts = "31 25 0:27 /container /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        let inside = Cgroups::from_tables(mounts, "0::/container/app\n", |_| "pids".to_owned());
        assert_eq!(
            inside.pids.map(|p| p.dir),
            Some(PathBuf::from("/sys/fs/cgroup/app"))
        );
        let outside = Cgroups::from_tables(mounts, "0::/elsewhere\n", |_| "pids".to_owned());
        assert_eq!(outside.pids, None);
    }

    #[test]
    fn events_and_escapes_are_read_as_the_kernel_writes_them() {
        assert_eq!(
            unescape("/sys/fs/cgroup/a\\040b"),
            PathBuf::from("/sys/fs/cgroup/a b")
        );
        let scratch = crate::test_support::Scratch::new("cgroup-events");
        let file = scratch.0.join("pids.events");
        fs::write(&file, "max 0\n").unwrap();
        assert_eq!(event(&file, "max"), Some(false));
        fs::write(&file, "max 17\n").unwrap();
        assert_eq!(event(&file, "max"), Some(true));
        fs::write(&file, "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n").unwrap();
        assert_eq!(event(&file, "max"), Some(true));
        assert_eq!(event(&file, "nothing"), None);
    }
}
