//! The packed-install rehearsal: both Debian packages built by `packaging/build-debs`, installed
//! on this machine with `dpkg -i`, used, broken, and removed.
//!
//! It checks that each package is of this machine's architecture and its binaries are
//! executables for it; that the installed `agentd run` and `agentd demo` work against the
//! installed helper as root and as a user made for the test, confined (a write outside the
//! workspace, to a file the user may write, leaves it unchanged, a new file there is not
//! created, and the facts say the sandbox refused it); that an install whose helper is broken
//! fails closed (exit 125, nothing runs); and that `dpkg --purge` leaves none of the packages'
//! files, no ceiling and no configuration directory behind.
//!
//! It changes the machine, so it runs only as root, with `dpkg` and `cargo-deb`, and only where
//! neither package is installed already (it would replace it); otherwise it skips and says why
//! (`tests/shared/skip.rs`). As root, `.ci/run` sets `AGENTD_REQUIRE_INSTALL_REHEARSAL=1`,
//! which turns such a SKIP into a failure, so CI cannot pass without the rehearsal.

mod support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::skip::Need;
use support::users::{run, system_user};

const PACKAGES: [&str; 2] = ["agentd", "confine-helper"];
const USER: &str = "agentd-pkg-user";

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

/// Why the rehearsal cannot run here, if it cannot.
fn cannot_run() -> Option<(Need, String)> {
    if !nix::unistd::geteuid().is_root() {
        return Some((Need::Root, "installing packages needs root".into()));
    }
    let missing = |why: &str| Some((Need::InstallRehearsal, why.to_owned()));
    if Command::new("dpkg").arg("--version").output().is_err() {
        return missing("dpkg is not installed");
    }
    let deb = Command::new("cargo").args(["deb", "--version"]).output();
    if !deb.is_ok_and(|out| out.status.success()) {
        return missing("cargo-deb is not installed (cargo install --locked cargo-deb)");
    }
    if let Some(package) = PACKAGES.iter().find(|p| installed(p)) {
        return missing(&format!(
            "the package {package} is installed on this machine, and the rehearsal would \
             replace and then remove it"
        ));
    }
    None
}

/// Purges both packages when dropped, so a failed check never leaves them installed.
struct Installed;

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = run("dpkg", &["--purge", "agentd", "confine-helper"]);
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

/// Whether `path` is an executable ELF file for this machine.
fn check_executable(path: &Path) {
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
    let created = place.home.join("created-outside");
    let script = format!(
        "echo inside > inside; echo changed > {}; echo new > {}",
        place.outside.display(),
        created.display()
    );
    let ws = place.ws.to_str().expect("utf-8");
    let out = place.agentd(
        user,
        &[
            "run",
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

    let demo = place.agentd(user, &["demo"]);
    assert!(demo.status.success(), "{tag}: agentd demo: {}", text(&demo));
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

#[test]
fn the_packages_install_confine_as_root_and_as_a_user_fail_closed_and_leave_nothing() {
    const NAME: &str =
        "the_packages_install_confine_as_root_and_as_a_user_fail_closed_and_leave_nothing";
    if let Some((need, why)) = cannot_run() {
        support::skip::skip(NAME, need, why);
        return;
    }
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
    assert_eq!(debs.len(), 2, "build-debs printed {debs:?}");
    let arch = String::from_utf8(run("dpkg", &["--print-architecture"]).stdout).expect("utf-8");
    for deb in &debs {
        let field = run("dpkg-deb", &["-f", deb, "Architecture"]);
        assert_eq!(
            String::from_utf8_lossy(&field.stdout).trim(),
            arch.trim(),
            "{deb}"
        );
    }

    let _purge = Installed;
    let mut args = vec!["-i"];
    args.extend(debs.iter().map(String::as_str));
    let install = run("dpkg", &args);
    assert!(install.status.success(), "dpkg -i: {}", text(&install));
    let mut files = Vec::new();
    for package in PACKAGES {
        assert!(installed(package), "{package} is not installed");
        let listed = run("dpkg", &["-L", package]);
        files.extend(
            String::from_utf8_lossy(&listed.stdout)
                .lines()
                .map(PathBuf::from),
        );
    }
    for binary in ["/usr/bin/agentd", "/usr/bin/confine-helper"] {
        assert!(
            files.iter().any(|f| f == Path::new(binary)),
            "{binary} is not in the packages"
        );
        check_executable(Path::new(binary));
    }
    assert!(Path::new("/etc/confine-helper/ceiling.toml").is_file());

    check_confined("root", None, (0, 0));
    check_confined("user", Some(USER), system_user(USER, &[]));
    check_broken_install_fails_closed();
    check_confined("restored", Some(USER), system_user(USER, &[]));

    let purge = run("dpkg", &["--purge", "agentd", "confine-helper"]);
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
    ] {
        assert!(!Path::new(dir).exists(), "{dir} is left after the purge");
    }
}
