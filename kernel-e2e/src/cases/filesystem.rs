//! A. Filesystem writes: nothing outside the writable roots changes, however it is reached.

use std::fs;
use std::os::unix::fs::{PermissionsExt, chown};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use super::checks::{all_changed, all_unchanged, snapshot};
use crate::agentd::quote;
use crate::case::{Case, Cx, RunChecks, Stop, Verdict, fail};
use crate::ensure;
use crate::facts::RootBefore;
use crate::fixtures::{PathState, TmpfsMount, listing};
use crate::matrix::{CONFINED, Mode, READ_ONLY, WORKSPACE_WRITE};

pub const CASES: &[Case] = &[
    Case {
        id: "T01",
        title: "writes to $HOME, host /tmp and /dev/shm never reach the host",
        modes: CONFINED,
        exclusive: false,
        body: writes_outside_the_roots_never_reach_the_host,
    },
    Case {
        id: "T02",
        title: "the workspace, writable roots, $TMPDIR and /dev/null stay writable",
        modes: CONFINED,
        exclusive: false,
        body: the_writable_places_stay_writable,
    },
    Case {
        id: "T03",
        title: "read-only mode denies every kind of change in the workspace",
        modes: READ_ONLY,
        exclusive: false,
        body: read_only_denies_every_change_in_the_workspace,
    },
    Case {
        id: "T04",
        title: "truncating a file outside the roots is denied",
        modes: CONFINED,
        exclusive: false,
        body: truncation_outside_the_roots_is_denied,
    },
    Case {
        id: "T05",
        title: "a symlink in the workspace does not carry writes outside",
        modes: WORKSPACE_WRITE,
        exclusive: false,
        body: a_symlink_does_not_carry_writes_outside,
    },
    Case {
        id: "T06",
        title: "a hard link to a file outside the roots cannot be made",
        modes: WORKSPACE_WRITE,
        exclusive: false,
        body: a_hard_link_to_an_outside_file_cannot_be_made,
    },
    Case {
        id: "T07",
        title: "files cannot be moved across the boundary of the roots",
        modes: WORKSPACE_WRITE,
        exclusive: false,
        body: files_cannot_be_moved_across_the_boundary,
    },
    Case {
        id: "T08",
        title: "reopening a read-only descriptor through /proc for writing is denied",
        modes: CONFINED,
        exclusive: false,
        body: reopening_through_proc_for_writing_is_denied,
    },
    Case {
        id: "T10",
        title: "device nodes cannot be made and setuid binaries do not elevate",
        modes: WORKSPACE_WRITE,
        exclusive: false,
        body: no_device_nodes_and_no_setuid_elevation,
    },
    Case {
        id: "T11",
        title: "a writable submount under a read-only path is not writable",
        modes: CONFINED,
        exclusive: false,
        body: a_submount_under_a_read_only_path_is_not_writable,
    },
    Case {
        id: "T13",
        title: "a missing, symlinked or escaping writable root is refused or ignored",
        modes: WORKSPACE_WRITE,
        exclusive: false,
        body: escaping_writable_roots_are_refused_or_ignored,
    },
    Case {
        id: "T14",
        title: "a writable root swapped for a symlink while the helper checks it never leads \
                writes outside",
        modes: WORKSPACE_WRITE,
        exclusive: false,
        body: a_root_swapped_for_a_symlink_never_leads_writes_outside,
    },
];

fn writes_outside_the_roots_never_reach_the_host(cx: &mut Cx) -> Verdict {
    let home = cx.home_canary("home")?;
    let home_new = cx.home_path("home-new");
    let tmp = cx.host_tmp_path("tmp");
    cx.file(&tmp, "canary in host /tmp\n")?;
    let tmp_new = cx.host_tmp_path("tmp-new");
    let mut probe = cx
        .probe()?
        .step("home", "write", [&home])
        .step("home-new", "create", [&home_new])
        .step("tmp", "write", [&tmp])
        .step("tmp-new", "create", [&tmp_new]);
    let mut watched = vec![home, home_new, tmp, tmp_new];
    // macOS has no /dev/shm.
    if cfg!(target_os = "linux") {
        let shm = cx.shm_path("shm");
        cx.file(&shm, "canary in host /dev/shm\n")?;
        let shm_new = cx.shm_path("shm-new");
        probe = probe
            .step("shm", "write", [&shm])
            .step("shm-new", "create", [&shm_new]);
        watched.extend([shm, shm_new]);
    }
    let before = snapshot(&watched.iter().map(PathBuf::as_path).collect::<Vec<_>>());

    let run = cx.run("confined", &cx.confined(probe.argv()))?;
    run.denied()?;
    run.step_denied("home")?;
    run.step_denied("home-new")?;
    // /tmp and /dev/shm may be private to the sandbox (bwrap mounts a fresh tmpfs and /dev), so
    // a write there may succeed; what must hold is that the host never sees it.
    all_unchanged(cx, &before)?;

    let control = cx.run("control", &cx.control(probe.argv()))?;
    control.succeeded()?;
    all_changed(&before)
}

fn the_writable_places_stay_writable(cx: &mut Cx) -> Verdict {
    let probe = cx.probe()?.step("dev-null", "write", ["/dev/null"]);
    if cx.mode() == Mode::ReadOnly {
        // In read-only mode /dev/null is the one writable file.
        let run = cx.run("confined", &cx.confined(probe.argv()))?;
        return run.succeeded();
    }
    let existing = cx.file(&cx.ws.join("existing"), "old\n")?;
    let extra = cx.dir(&cx.dir.join("extra-root"))?;
    let tmp_name = format!("{}-tmpdir-file", cx.tag);
    let probe = probe
        .step("create", "create", [cx.ws.join("new")])
        .step("overwrite", "write", [&existing])
        .step("mkdir", "mkdir", [cx.ws.join("dir")])
        .step("writable-root", "create", [extra.join("new")])
        .step("tmpdir", "create", [format!("$TMPDIR/{tmp_name}")])
        .op("env", Vec::<String>::new());
    let run = cx.run("confined", &cx.confined(probe.argv()).writable_root(&extra))?;
    run.succeeded()?;
    for step in [
        "dev-null",
        "create",
        "overwrite",
        "mkdir",
        "writable-root",
        "tmpdir",
    ] {
        run.step_ok(step)?;
    }
    for path in [cx.ws.join("new"), extra.join("new")] {
        ensure!(
            matches!(PathState::of(&path), PathState::File(_)),
            "{} was written inside the sandbox but is not on the host",
            path.display()
        );
    }
    let tmpdir = run
        .probe
        .all_data("env")
        .find_map(|kv| kv.strip_prefix("TMPDIR="))
        .ok_or_else(|| fail("the command's environment has no TMPDIR"))?
        .to_owned();
    ensure!(
        Path::new(&tmpdir).is_absolute(),
        "TMPDIR is {tmpdir:?}, not an absolute path"
    );
    // Private to the command: under bwrap a fresh tmpfs (so TMPDIR may well be /tmp), under
    // landlock a directory the helper removes afterwards. Either way the host never sees it.
    cx.absent(&Path::new(&tmpdir).join(&tmp_name))
}

fn read_only_denies_every_change_in_the_workspace(cx: &mut Cx) -> Verdict {
    let ws = cx.ws.clone();
    cx.file(&ws.join("to-unlink"), "a\n")?;
    cx.file(&ws.join("to-rename"), "b\n")?;
    cx.file(&ws.join("to-write"), "c\n")?;
    cx.dir(&ws.join("to-rmdir"))?;
    let probe = cx
        .probe()?
        .step("create", "create", [ws.join("new")])
        .step("write", "write", [ws.join("to-write")])
        .step("mkdir", "mkdir", [ws.join("new-dir")])
        .step("unlink", "unlink", [ws.join("to-unlink")])
        .step(
            "rename",
            "rename",
            [ws.join("to-rename"), ws.join("renamed")],
        )
        .step(
            "symlink",
            "symlink",
            ["/etc/passwd".into(), ws.join("link")],
        )
        .step("mkfifo", "mkfifo", [ws.join("fifo")])
        .step("rmdir", "rmdir", [ws.join("to-rmdir")]);
    let paths = [
        "new",
        "to-write",
        "new-dir",
        "to-unlink",
        "to-rename",
        "renamed",
        "link",
        "fifo",
        "to-rmdir",
    ]
    .map(|name| ws.join(name));
    let before = snapshot(&paths.iter().map(|p| p.as_path()).collect::<Vec<_>>());

    let run = cx.run("confined", &cx.confined(probe.argv()))?;
    run.denied()?;
    for step in [
        "create", "write", "mkdir", "unlink", "rename", "symlink", "mkfifo", "rmdir",
    ] {
        run.step_denied(step)?;
    }
    all_unchanged(cx, &before)?;

    let control = cx.run("control", &cx.control(probe.argv()))?;
    control.succeeded()?;
    all_changed(&before)
}

fn truncation_outside_the_roots_is_denied(cx: &mut Cx) -> Verdict {
    let by_path = cx.home_canary("truncate")?;
    let by_open = cx.home_canary("open-trunc")?;
    let mut probe = cx.probe()?.step("truncate", "truncate", [&by_path]).step(
        "open-trunc",
        "open-trunc",
        [&by_open],
    );
    let mut paths = vec![by_path.clone(), by_open.clone()];
    if cx.mode() == Mode::ReadOnly {
        let inside = cx.file(&cx.ws.join("inside"), "workspace file\n")?;
        probe = probe.step("workspace", "truncate", [&inside]);
        paths.push(inside);
    }
    let before = snapshot(&paths.iter().map(|p| p.as_path()).collect::<Vec<_>>());

    let run = cx.run("confined", &cx.confined(probe.argv()))?;
    run.denied()?;
    run.step_denied("truncate")?;
    run.step_denied("open-trunc")?;
    if cx.mode() == Mode::ReadOnly {
        run.step_denied("workspace")?;
    }
    all_unchanged(cx, &before)?;

    let control = cx.run("control", &cx.control(probe.argv()))?;
    control.succeeded()?;
    all_changed(&before)
}

fn a_symlink_does_not_carry_writes_outside(cx: &mut Cx) -> Verdict {
    let canary = cx.home_canary("symlinked")?;
    let link = cx.ws.join("link");
    let probe = cx
        .probe()?
        .step("symlink", "symlink", [&canary, &link])
        .step("write-through", "write", [&link]);
    let before = snapshot(&[&canary]);

    let run = cx.run("confined", &cx.confined(probe.argv()))?;
    run.denied()?;
    run.step_ok("symlink")?;
    run.step_denied("write-through")?;
    all_unchanged(cx, &before)?;

    let _ = fs::remove_file(&link);
    let control = cx.run("control", &cx.control(probe.argv()))?;
    control.succeeded()?;
    all_changed(&before)
}

/// What the kernel says when a link or rename would cross into or out of the roots: EXDEV
/// across mounts (bwrap) or across Landlock rights (landlock), otherwise a denial.
const CROSSING: &[&str] = &["EXDEV", "EACCES", "EPERM", "EROFS"];

fn a_hard_link_to_an_outside_file_cannot_be_made(cx: &mut Cx) -> Verdict {
    let canary = cx.home_canary("hardlinked")?;
    let link = cx.ws.join("hardlink");
    let probe =
        cx.probe()?
            .step("link", "link", [&canary, &link])
            .step("write-through", "write", [&link]);
    let before = snapshot(&[&canary, &link]);

    let run = cx.run("confined", &cx.confined(probe.argv()))?;
    run.ran()?;
    run.step_fails_with("link", CROSSING)?;
    all_unchanged(cx, &before)?;

    let control = cx.run("control", &cx.control(probe.argv()))?;
    control.succeeded()?;
    all_changed(&before)
}

fn files_cannot_be_moved_across_the_boundary(cx: &mut Cx) -> Verdict {
    let canary = cx.home_canary("moved")?;
    let moved_in = cx.ws.join("moved-in");
    let inside = cx.file(&cx.ws.join("inside"), "workspace file\n")?;
    let moved_out = cx.home_path("moved-out");
    let probe = cx
        .probe()?
        .step("move-in", "rename", [&canary, &moved_in])
        .step("move-out", "rename", [&inside, &moved_out]);
    let before = snapshot(&[&canary, &moved_in, &inside, &moved_out]);

    let run = cx.run("confined", &cx.confined(probe.argv()))?;
    run.ran()?;
    run.step_fails_with("move-in", CROSSING)?;
    run.step_fails_with("move-out", CROSSING)?;
    all_unchanged(cx, &before)?;

    let control = cx.run("control", &cx.control(probe.argv()))?;
    control.succeeded()?;
    all_changed(&before)
}

fn reopening_through_proc_for_writing_is_denied(cx: &mut Cx) -> Verdict {
    let canary = cx.home_canary("reopened")?;
    let mut probe = cx.probe()?.step("outside", "reopen-rw", [&canary]);
    let mut paths = vec![canary];
    if cx.mode() == Mode::ReadOnly {
        let inside = cx.file(&cx.ws.join("inside"), "workspace file\n")?;
        probe = probe.step("workspace", "reopen-rw", [&inside]);
        paths.push(inside);
    }
    let before = snapshot(&paths.iter().map(|p| p.as_path()).collect::<Vec<_>>());

    let run = cx.run("confined", &cx.confined(probe.argv()))?;
    run.denied()?;
    run.step_denied("outside")?;
    if cx.mode() == Mode::ReadOnly {
        run.step_denied("workspace")?;
    }
    all_unchanged(cx, &before)?;

    let control = cx.run("control", &cx.control(probe.argv()))?;
    control.succeeded()?;
    all_changed(&before)
}

fn no_device_nodes_and_no_setuid_elevation(cx: &mut Cx) -> Verdict {
    let uid = cx.user().uid.to_string();
    // Only root can make device nodes at all, so only then does the control prove anything.
    if cx.user().is_root() {
        let node = cx.ws.join("null-device");
        let probe = cx.probe()?.step(
            "mknod",
            "mknod-char",
            [node.clone().into_os_string(), "1".into(), "3".into()],
        );
        let run = cx.run("confined mknod", &cx.confined(probe.argv()))?;
        run.denied()?;
        run.step_denied("mknod")?;
        cx.absent(&node)?;
        let control = cx.run("control mknod", &cx.control(probe.argv()))?;
        control.succeeded()?;
    }

    // A root-owned setuid copy of `id` would make an unprivileged user root unless no_new_privs
    // (or a nosuid mount) stops it. It can only be made when the suite runs as root.
    let root_owned = (!cx.user().is_root() && !cx.user().current).then(|| cx.dir.join("suid-id"));
    if let Some(path) = &root_owned {
        fs::copy("/usr/bin/id", path).map_err(|e| fail(format!("cannot copy /usr/bin/id: {e}")))?;
        chown(path, Some(0), Some(0)).map_err(|e| fail(format!("cannot chown {path:?}: {e}")))?;
        fs::set_permissions(path, fs::Permissions::from_mode(0o4755))
            .map_err(|e| fail(format!("cannot chmod {path:?}: {e}")))?;
    }
    let mut script = String::from(
        "cp -f /usr/bin/id ./id-copy && chmod u+s ./id-copy && echo own=$(./id-copy -u)",
    );
    if let Some(path) = &root_owned {
        script.push_str(&format!(" && echo root-owned=$({} -u)", path.display()));
    }
    let read = |stdout: &str, key: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .map(str::to_owned)
    };
    let run = cx.run("confined setuid", &cx.confined(cx.sh(&script)))?;
    run.succeeded()?;
    ensure!(
        read(&run.stdout, "own=").as_deref() == Some(uid.as_str()),
        "a setuid copy made in the sandbox ran with euid {:?}, not {uid}",
        read(&run.stdout, "own=")
    );
    if root_owned.is_some() {
        ensure!(
            read(&run.stdout, "root-owned=").as_deref() == Some(uid.as_str()),
            "a root-owned setuid binary elevated the confined command to euid {:?}",
            read(&run.stdout, "root-owned=")
        );
        let control = cx.run("control setuid", &cx.control(cx.sh(&script)))?;
        control.succeeded()?;
        ensure!(
            read(&control.stdout, "root-owned=").as_deref() == Some("0"),
            "the root-owned setuid fixture did not elevate even unconfined ({:?}): it proves nothing",
            read(&control.stdout, "root-owned=")
        );
    }
    Ok(())
}

fn a_submount_under_a_read_only_path_is_not_writable(cx: &mut Cx) -> Verdict {
    // The tmpfs is mounted outside every root, so it sits under a path that is read-only.
    let mount_point = cx.dir.join("submount");
    let mount = TmpfsMount::new(&mount_point, cx.user())
        .map_err(|e| Stop::Skip(format!("cannot mount a tmpfs fixture (needs root): {e}")))?;
    let existing = cx.file(&mount.path.join("existing"), "on the submount\n")?;
    let new = mount.path.join("new");
    let probe =
        cx.probe()?
            .step("overwrite", "write", [&existing])
            .step("create", "create", [&new]);
    let before = snapshot(&[&existing, &new]);

    let run = cx.run("confined", &cx.confined(probe.argv()))?;
    run.denied()?;
    run.step_denied("overwrite")?;
    run.step_denied("create")?;
    all_unchanged(cx, &before)?;

    let control = cx.run("control", &cx.control(probe.argv()))?;
    control.succeeded()?;
    all_changed(&before)
}

fn escaping_writable_roots_are_refused_or_ignored(cx: &mut Cx) -> Verdict {
    // A root that does not exist: creating it must not become possible.
    let missing = cx.dir.join("missing-root");
    let probe = cx.probe()?.step("mkdir", "mkdir", [&missing]).step(
        "create",
        "create",
        [missing.join("file")],
    );
    let run = cx.run(
        "confined, missing root",
        &cx.confined(probe.argv()).writable_root(&missing),
    )?;
    refused_or_denied(&run, &["mkdir", "create"], None)?;
    cx.absent(&missing)?;
    let control = cx.run("control, missing root", &cx.control(probe.argv()))?;
    control.succeeded()?;
    ensure!(
        missing.is_dir(),
        "the control run could not create {}",
        missing.display()
    );

    // A root that is a symlink to $HOME: $HOME is never writable.
    let home_link = cx.symlink(&cx.user().home.clone(), &cx.dir.join("home-link"))?;
    let via_link = cx.home_path("via-link");
    let probe = cx.probe()?.step(
        "create",
        "create",
        [home_link.join(via_link.file_name().unwrap_or_default())],
    );
    let run = cx.run(
        "confined, root symlinked to $HOME",
        &cx.confined(probe.argv()).writable_root(&home_link),
    )?;
    refused_or_denied(&run, &["create"], None)?;
    cx.absent(&via_link)?;
    let control = cx.run(
        "control, root symlinked to $HOME",
        &cx.control(probe.argv()),
    )?;
    control.succeeded()?;
    ensure!(
        via_link.is_file(),
        "the control run could not write through {}",
        home_link.display()
    );

    // `ws/../..` spelled inside the allowed area but resolving outside it.
    let allowed = cx.dir(&cx.dir.join("allowed"))?;
    let ws = cx.dir(&allowed.join("ws"))?;
    let ceiling = cx.ceiling(
        "ceiling.toml",
        &format!(
            "writable_roots_under = [{:?}]\n",
            allowed.display().to_string()
        ),
    )?;
    let escaped = cx.dir.join("escaped");
    let probe = cx.probe()?.step("create", "create", [&escaped]);
    let mut invocation = cx
        .confined(probe.argv())
        .writable_root(ws.join("..").join(".."))
        .ceiling(&ceiling);
    invocation.workspace = ws.clone();
    invocation.cwd = ws.clone();
    let run = cx.run("confined, root ws/../..", &invocation)?;
    refused_or_denied(&run, &["create"], Some("writable_roots_under"))?;
    cx.absent(&escaped)?;
    let mut control = cx.control(probe.argv());
    control.workspace = ws.clone();
    control.cwd = ws;
    let control = cx.run("control, root ws/../..", &control)?;
    control.succeeded()?;
    ensure!(
        escaped.is_file(),
        "the control run could not create {}",
        escaped.display()
    );
    Ok(())
}

/// Either the helper refused the request (naming `rule` when given), or the command ran and
/// each of `steps` was denied.
fn refused_or_denied(run: &crate::agentd::Run, steps: &[&str], rule: Option<&str>) -> Verdict {
    let refused = run.facts.as_ref().ok().and_then(|f| f.refused.clone());
    match refused {
        Some(reason) => {
            if let Some(rule) = rule {
                ensure!(
                    reason.contains(rule),
                    "the {} run was refused, but the reason does not name {rule}: {reason}",
                    run.label
                );
            }
            run.refused().map(|_| ())
        }
        None => {
            run.denied()?;
            for step in steps {
                run.step_denied(step)?;
            }
            Ok(())
        }
    }
}

/// How many confined runs race the swap: enough for the swap to land at every point of the
/// helper's check and of bwrap's mounts, few enough for a cell to take a few seconds.
const RACE_RUNS: usize = 40;
/// How many check-then-use attempts the control gets to be caught out by the swap.
const RACE_TRIES: usize = 100_000;

/// Exchanges two names atomically (`renameat2(RENAME_EXCHANGE)`); whether it did.
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> bool {
    use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
    renameat2(AT_FDCWD, a, AT_FDCWD, b, RenameFlags::RENAME_EXCHANGE).is_ok()
}

/// macOS exchanges names with `renameatx_np(RENAME_SWAP)`, which nix does not offer: the race
/// case that needs it (T14) is not a Seatbelt case, and swaps nothing here.
#[cfg(target_os = "macos")]
fn exchange(a: &Path, b: &Path) -> bool {
    let _ = (a, b);
    false
}

/// A thread exchanging two names (a directory and a symlink) with `renameat2(RENAME_EXCHANGE)`
/// as fast as it can, until stopped: each name is always there, as one or the other.
struct Swapper {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<u64>>,
}

impl Swapper {
    fn start(a: PathBuf, b: PathBuf) -> Swapper {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stopped.load(Ordering::Relaxed) {
                if exchange(&a, &b) {
                    swaps += 1;
                }
            }
            swaps
        });
        Swapper {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops the thread; how many swaps it made.
    fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().and_then(|t| t.join().ok()).unwrap_or(0)
    }
}

impl Drop for Swapper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// `PARENT/root`, a real directory, and `PARENT/swap`, a symlink to `outside`: the two names
/// the swapper exchanges. Returns the canonical path of `root`.
fn race_fixture(cx: &Cx, parent: &Path, outside: &Path) -> Result<PathBuf, Stop> {
    let parent = cx.dir(parent)?;
    let root = cx.dir(&parent.join("root"))?;
    cx.symlink(outside, &parent.join("swap"))?;
    root.canonicalize()
        .map_err(|e| fail(format!("cannot resolve {}: {e}", root.display())))
}

fn a_root_swapped_for_a_symlink_never_leads_writes_outside(cx: &mut Cx) -> Verdict {
    let outside = cx.dir(&cx.dir.join("outside"))?;
    let parent = cx.dir.join("race");
    let root = race_fixture(cx, &parent, &outside)?;
    // The helper follows no symlink in a root's name (such a root is refused), and the ceiling
    // makes `outside` a place no root may be as a second line. The race is against the helper
    // checking `root` and then using something else.
    let ceiling = cx.ceiling(
        "ceiling.toml",
        &format!(
            "writable_roots_under = [{:?}, {:?}]\n",
            cx.ws.display().to_string(),
            parent.display().to_string()
        ),
    )?;
    let swapper = Swapper::start(root.clone(), parent.join("swap"));
    let (mut refused, mut in_window, mut wrote, mut denied, mut failed) = (0, 0, 0, 0, 0);
    let mut failures = Vec::new();
    for n in 0..RACE_RUNS {
        let target = root.join(format!("f-{n}"));
        let invocation = cx
            .confined(cx.sh(&format!("echo x > {}", quote(target.as_os_str()))))
            .writable_root(&root)
            .ceiling(&ceiling);
        let run = cx
            .launcher
            .run(&format!("confined, race {n}"), &invocation)
            .map_err(Stop::from)?;
        // Only the workspace holds still long enough for the rules every run follows to be
        // checked against it; the racing root is one of two places whenever it is looked at.
        let run = cx.record(run, &invocation, &[RootBefore::of(&cx.ws)])?;
        let landed = listing(&outside);
        ensure!(
            landed.is_empty(),
            "race run {n} left {landed:?} in {}, which no writable root may reach",
            outside.display()
        );
        match run.facts.as_ref() {
            Ok(f) if f.refused.is_some() => {
                refused += 1;
                // The helper met the symlink when it opened the root.
                let reason = f.refused.as_deref().unwrap_or("");
                if reason.contains("has a symbolic link in its path") {
                    in_window += 1;
                }
            }
            Ok(f) if f.ran() && run.status == Some(0) => wrote += 1,
            Ok(f) if f.ran() => denied += 1,
            Ok(f) => {
                failed += 1;
                if let Some(failure) = &f.runner_failure {
                    failures.push(format!("{}: {}", failure.stage, failure.detail));
                }
            }
            Err(_) => failed += 1,
        }
        // Keep the report to the run that failed, if one does.
        cx.runs.pop();
    }
    let swaps = swapper.stop();
    let tally = format!(
        "{RACE_RUNS} runs against {swaps} swaps: {refused} refused ({in_window} of them met the \
         symlink when the root was opened), {wrote} wrote into the root, {denied} could not \
         write, {failed} failed to start {failures:?}"
    );
    // Refusals show the helper saw the swap; runs that ran, that it was not refusing everything.
    ensure!(
        refused > 0 && wrote + denied > 0,
        "{tally}: the swap did not reach the runs, so the race proves nothing here"
    );
    cx.note(tally);

    a_check_then_open_by_name_is_caught_out(cx)
}

/// The control: a check of the name followed by a use of the name, unconfined, under the same
/// swapping, is caught out: what it checked was the root, what it wrote was outside.
fn a_check_then_open_by_name_is_caught_out(cx: &mut Cx) -> Verdict {
    let control_outside = cx.dir(&cx.dir.join("outside-control"))?;
    let control_root = race_fixture(cx, &cx.dir.join("race-control"), &control_outside)?;
    let probe = cx.probe()?.step(
        "check-then-open",
        "toctou-open",
        [
            control_root.clone().into_os_string(),
            control_outside.clone().into_os_string(),
            RACE_TRIES.to_string().into(),
        ],
    );
    let swapper = Swapper::start(control_root.clone(), cx.dir.join("race-control/swap"));
    let control = cx.run(
        "control, check then open by name",
        &cx.control(probe.argv()),
    );
    swapper.stop();
    let control = control?;
    control.succeeded().map_err(|_| {
        fail(format!(
            "unconfined, a check-then-open by name never landed in {} in {RACE_TRIES} tries: \
             the race is not effective here, so the confined runs prove nothing",
            control_outside.display()
        ))
    })?;
    ensure!(
        !listing(&control_outside).is_empty(),
        "the control said it landed outside, yet {} is empty",
        control_outside.display()
    );
    if let Some(attempt) = control.probe.data("check-then-open") {
        cx.note(format!(
            "unconfined, the check-then-open landed outside on try {attempt}"
        ));
    }
    Ok(())
}
