//! The promises of the GitHub workflows (`.github/workflows/*.yml`), checked where they can be:
//! CI's test job runs `.ci/run`; the MSRV job builds with the `rust-version` of the root
//! `Cargo.toml`, read when it runs; every leg of the confinement suite fails unless its count line
//! shows cases passed and none failed, and the legs cover bwrap and Landlock on x64 and arm64;
//! the release attaches both architectures' packages with their checksums; every job has a
//! runner, steps and a timeout, and every action a pinned major version; and the crates the
//! `macos` job builds that need no macOS compiler compile for macOS from here.
//!
//! The files are read as text: a small reader of the indented block structure the workflows are
//! written in, no YAML library. The scripts that decide something (the MSRV job's reading of
//! `Cargo.toml`, the suite's count-line check) are taken out of the workflow and run with bash
//! on inputs that must pass and inputs that must fail.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::skip::{Need, skip};
use support::workspace;

fn read(relative: &str) -> String {
    let path = workspace().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// A workflow file's lines.
struct Workflow {
    name: String,
    text: String,
}

impl Workflow {
    fn open(name: &str) -> Workflow {
        Workflow {
            name: name.to_owned(),
            text: read(&format!(".github/workflows/{name}")),
        }
    }

    fn lines(&self) -> Vec<&str> {
        self.text.lines().collect()
    }

    /// The lines of job `id`.
    fn job(&self, id: &str) -> Vec<&str> {
        let lines = self.lines();
        let jobs = nested(&lines, "jobs").unwrap_or_else(|| panic!("{}: no jobs", self.name));
        nested(&jobs, id).unwrap_or_else(|| panic!("{}: no job {id}", self.name))
    }

    /// Every job's id and lines.
    fn jobs(&self) -> Vec<(String, Vec<&str>)> {
        let lines = self.lines();
        let jobs = nested(&lines, "jobs").unwrap_or_else(|| panic!("{}: no jobs", self.name));
        let indent = key_indent(&jobs);
        jobs.iter()
            .filter(|l| indent_of(l) == indent && !is_comment(l))
            .filter_map(|l| l.trim().strip_suffix(':'))
            .map(|id| (id.to_owned(), nested(&jobs, id).unwrap_or_default()))
            .collect()
    }
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

fn is_comment(line: &str) -> bool {
    line.trim_start().starts_with('#')
}

/// The indentation of the keys among `lines`: the shallowest of its lines that are not blank
/// or comments.
fn key_indent(lines: &[&str]) -> usize {
    lines
        .iter()
        .filter(|l| !l.trim().is_empty() && !is_comment(l))
        .map(|l| indent_of(l))
        .min()
        .unwrap_or(0)
}

/// The entry `key:` among `lines`, at their key indentation: its inline value (empty when the
/// value is nested) and the lines nested under it.
fn entry<'a>(lines: &[&'a str], key: &str) -> Option<(String, Vec<&'a str>)> {
    let indent = key_indent(lines);
    let at = lines.iter().position(|l| {
        indent_of(l) == indent
            && l.trim_start()
                .strip_prefix(key)
                .is_some_and(|rest| rest.starts_with(':'))
    })?;
    let inline = lines[at].trim_start()[key.len() + 1..].trim();
    let inline = inline.trim_matches('"').to_owned();
    let under = lines[at + 1..]
        .iter()
        .take_while(|l| l.trim().is_empty() || indent_of(l) > indent)
        .copied()
        .collect();
    Some((inline, under))
}

fn nested<'a>(lines: &[&'a str], key: &str) -> Option<Vec<&'a str>> {
    entry(lines, key).map(|(_, under)| under)
}

fn value(lines: &[&str], key: &str) -> Option<String> {
    entry(lines, key).map(|(inline, _)| inline)
}

/// The items of a block sequence (`- …` lines), each with its dash turned into indentation so
/// its keys line up.
fn items(lines: &[&str]) -> Vec<Vec<String>> {
    let indent = key_indent(lines);
    let mut out: Vec<Vec<String>> = Vec::new();
    for line in lines {
        if indent_of(line) == indent && line.trim_start().starts_with("- ") {
            out.push(vec![line.replacen("- ", "  ", 1)]);
        } else if let Some(item) = out.last_mut() {
            item.push((*line).to_owned());
        }
    }
    out
}

fn steps(job: &[&str]) -> Vec<Vec<String>> {
    items(&nested(job, "steps").unwrap_or_default())
}

fn refs(item: &[String]) -> Vec<&str> {
    item.iter().map(String::as_str).collect()
}

/// A step's `run:` script, a block scalar (`run: |`) unindented, or its one line.
fn script(step: &[String]) -> Option<String> {
    let (inline, under) = entry(&refs(step), "run")?;
    if inline != "|" {
        return Some(inline);
    }
    let indent = under
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| indent_of(l))
        .min()
        .unwrap_or(0);
    let lines: Vec<&str> = under
        .iter()
        .map(|l| {
            if l.trim().is_empty() {
                ""
            } else {
                &l[indent..]
            }
        })
        .collect();
    Some(lines.join("\n") + "\n")
}

/// The first step whose `run:` script contains `needle` and not `unless`, and that script.
fn step_running_unless(job: &[&str], needle: &str, unless: &str) -> (Vec<String>, String) {
    steps(job)
        .into_iter()
        .find_map(|step| {
            let run = script(&step)?;
            (run.contains(needle) && !run.contains(unless)).then_some((step, run))
        })
        .unwrap_or_else(|| panic!("no step runs {needle:?} (without {unless:?})"))
}

fn step_running(job: &[&str], needle: &str) -> (Vec<String>, String) {
    step_running_unless(job, needle, "\0")
}

/// A directory of its own under the system's temporary directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("agentd-workflows-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("make a scratch directory");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `script` as a workflow step with `shell: bash` does (`bash -eo pipefail`).
fn bash(script: &str, dir: &Path, env: &[(&str, &Path)], vars: &[(&str, &str)]) -> Output {
    let mut command = Command::new("bash");
    command.args(["--noprofile", "--norc", "-eo", "pipefail", "-c", script]);
    command.current_dir(dir);
    for (k, v) in env {
        command.env(k, v);
    }
    for (k, v) in vars {
        command.env(k, v);
    }
    command.output().expect("run bash")
}

fn declared_rust_version(manifest: &str) -> String {
    manifest
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = "))
        .map(|v| v.trim().trim_matches('"').to_owned())
        .expect("the workspace declares a rust-version")
}

#[test]
fn the_ci_test_job_runs_the_ci_script_as_root() {
    let ci = Workflow::open("ci.yml");
    let job = ci.job("test");
    let (_, run) = step_running(&job, ".ci/run");
    let run = run.trim();
    assert!(
        run.starts_with("sudo ") && run.ends_with(" bash .ci/run"),
        "ci.yml's test job must run the whole of .ci/run as root, as CI does; it runs: {run}"
    );
}

#[test]
fn the_msrv_job_builds_with_the_rust_version_cargo_toml_declares() {
    let declared = declared_rust_version(&read("Cargo.toml"));
    let ci = Workflow::open("ci.yml");
    let job = ci.job("msrv");
    let steps = steps(&job);
    let at = |pred: &dyn Fn(&[String]) -> bool, what: &str| {
        steps
            .iter()
            .position(|s| pred(s))
            .unwrap_or_else(|| panic!("the msrv job has no step that {what}"))
    };
    let reads = at(
        &|s| value(&refs(s), "id").as_deref() == Some("msrv"),
        "has id msrv",
    );
    let installs = at(
        &|s| {
            value(&refs(s), "uses").as_deref() == Some("dtolnay/rust-toolchain@master")
                && nested(&refs(s), "with")
                    .and_then(|with| value(&with, "toolchain"))
                    .as_deref()
                    == Some("${{ steps.msrv.outputs.version }}")
        },
        "installs the toolchain steps.msrv.outputs.version names",
    );
    let checks = at(
        &|s| {
            script(s).is_some_and(|r| r.trim() == "cargo check --workspace --all-targets --locked")
        },
        "runs cargo check --workspace --all-targets --locked",
    );
    assert!(
        reads < installs && installs < checks,
        "the msrv job must read the version, then install it, then build"
    );

    // The step's script, run on the real Cargo.toml, gives the declared version.
    let read_version = script(&steps[reads]).expect("the msrv step runs a script");
    let scratch = Scratch::new("msrv");
    let output = scratch.0.join("output");
    let run = |dir: &Path| {
        let _ = std::fs::remove_file(&output);
        let out = bash(&read_version, dir, &[("GITHUB_OUTPUT", &output)], &[]);
        let written = std::fs::read_to_string(&output).unwrap_or_default();
        (
            out.status.success(),
            written,
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (ok, written, stdout) = run(&workspace());
    assert!(ok, "the msrv step fails on the real Cargo.toml: {stdout}");
    assert_eq!(written.trim(), format!("version={declared}"));

    // It reads the file rather than knowing an answer: another declaration gives another
    // version, and a manifest without one fails the step.
    let other = scratch.0.join("other");
    std::fs::create_dir_all(&other).expect("mkdir");
    let manifest = other.join("Cargo.toml");
    std::fs::write(&manifest, "[workspace.package]\nrust-version = \"9.87\"\n").expect("write");
    let (ok, written, _) = run(&other);
    assert!(
        ok && written.trim() == "version=9.87",
        "the msrv step must read rust-version from Cargo.toml: for 9.87 it wrote {written:?}"
    );
    std::fs::write(&manifest, "[workspace.package]\nedition = \"2024\"\n").expect("write");
    let (ok, written, stdout) = run(&other);
    assert!(
        !ok && written.is_empty(),
        "no rust-version must fail the step"
    );
    assert!(stdout.contains("::error"), "{stdout}");
}

/// The count line of kernel-e2e/src/report.rs with these numbers, from its own format string.
fn count_line(passed: usize, failed: usize, skipped: usize) -> String {
    let report = read("kernel-e2e/src/report.rs");
    let template = "\"kernel-e2e: {} passed, {} failed, {} skipped\"";
    assert!(
        report.contains(template),
        "kernel-e2e/src/report.rs no longer prints {template}: update e2e.yml's count-line check and this test"
    );
    format!("kernel-e2e: {passed} passed, {failed} failed, {skipped} skipped")
}

#[test]
fn every_e2e_leg_fails_unless_its_count_line_shows_cases_passed_and_none_failed() {
    let e2e = Workflow::open("e2e.yml");
    let job = e2e.job("kernel");
    let (suite, run) = step_running(&job, "cargo test -p kernel-e2e");
    let words = run.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("2>&1 | tee \"$RUNNER_TEMP/kernel-e2e.log\""),
        "the suite's output must go to $RUNNER_TEMP/kernel-e2e.log: {run}"
    );
    assert_eq!(
        value(&refs(&suite), "shell").as_deref(),
        Some("bash"),
        "the suite's step needs shell: bash (-o pipefail), or the tee hides its exit status"
    );
    let preserved = run
        .split_whitespace()
        .find_map(|w| w.strip_prefix("--preserve-env="))
        .unwrap_or_default();
    assert!(
        preserved.split(',').any(|v| v == "KERNEL_E2E_BACKENDS"),
        "sudo drops KERNEL_E2E_BACKENDS unless --preserve-env lists it, and the suite then runs every backend: {run}"
    );

    // The count line is checked by a step of its own, which reads the log.
    let (check, check_run) = step_running_unless(&job, "$RUNNER_TEMP/kernel-e2e.log", "cargo test");
    assert_eq!(value(&refs(&check), "shell").as_deref(), Some("bash"));

    let scratch = Scratch::new("e2e");
    let judge = |log: &str| {
        std::fs::write(scratch.0.join("kernel-e2e.log"), log).expect("write log");
        let out = bash(
            &check_run,
            &scratch.0,
            &[("RUNNER_TEMP", &scratch.0)],
            &[
                ("KERNEL_E2E_BACKENDS", "landlock"),
                ("RUNNER_ARCH", "ARM64"),
            ],
        );
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success() || stdout.contains("::error::"),
            "a failing check says why: {stdout}"
        );
        out.status.success()
    };
    let suite_output = |passed, failed, skipped| {
        let line = count_line(passed, failed, skipped);
        format!(
            "backend landlock:\nPASS T01: …\n{line}\nall backends (1.0s on 4 workers):\n{line}\n"
        )
    };
    assert!(judge(&suite_output(120, 0, 2)), "cases passed, none failed");
    assert!(
        !judge(&suite_output(118, 4, 0)),
        "a failed case must fail the leg"
    );
    assert!(
        !judge(&suite_output(0, 0, 122)),
        "every case skipped must fail the leg"
    );
    assert!(
        !judge(&format!(
            "all backends (0.0s on 4 workers):\n{}\n",
            count_line(0, 0, 0)
        )),
        "a backend name the suite does not know runs nothing and must fail the leg"
    );
    assert!(
        !judge("error: could not compile `kernel-e2e`\n"),
        "output without a count line must fail the leg"
    );
}

#[test]
fn the_e2e_matrix_runs_bwrap_on_ubuntu_latest_and_landlock_on_x64_and_arm64() {
    let e2e = Workflow::open("e2e.yml");
    let job = e2e.job("kernel");
    assert_eq!(value(&job, "runs-on").as_deref(), Some("${{ matrix.os }}"));
    let env = nested(&job, "env").expect("the kernel job sets env");
    assert_eq!(
        value(&env, "KERNEL_E2E_BACKENDS").as_deref(),
        Some("${{ matrix.backend }}")
    );
    let matrix = nested(&job, "strategy")
        .and_then(|s| nested(&s, "matrix"))
        .and_then(|m| nested(&m, "include"))
        .expect("the kernel job has strategy.matrix.include");
    let legs: Vec<(String, String)> = items(&matrix)
        .iter()
        .map(|leg| {
            let leg = refs(leg);
            (
                value(&leg, "backend").unwrap_or_default(),
                value(&leg, "os").unwrap_or_default(),
            )
        })
        .collect();
    for (backend, os) in [
        ("bwrap", "ubuntu-latest"),
        ("namespaces", "ubuntu-latest"),
        ("landlock", "ubuntu-24.04"),
        ("landlock", "ubuntu-24.04-arm"),
    ] {
        assert!(
            legs.iter().any(|(b, o)| b == backend && o == os),
            "no {backend} leg on {os}: {legs:?}"
        );
    }
    // Each name must be one the suite knows (kernel-e2e/src/matrix.rs): another selects no
    // backend at all.
    let names = read("kernel-e2e/src/matrix.rs");
    for (backend, _) in &legs {
        assert!(
            names.contains(&format!("=> \"{backend}\",")),
            "{backend} is not a backend of kernel-e2e/src/matrix.rs"
        );
    }
    assert!(
        e2e.jobs().iter().any(|(id, _)| id == "helper-as-user"),
        "the helper-as-user job is gone"
    );
    // As an ordinary user, every Linux backend must run: a SKIP for want of bwrap, Landlock or
    // the user namespaces the helper's own backend makes fails there.
    let env = nested(&e2e.job("helper-as-user"), "env").expect("the helper-as-user job's env");
    for need in ["BWRAP", "LANDLOCK", "USER_NAMESPACE"] {
        let key = format!("AGENTD_REQUIRE_{need}");
        assert_eq!(
            value(&env, &key).as_deref(),
            Some("1"),
            "the helper-as-user job does not require {key}"
        );
    }
}

#[test]
fn the_e2e_matrix_runs_seatbelt_on_macos_as_the_runners_user_with_the_helpers_tests() {
    let e2e = Workflow::open("e2e.yml");
    let job = e2e.job("kernel");
    let matrix = nested(&job, "strategy")
        .and_then(|s| nested(&s, "matrix"))
        .and_then(|m| nested(&m, "include"))
        .expect("the kernel job has strategy.matrix.include");
    assert!(
        items(&matrix).iter().any(|leg| {
            let leg = refs(leg);
            value(&leg, "backend").as_deref() == Some("seatbelt")
                && value(&leg, "os").as_deref() == Some("macos-latest")
        }),
        "no seatbelt leg on macos-latest"
    );
    let on = |step: &[String]| value(&refs(step), "if");
    let macos = Some("runner.os == 'macOS'".to_owned());
    // Root and apt are Linux's: a step that needs them must not run on macOS.
    for step in steps(&job) {
        let run = script(&step).unwrap_or_default();
        if run.contains("sudo") || run.contains("apt-get") {
            assert_eq!(
                on(&step).as_deref(),
                Some("runner.os == 'Linux'"),
                "a step with sudo or apt-get runs on the macOS leg too: {run}"
            );
        }
    }
    let macos_runs: Vec<String> = steps(&job)
        .iter()
        .filter(|step| on(step) == macos)
        .filter_map(|step| script(step))
        .collect();
    assert!(
        macos_runs
            .iter()
            .any(|run| run.trim() == "cargo test -p confine-helper"),
        "the macOS leg does not run the helper's tests: {macos_runs:?}"
    );
    assert!(
        macos_runs.iter().any(|run| {
            let words = run.split_whitespace().collect::<Vec<_>>().join(" ");
            words.starts_with("cargo test -p kernel-e2e 2>&1 | tee \"$RUNNER_TEMP/kernel-e2e.log\"")
        }),
        "the macOS leg does not run the suite as its user into the log the count line is read \
         from: {macos_runs:?}"
    );
    // The count-line step is the legs' common one.
    let (check, _) = step_running_unless(&job, "$RUNNER_TEMP/kernel-e2e.log", "cargo test");
    assert!(
        !on(&check).unwrap_or_default().contains("runner.os"),
        "the count line is checked on every leg"
    );

    let ci = Workflow::open("ci.yml");
    let macos_job = ci.job("macos");
    assert_eq!(
        value(&macos_job, "runs-on").as_deref(),
        Some("macos-latest")
    );
    let (_, check) = step_running(&macos_job, "cargo clippy --workspace --all-targets");
    assert!(check.contains("--exclude"), "{check}");
    assert!(
        check.ends_with("-- -D warnings"),
        "a warning on macOS is an error: {check}"
    );
}

#[test]
fn the_deny_job_checks_advisories_bans_licenses_and_sources() {
    let ci = Workflow::open("ci.yml");
    let job = ci.job("deny");
    let checks: Vec<String> = nested(&job, "strategy")
        .and_then(|s| nested(&s, "matrix"))
        .and_then(|m| nested(&m, "checks"))
        .map(|c| {
            items(&c)
                .iter()
                .map(|i| i.join(" ").trim().to_owned())
                .collect()
        })
        .unwrap_or_default();
    let all = checks.join(" ");
    for check in ["advisories", "bans", "licenses", "sources"] {
        assert!(
            all.split_whitespace().any(|c| c == check),
            "no {check} in {checks:?}"
        );
    }
    let step = steps(&job)
        .into_iter()
        .find(|s| value(&refs(s), "uses").as_deref() == Some("EmbarkStudios/cargo-deny-action@v2"))
        .expect("the deny job runs EmbarkStudios/cargo-deny-action@v2");
    let with = nested(&refs(&step), "with").unwrap_or_default();
    assert_eq!(
        value(&with, "command").as_deref(),
        Some("check ${{ matrix.checks }}")
    );
    assert!(workspace().join("deny.toml").is_file(), "no deny.toml");
}

#[test]
fn the_release_attaches_both_architectures_packages_and_their_checksums() {
    let release = Workflow::open("release.yml");
    let lines = release.lines();
    let on = nested(&lines, "on").expect("release.yml has triggers");
    let tags = nested(&on, "push")
        .and_then(|p| nested(&p, "tags"))
        .unwrap_or_default();
    assert!(
        tags.iter().any(|t| t.trim() == "- \"v*\""),
        "not run on tags v*: {tags:?}"
    );
    assert!(entry(&on, "workflow_dispatch").is_some());

    let debs = release.job("debs");
    let oses = nested(&debs, "strategy")
        .and_then(|s| nested(&s, "matrix"))
        .and_then(|m| value(&m, "os"))
        .unwrap_or_default();
    assert_eq!(oses, "[ubuntu-24.04, ubuntu-24.04-arm]");
    step_running(&debs, "cargo install --locked cargo-deb");
    step_running(&debs, "packaging/build-debs target/debian");

    let publish = release.job("publish");
    let permissions = nested(&publish, "permissions").unwrap_or_default();
    assert_eq!(value(&permissions, "contents").as_deref(), Some("write"));
    let (_, sums) = step_running(&publish, "> SHA256SUMS");
    assert!(sums.contains("sha256sum"), "{sums}");
    let (_, upload) = step_running(&publish, "gh release upload");
    assert!(
        upload.contains("dist/SHA256SUMS") && upload.contains("dist/*.deb"),
        "{upload}"
    );
    assert!(
        upload.contains("gh release create"),
        "a missing release must be created"
    );
}

#[test]
fn every_job_has_a_runner_steps_and_a_timeout_and_every_action_a_pinned_major_version() {
    let dir = workspace().join(".github/workflows");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("read .github/workflows")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".yml") || n.ends_with(".yaml"))
        .collect();
    names.sort();
    assert!(names.len() >= 4, "{names:?}");
    let mut problems = Vec::new();
    for name in &names {
        let workflow = Workflow::open(name);
        let jobs = workflow.jobs();
        if jobs.is_empty() {
            problems.push(format!("{name}: no jobs"));
        }
        for (id, job) in &jobs {
            for key in ["runs-on", "timeout-minutes"] {
                if value(job, key).is_none_or(|v| v.is_empty()) {
                    problems.push(format!("{name}: job {id} has no {key}"));
                }
            }
            if steps(job).is_empty() {
                problems.push(format!("{name}: job {id} has no steps"));
            }
        }
        for line in workflow.lines() {
            let Some(action) = line
                .trim_start()
                .trim_start_matches("- ")
                .strip_prefix("uses: ")
            else {
                continue;
            };
            let (repo, version) = action.split_once('@').unwrap_or((action, ""));
            let major = version.strip_prefix('v').is_some_and(|v| {
                v.split('.')
                    .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            });
            // dtolnay/rust-toolchain names the toolchain in its ref: stable, a version, or master
            // with a `toolchain:` input.
            let toolchain = repo == "dtolnay/rust-toolchain"
                && (matches!(version, "stable" | "master")
                    || version
                        .split('.')
                        .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())));
            if !(major || toolchain) {
                problems.push(format!(
                    "{name}: `{action}` is not pinned to a major version"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The README's first shell block, its two lines: the main job's command and the test command.
fn readme_commands() -> (String, String) {
    let readme = read("README.md");
    let block = readme
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the README opens with a sh block");
    match block.lines().collect::<Vec<_>>().as_slice() {
        [first, test] => ((*first).to_owned(), (*test).to_owned()),
        other => panic!("the README's first block is not its two commands: {other:?}"),
    }
}

/// The value of `.ci/run`'s line `name='VALUE'`.
fn assignment(script: &str, name: &str) -> String {
    script
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}='"))?.strip_suffix('\''))
        .map(str::to_owned)
        .unwrap_or_else(|| panic!(".ci/run has no line {name}='...'"))
}

/// `.ci/run`'s function `name`, from `name() {` to the `}` that closes it.
fn function(script: &str, name: &str) -> String {
    let start = script
        .find(&format!("\n{name}() {{\n"))
        .unwrap_or_else(|| panic!(".ci/run has no function {name}"));
    let body = &script[start + 1..];
    let end = body.find("\n}\n").expect("the function's end");
    body[..end + 3].to_owned()
}

#[test]
fn ci_run_runs_the_readmes_two_commands_from_a_copy_under_tmp_and_the_first_as_a_user_it_makes() {
    let (first, test) = readme_commands();
    let ci = read(".ci/run");
    assert_eq!(
        assignment(&ci, "readme_first"),
        first,
        ".ci/run's readme_first is not the README's first command"
    );
    assert_eq!(
        assignment(&ci, "readme_test"),
        test,
        ".ci/run's readme_test is not the README's test command"
    );
    // The control: the reader tells two commands apart.
    assert_ne!(first, test);

    let step = function(&ci, "step_test");
    assert!(
        step.contains("new_scratch")
            && step.contains("copy_checkout")
            && step.contains("eval \"$readme_test\""),
        "the step test does not run the README's test command in a copy: {step}"
    );
    assert!(
        function(&ci, "new_scratch").contains("mktemp -d \"/tmp/agentd ci."),
        "the copy is not under /tmp in a path with a space"
    );
    let step = function(&ci, "step_main_job");
    for needle in [
        "useradd",
        "runuser -u \"$7\"",
        "\"$readme_first\"",
        "copy_checkout",
    ] {
        assert!(
            step.contains(needle),
            "the step main-job lacks {needle}: {step}"
        );
    }
    // A command's /tmp is private under bubblewrap: a home there would be hidden from the
    // demo's commands, and their write to ~ would fail without the sandbox refusing it.
    assert!(
        step.contains("home=\"$(mktemp -d /var/tmp/"),
        "the user's home is not outside /tmp: {step}"
    );
    assert!(
        function(&ci, "cleanup").contains("userdel --force \"$ci_user\""),
        "the user the step makes is not removed"
    );
    let all = ci
        .split("\n  all)\n")
        .nth(1)
        .and_then(|rest| rest.split(";;").next())
        .expect("the whole run's steps");
    let order: Vec<&str> = all.split_whitespace().collect();
    assert_eq!(order, ["install", "step_test", "step_main_job"]);
}

#[test]
fn ci_run_copies_the_checkout_as_git_sees_it_into_a_path_with_a_space() {
    let scratch = Scratch::new("copy");
    let repo = scratch.0.join("a checkout");
    let copy = scratch.0.join("the copy");
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(&repo)
            .output()
            .expect("git");
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    std::fs::create_dir_all(repo.join("src")).expect("a checkout");
    for (path, text) in [
        (".gitignore", "/target\n"),
        ("src/kept.rs", "committed\n"),
        ("src/gone.rs", "committed, then deleted\n"),
    ] {
        std::fs::write(repo.join(path), text).expect("a file");
    }
    git(&["init", "-q"]);
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "c"]);
    std::fs::write(repo.join("src/kept.rs"), "changed, not committed\n").expect("an edit");
    std::fs::remove_file(repo.join("src/gone.rs")).expect("a deletion");
    std::fs::write(repo.join("src/new file.rs"), "untracked\n").expect("an untracked file");
    std::fs::create_dir_all(repo.join("target/debug")).expect("target");
    std::fs::write(repo.join("target/debug/agentd"), "built\n").expect("a build");

    let script = format!(
        "{}\ncopy_checkout \"$COPY\"\n",
        function(&read(".ci/run"), "copy_checkout")
    );
    let out = bash(&script, &repo, &[("COPY", &copy), ("checkout", &repo)], &[]);
    assert!(out.status.success(), "copy_checkout: {out:?}");
    let read_copy = |path: &str| std::fs::read_to_string(copy.join(path)).ok();
    assert_eq!(
        read_copy("src/kept.rs").as_deref(),
        Some("changed, not committed\n")
    );
    assert_eq!(read_copy("src/new file.rs").as_deref(), Some("untracked\n"));
    assert_eq!(read_copy(".gitignore").as_deref(), Some("/target\n"));
    // The control of what is left out: each is in the checkout.
    assert!(repo.join("target/debug/agentd").exists());
    assert_eq!(
        read_copy("target/debug/agentd"),
        None,
        "the build was copied"
    );
    assert_eq!(read_copy("src/gone.rs"), None, "a deleted file came back");
}

/// The macOS target the ci.yml `macos` job builds for, checked from here.
const TARGET: &str = "x86_64-apple-darwin";

/// Whether the standard library for `TARGET` is installed: its directory in the sysroot holds
/// files.
fn macos_target_installed() -> bool {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let Ok(out) = Command::new(rustc).args(["--print", "sysroot"]).output() else {
        return false;
    };
    let sysroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let lib = sysroot.join("lib/rustlib").join(TARGET).join("lib");
    std::fs::read_dir(lib).is_ok_and(|mut entries| entries.next().is_some())
}

/// The macOS build, checked from Linux: the crates ci.yml's `macos` job (and e2e.yml's seatbelt
/// leg) build that need no C compiler for macOS — the protocol, the helper with its tests, the
/// kernel suite — must compile for `x86_64-apple-darwin` without a warning, and, where clippy is
/// installed, without a clippy finding (the macOS-only files are linted nowhere else). No Mac
/// runs here, and a change to a file both platforms build (a `#[cfg]` arm, an import) can break
/// the other one unseen. agentd is left out: its TLS crate compiles C for the target, which
/// needs a macOS compiler. Skips where Rust's standard library for that target is not installed
/// (`rustup target add x86_64-apple-darwin`) or a crate only the macOS build uses is not
/// downloaded (`cargo fetch --target x86_64-apple-darwin`); `.ci/run` tries both.
#[test]
fn the_crates_the_macos_job_builds_compile_for_macos_from_here() {
    const NAME: &str = "the_crates_the_macos_job_builds_compile_for_macos_from_here";
    if !macos_target_installed() {
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
    let clippy = Command::new(&cargo)
        .args(["clippy", "--version"])
        .output()
        .is_ok_and(|out| out.status.success());
    let out = Command::new(cargo)
        .arg(if clippy { "clippy" } else { "check" })
        .args(["--offline", "--locked", "--target", TARGET, "--all-targets"])
        .args([
            "-p",
            "confine-protocol",
            "-p",
            "confine-helper",
            "-p",
            "kernel-e2e",
        ])
        .env("CARGO_TARGET_DIR", &target_dir)
        .env("RUSTFLAGS", "-D warnings")
        .current_dir(workspace())
        .output()
        .expect("run cargo clippy or check");
    let stderr = String::from_utf8_lossy(&out.stderr);
    // A crate only a macOS build uses was never downloaded (a Linux build leaves it out): the
    // machine lacks it, the code may be fine.
    if !out.status.success() && stderr.contains("but --offline was specified") {
        let reason = format!(
            "a crate of the macOS build is not downloaded (`cargo fetch --target {TARGET}`): {}",
            stderr
                .lines()
                .find(|l| l.starts_with("error"))
                .unwrap_or_default()
        );
        skip(NAME, Need::MacosTarget, reason);
        return;
    }
    let errors: Vec<&str> = stderr
        .split("\n\n")
        .filter(|block| block.starts_with("error"))
        .collect();
    assert!(
        out.status.success(),
        "the macOS build does not build without warnings ({} errors):\n{}",
        errors.len(),
        if errors.is_empty() {
            stderr.as_ref().to_owned()
        } else {
            errors.join("\n\n")
        }
    );
}
