//! P. The sandbox profile's settings (RFC 0014): denied reads and loopback sockets, and the
//! network allow-list (RFC 0016). Each case runs the setting confined, checks the host and the
//! facts, and runs the same command in danger-full-access as the control that must reach what
//! the sandbox denied — except P08, whose refusals are the proxy's own: its controls are the
//! same requests to another machine, and to this one with local addresses allowed.

use std::ffi::OsString;
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::agentd::{Invocation, OnReady, ReadyHook};
use crate::case::{Case, Cx, RunChecks, Stop, Verdict, fail};
use crate::ensure;
use crate::facts::{Facts, ProxyDecision};
use crate::fixtures::{PathState, TcpCanary, UnixCanary};
use crate::matrix::{Backend, CONFINED, Mode};
use crate::netns::{HERE_V4, HERE_V6, NetLab};

pub const CASES: &[Case] = &[
    Case {
        id: "P01",
        title: "denied reads: a home directory, `**/.env*` in the workspace and a link to them read nothing; the mask cannot be moved or linked away",
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
        id: "P04",
        title: "the network allow-list (bwrap and the helper's own namespaces: its bridge; Landlock: the shim's connect supervision): an allowed name is reached through the proxy, another name, an IP literal and a direct connection are not",
        modes: CONFINED,
        exclusive: false,
        body: the_allow_list_reaches_only_what_it_allows,
    },
    Case {
        id: "P08",
        title: "the allow-list never leads to this machine: a name resolving to an address of its own interface (IPv4, IPv6, IPv4-mapped, or that and 127.0.0.1) is refused over HTTP, CONNECT and SOCKS5; another machine's is reached, and this one with allow_local_addresses",
        modes: CONFINED,
        exclusive: false,
        body: the_allow_list_never_leads_to_this_machine,
    },
    Case {
        id: "P05",
        title: "pip installs from a local index through the allow-list, its cache writable with the pip preset and untouched without it",
        modes: &[Mode::WorkspaceWrite],
        exclusive: false,
        body: pip_installs_through_the_allow_list_with_its_cache_preset,
    },
    Case {
        id: "P06",
        title: "unix_sockets: the listed host socket is reached; another one, a link to it and a datagram are not; Landlock refuses the list",
        modes: CONFINED,
        exclusive: false,
        body: only_the_listed_unix_socket_is_reached,
    },
    Case {
        id: "P07",
        title: "denied reads cannot be hidden from the `**/` walk: a workspace directory made unlistable (as a user) or moved deeper than a path can name fails the next command, naming it; another user's unreachable directory is passed over",
        modes: CONFINED,
        exclusive: false,
        body: the_deny_read_walk_cannot_be_hidden_from,
    },
    Case {
        id: "P03",
        title: "without local_binding binding a loopback socket is denied as the network, and a Unix socket as a socket",
        modes: CONFINED,
        exclusive: false,
        body: loopback_bind_is_denied_without_local_binding,
    },
];

/// The files the command is denied: a key in `keys` under HOME (and a link to it in the
/// workspace), the workspace's `.env` and `app/.env.local`; beside them a readme it may read.
/// Returns the path of the `.env`.
fn plant_denied_files(cx: &Cx, keys: &Path, ws: &Path) -> Result<PathBuf, Stop> {
    let tag = &cx.tag;
    cx.dir(keys)?;
    let key = cx.file(&keys.join("id"), &format!("home-secret-{tag}\n"))?;
    let env = cx.file(&ws.join(".env"), &format!("ws-secret-{tag}\n"))?;
    cx.file(
        &ws.join("app/.env.local"),
        &format!("nested-secret-{tag}\n"),
    )?;
    cx.file(&ws.join("readme.txt"), &format!("readable-{tag}\n"))?;
    cx.symlink(&key, &ws.join("alias"))?;
    Ok(env)
}

/// Fails unless the facts' `deny_read` names the denied directory and both denied files of
/// the workspace, by their real paths.
fn facts_name_the_denied_reads(facts: &Facts, keys_real: &Path, ws_real: &Path) -> Verdict {
    for denied in [
        keys_real.to_path_buf(),
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
    Ok(())
}

/// The control: unconfined, the same command reads every one of them, and moves the `.env`.
fn the_control_reads_every_denied_file(cx: &mut Cx, invocation: &Invocation, ws: &Path) -> Verdict {
    let control = cx.run("control", invocation)?;
    control.succeeded()?;
    ensure!(
        ws.join("moved").exists(),
        "the control could not move .env, so the confined run's failing to proves nothing"
    );
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

/// Where Landlock lets the command move the workspace's `.env` too: puts it back, as it was,
/// for the control.
fn put_the_env_back(cx: &Cx, ws: &Path, env: &Path) -> Verdict {
    for made in ["moved", "hard"] {
        let _ = std::fs::remove_file(ws.join(made));
    }
    cx.file(env, &format!("ws-secret-{}\n", cx.tag))?;
    Ok(())
}

fn denied_reads_read_nothing(cx: &mut Cx) -> Verdict {
    let tag = cx.tag.clone();
    let keys = cx.home_path("keys");
    let ws = cx.ws.clone();
    let env = plant_denied_files(cx, &keys, &ws)?;
    let before = PathState::of(&env);
    // Then, as a command would try to get the content out from under its mask: move it, link
    // it, and read what that made.
    let script = "cat \"$1/id\"; cat .env; cat app/.env.local; cat alias; ls \"$1\"; \
                  cat readme.txt; echo planted >> .env; mv .env moved; ln .env hard; \
                  cat moved hard; true";
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
    facts_name_the_denied_reads(&facts, &keys_real, &ws_real)?;
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
            put_the_env_back(cx, &ws, &env)?;
        }
        (backend, _) => {
            ensure!(
                !out.contains("ws-secret") && !out.contains("nested-secret"),
                "the confined run read a denied file of the workspace: {out:?}"
            );
            cx.unchanged(&env, &before)?;
            for made in ["moved", "hard"] {
                ensure!(
                    !ws.join(made).exists(),
                    "the denied .env was {made} out from under its mask"
                );
            }
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

    let control = with_denials(cx.control(argv));
    the_control_reads_every_denied_file(cx, &control, &ws)
}

/// A directory name of 250 bytes: twenty of them nest deeper than a path can name.
const LONG_NAME_BYTES: usize = 250;
/// How many of them the hiding command nests `app/` under.
const LONG_NAME_LEVELS: usize = 20;

fn the_deny_read_walk_cannot_be_hidden_from(cx: &mut Cx) -> Verdict {
    let tag = cx.tag.clone();
    let ws = cx.ws.clone();
    let secret = format!("hidden-secret-{tag}");
    cx.file(&ws.join("app/.env"), &format!("{secret}\n"))?;
    an_unlistable_directory_is_looked_through(cx, &ws, &secret)?;
    a_buried_directory_is_followed(cx, &ws, &secret)?;
    an_unsearchable_volume_is_passed_over(cx, &ws, &secret)
}

/// A command run confined in workspace-write mode with `**/.env` denied: it hides what the
/// next one reads.
fn hide_in_ww(cx: &Cx, script: &str, args: &[&str]) -> Invocation {
    let mut argv = cx.sh(script);
    argv.push("sh".into());
    argv.extend(args.iter().map(Into::into));
    let mut invocation = cx.confined(argv);
    invocation.mode = Mode::WorkspaceWrite;
    invocation.deny_read("**/.env")
}

/// A command, confined or not, with `**/.env` denied: it tries to read what was hidden.
fn read_hidden(cx: &Cx, script: &str, args: &[&str], confined: bool) -> Invocation {
    let mut argv = cx.sh(script);
    argv.push("sh".into());
    argv.extend(args.iter().map(Into::into));
    let invocation = if confined {
        cx.confined(argv)
    } else {
        cx.control(argv)
    };
    invocation.deny_read("**/.env")
}

/// Fails unless agentd kept the command from running, saying `why` of `path`.
fn did_not_run(run: &crate::agentd::Run, why: &str, path: &str) -> Verdict {
    ensure!(
        run.status == Some(125),
        "agentd exited {:?}, not 125: a `**/` pattern it could not look for everywhere \
         must keep the command from running",
        run.status
    );
    ensure!(
        run.stderr.contains(why) && run.stderr.contains(path),
        "agentd's refusal does not say {why:?} of {path}: {:?}",
        run.stderr
    );
    ensure!(
        !run.stdout.contains("ran-") && !run.stdout.contains("hidden-secret"),
        "the command ran although its denied reads could not all be found: {:?}",
        run.stdout
    );
    Ok(())
}

/// The directory made unlistable by a confined command. agentd as root lists it anyway
/// and denies what it holds; as any other user it cannot, and must not run the next one.
fn an_unlistable_directory_is_looked_through(cx: &mut Cx, ws: &Path, secret: &str) -> Verdict {
    let hide = cx.run("hide (chmod)", &hide_in_ww(cx, "chmod 000 app", &[]))?;
    hide.succeeded()?;
    let reader = "chmod 700 app; echo ran-$$; cat app/.env";
    if cx.user().is_root() {
        let run = cx.run("confined (chmod)", &read_hidden(cx, reader, &[], true))?;
        let facts = run.ran()?;
        let env = ws
            .canonicalize()
            .unwrap_or(ws.to_path_buf())
            .join("app/.env");
        ensure!(
            facts
                .deny_read
                .contains(&env.to_string_lossy().into_owned()),
            "as root agentd can list the directory, so its .env must be denied: {:?}",
            facts.deny_read
        );
        let gap = cx.cell.backend == Backend::Landlock && cx.mode() == Mode::WorkspaceWrite;
        ensure!(
            gap || !run.stdout.contains(secret),
            "the confined run read the hidden .env: {:?}",
            run.stdout
        );
    } else {
        let run = cx.run_unreported("confined (chmod)", &read_hidden(cx, reader, &[], true))?;
        did_not_run(
            &run,
            "cannot look through",
            &ws.join("app").to_string_lossy(),
        )?;
    }
    std::fs::set_permissions(ws.join("app"), std::fs::Permissions::from_mode(0o700))
        .map_err(|e| fail(format!("restoring app's mode: {e}")))?;
    let control = cx.run(
        "control (chmod)",
        &read_hidden(cx, "cat app/.env", &[], false),
    )?;
    control.succeeded()?;
    ensure!(
        control.stdout.contains(secret),
        "the control could not read app/.env, so the confined run's failing to proves nothing: \
         {:?}",
        control.stdout
    );
    Ok(())
}

/// The directory moved under a chain of directories longer than a path can name: the
/// walk follows it by descriptor and finds the .env, which no path can deny.
fn a_buried_directory_is_followed(cx: &mut Cx, ws: &Path, secret: &str) -> Verdict {
    let long = "d".repeat(LONG_NAME_BYTES);
    let levels = LONG_NAME_LEVELS.to_string();
    // Each step names short paths only: the shell could not `cd` that deep.
    let bury = "set -e; mkdir c; mv app c/; i=0; \
                while [ $i -lt \"$2\" ]; do mkdir t; mv c \"t/$1\"; mv t c; i=$((i+1)); done; \
                mv c deep";
    let hide = cx.run("hide (deep)", &hide_in_ww(cx, bury, &[&long, &levels]))?;
    hide.succeeded()?;
    let dig = "echo ran-$$; find deep -name .env -execdir cat {} \\;";
    let run = cx.run_unreported("confined (deep)", &read_hidden(cx, dig, &[], true))?;
    did_not_run(
        &run,
        "longer than the kernel can name",
        &ws.join("deep").to_string_lossy(),
    )?;
    let control = cx.run("control (deep)", &read_hidden(cx, dig, &[], false))?;
    control.succeeded()?;
    ensure!(
        control.stdout.contains(secret),
        "the control could not read the buried .env, so the confined run's failing to proves \
         nothing: {:?}",
        control.stdout
    );
    std::fs::remove_dir_all(ws.join("deep"))
        .map_err(|e| fail(format!("removing the buried directories: {e}")))?;
    Ok(())
}

/// What no command of this user could read either is no reason to refuse: a directory
/// root owns and keeps to itself (a container's volume, say) is passed over.
fn an_unsearchable_volume_is_passed_over(cx: &mut Cx, ws: &Path, secret: &str) -> Verdict {
    if cx.user().is_root() {
        cx.note("as root every directory can be listed: the passed-over case is a user's");
        return Ok(());
    }
    // The volume must be someone else's: only a suite running as root makes it so (as the
    // user's own, a command could open it again with chmod and read it).
    if !nix::unistd::geteuid().is_root() {
        cx.note(
            "the suite runs as this user and cannot make a directory of someone else's: the \
             passed-over case runs when the suite runs as root",
        );
        return Ok(());
    }
    let volume = ws.join("volume");
    std::fs::create_dir(&volume)
        .map_err(|e| fail(format!("creating {}: {e}", volume.display())))?;
    std::fs::write(volume.join(".env"), format!("{secret}\n"))
        .map_err(|e| fail(format!("writing the volume's .env: {e}")))?;
    std::fs::set_permissions(&volume, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| fail(format!("closing {}: {e}", volume.display())))?;
    let run = cx.run(
        "confined (volume)",
        &read_hidden(cx, "echo ran-$$; cat volume/.env || true", &[], true),
    )?;
    run.succeeded()?;
    ensure!(
        run.stdout.contains("ran-") && !run.stdout.contains(secret),
        "a directory this user cannot search either must neither stop the command nor be \
         read: {:?}",
        run.stdout
    );
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

/// Under Landlock there is no network namespace: a loopback-only network cannot be enforced, so
/// it is refused, and the refusal says why.
fn local_binding_is_refused(cx: &mut Cx, argv: Vec<OsString>) -> Verdict {
    let run = cx.run(
        "confined, local_binding",
        &cx.confined(argv).local_binding(),
    )?;
    let reason = run.refused()?;
    ensure!(
        reason.contains("local_binding") && reason.contains("bwrap"),
        "the refusal does not say why local_binding needs bwrap: {reason}"
    );
    Ok(())
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
        return local_binding_is_refused(cx, argv);
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

    // A Unix socket is denied as one (with or without local_binding), its traceback naming it.
    let unix = cx.file(
        &cx.ws.join("unix.py"),
        "import socket\nsock = socket.socket(socket.AF_UNIX)\nprint('unix socket made')\n",
    )?;
    let argv = vec![cx.python_path()?.into(), unix.into()];
    let run = cx.run("confined unix socket", &cx.confined(argv.clone()))?;
    run.denied_as(&["socket"])?;
    let control = cx.run("control unix socket", &cx.control(argv))?;
    control.succeeded()?;
    ensure!(
        control.stdout.contains("unix socket made"),
        "the control could not make a Unix socket: {:?}",
        control.stdout
    );
    Ok(())
}

/// Asks through the bridge for `localhost`, a name not allowed and an IP literal, then tries
/// `localhost` without the proxy; one line per attempt.
const CLIENT: &str = "\
import os, sys, urllib.request
# The proxy is asked for every host here, loopback literals too.
os.environ.pop('no_proxy', None); os.environ.pop('NO_PROXY', None)
port = sys.argv[1]
proxied = urllib.request.build_opener(urllib.request.ProxyHandler({'http': 'http://127.0.0.1:3128'}))
direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
for name, opener, host in [('allowed', proxied, 'localhost'), ('other', proxied, 'refused.invalid'),
                           ('literal', proxied, '127.0.0.1'), ('direct', direct, 'localhost')]:
    try:
        print(name, 'got', opener.open(f'http://{host}:{port}/', timeout=10).read().decode(), flush=True)
    except Exception as e:
        print(name, 'failed', str(e).replace('\\n', ' '), flush=True)
";

/// What the test server answers to one path: status, content type, body, and whether the
/// request counts (the server counts the requests that matter to a case).
type Page = (&'static str, &'static str, Vec<u8>, bool);

/// A host HTTP server on 127.0.0.1 answering each request with `respond(path)`, cacheable (as
/// real indexes are: pip caches only what says so), one request per connection; returns its
/// port and how many counted requests it answered. The thread ends with the suite's process.
fn http_server(
    respond: impl Fn(&str) -> Page + Send + 'static,
) -> Result<(u16, Arc<Mutex<usize>>), crate::case::Stop> {
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|e| fail(format!("cannot listen: {e}")))?;
    serve_http(listener, respond)
}

/// [`http_server`] on a listener of the caller's.
fn serve_http(
    listener: TcpListener,
    respond: impl Fn(&str) -> Page + Send + 'static,
) -> Result<(u16, Arc<Mutex<usize>>), crate::case::Stop> {
    use std::io::{BufRead, BufReader, Write};
    let port = listener
        .local_addr()
        .map_err(|e| fail(format!("no address: {e}")))?
        .port();
    let counted = Arc::new(Mutex::new(0usize));
    let count = counted.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(&stream);
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            // The rest of the head, up to its empty line.
            let mut header = String::new();
            while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                header.clear();
            }
            let path = line.split_whitespace().nth(1).unwrap_or("");
            let (status, kind, body, counts) = respond(path);
            let head = format!(
                "HTTP/1.0 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\
                 Date: Thu, 01 Jan 2026 00:00:00 GMT\r\nCache-Control: max-age=600\r\n\r\n",
                body.len()
            );
            let mut stream = &stream;
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(&body);
            if counts && let Ok(mut n) = count.lock() {
                *n += 1;
            }
        }
    });
    Ok((port, counted))
}

fn the_allow_list_reaches_only_what_it_allows(cx: &mut Cx) -> Verdict {
    let python = cx.python_path()?;
    let script = cx.file(&cx.ws.join("client.py"), CLIENT)?;
    let body = format!("served-{}", cx.tag);
    let page = body.clone().into_bytes();
    let (port, served) = http_server(move |_| ("200 OK", "text/plain", page.clone(), true))?;
    let argv = vec![python.into(), script.into(), port.to_string().into()];
    let run = cx.run(
        "confined, allow-list",
        &cx.confined(argv.clone()).allow_domain("localhost"),
    )?;
    run.succeeded()?;
    let out = &run.stdout;
    ensure!(
        out.contains(&format!("allowed got {body}")),
        "the allowed name was not reached through the proxy: {out:?}"
    );
    for name in ["other", "literal", "direct"] {
        ensure!(
            out.contains(&format!("{name} failed")),
            "the {name} attempt was not refused: {out:?}"
        );
    }
    ensure!(
        out.contains("other failed HTTP Error 403")
            && out.contains("literal failed HTTP Error 403"),
        "the proxy did not answer its refusals with 403: {out:?}"
    );
    let count = served.lock().map(|n| *n).unwrap_or(0);
    ensure!(
        count == 1,
        "the host's server answered {count} requests; only the allowed one may reach it"
    );
    let decisions: Vec<(String, bool)> = run
        .ran()?
        .proxy
        .iter()
        .flatten()
        .map(|d| (d.host.clone(), d.allowed))
        .collect();
    ensure!(
        decisions
            == vec![
                ("localhost".to_owned(), true),
                ("refused.invalid".to_owned(), false),
                ("127.0.0.1".to_owned(), false),
            ],
        "the facts' proxy decisions are {decisions:?}"
    );

    // The control: unconfined, the direct connection reaches the server.
    let control = cx.run("control", &cx.control(argv))?;
    control.succeeded()?;
    ensure!(
        control.stdout.contains(&format!("direct got {body}")),
        "the control did not reach the host's server directly: {:?}",
        control.stdout
    );
    Ok(())
}

/// Asks the proxy for each name given, by HTTP forwarding, `CONNECT` and SOCKS5, and prints
/// `NAME PROTOCOL got BODY` or `NAME PROTOCOL failed WHY`. Names starting `remote` are asked on
/// the second port, the others on the first.
const LAB_CLIENT: &str = "\
import os, socket, sys, urllib.request
os.environ.pop('no_proxy', None); os.environ.pop('NO_PROXY', None)
PROXY = ('127.0.0.1', 3128)
here_port, there_port = int(sys.argv[1]), int(sys.argv[2])

def exactly(s, n):
    data = b''
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise OSError(f'the proxy closed after {data!r}')
        data += chunk
    return data

def rest(s):
    data = b''
    while chunk := s.recv(65536):
        data += chunk
    return data

def get(s, host):
    s.sendall(f'GET / HTTP/1.0\\r\\nHost: {host}\\r\\n\\r\\n'.encode())
    return rest(s).split(b'\\r\\n\\r\\n', 1)[-1].decode()

def http(host, port):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({'http': 'http://%s:%d' % PROXY}))
    return opener.open(f'http://{host}:{port}/', timeout=20).read().decode()

def connect(host, port):
    with socket.create_connection(PROXY, timeout=20) as s:
        s.sendall(f'CONNECT {host}:{port} HTTP/1.1\\r\\nHost: {host}:{port}\\r\\n\\r\\n'.encode())
        head = b''
        while not head.endswith(b'\\r\\n\\r\\n'):
            head += exactly(s, 1)
        status = head.split(b'\\r\\n', 1)[0].decode()
        if status.split()[1] != '200':
            raise OSError(f'{status}: {rest(s).decode().strip()}')
        return get(s, host)

def socks5(host, port):
    with socket.create_connection(PROXY, timeout=20) as s:
        s.sendall(b'\\x05\\x01\\x00')
        if exactly(s, 2) != b'\\x05\\x00':
            raise OSError('no SOCKS5 method')
        name = host.encode()
        s.sendall(b'\\x05\\x01\\x00\\x03' + bytes([len(name)]) + name + port.to_bytes(2, 'big'))
        reply = exactly(s, 10)
        if reply[1] != 0:
            raise OSError(f'SOCKS5 reply {reply[1]}')
        return get(s, host)

for name in sys.argv[3:]:
    port = there_port if name.startswith('remote') else here_port
    for protocol, ask in [('http', http), ('connect', connect), ('socks5', socks5)]:
        try:
            print(name, protocol, 'got', ask(name, port), flush=True)
        except Exception as e:
            print(name, protocol, 'failed', str(e).replace('\\n', ' '), flush=True)
";

/// The names of the lab's host file: here's addresses in each form, here's and loopback
/// together, and there's.
const LAB_HOSTS: &str = "\
10.77.0.1 self4.test both.test
fd77::1 self6.test
::ffff:10.77.0.1 selfmapped.test
127.0.0.1 both.test
10.77.0.2 remote4.test
fd77::2 remote6.test
::ffff:10.77.0.2 remotemapped.test
";

const LAB_SELF: [&str; 4] = ["self4.test", "self6.test", "selfmapped.test", "both.test"];
const LAB_REMOTE: [&str; 3] = ["remote4.test", "remote6.test", "remotemapped.test"];
const LAB_PROTOCOLS: [&str; 3] = ["http", "connect", "socks5"];

/// Why the proxy refuses an address of this machine, as a decision's reason says it.
const THIS_MACHINE: &str = "(an address of this machine (the kernel's route to it is local))";

/// A service bound to `::` (IPv4 too) in one of the lab's namespaces, answering `body`.
fn lab_server(
    lab: &NetLab,
    there: bool,
    body: String,
) -> Result<(u16, Arc<Mutex<usize>>), crate::case::Stop> {
    let bind = || TcpListener::bind("[::]:0").map_err(|e| fail(format!("cannot listen: {e}")));
    let listener = if there {
        lab.in_there(bind)??
    } else {
        lab.in_here(bind)??
    };
    let page = body.into_bytes();
    serve_http(listener, move |_| {
        ("200 OK", "text/plain", page.clone(), true)
    })
}

/// Fails unless the proxy allowed exactly the other machine's names, and each refusal names the
/// addresses of this machine it would have led to.
fn each_decision_says_why(decisions: &[ProxyDecision]) -> Verdict {
    for decision in decisions {
        let remote = LAB_REMOTE.contains(&decision.host.as_str());
        ensure!(
            decision.allowed == remote,
            "the decision on {} says allowed = {}: {}",
            decision.host,
            decision.allowed,
            decision.reason
        );
        let expected = match decision.host.as_str() {
            "self4.test" => vec![format!("{HERE_V4} {THIS_MACHINE}")],
            "self6.test" => vec![format!("{HERE_V6} {THIS_MACHINE}")],
            "selfmapped.test" => vec![format!("::ffff:{HERE_V4} {THIS_MACHINE}")],
            "both.test" => vec![
                format!("{HERE_V4} {THIS_MACHINE}"),
                "127.0.0.1 (loopback)".to_owned(),
            ],
            _ => Vec::new(),
        };
        for part in expected {
            ensure!(
                decision.reason.contains(&part),
                "the refusal of {} does not say {part:?}: {}",
                decision.host,
                decision.reason
            );
        }
    }
    Ok(())
}

/// Fails unless, in the output of the strict run, every name of this machine was refused and
/// every name of the other machine got `there_body`, over every protocol.
fn each_name_went_where_it_should(out: &str, there_body: &str) -> Verdict {
    for name in LAB_SELF {
        for protocol in LAB_PROTOCOLS {
            ensure!(
                out.contains(&format!("{name} {protocol} failed")),
                "{name} over {protocol} was not refused: {out:?}"
            );
        }
    }
    for name in LAB_REMOTE {
        for protocol in LAB_PROTOCOLS {
            ensure!(
                out.contains(&format!("{name} {protocol} got {there_body}")),
                "{name} over {protocol} did not reach the other machine: {out:?}"
            );
        }
    }
    Ok(())
}

fn the_allow_list_never_leads_to_this_machine(cx: &mut Cx) -> Verdict {
    let python = cx.python_path()?;
    let hosts = cx.file(&cx.dir.join("hosts"), LAB_HOSTS)?;
    let lab = NetLab::new(&hosts)?;
    let (here_body, there_body) = (format!("here-{}", cx.tag), format!("there-{}", cx.tag));
    let (here_port, here_served) = lab_server(&lab, false, here_body.clone())?;
    let (there_port, there_served) = lab_server(&lab, true, there_body.clone())?;
    let script = cx.file(&cx.ws.join("client.py"), LAB_CLIENT)?;
    let argv = |names: &[&str]| {
        let mut argv: Vec<std::ffi::OsString> = vec![
            python.clone().into(),
            script.clone().into(),
            here_port.to_string().into(),
            there_port.to_string().into(),
        ];
        argv.extend(names.iter().map(Into::into));
        argv
    };
    let served = |counter: &Arc<Mutex<usize>>| counter.lock().map(|n| *n).unwrap_or(0);

    // Every name allowed, local addresses not: this machine's are refused, the other machine's
    // reached.
    let mut strict = cx.confined(argv(&[LAB_SELF.as_slice(), LAB_REMOTE.as_slice()].concat()));
    for name in LAB_SELF.iter().chain(&LAB_REMOTE) {
        strict = strict.strict_domain(name);
    }
    let run = lab.here(|| cx.run("confined, allow-list", &strict))??;
    let facts = run.ran()?.clone();
    each_name_went_where_it_should(&run.stdout, &there_body)?;
    ensure!(
        served(&here_served) == 0,
        "this machine's service answered {} requests through the allow-list",
        served(&here_served)
    );
    ensure!(
        served(&there_served) == LAB_REMOTE.len() * LAB_PROTOCOLS.len(),
        "the other machine's service answered {} requests, not one per name and protocol",
        served(&there_served)
    );
    let decisions = facts.proxy.unwrap_or_default();
    ensure!(
        decisions.len() == (LAB_SELF.len() + LAB_REMOTE.len()) * LAB_PROTOCOLS.len(),
        "the facts hold {} decisions: {decisions:?}",
        decisions.len()
    );
    each_decision_says_why(&decisions)?;

    // The control: with local addresses allowed, the same requests reach this machine's
    // service, every one.
    let mut lenient = cx.confined(argv(&LAB_SELF));
    for name in LAB_SELF {
        lenient = lenient.allow_domain(name);
    }
    let run = lab.here(|| cx.run("confined, allow-list with local addresses", &lenient))??;
    run.succeeded()?;
    for name in LAB_SELF {
        for protocol in LAB_PROTOCOLS {
            ensure!(
                run.stdout
                    .contains(&format!("{name} {protocol} got {here_body}")),
                "with local addresses allowed, {name} over {protocol} did not reach this \
                 machine's service: {:?}",
                run.stdout
            );
        }
    }
    ensure!(
        served(&here_served) == LAB_SELF.len() * LAB_PROTOCOLS.len(),
        "this machine's service answered {} requests, not one per name and protocol",
        served(&here_served)
    );
    Ok(())
}

/// Writes a minimal wheel of `tinypkg` 1.0 (`VALUE = 42`) to the path it is given.
const WHEEL: &str = "\
import base64, hashlib, sys, zipfile
files = {'tinypkg/__init__.py': b'VALUE = 42\\n',
         'tinypkg-1.0.dist-info/METADATA': b'Metadata-Version: 2.1\\nName: tinypkg\\nVersion: 1.0\\n',
         'tinypkg-1.0.dist-info/WHEEL': b'Wheel-Version: 1.0\\nGenerator: e2e\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n'}
record = []
with zipfile.ZipFile(sys.argv[1], 'w') as wheel:
    for path, data in files.items():
        wheel.writestr(path, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()
        record.append(f'{path},sha256={digest},{len(data)}')
    record.append('tinypkg-1.0.dist-info/RECORD,,')
    wheel.writestr('tinypkg-1.0.dist-info/RECORD', '\\n'.join(record) + '\\n')
";

const WHEEL_NAME: &str = "tinypkg-1.0-py3-none-any.whl";

/// A package index serving `wheel` as `tinypkg`; counts the downloads of the wheel.
fn package_index(wheel: Vec<u8>) -> Result<(u16, Arc<Mutex<usize>>), crate::case::Stop> {
    http_server(move |path| {
        if path.ends_with(".whl") {
            ("200 OK", "application/octet-stream", wheel.clone(), true)
        } else if path.trim_end_matches('/').ends_with("/simple/tinypkg") {
            let page =
                format!("<html><body><a href=\"{WHEEL_NAME}\">{WHEEL_NAME}</a></body></html>");
            ("200 OK", "text/html", page.into_bytes(), false)
        } else {
            (
                "404 Not Found",
                "text/plain",
                b"no such page".to_vec(),
                false,
            )
        }
    })
}

/// Whether `dir` holds any file, at any depth.
fn holds_files(dir: &std::path::Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|e| {
        let path = e.path();
        path.is_file() || (path.is_dir() && holds_files(&path))
    })
}

/// Fails unless the install with the preset had its cache `cache` as a writable root (the facts
/// name it) and filled it on the host.
fn the_preset_cache_is_written(run: &crate::agentd::Run, cache: &Path) -> Verdict {
    let real = cache.canonicalize().unwrap_or(cache.to_path_buf());
    let roots = &run.ran()?.writable_roots;
    ensure!(
        roots.contains(&real.to_string_lossy().into_owned()),
        "the facts' writable_roots {roots:?} do not name the pip cache {}",
        real.display()
    );
    ensure!(
        holds_files(cache),
        "pip's cache on the host is empty after the install with the preset"
    );
    Ok(())
}

/// Builds the test wheel with `python`; its bytes.
fn build_wheel(cx: &Cx, python: &Path) -> Result<Vec<u8>, Stop> {
    let wheel_path = cx.dir.join(WHEEL_NAME);
    let built = std::process::Command::new(python)
        .arg("-c")
        .arg(WHEEL)
        .arg(&wheel_path)
        .status()
        .map_err(|e| fail(format!("cannot build the wheel: {e}")))?;
    ensure!(built.success(), "building the test wheel failed: {built}");
    std::fs::read(&wheel_path).map_err(|e| fail(format!("the wheel: {e}")))
}

/// Fails unless the install without the preset reports its cache `cache` as agentd can know
/// it: as the denied write pip said it disabled, when pip's own check saw it; else not at all.
fn the_disabled_cache_is_reported(cx: &mut Cx, run: &crate::agentd::Run, cache: &Path) -> Verdict {
    let real = cache.canonicalize().unwrap_or(cache.to_path_buf());
    let root = cx.user().uid == 0;
    // The helper's own namespaces make the same read-only mounts as bwrap.
    if !root && matches!(cx.cell.backend, Backend::Bwrap | Backend::Namespaces) {
        let warning = format!(
            "The directory '{}' or its parent directory is not owned or is not writable",
            real.display()
        );
        ensure!(
            run.command_stderr_tail().contains(&warning),
            "pip did not say it disabled its cache {}: {:?}",
            real.display(),
            run.command_stderr_tail()
        );
        run.succeeded_denied_as(&["file-write"])?;
        let paths = &run.ran()?.denied_paths;
        ensure!(
            paths.contains(&real.to_string_lossy().into_owned()),
            "the facts' denied_paths {paths:?} do not name the pip cache {}",
            real.display()
        );
    } else {
        cx.note(if root {
            "as root pip checks only that root owns its cache directory: it says nothing and its \
             cache writes fail silently, so no denial is reported"
        } else {
            "under Landlock pip's access(2) check of its cache directory passes (Landlock does \
             not govern access(2)): it says nothing and its cache writes fail silently, so no \
             denial is reported"
        });
        ensure!(
            !run.ran()?.denied,
            "pip said nothing, yet the facts say denied {:?}",
            run.ran()?.denials
        );
    }
    Ok(())
}

fn pip_installs_through_the_allow_list_with_its_cache_preset(cx: &mut Cx) -> Verdict {
    let python = cx.python_path()?;
    let wheel = build_wheel(cx, &python)?;
    let (port, downloads) = package_index(wheel)?;
    let list = "network = \"allow-list\"\nallowed_domains = [\"localhost\"]\nallow_local_addresses = true\n";
    let with_preset = cx.file(
        &cx.dir.join("with-preset.toml"),
        &format!("[sandbox]\ncache = [\"pip\"]\n{list}"),
    )?;
    let without_preset = cx.file(
        &cx.dir.join("without-preset.toml"),
        &format!("[sandbox]\n{list}"),
    )?;
    let script = format!(
        "{} -m venv venv && venv/bin/pip install --no-input --disable-pip-version-check \
         --index-url http://localhost:{port}/simple/ --trusted-host localhost tinypkg && \
         venv/bin/python -c 'import tinypkg; print(\"value\", tinypkg.VALUE)'",
        python.display()
    );
    let install = |cx: &mut Cx,
                   label: &str,
                   config: &std::path::Path,
                   cache: &std::path::Path,
                   confined: bool| {
        let ws = cx.dir.join(label);
        cx.dir(&ws)?;
        cx.dir(cache)?;
        let argv = cx.sh(&script);
        let base = if confined {
            cx.confined_in(&ws, argv)
        } else {
            cx.control_in(&ws, argv)
        };
        let invocation = base
            .config(config)
            .env("PIP_CACHE_DIR", cache)
            .command_env("PIP_CACHE_DIR", cache);
        cx.run(label, &invocation)
    };

    let cache = cx.dir.join("cache-with");
    let run = install(cx, "with-preset", &with_preset, &cache, true)?;
    run.succeeded()?;
    ensure!(
        run.stdout.contains("value 42"),
        "pip did not install the package through the allow-list: {:?}",
        run.stdout
    );
    the_preset_cache_is_written(&run, &cache)?;
    let after_first = downloads.lock().map(|n| *n).unwrap_or(0);
    ensure!(
        after_first == 1,
        "the index served the wheel {after_first} times"
    );

    // Without the preset the cache is not writable: pip installs without it, and nothing of it
    // reaches the host. pip says so only when its own check sees it: as an unprivileged user it
    // asks access(2), which a read-only mount (bwrap's, the helper's own namespaces') answers and
    // Landlock does not govern; as root it checks only that root owns the directory. What it
    // says, agentd reports as the denied write of the cache directory.
    let cache = cx.dir.join("cache-without");
    let run = install(cx, "without-preset", &without_preset, &cache, true)?;
    run.succeeded()?;
    ensure!(run.stdout.contains("value 42"), "{:?}", run.stdout);
    ensure!(
        !holds_files(&cache),
        "pip wrote its cache on the host without the preset"
    );
    ensure!(
        run.ran()?.writable_roots.is_empty(),
        "writable roots were given without the preset"
    );
    the_disabled_cache_is_reported(cx, &run, &cache)?;

    // The control: unconfined, the same install fills that cache.
    let cache = cx.dir.join("cache-control");
    let control = install(cx, "control", &without_preset, &cache, false)?;
    control.succeeded()?;
    ensure!(
        holds_files(&cache),
        "the control's install left pip's cache empty, so the confined run's empty cache proves nothing"
    );
    Ok(())
}

/// Host sockets in two directories of the user's home: the listed one and another.
fn two_daemons(cx: &mut Cx) -> Result<(UnixCanary, UnixCanary), crate::case::Stop> {
    let mut daemon = |name: &str| {
        let dir = cx.home_path(name);
        cx.dir(&dir)?;
        UnixCanary::pathname(&dir)
            .map_err(|e| fail(format!("cannot create the fixture sockets in {dir:?}: {e}")))
    };
    Ok((daemon("listed")?, daemon("other")?))
}

fn only_the_listed_unix_socket_is_reached(cx: &mut Cx) -> Verdict {
    let (listed, other) = two_daemons(cx)?;
    let alias = cx.symlink(
        std::path::Path::new(&other.stream_address),
        &cx.ws.join("alias.sock"),
    )?;
    let probe = cx
        .probe()?
        .step("listed", "unix-connect", [&listed.stream_address])
        .step("other", "unix-connect", [&other.stream_address])
        .step("alias", "unix-connect", [alias.to_string_lossy().as_ref()])
        .step("send", "unix-sendto", [&other.dgram_address]);
    let with_list =
        |invocation: crate::agentd::Invocation| invocation.unix_socket(&listed.stream_address);
    if cx.cell.backend == Backend::Landlock {
        // Without a network namespace, abstract names would be shared with the host: refused.
        let run = cx.run(
            "confined, unix_sockets",
            &with_list(cx.confined(probe.argv())),
        )?;
        let reason = run.refused()?;
        ensure!(
            reason.contains("unix_sockets") && reason.contains("bwrap"),
            "the refusal does not say why unix_sockets needs bwrap: {reason}"
        );
        ensure!(
            listed.connections() == 0,
            "the listed socket was reached by a refused request"
        );
        return Ok(());
    }
    let run = cx.run(
        "confined, unix_sockets",
        &with_list(cx.confined(probe.argv())),
    )?;
    let facts = run.ran()?.clone();
    ensure!(
        facts.unix_sockets == [listed.stream_address.clone()],
        "the facts' unix_sockets {:?} do not name the listed socket",
        facts.unix_sockets
    );
    run.step_ok("listed")?;
    run.step_fails_with("other", &["EPERM"])?;
    // A link is judged by the name the command gave, never followed to what it names.
    run.step_fails_with("alias", &["EPERM"])?;
    // Datagram sockets take a destination on every send: never created.
    run.step_fails_with("send", &["EPERM"])?;
    ensure!(
        listed.connections() == 1,
        "the listed socket did not hear from the sandbox"
    );
    ensure!(
        other.connections() == 0 && other.datagrams() == 0,
        "an unlisted socket heard from the sandbox"
    );

    // Without the list the same command reaches neither.
    let run = cx.run("confined, no list", &cx.confined(probe.argv()))?;
    run.ran()?;
    run.step_fails_with("listed", &["EPERM"])?;
    ensure!(
        listed.connections() == 0,
        "the listed socket heard from a sandbox that did not list it"
    );

    // The control: unconfined, every socket answers (the link reaches the other one).
    let control = cx.run("control", &with_list(cx.control(probe.argv())))?;
    control.succeeded()?;
    ensure!(
        listed.connections() == 1 && other.connections() == 2 && other.datagrams() == 1,
        "the control did not reach every socket, so the confined run's refusals prove nothing"
    );
    Ok(())
}
