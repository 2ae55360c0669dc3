//! A forked command: its shim is started from a plan, receives orders, and its records become
//! the replies.

use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use confine_protocol::{
    Backend, Caps, Ending, Enforcement, ExitStatus, Exited, Layer, Reply, RunnerFailed, Spawn,
    Stage, StdioSpec, Usage,
};
use nix::libc;
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;

use crate::confine::{Cleanup, Planned};
#[cfg(target_os = "linux")]
use crate::enter::Entered;
use crate::record::{Record, exec_failure_code};
use crate::sys;

/// A command the helper has forked and not yet reported as ended.
#[derive(Debug)]
pub(crate) struct Running {
    pub(crate) id: u64,
    pub(crate) shim: Pid,
    /// Read end of the shim's status pipe (non-blocking).
    pub(crate) status: OwnedFd,
    /// Write end of the shim's ctl pipe; dropping it kills the tree.
    pub(crate) ctl: Option<OwnedFd>,
    pub(crate) started_at: Instant,
    pub(crate) deadline: Option<Instant>,
    pub(crate) kill_grace: Duration,
    pub(crate) kill_at: Option<Instant>,
    pub(crate) ending: Ending,
    pub(super) backend: Backend,
    pub(super) enforcement: Option<Enforcement>,
    pub(super) layers: Vec<Layer>,
    /// The read end of `enter`'s report pipe (bwrap with the Landlock layer).
    #[cfg(target_os = "linux")]
    pub(super) layer_report: Option<OwnedFd>,
    /// The caps on the tree; a cgroup among them is read at the end and removed with it.
    pub(super) caps: Planned,
    /// What the plan made (a temporary directory), removed as the shim is reaped.
    pub(super) cleanup: Cleanup,
    pub(super) pending: Vec<u8>,
    pub(super) outcome: Option<Record>,
}
/// The detail of a step the shim or the command reported failed with `errno`: where it failed
/// and why; the stage travels beside it, so it is not named here again.
pub(crate) fn step_failed(errno: i32) -> String {
    format!(
        "before the command's execve: {}",
        nix::Error::from_raw(errno).desc()
    )
}

/// The detail of a namespace backend's sandbox the shim could not build (`sys::sandbox`), with
/// what the two errors only its checks give mean there.
pub(super) fn sandbox_failed(errno: i32) -> String {
    let why = match nix::Error::from_raw(errno) {
        nix::Error::ESTALE => "a path it binds was replaced after the helper checked it".into(),
        nix::Error::ELOOP => "a link stands where it mounts, or on the way there".into(),
        nix::Error::ENOSPC => "the most namespaces this user may have exist already \
                               (user.max_user_namespaces and its kind)"
            .into(),
        e @ (nix::Error::EPERM | nix::Error::EACCES) => format!(
            "{}: this user may not make or use the namespaces here (unprivileged user \
             namespaces are off, or an AppArmor rule keeps them from programs without a profile \
             of their own, as Ubuntu's kernel.apparmor_restrict_unprivileged_userns does)",
            e.desc()
        ),
        other => other.desc().to_owned(),
    };
    format!("building the sandbox failed: {why}; nothing was run")
}

impl Running {
    /// Sends one order to the shim. A shim that is already gone needs no order.
    pub(crate) fn order(&self, byte: u8) {
        if let Some(ctl) = &self.ctl {
            let _ = nix::unistd::write(ctl, &[byte]);
        }
    }

    /// Starts terminating the tree for `ending`: SIGTERM now, SIGKILL after `grace`.
    pub(crate) fn terminate(&mut self, ending: Ending, grace: Duration, now: Instant) {
        if self.ending == Ending::Exited {
            self.ending = ending;
        }
        self.deadline = None;
        self.order(sys::CTL_TERMINATE);
        let kill_at = now + grace;
        self.kill_at = Some(self.kill_at.map_or(kill_at, |k| k.min(kill_at)));
    }

    /// Reads what the shim wrote. Returns `Started` as soon as it arrives, and `true` in the
    /// second slot once the shim has closed its end (it exited).
    pub(crate) fn read_status(&mut self) -> (Option<Reply>, bool) {
        let mut started = None;
        let mut buf = [0u8; Record::SIZE * 4];
        loop {
            match nix::unistd::read(&self.status, &mut buf) {
                Ok(0) => return (started, true),
                Ok(n) => self.pending.extend(buf.iter().take(n)),
                Err(nix::Error::EINTR) => continue,
                Err(nix::Error::EAGAIN) => break,
                Err(_) => return (started, true),
            }
            while let Some(&raw) = self.pending.first_chunk::<{ Record::SIZE }>() {
                self.pending.drain(..Record::SIZE);
                match Record::decode(&raw) {
                    Some(Record::Started { pid }) => {
                        started = Some(Reply::Started(confine_protocol::Started {
                            id: self.id,
                            pid,
                        }));
                    }
                    other => self.outcome = other,
                }
            }
        }
        (started, false)
    }

    /// The backend that confines the command.
    pub(crate) fn backend(&self) -> Backend {
        self.backend
    }

    /// The terminal reply as soon as the shim's last record says the command ended: the shim
    /// writes it once it has killed and reaped the whole tree, and only exits after it, so the
    /// reply need not wait for that exit ([`Running::reap`] follows). `None` before that
    /// record, after a failed step (the shim may still hold a tree), and while `enter`'s report
    /// is to be read (bwrap with the Landlock layer), which is read at the end.
    pub(crate) fn reply_early(&self) -> Option<Reply> {
        let last = matches!(
            self.outcome,
            Some(Record::Exited { .. } | Record::ExecFailed { .. })
        );
        #[cfg(target_os = "linux")]
        let last = last && self.layer_report.is_none();
        last.then(|| self.reply()).flatten()
    }

    /// Reaps the shim (it has closed its status pipe, so it is exiting), once the command's
    /// temporary directory is removed: whoever sees the shim gone finds that gone too. Its wait
    /// status, as the reply names it; a cgroup goes when the command is dropped.
    pub(crate) fn reap(&mut self) -> String {
        self.cleanup.run();
        // __WALL (Linux): the shim is a child whatever its exit signal.
        #[cfg(target_os = "linux")]
        let flags = Some(WaitPidFlag::__WALL);
        #[cfg(target_os = "macos")]
        let flags: Option<WaitPidFlag> = None;
        let shim_status = loop {
            match waitpid(self.shim, flags) {
                Err(nix::Error::EINTR) => continue,
                other => break other,
            }
        };
        format!("{shim_status:?}")
    }

    /// Reaps the shim and turns what it reported into the terminal reply.
    pub(crate) fn finish(mut self) -> Reply {
        let shim_status = self.reap();
        let lost = format!(
            "the command's supervisor ended without reporting ({shim_status}); its process tree \
             may not have been cleaned up"
        );
        self.reply()
            .unwrap_or_else(|| self.not_run(Stage::Supervise, 0, lost))
    }

    /// The terminal reply from what the shim (or `enter`) reported; `None` when nothing says
    /// how the command ended.
    fn reply(&self) -> Option<Reply> {
        let caps = self.caps.at_end();
        let wall_us = u64::try_from(self.started_at.elapsed().as_micros()).unwrap_or(u64::MAX);
        if let Some(reply) = self.runner_reply(self.entered(), caps, wall_us) {
            return Some(reply);
        }
        Some(match self.outcome {
            Some(Record::Exited {
                wait_status,
                user_us,
                sys_us,
                max_rss_kib,
            }) => self.exited(
                decode_wait_status(wait_status),
                None,
                usage(wall_us, user_us, sys_us, max_rss_kib),
                caps,
            ),
            Some(Record::ExecFailed { errno }) => self.exited(
                ExitStatus::Code(exec_failure_code(errno)),
                Some(errno),
                usage(wall_us, 0, 0, 0),
                caps,
            ),
            Some(Record::StageFailed { stage, errno }) => {
                let stage = Stage::from_index(stage).unwrap_or(Stage::Supervise);
                let detail = match stage {
                    Stage::Namespace => sandbox_failed(errno),
                    _ => step_failed(errno),
                };
                self.not_run(stage, errno, detail)
            }
            Some(Record::Started { .. }) | None => return None,
        })
    }

    /// What `enter` reported from inside the sandbox: a layer that failed means the command
    /// never ran; an exec failure is the command's; nothing at all means bwrap ended before it
    /// ran `enter`, so the sandbox was never built. (Linux only: macOS has no `enter`.)
    fn entered(&self) -> Option<Report> {
        #[cfg(target_os = "linux")]
        return self.layer_report.as_ref().map(|fd| {
            let mut buf = [0u8; crate::enter::REPORT_MAX];
            let n = nix::unistd::read(fd, &mut buf).unwrap_or(0);
            // A count past the buffer reads as nothing reported: the sandbox was not built.
            crate::enter::decode_report(buf.get(..n).unwrap_or_default())
        });
        #[cfg(target_os = "macos")]
        None
    }

    /// The reply when the runner, not the command, decided the end: a layer or the bridge
    /// that failed inside the sandbox, the command's exec that `enter` reported, the runner's
    /// own exec, or bwrap ending before the command started. `None`: the shim's records decide.
    fn runner_reply(&self, entered: Option<Report>, caps: Caps, wall_us: u64) -> Option<Reply> {
        #[cfg(target_os = "macos")]
        let _ = (caps, wall_us);
        Some(match (entered, &self.outcome) {
            #[cfg(target_os = "linux")]
            (Some(Entered::LayerFailed(errno)), _) => self.not_run(
                Stage::Landlock,
                errno,
                format!(
                    "applying the Landlock layer inside the sandbox failed: {}; nothing was run",
                    nix::Error::from_raw(errno).desc()
                ),
            ),
            #[cfg(target_os = "linux")]
            (Some(Entered::BridgeFailed(errno)), _) => self.not_run(
                Stage::Namespace,
                errno,
                format!(
                    "starting the proxy bridge inside the sandbox failed: {}; nothing was run",
                    nix::Error::from_raw(errno).desc()
                ),
            ),
            #[cfg(target_os = "linux")]
            (Some(Entered::ExecFailed(errno)), _) => self.exited(
                ExitStatus::Code(exec_failure_code(errno)),
                Some(errno),
                usage(wall_us, 0, 0, 0),
                caps,
            ),
            // The runner's own exec: under bwrap (sandbox-exec) the program executed is bwrap
            // (sandbox-exec), not the command.
            (_, Some(Record::ExecFailed { errno }))
                if matches!(self.backend, Backend::Bwrap | Backend::Seatbelt) =>
            {
                let runner = match self.backend {
                    Backend::Seatbelt => "sandbox-exec",
                    _ => "bwrap",
                };
                self.not_run(
                    Stage::RunnerExec,
                    *errno,
                    format!(
                        "executing {runner} failed: {}; nothing was run",
                        nix::Error::from_raw(*errno).desc()
                    ),
                )
            }
            #[cfg(target_os = "linux")]
            (Some(Entered::Never), Some(Record::Exited { wait_status, .. }))
                if self.ending == Ending::Exited =>
            {
                let how = match decode_wait_status(*wait_status) {
                    ExitStatus::Code(code) => format!("exited with status {code}"),
                    ExitStatus::Signal(signal) => format!("was killed by signal {signal}"),
                };
                self.not_run(
                    Stage::Namespace,
                    0,
                    format!(
                        "bwrap {how} before the command started: it could not build the sandbox; \
                         nothing was run"
                    ),
                )
            }
            _ => return None,
        })
    }

    fn exited(
        &self,
        status: ExitStatus,
        exec_errno: Option<i32>,
        usage: Usage,
        caps: Caps,
    ) -> Reply {
        Reply::Exited(Exited {
            id: self.id,
            status,
            exec_errno,
            ending: self.ending,
            backend: self.backend,
            enforcement: self.enforcement.clone(),
            layers: self.layers.clone(),
            usage,
            caps,
        })
    }

    fn not_run(&self, stage: Stage, errno: i32, detail: String) -> Reply {
        Reply::RunnerFailed(RunnerFailed {
            id: self.id,
            stage,
            errno,
            detail,
        })
    }
}

/// What `enter` reports; macOS has no `enter`, and nothing to report.
#[cfg(target_os = "linux")]
type Report = Entered;
#[cfg(target_os = "macos")]
type Report = std::convert::Infallible;

fn usage(wall_us: u64, user_us: u64, sys_us: u64, max_rss_kib: u64) -> Usage {
    Usage {
        wall_us,
        user_us,
        sys_us,
        max_rss_kib,
    }
}

fn decode_wait_status(status: i32) -> ExitStatus {
    if libc::WIFSIGNALED(status) {
        ExitStatus::Signal(libc::WTERMSIG(status))
    } else {
        ExitStatus::Code(libc::WEXITSTATUS(status))
    }
}

/// How many descriptors a request declares: its stdio's, and the proxy's socket.
pub(crate) fn declared_fds(spawn: &Spawn) -> usize {
    [spawn.stdio.stdin, spawn.stdio.stdout, spawn.stdio.stderr]
        .iter()
        .filter(|s| **s == StdioSpec::Fd)
        .count()
        + usize::from(spawn.proxy)
}

#[cfg(test)]
mod tests {
    use confine_protocol::Stage;

    use crate::confine::Unusable;

    /// A step the shim or the command reported is named once by the probe's verdict, which
    /// puts the stage before the detail; the control: a detail that named its stage itself, as
    /// this one did, reads it twice.
    /// A sandbox the namespace backend's shim could not build says why in the words of its own
    /// checks (a path swapped since the helper checked it, a link where it mounts), and
    /// otherwise the system's; each says nothing ran.
    #[test]
    fn a_sandbox_not_built_says_which_check_failed() {
        assert_eq!(
            super::sandbox_failed(nix::libc::ESTALE),
            "building the sandbox failed: a path it binds was replaced after the helper checked \
             it; nothing was run"
        );
        assert_eq!(
            super::sandbox_failed(nix::libc::ELOOP),
            "building the sandbox failed: a link stands where it mounts, or on the way there; nothing \
             was run"
        );
        assert!(
            super::sandbox_failed(nix::libc::EPERM).starts_with(
                "building the sandbox failed: Operation not permitted: this user may not make or \
                 use the namespaces here"
            ),
            "{}",
            super::sandbox_failed(nix::libc::EPERM)
        );
        assert_eq!(
            super::sandbox_failed(nix::libc::EIO),
            "building the sandbox failed: I/O error; nothing was run"
        );
    }

    /// A command watched over `status`, as `start` makes it, its shim `shim`.
    fn watching(shim: &std::process::Child, status: std::os::fd::OwnedFd) -> super::Running {
        let shim = i32::try_from(shim.id()).expect("a pid");
        super::Running {
            id: 7,
            shim: nix::unistd::Pid::from_raw(shim),
            status,
            ctl: None,
            started_at: std::time::Instant::now(),
            deadline: None,
            kill_grace: std::time::Duration::ZERO,
            kill_at: None,
            ending: confine_protocol::Ending::Exited,
            backend: confine_protocol::Backend::Landlock,
            enforcement: None,
            layers: Vec::new(),
            #[cfg(target_os = "linux")]
            layer_report: None,
            caps: crate::confine::Planned::none(),
            cleanup: crate::confine::Cleanup::default(),
            pending: Vec::new(),
            outcome: None,
        }
    }

    /// The terminal reply goes out as soon as the shim's last record arrives, before the shim
    /// has exited (here the test holds the status pipe's write end, as a shim does until its
    /// exit), and once; the shim is reaped at the end. The control: after a failed step's
    /// record, when the shim may still hold a tree, the reply waits for the shim's end.
    #[test]
    fn the_last_record_is_answered_before_the_shim_is_gone() {
        use confine_protocol::{ExitStatus, Reply};
        use nix::fcntl::{FcntlArg, OFlag, fcntl};

        use crate::record::Record;

        let exited = Record::Exited {
            wait_status: 3 << 8,
            user_us: 0,
            sys_us: 0,
            max_rss_kib: 0,
        };
        let exec_failed = Record::ExecFailed {
            errno: nix::libc::ENOENT,
        };
        let setsid_failed = Record::StageFailed {
            stage: Stage::Setsid.index(),
            errno: nix::libc::EPERM,
        };
        for (record, early) in [(exited, true), (exec_failed, true), (setsid_failed, false)] {
            #[expect(clippy::zombie_processes, reason = "reaped as a shim is, below")]
            let shim = std::process::Command::new("true").spawn().expect("a child");
            let (status, status_wr) = crate::sys::pipe_cloexec().expect("a pipe");
            fcntl(&status, FcntlArg::F_SETFL(OFlag::O_NONBLOCK)).expect("non-blocking");
            let mut running = watching(&shim, status);
            for written in [Record::Started { pid: 8 }, record] {
                nix::unistd::write(&status_wr, &written.encode()).expect("written");
            }
            let (started, ended) = running.read_status();
            assert!(started.is_some() && !ended, "{record:?}");
            let reply = running.reply_early();
            assert_eq!(reply.is_some(), early, "{record:?}: {reply:?}");
            drop(status_wr);
            assert!(running.read_status().1, "the end, once the shim is gone");
            if let Some(reply) = reply {
                let Reply::Exited(exited) = reply else {
                    panic!("{record:?}: {reply:?}")
                };
                let code = if exited.exec_errno.is_some() { 127 } else { 3 };
                assert_eq!(exited.status, ExitStatus::Code(code));
                running.reap();
            } else {
                let reply = running.finish();
                assert!(
                    matches!(&reply, Reply::RunnerFailed(f) if f.stage == Stage::Setsid),
                    "{reply:?}"
                );
            }
        }
    }

    #[test]
    fn a_reported_step_names_its_stage_once() {
        let verdict = |detail: String| {
            Unusable::RunnerFailed {
                stage: Stage::UserNamespace,
                detail,
                stderr: String::new(),
            }
            .to_string()
        };
        assert_eq!(
            verdict(super::step_failed(nix::libc::EPERM)),
            "user-namespace failed: before the command's execve: Operation not permitted"
        );
        let named = verdict("user-namespace failed: Operation not permitted".to_owned());
        assert_eq!(named.matches("user-namespace failed").count(), 2, "{named}");
    }
}
