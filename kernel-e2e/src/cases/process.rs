//! F. Process and kernel-interface escapes: signals, terminals, privileges, namespaces, mounts,
//! and code that never touched the disk.

use super::checks::{all_changed, all_unchanged, skip_unless, snapshot, sysctl};
use crate::case::{Case, Cx, RunChecks, Stop, Verdict, fail};
use crate::ensure;
use crate::fixtures::{CanaryProcess, Liveness, wait_gone};
use crate::matrix::Backend;
use crate::matrix::CONFINED;
use crate::probe::Outcome;
use crate::tools::find_tool;

pub const CASES: &[Case] = &[
    Case {
        id: "T43",
        title: "signals cannot reach agentd, the helper, or another process of the same user",
        modes: CONFINED,
        exclusive: false,
        body: signals_cannot_reach_outside_processes,
    },
    Case {
        id: "T46",
        title: "TIOCSTI and TIOCLINUX are refused, also with high bits set in the command",
        modes: CONFINED,
        exclusive: false,
        body: terminal_injection_is_refused,
    },
    Case {
        id: "T48",
        title: "the command runs with no_new_privs, a seccomp filter and no capabilities",
        modes: CONFINED,
        exclusive: false,
        body: the_command_runs_without_privileges,
    },
    Case {
        id: "T49",
        title: "nested user namespaces cannot be made, so nothing can be remounted writable",
        modes: CONFINED,
        exclusive: false,
        body: nested_namespaces_cannot_be_made,
    },
    Case {
        id: "T50",
        title: "mount-API syscalls are refused and clone3 answers ENOSYS",
        modes: CONFINED,
        exclusive: false,
        body: mount_syscalls_are_refused,
    },
    Case {
        id: "T52",
        title: "code executed from memory is still confined",
        modes: CONFINED,
        exclusive: false,
        body: code_run_from_memory_is_still_confined,
    },
    Case {
        id: "T90",
        title: "pidfd_getfd, file handles (name_to_handle_at, open_by_handle_at), userfaultfd \
                (the call and /dev/userfaultfd) and memfd_secret are refused",
        modes: CONFINED,
        exclusive: false,
        body: handles_fault_handling_and_secret_memory_are_refused,
    },
    Case {
        id: "T93",
        title: "the namespace backend's shim, the sandbox's first process, keeps its descriptors \
                (the host's root among them), its root, its working directory and its memory \
                from the command",
        modes: CONFINED,
        exclusive: false,
        body: the_shim_is_closed_to_its_command,
    },
];

/// How long a canary the control killed may take to exit: a liveness bound, not a timing.
const CANARY_EXIT_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

fn signals_cannot_reach_outside_processes(cx: &mut Cx) -> Verdict {
    let mut canary = CanaryProcess::spawn(cx.user())
        .map_err(|e| fail(format!("cannot start a canary process: {e}")))?;
    let pid = canary.pid().to_string();
    // agentd and the helper get signal 0 and SIGWINCH (ignored by default): the same permission
    // check as SIGKILL, without wrecking the run if the sandbox lets them through.
    let probe = cx
        .probe()?
        .op("wait-pids", Vec::<String>::new())
        .step("probe-agentd", "kill", ["0", "@agentd"])
        .step("winch-agentd", "kill", ["WINCH", "@agentd"])
        .step("probe-helper", "kill", ["0", "@helper"])
        .step("winch-helper", "kill", ["WINCH", "@helper"])
        .step("stop-canary", "kill", ["STOP", pid.as_str()])
        .step("kill-canary", "kill", ["KILL", pid.as_str()]);
    let run = cx.run("confined", &cx.confined(probe.argv()).interactive())?;
    run.ran()?;
    // EPERM from Landlock's signal scoping; ESRCH when the pid does not exist in the command's
    // own pid namespace (bwrap's, the helper's own).
    for step in [
        "probe-agentd",
        "winch-agentd",
        "probe-helper",
        "winch-helper",
        "stop-canary",
        "kill-canary",
    ] {
        run.step_fails_with(step, &["EPERM", "ESRCH"])?;
    }
    let state = canary.liveness();
    ensure!(
        state == Liveness::Running,
        "the canary process is {state:?} after the confined run"
    );

    let control_probe = cx
        .probe()?
        .op("wait-pids", Vec::<String>::new())
        .step("winch-agentd", "kill", ["WINCH", "@agentd"])
        .step("stop-canary", "kill", ["STOP", pid.as_str()])
        .step("kill-canary", "kill", ["KILL", pid.as_str()]);
    let control = cx.run("control", &cx.control(control_probe.argv()).interactive())?;
    control.succeeded()?;
    // The kill was sent; the canary's exit is the kernel's to finish: wait for it (bounded),
    // then judge.
    let _ = wait_gone(canary.pid(), CANARY_EXIT_LIMIT);
    let state = canary.liveness();
    ensure!(
        state == Liveness::Dead,
        "the control run could not kill the canary ({state:?}): the probe does not work"
    );
    Ok(())
}

fn terminal_injection_is_refused(cx: &mut Cx) -> Verdict {
    let legacy = sysctl("/proc/sys/dev/tty/legacy_tiocsti").unwrap_or_else(|| "1".into());
    skip_unless(
        legacy == "1" || cx.user().is_root(),
        "the kernel refuses TIOCSTI to everyone but root (dev.tty.legacy_tiocsti=0)",
    )?;
    let probe = cx.probe()?.op("tiocsti", Vec::<String>::new());
    let run = cx.run("confined", &cx.confined(probe.argv()))?;
    run.denied()?;
    // EACCES: where the sandbox does not even let the command open a pseudo-terminal.
    for step in ["tiocsti", "tiocsti-high-bits", "tioclinux"] {
        run.step_fails_with(step, &["EPERM", "EACCES"])?;
    }
    let control = cx.run("control", &cx.control(probe.argv()))?;
    control.ran()?;
    control.step_ok("tiocsti")?;
    control.step_ok("tiocsti-high-bits")?;
    control.step_reached_kernel("tioclinux")?;
    Ok(())
}

fn the_command_runs_without_privileges(cx: &mut Cx) -> Verdict {
    let probe = cx
        .probe()?
        .op("status", Vec::<String>::new())
        .op("x32-getpid", Vec::<String>::new());
    let run = cx.run("confined", &cx.confined(probe.argv()))?;
    run.ran()?;
    let field = |key: &str| run.probe.data(key).unwrap_or("(absent)").to_owned();
    ensure!(
        field("NoNewPrivs") == "1",
        "NoNewPrivs is {}, not 1",
        field("NoNewPrivs")
    );
    ensure!(
        field("Seccomp") == "2",
        "Seccomp is {}, not 2 (filter mode)",
        field("Seccomp")
    );
    for key in ["CapEff", "CapPrm"] {
        let value = field(key);
        ensure!(
            u64::from_str_radix(&value, 16) == Ok(0),
            "{key} is {value}, not 0"
        );
    }
    let control = cx.run("control", &cx.control(probe.argv()))?;
    control.ran()?;
    ensure!(
        control.probe.data("NoNewPrivs").is_some(),
        "the control run could not read its status"
    );
    // x32 syscalls arrive with the x86-64 audit arch and bit 30 set in the number; a filter
    // keyed on x86-64 numbers alone would miss them. Only a kernel with x32 can show it.
    if control.step("x32-getpid")? == &Outcome::Ok {
        let outcome = run.step("x32-getpid")?;
        ensure!(
            *outcome != Outcome::Ok,
            "an x32 syscall got through the filter ({outcome})"
        );
    }
    Ok(())
}

fn nested_namespaces_cannot_be_made(cx: &mut Cx) -> Verdict {
    let probe = cx
        .probe()?
        .op("unshare-user", Vec::<String>::new())
        .op("clone-newuser", Vec::<String>::new());
    let run = cx.run("confined", &cx.confined(probe.argv()))?;
    run.denied()?;
    run.step_fails_with("unshare-user", &["EPERM"])?;
    run.step_fails_with("clone-newuser", &["EPERM"])?;
    let control = cx.run("control", &cx.control(probe.argv()))?;
    control.succeeded()?;

    // Real tools trying to get a writable view of the host inside a nested namespace.
    let mut tools = Vec::new();
    if let Some(bwrap) = find_tool("bwrap") {
        tools.push(("nested bwrap", bwrap, vec!["--dev-bind", "/", "/", "--"]));
    }
    if let Some(unshare) = find_tool("unshare") {
        tools.push(("unshare -rm", unshare, vec!["-r", "-m", "--"]));
    }
    for (name, tool, args) in tools {
        let canary = cx.home_canary(&name.replace(' ', "-"))?;
        let mut argv: Vec<std::ffi::OsString> = vec![tool.into()];
        argv.extend(args.into_iter().map(Into::into));
        argv.extend(cx.sh(&format!(
            "mount -o remount,rw / 2>/dev/null; echo escaped > {}",
            canary.display()
        )));
        let before = snapshot(&[&canary]);
        let run = cx.run(&format!("confined {name}"), &cx.confined(argv.clone()))?;
        let facts = run.ran()?;
        ensure!(
            facts.exit != Some(crate::facts::Exit::Code(0)),
            "{name} succeeded inside the sandbox"
        );
        all_unchanged(cx, &before)?;
        let control = cx.run(&format!("control {name}"), &cx.control(argv))?;
        control.succeeded()?;
        all_changed(&before)?;
    }
    Ok(())
}

const MOUNT_API: [&str; 10] = [
    "mount",
    "umount2",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "pivot_root",
];

fn mount_syscalls_are_refused(cx: &mut Cx) -> Verdict {
    let probe = cx
        .probe()?
        .op("mount-api", Vec::<String>::new())
        .op("clone3", Vec::<String>::new());
    let run = cx.run("confined", &cx.confined(probe.argv()))?;
    run.denied()?;
    run.step_denied("private-mount-namespace")?;
    // The arguments name paths that do not exist: a kernel that got to look would say ENOENT or
    // EINVAL; only a filter (or a missing privilege) answers first.
    for call in MOUNT_API {
        run.step_fails_with(call, &["EPERM", "ENOSYS", "EACCES"])?;
    }
    run.step_fails_with("clone3", &["ENOSYS"])?;

    let control = cx.run("control", &cx.control(probe.argv()))?;
    control.ran()?;
    control.step_ok("private-mount-namespace")?;
    for call in MOUNT_API {
        control.step_reached_kernel(call)?;
    }
    control.step_reached_kernel("clone3")?;
    Ok(())
}

fn code_run_from_memory_is_still_confined(cx: &mut Cx) -> Verdict {
    let canary = cx.home_canary("memfd")?;
    let marker = format!("{}-payload-ran", cx.tag);
    let script = format!("echo {marker}; echo escaped > {}", canary.display());
    let probe = cx.probe()?.op("memfd-exec", [script]);
    let before = snapshot(&[&canary]);

    let run = cx.run("confined", &cx.confined(probe.argv()))?;
    // Refusing to execute from memory at all is stricter than needed and fine; if it runs, the
    // payload is as confined as its parent.
    if !run.step("memfd-exec")?.is_denial() {
        run.step_ok("memfd-exec")?;
        ensure!(
            run.stdout.contains(&marker),
            "the payload did not run from memory in the sandbox"
        );
        run.denied()?;
    }
    all_unchanged(cx, &before)?;

    let control = cx.run("control", &cx.control(probe.argv()))?;
    control.succeeded()?;
    all_changed(&before)
}

/// The probe's steps for calls the filter refuses whatever the command: (step, system call).
const REFUSED_CALLS: [(&str, &str); 5] = [
    ("pidfd-getfd", "pidfd_getfd"),
    ("name-to-handle", "name_to_handle_at"),
    ("open-by-handle", "open_by_handle_at"),
    ("userfaultfd", "userfaultfd"),
    ("memfd-secret", "memfd_secret"),
];

fn handles_fault_handling_and_secret_memory_are_refused(cx: &mut Cx) -> Verdict {
    let mut probe = cx.probe()?;
    for (step, _) in REFUSED_CALLS {
        probe = probe.op(step, Vec::<String>::new());
    }
    let probe = probe.op("userfaultfd-device", Vec::<String>::new());
    let run = cx.run("confined", &cx.confined(probe.argv()))?;
    run.denied()?;
    for (step, _) in REFUSED_CALLS {
        run.step_fails_with(step, &["EPERM"])?;
    }
    // The sandbox's own /dev (bwrap's, the helper's own) has no userfaultfd device; under Landlock the filter answers the ioctl,
    // and only root could open the device in the first place.
    run.step_fails_with("userfaultfd-device", &["EPERM", "ENOENT", "EACCES"])?;

    // The control: unconfined, the kernel itself answers each call — the call succeeds, or
    // fails with the kernel's own error (EBADF for the handle's bogus mount descriptor, ENOSYS
    // for secret memory the kernel has off), never the filter's EPERM.
    let control = cx.run("control", &cx.control(probe.argv()))?;
    control.ran()?;
    for (step, call) in REFUSED_CALLS {
        let outcome = control.step(step)?;
        if outcome.errno() == Some("EPERM") && step == "open-by-handle" && !cx.user().is_root() {
            cx.note(format!(
                "this kernel refuses {call} to {} itself (CAP_DAC_READ_SEARCH checked before \
                 the descriptor): only the root run tells the filter's EPERM from the kernel's",
                cx.user().name
            ));
            continue;
        }
        ensure!(
            outcome.errno() != Some("EPERM"),
            "unconfined, {call} {outcome}: the probe cannot tell the filter's refusal from the \
             kernel's"
        );
    }
    let device = control.step("userfaultfd-device")?;
    if *device == Outcome::Ok {
        if cx.cell.backend == Backend::Landlock {
            run.step_fails_with("userfaultfd-device", &["EPERM"])?;
        }
    } else {
        cx.note(format!(
            "unconfined, USERFAULTFD_IOC_NEW on /dev/userfaultfd {device} (it needs root and \
             the device): only the refusal is shown, not the control"
        ));
    }
    Ok(())
}

/// Under the namespace backend the command's shim is the first process of the sandbox's pid
/// namespace, `/proc/1` to the command, and holds what the command must not reach: a descriptor
/// of the host's root (the first passed one, 6, for listed sockets), the plan's descriptors of
/// host directories, and the host itself as its working directory for one `connect`. Three
/// things close it, each alone: the shim is not dumpable; it is outside the command's Landlock
/// domain, which keeps the command from every process outside it; and it holds capabilities
/// (in its user namespace) that the command dropped, which the kernel does not let a process
/// with fewer inspect. (Made dumpable, and with the command's Landlock layer left out, the
/// shim stayed closed by the third.) So none of its `/proc` links or its environment open to the
/// command, and it cannot be traced. A root command may list the numbers of its descriptors
/// (the directory is root's), not follow one. The control, in the same run: the command's own
/// `/proc/self` answers the same probes, so a refusal is the shim's. (Under bwrap the first
/// process is bwrap's own, which holds only stdio; under Landlock there is no pid namespace, and
/// `/proc/1` is the host's.)
fn the_shim_is_closed_to_its_command(cx: &mut Cx) -> Verdict {
    if cx.cell.backend != Backend::Namespaces {
        return Err(Stop::Skip(
            "only the namespace backend's shim is the sandbox's first process".into(),
        ));
    }
    let probe = cx
        .probe()?
        .step("own-fd", "readlink", ["/proc/self/fd/0"])
        .step("own-root", "listdir", ["/proc/self/root/"])
        .step("shim-fd", "readlink", ["/proc/1/fd/6"])
        .step("shim-host", "listdir", ["/proc/1/fd/6/"])
        .step("shim-root", "listdir", ["/proc/1/root/"])
        .step("shim-cwd", "readlink", ["/proc/1/cwd"])
        .step("shim-environ", "read", ["/proc/1/environ"])
        .step("shim-trace", "ptrace-seize", ["1"]);
    let run = cx.run("confined", &cx.confined(probe.argv()))?;
    run.ran()?;
    run.step_ok("own-fd")?;
    run.step_ok("own-root")?;
    for step in [
        "shim-fd",
        "shim-host",
        "shim-root",
        "shim-cwd",
        "shim-environ",
        "shim-trace",
    ] {
        run.step_fails_with(step, &["EACCES", "EPERM"])?;
    }
    Ok(())
}
