//! The program's command line, run as a process: `--help` and `--version` answer and exit 0
//! without listening anywhere, and an unknown option is refused with a message naming it.
//! (Also what makes `cargo test --workspace` build the binary that the helper's service tests
//! and the scenarios drive.)

use std::process::Command;

fn service(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_confine-service"))
        .args(args)
        .env_clear()
        .output()
        .expect("run confine-service")
}

#[test]
fn help_and_version_answer_and_exit_zero() {
    let help = service(&["--help"]);
    assert!(help.status.success(), "{help:?}");
    assert!(String::from_utf8_lossy(&help.stdout).contains("usage: confine-service --socket PATH"));
    let version = service(&["--version"]);
    assert!(version.status.success(), "{version:?}");
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        format!("confine-service {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn an_unknown_option_is_refused_naming_it() {
    let out = service(&["--bogus"]);
    assert!(!out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("--bogus"), "{said}");
    // Control: the same program accepts a known option (above), so the refusal is the option's.
    assert!(service(&["--version"]).status.success());
}
