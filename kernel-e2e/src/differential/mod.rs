//! The differential test of a confinement backend: for every policy of a corpus, one `agentd
//! run` per backend asks the same paths whether they can be read and written (`test -r`, `test
//! -w`, and real attempts), the host is checked after each run, and the answers are compared
//! path by path. The namespace backend (RFC 0023) must answer exactly as bwrap does; Landlock,
//! which cannot keep part of a writable root read-only nor hide it, must not, which is how the
//! comparison shows it can fail.
//!
//! Which backend can run is judged without the helper, as the suite judges it
//! (`tests/shared/available.rs`, and util-linux's `unshare` for the namespace backend's user
//! namespace): a backend that can run here and does not is a failure, never a skip. Each run's
//! paths are the test's own, under `/var/tmp` and the host's `/tmp`, removed at its end.

pub mod compare;
pub mod corpus;
pub mod fixture;
pub mod host;
pub mod script;

use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::agentd::{Invocation, Launcher, Run};
use crate::available;
use crate::binaries::Binaries;
use crate::error::E2eError;
use crate::fixtures;
use crate::matrix::{Backend, Mode};
use crate::skip::Need;
use crate::suite;
use crate::tools::find_tool;
use crate::users::Identity;
use compare::Outcome;
use corpus::Entry;
use fixture::{Fixture, Policy};

/// Why `backend` cannot run here for `user`, if it cannot, and what that lacks: judged without
/// the helper, as the suite judges it (`suite.rs`). The namespace backend needs Landlock, which
/// it applies inside its namespaces, and a user namespace `user` may make itself: bwrap
/// running is not enough, since a system may let bwrap alone make one (Ubuntu's AppArmor rule).
pub fn unavailable(backend: Backend, user: &Identity) -> Option<(Need, String)> {
    match backend {
        Backend::Bwrap => available::bwrap_runs(|command| user.apply(command))
            .err()
            .map(|why| (Need::Bwrap, why.to_string())),
        Backend::Landlock => available::landlock_abi()
            .err()
            .map(|why| (Need::Landlock, why.to_string())),
        Backend::Namespaces => unavailable(Backend::Landlock, user).or_else(|| {
            available::user_namespaces_run(|command| user.apply(command))
                .err()
                .map(|why| (Need::UserNamespace, why.to_string()))
        }),
        Backend::Seatbelt => Some((Need::Backend, "the comparison is of Linux backends".into())),
    }
}

/// Who runs agentd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who {
    /// The user running the test (root in CI).
    Current,
    /// The suite's unprivileged user (`agentd-e2e`), made for the test when root runs it.
    Unprivileged,
}

/// What a comparison came to.
#[derive(Debug)]
pub enum Verdict {
    /// Every policy compared, in the corpus's order.
    Ran(Vec<Outcome>),
    /// It cannot run here: what is missing, and why.
    Skip(Need, String),
}

/// The directories one comparison makes and removes when dropped: `/var/tmp/NAME` (the
/// fixtures, agentd's empty configuration directory, the binaries an unprivileged user runs)
/// and `/tmp/NAME` (what must lie under the host's `/tmp`).
#[derive(Debug)]
pub struct Scratch {
    pub root: PathBuf,
    pub host_tmp: PathBuf,
}

impl Scratch {
    pub fn new(name: &str) -> Result<Scratch, E2eError> {
        let name = format!("agentd-differential-{}-{name}", std::process::id());
        let make = |dir: PathBuf| -> Result<PathBuf, E2eError> {
            fs::create_dir_all(&dir)
                .and_then(|()| fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)))
                .and_then(|()| dir.canonicalize())
                .map_err(|e| trouble!("cannot make {}: {e}", dir.display()))
        };
        // One after the other, so that when the second cannot be made the drop removes the
        // first.
        let mut scratch = Scratch {
            root: make(Path::new("/var/tmp").join(&name))?,
            host_tmp: PathBuf::new(),
        };
        scratch.host_tmp = make(Path::new("/tmp").join(&name))?;
        make(scratch.root.join("config"))?;
        Ok(scratch)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        for dir in [&self.root, &self.host_tmp] {
            if !dir.as_os_str().is_empty() {
                let _ = fixtures::remove(dir);
            }
        }
    }
}

/// Compares `candidate` with `reference` over `corpus`, as `who`, in directories named after
/// `name`; or says what this machine lacks for it.
pub fn run(
    name: &str,
    who: Who,
    reference: Backend,
    candidate: Backend,
    corpus: &[Entry],
) -> Result<Verdict, E2eError> {
    let current = Identity::current()?;
    let (user, _account) = match who {
        Who::Current => (current, None),
        Who::Unprivileged if !current.is_root() => {
            let why = format!(
                "an unprivileged user is made by root, and this is {}",
                current.name
            );
            return Ok(Verdict::Skip(Need::Root, why));
        }
        Who::Unprivileged => match Identity::unprivileged() {
            Ok((user, account)) => (user, Some(account)),
            Err(E2eError::Account(e)) => return Ok(Verdict::Skip(Need::Users, e.to_string())),
            Err(e) => return Err(e),
        },
    };
    for side in [reference, candidate] {
        if let Some((need, why)) = unavailable(side, &user) {
            return Ok(Verdict::Skip(
                need,
                format!("{side} cannot run here: {why}"),
            ));
        }
    }
    if find_tool("git").is_none() {
        return Ok(Verdict::Skip(Need::Git, "git is not installed".into()));
    }
    let scratch = Scratch::new(name)?;
    let launcher = launcher(&scratch, user)?;
    let setup = Setup::new(&scratch, launcher)?;
    corpus
        .iter()
        .map(|entry| setup.compare(entry, reference, candidate))
        .collect::<Result<Vec<_>, _>>()
        .map(Verdict::Ran)
}

/// How to start agentd as `user`: the binaries of this build (copied into the scratch
/// directory, root's and 0755, for a user who may not reach the target directory), with a
/// login's environment and an empty configuration directory.
fn launcher(scratch: &Scratch, user: Identity) -> Result<Launcher, E2eError> {
    let built = Binaries::locate()?;
    let binaries = if user.current {
        built
    } else {
        let dir = scratch.root.join("bin");
        let copy = |from: &Path| -> Result<PathBuf, E2eError> {
            let to = dir.join(from.file_name().unwrap_or_default());
            fs::create_dir_all(&dir)
                .and_then(|()| fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)))
                .and_then(|()| fs::hard_link(from, &to).or_else(|_| fs::copy(from, &to).map(drop)))
                .and_then(|()| fs::set_permissions(&to, fs::Permissions::from_mode(0o755)))
                .map_err(|e| trouble!("cannot put {} in {}: {e}", from.display(), dir.display()))?;
            Ok(to)
        };
        Binaries {
            agentd: copy(&built.agentd)?,
            helper: copy(&built.helper)?,
        }
    };
    let base_env = suite::base_env(&user, &scratch.root);
    Ok(Launcher {
        binaries,
        user,
        base_env,
    })
}

/// One user's side of a comparison: how agentd is started, and where the fixtures go.
#[derive(Debug)]
struct Setup {
    launcher: Launcher,
    scratch: [PathBuf; 2],
    /// `<scratch>/<user>` and `/tmp/<scratch>/<user>`, the user's.
    base: PathBuf,
    host_base: PathBuf,
}

/// Numbers the runs of this process, for the names of their probe entries.
static RUNS: AtomicUsize = AtomicUsize::new(0);

impl Setup {
    fn new(scratch: &Scratch, launcher: Launcher) -> Result<Setup, E2eError> {
        let user = &launcher.user;
        let make = |dir: PathBuf| -> Result<PathBuf, E2eError> {
            fs::create_dir(&dir)
                .and_then(|()| user.give(&dir))
                .map_err(|e| trouble!("cannot make {}: {e}", dir.display()))?;
            Ok(dir)
        };
        Ok(Setup {
            base: make(scratch.root.join(&user.name))?,
            host_base: make(scratch.host_tmp.join(&user.name))?,
            scratch: [scratch.root.clone(), scratch.host_tmp.clone()],
            launcher,
        })
    }

    /// Makes the policy's fixture, runs it under both backends, and compares.
    fn compare(
        &self,
        entry: &Entry,
        reference: Backend,
        candidate: Backend,
    ) -> Result<Outcome, E2eError> {
        let mut fixture = Fixture::new(
            &self.launcher,
            self.scratch.clone(),
            entry.name,
            self.base.join(entry.name),
            self.host_base.join(entry.name),
        )?;
        (entry.build)(&mut fixture)?;
        let policy = fixture.finish();
        let labels: Vec<String> = policy.probes.iter().map(|p| p.label.clone()).collect();
        let first = self.run(&policy, reference)?;
        let second = self.run(&policy, candidate)?;
        Ok(Outcome {
            policy: format!("{} ({})", policy.name, policy.mode),
            user: self.launcher.user.name.clone(),
            reference: reference.as_str(),
            candidate: candidate.as_str(),
            paths: labels.len(),
            differences: compare::differences(&labels, &first.answers, &second.answers),
            reference_changes: first.changes,
            candidate_changes: second.changes,
            reference_run: first.seen,
            candidate_run: second.seen,
        })
    }

    /// One `agentd run` of the policy's script under `side`, checked to have run confined by
    /// it, and the host checked afterwards.
    fn run(&self, policy: &Policy, side: Backend) -> Result<Answered, E2eError> {
        let tag = format!(
            "{}-{}",
            std::process::id(),
            RUNS.fetch_add(1, Ordering::Relaxed)
        );
        let before = host::Snapshot::of(&policy.canaries);
        let invocation = agentd_invocation(&self.launcher, policy, side, &tag);
        let run = self.launcher.run_plain(side.as_str(), &invocation)?;
        let mut changes = before.changed();
        let home = self.launcher.user.home.as_path();
        changes.extend(host::strays(
            &[home, Path::new("/tmp"), Path::new("/dev/shm")],
            &tag,
        ));
        ran_confined(&run, side)?;
        let mut seen = script::seen(&run.stdout);
        seen.push(shown_command_line(&run, &tag, policy.probes.len()));
        Ok(Answered {
            answers: script::answers(&run.stdout),
            changes,
            seen,
        })
    }
}

/// What one backend's run answered, and what it changed on the host.
#[derive(Debug)]
struct Answered {
    answers: Vec<(String, String)>,
    changes: Vec<host::Change>,
    seen: Vec<String>,
}

/// agentd run as the policy says, under `side`, with the probe script: the suite's own
/// arguments ([`Invocation::args`]) with `--protect` and `--cwd` added before `--`, run as a
/// plain program since [`Invocation`] has neither.
fn agentd_invocation(launcher: &Launcher, policy: &Policy, side: Backend, tag: &str) -> Invocation {
    let mut agentd = Invocation::new(
        policy.mode,
        &policy.workspace,
        script::argv(tag, &policy.probes),
    );
    agentd.writable_roots = policy.writable_roots.clone();
    agentd.deny_read = policy.deny_read.clone();
    agentd.backend = Some(side);
    let mut args = agentd.args();
    let mut extra: Vec<OsString> = Vec::new();
    for subpath in &policy.protect {
        extra.extend(["--protect".into(), OsString::from(subpath)]);
    }
    if let Some(cwd) = &policy.cwd {
        extra.extend(["--cwd".into(), cwd.clone().into_os_string()]);
    }
    let separator = args.iter().position(|a| a == "--").unwrap_or(args.len());
    args.splice(separator..separator, extra);
    let argv = std::iter::once(launcher.binaries.agentd.clone().into_os_string())
        .chain(args)
        .collect();
    Invocation::new(Mode::DangerFullAccess, &policy.workspace, argv)
}

/// The run's command line with the script and its arguments left out: they are the same for
/// every run but the tag, and would bury the difference.
fn shown_command_line(run: &Run, tag: &str, paths: usize) -> String {
    match run.command_line.split_once(" -- /bin/sh -c ") {
        Some((agentd, _)) => format!(
            "{agentd} -- /bin/sh -c \"$SCRIPT\" sh {tag} LABEL PATH HOW... ({paths} paths; \
             SCRIPT: kernel_e2e::differential::script::SCRIPT)"
        ),
        None => run.command_line.clone(),
    }
}

/// Fails unless the run's facts say the command ran, confined by `side`, and exited 0: a
/// backend that is not built yet, or that hands the command to another, fails here. Read from
/// the JSON itself; the rest of the facts are the suite's to check.
fn ran_confined(run: &Run, side: Backend) -> Result<(), E2eError> {
    let facts: serde_json::Value = serde_json::from_str(&run.facts_line).map_err(|e| {
        trouble!(
            "the {side} run printed no facts ({e}): agentd did not run the command\n{}",
            run.describe()
        )
    })?;
    let set = |key: &str| facts.get(key).filter(|v| !v.is_null());
    if let Some(why) = set("runner_failure").or_else(|| set("refused")) {
        return Err(trouble!(
            "the {side} run did not run the command: {why}\n{}",
            run.describe()
        ));
    }
    let backend = facts.get("backend").and_then(|b| b.as_str());
    if backend != Some(side.as_str()) || run.status != Some(0) {
        return Err(trouble!(
            "the {side} run should have run confined by {side} and exited 0; it was confined by \
             {backend:?} and agentd exited {:?}\n{}",
            run.status,
            run.describe()
        ));
    }
    Ok(())
}
