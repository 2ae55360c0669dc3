//! H (the part that needs a kernel). The helper's ceiling: a request above it is refused, with
//! a reason naming the rule, whatever agentd asks for.

use crate::agentd::Invocation;
use crate::case::{Case, Cx, RunChecks, Verdict};
use crate::ensure;
use crate::matrix::{CONFINED, Mode};

pub const CASES: &[Case] = &[Case {
    id: "T65",
    title: "requests above the helper's ceiling, or with an unreadable one, are refused",
    modes: CONFINED,
    exclusive: false,
    body: requests_above_the_ceiling_are_refused,
}];

fn requests_above_the_ceiling_are_refused(cx: &mut Cx) -> Verdict {
    let marker = cx.ws.join("ran");
    let probe = cx.probe()?.step("write", "create", [&marker]);
    let argv = if cx.mode() == Mode::WorkspaceWrite {
        probe.argv()
    } else {
        vec!["/bin/true".into()]
    };

    let read_only = cx.ceiling("read-only.toml", "max_mode = \"read-only\"\n")?;
    let above = cx.control(argv.clone()).ceiling(&read_only);
    refused_naming(cx, "danger-full-access above max_mode", &above, "max_mode")?;
    if cx.mode() == Mode::WorkspaceWrite {
        let above = cx.confined(argv.clone()).ceiling(&read_only);
        refused_naming(cx, "workspace-write above max_mode", &above, "max_mode")?;
    } else {
        let within = cx.run(
            "read-only within max_mode",
            &cx.confined(argv.clone()).ceiling(&read_only),
        )?;
        within.succeeded()?;
    }

    let no_network = cx.ceiling("no-network.toml", "allow_network = false\n")?;
    let above = cx.confined(argv.clone()).network(true).ceiling(&no_network);
    refused_naming(cx, "network above allow_network", &above, "allow_network")?;

    if cx.mode() == Mode::WorkspaceWrite {
        let never = cx.ceiling(
            "never-writable.toml",
            &format!("never_writable = [{:?}]\n", cx.ws.display().to_string()),
        )?;
        let above = cx.confined(argv.clone()).ceiling(&never);
        refused_naming(cx, "workspace in never_writable", &above, "never_writable")?;
    }
    // A ceiling that cannot be read must not mean "no ceiling".
    let missing = cx.dir.join("absent-ceiling.toml");
    let run = cx.run(
        "missing ceiling file",
        &cx.confined(argv.clone()).ceiling(&missing),
    )?;
    run.refused()?;
    cx.absent(&marker)?;

    // The same request without the ceiling runs: the refusals were the ceiling's doing.
    let control = cx.run("without the ceiling", &cx.confined(argv))?;
    control.succeeded()?;
    Ok(())
}

fn refused_naming(cx: &mut Cx, label: &str, invocation: &Invocation, rule: &str) -> Verdict {
    let run = cx.run(label, invocation)?;
    let reason = run.refused()?.to_owned();
    ensure!(
        reason.contains(rule),
        "the {label} run was refused, but the reason does not name {rule}: {reason}"
    );
    ensure!(
        !run.stdout.contains("step "),
        "the {label} run was refused yet the command ran"
    );
    Ok(())
}
