//! The reader and writer as a program: what each does to the file system and the report it
//! prints, run directly (no sandbox: nothing here is a security check). How they run confined,
//! as agentd runs them through the helper, is tested in `confine-helper/tests/file_io.rs`.

// Linux only: the writer's unnamed file (`O_TMPFILE`) and the reader's `O_PATH` are Linux's;
// macOS takes the named-file path, run by the helper's own macOS tests.
#![cfg(target_os = "linux")]

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};

#[path = "../../tests/shared/listing.rs"]
mod listing;

use listing::names;

const PROGRAM: &str = env!("CARGO_BIN_EXE_confine-file-io");

/// A private scratch directory under the system temp dir, resolved, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("confine-file-io-test-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch directory");
        Scratch(std::fs::canonicalize(&dir).expect("canonical"))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Starts the writer on `path` with its content on a pipe the caller feeds.
fn start_write(path: &Path, parents: bool) -> Child {
    let mut command = Command::new(PROGRAM);
    command.arg("write");
    if parents {
        command.arg("--parents");
    }
    command
        .arg("--")
        .arg(path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the writer")
}

/// Sends `input` to `child`'s standard input, closes it and waits for the end.
fn fed(mut child: Child, input: &[u8]) -> std::process::Output {
    let mut stdin = child.stdin.take().expect("stdin");
    // A program that refuses the path before it reads its input closes the pipe first.
    if let Err(e) = stdin.write_all(input) {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "input: {e}");
    }
    drop(stdin);
    child.wait_with_output().expect("the program ends")
}

/// Writes `content` to `path`; returns how the writer ended and its report.
fn write(path: &Path, parents: bool, content: &[u8]) -> (ExitStatus, Vec<u8>) {
    let out = fed(start_write(path, parents), content);
    (out.status, out.stdout)
}

/// Reads `path` with at most `max` bytes; returns how the reader ended, the content and the
/// report.
fn read(path: &Path, max: u64) -> (ExitStatus, Vec<u8>, String) {
    let out = Command::new(PROGRAM)
        .args(["read", "--max", &max.to_string(), "--"])
        .arg(path)
        .stdin(Stdio::null())
        .output()
        .expect("run the reader");
    let report = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status, out.stdout, report)
}

#[test]
fn a_write_makes_the_file_and_its_parents_and_reports_what_it_wrote() {
    let ws = Scratch::new("write");
    let target = ws.0.join("sub/new.txt");
    let (status, report) = write(&target, true, b"hi\n");
    assert!(status.success(), "{status:?} {report:?}");
    let expected = [
        b"written\x001\x003\0".as_slice(),
        target.as_os_str().as_encoded_bytes(),
    ]
    .concat();
    assert_eq!(report, expected);
    assert_eq!(std::fs::read(&target).expect("read"), b"hi\n");
    // Replacing it: not created, its permissions kept.
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    let (status, report) = write(&target, false, b"again");
    assert!(status.success());
    assert!(report.starts_with(b"written\x000\x005\0"), "{report:?}");
    let meta = std::fs::metadata(&target).expect("metadata");
    assert_eq!(meta.permissions().mode() & 0o7777, 0o640);
    assert_eq!(names(&ws.0.join("sub")), ["new.txt"]);
}

#[test]
fn a_write_without_parents_fails_on_a_missing_directory_and_reports_why() {
    let ws = Scratch::new("write-noparents");
    // The control: with its parent there, the same write lands.
    let (status, _) = write(&ws.0.join("a.txt"), false, b"x");
    assert!(status.success());
    let (status, report) = write(&ws.0.join("missing/a.txt"), false, b"x");
    assert!(!status.success());
    let text = String::from_utf8_lossy(&report);
    assert!(
        text.starts_with(&format!("failed\0{}\0", nix::libc::ENOENT)),
        "{text:?}"
    );
    assert!(!ws.0.join("missing").exists());
}

#[test]
fn a_write_goes_through_a_link_and_refuses_a_directory_or_a_relative_path() {
    let ws = Scratch::new("write-kinds");
    let real = ws.0.join("real.txt");
    std::fs::write(&real, "old").expect("real");
    std::os::unix::fs::symlink(&real, ws.0.join("link")).expect("symlink");
    let (status, report) = write(&ws.0.join("link"), false, b"new");
    assert!(status.success(), "{report:?}");
    assert!(report.ends_with(real.as_os_str().as_encoded_bytes()));
    assert_eq!(std::fs::read(&real).expect("real"), b"new");
    std::fs::create_dir(ws.0.join("dir")).expect("dir");
    let (status, report) = write(&ws.0.join("dir"), false, b"x");
    assert!(!status.success());
    assert!(
        String::from_utf8_lossy(&report).contains("is a directory, not a regular file"),
        "{report:?}"
    );
    let (status, report) = write(Path::new("rel.txt"), false, b"x");
    assert!(!status.success());
    assert!(
        String::from_utf8_lossy(&report).contains("not an absolute path"),
        "{report:?}"
    );
}

#[test]
fn a_read_copies_a_regular_file_and_refuses_a_fifo_and_a_file_over_the_size() {
    let ws = Scratch::new("read");
    let file = ws.0.join("a.txt");
    std::fs::write(&file, "content\n").expect("write");
    nix::unistd::mkfifo(&ws.0.join("fifo"), nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    let (status, bytes, report) = read(&file, 1024);
    assert!(status.success(), "{report:?}");
    assert_eq!(bytes, b"content\n");
    assert_eq!(report, format!("read\x008\0{}", file.display()));
    // A FIFO with no writer would block an open for reading: the reader never opens it.
    let (status, bytes, report) = read(&ws.0.join("fifo"), 1024);
    assert!(!status.success());
    assert!(bytes.is_empty());
    assert!(report.contains("a FIFO, not a regular file"), "{report:?}");
    let (status, bytes, report) = read(&file, 4);
    assert!(!status.success());
    assert!(bytes.is_empty());
    assert!(
        report.starts_with(&format!("failed\0{}\0", nix::libc::EFBIG)),
        "{report:?}"
    );
    assert!(report.contains("more than"), "{report:?}");
}

#[test]
fn a_wrong_command_line_is_a_usage_error() {
    for args in [
        &["write", "/x"][..],
        &["read", "--max", "ten", "--", "/x"],
        &[],
    ] {
        let out = Command::new(PROGRAM).args(args).output().expect("run");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("usage:"),
            "{args:?}"
        );
    }
}

#[test]
fn a_writer_killed_while_the_content_arrives_leaves_nothing_in_the_directory() {
    let ws = Scratch::new("write-killed");
    std::fs::write(ws.0.join("old.txt"), "old").expect("old file");
    for name in ["old.txt", "new.txt"] {
        let mut child = start_write(&ws.0.join(name), false);
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(b"partial").expect("content");
        child.kill().expect("kill");
        let status = child.wait().expect("wait");
        assert!(!status.success());
        drop(stdin);
        assert_eq!(names(&ws.0), ["old.txt"], "a writer killed writing {name}");
        assert_eq!(
            std::fs::read_to_string(ws.0.join("old.txt")).expect("old"),
            "old"
        );
    }
    // The control: the same write, its content ended, puts exactly the file in place.
    let (status, report) = write(&ws.0.join("new.txt"), false, b"partial");
    assert!(status.success(), "{report:?}");
    assert_eq!(names(&ws.0), ["new.txt", "old.txt"]);
}

#[test]
fn writers_killed_at_any_point_leave_the_old_file_or_the_new_one_and_nothing_else() {
    let ws = Scratch::new("write-raced");
    let target = ws.0.join("big.bin");
    let old = vec![b'o'; 64];
    let new = vec![b'n'; 4 << 20];
    let content = ws.0.join("content");
    std::fs::write(&target, &old).expect("old file");
    let mut completed = 0;
    for attempt in 0..24 {
        std::fs::write(&content, &new).expect("content");
        let mut child = Command::new(PROGRAM)
            .args(["write", "--"])
            .arg(&target)
            .stdin(std::fs::File::open(&content).expect("content"))
            .stdout(Stdio::null())
            .spawn()
            .expect("start the writer");
        std::fs::remove_file(&content).expect("remove the content");
        // Killed as soon as it runs: before, during or after its write, as it happens.
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(names(&ws.0), ["big.bin"], "attempt {attempt} left a file");
        let now = std::fs::read(&target).expect("target");
        assert!(
            now == old || now == new,
            "attempt {attempt} left a partial file"
        );
        if now == new {
            completed += 1;
        }
        std::fs::write(&target, &old).expect("reset");
    }
    println!("writers completed before the kill: {completed} of 24");
}

#[test]
fn a_temporary_name_a_killed_writer_left_is_removed_by_the_next_write_once_stale() {
    let ws = Scratch::new("write-sweep");
    let stale = ws.0.join(".agentd-write-4242-0badf00d-0.tmp");
    let fresh = ws.0.join(".agentd-write-4243-0badf00d-0.tmp");
    let other = ws.0.join(".agentd-write-notes.txt");
    for path in [&stale, &fresh, &other] {
        std::fs::write(path, "left").expect("plant");
    }
    let hour_ago = nix::sys::time::TimeSpec::from_duration(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            - std::time::Duration::from_secs(3600),
    );
    for path in [&stale, &other] {
        nix::sys::stat::utimensat(
            nix::fcntl::AT_FDCWD,
            path,
            &hour_ago,
            &hour_ago,
            nix::sys::stat::UtimensatFlags::NoFollowSymlink,
        )
        .expect("age it");
    }
    let (status, _) = write(&ws.0.join("new.txt"), false, b"new");
    assert!(status.success());
    // The stale temporary name is gone; a fresh one (a writer at work) and another name stay.
    assert_eq!(
        names(&ws.0),
        [
            ".agentd-write-4243-0badf00d-0.tmp",
            ".agentd-write-notes.txt",
            "new.txt"
        ]
    );
}

/// Writes `content` to `path` asking for what it replaces (at most `max` bytes); returns how
/// the writer ended, what it copied of the old file and its report.
fn write_keeping(path: &Path, max: u64, content: &[u8]) -> (ExitStatus, Vec<u8>, String) {
    let child = Command::new(PROGRAM)
        .args(["write", "--parents", "--previous", &max.to_string(), "--"])
        .arg(path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the writer");
    let out = fed(child, content);
    let report = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status, out.stdout, report)
}

#[test]
fn a_write_asked_for_what_it_replaces_copies_the_old_file_and_says_so() {
    let ws = Scratch::new("previous");
    let file = ws.0.join("a.txt");
    std::fs::write(&file, "old\n").expect("write");
    let (status, old, report) = write_keeping(&file, 1024, b"new content\n");
    assert!(status.success(), "{report:?}");
    assert_eq!(old, b"old\n");
    assert_eq!(
        report,
        format!("written\x000\x0012\0whole\0{}", file.display())
    );
    assert_eq!(std::fs::read(&file).expect("read"), b"new content\n");
    // Control: the same write without --previous reports on standard output, as before.
    let (status, report) = write(&file, false, b"third\n");
    assert!(status.success());
    assert_eq!(
        report,
        format!("written\x000\x006\0{}", file.display()).into_bytes()
    );
}

#[test]
fn a_write_that_creates_the_file_or_replaces_a_larger_one_copies_nothing_to_use() {
    let ws = Scratch::new("previous-none");
    let file = ws.0.join("sub").join("new.txt");
    let (status, old, report) = write_keeping(&file, 1024, b"made\n");
    assert!(status.success(), "{report:?}");
    assert!(old.is_empty());
    assert_eq!(
        report,
        format!("written\x001\x005\0none\0{}", file.display())
    );
    // Larger than asked for: the write still happens, and what it replaced is not kept.
    std::fs::write(&file, "0123456789").expect("write");
    let (status, _, report) = write_keeping(&file, 4, b"short\n");
    assert!(status.success(), "{report:?}");
    assert_eq!(
        report,
        format!("written\x000\x006\0unread\0{}", file.display())
    );
    assert_eq!(std::fs::read(&file).expect("read"), b"short\n");
}

#[test]
fn a_write_through_a_link_copies_the_file_it_replaces_not_the_link() {
    let ws = Scratch::new("previous-link");
    let real = ws.0.join("real.txt");
    std::fs::write(&real, "behind the link\n").expect("write");
    let link = ws.0.join("link.txt");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    let (status, old, report) = write_keeping(&link, 1024, b"replaced\n");
    assert!(status.success(), "{report:?}");
    assert_eq!(old, b"behind the link\n");
    assert_eq!(
        report,
        format!("written\x000\x009\0whole\0{}", real.display())
    );
    assert!(std::fs::symlink_metadata(&link).expect("link").is_symlink());
}

#[test]
fn an_unreadable_old_file_is_still_replaced_and_reported_unread() {
    let ws = Scratch::new("previous-unreadable");
    let file = ws.0.join("locked.txt");
    std::fs::write(&file, "secret\n").expect("write");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o200)).expect("chmod");
    // Root (or any user with the capability) reads a file whatever its mode: the check would
    // prove nothing there.
    if std::fs::read(&file).is_ok() {
        println!("SKIP: this user reads a file of mode 0200; an ordinary user's run covers this");
        return;
    }
    let (status, old, report) = write_keeping(&file, 1024, b"open\n");
    assert!(status.success(), "{report:?}");
    assert!(old.is_empty(), "{old:?}");
    assert_eq!(
        report,
        format!("written\x000\x005\0unread\0{}", file.display())
    );
    // The new file keeps the old one's mode: read it once it is readable again.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    assert_eq!(std::fs::read(&file).expect("read"), b"open\n");
}

/// An edit of `path` under way, its read received: what it said of the read, and the content.
struct EditUnderWay {
    child: Child,
    /// The read's record (`read` NUL bytes NUL path, without its ending NUL), or, when the read
    /// failed, the whole report.
    read: String,
    old: Vec<u8>,
}

/// Starts an edit of `path` and receives its read: the record on standard error up to its
/// ending NUL (or the end, when the read failed), then as many bytes as it says on standard
/// output.
fn start_edit(path: &Path) -> EditUnderWay {
    use std::io::Read;
    let mut child = Command::new(PROGRAM)
        .args(["edit", "--max", "1024", "--"])
        .arg(path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the edit");
    let stderr = child.stderr.as_mut().expect("stderr");
    let mut record = Vec::new();
    let mut byte = [0u8];
    while stderr.read(&mut byte).expect("the read's record") == 1 {
        record.push(byte[0]);
        if record.starts_with(b"read\0") && record.iter().filter(|b| **b == 0).count() == 3 {
            record.pop();
            break;
        }
    }
    let read = String::from_utf8_lossy(&record).into_owned();
    let mut old = Vec::new();
    if let Some(bytes) = read
        .strip_prefix("read\0")
        .and_then(|r| r.split('\0').next())
    {
        let bytes: usize = bytes.parse().expect("a count");
        old.resize(bytes, 0);
        let stdout = child.stdout.as_mut().expect("stdout");
        stdout.read_exact(&mut old).expect("the content");
    }
    EditUnderWay { child, read, old }
}

impl EditUnderWay {
    /// Sends `answer` and returns how the edit ended and its last record.
    fn answer(self, answer: &[u8]) -> (ExitStatus, String) {
        let out = fed(self.child, answer);
        (
            out.status,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

#[test]
fn an_edit_reads_the_file_then_writes_the_answer_or_leaves_it() {
    let ws = Scratch::new("edit");
    let file = ws.0.join("a.txt");
    std::fs::write(&file, "one\ntwo\n").expect("write");
    let edit = start_edit(&file);
    assert_eq!(edit.read, format!("read\x008\0{}", file.display()));
    assert_eq!(edit.old, b"one\ntwo\n");
    let (status, report) = edit.answer(b"wone\n2\n");
    assert!(status.success(), "{report:?}");
    assert_eq!(report, format!("edited\x006\0{}", file.display()));
    assert_eq!(std::fs::read(&file).expect("read"), b"one\n2\n");
    // An empty answer leaves the file as it is.
    let edit = start_edit(&file);
    assert_eq!(edit.old, b"one\n2\n");
    let (status, report) = edit.answer(b"");
    assert!(status.success(), "{report:?}");
    assert_eq!(report, "kept");
    assert_eq!(std::fs::read(&file).expect("read"), b"one\n2\n");
    // An answer of neither kind writes nothing.
    let (status, report) = start_edit(&file).answer(b"x");
    assert!(!status.success());
    assert!(
        report.starts_with(&format!("unwritten\0{}\0", nix::libc::EINVAL)),
        "{report:?}"
    );
    assert_eq!(std::fs::read(&file).expect("read"), b"one\n2\n");
}

#[test]
fn an_edit_never_overwrites_a_change_made_while_it_was_prepared() {
    let ws = Scratch::new("edit-changed");
    let file = ws.0.join("a.txt");
    // Control: nothing changes between the read and the answer, and the edit is written.
    std::fs::write(&file, "base\n").expect("write");
    let (status, report) = start_edit(&file).answer(b"wedited\n");
    assert!(status.success(), "{report:?}");
    assert_eq!(std::fs::read(&file).expect("read"), b"edited\n");
    // Changed in place after the read (the same file, new content), or replaced by another
    // file: either way the change stays and the edit fails.
    let in_place = |file: &Path| std::fs::write(file, "changed meanwhile\n").expect("write");
    let replaced = |file: &Path| {
        let other = file.with_extension("new");
        std::fs::write(&other, "edited\n").expect("write");
        std::fs::rename(&other, file).expect("rename");
    };
    for (how, change) in [
        ("in place", &in_place as &dyn Fn(&Path)),
        ("replaced", &replaced),
    ] {
        std::fs::write(&file, "edited\n").expect("write");
        let edit = start_edit(&file);
        assert_eq!(edit.old, b"edited\n");
        change(&file);
        let kept = std::fs::read(&file).expect("read");
        let (status, report) = edit.answer(b"wlost\n");
        assert!(!status.success(), "{how}: {report:?}");
        assert!(
            report.starts_with(&format!("unwritten\0{}\0", nix::libc::EAGAIN)),
            "{how}: {report:?}"
        );
        assert!(
            report.contains("changed while the edit was made"),
            "{how}: {report:?}"
        );
        assert_eq!(std::fs::read(&file).expect("read"), kept, "{how}");
    }
}

#[test]
fn an_edit_of_what_cannot_be_read_fails_as_the_reader_does_and_writes_nothing() {
    let ws = Scratch::new("edit-unread");
    let missing = ws.0.join("missing.txt");
    let edit = start_edit(&missing);
    assert!(edit.old.is_empty());
    // The whole report came before any answer: the read's failure.
    assert!(
        edit.read
            .starts_with(&format!("failed\0{}\0", nix::libc::ENOENT)),
        "{:?}",
        edit.read
    );
    let (status, _) = edit.answer(b"wnew\n");
    assert!(!status.success());
    assert!(!missing.exists());
    nix::unistd::mkfifo(&ws.0.join("fifo"), nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    let edit = start_edit(&ws.0.join("fifo"));
    assert!(
        edit.read.contains("a FIFO, not a regular file"),
        "{:?}",
        edit.read
    );
    let (status, _) = edit.answer(b"");
    assert!(!status.success());
}
