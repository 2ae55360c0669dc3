//! The benchmark's sections: which run, in what order, and what the command-start sections
//! (per command, whole process, concurrent) run in each variant.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use agentd::api::helper_client::{HelperClient, HelperEndpoint, SpawnSpec};
use confine_protocol::{Backend, BackendChoice, Mode};

use crate::error::BenchError;
use crate::measure::{CONCURRENT, PATH, Table, interleave, rows, run_spec};
use crate::setup::Setup;

/// The sections' names, in the order they run (`--only` picks among them).
pub const SECTIONS: &[&str] = &[
    "per-command",
    "whole-process",
    "concurrent",
    "output",
    "files",
    "memory",
    "session",
    "checkpoints",
];

/// Every section `setup` runs, in order.
pub async fn all(setup: &Setup) -> Result<Vec<Table>, BenchError> {
    let client = HelperClient::new(HelperEndpoint::Embedded(setup.helper.clone()));
    client
        .connect()
        .await
        .map_err(|e| fail!("cannot start confine-helper: {e}"))?;
    let backends = usable_backends(&client).await?;
    let mut tables = Vec::new();
    for name in SECTIONS.iter().filter(|name| setup.runs(name)) {
        eprintln!("agentd-bench: {name}…");
        tables.push(match *name {
            "per-command" => per_command(setup, &client, &backends).await?,
            "whole-process" => whole_process(setup, &backends).await?,
            "concurrent" => concurrent(setup, &client, &backends).await?,
            "output" => crate::output::throughput(setup, &client, &backends).await?,
            "files" => crate::files::files(setup, &client).await?,
            "memory" => crate::memory::memory(setup, &client).await?,
            "session" => crate::session::session(setup).await?,
            "checkpoints" => crate::checkpoints::checkpoints(setup, &client).await?,
            _ => continue,
        });
    }
    Ok(tables)
}

async fn usable_backends(client: &HelperClient) -> Result<Vec<Backend>, BenchError> {
    let info = client
        .info()
        .await
        .map_err(|e| fail!("cannot ask confine-helper what it can do: {e}"))?;
    Ok(info
        .backends
        .iter()
        .filter(|b| b.usable)
        .map(|b| b.backend)
        .collect())
}

fn choice(backend: Backend) -> BackendChoice {
    match backend {
        Backend::Bwrap => BackendChoice::Bwrap,
        Backend::Landlock => BackendChoice::Landlock,
        Backend::Seatbelt => BackendChoice::Seatbelt,
        Backend::Namespaces => BackendChoice::Namespaces,
        Backend::None => BackendChoice::Auto,
    }
}

/// `/bin/true` through the helper under `mode` on `backend`, in the workspace.
fn true_spec(setup: &Setup, mode: Mode, backend: BackendChoice) -> SpawnSpec {
    let mut spec = SpawnSpec::new(["/bin/true"]);
    spec.policy.mode = mode;
    spec.policy.workspace_root = Some(setup.workspace.as_os_str().as_encoded_bytes().to_vec());
    spec.cwd = setup.workspace.clone();
    spec.env = vec![("PATH".into(), PATH.into())];
    spec.backend = backend;
    spec
}

async fn run_process(
    program: &Path,
    args: &[&str],
    env: &[(&str, &Path)],
) -> Result<(), BenchError> {
    let status = command(program, args, env)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .map_err(|e| fail!("cannot run {}: {e}", program.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(fail!(
            "{} {} failed: {status}",
            program.display(),
            args.join(" ")
        ))
    }
}

/// `program` with `args` and `env` added to the benchmark's own environment, no stdin.
fn command(
    program: &Path,
    args: &[impl AsRef<std::ffi::OsStr>],
    env: &[(&str, &Path)],
) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(program);
    command.args(args).stdin(Stdio::null());
    for (name, value) in env {
        command.env(name, value);
    }
    command
}

/// Why `process` does not run here, if it does not: one run, its status and the last line it
/// wrote to stderr.
async fn trial(process: &Process, env: &[(&str, &Path)]) -> Option<String> {
    match command(&process.program, &process.args, env).output().await {
        Ok(out) if out.status.success() => None,
        Ok(out) => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let said = stderr.lines().rev().find(|l| !l.trim().is_empty());
            Some(format!(
                "`{}` does not run here ({}){}",
                std::iter::once(process.program.display().to_string())
                    .chain(process.args.iter().cloned())
                    .collect::<Vec<_>>()
                    .join(" "),
                out.status,
                said.map(|l| format!(": {}", l.trim())).unwrap_or_default()
            ))
        }
        Err(e) => Some(format!("cannot run {}: {e}", process.program.display())),
    }
}

/// The raw `bwrap` CLI with the profile the helper gives a read-only command: `/` read-only,
/// fresh `/dev`, `/proc` and `/tmp`, every namespace but the mount namespace's parent's.
fn bwrap_args(workspace: &Path) -> Vec<String> {
    let ws = workspace.display().to_string();
    [
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--ro-bind",
        &ws,
        &ws,
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-net",
        "--die-with-parent",
        "--new-session",
        "--chdir",
        &ws,
        "--",
        "/bin/true",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

#[derive(Debug, Clone)]
enum PerCommand {
    Bare,
    /// A floor of `floor/`, by its request byte.
    Floor(u8),
    Helper(Mode, BackendChoice),
    RawBwrap(PathBuf),
}

async fn per_command(
    setup: &Setup,
    client: &HelperClient,
    backends: &[Backend],
) -> Result<Table, BenchError> {
    let mut table = Table::new("Per command, inside one long-lived agentd (`/bin/true`)");
    let mut floors = crate::floor::Server::start(&setup.scratch.join("floors-per-command"))?;
    let mut variants = per_command_variants(setup, backends, &mut floors, &mut table).await;
    // For a profile of one variant (`perf stat`, `perf sched`): only it beside the baseline.
    if let Some(only) = std::env::var_os("AGENTD_BENCH_VARIANT") {
        let only = only.to_string_lossy().into_owned();
        variants.retain(|(name, kind, _)| matches!(kind, PerCommand::Bare) || name.contains(&only));
    }
    let kinds: Vec<PerCommand> = variants.iter().map(|(_, k, _)| k.clone()).collect();
    let args = bwrap_args(&setup.workspace);
    let samples = interleave(setup.rounds, &kinds, async |kind: &PerCommand| match kind {
        PerCommand::Bare => run_process(Path::new("/bin/true"), &[], &[]).await,
        PerCommand::Floor(request) => floors.run(*request).await,
        PerCommand::Helper(mode, backend) => {
            run_spec(client, true_spec(setup, *mode, *backend)).await
        }
        PerCommand::RawBwrap(bwrap) => {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            run_process(bwrap, &args, &[]).await
        }
    })
    .await?;
    let (names, notes) = variants.into_iter().map(|(n, _, note)| (n, note)).unzip();
    table.rows = rows(names, samples, notes);
    Ok(table)
}

/// The per-command section's variants in the order of its rows (the bare spawn first, the
/// baseline), each with its row's name and note; what cannot run here is named in `table`.
async fn per_command_variants(
    setup: &Setup,
    backends: &[Backend],
    floors: &mut crate::floor::Server,
    table: &mut Table,
) -> Vec<(String, PerCommand, String)> {
    let mut variants = vec![
        (
            "bare `tokio::process` spawn".to_owned(),
            PerCommand::Bare,
            "baseline".to_owned(),
        ),
        (
            "floor: a supervised spawn".to_owned(),
            PerCommand::Floor(crate::floor::SPAWN),
            "the least a supervised command needs: a request, a vfork, its wait, the answer"
                .to_owned(),
        ),
    ];
    if crate::floor::landlock_abi().is_some() {
        variants.push((
            "floor: the same under Landlock".to_owned(),
            PerCommand::Floor(crate::floor::LANDLOCK),
            "and a read-only Landlock ruleset built for each; no seccomp filter".to_owned(),
        ));
    }
    variants.push((
        "helper, danger-full-access".to_owned(),
        PerCommand::Helper(Mode::DangerFullAccess, BackendChoice::Auto),
        String::new(),
    ));
    for backend in [Backend::Landlock, Backend::Bwrap, Backend::Namespaces] {
        if !backends.contains(&backend) {
            table
                .skipped
                .push(format!("{}: not usable here", backend.as_str()));
            continue;
        }
        for mode in [Mode::ReadOnly, Mode::WorkspaceWrite] {
            variants.push((
                format!("helper, {}, {}", mode.as_str(), backend.as_str()),
                PerCommand::Helper(mode, choice(backend)),
                String::new(),
            ));
        }
    }
    match &setup.bwrap {
        Some(bwrap) => variants.push((
            "raw `bwrap` CLI, read-only profile".to_owned(),
            PerCommand::RawBwrap(bwrap.clone()),
            "namespaces and mounts only: no seccomp filter, no Landlock layer".to_owned(),
        )),
        None => table
            .skipped
            .push("raw bwrap CLI: bwrap is not installed".into()),
    }
    if floors.run(crate::floor::NAMESPACES).await.is_ok() {
        variants.push((
            "floor: namespaces, read-only".to_owned(),
            PerCommand::Floor(crate::floor::NAMESPACES),
            "the bwrap backend's namespaces and mounts made by the command's own process with \
             the mount API; no seccomp filter, no Landlock layer"
                .to_owned(),
        ));
        variants.push((
            "floor: a warm sandbox, read-only".to_owned(),
            PerCommand::Floor(crate::floor::WARM),
            "the same namespaces and mounts made once; each command a supervised spawn inside"
                .to_owned(),
        ));
    } else {
        table
            .skipped
            .push("floor: namespaces: no user and mount namespaces here".into());
    }
    variants
}

#[derive(Debug, Clone)]
struct Process {
    program: PathBuf,
    args: Vec<String>,
}

async fn whole_process(setup: &Setup, backends: &[Backend]) -> Result<Table, BenchError> {
    let mut table = Table::new("Whole process (`/bin/true`)");
    let mut variants = agentd_processes(setup, backends);
    variants.extend(floor_processes(&mut table).await?);
    // Codex keeps its state in the scratch too, unless AGENTD_BENCH_CODEX_HOME names a
    // directory: Codex will not make its sandbox's helper program under the temporary
    // directory, where the scratch usually is.
    let codex_home = std::env::var_os("AGENTD_BENCH_CODEX_HOME")
        .map_or_else(|| setup.scratch.join("codex-home"), PathBuf::from);
    std::fs::create_dir_all(&codex_home)
        .map_err(|e| fail!("cannot create {}: {e}", codex_home.display()))?;
    // agentd reads no configuration of the person running the benchmark.
    let config = setup.scratch.join("config");
    let env = [
        ("XDG_CONFIG_HOME", config.as_path()),
        ("CODEX_HOME", &codex_home),
    ];
    // Another tool that is installed but does not work here is named, not measured: it says
    // nothing of agentd, and the rest of the run still does.
    for (name, process) in other_tools(setup, &mut table)? {
        match trial(&process, &env).await {
            None => variants.push((name, process)),
            Some(why) if why.contains("codex-linux-sandbox") => table.skipped.push(format!(
                "{name}: {why} (Codex makes that program in CODEX_HOME, never under the \
                 temporary directory: set AGENTD_BENCH_CODEX_HOME to a directory outside it)"
            )),
            Some(why) => table.skipped.push(format!("{name}: {why}")),
        }
    }
    let processes: Vec<Process> = variants.iter().map(|(_, p)| p.clone()).collect();
    let samples = interleave(setup.rounds, &processes, async |p: &Process| {
        let args: Vec<&str> = p.args.iter().map(String::as_str).collect();
        run_process(&p.program, &args, &env).await
    })
    .await?;
    let names = variants.into_iter().map(|(n, _)| n).collect::<Vec<_>>();
    let notes = vec![String::new(); names.len()];
    table.rows = rows(names, samples, notes);
    Ok(table)
}

/// The bare `/bin/true` (the baseline), `agentd run` in each mode and on each usable backend,
/// and the raw `bwrap` CLI when it is installed; each with its row's name.
fn agentd_processes(setup: &Setup, backends: &[Backend]) -> Vec<(String, Process)> {
    let ws = setup.workspace.display().to_string();
    let agentd = |args: &[&str]| Process {
        program: setup.agentd.clone(),
        args: ["run", "--workspace", &ws]
            .iter()
            .chain(args)
            .chain(&["--", "/bin/true"])
            .map(|s| (*s).to_owned())
            .collect(),
    };
    let mut variants: Vec<(String, Process)> = vec![
        (
            "bare `/bin/true`".into(),
            Process {
                program: PathBuf::from("/bin/true"),
                args: Vec::new(),
            },
        ),
        (
            "`agentd run --mode danger-full-access`".into(),
            agentd(&["--mode", "danger-full-access"]),
        ),
        (
            "`agentd run --mode read-only` (auto)".into(),
            agentd(&["--mode", "read-only"]),
        ),
    ];
    for backend in [Backend::Landlock, Backend::Bwrap, Backend::Namespaces] {
        if backends.contains(&backend) {
            variants.push((
                format!(
                    "`agentd run --mode read-only --backend {}`",
                    backend.as_str()
                ),
                agentd(&["--mode", "read-only", "--backend", backend.as_str()]),
            ));
        }
    }
    if let Some(bwrap) = &setup.bwrap {
        variants.push((
            "raw `bwrap` CLI, read-only profile".into(),
            Process {
                program: bwrap.clone(),
                args: bwrap_args(&setup.workspace),
            },
        ));
    }
    variants
}

/// The floors: this benchmark's own program, started, confining `/bin/true` as the per-command
/// floors do, waiting for it and ending; each that runs here with its row's name, the others
/// named in `table`.
async fn floor_processes(table: &mut Table) -> Result<Vec<(String, Process)>, BenchError> {
    let exe = std::env::current_exe().map_err(|e| fail!("the benchmark's own path: {e}"))?;
    let mut floors = Vec::new();
    for (name, request) in [
        (
            "floor: one process, the Landlock floor",
            crate::floor::LANDLOCK,
        ),
        (
            "floor: one process, the namespace floor",
            crate::floor::NAMESPACES,
        ),
    ] {
        let process = Process {
            program: exe.clone(),
            args: vec![
                crate::floor::ONCE_ARG.to_owned(),
                char::from(request).to_string(),
            ],
        };
        match trial(&process, &[]).await {
            None => floors.push((name.to_owned(), process)),
            Some(why) => table.skipped.push(format!("{name}: {why}")),
        }
    }
    Ok(floors)
}

/// Codex's `codex sandbox` and Anthropic's `srt`, each that is installed with its row's name
/// (srt's settings written in the scratch); those that are not named in `table`.
fn other_tools(setup: &Setup, table: &mut Table) -> Result<Vec<(String, Process)>, BenchError> {
    let ws = setup.workspace.display().to_string();
    let mut others: Vec<(String, Process)> = Vec::new();
    match &setup.codex {
        Some(codex) => others.push((
            "`codex sandbox -P :read-only`".into(),
            Process {
                program: codex.clone(),
                args: ["sandbox", "-P", ":read-only", "--", "/bin/true"]
                    .map(str::to_owned)
                    .to_vec(),
            },
        )),
        None => table.skipped.push(
            "Codex: `codex` is not installed (`npm install -g @openai/codex`, or set \
             AGENTD_BENCH_CODEX)"
                .into(),
        ),
    }
    match &setup.srt {
        Some(srt) => {
            let settings = setup.scratch.join("srt-settings.json");
            std::fs::write(
                &settings,
                format!(
                    "{{\"filesystem\":{{\"denyRead\":[],\"allowWrite\":[\"{ws}\"],\"denyWrite\":[]}},\
                     \"network\":{{\"allowedDomains\":[],\"deniedDomains\":[]}}}}"
                ),
            )
            .map_err(|e| fail!("cannot write {}: {e}", settings.display()))?;
            others.push((
                "`srt`".into(),
                Process {
                    program: srt.clone(),
                    args: vec![
                        "--settings".into(),
                        settings.display().to_string(),
                        "--".into(),
                        "/bin/true".into(),
                    ],
                },
            ));
        }
        None => table.skipped.push(
            "srt: `srt` is not installed (`npm install -g @anthropic-ai/sandbox-runtime`, or \
             set AGENTD_BENCH_SRT)"
                .into(),
        ),
    }
    Ok(others)
}

#[derive(Debug, Clone)]
enum Many {
    Bare,
    Confined(BackendChoice),
    RawBwrap(PathBuf),
    /// The floors' server's 64 commands at once (`floor/`), by its request byte.
    Floor(u8),
}

async fn concurrent(
    setup: &Setup,
    client: &HelperClient,
    backends: &[Backend],
) -> Result<Table, BenchError> {
    let mut table = Table::new("64 commands at once (`/bin/true`, wall time of all)");
    let mut floors = crate::floor::Server::start(&setup.scratch.join("floors-concurrent"))?;
    let rounds = (setup.rounds / 5).max(3);
    let mut variants = vec![
        ("64 bare spawns".to_owned(), Many::Bare, String::new()),
        (
            "64 confined, read-only (auto)".to_owned(),
            Many::Confined(BackendChoice::Auto),
            "zero failures".to_owned(),
        ),
    ];
    if crate::floor::landlock_abi().is_some() {
        variants.push((
            "floor: 64 under Landlock at once".to_owned(),
            Many::Floor(crate::floor::MANY_LANDLOCK),
            "the per-command Landlock floor, 64 started before any is waited for".to_owned(),
        ));
    }
    for (backend, name) in [
        (Backend::Landlock, "64 confined, read-only, landlock"),
        (Backend::Namespaces, "64 confined, read-only, namespaces"),
    ] {
        if backends.contains(&backend) {
            variants.push((
                name.to_owned(),
                Many::Confined(choice(backend)),
                "zero failures".to_owned(),
            ));
        }
    }
    match &setup.bwrap {
        Some(bwrap) => variants.push((
            "64 raw `bwrap` CLI, read-only profile".to_owned(),
            Many::RawBwrap(bwrap.clone()),
            "the namespaces alone: what bounds 64 sandboxes at once".to_owned(),
        )),
        None => table
            .skipped
            .push("64 raw bwrap CLI: bwrap is not installed".into()),
    }
    if floors.run(crate::floor::NAMESPACES).await.is_ok() {
        variants.push((
            "floor: 64 in namespaces at once".to_owned(),
            Many::Floor(crate::floor::MANY_NAMESPACES),
            "the per-command namespace floor, 64 started before any is waited for".to_owned(),
        ));
    }
    let kinds: Vec<Many> = variants.iter().map(|(_, k, _)| k.clone()).collect();
    let args = bwrap_args(&setup.workspace);
    let samples = interleave(rounds, &kinds, async |many: &Many| match many {
        Many::Floor(request) => floors.run(*request).await,
        _ => at_once(setup, client, many, &args).await,
    })
    .await?;
    let (names, notes) = variants.into_iter().map(|(n, _, note)| (n, note)).unzip();
    table.rows = rows(names, samples, notes);
    Ok(table)
}

/// [`CONCURRENT`] of `many`'s commands started together (`args` the raw `bwrap` CLI's), all
/// waited for; an error unless every one succeeded.
async fn at_once(
    setup: &Setup,
    client: &HelperClient,
    many: &Many,
    args: &[String],
) -> Result<(), BenchError> {
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..CONCURRENT {
        match many {
            Many::Bare => {
                tasks.spawn(run_process_owned(PathBuf::from("/bin/true"), Vec::new()));
            }
            Many::Confined(backend) => {
                let client = client.clone();
                let spec = true_spec(setup, Mode::ReadOnly, *backend);
                tasks.spawn(async move { run_spec(&client, spec).await });
            }
            Many::RawBwrap(bwrap) => {
                tasks.spawn(run_process_owned(bwrap.clone(), args.to_vec()));
            }
            Many::Floor(_) => {}
        }
    }
    let mut failures = 0usize;
    while let Some(done) = tasks.join_next().await {
        if !matches!(done, Ok(Ok(()))) {
            failures += 1;
        }
    }
    match failures {
        0 => Ok(()),
        n => Err(fail!("{n} of {CONCURRENT} concurrent commands failed")),
    }
}

async fn run_process_owned(program: PathBuf, args: Vec<String>) -> Result<(), BenchError> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_process(&program, &args, &[]).await
}
