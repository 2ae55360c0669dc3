//! `[[mcp.servers]]`: the MCP servers every session starts, besides those its client gives in
//! `session/new` or `session/load`.
//!
//! ```toml
//! [[mcp.servers]]
//! name = "notes"                                 # its tools are mcp__notes__TOOL
//! command = ["python3", "servers/notes.py"]      # the program and its arguments
//! env = { NOTES_FORMAT = "markdown" }            # optional: set for the server only
//! ```
//!
//! A server runs through confine-helper like a command (RFC 0015): under the session's mode, in
//! its workspace, with the environment commands get plus its own `env`. A name in `env` that
//! looks like a secret is refused by confine-helper unless its ceiling's `env_allow` lists it,
//! as for `[sandbox.env]`. A program given as a relative path with a `/` is taken from the
//! file's directory; a bare name is looked up on the commands' `PATH`.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use super::checks::{is_variable_name, line_at};
use super::{ConfigError, Source};
use crate::mcp::names;

/// `[mcp]` as the file writes it.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMcp {
    #[serde(default)]
    servers: Vec<Spanned<RawServer>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    name: Spanned<String>,
    command: Spanned<Vec<String>>,
    #[serde(default)]
    env: BTreeMap<Spanned<String>, String>,
}

/// One `[[mcp.servers]]` table, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerConfig {
    pub name: String,
    /// The program and its arguments; never empty.
    pub command: Vec<String>,
    /// Its own variables, by name.
    pub env: Vec<(String, String)>,
}

/// Checks every `[[mcp.servers]]` table of the file at `path` (whose text is `text`).
pub(super) fn servers(
    raw: Option<RawMcp>,
    path: &Path,
    text: &str,
) -> Result<Vec<McpServerConfig>, ConfigError> {
    let base = path.parent().unwrap_or(Path::new(""));
    let error = |offset: usize, why: String| ConfigError::Mcp {
        path: path.to_owned(),
        line: line_at(text, offset),
        why,
    };
    let mut out: Vec<(McpServerConfig, usize)> = Vec::new();
    for server in raw.unwrap_or_default().servers {
        let server = server.into_inner();
        let name_at = server.name.span().start;
        let name = server.name.into_inner();
        let key = names::server_key(&name).map_err(|e| {
            error(
                name_at,
                format!("{e}; name the server (its tools are called mcp__NAME__TOOL)"),
            )
        })?;
        if let Some((_, line)) = out
            .iter()
            .find(|(other, _)| names::server_key(&other.name).ok().as_ref() == Some(&key))
        {
            return Err(error(
                name_at,
                format!(
                    "name = {name:?} names its tools like the server on line {line} does \
                     (mcp__{key}__…); give each server its own name"
                ),
            ));
        }
        let command_at = server.command.span().start;
        let mut command = server.command.into_inner();
        let Some(program) = command.first_mut() else {
            return Err(error(
                command_at,
                "command = [] is empty; give the server's program and its arguments, such as \
                 [\"npx\", \"-y\", \"some-mcp-server\"]"
                    .to_owned(),
            ));
        };
        if program.contains('/') && !Path::new(program.as_str()).is_absolute() {
            *program = base.join(program.as_str()).display().to_string();
        }
        let mut env = Vec::new();
        for (var, value) in server.env {
            if !is_variable_name(var.get_ref()) {
                return Err(error(
                    var.span().start,
                    format!(
                        "env lists {:?}, which is not a variable name (letters, digits and `_`, \
                         not starting with a digit)",
                        var.get_ref()
                    ),
                ));
            }
            env.push((var.into_inner(), value));
        }
        out.push((
            McpServerConfig { name, command, env },
            line_at(text, name_at),
        ));
    }
    Ok(out.into_iter().map(|(server, _)| server).collect())
}

/// The lines `agentd config show` prints for the servers: their names with where they came
/// from, then each one's command and the names of its variables (never a value: one may be a
/// credential).
pub(super) fn show(servers: &[McpServerConfig], source: &Source) -> Vec<String> {
    let names: Vec<String> = servers.iter().map(|s| format!("{:?}", s.name)).collect();
    let mut lines = vec![format!("mcp.servers = [{}]  ({source})", names.join(", "))];
    lines.extend(servers.iter().map(|server| {
        let command: Vec<String> = server.command.iter().map(|a| format!("{a:?}")).collect();
        let env: Vec<String> = server.env.iter().map(|(n, _)| format!("{n:?}")).collect();
        format!(
            "  {}: command = [{}], env = [{}]",
            server.name,
            command.join(", "),
            env.join(", ")
        )
    }));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<McpServerConfig>, ConfigError> {
        #[derive(Deserialize)]
        struct File {
            mcp: Option<RawMcp>,
        }
        let file: File = toml::from_str(text).expect("toml");
        servers(file.mcp, Path::new("/c/agentd.toml"), text)
    }

    #[test]
    fn servers_are_read_with_their_command_and_env() {
        let servers = parse(
            "[[mcp.servers]]\nname = \"notes\"\ncommand = [\"python3\", \"srv/notes.py\"]\n\
             env = { B = \"2\", A = \"1\" }\n\n[[mcp.servers]]\nname = \"git\"\n\
             command = [\"./bin/git-mcp\", \"--x\"]\n",
        )
        .expect("parses");
        assert_eq!(
            servers,
            [
                McpServerConfig {
                    name: "notes".into(),
                    command: vec!["python3".into(), "srv/notes.py".into()],
                    env: vec![("A".into(), "1".into()), ("B".into(), "2".into())],
                },
                McpServerConfig {
                    name: "git".into(),
                    command: vec!["/c/./bin/git-mcp".into(), "--x".into()],
                    env: vec![],
                },
            ]
        );
        assert_eq!(
            show(&servers, &Source::File("/c/agentd.toml".into())),
            [
                "mcp.servers = [\"notes\", \"git\"]  (/c/agentd.toml)",
                "  notes: command = [\"python3\", \"srv/notes.py\"], env = [\"A\", \"B\"]",
                "  git: command = [\"/c/./bin/git-mcp\", \"--x\"], env = []",
            ]
        );
        assert_eq!(parse("").expect("none"), []);
    }

    #[test]
    fn each_mistake_is_named_with_its_line() {
        let cases = [
            (
                "[[mcp.servers]]\nname = \"a\"\ncommand = []\n",
                "line 3: [[mcp.servers]] command = [] is empty",
            ),
            (
                "[[mcp.servers]]\nname = \"..\"\ncommand = [\"x\"]\n",
                "line 2: [[mcp.servers]] the MCP server name \"..\" has no letter or digit",
            ),
            (
                "[[mcp.servers]]\nname = \"my notes\"\ncommand = [\"x\"]\n\n[[mcp.servers]]\n\
                 name = \"my_notes\"\ncommand = [\"y\"]\n",
                "line 6: [[mcp.servers]] name = \"my_notes\" names its tools like the server on \
                 line 2 does (mcp__my_notes__…)",
            ),
            (
                "[[mcp.servers]]\nname = \"a\"\ncommand = [\"x\"]\nenv = { \"NOT OK\" = \"v\" }\n",
                "line 4: [[mcp.servers]] env lists \"NOT OK\", which is not a variable name",
            ),
        ];
        for (text, expected) in cases {
            let err = parse(text).expect_err(text).to_string();
            assert!(
                err.starts_with("the configuration file /c/agentd.toml, "),
                "{err}"
            );
            assert!(err.contains(expected), "{err}\nexpected: {expected}");
        }
    }
}
