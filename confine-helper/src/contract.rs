//! The ceiling file's keys as a table: name, TOML type, default, what each narrows and how
//! several sources combine, for the generated contract `docs/contracts/ceiling.md`.
//!
//! Public only for that generator (`agentd-docgen`); the helper's own surface stays `cli`. The
//! table is written beside the parser's struct (`ceiling::File`), not derived from it, so a unit
//! test holds them together: the keys are exactly the fields serde accepts, in their order, each
//! takes its TOML type and no other, and each default is the built-in ceiling's value. A field
//! added to the struct without a row here fails that test.

#![doc(hidden)]

/// The system-wide ceiling file, read first.
pub const SYSTEM_FILE: &str = crate::ceiling::SYSTEM_FILE;

/// The TOML type of a key's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TomlType {
    String,
    Boolean,
    Integer,
    StringArray,
}

impl TomlType {
    /// How the contract names it.
    pub fn as_str(self) -> &'static str {
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
pub struct CeilingKey {
    pub name: &'static str,
    pub toml: TomlType,
    /// The values it takes, beyond its TOML type.
    pub values: &'static str,
    /// The built-in ceiling's value: what holds when no source sets the key.
    pub default: &'static str,
    /// What the key narrows.
    pub narrows: &'static str,
    /// How the values of several sources combine.
    pub combine: &'static str,
}

/// Every key a ceiling file may hold, in the parser's order.
pub const CEILING_KEYS: &[CeilingKey] = &[
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
    use serde::Deserialize;

    use super::*;
    use crate::ceiling::{Ceiling, File, parse};
    use crate::serde_fields::struct_fields;

    fn sample(toml: TomlType) -> &'static str {
        match toml {
            TomlType::String => "\"read-only\"",
            TomlType::Boolean => "false",
            TomlType::Integer => "64",
            TomlType::StringArray => "[\"/srv\"]",
        }
    }

    const TYPES: [TomlType; 4] = [
        TomlType::String,
        TomlType::Boolean,
        TomlType::Integer,
        TomlType::StringArray,
    ];

    #[test]
    fn the_table_has_exactly_the_keys_the_parser_accepts_in_its_order() {
        let table: Vec<&str> = CEILING_KEYS.iter().map(|k| k.name).collect();
        assert_eq!(table, struct_fields::<File>());
    }

    #[test]
    fn the_probe_finds_a_key_the_table_lacks() {
        #[derive(Deserialize)]
        #[allow(dead_code)]
        struct Wider {
            max_mode: Option<String>,
            extra: Option<bool>,
        }
        assert_eq!(struct_fields::<Wider>(), ["max_mode", "extra"]);
        assert_ne!(struct_fields::<Wider>().len(), CEILING_KEYS.len());
    }

    #[test]
    fn each_key_takes_its_toml_type_and_no_other() {
        for key in CEILING_KEYS {
            for toml in TYPES {
                let text = format!("{} = {}", key.name, sample(toml));
                assert_eq!(
                    parse(&text).is_ok(),
                    toml == key.toml,
                    "{text} (the table says {})",
                    key.toml.as_str()
                );
            }
        }
        assert!(parse("no_such_key = true").is_err());
    }

    #[test]
    fn each_default_is_the_built_in_ceilings_value() {
        let built_in = Ceiling::default();
        let limit = |value: Option<u64>| value.map_or("no limit".to_owned(), |n| n.to_string());
        for key in CEILING_KEYS {
            let actual = match key.name {
                "max_mode" => built_in.max_mode.as_str().to_owned(),
                "allow_network" => built_in.allow_network.to_string(),
                "allow_unix_sockets" => built_in.allow_unix_sockets.to_string(),
                "writable_roots_under" if built_in.writable_roots_under.is_empty() => {
                    "no constraint".to_owned()
                }
                "never_writable" if built_in.never_writable.is_empty() => "none".to_owned(),
                "env_deny" if built_in.env_deny.is_empty() => "none".to_owned(),
                "env_allow" if built_in.env_allow.is_empty() => "none exempt".to_owned(),
                "max_processes" => limit(built_in.max_processes),
                "max_file_size" => limit(built_in.max_file_size),
                "max_address_space" => limit(built_in.max_address_space),
                "max_memory" => limit(built_in.max_memory),
                "refuse_partial" => built_in.refuse_partial.to_string(),
                other => panic!("no default known for the ceiling key {other}"),
            };
            assert_eq!(actual, key.default, "{}", key.name);
        }
    }
}
