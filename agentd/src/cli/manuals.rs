//! `agentd man` and `agentd completions`: the manual pages and shell completions the Debian
//! package installs, for those who install agentd with cargo, which installs only the binary.
//!
//! They are the files `cargo run -p agentd-docgen` writes from this command line into
//! `agentd/man/` and `agentd/completions/`, embedded when agentd is built, so agentd prints
//! what the package installs, byte for byte, and carries no generator (RFC 0018, "Manual pages
//! and completions for cargo installs"). A subcommand added to the command line gets its page
//! from docgen, and a unit test below fails until [`PAGES`] lists it.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::builder::PossibleValuesParser;
use clap::{Args, ValueEnum};

use super::args::non_empty_path;
use super::exit::failure;

/// Every manual page, by name (`agentd-config-show`, read as `man agentd-config-show`), as
/// docgen wrote it.
const PAGES: [(&str, &str); 15] = [
    ("agentd", include_str!("../../man/agentd.1")),
    ("agentd-acp", include_str!("../../man/agentd-acp.1")),
    (
        "agentd-completions",
        include_str!("../../man/agentd-completions.1"),
    ),
    ("agentd-config", include_str!("../../man/agentd-config.1")),
    (
        "agentd-config-show",
        include_str!("../../man/agentd-config-show.1"),
    ),
    ("agentd-demo", include_str!("../../man/agentd-demo.1")),
    ("agentd-exec", include_str!("../../man/agentd-exec.1")),
    ("agentd-man", include_str!("../../man/agentd-man.1")),
    ("agentd-probe", include_str!("../../man/agentd-probe.1")),
    ("agentd-run", include_str!("../../man/agentd-run.1")),
    (
        "agentd-sessions",
        include_str!("../../man/agentd-sessions.1"),
    ),
    (
        "agentd-sessions-audit",
        include_str!("../../man/agentd-sessions-audit.1"),
    ),
    (
        "agentd-sessions-list",
        include_str!("../../man/agentd-sessions-list.1"),
    ),
    (
        "agentd-sessions-show",
        include_str!("../../man/agentd-sessions-show.1"),
    ),
    (
        "agentd-sessions-undo",
        include_str!("../../man/agentd-sessions-undo.1"),
    ),
];

/// The prefix of every subcommand's page name.
const PAGE_PREFIX: &str = "agentd-";
/// The section the pages belong to, which names their files (`agentd-run.1`).
const SECTION: &str = "1";

// `agentd completions SHELL` (its help is the variant's in `Command`)
#[derive(Debug, Args)]
pub struct CompletionsCommand {
    /// The shell to complete agentd's subcommands, flags and values for.
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: Shell,
}

/// A shell `agentd completions` has a script for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    /// `agentd completions bash > ~/.local/share/bash-completion/completions/agentd`
    Bash,
    /// `agentd completions zsh > ~/.zfunc/_agentd`, with `fpath+=~/.zfunc` before `compinit`
    Zsh,
    /// `agentd completions fish > ~/.config/fish/completions/agentd.fish`
    Fish,
}

impl Shell {
    /// The script, as docgen wrote it (and the package installs it).
    pub fn script(self) -> &'static str {
        match self {
            Shell::Bash => include_str!("../../completions/agentd.bash"),
            Shell::Zsh => include_str!("../../completions/_agentd"),
            Shell::Fish => include_str!("../../completions/agentd.fish"),
        }
    }
}

// `agentd man [SUBCOMMAND] [--dir DIR]` (its help is the variant's in `Command`)
#[derive(Debug, Args)]
pub struct ManCommand {
    /// The subcommand whose page to print (`run`, `config-show`); without one, agentd's own.
    #[arg(value_name = "SUBCOMMAND", value_parser = subcommand_pages(), conflicts_with = "dir")]
    pub subcommand: Option<String>,
    /// Write every page into DIR (made if missing) as agentd.1, agentd-run.1, ... instead:
    /// with DIR `~/.local/share/man/man1`, `man agentd-run` finds them.
    #[arg(long, value_name = "DIR", value_parser = non_empty_path())]
    pub dir: Option<PathBuf>,
}

/// The subcommands that have a page, by the name `agentd man` takes (`config-show`).
fn subcommand_pages() -> PossibleValuesParser {
    PossibleValuesParser::new(
        PAGES
            .iter()
            .filter_map(|(name, _)| name.strip_prefix(PAGE_PREFIX)),
    )
}

/// Why `agentd man --dir` could not write the pages.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot write the manual page {}: {source}; give --dir a directory you may write",
    path.display()
)]
pub struct WriteError {
    path: PathBuf,
    source: std::io::Error,
}

/// The text of the page `name` (`agentd-run`), if there is one.
pub fn page(name: &str) -> Option<&'static str> {
    PAGES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, text)| *text)
}

/// Writes every page into `dir`, made if missing; the paths written.
pub fn write_pages(dir: &Path) -> Result<Vec<PathBuf>, WriteError> {
    std::fs::create_dir_all(dir).map_err(|source| WriteError {
        path: dir.to_owned(),
        source,
    })?;
    let mut written = Vec::with_capacity(PAGES.len());
    for (name, text) in PAGES {
        let path = dir.join(format!("{name}.{SECTION}"));
        std::fs::write(&path, text).map_err(|source| WriteError {
            path: path.clone(),
            source,
        })?;
        written.push(path);
    }
    Ok(written)
}

/// Prints `text` on stdout; a reader that went away (`agentd man | head`) is no failure.
fn print(text: &str) -> u8 {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => 0,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(e) => failure(&format!("cannot write to stdout: {e}")),
    }
}

pub(super) fn completions_command(command: &CompletionsCommand) -> u8 {
    print(command.shell.script())
}

pub(super) fn man_command(command: &ManCommand) -> u8 {
    if let Some(dir) = &command.dir {
        return match write_pages(dir) {
            Ok(written) => {
                for path in written {
                    println!("{}", path.display());
                }
                0
            }
            Err(e) => failure(&e),
        };
    }
    let name = match &command.subcommand {
        Some(sub) => format!("{PAGE_PREFIX}{sub}"),
        None => "agentd".to_owned(),
    };
    match page(&name) {
        Some(text) => print(text),
        // The value parser admits only the listed pages.
        None => failure(&format!("there is no manual page {name}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn generated(dir: &str) -> Vec<(String, String)> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
        let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .flatten()
            .map(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                let text = std::fs::read_to_string(entry.path()).expect("a generated file");
                (name, text)
            })
            .collect();
        files.sort();
        files
    }

    #[test]
    fn every_page_docgen_wrote_is_embedded_as_written() {
        let files = generated("man");
        let mut embedded: Vec<(String, String)> = PAGES
            .iter()
            .map(|(name, text)| (format!("{name}.{SECTION}"), (*text).to_owned()))
            .collect();
        embedded.sort();
        let names = |list: &[(String, String)]| -> Vec<String> {
            list.iter().map(|(name, _)| name.clone()).collect()
        };
        assert_eq!(
            names(&embedded),
            names(&files),
            "agentd/man/ and PAGES in agentd/src/cli/manuals.rs list different pages: add or \
             remove the page there, after `cargo run -p agentd-docgen`"
        );
        assert_eq!(embedded, files);
    }

    #[test]
    fn every_completion_script_is_embedded_as_written() {
        let files = generated("completions");
        for (shell, file) in [
            (Shell::Bash, "agentd.bash"),
            (Shell::Zsh, "_agentd"),
            (Shell::Fish, "agentd.fish"),
        ] {
            let written = files.iter().find(|(name, _)| name == file);
            assert_eq!(
                written.map(|(_, text)| text.as_str()),
                Some(shell.script()),
                "{file}"
            );
        }
        assert_eq!(files.len(), 3, "{:?}", files.iter().map(|f| &f.0));
    }

    #[test]
    fn the_man_and_completions_commands_parse_their_pages_and_shells() {
        let cli = Cli::try_parse_from(["agentd", "man", "config-show"]).expect("parses");
        let Command::Man(man) = cli.command else {
            panic!("not man");
        };
        assert_eq!(man.subcommand.as_deref(), Some("config-show"));
        let cli = Cli::try_parse_from(["agentd", "man", "--dir", "/d"]).expect("parses");
        let Command::Man(man) = cli.command else {
            panic!("not man");
        };
        assert_eq!((man.subcommand, man.dir), (None, Some("/d".into())));
        let e = Cli::try_parse_from(["agentd", "man", "sesions-list"]).expect_err("no such page");
        assert_eq!(e.kind(), clap::error::ErrorKind::InvalidValue);
        assert!(
            e.to_string()
                .contains("[possible values: acp, completions,"),
            "{e}"
        );
        assert!(
            e.to_string()
                .contains("a similar value exists: 'sessions-list'"),
            "{e}"
        );
        assert!(Cli::try_parse_from(["agentd", "man", "run", "--dir", "/d"]).is_err());
        assert!(Cli::try_parse_from(["agentd", "man", "--dir", ""]).is_err());

        let cli = Cli::try_parse_from(["agentd", "completions", "zsh"]).expect("parses");
        let Command::Completions(completions) = cli.command else {
            panic!("not completions");
        };
        assert_eq!(completions.shell, Shell::Zsh);
        let e = Cli::try_parse_from(["agentd", "completions", "tcsh"]).expect_err("no tcsh");
        assert_eq!(e.kind(), clap::error::ErrorKind::InvalidValue);
        assert!(
            e.to_string().contains("[possible values: bash, zsh, fish]"),
            "{e}"
        );
        assert!(Cli::try_parse_from(["agentd", "completions"]).is_err());
    }

    #[test]
    fn write_pages_writes_every_page_and_names_a_directory_it_cannot_make() {
        let dir = std::env::temp_dir().join(format!("agentd-man-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let written = write_pages(&dir.join("man1")).expect("written");
        assert_eq!(written.len(), PAGES.len());
        assert_eq!(
            std::fs::read_to_string(dir.join("man1/agentd-run.1")).expect("agentd-run.1"),
            page("agentd-run").expect("a page")
        );
        // A file where the directory should be.
        let blocked = dir.join("file");
        std::fs::write(&blocked, "").expect("a file");
        let e = write_pages(&blocked.join("man1")).expect_err("not a directory");
        assert!(
            e.to_string().contains(&blocked.display().to_string()),
            "{e}"
        );
        assert!(e.to_string().contains("give --dir a directory"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
