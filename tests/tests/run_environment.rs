//! What `agentd run` hands a command of the environment, with the real agentd and helper: an
//! explicit secret-looking variable or a locale variable without a locale name is refused with
//! the reason (and, for a secret, the ceiling's `env_allow` that would allow it), never dropped
//! without a word; the same variables inherited by agentd are left behind silently.

mod support;

use std::process::Output;

use support::acp::Scratch;

/// `agentd run ARGS` with a small, known environment plus `env`.
fn agentd_run(scratch: &Scratch, args: &[&str], env: &[(&str, &str)]) -> Output {
    scratch
        .agentd("run")
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run agentd")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn an_explicit_secret_looking_variable_is_refused_naming_env_allow() {
    let scratch = Scratch::new("env-secret");
    let out = agentd_run(
        &scratch,
        &["--env", "DB_PASSWORD=hunter2-value", "--", "true"],
        &[],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(
        stderr.contains("confine-helper refused the command")
            && stderr.contains("DB_PASSWORD")
            && stderr.contains("env_allow = [\"DB_PASSWORD\"]"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("hunter2-value"),
        "the refusal shows the value: {stderr}"
    );

    // The control: a ceiling whose env_allow lists the name lets the same request through, and
    // the command gets the variable.
    let ceiling = scratch.root.join("ceiling.toml");
    std::fs::write(&ceiling, "env_allow = [\"DB_PASSWORD\"]\n").expect("ceiling");
    let ceiling = ceiling.to_str().expect("utf-8 path");
    let out = agentd_run(
        &scratch,
        &[
            "--mode",
            "danger-full-access",
            "--helper-ceiling",
            ceiling,
            "--env",
            "DB_PASSWORD=hunter2-value",
            "--",
            "sh",
            "-c",
            "printf '%s' \"$DB_PASSWORD\"",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "hunter2-value");
}

#[test]
fn an_explicit_locale_variable_must_hold_a_locale_name() {
    let scratch = Scratch::new("env-locale");
    let out = agentd_run(&scratch, &["--env", "LC_ALL=hunter2", "--", "true"], &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(
        stderr.contains("LC_ALL") && stderr.contains("locale name"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("hunter2"),
        "the refusal shows the value: {stderr}"
    );

    // The control: a locale name passes.
    let out = agentd_run(
        &scratch,
        &[
            "--mode",
            "danger-full-access",
            "--env",
            "LC_ALL=C.UTF-8",
            "--",
            "sh",
            "-c",
            "printf '%s' \"$LC_ALL\"",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "C.UTF-8");
}

#[test]
fn inherited_variables_that_break_the_rules_are_left_behind_silently() {
    let scratch = Scratch::new("env-inherited");
    let out = agentd_run(
        &scratch,
        &["--mode", "danger-full-access", "--", "env"],
        &[
            ("LC_DB_PASS", "inherited-secret-1"),
            ("LC_ALL", "inherited-secret-2"),
            ("DB_PASSWORD", "inherited-secret-3"),
            ("LC_MESSAGES", "C"),
            ("LANG", "C.UTF-8"),
        ],
    );
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        !stdout.contains("inherited-secret") && !stdout.contains("LC_ALL="),
        "{stdout}"
    );
    assert!(
        !stderr.contains("inherited-secret"),
        "agentd mentions an inherited value: {stderr}"
    );
    // The control in the same run: locale names still arrive.
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines.contains(&"LC_MESSAGES=C"), "{stdout}");
    assert!(lines.contains(&"LANG=C.UTF-8"), "{stdout}");
}
