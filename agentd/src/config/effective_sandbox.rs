//! The `[sandbox]` part of the effective configuration: the file's table, then
//! `AGENTD_SANDBOX_MODE`, each value with where it came from.

use std::path::{Path, PathBuf};

use confine_protocol::{BackendChoice, Mode, Network};

use super::allow_list::AllowList;
use super::cache::ResolvedCache;
use super::file::SandboxSection;
use super::from_env::{credentials_home, env_word};
use super::sandbox::{self, Lined};
use super::sandbox_env::EnvSection;
use super::setting::{Setting, layered};
use super::{ConfigError, DEFAULT_SANDBOX_MODE, Env, Source};
use crate::credentials::{self, Credential};
use crate::deny_read::DenyRead;

/// The effective `[sandbox]` settings, as [`super::Effective`] holds them.
pub(super) struct SandboxSettings {
    pub mode: Setting<Mode>,
    pub network: Setting<Network>,
    pub backend: Setting<BackendChoice>,
    pub writable_roots: Setting<Vec<PathBuf>>,
    pub cache: Setting<Vec<ResolvedCache>>,
    pub protected: Setting<Vec<PathBuf>>,
    pub local_binding: Setting<bool>,
    pub allow_list: Setting<Option<AllowList>>,
    pub deny_read: Setting<Vec<DenyRead>>,
    pub deny_read_lines: Vec<usize>,
    pub lift_deny_read: Setting<Vec<Lined<String>>>,
    pub credentials: Option<Vec<Credential>>,
    pub unix_sockets: Setting<Vec<PathBuf>>,
    pub env: Setting<EnvSection>,
}

impl SandboxSettings {
    /// The file's `[sandbox]` table `section` (from `file`), its paths resolved from the
    /// environment `env`, with `AGENTD_SANDBOX_MODE` over its mode.
    pub(super) fn merge(
        section: &SandboxSection,
        file: &Option<PathBuf>,
        env: Env<'_>,
    ) -> Result<SandboxSettings, ConfigError> {
        let mut mode = layered(section.mode, DEFAULT_SANDBOX_MODE, file);
        if let Some(word) = env_word(env, "AGENTD_SANDBOX_MODE")? {
            mode = Setting::new(word, Source::Env("AGENTD_SANDBOX_MODE"));
        }
        let network = layered(section.network, Network::Deny, file);
        let backend = layered(section.backend, BackendChoice::Auto, file);
        let lists = &section.profile;
        let resolved = sandbox::resolve(lists, file.as_deref().unwrap_or(Path::new("")), env)?;
        let writable_roots = layered(
            lists
                .writable_roots
                .is_some()
                .then_some(resolved.writable_roots),
            Vec::new(),
            file,
        );
        let cache = layered(
            lists.cache.is_some().then_some(resolved.cache),
            Vec::new(),
            file,
        );
        let protected = layered(
            lists.protected.is_some().then_some(resolved.protected),
            Vec::new(),
            file,
        );
        let local_binding = layered(lists.local_binding, false, file);
        let allow_list = layered(section.allow_list.clone().map(Some), None, file);
        let deny_read = layered(
            lists.deny_read.is_some().then_some(resolved.deny_read),
            Vec::new(),
            file,
        );
        let deny_read_lines = resolved.deny_read_lines;
        let lift_deny_read = layered(lists.lift_deny_read.clone(), Vec::new(), file);
        let credentials = credentials_home(env).map(|home| credentials::resolve(&home, &[]));
        let unix_sockets = layered(
            lists
                .unix_sockets
                .is_some()
                .then_some(resolved.unix_sockets),
            Vec::new(),
            file,
        );
        let env = layered(
            (!section.env.is_empty()).then(|| section.env.clone()),
            EnvSection::default(),
            file,
        );
        Ok(SandboxSettings {
            mode,
            network,
            backend,
            writable_roots,
            cache,
            protected,
            local_binding,
            allow_list,
            deny_read,
            deny_read_lines,
            lift_deny_read,
            credentials,
            unix_sockets,
            env,
        })
    }
}
