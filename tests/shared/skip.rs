//! How a test says it could not run here, or ran only in part — the one way, for the tests of
//! every crate (included through `#[path]`; kernel-e2e has its own report).
//!
//! - A skip names what was missing, a [`Need`]. Whether something is missing is judged by the
//!   test, from the machine (`available.rs` for the backends), never from the code under test.
//! - A run that must have something sets `AGENTD_REQUIRE_<NEED>=1` (`.ci/run` does for what it
//!   installs): a skip for want of it then fails the test, naming the variable.
//! - libtest hides what a passing test prints, and a line written while it prints `test x ...`
//!   lands in the middle of that line. So skips are collected and printed to stderr once the
//!   test binary has finished, after libtest's summary: `SKIP <test>: <reason>`, one a line.
//! - A test binary in which every test that ran skipped checked nothing: it fails then (exit
//!   101, after its summary), unless each of them skipped for the run's own choice: not root
//!   (run it as root to cover them), or a test the run did not ask for ([`Need::OptIn`]).

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::io::Write;
use std::sync::{Mutex, Once, PoisonError};

/// What a test can lack. Its variable, `AGENTD_REQUIRE_<NAME>`, makes it required.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// A root-owned bubblewrap that builds its namespaces (`available::bwrap`).
    Bwrap,
    /// A kernel that offers Landlock (`available::landlock`): the `landlock` backend, and with
    /// [`Need::UserNamespace`] the `namespaces` backend (`available::namespaces`).
    Landlock,
    /// Any backend: required when bwrap or Landlock is (the `namespaces` backend needs
    /// Landlock too).
    Backend,
    /// Running as root; never required (CI's root jobs run them), and the run's own choice.
    Root,
    /// System users and groups the test makes or looks up.
    Users,
    /// python3 on the PATH commands get.
    Python3,
    /// strace.
    Strace,
    /// git.
    Git,
    /// Network namespaces of the test's own: `ip` (iproute2), veth and IPv6.
    Ip,
    /// `unshare` and `setpriv` (util-linux), and a user namespace that may mount: with
    /// [`Need::Landlock`], what the `namespaces` backend needs (`available::namespaces`).
    UserNamespace,
    /// A cgroup v2 hierarchy this process may write.
    Cgroup2,
    /// `systemd-analyze`.
    SystemdAnalyze,
    /// The external ACP client acpx.
    Acpx,
    /// The TypeScript ACP SDK.
    TypescriptSdk,
    /// The Python ACP SDK.
    PythonSdk,
    /// Rust's standard library for `x86_64-apple-darwin` (`rustup target add
    /// x86_64-apple-darwin`) and the crates only a macOS build uses (`cargo fetch --target
    /// x86_64-apple-darwin`), to check the macOS build from Linux.
    MacosTarget,
    /// A test that changes the machine and runs only where the run asks for it (the
    /// packed-install rehearsal: `AGENTD_INSTALL_REHEARSAL=1`); asked, it must run. Never
    /// required by an `AGENTD_REQUIRE_` variable: asking for it is requiring it.
    OptIn,
}

impl Need {
    /// The upper-case name in `AGENTD_REQUIRE_<NAME>`.
    pub fn name(self) -> &'static str {
        match self {
            Need::Bwrap => "BWRAP",
            Need::Landlock => "LANDLOCK",
            Need::Backend => "BACKEND",
            Need::Root => "ROOT",
            Need::Users => "USERS",
            Need::Python3 => "PYTHON3",
            Need::Strace => "STRACE",
            Need::Git => "GIT",
            Need::Ip => "IP",
            Need::UserNamespace => "USER_NAMESPACE",
            Need::Cgroup2 => "CGROUP2",
            Need::SystemdAnalyze => "SYSTEMD_ANALYZE",
            Need::Acpx => "ACPX",
            Need::TypescriptSdk => "TYPESCRIPT_SDK",
            Need::PythonSdk => "PYTHON_SDK",
            Need::MacosTarget => "MACOS_TARGET",
            Need::OptIn => "OPT_IN",
        }
    }

    /// The variable that makes this need required.
    pub fn variable(self) -> String {
        format!("AGENTD_REQUIRE_{}", self.name())
    }

    /// The variable set to `1` that makes this run require it, if one is.
    pub fn required_by(self) -> Option<String> {
        let set = |need: Need| {
            let name = need.variable();
            (std::env::var(&name).as_deref() == Ok("1")).then_some(name)
        };
        match self {
            Need::Backend => set(Need::Backend)
                .or_else(|| set(Need::Bwrap))
                .or_else(|| set(Need::Landlock)),
            // The run's own choices.
            Need::Root | Need::OptIn => None,
            need => set(need),
        }
    }
}

/// One skip: the test (as its thread is named), what it printed, and whether the whole test
/// checked nothing.
struct Skip {
    thread: Option<String>,
    line: String,
    whole: bool,
    need: Need,
}

static SKIPS: Mutex<Vec<Skip>> = Mutex::new(Vec::new());
static AT_EXIT: Once = Once::new();

/// The name of the test running on this thread (libtest names each test's thread after it).
pub fn this_test() -> String {
    std::thread::current()
        .name()
        .unwrap_or("(a thread of a test)")
        .to_owned()
}

/// `test` checked nothing here for want of `need`: recorded, or a failure where `need` is
/// required. The caller returns right after.
#[track_caller]
pub fn skip(test: &str, need: Need, reason: impl std::fmt::Display) {
    record(format!("SKIP {test}: {reason}"), need, true);
}

/// Part of `test` (`part`) did not run for want of `need`; the rest did. Recorded, or a failure
/// where `need` is required.
#[track_caller]
pub fn skip_part(test: &str, part: &str, need: Need, reason: impl std::fmt::Display) {
    record(format!("SKIP {test} ({part}): {reason}"), need, false);
}

#[track_caller]
fn record(line: String, need: Need, whole: bool) {
    if let Some(variable) = need.required_by() {
        panic!("{line}; but {variable}=1 requires it here");
    }
    AT_EXIT.call_once(|| {
        // SAFETY: atexit takes a plain function of no arguments, which runs once the test
        // harness returned from main or called exit; it only locks and writes.
        unsafe {
            nix::libc::atexit(report);
        }
    });
    let thread = std::thread::current().name().map(str::to_owned);
    SKIPS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(Skip {
            thread,
            line,
            whole,
            need,
        });
}

/// Prints every skip after the harness's summary; fails the binary (exit 101) when every test
/// that ran skipped, and not all of them for the run's own choice (root, an opt-in).
extern "C" fn report() {
    let skips = SKIPS.lock().unwrap_or_else(PoisonError::into_inner);
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let mut text = format!("\n{binary}: {} skipped here:\n", skips.len());
    for skip in skips.iter() {
        text.push_str(&skip.line);
        text.push('\n');
    }
    let skipped: BTreeSet<&str> = skips
        .iter()
        .filter(|s| s.whole)
        .filter_map(|s| s.thread.as_deref())
        .collect();
    let only_chosen = skips
        .iter()
        .filter(|s| s.whole)
        .all(|s| matches!(s.need, Need::Root | Need::OptIn));
    let nothing_ran = !only_chosen && selected_tests().is_some_and(|n| n > 0 && skipped.len() >= n);
    if nothing_ran {
        text.push_str(&format!(
            "FAILED {binary}: every test that ran skipped, so nothing was checked; install what \
             the lines above name (bash .ci/run does), or run a test that can run here\n"
        ));
    }
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
    if nothing_ran {
        // SAFETY: _exit ends the process at once, as exit would, without running the other
        // exit handlers (exit may not be called again from one).
        unsafe { nix::libc::_exit(101) };
    }
}

/// How many tests this run of the binary selected: the same binary, with the same filters,
/// asked to list them. `None` if that cannot be known.
fn selected_tests() -> Option<usize> {
    let exe = std::env::current_exe().ok()?;
    let mut kept = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            // Options whose value follows: how to print, where to log, how many threads.
            "--format" | "--logfile" | "--color" | "--test-threads" | "--shuffle-seed" => {
                args.next();
            }
            "-q" | "--quiet" => {}
            _ if arg.starts_with("--format=") || arg.starts_with("--test-threads=") => {}
            _ => kept.push(arg),
        }
    }
    let out = std::process::Command::new(exe)
        .args(kept)
        .args(["--list", "--format", "terse"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    out.status.success().then(|| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.ends_with(": test"))
            .count()
    })
}
