//! The user and network namespaces the helper makes ahead for the namespace backend's commands
//! (RFC 0023, "The plan"): from a helper's second such command on, the next command's shim is
//! born in a pair made while the one before ran. On the real kernel, through the helper's own
//! socket: what a command sees of its sandbox is the same whether its namespaces were made
//! ahead or with it, and none is the host's. The mechanism itself (the shim is pid 1 in
//! exactly the pair made for it, and two pairs are two) is `sys::sandbox`'s unit test: the
//! kernel reuses a freed namespace's number, so commands that ran one after another cannot
//! tell by it whether they shared one.

// Linux only: the helper's own namespaces.
#![cfg(target_os = "linux")]

mod support;

use confine_protocol::{Backend, BackendChoice, ExitStatus, Mode, Network, Reply};
use support::skip::{Need, skip};
use support::{Peer, Scratch, available, backend_works, run_captured, spawn};

/// What a command sees of its sandbox, a line each: its user and network namespaces, the
/// network interfaces there, what a TCP connection over its loopback meets (the filter keeps
/// a command with the network denied from making one), its uid, its pid, and what its attempt
/// to create the host file named by its argument met.
const FACTS: &str = r#"
import os, socket, sys
print(os.readlink('/proc/self/ns/user'))
print(os.readlink('/proc/self/ns/net'))
with open('/proc/net/dev') as dev:
    print(' '.join(sorted(l.split(':')[0].strip() for l in dev.readlines()[2:])))
try:
    listener = socket.socket()
    listener.bind(('127.0.0.1', 0))
    listener.listen(1)
    socket.create_connection(listener.getsockname(), timeout=5).close()
    print('loopback answers')
except OSError as e:
    print('loopback', e.errno)
print(os.getuid())
print(os.getpid())
try:
    open(sys.argv[1], 'x').close()
    print('host written')
except OSError as e:
    print('host refused', e.errno)
"#;

#[test]
fn commands_see_the_same_sandbox_whether_its_namespaces_were_made_ahead_or_not() {
    const TEST: &str =
        "commands_see_the_same_sandbox_whether_its_namespaces_were_made_ahead_or_not";
    if !available::on_path("python3") {
        return skip(TEST, Need::Python3, "python3 is not installed");
    }
    if let Err((need, why)) = backend_works(BackendChoice::Namespaces) {
        return skip(TEST, need, &why);
    }
    let mut peer = Peer::embedded();
    peer.greet();
    let own = |kind: &str| {
        std::fs::read_link(format!("/proc/self/ns/{kind}"))
            .expect("this process's namespace")
            .display()
            .to_string()
    };
    let (host_user, host_net) = (own("user"), own("net"));
    // The first two make their own namespaces (a helper's first such command makes none
    // ahead); the second starts the making of the third's, which starts the fourth's.
    // The canary each command tries to create, checked on the host: a read-only command
    // writes nothing there.
    let scratch = Scratch::new("namespaces-ahead");
    let canary = scratch.0.join("written");
    let canary_arg = canary.to_str().expect("a UTF-8 scratch path");
    let mut seen: Vec<Vec<String>> = Vec::new();
    for id in 1..=4 {
        let mut request = spawn(id, &["python3", "-c", FACTS, canary_arg]);
        request.policy.mode = Mode::ReadOnly;
        request.policy.network = Network::Deny;
        request.backend = BackendChoice::Namespaces;
        let (replies, text) = run_captured(&mut peer, request);
        let exited = replies.iter().find_map(|r| match r {
            Reply::Exited(e) => Some(e),
            _ => None,
        });
        let Some(exited) = exited else {
            panic!("command {id} did not run: {replies:?}");
        };
        assert_eq!(exited.status, ExitStatus::Code(0), "command {id}: {text}");
        assert_eq!(exited.backend, Backend::Namespaces);
        let facts: Vec<String> = text.lines().map(str::to_owned).collect();
        let [user, net, interfaces, loopback, uid, pid, host] = facts.as_slice() else {
            panic!("command {id} said {text:?}");
        };
        assert!(
            user.starts_with("user:[") && net.starts_with("net:["),
            "{text}"
        );
        assert_ne!(
            (user, net),
            (&host_user, &host_net),
            "the host's namespaces"
        );
        assert_eq!(interfaces, "lo", "command {id}");
        // As the first command, which made its own namespaces, met it.
        let first = seen
            .first()
            .and_then(|facts| facts.get(3))
            .unwrap_or(loopback);
        assert_eq!(loopback, first, "command {id}");
        assert_eq!(
            uid.parse::<u32>().ok(),
            Some(nix::unistd::geteuid().as_raw()),
            "command {id}"
        );
        // The shim is the sandbox's pid 1, the command its first child.
        assert_eq!(pid, "2", "command {id}");
        assert!(host.starts_with("host refused"), "command {id}: {host}");
        assert!(!canary.exists(), "command {id} wrote on the host");
        seen.push(facts);
    }
}
