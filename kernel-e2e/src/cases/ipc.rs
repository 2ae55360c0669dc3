//! E. IPC escapes: Unix sockets are how D-Bus, docker and ssh-agent are reached, and read-only
//! mounts do not stop a connect, so the command may not open one at all (socketpair excepted).

use std::ffi::OsString;
use std::process::Command;
use std::time::Duration;

use super::checks::require_tool;
use crate::case::{Case, Cx, RunChecks, Stop, Verdict, fail};
use crate::ensure;
use crate::facts::Exit;
use crate::fixtures::{Daemon, UnixCanary};
use crate::matrix::CONFINED;

pub const CASES: &[Case] = &[
    Case {
        id: "T35",
        title: "a session bus of the same user cannot be reached",
        modes: CONFINED,
        exclusive: false,
        body: a_session_bus_cannot_be_reached,
    },
    Case {
        id: "T37",
        title: "a daemon's Unix socket outside the sandbox cannot be reached, even with network allowed",
        modes: CONFINED,
        exclusive: false,
        body: a_pathname_socket_cannot_be_reached,
    },
    Case {
        id: "T38",
        title: "an ssh agent of the same user cannot be asked for keys",
        modes: CONFINED,
        exclusive: false,
        body: an_ssh_agent_cannot_be_reached,
    },
    Case {
        id: "T40",
        title: "abstract Unix sockets outside the sandbox cannot be reached, a datagram socketpair \
                included, while a stream socketpair works",
        modes: CONFINED,
        exclusive: false,
        body: abstract_sockets_cannot_be_reached,
    },
];

/// How long a fixture daemon may take to start and say where it listens.
const DAEMON_START: Duration = Duration::from_secs(10);

fn a_session_bus_cannot_be_reached(cx: &mut Cx) -> Verdict {
    let dbus_daemon = require_tool("dbus-daemon")?;
    let dbus_send = require_tool("dbus-send")?;
    // A bus of our own, where the user's session bus would be; the command knows the address
    // even though DBUS_SESSION_BUS_ADDRESS is not passed on.
    let address = format!("unix:path={}", cx.dir.join("bus").display());
    let mut command = Command::new(dbus_daemon);
    command
        .args(["--session", "--nofork", "--print-address=1"])
        .arg(format!("--address={address}"));
    let _bus = Daemon::start(command, cx.user(), DAEMON_START)
        .map_err(|e| Stop::Skip(format!("cannot start a session bus fixture: {e}")))?;
    let argv: Vec<OsString> = vec![
        dbus_send.into(),
        format!("--bus={address}").into(),
        "--print-reply".into(),
        "--dest=org.freedesktop.DBus".into(),
        "/org/freedesktop/DBus".into(),
        "org.freedesktop.DBus.ListNames".into(),
    ];
    let run = cx.run("confined", &cx.confined(argv.clone()))?;
    let facts = run.ran()?;
    ensure!(
        facts.exit != Some(Exit::Code(0)) && !run.stdout.contains("org.freedesktop.DBus"),
        "the confined command talked to the session bus"
    );
    let control = cx.run("control", &cx.control(argv))?;
    control.succeeded()?;
    ensure!(
        control.stdout.contains("org.freedesktop.DBus"),
        "the control run got no answer from the bus: the probe does not work"
    );
    Ok(())
}

fn an_ssh_agent_cannot_be_reached(cx: &mut Cx) -> Verdict {
    let ssh_agent = require_tool("ssh-agent")?;
    let ssh_add = require_tool("ssh-add")?;
    let socket = cx.dir.join("agent.sock");
    let mut command = Command::new(ssh_agent);
    command.arg("-D").arg("-a").arg(&socket);
    let _agent = Daemon::start(command, cx.user(), DAEMON_START)
        .map_err(|e| Stop::Skip(format!("cannot start an ssh-agent fixture: {e}")))?;
    let argv: Vec<OsString> = vec![ssh_add.into(), "-l".into()];
    // SSH_AUTH_SOCK is dropped from the environment; the command names the socket itself.
    let with_socket = |invocation: crate::agentd::Invocation| {
        let mut invocation = invocation;
        invocation.argv = [
            vec![
                "/usr/bin/env".into(),
                format!("SSH_AUTH_SOCK={}", socket.display()).into(),
            ],
            argv.clone(),
        ]
        .concat();
        invocation
    };
    // ssh-add -l exits 1 for an agent without keys: the answer is what shows it got through.
    let reached =
        |stdout: &str| stdout.contains("agent has no identities") || stdout.contains("SHA256:");
    let run = cx.run("confined", &with_socket(cx.confined(Vec::new())))?;
    run.ran()?;
    ensure!(
        !reached(&run.stdout),
        "the confined command talked to the ssh agent"
    );
    let control = cx.run("control", &with_socket(cx.control(Vec::new())))?;
    control.ran()?;
    ensure!(
        reached(&control.stdout),
        "the control run got no answer from the agent: the probe does not work"
    );
    Ok(())
}

fn a_pathname_socket_cannot_be_reached(cx: &mut Cx) -> Verdict {
    let dir = cx.dir.join("daemon");
    std::fs::create_dir_all(&dir).map_err(|e| fail(format!("cannot create {dir:?}: {e}")))?;
    let daemon = UnixCanary::pathname(&dir)
        .map_err(|e| fail(format!("cannot create the fixture sockets: {e}")))?;
    attempt_and_control(
        cx,
        &daemon,
        ["unix-connect", "unix-sendto", "pair-sendto"],
        true,
    )
}

fn abstract_sockets_cannot_be_reached(cx: &mut Cx) -> Verdict {
    let daemon = UnixCanary::abstract_names(&cx.tag)
        .map_err(|e| fail(format!("cannot create the abstract sockets: {e}")))?;
    attempt_and_control(
        cx,
        &daemon,
        [
            "abstract-connect",
            "abstract-sendto",
            "abstract-pair-sendto",
        ],
        false,
    )?;

    // What stays allowed: a connected pair made inside, reaching nothing outside.
    let probe = cx.probe()?.op("socketpair", Vec::<String>::new());
    let run = cx.run("confined socketpair", &cx.confined(probe.argv()))?;
    run.succeeded()
}

/// Connects, sends from a datagram socket and sends from a datagram socketpair (which needs
/// neither `socket()` nor `connect()`) to `daemon` confined (also with the network allowed, when
/// asked), then as a control; the daemon must hear only from the control.
fn attempt_and_control(
    cx: &mut Cx,
    daemon: &UnixCanary,
    [connect, send, pair_send]: [&str; 3],
    with_network_too: bool,
) -> Verdict {
    let probe = cx
        .probe()?
        .step("connect", connect, [&daemon.stream_address])
        .step("send", send, [&daemon.dgram_address])
        .step("pair", pair_send, [&daemon.dgram_address]);
    let mut confined = vec![("confined", cx.confined(probe.argv()))];
    if with_network_too {
        confined.push((
            "confined, network allowed",
            cx.confined(probe.argv()).network(true),
        ));
    }
    for (label, invocation) in confined {
        let run = cx.run(label, &invocation)?;
        run.denied()?;
        run.step_fails_with("connect", &["EPERM"])?;
        run.step_fails_with("send", &["EPERM"])?;
        run.step_fails_with("pair", &["EPERM"])?;
        ensure!(
            daemon.connections() == 0,
            "the socket accepted a connection from the {label} run"
        );
        ensure!(
            daemon.datagrams() == 0,
            "the socket received a datagram from the {label} run"
        );
    }
    let control = cx.run("control", &cx.control(probe.argv()))?;
    control.succeeded()?;
    ensure!(
        daemon.connections() == 1 && daemon.datagrams() == 2,
        "the control run did not reach the sockets: the probe does not work"
    );
    Ok(())
}
