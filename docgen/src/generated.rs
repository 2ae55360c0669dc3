//! A generated file, the header line every one starts with, and the directories that hold
//! generated files only.

/// How to bring every generated file up to date.
pub const REGENERATE: &str = "run `cargo run -p agentd-docgen` to regenerate";

/// What the header line of every generated file says, in the file's comment syntax.
pub const NOTICE: &str =
    "Generated from the code by `cargo run -p agentd-docgen`; do not edit by hand.";

/// Directories (relative to the workspace) that hold only generated files: a file in them that
/// the code no longer generates is stale too.
pub const OWNED_DIRS: [&str; 3] = ["docs/contracts", "agentd/man", "agentd/completions"];

/// One file: its path relative to the workspace, `/`-separated, and its whole text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generated {
    pub path: String,
    pub text: String,
}

impl Generated {
    /// A Markdown file: the notice as an HTML comment, then `body`.
    pub fn markdown(path: &str, body: &str) -> Generated {
        Generated {
            path: path.to_owned(),
            text: format!("<!-- {NOTICE} -->\n\n{}\n", body.trim_end()),
        }
    }

    /// A file whose comments start with `marker` (`#`, `.\"`): the notice first, then `body`.
    pub fn commented(path: &str, marker: &str, body: &str) -> Generated {
        Generated {
            path: path.to_owned(),
            text: format!("{marker} {NOTICE}\n{body}"),
        }
    }
}
