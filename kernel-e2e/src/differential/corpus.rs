//! The corpus of policies: each confined mode; writable roots nested in the workspace and
//! beside it; protected paths (the workspace's `.git`, a submodule's `.git` file and git
//! directory, a linked worktree's `.git` file and git directory, `--protect`ed subpaths);
//! denied reads (a file, a directory, a `**/NAME` pattern) in each mode and inside a writable
//! root; the command's own temp directory in workspace-write; a working directory under the
//! host's `/tmp` outside every root, and a workspace there.
//!
//! Every directory name of a policy has a space in it (`01 read-only`, `extra root`), so no
//! path of the corpus gets through a backend unquoted.

use super::fixture::Fixture;
use crate::error::E2eError;
use crate::matrix::Mode;

/// One policy of the corpus: its name (`NN what`, also its directory's) and how its fixture
/// is made.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    pub name: &'static str,
    pub build: fn(&mut Fixture) -> Result<(), E2eError>,
}

pub const READ_ONLY: Entry = Entry {
    name: "01 read-only",
    build: read_only,
};
pub const WORKSPACE_WRITE: Entry = Entry {
    name: "02 workspace-write",
    build: workspace_write,
};
pub const NESTED_ROOT: Entry = Entry {
    name: "03 nested writable root",
    build: nested_root,
};
pub const OUTSIDE_ROOT: Entry = Entry {
    name: "04 writable root beside the workspace",
    build: outside_root,
};
pub const PROTECT: Entry = Entry {
    name: "05 protected subpaths",
    build: protect,
};
pub const SUBMODULE: Entry = Entry {
    name: "06 submodule",
    build: submodule,
};
pub const WORKTREE: Entry = Entry {
    name: "07 linked worktree",
    build: worktree,
};
pub const WORKTREE_WORKSPACE: Entry = Entry {
    name: "08 worktree as the workspace",
    build: worktree_workspace,
};
pub const DENY_READ_READ_ONLY: Entry = Entry {
    name: "09 denied reads, read-only",
    build: deny_read_read_only,
};
pub const DENY_READ_WORKSPACE_WRITE: Entry = Entry {
    name: "10 denied reads, workspace-write",
    build: deny_read_workspace_write,
};
pub const CWD_IN_HOST_TMP: Entry = Entry {
    name: "11 working directory in host tmp",
    build: cwd_in_host_tmp,
};
pub const WORKSPACE_IN_HOST_TMP: Entry = Entry {
    name: "12 workspace in host tmp",
    build: workspace_in_host_tmp,
};

/// Every policy of the corpus, in order.
pub const ALL: [Entry; 12] = [
    READ_ONLY,
    WORKSPACE_WRITE,
    NESTED_ROOT,
    OUTSIDE_ROOT,
    PROTECT,
    SUBMODULE,
    WORKTREE,
    WORKTREE_WORKSPACE,
    DENY_READ_READ_ONLY,
    DENY_READ_WORKSPACE_WRITE,
    CWD_IN_HOST_TMP,
    WORKSPACE_IN_HOST_TMP,
];

/// The workspace `ws`, a repository, asked about with its `.git`.
fn repository_workspace(f: &mut Fixture) -> Result<(), E2eError> {
    let ws = f.workspace.clone();
    f.repo(&ws)?;
    f.root(&ws, Some("file"))?;
    f.kept(&ws.join(".git"), Some("config"))
}

fn read_only(f: &mut Fixture) -> Result<(), E2eError> {
    f.mode = Mode::ReadOnly;
    repository_workspace(f)
}

fn workspace_write(f: &mut Fixture) -> Result<(), E2eError> {
    repository_workspace(f)?;
    let dir = f.workspace.join("a dir");
    f.mkdir(&dir)?;
    f.anchor(&dir, Some("file"))
}

fn nested_root(f: &mut Fixture) -> Result<(), E2eError> {
    repository_workspace(f)?;
    let nested = f.repo(&f.workspace.join("nested root"))?;
    f.root(&nested, Some("file"))?;
    f.kept(&nested.join(".git"), Some("config"))
}

fn outside_root(f: &mut Fixture) -> Result<(), E2eError> {
    repository_workspace(f)?;
    let extra = f.mkdir(&f.dir.join("extra root"))?;
    f.root(&extra, Some("file"))?;
    let deeper = f.mkdir(&extra.join("sub dir"))?;
    f.anchor(&deeper, Some("file"))
}

fn protect(f: &mut Fixture) -> Result<(), E2eError> {
    repository_workspace(f)?;
    let extra = f.mkdir(&f.dir.join("extra root"))?;
    f.root(&extra, Some("file"))?;
    f.protect = vec!["conf", "notes.txt"];
    for root in [f.workspace.clone(), extra] {
        f.mkdir(&root.join("conf"))?;
        f.kept(&root.join("conf"), Some("settings"))?;
        f.file(&root.join("notes.txt"), "notes\n")?;
        f.kept(&root.join("notes.txt"), None)?;
    }
    Ok(())
}

/// A repository with a submodule at `deps/up`, as `git submodule add` leaves it: its git
/// directory in `.git/modules/deps/up`, a `.git` file in `deps/up`.
fn submodule(f: &mut Fixture) -> Result<(), E2eError> {
    let upstream = f.repo(&f.dir.join("upstream repo"))?;
    repository_workspace(f)?;
    let ws = f.workspace.clone();
    let url = upstream.to_string_lossy().into_owned();
    let add = ["-c", "protocol.file.allow=always", "submodule", "add", "-q"];
    f.git(&ws, &[&add[..], &[url.as_str(), "deps/up"]].concat())?;
    f.git(&ws, &["commit", "-q", "-m", "the user's submodule"])?;
    f.anchor(&ws.join("deps/up"), Some("tracked"))?;
    f.kept(&ws.join("deps/up/.git"), None)?;
    f.kept(&ws.join(".git/modules/deps/up"), Some("config"))?;
    f.anchor(&upstream, Some("tracked"))
}

/// A linked worktree inside the workspace: `wt/.git` is a file naming `.git/worktrees/wt`.
fn worktree(f: &mut Fixture) -> Result<(), E2eError> {
    repository_workspace(f)?;
    let ws = f.workspace.clone();
    f.git(&ws, &["worktree", "add", "-q", "wt"])?;
    f.anchor(&ws.join("wt"), Some("tracked"))?;
    f.kept(&ws.join("wt/.git"), None)?;
    f.kept(&ws.join(".git/worktrees/wt"), Some("commondir"))
}

/// The workspace is a linked worktree of a repository in another writable root: its git
/// directory and the repository's `.git` are there.
fn worktree_workspace(f: &mut Fixture) -> Result<(), E2eError> {
    let main = f.repo(&f.dir.join("main repo"))?;
    f.git(&main, &["worktree", "add", "-q", "../wt"])?;
    let wt = f.dir.join("wt");
    f.workspace = wt.clone();
    f.root(&wt, Some("tracked"))?;
    f.kept(&wt.join(".git"), None)?;
    f.root(&main, Some("tracked"))?;
    f.kept(&main.join(".git"), Some("config"))?;
    f.kept(&main.join(".git/worktrees/wt"), Some("commondir"))
}

/// Denied reads: a directory beside the workspace, a file in it, and every `.env` in it.
fn denied_reads(f: &mut Fixture) -> Result<(), E2eError> {
    repository_workspace(f)?;
    let ws = f.workspace.clone();
    let keys = f.mkdir(&f.dir.join("keys"))?;
    f.file(&keys.join("id"), "secret key\n")?;
    f.kept(&keys, Some("id"))?;
    f.file(&ws.join("secret.env"), "secret\n")?;
    f.kept(&ws.join("secret.env"), None)?;
    f.file(&ws.join("app/.env"), "secret\n")?;
    f.kept(&ws.join("app/.env"), None)?;
    f.deny_read = vec![
        keys.into_os_string(),
        ws.join("secret.env").into_os_string(),
        "**/.env".into(),
    ];
    Ok(())
}

fn deny_read_read_only(f: &mut Fixture) -> Result<(), E2eError> {
    f.mode = Mode::ReadOnly;
    denied_reads(f)
}

/// Denied reads in workspace-write, with a denied directory inside the workspace too.
fn deny_read_workspace_write(f: &mut Fixture) -> Result<(), E2eError> {
    denied_reads(f)?;
    let private = f.mkdir(&f.workspace.join("private"))?;
    f.file(&private.join("key"), "secret\n")?;
    f.kept(&private, Some("key"))?;
    f.deny_read.push(private.into_os_string());
    Ok(())
}

/// The command's working directory lies under the host's `/tmp`, outside every root.
fn cwd_in_host_tmp(f: &mut Fixture) -> Result<(), E2eError> {
    repository_workspace(f)?;
    let cwd = f.mkdir(&f.host_tmp.join("cwd"))?;
    f.anchor(&cwd, Some("file"))?;
    f.cwd = Some(cwd);
    Ok(())
}

/// The workspace lies under the host's `/tmp`, as a checkout there does.
fn workspace_in_host_tmp(f: &mut Fixture) -> Result<(), E2eError> {
    f.workspace = f.host_tmp.join("ws");
    repository_workspace(f)
}
