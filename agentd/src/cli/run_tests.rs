//! `agentd run`'s flags, exit statuses and notes, and the request it prepares.

use std::os::unix::ffi::OsStringExt;

use clap::Parser;
use confine_protocol::Ending;

use super::*;
use crate::cli::{Cli, Command};
use crate::denial::Denial;
use crate::denial::Kind;
use crate::helper_client::Outcome;
use crate::test_support::{confined_exit, refused, runner_failed};

#[test]
fn exit_code_is_the_commands_own_code() {
    let facts = Facts::from_outcome(
        Outcome::Exited(confined_exit(ExitStatus::Code(3), Ending::Exited)),
        true,
    );
    assert_eq!(exit_code(&facts), 3);
}

#[test]
fn exit_code_of_a_signal_is_128_plus_the_signal() {
    let facts = Facts::from_outcome(
        Outcome::Exited(confined_exit(ExitStatus::Signal(9), Ending::Exited)),
        true,
    );
    assert_eq!(exit_code(&facts), 137);
}

#[test]
fn exit_code_of_a_timeout_is_124_whatever_the_signal() {
    let facts = Facts::from_outcome(
        Outcome::Exited(confined_exit(ExitStatus::Signal(15), Ending::TimedOut)),
        true,
    );
    assert_eq!(exit_code(&facts), 124);
}

#[test]
fn exit_code_of_a_cancel_is_the_commands_status() {
    let facts = Facts::from_outcome(
        Outcome::Exited(confined_exit(ExitStatus::Signal(15), Ending::Cancelled)),
        true,
    );
    assert_eq!(exit_code(&facts), 143);
    assert!(facts.cancelled);
}

#[test]
fn exit_code_is_125_when_refused_or_the_runner_failed() {
    assert_eq!(exit_code(&refused("no")), 125);
    assert_eq!(exit_code(&runner_failed(Stage::Fork, 11, "fork")), 125);
    assert_eq!(
        exit_code(&runner_failed(FailedAt::HelperExited, 0, "gone")),
        125
    );
}

#[test]
fn run_errors_exit_125_except_an_early_interrupt() {
    assert_eq!(RunError::NoCommand.exit_code(), 125);
    assert_eq!(RunError::Interrupted.exit_code(), 130);
}

#[test]
fn a_missing_command_is_reported_as_command_not_found() {
    let mut exited = confined_exit(ExitStatus::Code(127), Ending::Exited);
    exited.exec_errno = Some(nix::errno::Errno::ENOENT as i32);
    let facts = Facts::from_outcome(Outcome::Exited(exited), false);
    let args = RunArgs::new(["nosuchcmd"]);
    assert_eq!(
        notes(&facts, OsStr::new("nosuchcmd"), &args),
        ["nosuchcmd: command not found"]
    );
    assert_eq!(exit_code(&facts), 127);
}

#[test]
fn other_exec_failures_are_reported_with_strerror() {
    let mut exited = confined_exit(ExitStatus::Code(126), Ending::Exited);
    exited.exec_errno = Some(nix::errno::Errno::EACCES as i32);
    let facts = Facts::from_outcome(Outcome::Exited(exited), false);
    let args = RunArgs::new(["./x"]);
    assert_eq!(
        notes(&facts, OsStr::new("./x"), &args),
        ["./x: Permission denied"]
    );
}

#[test]
fn a_refusal_is_explained_in_one_line() {
    let args = RunArgs::new(["ls"]);
    assert_eq!(
        notes(&refused("mode above the ceiling"), OsStr::new("ls"), &args),
        ["confine-helper refused the command: mode above the ceiling"]
    );
}

#[test]
fn a_denial_is_explained_with_the_option_that_would_allow_it() {
    let mut facts = Facts::from_outcome(
        Outcome::Exited(confined_exit(ExitStatus::Code(6), Ending::Exited)),
        true,
    );
    facts.denial = Some(Denial {
        kinds: vec![Kind::FileWrite, Kind::Network],
        lifted_by: Some(Mode::DangerFullAccess),
        paths: vec!["/home/u/.npm/_cacache".into()],
        worked_around: Vec::new(),
    });
    let mut args = RunArgs::new(["curl"]);
    args.mode = Mode::WorkspaceWrite;
    assert_eq!(
        notes(&facts, OsStr::new("curl"), &args),
        [
            "the sandbox denied a file write outside the writable roots (--writable-root \
             DIR adds one, as do sandbox.writable_roots and sandbox.cache in agentd.toml; \
             --mode danger-full-access runs the command unconfined)",
            "the sandbox denied network access (--network allow permits it; --local-binding \
             permits loopback sockets inside the sandbox)",
            "denied: /home/u/.npm/_cacache",
        ]
    );
    // A denied credential store's sentence follows, as the model reads it.
    facts.credential_notes = vec!["/home/u/.npmrc is a credential store".into()];
    let with_note = notes(&facts, OsStr::new("curl"), &args);
    assert_eq!(
        with_note.last().map(String::as_str),
        Some("/home/u/.npmrc is a credential store")
    );
    facts.credential_notes.clear();
    // With --json the facts say it: "denials".
    args.json = true;
    assert!(notes(&facts, OsStr::new("curl"), &args).is_empty());
    assert!(
        facts
            .to_json()
            .contains(r#""denied":true,"denials":["file-write","network"]"#),
        "{}",
        facts.to_json()
    );
}

#[test]
fn a_runner_failure_names_the_stage_and_the_error() {
    let args = RunArgs::new(["ls"]);
    let facts = runner_failed(Stage::Chdir, nix::errno::Errno::ENOENT as i32, "/gone");
    assert_eq!(
        notes(&facts, OsStr::new("ls"), &args),
        [
            "the sandbox runner failed at stage chdir (No such file or directory): /gone; \
             the command did not run"
        ]
    );
}

/// The helper's own text for an unavailable backend, as confine-helper words it.
const UNAVAILABLE: &str = "no usable sandbox backend for workspace-write (bwrap: bwrap is \
    not installed (looked in /usr/bin/bwrap); landlock: this kernel does not offer \
    Landlock); nothing was run unconfined. To fix: install bubblewrap";

#[test]
fn an_unavailable_backend_passes_on_the_helpers_detail_and_says_nothing_ran() {
    let mut args = RunArgs::new(["ls"]);
    args.mode = Mode::WorkspaceWrite;
    let note = notes(
        &runner_failed(Stage::Unavailable, 0, UNAVAILABLE),
        OsStr::new("ls"),
        &args,
    );
    assert_eq!(
        note,
        [format!(
            "the command did not run because confine-helper cannot confine it on this \
             machine: {UNAVAILABLE}"
        )]
    );
}

#[test]
fn an_unavailable_forced_backend_points_at_the_automatic_choice() {
    let mut args = RunArgs::new(["ls"]);
    args.backend = BackendChoice::Seatbelt;
    let note = notes(
        &runner_failed(Stage::Unavailable, 0, "seatbelt: this is Linux"),
        OsStr::new("ls"),
        &args,
    );
    assert_eq!(
        note,
        [
            "the command did not run because confine-helper cannot confine it on this \
             machine: seatbelt: this is Linux",
            "only --backend seatbelt was tried; without --backend confine-helper uses \
             whichever backend works on this machine"
        ]
    );
}

#[test]
fn with_json_failures_are_left_to_the_json_line() {
    let mut args = RunArgs::new(["ls"]);
    args.json = true;
    assert!(notes(&refused("no"), OsStr::new("ls"), &args).is_empty());
}

#[test]
fn a_missing_workspace_is_a_clear_error() {
    let mut args = RunArgs::new(["ls"]);
    args.workspace = Some(PathBuf::from("/nonexistent-agentd-workspace"));
    let err = prepare(&args).expect_err("workspace missing");
    let text = err.to_string();
    assert!(text.contains("/nonexistent-agentd-workspace"), "{text}");
    assert!(text.contains("--workspace"), "{text}");
}

#[test]
fn writable_roots_are_made_absolute_against_the_current_directory_only() {
    let mut args = RunArgs::new(["ls"]);
    args.mode = Mode::WorkspaceWrite;
    args.writable_roots = vec![
        PathBuf::from("/abs/../kept"),
        PathBuf::from("rel/dir"),
        PathBuf::from("./nonexistent"),
    ];
    let spec = prepare(&args).expect("prepares");
    let cwd = std::env::current_dir().expect("cwd");
    assert_eq!(
        spec.policy.writable_roots,
        [
            b"/abs/../kept".to_vec(),
            cwd.join("rel/dir").into_os_string().into_vec(),
            cwd.join("./nonexistent").into_os_string().into_vec(),
        ]
    );
}

#[test]
fn the_configurations_profile_and_the_flags_are_merged_and_roots_sent_in_workspace_write_only() {
    let mut args = RunArgs::new(["ls"]);
    args.profile = SandboxProfile {
        writable_roots: vec!["/home/u/scratch".into()],
        cache_dirs: vec![crate::profile::CacheDir {
            preset: "pip",
            path: "/home/u/.cache/pip".into(),
        }],
        protected: vec!["secrets".into()],
        ..SandboxProfile::default()
    };
    args.writable_roots = vec!["/extra".into()];
    args.protected = vec![".env".into(), "secrets".into()];
    args.mode = Mode::WorkspaceWrite;
    let spec = prepare(&args).expect("prepares");
    assert_eq!(
        spec.policy.writable_roots,
        [
            b"/home/u/scratch".to_vec(),
            b"/extra".to_vec(),
            b"/home/u/.cache/pip".to_vec()
        ]
    );
    assert_eq!(
        spec.policy.protected,
        [b"secrets".to_vec(), b".env".to_vec()]
    );
    args.mode = Mode::ReadOnly;
    let spec = prepare(&args).expect("prepares");
    assert!(spec.policy.writable_roots.is_empty());
    assert_eq!(
        spec.policy.protected,
        [b"secrets".to_vec(), b".env".to_vec()]
    );
}

#[test]
fn protected_paths_and_limits_are_passed_as_given() {
    let mut args = RunArgs::new(["ls"]);
    args.protected = vec![PathBuf::from(".env"), PathBuf::from("/odd/../one")];
    args.max_processes = Some(32);
    args.max_file_size = Some(1 << 20);
    args.max_address_space = Some(1 << 32);
    let spec = prepare(&args).expect("prepares");
    assert_eq!(
        spec.policy.protected,
        [b".env".to_vec(), b"/odd/../one".to_vec()]
    );
    assert_eq!(spec.limits.max_processes, Some(32));
    assert_eq!(spec.limits.max_file_size, Some(1 << 20));
    assert_eq!(spec.limits.max_address_space, Some(1 << 32));
}

#[test]
fn the_request_carries_only_the_allowed_environment_and_explicit_settings() {
    let mut args = RunArgs::new(["ls"]);
    args.env = vec![
        ("AGENTD_TEST_SET".into(), "1".into()),
        ("AGENTD_TEST_SET".into(), "2".into()),
    ];
    let spec = prepare(&args).expect("prepares");
    let names: Vec<&OsString> = spec.env.iter().map(|(name, _)| name).collect();
    for (name, value) in &spec.env {
        assert!(
            environment::passes_on(name, value) || name == "AGENTD_TEST_SET",
            "{name:?} passed on"
        );
    }
    let expected: Vec<OsString> = std::env::vars_os()
        .filter(|(name, value)| environment::passes_on(name, value))
        .map(|(name, _)| name)
        .collect();
    for name in &expected {
        assert!(names.contains(&name), "{name:?} missing");
    }
    assert_eq!(
        spec.env.last(),
        Some(&(OsString::from("AGENTD_TEST_SET"), OsString::from("2")))
    );
    assert_eq!(names.len(), expected.len() + 1);
}

#[test]
fn the_request_carries_the_workspace_mode_and_timeout() {
    let mut args = RunArgs::new(["ls", "-l"]);
    args.workspace = Some(PathBuf::from("/"));
    args.mode = Mode::WorkspaceWrite;
    args.network = Network::Allow;
    args.timeout_secs = Some(7);
    let spec = prepare(&args).expect("prepares");
    assert_eq!(spec.argv, ["ls", "-l"]);
    assert_eq!(spec.policy.mode, Mode::WorkspaceWrite);
    assert_eq!(spec.policy.network, Network::Allow);
    assert_eq!(spec.policy.workspace_root.as_deref(), Some(&b"/"[..]));
    assert!(spec.policy.writable_roots.is_empty());
    assert_eq!(spec.limits.timeout_ms, Some(7000));
    assert_eq!(spec.limits.kill_grace_ms, 2000);
    assert_eq!(spec.limits.max_processes, None);
    assert_eq!(spec.limits.max_file_size, None);
    assert_eq!(spec.limits.max_address_space, None);
    assert!(spec.policy.protected.is_empty());
}

fn parse(args: &[&str]) -> Result<RunCommand, clap::Error> {
    let cli = Cli::try_parse_from(args)?;
    match cli.command {
        Command::Run(run) => Ok(*run),
        other => panic!("not run: {other:?}"),
    }
}

#[test]
fn defaults_are_read_only_no_network_automatic_backend() {
    let run = parse(&["agentd", "run", "--", "ls"]).expect("parses");
    let args = run.run_args();
    assert_eq!(args.mode, Mode::ReadOnly);
    assert_eq!(args.network, Network::Deny);
    assert_eq!(args.backend, BackendChoice::Auto);
    assert_eq!(args.workspace, None);
    assert_eq!(args.timeout_secs, None);
    assert!(!args.json);
    assert_eq!(args.argv, ["ls"]);
    assert!(args.writable_roots.is_empty());
    assert!(args.protected.is_empty());
    assert!(args.env.is_empty());
    assert_eq!(run.helper.helper_ceiling, None);
}

#[test]
fn arguments_after_the_separator_are_kept_as_data() {
    let run = parse(&[
        "agentd",
        "run",
        "--mode",
        "danger-full-access",
        "--",
        "ls",
        "-la",
        "--json",
        "--",
        "--help",
    ])
    .expect("parses");
    assert_eq!(run.argv, ["ls", "-la", "--json", "--", "--help"]);
    assert!(!run.json);
    assert_eq!(run.mode, Some(Mode::DangerFullAccess));
}

#[test]
fn every_option_is_understood() {
    let run = parse(&[
        "agentd",
        "run",
        "--mode",
        "workspace-write",
        "--workspace",
        "/w",
        "--network",
        "allow",
        "--backend",
        "landlock",
        "--timeout",
        "5",
        "--writable-root",
        "/extra",
        "--protect",
        ".env",
        "--max-processes",
        "10",
        "--max-file-size",
        "20",
        "--max-address-space",
        "30",
        "--env",
        "K=V",
        "--json",
        "--helper",
        "/h",
        "--helper-ceiling",
        "/ceiling.toml",
        "--config",
        "/c.toml",
        "--",
        "true",
    ])
    .expect("parses");
    let args = run.run_args();
    assert_eq!(args.writable_roots, [PathBuf::from("/extra")]);
    assert_eq!(args.protected, [PathBuf::from(".env")]);
    assert_eq!(
        (
            args.max_processes,
            args.max_file_size,
            args.max_address_space
        ),
        (Some(10), Some(20), Some(30))
    );
    assert_eq!(args.env, [(OsString::from("K"), OsString::from("V"))]);
    assert_eq!(
        run.helper.helper_ceiling,
        Some(PathBuf::from("/ceiling.toml"))
    );
    assert_eq!(args.mode, Mode::WorkspaceWrite);
    assert_eq!(args.workspace, Some(PathBuf::from("/w")));
    assert_eq!(args.network, Network::Allow);
    assert_eq!(args.backend, BackendChoice::Landlock);
    assert_eq!(args.timeout_secs, Some(5));
    assert!(args.json);
    assert_eq!(run.helper.helper, Some(PathBuf::from("/h")));
    assert_eq!(run.helper.config, Some(PathBuf::from("/c.toml")));
}

#[test]
fn a_command_is_required() {
    assert!(parse(&["agentd", "run"]).is_err());
    assert!(parse(&["agentd", "run", "--"]).is_err());
}

#[test]
fn the_command_must_follow_the_separator() {
    assert!(parse(&["agentd", "run", "ls"]).is_err());
}

#[test]
fn an_unknown_mode_is_rejected() {
    assert!(parse(&["agentd", "run", "--mode", "yolo", "--", "ls"]).is_err());
}

#[test]
fn a_zero_timeout_is_rejected() {
    assert!(parse(&["agentd", "run", "--timeout", "0", "--", "ls"]).is_err());
}

#[test]
fn helper_and_helper_socket_exclude_each_other() {
    let parsed = parse(&[
        "agentd",
        "run",
        "--helper",
        "/h",
        "--helper-socket",
        "/s",
        "--",
        "ls",
    ]);
    assert!(parsed.is_err());
}

#[test]
fn writable_roots_and_protected_paths_repeat_in_order() {
    let run = parse(&[
        "agentd",
        "run",
        "--writable-root",
        "/a",
        "--protect",
        ".env",
        "--writable-root",
        "rel/b",
        "--protect",
        "secrets/key",
        "--",
        "ls",
    ])
    .expect("parses");
    let args = run.run_args();
    assert_eq!(
        args.writable_roots,
        [PathBuf::from("/a"), PathBuf::from("rel/b")]
    );
    assert_eq!(
        args.protected,
        [PathBuf::from(".env"), PathBuf::from("secrets/key")]
    );
}

#[test]
fn an_empty_writable_root_or_protected_path_is_rejected() {
    assert!(parse(&["agentd", "run", "--writable-root", "", "--", "ls"]).is_err());
    assert!(parse(&["agentd", "run", "--protect", "", "--", "ls"]).is_err());
}

#[test]
fn resource_limits_are_read_as_numbers() {
    let run = parse(&[
        "agentd",
        "run",
        "--max-processes",
        "64",
        "--max-file-size",
        "1048576",
        "--max-address-space",
        "4294967296",
        "--",
        "ls",
    ])
    .expect("parses");
    let args = run.run_args();
    assert_eq!(args.max_processes, Some(64));
    assert_eq!(args.max_file_size, Some(1_048_576));
    assert_eq!(args.max_address_space, Some(4_294_967_296));
    let defaults = parse(&["agentd", "run", "--", "ls"]).expect("parses");
    let defaults = defaults.run_args();
    assert_eq!(
        (
            defaults.max_processes,
            defaults.max_file_size,
            defaults.max_address_space
        ),
        (None, None, None)
    );
}

#[test]
fn a_limit_that_is_not_a_number_is_rejected() {
    for flag in ["--max-processes", "--max-file-size", "--max-address-space"] {
        for value in ["many", "-1", "1G", ""] {
            assert!(
                parse(&["agentd", "run", flag, value, "--", "ls"]).is_err(),
                "{flag} {value}"
            );
        }
    }
}

#[test]
fn env_settings_repeat_in_order_and_split_at_the_first_equals() {
    let run = parse(&[
        "agentd", "run", "--env", "A=1", "--env", "B=x=y", "--env", "A=", "--", "ls",
    ])
    .expect("parses");
    assert_eq!(
        run.run_args().env,
        [
            (OsString::from("A"), OsString::from("1")),
            (OsString::from("B"), OsString::from("x=y")),
            (OsString::from("A"), OsString::new()),
        ]
    );
}

#[test]
fn a_malformed_env_setting_is_a_usage_error() {
    for bad in ["A", "=1", "=", ""] {
        let err = parse(&["agentd", "run", "--env", bad, "--", "ls"]).expect_err(bad);
        assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation, "{bad}");
        assert_ne!(err.exit_code(), 0);
        assert!(err.to_string().contains("NAME=VALUE"), "{err}");
    }
}

#[test]
fn the_helper_ceiling_is_read() {
    let run = parse(&["agentd", "run", "--helper-ceiling", "c.toml", "--", "ls"]).expect("parses");
    assert_eq!(run.helper.helper_ceiling, Some(PathBuf::from("c.toml")));
    let run = parse(&["agentd", "run", "--", "ls"]).expect("parses");
    assert_eq!(run.helper.helper_ceiling, None);
}

#[test]
fn a_helper_ceiling_with_a_helper_socket_parses_and_is_refused_when_run() {
    // Left to the client, so the message can say why (and a socket from the configuration
    // file is caught the same way).
    let run = parse(&[
        "agentd",
        "run",
        "--helper-socket",
        "/s",
        "--helper-ceiling",
        "/c.toml",
        "--",
        "ls",
    ])
    .expect("parses");
    let config = Effective::load_with(&run.helper.flags(), &|_| None).expect("config");
    let err = config
        .helper_client()
        .expect_err("a service helper reads its own ceiling");
    let text = err.to_string();
    assert!(text.contains("confine-service"), "{text}");
    assert!(text.contains("--ceiling"), "{text}");
}

#[test]
fn the_env_help_lists_the_inherited_variables() {
    use clap::CommandFactory;
    let mut cli = Cli::command();
    // A subcommand's arguments are deferred until the command is built (`defer`).
    cli.build();
    let run = cli.find_subcommand_mut("run").expect("run");
    let env = run
        .get_arguments()
        .find(|a| a.get_id() == "env")
        .expect("--env");
    let help = env.get_long_help().expect("long help").to_string();
    assert!(help.contains(&environment::inherited_summary()), "{help}");
}

#[test]
fn unix_sockets_repeat_in_order_and_a_relative_one_is_taken_from_the_current_directory() {
    let run = parse(&[
        "agentd",
        "run",
        "--unix-socket",
        "/var/run/docker.sock",
        "--unix-socket",
        "run/app.sock",
        "--",
        "docker",
        "ps",
    ])
    .expect("parses");
    let mut args = run.run_args();
    assert_eq!(
        args.unix_sockets,
        [
            PathBuf::from("/var/run/docker.sock"),
            PathBuf::from("run/app.sock")
        ]
    );
    // They add to the configuration's, each once, in every confined mode.
    args.profile = SandboxProfile {
        unix_sockets: vec![
            "/home/u/.ssh/agent.sock".into(),
            "/var/run/docker.sock".into(),
        ],
        ..SandboxProfile::default()
    };
    let cwd = std::env::current_dir().expect("cwd");
    let expected = [
        b"/home/u/.ssh/agent.sock".to_vec(),
        b"/var/run/docker.sock".to_vec(),
        cwd.join("run/app.sock").into_os_string().into_vec(),
    ];
    for mode in [Mode::ReadOnly, Mode::WorkspaceWrite] {
        args.mode = mode;
        let spec = prepare(&args).expect("prepares");
        assert_eq!(spec.policy.unix_sockets, expected, "{mode:?}");
    }
    args.mode = Mode::DangerFullAccess;
    assert!(
        prepare(&args)
            .expect("prepares")
            .policy
            .unix_sockets
            .is_empty()
    );
}

#[test]
fn a_unix_socket_flag_takes_the_home_directory_and_refuses_what_names_no_socket() {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let from_home = parse(&["agentd", "run", "--unix-socket", "~/agent.sock", "--", "ls"]);
    match home.filter(|h| h.is_absolute()) {
        Some(home) => assert_eq!(
            from_home.expect("parses").unix_sockets,
            [home.join("agent.sock")]
        ),
        None => assert!(from_home.is_err()),
    }
    for bad in ["", "~alice/agent.sock"] {
        let error = parse(&["agentd", "run", "--unix-socket", bad, "--", "ls"])
            .expect_err("not a socket's path");
        assert!(error.to_string().contains("--unix-socket"), "{error}");
    }
}

#[test]
fn a_denial_a_tool_worked_around_says_the_command_succeeded_and_what_the_tool_did() {
    let mut facts = Facts::from_outcome(
        Outcome::Exited(confined_exit(ExitStatus::Code(0), Ending::Exited)),
        true,
    );
    facts.denial = Some(Denial {
        kinds: vec![Kind::FileWrite],
        lifted_by: Some(Mode::DangerFullAccess),
        paths: vec!["/home/u/.cache/pip".into(), "/home/u/x".into()],
        worked_around: vec![crate::denial::WorkedAround {
            path: "/home/u/.cache/pip".into(),
            instead: "pip disabled its cache",
        }],
    });
    let mut args = RunArgs::new(["pip"]);
    args.mode = Mode::WorkspaceWrite;
    assert_eq!(
        notes(&facts, OsStr::new("pip"), &args),
        [
            "the command succeeded, but the sandbox denied a file write outside the writable \
             roots (--writable-root DIR adds one, as do sandbox.writable_roots and sandbox.cache \
             in agentd.toml; --mode danger-full-access runs the command unconfined)",
            "denied: /home/u/.cache/pip (pip disabled its cache), /home/u/x",
        ]
    );
}

#[test]
fn a_denied_unix_socket_is_explained_with_the_sockets_the_command_could_reach() {
    let mut facts = Facts::from_outcome(
        Outcome::Exited(confined_exit(ExitStatus::Code(1), Ending::Exited)),
        true,
    );
    facts.denial = Some(Denial {
        kinds: vec![Kind::Socket],
        lifted_by: Some(Mode::DangerFullAccess),
        paths: Vec::new(),
        worked_around: Vec::new(),
    });
    let args = RunArgs::new(["node"]);
    assert_eq!(
        notes(&facts, OsStr::new("node"), &args),
        [
            "the sandbox denied a Unix socket: confined commands may connect only to those \
             sandbox.unix_sockets or --unix-socket PATH names, none here (--mode \
             danger-full-access runs the command unconfined)"
        ]
    );
    facts.unix_sockets = vec!["/var/run/docker.sock".into(), "/run/app.sock".into()];
    assert_eq!(
        notes(&facts, OsStr::new("node"), &args),
        [
            "the sandbox denied a Unix socket: confined commands may connect only to those \
             sandbox.unix_sockets or --unix-socket PATH names, here /var/run/docker.sock, \
             /run/app.sock (--mode danger-full-access runs the command unconfined)"
        ]
    );
}

#[test]
fn the_command_runs_where_started_inside_the_workspace_else_in_the_workspace_or_in_cwd() {
    let scratch = crate::test_support::Scratch::new("run-cwd");
    let ws = scratch.0.canonicalize().unwrap().join("ws");
    let inside = ws.join("src");
    let outside = scratch.0.canonicalize().unwrap().join("elsewhere");
    for dir in [&inside, &outside] {
        std::fs::create_dir_all(dir).unwrap();
    }
    // Started inside the workspace, as a shell there would.
    assert_eq!(working_directory(None, &inside, &ws).unwrap(), inside);
    // Started elsewhere: the workspace.
    assert_eq!(working_directory(None, &outside, &ws).unwrap(), ws);
    // Asked for, from where it was started.
    assert_eq!(
        working_directory(Some(Path::new("../../elsewhere")), &inside, &ws).unwrap(),
        outside
    );
    let missing = working_directory(Some(Path::new("gone")), &outside, &ws).unwrap_err();
    assert!(missing.to_string().contains("--cwd"), "{missing}");
    std::fs::write(outside.join("file"), "").unwrap();
    let file = working_directory(Some(Path::new("file")), &outside, &ws).unwrap_err();
    assert!(matches!(file, RunError::Cwd { .. }), "{file}");
}
