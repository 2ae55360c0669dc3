//! C. Secrets and process introspection: what agentd and the helper hold stays out of reach.

use super::checks::sysctl;
use crate::case::{Case, Cx, RunChecks, Verdict, fail};
use crate::ensure;
use crate::facts::Exit;
use crate::fixtures::{CanaryProcess, Liveness};
use crate::matrix::CONFINED;

pub const CASES: &[Case] = &[
    Case {
        id: "T23",
        title: "secrets in agentd's environment never reach the command, in any mode; asked for, \
                they are refused",
        modes: CONFINED,
        exclusive: false,
        body: secrets_never_reach_the_command,
    },
    Case {
        id: "T24",
        title: "the command cannot read agentd's or the helper's process state",
        modes: CONFINED,
        exclusive: false,
        body: agentd_and_helper_state_is_unreadable,
    },
    Case {
        id: "T25",
        title: "the command cannot trace other processes, read their memory, or use the keyring",
        modes: CONFINED,
        exclusive: false,
        body: no_tracing_memory_reads_or_keyring,
    },
    Case {
        id: "T27",
        title: "a crashing command leaves no core dump",
        modes: CONFINED,
        exclusive: false,
        body: a_crash_leaves_no_core_dump,
    },
];

fn secrets_never_reach_the_command(cx: &mut Cx) -> Verdict {
    let tag = cx.tag.clone();
    let secret = |n: u32| format!("{tag}-secret-{n}");
    let secrets = [
        ("X_API_KEY", secret(1)),
        ("AWS_SECRET_ACCESS_KEY", secret(2)),
        ("GITHUB_TOKEN", secret(3)),
        ("DB_PASSWORD", secret(4)),
        ("SSH_AUTH_SOCK", format!("/tmp/{}-ssh/agent.1", cx.tag)),
        (
            "DBUS_SESSION_BUS_ADDRESS",
            format!("unix:path=/tmp/{}-bus", cx.tag),
        ),
        // Not a secret by name, but on no allow-list either.
        ("AGENTD_E2E_UNLISTED", secret(5)),
        // `LC_*` carries arbitrary variables through ssh's AcceptEnv: only the locale
        // categories pass, and only with a locale name as their value.
        ("LC_DB_PASS", secret(6)),
        ("LC_ALL", secret(7)),
        ("DB_PASSWD", secret(8)),
        ("AWS_CREDENTIAL_BLOB", secret(9)),
        ("NPM_AUTH", secret(10)),
    ];
    // The control in the same runs: locale variables with locale names still arrive.
    let kept = [("TZ", "UTC"), ("LC_MESSAGES", "C"), ("LANG", "C.UTF-8")];
    let with_env = |mut invocation: crate::agentd::Invocation| {
        for (name, value) in secrets.iter().map(|(n, v)| (*n, v.as_str())).chain(kept) {
            invocation = invocation.env(name, value);
        }
        invocation
    };
    let argv = vec!["/usr/bin/env".into()];
    let confined = with_env(cx.confined(argv.clone()));
    let control = with_env(cx.control(argv.clone()));
    for (label, invocation) in [("confined", confined), ("danger-full-access", control)] {
        let run = cx.run(label, &invocation)?;
        run.succeeded()?;
        let names: Vec<&str> = run
            .stdout
            .lines()
            .filter_map(|l| l.split_once('=').map(|(n, _)| n))
            .collect();
        ensure!(
            names.contains(&"PATH"),
            "the {label} run's environment has no PATH: {names:?}"
        );
        for (name, value) in kept {
            ensure!(
                run.stdout.lines().any(|l| l == format!("{name}={value}")),
                "the {label} run lost the allow-listed {name}"
            );
        }
        for (name, value) in &secrets {
            ensure!(
                !names.contains(name) && !run.stdout.contains(value.as_str()),
                "the {label} run's environment carries {name} (or its value)"
            );
        }
    }

    explicit_variables_are_refused(cx)
}

/// Asked for explicitly (`--env`), the same variables are not dropped without a word: the
/// helper refuses the request, naming the variable and, for a secret, how to allow it.
fn explicit_variables_are_refused(cx: &mut Cx) -> Verdict {
    let tag = cx.tag.clone();
    let secret = |n: u32| format!("{tag}-secret-{n}");
    let argv = vec!["/usr/bin/env".into()];
    let asked = [
        ("LC_DB_PASS", "env_allow"),
        ("DB_PASSWD", "env_allow"),
        ("AWS_CREDENTIAL_BLOB", "env_allow"),
        ("NPM_AUTH", "env_allow"),
        ("LC_ALL", "locale name"),
    ];
    for (i, (name, rule)) in asked.into_iter().enumerate() {
        let value = secret(20 + i as u32);
        let label = format!("explicit {name}");
        let run = cx.run(&label, &cx.confined(argv.clone()).command_env(name, &value))?;
        let reason = run.refused()?.to_owned();
        ensure!(
            reason.contains(name) && reason.contains(rule),
            "the {label} run was refused, but the reason does not name {name} and {rule}: {reason}"
        );
        ensure!(
            !reason.contains(&value) && !run.stdout.contains(&value),
            "the {label} run shows the value (refusal: {reason})"
        );
    }
    // The control: explicit locale names run and arrive.
    let explicit = cx
        .confined(argv)
        .command_env("LC_MESSAGES", "C")
        .command_env("LANG", "C.UTF-8");
    let run = cx.run("explicit locale names", &explicit)?;
    run.succeeded()?;
    for line in ["LC_MESSAGES=C", "LANG=C.UTF-8"] {
        ensure!(
            run.stdout.lines().any(|l| l == line),
            "the explicit locale names run lost {line}"
        );
    }
    Ok(())
}

fn agentd_and_helper_state_is_unreadable(cx: &mut Cx) -> Verdict {
    let marker = format!("{}-marker", cx.tag);
    let probe = cx
        .probe()?
        .op("wait-pids", Vec::<String>::new())
        .step("agentd-environ", "read", ["/proc/@agentd/environ"])
        .step("agentd-fd", "readlink", ["/proc/@agentd/fd/2"])
        .step("helper-environ", "read", ["/proc/@helper/environ"])
        .step("helper-root", "listdir", ["/proc/@helper/root/"]);
    let invocation =
        |inv: crate::agentd::Invocation| inv.interactive().env("AGENTD_E2E_MARKER", &marker);
    let run = cx.run("confined", &invocation(cx.confined(probe.argv())))?;
    run.ran()?;
    run.step_ok("wait-pids")?;
    // Not visible (the command's own pid namespace: ENOENT/ESRCH) or not accessible (Landlock's
    // ptrace scoping: EACCES/EPERM).
    for step in [
        "agentd-environ",
        "agentd-fd",
        "helper-environ",
        "helper-root",
    ] {
        run.step_fails_with(step, &["ENOENT", "ESRCH", "EACCES", "EPERM"])?;
    }
    ensure!(
        !run.stdout.contains(&marker),
        "agentd's environment leaked into the command's output"
    );

    // agentd runs as the same user, so unconfined its environment is readable. (The helper
    // makes itself non-dumpable, so as a non-root user it is unreadable even unconfined.)
    let control = cx.run("control", &invocation(cx.control(probe.argv())))?;
    control.ran()?;
    control.step_ok("agentd-environ")?;
    control.step_ok("agentd-fd")?;
    ensure!(
        control.stdout.contains(&marker),
        "the control run read agentd's environ but did not find the marker: the probe does not work"
    );
    Ok(())
}

fn no_tracing_memory_reads_or_keyring(cx: &mut Cx) -> Verdict {
    let mut canary = CanaryProcess::spawn(cx.user())
        .map_err(|e| fail(format!("cannot start a canary process: {e}")))?;
    let pid = canary.pid().to_string();
    let address = canary
        .readable_address()
        .ok_or_else(|| fail("cannot find a readable mapping of the canary process"))?;
    let probe = cx
        .probe()?
        .op("wait-pids", Vec::<String>::new())
        .step("trace-agentd", "ptrace-seize", ["@agentd"])
        .step("trace-helper", "ptrace-seize", ["@helper"])
        .step("trace-canary", "ptrace-seize", [pid.as_str()])
        .step(
            "read-canary-memory",
            "vm-read",
            [pid.as_str(), address.as_str()],
        )
        .step("keyring", "keyctl-session", Vec::<String>::new())
        .step("add-key", "add-key", Vec::<String>::new())
        .step("request-key", "request-key", Vec::<String>::new());
    let run = cx.run("confined", &cx.confined(probe.argv()).interactive())?;
    run.ran()?;
    for step in [
        "trace-agentd",
        "trace-helper",
        "trace-canary",
        "read-canary-memory",
    ] {
        run.step_fails_with(step, &["EPERM", "EACCES", "ESRCH"])?;
    }
    for step in ["keyring", "add-key", "request-key"] {
        run.step_fails_with(step, &["EPERM", "EACCES", "ENOSYS"])?;
    }
    let state = canary.liveness();
    ensure!(
        state == Liveness::Running,
        "the canary process is {state:?} after the confined run"
    );

    // Unconfined, the same user may trace its own processes (no Yama here, or root).
    let control_probe = cx
        .probe()?
        .step("trace-canary", "ptrace-seize", [pid.as_str()])
        .step(
            "read-canary-memory",
            "vm-read",
            [pid.as_str(), address.as_str()],
        )
        .step("keyring", "keyctl-session", Vec::<String>::new())
        .step("add-key", "add-key", Vec::<String>::new())
        .step("request-key", "request-key", Vec::<String>::new());
    let control = cx.run("control", &cx.control(control_probe.argv()))?;
    control.ran()?;
    for step in ["trace-canary", "read-canary-memory", "keyring", "add-key"] {
        control.step_ok(step)?;
    }
    // No such key: the kernel looked (ENOKEY) rather than a filter answering.
    control.step_reached_kernel("request-key")?;
    Ok(())
}

fn a_crash_leaves_no_core_dump(cx: &mut Cx) -> Verdict {
    let pattern = sysctl("/proc/sys/kernel/core_pattern").unwrap_or_default();
    let probe = cx
        .probe()?
        .op("status", Vec::<String>::new())
        .op("crash", Vec::<String>::new());
    // agentd starts with cores unlimited, so only the helper can have made the limit zero.
    for (label, invocation) in [
        ("confined", cx.confined(probe.argv()).core_unlimited()),
        (
            "danger-full-access",
            cx.control(probe.argv()).core_unlimited(),
        ),
    ] {
        let run = cx.run(label, &invocation)?;
        let facts = run
            .facts
            .as_ref()
            .map_err(|e| fail(format!("the {label} run has no facts: {e}")))?;
        run.ran()?;
        // bwrap's own pid 1 reports its child's death by signal N as exit code 128+N, so under
        // bwrap the helper cannot tell the two apart.
        let by_bwrap = facts.backend.as_deref() == Some("bwrap");
        ensure!(
            facts.exit == Some(Exit::Signal(11)) || by_bwrap && facts.exit == Some(Exit::Code(139)),
            "the {label} run should have ended by SIGSEGV but the exit is {:?}",
            facts.exit
        );
        ensure!(
            run.probe.data("RLIMIT_CORE") == Some("0 0"),
            "in the {label} run RLIMIT_CORE is {:?} (soft hard), not 0 0",
            run.probe.data("RLIMIT_CORE")
        );
        let cores: Vec<String> = std::fs::read_dir(&cx.ws)
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with("core"))
                    .collect()
            })
            .unwrap_or_default();
        ensure!(
            cores.is_empty(),
            "the {label} run left core files {cores:?} (core_pattern {pattern:?})"
        );
    }
    Ok(())
}
