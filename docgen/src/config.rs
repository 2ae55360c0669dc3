//! `docs/contracts/agentd-toml.md`: every key of agentd's configuration file, from the table
//! agentd's own tests hold equal to its parser and to `agentd config show`
//! (`agentd::api::config::KEYS`).

use agentd::api::config::{ConfigKey, KEYS};

use crate::ceiling::cell;
use crate::generated::Generated;

/// The heading a key is listed under: its first table (with its `NAME`), or the top level.
fn section(key: &ConfigKey) -> String {
    let parts: Vec<&str> = key.path.split('.').collect();
    match parts.as_slice() {
        [] | [_] => "Top level".to_owned(),
        ["mcp", ..] => "`[[mcp.servers]]`".to_owned(),
        [table, "NAME", ..] => format!("`[{table}.NAME]`"),
        [table, ..] => format!("`[{table}]`"),
    }
}

fn code(value: Option<&str>) -> String {
    value.map_or_else(String::new, |v| format!("`{v}`"))
}

pub fn agentd_toml() -> Generated {
    let mut body = String::from(
        "# agentd.toml

agentd's configuration file: `--config PATH`, else `$XDG_CONFIG_HOME/agentd/agentd.toml` (only
if `XDG_CONFIG_HOME` is absolute), else `~/.config/agentd/agentd.toml`. It is optional; a file
given with `--config` must exist. Unknown keys and values outside a key's type are errors naming
the file, the line and what is allowed. Relative paths in the file are taken from its directory.

Each value comes from the first of these that sets it: the flag, the environment variable, the
file, the default. An empty variable counts as unset. `agentd config show` prints every effective
value and where it came from.

`NAME` stands for a name the file chooses: `[models.fast]`, `[agents.reviewer]`.
",
    );
    let mut current = String::new();
    for key in KEYS {
        let heading = section(key);
        if heading != current {
            body.push_str(&format!(
                "\n## {heading}\n\n| Key | Type | Default | Variable | Flag | Meaning |\n\
                 |---|---|---|---|---|---|\n"
            ));
            current = heading;
        }
        body.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} |\n",
            key.path,
            cell(key.kind),
            cell(key.default),
            code(key.env),
            code(key.flag),
            cell(key.doc)
        ));
    }
    Generated::markdown("docs/contracts/agentd-toml.md", &body)
}
