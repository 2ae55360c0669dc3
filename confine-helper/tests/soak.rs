//! Load and soak of the helper (issue 18, item 2; `docs/reliability.md`, "Load and soak"): for
//! each usable backend, one embedded helper runs confined commands one after another, then more
//! at 32 at once on its one connection, then the confined file writer and reader, one at a time
//! and 32 at once. Every request must end as its policy says: a write in the workspace lands, a
//! write outside it is denied, a file write read-only mode forbids fails and changes nothing;
//! never a refusal or a runner failure.
//!
//! The first tenth of every phase warms the helper up (so the concurrent phases' high-water
//! marks are reached before anything is measured); its descriptors and resident memory are then
//! taken, the rest of every phase runs, and they are taken again: the growth must stay within
//! the bounds of `support/proc_watch.rs` (10% and a small slack). At the end the helper has no
//! child left (so no zombie), no command's temp directory is left, and the mounts of its mount
//! namespace (the test's) are those of the start.
//!
//! `AGENTD_SOAK=full` runs the full size of the issue (10,000 commands one at a time and 2,000
//! at 32 at once, and 2,000 file requests), which takes minutes; by default the counts are small
//! enough for the test suite. The figures each run prints (with `--nocapture`) are the ones
//! `docs/reliability.md` reports.

// Linux only: these tests drive the bwrap, namespace and Landlock backends, `/proc` or Linux's
// own system calls. On macOS `macos_supervision.rs` drives the helper.
#![cfg(target_os = "linux")]

#[path = "support/proc_watch.rs"]
mod proc_watch;
mod support;

use std::collections::HashMap;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use confine_protocol::{
    Backend, BackendChoice, ExitStatus, Exited, Mode, Policy, Reply, Request, Spawn,
};
use proc_watch::TempDirs;
use support::{Peer, READER_STDIO, Scratch, WRITER_STDIO, file_io, file_spawn, pipe, spawn};

/// How many requests of each kind one backend gets.
#[derive(Debug, Clone, Copy)]
struct Counts {
    sequential: u64,
    concurrent: u64,
    files: u64,
}

/// The figures, run by hand (`AGENTD_SOAK=full`).
const FULL: Counts = Counts {
    sequential: 10_000,
    concurrent: 2_000,
    files: 2_000,
};

/// What the test suite runs: a few seconds per backend on a small machine.
const SMALL: Counts = Counts {
    sequential: 400,
    concurrent: 200,
    files: 200,
};

/// How many requests are in flight at once in the concurrent phases.
const CONCURRENCY: usize = 32;

/// The share of every phase that warms the helper up before the first measurement.
const WARM_UP_DIVISOR: u64 = 10;

/// The exit status the soak's shell commands give when their write was denied.
const DENIED: i32 = 7;

/// What the read-only file is made of, which read requests must read back and write requests
/// in read-only mode must leave alone.
const KEPT: &[u8] = b"kept by the soak\n";

/// One backend at a time: the temp-directory check reads a directory every helper of this uid
/// shares, and the figures are steadier without a second soak beside them.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn counts() -> Counts {
    match std::env::var("AGENTD_SOAK").as_deref() {
        Ok("full") => FULL,
        _ => SMALL,
    }
}

/// Scratch directories outside `/tmp`, which a workspace-write sandbox makes writable: the
/// build's temp directory where this user may write there, else `/var/tmp`.
fn host_scratch(tag: &str) -> Scratch {
    let uid = nix::unistd::geteuid().as_raw();
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let base = if nix::unistd::access(&target, nix::unistd::AccessFlags::W_OK).is_ok() {
        target
    } else {
        PathBuf::from(format!("/var/tmp/confine-helper-soak-{uid}"))
    };
    let dir = base.join(format!("soak-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("host scratch dir");
    Scratch(std::fs::canonicalize(&dir).expect("canonical scratch dir"))
}

fn bytes(path: &Path) -> Vec<u8> {
    path.as_os_str().as_bytes().to_vec()
}

/// Where one backend's soak writes, and what it is confined by.
struct Soak {
    backend: BackendChoice,
    ws: Scratch,
    outside: Scratch,
    /// The name every workspace-write command gives the file it leaves in its temp directory.
    marker: String,
}

/// What must come of one request, checked when it has exited, with what its pipes carried.
type Check = Box<dyn FnOnce(&Exited, &[Vec<u8>]) -> Result<(), String>>;

/// One request of the soak: the request, the descriptors that go with it, the read ends of its
/// pipes and the check of its end.
struct Job {
    request: Request,
    send: Vec<OwnedFd>,
    read: Vec<std::fs::File>,
    what: String,
    check: Check,
}

impl Soak {
    fn policy(&self, mode: Mode) -> Policy {
        let mut policy = spawn(0, &["true"]).policy;
        policy.mode = mode;
        policy.workspace_root = Some(bytes(&self.ws.0));
        policy
    }

    fn spawn(&self, id: u64, mode: Mode, argv: &[&str]) -> Spawn {
        let mut request = spawn(id, argv);
        request.cwd = bytes(&self.ws.0);
        request.policy = self.policy(mode);
        request.backend = self.backend;
        request
    }

    /// Command `id`: in turn read-only `true`, a read-only write outside the workspace, a
    /// workspace-write write inside it, and one outside it.
    fn command(&self, id: u64) -> Job {
        let inside = self.ws.0.join(format!("w-{id}"));
        let canary = self.outside.0.join(format!("canary-{id}"));
        let (inside_text, canary_text) = (text(&inside), text(&canary));
        let marker = self.marker.as_str();
        let id_text = id.to_string();
        let write_outside = "echo x > \"$0\" && exit 0 || exit 7";
        let (mode, argv, code, what): (Mode, Vec<&str>, i32, &str) = match id % 4 {
            0 => (Mode::ReadOnly, vec!["true"], 0, "read-only true"),
            1 => (
                Mode::ReadOnly,
                vec!["sh", "-c", write_outside, canary_text],
                DENIED,
                "read-only, writing outside",
            ),
            2 => (
                Mode::WorkspaceWrite,
                vec![
                    "sh",
                    "-c",
                    ": > \"$TMPDIR/$2\" && printf %s \"$1\" > \"$0\"",
                    inside_text,
                    &id_text,
                    marker,
                ],
                0,
                "workspace-write, writing inside",
            ),
            _ => (
                Mode::WorkspaceWrite,
                vec![
                    "sh",
                    "-c",
                    ": > \"$TMPDIR/$1\" || exit 3; echo x > \"$0\" && exit 0 || exit 7",
                    canary_text,
                    marker,
                ],
                DENIED,
                "workspace-write, writing outside",
            ),
        };
        let request = Request::Spawn(self.spawn(id, mode, &argv));
        let check: Check = Box::new(move |e, _| {
            expect_code(e, code)?;
            if canary.exists() {
                return Err(format!("{} was written", canary.display()));
            }
            if mode == Mode::WorkspaceWrite && code == 0 {
                let got = std::fs::read(&inside).map_err(|e| format!("{inside:?}: {e}"))?;
                if got != id_text.as_bytes() {
                    return Err(format!("{inside:?} holds {got:?}"));
                }
                std::fs::remove_file(&inside).map_err(|e| format!("{inside:?}: {e}"))?;
            }
            Ok(())
        });
        Job {
            request,
            send: Vec::new(),
            read: Vec::new(),
            what: format!("command {id} ({what})"),
            check,
        }
    }

    /// File request `id`: in turn a write in the workspace, a write in read-only mode, a write
    /// outside the workspace and a read.
    fn file(&self, id: u64) -> Job {
        let kept = self.ws.0.join("kept");
        let (report, report_wr) = pipe();
        if id % 4 == 3 {
            let (content, content_wr) = pipe();
            let request = Request::Spawn(file_spawn(
                id,
                &file_io(),
                &["read", "--max", "1024"],
                &kept,
                self.policy(Mode::ReadOnly),
                self.backend,
                READER_STDIO,
            ));
            return Job {
                request,
                send: vec![content_wr, report_wr],
                read: vec![content, report],
                what: format!("file request {id} (read)"),
                check: Box::new(|e, out| {
                    expect_code(e, 0)?;
                    expect_report(&out[1], "read")?;
                    if out[0] != KEPT {
                        return Err(format!("read {:?}", String::from_utf8_lossy(&out[0])));
                    }
                    Ok(())
                }),
            };
        }
        let (path, mode, allowed, what) = match id % 4 {
            0 => (
                self.ws.0.join(format!("f-{id}")),
                Mode::WorkspaceWrite,
                true,
                "write inside",
            ),
            1 => (
                kept.clone(),
                Mode::ReadOnly,
                false,
                "write in read-only mode",
            ),
            _ => (
                self.outside.0.join(format!("f-{id}")),
                Mode::WorkspaceWrite,
                false,
                "write outside",
            ),
        };
        let content = format!("file {id}\n").into_bytes();
        let request = Request::Spawn(file_spawn(
            id,
            &file_io(),
            &["write"],
            &path,
            self.policy(mode),
            self.backend,
            WRITER_STDIO,
        ));
        let check: Check = Box::new(move |e, out| {
            if !allowed {
                expect_code(e, 1)?;
                expect_report(&out[0], "failed")?;
                let now = std::fs::read(&path).ok();
                let before = (path == kept).then(|| KEPT.to_vec());
                if now != before {
                    return Err(format!("{path:?} was changed: {now:?}"));
                }
                return Ok(());
            }
            expect_code(e, 0)?;
            expect_report(&out[0], "written")?;
            let got = std::fs::read(&path).map_err(|e| format!("{path:?}: {e}"))?;
            if got != content {
                return Err(format!("{path:?} holds {got:?}"));
            }
            std::fs::remove_file(&path).map_err(|e| format!("{path:?}: {e}"))
        });
        Job {
            request,
            send: vec![memfd(&format!("file {id}\n")), report_wr],
            read: vec![report],
            what: format!("file request {id} ({what})"),
            check,
        }
    }
}

fn text(path: &Path) -> &str {
    path.to_str().expect("test paths are UTF-8")
}

/// An anonymous file holding `content`, at its start.
fn memfd(content: &str) -> OwnedFd {
    use std::io::{Seek, Write};
    let fd = nix::sys::memfd::memfd_create(c"content", nix::sys::memfd::MFdFlags::MFD_CLOEXEC)
        .expect("memfd");
    let mut file = std::fs::File::from(fd);
    file.write_all(content.as_bytes()).expect("write");
    file.rewind().expect("rewind");
    OwnedFd::from(file)
}

fn expect_code(e: &Exited, code: i32) -> Result<(), String> {
    if e.status != ExitStatus::Code(code) || e.exec_errno.is_some() {
        return Err(format!("expected exit {code}, got {e:?}"));
    }
    Ok(())
}

fn expect_report(report: &[u8], word: &str) -> Result<(), String> {
    if report.split(|b| *b == 0).next() != Some(word.as_bytes()) {
        return Err(format!(
            "expected a {word:?} report, got {:?}",
            String::from_utf8_lossy(report)
        ));
    }
    Ok(())
}

fn backend_of(choice: BackendChoice) -> Backend {
    match choice {
        BackendChoice::Bwrap => Backend::Bwrap,
        BackendChoice::Landlock => Backend::Landlock,
        BackendChoice::Namespaces => Backend::Namespaces,
        other => panic!("not a backend the soak asks for: {other:?}"),
    }
}

/// Runs the jobs whose request ids are `range`, with at most `concurrency` in flight on `peer`,
/// checking each as it ends. Panics at the first failure.
fn run(
    peer: &mut Peer,
    soak: &Soak,
    range: std::ops::Range<u64>,
    concurrency: usize,
    make: fn(&Soak, u64) -> Job,
) {
    let mut next = range.start;
    let mut in_flight: HashMap<u64, Job> = HashMap::new();
    while next < range.end || !in_flight.is_empty() {
        while in_flight.len() < concurrency && next < range.end {
            let mut job = make(soak, next);
            let fds: Vec<_> = job.send.iter().map(|fd| fd.as_fd()).collect();
            peer.send(&job.request, &fds);
            job.send.clear();
            in_flight.insert(next, job);
            next += 1;
        }
        let reply = peer.reply();
        let id = reply.request_id().unwrap_or(u64::MAX);
        match reply {
            Reply::Started(_) => {}
            Reply::Exited(e) => {
                let job = in_flight
                    .remove(&e.id)
                    .unwrap_or_else(|| panic!("an end for no request in flight: {e:?}"));
                let mut out = Vec::new();
                for mut pipe in job.read {
                    let mut bytes = Vec::new();
                    pipe.read_to_end(&mut bytes).expect("read a pipe");
                    out.push(bytes);
                }
                let what = &job.what;
                assert_eq!(e.backend, backend_of(soak.backend), "{what}: {e:?}");
                assert!(e.enforcement.is_some(), "{what}: not confined: {e:?}");
                assert!(!e.layers.is_empty(), "{what}: no layers: {e:?}");
                if let Err(why) = (job.check)(&e, &out) {
                    panic!("{what} under {:?}: {why}", soak.backend);
                }
            }
            other => {
                let what = in_flight.get(&id).map_or("?", |j| j.what.as_str());
                panic!("{what} under {:?} failed: {other:?}", soak.backend);
            }
        }
    }
}

/// One phase: how many requests, how many at once, and what each is.
struct Phase {
    name: &'static str,
    count: u64,
    concurrency: usize,
    make: fn(&Soak, u64) -> Job,
    /// Added to each index for the request's id, so ids never repeat on the connection.
    first_id: u64,
}

fn soak(choice: BackendChoice) {
    let _alone = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let name = format!("soak {choice:?}");
    let mut peer = Peer::embedded();
    peer.greet();
    if let Err((need, why)) = support::backend_works(choice) {
        support::skip::skip(&name, need, why);
        return;
    }
    let counts = counts();
    let tag = format!("{choice:?}").to_lowercase();
    let soak = Soak {
        backend: choice,
        ws: host_scratch(&format!("{tag}-ws")),
        outside: host_scratch(&format!("{tag}-outside")),
        marker: format!("soak-marker-{}", std::process::id()),
    };
    std::fs::write(soak.ws.0.join("kept"), KEPT).expect("the kept file");
    let pid = peer.child.as_ref().expect("an embedded helper").id();
    let temp = TempDirs::before();
    // The helper's mount namespace is this test's (it never leaves it), and its own mountinfo
    // is for root alone: it makes itself undumpable.
    let mounts = proc_watch::mounts(std::process::id());
    let start = proc_watch::footprint(pid);
    let phases = [
        Phase {
            name: "one at a time",
            count: counts.sequential,
            concurrency: 1,
            make: Soak::command,
            first_id: 0,
        },
        Phase {
            name: "32 at once",
            count: counts.concurrent,
            concurrency: CONCURRENCY,
            make: Soak::command,
            first_id: 1_000_000,
        },
        Phase {
            name: "files one at a time",
            count: counts.files / 2,
            concurrency: 1,
            make: Soak::file,
            first_id: 2_000_000,
        },
        Phase {
            name: "files 32 at once",
            count: counts.files / 2,
            concurrency: CONCURRENCY,
            make: Soak::file,
            first_id: 3_000_000,
        },
    ];
    let began = Instant::now();
    for p in &phases {
        let warm = p.count / WARM_UP_DIVISOR;
        run(
            &mut peer,
            &soak,
            p.first_id..p.first_id + warm,
            p.concurrency,
            p.make,
        );
    }
    // Measured once every shim is reaped: the helper answers a command on its shim's last
    // record and reaps the shim just after (RFC 0023, step 7), so straight after an answer
    // the shim's two pipes are still open in the helper.
    proc_watch::assert_no_children(&format!("{name}: after warm-up"), pid);
    let warm = proc_watch::footprint(pid);
    let mut times = Vec::new();
    for p in &phases {
        let phase_began = Instant::now();
        let from = p.first_id + p.count / WARM_UP_DIVISOR;
        run(
            &mut peer,
            &soak,
            from..p.first_id + p.count,
            p.concurrency,
            p.make,
        );
        times.push(format!("{} {:.1?}", p.name, phase_began.elapsed()));
    }
    proc_watch::assert_no_children(&name, pid);
    let end = proc_watch::settled_footprint(pid, warm);
    println!(
        "{name}: {} commands one at a time, {} at {CONCURRENCY} at once, {} file requests; {:.1?} \
         in all ({}; after warm-up); helper at start {start}, after warm-up {warm}, at the end \
         {end}",
        counts.sequential,
        counts.concurrent,
        counts.files,
        began.elapsed(),
        times.join(", ")
    );
    proc_watch::assert_stable(&name, warm, end);
    proc_watch::assert_same_mounts(&name, std::process::id(), &mounts);
    temp.assert_none_left(&name, pid, Some(&soak.marker));
    let outside: Vec<_> = std::fs::read_dir(&soak.outside.0)
        .expect("list outside")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(outside.is_empty(), "{name}: written outside: {outside:?}");
    assert_eq!(
        std::fs::read(soak.ws.0.join("kept")).expect("kept"),
        KEPT,
        "{name}: the read-only file changed"
    );
}

#[test]
fn thousands_of_commands_under_bwrap_leave_the_helper_as_they_found_it() {
    soak(BackendChoice::Bwrap);
}

#[test]
fn thousands_of_commands_under_landlock_leave_the_helper_as_they_found_it() {
    soak(BackendChoice::Landlock);
}

#[test]
fn thousands_of_commands_under_the_helpers_own_namespaces_leave_the_helper_as_they_found_it() {
    soak(BackendChoice::Namespaces);
}

// Controls: each rule the soaks judge by fails where it should, so a soak that passes has been
// judged by rules that can fail.

#[test]
fn the_growth_rule_passes_the_slack_and_fails_a_footprint_grown_past_it() {
    use proc_watch::{FD_SLACK, Footprint, GROWTH_PERCENT, RSS_SLACK_KIB};
    let warm = Footprint {
        fds: Some(100),
        rss_kib: 4_000,
    };
    let fds_limit = 100 + GROWTH_PERCENT + FD_SLACK;
    let rss_limit = 4_000 + 4_000 * GROWTH_PERCENT / 100 + RSS_SLACK_KIB;
    let at_limit = Footprint {
        fds: Some(fds_limit),
        rss_kib: rss_limit,
    };
    proc_watch::assert_stable("at the limit", warm, at_limit);
    let grown = [
        Footprint {
            fds: Some(fds_limit + 1),
            ..warm
        },
        Footprint {
            rss_kib: rss_limit + 1,
            ..warm
        },
    ];
    for end in grown {
        let verdict = std::panic::catch_unwind(|| proc_watch::assert_stable("grown", warm, end));
        assert!(verdict.is_err(), "{end} passed as no growth over {warm}");
    }
}

#[test]
fn the_child_rule_sees_a_running_child_then_a_zombie_then_nothing() {
    use nix::sys::wait::{Id, WaitPidFlag, waitid};
    let me = std::process::id();
    let mut child = std::process::Command::new("cat")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("spawn cat");
    let pid = child.id();
    let state = || {
        proc_watch::children(me)
            .into_iter()
            .find(|c| c.pid == pid)
            .map(|c| c.state)
    };
    let running = state().expect("a running child is listed");
    assert_ne!(running, 'Z', "a running child is no zombie");
    // `cat` ends at the end of its input; waiting with WNOWAIT leaves it unreaped: a zombie.
    drop(child.stdin.take());
    waitid(
        Id::Pid(nix::unistd::Pid::from_raw(pid as i32)),
        WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT,
    )
    .expect("wait for cat's end without reaping it");
    assert_eq!(state(), Some('Z'), "an ended, unreaped child is a zombie");
    child.wait().expect("reap cat");
    assert_eq!(state(), None, "a reaped child is no child any more");
}
