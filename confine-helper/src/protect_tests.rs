//! Tests of the repository walk: what stays read-only in a writable root.

use super::*;
use crate::test_support::Scratch;

fn root(path: &Path) -> Root {
    Root {
        path: path.to_owned(),
        fd: paths::open_dir(path).expect("open root"),
    }
}

fn paths_of(binds: &[Bind]) -> Vec<PathBuf> {
    binds.iter().map(|b| b.path.clone()).collect()
}

fn git(dir: &Path, args: &[&str]) -> bool {
    std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .env("GIT_ALLOW_PROTOCOL", "file")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn a_missing_repository_is_reported_and_nothing_is_created() {
    let _scratch = Scratch::new("protect-missing");
    let dir = _scratch.0.clone();
    let p = protect(&[root(&dir)], &[]).expect("protect");
    assert!(p.read_only.is_empty() && p.pinned.is_empty());
    assert_eq!(p.missing.len(), 1, "{:?}", p.missing);
    assert!(
        p.missing[0].to_string().contains("there is none yet"),
        "{:?}",
        p.missing
    );
    let entries: Vec<_> = std::fs::read_dir(&dir).expect("list").collect();
    assert!(entries.is_empty(), "nothing appears in the tree");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_whole_git_directory_is_read_only() {
    let _scratch = Scratch::new("protect-gitdir");
    let dir = _scratch.0.clone();
    std::fs::create_dir_all(dir.join(".git/hooks")).expect("mkdir");
    let p = protect(&[root(&dir)], &[]).expect("protect");
    assert_eq!(paths_of(&p.read_only), vec![dir.join(".git")]);
    assert!(p.pinned.is_empty());
    assert!(p.missing.is_empty(), "{:?}", p.missing);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_symlinked_git_cannot_be_enforced() {
    let _scratch = Scratch::new("protect-symlink");
    let dir = _scratch.0.clone();
    std::os::unix::fs::symlink("/tmp", dir.join(".git")).expect("symlink");
    let e = protect(&[root(&dir)], &[]).expect_err("refused");
    let git = dir.join(".git");
    assert!(
        matches!(&e, ProtectError::Symlink { target, at } if *target == git && *at == git),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        format!(
            "cannot enforce read-only path {0}: {0} is a symbolic link",
            git.display()
        )
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_git_file_protects_itself_and_the_directory_it_names_inside_a_root() {
    let _scratch = Scratch::new("protect-gitfile");
    let dir = _scratch.0.clone();
    std::fs::create_dir_all(dir.join("store/repo.git")).expect("mkdir");
    std::fs::create_dir_all(dir.join("ws")).expect("mkdir");
    std::fs::write(dir.join("ws/.git"), "gitdir: ../store/repo.git\n").expect("write");
    let p = protect(&[root(&dir.join("ws")), root(&dir.join("store"))], &[]).expect("protect");
    let ro = paths_of(&p.read_only);
    assert!(ro.contains(&dir.join("ws/.git")), "{ro:?}");
    assert!(ro.contains(&dir.join("store/repo.git")), "{ro:?}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn submodules_and_linked_worktrees_keep_their_git_entries_read_only() {
    let _scratch = Scratch::new("protect-submodules");
    let dir = _scratch.0.clone();
    let (up, ws) = (dir.join("up"), dir.join("ws"));
    std::fs::create_dir_all(&up).expect("mkdir");
    std::fs::create_dir_all(&ws).expect("mkdir");
    if !git(&up, &["init", "-q"]) {
        crate::skip::skip(
            "submodules_and_linked_worktrees_keep_their_git_entries_read_only",
            crate::skip::Need::Git,
            "git is not installed",
        );
        return;
    }
    std::fs::write(up.join("f"), "x").expect("write");
    assert!(git(&up, &["add", "f"]) && git(&up, &["commit", "-qm", "up"]));
    assert!(git(&ws, &["init", "-q"]));
    let url = up.to_string_lossy().into_owned();
    assert!(git(
        &ws,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            &url,
            "deps/up"
        ]
    ));
    // A gitlink whose directory was never populated.
    std::fs::create_dir_all(ws.join("deps/empty")).expect("mkdir");
    let head = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(&up)
        .output()
        .expect("rev-parse");
    let head = String::from_utf8_lossy(&head.stdout).trim().to_owned();
    assert!(git(
        &ws,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{head},deps/empty")
        ]
    ));
    assert!(git(
        &ws,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{head},deps/gone")
        ]
    ));
    assert!(git(&ws, &["commit", "-qm", "ws"]));
    assert!(git(&ws, &["worktree", "add", "-q", "wt"]));

    let p = protect(&[root(&ws)], &[]).expect("protect");
    let ro = paths_of(&p.read_only);
    for expected in [
        ws.join(".git"),
        ws.join("deps/up/.git"),
        ws.join("deps/empty"),
        ws.join("wt/.git"),
    ] {
        assert!(ro.contains(&expected), "{expected:?} not in {ro:?}");
    }
    let pinned = paths_of(&p.pinned);
    assert!(pinned.contains(&ws.join("deps")), "{pinned:?}");
    assert!(pinned.contains(&ws.join("deps/up")), "{pinned:?}");
    assert!(pinned.contains(&ws.join("wt")), "{pinned:?}");
    assert!(
        p.missing
            .iter()
            .any(|m| m.to_string().contains("deps/gone")),
        "{:?}",
        p.missing
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_git_file_naming_its_git_directory_through_a_link_in_a_root_cannot_be_enforced() {
    let _scratch = Scratch::new("protect-gitfile-link");
    let dir = _scratch.0.clone();
    std::fs::create_dir_all(dir.join("ws/store/repo.git")).expect("mkdir");
    std::os::unix::fs::symlink(dir.join("ws/store"), dir.join("ws/via")).expect("symlink");
    std::fs::write(dir.join("ws/.git"), "gitdir: via/repo.git\n").expect("write");
    // A command could re-point `via` after any check, and git follows it on every run.
    let e = protect(&[root(&dir.join("ws"))], &[]).expect_err("refused");
    assert!(
        matches!(&e, ProtectError::Symlink { at, .. } if *at == dir.join("ws/via")),
        "{e:?}"
    );
    // The same link outside every root is only the user's to change: followed.
    std::fs::remove_file(dir.join("ws/via")).expect("rm");
    std::fs::create_dir_all(dir.join("elsewhere/repo.git")).expect("mkdir");
    std::os::unix::fs::symlink(dir.join("elsewhere"), dir.join("via")).expect("symlink");
    std::fs::write(dir.join("ws/.git"), "gitdir: ../via/repo.git\n").expect("write");
    let p = protect(&[root(&dir.join("ws"))], &[]).expect("protect");
    assert_eq!(paths_of(&p.read_only), vec![dir.join("ws/.git")]);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_fifo_where_git_keeps_a_pointer_fails_the_run_instead_of_blocking() {
    let _scratch = Scratch::new("protect-fifo");
    let dir = _scratch.0.clone();
    std::fs::create_dir_all(dir.join(".git")).expect("mkdir");
    nix::unistd::mkfifo(&dir.join(".git/commondir"), nix::sys::stat::Mode::S_IRWXU)
        .expect("mkfifo");
    let e = protect(&[root(&dir)], &[]).expect_err("refused");
    assert!(
        matches!(
            e,
            ProtectError::Commondir {
                source: Unreadable::NotRegular(Kind::Special),
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        format!(
            "cannot read {}: it is not a regular file (Special); nothing was run",
            dir.join(".git/commondir").display()
        )
    );
    std::fs::remove_file(dir.join(".git/commondir")).expect("rm");
    nix::unistd::mkfifo(&dir.join(".git/index"), nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    let p = protect(&[root(&dir)], &[]).expect("an unreadable index is reported, not fatal");
    assert!(
        p.missing.iter().any(|m| m.to_string().contains("index")),
        "{:?}",
        p.missing
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn extra_protected_paths_are_walked_and_missing_ones_reported() {
    let _scratch = Scratch::new("protect-extra");
    let dir = _scratch.0.clone();
    std::fs::create_dir_all(dir.join("a/b")).expect("mkdir");
    std::fs::write(dir.join("file"), "").expect("write");
    let extra = [
        PathBuf::from("a/b"),
        PathBuf::from("file/below"),
        PathBuf::from("none/x"),
    ];
    let p = protect(&[root(&dir)], &extra).expect("protect");
    let ro = paths_of(&p.read_only);
    assert!(ro.contains(&dir.join("a/b")), "{ro:?}");
    assert!(ro.contains(&dir.join("file")), "{ro:?}");
    assert_eq!(paths_of(&p.pinned), vec![dir.join("a")]);
    assert!(
        p.missing.iter().any(|m| m.to_string().contains("none")),
        "{:?}",
        p.missing
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn too_many_binds_is_refused_in_the_words_users_read() {
    let e = ProtectError::TooMany {
        path: PathBuf::from("/w/deps/m/.git"),
    };
    assert_eq!(
        e.to_string(),
        "cannot enforce read-only path /w/deps/m/.git: more than 256 paths would have to be \
         kept read-only (repositories with very many submodules are not supported)"
    );
}
