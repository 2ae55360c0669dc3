//! The usage blocks of the documents (a fence without an info string whose first line is
//! `agentd SUBCOMMAND [...]`) name exactly the flags that `agentd SUBCOMMAND --help` lists, so a
//! flag added, renamed or removed shows as a failing test instead of a stale synopsis.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use super::markdown::Block;

/// The subcommand a usage block is about, when it is one.
pub fn subcommand(block: &Block) -> Option<&str> {
    if !block.info.is_empty() {
        return None;
    }
    let mut words = block.lines.first()?.split_whitespace();
    (words.next()? == "agentd").then_some(())?;
    words
        .next()
        .filter(|w| w.chars().all(|c| c.is_ascii_lowercase()))
}

/// Every `--flag` in `text`.
fn flags_in(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (at, _) in text.match_indices("--") {
        let name: String = text[at + 2..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
            .collect();
        let starts_a_word = at == 0 || !text[..at].ends_with(|c: char| c.is_alphanumeric());
        if starts_a_word && name.starts_with(|c: char| c.is_ascii_lowercase()) {
            out.insert(format!("--{name}"));
        }
    }
    out
}

/// The long flags a `--help` text lists (the lines that start, indented, with one), but
/// `--help` itself.
pub fn help_flags(help: &str) -> BTreeSet<String> {
    help.lines()
        .filter(|line| line.starts_with(' '))
        .filter_map(|line| {
            let option = line.trim_start();
            // `-h, --help`: the short form first.
            let long = match option.as_bytes() {
                [b'-', short, b',', b' ', ..] if short.is_ascii_alphabetic() => &option[4..],
                _ => option,
            };
            long.starts_with("--")
                .then(|| flags_in(long.split_whitespace().next().unwrap_or("")))
        })
        .flatten()
        .filter(|flag| flag != "--help")
        .collect()
}

/// What differs between a usage block and its subcommand's `--help`: `FILE:LINE: …`, or nothing.
pub fn compare(block: &Block, help: &str) -> Option<String> {
    let sub = subcommand(block)?;
    let written = flags_in(&block.lines.join("\n"));
    let listed = help_flags(help);
    let missing: Vec<&String> = listed.difference(&written).collect();
    let unknown: Vec<&String> = written.difference(&listed).collect();
    if missing.is_empty() && unknown.is_empty() {
        return None;
    }
    let mut out = format!("{}:{}: the usage of `agentd {sub}`", block.file, block.line);
    if !missing.is_empty() {
        out.push_str(&format!(
            " lacks {missing:?}, which `agentd {sub} --help` lists"
        ));
    }
    if !unknown.is_empty() {
        let and = if missing.is_empty() { "" } else { ";" };
        out.push_str(&format!(
            "{and} names {unknown:?}, which `agentd {sub} --help` does not list"
        ));
    }
    Some(out)
}

/// `agentd SUBCOMMAND --help` of the build in `bin`.
pub fn help_of(bin: &Path, sub: &str) -> String {
    let out = Command::new(bin.join("agentd"))
        .args([sub, "--help"])
        .env_clear()
        .output()
        .unwrap_or_else(|e| panic!("agentd {sub} --help: {e}"));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::markdown::blocks;

    const HELP: &str = "Run one command.\n\nUsage: agentd run [OPTIONS] -- <ARGV>...\n\nOptions:\n      --mode <MODE>\n          How far [default: sandbox.mode or --mode-like text]\n      --env <NAME=VALUE>\n  -h, --help\n          Print help\n";

    #[test]
    fn a_usage_block_names_exactly_the_flags_of_the_help() {
        assert_eq!(
            help_flags(HELP),
            BTreeSet::from(["--mode".to_owned(), "--env".to_owned()])
        );
        let doc = |usage: &str| blocks("doc.md", &format!("```\n{usage}\n```\n"));
        let right = doc("agentd run [--mode MODE] [--env NAME=VALUE] -- ARGV...");
        assert_eq!(compare(&right[0], HELP), None);
        let stale = doc("agentd run [--mode MODE] [--timeout SECS]\n  -- ARGV...");
        assert_eq!(
            compare(&stale[0], HELP).as_deref(),
            Some(
                "doc.md:1: the usage of `agentd run` lacks [\"--env\"], which `agentd run --help` \
                 lists; names [\"--timeout\"], which `agentd run --help` does not list"
            )
        );
        // Other blocks are not usage blocks.
        assert_eq!(
            subcommand(&blocks("d.md", "```sh\nagentd run -- x\n```\n")[0]),
            None
        );
        assert_eq!(
            subcommand(&blocks("d.md", "```\nagentd (tokio)\n```\n")[0]),
            None
        );
    }
}
