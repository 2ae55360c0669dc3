//! B. Deferred code execution: files inside a writable root that run code later, outside the
//! sandbox (git hooks and config, agentd's own config), stay read-only; where a backend cannot
//! keep them so, its facts must say so.

use std::path::{Path, PathBuf};

use super::{all_changed, all_unchanged, snapshot};
use crate::case::{Case, Cx, RunChecks, Verdict, fail};
use crate::ensure;
use crate::matrix::{Backend, WORKSPACE_WRITE};

pub const CASES: &[Case] = &[
    Case {
        id: "T15",
        title: "git hooks, git config, .gitmodules and .agentd stay read-only, even before they exist",
        modes: WORKSPACE_WRITE,
        exclusive: false,
        body: protected_paths_stay_read_only,
    },
    Case {
        id: "T17",
        title: "renaming .git or its hooks away does not unprotect them",
        modes: WORKSPACE_WRITE,
        exclusive: false,
        body: renaming_a_protected_directory_away_does_not_unprotect_it,
    },
    Case {
        id: "T18",
        title: "a protected directory replaced by a symlink does not lead writes outside",
        modes: WORKSPACE_WRITE,
        exclusive: false,
        body: a_symlinked_protected_directory_does_not_lead_writes_outside,
    },
    Case {
        id: "T19",
        title: "a .git file pointing outside the roots does not make that git dir writable",
        modes: WORKSPACE_WRITE,
        exclusive: false,
        body: a_gitdir_outside_the_roots_stays_read_only,
    },
    Case {
        id: "T20",
        title: "shell and git startup files in $HOME are not writable, even as a writable root",
        modes: WORKSPACE_WRITE,
        exclusive: false,
        body: startup_files_in_home_are_not_writable,
    },
];

const ACCEPTANCE: &str = "mkdir -p .git/hooks && echo x > .git/hooks/pre-commit";

/// A workspace with a git directory as `git init` leaves it (the parts that matter here).
fn git_workspace(cx: &Cx, ws: &Path) -> Result<PathBuf, crate::case::Stop> {
    cx.dir(ws)?;
    cx.dir(&ws.join(".git/hooks"))?;
    cx.file(&ws.join(".git/hooks/pre-commit.sample"), "#!/bin/sh\n")?;
    cx.file(&ws.join(".git/config"), "[core]\n\tbare = false\n")?;
    cx.file(&ws.join(".gitmodules"), "")?;
    Ok(ws.to_owned())
}

/// Regular files anywhere under `dir`.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(next) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&next) else {
            continue;
        };
        for entry in entries.flatten() {
            match entry.file_type() {
                Ok(t) if t.is_dir() => pending.push(entry.path()),
                Ok(t) if t.is_file() => found.push(entry.path()),
                _ => {}
            }
        }
    }
    found
}

fn protected_paths_stay_read_only(cx: &mut Cx) -> Verdict {
    // The acceptance form: no .git yet, so protection must cover paths that do not exist.
    let hook = cx.ws.join(".git/hooks/pre-commit");
    let run = cx.run("confined, no .git yet", &cx.confined(cx.sh(ACCEPTANCE)))?;
    match cx.cell.backend {
        Backend::Bwrap => {
            run.denied()?;
            cx.absent(&hook)?;
            let files = files_under(&cx.ws);
            ensure!(
                files.is_empty(),
                "files appeared in the workspace on the host: {files:?}"
            );
        }
        // Landlock cannot carve a read-only hole into a writable root; the write goes through
        // and the facts (checked for every run) must say enforcement is partial.
        Backend::Landlock => run.succeeded()?,
    }
    let control_ws = cx.dir(&cx.dir.join("ws-control"))?;
    let control = cx.run(
        "control, no .git yet",
        &cx.control_in(&control_ws, cx.sh(ACCEPTANCE)),
    )?;
    control.succeeded()?;
    ensure!(
        control_ws.join(".git/hooks/pre-commit").is_file(),
        "the control run did not create the hook: the probe does not work"
    );

    // An existing repository, and .agentd/ that does not exist yet.
    let probe_for = |cx: &Cx, ws: &Path| {
        cx.probe().map(|p| {
            p.step("hook", "create", [ws.join(".git/hooks/pre-commit")])
                .step("config", "write", [ws.join(".git/config")])
                .step("gitmodules", "write", [ws.join(".gitmodules")])
                .step("agentd-dir", "makedirs", [ws.join(".agentd")])
                .step("agentd", "create", [ws.join(".agentd/config.toml")])
        })
    };
    let ws = git_workspace(cx, &cx.dir.join("ws-git"))?;
    let watched = [
        ".git/hooks/pre-commit",
        ".git/config",
        ".gitmodules",
        ".agentd/config.toml",
    ]
    .map(|p| ws.join(p));
    let before = snapshot(&watched.iter().map(PathBuf::as_path).collect::<Vec<_>>());
    let probe = probe_for(cx, &ws)?;
    let run = cx.run(
        "confined, existing .git",
        &cx.confined_in(&ws, probe.argv()),
    )?;
    match cx.cell.backend {
        Backend::Bwrap => {
            run.denied()?;
            for step in ["hook", "config", "gitmodules", "agentd"] {
                run.step_denied(step)?;
            }
            all_unchanged(cx, &before)?;
        }
        Backend::Landlock => run.succeeded()?,
    }
    let control_ws = git_workspace(cx, &cx.dir.join("ws-git-control"))?;
    let control_paths = watched.map(|p| control_ws.join(p.strip_prefix(&ws).unwrap_or(&p)));
    let control_before = snapshot(
        &control_paths
            .iter()
            .map(PathBuf::as_path)
            .collect::<Vec<_>>(),
    );
    let control = cx.run(
        "control, existing .git",
        &cx.control_in(&control_ws, probe_for(cx, &control_ws)?.argv()),
    )?;
    control.succeeded()?;
    all_changed(&control_before)
}

fn a_symlinked_protected_directory_does_not_lead_writes_outside(cx: &mut Cx) -> Verdict {
    // Set up before launch, as a previous command could have: .agentd and .git/hooks point at
    // directories outside every root.
    let decoy = cx.dir(&cx.dir.join("decoy"))?;
    let decoy_hooks = cx.dir(&cx.dir.join("decoy-hooks"))?;
    cx.symlink(&decoy, &cx.ws.join(".agentd"))?;
    cx.dir(&cx.ws.join(".git"))?;
    cx.symlink(&decoy_hooks, &cx.ws.join(".git/hooks"))?;
    let probe = cx
        .probe()?
        .step("agentd", "create", [cx.ws.join(".agentd/config.toml")])
        .step("hook", "create", [cx.ws.join(".git/hooks/pre-commit")]);
    let before = snapshot(&[&decoy, &decoy_hooks]);

    let run = cx.run("confined", &cx.confined(probe.argv()))?;
    // Refusing to run (the helper cannot enforce a read-only path it would have to follow a
    // symlink for) is as good as running with the writes denied.
    let not_run = run.facts.as_ref().ok().and_then(|f| {
        f.refused.clone().or_else(|| {
            f.runner_failure
                .as_ref()
                .filter(|r| r.stage == "prepare")
                .map(|r| r.detail.clone())
        })
    });
    if not_run.is_none() {
        run.denied()?;
        run.step_denied("agentd")?;
        run.step_denied("hook")?;
    }
    all_unchanged(cx, &before)?;

    let control = cx.run("control", &cx.control(probe.argv()))?;
    control.succeeded()?;
    all_changed(&before)
}

/// What renaming a mount point or a read-only directory answers.
const RENAME_REFUSED: &[&str] = &["EBUSY", "EXDEV", "EACCES", "EPERM", "EROFS"];

fn renaming_a_protected_directory_away_does_not_unprotect_it(cx: &mut Cx) -> Verdict {
    let probe_for = |cx: &Cx, ws: &Path| {
        cx.probe().map(|p| {
            p.step(
                "rename-hooks",
                "rename",
                [ws.join(".git/hooks"), ws.join(".git/hooks-moved")],
            )
            .step("rename-git", "rename", [ws.join(".git"), ws.join(".g")])
            .step("recreate", "makedirs", [ws.join(".git/hooks")])
            .step("hook", "create", [ws.join(".git/hooks/pre-commit")])
        })
    };
    let ws = git_workspace(cx, &cx.dir.join("ws-git"))?;
    let watched = [".git/hooks", ".git/hooks-moved", ".git/config", ".g"].map(|p| ws.join(p));
    let before = snapshot(&watched.iter().map(PathBuf::as_path).collect::<Vec<_>>());
    let run = cx.run("confined", &cx.confined_in(&ws, probe_for(cx, &ws)?.argv()))?;
    match cx.cell.backend {
        Backend::Bwrap => {
            run.denied()?;
            run.step_fails_with("rename-hooks", RENAME_REFUSED)?;
            run.step_fails_with("rename-git", RENAME_REFUSED)?;
            run.step_denied("hook")?;
            all_unchanged(cx, &before)?;
        }
        // Not prevented under landlock; the partial enforcement in its facts is the check.
        Backend::Landlock => {
            run.ran()?;
        }
    }
    let control_ws = git_workspace(cx, &cx.dir.join("ws-git-control"))?;
    let control = cx.run(
        "control",
        &cx.control_in(&control_ws, probe_for(cx, &control_ws)?.argv()),
    )?;
    control.succeeded()?;
    ensure!(
        control_ws.join(".g/hooks-moved").is_dir()
            && control_ws.join(".git/hooks/pre-commit").is_file(),
        "the control run could not move .git away and recreate the hook: the probe does not work"
    );
    Ok(())
}

fn a_gitdir_outside_the_roots_stays_read_only(cx: &mut Cx) -> Verdict {
    let gitdir = cx.dir(&cx.dir.join("elsewhere/repo.git"))?;
    cx.dir(&gitdir.join("hooks"))?;
    cx.file(&gitdir.join("config"), "[core]\n\tbare = false\n")?;
    cx.file(
        &cx.ws.join(".git"),
        &format!("gitdir: {}\n", gitdir.display()),
    )?;
    let hook = gitdir.join("hooks/pre-commit");
    let config = gitdir.join("config");
    let probe = cx
        .probe()?
        .step("hook", "create", [&hook])
        .step("config", "write", [&config]);
    let before = snapshot(&[&hook, &config]);

    let run = cx.run("confined", &cx.confined(probe.argv()))?;
    // With .git a file, .git/hooks cannot be bound over; the helper may refuse to run rather
    // than run without that protection, as long as it says why.
    let not_run = run.facts.as_ref().ok().and_then(|f| {
        f.refused
            .clone()
            .or_else(|| f.runner_failure.as_ref().map(|r| r.detail.clone()))
    });
    match not_run {
        Some(why) if why.contains(".git") => {}
        Some(why) => {
            return Err(fail(format!(
                "the command did not run, for a reason unrelated to .git: {why}"
            )));
        }
        None => {
            run.denied()?;
            run.step_denied("hook")?;
            run.step_denied("config")?;
        }
    }
    all_unchanged(cx, &before)?;

    let control = cx.run("control", &cx.control(probe.argv()))?;
    control.succeeded()?;
    all_changed(&before)
}

fn startup_files_in_home_are_not_writable(cx: &mut Cx) -> Verdict {
    // A home of the case's own, so the control can really write startup files.
    let home = cx.dir(&cx.dir.join("home"))?;
    cx.file(&home.join(".bashrc"), "# bashrc\n")?;
    cx.file(&home.join(".profile"), "# profile\n")?;
    cx.dir(&home.join(".ssh"))?;
    let targets =
        [".bashrc", ".profile", ".gitconfig", ".ssh/authorized_keys"].map(|p| home.join(p));
    let probe = cx
        .probe()?
        .step("bashrc", "write", [&targets[0]])
        .step("profile", "write", [&targets[1]])
        .step("gitconfig", "create", [&targets[2]])
        .step("authorized_keys", "create", [&targets[3]]);
    let before = snapshot(&targets.iter().map(PathBuf::as_path).collect::<Vec<_>>());
    let run = cx.run("confined", &cx.confined(probe.argv()).env("HOME", &home))?;
    run.denied()?;
    for step in ["bashrc", "profile", "gitconfig", "authorized_keys"] {
        run.step_denied(step)?;
    }
    all_unchanged(cx, &before)?;
    let control = cx.run("control", &cx.control(probe.argv()).env("HOME", &home))?;
    control.succeeded()?;
    all_changed(&before)?;

    // The real $HOME asked for as a writable root: refused, or ignored.
    let real_home = cx.user().home.clone();
    let inside = cx.home_path("startup");
    let probe = cx.probe()?.step("create", "create", [&inside]);
    let run = cx.run(
        "confined, $HOME as writable root",
        &cx.confined(probe.argv()).writable_root(&real_home),
    )?;
    if run.facts.as_ref().is_ok_and(|f| f.refused.is_some()) {
        run.refused()?;
    } else {
        run.denied()?;
        run.step_denied("create")?;
    }
    cx.absent(&inside)?;
    let control = cx.run("control, $HOME as writable root", &cx.control(probe.argv()))?;
    control.succeeded()?;
    ensure!(
        inside.is_file(),
        "the control run could not write {}",
        inside.display()
    );
    Ok(())
}
