//! Setting up, running every case in every cell on a small pool of threads, and reporting.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Instant, SystemTime};

use crate::accounts;
use crate::agentd::Launcher;
use crate::available;
use crate::available::COMMAND_PATH;
use crate::binaries::{BUILD_COMMAND, Binaries};
use crate::case::{Case, Cx, Shared, Stop};
use crate::cases;
use crate::error::E2eError;
use crate::fixtures;
use crate::matrix::{Backend, Cell, Mode};
use crate::probe;
use crate::report::{self, CaseResult, Verdict};
use crate::skip::Need;
use crate::tools::find_tool;
use crate::users::Identity;

/// Cases run in parallel, each in its own directories; more workers than cores is fine since
/// most of a case is waiting for processes.
const DEFAULT_WORKERS: usize = 4;

/// Where Python is looked for first: system interpreters other users can run.
const PYTHONS: [&str; 2] = ["/usr/bin/python3", "/usr/local/bin/python3"];

/// One user's way of running agentd, with the Python it can use.
#[derive(Debug)]
struct Runner {
    launcher: Launcher,
    python: Option<PathBuf>,
}

/// One case to run in one cell.
#[derive(Debug)]
struct Job {
    case: Case,
    case_rank: usize,
    cell: Cell,
    user_rank: usize,
    /// Set when the whole backend cannot run here.
    skip: Option<String>,
}

/// Runs the suite and says how the test binary should exit.
pub fn main() -> ExitCode {
    let started = Instant::now();
    match run(started) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            println!("cannot start the suite: {e}");
            println!("kernel-e2e: 0 passed, 1 failed, 0 skipped");
            ExitCode::FAILURE
        }
    }
}

fn run(started: Instant) -> Result<bool, E2eError> {
    let catalogue = cases::all();
    let only_cases = list_from_env("KERNEL_E2E_CASES")?;
    let only_backends = list_from_env("KERNEL_E2E_BACKENDS")?;
    let workers = workers_from_env();
    let backends = selected_backends(only_backends.as_deref())?;
    check_cases(only_cases.as_deref(), &catalogue)?;

    let binaries = Binaries::locate()?;
    if let Some(note) = staleness(&binaries) {
        println!("note: {note}");
    }
    // The account is held to the end of the run: the user goes with it if the suite made it.
    let (users, _unprivileged) = suite_users()?;

    let shared = prepare_run_root()?;
    let runners = make_runners(&users, &binaries, &shared)?;
    println!(
        "suite: agentd {}, users {}, python {}, {workers} workers",
        binaries.agentd.display(),
        users
            .iter()
            .map(|u| u.name.as_str())
            .collect::<Vec<_>>()
            .join(" and "),
        runners
            .first()
            .and_then(|runner| runner.python.as_ref())
            .map_or_else(|| "none".into(), |p| p.display().to_string()),
    );

    required_tools()?;
    let jobs = plan_jobs(&catalogue, &backends, &users, only_cases.as_deref())?;
    let total_jobs = jobs.len();
    if total_jobs == 0 {
        return Err(trouble!(
            "no case of {} applies to {}: nothing would be checked",
            only_cases.map_or("the catalogue".to_owned(), |c| c.join(",")),
            backends
                .iter()
                .map(|b| b.as_str())
                .collect::<Vec<_>>()
                .join(",")
        ));
    }
    eprintln!("suite: running {total_jobs} cases on {workers} workers");
    let run_root = shared.run_root.clone();
    let (exclusive, parallel): (VecDeque<Job>, VecDeque<Job>) =
        jobs.into_iter().partition(|job| job.case.exclusive);
    let (runners, shared) = (Arc::new(runners), Arc::new(shared));
    let mut results = run_pool(parallel, workers, runners.clone(), shared.clone());
    results.extend(run_pool(exclusive, 1, runners, shared));
    let _ = fixtures::remove(&run_root);
    let (text, ok) = report::render(&mut results, &backends, started.elapsed(), workers);
    print!("{text}");
    Ok(ok)
}

/// How many cases run at once: `KERNEL_E2E_JOBS` when it is a positive number, else
/// [`DEFAULT_WORKERS`].
fn workers_from_env() -> usize {
    std::env::var("KERNEL_E2E_JOBS")
        .ok()
        .and_then(|n| n.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(DEFAULT_WORKERS)
}

/// Who the cases run as: the user running the suite and, when that is root, an unprivileged
/// user, with its account (which goes when dropped, if the suite made it).
fn suite_users() -> Result<(Vec<Identity>, Option<accounts::User>), E2eError> {
    let me = Identity::current()?;
    let mut users = vec![me.clone()];
    let mut unprivileged = None;
    if me.is_root() {
        let (identity, account) = Identity::unprivileged()?;
        users.push(identity);
        unprivileged = Some(account);
    }
    Ok((users, unprivileged))
}

/// One runner per user, in the same order: the binaries that user can run, and its Python. A
/// user with no Python is an error when `Need::Python3` is required.
fn make_runners(
    users: &[Identity],
    binaries: &Binaries,
    shared: &Shared,
) -> Result<Vec<Runner>, E2eError> {
    let mut runners = Vec::new();
    for user in users {
        let binaries = if user.current {
            binaries.clone()
        } else {
            binaries.share(&shared.run_root)?
        };
        let python = find_python(user, &shared.probe_script);
        if python.is_none()
            && let Some(variable) = Need::Python3.required_by()
        {
            return Err(trouble!(
                "no python3 that {} can run, and {variable}=1 requires one: the precise attempts \
                 of most cases would skip (install python3)",
                user.name
            ));
        }
        runners.push(Runner {
            launcher: Launcher {
                binaries,
                user: user.clone(),
                base_env: base_env(user, &shared.run_root),
            },
            python,
        });
    }
    Ok(runners)
}

/// Every selected case in every cell it applies to, backend by backend, then user, then mode;
/// a backend that cannot run for a user skips its jobs, or is an error when it is required.
fn plan_jobs(
    catalogue: &[Case],
    backends: &[Backend],
    users: &[Identity],
    only_cases: Option<&[String]>,
) -> Result<VecDeque<Job>, E2eError> {
    let mut jobs = VecDeque::new();
    for &backend in backends {
        for (user_rank, user) in users.iter().enumerate() {
            let unusable = unavailable(backend, user);
            if let Some((need, why)) = &unusable
                && let Some(variable) = need.required_by()
            {
                return Err(trouble!(
                    "{backend} cannot run here for {}, and {variable}=1 requires it: {why}",
                    user.name
                ));
            }
            for mode in [Mode::ReadOnly, Mode::WorkspaceWrite] {
                for (case_rank, case) in catalogue.iter().enumerate() {
                    let selected = only_cases.is_none_or(|only| only.iter().any(|o| o == case.id));
                    if selected && case.modes.contains(&mode) {
                        jobs.push_back(Job {
                            case: *case,
                            case_rank,
                            cell: Cell {
                                backend,
                                mode,
                                user: user.clone(),
                            },
                            user_rank,
                            skip: unusable
                                .as_ref()
                                .map(|(_, why)| why.clone())
                                .or_else(|| cases::not_for(backend, case.id)),
                        });
                    }
                }
            }
        }
    }
    Ok(jobs)
}

fn run_pool(
    jobs: VecDeque<Job>,
    workers: usize,
    runners: Arc<Vec<Runner>>,
    shared: Arc<Shared>,
) -> Vec<CaseResult> {
    let total = jobs.len();
    let queue = Arc::new(Mutex::new(jobs));
    let (tx, rx) = mpsc::channel();
    let mut handles = Vec::new();
    for _ in 0..workers {
        let (queue, tx, runners, shared) =
            (queue.clone(), tx.clone(), runners.clone(), shared.clone());
        handles.push(thread::spawn(move || {
            loop {
                let job = match queue.lock() {
                    Ok(mut q) => q.pop_front(),
                    Err(_) => None,
                };
                let Some(job) = job else { break };
                let result = run_job(&job, &runners, &shared);
                if tx.send(result).is_err() {
                    break;
                }
            }
        }));
    }
    drop(tx);
    let mut results = Vec::with_capacity(total);
    for result in rx {
        if matches!(result.verdict, Verdict::Fail { .. }) {
            eprintln!(
                "suite: FAIL {} ({}, {}, {}) [{}/{total}]",
                result.id,
                result.backend,
                result.mode,
                result.user,
                results.len() + 1
            );
        }
        results.push(result);
    }
    for handle in handles {
        let _ = handle.join();
    }
    results
}

/// Runs `job` with the runner of its user (skipped when its backend cannot run here).
fn run_job(job: &Job, runners: &[Runner], shared: &Shared) -> CaseResult {
    let started = Instant::now();
    let (verdict, notes) = match (&job.skip, runners.get(job.user_rank)) {
        (Some(reason), _) => (Verdict::Skip(reason.clone()), Vec::new()),
        (None, Some(runner)) => run_case(job, runner, shared),
        (None, None) => {
            let verdict = Verdict::Fail {
                reason: format!("no way to run agentd as {}", job.cell.user.name),
                runs: Vec::new(),
            };
            (verdict, Vec::new())
        }
    };
    CaseResult {
        backend: job.cell.backend,
        mode: job.cell.mode,
        user: job.cell.user.name.clone(),
        user_rank: job.user_rank,
        case_rank: job.case_rank,
        id: job.case.id,
        title: job.case.title,
        verdict,
        notes,
        elapsed: started.elapsed(),
    }
}

fn run_case(job: &Job, runner: &Runner, shared: &Shared) -> (Verdict, Vec<String>) {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let seq = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tag = format!("agentd-e2e-{}-{seq:04}", std::process::id());
    let dir = shared
        .run_root
        .join(format!(
            "{}-{}-{}",
            job.cell.backend, job.cell.mode, job.cell.user.name
        ))
        .join(format!("{}-{seq:04}", job.case.id));
    let mut cx = match Cx::new(
        &job.cell,
        &runner.launcher,
        shared,
        runner.python.as_deref(),
        dir,
        tag,
    ) {
        Ok(cx) => cx,
        Err(Stop::Skip(reason)) => return (Verdict::Skip(reason), Vec::new()),
        Err(Stop::Fail(reason)) => {
            let verdict = Verdict::Fail {
                reason,
                runs: Vec::new(),
            };
            return (verdict, Vec::new());
        }
    };
    let outcome = catch_unwind(AssertUnwindSafe(|| (job.case.body)(&mut cx)));
    let runs = std::mem::take(&mut cx.runs);
    let notes = std::mem::take(&mut cx.notes);
    let verdict = match outcome {
        Ok(Ok(())) => Verdict::Pass,
        Ok(Err(Stop::Skip(reason))) => Verdict::Skip(reason),
        Ok(Err(Stop::Fail(reason))) => Verdict::Fail { reason, runs },
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            Verdict::Fail {
                reason: format!("the case panicked: {what}"),
                runs,
            }
        }
    };
    (verdict, notes)
}

/// `/var/tmp/agentd-e2e-<pid>` (host /tmp is under test, so nothing of ours lives there),
/// with the probe and an empty configuration directory for agentd.
fn prepare_run_root() -> Result<Shared, E2eError> {
    let run_root = PathBuf::from(format!("/var/tmp/agentd-e2e-{}", std::process::id()));
    make_anew(&run_root)?;
    // By its real path: on macOS /var is a link to /private/var, and the helper follows no
    // link to a workspace.
    let run_root = fs::canonicalize(&run_root)
        .map_err(|e| trouble!("cannot resolve {}: {e}", run_root.display()))?;
    make_anew(&run_root.join("config"))?;
    let probe_script = run_root.join("probe.py");
    fs::write(&probe_script, probe::SOURCE)
        .and_then(|()| fs::set_permissions(&probe_script, fs::Permissions::from_mode(0o644)))
        .map_err(|e| trouble!("cannot write {}: {e}", probe_script.display()))?;
    Ok(Shared {
        run_root,
        probe_script,
    })
}

/// Makes `dir` anew, mode 0755: one an earlier run of this user left (interrupted, under the
/// same pid) goes first; anything else at the name, which is predictable (a link, a file,
/// another user's directory), is refused and left as it is.
fn make_anew(dir: &Path) -> Result<(), E2eError> {
    use std::os::unix::fs::MetadataExt;
    if let Ok(found) = fs::symlink_metadata(dir) {
        if !found.is_dir() || found.uid() != nix::unistd::geteuid().as_raw() {
            return Err(trouble!(
                "{} exists and is not a directory of this user's: remove it, or run the suite again",
                dir.display()
            ));
        }
        fixtures::remove(dir).map_err(|e| {
            trouble!(
                "cannot remove {} left by an earlier run: {e}",
                dir.display()
            )
        })?;
    }
    fs::create_dir(dir)
        .and_then(|()| fs::set_permissions(dir, fs::Permissions::from_mode(0o755)))
        .map_err(|e| trouble!("cannot create {}: {e}", dir.display()))
}

/// agentd's environment: what a login would give, and a configuration directory of our own so
/// no configuration file of the user running the suite changes what is tested (`run_root`'s
/// `config`). The differential test gives its runs the same.
pub(crate) fn base_env(user: &Identity, run_root: &Path) -> Vec<(OsString, OsString)> {
    [
        ("PATH", OsString::from(COMMAND_PATH)),
        ("HOME", user.home.clone().into_os_string()),
        ("USER", user.name.clone().into()),
        ("LOGNAME", user.name.clone().into()),
        ("SHELL", "/bin/sh".into()),
        ("LANG", "C.UTF-8".into()),
        ("XDG_CONFIG_HOME", run_root.join("config").into_os_string()),
    ]
    .into_iter()
    .map(|(k, v)| (OsString::from(k), v))
    .collect()
}

/// A Python `user` can run, with the modules the probe needs.
fn find_python(user: &Identity, probe_script: &Path) -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("python3"))
            .find(|p| p.is_file())
    });
    PYTHONS
        .iter()
        .map(PathBuf::from)
        .chain(on_path)
        .filter(|p| p.is_file())
        .find(|python| {
            let mut command = Command::new(python);
            command
                .args(["-I", "-B"])
                .arg(probe_script)
                .arg("socketpair")
                .env_clear()
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            user.apply(&mut command);
            command.status().is_ok_and(|s| s.success())
        })
}

/// The backends `only` names (all of this platform's when it is unset); an error for a name
/// that is none of them, or for a filter that names none: a run of no backend checks nothing.
fn selected_backends(only: Option<&[String]>) -> Result<Vec<Backend>, E2eError> {
    let Some(only) = only else {
        return Ok(Backend::ALL.to_vec());
    };
    let known: Vec<&str> = Backend::ALL.iter().map(|b| b.as_str()).collect();
    if let Some(unknown) = only.iter().find(|o| !known.contains(&o.as_str())) {
        return Err(trouble!(
            "KERNEL_E2E_BACKENDS names {unknown:?}, which is not a backend of this platform ({})",
            known.join(", ")
        ));
    }
    Ok(Backend::ALL
        .into_iter()
        .filter(|b| only.iter().any(|o| o == b.as_str()))
        .collect())
}

/// An error for a case id `only` names that is not in the catalogue.
fn check_cases(only: Option<&[String]>, catalogue: &[Case]) -> Result<(), E2eError> {
    let unknown: Vec<&str> = only
        .unwrap_or_default()
        .iter()
        .filter(|id| !catalogue.iter().any(|c| c.id == id.as_str()))
        .map(String::as_str)
        .collect();
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(trouble!(
            "KERNEL_E2E_CASES names {}, which the catalogue does not have",
            unknown.join(", ")
        ))
    }
}

/// An error when a tool some cases skip without is missing though the run requires it:
/// `ip` (P08's network), git (the repository cases).
fn required_tools() -> Result<(), E2eError> {
    for (need, tool) in [(Need::Ip, "ip"), (Need::Git, "git")] {
        if find_tool(tool).is_none()
            && let Some(variable) = need.required_by()
        {
            return Err(trouble!(
                "{tool} is not installed, and {variable}=1 requires it: the cases that need it \
                 would skip"
            ));
        }
    }
    Ok(())
}

/// Why `backend` cannot run on this machine for `user`, if it cannot, with what a run that
/// requires it names (`AGENTD_REQUIRE_<NEED>`, `tests/shared/skip.rs`): judged without the
/// helper (`tests/shared/available.rs`), so that a helper which wrongly calls a backend
/// unusable fails every case of it instead of skipping them, and T00 says why. The helper's own
/// namespaces need Landlock (the layer inside) and an unprivileged user namespace `user` may
/// make (`available::user_namespaces_run`, run as `user` as bwrap is for the bwrap backend).
fn unavailable(backend: Backend, user: &Identity) -> Option<(Need, String)> {
    let landlock = || {
        available::landlock_abi()
            .err()
            .map(|why| (Need::Landlock, why.to_string()))
    };
    match backend {
        Backend::Seatbelt => (!Path::new(cases::SANDBOX_EXEC).exists())
            .then(|| (Need::Backend, format!("{} is missing", cases::SANDBOX_EXEC))),
        Backend::Bwrap => available::bwrap_runs(|command| user.apply(command))
            .err()
            .map(|why| (Need::Bwrap, why.to_string())),
        Backend::Landlock => landlock(),
        Backend::Namespaces => landlock().or_else(|| {
            available::user_namespaces_run(|command| user.apply(command))
                .err()
                .map(|why| (Need::UserNamespace, why.to_string()))
        }),
    }
}

/// A note when a binary is older than the sources it is built from: the suite would test
/// yesterday's code.
fn staleness(binaries: &Binaries) -> Option<String> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent()?;
    let stale: Vec<String> = [
        (&binaries.agentd, "agentd/src"),
        (&binaries.helper, "confine-helper/src"),
    ]
    .into_iter()
    .filter(|(binary, sources)| {
        let built = fs::metadata(binary).and_then(|m| m.modified()).ok();
        let newest = [*sources, "protocol/src"]
            .iter()
            .filter_map(|dir| newest_mtime(&workspace.join(dir)))
            .max();
        matches!((built, newest), (Some(built), Some(newest)) if newest > built)
    })
    .map(|(binary, _)| binary.display().to_string())
    .collect();
    (!stale.is_empty()).then(|| {
        let verb = if stale.len() == 1 {
            "is older than its"
        } else {
            "are older than their"
        };
        format!(
            "{} {verb} sources; rebuild with `{BUILD_COMMAND}`",
            stale.join(" and ")
        )
    })
}

fn newest_mtime(dir: &Path) -> Option<SystemTime> {
    let mut newest = None;
    let mut pending = vec![dir.to_owned()];
    while let Some(next) = pending.pop() {
        for entry in fs::read_dir(&next).ok()?.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                pending.push(entry.path());
            } else if let Ok(modified) = meta.modified() {
                newest = newest.max(Some(modified));
            }
        }
    }
    newest
}

/// The comma-separated list in variable `name`: `None` when it is unset, an error when it is
/// set but names nothing (an empty filter would select nothing and check nothing).
fn list_from_env(name: &str) -> Result<Option<Vec<String>>, E2eError> {
    list_of(name, std::env::var_os(name))
}

/// [`list_from_env`] of the variable's value.
fn list_of(name: &str, value: Option<OsString>) -> Result<Option<Vec<String>>, E2eError> {
    let Some(value) = value else {
        return Ok(None);
    };
    let value = value
        .into_string()
        .map_err(|v| trouble!("{name} is not UTF-8: {v:?}"))?;
    let list: Vec<String> = value
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect();
    if list.is_empty() {
        return Err(trouble!(
            "{name} is set but names nothing ({value:?}): unset it to run everything"
        ));
    }
    Ok(Some(list))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The run directory's name is predictable, so what stands there is refused unless an
    /// earlier run of this user left it: a link (whatever it names keeps its file), a file, and
    /// as root another user's directory. The control: a directory of this user's with a file in
    /// it is made anew, empty, mode 0755.
    #[test]
    fn a_run_directory_is_made_anew_and_never_over_what_another_placed() {
        use std::os::unix::fs::{PermissionsExt, symlink};
        let scratch = std::env::temp_dir().join(format!("kernel-e2e-anew-{}", std::process::id()));
        let _ = fixtures::remove(&scratch);
        fs::create_dir(&scratch).expect("scratch");
        let named = scratch.join("named");
        fs::create_dir(&named).expect("a directory");
        fs::write(named.join("kept"), "x").expect("a file");
        let at = scratch.join("run");

        symlink(&named, &at).expect("a link");
        assert!(make_anew(&at).is_err(), "a link is refused");
        assert!(
            named.join("kept").exists(),
            "what the link names is untouched"
        );
        fs::remove_file(&at).expect("the link goes");

        fs::write(&at, "x").expect("a file");
        assert!(make_anew(&at).is_err(), "a file is refused");
        assert!(at.is_file());
        fs::remove_file(&at).expect("the file goes");

        if nix::unistd::geteuid().is_root() {
            let nobody = Some(nix::unistd::Uid::from_raw(65534));
            nix::unistd::chown(&named, nobody, None).expect("chown");
            assert!(
                make_anew(&named).is_err(),
                "another user's directory is refused"
            );
            assert!(named.join("kept").exists());
            nix::unistd::chown(&named, Some(nix::unistd::geteuid()), None).expect("chown");
        }

        // The control: this user's own directory, left by an earlier run.
        assert!(make_anew(&named).is_ok());
        assert_eq!(fixtures::listing(&named), Vec::<String>::new(), "made anew");
        let mode = fs::metadata(&named).expect("made").permissions().mode();
        assert_eq!(mode & 0o7777, 0o755);
        fixtures::remove(&scratch).expect("scratch removed");
    }

    #[test]
    fn a_filter_that_names_nothing_or_what_is_not_there_is_an_error() {
        let set = |v: &str| Some(OsString::from(v));
        for empty in ["", " ", ",", " , ,"] {
            let err = list_of("KERNEL_E2E_BACKENDS", set(empty)).expect_err(empty);
            assert!(err.to_string().contains("names nothing"), "{err}");
        }
        // The control: unset runs everything, a list is read as it is written.
        let text = |e: E2eError| e.to_string();
        assert_eq!(list_of("KERNEL_E2E_BACKENDS", None).map_err(text), Ok(None));
        assert_eq!(
            list_of("KERNEL_E2E_CASES", set(" T01, T28 ,")).map_err(text),
            Ok(Some(vec!["T01".to_owned(), "T28".to_owned()]))
        );

        let unknown = selected_backends(Some(&["bwrap".to_owned(), "nosuch".to_owned()]));
        assert!(
            unknown
                .expect_err("nosuch")
                .to_string()
                .contains("\"nosuch\"")
        );
        assert_eq!(
            selected_backends(None).map_err(text),
            Ok(Backend::ALL.to_vec())
        );
        let first = Backend::ALL[0];
        assert_eq!(
            selected_backends(Some(&[first.as_str().to_owned()])).map_err(text),
            Ok(vec![first])
        );

        let catalogue = cases::all();
        let err = check_cases(Some(&["T01".to_owned(), "T999".to_owned()]), &catalogue);
        assert!(err.expect_err("T999").to_string().contains("T999"));
        assert_eq!(
            check_cases(Some(&["T01".to_owned()]), &catalogue).map_err(text),
            Ok(())
        );
    }
}
