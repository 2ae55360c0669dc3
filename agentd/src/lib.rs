//! agentd: a coding agent whose every command runs through confine-helper.
//!
//! agentd never forks or execs a tool command. [`helper_client`] sends each command to the
//! separate confine-helper process, which confines and runs it and reports the facts back;
//! [`config`] reads the optional configuration file.

pub mod config;
pub mod helper_client;
#[cfg(test)]
mod test_support;
