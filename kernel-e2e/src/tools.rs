//! The programs the commands find: a tool on the PATH agentd (and so every command) gets,
//! [`COMMAND_PATH`], the system's and nothing from the caller's.

use std::path::{Path, PathBuf};

use crate::available::COMMAND_PATH;

/// `tool` on the PATH the commands get, if it is there.
pub fn find_tool(tool: &str) -> Option<PathBuf> {
    COMMAND_PATH
        .split(':')
        .map(|dir| Path::new(dir).join(tool))
        .find(|p| p.is_file())
}
