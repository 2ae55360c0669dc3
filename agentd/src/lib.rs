//! agentd: a coding agent whose every command runs through confine-helper.
//!
//! [`config`] reads the optional configuration file.

pub mod config;
