//! Telling, after the fact, whether the confinement denied something a command tried, and what
//! kind of thing it was.
//!
//! Neither backend reports denials to the helper: the command just sees an error from the
//! kernel and usually prints its text. So the classification reads the end of the command's
//! stderr, line by line, and only when the command failed under a confining backend. A line
//! counts when three things agree:
//!
//! 1. **The backend's dialect** ([`dialect::DIALECT`]): the line shows a text through which the
//!    backend that ran the command denies, and its meaning (a read-only mount, a file access,
//!    a filtered call, a missing network). `EROFS` under Landlock, or a resolver failure with
//!    the network allowed, is not this sandbox speaking.
//! 2. **What the line names** ([`named`]): the paths beside the error, taken from the command's
//!    working directory when relative. A file denial needs a path outside the writable roots,
//!    or a protected path inside one (git metadata); a path inside a writable root was not
//!    refused by the sandbox.
//! 3. **What the host says** ([`host`]): agentd runs unconfined, so it asks the kernel, with
//!    `access(2)` and `stat(2)` only, whether the user could have done it without the sandbox.
//!    `cat: /etc/shadow: Permission denied` from an unprivileged user is the file's own
//!    permissions, not a denial.
//!
//! It is deliberately conservative: a false "denied" sends a caller off to widen a sandbox that
//! was not the problem, which is worse than missing a denial. So a `Permission denied` that names
//! no path counts only when the line is about the network; only `EROFS`, which no program
//! produces but a read-only mount, counts without a path.
//!
//! One exception to "only when the command failed": a tool's own report that it worked around a
//! denied write ([`recovered`]: pip disabling its cache) counts whatever the exit code, since the
//! tool succeeds precisely by working around it. It is an exact sentence naming a path, and the
//! path is judged as any file write's (points 2 and 3), so it can be no looser than a failure's
//! line.

pub mod dialect;
pub mod host;
mod named;
mod recovered;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use confine_protocol::{Backend, ExitStatus, Mode, Network, PROTECTED_SUBPATHS, Policy};

use dialect::Meaning;
use host::{Access, Host, RealHost};

/// How many paths one classification asks the host about; a command printing thousands of
/// denials is judged by its first ones.
const MAX_HOST_CHECKS: usize = 32;

/// What kind of access the sandbox denied. Ordered as the markers are listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// Creating, changing or removing a file, or changing its metadata, outside the writable
    /// roots (in read-only mode: anywhere).
    FileWrite,
    /// Writing a protected path inside a writable root: git metadata, or a path the request
    /// protected. No confined mode allows it.
    ProtectedPath,
    /// Reading a file the user could read without the sandbox: root loses the capabilities that
    /// let it read every file, and Landlock keeps `/proc` entries of outside processes closed.
    FileRead,
    /// The network, which the policy denied.
    Network,
    /// A Unix socket (pathname or abstract: D-Bus, docker, ssh-agent), which the seccomp filter
    /// refuses in every confined mode; named when the command's message shows the call was
    /// about `AF_UNIX`.
    Socket,
    /// A system interface the seccomp filter or Landlock's scopes refuse in every confined mode:
    /// Unix sockets, tracing, mounts, keyrings, signals to processes outside the sandbox.
    SystemInterface,
}

impl Kind {
    /// Every kind, in order.
    pub const ALL: [Kind; 6] = [
        Kind::FileWrite,
        Kind::ProtectedPath,
        Kind::FileRead,
        Kind::Network,
        Kind::Socket,
        Kind::SystemInterface,
    ];

    /// The kind whose word in the facts is `word`.
    pub fn from_word(word: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|kind| kind.as_str() == word)
    }

    /// The word in the facts.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::FileWrite => "file-write",
            Kind::ProtectedPath => "protected-path",
            Kind::FileRead => "file-read",
            Kind::Network => "network",
            Kind::Socket => "socket",
            Kind::SystemInterface => "system-interface",
        }
    }
}

/// What the sandbox denied a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// Each kind once, in the order of [`Kind`]; never empty.
    pub kinds: Vec<Kind>,
    /// The narrowest mode that allows everything that was denied; `None` when a write named no
    /// path, so whether workspace-write would do is not known.
    pub lifted_by: Option<Mode>,
    /// The files a denied access named, as real paths, each once, in the order the command
    /// printed them (at most [`MAX_HOST_CHECKS`]); empty when none named one.
    pub paths: Vec<PathBuf>,
    /// The denied accesses a tool reported working around, in the order of `paths`; empty when
    /// none did. A command that exited 0 yet was denied something has at least one.
    pub worked_around: Vec<WorkedAround>,
}

/// A denied access a tool reported working around, so that the command could go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkedAround {
    /// The file it named, as a real path (one of [`Denial::paths`]).
    pub path: PathBuf,
    /// What the tool did instead, in words: "pip disabled its cache".
    pub instead: &'static str,
}

/// What the command was allowed, as agentd asked for it: the ground its messages are judged on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    pub mode: Mode,
    pub network: Network,
    /// The command's working directory when it started: relative paths in its messages are
    /// taken from here.
    pub cwd: PathBuf,
    /// The workspace and the further writable roots, as real paths: what workspace-write may
    /// write.
    pub roots: Vec<PathBuf>,
    /// Relative subpaths that stay read-only inside every root, besides
    /// [`PROTECTED_SUBPATHS`].
    pub protected: Vec<PathBuf>,
    /// The built-in credential stores the command was denied (none unconfined): a denied read
    /// of one is told how to lift it ([`crate::credentials::lift_notes`]).
    pub credentials: Vec<crate::credentials::Credential>,
}

impl Scope {
    /// The scope of a command started in `cwd` under `policy`, as agentd asks the helper for
    /// it; the roots as real paths where they resolve.
    pub fn of(cwd: &Path, policy: &Policy) -> Scope {
        let path = |bytes: &Vec<u8>| PathBuf::from(OsStr::from_bytes(bytes));
        let roots = policy
            .workspace_root
            .iter()
            .chain(&policy.writable_roots)
            .map(|root| {
                let root = cwd.join(path(root));
                root.canonicalize().unwrap_or(root)
            })
            .collect();
        Scope {
            mode: policy.mode,
            network: policy.network,
            cwd: cwd.to_path_buf(),
            roots,
            protected: policy.protected.iter().map(path).collect(),
            credentials: Vec::new(),
        }
    }
}

/// What [`classify`] looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evidence<'a> {
    /// How the command ended; `None` when it did not run.
    pub exit: Option<ExitStatus>,
    /// The backend that confined it; `None` when it did not run.
    pub backend: Option<Backend>,
    /// A runner step failed (or the helper went away).
    pub runner_failed: bool,
    /// The helper refused the request.
    pub refused: bool,
    /// The end of the command's stderr (agentd keeps the last 8 KiB). Only stderr counts: stdout
    /// is the command's data, which may well quote such texts.
    pub stderr_tail: &'a [u8],
    /// What the command was allowed.
    pub scope: &'a Scope,
}

/// What the sandbox denied the command, if anything. Something only when all hold:
/// - the command exited by itself (not killed by a signal);
/// - no runner step failed and the request was not refused (a runner failure always outranks
///   a denial);
/// - the backend confines (bwrap, namespaces, Landlock, Seatbelt; never `none`);
/// - a line of the stderr tail either shows that backend's denial ([`dialect::find`]) while the
///   command exited non-zero, and is not a known look-alike ([`dialect::NOT_SANDBOX_DENIALS`]);
///   or, whatever the exit code, is a tool's report that it worked around a denied write
///   ([`recovered::REPORTS`]);
/// - what that line names is something the sandbox forbids and the user could do without it
///   (see the module documentation).
pub fn classify(evidence: &Evidence<'_>) -> Option<Denial> {
    classify_on(evidence, &RealHost)
}

/// [`classify`], asking `host` about paths.
pub fn classify_on(evidence: &Evidence<'_>, host: &dyn Host) -> Option<Denial> {
    if evidence.runner_failed || evidence.refused {
        return None;
    }
    let Some(ExitStatus::Code(code)) = evidence.exit else {
        return None;
    };
    let backend = evidence.backend?;
    if backend == Backend::None {
        return None;
    }
    let text = String::from_utf8_lossy(evidence.stderr_tail);
    let lines: Vec<&str> = text
        .split('\n')
        .map(|line| line.trim_end_matches('\r'))
        .collect();
    let mut judge = Judge {
        scope: evidence.scope,
        host,
        checks_left: MAX_HOST_CHECKS,
    };
    let mut findings = Vec::new();
    let mut worked_around = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if code != 0 {
            findings.extend(judge.line(backend, &lines, i));
        }
        if let Some((finding, instead)) = judge.recovered(line) {
            let around = finding
                .path
                .clone()
                .map(|path| WorkedAround { path, instead });
            if let Some(around) = around.filter(|a| !worked_around.contains(a)) {
                worked_around.push(around);
            }
            findings.push(finding);
        }
    }
    let mut denial = combine(&findings)?;
    denial.worked_around = worked_around;
    Some(denial)
}

/// What the sandbox denied a file tool's own `access` of `path` (absolute), which failed with
/// `errno` under `backend`: judged as a command's line naming that path with that error.
pub fn of_file_access(
    backend: Backend,
    scope: &Scope,
    path: &Path,
    access: Access,
    errno: i32,
) -> Option<Denial> {
    let text = nix::errno::Errno::from_raw(errno).desc();
    let pattern = dialect::find(backend, scope.network, text)?;
    if !matches!(
        pattern.meaning,
        Meaning::ReadOnlyMount | Meaning::FileAccess
    ) {
        return None;
    }
    let mut judge = Judge {
        scope,
        host: &RealHost,
        checks_left: 1,
    };
    let finding = judge.path_finding(path, access, pattern.meaning)?;
    combine(&[finding])
}

/// One denied access, as one line shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Finding {
    kind: Kind,
    /// The narrowest mode that allows it; `None` when not known.
    lifted_by: Option<Mode>,
    /// The file it named, as a real path.
    path: Option<PathBuf>,
}

impl Finding {
    /// Denied in every confined mode.
    fn always(kind: Kind) -> Finding {
        Finding {
            kind,
            lifted_by: Some(Mode::DangerFullAccess),
            path: None,
        }
    }

    /// This finding, about the file at `path`.
    fn at(self, path: &Path) -> Finding {
        Finding {
            path: Some(path.to_path_buf()),
            ..self
        }
    }
}

fn combine(findings: &[Finding]) -> Option<Denial> {
    if findings.is_empty() {
        return None;
    }
    let mut kinds: Vec<Kind> = findings.iter().map(|f| f.kind).collect();
    kinds.sort();
    kinds.dedup();
    let needed = |mode| findings.iter().any(|f| f.lifted_by == Some(mode));
    let lifted_by = if needed(Mode::DangerFullAccess) {
        Some(Mode::DangerFullAccess)
    } else if findings.iter().any(|f| f.lifted_by.is_none()) {
        None
    } else {
        Some(Mode::WorkspaceWrite)
    };
    let mut paths: Vec<PathBuf> = Vec::new();
    for path in findings.iter().filter_map(|f| f.path.as_ref()) {
        if !paths.contains(path) {
            paths.push(path.clone());
        }
    }
    Some(Denial {
        kinds,
        lifted_by,
        paths,
        worked_around: Vec::new(),
    })
}

/// Where a path lies relative to the writable roots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Inside a root, not protected: workspace-write may write it.
    InRoot,
    /// Inside a root, in a protected path.
    Protected,
    Outside,
}

struct Judge<'a> {
    scope: &'a Scope,
    host: &'a dyn Host,
    checks_left: usize,
}

/// The lines that explain line `i`: back to the traceback it ends, or else a few lines.
fn context_of<'a>(lines: &'a [&'a str], i: usize) -> &'a [&'a str] {
    let earliest = i.saturating_sub(dialect::TRACEBACK_LINES);
    let start = (earliest..i)
        .rev()
        .find(|&j| {
            lines
                .get(j)
                .is_some_and(|line| line.starts_with(dialect::TRACEBACK_START))
        })
        .unwrap_or(i.saturating_sub(dialect::CONTEXT_LINES));
    lines.get(start..=i).unwrap_or_default()
}

impl Judge<'_> {
    /// What line `i` of `lines` shows the sandbox denied: nothing, or one finding per path it
    /// denied (`mv a /x` names two).
    fn line(&mut self, backend: Backend, lines: &[&str], i: usize) -> Vec<Finding> {
        let Some(&line) = lines.get(i) else {
            return Vec::new();
        };
        if dialect::NOT_SANDBOX_DENIALS
            .iter()
            .any(|text| line.contains(text))
        {
            return Vec::new();
        }
        let Some(pattern) = dialect::find(backend, self.scope.network, line) else {
            return Vec::new();
        };
        let at = line.find(pattern.text).unwrap_or(0);
        let paths = named::paths(line, at);
        match pattern.meaning {
            Meaning::NoNetwork if self.about_a_unix_socket(lines, i) => {
                vec![Finding::always(Kind::Socket)]
            }
            Meaning::NoNetwork => vec![Finding::always(Kind::Network)],
            Meaning::ReadOnlyMount => {
                if paths.is_empty() {
                    return vec![self.unnamed_write()];
                }
                let access = if has_any(line, dialect::REMOVE_PHRASES) {
                    Access::Remove
                } else {
                    Access::Write
                };
                self.path_findings(&paths, access, Meaning::ReadOnlyMount)
            }
            Meaning::FileAccess => {
                if paths.is_empty() {
                    if self.about_the_network(lines, i) {
                        return vec![Finding::always(Kind::Network)];
                    }
                    return Vec::new();
                }
                self.path_findings(&paths, access_of(line), Meaning::FileAccess)
            }
            Meaning::Filtered => {
                if self.about_the_network(lines, i) {
                    return vec![Finding::always(Kind::Network)];
                }
                if self.about_a_unix_socket(lines, i) {
                    return vec![Finding::always(Kind::Socket)];
                }
                if !paths.is_empty() && has_any(line, dialect::METADATA_PHRASES) {
                    // The filter refuses metadata changes in read-only mode only; in
                    // workspace-write an EPERM on a file's metadata is the host's answer.
                    if self.scope.mode != Mode::ReadOnly {
                        return Vec::new();
                    }
                    return self.path_findings(&paths, Access::Metadata, Meaning::Filtered);
                }
                vec![Finding::always(Kind::SystemInterface)]
            }
        }
    }

    /// What a tool's report in `line` ([`recovered::find`]) shows the sandbox denied, and what
    /// the tool did instead: a write of the path it names, judged as a write refused by the
    /// backend's rules (inside a writable root, the file's own in workspace-write).
    fn recovered(&mut self, line: &str) -> Option<(Finding, &'static str)> {
        let (report, given) = recovered::find(line)?;
        if !report.for_root && self.host.is_root() {
            return None;
        }
        let finding = self.path_finding(Path::new(given), Access::Write, Meaning::FileAccess)?;
        Some((finding, report.instead))
    }

    /// A read-only mount refused a write that named no path.
    fn unnamed_write(&self) -> Finding {
        Finding {
            kind: Kind::FileWrite,
            lifted_by: match self.scope.mode {
                // It may have been inside the workspace.
                Mode::ReadOnly => None,
                _ => Some(Mode::DangerFullAccess),
            },
            path: None,
        }
    }

    /// Whether the network is denied and line `i` is about a network call: the line itself,
    /// the traceback it ends, or else the few lines before it say so (and not that it was a
    /// Unix socket).
    fn about_the_network(&self, lines: &[&str], i: usize) -> bool {
        if self.scope.network != Network::Deny {
            return false;
        }
        let context = context_of(lines, i);
        context
            .iter()
            .any(|line| has_any(line, dialect::NETWORK_CONTEXT))
            && !self.about_a_unix_socket(lines, i)
    }

    /// Whether line `i` (with the traceback it ends, or the few lines before it) is about a
    /// Unix socket.
    fn about_a_unix_socket(&self, lines: &[&str], i: usize) -> bool {
        context_of(lines, i)
            .iter()
            .any(|line| has_any(line, dialect::UNIX_SOCKET_CONTEXT))
    }

    /// A finding for each of `paths` whose `access` the sandbox forbids (refused as `meaning`
    /// says) and the host permits.
    fn path_findings(
        &mut self,
        paths: &[String],
        access: Access,
        meaning: Meaning,
    ) -> Vec<Finding> {
        paths
            .iter()
            .filter_map(|path| self.path_finding(Path::new(path), access, meaning))
            .collect()
    }

    fn path_finding(&mut self, given: &Path, access: Access, meaning: Meaning) -> Option<Finding> {
        if self.checks_left == 0 {
            return None;
        }
        self.checks_left -= 1;
        let path = self.scope.cwd.join(given);
        let real = self.host.resolve(&path)?;
        // What the user could not do without the sandbox either, the sandbox did not deny.
        if !self.host.permits(&real, access) {
            return None;
        }
        if access == Access::Read {
            return Some(Finding::always(Kind::FileRead).at(&real));
        }
        let finding = match (self.place(&real), self.scope.mode) {
            (Place::Protected, _) => Finding::always(Kind::ProtectedPath),
            (Place::Outside, _) => Finding::always(Kind::FileWrite),
            (Place::InRoot, Mode::ReadOnly) => Finding {
                kind: Kind::FileWrite,
                lifted_by: Some(Mode::WorkspaceWrite),
                path: None,
            },
            // Inside a writable root the only read-only mounts bwrap (or the namespace
            // backend, with the same binds) makes are the protected paths, also those agentd
            // cannot name (a git directory a `.git` file points to); a read-only mount of the
            // host's own the host check has already ruled out.
            (Place::InRoot, _) if meaning == Meaning::ReadOnlyMount => {
                Finding::always(Kind::ProtectedPath)
            }
            (Place::InRoot, _) => return None,
        };
        Some(finding.at(&real))
    }

    fn place(&self, real: &Path) -> Place {
        let Some(inside) = self
            .scope
            .roots
            .iter()
            .find_map(|root| real.strip_prefix(root).ok())
        else {
            return Place::Outside;
        };
        let git = inside
            .components()
            .any(|part| PROTECTED_SUBPATHS.iter().any(|p| part.as_os_str() == *p));
        let requested = self.scope.protected.iter().any(|p| inside.starts_with(p));
        if git || requested {
            Place::Protected
        } else {
            Place::InRoot
        }
    }
}

/// What a file-access line says was refused: a read by its program or wording, a removal by
/// its wording, else a write.
fn access_of(line: &str) -> Access {
    let program = line
        .split(':')
        .next()
        .unwrap_or_default()
        .rsplit('/')
        .next()
        .unwrap_or_default();
    if dialect::READ_PROGRAMS.contains(&program) || has_any(line, dialect::READ_PHRASES) {
        Access::Read
    } else if has_any(line, dialect::REMOVE_PHRASES) {
        Access::Remove
    } else {
        Access::Write
    }
}

fn has_any(line: &str, phrases: &[&str]) -> bool {
    phrases.iter().any(|phrase| line.contains(phrase))
}

#[cfg(test)]
mod tests;
