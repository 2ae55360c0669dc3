//! How the effective configuration reaches confine-helper: the endpoint, the client, and
//! agentd's own files, which no command may write.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::effective::{Effective, HelperChoice, default_state_dir};
use super::file::config_path;
use super::{Env, Source, process_env};
use crate::helper_client::{
    ClientError, GivenFileIo, HelperClient, HelperEndpoint, LocateError, LocateInputs,
    VerdictCache, locate_helper, verdict_cache,
};

/// confine-helper cannot be set up as configured.
#[derive(Debug, thiserror::Error)]
pub enum HelperSetupError {
    #[error(transparent)]
    Locate(#[from] LocateError),
    #[error(transparent)]
    Client(#[from] ClientError),
}

impl Effective {
    /// What the helper search may consult, with this process's executable directory and `PATH`.
    pub(super) fn locate_inputs(
        &self,
        exe_dir: Option<PathBuf>,
        path_var: Option<OsString>,
    ) -> LocateInputs {
        let mut inputs = LocateInputs {
            config_file: self.file.clone(),
            exe_dir,
            path_var,
            ..LocateInputs::default()
        };
        if let HelperChoice::Binary(path) = &self.helper.value {
            match self.helper.source {
                Source::Flag(_) => inputs.flag = Some(path.clone()),
                Source::Env(_) => inputs.env_value = Some(path.clone()),
                Source::File(_) | Source::Default => inputs.config_value = Some(path.clone()),
            }
        }
        inputs
    }

    /// How to reach confine-helper: the socket, or the binary (found as
    /// [`locate_helper`] describes).
    pub fn helper_endpoint(&self) -> Result<HelperEndpoint, LocateError> {
        if let HelperChoice::Socket(socket) = &self.helper.value {
            return Ok(HelperEndpoint::Service(socket.clone()));
        }
        let inputs = self.locate_inputs(exe_dir(), std::env::var_os("PATH"));
        locate_helper(&inputs).map(HelperEndpoint::Embedded)
    }

    /// A client of the configured confine-helper, started with the configured ceiling and
    /// keeping the helper's usable verdicts in this user's cache (sent back as hints). Nothing
    /// is started until its first request.
    pub fn helper_client(&self) -> Result<HelperClient, HelperSetupError> {
        self.client(true)
    }

    /// A client of the configured confine-helper for `agentd probe`: it sends no kept verdict
    /// as a hint, so the helper probes every backend afresh, and its report replaces them.
    pub fn probe_client(&self) -> Result<HelperClient, HelperSetupError> {
        self.client(false)
    }

    fn client(&self, sends_hints: bool) -> Result<HelperClient, HelperSetupError> {
        let endpoint = self.helper_endpoint()?;
        let ceiling = self.helper_ceiling.value.clone();
        let client = HelperClient::configured(
            endpoint,
            ceiling,
            self.own_paths(&process_env),
            self.given_file_io(),
        )?;
        if let Some(cache) =
            verdict_dir(&process_env).and_then(|dir| VerdictCache::open(&dir, sends_hints))
        {
            client.keep_verdicts(cache);
        }
        Ok(client)
    }

    /// The file reader and writer's path as configured, and by what; `None` to search.
    pub fn given_file_io(&self) -> Option<GivenFileIo> {
        let path = self.helper_file_io.value.clone()?;
        let by = match &self.helper_file_io.source {
            Source::File(file) => format!("helper.file_io in {}", file.display()),
            other => other.to_string(),
        };
        Some(GivenFileIo { path, by })
    }

    /// agentd's own files, which no command may ever write: a command that could would run
    /// code at agentd's next start (`helper.path`, `[model]`) or rewrite the session logs that
    /// modes and approvals are replayed from. The configuration directory (the default one too,
    /// which a later agentd without `--config` reads), the configuration file in use, the state
    /// directories (the configured one and the default), and agentd's own binary. They need not
    /// exist: a root containing where one would be is refused all the same.
    pub fn own_paths(&self, env: Env<'_>) -> Vec<PathBuf> {
        let mut own: Vec<PathBuf> = Vec::new();
        let default_file = config_path(None, env("XDG_CONFIG_HOME"), env("HOME"));
        own.extend(
            default_file
                .as_deref()
                .and_then(Path::parent)
                .map(Path::to_owned),
        );
        own.extend(self.file.clone());
        let default_state = default_state_dir(env("XDG_STATE_HOME"), env("HOME"));
        own.extend(
            default_state
                .as_deref()
                .and_then(Path::parent)
                .map(Path::to_owned),
        );
        own.extend(self.state_dir.value.clone());
        own.extend(verdict_dir(env));
        own.extend(
            std::env::current_exe()
                .ok()
                .map(|exe| exe.canonicalize().unwrap_or(exe)),
        );
        let mut unique = Vec::new();
        for path in own {
            let path = std::path::absolute(&path).unwrap_or(path);
            if !unique.contains(&path) {
                unique.push(path);
            }
        }
        unique
    }
}

/// The directory of the helper's verdicts agentd keeps (see [`VerdictCache`]).
pub fn verdict_dir(env: Env<'_>) -> Option<PathBuf> {
    let path = |name| env(name).map(PathBuf::from);
    verdict_cache::dir(path("XDG_CACHE_HOME").as_deref(), path("HOME").as_deref())
}

pub(super) fn exe_dir() -> Option<PathBuf> {
    crate::helper_client::locate::agentd_dir()
}
