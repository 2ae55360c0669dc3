//! E. IPC escapes: Unix sockets are how D-Bus, docker and ssh-agent are reached, and read-only
//! mounts do not stop a connect, so the command may not open one at all (socketpair excepted).

use crate::case::{Case, Cx, RunChecks, Verdict, fail};
use crate::ensure;
use crate::fixtures::UnixCanary;
use crate::matrix::CONFINED;

pub const CASES: &[Case] = &[
    Case {
        id: "T37",
        title: "a daemon's Unix socket outside the sandbox cannot be reached, even with network allowed",
        modes: CONFINED,
        exclusive: false,
        body: a_pathname_socket_cannot_be_reached,
    },
    Case {
        id: "T40",
        title: "abstract Unix sockets outside the sandbox cannot be reached, while socketpair works",
        modes: CONFINED,
        exclusive: false,
        body: abstract_sockets_cannot_be_reached,
    },
];

fn a_pathname_socket_cannot_be_reached(cx: &mut Cx) -> Verdict {
    let dir = cx.dir.join("daemon");
    std::fs::create_dir_all(&dir).map_err(|e| fail(format!("cannot create {dir:?}: {e}")))?;
    let daemon = UnixCanary::pathname(&dir)
        .map_err(|e| fail(format!("cannot create the fixture sockets: {e}")))?;
    attempt_and_control(cx, &daemon, "unix-connect", "unix-sendto", true)
}

fn abstract_sockets_cannot_be_reached(cx: &mut Cx) -> Verdict {
    let daemon = UnixCanary::abstract_names(&cx.tag)
        .map_err(|e| fail(format!("cannot create the abstract sockets: {e}")))?;
    attempt_and_control(cx, &daemon, "abstract-connect", "abstract-sendto", false)?;

    // What stays allowed: a connected pair made inside, reaching nothing outside.
    let probe = cx.probe()?.op("socketpair", Vec::<String>::new());
    let run = cx.run("confined socketpair", &cx.confined(probe.argv()))?;
    run.succeeded()
}

/// Connects and sends to `daemon` confined (also with the network allowed, when asked), then as
/// a control; the daemon must hear only from the control.
fn attempt_and_control(
    cx: &mut Cx,
    daemon: &UnixCanary,
    connect: &str,
    send: &str,
    with_network_too: bool,
) -> Verdict {
    let probe = cx
        .probe()?
        .step("connect", connect, [&daemon.stream_address])
        .step("send", send, [&daemon.dgram_address]);
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
        daemon.connections() == 1 && daemon.datagrams() == 1,
        "the control run did not reach the sockets: the probe does not work"
    );
    Ok(())
}
