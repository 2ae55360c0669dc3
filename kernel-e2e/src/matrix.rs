//! The axes the suite runs every case along: backend, mode, and who runs agentd.

use std::fmt;

use crate::users::Identity;

/// A confinement backend, as `agentd run --backend` names it: bwrap, Landlock and the
/// helper's own namespaces on Linux, Seatbelt on macOS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Backend {
    Bwrap,
    Landlock,
    Seatbelt,
    /// The helper's own namespaces and mounts (those bwrap's backend makes), with Landlock and
    /// the seccomp filter applied by the command itself; no bwrap program.
    Namespaces,
}

impl Backend {
    /// Every backend of this platform, in the order the report lists them.
    #[cfg(target_os = "linux")]
    pub const ALL: [Backend; 3] = [Backend::Bwrap, Backend::Landlock, Backend::Namespaces];
    /// Every backend of this platform, in the order the report lists them.
    #[cfg(target_os = "macos")]
    pub const ALL: [Backend; 1] = [Backend::Seatbelt];

    /// The name used on agentd's command line and in the facts' `backend` field.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Bwrap => "bwrap",
            Backend::Landlock => "landlock",
            Backend::Seatbelt => "seatbelt",
            Backend::Namespaces => "namespaces",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A sandbox mode, as `agentd run --mode` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mode {
    ReadOnly,
    WorkspaceWrite,
    DangerFullAccess,
}

impl Mode {
    /// The name used on agentd's command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::ReadOnly => "read-only",
            Mode::WorkspaceWrite => "workspace-write",
            Mode::DangerFullAccess => "danger-full-access",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The confined modes a case applies to.
pub const READ_ONLY: &[Mode] = &[Mode::ReadOnly];
/// The confined modes a case applies to.
pub const WORKSPACE_WRITE: &[Mode] = &[Mode::WorkspaceWrite];
/// The confined modes a case applies to.
pub const CONFINED: &[Mode] = &[Mode::ReadOnly, Mode::WorkspaceWrite];

/// One cell of the matrix: a case runs once per cell whose mode it applies to.
#[derive(Debug, Clone)]
pub struct Cell {
    pub backend: Backend,
    pub mode: Mode,
    pub user: Identity,
}

impl fmt::Display for Cell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.backend, self.mode, self.user.name)
    }
}
