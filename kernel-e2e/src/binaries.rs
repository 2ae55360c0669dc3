//! The binaries under test: `agentd` and, next to it, `confine-helper`, from cargo's target dir.

use crate::error::E2eError;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The command that builds what the suite runs.
pub const BUILD_COMMAND: &str = "cargo build -p agentd -p confine-helper";

/// Where, under the run's root, the binaries are copied for the unprivileged user: outside
/// every home and every workspace, root-owned in a root-owned directory, so no confined command
/// can replace the helper; removed with the run's root when the suite ends.
pub const SHARED_BIN_DIR: &str = "bin";

/// `agentd` and the `confine-helper` it starts from its own directory.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub agentd: PathBuf,
    pub helper: PathBuf,
}

impl Binaries {
    /// Finds both binaries in the target directory this test binary was built into
    /// (`target/<profile>/deps/kernel_e2e-…` → `target/<profile>/`).
    pub fn locate() -> Result<Binaries, E2eError> {
        let exe = std::env::current_exe()
            .map_err(|e| trouble!("cannot find the running test binary: {e}"))?;
        let profile_dir = exe
            .parent()
            .filter(|deps| deps.file_name().is_some_and(|n| n == "deps"))
            .and_then(Path::parent)
            .ok_or_else(|| {
                trouble!(
                    "{} is not in a cargo target directory (…/deps/); run the suite with \
                     `cargo test -p kernel-e2e`",
                    exe.display()
                )
            })?;
        let binaries = Binaries {
            agentd: profile_dir.join("agentd"),
            helper: profile_dir.join("confine-helper"),
        };
        for path in [&binaries.agentd, &binaries.helper] {
            if !path.is_file() {
                return Err(trouble!(
                    "{} does not exist: build the binaries under test first with `{BUILD_COMMAND}` \
                     (add --release when testing a release build)",
                    path.display()
                ));
            }
        }
        Ok(binaries)
    }

    /// Copies both binaries into [`SHARED_BIN_DIR`] under `run_root` (0755), so a user who
    /// cannot reach the target directory can still run them. agentd finds the helper next to
    /// itself there.
    pub fn share(&self, run_root: &Path) -> Result<Binaries, E2eError> {
        let dir = &run_root.join(SHARED_BIN_DIR);
        let fail = |what: &str, path: &Path, e: std::io::Error| {
            trouble!("cannot {what} {}: {e}", path.display())
        };
        fs::create_dir_all(dir).map_err(|e| fail("create", dir, e))?;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o755))
            .map_err(|e| fail("chmod", dir, e))?;
        let copy = |from: &Path| -> Result<PathBuf, E2eError> {
            let name = from.file_name().unwrap_or_default();
            let to = dir.join(name);
            // Copy beside and rename over, so a binary being executed is never half-written.
            let partial = dir.join(format!(".{}.partial", name.to_string_lossy()));
            fs::copy(from, &partial).map_err(|e| fail("copy into", &partial, e))?;
            fs::set_permissions(&partial, fs::Permissions::from_mode(0o755))
                .map_err(|e| fail("chmod", &partial, e))?;
            fs::rename(&partial, &to).map_err(|e| fail("rename to", &to, e))?;
            Ok(to)
        };
        Ok(Binaries {
            agentd: copy(&self.agentd)?,
            helper: copy(&self.helper)?,
        })
    }
}
