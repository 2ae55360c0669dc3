//! The file reader and writer agentd's file tools and checkpoint restore run confined: where
//! agentd finds the program ([`FILE_IO_PROGRAM`], crate `file-io`) and the one `Spawn` each
//! read or write becomes.
//!
//! The program is an ordinary command to confine-helper: the request is a `Spawn` under the
//! policy and backend a `bash` command of the same mode gets, so the kernel decides where a
//! write may land and what a read may see. Nothing here widens that; the checks below only keep
//! a request that could not mean what it says (a relative path, a NUL byte, no program) from
//! being sent at all.
//!
//! The program is looked for, in order: the path given by `$AGENTD_FILE_IO` or `helper.file_io`
//! (final: a wrong one is an error, never a reason to look elsewhere), then beside the helper
//! binary agentd starts, then beside agentd itself (a service's helper is not agentd's to know;
//! packages install both in one directory). It is named by its resolved path, which is how the
//! helper recognises the program beside its own binary and runs it from a descriptor it holds,
//! whatever a sandbox's private `/tmp` hides.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use confine_protocol::{BackendChoice, FILE_IO_PROGRAM, Policy};

use super::SpawnSpec;
use super::endpoint::FileOpError;
use super::locate::{Probe, probe};

/// A file to replace, confined: the writer runs under `policy` exactly as a command would (see
/// [`HelperClient::write_file`](super::HelperClient::write_file)).
#[derive(Debug)]
pub struct WriteSpec {
    /// The file, absolute.
    pub path: PathBuf,
    /// Create missing parent directories.
    pub make_parents: bool,
    pub policy: Policy,
    pub backend: BackendChoice,
    pub timeout_ms: Option<u64>,
    /// The new content, read by the writer to its end (a sealed memfd, say).
    pub content: OwnedFd,
    /// Where the writer's one-record report goes.
    pub report: OwnedFd,
    /// Keep the file the write replaces: the writer copies it there just before, and its
    /// report carries one more field (`confine-file-io write --previous`).
    pub previous: Option<KeepPrevious>,
}

/// Where a writer copies the file it replaces, and at most how much of it.
#[derive(Debug)]
pub struct KeepPrevious {
    pub content: OwnedFd,
    /// A larger old file is not copied (the report says `unread`).
    pub max_bytes: u64,
}

/// A file to read, confined: the reader runs under `policy` exactly as a command would (see
/// [`HelperClient::read_file`](super::HelperClient::read_file)).
#[derive(Debug)]
pub struct ReadSpec {
    /// The file, absolute.
    pub path: PathBuf,
    /// Larger files are refused.
    pub max_bytes: u64,
    pub policy: Policy,
    pub backend: BackendChoice,
    pub timeout_ms: Option<u64>,
    /// Where the content goes.
    pub content: OwnedFd,
    /// Where the reader's one-record report goes.
    pub report: OwnedFd,
}

/// A file to edit in one confined run: the program reads it as `read` says (the content and
/// the count of what it read), gives that up, and writes what agentd answers on `answer`
/// (`confine-file-io edit`; see [`HelperClient::edit_file`](super::HelperClient::edit_file)).
#[derive(Debug)]
pub struct EditSpec {
    pub read: ReadSpec,
    /// Where agentd's answer comes from: `w` and the new content, or nothing.
    pub answer: OwnedFd,
}

/// The program's path given explicitly, and by what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GivenFileIo {
    pub path: PathBuf,
    /// The setting that gave it (`$AGENTD_FILE_IO`, `helper.file_io in FILE`), for messages.
    pub by: String,
}

/// Finds the program: `given` if set, else beside `helper` (the binary agentd starts), else in
/// `agentd_dir`. The result is resolved (see the module's doc).
pub fn locate_file_io(
    given: Option<&GivenFileIo>,
    helper: Option<&Path>,
    agentd_dir: Option<&Path>,
) -> Result<PathBuf, FileOpError> {
    if let Some(given) = given {
        return match probe(&given.path) {
            Probe::Executable => Ok(resolved_program(&given.path)),
            Probe::Absent | Probe::NotExecutable => Err(FileOpError::NotExecutable {
                path: given.path.clone(),
                by: given.by.clone(),
            }),
        };
    }
    let beside_helper = helper.and_then(Path::parent);
    let mut looked = Vec::new();
    for dir in beside_helper.into_iter().chain(agentd_dir) {
        let candidate = dir.join(FILE_IO_PROGRAM);
        match probe(&candidate) {
            Probe::Executable => return Ok(resolved_program(&candidate)),
            Probe::NotExecutable => {
                return Err(FileOpError::NotExecutable {
                    by: "the search beside confine-helper and agentd".to_owned(),
                    path: candidate,
                });
            }
            Probe::Absent => looked.push(candidate),
        }
    }
    Err(FileOpError::NotFound { looked })
}

/// `path` with every link resolved, as the helper names the program beside it; as given if it
/// cannot be resolved (it is then run by that path).
fn resolved_program(path: &Path) -> PathBuf {
    std::fs::canonicalize(path)
        .unwrap_or_else(|_| std::path::absolute(path).unwrap_or_else(|_| path.to_owned()))
}

/// One run of the program on one file: its mode's arguments, the file, and the run's rules.
struct FileRun<'a> {
    args: Vec<OsString>,
    path: &'a Path,
    policy: Policy,
    backend: BackendChoice,
    timeout_ms: Option<u64>,
}

impl FileRun<'_> {
    /// The command: `program ARGS -- PATH` in `/`, with no environment, no kill grace (a killed
    /// writer leaves nothing to clean up) and the stdio the caller sets.
    fn spawn(self, program: &Path) -> Result<SpawnSpec, FileOpError> {
        if !self.path.is_absolute() {
            return Err(FileOpError::NotAbsolute {
                path: self.path.to_owned(),
            });
        }
        if self.path.as_os_str().as_bytes().contains(&0) {
            return Err(FileOpError::NulByte {
                path: self.path.to_owned(),
            });
        }
        let mut argv = vec![program.as_os_str().to_owned()];
        argv.extend(self.args);
        argv.extend([OsString::from("--"), self.path.as_os_str().to_owned()]);
        let mut spec = SpawnSpec::new(argv);
        spec.policy = self.policy;
        spec.backend = self.backend;
        spec.limits.timeout_ms = self.timeout_ms;
        spec.limits.kill_grace_ms = 0;
        Ok(spec)
    }
}

impl WriteSpec {
    /// The writer's command: the content on stdin, the report on stdout; or, keeping the
    /// file it replaces, that file on stdout and the report on stderr, as a reader's.
    pub(super) fn into_spawn(self, program: &Path) -> Result<SpawnSpec, FileOpError> {
        let mut args = vec![OsString::from("write")];
        if self.make_parents {
            args.push(OsString::from("--parents"));
        }
        if let Some(previous) = &self.previous {
            args.push(OsString::from("--previous"));
            args.push(OsString::from(previous.max_bytes.to_string()));
        }
        let run = FileRun {
            args,
            path: &self.path,
            policy: self.policy,
            backend: self.backend,
            timeout_ms: self.timeout_ms,
        };
        let mut spec = run.spawn(program)?;
        spec.stdin = Some(self.content);
        match self.previous {
            Some(previous) => {
                spec.stdout = Some(previous.content);
                spec.stderr = Some(self.report);
            }
            None => spec.stdout = Some(self.report),
        }
        Ok(spec)
    }
}

impl ReadSpec {
    /// The reader's command: the content on stdout, the report on stderr.
    pub(super) fn into_spawn(self, program: &Path) -> Result<SpawnSpec, FileOpError> {
        self.spawn_as("read", program)
    }

    /// The program in `mode` (`read` or `edit`) with this read's arguments and streams.
    fn spawn_as(self, mode: &str, program: &Path) -> Result<SpawnSpec, FileOpError> {
        let run = FileRun {
            args: vec![
                OsString::from(mode),
                OsString::from("--max"),
                OsString::from(self.max_bytes.to_string()),
            ],
            path: &self.path,
            policy: self.policy,
            backend: self.backend,
            timeout_ms: self.timeout_ms,
        };
        let mut spec = run.spawn(program)?;
        spec.stdout = Some(self.content);
        spec.stderr = Some(self.report);
        Ok(spec)
    }
}

impl EditSpec {
    /// The edit's command: the answer on stdin, the content on stdout, the report on stderr.
    pub(super) fn into_spawn(self, program: &Path) -> Result<SpawnSpec, FileOpError> {
        let mut spec = self.read.spawn_as("edit", program)?;
        spec.stdin = Some(self.answer);
        Ok(spec)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::ffi::OsStringExt;
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::test_support::Scratch;

    fn program_in(dir: &Path, mode: u32) -> PathBuf {
        let path = dir.join(FILE_IO_PROGRAM);
        std::fs::write(&path, b"#!/bin/sh\n").expect("write program");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        path
    }

    fn fd() -> OwnedFd {
        OwnedFd::from(std::fs::File::open("/dev/null").expect("/dev/null"))
    }

    /// The command's words, as text.
    fn words(spec: &SpawnSpec) -> Vec<&str> {
        spec.argv.iter().filter_map(|a| a.to_str()).collect()
    }

    fn write_spec(path: &str) -> WriteSpec {
        WriteSpec {
            path: PathBuf::from(path),
            make_parents: true,
            policy: SpawnSpec::new(["x"]).policy,
            backend: BackendChoice::Bwrap,
            timeout_ms: Some(5_000),
            content: fd(),
            report: fd(),
            previous: None,
        }
    }

    #[test]
    fn a_write_is_the_program_in_write_mode_with_content_in_and_report_out() {
        let spec = write_spec("/w/a b.txt")
            .into_spawn(Path::new("/opt/confine-file-io"))
            .expect("a valid write");
        assert_eq!(
            words(&spec),
            [
                "/opt/confine-file-io",
                "write",
                "--parents",
                "--",
                "/w/a b.txt"
            ]
        );
        assert_eq!(spec.cwd, Path::new("/"));
        assert!(spec.env.is_empty());
        assert_eq!(spec.backend, BackendChoice::Bwrap);
        assert_eq!(spec.limits.timeout_ms, Some(5_000));
        assert_eq!(spec.limits.kill_grace_ms, 0);
        assert!(spec.stdin.is_some() && spec.stdout.is_some() && spec.stderr.is_none());
        assert!(spec.proxy.is_none());
    }

    #[test]
    fn a_write_keeping_what_it_replaces_asks_for_it_and_reports_on_stderr() {
        let mut write = write_spec("/w/x");
        write.previous = Some(KeepPrevious {
            content: fd(),
            max_bytes: 64,
        });
        let spec = write
            .into_spawn(Path::new("/opt/confine-file-io"))
            .expect("a valid write");
        assert_eq!(
            words(&spec),
            [
                "/opt/confine-file-io",
                "write",
                "--parents",
                "--previous",
                "64",
                "--",
                "/w/x"
            ]
        );
        assert!(spec.stdin.is_some() && spec.stdout.is_some() && spec.stderr.is_some());
    }

    fn read_spec() -> ReadSpec {
        ReadSpec {
            path: PathBuf::from("/w/x"),
            max_bytes: 10,
            policy: SpawnSpec::new(["x"]).policy,
            backend: BackendChoice::Auto,
            timeout_ms: None,
            content: fd(),
            report: fd(),
        }
    }

    #[test]
    fn a_read_is_the_program_in_read_mode_with_content_and_report_out() {
        let spec = read_spec()
            .into_spawn(Path::new("/opt/confine-file-io"))
            .expect("a valid read");
        assert_eq!(
            words(&spec),
            ["/opt/confine-file-io", "read", "--max", "10", "--", "/w/x"]
        );
        assert!(spec.stdin.is_none() && spec.stdout.is_some() && spec.stderr.is_some());
    }

    #[test]
    fn an_edit_is_the_program_in_edit_mode_with_answer_in_and_content_and_report_out() {
        let edit = EditSpec {
            read: read_spec(),
            answer: fd(),
        };
        let spec = edit
            .into_spawn(Path::new("/opt/confine-file-io"))
            .expect("a valid edit");
        assert_eq!(
            words(&spec),
            ["/opt/confine-file-io", "edit", "--max", "10", "--", "/w/x"]
        );
        assert!(spec.stdin.is_some() && spec.stdout.is_some() && spec.stderr.is_some());
    }

    #[test]
    fn a_relative_path_or_a_nul_byte_is_not_sent() {
        let program = Path::new("/opt/confine-file-io");
        // The control: the same request with an absolute path is sent.
        assert!(write_spec("/w/rel.txt").into_spawn(program).is_ok());
        let err = write_spec("rel.txt")
            .into_spawn(program)
            .expect_err("relative");
        assert!(matches!(err, FileOpError::NotAbsolute { .. }), "{err}");
        assert!(err.to_string().contains("rel.txt"), "{err}");
        let mut spec = write_spec("/w/x");
        spec.path = PathBuf::from(OsString::from_vec(b"/w/a\0b".to_vec()));
        let err = spec.into_spawn(program).expect_err("NUL");
        assert!(matches!(err, FileOpError::NulByte { .. }), "{err}");
    }

    #[test]
    fn the_program_is_found_beside_the_helper_then_beside_agentd() {
        let s = Scratch::new("file-io-locate");
        let helper_dir = s.dir("helper");
        let agentd_dir = s.dir("agentd");
        let helper = helper_dir.join("confine-helper");
        let beside_agentd = program_in(&agentd_dir, 0o755);
        assert_eq!(
            locate_file_io(None, Some(&helper), Some(&agentd_dir)),
            Ok(resolved_program(&beside_agentd))
        );
        let beside_helper = program_in(&helper_dir, 0o755);
        assert_eq!(
            locate_file_io(None, Some(&helper), Some(&agentd_dir)),
            Ok(resolved_program(&beside_helper))
        );
    }

    #[test]
    fn a_missing_program_names_where_it_was_looked_for_and_what_to_do() {
        let s = Scratch::new("file-io-missing");
        let helper = s.dir("helper").join("confine-helper");
        let agentd_dir = s.dir("agentd");
        let err = locate_file_io(None, Some(&helper), Some(&agentd_dir)).expect_err("absent");
        let text = err.to_string();
        assert!(
            text.contains(&s.dir("helper").join(FILE_IO_PROGRAM).display().to_string()),
            "{text}"
        );
        assert!(
            text.contains(&agentd_dir.join(FILE_IO_PROGRAM).display().to_string()),
            "{text}"
        );
        assert!(text.contains("AGENTD_FILE_IO"), "{text}");
        assert!(
            text.contains("cargo build --release -p confine-file-io"),
            "{text}"
        );
    }

    #[test]
    fn a_given_path_is_final_and_must_be_executable() {
        let s = Scratch::new("file-io-given");
        let beside = program_in(&s.dir("helper"), 0o755);
        let helper = beside.with_file_name("confine-helper");
        let not_executable = program_in(&s.dir("given"), 0o644);
        let given = GivenFileIo {
            path: not_executable.clone(),
            by: "$AGENTD_FILE_IO".to_owned(),
        };
        let err = locate_file_io(Some(&given), Some(&helper), None).expect_err("not executable");
        assert_eq!(
            err,
            FileOpError::NotExecutable {
                path: not_executable.clone(),
                by: "$AGENTD_FILE_IO".to_owned()
            }
        );
        std::fs::set_permissions(&not_executable, std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        assert_eq!(
            locate_file_io(Some(&given), Some(&helper), None),
            Ok(resolved_program(&not_executable))
        );
    }
}
