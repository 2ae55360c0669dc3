//! R. What agentd says about a denial: the facts name the kind of what the sandbox refused, in
//! each backend's dialect, and a failure the sandbox did not cause is not called a denial.
//!
//! Each run here also passes the checks every run does (`denied` never without a denial text on
//! a failure). These cases add the other direction: the kind is right, and a program's own
//! `Permission denied` on a file its user may not touch, or an ordinary failure, is not the
//! sandbox's.

use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::case::{Case, Cx, RunChecks, Stop, Verdict, fail};
use crate::ensure;
use crate::fixtures::TcpCanary;
use crate::matrix::{Backend, CONFINED, Mode};

pub const CASES: &[Case] = &[
    Case {
        id: "T85",
        title: "a write outside the writable roots is reported as a file write, one into git \
                metadata as a protected path",
        modes: CONFINED,
        exclusive: false,
        body: writes_are_reported_as_file_writes,
    },
    Case {
        id: "T86",
        title: "a connection with the network denied is reported as network, a Unix socket as a \
                system interface, never as a file access",
        modes: CONFINED,
        exclusive: false,
        body: network_and_unix_sockets_are_reported_by_kind,
    },
    Case {
        id: "T87",
        title: "a program's own Permission denied on a file its user may not read or write is \
                not a sandbox denial",
        modes: CONFINED,
        exclusive: false,
        body: the_users_own_permissions_are_not_sandbox_denials,
    },
    Case {
        id: "T88",
        title: "an ordinary failure, and denial words a command prints itself, are not denials",
        modes: CONFINED,
        exclusive: false,
        body: ordinary_failures_are_not_denials,
    },
];

fn writes_are_reported_as_file_writes(cx: &mut Cx) -> Verdict {
    let outside = cx.home_path("written");
    let script = format!("echo x > '{}'", outside.display());
    let run = cx.run("confined", &cx.confined(cx.sh(&script)))?;
    run.denied_as(&["file-write"])?;
    cx.absent(&outside)?;

    // git metadata: read-only in every confined mode where the backend can keep it so (Landlock
    // cannot inside a writable root, and says so in the enforcement facts).
    let ws = cx.ws.clone();
    let repo = cx.repo(&ws)?;
    let hook = repo.join(".git/hooks/post-checkout");
    let plant = format!("echo x > '{}'", hook.display());
    let keeps_git = !(cx.cell.backend == Backend::Landlock && cx.mode() == Mode::WorkspaceWrite);
    let run = cx.run("confined, into .git", &cx.confined(cx.sh(&plant)))?;
    if keeps_git {
        run.denied_as(&["protected-path"])?;
        cx.absent(&hook)?;
    } else {
        run.succeeded()?;
    }

    let control = cx.run(
        "control",
        &cx.control(cx.sh(&format!("{script} && {plant}"))),
    )?;
    control.succeeded()?;
    ensure!(
        outside.exists() && hook.exists(),
        "the control run did not write {} and {}: the command does not work here",
        outside.display(),
        hook.display()
    );
    Ok(())
}

fn network_and_unix_sockets_are_reported_by_kind(cx: &mut Cx) -> Verdict {
    let python = cx
        .python
        .ok_or_else(|| Stop::Skip(format!("no python3 that {} can run", cx.user().name)))?
        .to_owned();
    let listener =
        TcpCanary::new().map_err(|e| fail(format!("cannot listen on 127.0.0.1: {e}")))?;
    let connect = format!(
        "import socket; socket.create_connection(('127.0.0.1', {})).close()",
        listener.port()
    );
    let py = |code: &str| vec![python.clone().into(), "-c".into(), code.into()];

    let run = cx.run("confined connect", &cx.confined(py(&connect)))?;
    run.denied_as(&["network"])?;
    ensure!(
        listener.connections() == 0,
        "the host listener accepted a connection from the confined command"
    );
    let allowed = cx.run(
        "confined connect, network allowed",
        &cx.confined(py(&connect)).network(true),
    )?;
    allowed.succeeded()?;
    ensure!(
        listener.connections() == 1,
        "with --network allow the connection did not arrive"
    );

    let unix = "import socket; socket.socket(socket.AF_UNIX).close()";
    let run = cx.run("confined unix socket", &cx.confined(py(unix)))?;
    run.denied_as(&["system-interface"])?;

    let control = cx.run("control connect", &cx.control(py(&connect)))?;
    control.succeeded()?;
    ensure!(
        listener.connections() == 1,
        "the control run's connection did not arrive: the command does not work here"
    );
    cx.run("control unix socket", &cx.control(py(unix)))?
        .succeeded()?;
    Ok(())
}

fn the_users_own_permissions_are_not_sandbox_denials(cx: &mut Cx) -> Verdict {
    if cx.user().is_root() {
        return Err(Stop::Skip(
            "root may read and write every file, so no file is closed to it without the \
             sandbox"
                .into(),
        ));
    }
    // Closed to the cell's user: another user's 0600 file and 0755 directory when the suite runs
    // as root; else the user's own file and directory with no permission bits for them.
    let other_owner = !cx.user().current;
    let (file_mode, dir_mode) = if other_owner {
        (0o600, 0o755)
    } else {
        (0o000, 0o555)
    };
    let secret = cx.dir.join("secret");
    fs::write(&secret, "secret\n").map_err(|e| setup(&secret, e))?;
    fs::set_permissions(&secret, fs::Permissions::from_mode(file_mode))
        .map_err(|e| setup(&secret, e))?;
    let closed = cx.dir.join("closed");
    fs::create_dir(&closed).map_err(|e| setup(&closed, e))?;
    fs::set_permissions(&closed, fs::Permissions::from_mode(dir_mode))
        .map_err(|e| setup(&closed, e))?;
    let readable = cx.file(&cx.dir.join("readable"), "readable\n")?;

    let cat = |path: &Path| -> Vec<OsString> {
        vec![
            "/bin/sh".into(),
            "-c".into(),
            format!("cat '{}'", path.display()).into(),
        ]
    };
    let create = format!("echo x > '{}/x'", closed.display());
    let run = cx.run("confined cat", &cx.confined(cat(&secret)))?;
    run.failed_undenied()?;
    let run = cx.run("confined create", &cx.confined(cx.sh(&create)))?;
    run.failed_undenied()?;
    // The sandbox reads what the user may read.
    cx.run("confined cat, readable", &cx.confined(cat(&readable)))?
        .succeeded()?;

    // Unconfined they fail the same way: the refusal is the file's, not the sandbox's.
    let control = cx.run("control cat", &cx.control(cat(&secret)))?;
    control.failed_undenied()?;
    ensure!(
        control.stderr.contains("Permission denied"),
        "the control cat did not fail with Permission denied: {}",
        control.stderr
    );
    cx.run("control create", &cx.control(cx.sh(&create)))?
        .failed_undenied()?;
    cx.run("control cat, readable", &cx.control(cat(&readable)))?
        .succeeded()?;
    fs::set_permissions(&closed, fs::Permissions::from_mode(0o755))
        .map_err(|e| setup(&closed, e))?;
    Ok(())
}

fn ordinary_failures_are_not_denials(cx: &mut Cx) -> Verdict {
    let missing = cx.ws.join("missing");
    let ls = cx.sh(&format!("ls '{}'", missing.display()));
    cx.run("confined ls of a missing file", &cx.confined(ls.clone()))?
        .failed_undenied()?;
    let own_words = cx.sh(
        "echo 'error: permission denied: you are not a maintainer of this project' >&2; exit 1",
    );
    cx.run("confined own words", &cx.confined(own_words.clone()))?
        .failed_undenied()?;
    let succeeding = cx.sh("echo 'Permission denied' >&2; echo 'Read-only file system' >&2");
    let run = cx.run(
        "confined, denial words on success",
        &cx.confined(succeeding),
    )?;
    run.succeeded()?;
    ensure!(
        !run.ran()?.denied,
        "a command that succeeded is reported denied"
    );

    // Unconfined the same commands fail the same way.
    cx.run("control ls", &cx.control(ls))?.failed_undenied()?;
    cx.run("control own words", &cx.control(own_words))?
        .failed_undenied()?;
    cx.dir(&missing)?;
    cx.run(
        "confined ls, present",
        &cx.confined(cx.sh(&format!("ls '{}'", missing.display()))),
    )?
    .succeeded()?;
    Ok(())
}

fn setup(path: &Path, e: std::io::Error) -> Stop {
    Stop::Fail(format!("cannot set up the fixture {}: {e}", path.display()))
}
