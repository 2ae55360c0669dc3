//! agentd's man pages (`agentd/man/`: `agentd.1` and one page per subcommand, named as
//! `clap_mangen::generate_to` names them) and its shell completions (`agentd/completions/`),
//! from agentd's own command line (`agentd::api::cli::Cli`). They live in agentd's crate because
//! agentd embeds them (`agentd man`, `agentd completions`), and a published crate can embed only
//! its own files.

use agentd::api::cli::Cli;
use clap::CommandFactory;
use clap_complete::Shell;
use clap_mangen::Man;

use crate::error::DocgenError;
use crate::generated::{Generated, NOTICE};

const MAN_DIR: &str = "agentd/man";
const COMPLETIONS_DIR: &str = "agentd/completions";

/// The date in every page's title line: none, so that a page changes only when the command
/// line does, never with the day it was generated on.
const MAN_DATE: &str = "";

/// The page of `cmd`, then those of its subcommands, as `clap_mangen::generate_to` makes them
/// (hidden subcommands have none).
fn collect(cmd: clap::Command, out: &mut Vec<Generated>) -> Result<(), DocgenError> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned() {
        collect(sub, out)?;
    }
    let man = Man::new(cmd.clone()).date(MAN_DATE);
    let mut page = Vec::new();
    man.render(&mut page).map_err(|error| DocgenError::Render {
        page: man.get_filename(),
        error,
    })?;
    let page = String::from_utf8(page).map_err(|error| DocgenError::NotUtf8 {
        file: man.get_filename(),
        error,
    })?;
    let page = synopsis_with_values(&page, &cmd);
    out.push(Generated::commented(
        &format!("{MAN_DIR}/{}", man.get_filename()),
        ".\\\"",
        &page,
    ));
    Ok(())
}

/// `page` with each option of its synopsis followed by the value it takes (`--mode MODE`, as in
/// the OPTIONS section), which the generated synopsis leaves out; an option given more than once
/// is marked `...`.
fn synopsis_with_values(page: &str, cmd: &clap::Command) -> String {
    let mut lines: Vec<String> = page.lines().map(str::to_owned).collect();
    let Some(at) = lines
        .iter()
        .position(|l| l == ".SH SYNOPSIS")
        .map(|i| i + 1)
    else {
        return page.to_owned();
    };
    let Some(line) = lines.get_mut(at) else {
        return page.to_owned();
    };
    for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        let (Some(long), Some(values)) = (arg.get_long(), arg.get_value_names()) else {
            continue;
        };
        let takes_values = arg.get_num_args().is_some_and(|n| n.takes_values());
        if !takes_values {
            continue;
        }
        let flag = format!("\\fB\\-\\-{}\\fR", roff_escape(long));
        let values: Vec<String> = values
            .iter()
            .map(|v| format!("\\fI{}\\fR", roff_escape(v)))
            .collect();
        let repeated = matches!(arg.get_action(), clap::ArgAction::Append);
        let with = format!(
            "{flag} {}{}",
            values.join(" "),
            if repeated { "..." } else { "" }
        );
        // The flag is followed by `]` (optional) or `>` (required) in the synopsis; match one
        // of those so `--deny-read` does not also match `--deny-read-extra`.
        for end in ["]", ">", " "] {
            let found = format!("{flag}{end}");
            if line.contains(&found) {
                *line = line.replacen(&found, &format!("{with}{end}"), 1);
                break;
            }
        }
    }
    let mut out = lines.join("\n");
    if page.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// `text` as roff shows it literally: hyphens as `\-`, backslashes doubled.
fn roff_escape(text: &str) -> String {
    text.replace('\\', "\\\\").replace('-', "\\-")
}

pub fn pages() -> Result<Vec<Generated>, DocgenError> {
    // As `clap_mangen::generate_to` does: no `help` subcommand, and built once from the top so
    // that each subcommand knows its full name (`agentd-config-show`).
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    let mut out = Vec::new();
    collect(cmd, &mut out)?;
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

pub fn completions() -> Result<Vec<Generated>, DocgenError> {
    [
        (Shell::Bash, "agentd.bash"),
        (Shell::Zsh, "_agentd"),
        (Shell::Fish, "agentd.fish"),
    ]
    .into_iter()
    .map(|(shell, name)| {
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut Cli::command(), "agentd", &mut script);
        let script = String::from_utf8(script).map_err(|error| DocgenError::NotUtf8 {
            file: name.to_owned(),
            error,
        })?;
        let path = format!("{COMPLETIONS_DIR}/{name}");
        // zsh finds a completion function by its first line, `#compdef agentd`: the notice
        // comes right after it.
        Ok(match script.split_once('\n') {
            Some((first, rest)) if first.starts_with("#compdef") => Generated {
                path,
                text: format!("{first}\n# {NOTICE}\n{rest}"),
            },
            _ => Generated::commented(&path, "#", &script),
        })
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_visible_subcommand_has_a_page_named_after_its_full_name() {
        let pages = pages().expect("pages");
        let names: Vec<&str> = pages.iter().map(|p| p.path.as_str()).collect();
        for expected in [
            "agentd.1",
            "agentd-run.1",
            "agentd-exec.1",
            "agentd-acp.1",
            "agentd-config.1",
            "agentd-config-show.1",
            "agentd-sessions-list.1",
        ] {
            assert!(
                names.contains(&format!("{MAN_DIR}/{expected}").as_str()),
                "{names:?}"
            );
        }
        assert!(!names.iter().any(|n| n.contains("help")), "{names:?}");
        let run = pages
            .iter()
            .find(|p| p.path.ends_with("/agentd-run.1"))
            .expect("run");
        assert!(run.text.starts_with(&format!(".\\\" {NOTICE}\n")));
        assert!(run.text.contains("\\-\\-mode"), "{}", run.text);
        let synopsis = run
            .text
            .lines()
            .skip_while(|l| *l != ".SH SYNOPSIS")
            .nth(1)
            .expect("a synopsis line");
        for shown in [
            "\\fB\\-\\-mode\\fR \\fIMODE\\fR]",
            "\\fB\\-\\-writable\\-root\\fR \\fIDIR\\fR...]",
            "\\fB\\-\\-env\\fR \\fINAME=VALUE\\fR...]",
            "\\fB\\-\\-json\\fR]",
        ] {
            assert!(synopsis.contains(shown), "{shown} not in {synopsis}");
        }
    }

    #[test]
    fn each_completion_starts_with_the_notice_where_its_shell_allows() {
        for file in completions().expect("completions") {
            let mut lines = file.text.lines();
            let first = lines.next().unwrap_or_default();
            let notice = format!("# {NOTICE}");
            if file.path.ends_with("/_agentd") {
                assert_eq!(first, "#compdef agentd");
                assert_eq!(lines.next(), Some(notice.as_str()));
            } else {
                assert_eq!(first, notice);
            }
            assert!(file.text.contains("sessions"), "{}", file.path);
        }
    }
}
