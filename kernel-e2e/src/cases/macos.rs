//! M. The escapes particular to macOS (RFC 0022), one case each, run on the Seatbelt backend
//! only: the workspace root renamed and back, a launchd job, a preference written by cfprefsd,
//! LaunchServices, a disk image mounted over `.git`, a case variant of `.git` and of a denied
//! read, and DNS with the network allowed. Each runs the escape confined, checks the host, and
//! runs the same escape in danger-full-access as the control that must succeed.
//!
//! Built everywhere, so a change anywhere in the suite keeps them compiling; only macOS's
//! catalogue lists them (`cases/mod.rs`).

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

use crate::case::{Case, Cx, RunChecks, Stop, Verdict, fail};
use crate::ensure;
use crate::fixtures::PathState;
use crate::matrix::WORKSPACE_WRITE;

pub const CASES: &[Case] = &[
    Case {
        id: "M01",
        title: "the workspace root cannot be renamed away, its .git edited under the new name, and renamed back",
        modes: WORKSPACE_WRITE,
        exclusive: false,
        body: the_root_cannot_be_renamed_away_and_back,
    },
    Case {
        id: "M02",
        title: "launchctl submit cannot leave a job that launchd runs outside the sandbox",
        modes: WORKSPACE_WRITE,
        exclusive: false,
        body: launchctl_submit_leaves_no_job,
    },
    Case {
        id: "M03",
        title: "defaults write cannot have cfprefsd write a preference for the command",
        modes: WORKSPACE_WRITE,
        exclusive: false,
        body: defaults_write_changes_no_preference,
    },
    Case {
        id: "M04",
        title: "open cannot have LaunchServices start an application outside the sandbox",
        modes: WORKSPACE_WRITE,
        exclusive: false,
        body: open_cannot_start_an_application,
    },
    Case {
        id: "M05",
        title: "hdiutil attach cannot mount a volume over the workspace's .git",
        modes: WORKSPACE_WRITE,
        exclusive: false,
        body: a_disk_image_cannot_be_mounted_over_git,
    },
    Case {
        id: "M06",
        title: ".GIT is .git on a case-insensitive volume: it can be neither made nor written",
        modes: WORKSPACE_WRITE,
        exclusive: false,
        body: a_case_variant_of_git_is_protected,
    },
    Case {
        id: "M07",
        title: "config/.ENV is the denied config/.env on a case-insensitive volume: it reads nothing",
        modes: WORKSPACE_WRITE,
        exclusive: false,
        body: a_case_variant_of_a_denied_read_reads_nothing,
    },
    Case {
        id: "M08",
        title: "with the network allowed, names resolve and TLS verifies (mDNSResponder, trustd); with it denied, neither",
        modes: WORKSPACE_WRITE,
        exclusive: false,
        body: dns_and_tls_work_with_the_network_allowed,
    },
];

/// `script` run by `/bin/sh` with `args` as `$1...`.
fn sh_with(cx: &Cx, script: &str, args: &[&Path]) -> Vec<OsString> {
    let mut argv = cx.sh(script);
    argv.push("sh".into());
    argv.extend(args.iter().map(|a| a.as_os_str().to_owned()));
    argv
}

/// Runs a host tool as the suite (the cell's user on macOS, where cases run as the current
/// user): its exit status and stdout, or a failure naming it.
fn host(program: &str, args: &[&str]) -> Result<(bool, String), Stop> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| fail(format!("cannot run {program} on the host: {e}")))?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    ))
}

/// A workspace with a repository's metadata: `.git/config` with known content.
fn with_git(cx: &Cx, ws: &Path) -> Result<std::path::PathBuf, Stop> {
    cx.dir(&ws.join(".git"))?;
    cx.file(&ws.join(".git/config"), "[core]\n\tbare = false\n")
}

fn the_root_cannot_be_renamed_away_and_back(cx: &mut Cx) -> Verdict {
    let ws = cx.ws.clone();
    let config = with_git(cx, &ws)?;
    // Another writable root to move it into: only the root's own pin can stop the move.
    let elsewhere = cx.dir(&cx.dir.join("elsewhere"))?;
    let before = PathState::of(&config);
    let script = "mv \"$1\" \"$2/moved\" && echo '[core] hooksPath = /tmp' >> \"$2/moved/.git/config\" \
                  && mv \"$2/moved\" \"$1\"";
    let argv = sh_with(cx, script, &[&ws, &elsewhere]);
    let run = cx.run(
        "confined",
        &cx.confined(argv.clone()).writable_root(&elsewhere),
    )?;
    run.denied()?;
    cx.unchanged(&config, &before)?;
    cx.absent(&elsewhere.join("moved"))?;
    let control = cx.run("control", &cx.control(argv))?;
    control.succeeded()?;
    ensure!(
        PathState::of(&config) != before,
        "the control renamed the root and back but {} is unchanged: the escape does not work here",
        config.display()
    );
    Ok(())
}

fn launchctl_submit_leaves_no_job(cx: &mut Cx) -> Verdict {
    let label = format!("org.agentd.kernel-e2e.{}", cx.tag);
    let marker = cx.home_path("launchd-job");
    let argv: Vec<OsString> = vec![
        "/bin/launchctl".into(),
        "submit".into(),
        "-l".into(),
        label.clone().into(),
        "--".into(),
        "/usr/bin/touch".into(),
        marker.clone().into(),
    ];
    // What launchctl answers is its own affair; what counts is whether launchd holds a job.
    cx.run("confined", &cx.confined(argv.clone()))?.ran()?;
    let (listed, _) = host("/bin/launchctl", &["list", &label])?;
    if listed {
        let _ = host("/bin/launchctl", &["remove", &label]);
        return Err(fail(format!(
            "the confined run left the launchd job {label}"
        )));
    }
    let control = cx.run("control", &cx.control(argv))?;
    let (listed, _) = host("/bin/launchctl", &["list", &label])?;
    let _ = host("/bin/launchctl", &["remove", &label]);
    control.succeeded()?;
    ensure!(
        listed,
        "the control's launchctl submit left no job {label}: the escape does not work here"
    );
    Ok(())
}

fn defaults_write_changes_no_preference(cx: &mut Cx) -> Verdict {
    let domain = format!("org.agentd.kernel-e2e.{}", cx.tag);
    let argv: Vec<OsString> = ["/usr/bin/defaults", "write", &domain, "escaped", "yes"]
        .iter()
        .map(OsString::from)
        .collect();
    cx.run("confined", &cx.confined(argv.clone()))?.ran()?;
    // defaults may say nothing of a write it could not make: the host's view decides.
    let (found, value) = host("/usr/bin/defaults", &["read", &domain, "escaped"])?;
    if found {
        let _ = host("/usr/bin/defaults", &["delete", &domain]);
        return Err(fail(format!(
            "the confined defaults write reached the preferences: {domain} escaped = {}",
            value.trim()
        )));
    }
    let control = cx.run("control", &cx.control(argv))?;
    let (found, value) = host("/usr/bin/defaults", &["read", &domain, "escaped"])?;
    let _ = host("/usr/bin/defaults", &["delete", &domain]);
    control.succeeded()?;
    ensure!(
        found && value.trim() == "yes",
        "the control's defaults write left no preference: the escape does not work here"
    );
    Ok(())
}

fn open_cannot_start_an_application(cx: &mut Cx) -> Verdict {
    // Finder is always running: the control activates it in the background and leaves nothing.
    let argv: Vec<OsString> = ["/usr/bin/open", "-g", "-a", "Finder"]
        .iter()
        .map(OsString::from)
        .collect();
    let run = cx.run("confined", &cx.confined(argv.clone()))?;
    ensure!(
        run.ran()?.exit != Some(crate::facts::Exit::Code(0)),
        "the confined open reached LaunchServices and exited 0"
    );
    cx.run("control", &cx.control(argv))?.succeeded()
}

fn a_disk_image_cannot_be_mounted_over_git(cx: &mut Cx) -> Verdict {
    let ws = cx.ws.clone();
    let config = with_git(cx, &ws)?;
    let image = cx.dir.join("volume.dmg");
    let image_text = image.to_string_lossy().into_owned();
    let (made, _) = host(
        "/usr/bin/hdiutil",
        &[
            "create",
            "-size",
            "1m",
            "-fs",
            "HFS+",
            "-volname",
            "e2e",
            &image_text,
        ],
    )?;
    if !made {
        return Err(Stop::Skip(
            "hdiutil cannot create a disk image here".to_owned(),
        ));
    }
    let git = ws.join(".git");
    let script = "/usr/bin/hdiutil attach -nobrowse -mountpoint \"$1\" \"$2\"";
    let argv = sh_with(cx, script, &[&git, &image]);
    let before = PathState::of(&config);
    cx.run("confined", &cx.confined(argv.clone()))?.ran()?;
    if PathState::of(&config) != before {
        let _ = host("/usr/bin/hdiutil", &["detach", &git.to_string_lossy()]);
        return Err(fail(
            "the confined hdiutil attach mounted a volume over .git",
        ));
    }
    let control = cx.run("control", &cx.control(argv))?;
    let covered = PathState::of(&config) != before;
    let _ = host("/usr/bin/hdiutil", &["detach", &git.to_string_lossy()]);
    control.succeeded()?;
    ensure!(
        covered,
        "the control's hdiutil attach did not cover .git: the escape does not work here"
    );
    Ok(())
}

fn a_case_variant_of_git_is_protected(cx: &mut Cx) -> Verdict {
    // A workspace with no repository: `.GIT` made there would be the user's next repository.
    let bare = cx.dir(&cx.dir.join("bare"))?;
    let argv = cx.sh("mkdir .GIT");
    let run = cx.run("confined (mkdir)", &cx.confined_in(&bare, argv.clone()))?;
    run.denied()?;
    cx.absent(&bare.join(".git"))?;
    cx.run("control (mkdir)", &cx.control_in(&bare, argv))?
        .succeeded()?;
    ensure!(
        bare.join(".git").is_dir(),
        "the control made .GIT but .git is not there: this volume is case-sensitive"
    );
    // A workspace with one: `.GIT/config` is its config.
    let ws = cx.ws.clone();
    let config = with_git(cx, &ws)?;
    let before = PathState::of(&config);
    let argv = cx.sh("echo '[core] hooksPath = /tmp' >> .GIT/config");
    cx.run("confined (write)", &cx.confined(argv.clone()))?
        .denied()?;
    cx.unchanged(&config, &before)?;
    cx.run("control (write)", &cx.control(argv))?.succeeded()?;
    ensure!(
        PathState::of(&config) != before,
        "the control wrote .GIT/config but .git/config is unchanged"
    );
    Ok(())
}

fn a_case_variant_of_a_denied_read_reads_nothing(cx: &mut Cx) -> Verdict {
    let ws = cx.ws.clone();
    let secret = format!("env-secret-{}", cx.tag);
    let env = cx.file(&ws.join("config/.env"), &format!("{secret}\n"))?;
    let argv = cx.sh("cat config/.ENV");
    let run = cx.run("confined", &cx.confined(argv.clone()).deny_read(&env))?;
    run.denied()?;
    ensure!(
        !run.stdout.contains(&secret),
        "the confined run read the denied config/.env as config/.ENV"
    );
    let control = cx.run("control", &cx.control(argv))?;
    control.succeeded()?;
    ensure!(
        control.stdout.contains(&secret),
        "the control read nothing through config/.ENV: this volume is case-sensitive"
    );
    Ok(())
}

fn dns_and_tls_work_with_the_network_allowed(cx: &mut Cx) -> Verdict {
    let argv: Vec<OsString> = [
        "/usr/bin/curl",
        "-sS",
        "-o",
        "/dev/null",
        "--max-time",
        "30",
        "https://github.com/",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    // The control first: without a network here there is nothing to show.
    let control = cx.run("control", &cx.control(argv.clone()))?;
    if control.succeeded().is_err() {
        return Err(Stop::Skip(
            "no network here: curl https://github.com/ fails unconfined".to_owned(),
        ));
    }
    cx.run(
        "confined (network allowed)",
        &cx.confined(argv.clone()).network(true),
    )?
    .succeeded()?;
    cx.run("confined (network denied)", &cx.confined(argv))?
        .denied()
}
