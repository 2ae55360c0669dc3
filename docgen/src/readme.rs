//! `docs/contracts/README.md`: what each generated file is, how to regenerate them, and the
//! test that keeps them from drifting.

use crate::generated::{Generated, NOTICE, REGENERATE};

/// What the file at `path` is; every generated path has a line.
fn what(path: &str) -> &'static str {
    match path {
        "docs/contracts/helper-protocol.md" => {
            "the protocol between agentd and confine-helper: its version, its schema hash and \
             every message definition"
        }
        "docs/contracts/acp-session.md" => {
            "what agentd answers to an ACP editor's `initialize` and `session/new`: the session \
             config options and modes, per ceiling"
        }
        "docs/contracts/ceiling.md" => {
            "every key of confine-helper's ceiling file, what it narrows and how sources combine"
        }
        "docs/contracts/agentd-toml.md" => {
            "every key of `agentd.toml`: type, default, the variable and flag that override it"
        }
        p if p.starts_with("docs/contracts/tools/") => {
            "the built-in tools' schemas as the model is offered them under this ceiling, with \
             and without escalation (JSON; the notice is its `$comment`)"
        }
        p if p.starts_with("agentd/man/") => "a man page of agentd or a subcommand",
        p if p.starts_with("agentd/completions/") => "agentd's completions for a shell",
        _ => "",
    }
}

pub fn readme(files: &[Generated]) -> Generated {
    let mut body = String::from(
        "# Contracts

The exact statement of what agentd and confine-helper promise the outside: the helper protocol,
the tools the model sees, the ACP session settings, the ceiling file and `agentd.toml`. Every
file here, and agentd's man pages and shell completions under `agentd/man/` and
`agentd/completions/` (which the Debian package installs and `agentd man` and `agentd completions`
print), is generated from the code by one command:

```sh
cargo run -p agentd-docgen              # writes every file below
cargo run -p agentd-docgen -- --check   # writes nothing; exits 1 naming each file that differs
```

`cargo test --workspace` runs the check (`docgen/tests/drift.rs`), so a change of the code that
changes a contract fails until the files are regenerated and the difference is committed with
it; a hand edit of a generated file fails the same way. A file in these directories that the
code no longer generates fails it too (the generator removes it).

Each file begins with the notice \"",
    );
    body.push_str(NOTICE);
    body.push_str(&format!(
        "\" in its own comment syntax; the JSON files carry it as their `$comment` key. On \
         drift: {REGENERATE}.\n\n| File | What it is |\n|---|---|\n"
    ));
    for file in files {
        body.push_str(&format!("| `{}` | {} |\n", file.path, what(&file.path)));
    }
    body.push_str(&format!(
        "| `docs/contracts/README.md` | {} |\n",
        "this file"
    ));
    Generated::markdown("docs/contracts/README.md", &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_generated_file_is_described() {
        for file in crate::all().expect("the generated files") {
            if file.path != "docs/contracts/README.md" {
                assert!(
                    !what(&file.path).is_empty(),
                    "{} is not described",
                    file.path
                );
            }
        }
    }
}
