use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::config::{CachePreset, ConfigError, Effective, Flags, LoadedConfig, Source};
use crate::profile::{CacheDir, SandboxProfile};

const FILE: &str = "/etc/agentd/agentd.toml";

fn parse(text: &str) -> Result<LoadedConfig, ConfigError> {
    LoadedConfig::parse(PathBuf::from(FILE), text)
}

/// The effective configuration of `text` in an environment holding exactly `vars`.
fn merged(text: &str, vars: &[(&str, &str)]) -> Result<Effective, ConfigError> {
    let map: BTreeMap<String, OsString> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
        .collect();
    let env = move |name: &str| map.get(name).cloned();
    Effective::merge(&Flags::default(), parse(text)?, &env)
}

fn error(text: &str, vars: &[(&str, &str)]) -> String {
    match merged(text, vars) {
        Ok(config) => panic!("expected an error, got {:?}", config.sandbox_profile()),
        Err(e) => e.to_string(),
    }
}

const HOME: (&str, &str) = ("HOME", "/home/u");

#[test]
fn nothing_set_is_an_empty_profile_from_the_defaults() {
    let config = merged("", &[HOME]).expect("merges");
    assert_eq!(
        config.sandbox_profile(),
        SandboxProfile {
            credentials: crate::credentials::resolve(Path::new("/home/u"), &[]),
            ..SandboxProfile::default()
        }
    );
    assert_eq!(config.writable_roots.source, Source::Default);
    assert_eq!(config.cache.source, Source::Default);
    assert_eq!(config.protected.source, Source::Default);
}

#[test]
fn writable_roots_are_absolute_or_from_the_home_directory() {
    let config = merged(
        "[sandbox]\nwritable_roots = [\"~/scratch\", \"/srv/data/\", \"~\", \"/srv/data\"]\n",
        &[HOME],
    )
    .expect("merges");
    assert_eq!(
        config.writable_roots.value,
        [
            PathBuf::from("/home/u/scratch"),
            PathBuf::from("/srv/data"),
            PathBuf::from("/home/u"),
        ]
    );
    assert_eq!(config.writable_roots.source, Source::File(FILE.into()));
}

#[test]
fn a_relative_writable_root_is_an_error_with_its_line() {
    for bad in ["scratch", "./scratch", "~alice/scratch", ""] {
        let text = format!("[sandbox]\nwritable_roots = [\n  \"/ok\",\n  {bad:?},\n]\n");
        assert_eq!(
            error(&text, &[HOME]),
            format!(
                "the configuration file {FILE}, line 4: sandbox.writable_roots lists {bad:?}, \
                 which is not an absolute path; write it as /absolute/path, or ~/path from your \
                 home directory"
            )
        );
    }
}

#[test]
fn a_root_from_the_home_directory_needs_an_absolute_home() {
    let text = "[sandbox]\nwritable_roots = [\"~/scratch\"]\n";
    assert_eq!(
        error(text, &[]),
        format!(
            "the configuration file {FILE}, line 2: sandbox.writable_roots lists \"~/scratch\", \
             and HOME is not set so it is not an absolute path; set HOME to your home directory \
             or write the root as an absolute path"
        )
    );
    assert!(
        error(text, &[("HOME", "home")]).contains("and HOME is \"home\" so it is not an absolute"),
        "{}",
        error(text, &[("HOME", "home")])
    );
}

#[test]
fn cache_presets_resolve_to_the_tools_own_directories() {
    let config = merged(
        "[sandbox]\ncache = [\"pip\", \"cargo\", \"pip\"]\n",
        &[HOME, ("PIP_CACHE_DIR", "/data/pip")],
    )
    .expect("merges");
    let presets: Vec<CachePreset> = config.cache.value.iter().map(|c| c.preset).collect();
    assert_eq!(presets, [CachePreset::Pip, CachePreset::Cargo]);
    assert_eq!(
        config.sandbox_profile().cache_dirs,
        [
            CacheDir {
                preset: "pip",
                path: "/data/pip".into()
            },
            CacheDir {
                preset: "cargo",
                path: "/home/u/.cargo/registry".into()
            },
            CacheDir {
                preset: "cargo",
                path: "/home/u/.cargo/git".into()
            },
        ]
    );
}

#[test]
fn an_unknown_preset_is_an_error_naming_the_known_ones() {
    assert_eq!(
        error("[sandbox]\ncache = [\"pip\", \"maven\"]\n", &[HOME]),
        format!(
            "the configuration file {FILE}, line 2: sandbox.cache = \"maven\" is not allowed; use \
             one of \"pip\", \"npm\", \"cargo\" or \"go\""
        )
    );
}

#[test]
fn a_preset_that_cannot_be_resolved_is_an_error_with_its_line() {
    assert_eq!(
        error("[sandbox]\n\ncache = [\"go\"]\n", &[HOME, ("GOPATH", "go")]),
        format!(
            "the configuration file {FILE}, line 3: sandbox.cache preset \"go\" cannot be used: \
             GOPATH=go is not an absolute path; make it absolute or unset it"
        )
    );
}

#[test]
fn protected_paths_are_relative_subpaths_without_dot_dot() {
    let config = merged(
        "[sandbox]\nprotected = [\"secrets\", \"deploy/keys/\"]\n",
        &[HOME],
    )
    .expect("merges");
    assert_eq!(
        config.protected.value,
        [PathBuf::from("secrets"), PathBuf::from("deploy/keys")]
    );
    for bad in ["/etc/passwd", "../x", "a/../../b", ".", ""] {
        let text = format!("[sandbox]\nprotected = [{bad:?}]\n");
        assert_eq!(
            error(&text, &[HOME]),
            format!(
                "the configuration file {FILE}, line 2: sandbox.protected lists {bad:?}, which \
                 is not a relative path inside the writable roots; give one such as secrets or \
                 deploy/keys, without a leading /, . or .. components"
            )
        );
    }
}

#[test]
fn show_prints_each_setting_with_its_source_and_each_presets_directories() {
    let config = merged(
        "[sandbox]\nwritable_roots = [\"~/scratch\"]\ncache = [\"pip\", \"go\"]\n\
         protected = [\"secrets\"]\n",
        &[HOME, ("GOCACHE", "off")],
    )
    .expect("merges");
    let text = config.show_with(&|_| None, None);
    let expected = format!(
        "sandbox.writable_roots = [\"/home/u/scratch\"]  ({FILE})\n\
         sandbox.cache = [\"pip\", \"go\"]  ({FILE})\n  \
         pip: \"/home/u/.cache/pip\" (~/.cache/pip)\n  \
         go: \"/home/u/go/pkg/mod\" (~/go/pkg/mod)\n\
         sandbox.protected = [\"secrets\"]  ({FILE})\n"
    );
    assert!(text.contains(&expected), "{text}");
    assert!(Path::new(FILE).is_absolute());
}

#[test]
fn deny_read_and_local_binding_are_read_with_their_sources_and_errors_name_the_line() {
    use crate::deny_read::DenyRead;
    let config = merged(
        "[sandbox]\nlocal_binding = true\ndeny_read = [\"~/.ssh\", \"/etc/secret/\", \"**/.env*\", \"~/.ssh\"]\n",
        &[HOME],
    )
    .expect("merges");
    assert_eq!(
        config.deny_read.value,
        [
            DenyRead::Path("/home/u/.ssh".into()),
            DenyRead::Path("/etc/secret".into()),
            DenyRead::Anywhere(vec![".env*".into()]),
        ]
    );
    assert_eq!(config.deny_read.source, Source::File(FILE.into()));
    assert!(config.local_binding.value);
    let profile = config.sandbox_profile();
    assert!(profile.local_binding);
    assert_eq!(profile.deny_read.len(), 3);
    let shown = config.show();
    assert!(
        shown.contains("sandbox.local_binding = true  (/etc/agentd/agentd.toml)"),
        "{shown}"
    );
    assert!(
        shown.contains(
            "sandbox.deny_read = [\"/home/u/.ssh\", \"/etc/secret\", \"**/.env*\"]  (/etc/agentd/agentd.toml)"
        ),
        "{shown}"
    );
    // Unset: off and empty, from the defaults.
    let plain = merged("", &[HOME]).expect("merges");
    assert!(!plain.local_binding.value);
    assert_eq!(plain.deny_read.source, Source::Default);

    let bad = error("[sandbox]\n\ndeny_read = [\"relative/path\"]\n", &[HOME]);
    assert!(
        bad.contains(
            "line 3: sandbox.deny_read lists \"relative/path\", which is neither an absolute path"
        ),
        "{bad}"
    );
    let wild = error("[sandbox]\ndeny_read = [\"/srv/*.key\"]\n", &[HOME]);
    assert!(
        wild.contains("line 2") && wild.contains("wildcard `*`"),
        "{wild}"
    );
    let no_home = error("[sandbox]\ndeny_read = [\"~/.aws\"]\n", &[]);
    assert!(no_home.contains("needs an absolute HOME"), "{no_home}");
    let not_bool = parse("[sandbox]\nlocal_binding = \"yes\"\n").expect_err("a string");
    assert!(not_bool.to_string().contains("local_binding"), "{not_bool}");
}

#[test]
fn the_allow_list_is_a_network_word_with_its_lists_and_every_entry_is_checked_at_load() {
    let config = merged(
        "[sandbox]\nnetwork = \"allow-list\"\nallowed_domains = [\"pypi.org\", \"*.pythonhosted.org\"]\ndenied_domains = [\"upload.pypi.org\"]\n",
        &[HOME],
    )
    .expect("merges");
    // The sandbox itself has no network; the proxy reaches what the lists allow.
    assert_eq!(config.network.value, confine_protocol::Network::Deny);
    let list = config.allow_list.value.clone().expect("an allow-list");
    assert_eq!(list.allowed, ["pypi.org", "*.pythonhosted.org"]);
    assert_eq!(list.denied, ["upload.pypi.org"]);
    assert!(!list.local_addresses);
    let profile = config.sandbox_profile();
    let policy = profile.allow_list.clone().expect("the proxy's policy");
    assert!(policy.decide("files.pythonhosted.org").1.allows());
    assert!(!policy.decide("upload.pypi.org").1.allows());
    assert!(!policy.decide("example.com").1.allows());
    let shown = config.show();
    for line in [
        "sandbox.network = \"allow-list\"  (/etc/agentd/agentd.toml)",
        "sandbox.allowed_domains = [\"pypi.org\", \"*.pythonhosted.org\"]  (/etc/agentd/agentd.toml)",
        "sandbox.allow_local_addresses = false  (/etc/agentd/agentd.toml)",
    ] {
        assert!(shown.contains(line), "{line}\n{shown}");
    }
    // Only confined commands without the network go through it.
    use confine_protocol::{Mode, Network};
    assert!(profile.proxy(Mode::ReadOnly, Network::Deny).is_some());
    assert!(
        profile
            .proxy(Mode::DangerFullAccess, Network::Deny)
            .is_none()
    );
    assert!(
        profile
            .proxy(Mode::WorkspaceWrite, Network::Allow)
            .is_none()
    );

    let bad = error(
        "[sandbox]\nnetwork = \"allow-list\"\nallowed_domains = [\"*bad*.org\"]\n",
        &[HOME],
    );
    assert!(bad.contains("line 3") && bad.contains("*bad*.org"), "{bad}");
    let stray = error("[sandbox]\n\nallowed_domains = [\"pypi.org\"]\n", &[HOME]);
    assert!(
        stray.contains("line 3: sandbox.allowed_domains needs sandbox.network = \"allow-list\""),
        "{stray}"
    );
    let unknown = error("[sandbox]\nnetwork = \"some\"\n", &[HOME]);
    assert!(
        unknown.contains("use one of \"deny\", \"allow\" or \"allow-list\""),
        "{unknown}"
    );
}

#[test]
fn unix_sockets_are_absolute_or_from_the_home_directory_and_otherwise_kept_as_written() {
    let config = merged(
        "[sandbox]\nunix_sockets = [\n  \"/var/run/docker.sock\",\n  \"~/.ssh/agent.sock\",\n  \
         \"/run/a/../b.sock\",\n  \"~\",\n  \"/var/run/docker.sock\",\n]\n",
        &[HOME],
    )
    .expect("merges");
    // Not resolved: the `..` stays, as the program connects by that name.
    assert_eq!(
        config.unix_sockets.value,
        [
            PathBuf::from("/var/run/docker.sock"),
            PathBuf::from("/home/u/.ssh/agent.sock"),
            PathBuf::from("/run/a/../b.sock"),
            PathBuf::from("/home/u"),
        ]
    );
    assert_eq!(config.unix_sockets.source, Source::File(FILE.into()));
    assert_eq!(
        config.sandbox_profile().unix_sockets,
        config.unix_sockets.value
    );
    let shown = config.show();
    assert!(
        shown.contains(
            "sandbox.unix_sockets = [\"/var/run/docker.sock\", \"/home/u/.ssh/agent.sock\", \
             \"/run/a/../b.sock\", \"/home/u\"]  (/etc/agentd/agentd.toml)\n"
        ),
        "{shown}"
    );
    // Unset: none, from the defaults, and shown so.
    let plain = merged("", &[HOME]).expect("merges");
    assert!(plain.unix_sockets.value.is_empty());
    assert_eq!(plain.unix_sockets.source, Source::Default);
    assert!(
        plain
            .show()
            .contains("sandbox.unix_sockets = []  (default)\n"),
        "{}",
        plain.show()
    );
}

#[test]
fn a_unix_socket_that_is_not_an_absolute_path_is_an_error_naming_the_line_and_the_forms() {
    let shape = "is not an absolute path, `~` or `~/…`";
    for (written, bad, reason) in [
        ("\"docker.sock\"", "docker.sock", shape),
        ("\"./run/x.sock\"", "./run/x.sock", shape),
        ("\"~alice/x.sock\"", "~alice/x.sock", shape),
        ("\"\"", "", shape),
        (
            "\"/run/x\\u0000.sock\"",
            "/run/x\0.sock",
            "contains a NUL byte, which no path can",
        ),
    ] {
        let text = format!("[sandbox]\nunix_sockets = [\n  \"/ok.sock\",\n  {written},\n]\n");
        assert_eq!(
            error(&text, &[HOME]),
            format!(
                "the configuration file {FILE}, line 4: sandbox.unix_sockets lists {bad:?}, \
                 which {reason}; write each as the absolute path a program connects to (such as \
                 /var/run/docker.sock), or as ~/path from your home directory"
            )
        );
    }
    assert!(
        parse("[sandbox]\nunix_sockets = \"/var/run/docker.sock\"\n")
            .expect_err("a string, not a list")
            .to_string()
            .contains("unix_sockets"),
    );
}

#[test]
fn a_unix_socket_from_the_home_directory_needs_an_absolute_home() {
    let text = "[sandbox]\n\nunix_sockets = [\"~/.ssh/agent.sock\"]\n";
    assert_eq!(
        error(text, &[]),
        format!(
            "the configuration file {FILE}, line 3: sandbox.unix_sockets lists \
             \"~/.ssh/agent.sock\", and HOME is not set so it is not an absolute path; set HOME \
             to your home directory or write the socket as an absolute path"
        )
    );
    assert!(
        error(text, &[("HOME", "home")]).contains("and HOME is \"home\" so it is not an absolute"),
        "{}",
        error(text, &[("HOME", "home")])
    );
}

#[test]
fn a_built_in_denied_read_is_lifted_by_its_exact_name_and_config_show_says_where() {
    let text =
        "[sandbox]\ndeny_read = [\"/srv/keys\"]\nlift_deny_read = [\n  \"~/.kube/config\",\n]\n";
    let config = merged(text, &[HOME]).expect("merges");
    let entries: Vec<&str> = config
        .sandbox_profile()
        .credentials
        .iter()
        .map(|c| c.built_in.entry)
        .collect();
    assert!(!entries.contains(&"~/.kube/config"), "{entries:?}");
    assert!(entries.contains(&"~/.ssh/*") && entries.contains(&"~/.npmrc"));
    let shown = config.show_with(&|_| None, None);
    for line in [
        "sandbox.lift_deny_read = [\"~/.kube/config\"]  (/etc/agentd/agentd.toml)",
        "  denied: \"/home/u/.ssh/*\" (built in: ~/.ssh/*)",
        "  lifted: \"/home/u/.kube/config\" (built in: ~/.kube/config; lifted by \
         /etc/agentd/agentd.toml, line 4)",
        "  denied: \"/srv/keys\" (/etc/agentd/agentd.toml, line 2)",
    ] {
        assert!(shown.lines().any(|l| l == line), "{line}\n{shown}");
    }
    // The control: without the key the same entry is denied.
    let plain = merged("", &[HOME]).expect("merges");
    assert!(
        plain
            .sandbox_profile()
            .credentials
            .iter()
            .any(|c| c.built_in.entry == "~/.kube/config")
    );
}

#[test]
fn lifting_what_is_not_a_built_in_entry_is_an_error_naming_the_line_and_the_entries() {
    for bad in ["~/.ssh", "~/.kube", "/home/u/.npmrc", "**/.env"] {
        let text = format!("[sandbox]\nlift_deny_read = [\n  \"~/.npmrc\",\n  {bad:?},\n]\n");
        assert_eq!(
            error(&text, &[HOME]),
            format!(
                "the configuration file {FILE}, line 4: sandbox.lift_deny_read lists {bad:?}, \
                 which is not a built-in denied read; name one exactly as listed: {}",
                crate::credentials::names()
            )
        );
    }
}
