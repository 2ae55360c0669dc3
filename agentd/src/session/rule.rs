//! The scope of an "always" approval answer, as an `approval/rule` record keeps it (see
//! [`crate::approval::rules`] for how rules decide).

use confine_protocol::Mode;
use serde::{Deserialize, Serialize};

/// What an "always" answer covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scope {
    pub tool: String,
    /// The exact command, for `bash`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
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
            mode: None,
        }
    }

    /// The scope of one exact `bash` command, under `mode` when it is an escalation.
    pub fn command(tool: &str, command: &str, mode: Option<Mode>) -> Scope {
        Scope {
            tool: tool.to_owned(),
            command: Some(command.to_owned()),
            mode,
        }
    }

    /// The scope in words for a person: `` `npm install` with workspace-write ``,
    /// `` `make` ``, `write_file`; what a terminal would obey shown as escapes.
    pub fn name(&self) -> String {
        let what = match &self.command {
            Some(command) => format!("`{}`", crate::terminal::one_line(command, Some(NAME_CHARS))),
            None => self.tool.clone(),
        };
        match self.mode {
            Some(mode) => format!("{what} with {}", mode.as_str()),
            None => what,
        }
    }
}
