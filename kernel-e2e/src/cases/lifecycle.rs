//! G. Resources and lifecycle: limits from the ceiling hold, and nothing the command started
//! outlives it, whether it ended, timed out, or tried to hide.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::agentd::{OnReady, ReadyHook, Run};
use crate::case::{Case, Cx, RunChecks, Stop, Verdict, fail, roots_before};
use crate::ensure;
use crate::error::E2eError;
use crate::facts::Exit;
use crate::fixtures::{tagged_processes, wait_gone};
use crate::git;
use crate::matrix::{CONFINED, WORKSPACE_WRITE};

pub const CASES: &[Case] = &[
    Case {
        id: "T54",
        title: "forks stop at the ceiling's process cap, counted for the command's tree alone, and leave nothing behind",
        modes: CONFINED,
        exclusive: true,
        body: a_fork_bomb_is_contained,
    },
    Case {
        id: "T91",
        title: "a fork bomb under the default process cap is held at it while the host forks freely, and ends with nothing left",
        modes: CONFINED,
        exclusive: true,
        body: a_real_fork_bomb_is_held_at_the_default_cap,
    },
    Case {
        id: "T92",
        title: "the memory cap stops a command that outgrows it (root: a cgroup of its own); a command under it, and any command as a user, is not stopped",
        modes: CONFINED,
        exclusive: true,
        body: the_memory_cap_stops_a_command_that_outgrows_it,
    },
    Case {
        id: "T55",
        title: "the ceiling's file size and address space limits stop large writes and mappings",
        modes: WORKSPACE_WRITE,
        exclusive: false,
        body: size_limits_stop_large_writes_and_mappings,
    },
    Case {
        id: "T56",
        title: "a command past its deadline is killed with its whole tree, in any mode",
        modes: CONFINED,
        exclusive: false,
        body: a_command_past_its_deadline_is_killed,
    },
    Case {
        id: "T57",
        title: "a detached background process does not outlive the command, in any mode",
        modes: CONFINED,
        exclusive: false,
        body: background_processes_do_not_outlive_the_command,
    },
    Case {
        id: "T58",
        title: "when the helper dies mid-run the command dies with it and nothing is retried",
        modes: CONFINED,
        exclusive: false,
        body: a_dead_helper_takes_the_command_with_it,
    },
    Case {
        id: "T59",
        title: "when agentd dies mid-run the helper kills the command and exits",
        modes: CONFINED,
        exclusive: false,
        body: a_dead_agentd_takes_helper_and_command_with_it,
    },
    Case {
        id: "T71",
        title: "a command holding locks on the repository and the workspace, and a FIFO in it, \
                does not stall the next run there",
        modes: WORKSPACE_WRITE,
        exclusive: false,
        body: held_locks_do_not_stall_the_next_run,
    },
];

/// Far more than the ceiling allows, yet few enough that a broken limit cannot hurt the machine.
const BOMB_SIZE: usize = 200;
const PROCESS_CEILING: usize = 32;

fn a_fork_bomb_is_contained(cx: &mut Cx) -> Verdict {
    let ceiling = cx.ceiling(
        "ceiling.toml",
        &format!("max_processes = {PROCESS_CEILING}\n"),
    )?;
    let probe = cx.probe()?.step(
        "bomb",
        "fork-count",
        [BOMB_SIZE.to_string(), cx.tag.clone()],
    );
    // Other processes of the user do not count: the cap holds the command's tree alone. A few
    // more than the cap are kept running meanwhile, as this user.
    let others = user_processes(cx, PROCESS_CEILING + 8)?;
    let run = cx.run(
        "confined",
        &cx.confined(probe.argv()).ceiling(&ceiling).timeout(30),
    )?;
    drop(others);
    run.ran()?;
    cx.no_survivors("the confined run")?;
    let forked: usize = run
        .probe
        .data("forked")
        .ok_or_else(|| fail("the bomb did not say how many processes it made"))?
        .parse()
        .map_err(|e| fail(format!("the bomb's count: {e}")))?;
    ensure!(
        forked < BOMB_SIZE,
        "the bomb made all {forked} processes despite max_processes = {PROCESS_CEILING}"
    );
    ensure!(
        forked + 8 >= PROCESS_CEILING,
        "the bomb made only {forked} processes under a cap of {PROCESS_CEILING}: the user's \
         other processes were counted against the command's cap"
    );
    run.step_fails_with("bomb", &["EAGAIN"])?;
    check_caps_reached(cx, &run, PROCESS_CEILING)?;

    // The helper is still there and still confines.
    let after = cx.run(
        "confined, after the bomb",
        &cx.confined(vec!["/bin/true".into()]),
    )?;
    after.succeeded()?;

    let control = cx.run("control", &cx.control(probe.argv()).timeout(30))?;
    control.succeeded()?;
    cx.no_survivors("the control run")?;
    ensure!(
        control.probe.data("forked") == Some(BOMB_SIZE.to_string().as_str()),
        "unconfined the bomb made only {:?} processes: the probe does not work",
        control.probe.data("forked")
    );
    Ok(())
}

/// Where the kernel counts the tree (root: a cgroup), the facts must name the process cap as
/// reached; as another user (a user namespace's `RLIMIT_NPROC`) the kernel does not say, and
/// the facts must not claim it.
fn check_caps_reached(cx: &Cx, run: &Run, cap: usize) -> Verdict {
    let facts = run.facts.as_ref().map_err(|e| fail(e.to_string()))?;
    let expected: Vec<(String, u64)> = if cx.user().is_root() {
        vec![("processes".to_owned(), cap as u64)]
    } else {
        Vec::new()
    };
    ensure!(
        facts.caps_reached == expected,
        "the facts' caps_reached is {:?}, not {expected:?}",
        facts.caps_reached
    );
    Ok(())
}

/// `count` processes of the cell's user that sleep until dropped: the user's other work.
fn user_processes(cx: &Cx, count: usize) -> Result<Vec<crate::fixtures::Sleeper>, Stop> {
    (0..count)
        .map(|_| crate::fixtures::Sleeper::start(cx.user()))
        .collect::<Result<_, _>>()
        .map_err(|e| fail(format!("starting the user's other processes: {e}")))
}

/// The process cap of a request that names none (confine-helper's).
const DEFAULT_PROCESS_CAP: usize = 2048;
/// The bomb counts as saturated once this share of the cap runs at once (9 in 10).
const SATURATED_TENTHS: usize = 9;
/// How long the bomb is given to grow to the cap.
const BOMB_GROWTH: Duration = Duration::from_secs(20);
/// Tagged processes of the run that are not counted in its cap: bwrap's outer process.
const BOMB_SLACK: usize = 1;

/// How many processes carrying `tag` were alive at one moment: those two scans of `/proc` in a
/// row both found. Each was alive from its first sighting to its second, so all of them were
/// alive together between the end of the first scan and the start of the second. One scan is
/// no snapshot: while it reads, processes of a bomb end and others start, and it would count
/// both (up to a hundred too many were seen here).
fn alive_together(tag: &str) -> usize {
    let first: std::collections::BTreeSet<u32> = tagged_processes(tag).into_iter().collect();
    tagged_processes(tag)
        .into_iter()
        .filter(|pid| first.contains(pid))
        .count()
}

fn a_real_fork_bomb_is_held_at_the_default_cap(cx: &mut Cx) -> Verdict {
    // The classic bomb, in bash, which waits and retries a fork that failed (dash gives up and
    // exits, and its bomb dies out at the cap by itself); started in the background, its
    // failures' messages dropped. The script says `ready` and waits for its stdin, while the
    // hook below watches the host.
    let script = format!(
        "bash -c ':(){{ :|:& }};: {tag}' 2>/dev/null & echo ready; read -r line; : {tag}",
        tag = cx.tag
    );
    let tag = cx.tag.clone();
    let seen = Arc::new(Mutex::new((0usize, None::<String>)));
    let watch = seen.clone();
    let hook = ReadyHook::new(move |_pids| {
        let deadline = std::time::Instant::now() + BOMB_GROWTH;
        let mut peak = 0;
        while std::time::Instant::now() < deadline {
            peak = peak.max(alive_together(&tag));
            if peak * 10 >= DEFAULT_PROCESS_CAP * SATURATED_TENTHS {
                break;
            }
        }
        // The host keeps forking: a process of the suite starts and ends meanwhile.
        let host = std::process::Command::new("/bin/true")
            .status()
            .map(|s| s.success());
        let mut seen = watch
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        seen.0 = peak.max(alive_together(&tag));
        seen.1 = match host {
            Ok(true) => None,
            other => Some(format!(
                "the host could not run /bin/true meanwhile: {other:?}"
            )),
        };
        Ok(())
    });
    let run = cx.run(
        "confined",
        &cx.confined(cx.sh(&script))
            .on_ready(OnReady::Call(hook))
            .timeout(120),
    )?;
    cx.no_survivors("the confined bomb")?;
    let (peak, host) = seen
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    if let Some(host) = host {
        return Err(fail(host));
    }
    cx.note(format!("the bomb peaked at {peak} processes"));
    ensure!(
        peak <= DEFAULT_PROCESS_CAP + BOMB_SLACK,
        "the bomb ran {peak} processes at once, past the default cap of {DEFAULT_PROCESS_CAP}"
    );
    // The control: the bomb really grew to the cap, so the cap is what held it.
    ensure!(
        peak * 10 >= DEFAULT_PROCESS_CAP * SATURATED_TENTHS,
        "the bomb reached only {peak} processes within {BOMB_GROWTH:?}: it never met the cap, so \
         holding at it proves nothing"
    );
    run.ran()?;
    check_caps_reached(cx, &run, DEFAULT_PROCESS_CAP)
}

/// What the memory hog allocates and touches, and the cap it runs under.
const HOG_BYTES: u64 = 256 << 20;
const MEMORY_CAP: u64 = 64 << 20;

fn the_memory_cap_stops_a_command_that_outgrows_it(cx: &mut Cx) -> Verdict {
    let python = cx.python_path()?;
    let hog = vec![
        python.into_os_string(),
        "-c".into(),
        format!("x = b'\\x01' * {HOG_BYTES}; print('held', len(x))").into(),
        cx.tag.clone().into(),
    ];
    let ceiling = cx.ceiling("memory.toml", &format!("max_memory = {MEMORY_CAP}\n"))?;
    let run = cx.run("confined", &cx.confined(hog.clone()).ceiling(&ceiling))?;
    let facts = run.ran()?.clone();
    cx.no_survivors("the confined hog")?;
    if cx.user().is_root() {
        // Killed: by the signal itself, or, under bwrap, as its init reports a killed child.
        let killed = matches!(facts.exit, Some(Exit::Signal(9)) | Some(Exit::Code(137)));
        ensure!(
            killed && !run.stdout.contains("held"),
            "the hog outgrew a memory cap of {MEMORY_CAP} bytes and was not stopped: exit {:?}, \
             stdout {:?}",
            facts.exit,
            run.stdout
        );
        ensure!(
            facts.caps_reached == vec![("memory_bytes".to_owned(), MEMORY_CAP)],
            "the facts' caps_reached is {:?}, not the memory cap",
            facts.caps_reached
        );
    } else {
        // Only a cgroup counts a tree's memory, and only root gets one: the cap is not applied,
        // and the facts must not say it was reached.
        ensure!(
            run.stdout.contains(&format!("held {HOG_BYTES}")) && facts.caps_reached.is_empty(),
            "as a user the memory cap cannot be applied, yet the hog did not run through: exit \
             {:?}, caps_reached {:?}",
            facts.exit,
            facts.caps_reached
        );
    }
    // The control: under the default cap (half the machine) the same hog holds its bytes.
    let control = cx.run("control", &cx.confined(hog))?;
    control.succeeded()?;
    ensure!(
        control.stdout.contains(&format!("held {HOG_BYTES}")),
        "without the small cap the hog did not hold its bytes: {:?}",
        control.stdout
    );
    Ok(())
}

const FILE_CEILING: u64 = 1 << 20;
const SPACE_CEILING: u64 = 1 << 30;

fn size_limits_stop_large_writes_and_mappings(cx: &mut Cx) -> Verdict {
    let ceiling = cx.ceiling(
        "ceiling.toml",
        &format!("max_file_size = {FILE_CEILING}\nmax_address_space = {SPACE_CEILING}\n"),
    )?;
    let big = cx.ws.join("big");
    let probe = cx
        .probe()?
        .step(
            "write",
            "write-bytes",
            [
                big.clone().into_os_string(),
                (4 * FILE_CEILING).to_string().into(),
            ],
        )
        .step("map", "map-bytes", [(2 * SPACE_CEILING).to_string()]);
    let run = cx.run("confined", &cx.confined(probe.argv()).ceiling(&ceiling))?;
    run.ran()?;
    run.step_fails_with("write", &["EFBIG"])?;
    run.step_fails_with("map", &["ENOMEM"])?;
    let size = std::fs::metadata(&big).map(|m| m.len()).unwrap_or(0);
    ensure!(
        size <= FILE_CEILING,
        "the workspace file grew to {size} bytes past max_file_size"
    );

    let control = cx.run("control", &cx.control(probe.argv()))?;
    control.succeeded()?;
    let size = std::fs::metadata(&big).map(|m| m.len()).unwrap_or(0);
    ensure!(
        size == 4 * FILE_CEILING,
        "unconfined the file reached only {size} bytes: the probe does not work"
    );
    Ok(())
}

fn a_command_past_its_deadline_is_killed(cx: &mut Cx) -> Verdict {
    let probe = cx.probe()?.step("sleep", "sleep-tree", [cx.tag.clone()]);
    for (label, invocation) in [
        ("confined", cx.confined(probe.argv()).timeout(1)),
        ("danger-full-access", cx.control(probe.argv()).timeout(1)),
    ] {
        let run = cx.run(label, &invocation)?;
        let facts = run
            .facts
            .as_ref()
            .map_err(|e| fail(format!("the {label} run has no facts: {e}")))?;
        ensure!(
            facts.timed_out,
            "the {label} run passed its 1s deadline but timed_out is false"
        );
        ensure!(
            run.stdout.contains("ready"),
            "the {label} run's command never started, so the timeout proves nothing"
        );
        // A liveness bound, not a measurement: the command would sleep on for ever; the 1 s
        // deadline and agentd's 2 s grace between TERM and KILL end it long before this.
        ensure!(
            run.elapsed < ENDS_WITHIN,
            "the {label} run did not end within {ENDS_WITHIN:?} after a 1s deadline: {:.1}s",
            run.elapsed.as_secs_f64()
        );
        cx.no_survivors(&format!("the {label} run timed out"))?;
    }
    Ok(())
}

fn background_processes_do_not_outlive_the_command(cx: &mut Cx) -> Verdict {
    let touched = cx.ws.join(format!("{}-touched", cx.tag));
    let probe = cx.probe()?.step("daemon", "daemon-touch", [&touched]);
    for (label, invocation) in [
        ("confined", cx.confined(probe.argv())),
        ("danger-full-access", cx.control(probe.argv())),
    ] {
        let run = cx.run(label, &invocation)?;
        run.succeeded()?;
        run.step_ok("daemon")?;
        cx.no_survivors(&format!("the {label} run ended"))?;
    }

    // Without agentd the daemon does survive: the probe really leaves something behind.
    let plain = cx.run_plain("control without agentd", &cx.control(probe.argv()))?;
    ensure!(
        plain.status == Some(0),
        "the daemon probe failed when run directly"
    );
    let survivors = tagged_processes(&cx.tag);
    ensure!(
        !survivors.is_empty(),
        "run directly, the probe left no background process: it does not work"
    );
    crate::fixtures::kill_tagged(&cx.tag);
    Ok(())
}

/// How soon a tree must follow the process it depends on: a liveness bound (it follows in
/// well under a second; the tree would otherwise sleep on for ever), generous for a loaded
/// machine, and below the run's own limit.
const FOLLOWS_WITHIN: Duration = Duration::from_secs(30);

/// How long a command past its deadline may take to end: a liveness bound, as
/// [`FOLLOWS_WITHIN`].
const ENDS_WITHIN: Duration = Duration::from_secs(30);

fn a_dead_helper_takes_the_command_with_it(cx: &mut Cx) -> Verdict {
    let probe = cx.probe()?.step("sleep", "sleep-tree", [cx.tag.clone()]);
    let run = cx.run(
        "confined, helper killed",
        &cx.confined(probe.argv()).on_ready(OnReady::KillHelper),
    )?;
    cx.gone_within(FOLLOWS_WITHIN, "the helper was killed")?;
    let facts = run
        .facts
        .as_ref()
        .map_err(|e| fail(format!("no facts: {e}")))?;
    let failure = facts.runner_failure.as_ref().ok_or_else(|| {
        fail(format!(
            "agentd did not report a runner failure: exit {:?}",
            facts.exit
        ))
    })?;
    ensure!(
        failure.stage == "helper-exited",
        "the runner failure is at stage {:?}, not helper-exited: {}",
        failure.stage,
        failure.detail
    );
    // Never run again, least of all unconfined: the command said ready exactly once.
    let starts = run.stdout.lines().filter(|l| *l == "ready").count();
    ensure!(starts == 1, "the command started {starts} times");
    Ok(())
}

fn a_dead_agentd_takes_helper_and_command_with_it(cx: &mut Cx) -> Verdict {
    let probe = cx.probe()?.step("sleep", "sleep-tree", [cx.tag.clone()]);
    let run = cx.run_unreported(
        "confined, agentd killed",
        &cx.confined(probe.argv()).on_ready(OnReady::KillAgentd),
    )?;
    ensure!(
        run.status.is_none(),
        "agentd was not killed: it exited {:?}",
        run.status
    );
    let helper = run
        .helper_pid
        .ok_or_else(|| fail("the helper's pid was not found"))?;
    let helper_gone = wait_gone(helper, FOLLOWS_WITHIN);
    cx.gone_within(FOLLOWS_WITHIN, "agentd was killed")?;
    ensure!(
        helper_gone,
        "the helper (pid {helper}) was still running {}s after agentd was killed",
        FOLLOWS_WITHIN.as_secs()
    );
    Ok(())
}

/// How long the second run may take while the first holds its locks: a liveness bound (normal
/// runs take a fraction of a second; a helper that waits for a lock would wait for ever).
const DESPITE_LOCKS_WITHIN: Duration = Duration::from_secs(30);

/// Whether something else holds a lock on `path`: an exclusive flock that cannot be had now.
fn locked(path: &std::path::Path) -> Result<bool, E2eError> {
    use nix::fcntl::{Flock, FlockArg};
    let file =
        std::fs::File::open(path).map_err(|e| trouble!("cannot open {}: {e}", path.display()))?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(_held) => Ok(false),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Ok(true),
        Err((_, e)) => Err(trouble!("cannot try a lock on {}: {e}", path.display())),
    }
}

fn held_locks_do_not_stall_the_next_run(cx: &mut Cx) -> Verdict {
    git::require()?;
    let ws = cx.repo(&cx.ws.clone())?;
    let locked_paths = [ws.join(".git"), ws.join(".git/index"), ws.clone()];
    let probe = cx
        .probe()?
        .step("lock-git", "lock", [&locked_paths[0]])
        .step("lock-index", "lock", [&locked_paths[1]])
        .step("lock-workspace", "lock", [&locked_paths[2]])
        .step("fifo", "fifo-hold", [ws.join("fifo")])
        .step("sleep", "sleep-tree", [cx.tag.clone()]);
    let second = cx.confined(cx.sh("git status --porcelain >/dev/null; echo second > second-ran"));
    let second_roots = roots_before(&second);
    // While the first command waits, holding everything: check the locks are really held (else
    // the second run proves nothing), make the second run, then cancel the first, as an
    // interrupt would.
    let made: Arc<Mutex<Option<Run>>> = Arc::new(Mutex::new(None));
    let hook = {
        let (launcher, second, made) = (cx.launcher.clone(), second.clone(), made.clone());
        ReadyHook::new(move |pids| {
            for path in &locked_paths {
                if !locked(path)? {
                    return Err(trouble!(
                        "the first command said it held a lock on {}, yet the host can take one",
                        path.display()
                    ));
                }
            }
            let run = launcher.run("second, while the first holds its locks", &second)?;
            if let Ok(mut slot) = made.lock() {
                *slot = Some(run);
            }
            kill(Pid::from_raw(pids.agentd as i32), Signal::SIGTERM)
                .map_err(|e| trouble!("cannot interrupt the first agentd: {e}"))
        })
    };
    let first = cx.run(
        "first, holding locks",
        &cx.confined(probe.argv()).on_ready(OnReady::Call(hook)),
    )?;
    let second_run = made
        .lock()
        .ok()
        .and_then(|mut slot| slot.take())
        .ok_or_else(|| fail("the second run was never made"))?;
    let second_run = cx.record(second_run, &second, &second_roots)?;
    for step in ["lock-git", "lock-index", "lock-workspace", "fifo"] {
        first.step_ok(step)?;
    }
    second_run.succeeded()?;
    ensure!(
        second_run.elapsed < DESPITE_LOCKS_WITHIN,
        "the second run took {:.1}s while the first held its locks",
        second_run.elapsed.as_secs_f64()
    );
    ensure!(
        ws.join("second-ran").is_file(),
        "the second run succeeded but its file is not in the workspace"
    );
    let facts = first.ran()?;
    ensure!(
        matches!(facts.exit, Some(Exit::Signal(_))),
        "the first run was interrupted, yet its command ended with {:?}",
        facts.exit
    );
    cx.gone_within(FOLLOWS_WITHIN, "the first run was interrupted")
}
