//! The macOS build, checked from Linux: the crates the macOS jobs build (`.github/workflows`:
//! ci.yml's `macos`, e2e.yml's seatbelt leg) that need no C compiler for macOS — the protocol,
//! the helper with its tests, the kernel suite — must compile for `x86_64-apple-darwin`. No Mac
//! runs here, and a change to a file both platforms build (a `#[cfg]` arm, an import) can break
//! the other one unseen. agentd is left out: its TLS crate compiles C for the target, which
//! needs a macOS compiler. Skips where Rust's standard library for that target is not
//! installed (`rustup target add x86_64-apple-darwin`; `.ci/run` tries to add it).

mod support;

use std::path::PathBuf;
use std::process::Command;

use support::skip::{Need, skip};
use support::workspace;

const TARGET: &str = "x86_64-apple-darwin";

/// Whether the standard library for `TARGET` is installed: its directory in the sysroot holds
/// files.
fn target_installed() -> bool {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let Ok(out) = Command::new(rustc).args(["--print", "sysroot"]).output() else {
        return false;
    };
    let sysroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let lib = sysroot.join("lib/rustlib").join(TARGET).join("lib");
    std::fs::read_dir(lib).is_ok_and(|mut entries| entries.next().is_some())
}

#[test]
fn the_crates_that_build_on_macos_compile_for_macos() {
    const NAME: &str = "the_crates_that_build_on_macos_compile_for_macos";
    if !target_installed() {
        let reason = format!("Rust's standard library for {TARGET} is not installed");
        skip(NAME, Need::MacosTarget, reason);
        return;
    }
    // A target directory of its own beside the build's: checking for another platform shares
    // nothing with it, and is incremental from one run to the next.
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace().join("target"), PathBuf::from)
        .join("macos-check");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "check",
            "--offline",
            "--locked",
            "--target",
            TARGET,
            "--all-targets",
        ])
        .args([
            "-p",
            "confine-protocol",
            "-p",
            "confine-helper",
            "-p",
            "kernel-e2e",
        ])
        .env("CARGO_TARGET_DIR", &target_dir)
        .env_remove("RUSTFLAGS")
        .current_dir(workspace())
        .output()
        .expect("run cargo check");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let errors: Vec<&str> = stderr
        .split("\n\n")
        .filter(|block| block.starts_with("error"))
        .collect();
    assert!(
        out.status.success(),
        "the macOS build does not compile ({} errors):\n{}",
        errors.len(),
        if errors.is_empty() {
            stderr.as_ref().to_owned()
        } else {
            errors.join("\n\n")
        }
    );
}
