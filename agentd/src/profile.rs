//! A sandbox profile: what the commands of a session (or of one `agentd run`) may write besides
//! the workspace, and what stays read-only inside everything they may write. The configuration
//! gives it (`[sandbox] writable_roots`, `cache`, `protected`, see [`crate::config`]), a
//! project's `.agentd/config.toml` may add protected paths to it, and every request for a
//! command or a file operation is built from it by [`SandboxProfile::policy`]: one place, so a
//! `bash` command, a background task, a child agent's call and the file tools' confined reader
//! and writer all get the same roots and the same protected paths.
//!
//! The extra roots apply in workspace-write only: read-only stays read-only, and
//! danger-full-access needs none. The protected paths are relative subpaths that confine-helper
//! keeps read-only inside every writable root (besides the repository metadata it always
//! protects); `.agentd` joins them whenever the workspace has one, so that no command can
//! rewrite the project file that a later turn or session reads.
//!
//! The named Unix sockets (`[sandbox] unix_sockets`) apply in both confined modes and are sent
//! as the user names them, unresolved: the command connects by that name, and confine-helper,
//! which connects on its behalf, resolves and checks each itself.

use std::fs::DirBuilder;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use confine_protocol::{Mode, Network, Policy};

use crate::credentials::{self, Credential};
use crate::denial::Scope;
use crate::deny_read::{self, DenyRead};
use crate::proxy;

/// The project's own directory in a workspace: read-only to commands whenever it exists.
pub const PROJECT_DIR: &str = ".agentd";

/// The project file in [`PROJECT_DIR`].
pub const PROJECT_FILE: &str = "config.toml";

/// The mode a missing cache directory is created with: the user's alone, like the caches the
/// tools make themselves.
const CACHE_DIR_MODE: u32 = 0o700;

/// A cache preset's directory: the preset's name and where it resolved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheDir {
    pub preset: &'static str,
    pub path: PathBuf,
}

/// What commands may write besides the workspace, and what stays read-only inside it all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxProfile {
    /// Directories writable besides the workspace, as configured (`sandbox.writable_roots`,
    /// `agentd run --writable-root`): absolute, used as they are.
    pub writable_roots: Vec<PathBuf>,
    /// The cache presets' directories (`sandbox.cache`), writable too; created when missing.
    pub cache_dirs: Vec<CacheDir>,
    /// Relative subpaths kept read-only inside every writable root (`sandbox.protected`, a
    /// project file's, `agentd run --protect`), besides the repository metadata.
    pub protected: Vec<PathBuf>,
    /// Loopback sockets inside the sandbox's own network namespace (`sandbox.local_binding`).
    pub local_binding: bool,
    /// What no confined command may read (`sandbox.deny_read`), expanded at each request.
    pub deny_read: Vec<DenyRead>,
    /// The built-in credential stores no confined command may read, but those the profile
    /// lifts (`sandbox.lift_deny_read`), found at each request ([`credentials::expand`]).
    pub credentials: Vec<Credential>,
    /// The named Unix sockets a confined command may connect to (`sandbox.unix_sockets`,
    /// `agentd run --unix-socket`): absolute, as configured — the helper resolves them.
    pub unix_sockets: Vec<PathBuf>,
    /// `sandbox.network = "allow-list"`: the proxy's policy, through which a confined command
    /// with the network denied reaches the hosts it allows.
    pub allow_list: Option<Arc<proxy::Policy>>,
    /// The resource limits of every command (`[limits]`); confine-helper's defaults and
    /// ceiling where unset.
    pub limits: ResourceLimits,
}

/// The resource limits a configuration sets (`limits.max_*`); each unset one is left to
/// confine-helper.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResourceLimits {
    /// The most tasks a command's tree may have at once.
    pub max_processes: Option<u64>,
    /// RLIMIT_FSIZE, in bytes.
    pub max_file_size: Option<u64>,
    /// RLIMIT_AS, in bytes.
    pub max_address_space: Option<u64>,
    /// The most memory a command's tree may use at once, in bytes.
    pub max_memory: Option<u64>,
}

impl ResourceLimits {
    /// Sets in `limits` each limit given here, leaving the others as they are.
    pub fn apply(&self, limits: &mut confine_protocol::Limits) {
        let set = |to: &mut Option<u64>, from: Option<u64>| {
            if from.is_some() {
                *to = from;
            }
        };
        set(&mut limits.max_processes, self.max_processes);
        set(&mut limits.max_file_size, self.max_file_size);
        set(&mut limits.max_address_space, self.max_address_space);
        set(&mut limits.max_memory, self.max_memory);
    }
}

/// A cache directory that does not exist could not be created.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot create the directory {} of the cache preset {preset:?} (sandbox.cache): {source}; \
     create it yourself, or drop the preset",
    path.display()
)]
pub struct CacheDirError {
    pub preset: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

impl SandboxProfile {
    /// Every directory writable besides the workspace, each once, in order: the configured
    /// roots, then the cache directories.
    pub fn roots(&self) -> Vec<PathBuf> {
        let mut roots: Vec<PathBuf> = Vec::new();
        let all = self
            .writable_roots
            .iter()
            .chain(self.cache_dirs.iter().map(|c| &c.path));
        for root in all {
            if !roots.contains(root) {
                roots.push(root.clone());
            }
        }
        roots
    }

    /// Adds `paths` to the protected ones (those already there are not repeated). A profile
    /// only ever grows its protected paths: nothing that adds to it can make more writable.
    pub fn protect(&mut self, paths: impl IntoIterator<Item = PathBuf>) {
        for path in paths {
            if !self.protected.contains(&path) {
                self.protected.push(path);
            }
        }
    }

    /// Creates the cache directories that do not exist (mode 0700, with missing parents), so
    /// that a command can use them; the first that cannot be created is the error.
    pub fn create_cache_dirs(&self) -> Result<(), CacheDirError> {
        for dir in &self.cache_dirs {
            DirBuilder::new()
                .recursive(true)
                .mode(CACHE_DIR_MODE)
                .create(&dir.path)
                .map_err(|source| CacheDirError {
                    preset: dir.preset,
                    path: dir.path.clone(),
                    source,
                })?;
        }
        Ok(())
    }

    /// The protected subpaths of a command in `workspace`: the profile's, and `.agentd` when the
    /// workspace has one (as anything, a link too: a link there fails the command closed).
    pub fn protected_in(&self, workspace: &Path) -> Vec<PathBuf> {
        let mut protected = self.protected.clone();
        let project = PathBuf::from(PROJECT_DIR);
        if !protected.contains(&project) && workspace.join(PROJECT_DIR).symlink_metadata().is_ok() {
            protected.push(project);
        }
        protected
    }

    /// The policy of one command (or file operation) in `workspace` under `mode`: the extra
    /// roots in workspace-write only, the protected paths in every mode (they also decide how a
    /// denial is judged), `local_binding`, the Unix sockets in the confined modes, and the
    /// denied reads as they are found now (in the workspace and every extra root, whatever the
    /// mode). Fails only when a `**/` pattern's walk is too large, so nothing runs with a match
    /// left unfound.
    pub fn policy(
        &self,
        mode: Mode,
        workspace: &Path,
        network: Network,
    ) -> Result<Policy, deny_read::ExpandError> {
        let mut policy = self.writes(mode, workspace, network);
        policy.deny_read = self.denied_reads(mode, workspace)?;
        Ok(policy)
    }

    /// [`SandboxProfile::policy`] without its denied reads: what decides where a write may land.
    pub fn writes(&self, mode: Mode, workspace: &Path, network: Network) -> Policy {
        let bytes = |path: &Path| path.as_os_str().as_bytes().to_vec();
        let writable_roots = match mode {
            Mode::WorkspaceWrite => self.roots().iter().map(|r| bytes(r)).collect(),
            Mode::ReadOnly | Mode::DangerFullAccess => Vec::new(),
        };
        // Unconfined, every socket is reachable: a list would only have the helper refuse a
        // request that confines nothing.
        let unix_sockets = match mode {
            Mode::ReadOnly | Mode::WorkspaceWrite => {
                self.unix_sockets.iter().map(|s| bytes(s)).collect()
            }
            Mode::DangerFullAccess => Vec::new(),
        };
        Policy {
            mode,
            workspace_root: Some(bytes(workspace)),
            writable_roots,
            network,
            protected: self
                .protected_in(workspace)
                .iter()
                .map(|p| bytes(p))
                .collect(),
            local_binding: self.local_binding,
            unix_sockets,
            ..Policy::read_only()
        }
    }

    /// The proxy policy of a command under `mode` with `network`: the allow-list's, when one is
    /// configured and the command is confined without the network.
    pub fn proxy(&self, mode: Mode, network: Network) -> Option<Arc<proxy::Policy>> {
        let confined = mode != Mode::DangerFullAccess && network == Network::Deny;
        self.allow_list.clone().filter(|_| confined)
    }

    /// The denied reads of a command in `workspace` as real paths (none in danger-full-access):
    /// the configured ones, then the built-in credential stores that exist now.
    fn denied_reads(
        &self,
        mode: Mode,
        workspace: &Path,
    ) -> Result<Vec<Vec<u8>>, deny_read::ExpandError> {
        if mode == Mode::DangerFullAccess {
            return Ok(Vec::new());
        }
        let mut roots = vec![workspace.to_path_buf()];
        roots.extend(self.roots());
        let mut found = if self.deny_read.is_empty() {
            Vec::new()
        } else {
            deny_read::expand(&self.deny_read, &roots)?
        };
        let real_roots: Vec<PathBuf> = roots
            .iter()
            .map(|r| r.canonicalize().unwrap_or_else(|_| r.clone()))
            .collect();
        for (path, _) in credentials::expand(&self.credentials, &real_roots) {
            if !found.contains(&path) {
                found.push(path);
            }
        }
        Ok(found
            .iter()
            .map(|p| p.as_os_str().as_bytes().to_vec())
            .collect())
    }

    /// What a command started in `cwd` under `policy` is judged on: the policy's scope, with
    /// the extra roots counted as roots in read-only mode too, where workspace-write would lift
    /// a write there (and nothing wider is needed).
    pub fn scope(&self, cwd: &Path, policy: &Policy) -> Scope {
        let mut scope = Scope::of(cwd, policy);
        if policy.mode != Mode::DangerFullAccess {
            scope.credentials = self.credentials.clone();
        }
        if policy.mode == Mode::ReadOnly {
            for root in self.roots() {
                let root = root.canonicalize().unwrap_or(root);
                if !scope.roots.contains(&root) {
                    scope.roots.push(root);
                }
            }
        }
        scope
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::test_support::Scratch;

    fn profile() -> SandboxProfile {
        SandboxProfile {
            writable_roots: vec!["/srv/scratch".into(), "/srv/shared".into()],
            cache_dirs: vec![CacheDir {
                preset: "pip",
                path: "/srv/shared".into(),
            }],
            protected: vec!["secrets".into()],
            ..SandboxProfile::default()
        }
    }

    fn paths(list: &[Vec<u8>]) -> Vec<String> {
        list.iter()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect()
    }

    #[test]
    fn the_extra_roots_apply_in_workspace_write_only() {
        let scratch = Scratch::new("profile-modes");
        let write = profile().writes(Mode::WorkspaceWrite, &scratch.0, Network::Deny);
        assert_eq!(
            paths(&write.writable_roots),
            ["/srv/scratch", "/srv/shared"]
        );
        assert_eq!(
            write.workspace_root.as_deref(),
            Some(scratch.0.as_os_str().as_bytes())
        );
        for mode in [Mode::ReadOnly, Mode::DangerFullAccess] {
            let policy = profile().writes(mode, &scratch.0, Network::Deny);
            assert_eq!(policy.writable_roots, Vec::<Vec<u8>>::new(), "{mode:?}");
            assert_eq!(paths(&policy.protected), ["secrets"], "{mode:?}");
        }
    }

    #[test]
    fn the_project_directory_is_protected_whenever_the_workspace_has_one() {
        let scratch = Scratch::new("profile-project");
        let protected = |p: &SandboxProfile| {
            paths(
                &p.writes(Mode::WorkspaceWrite, &scratch.0, Network::Deny)
                    .protected,
            )
        };
        assert_eq!(protected(&profile()), ["secrets"]);
        std::fs::create_dir(scratch.0.join(PROJECT_DIR)).expect("mkdir");
        assert_eq!(protected(&profile()), ["secrets", ".agentd"]);
        // A link counts too: the helper then refuses to run rather than leave it writable.
        std::fs::remove_dir(scratch.0.join(PROJECT_DIR)).expect("rmdir");
        std::os::unix::fs::symlink("/nowhere", scratch.0.join(PROJECT_DIR)).expect("link");
        assert_eq!(protected(&profile()), ["secrets", ".agentd"]);
    }

    #[test]
    fn protecting_adds_each_path_once() {
        let mut profile = profile();
        profile.protect(["secrets".into(), "deploy/keys".into(), "deploy/keys".into()]);
        assert_eq!(
            profile.protected,
            [PathBuf::from("secrets"), PathBuf::from("deploy/keys")]
        );
    }

    #[test]
    fn missing_cache_directories_are_created_private_with_their_parents() {
        let scratch = Scratch::new("profile-cache");
        let dir = scratch.0.join("home/.cache/pip");
        let profile = SandboxProfile {
            cache_dirs: vec![CacheDir {
                preset: "pip",
                path: dir.clone(),
            }],
            ..SandboxProfile::default()
        };
        profile.create_cache_dirs().expect("created");
        let mode = |p: &Path| std::fs::metadata(p).expect("exists").permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&scratch.0.join("home/.cache")), 0o700);
        // Existing ones are left as they are.
        profile.create_cache_dirs().expect("again");

        let blocked = SandboxProfile {
            cache_dirs: vec![CacheDir {
                preset: "npm",
                path: scratch.0.join("file/npm"),
            }],
            ..SandboxProfile::default()
        };
        std::fs::write(scratch.0.join("file"), "").expect("a file in the way");
        let error = blocked
            .create_cache_dirs()
            .expect_err("a file is in the way");
        let text = error.to_string();
        assert!(
            text.starts_with(&format!(
                "cannot create the directory {} of the cache preset \"npm\" (sandbox.cache): ",
                scratch.0.join("file/npm").display()
            )) && text.ends_with("; create it yourself, or drop the preset"),
            "{text}"
        );
    }

    #[test]
    fn in_read_only_mode_a_write_to_an_extra_root_is_judged_as_workspace_write_would_lift_it() {
        let scratch = Scratch::new("profile-scope");
        let profile = profile();
        let read_only = profile.writes(Mode::ReadOnly, &scratch.0, Network::Deny);
        let scope = profile.scope(&scratch.0, &read_only);
        assert!(scope.roots.contains(&PathBuf::from("/srv/scratch")));
        let write = profile.writes(Mode::WorkspaceWrite, &scratch.0, Network::Deny);
        let scope = profile.scope(&scratch.0, &write);
        assert_eq!(scope.roots.len(), 3, "{:?}", scope.roots);
    }

    #[test]
    fn unix_sockets_are_sent_as_named_in_the_confined_modes_only() {
        let scratch = Scratch::new("profile-sockets");
        let profile = SandboxProfile {
            unix_sockets: vec!["/var/run/docker.sock".into(), "/run/a/../b.sock".into()],
            ..SandboxProfile::default()
        };
        for mode in [Mode::ReadOnly, Mode::WorkspaceWrite] {
            for network in [Network::Deny, Network::Allow] {
                let policy = profile.policy(mode, &scratch.0, network).expect("policy");
                assert_eq!(
                    paths(&policy.unix_sockets),
                    ["/var/run/docker.sock", "/run/a/../b.sock"],
                    "{mode:?} {network:?}"
                );
                let writes = profile.writes(mode, &scratch.0, network);
                assert_eq!(writes.unix_sockets, policy.unix_sockets, "{mode:?}");
            }
        }
        // Unconfined, every socket is reachable: nothing to send.
        let full = profile
            .policy(Mode::DangerFullAccess, &scratch.0, Network::Deny)
            .expect("policy");
        assert!(full.unix_sockets.is_empty());
        // Without the setting, none in any mode.
        let plain = SandboxProfile::default();
        assert!(
            plain
                .writes(Mode::WorkspaceWrite, &scratch.0, Network::Deny)
                .unix_sockets
                .is_empty()
        );
    }

    #[test]
    fn denied_reads_are_found_per_request_in_confined_modes_and_local_binding_is_sent() {
        let scratch = Scratch::new("profile-deny");
        let ws = scratch.0.canonicalize().expect("ws");
        std::fs::write(ws.join(".env"), "A=1").expect("write");
        let profile = SandboxProfile {
            deny_read: vec![crate::deny_read::parse("**/.env", None).expect("entry")],
            local_binding: true,
            ..SandboxProfile::default()
        };
        for mode in [Mode::ReadOnly, Mode::WorkspaceWrite] {
            let policy = profile.policy(mode, &ws, Network::Deny).expect("policy");
            assert_eq!(
                paths(&policy.deny_read),
                [ws.join(".env").display().to_string()]
            );
            assert!(policy.local_binding);
        }
        // Unconfined, nothing is denied; what decides writes has no denied reads.
        let full = profile.policy(Mode::DangerFullAccess, &ws, Network::Deny);
        assert!(full.expect("policy").deny_read.is_empty());
        assert!(
            profile
                .writes(Mode::WorkspaceWrite, &ws, Network::Deny)
                .deny_read
                .is_empty()
        );
        // A file created after one request is found by the next.
        std::fs::create_dir(ws.join("sub")).expect("mkdir");
        std::fs::write(ws.join("sub/.env"), "B=2").expect("write");
        let policy = profile
            .policy(Mode::ReadOnly, &ws, Network::Deny)
            .expect("policy");
        assert_eq!(policy.deny_read.len(), 2);
    }
}
