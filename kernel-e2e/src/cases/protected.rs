//! B. Deferred code execution: a repository inside a writable root runs code later, outside the
//! sandbox, when the user runs git there: hooks, `core.fsmonitor`, and whatever git reaches
//! through the indirections by which it finds its configuration (`commondir`,
//! `config.worktree`, `.git` files, submodules, linked worktrees, gitlinks in the index). Under
//! bwrap (and the helper's own namespaces, with the same binds) the whole repository stays
//! read-only, with every path git would follow from it; what cannot be kept so (a repository
//! that does not exist yet, anything under Landlock) the facts must name.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::checks::{all_changed, all_unchanged, snapshot};
use crate::agentd::{OnReady, ReadyHook, Run, quote};
use crate::case::{Case, Cx, RunChecks, Stop, Verdict, fail};
use crate::ensure;
use crate::fixtures::listing;
use crate::git;
use crate::matrix::{Backend, WORKSPACE_WRITE};
use crate::probe::Probe;

pub const CASES: &[Case] = &[
    Case {
        id: "T15",
        title: "the whole repository stays read-only: git status works inside, git add and git \
                commit fail, and nothing is created in the user's tree",
        modes: WORKSPACE_WRITE,
        exclusive: false,
        body: the_whole_repository_stays_read_only,
    },
    Case {
        id: "T16",
        title: "code planted through any git indirection does not run when the user runs git \
                status and git commit on the host afterwards",
        modes: WORKSPACE_WRITE,
        exclusive: false,
        body: planted_code_does_not_run_when_the_user_runs_git,
    },
    Case {
        id: "T17",
        title: "renaming .git, or a directory on the way to a submodule's .git, away fails",
        modes: WORKSPACE_WRITE,
        exclusive: false,
        body: protected_paths_cannot_be_renamed_away,
    },
    Case {
        id: "T18",
        title: "a symlink at .git, or on the way to any path git would follow from it, stops the \
                run before anything runs",
        modes: WORKSPACE_WRITE,
        exclusive: false,
        body: a_symlink_on_a_protected_path_stops_the_run,
    },
    Case {
        id: "T19",
        title: "the git directory a .git file names stays read-only, outside every root or inside \
                another writable root",
        modes: WORKSPACE_WRITE,
        exclusive: false,
        body: the_git_directory_of_a_git_file_stays_read_only,
    },
    Case {
        id: "T20",
        title: "shell and git startup files in $HOME are not writable, and the command's HOME is \
                never a writable root nor inside one",
        modes: WORKSPACE_WRITE,
        exclusive: false,
        body: startup_files_in_home_are_not_writable,
    },
];

fn paths(list: &[PathBuf]) -> Vec<&Path> {
    list.iter().map(PathBuf::as_path).collect()
}

/// A path as a shell word.
fn q(path: &Path) -> String {
    quote(path.as_os_str())
}

/// Fails unless the run's facts name `path` as a protected path Landlock cannot keep read-only.
fn names_protected(run: &Run, path: &Path) -> Verdict {
    let facts = run.ran()?;
    let path = path.canonicalize().unwrap_or_else(|_| path.to_owned());
    let needle = format!("protected path {} ", path.display());
    let missing: &[String] = facts.enforcement.as_ref().map_or(&[], |e| &e.missing);
    ensure!(
        missing.iter().any(|m| m.starts_with(&needle)),
        "landlock cannot keep {} read-only, yet enforcement.missing {missing:?} of the {} run does \
         not name it",
        path.display(),
        run.label
    );
    Ok(())
}

/// A workspace repository with a submodule at `deps/up`, cloned from an upstream repository
/// made in `upstream`, the way `git submodule add` leaves it (its git directory in
/// `.git/modules/deps/up`, a `.git` file in `deps/up`).
fn with_submodule(cx: &Cx, ws: &Path, upstream: &Path) -> Result<PathBuf, Stop> {
    let upstream = cx.repo(upstream)?;
    let ws = cx.repo(ws)?;
    let url = upstream.to_string_lossy().into_owned();
    cx.git(
        &ws,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            &url,
            "deps/up",
        ],
    )?;
    cx.git(&ws, &["commit", "-q", "-m", "the user's submodule"])?;
    Ok(ws)
}

// ---- T15 ----

/// Names at the top of a git directory that git acts on: its config and hooks, redirections
/// of its configuration (`commondir`, `config.worktree`), the git directory of a submodule or a
/// worktree, a rebase in progress, and the lock every update of the index takes.
const REPOSITORY_WRITES: [(&str, &str, &str); 8] = [
    ("config", "write", ".git/config"),
    ("hook", "create", ".git/hooks/pre-commit"),
    ("commondir", "create", ".git/commondir"),
    ("config-worktree", "create", ".git/config.worktree"),
    ("modules", "create-path", ".git/modules/x/config"),
    ("worktrees", "makedirs", ".git/worktrees/x"),
    ("rebase-merge", "mkdir", ".git/rebase-merge"),
    ("index-lock", "create", ".git/index.lock"),
];

fn repository_writes(cx: &Cx, ws: &Path) -> Result<(Probe, Vec<PathBuf>), Stop> {
    let mut probe = cx.probe()?;
    let mut targets = Vec::new();
    for (label, op, rel) in REPOSITORY_WRITES {
        probe = probe.step(label, op, [ws.join(rel)]);
        targets.push(ws.join(rel));
    }
    Ok((probe, targets))
}

fn the_whole_repository_stays_read_only(cx: &mut Cx) -> Verdict {
    git::require()?;
    writes_into_the_repository_are_denied(cx)?;
    git_inside_reads_but_cannot_write(cx)?;
    nothing_is_created_in_the_tree(cx)?;
    a_missing_repository_can_be_made_and_is_reported(cx)
}

fn writes_into_the_repository_are_denied(cx: &mut Cx) -> Verdict {
    let ws = cx.repo(&cx.dir.join("repo"))?;
    let (probe, mut watched) = repository_writes(cx, &ws)?;
    // The listing of .git shows any new name at its top; the index, any update of it.
    watched.extend([
        ws.join(".git"),
        ws.join(".git/hooks"),
        ws.join(".git/index"),
    ]);
    let before = snapshot(&paths(&watched));
    let run = cx.run(
        "confined, writes into .git",
        &cx.confined_in(&ws, probe.argv()),
    )?;
    match cx.cell.backend {
        // Seatbelt keeps a repository inside a writable root read-only as bwrap does.
        Backend::Bwrap | Backend::Namespaces | Backend::Seatbelt => {
            run.denied()?;
            for (label, _, _) in REPOSITORY_WRITES {
                run.step_denied(label)?;
            }
            all_unchanged(cx, &before)?;
        }
        // Landlock cannot keep part of a writable root read-only: the writes go through, and
        // the facts (checked for every run) must be partial and name the repository.
        Backend::Landlock => {
            run.ran()?;
        }
    }
    let control_ws = cx.repo(&cx.dir.join("repo-control"))?;
    let (probe, targets) = repository_writes(cx, &control_ws)?;
    let control_before = snapshot(&paths(&targets));
    let control = cx.run(
        "control, writes into .git",
        &cx.control_in(&control_ws, probe.argv()),
    )?;
    control.succeeded()?;
    all_changed(&control_before)
}

/// git inside the sandbox: status, then an add and a commit, each exit status on stdout.
const GIT_INSIDE: &str = "git status --porcelain >/dev/null; echo status=$?; \
     echo changed >> tracked; echo new > added; \
     git add added; echo add=$?; \
     git commit -q -a -m inside; echo commit=$?";

fn exit_of(run: &Run, name: &str) -> Option<i32> {
    let prefix = format!("{name}=");
    run.stdout
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
}

fn git_inside_reads_but_cannot_write(cx: &mut Cx) -> Verdict {
    let script = format!("{}; {GIT_INSIDE}", git::shell_env());
    let ws = cx.repo(&cx.dir.join("repo-git"))?;
    let head = cx.git(&ws, &["rev-parse", "HEAD"])?;
    let before = snapshot(&[&ws.join(".git/index")]);
    let run = cx.run("confined, git inside", &cx.confined_in(&ws, cx.sh(&script)))?;
    run.succeeded()?;
    let (status, add, commit) = (
        exit_of(&run, "status"),
        exit_of(&run, "add"),
        exit_of(&run, "commit"),
    );
    ensure!(
        status == Some(0),
        "git status inside the sandbox exited {status:?}: the repository must stay readable"
    );
    if matches!(
        cx.cell.backend,
        Backend::Bwrap | Backend::Namespaces | Backend::Seatbelt
    ) {
        ensure!(
            add.is_some_and(|c| c != 0) && commit.is_some_and(|c| c != 0),
            "inside the sandbox git add exited {add:?} and git commit {commit:?}: the index is \
             writable"
        );
        ensure!(
            run.stderr.contains("index.lock"),
            "git add and git commit failed inside the sandbox, but not for want of index.lock"
        );
        all_unchanged(cx, &before)?;
        let now = cx.git(&ws, &["rev-parse", "HEAD"])?;
        ensure!(
            now == head,
            "HEAD moved from {head} to {now}: a commit made inside the sandbox reached the host"
        );
    }
    let control_ws = cx.repo(&cx.dir.join("repo-git-control"))?;
    let control_head = cx.git(&control_ws, &["rev-parse", "HEAD"])?;
    let control = cx.run(
        "control, git inside",
        &cx.control_in(&control_ws, cx.sh(&script)),
    )?;
    control.succeeded()?;
    let exits = ["status", "add", "commit"].map(|name| exit_of(&control, name));
    ensure!(
        exits == [Some(0); 3],
        "unconfined, git status, add and commit exited {exits:?}: the script does not work"
    );
    let now = cx.git(&control_ws, &["rev-parse", "HEAD"])?;
    ensure!(
        now != control_head,
        "unconfined, git commit did not move HEAD: the script does not work"
    );
    Ok(())
}

/// A command that says it is ready and waits until the suite closes its stdin.
const WAIT: &str = "echo ready; read line; exit 0";

/// Looks at the host workspace while the command waits: exactly `expected` there and, in a
/// repository, nothing for `git status` to report.
fn host_view(cx: &Cx, ws: &Path, repository: bool, expected: Vec<String>) -> ReadyHook {
    let launcher = cx.launcher.clone();
    let ws = ws.to_owned();
    ReadyHook::new(move |_| {
        let now = listing(&ws);
        if now != expected {
            let extra: Vec<&String> = now.iter().filter(|p| !expected.contains(p)).collect();
            let gone: Vec<&String> = expected.iter().filter(|p| !now.contains(p)).collect();
            return Err(trouble!(
                "while the command ran, the host workspace {} gained {extra:?} and lost {gone:?}",
                ws.display()
            ));
        }
        if repository {
            let args = ["--no-optional-locks", "status", "--porcelain"];
            let status = git::run(&launcher, "host git status, mid-run", &ws, &args)?;
            if status.status != Some(0) || !status.stdout.trim().is_empty() {
                return Err(trouble!(
                    "while the command ran, git status on the host did not find the repository \
                     clean:\n{}",
                    status.describe()
                ));
            }
        }
        Ok(())
    })
}

fn nothing_is_created_in_the_tree(cx: &mut Cx) -> Verdict {
    // Nothing holds the place of a protected path any more: before, while and after a
    // confined command runs, the host sees only what the test made.
    let repo = cx.repo(&cx.dir.join("repo-quiet"))?;
    for (ws, repository) in [(cx.ws.clone(), false), (repo, true)] {
        let before = listing(&ws);
        ensure!(
            repository || before.is_empty(),
            "the fresh workspace is not empty: {before:?}"
        );
        let hook = host_view(cx, &ws, repository, before.clone());
        let label = if repository {
            "confined, waiting in a repository"
        } else {
            "confined, waiting in an empty workspace"
        };
        let run = cx.run(
            label,
            &cx.confined_in(&ws, cx.sh(WAIT))
                .on_ready(OnReady::Call(hook)),
        )?;
        run.succeeded()?;
        let after = listing(&ws);
        ensure!(
            after == before,
            "after the {label} run the host workspace holds {after:?}, before it held {before:?}"
        );
    }
    // The control: what a command makes before it says ready is seen from the host, so the
    // look mid-run does look at the live tree.
    let seen = cx.dir(&cx.dir.join("ws-seen"))?;
    let hook = host_view(cx, &seen, false, vec!["made-by-the-command".into()]);
    let control = cx.run(
        "control, waiting",
        &cx.control_in(&seen, cx.sh(&format!(": > made-by-the-command; {WAIT}")))
            .on_ready(OnReady::Call(hook)),
    )?;
    control.succeeded()
}

fn a_missing_repository_can_be_made_and_is_reported(cx: &mut Cx) -> Verdict {
    // No repository yet, and nothing is made to hold its place: a command can create one, hook
    // and all, which git would use when run there later. That cannot be prevented; the facts
    // must name it (every run's check: a root without .git is named as missing).
    let script = "mkdir -p .git/hooks && printf '#!/bin/sh\\n' > .git/hooks/pre-commit";
    let run = cx.run("confined, no repository yet", &cx.confined(cx.sh(script)))?;
    run.succeeded()?;
    let now = listing(&cx.ws);
    ensure!(
        now == [".git", ".git/hooks", ".git/hooks/pre-commit"],
        "the workspace should hold what the command made and nothing else, it holds {now:?}"
    );
    Ok(())
}

// ---- T16 ----

/// One way a command could get git to run its code later, outside the sandbox.
struct Indirection {
    name: &'static str,
    /// What the command plants, for failure messages.
    what: &'static str,
    build: fn(&Cx, &Fixture) -> Result<Attack, Stop>,
}

/// The places of one attempt, all under `base`: the workspace, room for what its repository
/// needs besides (an upstream, another root), and a payload that appends to `base/marker`
/// whenever anything runs it.
struct Fixture {
    base: PathBuf,
    ws: PathBuf,
    payload: PathBuf,
}

/// What an indirection needs: the repository the user has (made by `build`), the confined
/// command that plants the payload, and where the user runs git afterwards.
struct Attack {
    run_in: PathBuf,
    /// Writable roots besides the workspace.
    roots: Vec<PathBuf>,
    script: String,
    /// The protected path Landlock's facts must name: what bwrap keeps read-only here.
    named: PathBuf,
}

impl Attack {
    fn in_workspace(f: &Fixture, script: String, named: &str) -> Attack {
        Attack {
            run_in: f.ws.clone(),
            roots: Vec::new(),
            script,
            named: f.ws.join(named),
        }
    }
}

/// Shell: a `[core]` section that runs the payload as git's file system monitor, which
/// `git status` calls.
fn fsmonitor_section(payload: &Path) -> String {
    format!("printf '[core]\\n\\tfsmonitor = %s\\n' {}", q(payload))
}

/// Shell: a hook script that runs the payload.
fn hook_script(payload: &Path) -> String {
    format!("printf '#!/bin/sh\\nexec %s\\n' {}", q(payload))
}

/// Shell: a minimal git directory at `dir` whose config runs the payload as fsmonitor.
fn evil_git_dir(dir: &Path, payload: &Path) -> String {
    let d = q(dir);
    format!(
        "mkdir -p {d}/objects {d}/refs/heads && echo 'ref: refs/heads/main' > {d}/HEAD && \
         printf '[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n\\tfsmonitor = %s\\n' \
         {} > {d}/config",
        q(payload)
    )
}

const INDIRECTIONS: &[Indirection] = &[
    Indirection {
        name: "hook",
        what: "a pre-commit hook in .git/hooks",
        build: |cx, f| {
            cx.repo(&f.ws)?;
            let script = format!(
                "{} > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
                hook_script(&f.payload)
            );
            Ok(Attack::in_workspace(f, script, ".git"))
        },
    },
    Indirection {
        name: "fsmonitor",
        what: "core.fsmonitor in .git/config",
        build: |cx, f| {
            cx.repo(&f.ws)?;
            let script = format!("{} >> .git/config", fsmonitor_section(&f.payload));
            Ok(Attack::in_workspace(f, script, ".git"))
        },
    },
    Indirection {
        name: "hooks-path",
        what: "core.hooksPath in .git/config, pointing at hooks in the workspace",
        build: |cx, f| {
            cx.repo(&f.ws)?;
            let hooks = f.ws.join("evil-hooks");
            let script = format!(
                "mkdir evil-hooks && {} > evil-hooks/pre-commit && chmod +x evil-hooks/pre-commit \
                 && printf '[core]\\n\\thooksPath = %s\\n' {} >> .git/config",
                hook_script(&f.payload),
                q(&hooks)
            );
            Ok(Attack::in_workspace(f, script, ".git"))
        },
    },
    Indirection {
        name: "commondir",
        what: ".git/commondir naming a directory whose config runs the payload",
        build: |cx, f| {
            cx.repo(&f.ws)?;
            let common = f.ws.join("evil-common");
            let script = format!(
                "{} && echo {} > .git/commondir",
                evil_git_dir(&common, &f.payload),
                q(&common)
            );
            Ok(Attack::in_workspace(f, script, ".git"))
        },
    },
    Indirection {
        name: "config-worktree",
        what: ".git/config.worktree, which the user's extensions.worktreeConfig makes git read",
        build: |cx, f| {
            cx.repo(&f.ws)?;
            cx.git(&f.ws, &["config", "core.repositoryformatversion", "1"])?;
            cx.git(&f.ws, &["config", "extensions.worktreeConfig", "true"])?;
            let script = format!("{} > .git/config.worktree", fsmonitor_section(&f.payload));
            Ok(Attack::in_workspace(f, script, ".git"))
        },
    },
    Indirection {
        name: "submodule-config",
        what: "core.fsmonitor in a submodule's .git/modules/deps/up/config",
        build: |cx, f| {
            with_submodule(cx, &f.ws, &f.base.join("up"))?;
            let script = format!(
                "{} >> .git/modules/deps/up/config",
                fsmonitor_section(&f.payload)
            );
            Ok(Attack::in_workspace(f, script, ".git"))
        },
    },
    Indirection {
        name: "submodule-gitfile",
        what: "a submodule's deps/up/.git file rewritten to name a git directory the command made",
        build: |cx, f| {
            with_submodule(cx, &f.ws, &f.base.join("up"))?;
            let evil = f.ws.join("evil-sub");
            let script = format!(
                "{} && echo gitdir: {} > deps/up/.git",
                evil_git_dir(&evil, &f.payload),
                q(&evil)
            );
            Ok(Attack::in_workspace(f, script, "deps/up/.git"))
        },
    },
    Indirection {
        name: "unpopulated-submodule",
        what: "a git directory made in an unpopulated submodule's empty deps/empty",
        build: |cx, f| {
            cx.repo(&f.ws)?;
            let head = cx.git(&f.ws, &["rev-parse", "HEAD"])?;
            cx.dir(&f.ws.join("deps/empty"))?;
            let gitlink = format!("160000,{head},deps/empty");
            cx.git(&f.ws, &["update-index", "--add", "--cacheinfo", &gitlink])?;
            cx.git(&f.ws, &["commit", "-q", "-m", "the user's gitlink"])?;
            let script = evil_git_dir(&f.ws.join("deps/empty/.git"), &f.payload);
            Ok(Attack::in_workspace(f, script, "deps/empty"))
        },
    },
    Indirection {
        name: "worktree-gitfile",
        what: "a linked worktree's wt/.git file rewritten to name a git directory the command made",
        build: |cx, f| {
            cx.repo(&f.ws)?;
            cx.git(&f.ws, &["worktree", "add", "-q", "wt"])?;
            let evil = f.ws.join("evil-wt");
            let script = format!(
                "{} && echo gitdir: {} > wt/.git",
                evil_git_dir(&evil, &f.payload),
                q(&evil)
            );
            let mut attack = Attack::in_workspace(f, script, "wt/.git");
            attack.run_in = f.ws.join("wt");
            Ok(attack)
        },
    },
    Indirection {
        name: "separate-git-dir",
        what: "core.fsmonitor in the config of a separate git directory in another writable root",
        build: |cx, f| {
            let store = cx.dir(&f.base.join("store"))?;
            let gitdir = store.join("repo.git");
            cx.dir(&f.ws)?;
            let separate = format!("--separate-git-dir={}", gitdir.display());
            cx.git(&f.ws, &["init", "-q", "-b", "main", &separate])?;
            cx.file(&f.ws.join("tracked"), "tracked by the user\n")?;
            cx.git(&f.ws, &["add", "tracked"])?;
            cx.git(&f.ws, &["commit", "-q", "-m", "the user's commit"])?;
            let script = format!(
                "{} >> {}",
                fsmonitor_section(&f.payload),
                q(&gitdir.join("config"))
            );
            Ok(Attack {
                run_in: f.ws.clone(),
                roots: vec![store],
                script,
                named: gitdir,
            })
        },
    },
    Indirection {
        name: "nested-repository",
        what: "a repository the command made (git init evil, fsmonitor in its config) added to \
               the index as a gitlink with git update-index",
        build: |cx, f| {
            cx.repo(&f.ws)?;
            let head = cx.git(&f.ws, &["rev-parse", "HEAD"])?;
            let script = format!(
                "{}; git init -q evil && {} >> evil/.git/config && \
                 git update-index --add --cacheinfo 160000,{head},evil",
                git::shell_env(),
                fsmonitor_section(&f.payload)
            );
            Ok(Attack::in_workspace(f, script, ".git"))
        },
    },
];

fn planted_code_does_not_run_when_the_user_runs_git(cx: &mut Cx) -> Verdict {
    git::require()?;
    let mut ran_anyway = Vec::new();
    for indirection in INDIRECTIONS {
        let mark = cx.runs.len();
        plant_then_run_git(cx, indirection, false)
            .and_then(|ran| {
                if ran {
                    ran_anyway.push(indirection.name);
                }
                plant_then_run_git(cx, indirection, true).map(drop)
            })
            .map_err(|stop| match stop {
                Stop::Fail(why) => fail(format!(
                    "indirection {} ({}): {why}",
                    indirection.name, indirection.what
                )),
                skip => skip,
            })?;
        // A failure reports the runs of the indirection that failed, not of all before it.
        cx.runs.truncate(mark);
    }
    if !ran_anyway.is_empty() {
        cx.note(format!(
            "as the facts admit, the payload planted through {} ran",
            ran_anyway.join(", ")
        ));
    }
    Ok(())
}

/// Plants the indirection's payload (confined, or unconfined for the control), then runs git on
/// the host as the user would next, and checks whether the payload ran. Returns whether it ran.
fn plant_then_run_git(cx: &mut Cx, indirection: &Indirection, control: bool) -> Result<bool, Stop> {
    let who = if control { "control" } else { "confined" };
    let base = cx.dir(&cx.dir.join(format!("{}-{who}", indirection.name)))?;
    let marker = base.join("marker");
    let payload = cx.file(
        &base.join("payload"),
        &format!("#!/bin/sh\necho ran >> {}\n", q(&marker)),
    )?;
    std::fs::set_permissions(&payload, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| fail(format!("cannot make {} executable: {e}", payload.display())))?;
    let fixture = Fixture {
        ws: base.join("ws"),
        base,
        payload,
    };
    let attack = (indirection.build)(cx, &fixture)?;
    let argv = cx.sh(&attack.script);
    let mut invocation = if control {
        cx.control_in(&fixture.ws, argv)
    } else {
        cx.confined_in(&fixture.ws, argv)
    };
    for root in &attack.roots {
        invocation = invocation.writable_root(root);
    }
    let plant = cx.run(&format!("{who}: plant"), &invocation)?;
    // Planting itself runs nothing: only the user's git, below, may run the payload.
    ensure!(
        !marker.exists(),
        "the payload ran while the {who} command planted it, before the user ran git"
    );
    let backend = cx.cell.backend;
    match (control, backend) {
        (true, _) => plant.succeeded()?,
        (false, Backend::Bwrap | Backend::Namespaces | Backend::Seatbelt) => plant.denied()?,
        (false, Backend::Landlock) => names_protected(&plant, &attack.named)?,
    }

    // What the user does next, on the host, outside any sandbox.
    cx.file(&attack.run_in.join("user-change"), "the user's change\n")?;
    let dir = attack.run_in.clone();
    cx.host_git(
        &format!("{who}: then the user's git add"),
        &dir,
        &["add", "user-change"],
    )?;
    let status = cx.host_git(
        &format!("{who}: then the user's git status"),
        &dir,
        &["status"],
    )?;
    cx.host_git(
        &format!("{who}: then the user's git commit"),
        &dir,
        &["commit", "-q", "-m", "x"],
    )?;
    let ran = marker.exists();
    match (control, backend) {
        (true, _) => ensure!(
            ran,
            "planted unconfined, the payload did not run when the user ran git status and git \
             commit on the host: this indirection does not work here, so denying it proves nothing"
        ),
        (false, Backend::Bwrap | Backend::Namespaces | Backend::Seatbelt) => {
            ensure!(
                !ran,
                "the payload the confined command planted ran when the user ran git on the host"
            );
            ensure!(
                status.status == Some(0),
                "git status on the host failed after the confined run: the repository was damaged"
            );
        }
        // Landlock cannot keep any of this read-only, so the payload may well run; the facts
        // said so (checked above), which is all that can be asked of it.
        (false, Backend::Landlock) => {}
    }
    Ok(ran)
}

// ---- T17 ----

/// What renaming a mount point or something in a read-only directory answers.
const RENAME_REFUSED: &[&str] = &["EBUSY", "EXDEV", "EACCES", "EPERM", "EROFS"];

/// Renames, innermost first, so that unconfined each one finds its source still in place.
const RENAMES: [(&str, &str, &str); 5] = [
    ("rename-hooks", ".git/hooks", ".git/hooks-moved"),
    ("rename-submodule-git", "deps/up/.git", "deps/up/.git-moved"),
    ("rename-submodule", "deps/up", "deps/up-moved"),
    ("rename-pinned", "deps", "deps-moved"),
    ("rename-git", ".git", ".g"),
];

fn renames(cx: &Cx, ws: &Path) -> Result<Probe, Stop> {
    let mut probe = cx.probe()?;
    for (label, from, to) in RENAMES {
        probe = probe.step(label, "rename", [ws.join(from), ws.join(to)]);
    }
    Ok(probe)
}

fn protected_paths_cannot_be_renamed_away(cx: &mut Cx) -> Verdict {
    git::require()?;
    // Renamed away, .git (or the directory holding a submodule's .git) could be replaced by
    // one the command writes. deps and deps/up are pinned: bound onto themselves, so they are
    // mount points that cannot be renamed.
    let ws = with_submodule(cx, &cx.dir.join("repo"), &cx.dir.join("up"))?;
    let watched = [".git", "deps", "deps/up", "deps/up/.git", ""].map(|p| ws.join(p));
    let before = snapshot(&paths(&watched));
    let run = cx.run("confined", &cx.confined_in(&ws, renames(cx, &ws)?.argv()))?;
    match cx.cell.backend {
        // Seatbelt keeps a repository inside a writable root read-only as bwrap does.
        Backend::Bwrap | Backend::Namespaces | Backend::Seatbelt => {
            run.denied()?;
            for (label, _, _) in RENAMES {
                run.step_fails_with(label, RENAME_REFUSED)?;
            }
            all_unchanged(cx, &before)?;
        }
        // Not prevented under landlock; the partial enforcement in its facts is the check.
        Backend::Landlock => {
            run.ran()?;
        }
    }
    let control_ws = with_submodule(cx, &cx.dir.join("repo-control"), &cx.dir.join("up-control"))?;
    let control = cx.run(
        "control",
        &cx.control_in(&control_ws, renames(cx, &control_ws)?.argv()),
    )?;
    control.succeeded()?;
    ensure!(
        control_ws.join(".g/hooks-moved").is_dir()
            && control_ws.join("deps-moved/up-moved/.git-moved").is_file(),
        "the control run could not move .git and the submodule away: the probe does not work"
    );
    Ok(())
}

// ---- T18 ----

/// Fails unless the run did not happen because `at` is a symlink on the way to a protected
/// path, reported as a runner failure at stage prepare.
fn stopped_for_symlink(run: &Run, at: &Path) -> Verdict {
    let facts = run
        .facts
        .as_ref()
        .map_err(|e| fail(format!("the {} run has no facts: {e}", run.label)))?;
    let failure = facts.runner_failure.as_ref().ok_or_else(|| {
        fail(format!(
            "the {} run was not stopped by the symlink at {}: exit {:?}, refused {:?}",
            run.label,
            at.display(),
            facts.exit,
            facts.refused
        ))
    })?;
    ensure!(
        failure.stage == "prepare"
            && failure.detail.contains("cannot enforce read-only path")
            && failure
                .detail
                .contains(&format!("{} is a symbolic link", at.display())),
        "the {} run failed at stage {:?}, but not for the symlink at {}: {}",
        run.label,
        failure.stage,
        at.display(),
        failure.detail
    );
    ensure!(
        run.probe.steps.is_empty(),
        "the {} run was stopped, yet the command ran: {:?}",
        run.label,
        run.probe.steps
    );
    Ok(())
}

fn a_symlink_on_a_protected_path_stops_the_run(cx: &mut Cx) -> Verdict {
    git::require()?;
    a_git_symlink_stops_the_run(cx)?;
    a_symlink_on_the_way_to_a_submodule_stops_the_run(cx)?;
    a_git_directory_named_through_a_symlink_stops_the_run(cx)
}

/// Set up before launch, as a previous command could have: .git is a symlink to a git
/// directory outside every root. Followed, the command would write there.
fn a_git_symlink_stops_the_run(cx: &mut Cx) -> Verdict {
    let make = |cx: &Cx, name: &str| -> Result<PathBuf, Stop> {
        let ws = cx.repo(&cx.dir.join(name))?;
        let decoy = cx.dir.join(format!("decoy-{name}"));
        std::fs::rename(ws.join(".git"), &decoy)
            .map_err(|e| fail(format!("cannot move .git to {}: {e}", decoy.display())))?;
        cx.symlink(&decoy, &ws.join(".git"))?;
        Ok(ws)
    };
    let probe_for = |cx: &Cx, ws: &Path| {
        cx.probe().map(|p| {
            p.step("config", "write", [ws.join(".git/config")]).step(
                "hook",
                "create",
                [ws.join(".git/hooks/pre-commit")],
            )
        })
    };
    let ws = make(cx, "repo")?;
    let decoy = cx.dir.join("decoy-repo");
    let watched = [decoy.join("config"), decoy.join("hooks")];
    let before = snapshot(&paths(&watched));
    let run = cx.run(
        "confined, .git a symlink",
        &cx.confined_in(&ws, probe_for(cx, &ws)?.argv()),
    )?;
    stopped_for_symlink(&run, &ws.join(".git"))?;
    all_unchanged(cx, &before)?;
    let control_ws = make(cx, "repo-control")?;
    let control_decoy = cx.dir.join("decoy-repo-control");
    let control_before = snapshot(&[&control_decoy.join("config"), &control_decoy.join("hooks")]);
    let control = cx.run(
        "control, .git a symlink",
        &cx.control_in(&control_ws, probe_for(cx, &control_ws)?.argv()),
    )?;
    control.succeeded()?;
    all_changed(&control_before)
}

/// A symlink on the way to a submodule's .git: deps leads outside every root.
fn a_symlink_on_the_way_to_a_submodule_stops_the_run(cx: &mut Cx) -> Verdict {
    let make = |cx: &Cx, name: &str| -> Result<(PathBuf, PathBuf), Stop> {
        let ws = cx.repo(&cx.dir.join(name))?;
        let head = cx.git(&ws, &["rev-parse", "HEAD"])?;
        let gitlink = format!("160000,{head},deps/up");
        cx.git(&ws, &["update-index", "--add", "--cacheinfo", &gitlink])?;
        cx.git(&ws, &["commit", "-q", "-m", "the user's gitlink"])?;
        let elsewhere = cx.dir(&cx.dir.join(format!("elsewhere-{name}")))?;
        let gitfile = cx.file(&elsewhere.join("up/.git"), "gitdir: ../../up.git\n")?;
        cx.symlink(&elsewhere, &ws.join("deps"))?;
        Ok((ws, gitfile))
    };
    let sub_probe = |cx: &Cx, ws: &Path| {
        cx.probe()
            .map(|p| p.step("submodule-git", "write", [ws.join("deps/up/.git")]))
    };
    let (ws, gitfile) = make(cx, "sub")?;
    let before = snapshot(&[&gitfile]);
    let run = cx.run(
        "confined, deps a symlink",
        &cx.confined_in(&ws, sub_probe(cx, &ws)?.argv()),
    )?;
    stopped_for_symlink(&run, &ws.join("deps"))?;
    all_unchanged(cx, &before)?;
    let (control_ws, control_gitfile) = make(cx, "sub-control")?;
    let control_before = snapshot(&[&control_gitfile]);
    let control = cx.run(
        "control, deps a symlink",
        &cx.control_in(&control_ws, sub_probe(cx, &control_ws)?.argv()),
    )?;
    control.succeeded()?;
    all_changed(&control_before)
}

/// A .git file naming its git directory through a symlink inside the root: git follows the
/// name on every run, so a command could re-point the link after any check.
fn a_git_directory_named_through_a_symlink_stops_the_run(cx: &mut Cx) -> Verdict {
    let make = |cx: &Cx, name: &str| -> Result<(PathBuf, PathBuf), Stop> {
        let ws = cx.dir(&cx.dir.join(name))?;
        let store = cx.dir(&ws.join("store"))?;
        cx.dir(&store.join("repo.git/hooks"))?;
        let config = cx.file(&store.join("repo.git/config"), "[core]\n\tbare = false\n")?;
        cx.file(&ws.join(".git"), "gitdir: via/repo.git\n")?;
        cx.symlink(&store, &ws.join("via"))?;
        Ok((ws, config))
    };
    let via_probe = |cx: &Cx, ws: &Path| {
        cx.probe()
            .map(|p| p.step("config", "write", [ws.join("via/repo.git/config")]))
    };
    let (ws, config) = make(cx, "linked")?;
    let before = snapshot(&[&config]);
    let run = cx.run(
        "confined, git directory through a link",
        &cx.confined_in(&ws, via_probe(cx, &ws)?.argv()),
    )?;
    stopped_for_symlink(&run, &ws.join("via"))?;
    all_unchanged(cx, &before)?;
    let (control_ws, control_config) = make(cx, "linked-control")?;
    let control_before = snapshot(&[&control_config]);
    let control = cx.run(
        "control, git directory through a link",
        &cx.control_in(&control_ws, via_probe(cx, &control_ws)?.argv()),
    )?;
    control.succeeded()?;
    all_changed(&control_before)
}

// ---- T19 ----

/// Writes into a git directory, and to the `.git` file that names it.
fn gitdir_writes(cx: &Cx, ws: &Path, gitdir: &Path) -> Result<(Probe, Vec<PathBuf>), Stop> {
    let targets = [
        gitdir.join("config"),
        gitdir.join("hooks/pre-commit"),
        gitdir.join("commondir"),
        gitdir.join("index.lock"),
        ws.join(".git"),
    ];
    let probe = cx
        .probe()?
        .step("config", "write", [&targets[0]])
        .step("hook", "create", [&targets[1]])
        .step("commondir", "create", [&targets[2]])
        .step("index-lock", "create", [&targets[3]])
        .step("gitfile", "write", [&targets[4]]);
    Ok((probe, targets.to_vec()))
}

/// A repository in `ws` whose git directory is `gitdir` (`git init --separate-git-dir`),
/// which leaves a `.git` file in the workspace.
fn separate_repo(cx: &Cx, ws: &Path, gitdir: &Path) -> Result<(), Stop> {
    cx.dir(ws)?;
    let separate = format!("--separate-git-dir={}", gitdir.display());
    cx.git(ws, &["init", "-q", "-b", "main", &separate])?;
    cx.file(&ws.join("tracked"), "tracked by the user\n")?;
    cx.git(ws, &["add", "tracked"])?;
    cx.git(ws, &["commit", "-q", "-m", "the user's commit"])?;
    Ok(())
}

fn the_git_directory_of_a_git_file_stays_read_only(cx: &mut Cx) -> Verdict {
    git::require()?;
    for another_root in [false, true] {
        let (place, suffix) = if another_root {
            ("inside another writable root", "root")
        } else {
            ("outside every root", "outside")
        };
        let ws = cx.dir.join(format!("ws-{suffix}"));
        let store = cx.dir(&cx.dir.join(format!("store-{suffix}")))?;
        let gitdir = store.join("repo.git");
        separate_repo(cx, &ws, &gitdir)?;
        let (probe, targets) = gitdir_writes(cx, &ws, &gitdir)?;
        let before = snapshot(&paths(&targets));
        let mut invocation = cx.confined_in(&ws, probe.argv());
        if another_root {
            invocation = invocation.writable_root(&store);
        }
        let run = cx.run(&format!("confined, git directory {place}"), &invocation)?;
        match (cx.cell.backend, another_root) {
            (Backend::Bwrap | Backend::Namespaces | Backend::Seatbelt, _) => {
                run.denied()?;
                for step in ["config", "hook", "commondir", "index-lock", "gitfile"] {
                    run.step_denied(step)?;
                }
                all_unchanged(cx, &before)?;
            }
            // Outside every root Landlock denies too; only the .git file in the workspace it
            // cannot keep (and names, as every run's check requires).
            (Backend::Landlock, false) => {
                run.denied()?;
                for step in ["config", "hook", "commondir", "index-lock"] {
                    run.step_denied(step)?;
                }
                // The .git file is the last target; the others are in the git directory.
                let (_gitfile, in_gitdir) = before
                    .split_last()
                    .ok_or_else(|| fail("no target was snapshotted"))?;
                all_unchanged(cx, in_gitdir)?;
            }
            (Backend::Landlock, true) => names_protected(&run, &gitdir)?,
        }

        let control_ws = cx.dir.join(format!("ws-{suffix}-control"));
        let control_store = cx.dir(&cx.dir.join(format!("store-{suffix}-control")))?;
        let control_gitdir = control_store.join("repo.git");
        separate_repo(cx, &control_ws, &control_gitdir)?;
        let (probe, targets) = gitdir_writes(cx, &control_ws, &control_gitdir)?;
        let control_before = snapshot(&paths(&targets));
        let control = cx.run(
            &format!("control, git directory {place}"),
            &cx.control_in(&control_ws, probe.argv()),
        )?;
        control.succeeded()?;
        all_changed(&control_before)?;
    }
    Ok(())
}

// ---- T20 ----

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
    let before = snapshot(&paths(&targets));
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

    the_commands_home_is_never_a_writable_root(cx)
}

fn the_commands_home_is_never_a_writable_root(cx: &mut Cx) -> Verdict {
    // HOME as the command gets it (`--env HOME=…`), not as the password database has it: the
    // command's shell and git read their startup files there, so it is never a writable root,
    // nor inside one. A root inside it is a project like any other.
    let command_home = cx.dir(&cx.dir.join("command-home"))?;
    let project = cx.dir(&command_home.join("project"))?;
    let shown = command_home.display().to_string();
    for (what, root) in [
        ("HOME itself", command_home.clone()),
        ("a root holding HOME", cx.dir.clone()),
    ] {
        let made = project.join(format!("made-{}", what.replace(' ', "-")));
        let probe = cx.probe()?.step("create", "create", [&made]);
        let run = cx.run(
            &format!("confined, {what} as writable root"),
            &cx.confined(probe.argv())
                .command_env("HOME", &command_home)
                .writable_root(&root),
        )?;
        let reason = run.refused()?;
        ensure!(
            reason.contains(&shown),
            "the {} run was refused, but the reason does not name HOME {shown}: {reason}",
            run.label
        );
        cx.absent(&made)?;
        // The control: the same root with the command's HOME left alone is allowed, so the
        // refusal is HOME's doing.
        let control = cx.run(
            &format!("control, {what} as writable root, HOME left alone"),
            &cx.confined(probe.argv()).writable_root(&root),
        )?;
        control.succeeded()?;
        ensure!(
            made.is_file(),
            "the control run could not write {}",
            made.display()
        );
    }
    let made = project.join("made-inside");
    let probe = cx.probe()?.step("create", "create", [&made]);
    let run = cx.run(
        "confined, a root inside HOME",
        &cx.confined(probe.argv())
            .command_env("HOME", &command_home)
            .writable_root(&project),
    )?;
    run.succeeded()?;
    ensure!(
        made.is_file(),
        "a root inside the command's HOME was not writable: {} is missing",
        made.display()
    );
    Ok(())
}
