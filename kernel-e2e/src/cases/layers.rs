//! I. Defense in depth: what one layer alone does not cover, the other must.
//!
//! Mount permissions do not cover FIFOs (the kernel skips the read-only mount check for special
//! files), so bwrap and the helper's own namespaces need Landlock inside; Landlock does not see System V IPC (keyed, not named
//! by a path) or the scheduling of other processes, so the seccomp filter denies those where no
//! namespace isolates them. Each case attacks a host object of the same user, checks it on the
//! host, and repeats the attack unconfined as a control that must change it.

use std::ffi::OsString;
use std::fs::OpenOptions;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::process::Command;

use crate::case::{Case, Cx, RunChecks, Stop, Verdict, fail};
use crate::ensure;
use crate::fixtures::CanaryProcess;
use crate::matrix::{Backend, CONFINED, WORKSPACE_WRITE};
use crate::probe::{Probe, Report};
use crate::users::Identity;

pub const CASES: &[Case] = &[
    Case {
        id: "T80",
        title: "a FIFO outside the writable roots cannot be written, on every backend and in read-only too",
        modes: CONFINED,
        exclusive: false,
        body: an_outside_fifo_cannot_be_written,
    },
    Case {
        id: "T81",
        title: "System V shared memory, message queues and semaphores of outside processes stay untouched",
        modes: CONFINED,
        exclusive: false,
        body: outside_sysv_ipc_is_untouched,
    },
    Case {
        id: "T82",
        title: "the priority, scheduling class, CPUs and I/O class of an outside process cannot be changed",
        modes: CONFINED,
        exclusive: false,
        body: outside_scheduling_is_untouched,
    },
    Case {
        id: "T89",
        title: "a sandbox the command cannot start in is a runner failure: nothing runs, and the \
                command is not blamed",
        modes: WORKSPACE_WRITE,
        exclusive: false,
        body: an_unbuilt_sandbox_is_a_runner_failure,
    },
];

/// Runs `probe` on the host as the cell's user, unconfined: to make and read fixtures.
fn on_host(cx: &Cx, probe: &Probe) -> Result<Report, Stop> {
    run_on_host(cx.user(), &probe.argv())
}

fn run_on_host(user: &Identity, argv: &[OsString]) -> Result<Report, Stop> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| fail("the probe has no command line"))?;
    let mut command = Command::new(program);
    command.args(args);
    user.apply(&mut command);
    let output = command
        .output()
        .map_err(|e| fail(format!("cannot run the probe on the host: {e}")))?;
    ensure!(
        output.status.success(),
        "the probe failed on the host: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(Report::parse(&String::from_utf8_lossy(&output.stdout)))
}

fn an_outside_fifo_cannot_be_written(cx: &mut Cx) -> Verdict {
    let fifo = cx.home_path("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600))
        .map_err(|e| fail(format!("mkfifo {}: {e}", fifo.display())))?;
    cx.user()
        .give(&fifo)
        .map_err(|e| fail(format!("chown {}: {e}", fifo.display())))?;
    // The host holds the read end, as an editor or player listening on a control pipe would, so
    // a write does not block: it lands or it is denied.
    let mut reader = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(&fifo)
        .map_err(|e| fail(format!("opening {} for reading: {e}", fifo.display())))?;
    let mut drained = || {
        let mut buf = Vec::new();
        match reader.read_to_end(&mut buf) {
            Ok(_) => buf,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => buf,
            Err(_) => buf,
        }
    };
    let probe = cx.probe()?.step("fifo", "fifo-write", [&fifo]);
    let run = cx.run("confined", &cx.confined(probe.argv()))?;
    run.denied()?;
    run.step_denied("fifo")?;
    let got = drained();
    ensure!(
        got.is_empty(),
        "the outside FIFO received {:?} from the confined command",
        String::from_utf8_lossy(&got)
    );
    let control = cx.run("control", &cx.control(probe.argv()))?;
    control.succeeded()?;
    ensure!(
        !drained().is_empty(),
        "the control run wrote nothing into the FIFO: the probe does not work"
    );
    Ok(())
}

/// A key no other case or process uses: derived from the case's tag.
fn ipc_key(cx: &Cx, salt: u32) -> String {
    let hash = cx.tag.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    format!("0x{:08x}", (hash ^ salt) & 0x7fff_ffff)
}

/// Removes a case's System V objects when it ends, pass or fail: they outlive processes.
struct IpcObjects {
    user: Identity,
    remove: Vec<OsString>,
}

impl Drop for IpcObjects {
    fn drop(&mut self) {
        let _ = run_on_host(&self.user, &self.remove);
    }
}

fn outside_sysv_ipc_is_untouched(cx: &mut Cx) -> Verdict {
    let (shm, msg, sem) = (ipc_key(cx, 1), ipc_key(cx, 2), ipc_key(cx, 3));
    let state = |cx: &Cx| -> Result<[String; 3], Stop> {
        let probe = cx
            .probe()?
            .step("shm", "shm-read", [&shm])
            .step("msg", "msg-count", [&msg])
            .step("sem", "sem-get", [&sem]);
        let report = on_host(cx, &probe)?;
        let get = |key: &str| report.data(key).unwrap_or("").to_owned();
        Ok([get("shm"), get("msg"), get("sem")])
    };
    let create = cx
        .probe()?
        .step("shm", "shm-create", [&shm])
        .step("shm-fill", "shm-write", [shm.as_str(), "canary"])
        .step("msg", "msg-create", [&msg])
        .step("sem", "sem-create", [&sem]);
    on_host(cx, &create)?;
    let _objects = IpcObjects {
        user: cx.user().clone(),
        remove: cx
            .probe()?
            .step("shm", "ipc-remove", ["shm", shm.as_str()])
            .step("msg", "ipc-remove", ["msg", msg.as_str()])
            .step("sem", "ipc-remove", ["sem", sem.as_str()])
            .argv(),
    };
    let before = state(cx)?;
    let attack = cx
        .probe()?
        .step("shm", "shm-write", [shm.as_str(), "overwritten"])
        .step("msg", "msg-send", [&msg])
        .step("sem", "sem-set", [sem.as_str(), "42"])
        .argv();
    let run = cx.run("confined", &cx.confined(attack.clone()))?;
    // Under bwrap and the helper's own namespaces the command has its own IPC namespace, where
    // the keys do not exist (ENOENT); under Landlock the seccomp filter refuses the calls (EPERM).
    for step in ["shm", "msg", "sem"] {
        run.step_fails_with(step, &["ENOENT", "EPERM"])?;
    }
    let after = state(cx)?;
    ensure!(
        after == before,
        "the confined command changed outside IPC objects: before {before:?}, after {after:?}"
    );
    let control = cx.run("control", &cx.control(attack))?;
    control.succeeded()?;
    let changed = state(cx)?;
    ensure!(
        changed == ["overwritten", "1", "42"],
        "the control run did not change the IPC objects ({changed:?}): the probe does not work"
    );
    Ok(())
}

/// What the scheduling attack would change, as the host sees it.
fn sched_state(cx: &Cx, pid: u32) -> Result<String, Stop> {
    let pid = pid.to_string();
    let report = on_host(cx, &cx.probe()?.step("state", "sched-state", [&pid]))?;
    report
        .data("state")
        .map(str::to_owned)
        .ok_or_else(|| fail("the probe printed no scheduling state"))
}

fn scheduling_attack(cx: &Cx, pid: u32) -> Result<Vec<OsString>, Stop> {
    let pid = pid.to_string();
    Ok(cx
        .probe()?
        .step("nice", "set-priority", [&pid])
        .step("affinity", "set-affinity", [&pid])
        .step("idle", "sched-idle", [&pid])
        .step("ioprio", "ioprio-idle", [&pid])
        .argv())
}

fn outside_scheduling_is_untouched(cx: &mut Cx) -> Verdict {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    if cpus < 2 {
        cx.note("one CPU: the affinity change cannot be observed, the other three are checked");
    }
    let target = CanaryProcess::spawn(cx.user())
        .map_err(|e| fail(format!("cannot start a canary process: {e}")))?;
    let before = sched_state(cx, target.pid())?;
    let run = cx.run(
        "confined",
        &cx.confined(scheduling_attack(cx, target.pid())?),
    )?;
    // EPERM from the seccomp filter; ESRCH where the pid does not exist in the command's own pid
    // namespace (bwrap's, the helper's own).
    for step in ["nice", "affinity", "idle", "ioprio"] {
        run.step_fails_with(step, &["EPERM", "ESRCH"])?;
    }
    let after = sched_state(cx, target.pid())?;
    ensure!(
        after == before,
        "the confined command changed an outside process: before {before}, after {after}"
    );
    let control = cx.run("control", &cx.control(scheduling_attack(cx, target.pid())?))?;
    control.succeeded()?;
    let changed = sched_state(cx, target.pid())?;
    ensure!(
        changed.contains("nice=19")
            && changed.contains("policy=5")
            && changed.contains("ioclass=3"),
        "the control run did not change the canary ({before} → {changed}): the probe does not work"
    );
    ensure!(
        cpus < 2 || changed.contains("cpus=0 "),
        "the control run did not pin the canary to CPU 0 ({changed})"
    );
    Ok(())
}

/// The working directory is hidden inside the sandbox by a denied read, so the command cannot
/// start there. bwrap builds the sandbox in processes of its own before the command starts:
/// its `--chdir` fails and it exits 1 after the namespaces exist, and `enter` never reports. The
/// namespace backend's command fails its own `chdir` before `execve`. Either way the facts must
/// say the runner failed, at the stage where it did (`namespace` under bwrap, `chdir` under
/// the namespace backend), rather than pass an exit status off as the command's (before the
/// helper could tell, the command seemed to exit 1 under bwrap).
fn an_unbuilt_sandbox_is_a_runner_failure(cx: &mut Cx) -> Verdict {
    let (stage, said) = match cx.cell.backend {
        Backend::Bwrap => ("namespace", "could not build the sandbox"),
        Backend::Namespaces => ("chdir", "before the command's execve"),
        _ => {
            return Err(Stop::Skip(
                "only the namespace backends hide the working directory behind a denied read \
                 before the command starts"
                    .into(),
            ));
        }
    };
    let marker = cx.ws.join("ran");
    let script = format!("echo ran > '{}'", marker.display());

    // The directory bwrap is told to start in, hidden inside the sandbox by a denied read.
    let hidden = cx.dir(&cx.ws.join("hidden/inside"))?;
    let denied = cx.ws.join("hidden");
    // Control: the same command, started in the workspace, runs (under bwrap through `enter`).
    let control = cx.run(
        "control",
        &cx.confined(cx.sh(&script)).deny_read(denied.clone()),
    )?;
    control.succeeded()?;
    ensure!(
        marker.exists(),
        "the control run succeeded but did not write {}: the check cannot fail",
        marker.display()
    );
    let layers = control
        .facts
        .as_ref()
        .ok()
        .and_then(|f| f.enforcement.as_ref())
        .map(|e| e.layers.clone())
        .unwrap_or_default();
    // Whether bwrap's sandbox gets the Landlock layer is the kernel's to say (judged without the
    // helper): where the kernel has Landlock, a sandbox without the layer is the helper's fault,
    // not a reason to skip.
    if let Err(why) = crate::available::landlock_abi() {
        return Err(Stop::Skip(format!(
            "{why}: bwrap runs without the Landlock layer here, so nothing inside reports that \
             the sandbox was built"
        )));
    }
    ensure!(
        layers.iter().any(|l| l == "landlock"),
        "the kernel has Landlock, but the sandbox has no Landlock layer (layers {layers:?})"
    );
    std::fs::remove_file(&marker)
        .map_err(|e| fail(format!("removing {}: {e}", marker.display())))?;

    let mut unbuilt = cx.confined(cx.sh(&script)).deny_read(denied);
    unbuilt.cwd = hidden;
    let run = cx.run("confined", &unbuilt)?;
    ensure!(
        !marker.exists(),
        "the command ran although it could not start in the sandbox"
    );
    let facts = run.facts.as_ref().map_err(|e| fail(e.to_string()))?;
    let failure = facts.runner_failure.as_ref().ok_or_else(|| {
        fail(format!(
            "the command could not start in the sandbox, yet the facts report no runner failure but exit \
             {:?}",
            facts.exit
        ))
    })?;
    ensure!(
        failure.stage == stage && failure.detail.contains(said),
        "the runner failure at stage {:?} is not the {stage} stage's, saying {said:?}: {}",
        failure.stage,
        failure.detail
    );
    ensure!(
        run.status == Some(125),
        "agentd exited {:?}, not 125 (the command did not run)",
        run.status
    );
    Ok(())
}
