use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use confine_protocol::{BackendChoice, Limits, Network};

use super::*;
use crate::helper_client::HelperEndpoint;
use crate::model::{ModelConfig, ProviderKind};
use crate::test_support::Scratch;
use crate::words::ApprovalPolicy;

const FILE: &str = "/etc/agentd/agentd.toml";

fn parse(text: &str) -> Result<LoadedConfig, ConfigError> {
    LoadedConfig::parse(PathBuf::from(FILE), text)
}

fn config(text: &str) -> Config {
    parse(text).expect("parses").config
}

/// An environment holding exactly `vars`.
fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> + use<> {
    let vars: Vec<(String, OsString)> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
        .collect();
    move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
}

fn no_env(_: &str) -> Option<OsString> {
    None
}

/// The effective configuration of the file text `text` with `flags` and `env`.
fn merged(text: &str, flags: &Flags, env: Env<'_>) -> Effective {
    Effective::merge(flags, parse(text).expect("parses"), env).expect("merges")
}

fn file_source() -> Source {
    Source::File(PathBuf::from(FILE))
}

fn cwd() -> PathBuf {
    std::env::current_dir().expect("cwd")
}

// ---- locations ----

#[test]
fn the_explicit_path_wins_over_the_environment() {
    let path = config_path(
        Some(Path::new("/tmp/c.toml")),
        Some("/xdg".into()),
        Some("/home/u".into()),
    );
    assert_eq!(path, Some(PathBuf::from("/tmp/c.toml")));
}

#[test]
fn xdg_config_home_wins_over_home() {
    let path = config_path(None, Some("/xdg".into()), Some("/home/u".into()));
    assert_eq!(path, Some(PathBuf::from("/xdg/agentd/agentd.toml")));
}

#[test]
fn a_relative_xdg_config_home_is_ignored() {
    let path = config_path(None, Some("rel".into()), Some("/home/u".into()));
    assert_eq!(
        path,
        Some(PathBuf::from("/home/u/.config/agentd/agentd.toml"))
    );
}

#[test]
fn no_location_without_home_or_xdg() {
    assert_eq!(config_path(None, None, None), None);
    assert_eq!(default_state_dir(None, None), None);
}

#[test]
fn the_state_dir_defaults_to_xdg_state_home_then_home() {
    assert_eq!(
        default_state_dir(Some("/state".into()), Some("/home/u".into())),
        Some(PathBuf::from("/state/agentd/sessions"))
    );
    assert_eq!(
        default_state_dir(Some("rel".into()), Some("/home/u".into())),
        Some(PathBuf::from("/home/u/.local/state/agentd/sessions"))
    );
}

#[test]
fn an_explicit_config_that_does_not_exist_is_an_error() {
    let missing = Path::new("/nonexistent-agentd-dir/agentd.toml");
    let err = LoadedConfig::load_with(Some(missing), &no_env).expect_err("missing explicit file");
    assert!(matches!(err, ConfigError::ExplicitMissing { .. }), "{err}");
}

#[test]
fn a_missing_file_at_the_default_location_means_defaults() {
    let scratch = Scratch::new("config-absent");
    let home = scratch.0.display().to_string();
    let env = env_of(&[("HOME", &home)]);
    let loaded = LoadedConfig::load_with(None, &env).expect("loads");
    assert_eq!(
        loaded.path,
        Some(scratch.0.join(".config/agentd/agentd.toml"))
    );
    assert!(!loaded.found);
    assert_eq!(loaded.config, Config::default());
}

#[test]
fn the_file_under_xdg_config_home_is_loaded() {
    let scratch = Scratch::new("config-xdg");
    let dir = scratch.0.join("agentd");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(
        dir.join("agentd.toml"),
        "[sandbox]\nmode = \"read-only\"\n[session]\nstate_dir = \"logs\"\n",
    )
    .expect("write");
    let xdg = scratch.0.display().to_string();
    let env = env_of(&[("XDG_CONFIG_HOME", &xdg), ("HOME", "/nonexistent")]);
    let config = Effective::load_with(&Flags::default(), &env).expect("loads");
    let file = dir.join("agentd.toml");
    assert_eq!(config.file, Some(file.clone()));
    assert!(config.file_found);
    assert_eq!(
        config.sandbox_mode,
        Setting::new(Mode::ReadOnly, Source::File(file.clone()))
    );
    assert_eq!(
        config.state_dir,
        Setting::new(Some(dir.join("logs")), Source::File(file))
    );
}

// ---- each section ----

#[test]
fn an_empty_file_means_every_default() {
    let loaded = parse("").expect("empty file parses");
    assert!(loaded.found);
    assert_eq!(loaded.config, Config::default());
    let config = merged("", &Flags::default(), &no_env);
    assert_eq!(config.model, None);
    assert_eq!(config.sandbox_mode, Setting::default(Mode::WorkspaceWrite));
    assert_eq!(config.network, Setting::default(Network::Deny));
    assert_eq!(config.backend, Setting::default(BackendChoice::Auto));
    assert_eq!(
        config.approval_policy,
        Setting::default(ApprovalPolicy::Ask)
    );
    assert_eq!(config.ask_before, Setting::default(Vec::new()));
    assert_eq!(config.helper, Setting::default(HelperChoice::Search));
    assert_eq!(config.helper_ceiling, Setting::default(None));
    assert_eq!(config.state_dir, Setting::default(None));
    assert_eq!(config.max_steps, Setting::default(50));
    assert_eq!(config.command_timeout_ms, Setting::default(120_000));
    assert_eq!(config.command_timeout(), Duration::from_secs(120));
    assert_eq!(config.max_processes, Setting::default(None));
    assert_eq!(config.max_file_size, Setting::default(None));
    assert_eq!(config.max_address_space, Setting::default(None));
}

#[test]
fn the_model_table_is_read_with_its_script_relative_to_the_file() {
    let config = config(
        "[model]\n\
         base_url = \"https://api.deepseek.com/v1\"   # any OpenAI-compatible endpoint\n\
         model = \"deepseek-chat\"\n\
         api_key_env = \"DEEPSEEK_API_KEY\"\n",
    );
    assert_eq!(
        config.model,
        Some(ModelConfig {
            base_url: Some("https://api.deepseek.com/v1".into()),
            model: Some("deepseek-chat".into()),
            api_key_env: Some("DEEPSEEK_API_KEY".into()),
            ..ModelConfig::default()
        })
    );
    let config = self::config("[model]\nprovider = \"scripted\"\nscript = \"turns.toml\"\n");
    let model = config.model.expect("model");
    assert_eq!(model.provider, Some(ProviderKind::Scripted));
    assert_eq!(model.script, Some(PathBuf::from("/etc/agentd/turns.toml")));
    assert_eq!(
        self::config("[model]\n").model,
        Some(ModelConfig::default())
    );
}

#[test]
fn a_key_in_place_of_the_variable_name_is_refused_without_echoing_it() {
    let err = parse("[model]\napi_key_env = \"sk-abc123-secret\"\n").expect_err("refused");
    let text = err.to_string();
    assert!(text.contains(FILE), "{text}");
    assert!(text.contains("not the key itself"), "{text}");
    assert!(!text.contains("sk-abc123"), "{text}");
}

#[test]
fn the_sandbox_table_is_read() {
    let config = config(
        "[sandbox]\nmode = \"danger-full-access\"\nnetwork = \"allow\"\nbackend = \"landlock\"\n",
    );
    assert_eq!(
        config.sandbox,
        SandboxSection {
            mode: Some(Mode::DangerFullAccess),
            network: Some(Network::Allow),
            backend: Some(BackendChoice::Landlock),
            profile: ProfileSection::default(),
            env: Default::default(),
            allow_list: None,
        }
    );
    for (word, mode) in [
        ("read-only", Mode::ReadOnly),
        ("workspace-write", Mode::WorkspaceWrite),
    ] {
        let text = format!("[sandbox]\nmode = \"{word}\"\n");
        assert_eq!(self::config(&text).sandbox.mode, Some(mode));
    }
    for (word, backend) in [
        ("auto", BackendChoice::Auto),
        ("bwrap", BackendChoice::Bwrap),
        ("seatbelt", BackendChoice::Seatbelt),
    ] {
        let text = format!("[sandbox]\nbackend = \"{word}\"\n");
        assert_eq!(self::config(&text).sandbox.backend, Some(backend));
    }
}

#[test]
fn the_approval_table_is_read() {
    let config = config("[approval]\npolicy = \"ask\"\nask_before = [\"write_file\", \"bash\"]\n");
    assert_eq!(
        config.approval,
        ApprovalSection {
            policy: Some(ApprovalPolicy::Ask),
            ask_before: Some(vec!["write_file".into(), "bash".into()]),
        }
    );
    let config = self::config("[approval]\npolicy = \"never\"\nask_before = []\n");
    assert_eq!(config.approval.policy, Some(ApprovalPolicy::Never));
    assert_eq!(config.approval.ask_before, Some(vec![]));
}

#[test]
fn helper_path_and_socket_are_read() {
    let config = self::config("[helper]\npath = \"/opt/confine-helper\"\n");
    assert_eq!(
        config.helper.path,
        Some(PathBuf::from("/opt/confine-helper"))
    );
    let config = self::config("[helper]\nsocket = \"/run/confine/sock\"\n");
    assert_eq!(
        config.helper.socket,
        Some(PathBuf::from("/run/confine/sock"))
    );
}

#[test]
fn relative_paths_are_taken_from_the_config_files_directory() {
    let config = config(
        "[helper]\npath = \"bin/confine-helper\"\nceiling = \"ceiling.toml\"\n\
         [session]\nstate_dir = \"state\"\n",
    );
    assert_eq!(
        config.helper.path,
        Some(PathBuf::from("/etc/agentd/bin/confine-helper"))
    );
    assert_eq!(
        config.helper.ceiling,
        Some(PathBuf::from("/etc/agentd/ceiling.toml"))
    );
    assert_eq!(
        config.session.state_dir,
        Some(PathBuf::from("/etc/agentd/state"))
    );
    let config = self::config("[helper]\npath = \"/h\"\nceiling = \"/c.toml\"\n");
    assert_eq!(config.helper.ceiling, Some(PathBuf::from("/c.toml")));
}

#[test]
fn the_session_and_limits_tables_are_read() {
    let config = config(
        "[session]\nstate_dir = \"/var/agentd\"\nmax_steps = 7\n\
         [limits]\ncommand_timeout_ms = 5000\nmax_processes = 512\n\
         max_file_size = 1073741824\nmax_address_space = 8589934592\n",
    );
    assert_eq!(
        config.session,
        SessionSection {
            state_dir: Some(PathBuf::from("/var/agentd")),
            max_steps: Some(7),
        }
    );
    assert_eq!(
        config.limits,
        LimitsSection {
            command_timeout_ms: Some(5000),
            max_processes: Some(512),
            max_file_size: Some(1 << 30),
            max_address_space: Some(8 << 30),
            max_memory: None,
        }
    );
}

#[test]
fn configured_limits_are_applied_and_the_others_kept() {
    let config = merged(
        "[limits]\nmax_processes = 64\nmax_address_space = 4096\n",
        &Flags::default(),
        &no_env,
    );
    let before = Limits {
        max_file_size: Some(10),
        ..Limits::none().with_timeout(Some(9)).with_kill_grace(2000)
    };
    let mut limits = before.clone();
    config.sandbox_profile().limits.apply(&mut limits);
    assert_eq!(
        limits,
        Limits {
            max_processes: Some(64),
            max_address_space: Some(4096),
            ..before
        }
    );
}

// ---- validation ----

#[test]
fn a_value_outside_its_vocabulary_names_the_file_line_key_and_allowed_values() {
    let cases = [
        (
            "[sandbox]\n\nmode = \"yolo\"\n",
            "sandbox.mode = \"yolo\"",
            "\"read-only\", \"workspace-write\" or \"danger-full-access\"",
        ),
        (
            "[sandbox]\n\nnetwork = \"some\"\n",
            "sandbox.network = \"some\"",
            "\"deny\", \"allow\" or \"allow-list\"",
        ),
        (
            "[sandbox]\n\nbackend = \"docker\"\n",
            "sandbox.backend = \"docker\"",
            "\"auto\", \"bwrap\", \"landlock\", \"seatbelt\" or \"namespaces\"",
        ),
        (
            "[approval]\n\npolicy = \"always\"\n",
            "approval.policy = \"always\"",
            "\"ask\" or \"never\"",
        ),
    ];
    for (text, key_and_value, allowed) in cases {
        let err = parse(text).expect_err(text);
        assert!(matches!(err, ConfigError::NotAllowed { .. }), "{err}");
        let message = err.to_string();
        assert!(message.contains(FILE), "{message}");
        assert!(message.contains("line 3"), "{message}");
        assert!(message.contains(key_and_value), "{message}");
        assert!(message.contains(allowed), "{message}");
    }
}

#[test]
fn a_zero_count_names_the_file_line_and_key() {
    for key in [
        "session.max_steps",
        "limits.command_timeout_ms",
        "limits.max_processes",
        "limits.max_file_size",
        "limits.max_address_space",
    ] {
        let (table, name) = key.split_once('.').expect("dotted");
        let text = format!("[{table}]\n{name} = 0\n");
        let err = parse(&text).expect_err(&text);
        let message = err.to_string();
        assert!(matches!(err, ConfigError::Zero { .. }), "{message}");
        assert!(message.contains(FILE), "{message}");
        assert!(message.contains("line 2"), "{message}");
        assert!(message.contains(&format!("{key} = 0")), "{message}");
    }
}

#[test]
fn a_negative_or_wrongly_typed_number_is_an_error_naming_the_line() {
    for text in [
        "[limits]\nmax_processes = -1\n",
        "[session]\nmax_steps = \"many\"\n",
        "[session]\nmax_steps = 5000000000\n",
        "[helper]\npath = 3\n",
        "[approval]\nask_before = \"bash\"\n",
    ] {
        let err = parse(text).expect_err(text);
        assert!(matches!(err, ConfigError::Parse { .. }), "{err}");
        assert!(err.to_string().contains("line 2"), "{text}: {err}");
    }
}

#[test]
fn an_unknown_key_in_any_table_is_an_error_naming_the_file_line_and_key() {
    for table in [
        "model", "sandbox", "approval", "helper", "session", "limits",
    ] {
        let text = format!("[{table}]\n\ntypo_key = 1\n");
        let err = parse(&text).expect_err(&text);
        let message = err.to_string();
        assert!(message.contains(FILE), "{message}");
        assert!(message.contains("line 3"), "{message}");
        assert!(message.contains("typo_key"), "{message}");
    }
}

#[test]
fn an_unknown_table_is_an_error() {
    let err = parse("[helpers]\npath = \"/x\"\n").expect_err("unknown table rejected");
    assert!(err.to_string().contains("line 1"), "{err}");
    assert!(err.to_string().contains("helpers"), "{err}");
}

#[test]
fn malformed_toml_is_an_error_naming_the_file_and_line() {
    let err = parse("\n\n[helper\n").expect_err("malformed");
    let text = err.to_string();
    assert!(text.contains(FILE), "{text}");
    assert!(text.contains("line 3"), "{text}");
}

#[test]
fn a_tool_name_that_is_not_one_names_the_line() {
    let err = parse("[approval]\nask_before = [\n  \"bash\",\n  \"rm -rf\",\n]\n")
        .expect_err("not a tool name");
    assert!(matches!(err, ConfigError::NotAToolName { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains("line 4"), "{text}");
    assert!(text.contains("\"rm -rf\""), "{text}");
    assert!(parse("[approval]\nask_before = [\"\"]\n").is_err());
}

#[test]
fn an_unknown_tool_in_ask_before_is_refused_naming_the_known_ones() {
    let err = parse("[approval]\nask_before = [\n  \"bash\",\n  \"writefile\",\n]\n")
        .expect_err("a misspelt tool");
    assert!(matches!(err, ConfigError::UnknownAskBefore { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        format!(
            "the configuration file {FILE}, line 4: approval.ask_before lists \"writefile\", \
             which is not one of agentd's tools (\"bash\", \"bash_output\", \"bash_kill\", \
             \"read_file\", \"write_file\", \"edit_file\", \"task\") nor an MCP server's \
             (mcp__SERVER__TOOL, or mcp__SERVER__* for every tool of one server)"
        )
    );
    // The control: every tool agentd has may be listed.
    let every = "[approval]\nask_before = [\"bash\", \"bash_output\", \"bash_kill\", \
                 \"read_file\", \"write_file\", \"edit_file\", \"task\"]\n";
    assert!(parse(every).is_ok(), "{:?}", parse(every).err());
}

#[test]
fn ask_before_may_list_mcp_tools_by_name_or_by_server() {
    let config =
        parse("[approval]\nask_before = [\"mcp__notes__write_note\", \"mcp__git__*\", \"bash\"]\n")
            .expect("MCP entries are accepted");
    assert_eq!(
        config.config.approval.ask_before,
        Some(vec![
            "mcp__notes__write_note".to_owned(),
            "mcp__git__*".to_owned(),
            "bash".to_owned()
        ])
    );
    for (entry, expected) in [
        ("mcp__notes", "nor an MCP server's (mcp__SERVER__TOOL"),
        ("mcp__*", "which is not a tool name"),
        ("mcp__notes__wr*", "which is not a tool name"),
    ] {
        let err = parse(&format!("[approval]\nask_before = [\"{entry}\"]\n"))
            .expect_err(entry)
            .to_string();
        assert!(err.contains(expected), "{entry}: {err}");
    }
}

#[test]
fn mcp_servers_come_from_the_file_and_show_without_their_values() {
    let text = "[[mcp.servers]]\nname = \"notes\"\ncommand = [\"python3\", \"notes.py\"]\n\
                env = { NOTES_KEY = \"s3cret\" }\n";
    let config = merged(text, &Flags::default(), &no_env);
    assert_eq!(config.mcp_servers.value.len(), 1);
    assert_eq!(config.mcp_servers.value[0].command, ["python3", "notes.py"]);
    let shown = config.show_with(&no_env, None);
    assert!(
        shown.contains(
            "mcp.servers = [\"notes\"]  (/etc/agentd/agentd.toml)\n  notes: command = \
             [\"python3\", \"notes.py\"], env = [\"NOTES_KEY\"]\n"
        ),
        "{shown}"
    );
    assert!(!shown.contains("s3cret"), "{shown}");
    let err = parse("[mcp]\nservers = []\nextra = 1\n").expect_err("unknown key");
    assert!(err.to_string().contains("extra"), "{err}");
}

#[test]
fn never_asking_with_tools_to_ask_before_is_an_error() {
    let err = parse("[approval]\npolicy = \"never\"\nask_before = [\"bash\"]\n")
        .expect_err("contradiction");
    assert!(
        matches!(err, ConfigError::NeverWithAskBefore { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("line 3"), "{err}");
}

#[test]
fn both_path_and_socket_is_an_error() {
    let err = parse("[helper]\npath = \"/a\"\nsocket = \"/b\"\n").expect_err("ambiguous");
    assert!(matches!(err, ConfigError::PathAndSocket { .. }));
}

#[test]
fn helper_ceiling_with_a_socket_is_an_error() {
    let err = parse("[helper]\nsocket = \"/s\"\nceiling = \"/c.toml\"\n")
        .expect_err("a service helper has its own ceiling");
    assert!(matches!(err, ConfigError::CeilingAndSocket { .. }), "{err}");
    assert!(
        err.to_string().contains("confine-service --ceiling"),
        "{err}"
    );
}

#[test]
fn a_bad_environment_value_names_the_variable_and_allowed_values() {
    let env = env_of(&[("AGENTD_SANDBOX_MODE", "yolo")]);
    let err =
        Effective::merge(&Flags::default(), LoadedConfig::default(), &env).expect_err("not a mode");
    let text = err.to_string();
    assert!(text.contains("AGENTD_SANDBOX_MODE=\"yolo\""), "{text}");
    assert!(
        text.contains("\"read-only\", \"workspace-write\" or \"danger-full-access\""),
        "{text}"
    );

    let env = env_of(&[("AGENTD_APPROVAL_POLICY", "sometimes")]);
    let err = Effective::merge(&Flags::default(), LoadedConfig::default(), &env)
        .expect_err("not a policy");
    assert!(err.to_string().contains("AGENTD_APPROVAL_POLICY"), "{err}");
    assert!(err.to_string().contains("\"ask\" or \"never\""), "{err}");

    let env = env_of(&[("AGENTD_API_KEY_ENV", "sk-live-abcdef")]);
    let err = Effective::merge(&Flags::default(), LoadedConfig::default(), &env)
        .expect_err("a key, not a name");
    assert!(err.to_string().contains("AGENTD_API_KEY_ENV"), "{err}");
    assert!(!err.to_string().contains("sk-live"), "{err}");

    let bad = |name: &str| (name == "AGENTD_MODEL").then(|| OsString::from_vec(vec![b'm', 0xff]));
    let err =
        Effective::merge(&Flags::default(), LoadedConfig::default(), &bad).expect_err("not UTF-8");
    assert!(
        matches!(
            err,
            ConfigError::EnvNotUnicode {
                var: "AGENTD_MODEL"
            }
        ),
        "{err}"
    );
}

#[test]
fn without_any_state_location_the_state_dir_error_says_how_to_set_one() {
    let config = merged("", &Flags::default(), &no_env);
    let err = config.state_dir().expect_err("no location");
    let text = err.to_string();
    assert!(text.contains("--state-dir"), "{text}");
    assert!(text.contains("AGENTD_STATE_DIR"), "{text}");
    assert!(text.contains(FILE), "{text}");
}

// ---- precedence: default < file < environment < flag ----

/// A file that sets a value of every layered kind.
const LAYERED: &str = "[sandbox]\nmode = \"read-only\"\n\
                       [approval]\npolicy = \"never\"\n\
                       [session]\nstate_dir = \"/from/file\"\n\
                       [helper]\npath = \"/file/confine-helper\"\nceiling = \"/file/ceiling.toml\"\n";

/// An environment that sets the variables over [`LAYERED`]'s values.
fn layered_env() -> impl Fn(&str) -> Option<OsString> {
    env_of(&[
        ("AGENTD_SANDBOX_MODE", "danger-full-access"),
        ("AGENTD_APPROVAL_POLICY", "ask"),
        ("AGENTD_STATE_DIR", "/from/env"),
        ("AGENTD_HELPER", "/env/confine-helper"),
    ])
}

#[test]
fn the_file_beats_the_defaults_and_says_so() {
    let text = LAYERED;
    // The file over the defaults.
    let config = merged(text, &Flags::default(), &no_env);
    assert_eq!(
        config.sandbox_mode,
        Setting::new(Mode::ReadOnly, file_source())
    );
    assert_eq!(
        config.approval_policy,
        Setting::new(ApprovalPolicy::Never, file_source())
    );
    assert_eq!(
        config.state_dir,
        Setting::new(Some(PathBuf::from("/from/file")), file_source())
    );
    assert_eq!(
        config.helper,
        Setting::new(
            HelperChoice::Binary("/file/confine-helper".into()),
            file_source()
        )
    );
    assert_eq!(
        config.helper_ceiling,
        Setting::new(Some(PathBuf::from("/file/ceiling.toml")), file_source())
    );
}

#[test]
fn the_environment_beats_the_file_and_says_so() {
    let text = LAYERED;
    // The environment over the file.
    let env = layered_env();
    let config = merged(text, &Flags::default(), &env);
    assert_eq!(
        config.sandbox_mode,
        Setting::new(Mode::DangerFullAccess, Source::Env("AGENTD_SANDBOX_MODE"))
    );
    assert_eq!(
        config.approval_policy,
        Setting::new(ApprovalPolicy::Ask, Source::Env("AGENTD_APPROVAL_POLICY"))
    );
    assert_eq!(
        config.state_dir,
        Setting::new(
            Some(PathBuf::from("/from/env")),
            Source::Env("AGENTD_STATE_DIR")
        )
    );
    assert_eq!(
        config.helper,
        Setting::new(
            HelperChoice::Binary("/env/confine-helper".into()),
            Source::Env("AGENTD_HELPER")
        )
    );
}

#[test]
fn the_flags_beat_the_environment_and_say_so() {
    let text = LAYERED;
    let env = layered_env();
    // The flags over the environment.
    let flags = Flags {
        state_dir: Some("/from/flag".into()),
        helper: Some("/flag/confine-helper".into()),
        helper_ceiling: Some("/flag/ceiling.toml".into()),
        ..Flags::default()
    };
    let config = merged(text, &flags, &env);
    assert_eq!(
        config.state_dir,
        Setting::new(
            Some(PathBuf::from("/from/flag")),
            Source::Flag("--state-dir")
        )
    );
    assert_eq!(
        config.helper,
        Setting::new(
            HelperChoice::Binary("/flag/confine-helper".into()),
            Source::Flag("--helper")
        )
    );
    assert_eq!(
        config.helper_ceiling,
        Setting::new(
            Some(PathBuf::from("/flag/ceiling.toml")),
            Source::Flag("--helper-ceiling")
        )
    );
    let flags = Flags {
        helper_socket: Some("/run/h.sock".into()),
        ..Flags::default()
    };
    assert_eq!(
        merged(text, &flags, &env).helper,
        Setting::new(
            HelperChoice::Socket("/run/h.sock".into()),
            Source::Flag("--helper-socket")
        )
    );
}

#[test]
fn the_helper_from_the_environment_or_a_flag_beats_a_socket_in_the_file() {
    let text = "[helper]\nsocket = \"/run/file.sock\"\n";
    assert_eq!(
        merged(text, &Flags::default(), &no_env).helper,
        Setting::new(HelperChoice::Socket("/run/file.sock".into()), file_source())
    );
    let env = env_of(&[("AGENTD_HELPER", "/env/h")]);
    assert_eq!(
        merged(text, &Flags::default(), &env).helper.value,
        HelperChoice::Binary("/env/h".into())
    );
    let flags = Flags {
        helper: Some("/flag/h".into()),
        ..Flags::default()
    };
    assert_eq!(
        merged(text, &flags, &no_env).helper.value,
        HelperChoice::Binary("/flag/h".into())
    );
}

#[test]
fn model_keys_come_from_the_file_then_the_environment_then_the_flag() {
    let text = "[model]\nbase_url = \"https://file.example/v1\"\nmodel = \"file-model\"\n\
                max_tokens = 100\n";
    let config = merged(text, &Flags::default(), &no_env);
    let model = config.model.clone().expect("configured");
    assert_eq!(model.model.as_deref(), Some("file-model"));
    assert_eq!(config.model_sources.model, file_source());
    assert_eq!(config.model_sources.base_url, file_source());
    assert_eq!(config.model_sources.api_key_env, Source::Default);
    assert_eq!(config.model_sources.provider, Source::Default);

    let env = env_of(&[
        ("AGENTD_MODEL", "env-model"),
        ("AGENTD_BASE_URL", "https://env.example/v1"),
        ("AGENTD_API_KEY_ENV", "ENV_KEY"),
    ]);
    let config = merged(text, &Flags::default(), &env);
    let model = config.model.clone().expect("configured");
    assert_eq!(model.model.as_deref(), Some("env-model"));
    assert_eq!(model.base_url.as_deref(), Some("https://env.example/v1"));
    assert_eq!(model.api_key_env.as_deref(), Some("ENV_KEY"));
    assert_eq!(model.max_tokens, Some(100), "the rest of the table stays");
    assert_eq!(config.model_sources.model, Source::Env("AGENTD_MODEL"));
    assert_eq!(
        config.model_sources.base_url,
        Source::Env("AGENTD_BASE_URL")
    );
    assert_eq!(
        config.model_sources.api_key_env,
        Source::Env("AGENTD_API_KEY_ENV")
    );

    let flags = Flags {
        model_script: Some("turns.toml".into()),
        ..Flags::default()
    };
    let config = merged(text, &flags, &env);
    let model = config.model.clone().expect("configured");
    assert_eq!(model.provider, Some(ProviderKind::Scripted));
    assert_eq!(model.script, Some(cwd().join("turns.toml")));
    assert_eq!(
        config.model_sources.provider,
        Source::Flag("--model-script")
    );
    assert_eq!(config.model_sources.script, Source::Flag("--model-script"));
}

#[test]
fn the_environment_alone_configures_a_model() {
    let env = env_of(&[
        ("AGENTD_MODEL", "m"),
        ("AGENTD_BASE_URL", "http://127.0.0.1:1/v1"),
    ]);
    let config =
        Effective::merge(&Flags::default(), LoadedConfig::default(), &env).expect("merges");
    assert_eq!(
        config.model,
        Some(ModelConfig {
            model: Some("m".into()),
            base_url: Some("http://127.0.0.1:1/v1".into()),
            ..ModelConfig::default()
        })
    );
    let provider = config.provider().expect("a keyless local server");
    assert!(provider.describe().contains('m'), "{}", provider.describe());
}

#[test]
fn empty_variables_count_as_unset() {
    let env = env_of(&[
        ("AGENTD_SANDBOX_MODE", ""),
        ("AGENTD_MODEL", ""),
        ("AGENTD_STATE_DIR", ""),
        ("AGENTD_HELPER", ""),
        ("HOME", "/home/u"),
    ]);
    let config = merged("[sandbox]\nmode = \"read-only\"\n", &Flags::default(), &env);
    assert_eq!(config.sandbox_mode.source, file_source());
    assert_eq!(config.model, None);
    assert_eq!(config.helper, Setting::default(HelperChoice::Search));
    assert_eq!(
        config.state_dir,
        Setting::default(Some(PathBuf::from("/home/u/.local/state/agentd/sessions")))
    );
}

#[test]
fn relative_paths_from_flags_and_variables_are_taken_from_the_current_directory() {
    let env = env_of(&[("AGENTD_STATE_DIR", "logs"), ("AGENTD_HELPER", "bin/h")]);
    let flags = Flags {
        helper_ceiling: Some("c.toml".into()),
        ..Flags::default()
    };
    let config = Effective::merge(&flags, LoadedConfig::default(), &env).expect("merges");
    assert_eq!(config.state_dir.value, Some(cwd().join("logs")));
    assert_eq!(
        config.helper.value,
        HelperChoice::Binary(cwd().join("bin/h"))
    );
    assert_eq!(config.helper_ceiling.value, Some(cwd().join("c.toml")));
}

// ---- what the settings are used for ----

#[test]
fn a_socket_gives_a_service_endpoint_and_refuses_a_ceiling() {
    let config = merged(
        "",
        &Flags {
            helper_socket: Some("/run/h.sock".into()),
            helper_ceiling: Some("/c.toml".into()),
            ..Flags::default()
        },
        &no_env,
    );
    assert_eq!(
        config.helper_endpoint().expect("no search"),
        HelperEndpoint::Service("/run/h.sock".into())
    );
    let err = config.helper_client().expect_err("ceiling with a socket");
    assert!(err.to_string().contains("confine-service"), "{err}");
}

#[test]
fn an_explicit_helper_that_does_not_exist_names_where_it_was_given() {
    for (flags, env, origin) in [
        (
            Flags {
                helper: Some("/nonexistent/confine-helper".into()),
                ..Flags::default()
            },
            env_of(&[]),
            "--helper",
        ),
        (
            Flags::default(),
            env_of(&[("AGENTD_HELPER", "/nonexistent/confine-helper")]),
            "$AGENTD_HELPER",
        ),
    ] {
        let config = Effective::merge(&flags, LoadedConfig::default(), &env).expect("merges");
        let err = config.helper_endpoint().expect_err("missing");
        assert!(err.to_string().contains(origin), "{err}");
    }
    let config = merged(
        "[helper]\npath = \"/nonexistent/h\"\n",
        &Flags::default(),
        &no_env,
    );
    let err = config.helper_endpoint().expect_err("missing");
    assert!(err.to_string().contains("helper.path"), "{err}");
}

#[test]
fn without_a_model_the_provider_error_names_the_file_and_shows_an_example() {
    let config = merged("", &Flags::default(), &no_env);
    let text = config.provider().expect_err("not configured").to_string();
    assert!(text.contains(FILE), "{text}");
    assert!(text.contains("[model]\nbase_url = "), "{text}");
}

#[test]
fn a_model_script_flag_builds_the_scripted_provider_from_that_file() {
    let config = merged(
        "",
        &Flags {
            model_script: Some("/nonexistent/turns.toml".into()),
            ..Flags::default()
        },
        &no_env,
    );
    let err = config.provider().expect_err("no such script");
    assert!(err.to_string().contains("/nonexistent/turns.toml"), "{err}");
}

// ---- config show ----

/// A directory holding an executable `confine-helper`, standing in for agentd's own.
fn exe_dir_with_helper(scratch: &Scratch) -> PathBuf {
    let dir = scratch.0.join("bin");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let helper = dir.join("confine-helper");
    std::fs::write(&helper, "#!/bin/sh\n").expect("write");
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    dir
}

const SAMPLE: &str = "\
[model]
base_url = \"https://api.deepseek.com/v1\"
model = \"deepseek-chat\"
api_key_env = \"DEEPSEEK_API_KEY\"

[approval]
ask_before = [\"write_file\"]

[session]
max_steps = 30

[limits]
max_processes = 512
";

/// `config show`'s line for each built-in denied read from `home`, none lifted.
fn built_in_lines(home: &str) -> String {
    crate::credentials::resolve(Path::new(home), &[])
        .iter()
        .map(|c| {
            format!(
                "  denied: {:?} (built in: {})\n",
                c.shown(),
                c.built_in.entry
            )
        })
        .collect()
}

#[test]
fn show_prints_every_value_with_its_source_and_no_secret() {
    let scratch = Scratch::new("config-show");
    let exe_dir = exe_dir_with_helper(&scratch);
    let env = env_of(&[
        ("HOME", "/home/u"),
        ("AGENTD_SANDBOX_MODE", "read-only"),
        ("DEEPSEEK_API_KEY", "sk-very-secret-value"),
    ]);
    let flags = Flags {
        state_dir: Some("/tmp/sessions".into()),
        ..Flags::default()
    };
    let config = merged(SAMPLE, &flags, &env);
    let text = config.show_with(&env, Some(exe_dir.clone()));
    let expected = format!(
        "\
configuration file: /etc/agentd/agentd.toml
model.provider = \"openai\"  (default)
model.base_url = \"https://api.deepseek.com/v1\"  (/etc/agentd/agentd.toml)
model.model = \"deepseek-chat\"  (/etc/agentd/agentd.toml)
model.api_key_env = \"DEEPSEEK_API_KEY\"  (/etc/agentd/agentd.toml)
api key: $DEEPSEEK_API_KEY (set)
model.max_tokens = unset  (default)
model.temperature = unset  (default)
model.timeout_secs = unset  (default)
model.max_retries = unset  (default)
model.include_usage = unset  (default)
model.max_tokens_field = \"auto\" (here: \"max_tokens\")  (default)
model.send_reasoning = \"auto\" (here: \"tool_turns\")  (default)
model.context_window = unset  (default: the history is never compacted; set it to the model's context window in tokens to compact long sessions)
sandbox.mode = \"read-only\"  ($AGENTD_SANDBOX_MODE)
sandbox.network = \"deny\"  (default)
sandbox.backend = \"auto\"  (default)
sandbox.writable_roots = []  (default)
sandbox.cache = []  (default)
sandbox.protected = []  (default)
sandbox.local_binding = false  (default)
sandbox.deny_read = []  (default)
sandbox.lift_deny_read = []  (default)
{built_in}sandbox.unix_sockets = []  (default)
sandbox.env.pass = []  (default)
sandbox.env.set = []  (default)
approval.policy = \"ask\"  (default)
approval.ask_before = [\"write_file\"]  (/etc/agentd/agentd.toml)
mcp.servers = []  (default)
helper.path = \"{helper}\"  (found next to agentd)
helper.ceiling = unset  (default)
helper.file_io = unset  (default)
session.state_dir = \"/tmp/sessions\"  (--state-dir)
session.max_steps = 30  (/etc/agentd/agentd.toml)
limits.command_timeout_ms = 120000  (default)
limits.max_processes = 512  (/etc/agentd/agentd.toml)
limits.max_file_size = unset  (default)
limits.max_address_space = unset  (default)
limits.max_memory = unset (confine-helper's cap where it can count memory: half the machine's)  (default)
checkpoints.enabled = true  (default)
checkpoints.max_bytes = 536870912  (default)
checkpoints.max_age_days = 30  (default)
checkpoints.max_per_session = 100  (default)
agents.general.description = \"A general-purpose helper for a delegated sub-task: it works on the one task it is given, with the tools it has, and answers with what it found or did.\"  (default)
agents.general.instructions = \"You are a general-purpose helper working on one sub-task tha…\" (1 line, 340 characters)  (default)
agents.general.model = unset (the session's model)  (default)
agents.general.tools = unset (its parent's tools)  (default)
agents.general.max_depth = 1  (default)
",
        helper = exe_dir.join("confine-helper").display(),
        built_in = built_in_lines("/home/u")
    );
    assert_eq!(text, expected);
    assert!(!text.contains("sk-very-secret"), "{text}");
}

#[test]
fn show_says_when_the_key_variable_is_not_set() {
    let config = merged(SAMPLE, &Flags::default(), &no_env);
    let text = config.show_with(&no_env, None);
    assert!(
        text.contains("api key: $DEEPSEEK_API_KEY (NOT SET)\n"),
        "{text}"
    );
    let whitespace = env_of(&[("DEEPSEEK_API_KEY", "  ")]);
    let text = config.show_with(&whitespace, None);
    assert!(text.contains("(NOT SET)"), "{text}");
}

#[test]
fn show_hides_credentials_in_the_base_url() {
    let config = merged(
        "[model]\nbase_url = \"https://user:hunter2@x.example/v1?key=abc\"\nmodel = \"m\"\n",
        &Flags::default(),
        &no_env,
    );
    let text = config.show_with(&no_env, None);
    assert!(
        text.contains("model.base_url = \"https://***@x.example/v1?***\""),
        "{text}"
    );
    assert!(!text.contains("hunter2") && !text.contains("abc"), "{text}");
}

#[test]
fn show_without_a_model_says_so_and_prints_the_example() {
    let config = merged("", &Flags::default(), &env_of(&[("HOME", "/home/u")]));
    let text = config.show_with(&no_env, None);
    assert!(text.contains("\nmodel = not configured  ("), "{text}");
    assert!(
        text.ends_with(&format!(
            "No model is configured. To use one, add this to {FILE} (or set AGENTD_BASE_URL, \
             AGENTD_MODEL and AGENTD_API_KEY_ENV):\n\n{MODEL_EXAMPLE}"
        )),
        "{text}"
    );
    assert!(
        text.contains("session.state_dir = \"/home/u/.local/state/agentd/sessions\"  (default)\n"),
        "{text}"
    );
    assert!(
        text.contains("helper.path = not found  (looked next to agentd and on PATH"),
        "{text}"
    );
}

#[test]
fn show_names_an_absent_file_and_a_scripted_model() {
    let flags = Flags {
        model_script: Some("/demo/turns.toml".into()),
        helper_socket: Some("/run/h.sock".into()),
        ..Flags::default()
    };
    let loaded = LoadedConfig {
        path: Some(PathBuf::from("/home/u/.config/agentd/agentd.toml")),
        found: false,
        config: Config::default(),
    };
    let config = Effective::merge(&flags, loaded, &no_env).expect("merges");
    let text = config.show_with(&no_env, None);
    assert!(
        text.starts_with(
            "configuration file: /home/u/.config/agentd/agentd.toml (absent: nothing comes from \
             a file)\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("model.provider = \"scripted\"  (--model-script)\n"),
        "{text}"
    );
    assert!(
        text.contains("model.script = \"/demo/turns.toml\"  (--model-script)\n"),
        "{text}"
    );
    assert!(!text.contains("model.base_url"), "{text}");
    assert!(!text.contains("api key"), "{text}");
    assert!(
        text.contains("helper.socket = \"/run/h.sock\"  (--helper-socket)\n"),
        "{text}"
    );
}

#[test]
fn show_warns_about_an_explicit_helper_that_is_not_there() {
    let env = env_of(&[("AGENTD_HELPER", "/nonexistent/confine-helper")]);
    let config =
        Effective::merge(&Flags::default(), LoadedConfig::default(), &env).expect("merges");
    let text = config.show_with(&env, None);
    assert!(
        text.contains(
            "configuration file: none (neither XDG_CONFIG_HOME nor HOME is set; use --config)\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "helper.path = \"/nonexistent/confine-helper\"  ($AGENTD_HELPER)\n  warning: "
        ),
        "{text}"
    );
}
