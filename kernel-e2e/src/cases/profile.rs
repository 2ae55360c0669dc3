//! P. The sandbox profile's settings (RFC 0014): denied reads and loopback sockets. Each case
//! runs the setting confined, checks the host and the facts, and runs the same command in
//! danger-full-access as the control that must reach what the sandbox denied.

use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::agentd::{OnReady, ReadyHook};
use crate::case::{Case, Cx, RunChecks, Verdict, fail};
use crate::ensure;
use crate::fixtures::{PathState, TcpCanary};
use crate::matrix::{Backend, CONFINED, Mode};

pub const CASES: &[Case] = &[
    Case {
        id: "P01",
        title: "denied reads: a home directory, `**/.env*` in the workspace and a link to them read nothing",
        modes: CONFINED,
        exclusive: false,
        body: denied_reads_read_nothing,
    },
    Case {
        id: "P02",
        title: "local_binding: a loopback server inside the sandbox is reachable from inside only",
        modes: CONFINED,
        exclusive: false,
        body: loopback_server_is_reachable_from_inside_only,
    },
    Case {
        id: "P03",
        title: "without local_binding binding a loopback socket is denied as the network",
        modes: CONFINED,
        exclusive: false,
        body: loopback_bind_is_denied_without_local_binding,
    },
];

fn denied_reads_read_nothing(cx: &mut Cx) -> Verdict {
    let tag = cx.tag.clone();
    let keys = cx.home_path("keys");
    cx.dir(&keys)?;
    let key = cx.file(&keys.join("id"), &format!("home-secret-{tag}\n"))?;
    let ws = cx.ws.clone();
    let env = cx.file(&ws.join(".env"), &format!("ws-secret-{tag}\n"))?;
    cx.file(
        &ws.join("app/.env.local"),
        &format!("nested-secret-{tag}\n"),
    )?;
    cx.file(&ws.join("readme.txt"), &format!("readable-{tag}\n"))?;
    cx.symlink(&key, &ws.join("alias"))?;
    let before = PathState::of(&env);
    let script = "cat \"$1/id\"; cat .env; cat app/.env.local; cat alias; ls \"$1\"; \
                  cat readme.txt; echo planted >> .env; true";
    let mut argv = cx.sh(script);
    argv.extend(["sh".into(), keys.clone().into()]);
    let with_denials =
        |invocation: crate::agentd::Invocation| invocation.deny_read(&keys).deny_read("**/.env*");

    let run = cx.run("confined", &with_denials(cx.confined(argv.clone())))?;
    let facts = run.ran()?.clone();
    let out = &run.stdout;
    ensure!(
        out.contains(&format!("readable-{tag}")),
        "the confined run could not read a file that is not denied: {out:?}"
    );
    ensure!(
        !out.contains("home-secret"),
        "the confined run read the denied home directory (directly or through a link): {out:?}"
    );
    let keys_real = keys.canonicalize().unwrap_or(keys.clone());
    let ws_real = ws.canonicalize().unwrap_or(ws.clone());
    for denied in [
        keys_real.clone(),
        ws_real.join(".env"),
        ws_real.join("app/.env.local"),
    ] {
        let shown = denied.to_string_lossy().into_owned();
        ensure!(
            facts.deny_read.contains(&shown),
            "the facts' deny_read {:?} does not name {shown}",
            facts.deny_read
        );
    }
    let missing = facts
        .enforcement
        .as_ref()
        .map(|e| e.missing.clone())
        .unwrap_or_default();
    let inside_root_gap = |path: &std::path::Path| {
        let start = format!("denied read {} inside the writable root", path.display());
        missing.iter().any(|m| m.starts_with(&start))
    };
    match (cx.cell.backend, cx.mode()) {
        // Landlock cannot take part of a writable root back: it must say so, and then the
        // workspace's files are readable; nothing else is.
        (Backend::Landlock, Mode::WorkspaceWrite) => {
            for path in [ws_real.join(".env"), ws_real.join("app/.env.local")] {
                ensure!(
                    inside_root_gap(&path),
                    "landlock cannot deny {} inside the workspace, yet enforcement.missing {missing:?} \
                     does not say so",
                    path.display()
                );
            }
        }
        (backend, _) => {
            ensure!(
                !out.contains("ws-secret") && !out.contains("nested-secret"),
                "the confined run read a denied file of the workspace: {out:?}"
            );
            cx.unchanged(&env, &before)?;
            if backend == Backend::Landlock {
                ensure!(
                    missing
                        .iter()
                        .any(|m| m.starts_with(crate::facts::DENIED_NAMES_GAP)),
                    "landlock lets the names in {} be listed, yet enforcement.missing {missing:?} \
                     does not say so",
                    keys_real.display()
                );
            } else {
                ensure!(
                    !out.contains("id\n"),
                    "the confined run listed the denied directory: {out:?}"
                );
            }
        }
    }

    // The control: unconfined, the same command reads every one of them.
    let control = cx.run("control", &with_denials(cx.control(argv)))?;
    control.succeeded()?;
    for secret in ["home-secret", "ws-secret", "nested-secret"] {
        ensure!(
            control.stdout.contains(secret),
            "the control run did not read the {secret}, so the confined run's silence proves \
             nothing: {:?}",
            control.stdout
        );
    }
    Ok(())
}

/// The server script: binds `127.0.0.1:PORT`, connects to itself, tries the host's canary
/// port, then says `ready` and waits for its stdin to close.
const SERVER: &str = "\
import socket, sys
port, canary = int(sys.argv[1]), int(sys.argv[2])
server = socket.socket()
server.bind(('127.0.0.1', port))
server.listen()
client = socket.create_connection(('127.0.0.1', port), timeout=5)
peer, _ = server.accept()
client.sendall(b'ping')
print('inside', peer.recv(4).decode(), flush=True)
try:
    socket.create_connection(('127.0.0.1', canary), timeout=2)
    print('host reached', flush=True)
except OSError as e:
    print('host unreached', e.errno, flush=True)
print('ready', flush=True)
sys.stdin.read()
";

fn free_port() -> Result<u16, crate::case::Stop> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| fail(format!("cannot find a free port: {e}")))
}

fn loopback_server_is_reachable_from_inside_only(cx: &mut Cx) -> Verdict {
    let python = cx.python_path()?;
    let script = cx.file(&cx.ws.join("server.py"), SERVER)?;
    let canary = TcpCanary::new().map_err(|e| fail(format!("cannot listen: {e}")))?;
    let port = free_port()?;
    let argv = vec![
        python.into(),
        script.into(),
        port.to_string().into(),
        canary.port().to_string().into(),
    ];
    // While the server waits, the host tries to reach it.
    let reached: Arc<Mutex<Option<bool>>> = Arc::new(Mutex::new(None));
    let hook = |reached: Arc<Mutex<Option<bool>>>| {
        ReadyHook::new(move |_| {
            let ok = TcpStream::connect_timeout(
                &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
                Duration::from_secs(2),
            )
            .is_ok();
            if let Ok(mut slot) = reached.lock() {
                *slot = Some(ok);
            }
            Ok(())
        })
    };
    if cx.cell.backend == Backend::Landlock {
        // No network namespace: a loopback-only network cannot be enforced, so it is refused.
        let run = cx.run(
            "confined, local_binding",
            &cx.confined(argv.clone()).local_binding(),
        )?;
        let reason = run.refused()?;
        ensure!(
            reason.contains("local_binding") && reason.contains("bwrap"),
            "the refusal does not say why local_binding needs bwrap: {reason}"
        );
        return Ok(());
    }
    let invocation = cx
        .confined(argv.clone())
        .local_binding()
        .on_ready(OnReady::Call(hook(reached.clone())));
    let run = cx.run("confined, local_binding", &invocation)?;
    run.succeeded()?;
    let facts = run.ran()?;
    ensure!(facts.local_binding, "the facts do not say local_binding");
    ensure!(
        run.stdout.contains("inside ping"),
        "the server was not reachable from inside the sandbox: {:?}",
        run.stdout
    );
    ensure!(
        run.stdout.contains("host unreached"),
        "the sandbox reached a listener on the host's loopback: {:?}",
        run.stdout
    );
    ensure!(
        canary.connections() == 0,
        "the host's listener accepted a connection from the sandbox"
    );
    ensure!(
        reached.lock().ok().and_then(|r| *r) == Some(false),
        "the host reached the server inside the sandbox (or never tried: {:?})",
        reached.lock().ok().and_then(|r| *r)
    );

    // The control: unconfined, the same server is reachable from the host, and it reaches the
    // host's listener.
    let reached: Arc<Mutex<Option<bool>>> = Arc::new(Mutex::new(None));
    let control = cx.run(
        "control",
        &cx.control(argv)
            .on_ready(OnReady::Call(hook(reached.clone()))),
    )?;
    control.succeeded()?;
    ensure!(
        control.stdout.contains("host reached") && canary.connections() == 1,
        "the control did not reach the host's listener: {:?}",
        control.stdout
    );
    ensure!(
        reached.lock().ok().and_then(|r| *r) == Some(true),
        "the host did not reach the control's server, so the confined run's isolation proves \
         nothing"
    );
    Ok(())
}

fn loopback_bind_is_denied_without_local_binding(cx: &mut Cx) -> Verdict {
    let python = cx.python_path()?;
    let script = cx.file(&cx.ws.join("server.py"), SERVER)?;
    let port = free_port()?;
    let argv = vec![
        python.into(),
        script.into(),
        port.to_string().into(),
        port.to_string().into(),
    ];
    let run = cx.run("confined", &cx.confined(argv.clone()))?;
    run.denied_as(&["network"])?;
    ensure!(
        !run.stdout.contains("inside"),
        "the server ran without local_binding: {:?}",
        run.stdout
    );
    let control = cx.run("control", &cx.control(argv))?;
    control.succeeded()?;
    ensure!(
        control.stdout.contains("inside ping"),
        "the control's server did not run: {:?}",
        control.stdout
    );
    Ok(())
}
