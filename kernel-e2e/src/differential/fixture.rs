//! Making one policy's fixture: its directories, files and repositories, owned by the user who
//! runs agentd, and the paths of the corpus that go with them.

use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::script::{Probe, Write};
use crate::agentd::Launcher;
use crate::error::E2eError;
use crate::git;
use crate::matrix::Mode;

/// One policy: what `agentd run` is given, the paths asked about, and the canaries.
#[derive(Debug, Clone)]
pub struct Policy {
    /// `NN name`, also the name of its directory.
    pub name: &'static str,
    pub mode: Mode,
    pub workspace: PathBuf,
    /// `--cwd`, when the command runs elsewhere than in the workspace.
    pub cwd: Option<PathBuf>,
    pub writable_roots: Vec<PathBuf>,
    /// `--protect SUBPATH`.
    pub protect: Vec<&'static str>,
    pub deny_read: Vec<OsString>,
    pub probes: Vec<Probe>,
    /// The test's own paths the policy keeps from every write, which must be as they were
    /// after each run.
    pub canaries: Vec<PathBuf>,
}

/// The paths every policy asks about, besides its own: the host's, and the command's temp
/// directory, home and working directory as it names them.
const GLOBAL: [(&str, Write); 10] = [
    ("/", Write::Never),
    ("/etc/passwd", Write::Never),
    ("/proc/self", Write::Never),
    ("/dev/null", Write::Open),
    ("/dev/shm", Write::Real),
    ("/tmp", Write::Real),
    ("$TMPDIR", Write::Real),
    ("$TMPDIR/..", Write::Never),
    ("$HOME", Write::Real),
    ("$PWD", Write::Real),
];

/// A policy being made: its directories, what agentd will be given, and the corpus so far.
#[derive(Debug)]
pub struct Fixture<'a> {
    launcher: &'a Launcher,
    /// The test's directories, inside which everything of the fixture lies.
    scratch: [PathBuf; 2],
    /// This policy's directory (labels are relative to it).
    pub dir: PathBuf,
    /// This policy's directory under the host's `/tmp` (labelled `host-tmp`).
    pub host_tmp: PathBuf,
    pub name: &'static str,
    pub mode: Mode,
    pub workspace: PathBuf,
    pub cwd: Option<PathBuf>,
    pub writable_roots: Vec<PathBuf>,
    pub protect: Vec<&'static str>,
    pub deny_read: Vec<OsString>,
    probes: Vec<Probe>,
    /// The protected and denied paths: kept from every write, inside a writable root too.
    kept: Vec<PathBuf>,
}

impl<'a> Fixture<'a> {
    /// A fixture in `dir` and `host_tmp` (made, with a canary file in the latter, which a
    /// private `/tmp` hides), both inside `scratch`.
    pub fn new(
        launcher: &'a Launcher,
        scratch: [PathBuf; 2],
        name: &'static str,
        dir: PathBuf,
        host_tmp: PathBuf,
    ) -> Result<Fixture<'a>, E2eError> {
        let mut fixture = Fixture {
            launcher,
            scratch,
            workspace: dir.join("ws"),
            dir,
            host_tmp,
            name,
            mode: Mode::WorkspaceWrite,
            cwd: None,
            writable_roots: Vec::new(),
            protect: Vec::new(),
            deny_read: Vec::new(),
            probes: Vec::new(),
            kept: Vec::new(),
        };
        fixture.mkdir(&fixture.dir.clone())?;
        let host_tmp = fixture.host_tmp.clone();
        fixture.mkdir(&host_tmp)?;
        fixture.anchor(&host_tmp, Some("canary"))?;
        Ok(fixture)
    }

    /// Makes `path` and any missing directory above it, each 0755 and the user's.
    pub fn mkdir(&self, path: &Path) -> Result<PathBuf, E2eError> {
        let missing: Vec<&Path> = path.ancestors().take_while(|p| !p.exists()).collect();
        for dir in missing.into_iter().rev() {
            fs::create_dir(dir)
                .and_then(|()| fs::set_permissions(dir, fs::Permissions::from_mode(0o755)))
                .and_then(|()| self.launcher.user.give(dir))
                .map_err(|e| trouble!("cannot make {}: {e}", dir.display()))?;
        }
        Ok(path.to_owned())
    }

    /// Writes a file (0644, the user's) and any missing directory above it.
    pub fn file(&self, path: &Path, content: &str) -> Result<PathBuf, E2eError> {
        if let Some(parent) = path.parent() {
            self.mkdir(parent)?;
        }
        fs::write(path, content)
            .and_then(|()| fs::set_permissions(path, fs::Permissions::from_mode(0o644)))
            .and_then(|()| self.launcher.user.give(path))
            .map_err(|e| trouble!("cannot write {}: {e}", path.display()))?;
        Ok(path.to_owned())
    }

    /// Runs git in `dir` as the user, outside any sandbox; fails unless it succeeds.
    pub fn git(&self, dir: &Path, args: &[&str]) -> Result<(), E2eError> {
        let label = format!("fixture: git {}", args.join(" "));
        let run = git::run(self.launcher, &label, dir, args)?;
        if run.status != Some(0) {
            return Err(trouble!(
                "cannot make the fixture of {}: git {} failed\n{}",
                self.name,
                args.join(" "),
                run.describe()
            ));
        }
        Ok(())
    }

    /// A repository in `dir` (made if missing) with one commit of the file `tracked`.
    pub fn repo(&self, dir: &Path) -> Result<PathBuf, E2eError> {
        self.mkdir(dir)?;
        self.git(dir, &["init", "-q", "-b", "main"])?;
        self.file(&dir.join("tracked"), "tracked by the user\n")?;
        self.git(dir, &["add", "tracked"])?;
        self.git(dir, &["commit", "-q", "-m", "the user's commit"])?;
        Ok(dir.to_owned())
    }

    /// Asks about `path`, its parent, a file `beside` it (made) and, for a directory, its
    /// `child` (made as a file when missing). Every path made is the test's own.
    pub fn anchor(&mut self, path: &Path, child: Option<&str>) -> Result<(), E2eError> {
        self.probe(path);
        if let Some(parent) = path.parent().filter(|p| self.is_scratch(p)) {
            self.probe(parent);
            let beside = parent.join("beside");
            if !beside.exists() {
                self.file(&beside, "beside\n")?;
            }
            self.probe(&beside);
        }
        if let Some(child) = child {
            let inside = path.join(child);
            if !inside.exists() {
                self.file(&inside, "inside\n")?;
            }
            self.probe(&inside);
        }
        Ok(())
    }

    /// A writable root (the workspace is one in workspace-write; these are given with
    /// `--writable-root`), asked about as [`Fixture::anchor`] says.
    pub fn root(&mut self, path: &Path, child: Option<&str>) -> Result<(), E2eError> {
        if *path != self.workspace {
            self.writable_roots.push(path.to_owned());
        }
        self.anchor(path, child)
    }

    /// A path the policy keeps read-only inside a writable root (a repository's metadata, a
    /// `--protect`ed subpath) or hides (a denied read): asked about, and a canary.
    pub fn kept(&mut self, path: &Path, child: Option<&str>) -> Result<(), E2eError> {
        self.kept.push(path.to_owned());
        self.anchor(path, child)
    }

    fn is_scratch(&self, path: &Path) -> bool {
        self.scratch
            .iter()
            .any(|s| path.starts_with(s) && path != s)
    }

    fn label(&self, path: &Path) -> String {
        if let Ok(rest) = path.strip_prefix(&self.dir) {
            return match rest.as_os_str().is_empty() {
                true => ".".to_owned(),
                false => rest.display().to_string(),
            };
        }
        match path.strip_prefix(&self.host_tmp) {
            Ok(rest) if rest.as_os_str().is_empty() => "host-tmp".to_owned(),
            Ok(rest) => format!("host-tmp/{}", rest.display()),
            Err(_) => path.display().to_string(),
        }
    }

    fn probe(&mut self, path: &Path) {
        let label = self.label(path);
        if !self.probes.iter().any(|p| p.label == label) {
            self.probes.push(Probe {
                label,
                target: path.as_os_str().to_owned(),
                write: Write::Real,
            });
        }
    }

    /// The policy, with the paths every policy asks about, and its canaries: each of the
    /// test's paths asked about that the policy keeps (read-only mode keeps them all; else
    /// those outside every writable root, and every protected or denied path).
    pub fn finish(mut self) -> Policy {
        for (path, write) in GLOBAL {
            self.probes.push(Probe {
                label: path.to_owned(),
                target: path.into(),
                write,
            });
        }
        let roots: Vec<&Path> = std::iter::once(self.workspace.as_path())
            .chain(self.writable_roots.iter().map(PathBuf::as_path))
            .collect();
        let keeps = |path: &Path| {
            self.mode == Mode::ReadOnly
                || !roots.iter().any(|r| path.starts_with(r))
                || self.kept.iter().any(|k| path.starts_with(k))
        };
        let canaries = self
            .probes
            .iter()
            .map(|p| PathBuf::from(&p.target))
            .filter(|p| self.is_scratch(p) && keeps(p))
            .collect();
        Policy {
            name: self.name,
            mode: self.mode,
            workspace: self.workspace,
            cwd: self.cwd,
            writable_roots: self.writable_roots,
            protect: self.protect,
            deny_read: self.deny_read,
            probes: self.probes,
            canaries,
        }
    }
}
