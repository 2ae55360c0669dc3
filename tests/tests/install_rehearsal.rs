//! The packed-install rehearsal: the three Debian packages built by `packaging/build-debs`
//! (`confine-helper`, `confine-service`, `agentd`), installed on this machine with `dpkg -i`,
//! used, broken, and removed.
//!
//! It checks that each package is of this machine's architecture and its binaries are
//! executables for it; that the installed `agentd run` and `agentd demo` work against the
//! installed helper as root and as a user made for the test, and `agentd run` as that user
//! through the installed service (the installed unit's `ExecStart`, which runs
//! `/usr/bin/confine-service`, serving the group the service's package made), confined (a write outside the
//! workspace, to a file the user may write, leaves it unchanged, a new file there is not
//! created, and the facts say the sandbox refused it); that an install whose helper is broken
//! fails closed (exit 125, nothing runs); that `dpkg --purge` leaves none of the packages'
//! files, no ceiling and no configuration directory behind; and that a rehearsal interrupted
//! once installed (SIGINT to its process group, as Ctrl-C sends it; SIGTERM) leaves the machine
//! as it found it.
//!
//! It changes the machine — the packages go in system-wide, the helper's creates the system
//! group `confine-helper`, and a user is made — so it runs only when asked:
//! `AGENTD_INSTALL_REHEARSAL=1` (`.ci/run` sets it as root). Asked, it must run: where it
//! cannot (not root, no `dpkg` or `cargo-deb`, a package installed already, which it would
//! replace) it fails and says why. Not asked, it says SKIP after the run and passes: not asking
//! is the run's own choice (`tests/shared/skip.rs`, `Need::OptIn`).
//!
//! What it installs is removed on every exit path by a keeper: a process started before `dpkg
//! -i`, in a process group of its own (a Ctrl-C at the terminal does not reach it), ignoring
//! SIGINT, SIGTERM and SIGHUP, that waits for the end of its stdin, a pipe only the rehearsal's
//! process writes to. The kernel closes that pipe however the process ends — a failed check, a
//! signal, SIGKILL — and the keeper then purges the packages (`postrm` removes the group it
//! made), removes the test's user and, were it left, the group. A signal handler could not
//! cover SIGKILL, nor a signal that arrives while the handler cannot run cleanup safely. What
//! the keeper cannot outlive: the whole machine or container going, or something that kills
//! every process of the session (a CI runner's cancel); it writes what it did to
//! `rehearsal-keeper-PID.log` in the tests' scratch directory (`CARGO_TARGET_TMPDIR`).
//! (A throwaway root, `dpkg --root`, would not do: the maintainer scripts then run chrooted
//! there and need a whole system in it, as the confined `agentd run` would.)

mod support;

use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use support::users::{MARK, remove_left_behind, run, system_user};

const NAME: &str =
    "the_packages_install_confine_as_root_and_as_a_user_fail_closed_and_leave_nothing";
const PACKAGES: [&str; 3] = ["agentd", "confine-service", "confine-helper"];
const USER: &str = "agentd-pkg-user";
/// The group the service's package makes (`packaging/confine-service/debian/postinst`).
const GROUP: &str = "confine-helper";

/// The opt-in: `1` runs the rehearsal, and then it must run.
const OPT_IN: &str = "AGENTD_INSTALL_REHEARSAL";
/// Set in the copy of this test that is interrupted: the directory where it says it installed
/// the packages (the file `installed`, holding its keeper's pid), and the packages, after it.
const INTERRUPTED: &str = "AGENTD_INSTALL_REHEARSAL_INTERRUPTED";

/// How long `dpkg -i` of the packages may take, in the copy that is interrupted.
const INSTALL_LIMIT: Duration = Duration::from_secs(300);
/// How long the keeper may take to purge the packages once its rehearsal has ended.
const KEEPER_LIMIT: Duration = Duration::from_secs(60);
/// How many times the keeper tries `dpkg --purge`, a second apart, while an interrupted
/// `dpkg` still holds dpkg's lock.
const PURGE_TRIES: u32 = 60;

fn text(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn installed(package: &str) -> bool {
    run("dpkg-query", &["-W", "-f=${Status}", package])
        .stdout
        .starts_with(b"install ok installed")
}

/// Whether the rehearsal was asked for: `Ok(false)` when not, an error for a value that is
/// neither unset nor `1`.
fn asked() -> Result<bool, String> {
    match std::env::var_os(OPT_IN) {
        None => Ok(false),
        Some(value) if value == "1" => Ok(true),
        Some(value) if value.is_empty() || value == "0" => Ok(false),
        Some(value) => Err(format!(
            "{OPT_IN} is {value:?}: set it to 1 to run the rehearsal, or leave it unset"
        )),
    }
}

/// Why the rehearsal cannot run here, if it cannot.
fn cannot_run() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("installing packages needs root".into());
    }
    if Command::new("dpkg").arg("--version").output().is_err() {
        return Some("dpkg is not installed".into());
    }
    let deb = Command::new("cargo").args(["deb", "--version"]).output();
    if !deb.is_ok_and(|out| out.status.success()) {
        return Some("cargo-deb is not installed (cargo install --locked cargo-deb)".into());
    }
    if let Some(package) = PACKAGES.iter().find(|p| installed(p)) {
        return Some(format!(
            "the package {package} is installed on this machine, and the rehearsal would \
             replace and then remove it"
        ));
    }
    None
}

/// What the rehearsal may leave on the machine: each package's state, the group, the user and
/// its group, as `dpkg-query` and `getent` show them. Equal before and after, or it left some.
fn traces() -> Vec<String> {
    let mut found: Vec<String> = PACKAGES
        .iter()
        .map(|p| format!("{p}: {}", installed(p)))
        .collect();
    for (database, name) in [("group", GROUP), ("passwd", USER), ("group", USER)] {
        let entry = run("getent", &[database, name]);
        found.push(format!(
            "{database} {name}: {}",
            String::from_utf8_lossy(&entry.stdout).trim()
        ));
    }
    found
}

/// Removes what the rehearsal installs once the rehearsal's process has ended, however it
/// ended (see the top of this file). Dropped, it closes its pipe and waits for the removal.
struct Keeper {
    child: Child,
    pipe: Option<ChildStdin>,
    log: PathBuf,
}

/// The keeper's script: `$1` the user, `$2` its comment when the tests made it, `$3` whether
/// the group existed before (`yes`/`no`), `$4` how many times to try the purge.
const KEEPER: &str = r#"
trap '' INT TERM HUP PIPE
cat >/dev/null
echo "the rehearsal's process has ended; removing what it installed"
tries=0
until dpkg --purge agentd confine-service confine-helper; do
  tries=$((tries + 1))
  if [ "$tries" -ge "$4" ]; then
    echo "dpkg --purge agentd confine-service confine-helper failed $tries times: run it by hand" >&2
    exit 1
  fi
  sleep 1
done
if [ "$(getent passwd "$1" | cut -d: -f5)" = "$2" ]; then
  userdel --force "$1" && echo "removed the user $1"
fi
if [ "$3" = no ] && getent group confine-helper >/dev/null; then
  groupdel confine-helper && echo "removed the group confine-helper"
fi
exit 0
"#;

impl Keeper {
    fn start() -> Keeper {
        let log = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("rehearsal-keeper-{}.log", std::process::id()));
        let out = std::fs::File::create(&log).expect("the keeper's log");
        let err = out.try_clone().expect("the keeper's log");
        let group_before = run("getent", &["group", GROUP]).status.success();
        let mut child = Command::new("sh")
            .args(["-c", KEEPER, "rehearsal-keeper", USER, MARK])
            .arg(if group_before { "yes" } else { "no" })
            .arg(PURGE_TRIES.to_string())
            .stdin(Stdio::piped())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
            .expect("start the keeper");
        let pipe = child.stdin.take();
        Keeper { child, pipe, log }
    }

    /// Ends the keeper's wait and waits for its removal; what it did, or why it failed.
    fn finish(&mut self) -> Result<String, String> {
        drop(self.pipe.take());
        let status = self.child.wait().map_err(|e| format!("the keeper: {e}"))?;
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        if status.success() {
            Ok(log)
        } else {
            Err(format!("the keeper failed ({status}): {log}"))
        }
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        if self.pipe.is_some()
            && let Err(e) = self.finish()
        {
            eprintln!("{e}");
        }
    }
}

/// `dpkg -i` of `debs`, with every package then installed.
fn install(debs: &[String]) {
    let mut args = vec!["-i"];
    args.extend(debs.iter().map(String::as_str));
    let install = run("dpkg", &args);
    assert!(install.status.success(), "dpkg -i: {}", text(&install));
    for package in PACKAGES {
        assert!(installed(package), "{package} is not installed");
    }
}

/// The ELF machine number of this build's architecture.
fn elf_machine() -> u16 {
    match std::env::consts::ARCH {
        "x86_64" => 62,
        "aarch64" => 183,
        "arm" => 40,
        "riscv64" => 243,
        "powerpc64" => 21,
        "s390x" => 22,
        other => panic!("no ELF machine number known for {other}"),
    }
}

/// Whether `path` is an executable ELF file for this machine, linked dynamically or not as
/// `dynamic` says.
fn check_executable(path: &Path, dynamic: bool) {
    let meta = std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(meta.is_file(), "{} is not a file", path.display());
    assert_eq!(meta.uid(), 0, "{} is not root's", path.display());
    assert_eq!(meta.mode() & 0o7777, 0o755, "{}", path.display());
    let bytes = std::fs::read(path).expect("read the binary");
    assert_eq!(&bytes[..4], b"\x7fELF", "{} is not ELF", path.display());
    let machine = u16::from_le_bytes([bytes[18], bytes[19]]);
    assert_eq!(
        machine,
        elf_machine(),
        "{} is for another machine",
        path.display()
    );
    assert_eq!(
        has_interpreter(&bytes),
        dynamic,
        "{} linked dynamically",
        path.display()
    );
}

/// Whether the ELF file `bytes` names a program interpreter (`PT_INTERP`): a dynamically linked
/// program does, a static one (`static-pie` included) does not.
fn has_interpreter(bytes: &[u8]) -> bool {
    const PT_INTERP: u32 = 3;
    let word = |at: usize, n: usize| -> u64 {
        let mut field = [0u8; 8];
        field[..n].copy_from_slice(&bytes[at..at + n]);
        u64::from_le_bytes(field)
    };
    assert_eq!(bytes[4], 2, "a 64-bit ELF file");
    assert_eq!(bytes[5], 1, "a little-endian ELF file");
    let (phoff, phentsize, phnum) = (word(32, 8), word(54, 2), word(56, 2));
    (0..phnum).any(|i| {
        let at = usize::try_from(phoff + i * phentsize).expect("an offset");
        word(at, 4) == u64::from(PT_INTERP)
    })
}

/// A directory for one run as `(uid, gid)`: its home, a workspace in it, and a file outside
/// the workspace that it may write.
struct Place {
    root: PathBuf,
    home: PathBuf,
    ws: PathBuf,
    outside: PathBuf,
}

impl Place {
    fn new(tag: &str, (uid, gid): (u32, u32)) -> Place {
        let root =
            Path::new("/var/tmp").join(format!("agentd-rehearsal-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let home = root.join("home");
        let ws = home.join("ws");
        std::fs::create_dir_all(&ws).expect("workspace");
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let outside = home.join("outside");
        std::fs::write(&outside, "original\n").expect("canary");
        for path in [&home, &ws, &outside] {
            std::os::unix::fs::chown(path, Some(uid), Some(gid)).expect("chown");
        }
        Place {
            root,
            home,
            ws,
            outside,
        }
    }

    /// `/usr/bin/agentd ARGS` as `user` (root when `None`), with a clean environment.
    fn agentd(&self, user: Option<&str>, args: &[&str]) -> Output {
        let mut command = Command::new("runuser");
        command.args(["-u", user.unwrap_or("root"), "--", "env", "-i"]);
        command
            .arg(format!("HOME={}", self.home.display()))
            .arg("PATH=/usr/bin:/bin")
            .arg("/usr/bin/agentd")
            .args(args)
            .current_dir(&self.ws);
        command.output().expect("runuser agentd")
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// The installed `agentd run` confines a command as `user`, and `agentd demo` succeeds.
fn check_confined(tag: &str, user: Option<&str>, ids: (u32, u32)) {
    let place = Place::new(tag, ids);
    check_run_confined(tag, &place, user, &[]);
    let demo = place.agentd(user, &["demo"]);
    assert!(demo.status.success(), "{tag}: agentd demo: {}", text(&demo));
}

/// The installed service, started by the installed unit's `ExecStart` on a socket of this test,
/// serves `user` (a member of its group): the installed `agentd run --helper-socket` confines
/// its command, run as that user.
fn check_served(tag: &str, user: &str, ids: (u32, u32)) {
    let place = Place::new(tag, ids);
    let unit = std::fs::read_to_string("/usr/lib/systemd/system/confine-helper.service")
        .expect("the installed service unit");
    let exec_start = unit
        .lines()
        .filter_map(|l| l.strip_prefix("ExecStart="))
        .next_back()
        .expect("ExecStart= in the unit");
    let mut words = exec_start.split_whitespace();
    assert_eq!(
        words.next(),
        Some("/usr/bin/confine-service"),
        "{exec_start}"
    );
    let socket = place.root.join("run").join("helper.sock");
    let mut args: Vec<String> = Vec::new();
    let mut words = words.peekable();
    while let Some(word) = words.next() {
        match word {
            // This test's socket, in place of the system's.
            "--socket" => {
                words.next();
                args.extend(["--socket".to_owned(), socket.display().to_string()]);
            }
            // The test's process is in no cgroup delegated to the service.
            "--delegated-cgroup" => {}
            other => args.push(other.to_owned()),
        }
    }
    let mut service = Command::new("/usr/bin/confine-service")
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the installed unit's ExecStart");
    // A bounded wait for the event: the socket appears once the service listens.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !socket.exists() && std::time::Instant::now() < deadline {
        std::thread::yield_now();
    }
    let listening = socket.exists();
    if listening {
        check_run_confined(
            tag,
            &place,
            Some(user),
            &["--helper-socket", &socket.display().to_string()],
        );
    }
    let _ = service.kill();
    let log = service.wait_with_output().expect("the service's log");
    let log = String::from_utf8_lossy(&log.stderr);
    assert!(
        listening,
        "{tag}: the installed service did not listen: {log}"
    );
    assert!(
        log.contains("served by helper pid") && log.contains(&format!("as uid {}", ids.0)),
        "{tag}: the service did not hand the user to a helper running as it: {log}"
    );
}

/// The installed `agentd run` (with `extra` options) confines a command as `user`.
fn check_run_confined(tag: &str, place: &Place, user: Option<&str>, extra: &[&str]) {
    let created = place.home.join("created-outside");
    let script = format!(
        "echo inside > inside; echo changed > {}; echo new > {}",
        place.outside.display(),
        created.display()
    );
    let ws = place.ws.to_str().expect("utf-8");
    let mut args = vec!["run"];
    args.extend(extra);
    let out = place.agentd(
        user,
        &[
            &args[..],
            &[
                "--json",
                "--mode",
                "workspace-write",
                "--workspace",
                ws,
                "--",
                "sh",
                "-c",
                &script,
            ],
        ]
        .concat(),
    );
    let all = text(&out);
    assert_eq!(
        std::fs::read_to_string(place.ws.join("inside")).unwrap_or_default(),
        "inside\n",
        "{tag}: the command did not run: {all}"
    );
    assert_eq!(
        std::fs::read_to_string(&place.outside).expect("canary"),
        "original\n",
        "{tag}: a write outside the workspace reached the host: {all}"
    );
    assert!(
        !created.exists(),
        "{tag}: a file was created outside the workspace: {all}"
    );
    assert_ne!(out.status.code(), Some(0), "{tag}: {all}");
    let facts = String::from_utf8_lossy(&out.stderr)
        .lines()
        .last()
        .unwrap_or_default()
        .to_owned();
    assert!(
        facts.contains("\"denied\":true") && facts.contains("file-write"),
        "{tag}: the facts do not say the sandbox refused the write: {facts}"
    );
}

/// With the installed helper broken, `agentd run` fails closed: exit 125, nothing runs.
fn check_broken_install_fails_closed() {
    let helper = Path::new("/usr/bin/confine-helper");
    let saved = std::fs::read(helper).expect("read the helper");
    let place = Place::new("broken", (0, 0));
    let ws = place.ws.to_str().expect("utf-8");
    let mut results = Vec::new();
    for (what, broken) in [
        ("truncated", &saved[..64]),
        ("not a program", &b"not a program\n"[..]),
    ] {
        std::fs::write(helper, broken).expect("break the helper");
        let out = place.agentd(
            None,
            &[
                "run",
                "--mode",
                "danger-full-access",
                "--workspace",
                ws,
                "--",
                "sh",
                "-c",
                "echo ran > ran",
            ],
        );
        results.push((
            what,
            out.status.code(),
            place.ws.join("ran").exists(),
            text(&out),
        ));
    }
    std::fs::write(helper, &saved).expect("restore the helper");
    std::fs::set_permissions(helper, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    for (what, code, ran, all) in results {
        assert_eq!(code, Some(125), "{what} helper: {all}");
        assert!(!ran, "{what} helper: the command ran: {all}");
    }
}

/// The packages built by `packaging/build-debs`, each checked to be of this machine's
/// architecture; their paths.
fn build_debs() -> Vec<String> {
    let root = support::workspace();
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("rehearsal-debs");
    let _ = std::fs::remove_dir_all(&out_dir);
    let built = Command::new("bash")
        .arg(root.join("packaging/build-debs"))
        .arg(&out_dir)
        .current_dir(&root)
        .output()
        .expect("packaging/build-debs");
    assert!(built.status.success(), "build-debs: {}", text(&built));
    let debs: Vec<String> = String::from_utf8_lossy(&built.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(debs.len(), PACKAGES.len(), "build-debs printed {debs:?}");
    let arch = String::from_utf8(run("dpkg", &["--print-architecture"]).stdout).expect("utf-8");
    for deb in &debs {
        let field = run("dpkg-deb", &["-f", deb, "Architecture"]);
        assert_eq!(
            String::from_utf8_lossy(&field.stdout).trim(),
            arch.trim(),
            "{deb}"
        );
    }
    debs
}

/// The copy of this test that is interrupted: it installs `debs` under a keeper, says so in
/// `dir/installed` (its keeper's pid), and waits for a signal.
fn install_and_wait(dir: &Path, debs: &[String]) {
    let keeper = Keeper::start();
    install(debs);
    let said = dir.join("installed.new");
    std::fs::write(&said, keeper.child.id().to_string()).expect("say it installed");
    std::fs::rename(&said, dir.join("installed")).expect("say it installed");
    // Its stdin is a pipe the interrupting test never writes to: this waits for the signal.
    let mut nothing = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut nothing);
    panic!("the interrupting test closed the pipe instead of sending a signal");
}

/// A copy of this test, interrupted by `signal` to its whole process group once it has
/// installed the packages, leaves the machine as `before`.
fn interrupted_rehearsal_leaves_nothing(signal: Signal, debs: &[String], before: &[String]) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "rehearsal-interrupted-{}-{signal}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch");
    let given = std::env::join_paths(
        std::iter::once(dir.as_os_str()).chain(debs.iter().map(|d| d.as_ref())),
    )
    .expect("the paths given to the copy");
    let copy = Command::new(std::env::current_exe().expect("this test binary"))
        .args(["--exact", NAME, "--nocapture", "--test-threads", "1"])
        .env(OPT_IN, "1")
        .env(INTERRUPTED, given)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("start a copy of the rehearsal");
    let group = Pid::from_raw(i32::try_from(copy.id()).expect("a pid"));
    let log =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("rehearsal-keeper-{}.log", copy.id()));
    let said = support::wait_for_file(&dir, "installed", INSTALL_LIMIT);
    // The control: the packages are installed when the signal comes, so the check below can
    // fail.
    let installed_then: Vec<bool> = PACKAGES.iter().map(|p| installed(p)).collect();
    let sent = killpg(group, if said { signal } else { Signal::SIGKILL });
    let out = copy.wait_with_output().expect("wait for the copy");
    let all = text(&out);
    assert!(
        said,
        "the copy did not install the packages: {}: {all}",
        out.status
    );
    assert!(sent.is_ok(), "{signal} to the copy: {sent:?}: {all}");
    assert_eq!(installed_then, [true; PACKAGES.len()], "{all}");
    assert_eq!(
        out.status.signal(),
        Some(signal as i32),
        "the copy was not ended by {signal}: {}: {all}",
        out.status
    );
    let keeper: u32 = std::fs::read_to_string(dir.join("installed"))
        .expect("the keeper's pid")
        .parse()
        .expect("a pid");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        support::wait_gone(keeper, KEEPER_LIMIT),
        "the keeper (pid {keeper}) did not end within {KEEPER_LIMIT:?}"
    );
    assert_eq!(
        traces(),
        before,
        "the rehearsal interrupted by {signal} left this behind; the keeper's log ({}): {}",
        log.display(),
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}

#[test]
fn the_packages_install_confine_as_root_and_as_a_user_fail_closed_and_leave_nothing() {
    if let Some(given) = std::env::var_os(INTERRUPTED) {
        let mut paths = std::env::split_paths(&given);
        let dir = paths.next().expect("the directory");
        let debs: Vec<String> = paths.map(|p| p.to_string_lossy().into_owned()).collect();
        install_and_wait(&dir, &debs);
        return;
    }
    match asked() {
        Ok(true) => {}
        Ok(false) => {
            support::skip::skip(
                NAME,
                support::skip::Need::OptIn,
                format!(
                    "set {OPT_IN}=1 to run it (it installs the packages system-wide and removes \
                     them)"
                ),
            );
            return;
        }
        Err(e) => panic!("{NAME}: {e}"),
    }
    if let Some(why) = cannot_run() {
        panic!("{NAME} must run here ({OPT_IN}=1) but cannot: {why}");
    }
    // The user a rehearsal killed with its keeper left (a whole run stopped at once): the tests'
    // own, it goes before the machine is looked at, or this rehearsal, which removes it at its
    // end, would not leave the machine as it found it.
    if let Err(e) = remove_left_behind(USER) {
        panic!("{NAME}: the user {USER} a killed rehearsal left cannot be removed: {e}");
    }
    let before = traces();
    let debs = build_debs();
    for signal in [Signal::SIGINT, Signal::SIGTERM] {
        interrupted_rehearsal_leaves_nothing(signal, &debs, &before);
    }

    let mut keeper = Keeper::start();
    install(&debs);
    let mut files = Vec::new();
    for package in PACKAGES {
        let listed = run("dpkg", &["-L", package]);
        files.extend(
            String::from_utf8_lossy(&listed.stdout)
                .lines()
                .map(PathBuf::from),
        );
    }
    // The helper and the file program, started once per command (the helper again inside
    // bwrap's sandbox), are linked statically; agentd and the service are not (the control).
    for (binary, dynamic) in [
        ("/usr/bin/agentd", true),
        ("/usr/bin/confine-helper", false),
        ("/usr/bin/confine-file-io", false),
        ("/usr/bin/confine-service", true),
    ] {
        assert!(
            files.iter().any(|f| f == Path::new(binary)),
            "{binary} is not in the packages"
        );
        check_executable(Path::new(binary), dynamic);
    }
    assert!(Path::new("/etc/confine-helper/ceiling.toml").is_file());

    check_confined("root", None, (0, 0));
    // A member of the group the service's package made.
    let user = system_user(USER, &[GROUP]);
    check_confined("user", Some(USER), user.ids());
    check_served("served", USER, user.ids());
    check_broken_install_fails_closed();
    check_confined("restored", Some(USER), user.ids());
    drop(user);

    let purge = run(
        "dpkg",
        &["--purge", "agentd", "confine-service", "confine-helper"],
    );
    assert!(purge.status.success(), "dpkg --purge: {}", text(&purge));
    for package in PACKAGES {
        assert!(!installed(package), "{package} is still installed");
    }
    let left: Vec<&PathBuf> = files
        .iter()
        .filter(|f| f.is_file() || f.is_symlink())
        .collect();
    assert!(left.is_empty(), "files left after the purge: {left:?}");
    for dir in [
        "/etc/confine-helper",
        "/usr/share/doc/agentd",
        "/usr/share/doc/confine-helper",
        "/usr/share/doc/confine-service",
    ] {
        assert!(!Path::new(dir).exists(), "{dir} is left after the purge");
    }
    let kept = keeper.finish();
    assert!(kept.is_ok(), "{kept:?}");
    assert_eq!(traces(), before, "the rehearsal left this behind");
}
