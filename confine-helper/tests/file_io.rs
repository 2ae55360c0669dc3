//! The file reader and writer (`confine-file-io`, beside the helper) run as agentd runs them: a
//! `Spawn` under a mode's policy, on each backend. What the program itself does is tested in
//! `file-io/tests/files.rs`; here, that the sandbox decides where a write lands, that the
//! program runs in a bwrap sandbox (or one of the helper's own namespaces) whose `/tmp` hides its
//! path, and that a writer the helper kills leaves nothing behind.

// Linux only: these tests drive the bwrap, namespace and Landlock backends, `/proc` or Linux's
// own system calls. On macOS `macos_supervision.rs` drives the helper.
#![cfg(target_os = "linux")]

#[path = "../../tests/shared/listing.rs"]
mod listing;
mod support;

use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};

use confine_protocol::{BackendChoice, ExitStatus, Mode, Policy, Reply, Request, Spawn};
use listing::names;
use support::skip::{Need, skip};
use support::{
    Peer, READER_STDIO, Scratch, WRITER_STDIO, available_backends, file_io, file_spawn, pipe,
};

fn policy(mode: Mode, workspace: &std::path::Path) -> Policy {
    Policy::read_only()
        .with_mode(mode)
        .with_workspace(workspace.as_os_str().as_encoded_bytes().to_vec())
}

/// An anonymous file holding `content`, at its start.
fn content(content: &[u8]) -> OwnedFd {
    let fd = nix::sys::memfd::memfd_create(c"content", nix::sys::memfd::MFdFlags::MFD_CLOEXEC)
        .expect("memfd");
    let mut file = std::fs::File::from(fd);
    file.write_all(content).expect("write");
    nix::unistd::lseek(&file, 0, nix::unistd::Whence::SeekSet).expect("seek");
    OwnedFd::from(file)
}

/// Sends `write` with `bytes` and returns the replies and the writer's report.
fn write(peer: &mut Peer, write: Spawn, bytes: &[u8]) -> (Vec<Reply>, Vec<u8>) {
    let (mut report, report_wr) = pipe();
    let id = write.id;
    let content = content(bytes);
    peer.send(
        &Request::Spawn(write),
        &[content.as_fd(), report_wr.as_fd()],
    );
    drop((content, report_wr));
    let mut text = Vec::new();
    report.read_to_end(&mut text).expect("report");
    (peer.until_end(id), text)
}

fn exit_code(replies: &[Reply]) -> Option<i32> {
    replies.iter().find_map(|r| match r {
        Reply::Exited(e) => match e.status {
            ExitStatus::Code(code) => Some(code),
            ExitStatus::Signal(_) => None,
        },
        _ => None,
    })
}

/// A write of `path` with its parents made, as agentd asks for one.
fn write_request(id: u64, path: &std::path::Path, mode: Mode, ws: &std::path::Path) -> Spawn {
    file_spawn(
        id,
        &file_io(),
        &["write", "--parents"],
        path,
        policy(mode, ws),
        BackendChoice::Auto,
        WRITER_STDIO,
    )
}

#[test]
fn a_write_in_a_mode_that_allows_it_lands_and_reports_the_real_path() {
    let ws = Scratch::new("write");
    let ws_path = std::fs::canonicalize(&ws.0).expect("canonical");
    let target = ws_path.join("sub/new.txt");
    let mut peer = Peer::embedded();
    peer.greet();
    for mode in [Mode::WorkspaceWrite, Mode::DangerFullAccess] {
        let (replies, report) = write(
            &mut peer,
            write_request(1, &target, mode, &ws_path),
            b"hi\n",
        );
        assert!(matches!(replies[0], Reply::Started(_)), "{replies:?}");
        assert_eq!(exit_code(&replies), Some(0), "{mode:?}: {replies:?}");
        let fields: Vec<&[u8]> = report.split(|b| *b == 0).collect();
        assert_eq!(fields[0], b"written", "{report:?}");
        assert_eq!(fields[2], b"3");
        assert_eq!(fields[3], target.as_os_str().as_encoded_bytes());
        assert_eq!(std::fs::read(&target).expect("read"), b"hi\n");
    }
}

#[test]
fn a_write_the_mode_does_not_allow_is_reported_failed_and_changes_nothing() {
    let ws = Scratch::new("write-ro");
    let ws_path = std::fs::canonicalize(&ws.0).expect("canonical");
    let target = ws_path.join("keep.txt");
    std::fs::write(&target, "keep").expect("write");
    let mut peer = Peer::embedded();
    peer.greet();
    let (replies, report) = write(
        &mut peer,
        write_request(2, &target, Mode::ReadOnly, &ws_path),
        b"changed",
    );
    assert_eq!(exit_code(&replies), Some(1), "{replies:?}");
    let text = String::from_utf8_lossy(&report);
    let errno: i32 = text
        .split('\0')
        .nth(1)
        .and_then(|e| e.parse().ok())
        .unwrap_or(0);
    assert!(text.starts_with("failed\0"), "{text:?}");
    assert!(
        [nix::libc::EROFS, nix::libc::EACCES].contains(&errno),
        "{text:?}"
    );
    assert_eq!(std::fs::read_to_string(&target).expect("read"), "keep");
}

#[test]
fn a_read_copies_the_file_and_refuses_a_fifo() {
    let ws = Scratch::new("read");
    let ws_path = std::fs::canonicalize(&ws.0).expect("canonical");
    std::fs::write(ws_path.join("a.txt"), "content\n").expect("write");
    nix::unistd::mkfifo(&ws_path.join("fifo"), nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    let mut peer = Peer::embedded();
    peer.greet();
    let mut read = |id: u64, name: &str, max_bytes: u64| {
        let (mut content, content_wr) = pipe();
        let (mut report, report_wr) = pipe();
        let max = max_bytes.to_string();
        let request = file_spawn(
            id,
            &file_io(),
            &["read", "--max", &max],
            &ws_path.join(name),
            policy(Mode::ReadOnly, &ws_path),
            BackendChoice::Auto,
            READER_STDIO,
        );
        peer.send(
            &Request::Spawn(request),
            &[content_wr.as_fd(), report_wr.as_fd()],
        );
        drop((content_wr, report_wr));
        let mut bytes = Vec::new();
        content.read_to_end(&mut bytes).expect("content");
        let mut text = String::new();
        report.read_to_string(&mut text).expect("report");
        (peer.until_end(id), bytes, text)
    };
    let (replies, bytes, report) = read(5, "a.txt", 1024);
    assert_eq!(exit_code(&replies), Some(0), "{replies:?} {report:?}");
    assert_eq!(bytes, b"content\n");
    assert_eq!(
        report,
        format!("read\x008\0{}", ws_path.join("a.txt").display())
    );
    let (replies, bytes, report) = read(6, "fifo", 1024);
    assert_eq!(exit_code(&replies), Some(1), "{replies:?}");
    assert!(bytes.is_empty());
    assert!(report.contains("a FIFO, not a regular file"), "{report:?}");
    let (replies, _, report) = read(7, "a.txt", 4);
    assert_eq!(exit_code(&replies), Some(1), "{replies:?}");
    assert!(report.contains("more than"), "{report:?}");
}

#[test]
fn a_helper_installed_under_tmp_still_writes_in_a_sandbox_whose_tmp_is_its_own() {
    // Under bwrap and under the helper's own namespaces a workspace-write command's /tmp is a
    // private directory, which hides the host's /tmp: a writer run by its path there would not
    // be found.
    const NAME: &str =
        "a_helper_installed_under_tmp_still_writes_in_a_sandbox_whose_tmp_is_its_own";
    let backends = support::namespace_backends(NAME);
    if backends.is_empty() {
        return;
    }
    let installed = Scratch::new("installed");
    let copy = installed.0.join("confine-helper");
    let program = installed.0.join(confine_protocol::FILE_IO_PROGRAM);
    let elsewhere = Scratch::new("not-beside");
    let stranger = elsewhere.0.join(confine_protocol::FILE_IO_PROGRAM);
    // Copied by another process: a copy written here could still be open for writing in a
    // child another test forks meanwhile, and executing it would fail (ETXTBSY).
    for (from, to) in [
        (std::path::PathBuf::from(support::HELPER), &copy),
        (file_io(), &program),
        (file_io(), &stranger),
    ] {
        let copied = std::process::Command::new("cp").arg(&from).arg(to).status();
        assert!(copied.expect("cp").success(), "copy {}", from.display());
    }
    let ws = Scratch::new("write-from-tmp");
    let ws_path = std::fs::canonicalize(&ws.0).expect("canonical");
    let target = ws_path.join("written.txt");
    let mut peer = Peer::embedded_program(&copy, None, |_| {});
    peer.greet();
    let request_for = |id, program: &std::path::Path, backend| {
        file_spawn(
            id,
            &std::fs::canonicalize(program).expect("canonical"),
            &["write", "--parents"],
            &target,
            policy(Mode::WorkspaceWrite, &ws_path),
            backend,
            WRITER_STDIO,
        )
    };
    let under_tmp = std::fs::canonicalize(&stranger)
        .expect("canonical")
        .starts_with("/tmp");
    if !under_tmp {
        println!("SKIP {NAME} (control): the scratch directory is not under /tmp");
    }
    for backend in backends {
        // The control: the same program, but not the one beside the helper, is run by its
        // path, which the sandbox's own /tmp hides.
        if under_tmp {
            let (replies, report) = write(
                &mut peer,
                request_for(1, &stranger, backend),
                b"by its path",
            );
            assert_ne!(
                exit_code(&replies),
                Some(0),
                "{backend:?}: {replies:?} {}",
                String::from_utf8_lossy(&report)
            );
            assert!(
                !target.exists(),
                "{backend:?}: a program hidden by /tmp wrote"
            );
        }
        let (replies, report) = write(
            &mut peer,
            request_for(2, &program, backend),
            b"from a helper under /tmp",
        );
        assert_eq!(
            exit_code(&replies),
            Some(0),
            "{backend:?}: {replies:?} {}",
            String::from_utf8_lossy(&report)
        );
        assert_eq!(
            std::fs::read(&target).expect("written"),
            b"from a helper under /tmp",
            "{backend:?}"
        );
        std::fs::remove_file(&target).expect("remove the written file");
    }
}

/// The Linux backends to run `test` on here: those that work on this machine (judged without
/// the helper); a SKIP line for each missing one, and for the test when none works.
fn backends(test: &str) -> Vec<BackendChoice> {
    let backends = available_backends(test);
    if backends.is_empty() {
        skip(test, Need::Backend, "no Linux backend works here");
    }
    backends
}

/// Every stream from the request's descriptors: a writer keeping what it replaces (the content
/// in, the old file out, the report on stderr) or an edit (the answer in, the file out, the
/// report on stderr).
const ALL_STDIO_GIVEN: confine_protocol::Stdio = confine_protocol::Stdio {
    stdin: confine_protocol::StdioSpec::Fd,
    stdout: confine_protocol::StdioSpec::Fd,
    stderr: confine_protocol::StdioSpec::Fd,
};

/// Runs `request` with descriptors for its stdout and stderr (and `stdin` before them when
/// given); returns what came out of each.
fn run_out(
    peer: &mut Peer,
    request: Spawn,
    stdin: Option<OwnedFd>,
) -> (Vec<Reply>, Vec<u8>, String) {
    let id = request.id;
    let (mut out, out_wr) = pipe();
    let (mut err, err_wr) = pipe();
    let mut fds = Vec::new();
    if let Some(stdin) = &stdin {
        fds.push(stdin.as_fd());
    }
    fds.extend([out_wr.as_fd(), err_wr.as_fd()]);
    peer.send(&Request::Spawn(request), &fds);
    drop((stdin, out_wr, err_wr));
    let mut bytes = Vec::new();
    out.read_to_end(&mut bytes).expect("stdout");
    let mut text = String::new();
    err.read_to_string(&mut text).expect("stderr");
    (peer.until_end(id), bytes, text)
}

#[test]
fn a_writer_keeping_what_it_replaces_copies_only_what_the_sandbox_lets_it_read() {
    const NAME: &str =
        "a_writer_keeping_what_it_replaces_copies_only_what_the_sandbox_lets_it_read";
    let ws = Scratch::new("write-previous");
    let ws_path = std::fs::canonicalize(&ws.0).expect("canonical");
    let shown = ws_path.join("shown.txt");
    let secret = ws_path.join("secret.txt");
    let mut peer = Peer::embedded();
    peer.greet();
    let mut id = 40;
    let policy_for = |deny: bool| {
        let mut policy = policy(Mode::WorkspaceWrite, &ws_path);
        if deny {
            policy.deny_read = vec![secret.as_os_str().as_encoded_bytes().to_vec()];
        }
        policy
    };
    let mut next = || {
        id += 1;
        id
    };
    for backend in backends(NAME) {
        std::fs::write(&shown, "shown\n").expect("write");
        std::fs::write(&secret, "hidden\n").expect("write");
        let keeping = |id: u64, path: &std::path::Path, policy: Policy| {
            file_spawn(
                id,
                &file_io(),
                &["write", "--parents", "--previous", "1024"],
                path,
                policy,
                backend,
                ALL_STDIO_GIVEN,
            )
        };
        // Control: a file the policy does not hide is copied whole, then replaced.
        let request = keeping(next(), &shown, policy_for(false));
        let (replies, bytes, report) = run_out(&mut peer, request, Some(content(b"new\n")));
        assert_eq!(
            exit_code(&replies),
            Some(0),
            "{backend:?}: {replies:?} {report:?}"
        );
        assert_eq!(bytes, b"shown\n", "{backend:?}");
        assert!(report.contains("\0whole\0"), "{backend:?}: {report:?}");
        assert_eq!(std::fs::read(&shown).expect("read"), b"new\n");
        // A file the policy hides: the copy shows no more of it than the reader does under the
        // same policy, which on every backend but Landlock is nothing (Landlock cannot cut a
        // denied path out of a writable root, a gap its enforcement fact names).
        let read = file_spawn(
            next(),
            &file_io(),
            &["read", "--max", "1024"],
            &secret,
            policy_for(true),
            backend,
            READER_STDIO,
        );
        let (_, read_bytes, read_report) = run_out(&mut peer, read, None);
        let reader_sees = String::from_utf8_lossy(&read_bytes).contains("hidden");
        let request = keeping(next(), &secret, policy_for(true));
        let (_, bytes, report) = run_out(&mut peer, request, Some(content(b"new\n")));
        let copy_shows = String::from_utf8_lossy(&bytes).contains("hidden");
        assert!(
            !copy_shows || reader_sees,
            "{backend:?}: the copy showed what the reader could not: {report:?} (reader: \
             {read_report:?})"
        );
        if backend != BackendChoice::Landlock {
            assert!(!copy_shows, "{backend:?}: {report:?}");
        }
    }
}

#[test]
fn an_edit_runs_confined_as_one_exchange_and_leaves_a_file_changed_meanwhile() {
    const NAME: &str = "an_edit_runs_confined_as_one_exchange_and_leaves_a_file_changed_meanwhile";
    let ws = Scratch::new("edit");
    let ws_path = std::fs::canonicalize(&ws.0).expect("canonical");
    let file = ws_path.join("a.txt");
    let mut peer = Peer::embedded();
    peer.greet();
    let mut id = 60;
    for backend in backends(NAME) {
        for change_meanwhile in [false, true] {
            std::fs::write(&file, "before\n").expect("write");
            id += 1;
            let request = file_spawn(
                id,
                &file_io(),
                &["edit", "--max", "1024"],
                &file,
                policy(Mode::WorkspaceWrite, &ws_path),
                backend,
                ALL_STDIO_GIVEN,
            );
            let (answer_rd, answer_wr) = pipe_in();
            let (mut content, content_wr) = pipe();
            let (mut report, report_wr) = pipe();
            peer.send(
                &Request::Spawn(request),
                &[answer_rd.as_fd(), content_wr.as_fd(), report_wr.as_fd()],
            );
            drop((answer_rd, content_wr, report_wr));
            // The read's record, to its third NUL, then as many bytes of content as it says.
            let mut record = Vec::new();
            let mut byte = [0u8];
            while record.iter().filter(|b| **b == 0).count() < 3 {
                assert_eq!(report.read(&mut byte).expect("record"), 1, "{record:?}");
                record.push(byte[0]);
            }
            assert!(
                record.starts_with(b"read\x007\0"),
                "{backend:?}: {record:?}"
            );
            let mut old = [0u8; 7];
            content.read_exact(&mut old).expect("content");
            assert_eq!(&old, b"before\n");
            if change_meanwhile {
                std::fs::write(&file, "changed meanwhile\n").expect("write");
            }
            let mut answer = std::fs::File::from(answer_wr);
            answer.write_all(b"wafter\n").expect("answer");
            drop(answer);
            let mut last = String::new();
            report.read_to_string(&mut last).expect("report");
            let replies = peer.until_end(id);
            if change_meanwhile {
                assert_eq!(exit_code(&replies), Some(1), "{backend:?}: {last:?}");
                assert!(last.starts_with("unwritten\0"), "{backend:?}: {last:?}");
                let kept = std::fs::read_to_string(&file).expect("read");
                assert_eq!(kept, "changed meanwhile\n", "{backend:?}");
            } else {
                assert_eq!(exit_code(&replies), Some(0), "{backend:?}: {last:?}");
                assert_eq!(last, format!("edited\x006\0{}", file.display()));
                assert_eq!(std::fs::read_to_string(&file).expect("read"), "after\n");
            }
        }
    }
}

/// A pipe whose read end goes to the command as stdin; returns (read end, write end).
fn pipe_in() -> (OwnedFd, OwnedFd) {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).expect("pipe")
}

/// Starts a write of `target` whose content comes from a pipe the test keeps open: the writer
/// waits for the rest. Returns the pipe's write end (the content sent so far is `b"partial"`)
/// and the report's read end.
fn write_left_waiting(peer: &mut Peer, request: Spawn) -> (std::fs::File, std::fs::File) {
    let (content_rd, content_wr) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).expect("pipe");
    let mut content_wr = std::fs::File::from(content_wr);
    content_wr.write_all(b"partial").expect("content");
    let (report, report_wr) = pipe();
    let id = request.id;
    peer.send(
        &Request::Spawn(request),
        &[content_rd.as_fd(), report_wr.as_fd()],
    );
    drop((content_rd, report_wr));
    assert!(
        matches!(peer.reply(), Reply::Started(s) if s.id == id),
        "the writer started"
    );
    (content_wr, report)
}

#[test]
fn a_writer_killed_while_the_content_arrives_leaves_nothing_in_the_directory() {
    const NAME: &str = "a_writer_killed_while_the_content_arrives_leaves_nothing_in_the_directory";
    let ws = Scratch::new("write-killed");
    let ws_path = std::fs::canonicalize(&ws.0).expect("canonical");
    std::fs::write(ws_path.join("old.txt"), "old").expect("old file");
    let mut peer = Peer::embedded();
    peer.greet();
    let mut id = 10;
    for backend in backends(NAME) {
        for name in ["old.txt", "new.txt"] {
            id += 1;
            let mut request =
                write_request(id, &ws_path.join(name), Mode::WorkspaceWrite, &ws_path);
            request.backend = backend;
            let (content, _report) = write_left_waiting(&mut peer, request);
            peer.send(
                &Request::Cancel(confine_protocol::Cancel { id, grace_ms: 0 }),
                &[],
            );
            let replies = peer.until_end(id);
            assert!(
                matches!(replies.last(), Some(Reply::Exited(e)) if matches!(e.status, ExitStatus::Signal(_))),
                "{backend:?} {name}: the writer was killed: {replies:?}"
            );
            drop(content);
            assert_eq!(
                names(&ws_path),
                ["old.txt"],
                "{backend:?}: a writer killed while writing {name} left something behind"
            );
            assert_eq!(
                std::fs::read_to_string(ws_path.join("old.txt")).expect("old"),
                "old"
            );
        }
        // The control: the same write, its content ended, puts exactly the file in place.
        id += 1;
        let mut request =
            write_request(id, &ws_path.join("new.txt"), Mode::WorkspaceWrite, &ws_path);
        request.backend = backend;
        let (content, mut report) = write_left_waiting(&mut peer, request);
        drop(content);
        let mut text = Vec::new();
        report.read_to_end(&mut text).expect("report");
        assert_eq!(exit_code(&peer.until_end(id)), Some(0), "{backend:?}");
        assert!(
            text.starts_with(b"written\0"),
            "{:?}",
            String::from_utf8_lossy(&text)
        );
        assert_eq!(names(&ws_path), ["new.txt", "old.txt"], "{backend:?}");
        assert_eq!(
            std::fs::read(ws_path.join("new.txt")).expect("new"),
            b"partial"
        );
        std::fs::remove_file(ws_path.join("new.txt")).expect("remove new.txt");
    }
}

#[test]
fn writers_killed_at_any_point_leave_the_old_file_or_the_new_one_and_nothing_else() {
    const NAME: &str =
        "writers_killed_at_any_point_leave_the_old_file_or_the_new_one_and_nothing_else";
    let backends = backends(NAME);
    if backends.is_empty() {
        return;
    }
    let ws = Scratch::new("write-raced");
    let ws_path = std::fs::canonicalize(&ws.0).expect("canonical");
    let target = ws_path.join("big.bin");
    let old = vec![b'o'; 64];
    let new = vec![b'n'; 4 << 20];
    std::fs::write(&target, &old).expect("old file");
    let mut peer = Peer::embedded();
    peer.greet();
    let mut outcomes = std::collections::BTreeSet::new();
    for (i, backend) in backends.into_iter().cycle().take(24).enumerate() {
        let id = 100 + i as u64;
        let mut request = write_request(id, &target, Mode::WorkspaceWrite, &ws_path);
        request.backend = backend;
        let (report, report_wr) = pipe();
        let content = content(&new);
        peer.send(
            &Request::Spawn(request),
            &[content.as_fd(), report_wr.as_fd()],
        );
        drop((content, report_wr, report));
        assert!(matches!(peer.reply(), Reply::Started(_)));
        // Killed as soon as it runs: before, during or after its write, as it happens.
        peer.send(
            &Request::Cancel(confine_protocol::Cancel { id, grace_ms: 0 }),
            &[],
        );
        peer.until_end(id);
        assert_eq!(
            names(&ws_path),
            ["big.bin"],
            "{backend:?}: attempt {i} left a file"
        );
        let now = std::fs::read(&target).expect("target");
        assert!(now == old || now == new, "attempt {i} left a partial file");
        outcomes.insert(now == new);
        std::fs::write(&target, &old).expect("reset");
    }
    println!(
        "writers completed before the kill in some attempts: {}",
        outcomes.contains(&true)
    );
}

/// The file program beside the helper runs again under whatever policy agentd's next file
/// operation has (an approved write's wider one), so no command may replace it: a writable root
/// that holds it is refused, wherever its real file lies. Here it is a link beside the helper to
/// a file in a directory of its own, so only the program's protection can refuse that
/// directory (the helper's own binary is elsewhere).
#[test]
fn a_root_holding_the_file_program_is_refused_so_no_command_can_replace_it() {
    let installed = Scratch::new("installed-own");
    let real = Scratch::new("file-io-real");
    let other = Scratch::new("file-io-other");
    let copy = installed.0.join("confine-helper");
    let program = real.0.join(confine_protocol::FILE_IO_PROGRAM);
    for (from, to) in [
        (std::path::PathBuf::from(support::HELPER), &copy),
        (file_io(), &program),
    ] {
        // Copied by another process, as above (ETXTBSY).
        let copied = std::process::Command::new("cp").arg(&from).arg(to).status();
        assert!(copied.expect("cp").success(), "copy {}", from.display());
    }
    std::os::unix::fs::symlink(
        &program,
        installed.0.join(confine_protocol::FILE_IO_PROGRAM),
    )
    .expect("link the program beside the helper");
    let mut peer = Peer::embedded_program(&copy, None, |_| {});
    peer.greet();
    let writing_in = |id, root: &std::path::Path| {
        let root = std::fs::canonicalize(root).expect("canonical");
        let mut request = support::spawn(id, &["sh", "-c", "echo x > \"$1\"/note", "sh"]);
        request
            .argv
            .push(root.as_os_str().as_encoded_bytes().to_vec());
        request.policy = policy(Mode::WorkspaceWrite, &root);
        request
    };
    // The control: a root beside it is taken and written, on whatever backend works here (or
    // refused for no usable backend, which the next request would be too).
    peer.send(&Request::Spawn(writing_in(1, &other.0)), &[]);
    let control = peer.until_end(1);
    if matches!(control.as_slice(), [Reply::RunnerFailed(_)]) {
        skip(
            "a_root_holding_the_file_program_is_refused_so_no_command_can_replace_it",
            Need::Backend,
            "no confined backend works here",
        );
        return;
    }
    assert_eq!(exit_code(&control), Some(0), "{control:?}");
    assert!(other.0.join("note").exists(), "the control wrote nothing");
    peer.send(&Request::Spawn(writing_in(2, &real.0)), &[]);
    match peer.until_end(2).as_slice() {
        [Reply::Refused(refused)] => {
            let why = refused.reason.to_string();
            let named = std::fs::canonicalize(&program).expect("canonical");
            assert!(
                why.contains("the helper's own files")
                    && why.contains(named.to_str().expect("a UTF-8 path")),
                "refused for another reason: {why}"
            );
        }
        other => panic!("a root holding the file program was taken: {other:?}"),
    }
    assert!(!real.0.join("note").exists(), "the refused command ran");
}
