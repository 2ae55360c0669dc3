//! The scope of an "always" approval answer, as an `approval/rule` record keeps it (see
//! [`crate::approval::rules`] for how rules decide).

use std::path::{Path, PathBuf};

use confine_protocol::Mode;
use serde::{Deserialize, Serialize};

/// What an "always" answer covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scope {
    pub tool: String,
    /// The exact command, for `bash`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The one file, for a file tool's write: the real path its writer writes (every link
    /// followed, no `..`), so no other spelling of a path, and no link, reaches another file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// The mode an escalation asks for; `None` for a call under the session's mode.
    #[serde(
        default,
        with = "crate::words::optional_mode_word",
        skip_serializing_if = "Option::is_none"
    )]
    pub mode: Option<Mode>,
}

/// The longest command a scope's name quotes, in characters.
const NAME_CHARS: usize = 60;

impl Scope {
    /// The scope of every call of `tool` (a tool other than `bash`).
    pub fn tool(tool: &str) -> Scope {
        Scope {
            tool: tool.to_owned(),
            command: None,
            path: None,
            mode: None,
        }
    }

    /// The scope of the writes of the file tool `tool` to the one file `path` (a real path),
    /// under `mode` when it is an escalation.
    pub fn file(tool: &str, path: &Path, mode: Option<Mode>) -> Scope {
        Scope {
            tool: tool.to_owned(),
            command: None,
            path: Some(path.to_owned()),
            mode,
        }
    }

    /// The scope of one exact `bash` command, under `mode` when it is an escalation.
    pub fn command(tool: &str, command: &str, mode: Option<Mode>) -> Scope {
        Scope {
            tool: tool.to_owned(),
            command: Some(command.to_owned()),
            path: None,
            mode,
        }
    }

    /// The scope in words for a person: `` `npm install` with workspace-write ``,
    /// `` `make` ``, `edit_file on /srv/ws/notes.txt` (the whole path: a shortened one could
    /// name another file), `write_file`; what a terminal would obey shown as escapes.
    pub fn name(&self) -> String {
        let what = match (&self.command, &self.path) {
            (Some(command), _) => {
                format!("`{}`", crate::terminal::one_line(command, Some(NAME_CHARS)))
            }
            (None, Some(path)) => format!(
                "{} on {}",
                self.tool,
                crate::terminal::visible(&path.to_string_lossy())
            ),
            (None, None) => self.tool.clone(),
        };
        match self.mode {
            Some(mode) => format!("{what} with {}", mode.as_str()),
            None => what,
        }
    }
}
