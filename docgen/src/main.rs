//! Writes the generated files (`docs/contracts/`, the man pages and shell completions) from the
//! code, or checks that the files in the tree are what it would write.
//!
//! `cargo run -p agentd-docgen` writes every file; `cargo run -p agentd-docgen -- --check`
//! writes nothing and exits 1 naming each file that differs or is missing. `--root DIR` works on
//! another tree than this workspace (the drift test's control uses it). One module per contract;
//! each returns its files, and nothing here knows what is in them.

#![warn(clippy::too_many_lines)]
#![cfg_attr(not(test), warn(clippy::indexing_slicing))]

mod acp;
mod ceiling;
mod ceiling_keys;
mod config;
mod error;
mod generated;
mod man;
mod protocol;
mod readme;
mod tools;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use error::DocgenError;
use generated::{Generated, OWNED_DIRS, REGENERATE};

/// What the command line asks for.
struct Args {
    check: bool,
    root: PathBuf,
}

const USAGE: &str = "usage: agentd-docgen [--check] [--root DIR]\n\
    writes the generated contracts, man pages and completions into the workspace (or DIR);\n\
    --check writes nothing and exits 1 naming each file that differs";

fn parse_args() -> Result<Args, DocgenError> {
    let mut args = Args {
        check: false,
        root: Path::new(env!("CARGO_MANIFEST_DIR")).join(".."),
    };
    let mut given = std::env::args_os().skip(1);
    while let Some(arg) = given.next() {
        match arg.to_str() {
            Some("--check") => args.check = true,
            Some("--root") => match given.next() {
                Some(dir) => args.root = PathBuf::from(dir),
                None => return Err(DocgenError::RootWithoutDir),
            },
            _ => {
                return Err(DocgenError::UnknownArgument(
                    arg.to_string_lossy().into_owned(),
                ));
            }
        }
    }
    Ok(args)
}

/// Every generated file, from every contract.
fn all() -> Result<Vec<Generated>, DocgenError> {
    let mut files = Vec::new();
    files.push(protocol::helper_protocol());
    files.extend(tools::schemas());
    files.push(acp::session_settings()?);
    files.push(ceiling::ceiling_file());
    files.push(config::agentd_toml());
    files.extend(man::pages()?);
    files.extend(man::completions()?);
    files.push(readme::readme(&files));
    Ok(files)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("agentd-docgen: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let files = match all() {
        Ok(files) => files,
        Err(e) => {
            eprintln!("agentd-docgen: {e}");
            return ExitCode::FAILURE;
        }
    };
    if args.check {
        return check(&args.root, &files);
    }
    for file in &files {
        let path = args.root.join(&file.path);
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&path, &file.text));
        if let Err(e) = written {
            eprintln!("agentd-docgen: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    for extra in extra_files(&args.root, &files) {
        if let Err(e) = std::fs::remove_file(args.root.join(&extra)) {
            eprintln!("agentd-docgen: cannot remove {extra}, which is no longer generated: {e}");
            return ExitCode::FAILURE;
        }
        println!("agentd-docgen: removed {extra}, which is no longer generated");
    }
    println!("agentd-docgen: wrote {} files", files.len());
    ExitCode::SUCCESS
}

/// Names every file whose content in the tree differs from `files`, or that is missing.
fn check(root: &Path, files: &[Generated]) -> ExitCode {
    let mut stale = Vec::new();
    for file in files {
        match std::fs::read_to_string(root.join(&file.path)) {
            Ok(text) if text == file.text => {}
            Ok(_) => stale.push(format!(
                "{} differs from what the code generates",
                file.path
            )),
            Err(e) => stale.push(format!("{} cannot be read: {e}", file.path)),
        }
    }
    for extra in extra_files(root, files) {
        stale.push(format!(
            "{extra} is in a generated directory but no longer generated"
        ));
    }
    if stale.is_empty() {
        println!(
            "agentd-docgen: {} generated files are up to date",
            files.len()
        );
        return ExitCode::SUCCESS;
    }
    for line in &stale {
        eprintln!("agentd-docgen: {line}");
    }
    eprintln!("agentd-docgen: {REGENERATE}, review the difference and commit it");
    ExitCode::FAILURE
}

/// The files under [`OWNED_DIRS`] that are not among `files`, as paths relative to `root`.
fn extra_files(root: &Path, files: &[Generated]) -> Vec<String> {
    let mut found = Vec::new();
    let mut dirs: Vec<PathBuf> = OWNED_DIRS.iter().map(PathBuf::from).collect();
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(root.join(&dir)) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = dir.join(entry.file_name());
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => dirs.push(path),
                _ => found.push(path.to_string_lossy().into_owned()),
            }
        }
    }
    found.retain(|path| !files.iter().any(|file| &file.path == path));
    found.sort();
    found
}
