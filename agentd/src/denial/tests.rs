//! Denial classification against stderr as real programs print it (coreutils, dash, bash,
//! Python, git, npm and node, curl, Go, Rust), on a described host: true denials of each
//! backend's dialect, and the look-alikes that are not the sandbox's doing.

use std::path::{Component, Path, PathBuf};

use super::host::{Access, Host};
use super::*;

/// A host described by prefixes: what the user may write, may not read, and owns.
struct FakeHost {
    writable: Vec<PathBuf>,
    unreadable: Vec<PathBuf>,
    owned: Vec<PathBuf>,
}

fn under(path: &Path, prefixes: &[PathBuf]) -> bool {
    prefixes.iter().any(|p| path.starts_with(p))
}

impl FakeHost {
    /// Root: everything but the read-only host mounts.
    fn root() -> FakeHost {
        FakeHost {
            writable: vec!["/".into()],
            unreadable: Vec::new(),
            owned: vec!["/".into()],
        }
    }

    /// An unprivileged user: their home, the workspace and /tmp; /root and /etc/shadow are
    /// closed to them.
    fn user() -> FakeHost {
        FakeHost {
            writable: vec!["/home/u".into(), "/w".into(), "/tmp".into()],
            unreadable: vec!["/root".into(), "/etc/shadow".into(), "/var/secret".into()],
            owned: vec!["/home/u".into(), "/w".into()],
        }
    }
}

impl Host for FakeHost {
    fn resolve(&self, path: &Path) -> Option<PathBuf> {
        let mut real = PathBuf::new();
        for part in path.components() {
            match part {
                Component::ParentDir => {
                    real.pop();
                }
                Component::CurDir => {}
                other => real.push(other),
            }
        }
        Some(real)
    }

    fn permits(&self, path: &Path, access: Access) -> bool {
        // The host's own read-only mount, for root too.
        if path.starts_with("/sys") && access != Access::Read {
            return false;
        }
        match access {
            Access::Read => !under(path, &self.unreadable),
            Access::Write => under(path, &self.writable) && !under(path, &self.unreadable),
            Access::Remove => path.parent().is_some_and(|p| under(p, &self.writable)),
            Access::Metadata => under(path, &self.owned),
        }
    }

    fn is_root(&self) -> bool {
        self.owned.iter().any(|p| p == Path::new("/"))
    }
}

/// How a command ran, for [`judged`].
struct Run {
    backend: Backend,
    mode: Mode,
    network: Network,
    code: i32,
}

/// A command confined by `backend` in `mode`, the network denied, that exited 1.
const fn failed(backend: Backend, mode: Mode) -> Run {
    Run {
        backend,
        mode,
        network: Network::Deny,
        code: 1,
    }
}

const BWRAP_RO: Run = failed(Backend::Bwrap, Mode::ReadOnly);
const BWRAP_WW: Run = failed(Backend::Bwrap, Mode::WorkspaceWrite);
const LANDLOCK_RO: Run = failed(Backend::Landlock, Mode::ReadOnly);
const LANDLOCK_WW: Run = failed(Backend::Landlock, Mode::WorkspaceWrite);
const NAMESPACES_RO: Run = failed(Backend::Namespaces, Mode::ReadOnly);
const NAMESPACES_WW: Run = failed(Backend::Namespaces, Mode::WorkspaceWrite);
const SEATBELT_RO: Run = failed(Backend::Seatbelt, Mode::ReadOnly);
const SEATBELT_WW: Run = failed(Backend::Seatbelt, Mode::WorkspaceWrite);

/// The scope of a command started in its workspace `ws` with the network denied.
fn scope_of(mode: Mode, ws: &Path) -> Scope {
    let mut policy = crate::helper_client::SpawnSpec::new(["x"]).policy;
    policy.mode = mode;
    policy.workspace_root = Some(ws.as_os_str().as_encoded_bytes().to_vec());
    Scope::of(ws, &policy)
}

fn judged(run: &Run, host: &FakeHost, stderr: &str) -> Option<Denial> {
    let scope = Scope {
        mode: run.mode,
        network: run.network,
        cwd: "/w".into(),
        roots: vec!["/w".into()],
        protected: vec![".env".into()],
        credentials: Vec::new(),
    };
    classify_on(
        &Evidence {
            exit: Some(ExitStatus::Code(run.code)),
            backend: Some(run.backend),
            runner_failed: false,
            refused: false,
            stderr_tail: stderr.as_bytes(),
            scope: &scope,
        },
        host,
    )
}

fn kinds(run: &Run, host: &FakeHost, stderr: &str) -> Vec<Kind> {
    judged(run, host, stderr).map_or_else(Vec::new, |d| d.kinds)
}

#[track_caller]
fn assert_kind(run: &Run, host: &FakeHost, stderr: &str, kind: Kind) {
    assert_eq!(kinds(run, host, stderr), [kind], "{stderr}");
}

#[track_caller]
fn assert_none(run: &Run, host: &FakeHost, stderr: &str) {
    assert_eq!(judged(run, host, stderr), None, "{stderr}");
}

/// A write outside every writable root, denied alike in workspace-write (`ww`) and read-only
/// (`ro`) mode, and lifted by danger-full-access alone.
#[track_caller]
fn assert_write_outside_the_roots(ww: &Run, ro: &Run, host: &FakeHost, stderr: &str) {
    assert_kind(ww, host, stderr, Kind::FileWrite);
    let denial = judged(ro, host, stderr).expect("denied");
    assert_eq!(denial.kinds, [Kind::FileWrite], "{stderr}");
    assert_eq!(denial.lifted_by, Some(Mode::DangerFullAccess), "{stderr}");
}

// True denials, per dialect.

#[test]
fn bwraps_read_only_mounts_deny_writes_outside_the_roots() {
    let root = FakeHost::root();
    for stderr in [
        "sh: 1: cannot create /root/c: Read-only file system\n",
        "touch: cannot touch '/etc/x': Read-only file system\n",
        "mkdir: cannot create directory ‘/usr/x’: Read-only file system\n",
        "cp: cannot create regular file '/usr/hostname': Read-only file system\n",
        "rm: cannot remove '/etc/hostname': Read-only file system\n",
        "Error: EROFS: read-only file system, open '/etc/x'\n",
        "go: open /root/.cache/go-build/trim.txt: read-only file system\n",
    ] {
        assert_write_outside_the_roots(&BWRAP_WW, &BWRAP_RO, &root, stderr);
        // The helper's own namespaces make the same read-only mounts.
        assert_write_outside_the_roots(&NAMESPACES_WW, &NAMESPACES_RO, &root, stderr);
    }
}

#[test]
fn landlock_denies_writes_outside_the_roots_with_eacces() {
    for host in [FakeHost::root(), FakeHost::user()] {
        for stderr in [
            "sh: 1: cannot create /home/u/x: Permission denied\n",
            "bash: line 1: /home/u/x: Permission denied\n",
            "touch: cannot touch '/tmp/x': Permission denied\n",
            "mv: cannot move 'a.txt' to '/home/u/a.txt': Permission denied\n",
            "Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\n\
             PermissionError: [Errno 13] Permission denied: '/home/u/c'\n",
            "npm error Error: EACCES: permission denied, mkdir '/home/u/.npm/_cacache'\n",
            "error: failed to open `/home/u/x`: Permission denied (os error 13)\n",
            "open /home/u/.cache/go-build/x: permission denied\n",
        ] {
            assert_write_outside_the_roots(&LANDLOCK_WW, &LANDLOCK_RO, &host, stderr);
        }
    }
}

#[test]
fn a_write_inside_the_workspace_in_read_only_mode_is_lifted_by_workspace_write() {
    let user = FakeHost::user();
    for (run, stderr) in [
        (
            &BWRAP_RO,
            "sh: 1: cannot create out.txt: Read-only file system\n",
        ),
        (&LANDLOCK_RO, "bash: out.txt: Permission denied\n"),
        (
            &LANDLOCK_RO,
            "touch: cannot touch 'src/new.rs': Permission denied\n",
        ),
    ] {
        let denial = judged(run, &user, stderr).expect("denied");
        assert_eq!(denial.kinds, [Kind::FileWrite], "{stderr}");
        assert_eq!(denial.lifted_by, Some(Mode::WorkspaceWrite), "{stderr}");
    }
    // The same write in workspace-write mode landed, so its failure is someone else's.
    assert_none(&LANDLOCK_WW, &user, "bash: out.txt: Permission denied\n");
}

#[test]
fn git_metadata_is_a_protected_path_in_every_mode() {
    let root = FakeHost::root();
    for stderr in [
        "fatal: Unable to create '/w/.git/index.lock': Read-only file system.\n",
        "error: could not lock config file .git/config: Read-only file system\n",
        "sh: 1: cannot create .git/hooks/pre-commit: Read-only file system\n",
        "sh: 1: cannot create sub/.git/x: Read-only file system\n",
        "sh: 1: cannot create .env: Read-only file system\n",
    ] {
        for run in [&BWRAP_WW, &BWRAP_RO, &NAMESPACES_WW, &NAMESPACES_RO] {
            let denial = judged(run, &root, stderr).expect("denied");
            assert_eq!(denial.kinds, [Kind::ProtectedPath], "{stderr}");
            assert_eq!(denial.lifted_by, Some(Mode::DangerFullAccess), "{stderr}");
        }
    }
}

/// Python 3.11's traceback of `socket.create_connection` when the filter refuses the socket.
const CREATE_CONNECTION: &str = "Traceback (most recent call last):
  File \"<string>\", line 1, in <module>
  File \"/usr/lib/python3.11/socket.py\", line 851, in create_connection
    raise exceptions[0]
  File \"/usr/lib/python3.11/socket.py\", line 831, in create_connection
    sock = socket(af, socktype, proto)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File \"/usr/lib/python3.11/socket.py\", line 232, in __init__
    _socket.socket.__init__(self, family, type, proto, fileno)
PermissionError: [Errno 1] Operation not permitted
";

#[test]
fn a_read_only_mount_inside_a_writable_root_is_a_protected_path() {
    // The git directory a `.git` file names, here in the workspace: the helper protects it
    // though agentd cannot name it, and inside a root bwrap's only read-only mounts are the
    // protected paths.
    let stderr = "sh: 1: cannot create /w/store/repo.git/config: Read-only file system\n";
    assert_kind(&BWRAP_WW, &FakeHost::root(), stderr, Kind::ProtectedPath);
    // In read-only mode the whole workspace is a read-only mount.
    let denial = judged(&BWRAP_RO, &FakeHost::root(), stderr).expect("denied");
    assert_eq!(denial.kinds, [Kind::FileWrite]);
    // Landlock keeps nothing inside a root read-only: an EACCES there is the file's own.
    assert_none(
        &LANDLOCK_WW,
        &FakeHost::root(),
        "sh: 1: cannot create /w/store/repo.git/config: Permission denied\n",
    );
}

#[test]
fn network_failures_with_the_network_denied_are_network_denials_on_every_linux_backend() {
    let traceback = "Traceback (most recent call last):\n  File \"<string>\", line 3, in \
                     <module>\n    s.connect((\"127.0.0.1\", 9))\nPermissionError: [Errno 13] \
                     Permission denied\n";
    for run in [
        &BWRAP_RO,
        &BWRAP_WW,
        &NAMESPACES_RO,
        &NAMESPACES_WW,
        &LANDLOCK_RO,
        &LANDLOCK_WW,
    ] {
        for stderr in [
            "curl: (6) Could not resolve host: example.com\n",
            "curl: (7) Failed to connect to 127.0.0.1 port 9 after 0 ms: Couldn't connect to \
             server\n",
            "fatal: unable to access 'https://example.com/x.git/': Could not resolve host: \
             example.com\n",
            "ssh: Could not resolve hostname example.com: Temporary failure in name \
             resolution\n",
            "npm error code EAI_AGAIN\nnpm error syscall getaddrinfo\nnpm error request to \
             https://packages.example.test/left-pad failed, reason: getaddrinfo EAI_AGAIN \
             packages.example.test\n",
            "urllib.error.URLError: <urlopen error [Errno 1] Operation not permitted>\n",
            "  WARNING: Retrying after connection broken by 'NewConnectionError('<pip._vendor.\
             urllib3.connection.HTTPSConnection object at 0x7f>: Failed to establish a new \
             connection: [Errno 1] Operation not permitted')'\n",
            "connect EPERM 127.0.0.1:9 - Local (undefined:undefined)\n",
            "dial tcp 10.0.0.1:443: socket: operation not permitted\n",
            "ping: connect: Network is unreachable\n",
            traceback,
            CREATE_CONNECTION,
        ] {
            let denial = judged(run, &FakeHost::user(), stderr).expect("denied");
            assert_eq!(denial.kinds, [Kind::Network], "{stderr}");
            assert_eq!(denial.lifted_by, Some(Mode::DangerFullAccess), "{stderr}");
        }
    }
}

#[test]
fn with_the_network_allowed_a_network_failure_is_the_networks_own() {
    let allowed = Run {
        network: Network::Allow,
        ..BWRAP_WW
    };
    for stderr in [
        "curl: (6) Could not resolve host: example.com\n",
        "getaddrinfo EAI_AGAIN example.com\n",
        "urllib.error.URLError: <urlopen error [Errno -2] Name or service not known>\n",
        "dial tcp 10.0.0.1:443: connect: network is unreachable\n",
    ] {
        assert_none(&allowed, &FakeHost::root(), stderr);
    }
}

#[test]
fn seccomp_denials_are_system_interface_denials() {
    let af_unix = "Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\n  \
                   File \"/usr/lib/python3.11/socket.py\", line 232, in __init__\n    \
                   _socket.socket.__init__(self, family, type, proto, fileno)\n\
                   PermissionError: [Errno 1] Operation not permitted\n";
    for run in [&BWRAP_RO, &BWRAP_WW, &LANDLOCK_RO, &LANDLOCK_WW] {
        for stderr in [
            af_unix,
            "strace: test_ptrace_get_syscall_info: PTRACE_TRACEME: Operation not permitted\n",
            "unshare: unshare failed: Operation not permitted\n",
            "probe: mount /mnt: Operation not permitted\n",
        ] {
            let denial = judged(run, &FakeHost::root(), stderr).expect("denied");
            assert_eq!(denial.kinds, [Kind::SystemInterface], "{stderr}");
            assert_eq!(denial.lifted_by, Some(Mode::DangerFullAccess), "{stderr}");
        }
    }
}

#[test]
fn a_socket_a_script_creates_is_the_network_and_a_unix_one_is_a_socket() {
    let traceback = |source: &str| {
        format!(
            "Traceback (most recent call last):\n  File \"/w/srv.py\", line 2, in <module>\n    \
             {source}\n  File \"/usr/lib/python3.11/socket.py\", line 232, in __init__\n    \
             _socket.socket.__init__(self, family, type, proto, fileno)\n\
             PermissionError: [Errno 1] Operation not permitted\n"
        )
    };
    for run in [&BWRAP_RO, &BWRAP_WW, &LANDLOCK_RO, &LANDLOCK_WW] {
        let inet = traceback("s = socket.socket(); s.bind(('127.0.0.1', 0))");
        assert_kind(run, &FakeHost::root(), &inet, Kind::Network);
        let unix = traceback("s = socket.socket(socket.AF_UNIX)");
        assert_kind(run, &FakeHost::root(), &unix, Kind::Socket);
    }
    let node = "Error: listen EACCES: permission denied 127.0.0.1:8000\n";
    assert_kind(&LANDLOCK_WW, &FakeHost::root(), node, Kind::Network);
    let docker = "Error: connect EPERM /var/run/docker.sock\n";
    assert_kind(&BWRAP_WW, &FakeHost::root(), docker, Kind::Socket);
}

#[test]
fn metadata_changes_in_read_only_mode_are_file_writes() {
    let root = FakeHost::root();
    let inside = "chmod: changing permissions of '/w/run.sh': Operation not permitted\n";
    let denial = judged(&LANDLOCK_RO, &root, inside).expect("denied");
    assert_eq!(denial.kinds, [Kind::FileWrite]);
    assert_eq!(denial.lifted_by, Some(Mode::WorkspaceWrite));
    assert_kind(
        &BWRAP_RO,
        &root,
        "chmod: changing permissions of '/etc/hostname': Operation not permitted\n",
        Kind::FileWrite,
    );
    // In workspace-write the filter lets metadata through: an EPERM is the host's answer.
    assert_none(&LANDLOCK_WW, &root, inside);
}

#[test]
fn root_reading_another_users_file_is_a_read_denial() {
    // Root lost the capability that let it read the file.
    assert_kind(
        &LANDLOCK_RO,
        &FakeHost::root(),
        "cat: /home/alice/.ssh/id_ed25519: Permission denied\n",
        Kind::FileRead,
    );
}

#[test]
fn every_kind_a_command_met_is_named_once_in_order() {
    let stderr = "npm error code EAI_AGAIN\n\
                  npm error request to https://packages.example.test/x failed, reason: \
                  getaddrinfo EAI_AGAIN packages.example.test\n\
                  npm warn logfile could not create logs-dir: Error: EROFS: read-only file \
                  system, mkdir '/root/.npm/_logs'\n\
                  sh: 1: cannot create /root/y: Read-only file system\n";
    let denial = judged(&BWRAP_WW, &FakeHost::root(), stderr).expect("denied");
    assert_eq!(denial.kinds, [Kind::FileWrite, Kind::Network]);
    assert_eq!(denial.lifted_by, Some(Mode::DangerFullAccess));
}

#[test]
fn a_write_that_names_no_path_leaves_the_mode_that_lifts_it_open_in_read_only() {
    let stderr = "Error: Os { code: 30, kind: ReadOnlyFilesystem, message: \"Read-only file \
                  system\" }\n";
    let denial = judged(&BWRAP_RO, &FakeHost::root(), stderr).expect("denied");
    assert_eq!(denial.kinds, [Kind::FileWrite]);
    assert_eq!(denial.lifted_by, None);
    let denial = judged(&BWRAP_WW, &FakeHost::root(), stderr).expect("denied");
    assert_eq!(denial.lifted_by, Some(Mode::DangerFullAccess));
}

// Look-alikes: a failure the sandbox did not cause.

#[test]
fn a_programs_own_permission_denied_on_a_file_the_user_may_not_access_is_not_a_denial() {
    let user = FakeHost::user();
    for run in [&BWRAP_RO, &BWRAP_WW, &LANDLOCK_RO, &LANDLOCK_WW] {
        for stderr in [
            "cat: /etc/shadow: Permission denied\n",
            "sh: 1: cannot create /root/x: Permission denied\n",
            "touch: cannot touch '/root/x': Permission denied\n",
            "head: cannot open '/var/secret/key' for reading: Permission denied\n",
            "PermissionError: [Errno 13] Permission denied: '/etc/shadow'\n",
            "grep: /root/.bash_history: Permission denied\n",
        ] {
            assert_none(run, &user, stderr);
        }
    }
}

#[test]
fn a_read_only_mount_the_user_could_not_write_anyway_is_not_a_denial() {
    // bwrap answers EROFS before the file's permissions are checked; the user could not have
    // created a file in /etc without the sandbox either.
    assert_none(
        &BWRAP_WW,
        &FakeHost::user(),
        "touch: cannot touch '/etc/z': Read-only file system\n",
    );
    // The host's own read-only mount refuses root as well.
    assert_none(
        &BWRAP_RO,
        &FakeHost::root(),
        "sh: 1: cannot create /sys/kernel/x: Read-only file system\n",
    );
}

#[test]
fn a_permission_denied_inside_a_writable_root_is_the_files_own() {
    let host = FakeHost {
        writable: vec!["/w".into()],
        unreadable: vec!["/w/locked".into()],
        owned: vec!["/w".into()],
    };
    assert_none(
        &LANDLOCK_WW,
        &host,
        "sh: 1: cannot create /w/locked/x: Permission denied\n",
    );
    assert_none(
        &LANDLOCK_WW,
        &FakeHost::root(),
        "cp: cannot create regular file 'dist/app': Permission denied\n",
    );
}

#[test]
fn chmod_of_a_file_the_user_does_not_own_is_not_a_denial() {
    assert_none(
        &BWRAP_RO,
        &FakeHost::user(),
        "chmod: changing permissions of '/etc/hostname': Operation not permitted\n",
    );
}

#[test]
fn denial_words_in_a_programs_own_sentences_are_not_denials() {
    for run in [&BWRAP_RO, &LANDLOCK_WW] {
        for stderr in [
            "error: permission denied: you are not a maintainer of this project\n",
            "operation not permitted by policy\n",
            "ERROR:  permission denied for table users\n",
            "remote: Permission to owner/repo.git denied to someone.\n\
             fatal: unable to access 'https://example.com/owner/repo.git/': The requested \
             URL returned error: 403\n",
            "npm error code E403\nnpm error 403 403 Forbidden - PUT https://packages.example.\
             test/x - You do not have permission to publish \"x\".\n",
            "make: *** [all] Error 1\n",
            "Permission denied\n",
        ] {
            assert_none(run, &FakeHost::root(), stderr);
        }
    }
}

#[test]
fn ssh_authentication_failures_are_not_denials() {
    for stderr in [
        "git@example.com: Permission denied (publickey).\nfatal: Could not read from remote \
         repository.\n",
        "u@h: Permission denied (publickey,password).\n",
        "u@h: Permission denied (password).\n",
        "Permission denied, please try again.\n",
    ] {
        assert_none(&BWRAP_RO, &FakeHost::root(), stderr);
        assert_none(&LANDLOCK_WW, &FakeHost::root(), stderr);
    }
    let stderr = "u@h: Permission denied (publickey).\n\
                  sh: 1: cannot create /root/c: Read-only file system\n";
    assert_kind(&BWRAP_RO, &FakeHost::root(), stderr, Kind::FileWrite);
}

#[test]
fn each_backend_counts_only_its_own_texts() {
    let root = FakeHost::root();
    let erofs = "touch: cannot touch '/etc/x': Read-only file system\n";
    assert_kind(&BWRAP_RO, &root, erofs, Kind::FileWrite);
    assert_none(&LANDLOCK_RO, &root, erofs);
    let seatbelt = Run {
        backend: Backend::Seatbelt,
        ..LANDLOCK_RO
    };
    assert_none(&seatbelt, &root, erofs);
    let eacces = "touch: cannot touch '/etc/x': Permission denied\n";
    assert_kind(&LANDLOCK_RO, &root, eacces, Kind::FileWrite);
    assert_kind(&BWRAP_RO, &root, eacces, Kind::FileWrite);
    assert_none(&seatbelt, &root, eacces);
    let eperm = "touch: cannot touch '/etc/x': Operation not permitted\n";
    assert_kind(&seatbelt, &root, eperm, Kind::FileWrite);
    let unconfined = Run {
        backend: Backend::None,
        mode: Mode::DangerFullAccess,
        ..LANDLOCK_RO
    };
    for stderr in [
        erofs,
        eacces,
        eperm,
        "curl: (6) Could not resolve host: example.com\n",
    ] {
        assert_none(&unconfined, &root, stderr);
    }
}

#[test]
fn seatbelt_denies_file_writes_with_eperm_in_every_spelling() {
    // The profile's (deny file-write*) answers EPERM; programs print it as strerror does, as
    // Python does, and as Go and libuv (node, npm) spell it.
    for host in [FakeHost::root(), FakeHost::user()] {
        for stderr in [
            "sh: 1: cannot create /home/u/x: Operation not permitted\n",
            "bash: line 1: /home/u/x: Operation not permitted\n",
            "touch: /tmp/x: Operation not permitted\n",
            "mkdir: /home/u/d: Operation not permitted\n",
            "Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\n\
             PermissionError: [Errno 1] Operation not permitted: '/home/u/c'\n",
            "npm error Error: EPERM: operation not permitted, mkdir '/home/u/.npm/_cacache'\n",
            "open /home/u/.cache/go-build/x: operation not permitted\n",
        ] {
            assert_write_outside_the_roots(&SEATBELT_WW, &SEATBELT_RO, &host, stderr);
        }
    }
    let user = FakeHost::user();
    // Inside the workspace: lifted by workspace-write in read-only mode, a protected path in
    // every mode (the profile keeps git metadata and the request's protected paths read-only,
    // whether they exist or not).
    let denial = judged(
        &SEATBELT_RO,
        &user,
        "touch: out.txt: Operation not permitted\n",
    )
    .expect("denied");
    assert_eq!(denial.kinds, [Kind::FileWrite]);
    assert_eq!(denial.lifted_by, Some(Mode::WorkspaceWrite));
    for stderr in [
        "fatal: Unable to create '/w/.git/index.lock': Operation not permitted\n",
        "mkdir: .git: Operation not permitted\n",
        "sh: 1: cannot create .env: Operation not permitted\n",
    ] {
        for run in [&SEATBELT_WW, &SEATBELT_RO] {
            assert_kind(run, &user, stderr, Kind::ProtectedPath);
        }
    }
    // A denied read reads as one.
    assert_kind(
        &SEATBELT_WW,
        &user,
        "cat: /home/u/.ssh/id_ed25519: Operation not permitted\n",
        Kind::FileRead,
    );
    // The look-alikes: a write the profile allowed (the workspace, in workspace-write) failed
    // for its own reasons; the user could not have written there anyway; bash's refused signal
    // names no file. (`/bin/kill`'s `kill: 1234: Operation not permitted` reads as a write of
    // the file `1234`, a false denial the classifier does not tell apart.)
    for (run, stderr) in [
        (&SEATBELT_WW, "touch: out.txt: Operation not permitted\n"),
        (&SEATBELT_WW, "touch: /etc/x: Operation not permitted\n"),
        (
            &SEATBELT_RO,
            "bash: line 1: kill: (1234) - Operation not permitted\n",
        ),
    ] {
        assert_none(run, &user, stderr);
    }
}

// How the command ended.

#[test]
fn success_without_a_tools_report_is_never_a_denial() {
    let ok = Run {
        code: 0,
        ..BWRAP_RO
    };
    assert_none(
        &ok,
        &FakeHost::root(),
        "sh: 1: cannot create /root/c: Read-only file system\nPermission denied\n",
    );
}

#[test]
fn death_by_signal_a_runner_failure_and_a_refusal_are_never_denials() {
    let scope = scope_of(Mode::ReadOnly, Path::new("/w"));
    let stderr = b"sh: 1: cannot create /root/c: Read-only file system\n";
    let ran = Evidence {
        exit: Some(ExitStatus::Code(1)),
        backend: Some(Backend::Bwrap),
        runner_failed: false,
        refused: false,
        stderr_tail: stderr,
        scope: &scope,
    };
    assert!(classify_on(&ran, &FakeHost::root()).is_some());
    for evidence in [
        Evidence {
            exit: Some(ExitStatus::Signal(9)),
            ..ran
        },
        Evidence {
            runner_failed: true,
            ..ran
        },
        Evidence {
            exit: None,
            backend: None,
            refused: true,
            ..ran
        },
    ] {
        assert_eq!(
            classify_on(&evidence, &FakeHost::root()),
            None,
            "{evidence:?}"
        );
    }
}

#[test]
fn a_denial_among_other_lines_without_a_final_newline_or_valid_utf8_counts() {
    let mut stderr = b"warning: something\n\xff\xfe ".to_vec();
    stderr.extend_from_slice(b"mkdir: cannot create directory '/x': Permission denied");
    let scope = scope_of(Mode::ReadOnly, Path::new("/w"));
    let evidence = Evidence {
        exit: Some(ExitStatus::Code(1)),
        backend: Some(Backend::Landlock),
        runner_failed: false,
        refused: false,
        stderr_tail: &stderr,
        scope: &scope,
    };
    let denial = classify_on(&evidence, &FakeHost::root()).expect("denied");
    assert_eq!(denial.kinds, [Kind::FileWrite]);
}

#[test]
fn an_empty_stderr_is_not_a_denial() {
    assert_none(&BWRAP_RO, &FakeHost::root(), "");
}

// A tool's report that it worked around a denied write.

/// pip's warning when `access(2)` says its cache directory is not writable.
fn pip_warning(path: &str) -> String {
    format!(
        "WARNING: The directory '{path}' or its parent directory is not owned or is not writable \
         by the current user. The cache has been disabled. Check the permissions and owner of \
         that directory. If executing pip with sudo, you should use sudo's -H flag.\n"
    )
}

const SUCCEEDED: Run = Run {
    code: 0,
    ..BWRAP_WW
};

#[test]
fn pips_disabled_cache_after_a_success_is_a_file_write_naming_the_cache() {
    let stderr = pip_warning("/home/u/.cache/pip");
    for run in [
        &SUCCEEDED,
        &Run {
            code: 0,
            ..LANDLOCK_RO
        },
        &BWRAP_WW,
    ] {
        let denial = judged(run, &FakeHost::user(), &stderr).expect("denied");
        assert_eq!(denial.kinds, [Kind::FileWrite]);
        assert_eq!(denial.lifted_by, Some(Mode::DangerFullAccess));
        assert_eq!(denial.paths, [PathBuf::from("/home/u/.cache/pip")]);
        assert_eq!(
            denial.worked_around,
            [WorkedAround {
                path: "/home/u/.cache/pip".into(),
                instead: "pip disabled its cache",
            }]
        );
    }
}

#[test]
fn pips_report_beside_a_failures_own_denial_counts_both_in_the_order_printed() {
    let stderr = format!(
        "{}sh: 1: cannot create /home/u/x: Read-only file system\n",
        pip_warning("/home/u/.cache/pip")
    );
    let denial = judged(&BWRAP_WW, &FakeHost::user(), &stderr).expect("denied");
    assert_eq!(denial.kinds, [Kind::FileWrite]);
    assert_eq!(
        denial.paths,
        [PathBuf::from("/home/u/.cache/pip"), "/home/u/x".into()]
    );
    assert_eq!(denial.worked_around.len(), 1);
}

#[test]
fn pips_report_on_a_cache_inside_a_writable_root_is_not_a_denial() {
    assert_none(&SUCCEEDED, &FakeHost::user(), &pip_warning("/w/.cache/pip"));
    // Relative to the command's directory, the same.
    assert_none(&SUCCEEDED, &FakeHost::user(), &pip_warning(".cache/pip"));
    // In read-only mode the workspace was not writable: workspace-write lifts it.
    let read_only = Run {
        code: 0,
        ..BWRAP_RO
    };
    let denial =
        judged(&read_only, &FakeHost::user(), &pip_warning("/w/.cache/pip")).expect("denied");
    assert_eq!(denial.kinds, [Kind::FileWrite]);
    assert_eq!(denial.lifted_by, Some(Mode::WorkspaceWrite));
}

#[test]
fn pips_report_on_a_protected_path_is_a_protected_path_denial() {
    let denial =
        judged(&SUCCEEDED, &FakeHost::user(), &pip_warning("/w/.git/pip")).expect("denied");
    assert_eq!(denial.kinds, [Kind::ProtectedPath]);
    assert_eq!(denial.paths, [PathBuf::from("/w/.git/pip")]);
}

#[test]
fn pips_report_on_a_directory_the_user_could_not_write_anyway_is_not_a_denial() {
    assert_none(
        &SUCCEEDED,
        &FakeHost::user(),
        &pip_warning("/root/.cache/pip"),
    );
    assert_none(&SUCCEEDED, &FakeHost::user(), &pip_warning("/sys/pip"));
}

#[test]
fn pips_report_as_root_is_about_ownership_and_not_a_denial() {
    assert_none(
        &SUCCEEDED,
        &FakeHost::root(),
        &pip_warning("/home/u/.cache/pip"),
    );
}

#[test]
fn pips_report_unconfined_after_a_runner_failure_or_a_signal_is_not_a_denial() {
    let stderr = pip_warning("/home/u/.cache/pip");
    let unconfined = Run {
        backend: Backend::None,
        mode: Mode::DangerFullAccess,
        ..SUCCEEDED
    };
    assert_none(&unconfined, &FakeHost::user(), &stderr);
    let scope = scope_of(Mode::WorkspaceWrite, Path::new("/w"));
    let ran = Evidence {
        exit: Some(ExitStatus::Code(0)),
        backend: Some(Backend::Bwrap),
        runner_failed: false,
        refused: false,
        stderr_tail: stderr.as_bytes(),
        scope: &scope,
    };
    assert!(classify_on(&ran, &FakeHost::user()).is_some());
    for evidence in [
        Evidence {
            runner_failed: true,
            ..ran
        },
        Evidence {
            exit: Some(ExitStatus::Signal(9)),
            ..ran
        },
    ] {
        assert_eq!(
            classify_on(&evidence, &FakeHost::user()),
            None,
            "{evidence:?}"
        );
    }
}

#[test]
fn a_success_whose_stderr_has_no_report_is_not_a_denial() {
    for stderr in [
        "",
        "Successfully installed tinypkg-1.0\n",
        "WARNING: Running pip as the 'root' user can result in broken permissions\n",
        "touch: cannot touch '/home/u/x': Permission denied\n",
    ] {
        assert_none(&SUCCEEDED, &FakeHost::user(), stderr);
    }
}

// The real host.

#[test]
fn on_the_real_host_a_write_outside_the_workspace_is_denied_unless_the_user_could_not() {
    let scratch = crate::test_support::Scratch::new("denial-real-host");
    let workspace = scratch.0.join("ws");
    let open = scratch.0.join("open");
    let locked = scratch.0.join("locked");
    for dir in [&workspace, &open, &locked] {
        std::fs::create_dir(dir).expect("mkdir");
    }
    std::fs::set_permissions(&locked, std::os::unix::fs::PermissionsExt::from_mode(0o555))
        .expect("chmod");
    let scope = scope_of(Mode::WorkspaceWrite, &workspace);
    let judge = |stderr: String| {
        classify(&Evidence {
            exit: Some(ExitStatus::Code(2)),
            backend: Some(Backend::Landlock),
            runner_failed: false,
            refused: false,
            stderr_tail: stderr.as_bytes(),
            scope: &scope,
        })
    };
    let denied = judge(format!(
        "sh: 1: cannot create {}/x: Permission denied\n",
        open.display()
    ))
    .expect("a writable directory outside the workspace");
    assert_eq!(denied.kinds, [Kind::FileWrite]);
    // Relative paths start in the command's directory: inside the workspace, so not refused.
    assert_eq!(
        judge("sh: 1: cannot create x: Permission denied\n".into()),
        None
    );
    let locked_write = judge(format!(
        "sh: 1: cannot create {}/x: Permission denied\n",
        locked.display()
    ));
    // Root may write anywhere; anyone else could not have written there without the sandbox.
    assert_eq!(locked_write.is_some(), nix::unistd::geteuid().is_root());
    std::fs::set_permissions(&locked, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod back");
}

#[test]
fn on_the_real_host_pips_report_after_a_success_is_denied_unless_the_user_is_root() {
    let scratch = crate::test_support::Scratch::new("denial-real-host-pip");
    let workspace = scratch.0.join("ws");
    let cache = scratch.0.join("cache");
    for dir in [&workspace, &cache] {
        std::fs::create_dir(dir).expect("mkdir");
    }
    let scope = scope_of(Mode::WorkspaceWrite, &workspace);
    let stderr = pip_warning(&cache.display().to_string());
    let denial = classify(&Evidence {
        exit: Some(ExitStatus::Code(0)),
        backend: Some(Backend::Bwrap),
        runner_failed: false,
        refused: false,
        stderr_tail: stderr.as_bytes(),
        scope: &scope,
    });
    // As root pip's warning is about the directory's owner, which no sandbox changes.
    if nix::unistd::geteuid().is_root() {
        assert_eq!(denial, None);
    } else {
        let denial = denial.expect("a writable directory outside the workspace");
        assert_eq!(denial.kinds, [Kind::FileWrite]);
        let real = cache.canonicalize().expect("canonical");
        assert_eq!(denial.paths, [real]);
    }
}
