//! A project's own file, `.agentd/config.toml` in the workspace: it may only narrow what the
//! session's commands may do, so this round it may say one thing, more protected paths:
//!
//! ```toml
//! [sandbox]
//! protected = ["secrets", "deploy/keys"]   # read-only inside every writable root
//! ```
//!
//! Any other key is an error that names the file and says that only `protected` is read from a
//! project file. The file is the workspace's, which a command may have written, so it is read
//! as `read_file` reads under read-only mode — confined by confine-helper, never by agentd
//! directly (a link planted there reads no more than a command could) — and `.agentd` is
//! protected whenever it exists ([`crate::profile`]), so no confined command can rewrite it to
//! widen a later turn or session. It is read at every prompt of a session, and by `agentd run`.

use std::io;
use std::path::{Path, PathBuf};

use confine_protocol::Mode;
use serde::Deserialize;
use toml::Spanned;

use super::ConfigError;
use super::checks::line_at;
use super::sandbox::{FileKind, Lined, RawList, subpaths};
use crate::profile::{PROJECT_DIR, PROJECT_FILE};
use crate::tools::{self, ToolEnv};

/// The largest project file read.
const PROJECT_FILE_CAP: usize = 64 * 1024;

/// The project file of `workspace`.
pub fn project_file(workspace: &Path) -> PathBuf {
    workspace.join(PROJECT_DIR).join(PROJECT_FILE)
}

/// Adds the protected paths of the project file of `env`'s workspace ([`read_project`]) to
/// `policy`, each once: what `agentd run` and `agentd sessions undo` send.
pub async fn protect_project(
    env: &ToolEnv,
    policy: &mut confine_protocol::Policy,
) -> Result<(), ConfigError> {
    for path in read_project(env).await? {
        let path = std::os::unix::ffi::OsStringExt::into_vec(path.into_os_string());
        if !policy.protected.contains(&path) {
            policy.protected.push(path);
        }
    }
    Ok(())
}

/// The protected paths the project file of `env`'s workspace adds; none when it has none. The
/// file is read confined under read-only mode ([`tools::read_context`]); one that cannot be
/// read, or says anything but `[sandbox] protected`, is the error.
pub async fn read_project(env: &ToolEnv) -> Result<Vec<PathBuf>, ConfigError> {
    let path = project_file(env.workspace());
    // Only whether there is something by that name is asked of the host: what it says is read
    // through the sandbox.
    match path.symlink_metadata() {
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(Vec::new());
        }
        _ => {}
    }
    let text = tools::read_context(env, &path, Mode::ReadOnly, PROJECT_FILE_CAP)
        .await
        .map_err(|why| ConfigError::ProjectUnread {
            path: path.clone(),
            why: why.to_string(),
        })?;
    parse_project(&path, &text)
}

/// The keys of a project file, each with where it starts.
type Keys = std::collections::BTreeMap<Spanned<String>, Spanned<toml::Value>>;

#[derive(Debug, Deserialize)]
struct RawProject {
    sandbox: Option<RawProjectSandbox>,
}

#[derive(Debug, Deserialize)]
struct RawProjectSandbox {
    protected: RawList,
}

/// The protected paths the project file at `path`, whose text is `text`, adds.
pub fn parse_project(path: &Path, text: &str) -> Result<Vec<PathBuf>, ConfigError> {
    let malformed = |source| ConfigError::ProjectParse {
        path: path.to_owned(),
        source,
    };
    let top: Keys = toml::from_str(text).map_err(malformed)?;
    for (key, value) in &top {
        let at = |key: String, offset: usize| ConfigError::ProjectKey {
            path: path.to_owned(),
            line: line_at(text, offset),
            key,
        };
        if key.get_ref() != "sandbox" {
            return Err(at(key.get_ref().clone(), key.span().start));
        }
        let Some(table) = value.get_ref().as_table() else {
            return Err(at("sandbox".to_owned(), key.span().start));
        };
        // The table's own keys carry no position; they are found by the text of the line.
        if let Some(other) = table.keys().find(|k| *k != "protected") {
            let offset = key_offset(text, other).unwrap_or(key.span().start);
            return Err(at(format!("sandbox.{other}"), offset));
        }
    }
    let raw: RawProject = toml::from_str(text).map_err(malformed)?;
    let Some(list) = raw.sandbox.and_then(|s| s.protected) else {
        return Ok(Vec::new());
    };
    let entries = list
        .into_inner()
        .into_iter()
        .map(|entry| Lined {
            line: line_at(text, entry.span().start),
            value: entry.into_inner(),
        })
        .collect();
    subpaths(entries, path, FileKind::Project)
}

/// Where a line of `text` sets `key` (`key =` at its start, spaces aside).
fn key_offset(text: &str, key: &str) -> Option<usize> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix(key)
            && rest.trim_start().starts_with('=')
        {
            return Some(offset + line.len() - trimmed.len());
        }
        offset += line.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "/w/.agentd/config.toml";

    fn parse(text: &str) -> Result<Vec<PathBuf>, ConfigError> {
        parse_project(Path::new(FILE), text)
    }

    #[test]
    fn a_project_file_adds_protected_paths() {
        assert_eq!(
            parse("[sandbox]\nprotected = [\"secrets\", \"deploy/keys/\", \"secrets\"]\n")
                .expect("parses"),
            [PathBuf::from("secrets"), PathBuf::from("deploy/keys")]
        );
        assert_eq!(parse("").expect("empty"), Vec::<PathBuf>::new());
        assert_eq!(
            parse("[sandbox]\n").expect("no list"),
            Vec::<PathBuf>::new()
        );
    }

    #[test]
    fn any_other_key_is_an_error_naming_the_file_and_the_only_key_read() {
        let error = parse("[sandbox]\nprotected = []\nmode = \"danger-full-access\"\n")
            .expect_err("mode is not read");
        assert_eq!(
            error.to_string(),
            "the project file /w/.agentd/config.toml, line 3: sandbox.mode is not read from a \
             project file; only [sandbox] protected is (a project file may only add protected \
             paths): remove it, or set it in agentd.toml"
        );
        let error = parse("\n[model]\nmodel = \"x\"\n").expect_err("model is not read");
        assert!(
            error
                .to_string()
                .starts_with("the project file /w/.agentd/config.toml, line 2: model is not read"),
            "{error}"
        );
        let error = parse("sandbox = 1\n").expect_err("not a table");
        assert!(
            error.to_string().contains("line 1: sandbox is not read"),
            "{error}"
        );
        let error = parse("[sandbox]\nwritable_roots = [\"/\"]\n").expect_err("roots");
        assert!(
            error
                .to_string()
                .contains("line 2: sandbox.writable_roots is not read"),
            "{error}"
        );
    }

    #[test]
    fn a_project_file_cannot_name_unix_sockets_since_it_may_only_narrow() {
        let error = parse("[sandbox]\nprotected = []\nunix_sockets = [\"/var/run/docker.sock\"]\n")
            .expect_err("unix_sockets widens");
        assert_eq!(
            error.to_string(),
            "the project file /w/.agentd/config.toml, line 3: sandbox.unix_sockets is not read \
             from a project file; only [sandbox] protected is (a project file may only add \
             protected paths): remove it, or set it in agentd.toml"
        );
    }

    #[test]
    fn a_protected_path_must_stay_inside_the_roots() {
        for bad in ["/etc", "../up", "a/../b", ".", "./a", "a/./b", ""] {
            let text = format!("[sandbox]\nprotected = [\n  {bad:?},\n]\n");
            let error = parse(&text).expect_err(bad);
            assert_eq!(
                error.to_string(),
                format!(
                    "the project file /w/.agentd/config.toml, line 3: sandbox.protected lists \
                     {bad:?}, which is not a relative path inside the writable roots; give one \
                     such as secrets or deploy/keys, without a leading /, . or .. components"
                )
            );
        }
    }

    #[test]
    fn a_malformed_project_file_is_named() {
        let error = parse("[sandbox\n").expect_err("malformed");
        assert!(
            error
                .to_string()
                .starts_with("the project file /w/.agentd/config.toml is malformed: "),
            "{error}"
        );
        let error = parse("[sandbox]\nprotected = \"secrets\"\n").expect_err("not a list");
        assert!(error.to_string().contains("is malformed"), "{error}");
    }
}
