//! The names MCP tools have in agentd's tool registry: `mcp__<server>__<tool>`, made of the
//! characters a tool name may have (letters, digits, `_` and `-`), and the `approval.ask_before`
//! entries that name them.
//!
//! A server's part never holds `__` (a run of characters that are not allowed, `_` included,
//! becomes one `_`), so the first `__` after the prefix always ends it and a name reads back as
//! one server and one tool. A tool's part keeps its `_` runs; other characters become `_`. Model
//! APIs take function names of at most [`MAX_NAME`] characters, so a longer one is refused
//! rather than sent to fail every request.

/// What every MCP tool's name starts with.
pub const PREFIX: &str = "mcp__";

/// Between the server's part and the tool's.
const SEPARATOR: &str = "__";

/// The longest tool name model APIs accept (OpenAI's function names: 64 characters).
pub const MAX_NAME: usize = 64;

/// The `approval.ask_before` entry ending that lists every tool of one server.
const EVERY_TOOL: &str = "*";

/// Why an MCP server or tool cannot have a name in the registry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("the MCP server name {0:?} has no letter or digit")]
    Server(String),
    #[error("the MCP tool name {0:?} has no letter or digit")]
    Tool(String),
    #[error(
        "the tool name {name} is longer than {MAX_NAME} characters, which model APIs refuse; \
         give the server a shorter name"
    )]
    TooLong { name: String },
}

/// The server's part of its tools' names: letters, digits and `-` kept, every run of other
/// characters (`_` included) one `_`, none at either end.
pub fn server_key(name: &str) -> Result<String, NameError> {
    let mut key = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || c == '-' {
            key.push(c);
        } else if !key.is_empty() && !key.ends_with('_') {
            key.push('_');
        }
    }
    let key = key.trim_end_matches('_').to_owned();
    if key.chars().any(|c| c.is_ascii_alphanumeric()) {
        Ok(key)
    } else {
        Err(NameError::Server(name.to_owned()))
    }
}

/// The registry name of tool `tool` of the server whose key is `server` ([`server_key`]).
pub fn tool_name(server: &str, tool: &str) -> Result<String, NameError> {
    let part: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if !part.chars().any(|c| c.is_ascii_alphanumeric()) {
        return Err(NameError::Tool(tool.to_owned()));
    }
    let name = format!("{PREFIX}{server}{SEPARATOR}{part}");
    if name.chars().count() > MAX_NAME {
        return Err(NameError::TooLong { name });
    }
    Ok(name)
}

/// The server's and the tool's parts of an MCP tool's name; `None` for any other name.
pub fn split(name: &str) -> Option<(&str, &str)> {
    let rest = name.strip_prefix(PREFIX)?;
    let (server, tool) = rest.split_once(SEPARATOR)?;
    (!server.is_empty() && !tool.is_empty()).then_some((server, tool))
}

/// Whether an `approval.ask_before` entry names MCP tools: `mcp__<server>__<tool>`, or
/// `mcp__<server>__*` for every tool of the server.
pub fn is_ask_entry(entry: &str) -> bool {
    let Some((server, tool)) = split(entry) else {
        return false;
    };
    let word = |s: &str| {
        s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    word(server) && !server.contains(SEPARATOR) && (tool == EVERY_TOOL || word(tool))
}

/// Whether `tool` is listed in `ask_before`: by its name, or, for an MCP tool, by its server's
/// `mcp__<server>__*`.
pub fn listed(ask_before: &[String], tool: &str) -> bool {
    ask_before.iter().any(|entry| {
        entry == tool
            || entry
                .strip_suffix(EVERY_TOOL)
                .filter(|_| is_ask_entry(entry))
                .is_some_and(|prefix| {
                    tool.strip_prefix(prefix)
                        .is_some_and(|rest| !rest.is_empty())
                        && split(tool).is_some()
                })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_name_keeps_letters_digits_and_dashes_and_never_holds_a_double_underscore() {
        assert_eq!(server_key("notes").as_deref(), Ok("notes"));
        assert_eq!(server_key("my server").as_deref(), Ok("my_server"));
        assert_eq!(server_key("a__b").as_deref(), Ok("a_b"));
        assert_eq!(server_key("__git.hub__").as_deref(), Ok("git_hub"));
        assert_eq!(server_key("files-2").as_deref(), Ok("files-2"));
        assert_eq!(server_key("ünï").as_deref(), Ok("n"));
        assert_eq!(
            server_key("__").unwrap_err(),
            NameError::Server("__".into())
        );
        assert!(server_key("").is_err());
    }

    #[test]
    fn a_tool_name_reads_back_as_its_server_and_tool() {
        let name = tool_name("notes", "write_note").expect("a name");
        assert_eq!(name, "mcp__notes__write_note");
        assert_eq!(split(&name), Some(("notes", "write_note")));
        let odd = tool_name("my_server", "get__thing.v2").expect("a name");
        assert_eq!(odd, "mcp__my_server__get__thing_v2");
        assert_eq!(split(&odd), Some(("my_server", "get__thing_v2")));
        assert_eq!(split("bash"), None);
        assert_eq!(split("mcp__notes"), None);
        assert_eq!(split("mcp____x"), None);
        assert_eq!(
            tool_name("s", "!!").unwrap_err(),
            NameError::Tool("!!".into())
        );
    }

    #[test]
    fn a_name_longer_than_model_apis_take_is_refused() {
        let long = "t".repeat(MAX_NAME);
        let err = tool_name("notes", &long).expect_err("too long");
        assert!(
            err.to_string().contains("longer than 64 characters"),
            "{err}"
        );
        let fits = "t".repeat(MAX_NAME - "mcp__notes__".len());
        assert!(tool_name("notes", &fits).is_ok());
    }

    #[test]
    fn ask_before_lists_a_tool_by_name_or_every_tool_of_its_server() {
        let list = vec!["write_file".to_owned(), "mcp__notes__*".to_owned()];
        assert!(listed(&list, "write_file"));
        assert!(listed(&list, "mcp__notes__write_note"));
        assert!(listed(&list, "mcp__notes__echo"));
        assert!(!listed(&list, "mcp__notesx__echo"));
        assert!(!listed(&list, "mcp__other__echo"));
        assert!(!listed(&list, "bash"));
        let one = vec!["mcp__notes__write_note".to_owned()];
        assert!(listed(&one, "mcp__notes__write_note"));
        assert!(!listed(&one, "mcp__notes__echo"));
        // A star anywhere else is no pattern.
        assert!(!listed(&["mcp__*".to_owned()], "mcp__notes__echo"));
        assert!(!listed(&["*".to_owned()], "bash"));
    }

    #[test]
    fn ask_before_entries_for_mcp_tools_are_checked_for_shape() {
        assert!(is_ask_entry("mcp__notes__write_note"));
        assert!(is_ask_entry("mcp__notes__*"));
        assert!(!is_ask_entry("mcp__notes"));
        assert!(!is_ask_entry("mcp__*"));
        assert!(!is_ask_entry("mcp__no tes__x"));
        assert!(!is_ask_entry("mcp__notes__wr*"));
        assert!(!is_ask_entry("write_file"));
    }
}
