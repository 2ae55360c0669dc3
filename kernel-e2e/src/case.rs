//! What a case is, and the context it runs in: its own directories, canaries, and runs of agentd,
//! with the checks every case shares.

use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::agentd::{Invocation, Launcher, Run};
use crate::error::E2eError;
use crate::facts::{Exit, Facts, RootBefore};
use crate::fixtures::{self, PathState};
use crate::matrix::{Cell, Mode};
use crate::probe::{Outcome, Probe};
use crate::users::Identity;

/// Why a case stopped before passing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// The sandbox (or agentd's report) is wrong, or a control showed the probe does not work.
    Fail(String),
    /// The case cannot be run here; the reason says what is missing.
    Skip(String),
}

impl From<E2eError> for Stop {
    /// A step that could not be done fails the case, saying why.
    fn from(e: E2eError) -> Stop {
        Stop::Fail(e.to_string())
    }
}

/// A case's result: `Ok` is a pass.
pub type Verdict = Result<(), Stop>;

/// Fails the case with a message unless the condition holds.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $($arg:tt)+) => {
        if !$cond {
            return Err($crate::case::Stop::Fail(format!($($arg)+)));
        }
    };
}

/// Makes a `Stop::Fail` from a format string.
pub fn fail(message: impl Into<String>) -> Stop {
    Stop::Fail(message.into())
}

/// One catalogue entry: an attack, the modes it applies to, and the checks.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    /// The catalogue id, e.g. "T01".
    pub id: &'static str,
    /// What the case shows, as a sentence.
    pub title: &'static str,
    /// The confined modes the case runs in (its controls always run in danger-full-access).
    pub modes: &'static [Mode],
    /// Runs with no other case alongside: for limits the kernel counts per user, which other
    /// cases' processes of the same user would otherwise eat into.
    pub exclusive: bool,
    pub body: fn(&mut Cx) -> Verdict,
}

/// What the suite prepared once for every case.
#[derive(Debug)]
pub struct Shared {
    /// The directory holding every case directory and the probe.
    pub run_root: PathBuf,
    pub probe_script: PathBuf,
}

/// The context of one case in one cell: fresh directories, a unique tag, and the runs made.
#[derive(Debug)]
pub struct Cx<'a> {
    pub cell: &'a Cell,
    pub launcher: &'a Launcher,
    pub shared: &'a Shared,
    /// A Python that this cell's user can run, if there is one.
    pub python: Option<&'a Path>,
    /// This case's own directory (owned by the cell's user), outside every other case's.
    pub dir: PathBuf,
    /// The workspace: `<dir>/ws`, empty at the start.
    pub ws: PathBuf,
    /// Unique to this case in this cell; names host canaries and marks leftover processes.
    pub tag: String,
    /// Every run made, in order, for the failure report.
    pub runs: Vec<Run>,
    /// What the case observed that is worth a line under its result, pass or fail.
    pub notes: Vec<String>,
    cleanup: Vec<PathBuf>,
}

impl<'a> Cx<'a> {
    pub fn new(
        cell: &'a Cell,
        launcher: &'a Launcher,
        shared: &'a Shared,
        python: Option<&'a Path>,
        dir: PathBuf,
        tag: String,
    ) -> Result<Cx<'a>, Stop> {
        let ws = dir.join("ws");
        let cx = Cx {
            cell,
            launcher,
            shared,
            python,
            dir: dir.clone(),
            ws: ws.clone(),
            tag,
            runs: Vec::new(),
            notes: Vec::new(),
            cleanup: Vec::new(),
        };
        cx.dir(&dir)?;
        cx.dir(&ws)?;
        Ok(cx)
    }

    pub fn user(&self) -> &Identity {
        &self.cell.user
    }

    pub fn mode(&self) -> Mode {
        self.cell.mode
    }

    /// Adds a line printed under the case's result: what a pass does not show by itself (how
    /// often a race was won, say).
    pub fn note(&mut self, line: impl Into<String>) {
        self.notes.push(line.into());
    }

    // ---- paths and fixtures ----

    /// A path in the user's real home, unique to this case; removed afterwards.
    pub fn home_path(&mut self, name: &str) -> PathBuf {
        let path = self.user().home.join(format!("{}-{name}", self.tag));
        self.cleanup.push(path.clone());
        path
    }

    /// A path in the host's /tmp, unique to this case; removed afterwards.
    pub fn host_tmp_path(&mut self, name: &str) -> PathBuf {
        let path = Path::new("/tmp").join(format!("{}-{name}", self.tag));
        self.cleanup.push(path.clone());
        path
    }

    /// A path in the host's /dev/shm, unique to this case; removed afterwards.
    pub fn shm_path(&mut self, name: &str) -> PathBuf {
        let path = Path::new("/dev/shm").join(format!("{}-{name}", self.tag));
        self.cleanup.push(path.clone());
        path
    }

    /// Creates a file owned by the cell's user (a canary the user could change unconfined).
    pub fn file(&self, path: &Path, content: &str) -> Result<PathBuf, Stop> {
        if let Some(parent) = path.parent() {
            self.dir(parent)?;
        }
        fs::write(path, content).map_err(|e| setup(path, e))?;
        fs::set_permissions(path, fs::Permissions::from_mode(0o644)).map_err(|e| setup(path, e))?;
        self.user().give(path).map_err(|e| setup(path, e))?;
        Ok(path.to_owned())
    }

    /// Creates a directory (0755) owned by the cell's user, with any missing parents below the
    /// case directory owned by the user too (renaming a directory needs write access to it).
    pub fn dir(&self, path: &Path) -> Result<PathBuf, Stop> {
        let missing: Vec<&Path> = path.ancestors().take_while(|p| !p.exists()).collect();
        for dir in missing.into_iter().rev() {
            // Another case may be creating the same cell directory right now.
            match fs::create_dir(dir) {
                Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                    return Err(setup(dir, e));
                }
                _ => {}
            }
            fs::set_permissions(dir, fs::Permissions::from_mode(0o755))
                .map_err(|e| setup(dir, e))?;
            if dir.starts_with(&self.dir) {
                self.user().give(dir).map_err(|e| setup(dir, e))?;
            }
        }
        if path.starts_with(&self.dir) {
            self.user().give(path).map_err(|e| setup(path, e))?;
        }
        Ok(path.to_owned())
    }

    /// Creates a symlink owned by the cell's user.
    pub fn symlink(&self, target: &Path, link: &Path) -> Result<PathBuf, Stop> {
        symlink(target, link).map_err(|e| setup(link, e))?;
        if !self.user().current {
            std::os::unix::fs::lchown(link, Some(self.user().uid), Some(self.user().gid))
                .map_err(|e| setup(link, e))?;
        }
        Ok(link.to_owned())
    }

    /// A file with known content in the user's home: the canary for writes outside the roots.
    pub fn home_canary(&mut self, name: &str) -> Result<PathBuf, Stop> {
        let path = self.home_path(name);
        let content = format!("canary {} {name}\n", self.tag);
        self.file(&path, &content)
    }

    /// Writes a ceiling file the helper reads, owned by the suite (not by the user).
    pub fn ceiling(&self, name: &str, toml: &str) -> Result<PathBuf, Stop> {
        let path = self.dir.join(name);
        fs::write(&path, toml).map_err(|e| setup(&path, e))?;
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644))
            .map_err(|e| setup(&path, e))?;
        Ok(path)
    }

    // ---- commands ----

    /// The probe, or a skip when this user has no Python to run it with.
    pub fn probe(&self) -> Result<Probe, Stop> {
        let python = self
            .python
            .ok_or_else(|| Stop::Skip(format!("no python3 that {} can run", self.user().name)))?;
        Ok(Probe::new(python, &self.shared.probe_script))
    }

    /// The Python this cell's user can run, or a skip when there is none.
    pub fn python_path(&self) -> Result<PathBuf, Stop> {
        self.python
            .map(Path::to_path_buf)
            .ok_or_else(|| Stop::Skip(format!("no python3 that {} can run", self.user().name)))
    }

    /// `/bin/sh -c SCRIPT`.
    pub fn sh(&self, script: &str) -> Vec<OsString> {
        vec!["/bin/sh".into(), "-c".into(), script.into()]
    }

    /// The command confined as this cell says: its backend, its mode, the case's workspace.
    pub fn confined(&self, argv: Vec<OsString>) -> Invocation {
        let mut invocation = Invocation::new(self.cell.mode, &self.ws, argv);
        invocation.backend = Some(self.cell.backend);
        invocation
    }

    /// [`Cx::confined`] with another workspace (also the working directory).
    pub fn confined_in(&self, ws: &Path, argv: Vec<OsString>) -> Invocation {
        let mut invocation = self.confined(argv);
        invocation.workspace = ws.to_owned();
        invocation.cwd = ws.to_owned();
        invocation
    }

    /// [`Cx::control`] with another workspace (also the working directory).
    pub fn control_in(&self, ws: &Path, argv: Vec<OsString>) -> Invocation {
        let mut invocation = self.control(argv);
        invocation.workspace = ws.to_owned();
        invocation.cwd = ws.to_owned();
        invocation
    }

    /// The same command with nothing confining it and the network allowed: a control run,
    /// which must succeed for the confined run's failure to mean anything.
    pub fn control(&self, argv: Vec<OsString>) -> Invocation {
        Invocation::new(Mode::DangerFullAccess, &self.ws, argv).network(true)
    }

    /// Runs agentd and checks what every run must satisfy: one valid facts line, an exit
    /// status and `denied` consistent with it, and for a confined command that ran, the backend
    /// asked for with an honest enforcement level.
    pub fn run(&mut self, label: &str, invocation: &Invocation) -> Result<Run, Stop> {
        let roots = roots_before(invocation);
        let run = self.launcher.run(label, invocation).map_err(Stop::from)?;
        self.record(run, invocation, &roots)
    }

    /// Takes a run made with the launcher directly into the case's runs and checks it as
    /// [`Cx::run`] does: for a run made by a [`crate::agentd::ReadyHook`] while another waited,
    /// or one whose roots cannot be looked at beforehand (they are being raced). `roots` are the
    /// writable roots to hold its facts to, as [`roots_before`] saw them.
    pub fn record(
        &mut self,
        run: Run,
        invocation: &Invocation,
        roots: &[RootBefore],
    ) -> Result<Run, Stop> {
        self.runs.push(run.clone());
        let label = run.label.as_str();
        let facts = run.facts.as_ref().map_err(|e| {
            fail(format!(
                "the {label} run's last stderr line is not the facts: {e}"
            ))
        })?;
        facts
            .check_consistency(run.status, &run.command_stderr_tail())
            .map_err(|e| fail(format!("the {label} run's facts are inconsistent: {e}")))?;
        if facts.ran() {
            match (invocation.mode, invocation.backend) {
                (Mode::DangerFullAccess, _) => {
                    ensure!(
                        facts.backend.as_deref() == Some("none"),
                        "the {label} run in danger-full-access reports backend {:?}, not \"none\"",
                        facts.backend
                    );
                }
                (mode, Some(backend)) => facts
                    .check_confinement(backend, mode, roots)
                    .map_err(|e| fail(format!("the {label} run: {e}")))?,
                (_, None) => {}
            }
        }
        Ok(run)
    }

    /// Runs agentd without the checks of [`Cx::run`]: for runs where agentd itself is killed and
    /// so cannot report.
    pub fn run_unreported(&mut self, label: &str, invocation: &Invocation) -> Result<Run, Stop> {
        let run = self.launcher.run(label, invocation).map_err(Stop::from)?;
        self.runs.push(run.clone());
        Ok(run)
    }

    /// Runs the command without agentd (see [`Launcher::run_plain`]).
    pub fn run_plain(&mut self, label: &str, invocation: &Invocation) -> Result<Run, Stop> {
        let run = self
            .launcher
            .run_plain(label, invocation)
            .map_err(Stop::from)?;
        self.runs.push(run.clone());
        Ok(run)
    }

    // ---- host-side checks ----

    /// Fails unless `path` is still as it was before the run.
    pub fn unchanged(&self, path: &Path, before: &PathState) -> Verdict {
        let now = PathState::of(path);
        ensure!(
            &now == before,
            "{} changed on the host: it was {before}, it is now {now}",
            path.display()
        );
        Ok(())
    }

    /// Fails unless nothing exists at `path` on the host.
    pub fn absent(&self, path: &Path) -> Verdict {
        self.unchanged(path, &PathState::Absent)
    }

    /// Fails unless every process carrying this case's tag is gone within `limit` (then kills
    /// what is left): for trees that should die with something that was just killed.
    pub fn gone_within(&self, limit: Duration, after: &str) -> Verdict {
        let deadline = Instant::now() + limit;
        let lingering: Vec<u32> = fixtures::tagged_processes(&self.tag)
            .into_iter()
            .filter(|&pid| {
                !fixtures::wait_gone(pid, deadline.saturating_duration_since(Instant::now()))
            })
            .collect();
        fixtures::kill_tagged(&self.tag);
        ensure!(
            lingering.is_empty(),
            "processes {lingering:?} of the command were still alive {:.1}s after {after}",
            limit.as_secs_f64()
        );
        Ok(())
    }

    /// Fails if processes carrying this case's tag outlived the run (and kills them).
    pub fn no_survivors(&self, after: &str) -> Verdict {
        let survivors = fixtures::kill_tagged(&self.tag);
        ensure!(
            survivors.is_empty(),
            "processes {survivors:?} of the command were still alive after {after}"
        );
        Ok(())
    }
}

impl Drop for Cx<'_> {
    fn drop(&mut self) {
        fixtures::kill_tagged(&self.tag);
        for path in self.cleanup.drain(..) {
            let _ = fixtures::remove(&path);
        }
    }
}

/// The writable roots of an invocation (its workspace first) as they are now: what
/// [`Facts::check_confinement`] compares the facts with.
pub fn roots_before(invocation: &Invocation) -> Vec<RootBefore> {
    std::iter::once(&invocation.workspace)
        .chain(&invocation.writable_roots)
        .map(|root| RootBefore::of(root))
        .collect()
}

fn setup(path: &Path, e: std::io::Error) -> Stop {
    Stop::Fail(format!("cannot set up the fixture {}: {e}", path.display()))
}

/// Checks on a finished run, phrased so the failure says which run and what was expected.
pub trait RunChecks {
    /// The facts of a command that ran (not refused, no runner failure).
    fn ran(&self) -> Result<&Facts, Stop>;
    /// The command ran and exited 0 (whether or not a tool in it worked around a denial; see
    /// [`RunChecks::succeeded_denied_as`]).
    fn succeeded(&self) -> Verdict;
    /// [`RunChecks::succeeded`], and agentd named exactly these kinds of denial: a tool reported
    /// working around what the sandbox denied it ([`crate::facts::RECOVERED_TEXTS`]).
    fn succeeded_denied_as(&self, kinds: &[&str]) -> Verdict;
    /// The command ran, exited non-zero, and agentd classified it as denied.
    fn denied(&self) -> Verdict;
    /// [`RunChecks::denied`], and agentd named exactly these kinds of denial.
    fn denied_as(&self, kinds: &[&str]) -> Verdict;
    /// The command ran and failed, and agentd did not call it a denial.
    fn failed_undenied(&self) -> Verdict;
    /// The command did not run because the helper refused the request.
    fn refused(&self) -> Result<&str, Stop>;
    /// What the step labelled `label` reported.
    fn step(&self, label: &str) -> Result<&Outcome, Stop>;
    /// The step failed with a denial errno (EACCES, EPERM, EROFS).
    fn step_denied(&self, label: &str) -> Verdict;
    /// The step failed with one of `errnos`.
    fn step_fails_with(&self, label: &str, errnos: &[&str]) -> Verdict;
    /// The step succeeded.
    fn step_ok(&self, label: &str) -> Verdict;
    /// The step reached the kernel's own checks: it succeeded, or failed with anything but the
    /// answers a filter gives (EPERM, ENOSYS, EACCES).
    fn step_reached_kernel(&self, label: &str) -> Verdict;
}

impl RunChecks for Run {
    fn ran(&self) -> Result<&Facts, Stop> {
        let facts = self
            .facts
            .as_ref()
            .map_err(|e| fail(format!("the {} run has no valid facts: {e}", self.label)))?;
        if let Some(failure) = &facts.runner_failure {
            return Err(fail(format!(
                "the {} run did not run the command: runner failure at stage {:?}: {}",
                self.label, failure.stage, failure.detail
            )));
        }
        if let Some(reason) = &facts.refused {
            return Err(fail(format!(
                "the {} run did not run the command: refused: {reason}",
                self.label
            )));
        }
        ensure!(
            facts.exit.is_some(),
            "the {} run reports no exit",
            self.label
        );
        Ok(facts)
    }

    fn succeeded(&self) -> Verdict {
        let facts = self.ran()?;
        ensure!(
            facts.exit == Some(Exit::Code(0)),
            "the {} run should have succeeded but exited {:?}",
            self.label,
            facts.exit
        );
        Ok(())
    }

    fn succeeded_denied_as(&self, kinds: &[&str]) -> Verdict {
        self.succeeded()?;
        let facts = self.ran()?;
        ensure!(
            facts.denied && facts.denials == kinds,
            "the {} run succeeded and should have been denied {kinds:?} that it worked around, \
             but the facts say denied {} {:?}",
            self.label,
            facts.denied,
            facts.denials
        );
        Ok(())
    }

    fn denied(&self) -> Verdict {
        let facts = self.ran()?;
        ensure!(
            matches!(facts.exit, Some(Exit::Code(c)) if c != 0),
            "the {} run should have failed but exited {:?}",
            self.label,
            facts.exit
        );
        ensure!(
            facts.denied,
            "the {} run failed but the facts do not say denied",
            self.label
        );
        Ok(())
    }

    fn denied_as(&self, kinds: &[&str]) -> Verdict {
        self.denied()?;
        let facts = self.ran()?;
        ensure!(
            facts.denials == kinds,
            "the {} run's denials are {:?}, {kinds:?} was expected",
            self.label,
            facts.denials
        );
        Ok(())
    }

    fn failed_undenied(&self) -> Verdict {
        let facts = self.ran()?;
        ensure!(
            facts.exit != Some(Exit::Code(0)),
            "the {} run should have failed but succeeded",
            self.label
        );
        ensure!(
            !facts.denied,
            "the {} run's failure is not the sandbox's, yet the facts say denied {:?}",
            self.label,
            facts.denials
        );
        Ok(())
    }

    fn refused(&self) -> Result<&str, Stop> {
        let facts = self
            .facts
            .as_ref()
            .map_err(|e| fail(format!("the {} run has no valid facts: {e}", self.label)))?;
        let reason = facts.refused.as_deref().ok_or_else(|| {
            fail(format!(
                "the {} run should have been refused; facts: exit {:?}, runner failure {:?}",
                self.label, facts.exit, facts.runner_failure
            ))
        })?;
        ensure!(
            self.status == Some(crate::facts::EXIT_DID_NOT_RUN),
            "the {} run was refused but agentd exited {:?}",
            self.label,
            self.status
        );
        Ok(reason)
    }

    fn step(&self, label: &str) -> Result<&Outcome, Stop> {
        match self.probe.step(label) {
            Some(Outcome::Unsupported(why)) => Err(Stop::Skip(format!("{label}: {why}"))),
            Some(outcome) => Ok(outcome),
            None => Err(fail(format!(
                "the {} run never reported step {label:?} (the probe stopped early)",
                self.label
            ))),
        }
    }

    fn step_denied(&self, label: &str) -> Verdict {
        let outcome = self.step(label)?;
        ensure!(
            outcome.is_denial(),
            "in the {} run, {label} should have been denied (EACCES/EPERM/EROFS) but {outcome}",
            self.label
        );
        Ok(())
    }

    fn step_fails_with(&self, label: &str, errnos: &[&str]) -> Verdict {
        let outcome = self.step(label)?;
        ensure!(
            outcome.errno().is_some_and(|e| errnos.contains(&e)),
            "in the {} run, {label} should have failed with one of {errnos:?} but {outcome}",
            self.label
        );
        Ok(())
    }

    fn step_ok(&self, label: &str) -> Verdict {
        let outcome = self.step(label)?;
        ensure!(
            *outcome == Outcome::Ok,
            "in the {} run, {label} should have succeeded but {outcome}",
            self.label
        );
        Ok(())
    }

    fn step_reached_kernel(&self, label: &str) -> Verdict {
        let outcome = self.step(label)?;
        ensure!(
            !matches!(outcome.errno(), Some("EPERM" | "ENOSYS" | "EACCES")),
            "in the {} run, {label} should have reached the kernel but {outcome}",
            self.label
        );
        Ok(())
    }
}
