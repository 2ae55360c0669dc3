//! A helper that cannot serve: missing, not executable, or of another protocol. `agentd run`
//! must say which and what to do, exit 125, and run nothing — never the command unconfined.
//! The control runs the same command through the real helper, where it does run.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use confine_protocol::{Hello, PROTOCOL_VERSION, SCHEMA_HASH, encode_frame};
use support::binary;

/// A directory of the test's own under the build's target directory (not `/tmp`, which a
/// workspace-write sandbox replaces), removed at the end.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let dir = binary("agentd")
            .with_file_name("tmp")
            .join(format!("helper-faults-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("ws")).expect("scratch");
        Dir(dir)
    }

    fn ws(&self) -> PathBuf {
        self.0.join("ws")
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `agentd run` of a command that leaves `ran` in the workspace, with `helper`; returns the
/// exit code and stderr.
fn run_with(dir: &Dir, helper: Option<&Path>) -> (i32, String) {
    let mut command = Command::new(binary("agentd"));
    command.arg("run");
    if let Some(helper) = helper {
        command.arg("--helper").arg(helper);
    }
    let out = command
        .args(["--mode", "workspace-write", "--workspace"])
        .arg(dir.ws())
        .args(["--", "touch", "ran"])
        .current_dir(dir.ws())
        .env("XDG_CONFIG_HOME", dir.0.join("config"))
        .output()
        .expect("run agentd");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn nothing_ran(dir: &Dir) -> bool {
    !dir.ws().join("ran").exists()
}

#[test]
fn a_missing_helper_is_named_and_nothing_runs() {
    let dir = Dir::new("missing");
    let missing = dir.0.join("no-such-confine-helper");
    let (code, stderr) = run_with(&dir, Some(&missing));
    assert_eq!(code, 125, "{stderr}");
    assert!(stderr.contains("does not exist"), "{stderr}");
    assert!(stderr.contains(&missing.display().to_string()), "{stderr}");
    assert!(nothing_ran(&dir));

    // The control: the real helper runs the same command.
    let (code, stderr) = run_with(&dir, Some(&binary("confine-helper")));
    assert_eq!(code, 0, "{stderr}");
    assert!(!nothing_ran(&dir), "the control did not run the command");
}

#[test]
fn a_helper_that_is_not_executable_is_named_and_nothing_runs() {
    let dir = Dir::new("noexec");
    let helper = dir.0.join("confine-helper");
    std::fs::copy(binary("confine-helper"), &helper).expect("copy");
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let (code, stderr) = run_with(&dir, Some(&helper));
    assert_eq!(code, 125, "{stderr}");
    assert!(stderr.contains("not an executable"), "{stderr}");
    assert!(nothing_ran(&dir));

    // The control: the same copy, made executable, runs it.
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let (code, stderr) = run_with(&dir, Some(&helper));
    assert_eq!(code, 0, "{stderr}");
    assert!(!nothing_ran(&dir), "the control did not run the command");
}

#[test]
fn a_helper_of_another_protocol_is_refused_naming_both_versions_and_nothing_runs() {
    let dir = Dir::new("version");
    let other = PROTOCOL_VERSION + 1;
    let hello = Hello {
        protocol_version: other,
        schema_hash: SCHEMA_HASH,
        software: "confine-helper 9.9.9".into(),
    };
    let frame: String = encode_frame(&hello)
        .expect("encode")
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    // Greets on the descriptor agentd gives it, then waits for agentd to go.
    let helper = dir.0.join("confine-helper");
    std::fs::write(
        &helper,
        format!(
            "#!/usr/bin/env python3\nimport os, sys\n\
             fd = int(sys.argv[sys.argv.index('--fd') + 1])\n\
             os.write(fd, bytes.fromhex('{frame}'))\n\
             try:\n    os.read(fd, 1 << 16)\nexcept OSError:\n    pass\n"
        ),
    )
    .expect("fake helper");
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let (code, stderr) = run_with(&dir, Some(&helper));
    assert_eq!(code, 125, "{stderr}");
    assert!(stderr.contains("protocol mismatch"), "{stderr}");
    assert!(stderr.contains("confine-helper 9.9.9"), "{stderr}");
    assert!(stderr.contains(&format!("v{other}")), "{stderr}");
    assert!(stderr.contains(&format!("v{PROTOCOL_VERSION}")), "{stderr}");
    assert!(nothing_ran(&dir));
}
