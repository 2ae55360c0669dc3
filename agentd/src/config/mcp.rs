//! `[[mcp.servers]]`: the MCP servers every session starts, besides those its client gives in
//! `session/new` or `session/load`.
//!
//! ```toml
//! [[mcp.servers]]
//! name = "notes"                                 # its tools are mcp__notes__TOOL
//! command = ["python3", "servers/notes.py"]      # the program and its arguments
//! env = { NOTES_FORMAT = "markdown" }            # optional: set for the server only
//!
//! [[mcp.servers]]
//! name = "tracker"
//! url = "https://mcp.example.com/mcp"            # a streamable HTTP server, instead of a command
//! headers = { Authorization = "Bearer …" }       # optional: sent with every request to it
//! ```
//!
//! A server with a `command` runs through confine-helper like a command (RFC 0015): under the
//! session's mode, in its workspace, with the environment commands get plus its own `env`. A
//! name in `env` that looks like a secret is refused by confine-helper unless its ceiling's
//! `env_allow` lists it, as for `[sandbox.env]`. A program given as a relative path with a `/`
//! is taken from the file's directory; a bare name is looked up on the commands' `PATH`. A
//! server with a `url` is reached by agentd itself, only when the session's network policy
//! allows its host; its `headers` are never printed, since one may be a credential.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use super::checks::{is_variable_name, line_at};
use super::{ConfigError, Source};
use crate::mcp::endpoint::{Endpoint, EndpointError};
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
pub(super) struct RawServer {
    name: Spanned<String>,
    command: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    env: BTreeMap<Spanned<String>, String>,
    url: Option<Spanned<String>>,
    #[serde(default)]
    headers: BTreeMap<Spanned<String>, String>,
}

/// One `[[mcp.servers]]` table, checked: a server agentd starts (`command`) or one it reaches
/// over HTTP (`http`), never both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerConfig {
    pub name: String,
    /// The program and its arguments; empty exactly when the server is reached over `http`.
    pub command: Vec<String>,
    /// Its own variables, by name (a server agentd starts only).
    pub env: Vec<(String, String)>,
    /// Its URL and headers, for a server reached over streamable HTTP.
    pub http: Option<Endpoint>,
}

/// Checks every `[[mcp.servers]]` table of the file at `path` (whose text is `text`).
pub(super) fn servers(
    raw: Option<RawMcp>,
    path: &Path,
    text: &str,
) -> Result<Vec<McpServerConfig>, ConfigError> {
    let base = path.parent().unwrap_or(Path::new(""));
    let error = |(offset, why): (usize, String)| ConfigError::Mcp {
        path: path.to_owned(),
        line: line_at(text, offset),
        why,
    };
    let mut out: Vec<(McpServerConfig, usize)> = Vec::new();
    for server in raw.unwrap_or_default().servers {
        let server = server.into_inner();
        let name_at = server.name.span().start;
        let checked = server_config(server, &out, base).map_err(error)?;
        out.push((checked, line_at(text, name_at)));
    }
    Ok(out.into_iter().map(|(server, _)| server).collect())
}

/// One `[[mcp.servers]]` table, checked, its relative program taken from `base`; its name must
/// differ from those of the servers `before` it (each with its line). The error is where in the
/// file and why.
fn server_config(
    server: RawServer,
    before: &[(McpServerConfig, usize)],
    base: &Path,
) -> Result<McpServerConfig, (usize, String)> {
    let name_at = server.name.span().start;
    let name = server.name.into_inner();
    let key = names::server_key(&name).map_err(|e| {
        (
            name_at,
            format!("{e}; name the server (its tools are called mcp__NAME__TOOL)"),
        )
    })?;
    if let Some((_, line)) = before
        .iter()
        .find(|(other, _)| names::server_key(&other.name).ok().as_ref() == Some(&key))
    {
        return Err((
            name_at,
            format!(
                "name = {name:?} names its tools like the server on line {line} does \
                 (mcp__{key}__…); give each server its own name"
            ),
        ));
    }
    match (server.command, server.url) {
        (None, None) => Err((
            name_at,
            format!(
                "name = {name:?} has neither a command nor a url; give command = \
                 [\"program\", \"args\"…] for a server agentd starts, or url = \
                 \"https://…\" for one it reaches over streamable HTTP"
            ),
        )),
        (Some(_), Some(url)) => Err((
            url.span().start,
            "has both a command and a url; a server is either a program agentd starts \
             (command) or one it reaches over HTTP (url)"
                .to_owned(),
        )),
        (Some(command), None) => {
            if let Some((header, _)) = server.headers.first_key_value() {
                return Err((
                    header.span().start,
                    "headers are sent to a server at a url; a server agentd starts gets env"
                        .to_owned(),
                ));
            }
            command_server(name, command, server.env, base)
        }
        (None, Some(url)) => {
            if let Some((var, _)) = server.env.first_key_value() {
                return Err((
                    var.span().start,
                    "env is set for a server agentd starts; one at a url gets headers".to_owned(),
                ));
            }
            Ok(McpServerConfig {
                name,
                command: Vec::new(),
                env: Vec::new(),
                http: Some(http_endpoint(url, server.headers)?),
            })
        }
    }
}

/// A server agentd starts: `command`, its program taken from `base` when relative with a `/`,
/// and its own variables `env`. The error is where in the file and why.
fn command_server(
    name: String,
    command: Spanned<Vec<String>>,
    env: BTreeMap<Spanned<String>, String>,
    base: &Path,
) -> Result<McpServerConfig, (usize, String)> {
    let command_at = command.span().start;
    let mut command = command.into_inner();
    let Some(program) = command.first_mut() else {
        return Err((
            command_at,
            "command = [] is empty; give the server's program and its arguments, such as \
             [\"npx\", \"-y\", \"some-mcp-server\"]"
                .to_owned(),
        ));
    };
    if program.contains('/') && !Path::new(program.as_str()).is_absolute() {
        *program = base.join(program.as_str()).display().to_string();
    }
    let mut vars = Vec::new();
    for (var, value) in env {
        if !is_variable_name(var.get_ref()) {
            return Err((
                var.span().start,
                format!(
                    "env lists {:?}, which is not a variable name (letters, digits and `_`, \
                     not starting with a digit)",
                    var.get_ref()
                ),
            ));
        }
        vars.push((var.into_inner(), value));
    }
    Ok(McpServerConfig {
        name,
        command,
        env: vars,
        http: None,
    })
}

/// The endpoint of `url` with `headers`; the error is where in the file and why.
fn http_endpoint(
    url: Spanned<String>,
    headers: BTreeMap<Spanned<String>, String>,
) -> Result<Endpoint, (usize, String)> {
    let url_at = url.span().start;
    let spans: Vec<(String, usize)> = headers
        .keys()
        .map(|name| (name.get_ref().clone(), name.span().start))
        .collect();
    let headers: Vec<(String, String)> = headers
        .into_iter()
        .map(|(name, value)| (name.into_inner(), value))
        .collect();
    Endpoint::new(url.get_ref(), &headers).map_err(|e| {
        let at = match &e {
            EndpointError::HeaderName(name)
            | EndpointError::HeaderValue(name)
            | EndpointError::Reserved(name) => spans
                .iter()
                .find(|(header, _)| header == name)
                .map_or(url_at, |(_, at)| *at),
            EndpointError::Credentials(_) | EndpointError::NotHttp(_) => url_at,
        };
        (at, format!("url = {:?}: {e}", url.get_ref()))
    })
}

/// The lines `agentd config show` prints for the servers: their names with where they came
/// from, then each one's command and the names of its variables (never a value: one may be a
/// credential).
pub(super) fn show(servers: &[McpServerConfig], source: &Source) -> Vec<String> {
    let names: Vec<String> = servers.iter().map(|s| format!("{:?}", s.name)).collect();
    let mut lines = vec![format!("mcp.servers = [{}]  ({source})", names.join(", "))];
    lines.extend(servers.iter().map(|server| {
        if let Some(http) = &server.http {
            let headers: Vec<String> = http
                .header_names()
                .iter()
                .map(|n| format!("{n:?}"))
                .collect();
            return format!(
                "  {}: url = {:?}, headers = [{}]",
                server.name,
                http.url(),
                headers.join(", ")
            );
        }
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
                    http: None,
                },
                McpServerConfig {
                    name: "git".into(),
                    command: vec!["/c/./bin/git-mcp".into(), "--x".into()],
                    env: vec![],
                    http: None,
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
    fn a_server_at_a_url_is_read_with_its_headers_and_shown_without_their_values() {
        let servers = parse(
            "[[mcp.servers]]\nname = \"tracker\"\nurl = \"https://mcp.example.com/mcp\"\n\
             headers = { Authorization = \"Bearer s3cret\", X-Team = \"a\" }\n",
        )
        .expect("parses");
        let expected = Endpoint::new(
            "https://mcp.example.com/mcp",
            &[
                ("Authorization".into(), "Bearer s3cret".into()),
                ("X-Team".into(), "a".into()),
            ],
        )
        .expect("an endpoint");
        assert_eq!(
            servers,
            [McpServerConfig {
                name: "tracker".into(),
                command: vec![],
                env: vec![],
                http: Some(expected),
            }]
        );
        let shown = show(&servers, &Source::File("/c/agentd.toml".into()));
        assert_eq!(
            shown[1],
            "  tracker: url = \"https://mcp.example.com/mcp\", headers = [\"authorization\", \
             \"x-team\"]"
        );
        assert!(!format!("{shown:?}{servers:?}").contains("s3cret"));
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
            (
                "[[mcp.servers]]\nname = \"a\"\n",
                "line 2: [[mcp.servers]] name = \"a\" has neither a command nor a url",
            ),
            (
                "[[mcp.servers]]\nname = \"a\"\ncommand = [\"x\"]\nurl = \"http://h/mcp\"\n",
                "line 4: [[mcp.servers]] has both a command and a url",
            ),
            (
                "[[mcp.servers]]\nname = \"a\"\nurl = \"ftp://h/mcp\"\n",
                "line 3: [[mcp.servers]] url = \"ftp://h/mcp\": the URL \"ftp://h/mcp\" is not an \
                 http:// or https:// URL with a host",
            ),
            (
                "[[mcp.servers]]\nname = \"a\"\nurl = \"https://me:pw@h/mcp\"\n",
                "contains a user name or password; put a credential in a header instead",
            ),
            (
                "[[mcp.servers]]\nname = \"a\"\nurl = \"http://h/mcp\"\n\
                 headers = { Accept = \"*/*\" }\n",
                "line 4: [[mcp.servers]] url = \"http://h/mcp\": the header Accept is set by \
                 agentd itself; leave it out",
            ),
            (
                "[[mcp.servers]]\nname = \"a\"\nurl = \"http://h/mcp\"\nenv = { A = \"1\" }\n",
                "line 4: [[mcp.servers]] env is set for a server agentd starts; one at a url gets \
                 headers",
            ),
            (
                "[[mcp.servers]]\nname = \"a\"\ncommand = [\"x\"]\nheaders = { A = \"1\" }\n",
                "line 4: [[mcp.servers]] headers are sent to a server at a url",
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
