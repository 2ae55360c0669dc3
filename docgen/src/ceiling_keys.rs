//! The ceiling file's keys as a table: name, TOML type, default, what each narrows and how
//! several sources combine, for the generated contract `docs/contracts/ceiling.md`.
//!
//! The helper's parser (`confine-helper/src/ceiling.rs`, a serde struct that rejects unknown
//! fields) is the one place that decides which keys there are; this table only describes them,
//! and lives here because only the documentation reads it. The tests below hold the two together
//! through the real helper binary, not a second list: the keys a ceiling file with an unknown
//! key is told to use are exactly these, in this order; each key takes its TOML type and no
//! other; and with no ceiling the helper grants the defaults written here.

/// The system-wide ceiling file, read first; the helper's usage names it (checked below).
pub(crate) const SYSTEM_FILE: &str = "/etc/confine-helper/ceiling.toml";

/// The TOML type of a key's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TomlType {
    String,
    Boolean,
    Integer,
    StringArray,
}

impl TomlType {
    /// How the contract names it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            TomlType::String => "string",
            TomlType::Boolean => "boolean",
            TomlType::Integer => "integer",
            TomlType::StringArray => "array of strings",
        }
    }
}

/// One key of a ceiling file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CeilingKey {
    pub(crate) name: &'static str,
    pub(crate) toml: TomlType,
    /// The values it takes, beyond its TOML type.
    pub(crate) values: &'static str,
    /// The built-in ceiling's value: what holds when no source sets the key.
    pub(crate) default: &'static str,
    /// What the key narrows.
    pub(crate) narrows: &'static str,
    /// How the values of several sources combine.
    pub(crate) combine: &'static str,
}

/// Every key a ceiling file may hold, in the parser's order.
pub(crate) const CEILING_KEYS: &[CeilingKey] = &[
    CeilingKey {
        name: "max_mode",
        toml: TomlType::String,
        values: "read-only, workspace-write or danger-full-access",
        default: "danger-full-access",
        narrows: "The widest sandbox mode a request may ask for; a wider one is refused.",
        combine: "The narrowest of the sources.",
    },
    CeilingKey {
        name: "allow_network",
        toml: TomlType::Boolean,
        values: "true or false",
        default: "true",
        narrows: "Whether a confined command may be given the network; a confined request that \
                  asks for it is refused when false.",
        combine: "False if any source says false.",
    },
    CeilingKey {
        name: "allow_unix_sockets",
        toml: TomlType::Boolean,
        values: "true or false",
        default: "true",
        narrows: "Whether a request may list named Unix sockets its command may connect to \
                  (`Policy::unix_sockets`).",
        combine: "False if any source says false.",
    },
    CeilingKey {
        name: "writable_roots_under",
        toml: TomlType::StringArray,
        values: "absolute paths",
        default: "no constraint",
        narrows: "Where a writable root may be: under one of these paths (compared after \
                  resolving links).",
        combine: "Each source's list is one more constraint: a writable root must be under an \
                  entry of every list.",
    },
    CeilingKey {
        name: "never_writable",
        toml: TomlType::StringArray,
        values: "absolute paths",
        default: "none",
        narrows: "Paths no writable root may contain or lie inside (compared after resolving \
                  links).",
        combine: "The union of the sources.",
    },
    CeilingKey {
        name: "env_allow",
        toml: TomlType::StringArray,
        values: "variable names, `*` matching any run of characters",
        default: "none exempt",
        narrows: "Variables whose names look like secrets that a command may still be given; \
                  any other such variable in a request refuses the request.",
        combine: "A name is exempt only if every source that sets the key matches it.",
    },
    CeilingKey {
        name: "env_deny",
        toml: TomlType::StringArray,
        values: "variable names, `*` matching any run of characters",
        default: "none",
        narrows: "Variables dropped from every command's environment.",
        combine: "The union of the sources.",
    },
    CeilingKey {
        name: "max_processes",
        toml: TomlType::Integer,
        values: "a count",
        default: "no limit",
        narrows: "The most tasks (processes and threads) a confined command's tree may have at \
                  once, counted for that tree alone; a request's lower cap is kept, and a \
                  request without one gets 2048.",
        combine: "The smallest of the sources.",
    },
    CeilingKey {
        name: "max_file_size",
        toml: TomlType::Integer,
        values: "bytes",
        default: "no limit",
        narrows: "The most RLIMIT_FSIZE a command gets; a request's lower limit is kept.",
        combine: "The smallest of the sources.",
    },
    CeilingKey {
        name: "max_address_space",
        toml: TomlType::Integer,
        values: "bytes",
        default: "no limit",
        narrows: "The most RLIMIT_AS a command gets; a request's lower limit is kept.",
        combine: "The smallest of the sources.",
    },
    CeilingKey {
        name: "max_memory",
        toml: TomlType::Integer,
        values: "bytes",
        default: "no limit",
        narrows: "The most memory a confined command's tree may use at once, where the kernel \
                  counts it for the tree (a helper running as root, in a cgroup of the \
                  command's own); a request's lower cap is kept, and a request without one gets \
                  half of the machine's memory.",
        combine: "The smallest of the sources.",
    },
    CeilingKey {
        name: "refuse_partial",
        toml: TomlType::Boolean,
        values: "true or false",
        default: "false",
        narrows: "When true, a confined command whose confinement cannot be fully enforced on \
                  this machine is refused instead of run with what can be.",
        combine: "True if any source says true.",
    },
];

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::path::{Path, PathBuf};
    use std::process::{Command, Output};

    use super::*;

    /// A ceiling file's mode the helper accepts: writable by its owner alone.
    const OWNER_ONLY: u32 = 0o600;

    /// A value of each TOML type that every key of that type takes.
    fn sample(toml: TomlType) -> &'static str {
        match toml {
            TomlType::String => "\"read-only\"",
            TomlType::Boolean => "false",
            TomlType::Integer => "64",
            TomlType::StringArray => "[\"/\"]",
        }
    }

    const TYPES: [TomlType; 4] = [
        TomlType::String,
        TomlType::Boolean,
        TomlType::Integer,
        TomlType::StringArray,
    ];

    /// A program of this build, beside the test binary's directory (`target/<profile>/`).
    fn built(name: &str) -> PathBuf {
        let exe = std::env::current_exe().expect("the test binary's path");
        let path = exe
            .parent()
            .and_then(Path::parent)
            .expect("the test binary lies in target/<profile>/deps")
            .join(name);
        assert!(
            path.is_file(),
            "{} is missing: build it with `cargo build -p {name}` (cargo test --workspace \
             builds it)",
            path.display()
        );
        path
    }

    fn helper() -> PathBuf {
        built("confine-helper")
    }

    /// A scratch directory, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            let dir =
                std::env::temp_dir().join(format!("docgen-ceiling-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("create the scratch directory");
            Scratch(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// What the helper reports of its ceiling (the `ceiling` object of the probe's JSON) when
    /// given `text` as its `--ceiling` file.
    fn ceiling_with(scratch: &Scratch, text: &str) -> serde_json::Value {
        let file = scratch.0.join("ceiling.toml");
        std::fs::write(&file, text).expect("write the ceiling file");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(OWNER_ONLY))
            .expect("make the ceiling file the owner's alone");
        let output = probe(
            scratch,
            &["--helper-ceiling", file.to_str().expect("a UTF-8 path")],
        );
        let line = String::from_utf8_lossy(&output.stdout);
        let report: serde_json::Value = serde_json::from_str(line.trim()).unwrap_or_else(|e| {
            panic!(
                "the probe printed no JSON ({e}): {line}\n{}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
        report["ceiling"].clone()
    }

    /// `agentd probe --json` asking this build's helper, in a scratch home and XDG directories:
    /// no user ceiling is read, and the verdicts it keeps stay in the scratch directory.
    fn probe(scratch: &Scratch, args: &[&str]) -> Output {
        Command::new(built("agentd"))
            .args(["probe", "--json", "--helper"])
            .arg(helper())
            .args(args)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &scratch.0)
            .env("XDG_CONFIG_HOME", scratch.0.join("config"))
            .env("XDG_CACHE_HOME", scratch.0.join("cache"))
            .env("XDG_STATE_HOME", scratch.0.join("state"))
            .output()
            .expect("agentd runs")
    }

    /// Why the helper found the ceiling broken, or `None` when it took it.
    fn broken(ceiling: &serde_json::Value) -> Option<String> {
        ceiling["broken"].as_str().map(str::to_owned)
    }

    /// The keys a parse error of serde names: "expected one of `a`, `b`".
    fn expected_keys(message: &str) -> Vec<String> {
        let Some(at) = message.find("expected one of ") else {
            return Vec::new();
        };
        message[at..]
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn the_table_has_exactly_the_keys_the_helper_accepts_in_its_order() {
        let scratch = Scratch::new("keys");
        let ceiling = ceiling_with(&scratch, "no_such_key = true\n");
        let message = broken(&ceiling).expect("an unknown key breaks the ceiling");
        assert!(message.contains("no_such_key"), "{message}");
        let table: Vec<&str> = CEILING_KEYS.iter().map(|k| k.name).collect();
        assert_eq!(expected_keys(&message), table, "{message}");
    }

    #[test]
    fn the_reading_of_the_helpers_key_list_finds_a_key_the_table_lacks() {
        let message = "unknown field `x`, expected one of `max_mode`, `extra`";
        assert_eq!(expected_keys(message), ["max_mode", "extra"]);
        assert_ne!(expected_keys(message).len(), CEILING_KEYS.len());
    }

    #[test]
    fn each_key_takes_its_toml_type_and_no_other() {
        let scratch = Scratch::new("types");
        for key in CEILING_KEYS {
            for toml in TYPES {
                let text = format!("{} = {}\n", key.name, sample(toml));
                let ceiling = ceiling_with(&scratch, &text);
                assert_eq!(
                    broken(&ceiling).is_none(),
                    toml == key.toml,
                    "{text} (the table says {}): {ceiling}",
                    key.toml.as_str()
                );
            }
        }
    }

    #[test]
    fn without_a_ceiling_the_helper_grants_the_tables_defaults() {
        if Path::new(SYSTEM_FILE).exists() {
            eprintln!(
                "SKIP without_a_ceiling_the_helper_grants_the_tables_defaults: this machine has \
                 {SYSTEM_FILE}, which narrows the defaults"
            );
            return;
        }
        let scratch = Scratch::new("defaults");
        let ceiling = ceiling_with(&scratch, "");
        assert_eq!(broken(&ceiling), None, "{ceiling}");
        let default = |name: &str| {
            CEILING_KEYS
                .iter()
                .find(|k| k.name == name)
                .map(|k| k.default)
                .expect("the key is in the table")
        };
        assert_eq!(ceiling["max_mode"], default("max_mode"), "{ceiling}");
        assert_eq!(
            ceiling["allow_network"].to_string(),
            default("allow_network"),
            "{ceiling}"
        );
        // The control: a file that narrows both is reported narrowed.
        let narrowed = ceiling_with(
            &scratch,
            "max_mode = \"read-only\"\nallow_network = false\n",
        );
        assert_eq!(narrowed["max_mode"], "read-only", "{narrowed}");
        assert_eq!(narrowed["allow_network"], false, "{narrowed}");
    }

    #[test]
    fn the_helpers_usage_names_the_system_file() {
        let output = Command::new(helper())
            .arg("--help")
            .output()
            .expect("the helper runs");
        let usage = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(usage.contains("--ceiling"), "{usage}");
        assert!(usage.contains(SYSTEM_FILE), "{usage}");
    }
}
