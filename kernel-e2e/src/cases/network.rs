//! D. Network: with the network denied, no socket can be opened at all, so nothing on the host
//! (or beyond) hears from the command.

use std::fs::File;
use std::net::TcpStream;
use std::os::fd::AsRawFd;

use super::checks::{skip_unless, sysctl};
use crate::case::{Case, Cx, RunChecks, Verdict, fail};
use crate::ensure;
use crate::facts::Exit;
use crate::fixtures::{TcpCanary, UdpCanary};
use crate::matrix::CONFINED;
use crate::tools::find_tool;

pub const CASES: &[Case] = &[
    Case {
        id: "T28",
        title: "TCP connections to a host listener are blocked and the listener sees nothing",
        modes: CONFINED,
        exclusive: false,
        body: tcp_to_a_host_listener_is_blocked,
    },
    Case {
        id: "T29",
        title: "UDP datagrams do not leave the sandbox",
        modes: CONFINED,
        exclusive: false,
        body: udp_datagrams_do_not_leave,
    },
    Case {
        id: "T31",
        title: "no socket family can be opened: vsock, packet, raw, ping, bluetooth, netlink",
        modes: CONFINED,
        exclusive: false,
        body: no_socket_family_can_be_opened,
    },
    Case {
        id: "T32",
        title: "io_uring cannot be used to reach the network or files behind the filter's back",
        modes: CONFINED,
        exclusive: false,
        body: io_uring_is_unavailable,
    },
    Case {
        id: "T34",
        title: "descriptors agentd inherited never reach the command, in any mode",
        modes: CONFINED,
        exclusive: false,
        body: inherited_descriptors_do_not_reach_the_command,
    },
];

fn tcp_to_a_host_listener_is_blocked(cx: &mut Cx) -> Verdict {
    let listener =
        TcpCanary::new().map_err(|e| fail(format!("cannot listen on 127.0.0.1: {e}")))?;
    let port = listener.port().to_string();
    let probe = cx
        .probe()?
        .step("connect", "tcp-connect", ["127.0.0.1", port.as_str()]);

    let run = cx.run("confined", &cx.confined(probe.argv()))?;
    run.denied()?;
    run.step_fails_with("connect", &["EPERM"])?;
    ensure!(
        listener.connections() == 0,
        "the host listener accepted a connection from the confined command"
    );

    // A real tool's way in, for good measure.
    let bash = find_tool("bash");
    let script = format!("echo x > /dev/tcp/127.0.0.1/{port}");
    let bash_argv = |bash: &std::path::Path| vec![bash.into(), "-c".into(), script.clone().into()];
    if let Some(bash) = &bash {
        let run = cx.run("confined bash /dev/tcp", &cx.confined(bash_argv(bash)))?;
        let facts = run.ran()?;
        ensure!(
            facts.exit != Some(Exit::Code(0)),
            "bash /dev/tcp succeeded in the sandbox"
        );
        ensure!(
            listener.connections() == 0,
            "the host listener accepted a connection from bash /dev/tcp"
        );
    }

    // --network allow opens exactly this door, and the sandbox still holds everywhere else.
    let allowed = cx.run(
        "confined, network allowed",
        &cx.confined(probe.argv()).network(true),
    )?;
    allowed.succeeded()?;
    ensure!(
        listener.connections() == 1,
        "with --network allow the host listener saw no connection"
    );

    let control = cx.run("control", &cx.control(probe.argv()))?;
    control.succeeded()?;
    ensure!(
        listener.connections() == 1,
        "the control run's connection did not arrive: the probe does not work"
    );
    if let Some(bash) = &bash {
        let control = cx.run("control bash /dev/tcp", &cx.control(bash_argv(bash)))?;
        control.succeeded()?;
        ensure!(
            listener.connections() == 1,
            "bash /dev/tcp did not connect unconfined"
        );
    }
    Ok(())
}

fn udp_datagrams_do_not_leave(cx: &mut Cx) -> Verdict {
    let receiver =
        UdpCanary::new().map_err(|e| fail(format!("cannot bind UDP on 127.0.0.1: {e}")))?;
    let port = receiver.port().to_string();
    let probe = cx
        .probe()?
        .step("send", "udp-send", ["127.0.0.1", port.as_str()]);

    let run = cx.run("confined", &cx.confined(probe.argv()))?;
    run.denied()?;
    run.step_fails_with("send", &["EPERM"])?;
    ensure!(
        receiver.datagrams() == 0,
        "a datagram from the confined command reached the host"
    );

    let control = cx.run("control", &cx.control(probe.argv()))?;
    control.succeeded()?;
    ensure!(
        receiver.datagrams() == 1,
        "the control run's datagram did not arrive: the probe does not work"
    );
    Ok(())
}

/// (label, family, type, protocol); the first two always work unconfined and prove the probe.
const FAMILIES: [(&str, &str, &str, &str); 9] = [
    ("tcp", "inet", "stream", "0"),
    ("udp6", "inet6", "dgram", "0"),
    ("vsock", "vsock", "stream", "0"),
    ("packet", "packet", "raw", "0x0300"),
    ("raw-icmp", "inet", "raw", "1"),
    ("ping", "inet", "dgram", "1"),
    ("bluetooth", "bluetooth", "raw", "0"),
    ("netlink", "netlink", "raw", "0"),
    ("unix", "unix", "stream", "0"),
];

fn no_socket_family_can_be_opened(cx: &mut Cx) -> Verdict {
    let mut probe = cx.probe()?;
    for (label, family, kind, protocol) in FAMILIES {
        probe = probe.step(label, "socket", [family, kind, protocol]);
    }
    let run = cx.run("confined", &cx.confined(probe.argv()))?;
    run.denied()?;
    // The filter answers before the kernel looks at the family, so even families this kernel
    // lacks must say EPERM, not EAFNOSUPPORT.
    for (label, ..) in FAMILIES {
        run.step_fails_with(label, &["EPERM"])?;
    }
    let control = cx.run("control", &cx.control(probe.argv()))?;
    control.ran()?;
    control.step_ok("tcp")?;
    control.step_ok("udp6")?;
    control.step_ok("unix")?;
    Ok(())
}

fn io_uring_is_unavailable(cx: &mut Cx) -> Verdict {
    let disabled = sysctl("/proc/sys/kernel/io_uring_disabled").unwrap_or_else(|| "0".into());
    skip_unless(
        disabled == "0" || (disabled == "1" && cx.user().is_root()),
        format!("io_uring is restricted by the kernel (kernel.io_uring_disabled={disabled})"),
    )?;
    let probe = cx
        .probe()?
        .op("io-uring-setup", Vec::<String>::new())
        .op("io-uring-enter", Vec::<String>::new())
        .op("io-uring-register", Vec::<String>::new());
    let run = cx.run("confined", &cx.confined(probe.argv()))?;
    run.ran()?;
    for step in ["io-uring-setup", "io-uring-enter", "io-uring-register"] {
        run.step_fails_with(step, &["EPERM", "ENOSYS"])?;
    }
    let control = cx.run("control", &cx.control(probe.argv()))?;
    control.ran()?;
    control.step_ok("io-uring-setup")?;
    control.step_reached_kernel("io-uring-enter")?;
    control.step_reached_kernel("io-uring-register")?;
    Ok(())
}

fn inherited_descriptors_do_not_reach_the_command(cx: &mut Cx) -> Verdict {
    let listener = TcpCanary::new().map_err(|e| fail(format!("cannot listen: {e}")))?;
    let listening = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| fail(format!("cannot listen: {e}")))?;
    let connected = TcpStream::connect(("127.0.0.1", listener.port()))
        .map_err(|e| fail(format!("cannot connect to our own listener: {e}")))?;
    let file = File::open("/etc/hostname")
        .or_else(|_| File::open("/etc/passwd"))
        .map_err(|e| fail(format!("cannot open a file to leak: {e}")))?;
    let leaked = [
        (listening.as_raw_fd(), 20),
        (connected.as_raw_fd(), 21),
        (file.as_raw_fd(), 22),
    ];
    let with_leaks = |mut invocation: crate::agentd::Invocation| {
        for (fd, as_fd) in leaked {
            invocation = invocation.inherit(fd, as_fd);
        }
        invocation
    };
    let probe = cx.probe()?.op("fds", Vec::<String>::new());

    for (label, invocation) in [
        ("confined", with_leaks(cx.confined(probe.argv()))),
        ("danger-full-access", with_leaks(cx.control(probe.argv()))),
    ] {
        let run = cx.run(label, &invocation)?;
        run.succeeded()?;
        ensure!(
            run.probe.data("fds") == Some("0 1 2"),
            "the {label} run's command holds descriptors {:?}, not just 0 1 2",
            run.probe.data("fds")
        );
    }

    // Without agentd in between, the same descriptors are visible: the probe can see leaks.
    let plain = cx.run_plain(
        "control without agentd",
        &with_leaks(cx.control(probe.argv())),
    )?;
    let fds = plain.probe.data("fds").unwrap_or("");
    ensure!(
        ["20", "21", "22"]
            .iter()
            .all(|fd| fds.split(' ').any(|f| f == *fd)),
        "run directly, the probe did not see the inherited descriptors ({fds:?}): it does not work"
    );
    drop((listening, connected, file));
    Ok(())
}
