//! Which directories may be a workspace-write workspace. In workspace-write the workspace is a
//! writable root, so everything beneath it is writable: a workspace that is `/`, that holds the
//! home directory, or that holds (or lies inside) one of agentd's own files would make writable
//! what no command may ever write. confine-helper refuses such a root for every command; agentd
//! finds it once, up front, so that `agentd run` can refuse it and a session can open read-only
//! instead, each naming the path.

use std::path::{Path, PathBuf};

/// Why a directory may not be the workspace of a workspace-write command: the path it would make
/// writable, and the sentence that says so and what to use instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkspaceRefusal {
    /// The workspace is `/`.
    #[error(
        "the workspace / would make the whole file system writable, agentd's own configuration, \
         session state and program with it. Use a project's directory as the workspace"
    )]
    Root,
    /// The workspace is the home directory the commands get, or holds it.
    #[error(
        "the workspace {} would make the home directory {} writable, whose startup files (such \
         as ~/.bashrc) run unconfined at the next login; confine-helper never lets a command \
         write there. Use a project's directory as the workspace",
        workspace.display(),
        home.display()
    )]
    Home { workspace: PathBuf, home: PathBuf },
    /// The workspace holds, or lies inside, one of agentd's own files.
    #[error(
        "the workspace {} would make {} writable, and that is agentd's own configuration, \
         session state or program: a command there could change what agentd runs or replays \
         next. Use a directory that does not contain it (nor lies inside it) as the workspace",
        workspace.display(),
        own.display()
    )]
    OwnFile { workspace: PathBuf, own: PathBuf },
}

impl WorkspaceRefusal {
    /// The path that may not become writable.
    pub fn path(&self) -> &Path {
        match self {
            WorkspaceRefusal::Root => Path::new("/"),
            WorkspaceRefusal::Home { home, .. } => home,
            WorkspaceRefusal::OwnFile { own, .. } => own,
        }
    }
}

/// Why `workspace` (resolved) may not be a workspace-write workspace, if it may not: it is `/`;
/// it holds one of `own` (resolved), or lies inside one; it is `home` (resolved) or holds it.
/// The first that applies, in that order, so that `$HOME` holding agentd's configuration names
/// the configuration.
pub(super) fn refusal(
    workspace: PathBuf,
    own: impl IntoIterator<Item = PathBuf>,
    home: Option<PathBuf>,
) -> Option<WorkspaceRefusal> {
    if workspace.parent().is_none() {
        return Some(WorkspaceRefusal::Root);
    }
    if let Some(own) = own
        .into_iter()
        .find(|own| own.starts_with(&workspace) || workspace.starts_with(own))
    {
        return Some(WorkspaceRefusal::OwnFile { workspace, own });
    }
    match home {
        Some(home) if home.starts_with(&workspace) => {
            Some(WorkspaceRefusal::Home { workspace, home })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(workspace: &str, own: &[&str], home: Option<&str>) -> Option<WorkspaceRefusal> {
        refusal(
            workspace.into(),
            own.iter().map(PathBuf::from),
            home.map(PathBuf::from),
        )
    }

    #[test]
    fn the_root_the_home_and_agentds_own_files_are_refused_and_a_project_is_not() {
        let own = ["/h/.config/agentd", "/h/.local/state/agentd"];
        assert_eq!(check("/", &own, Some("/h")), Some(WorkspaceRefusal::Root));
        assert_eq!(
            check("/h", &own, Some("/h")),
            Some(WorkspaceRefusal::OwnFile {
                workspace: "/h".into(),
                own: "/h/.config/agentd".into()
            }),
            "the configuration is named before the home that holds it"
        );
        assert_eq!(
            check("/h/.local/state/agentd/sessions", &own, Some("/h")),
            Some(WorkspaceRefusal::OwnFile {
                workspace: "/h/.local/state/agentd/sessions".into(),
                own: "/h/.local/state/agentd".into()
            }),
            "inside an own directory"
        );
        let elsewhere = ["/etc/agentd"];
        assert_eq!(
            check("/home", &elsewhere, Some("/home/u")),
            Some(WorkspaceRefusal::Home {
                workspace: "/home".into(),
                home: "/home/u".into()
            })
        );
        assert_eq!(check("/h/project", &own, Some("/h")), None);
        assert_eq!(check("/home/u2", &elsewhere, Some("/home/u")), None);
        assert_eq!(check("/h", &elsewhere, None), None, "without a home");
    }

    #[test]
    fn each_refusal_names_the_path_that_may_not_become_writable() {
        assert_eq!(WorkspaceRefusal::Root.path(), Path::new("/"));
        let home = check("/h", &[], Some("/h")).expect("refused");
        assert_eq!(home.path(), Path::new("/h"));
        assert!(
            home.to_string()
                .starts_with("the workspace /h would make the home directory /h writable"),
            "{home}"
        );
    }
}
