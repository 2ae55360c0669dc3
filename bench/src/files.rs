//! The file tools section: a `write_file` and an `edit_file` as agentd runs them for the model
//! (`agentd::api::tools::run`: the fence, then one confined run of the file program, which
//! keeps what a write replaces, or reads what an edit changes before it writes it), and the
//! helper's writer alone, against a plain write of the same bytes from agentd itself. One
//! long-lived helper connection, a workspace of their own under the run's workspace, a small
//! file.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use agentd::api::cancel::Cancel;
use agentd::api::helper_client::{HelperClient, Outcome, WriteSpec};
use agentd::api::model::ToolCall;
use agentd::api::session::ToolStatus;
use agentd::api::session_temp::SessionTemp;
use agentd::api::tools::{CallContext, NarrowingMark, ToolEnv, ToolResult};
use confine_protocol::{Backend, BackendChoice, ExitStatus, Mode, Network};
use serde_json::json;

use crate::error::BenchError;
use crate::measure::{FILE_BYTES, PATH, Row, Table, interleave};
use crate::setup::Setup;

/// How long the helper's writer may take (agentd's file tools give it as long).
const WRITER_TIMEOUT_MS: u64 = 60_000;
/// The largest report the helper's writer sends.
const REPORT_CAP: u64 = 64 * 1024;
/// The two words an edit swaps, one for the other, round after round.
const EDITED: [&str; 2] = ["alpha", "omega"];

/// One measured way of writing the file.
#[derive(Debug, Clone, Copy)]
enum Op<'a> {
    /// `std::fs::write` from agentd's own process.
    Plain,
    /// The helper's writer through `HelperClient::write_file`, as the file tools ask it.
    Writer(&'a ToolEnv),
    WriteFile(&'a ToolEnv, Mode),
    EditFile(&'a ToolEnv),
    /// The floor of a confined write (`floor/write.rs`), from the floors' server.
    Floor,
}

/// `FILE_BYTES` of text lines, with the first of [`EDITED`] once in it.
fn content() -> String {
    let mut text = format!("{}\n", EDITED[0]);
    let mut line = 0;
    while text.len() < FILE_BYTES {
        line += 1;
        text.push_str(&format!(
            "line {line:04} of the file the benchmark writes\n"
        ));
    }
    text.truncate(FILE_BYTES);
    text
}

/// A session's tool environment as agentd builds one for an editor without file access of
/// its own: commands' `PATH`, no network, its own `/tmp`.
fn tool_env(
    client: &HelperClient,
    dir: &Path,
    backend: BackendChoice,
) -> Result<ToolEnv, BenchError> {
    let temp = SessionTemp::create().map_err(|e| fail!("cannot create a session temp: {e}"))?;
    Ok(ToolEnv::new(
        client.clone(),
        dir.to_owned(),
        vec![("PATH".into(), PATH.into())],
        Network::Deny,
        backend,
        None,
    )
    .with_session_temp(temp))
}

/// Runs one tool call as the agent loop does; `Err` unless it completed.
async fn call(
    env: &ToolEnv,
    mode: Mode,
    name: &str,
    arguments: String,
) -> Result<ToolResult, BenchError> {
    let call = ToolCall {
        id: "call_bench".to_owned(),
        name: name.to_owned(),
        arguments,
    };
    let ctx = CallContext {
        mode,
        cancel: Cancel::never(),
        narrowings: NarrowingMark::default(),
        live: None,
        owner: None,
    };
    let result = agentd::api::tools::run(env, &call, ctx).await;
    match result.status {
        ToolStatus::Completed => Ok(result),
        ToolStatus::Failed => Err(fail!("{name} failed: {}", result.text)),
    }
}

async fn write_file(
    env: &ToolEnv,
    mode: Mode,
    path: &str,
    text: &str,
) -> Result<ToolResult, BenchError> {
    let arguments = json!({"path": path, "content": text}).to_string();
    call(env, mode, "write_file", arguments).await
}

/// The content as an anonymous file the writer reads from its start, as the file tools stage it.
fn staged(content: &[u8]) -> Result<OwnedFd, BenchError> {
    use nix::sys::memfd::{MFdFlags, memfd_create};
    let stage = || -> nix::Result<OwnedFd> {
        let fd = memfd_create(c"agentd-bench-write", MFdFlags::MFD_CLOEXEC)?;
        let mut rest = content;
        while !rest.is_empty() {
            let written = nix::unistd::write(&fd, rest)?;
            rest = rest.get(written..).unwrap_or_default();
        }
        nix::unistd::lseek(&fd, 0, nix::unistd::Whence::SeekSet)?;
        Ok(fd)
    };
    stage().map_err(|e| fail!("cannot stage the content: {e}"))
}

/// The helper's writer replacing `path` with `content` under `env`'s workspace-write policy,
/// asked as agentd's file tools ask it (their policy has no sockets: the writer opens none).
async fn helper_write(env: &ToolEnv, path: PathBuf, content: &[u8]) -> Result<(), BenchError> {
    let mut policy = env
        .policy(Mode::WorkspaceWrite)
        .map_err(|e| fail!("no policy: {e}"))?;
    policy.local_binding = false;
    policy.unix_sockets.clear();
    let (report, report_wr) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| fail!("cannot create the report's pipe: {e}"))?;
    let spec = WriteSpec {
        path,
        make_parents: true,
        policy,
        backend: env.backend(),
        timeout_ms: Some(WRITER_TIMEOUT_MS),
        content: staged(content)?,
        report: report_wr,
        previous: None,
    };
    let handle = env
        .helper()
        .write_file(spec)
        .await
        .map_err(|e| fail!("the helper's writer: {e}"))?;
    let report = tokio::task::spawn_blocking(move || {
        let mut bytes = Vec::new();
        std::fs::File::from(report)
            .take(REPORT_CAP)
            .read_to_end(&mut bytes)
            .map(|_| bytes)
    });
    let outcome = handle.wait().await;
    let report = report
        .await
        .map_err(|e| fail!("the report's reader stopped: {e}"))?
        .map_err(|e| fail!("reading the writer's report: {e}"))?;
    match outcome {
        Outcome::Exited(e)
            if e.status == ExitStatus::Code(0) && report.starts_with(b"written\0") =>
        {
            Ok(())
        }
        other => Err(fail!(
            "the helper's writer did not write: {other:?}, report {:?}",
            String::from_utf8_lossy(&report)
        )),
    }
}

/// A variant of the section: its row's name, how it writes, its row's note.
type Variant<'a> = (String, Op<'a>, String);

pub async fn files(setup: &Setup, client: &HelperClient) -> Result<Table, BenchError> {
    let mut table = Table::new(&format!(
        "File tools: a {} KiB file written by agentd",
        FILE_BYTES / 1024
    ));
    let dir = setup.workspace.join("files");
    std::fs::create_dir_all(&dir).map_err(|e| fail!("cannot create {}: {e}", dir.display()))?;
    let text = content();
    let auto = tool_env(client, &dir, BackendChoice::Auto)?;
    let dir = auto.workspace().to_owned();
    // Which backend `auto` picks here names its rows; the call also shows the path works.
    let first = write_file(&auto, Mode::WorkspaceWrite, "edit.txt", &text).await?;
    let backend = first
        .facts
        .get("backend")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("unknown")
        .to_owned();
    let (landlock_usable, landlock) = landlock_env(client, &dir, &backend).await?;
    if landlock.is_none() && !landlock_usable {
        table
            .skipped
            .push("`write_file` under landlock: not usable here".into());
    }
    let mut floors = crate::floor::Server::start(&setup.scratch.join("floors-files"))?;
    let variants = variants(&backend, &auto, landlock.as_ref());
    let ops: Vec<Op<'_>> = variants.iter().map(|(_, op, _)| *op).collect();
    let mut edits = 0usize;
    let samples = interleave(setup.rounds, &ops, async |op: &Op<'_>| match *op {
        Op::Plain => std::fs::write(dir.join("plain.txt"), &text)
            .map_err(|e| fail!("cannot write {}: {e}", dir.join("plain.txt").display())),
        Op::Writer(env) => helper_write(env, dir.join("writer.txt"), text.as_bytes()).await,
        Op::WriteFile(env, mode) => {
            let path = format!("write-{}-{}.txt", env.backend().as_str(), mode.as_str());
            write_file(env, mode, &path, &text).await.map(drop)
        }
        Op::Floor => floors.run(crate::floor::WRITE).await,
        Op::EditFile(env) => {
            let (old, new) = edit(edits);
            edits += 1;
            let arguments =
                json!({"path": "edit.txt", "old_string": old, "new_string": new}).to_string();
            call(env, Mode::WorkspaceWrite, "edit_file", arguments)
                .await
                .map(drop)
        }
    })
    .await?;
    auto.end_session_temp();
    if let Some(env) = &landlock {
        env.end_session_temp();
    }
    table.rows = variants
        .into_iter()
        .zip(samples)
        .enumerate()
        .map(|(i, ((variant, _, note), samples))| Row {
            variant,
            samples,
            baseline: i == 0,
            note,
        })
        .collect();
    Ok(table)
}

/// Whether Landlock is usable here, and a tool environment that asks for it when it is and
/// `auto` picked another `backend` (when `auto` picked Landlock, its rows are the Landlock ones).
async fn landlock_env(
    client: &HelperClient,
    dir: &Path,
    backend: &str,
) -> Result<(bool, Option<ToolEnv>), BenchError> {
    let info = client
        .info()
        .await
        .map_err(|e| fail!("cannot ask confine-helper what it can do: {e}"))?;
    let landlock_usable = info
        .backends
        .iter()
        .any(|b| b.backend == Backend::Landlock && b.usable);
    let landlock = match (landlock_usable, backend) {
        (true, "landlock") | (false, _) => None,
        (true, _) => Some(tool_env(client, dir, BackendChoice::Landlock)?),
    };
    Ok((landlock_usable, landlock))
}

/// The section's variants in the order of its rows: the plain write first (the baseline), the
/// writer alone, the tools under `auto` (which picked `backend`), `write_file` under `landlock`
/// when there is that environment, without confinement, and the floor where Landlock is.
fn variants<'a>(
    backend: &str,
    auto: &'a ToolEnv,
    landlock: Option<&'a ToolEnv>,
) -> Vec<Variant<'a>> {
    let mut variants = vec![
        (
            "plain `std::fs::write` from agentd".to_owned(),
            Op::Plain,
            "baseline".to_owned(),
        ),
        (
            format!("the helper's writer alone, workspace-write ({backend})"),
            Op::Writer(auto),
            "`HelperClient::write_file`: the confined write itself".to_owned(),
        ),
        (
            format!("`write_file`, workspace-write ({backend})"),
            Op::WriteFile(auto, Mode::WorkspaceWrite),
            "the tool: the fence, the writer, which keeps the old file for the editor's diff"
                .to_owned(),
        ),
        (
            format!("`edit_file`, workspace-write ({backend})"),
            Op::EditFile(auto),
            "the tool: one confined run that reads the file, takes the replacement and writes it"
                .to_owned(),
        ),
    ];
    if let Some(env) = landlock {
        variants.push((
            "`write_file`, workspace-write (landlock)".to_owned(),
            Op::WriteFile(env, Mode::WorkspaceWrite),
            String::new(),
        ));
    }
    variants.push((
        "`write_file`, danger-full-access".to_owned(),
        Op::WriteFile(auto, Mode::DangerFullAccess),
        "the helper's writer, nothing confined".to_owned(),
    ));
    if crate::floor::landlock_abi().is_some() {
        variants.push((
            "floor: a write under Landlock".to_owned(),
            Op::Floor,
            "the least a confined write needs: a process under a ruleset that writes only \
             beneath its directory creates the file and writes it"
                .to_owned(),
        ));
    }
    variants
}

/// The words edit number `edits` swaps: the first of [`EDITED`] for the second, then back.
fn edit(edits: usize) -> (&'static str, &'static str) {
    let [first, second] = EDITED;
    if edits.is_multiple_of(2) {
        (first, second)
    } else {
        (second, first)
    }
}
