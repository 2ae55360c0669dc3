//! The commands a `WriteFile` or `ReadFile` request becomes: the helper's own binary, run
//! confined under the request's policy, on one file.

use std::os::unix::ffi::OsStrExt;

use confine_protocol::{
    BackendChoice, Limits, Policy, ReadFile, Refusal, Spawn, Stage, Stdio, StdioSpec, WriteFile,
};

use crate::confine::{Context, NotRun};

/// The command a `WriteFile` becomes: the helper's own binary in `write-file` mode, with the
/// content on stdin and the report pipe on stdout. The second value is why it must not run, if
/// it must not.
pub(crate) fn write_spawn(write: &WriteFile, ctx: &Context) -> (Spawn, Option<NotRun>) {
    let mut args = vec![b"write-file".to_vec()];
    if write.make_parents {
        args.push(b"--parents".to_vec());
    }
    let stdio = Stdio {
        stdin: StdioSpec::Fd,
        stdout: StdioSpec::Fd,
        stderr: StdioSpec::Null,
    };
    let op = OwnProgram {
        id: write.id,
        args,
        path: &write.path,
        policy: &write.policy,
        backend: write.backend,
        timeout_ms: write.timeout_ms,
        stdio,
    };
    op.spawn(ctx)
}

/// The command a `ReadFile` becomes: the helper's own binary in `read-file` mode, with the
/// content pipe on stdout and the report pipe on stderr.
pub(crate) fn read_spawn(read: &ReadFile, ctx: &Context) -> (Spawn, Option<NotRun>) {
    let stdio = Stdio {
        stdin: StdioSpec::Null,
        stdout: StdioSpec::Fd,
        stderr: StdioSpec::Fd,
    };
    let op = OwnProgram {
        id: read.id,
        args: vec![
            b"read-file".to_vec(),
            b"--max".to_vec(),
            read.max_bytes.to_string().into_bytes(),
        ],
        path: &read.path,
        policy: &read.policy,
        backend: read.backend,
        timeout_ms: read.timeout_ms,
        stdio,
    };
    op.spawn(ctx)
}

/// A run of the helper's own binary on one file, under a request's policy.
struct OwnProgram<'a> {
    id: u64,
    args: Vec<Vec<u8>>,
    path: &'a [u8],
    policy: &'a Policy,
    backend: BackendChoice,
    timeout_ms: Option<u64>,
    stdio: Stdio,
}

impl OwnProgram<'_> {
    fn spawn(self, ctx: &Context) -> (Spawn, Option<NotRun>) {
        let mut problem = None;
        let exe = match &ctx.self_exe {
            Some(exe) => exe.as_os_str().as_bytes().to_vec(),
            None => {
                problem = Some(NotRun::RunnerFailed(
                    Stage::Prepare,
                    0,
                    "the helper cannot find its own binary, which reads and writes files confined"
                        .into(),
                ));
                b"confine-helper".to_vec()
            }
        };
        if self.path.first() != Some(&b'/') {
            problem = Some(NotRun::Refused(Refusal::RelativeFilePath));
        } else if self.path.contains(&0) {
            problem = Some(NotRun::Refused(Refusal::NulInFilePath));
        }
        let mut argv = vec![exe];
        argv.extend(self.args);
        argv.extend([b"--".to_vec(), self.path.to_vec()]);
        let spawn = Spawn {
            id: self.id,
            argv,
            cwd: b"/".to_vec(),
            env: Vec::new(),
            policy: self.policy.clone(),
            backend: self.backend,
            limits: Limits::none().with_timeout(self.timeout_ms),
            stdio: self.stdio,
            proxy: false,
        };
        (spawn, problem)
    }
}
