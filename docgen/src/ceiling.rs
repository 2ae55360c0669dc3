//! `docs/contracts/ceiling.md`: every key of confine-helper's ceiling file, from the table whose
//! tests hold it equal to the helper's parser (`ceiling_keys`).

use crate::ceiling_keys::{CEILING_KEYS, SYSTEM_FILE};

use crate::generated::Generated;

/// A table cell: no line breaks, no unescaped column separators.
pub fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

pub fn ceiling_file() -> Generated {
    let mut body = format!(
        "# The ceiling file

confine-helper's own limit on what any request may ask for, whatever agentd says. It is TOML;
every key is optional, and an absent key narrows nothing. An unknown key, a value of the wrong
type, a relative path where an absolute one is needed, or a file that is writable by group or
others or owned by another user than root (or, for the user's file and `--ceiling`, the helper's
user) makes every request be refused with the reason: a broken ceiling fails closed.

## Sources

Read in this order; each can only narrow what the ones before it allowed:

1. the built-in ceiling (the defaults below, the widest);
2. `{SYSTEM_FILE}` (owned by root);
3. `$XDG_CONFIG_HOME/confine-helper/ceiling.toml`, else `~/.config/confine-helper/ceiling.toml`
   of the helper's user;
4. `--ceiling PATH` (which must exist); agentd passes its `--helper-ceiling PATH` or
   `helper.ceiling` on to the helper it starts.

The helper reports the files it read, in order, as its grant's `sources`.

## Keys

| Key | Type | Values | Default | Narrows | Several sources |
|---|---|---|---|---|---|
"
    );
    for key in CEILING_KEYS {
        body.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} |\n",
            key.name,
            key.toml.as_str(),
            cell(key.values),
            cell(key.default),
            cell(key.narrows),
            cell(key.combine)
        ));
    }
    Generated::markdown("docs/contracts/ceiling.md", &body)
}
