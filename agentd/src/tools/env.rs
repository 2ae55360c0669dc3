//! What every tool call of one session shares ([`ToolEnv`]): the helper, the workspace, the
//! sandbox profile and the policy every command and file operation is sent with, the commands'
//! environment and the shell they run under, the editor's file access, the background tasks,
//! the session's MCP servers, the tools the session has (its registry) and how they are offered.

use std::ffi::{OsStr, OsString};
use std::future::Future;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use confine_protocol::environment::DEFAULT_PATH;
use confine_protocol::{BackendChoice, Mode, Network, Policy};

use super::registry::{RegistryError, ToolRegistry};
use super::spec::SpecOptions;
use super::tasks::BackgroundTasks;
use crate::composition::Composition;
use crate::denial::Scope;
use crate::deny_read::ExpandError;
use crate::helper_client::HelperClient;
use crate::mcp::McpServers;
use crate::profile::SandboxProfile;
use crate::session_temp::SessionTemp;

/// What a [`ClientFs`] method returns: a boxed future of the result or why not.
pub type FsFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, ClientFsError>> + Send + 'a>>;

/// Why the editor's file access failed: the path, and the editor's own error.
#[derive(Debug, thiserror::Error)]
pub enum ClientFsError {
    #[error("the editor could not read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// The editor's own file reads, which see its unsaved buffers: the ACP layer implements it with
/// `fs/read_text_file` when the client offers that. The editor reads as the editor, wherever a
/// path points when it gets there, which no check made earlier can pin (and
/// `/proc/self/environ` would be the editor's): `read_file` uses it only where no denied read
/// could apply (see `files.rs`). Nothing is ever written through the editor. Paths are
/// absolute.
pub trait ClientFs: Send + Sync {
    fn read_text<'a>(&'a self, path: &'a Path) -> FsFuture<'a, String>;
}

/// What every tool call of one session shares.
pub struct ToolEnv {
    helper: HelperClient,
    workspace: PathBuf,
    env: Vec<(OsString, OsString)>,
    network: Network,
    backend: BackendChoice,
    client_fs: Option<Arc<dyn ClientFs>>,
    shell: &'static str,
    background: BackgroundTasks,
    options: SpecOptions,
    composition: Composition,
    /// Grows once, when the session's MCP servers have started ([`ToolEnv::register`]).
    registry: Mutex<ToolRegistry>,
    mcp: Arc<McpServers>,
    /// The configuration's sandbox profile.
    profile: SandboxProfile,
    /// The protected paths the project file adds, as last read (each prompt reads it again).
    project: Mutex<Vec<PathBuf>>,
    /// The session's temp directory, every command's `/tmp`; removed when the session ends
    /// ([`ToolEnv::end_session_temp`]) or this is dropped.
    temp: Mutex<Option<SessionTemp>>,
}

impl std::fmt::Debug for ToolEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolEnv")
            .field("helper", &self.helper)
            .field("workspace", &self.workspace)
            .field("env", &self.env)
            .field("network", &self.network)
            .field("backend", &self.backend)
            .field("client_fs", &self.client_fs.is_some())
            .field("shell", &self.shell)
            .field("background", &self.background)
            .field("registry", &self.registry())
            .field("mcp", &self.mcp)
            .field("profile", &self.profile())
            .finish()
    }
}

impl ToolEnv {
    /// The tools' setting for one session.
    ///
    /// - `workspace`: the session's directory; commands run in it and relative paths start from
    ///   it. Canonicalized here if it can be.
    /// - `env`: the commands' whole environment (see [`crate::environment`]). Its `PATH`
    ///   decides, once, whether commands run under `bash` or, without one, `sh`.
    /// - `network`, `backend`: what every command is confined with.
    /// - `client_fs`: the editor's file access, if it offers one.
    pub fn new(
        helper: HelperClient,
        workspace: PathBuf,
        env: Vec<(OsString, OsString)>,
        network: Network,
        backend: BackendChoice,
        client_fs: Option<Arc<dyn ClientFs>>,
    ) -> ToolEnv {
        let workspace = workspace.canonicalize().unwrap_or(workspace);
        let shell = shell_for(&env);
        ToolEnv {
            helper,
            workspace,
            env,
            network,
            backend,
            client_fs,
            shell,
            background: BackgroundTasks::new(),
            // Escalation is offered once the caller gates it (`with_spec_options`).
            options: SpecOptions::default(),
            // Trims nothing; the caller that learned the helper's grant sets it.
            composition: Composition::everything(),
            // The built-in tools; a session that has more registers them (`with_registry`).
            registry: Mutex::new(ToolRegistry::builtin()),
            // No MCP server; a session that has some sets them (`with_mcp`).
            mcp: Arc::new(McpServers::default()),
            // Nothing besides the workspace; a configured session sets it (`with_profile`).
            profile: SandboxProfile::default(),
            project: Mutex::new(Vec::new()),
            // A fresh /tmp per command; a session sets its own (`with_session_temp`).
            temp: Mutex::new(None),
        }
    }

    /// Gives every command of the session `temp` as its `/tmp`.
    pub fn with_session_temp(self, temp: SessionTemp) -> ToolEnv {
        *self.temp.lock().unwrap_or_else(PoisonError::into_inner) = Some(temp);
        self
    }

    /// Removes the session's temp directory with everything in it: the session has ended, and
    /// no command of it runs any more.
    pub fn end_session_temp(&self) {
        let temp = self
            .temp
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        drop(temp);
    }

    /// Gives every command of the session `profile`'s writable roots and protected paths.
    pub fn with_profile(mut self, profile: SandboxProfile) -> ToolEnv {
        self.profile = profile;
        self
    }

    /// The protected paths the project file now adds, replacing those it added before.
    pub fn set_project_protected(&self, protected: Vec<PathBuf>) {
        *self.project.lock().unwrap_or_else(PoisonError::into_inner) = protected;
    }

    /// The sandbox profile commands start with now: the configuration's, with the project
    /// file's protected paths added.
    pub fn profile(&self) -> SandboxProfile {
        let mut profile = self.profile.clone();
        let project = self
            .project
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        profile.protect(project);
        profile
    }

    /// The policy of a command or file operation of this session under `mode`: the only place
    /// one is built ([`SandboxProfile::policy`]).
    pub fn policy(&self, mode: Mode) -> Result<Policy, ExpandError> {
        let mut policy = self.profile().policy(mode, &self.workspace, self.network)?;
        policy.session_temp = self
            .temp
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|t| t.path().as_os_str().as_bytes().to_vec());
        Ok(policy)
    }

    /// The allow-list proxy a command of this session under `mode` goes through, if any.
    pub fn proxy(&self, mode: Mode) -> Option<Arc<crate::proxy::Policy>> {
        self.profile.proxy(mode, self.network)
    }

    /// What decides where a write of this session may land under `mode`: its policy without
    /// the denied reads ([`SandboxProfile::writes`]).
    pub fn writes(&self, mode: Mode) -> Policy {
        self.profile().writes(mode, &self.workspace, self.network)
    }

    /// What a command started in `cwd` under `policy` is judged on ([`SandboxProfile::scope`]).
    pub fn scope(&self, cwd: &Path, policy: &Policy) -> Scope {
        self.profile.scope(cwd, policy)
    }

    /// The tools this session has now.
    pub fn registry(&self) -> ToolRegistry {
        self.registry
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Gives the session the tools of `registry` (the built-in ones and those registered on top).
    pub fn with_registry(self, registry: ToolRegistry) -> ToolEnv {
        *self.registry.lock().unwrap_or_else(PoisonError::into_inner) = registry;
        self
    }

    /// Adds a tool to the session's registry (an MCP server's, once the server started).
    pub fn register(&self, name: &str) -> Result<(), RegistryError> {
        self.registry
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .register(name)
    }

    /// Gives the session the MCP servers of `servers` (started with
    /// [`start_mcp`](super::start_mcp)).
    pub fn with_mcp(mut self, servers: McpServers) -> ToolEnv {
        self.mcp = Arc::new(servers);
        self
    }

    /// The session's MCP servers.
    pub fn mcp(&self) -> &McpServers {
        &self.mcp
    }

    /// The tools as this session offers them at most, whatever its mode.
    pub fn spec_options(&self) -> &SpecOptions {
        &self.options
    }

    /// The tools as offered to a call whose session runs under `effective`: escalation only to
    /// the modes the helper would grant above it.
    pub fn options_for(&self, effective: Mode) -> SpecOptions {
        self.options
            .granting(&self.composition.escalations(effective))
    }

    /// Offers the tools as `options` say (e.g. without escalation).
    pub fn with_spec_options(mut self, options: SpecOptions) -> ToolEnv {
        self.options = options;
        self
    }

    /// What the helper grants: the offered escalations follow it.
    pub fn with_composition(mut self, composition: Composition) -> ToolEnv {
        self.composition = composition;
        self
    }

    pub fn composition(&self) -> &Composition {
        &self.composition
    }

    pub fn helper(&self) -> &HelperClient {
        &self.helper
    }

    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    pub fn env(&self) -> &[(OsString, OsString)] {
        &self.env
    }

    pub fn network(&self) -> Network {
        self.network
    }

    pub fn backend(&self) -> BackendChoice {
        self.backend
    }

    pub fn client_fs(&self) -> Option<&dyn ClientFs> {
        self.client_fs.as_deref()
    }

    /// `bash` or `sh`: what commands run under.
    pub fn shell(&self) -> &'static str {
        self.shell
    }

    /// The session's background tasks; [`BackgroundTasks::kill_all`] at close.
    pub fn background(&self) -> &BackgroundTasks {
        &self.background
    }
}

/// The shell commands run with: `bash` if the commands' `PATH` has it, else `sh`.
pub(crate) fn shell_for(env: &[(OsString, OsString)]) -> &'static str {
    let path = env
        .iter()
        .rev()
        .find(|(name, _)| name == "PATH")
        .map_or(OsStr::new(DEFAULT_PATH), |(_, value)| value.as_os_str());
    let has_bash = std::env::split_paths(path)
        .filter(|dir| dir.is_absolute())
        .any(|dir| is_executable(&dir.join("bash")));
    if has_bash { "bash" } else { "sh" }
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::Scratch;

    #[test]
    fn the_shell_is_bash_when_the_path_has_it_else_sh() {
        let scratch = Scratch::new("tools-shell");
        let with_bash = scratch.0.join("with");
        let without = scratch.0.join("without");
        std::fs::create_dir_all(&with_bash).expect("mkdir");
        std::fs::create_dir_all(&without).expect("mkdir");
        let bash = with_bash.join("bash");
        std::fs::write(&bash, "#!/bin/sh\n").expect("write");
        std::fs::set_permissions(&bash, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        // Not executable: does not count.
        std::fs::write(without.join("bash"), "").expect("write");
        let path = |dirs: &[&Path]| {
            vec![(
                OsString::from("PATH"),
                std::env::join_paths(dirs).expect("join"),
            )]
        };
        assert_eq!(shell_for(&path(&[&without, &with_bash])), "bash");
        assert_eq!(shell_for(&path(&[&without])), "sh");
        assert_eq!(shell_for(&path(&[Path::new("relative")])), "sh");
    }
}
