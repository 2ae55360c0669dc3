//! The two rules on every address: by its form, and by the kernel's route — in a network
//! namespace of the test's own (as root) where one end of a veth pair holds `10.77.0.1/24` and
//! `fd77::1/64`, the addresses beside them on its link (`10.77.0.2`, `fd77::2`) being the
//! control. And the
//! gate, there, refusing a name that leads only to this machine in every protocol, with the
//! policy allowing local addresses as the control that reaches the same listener.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use nix::errno::Errno;

use super::*;
use crate::proxy::Reason;

fn v4(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(a, b, c, d))
}

fn v6(text: &str) -> IpAddr {
    IpAddr::V6(text.parse::<Ipv6Addr>().expect("an IPv6 address"))
}

fn at(ip: IpAddr) -> SocketAddr {
    SocketAddr::new(ip, 80)
}

#[test]
fn by_form_loopback_unspecified_link_local_and_broadcast_are_local_mapped_or_not() {
    let local = [
        (v4(127, 0, 0, 1), Local::Loopback),
        (v4(127, 8, 9, 10), Local::Loopback),
        (v4(0, 0, 0, 0), Local::Unspecified),
        (v4(0, 1, 2, 3), Local::Unspecified),
        (v4(169, 254, 169, 254), Local::LinkLocal),
        (v4(255, 255, 255, 255), Local::Broadcast),
        (v6("::1"), Local::Loopback),
        (v6("::"), Local::Unspecified),
        (v6("fe80::1"), Local::LinkLocal),
        (v6("febf::1"), Local::LinkLocal),
        (v6("::ffff:127.0.0.1"), Local::Loopback),
        (v6("::ffff:169.254.169.254"), Local::LinkLocal),
        (v6("::ffff:0.0.0.0"), Local::Unspecified),
    ];
    for (ip, why) in local {
        assert_eq!(by_form(ip), Some(why), "{ip}");
    }
    // The control: by form alone these could be anywhere (the kernel decides, below).
    for ip in [
        v4(10, 0, 0, 1),
        v4(192, 168, 1, 1),
        v4(93, 184, 215, 14),
        v6("2001:db8::1"),
        v6("fd77::1"),
        v6("fec0::1"),
        v6("::ffff:10.0.0.1"),
    ] {
        assert_eq!(by_form(ip), None, "{ip}");
    }
}

#[test]
fn loopback_is_judged_local_before_the_kernel_is_asked() {
    assert_eq!(judge(at(v4(127, 0, 0, 1))), Some(Local::Loopback));
    assert_eq!(judge(at(v6("::ffff:127.0.0.1"))), Some(Local::Loopback));
}

#[test]
fn a_refusal_names_every_address_and_why() {
    let reason = Reason::LocalAddresses(vec![
        LocalAddress {
            ip: v4(127, 0, 0, 1),
            why: Local::Loopback,
        },
        LocalAddress {
            ip: v4(10, 77, 0, 1),
            why: Local::ThisMachine(route::RouteType::LOCAL),
        },
        LocalAddress {
            ip: v6("fd77::9"),
            why: Local::Unknown(route::RouteError::NoRoute(Errno::ENETUNREACH)),
        },
    ]);
    assert!(!reason.allows());
    assert_eq!(
        reason.to_string(),
        "leads only to this machine or its link, where an allowed host may not lead: 127.0.0.1 \
         (loopback), 10.77.0.1 (an address of this machine (the kernel's route to it is local)), \
         fd77::9 (not known to lead elsewhere: the kernel has no route to it (ENETUNREACH: \
         Network is unreachable))"
    );
}

/// The kernel's side, in network namespaces: Linux's.
#[cfg(target_os = "linux")]
mod in_a_namespace {
    use std::io;
    use std::net::{IpAddr, SocketAddr, TcpListener};
    use std::process::Command;
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    use nix::errno::Errno;
    use nix::sched::{CloneFlags, unshare};

    use super::super::*;
    use super::{at, v4, v6};
    use crate::proxy::gate::{Attempt, Gate, open};
    use crate::proxy::{Decision, Policy, Protocol, Reason};
    use crate::route_events::RouteEvents;
    use crate::skip::{Need, skip};
    use crate::test_support::within;

    /// How long an IPv6 address may take to be routed as this machine's once its link is up:
    /// the kernel installs the route from a work queue, after `ip` has returned.
    const ADDRESS_READY: Duration = Duration::from_secs(10);

    /// Runs `test` on a thread of its own in a fresh network namespace whose loopback is up and
    /// where `lab0`, one end of a veth pair, holds `10.77.0.1/24` and `fd77::1/64`; `None` (and a
    /// SKIP line) where that cannot be made: not root, no `ip`, a kernel without IPv6 or veth.
    fn in_namespace<T: Send>(name: &str, test: impl FnOnce() -> T + Send) -> Option<T> {
        if !nix::unistd::Uid::effective().is_root() {
            skip(name, Need::Root, "making a network namespace needs root");
            return None;
        }
        if !std::path::Path::new("/proc/sys/net/ipv6").exists() {
            skip(name, Need::Ip, "the kernel has no IPv6");
            return None;
        }
        if Command::new("ip").arg("-V").output().is_err() {
            skip(name, Need::Ip, "`ip` (iproute2) is not installed");
            return None;
        }
        std::thread::scope(|scope| {
            let thread = scope.spawn(|| {
                // The namespace is this thread's alone; the test process keeps its own.
                unshare(CloneFlags::CLONE_NEWNET).expect("a network namespace of the thread's own");
                let veth = [
                    "link", "add", "lab0", "type", "veth", "peer", "name", "lab1",
                ];
                if let Err(why) = run_ip(&veth) {
                    skip(name, Need::Ip, format!("cannot make a veth pair: {why}"));
                    return None;
                }
                ip(&["link", "set", "lo", "up"]);
                ip(&["addr", "add", "10.77.0.1/24", "dev", "lab0"]);
                ip(&["-6", "addr", "add", "fd77::1/64", "dev", "lab0", "nodad"]);
                // Before the links come up: no notice of the routes they bring is missed.
                let events = RouteEvents::subscribe().expect("a subscription to route notices");
                ip(&["link", "set", "lab0", "up"]);
                ip(&["link", "set", "lab1", "up"]);
                wait_until_local(&events, v6("fd77::1"));
                Some(test())
            });
            thread.join().expect("the namespace's thread")
        })
    }

    /// Waits, at most [`ADDRESS_READY`], until the kernel routes `ip` as this machine's: looked
    /// up again at each route notice of `events`.
    fn wait_until_local(events: &RouteEvents, ip: IpAddr) {
        let local = || route::lookup(ip, 80) == Ok(route::RouteType::LOCAL);
        let routed = events
            .until(Instant::now() + ADDRESS_READY, local)
            .expect("route notices");
        assert!(
            routed,
            "{ip} was not routed locally within {ADDRESS_READY:?}"
        );
    }

    /// Runs `ip ARGS` in the calling thread's network namespace (a child process takes its parent
    /// thread's); the error is what it said.
    fn run_ip(args: &[&str]) -> Result<(), String> {
        let output = Command::new("ip")
            .args(args)
            .output()
            .map_err(|e| e.to_string())?;
        if output.status.success() {
            return Ok(());
        }
        Err(String::from_utf8_lossy(&output.stderr).trim().to_owned())
    }

    fn ip(args: &[&str]) {
        if let Err(why) = run_ip(args) {
            panic!("ip {}: {why}", args.join(" "));
        }
    }

    #[test]
    fn the_kernel_says_which_addresses_are_this_machines_and_keeps_nothing() {
        in_namespace(
            "the_kernel_says_which_addresses_are_this_machines_and_keeps_nothing",
            || {
                let here = Some(Local::ThisMachine(route::RouteType::LOCAL));
                assert_eq!(judge(at(v4(10, 77, 0, 1))), here);
                assert_eq!(judge(at(v6("fd77::1"))), here);
                assert_eq!(judge(at(v6("::ffff:10.77.0.1"))), here, "IPv4-mapped");
                assert_eq!(
                    judge(at(v4(10, 77, 0, 255))),
                    Some(Local::ThisMachine(route::RouteType::BROADCAST))
                );
                // The control: the addresses beside them are routed out of the machine.
                assert_eq!(judge(at(v4(10, 77, 0, 2))), None);
                assert_eq!(judge(at(v6("fd77::2"))), None);
                assert_eq!(judge(at(v6("::ffff:10.77.0.2"))), None, "IPv4-mapped");
                // No route at all: not known to lead elsewhere, so kept out.
                assert_eq!(
                    judge(at(v4(192, 0, 2, 1))),
                    Some(Local::Unknown(route::RouteError::NoRoute(
                        Errno::ENETUNREACH
                    )))
                );
                let (elsewhere, local) = sort_out(vec![
                    at(v4(127, 0, 0, 1)),
                    at(v4(10, 77, 0, 1)),
                    at(v4(10, 77, 0, 2)),
                ]);
                assert_eq!(elsewhere, [at(v4(10, 77, 0, 2))]);
                assert_eq!(
                    local,
                    [
                        LocalAddress {
                            ip: v4(127, 0, 0, 1),
                            why: Local::Loopback
                        },
                        LocalAddress {
                            ip: v4(10, 77, 0, 1),
                            why: Local::ThisMachine(route::RouteType::LOCAL)
                        },
                    ]
                );
                // Nothing is kept: once the interface no longer holds the address, it is not
                // this machine's, and once it holds one more, that one is.
                ip(&["addr", "del", "10.77.0.1/24", "dev", "lab0"]);
                assert_ne!(judge(at(v4(10, 77, 0, 1))), here);
                ip(&["addr", "add", "10.77.0.2/24", "dev", "lab0"]);
                assert_eq!(judge(at(v4(10, 77, 0, 2))), here);
            },
        );
    }

    /// What the proxy's resolver says in the namespace: names that lead to its own address, in each
    /// form, and one that leads to loopback and to it.
    fn lab_resolver(host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        let ips = match host {
            "self4.test" => vec![v4(10, 77, 0, 1)],
            "self6.test" => vec![v6("fd77::1")],
            "selfmapped.test" => vec![v6("::ffff:10.77.0.1")],
            "both.test" => vec![v4(127, 0, 0, 1), v4(10, 77, 0, 1)],
            _ => {
                return Err(io::Error::other(format!(
                    "{host} is not in the test's table"
                )));
            }
        };
        Ok(ips
            .into_iter()
            .map(|ip| SocketAddr::new(ip, port))
            .collect())
    }

    #[test]
    fn the_gate_refuses_every_address_of_this_machine_in_every_protocol_unless_allowed() {
        in_namespace(
            "the_gate_refuses_every_address_of_this_machine_in_every_protocol_unless_allowed",
            || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime");
                runtime.block_on(within(gate_in_namespace()));
            },
        );
    }

    async fn gate_in_namespace() {
        // A service on every address of the namespace, as one bound to `::` (dual-stack) is.
        let listener = TcpListener::bind("[::]:0").expect("bind [::]:0");
        listener.set_nonblocking(true).expect("non-blocking");
        let port = listener.local_addr().expect("address").port();
        let hosts = [
            "self4.test",
            "self6.test",
            "selfmapped.test",
            "both.test",
            "10.77.0.1",
        ];
        let policy = Policy::new(hosts, [] as [&str; 0]).expect("policy");
        let this_machine = |ip| LocalAddress {
            ip,
            why: Local::ThisMachine(route::RouteType::LOCAL),
        };
        let expected = |host: &str| match host {
            "self4.test" | "10.77.0.1" => vec![this_machine(v4(10, 77, 0, 1))],
            "self6.test" => vec![this_machine(v6("fd77::1"))],
            "selfmapped.test" => vec![this_machine(v6("::ffff:10.77.0.1"))],
            _ => vec![
                LocalAddress {
                    ip: v4(127, 0, 0, 1),
                    why: Local::Loopback,
                },
                this_machine(v4(10, 77, 0, 1)),
            ],
        };
        let protocols = [Protocol::Connect, Protocol::Http, Protocol::Socks5];
        for host in hosts {
            for protocol in protocols {
                let decisions = Mutex::new(Vec::<Decision>::new());
                let record = |d: Decision| decisions.lock().expect("lock").push(d);
                let attempt = Attempt {
                    host,
                    port,
                    protocol,
                };
                let refused = Reason::LocalAddresses(expected(host));
                match open(attempt, &policy, &lab_resolver, &record).await {
                    Gate::Refused(reason) => assert_eq!(reason, refused, "{host} by {protocol}"),
                    other => panic!("{host} by {protocol}: {other:?}"),
                }
                let decisions = decisions.into_inner().expect("lock");
                assert_eq!(decisions.len(), 1, "{host} by {protocol}: one decision");
                assert!(!decisions[0].allowed);
                assert_eq!(decisions[0].reason, refused);
            }
        }
        assert_eq!(
            listener.accept().map(|_| ()).map_err(|e| e.kind()),
            Err(io::ErrorKind::WouldBlock),
            "a refused attempt reached the service"
        );

        // The control: the same attempts with local addresses allowed reach the service, once each.
        let listener = tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
        let lenient = policy.allowing_local_addresses();
        for host in hosts {
            for protocol in protocols {
                let attempt = Attempt {
                    host,
                    port,
                    protocol,
                };
                match open(attempt, &lenient, &lab_resolver, &|_| ()).await {
                    Gate::Open(_) => {}
                    other => panic!("{host} by {protocol}, local addresses allowed: {other:?}"),
                }
                listener.accept().await.unwrap_or_else(|e| {
                    panic!("{host} by {protocol} did not reach the service: {e}")
                });
            }
        }
    }
}
