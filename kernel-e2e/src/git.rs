//! git on the host, as the cell's user and outside any sandbox: how the repository cases make
//! real repositories, and how they then run git the way the user would once the agent's command
//! has ended, which is when anything planted in a repository would run.
//!
//! git runs as the cell's user because it refuses a repository another user owns
//! (`safe.directory`), and with no global or system configuration, so that only what is in the
//! repository decides what it runs.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::agentd::{Invocation, Launcher, Run};
use crate::case::{Cx, Stop, fail};
use crate::error::E2eError;
use crate::matrix::Mode;
use crate::tools::find_tool;

/// The environment every git run gets, on the host and inside the sandbox: no configuration but
/// the repository's, and an identity so that commits work for any user.
pub const ENV: [(&str, &str); 7] = [
    ("GIT_CONFIG_GLOBAL", "/dev/null"),
    ("GIT_CONFIG_NOSYSTEM", "1"),
    ("GIT_AUTHOR_NAME", "kernel-e2e"),
    ("GIT_AUTHOR_EMAIL", "kernel-e2e@example.invalid"),
    ("GIT_COMMITTER_NAME", "kernel-e2e"),
    ("GIT_COMMITTER_EMAIL", "kernel-e2e@example.invalid"),
    ("GIT_TERMINAL_PROMPT", "0"),
];

/// `export …` of [`ENV`], for the first line of a script that runs git inside the sandbox.
pub fn shell_env() -> String {
    let pairs: Vec<String> = ENV.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("export {}", pairs.join(" "))
}

/// git, or a skip: the repository cases need the real thing.
pub fn require() -> Result<PathBuf, Stop> {
    find_tool("git").ok_or_else(|| Stop::Skip("git is not installed".into()))
}

/// `git ARGS` in `dir` on the host, with [`ENV`].
pub fn invocation(dir: &Path, args: &[&str]) -> Invocation {
    let git = find_tool("git").unwrap_or_else(|| PathBuf::from("git"));
    let argv = std::iter::once(git.into_os_string())
        .chain(args.iter().map(OsString::from))
        .collect();
    ENV.iter().fold(
        Invocation::new(Mode::DangerFullAccess, dir, argv),
        |inv, (k, v)| inv.env(*k, *v),
    )
}

/// Runs `git ARGS` in `dir` on the host as the launcher's user, outside any sandbox.
pub fn run(launcher: &Launcher, label: &str, dir: &Path, args: &[&str]) -> Result<Run, E2eError> {
    launcher.run_plain(label, &invocation(dir, args))
}

impl Cx<'_> {
    /// Runs git on the host to make a fixture; fails the case, with git's output, unless it
    /// succeeds. Not kept in the case's runs: a fixture that works is not part of the story.
    /// Returns git's stdout, trimmed.
    pub fn git(&self, dir: &Path, args: &[&str]) -> Result<String, Stop> {
        let label = format!("fixture: git {}", args.join(" "));
        let run = run(self.launcher, &label, dir, args).map_err(Stop::from)?;
        if run.status != Some(0) {
            return Err(fail(format!(
                "cannot set up a repository: git {} failed\n{}",
                args.join(" "),
                run.describe()
            )));
        }
        Ok(run.stdout.trim().to_owned())
    }

    /// Runs git on the host the way the user would after the agent's command, and keeps the
    /// run in the case's runs. Its exit status is the caller's to judge.
    pub fn host_git(&mut self, label: &str, dir: &Path, args: &[&str]) -> Result<Run, Stop> {
        let run = run(self.launcher, label, dir, args).map_err(Stop::from)?;
        self.runs.push(run.clone());
        Ok(run)
    }

    /// A repository made by `git init` in `dir` (created if needed), with one commit holding
    /// the file `tracked`.
    pub fn repo(&self, dir: &Path) -> Result<PathBuf, Stop> {
        self.dir(dir)?;
        self.git(dir, &["init", "-q", "-b", "main"])?;
        self.file(&dir.join("tracked"), "tracked by the user\n")?;
        self.git(dir, &["add", "tracked"])?;
        self.git(dir, &["commit", "-q", "-m", "the user's commit"])?;
        Ok(dir.to_owned())
    }
}
