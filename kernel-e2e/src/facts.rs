//! The facts agentd reports with `--json`, and the rules every report must follow.

use serde_json::{Map, Value};

use crate::error::FactsError;
use crate::matrix::{Backend, Mode};

/// The texts through which the sandbox says no: the error codes as `strerror`, Go and libuv
/// word them, and what clients print when the network is missing. agentd reports a denial only
/// where the command's stderr shows one of them (it also checks what the line names, so not every
/// such line is a denial).
pub const DENIAL_TEXTS: [&str; 18] = [
    "Read-only file system",
    "read-only file system",
    "Permission denied",
    "permission denied",
    "Operation not permitted",
    "operation not permitted",
    "Temporary failure in name resolution",
    "EAI_AGAIN",
    "Could not resolve host",
    "unable to resolve host address",
    "Network is unreachable",
    "network is unreachable",
    "Couldn't connect to server",
    "Failed to establish a new connection",
    "connect EACCES",
    "connect EPERM",
    "dial tcp",
    "dial udp",
];

/// The words of the tools' own reports that they worked around a denied write (pip disabling
/// its cache). agentd counts such a report whatever the exit code, 0 included; a report is a
/// write denial only, so a command that succeeded is denied nothing else.
pub const RECOVERED_TEXTS: [&str; 1] =
    ["or its parent directory is not owned or is not writable by the current user"];

/// The kinds of denial a tool's report can be: a write.
const RECOVERED_KINDS: [&str; 2] = ["file-write", "protected-path"];

/// The kinds of denial agentd names in `denials`.
pub const DENIAL_KINDS: [&str; 6] = [
    "file-write",
    "protected-path",
    "file-read",
    "network",
    "socket",
    "system-interface",
];

/// A writable root of a run, as the suite saw it just before the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootBefore {
    /// The root's real path, as the helper names it.
    pub path: std::path::PathBuf,
    /// Whether `.git` existed in it.
    pub repository: bool,
}

impl RootBefore {
    pub fn of(path: &std::path::Path) -> RootBefore {
        let path = path.canonicalize().unwrap_or_else(|_| path.to_owned());
        let repository = std::fs::symlink_metadata(path.join(".git")).is_ok();
        RootBefore { path, repository }
    }

    /// How the helper names the gap of a root without a repository: a command can create one.
    fn no_repository_gap(&self) -> String {
        format!("repository {}/.git: there is none yet", self.path.display())
    }

    /// How Landlock names the repository it cannot keep read-only.
    fn landlock_gap(&self) -> String {
        format!("protected path {}/.git ", self.path.display())
    }
}

/// Whether a gap says a protected path does not exist (yet) and so cannot be kept from being
/// created: honest on every backend.
fn is_missing_path_gap(gap: &str) -> bool {
    gap.starts_with("repository ")
        || gap.starts_with("submodule ")
        || (gap.starts_with("protected path ") && gap.contains("does not exist"))
}

/// How the Landlock backend names what it cannot hide without namespaces.
const PROCESS_VISIBILITY_GAP: &str = "process isolation: ";
/// How a run on macOS names the process tree its shim cannot always end.
const SEATBELT_TREE_GAP: &str = "process tree: ";
/// How a run on macOS says the profile has not passed this suite on its version yet
/// (`confine-helper`'s `VERIFIED_MACOS`; RFC 0022): until a version is listed there, every run
/// on it names this, and the change that lists one changes this check with it.
const SEATBELT_UNVERIFIED_GAP: &str = "not yet verified on this macOS version";

/// agentd's exit status when the command did not run.
pub const EXIT_DID_NOT_RUN: i32 = 125;
/// agentd's exit status when the command's timeout passed.
pub const EXIT_TIMED_OUT: i32 = 124;

/// How the command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

/// `{"level": ..., "missing": [...], "layers": [...]}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enforcement {
    pub level: String,
    pub missing: Vec<String>,
    pub layers: Vec<String>,
}

/// `{"stage": ..., "detail": ...}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerFailure {
    pub stage: String,
    pub detail: String,
}

/// One facts line, parsed strictly: every key of [`KEYS`] present, of [`OPTIONAL_KEYS`] only
/// when it has something to say, nothing else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    pub exit: Option<Exit>,
    pub backend: Option<String>,
    pub enforcement: Option<Enforcement>,
    pub denied: bool,
    /// The kinds of what was denied, each once, in agentd's order; empty unless `denied`.
    pub denials: Vec<String>,
    pub runner_failure: Option<RunnerFailure>,
    pub refused: Option<String>,
    pub timed_out: bool,
    /// The paths the denials named; present only when `denied` and some denial named one.
    pub denied_paths: Vec<String>,
    /// The writable roots the command had besides the workspace; present only when some.
    pub writable_roots: Vec<String>,
    /// The paths the command was denied reading; present only when some.
    pub deny_read: Vec<String>,
    /// Loopback sockets inside the sandbox; present (and true) only when given.
    pub local_binding: bool,
    /// The named Unix sockets the command could connect to; present only when some.
    pub unix_sockets: Vec<String>,
    /// What the allow-list proxy decided, in order; present only with one.
    pub proxy: Option<Vec<ProxyDecision>>,
    /// The caps the command's tree ran into (`processes`, `memory_bytes`) with their values;
    /// present only when it ran into one the kernel counts.
    pub caps_reached: Vec<(String, u64)>,
}

/// One decision of the allow-list proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyDecision {
    /// The host as the command named it.
    pub host: String,
    pub allowed: bool,
    /// Why, as a sentence.
    pub reason: String,
}

const KEYS: [&str; 8] = [
    "exit",
    "backend",
    "enforcement",
    "denied",
    "denials",
    "runner_failure",
    "refused",
    "timed_out",
];

/// Keys a facts line has only when they are not empty.
const OPTIONAL_KEYS: [&str; 7] = [
    "denied_paths",
    "writable_roots",
    "deny_read",
    "local_binding",
    "unix_sockets",
    "proxy",
    "caps_reached",
];

impl Facts {
    /// Parses the facts line; the error says which part of the contract the line breaks.
    pub fn parse(line: &str) -> Result<Facts, FactsError> {
        let value: Value =
            serde_json::from_str(line).map_err(|e| facts_error!("not one JSON object: {e}"))?;
        let object = value
            .as_object()
            .ok_or_else(|| facts_error!("not a JSON object"))?;
        for key in object.keys() {
            if !KEYS.contains(&key.as_str()) && !OPTIONAL_KEYS.contains(&key.as_str()) {
                return Err(facts_error!("unexpected key {key:?}"));
            }
        }
        let field = |key: &str| {
            object
                .get(key)
                .ok_or_else(|| facts_error!("missing key {key:?}"))
        };
        let exit = null_or_object(field("exit")?, "exit", parse_exit)?;
        let backend = optional_string(field("backend")?, "backend")?;
        if let Some(name) = &backend
            && !["bwrap", "landlock", "seatbelt", "namespaces", "none"].contains(&name.as_str())
        {
            return Err(facts_error!("unknown backend {name:?}"));
        }
        let enforcement = null_or_object(field("enforcement")?, "enforcement", parse_enforcement)?;
        let runner_failure = null_or_object(
            field("runner_failure")?,
            "runner_failure",
            parse_runner_failure,
        )?;
        let denied = boolean(field("denied")?, "denied")?;
        let denials = parse_denials(field("denials")?)?;
        if denied == denials.is_empty() {
            return Err(facts_error!(
                "denied is {denied} but denials is {denials:?}"
            ));
        }
        let denied_paths = optional_paths(object.get("denied_paths"), "denied_paths")?;
        if !denied && !denied_paths.is_empty() {
            return Err(facts_error!(
                "denied is false but denied_paths is {denied_paths:?}"
            ));
        }
        let writable_roots = optional_paths(object.get("writable_roots"), "writable_roots")?;
        let deny_read = optional_paths(object.get("deny_read"), "deny_read")?;
        let local_binding = parse_local_binding(object.get("local_binding"))?;
        let unix_sockets = optional_paths(object.get("unix_sockets"), "unix_sockets")?;
        let proxy = match object.get("proxy") {
            None => None,
            Some(value) => Some(parse_proxy(value)?),
        };
        let caps_reached = parse_caps_reached(object.get("caps_reached"))?;
        Ok(Facts {
            exit,
            backend,
            enforcement,
            denied,
            denials,
            runner_failure,
            refused: optional_string(field("refused")?, "refused")?,
            timed_out: boolean(field("timed_out")?, "timed_out")?,
            denied_paths,
            writable_roots,
            deny_read,
            local_binding,
            unix_sockets,
            proxy,
            caps_reached,
        })
    }

    /// Whether the command ran at all.
    pub fn ran(&self) -> bool {
        self.exit.is_some() && self.runner_failure.is_none() && self.refused.is_none()
    }

    /// Checks the rules that hold for every run, whatever the case: agentd's exit status matches
    /// the facts, and `denied` is never without its evidence: a confined command that failed by
    /// itself with a denial text on stderr, or that exited by itself with a tool's report of a
    /// denied write it worked around (then, if it succeeded, only writes are denied). (The
    /// converse is not a rule: a program's own `Permission denied` on a file its user may not
    /// read is not the sandbox's, and agentd says so; the cases assert `denied` where the sandbox
    /// did deny.)
    pub fn check_consistency(
        &self,
        agentd_status: Option<i32>,
        stderr_tail: &str,
    ) -> Result<(), FactsError> {
        let status =
            agentd_status.ok_or_else(|| facts_error!("agentd itself was killed by a signal"))?;
        if self.runner_failure.is_some() && self.refused.is_some() {
            return Err(facts_error!("both runner_failure and refused are set"));
        }
        let expected = if self.runner_failure.is_some() || self.refused.is_some() {
            if self.exit.is_some() {
                return Err(facts_error!(
                    "the command did not run but an exit is reported"
                ));
            }
            EXIT_DID_NOT_RUN
        } else if self.timed_out {
            EXIT_TIMED_OUT
        } else {
            match self.exit {
                Some(Exit::Code(code)) => code & 0xff,
                Some(Exit::Signal(signal)) => 128 + signal,
                None => return Err(facts_error!("the command ran but no exit is reported")),
            }
        };
        if status != expected {
            return Err(facts_error!(
                "agentd exited {status}, the facts say it should be {expected}"
            ));
        }
        let denial_text = DENIAL_TEXTS.iter().any(|t| stderr_tail.contains(t));
        let report = RECOVERED_TEXTS.iter().any(|t| stderr_tail.contains(t));
        let confined = matches!(
            self.backend.as_deref(),
            Some("bwrap" | "landlock" | "seatbelt" | "namespaces")
        );
        let failed = matches!(self.exit, Some(Exit::Code(c)) if c != 0);
        let exited = matches!(self.exit, Some(Exit::Code(_)));
        let evidence = self.runner_failure.is_none()
            && confined
            && ((failed && denial_text) || (exited && report));
        if self.denied && !evidence {
            return Err(facts_error!(
                "denied is true but the backend is {:?}, the exit is {:?} and the command's \
                 stderr tail {} denial text and {} tool's report of a denied write",
                self.backend,
                self.exit,
                if denial_text { "has" } else { "has no" },
                if report { "a" } else { "no" }
            ));
        }
        if self.denied
            && self.exit == Some(Exit::Code(0))
            && let Some(kind) = self
                .denials
                .iter()
                .find(|k| !RECOVERED_KINDS.contains(&k.as_str()))
        {
            return Err(facts_error!(
                "the command succeeded, yet denials names {kind:?}: only a write a tool worked \
                 around can be denied to a command that succeeded"
            ));
        }
        Ok(())
    }

    /// Checks what a command that ran says about its confinement: the backend asked for, and an
    /// enforcement level that admits what the backend cannot do. `roots` are the run's writable
    /// roots as they were before it (workspace-write).
    pub fn check_confinement(
        &self,
        backend: Backend,
        mode: Mode,
        roots: &[RootBefore],
    ) -> Result<(), FactsError> {
        if self.backend.as_deref() != Some(backend.as_str()) {
            return Err(facts_error!(
                "backend is {:?}, {} was asked for",
                self.backend,
                backend.as_str()
            ));
        }
        let enforcement = self
            .enforcement
            .as_ref()
            .ok_or_else(|| facts_error!("a confined command ran but enforcement is null"))?;
        // Both layers, every time: this suite runs where Landlock exists, so bwrap's sandbox
        // (and the helper's own namespaces) must have Landlock inside it too.
        let layers: &[&str] = match backend {
            Backend::Bwrap | Backend::Namespaces => &["namespaces", "landlock", "seccomp"],
            Backend::Landlock => &["landlock", "seccomp"],
            // sandbox-exec is one layer the protocol has no name for.
            Backend::Seatbelt => &[],
        };
        if enforcement.layers != layers {
            return Err(facts_error!(
                "{} should confine with the layers {layers:?}, facts say {:?}",
                backend.as_str(),
                enforcement.layers
            ));
        }
        let names = |needle: &str| enforcement.missing.iter().any(|m| m.starts_with(needle));
        // Without namespaces, other processes stay listed in /proc: Landlock must say so.
        if backend == Backend::Landlock && !names(PROCESS_VISIBILITY_GAP) {
            return Err(facts_error!(
                "landlock leaves other processes visible in /proc, yet enforcement.missing {:?} \
                 does not say so",
                enforcement.missing
            ));
        }
        // Every root without a repository must be named: a command can create one there.
        if mode == Mode::WorkspaceWrite {
            for root in roots.iter().filter(|r| !r.repository) {
                if !names(&root.no_repository_gap()) {
                    return Err(facts_error!(
                        "{} has no repository, so one can be created there, yet enforcement.missing \
                         {:?} does not say so",
                        root.path.display(),
                        enforcement.missing
                    ));
                }
            }
        }
        match (backend, mode) {
            // Every Seatbelt run is partial: what the profile cannot take away, and the process
            // tree the shim cannot end without a subreaper (RFC 0001, "macOS").
            (Backend::Seatbelt, _) => check_seatbelt_level(enforcement),
            (Backend::Landlock, Mode::WorkspaceWrite) => {
                check_landlock_write_level(enforcement, roots)
            }
            _ => self.check_full_level(enforcement, backend, mode),
        }
    }

    /// Checks that the only gaps a bwrap or namespaces run (or a read-only Landlock run) admits
    /// are the ones it cannot help, and that its level says `full` exactly when nothing is missing.
    fn check_full_level(
        &self,
        enforcement: &Enforcement,
        backend: Backend,
        mode: Mode,
    ) -> Result<(), FactsError> {
        // As root a requested process limit cannot bind (root is exempt from
        // RLIMIT_NPROC); the helper must say so. Paths that do not exist yet are named
        // too, and Landlock's process visibility. Anything else is a gap bwrap, the helper's
        // own namespaces (and read-only Landlock) must not have.
        let other: Vec<&String> = enforcement
            .missing
            .iter()
            .filter(|m| {
                let allowed = m.starts_with("process limit")
                    || is_missing_path_gap(m)
                    || (backend == Backend::Landlock
                        && !self.deny_read.is_empty()
                        && m.starts_with(DENIED_NAMES_GAP))
                    || (backend == Backend::Landlock && m.starts_with(PROCESS_VISIBILITY_GAP));
                !allowed
            })
            .collect();
        let expected = if enforcement.missing.is_empty() {
            "full"
        } else {
            "partial"
        };
        if enforcement.level != expected || !other.is_empty() {
            return Err(facts_error!(
                "{} in {} mode should enforce fully, facts say {:?} missing {:?}",
                backend.as_str(),
                mode.as_str(),
                enforcement.level,
                enforcement.missing
            ));
        }
        Ok(())
    }
}

/// Checks a Seatbelt run's level: always partial, naming the process tree it cannot end and
/// the macOS versions not yet verified.
fn check_seatbelt_level(enforcement: &Enforcement) -> Result<(), FactsError> {
    let names = |needle: &str| enforcement.missing.iter().any(|m| m.starts_with(needle));
    if enforcement.level != "partial" || !names(SEATBELT_TREE_GAP) {
        return Err(facts_error!(
            "seatbelt cannot end a process tree that left its group, yet enforcement \
             is {:?} missing {:?}",
            enforcement.level,
            enforcement.missing
        ));
    }
    if !names(SEATBELT_UNVERIFIED_GAP) {
        return Err(facts_error!(
            "no macOS version is verified yet, so every seatbelt run must say \
             {SEATBELT_UNVERIFIED_GAP:?}; enforcement.missing is {:?}",
            enforcement.missing
        ));
    }
    Ok(())
}

/// Checks a workspace-write Landlock run's level: partial, naming every repository inside a
/// writable root, which Landlock cannot keep read-only.
fn check_landlock_write_level(
    enforcement: &Enforcement,
    roots: &[RootBefore],
) -> Result<(), FactsError> {
    let names = |needle: &str| enforcement.missing.iter().any(|m| m.starts_with(needle));
    if enforcement.level != "partial" {
        return Err(facts_error!(
            "landlock cannot keep a repository inside a writable root read-only, yet \
             enforcement is {:?}",
            enforcement.level
        ));
    }
    for root in roots.iter().filter(|r| r.repository) {
        if !names(&root.landlock_gap()) {
            return Err(facts_error!(
                "enforcement.missing {:?} does not name the repository {}/.git, which \
                 landlock cannot keep read-only",
                enforcement.missing,
                root.path.display()
            ));
        }
    }
    Ok(())
}

/// The value of `key` that is either null or an object, parsed by `parse`.
fn null_or_object<T>(
    value: &Value,
    key: &str,
    parse: impl FnOnce(&Map<String, Value>) -> Result<T, FactsError>,
) -> Result<Option<T>, FactsError> {
    match value {
        Value::Null => Ok(None),
        Value::Object(object) => parse(object).map(Some),
        other => Err(facts_error!("{key} is neither null nor an object: {other}")),
    }
}

/// `runner_failure`: `{"stage": ..., "detail": ...}`.
fn parse_runner_failure(f: &Map<String, Value>) -> Result<RunnerFailure, FactsError> {
    Ok(RunnerFailure {
        stage: string_in(f, "stage", "runner_failure")?,
        detail: string_in(f, "detail", "runner_failure")?,
    })
}

/// `local_binding`: absent, or present and true.
fn parse_local_binding(value: Option<&Value>) -> Result<bool, FactsError> {
    match value {
        None => Ok(false),
        Some(Value::Bool(true)) => Ok(true),
        Some(other) => Err(facts_error!(
            "local_binding is present but not true: {other}"
        )),
    }
}

/// `caps_reached`: absent, or a non-empty object from `processes` and `memory_bytes` to the
/// caps' values.
fn parse_caps_reached(value: Option<&Value>) -> Result<Vec<(String, u64)>, FactsError> {
    match value {
        None => Ok(Vec::new()),
        Some(Value::Object(caps)) if !caps.is_empty() => caps
            .iter()
            .map(|(name, max)| match (name.as_str(), max.as_u64()) {
                ("processes" | "memory_bytes", Some(max)) => Ok((name.clone(), max)),
                _ => Err(facts_error!("caps_reached has {name:?}: {max}")),
            })
            .collect(),
        Some(other) => Err(facts_error!(
            "caps_reached is present but not a non-empty object: {other}"
        )),
    }
}

/// `proxy`: `{"decisions": [{host, port, protocol, allowed, reason}], "total": N}`, with no
/// more decisions than the total.
fn parse_proxy(value: &Value) -> Result<Vec<ProxyDecision>, FactsError> {
    let bad = || facts_error!("proxy is not {{decisions, total}}: {value}");
    let object = value.as_object().ok_or_else(bad)?;
    let total = object
        .get("total")
        .and_then(Value::as_u64)
        .ok_or_else(bad)?;
    let list = object
        .get("decisions")
        .and_then(Value::as_array)
        .ok_or_else(bad)?;
    if list.len() as u64 > total {
        return Err(facts_error!(
            "proxy lists more decisions than its total: {value}"
        ));
    }
    list.iter()
        .map(|d| {
            let host = d.get("host").and_then(Value::as_str);
            let allowed = d.get("allowed").and_then(Value::as_bool);
            let reason = d.get("reason").and_then(Value::as_str);
            match (host, allowed, reason) {
                (Some(host), Some(allowed), Some(reason)) => Ok(ProxyDecision {
                    host: host.to_owned(),
                    allowed,
                    reason: reason.to_owned(),
                }),
                _ => Err(facts_error!(
                    "a proxy decision lacks host, allowed or reason: {d}"
                )),
            }
        })
        .collect()
}

/// How Landlock names the one part of a denied directory it cannot deny: its entries' names.
pub const DENIED_NAMES_GAP: &str = "names of the entries in the denied directory";

/// `denials`: an array of distinct known kinds.
/// An optional list of absolute paths: absent, or a non-empty array of them.
fn optional_paths(value: Option<&Value>, key: &str) -> Result<Vec<String>, FactsError> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    let list = value
        .as_array()
        .filter(|list| !list.is_empty())
        .ok_or_else(|| facts_error!("{key} is present but not a non-empty array: {value}"))?;
    list.iter()
        .map(|path| match path.as_str() {
            Some(p) if p.starts_with('/') => Ok(p.to_owned()),
            _ => Err(facts_error!("{key} entry {path} is not an absolute path")),
        })
        .collect()
}

fn parse_denials(value: &Value) -> Result<Vec<String>, FactsError> {
    let list = value
        .as_array()
        .ok_or_else(|| facts_error!("denials is not an array: {value}"))?;
    let mut kinds = Vec::new();
    for kind in list {
        let kind = kind
            .as_str()
            .ok_or_else(|| facts_error!("denials entry {kind} is not a string"))?;
        if !DENIAL_KINDS.contains(&kind) || kinds.iter().any(|k| k == kind) {
            return Err(facts_error!(
                "denials has an unknown or repeated kind {kind:?}"
            ));
        }
        kinds.push(kind.to_owned());
    }
    Ok(kinds)
}

fn parse_exit(exit: &Map<String, Value>) -> Result<Exit, FactsError> {
    let mut entries = exit.iter();
    let (Some((key, value)), None) = (entries.next(), entries.next()) else {
        return Err(facts_error!("exit must have exactly one key: {exit:?}"));
    };
    let number = value
        .as_i64()
        .and_then(|n| i32::try_from(n).ok())
        .ok_or_else(|| facts_error!("exit.{key} is not a number: {value}"))?;
    match key.as_str() {
        "code" => Ok(Exit::Code(number)),
        "signal" => Ok(Exit::Signal(number)),
        other => Err(facts_error!("exit has unknown key {other:?}")),
    }
}

fn parse_enforcement(e: &Map<String, Value>) -> Result<Enforcement, FactsError> {
    let level = string_in(e, "level", "enforcement")?;
    if level != "full" && level != "partial" {
        return Err(facts_error!("unknown enforcement level {level:?}"));
    }
    let missing = e
        .get("missing")
        .and_then(Value::as_array)
        .ok_or_else(|| facts_error!("enforcement.missing is not an array"))?
        .iter()
        .map(|m| {
            m.as_str()
                .map(str::to_owned)
                .ok_or_else(|| facts_error!("missing entry {m} is not a string"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if level == "partial" && missing.is_empty() {
        return Err(facts_error!(
            "enforcement is partial but names nothing missing"
        ));
    }
    let layers = e
        .get("layers")
        .and_then(Value::as_array)
        .ok_or_else(|| facts_error!("enforcement.layers is not an array"))?
        .iter()
        .map(|m| {
            m.as_str()
                .filter(|l| ["namespaces", "landlock", "seccomp"].contains(l))
                .map(str::to_owned)
                .ok_or_else(|| {
                    facts_error!("layer {m} is not one of namespaces, landlock, seccomp")
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Enforcement {
        level,
        missing,
        layers,
    })
}

fn string_in(object: &Map<String, Value>, key: &str, within: &str) -> Result<String, FactsError> {
    object
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| facts_error!("{within}.{key} is not a string"))
}

fn optional_string(value: &Value, key: &str) -> Result<Option<String>, FactsError> {
    match value {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        other => Err(facts_error!("{key} is neither null nor a string: {other}")),
    }
}

fn boolean(value: &Value, key: &str) -> Result<bool, FactsError> {
    value
        .as_bool()
        .ok_or_else(|| facts_error!("{key} is not a boolean: {value}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const RAN: &str = r#"{"exit":{"code":1},"backend":"bwrap","enforcement":{"level":"full","missing":[],"layers":["namespaces","landlock","seccomp"]},"denied":true,"denials":["file-write"],"runner_failure":null,"refused":null,"timed_out":false}"#;

    #[test]
    fn a_complete_facts_line_parses() {
        let facts = Facts::parse(RAN).expect("parses");
        assert_eq!(facts.exit, Some(Exit::Code(1)));
        assert_eq!(facts.backend.as_deref(), Some("bwrap"));
        assert!(facts.denied);
        assert_eq!(facts.denials, ["file-write"]);
        assert!(facts.ran());
    }

    #[test]
    fn denials_are_known_kinds_and_present_exactly_when_denied() {
        for bad in [
            r#""denials":[]"#,
            r#""denials":["file-write","file-write"]"#,
            r#""denials":["disk"]"#,
            r#""denials":"file-write""#,
        ] {
            let line = RAN.replace(r#""denials":["file-write"]"#, bad);
            assert!(Facts::parse(&line).is_err(), "{line}");
        }
        let not_denied = RAN.replace(
            r#""denied":true,"denials":["file-write"]"#,
            r#""denied":false,"denials":[]"#,
        );
        assert!(Facts::parse(&not_denied).is_ok());
        let both = RAN.replace(
            r#""denials":["file-write"]"#,
            r#""denials":["file-write","network"]"#,
        );
        assert!(Facts::parse(&both).is_ok());
    }

    #[test]
    fn the_optional_paths_are_non_empty_absolute_lists_and_denied_paths_needs_a_denial() {
        let with = |extra: &str| {
            RAN.replace(
                r#""timed_out":false"#,
                &format!(r#""timed_out":false,{extra}"#),
            )
        };
        let facts = Facts::parse(&with(r#""denied_paths":["/w/x"],"writable_roots":["/c"]"#))
            .expect("parses");
        assert_eq!(facts.denied_paths, ["/w/x"]);
        assert_eq!(facts.writable_roots, ["/c"]);
        assert_eq!(
            Facts::parse(RAN).expect("parses").denied_paths,
            Vec::<String>::new()
        );
        for bad in [
            r#""denied_paths":[]"#,
            r#""denied_paths":["x"]"#,
            r#""denied_paths":"/w/x""#,
            r#""writable_roots":[1]"#,
        ] {
            assert!(Facts::parse(&with(bad)).is_err(), "{bad}");
        }
        let not_denied = with(r#""denied_paths":["/w/x"]"#).replace(
            r#""denied":true,"denials":["file-write"]"#,
            r#""denied":false,"denials":[]"#,
        );
        assert!(Facts::parse(&not_denied).is_err());
    }

    #[test]
    fn a_missing_or_extra_key_is_a_contract_violation() {
        let missing = RAN.replace(r#","timed_out":false"#, "");
        assert!(Facts::parse(&missing).is_err());
        let extra = RAN.replace(r#""timed_out":false"#, r#""timed_out":false,"x":1"#);
        assert!(Facts::parse(&extra).is_err());
    }

    #[test]
    fn denied_needs_a_denial_text_on_a_failure() {
        let facts = Facts::parse(RAN).expect("parses");
        assert!(
            facts
                .check_consistency(Some(1), "sh: cannot create x: Read-only file system")
                .is_ok()
        );
        assert!(
            facts
                .check_consistency(Some(1), "curl: (6) Could not resolve host: example.com")
                .is_ok()
        );
        assert!(
            facts
                .check_consistency(Some(1), "sh: no such file")
                .is_err()
        );
        assert!(
            facts
                .check_consistency(Some(2), "Read-only file system")
                .is_err()
        );
    }

    #[test]
    fn an_unconfined_failure_is_never_a_denial_and_a_confined_one_need_not_be() {
        let line = RAN.replace(r#""backend":"bwrap""#, r#""backend":"none""#);
        let mut facts = Facts::parse(&line).expect("parses");
        assert!(
            facts
                .check_consistency(Some(1), "Permission denied")
                .is_err()
        );
        facts.denied = false;
        facts.denials.clear();
        assert!(
            facts
                .check_consistency(Some(1), "Permission denied")
                .is_ok()
        );
        // A program's own "Permission denied" (a file its user may not read) is not the
        // sandbox's: agentd may say so under a confining backend too.
        facts.backend = Some("bwrap".into());
        assert!(
            facts
                .check_consistency(Some(1), "cat: /etc/shadow: Permission denied")
                .is_ok()
        );
    }

    #[test]
    fn a_success_is_denied_only_with_a_tools_report_of_a_write_it_worked_around() {
        const PIP: &str = "WARNING: The directory '/home/u/.cache/pip' or its parent directory \
                           is not owned or is not writable by the current user. The cache has \
                           been disabled.";
        let line = RAN.replace(r#""exit":{"code":1}"#, r#""exit":{"code":0}"#);
        let facts = Facts::parse(&line).expect("parses");
        assert!(facts.check_consistency(Some(0), PIP).is_ok());
        // Denial texts are no evidence on a success: the command's own words, not a failure.
        assert!(
            facts
                .check_consistency(Some(0), "sh: cannot create x: Read-only file system")
                .is_err()
        );
        assert!(facts.check_consistency(Some(0), "").is_err());
        // A report counts on a failure too.
        assert!(
            Facts::parse(RAN)
                .expect("parses")
                .check_consistency(Some(1), PIP)
                .is_ok()
        );
        // What a success was denied can only be a write.
        let network = line.replace(r#""denials":["file-write"]"#, r#""denials":["network"]"#);
        let network = Facts::parse(&network).expect("parses");
        assert!(network.check_consistency(Some(0), PIP).is_err());
        // Unconfined, a report is pip's own.
        let unconfined = line.replace(r#""backend":"bwrap""#, r#""backend":"none""#);
        let unconfined = Facts::parse(&unconfined).expect("parses");
        assert!(unconfined.check_consistency(Some(0), PIP).is_err());
    }

    #[test]
    fn a_refusal_exits_125_with_no_exit() {
        let line = r#"{"exit":null,"backend":null,"enforcement":null,"denied":false,"denials":[],"runner_failure":null,"refused":"above the ceiling","timed_out":false}"#;
        let facts = Facts::parse(line).expect("parses");
        assert!(!facts.ran());
        assert!(facts.check_consistency(Some(125), "").is_ok());
        assert!(facts.check_consistency(Some(1), "").is_err());
    }

    #[test]
    fn landlock_workspace_write_must_name_the_repository_or_its_absence() {
        let with = RootBefore {
            path: "/w".into(),
            repository: true,
        };
        let without = RootBefore {
            path: "/x".into(),
            repository: false,
        };
        let mut facts = Facts::parse(RAN).expect("parses");
        facts.backend = Some("landlock".into());
        facts.enforcement = Some(Enforcement {
            level: "partial".into(),
            missing: vec![
                "process isolation: other processes' command lines are visible".into(),
                "protected path /w/.git (Landlock cannot keep part of a writable root read-only)"
                    .into(),
                "repository /x/.git: there is none yet, so a command can create one".into(),
            ],
            layers: vec!["landlock".into(), "seccomp".into()],
        });
        let roots = [with, without];
        assert!(
            facts
                .check_confinement(Backend::Landlock, Mode::WorkspaceWrite, &roots)
                .is_ok()
        );
        facts.enforcement.as_mut().expect("set").missing.pop();
        assert!(
            facts
                .check_confinement(Backend::Landlock, Mode::WorkspaceWrite, &roots)
                .is_err()
        );
        assert!(
            facts
                .check_confinement(Backend::Landlock, Mode::ReadOnly, &[])
                .is_err()
        );
    }

    #[test]
    fn bwrap_may_only_name_paths_that_do_not_exist_yet() {
        let mut facts = Facts::parse(RAN).expect("parses");
        facts.backend = Some("bwrap".into());
        let root = [RootBefore {
            path: "/x".into(),
            repository: false,
        }];
        facts.enforcement = Some(Enforcement {
            level: "partial".into(),
            missing: vec!["repository /x/.git: there is none yet, so …".into()],
            layers: vec!["namespaces".into(), "landlock".into(), "seccomp".into()],
        });
        assert!(
            facts
                .check_confinement(Backend::Bwrap, Mode::WorkspaceWrite, &root)
                .is_ok()
        );
        // Without the Landlock layer inside, bwrap is one layer short.
        let mut one_layer = facts.clone();
        one_layer
            .enforcement
            .as_mut()
            .expect("set")
            .layers
            .remove(1);
        assert!(
            one_layer
                .check_confinement(Backend::Bwrap, Mode::WorkspaceWrite, &root)
                .is_err()
        );
        facts
            .enforcement
            .as_mut()
            .expect("set")
            .missing
            .push("protected path /x/a (Landlock cannot …)".into());
        assert!(
            facts
                .check_confinement(Backend::Bwrap, Mode::WorkspaceWrite, &root)
                .is_err()
        );
    }

    #[test]
    fn the_helpers_own_namespaces_are_held_to_bwraps_layers_and_gaps() {
        let line = RAN.replace(r#""backend":"bwrap""#, r#""backend":"namespaces""#);
        let facts = Facts::parse(&line).expect("parses");
        // A confining backend: its denial texts are evidence.
        assert!(
            facts
                .check_consistency(Some(1), "sh: cannot create /x: Read-only file system")
                .is_ok()
        );
        assert!(
            facts
                .check_confinement(Backend::Namespaces, Mode::ReadOnly, &[])
                .is_ok()
        );
        // The backend asked for is the one reported.
        assert!(
            facts
                .check_confinement(Backend::Bwrap, Mode::ReadOnly, &[])
                .is_err()
        );
        // Without the Landlock layer inside, it is one layer short.
        let mut one_layer = facts.clone();
        one_layer
            .enforcement
            .as_mut()
            .expect("set")
            .layers
            .remove(1);
        assert!(
            one_layer
                .check_confinement(Backend::Namespaces, Mode::ReadOnly, &[])
                .is_err()
        );
        // With a pid namespace of its own, no process is left visible: that gap is not its.
        let mut visible = facts.clone();
        let enforcement = visible.enforcement.as_mut().expect("set");
        enforcement.level = "partial".into();
        enforcement.missing.push(format!(
            "{PROCESS_VISIBILITY_GAP}other processes are visible"
        ));
        assert!(
            visible
                .check_confinement(Backend::Namespaces, Mode::ReadOnly, &[])
                .is_err()
        );
    }
}
