//! What is known about one finished command, and the JSON object that says it: the same facts
//! whether a tool ran the command for a model or `agentd run` ran it for a person.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use confine_protocol::{
    Backend, Caps, Ending, Enforcement, ExitStatus, Layer, Mode, Network, Policy,
};
use serde::Serialize;

use crate::credentials;
use crate::denial::{self, Denial, Scope};
use crate::helper_client::{FailedAt, Outcome};
use crate::proxy::Decisions;
use crate::proxy::gateway::Shown;
use crate::terminal;

/// Which cap on a command's tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapKind {
    /// Tasks (processes and threads) at once.
    Processes,
    /// Memory, in bytes.
    Memory,
}

/// A runner step that failed, as reported by the helper (or by agentd for a lost helper).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerFailure {
    pub stage: FailedAt,
    pub errno: i32,
    pub detail: String,
}

/// What is known about one finished command. Serialized by [`Facts::to_json`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts {
    /// The command's exit status; `None` when it did not run.
    pub exit: Option<ExitStatus>,
    /// Which backend confined it; `None` when it did not run.
    pub backend: Option<Backend>,
    /// What the confinement enforced; `None` when nothing was confined or it did not run.
    pub enforcement: Option<Enforcement>,
    /// The layers that confined it, in the order the helper applied them.
    pub layers: Vec<Layer>,
    /// The caps on its whole tree, and whether it ran into them; `None` when it did not run.
    pub caps: Option<Caps>,
    /// The directories it was given to write besides the workspace (workspace-write with a
    /// sandbox profile's extra roots); empty when none.
    pub writable_roots: Vec<PathBuf>,
    /// The paths it was denied reading (a sandbox profile's `deny_read`, as found when it
    /// started); empty when none.
    pub deny_read: Vec<PathBuf>,
    /// Whether it was given loopback sockets inside its own network namespace.
    pub local_binding: bool,
    /// The named Unix sockets it was let connect to (a sandbox profile's `unix_sockets`, as
    /// configured); empty when none.
    pub unix_sockets: Vec<PathBuf>,
    /// What the allow-list proxy decided for it; `None` when it had none.
    pub proxy: Option<Decisions>,
    /// What the confinement denied the command, as [`denial::classify`] judges it from the
    /// stderr tail; `None` when nothing was.
    pub denial: Option<Denial>,
    pub runner_failure: Option<RunnerFailure>,
    /// The helper's reason for refusing the request.
    pub refused: Option<String>,
    pub timed_out: bool,
    pub cancelled: bool,
    /// `execve` of the command failed with this errno.
    pub exec_errno: Option<i32>,
    /// Whether the helper reported the command started.
    pub started: bool,
    /// The last [`STDERR_TAIL`](super::STDERR_TAIL) bytes of the command's stderr.
    pub stderr_tail: Vec<u8>,
    /// For each denied read of a built-in credential store, the sentence saying so and how to
    /// lift it ([`credentials::lift_note`]).
    pub credential_notes: Vec<String>,
}

impl Facts {
    /// The facts of one outcome.
    pub fn from_outcome(outcome: Outcome, started: bool) -> Facts {
        let mut facts = Facts {
            started,
            ..Facts::default()
        };
        match outcome {
            Outcome::Exited(exited) => {
                facts.exit = Some(exited.status);
                facts.backend = Some(exited.backend);
                facts.enforcement = exited.enforcement;
                facts.layers = exited.layers;
                facts.caps = Some(exited.caps);
                facts.timed_out = exited.ending == Ending::TimedOut;
                facts.cancelled = exited.ending == Ending::Cancelled;
                facts.exec_errno = exited.exec_errno;
            }
            Outcome::RunnerFailed(failed) => {
                facts.runner_failure = Some(RunnerFailure {
                    stage: failed.stage,
                    errno: failed.errno,
                    detail: failed.detail,
                });
            }
            Outcome::Refused(refused) => facts.refused = Some(refused.reason.to_string()),
        }
        facts
    }

    /// These facts naming what `policy`, the command's, gave it besides the workspace: the
    /// writable roots, the denied reads, loopback sockets and Unix sockets.
    pub fn given(mut self, policy: &Policy) -> Facts {
        let paths = |list: &[Vec<u8>]| {
            list.iter()
                .map(|p| PathBuf::from(OsStr::from_bytes(p)))
                .collect()
        };
        self.writable_roots = paths(&policy.writable_roots);
        self.deny_read = paths(&policy.deny_read);
        self.local_binding = policy.local_binding
            && policy.network == Network::Deny
            && policy.mode != Mode::DangerFullAccess;
        if policy.mode != Mode::DangerFullAccess {
            self.unix_sockets = paths(&policy.unix_sockets);
        }
        self
    }

    /// These facts with the command's stderr tail (the last [`STDERR_TAIL`](super::STDERR_TAIL) bytes) and the
    /// denial classification made from it, for a command that ran within `scope`.
    pub fn with_stderr_tail(mut self, stderr_tail: Vec<u8>, scope: &Scope) -> Facts {
        self.stderr_tail = stderr_tail;
        self.denial = denial::classify(&self.denial_evidence(scope));
        self.credential_notes = self
            .denial
            .as_ref()
            .map(|denial| credentials::lift_notes(&denial.paths, &scope.credentials))
            .unwrap_or_default();
        self
    }

    /// What denial classification looks at ([`denial::classify`]) for a command that ran
    /// within `scope`.
    pub fn denial_evidence<'a>(&'a self, scope: &'a Scope) -> denial::Evidence<'a> {
        denial::Evidence {
            exit: self.exit,
            backend: self.backend,
            runner_failed: self.runner_failure.is_some(),
            refused: self.refused.is_some(),
            stderr_tail: &self.stderr_tail,
            scope,
        }
    }

    /// Whether the confinement denied the command something.
    pub fn denied(&self) -> bool {
        self.denial.is_some()
    }

    /// The caps its tree ran into, as the kernel counted: `(what, cap)` for the process cap
    /// (tasks at once) and the memory cap (bytes).
    pub fn caps_reached(&self) -> Vec<(CapKind, u64)> {
        let Some(caps) = &self.caps else {
            return Vec::new();
        };
        [
            (CapKind::Processes, caps.processes),
            (CapKind::Memory, caps.memory),
        ]
        .into_iter()
        .filter_map(|(kind, cap)| {
            cap.filter(|c| c.reached == Some(true))
                .map(|c| (kind, c.max))
        })
        .collect()
    }

    /// A sentence for each cap the tree ran into, saying what to do.
    pub fn caps_reached_notes(&self) -> Vec<String> {
        self.caps_reached()
            .into_iter()
            .map(|(kind, max)| match kind {
                CapKind::Processes => format!(
                    "the command reached its process cap of {max} tasks at once: forks past it \
                     failed; raise limits.max_processes (agentd run --max-processes) if it needs \
                     more"
                ),
                CapKind::Memory => format!(
                    "the command reached its memory cap of {} MiB: the kernel reclaimed or killed \
                     within it; raise limits.max_memory (agentd run --max-memory) if it needs more",
                    max / (1024 * 1024)
                ),
            })
            .collect()
    }

    /// `exit`, `backend`, `writable_roots`, `deny_read` (each only when there are any),
    /// `local_binding` (only when true), `unix_sockets` (only when there are any), `proxy` (the
    /// allow-list's decisions, only with one),
    /// `enforcement`, `denied`,
    /// `denials`, `denied_paths` (only when a denial named a file), `runner_failure`,
    /// `refused`, `timed_out`, `caps_reached` (`processes`, `memory_bytes`: the caps the tree
    /// ran into, only when it did). Terminal-safe ([`terminal::json_line`]): it ends agentd's stderr.
    pub fn to_json(&self) -> String {
        match terminal::json_line(&self.json_form()) {
            Ok(line) => line,
            // Only maps with non-string keys can fail to serialize, and there are none here.
            Err(e) => format!("{{\"error\":\"{e}\"}}"),
        }
    }

    /// The same object as [`Facts::to_json`], as a JSON value to embed in other output.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self.json_form())
            // As for `to_json`: nothing here can fail to serialize.
            .unwrap_or_else(|e| serde_json::json!({ "error": e.to_string() }))
    }

    fn json_form(&self) -> FactsJson<'_> {
        FactsJson {
            exit: self.exit.map(|status| match status {
                ExitStatus::Code(code) => ExitJson::Code(code),
                ExitStatus::Signal(signal) => ExitJson::Signal(signal),
            }),
            backend: self.backend.map(Backend::as_str),
            writable_roots: self
                .writable_roots
                .iter()
                .map(|r| r.to_string_lossy().into_owned())
                .collect(),
            deny_read: self
                .deny_read
                .iter()
                .map(|r| r.to_string_lossy().into_owned())
                .collect(),
            local_binding: self.local_binding,
            unix_sockets: self
                .unix_sockets
                .iter()
                .map(|s| s.to_string_lossy().into_owned())
                .collect(),
            proxy: self.proxy.as_ref().map(|p| ProxyJson {
                decisions: &p.kept,
                total: p.total,
            }),
            enforcement: self.enforcement.as_ref().map(|e| {
                let (level, missing): (&'static str, Vec<String>) = match e {
                    Enforcement::Full => ("full", Vec::new()),
                    Enforcement::Partial { missing } => {
                        ("partial", missing.iter().map(ToString::to_string).collect())
                    }
                };
                EnforcementJson {
                    level,
                    missing,
                    layers: self.layers.iter().map(|l| l.as_str()).collect(),
                }
            }),
            denied: self.denied(),
            denials: self
                .denial
                .as_ref()
                .map(|d| d.kinds.iter().map(|k| k.as_str()).collect())
                .unwrap_or_default(),
            denied_paths: self
                .denial
                .iter()
                .flat_map(|d| &d.paths)
                .map(|p| p.to_string_lossy().into_owned())
                .collect(),
            runner_failure: self.runner_failure.as_ref().map(|f| FailureJson {
                stage: f.stage.as_str(),
                detail: &f.detail,
            }),
            refused: self.refused.as_deref(),
            timed_out: self.timed_out,
            caps_reached: self
                .caps_reached()
                .into_iter()
                .map(|(kind, max)| match kind {
                    CapKind::Processes => ("processes", max),
                    CapKind::Memory => ("memory_bytes", max),
                })
                .collect(),
        }
    }
}

#[derive(Serialize)]
struct FactsJson<'a> {
    exit: Option<ExitJson>,
    backend: Option<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    writable_roots: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    deny_read: Vec<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    local_binding: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    unix_sockets: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    proxy: Option<ProxyJson<'a>>,
    enforcement: Option<EnforcementJson>,
    denied: bool,
    denials: Vec<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    denied_paths: Vec<String>,
    runner_failure: Option<FailureJson<'a>>,
    refused: Option<&'a str>,
    timed_out: bool,
    /// The caps the tree ran into, by name, each with its value.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    caps_reached: std::collections::BTreeMap<&'static str, u64>,
}

/// The allow-list proxy's decisions: the first ones, and how many there were.
#[derive(Serialize)]
struct ProxyJson<'a> {
    decisions: &'a [Shown],
    total: usize,
}

#[derive(Serialize)]
#[serde(rename_all = "lowercase")]
enum ExitJson {
    Code(i32),
    Signal(i32),
}

#[derive(Serialize)]
struct EnforcementJson {
    level: &'static str,
    missing: Vec<String>,
    layers: Vec<&'static str>,
}

#[derive(Serialize)]
struct FailureJson<'a> {
    stage: &'static str,
    detail: &'a str,
}

#[cfg(test)]
mod tests {
    use confine_protocol::{Backend, Enforcement, Gap, Layer, Stage};

    use super::*;
    use crate::denial::Kind;
    use crate::helper_client::SpawnSpec;
    use crate::test_support::{confined_exit, refused, runner_failed};

    #[test]
    fn the_caps_a_tree_reached_are_named_and_those_it_did_not_or_cannot_tell_are_not() {
        let with_caps = |processes: Option<bool>, memory: Option<bool>| {
            let mut exited = confined_exit(ExitStatus::Code(1), Ending::Exited);
            exited.caps = Caps {
                processes: Some(confine_protocol::Cap {
                    max: 2048,
                    reached: processes,
                }),
                memory: Some(confine_protocol::Cap {
                    max: 64 << 20,
                    reached: memory,
                }),
            };
            Facts::from_outcome(Outcome::Exited(exited), true)
        };
        let reached = with_caps(Some(true), Some(true));
        assert!(
            reached
                .to_json()
                .ends_with(r#""caps_reached":{"memory_bytes":67108864,"processes":2048}}"#),
            "{}",
            reached.to_json()
        );
        let notes = reached.caps_reached_notes();
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(
            notes[0].contains("process cap of 2048 tasks") && notes[0].contains("max_processes")
        );
        assert!(notes[1].contains("memory cap of 64 MiB") && notes[1].contains("max_memory"));
        // The controls: caps not reached, or where the kernel cannot tell, say nothing.
        for quiet in [with_caps(Some(false), Some(false)), with_caps(None, None)] {
            assert!(
                !quiet.to_json().contains("caps_reached"),
                "{}",
                quiet.to_json()
            );
            assert!(quiet.caps_reached_notes().is_empty());
        }
    }

    #[test]
    fn json_of_a_normal_exit() {
        let facts = Facts::from_outcome(
            Outcome::Exited(confined_exit(ExitStatus::Code(3), Ending::Exited)),
            true,
        );
        assert_eq!(
            facts.to_json(),
            r#"{"exit":{"code":3},"backend":"bwrap","enforcement":{"level":"full","missing":[],"layers":["namespaces","landlock","seccomp"]},"denied":false,"denials":[],"runner_failure":null,"refused":null,"timed_out":false}"#
        );
    }

    #[test]
    fn json_of_a_signal_with_partial_enforcement() {
        let mut exited = confined_exit(ExitStatus::Signal(9), Ending::Exited);
        exited.backend = Backend::Landlock;
        exited.layers = vec![Layer::Landlock, Layer::Seccomp];
        exited.enforcement = Some(Enforcement::Partial {
            missing: vec![Gap::Truncate, Gap::DeviceIoctl],
        });
        let facts = Facts::from_outcome(Outcome::Exited(exited), true);
        assert_eq!(
            facts.to_json(),
            r#"{"exit":{"signal":9},"backend":"landlock","enforcement":{"level":"partial","missing":["truncate of files outside writable roots (Landlock ABI < 3)","ioctl on devices (Landlock ABI < 5)"],"layers":["landlock","seccomp"]},"denied":false,"denials":[],"runner_failure":null,"refused":null,"timed_out":false}"#
        );
    }

    #[test]
    fn json_of_an_unconfined_timeout() {
        let mut exited = confined_exit(ExitStatus::Signal(15), Ending::TimedOut);
        exited.backend = Backend::None;
        exited.enforcement = None;
        let facts = Facts::from_outcome(Outcome::Exited(exited), true);
        assert_eq!(
            facts.to_json(),
            r#"{"exit":{"signal":15},"backend":"none","enforcement":null,"denied":false,"denials":[],"runner_failure":null,"refused":null,"timed_out":true}"#
        );
    }

    #[test]
    fn json_of_a_runner_failure() {
        let facts = runner_failed(Stage::Namespace, 1, "unshare: \"user\" namespaces disabled");
        assert_eq!(
            facts.to_json(),
            r#"{"exit":null,"backend":null,"enforcement":null,"denied":false,"denials":[],"runner_failure":{"stage":"namespace","detail":"unshare: \"user\" namespaces disabled"},"refused":null,"timed_out":false}"#
        );
    }

    #[test]
    fn json_of_a_refusal() {
        assert_eq!(
            refused("mode above the ceiling").to_json(),
            r#"{"exit":null,"backend":null,"enforcement":null,"denied":false,"denials":[],"runner_failure":null,"refused":"mode above the ceiling","timed_out":false}"#
        );
    }

    #[test]
    fn the_json_line_shows_controls_as_json_escapes() {
        let json = refused("root \u{9b}2J\x1b[H\x7f").to_json();
        assert!(!json.chars().any(char::is_control), "{json:?}");
        assert!(
            json.contains(r#""refused":"root \u009b2J\u001b[H\u007f""#),
            "{json}"
        );
    }

    #[test]
    fn the_facts_feed_denial_classification() {
        let mut facts = Facts::from_outcome(
            Outcome::Exited(confined_exit(ExitStatus::Code(2), Ending::Exited)),
            true,
        );
        let outside = std::env::temp_dir().join("c");
        facts.stderr_tail = format!(
            "sh: 1: cannot create {}: Read-only file system\n",
            outside.display()
        )
        .into_bytes();
        let scope = Scope::of(std::path::Path::new("/"), &SpawnSpec::new(["sh"]).policy);
        let denial = denial::classify(&facts.denial_evidence(&scope)).expect("denied");
        assert_eq!(denial.kinds, [Kind::FileWrite]);
        let refused = refused("no");
        assert!(refused.denial_evidence(&scope).exit.is_none());
        assert!(refused.denial_evidence(&scope).refused);
        let failed = runner_failed(Stage::Fork, 11, "fork");
        assert!(failed.denial_evidence(&scope).runner_failed);
    }

    #[test]
    fn json_of_a_success_the_sandbox_denied_a_write_that_a_tool_worked_around() {
        let mut facts = Facts::from_outcome(
            Outcome::Exited(confined_exit(ExitStatus::Code(0), Ending::Exited)),
            true,
        );
        facts.denial = Some(Denial {
            kinds: vec![Kind::FileWrite],
            lifted_by: Some(confine_protocol::Mode::DangerFullAccess),
            paths: vec!["/home/u/.cache/pip".into()],
            worked_around: vec![denial::WorkedAround {
                path: "/home/u/.cache/pip".into(),
                instead: "pip disabled its cache",
            }],
        });
        assert!(facts.denied());
        assert_eq!(
            facts.to_json(),
            r#"{"exit":{"code":0},"backend":"bwrap","enforcement":{"level":"full","missing":[],"layers":["namespaces","landlock","seccomp"]},"denied":true,"denials":["file-write"],"denied_paths":["/home/u/.cache/pip"],"runner_failure":null,"refused":null,"timed_out":false}"#
        );
    }

    #[test]
    fn the_json_names_the_extra_writable_roots_and_the_denied_paths_only_when_there_are_any() {
        let mut spec = SpawnSpec::new(["sh"]);
        spec.policy.writable_roots = vec![b"/home/u/.cache/pip".to_vec()];
        let mut facts = Facts::from_outcome(
            Outcome::Exited(confined_exit(ExitStatus::Code(1), Ending::Exited)),
            true,
        )
        .given(&spec.policy);
        facts.denial = Some(Denial {
            kinds: vec![Kind::FileWrite],
            lifted_by: Some(confine_protocol::Mode::DangerFullAccess),
            paths: vec!["/home/u/.npm/x".into()],
            worked_around: Vec::new(),
        });
        assert_eq!(
            facts.to_json(),
            r#"{"exit":{"code":1},"backend":"bwrap","writable_roots":["/home/u/.cache/pip"],"enforcement":{"level":"full","missing":[],"layers":["namespaces","landlock","seccomp"]},"denied":true,"denials":["file-write"],"denied_paths":["/home/u/.npm/x"],"runner_failure":null,"refused":null,"timed_out":false}"#
        );
        let plain = Facts::from_outcome(
            Outcome::Exited(confined_exit(ExitStatus::Code(0), Ending::Exited)),
            true,
        )
        .given(&SpawnSpec::new(["sh"]).policy);
        assert!(!plain.to_json().contains("writable_roots"));
        assert!(!plain.to_json().contains("deny_read"));
        assert!(!plain.to_json().contains("local_binding"));
        let mut spec = SpawnSpec::new(["sh"]);
        spec.policy.mode = confine_protocol::Mode::ReadOnly;
        spec.policy.deny_read = vec![b"/home/u/.ssh".to_vec()];
        spec.policy.local_binding = true;
        let given = Facts::from_outcome(
            Outcome::Exited(confined_exit(ExitStatus::Code(0), Ending::Exited)),
            true,
        )
        .given(&spec.policy)
        .to_json();
        assert!(
            given.contains(r#""deny_read":["/home/u/.ssh"],"local_binding":true,"#),
            "{given}"
        );
        // Unconfined, loopback sockets are no setting of the sandbox's.
        spec.policy.mode = confine_protocol::Mode::DangerFullAccess;
        let unconfined = Facts::default().given(&spec.policy).to_json();
        assert!(!unconfined.contains("local_binding"), "{unconfined}");
        assert!(!plain.to_json().contains("denied_paths"));
    }

    #[test]
    fn the_json_names_the_unix_sockets_a_confined_command_could_connect_to_only_when_there_are_any()
    {
        let exited = || {
            Facts::from_outcome(
                Outcome::Exited(confined_exit(ExitStatus::Code(0), Ending::Exited)),
                true,
            )
        };
        let mut spec = SpawnSpec::new(["docker", "ps"]);
        spec.policy.mode = confine_protocol::Mode::WorkspaceWrite;
        spec.policy.deny_read = vec![b"/home/u/.ssh".to_vec()];
        spec.policy.unix_sockets = vec![
            b"/var/run/docker.sock".to_vec(),
            b"/home/u/.ssh/agent.sock".to_vec(),
        ];
        let facts = exited().given(&spec.policy);
        assert_eq!(
            facts.unix_sockets,
            [
                PathBuf::from("/var/run/docker.sock"),
                PathBuf::from("/home/u/.ssh/agent.sock")
            ]
        );
        let given = facts.to_json();
        assert!(
            given.contains(
                r#""deny_read":["/home/u/.ssh"],"unix_sockets":["/var/run/docker.sock","/home/u/.ssh/agent.sock"],"enforcement":"#
            ),
            "{given}"
        );
        let plain = exited().given(&SpawnSpec::new(["sh"]).policy).to_json();
        assert!(!plain.contains("unix_sockets"), "{plain}");
        // Unconfined, no socket is the sandbox's to allow.
        spec.policy.mode = confine_protocol::Mode::DangerFullAccess;
        let unconfined = exited().given(&spec.policy).to_json();
        assert!(!unconfined.contains("unix_sockets"), "{unconfined}");
    }
}
