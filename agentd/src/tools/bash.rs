//! `bash`: one command line through confine-helper, its output collected for the model.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use confine_protocol::{Mode, Policy, Stage};
use serde_json::{Value, json};
use tokio::net::unix::pipe;
use tokio::sync::oneshot;

use super::args::BashArgs;
use super::call::{CallContext, ToolResult};
use super::env::ToolEnv;
use super::live::Teed;
use super::output::{self, Collector, HeadTail, MODEL_OUTPUT_CAP, OutputSink};
use super::spec::DEFAULT_TIMEOUT_MS;
use crate::cancel::Cancel;
use crate::command::{self, Facts, KILL_GRACE, RunnerFailure, Waiting};
use crate::denial::Scope;
use crate::helper_client::{CommandHandle, FailedAt, SpawnSpec};
use crate::proxy::Gateway;
use crate::session::ToolStatus;

/// How long a cancelled command's end is waited for before giving up on the helper.
pub const ANSWER_WAIT: Duration = Duration::from_secs(5);

/// A command handed to the helper, with the read ends of its stdout and stderr.
#[derive(Debug)]
pub(crate) struct Launched {
    handle: CommandHandle,
    stdout: pipe::Receiver,
    stderr: pipe::Receiver,
    /// What it was allowed, for judging its denials.
    scope: Scope,
    /// The policy it was sent with, which its facts name the extra roots of.
    policy: Policy,
    /// The allow-list proxy it reaches the network through, if any.
    gateway: Option<Gateway>,
}

/// The facts of a command that did not get to the helper.
fn not_run(stage: FailedAt, detail: String) -> Facts {
    Facts {
        runner_failure: Some(RunnerFailure {
            stage,
            errno: 0,
            detail,
        }),
        ..Facts::default()
    }
}

/// The facts of a command cancelled before it was handed to the helper.
pub(crate) fn not_started() -> Facts {
    Facts {
        cancelled: true,
        ..Facts::default()
    }
}

/// Hands `command` to the helper: `<shell> -c command` in the workspace, under `mode`, with the
/// session's environment, sandbox profile ([`ToolEnv::policy`]), network and backend, stdin on
/// `/dev/null`, stdout and stderr on pipes.
pub(crate) async fn launch(
    env: &ToolEnv,
    command: &str,
    mode: Mode,
    timeout_ms: Option<u64>,
) -> Result<Launched, Facts> {
    let pipe_failed = |e: std::io::Error| {
        not_run(
            FailedAt::Step(Stage::Pipe),
            format!("agentd cannot create a pipe for the command's output: {e}"),
        )
    };
    let (stdout, out_write) = command::output_pipe().map_err(pipe_failed)?;
    let (stderr, err_write) = command::output_pipe().map_err(pipe_failed)?;
    let mut spec = SpawnSpec::new([env.shell(), "-c", command]);
    spec.cwd = env.workspace().to_path_buf();
    spec.env = env.env().to_vec();
    spec.policy = env
        .policy(mode)
        .map_err(|e| not_run(FailedAt::Step(Stage::Prepare), e.to_string()))?;
    spec.backend = env.backend();
    spec.limits.timeout_ms = timeout_ms;
    spec.limits.kill_grace_ms = u32::try_from(KILL_GRACE.as_millis()).unwrap_or(u32::MAX);
    env.profile().limits.apply(&mut spec.limits);
    spec.stdout = Some(out_write);
    spec.stderr = Some(err_write);
    let gateway = match env.proxy(mode) {
        Some(policy) => Some(Gateway::attach(&mut spec, policy).map_err(|e| {
            not_run(
                FailedAt::Step(Stage::Pipe),
                format!("agentd cannot open the network proxy's socket: {e}"),
            )
        })?),
        None => None,
    };
    let scope = env.scope(&spec.cwd, &spec.policy);
    let policy = spec.policy.clone();
    let handle = env
        .helper()
        .spawn(spec)
        .await
        .map_err(|e| not_run(FailedAt::HelperExited, e.to_string()))?;
    Ok(Launched {
        handle,
        stdout,
        stderr,
        scope,
        policy,
        gateway,
    })
}

/// Runs a launched command to its end, its stdout and stderr going into `sink` as they arrive.
///
/// When `stop` fires the command is cancelled (SIGTERM, SIGKILL after [`KILL_GRACE`]) and its
/// end is waited for at most `answer_wait` more; a helper that does not answer by then is given
/// up on, as if it had gone away. `on_started` is told once the command started; it is dropped
/// unsent when the command ended without starting.
pub(crate) async fn finish(
    launched: Launched,
    sink: Arc<Mutex<dyn OutputSink>>,
    mut stop: Cancel,
    answer_wait: Duration,
    on_started: Option<oneshot::Sender<()>>,
) -> Facts {
    let Launched {
        handle,
        stdout,
        stderr,
        scope,
        policy,
        gateway,
    } = launched;
    let mut tail = Vec::new();
    let mut out_sink = Collector(sink.clone());
    let mut err_sink = Collector(sink);
    let copies = async {
        tokio::join!(
            command::copy_output(stdout, &mut out_sink, None),
            command::copy_output(stderr, &mut err_sink, Some(&mut tail)),
        );
    };
    let waiting = Waiting {
        answer_wait: Some(answer_wait),
        on_started,
    };
    let waiting = command::wait_for_outcome(handle, &mut stop, waiting);
    // Giving up on the helper also stops reading output it may keep open.
    let ended = command::settle(waiting, copies).await;
    let mut facts = Facts::from_outcome(ended.outcome, ended.started)
        .given(&policy)
        .with_stderr_tail(tail, &scope);
    if ended.given_up {
        facts.cancelled = true;
    }
    facts.proxy = gateway.map(Gateway::finish);
    facts
}

/// The facts as the editor gets them: [`Facts::to_value`] plus the mode and whether the command
/// was cancelled.
pub(crate) fn facts_json(facts: &Facts, mode: Mode) -> Value {
    let mut value = facts.to_value();
    if let Value::Object(map) = &mut value {
        map.insert("mode".to_owned(), json!(mode.as_str()));
        map.insert("cancelled".to_owned(), json!(facts.cancelled));
    }
    value
}

/// How a command's end markers are written: the shell it ran under, and the modes an
/// escalation may name from the mode it ran under (none: no hint).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Markers<'a> {
    pub shell: &'a str,
    pub escalation: &'a [Mode],
}

impl<'a> Markers<'a> {
    /// The markers of a command of `env` run under `mode`, with `escalation` as
    /// [`ToolEnv::options_for`] gives it.
    pub fn of(env: &'a ToolEnv, escalation: &'a [Mode]) -> Markers<'a> {
        Markers {
            shell: env.shell(),
            escalation,
        }
    }
}

/// The result of a command that ended: its output, then the end markers.
pub(crate) fn ended(
    output: &str,
    facts: &Facts,
    mode: Mode,
    timeout_ms: Option<u64>,
    markers: &Markers<'_>,
) -> ToolResult {
    let lines = output::end_markers(facts, mode, timeout_ms, markers.shell, markers.escalation);
    let text = output::join(output, &lines);
    let status = if output::succeeded(facts) {
        ToolStatus::Completed
    } else {
        ToolStatus::Failed
    };
    ToolResult {
        status,
        text,
        facts: facts_json(facts, mode),
        diff: None,
    }
}

/// `bash` in the foreground: runs the command to its end (see [`super::background::start`] for the
/// background), its output copied as it arrives into the call's live view when it has one.
pub(crate) async fn bash(env: &ToolEnv, args: BashArgs, ctx: CallContext) -> ToolResult {
    let mode = ctx.mode;
    let timeout_ms = Some(args.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS));
    let output = Arc::new(Mutex::new(Teed {
        model: HeadTail::new(MODEL_OUTPUT_CAP),
        live: ctx.live.clone(),
    }));
    let facts = if ctx.cancel.is_cancelled() {
        not_started()
    } else {
        tokio::select! {
            biased;
            () = ctx.cancel.cancelled() => not_started(),
            launched = launch(env, &args.command, mode, timeout_ms) => match launched {
                Ok(launched) => {
                    finish(launched, output.clone(), ctx.cancel.clone(), ANSWER_WAIT, None).await
                }
                Err(facts) => facts,
            },
        }
    };
    let output = output
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .model
        .render();
    let escalation = env.options_for(mode).escalation;
    ended(
        &output,
        &facts,
        mode,
        timeout_ms,
        &Markers::of(env, &escalation),
    )
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::unix::ffi::OsStrExt;

    use confine_protocol::{Cancel as CancelRequest, Ending, Reply, Request, Started, StdioSpec};

    use super::*;
    use crate::cancel;
    use crate::test_support::{Peer, Scratch, exited, fake_service, within};

    fn env(client: crate::helper_client::HelperClient, scratch: &Scratch) -> ToolEnv {
        ToolEnv::new(
            client,
            scratch.0.clone(),
            vec![("PATH".into(), "/usr/bin:/bin".into())],
            confine_protocol::Network::Deny,
            confine_protocol::BackendChoice::Auto,
            None,
        )
    }

    #[tokio::test]
    async fn the_request_runs_the_shell_in_the_workspace_with_the_sessions_settings() {
        let scratch = Scratch::new("tools-request");
        let (listener, client) = fake_service(&scratch);
        let workspace = scratch.0.clone();
        let helper = tokio::task::spawn_blocking(move || {
            let mut peer = Peer::accept(&listener);
            let spawn = peer.spawn();
            assert_eq!(spawn.argv[1..], [b"-c".to_vec(), b"echo hi".to_vec()]);
            assert_eq!(spawn.cwd, workspace.as_os_str().as_bytes());
            assert_eq!(
                spawn.policy.workspace_root.as_deref(),
                Some(workspace.as_os_str().as_bytes())
            );
            assert_eq!(spawn.policy.mode, Mode::WorkspaceWrite);
            assert_eq!(spawn.limits.timeout_ms, Some(1234));
            assert_eq!(spawn.limits.kill_grace_ms, 2000);
            assert_eq!(spawn.stdio.stdin, StdioSpec::Null);
            assert_eq!(spawn.env.len(), 1);
            let stderr = peer.fds.pop_back().expect("stderr");
            let stdout = peer.fds.pop_back().expect("stdout");
            peer.send(&Reply::Started(Started {
                id: spawn.id,
                pid: 5,
            }));
            std::fs::File::from(stdout)
                .write_all(b"out\n")
                .expect("write");
            std::fs::File::from(stderr)
                .write_all(b"err\n")
                .expect("write");
            peer.send(&exited(spawn.id, 0, Ending::Exited));
        });
        let env = env(client, &scratch);
        let result = within(bash(
            &env,
            BashArgs {
                command: "echo hi".to_owned(),
                timeout_ms: Some(1234),
                background: false,
                escalation: None,
            },
            CallContext {
                mode: Mode::WorkspaceWrite,
                cancel: Cancel::never(),
                narrowings: Default::default(),
                live: None,
                owner: None,
            },
        ))
        .await;
        within(helper).await.expect("fake helper");
        assert_eq!(result.status, ToolStatus::Completed);
        assert!(result.text.ends_with("[exit code: 0]"), "{}", result.text);
        assert!(result.text.contains("out\n"), "{}", result.text);
        assert!(result.text.contains("err\n"), "{}", result.text);
        assert_eq!(result.facts["mode"], "workspace-write");
        assert_eq!(result.facts["cancelled"], false);
        assert_eq!(result.facts["exit"]["code"], 0);
    }

    #[tokio::test]
    async fn a_helper_that_never_answers_a_cancel_is_given_up_on() {
        let scratch = Scratch::new("tools-no-answer");
        let (listener, client) = fake_service(&scratch);
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let helper = tokio::task::spawn_blocking(move || {
            let mut peer = Peer::accept(&listener);
            let spawn = peer.spawn();
            let outputs: Vec<_> = peer.fds.drain(..).collect();
            peer.send(&Reply::Started(Started {
                id: spawn.id,
                pid: 5,
            }));
            let Some(Request::Cancel(CancelRequest { id, grace_ms })) = peer.request() else {
                panic!("expected a Cancel");
            };
            assert_eq!((id, grace_ms), (spawn.id, 2000));
            // Never answers, and the command's output stays open.
            release_rx.recv().expect("test finished");
            drop(outputs);
        });
        let env = env(client, &scratch);
        let launched = launch(&env, "sleep 100", Mode::ReadOnly, None)
            .await
            .expect("launched");
        let (canceller, stop) = cancel::pair();
        let (started_tx, started_rx) = oneshot::channel();
        let sink: Arc<Mutex<dyn OutputSink>> = Arc::new(Mutex::new(HeadTail::new(100)));
        let finishing = tokio::spawn(finish(
            launched,
            sink,
            stop,
            Duration::from_millis(50),
            Some(started_tx),
        ));
        within(started_rx).await.expect("started");
        canceller.cancel();
        let facts = within(finishing).await.expect("finished");
        release_tx.send(()).expect("helper waits");
        within(helper).await.expect("fake helper");
        assert!(facts.cancelled);
        let failure = facts.runner_failure.as_ref().expect("runner failure");
        assert_eq!(failure.stage, FailedAt::HelperExited);
        assert!(
            failure.detail.contains("did not report the end"),
            "{}",
            failure.detail
        );
        let result = ended("", &facts, Mode::ReadOnly, None, &Markers::of(&env, &[]));
        assert_eq!(result.status, ToolStatus::Failed);
        assert!(
            result
                .text
                .starts_with("[cancelled]\n[sandbox: the sandbox runner itself failed")
        );
        assert!(!result.text.contains("denied"));
    }

    #[tokio::test]
    async fn a_lost_helper_before_the_start_is_a_runner_failure() {
        let scratch = Scratch::new("tools-lost");
        let (listener, client) = fake_service(&scratch);
        let helper = tokio::task::spawn_blocking(move || {
            let mut peer = Peer::accept(&listener);
            let _spawn = peer.spawn();
            drop(peer);
        });
        let env = env(client, &scratch);
        let result = within(bash(
            &env,
            BashArgs {
                command: "true".to_owned(),
                timeout_ms: None,
                background: false,
                escalation: None,
            },
            CallContext {
                mode: Mode::ReadOnly,
                cancel: Cancel::never(),
                narrowings: Default::default(),
                live: None,
                owner: None,
            },
        ))
        .await;
        within(helper).await.expect("fake helper");
        assert_eq!(result.status, ToolStatus::Failed);
        assert!(
            result.text.starts_with(
                "[sandbox: the sandbox runner itself failed under read-only mode — the command \
                 did not run; this is a sandbox problem, not a command failure]\nRunner failure: "
            ),
            "{}",
            result.text
        );
        assert_eq!(result.facts["runner_failure"]["stage"], "helper-exited");
        assert_eq!(result.facts["denied"], false);
    }

    #[tokio::test]
    async fn a_cancel_before_the_start_runs_nothing() {
        let scratch = Scratch::new("tools-cancel-first");
        let (_listener, client) = fake_service(&scratch);
        let env = env(client, &scratch);
        let (canceller, cancel) = cancel::pair();
        canceller.cancel();
        let result = within(bash(
            &env,
            BashArgs {
                command: "true".to_owned(),
                timeout_ms: None,
                background: false,
                escalation: None,
            },
            CallContext {
                mode: Mode::ReadOnly,
                cancel,
                narrowings: Default::default(),
                live: None,
                owner: None,
            },
        ))
        .await;
        assert_eq!(result.status, ToolStatus::Failed);
        assert_eq!(result.text, "[cancelled: the command was not started]");
        assert_eq!(result.facts["cancelled"], true);
    }
}
