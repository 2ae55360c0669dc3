//! What the documents' examples are, as a table for `rfcs/README.md`, and which shell blocks run
//! agentd, confine-helper or confine-service without being a transcript or saying why not.

use super::markdown::Block;
use super::transcript;

/// The info strings of a shell block that is not a transcript.
const SHELLS: [&str; 3] = ["sh", "shell", "bash"];

/// The programs whose examples must run or say why not.
const PROGRAMS: [&str; 3] = ["agentd", "confine-helper", "confine-service"];

/// Words that may stand before a program in a command without being the program.
const PREFIXES: [&str; 6] = ["sudo", "env", "exec", "time", "nice", "!"];

/// Whether a shell line starts `agentd` or `confine-helper` (by name or by a path ending in
/// one) as a command: at its start or after `&&`, `||`, `|`, `;`, `(`, `$(`, a backtick or `{`,
/// past variable assignments and [`PREFIXES`]. An argument named so (`--path
/// confine-helper`) is not a run.
pub fn runs_a_program(line: &str) -> bool {
    let code = line.split(" #").next().unwrap_or(line);
    let mut spaced = code.to_owned();
    for separator in ["&&", "||", "$(", "|", ";", "(", ")", "`", "{", "}"] {
        spaced = spaced.replace(separator, "\n");
    }
    spaced.lines().any(|segment| {
        let command = segment
            .split_whitespace()
            .find(|word| !word.contains('=') && !PREFIXES.contains(word) && !word.starts_with('-'));
        command.is_some_and(|word| {
            let name = word
                .trim_matches(['"', '\''])
                .rsplit('/')
                .next()
                .unwrap_or("");
            PROGRAMS.contains(&name)
        })
    })
}

/// Every shell block that runs agentd, confine-helper or confine-service but is neither a `console` transcript
/// nor preceded by `<!-- not run: REASON -->`, a `not run` comment without a reason, and a
/// `console` block marked `not run` (a transcript always runs): each as `FILE:LINE: what`.
pub fn unaccounted(blocks: &[Block]) -> Vec<String> {
    let mut out = Vec::new();
    for block in blocks {
        let here = format!("{}:{}", block.file, block.line);
        match (&block.not_run, block.info.as_str()) {
            (Some(_), "console") => out.push(format!(
                "{here}: a `console` block always runs; to keep it from running, make it `sh` \
                 with its `not run` comment"
            )),
            (Some(reason), _) if reason.is_empty() => out.push(format!(
                "{here}: `<!-- not run: -->` needs a reason after the colon"
            )),
            (None, info)
                if SHELLS.contains(&info) && block.lines.iter().any(|l| runs_a_program(l)) =>
            {
                out.push(format!(
                    "{here}: this `{info}` block runs agentd or confine-helper; make it a \
                     `console` transcript that the test runs, or put `<!-- not run: REASON -->` \
                     on the line before it"
                ))
            }
            _ => {}
        }
    }
    out
}

/// A command as Markdown code inside a table cell.
fn cell_code(text: &str) -> String {
    let escaped = text.replace('|', "\\|");
    if escaped.contains('`') {
        format!("`` {escaped} ``")
    } else {
        format!("`{escaped}`")
    }
}

/// The index of `blocks`' examples: every `console` transcript and every block marked `not
/// run`, with its file (linked from `rfcs/`), the heading it is under and its commands, in
/// document order. Not its line: the index would go stale with every edit above an example.
pub fn render(blocks: &[Block]) -> String {
    let mut out = String::from("| file | section | commands |\n|---|---|---|\n");
    for block in blocks {
        let commands: Vec<String> = if block.info == "console" {
            match transcript::steps(block) {
                Ok(steps) => steps
                    .iter()
                    .map(|step| {
                        let first = transcript::first_line(&step.command);
                        let more = if step.command.contains('\n') {
                            " …"
                        } else {
                            ""
                        };
                        format!("{}{more}", cell_code(first))
                    })
                    .collect(),
                Err(_) => vec!["(not a transcript: see the test's report)".to_owned()],
            }
        } else if let Some(reason) = &block.not_run {
            let first = block.lines.iter().find(|l| !l.trim().is_empty());
            vec![format!(
                "not run ({reason}): {}",
                cell_code(first.map(String::as_str).unwrap_or(""))
            )]
        } else {
            continue;
        };
        let link = match block.file.strip_prefix("rfcs/") {
            Some(inside) => inside.to_owned(),
            None => format!("../{}", block.file),
        };
        let name = block.file.rsplit('/').next().unwrap_or(&block.file);
        out.push_str(&format!(
            "| [{name}]({link}) | {} | {} |\n",
            block.heading.replace('|', "\\|"),
            commands.join("<br>")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::markdown::blocks;

    #[test]
    fn a_program_is_found_where_a_command_starts_and_not_as_an_argument() {
        for line in [
            "agentd run -- true",
            "./target/release/agentd demo",
            "cargo build && ./target/release/agentd demo",
            "agentd probe                             # which backends work",
            "{ echo x; git diff; } | agentd exec --json - > review.ndjson",
            "AGENTD_SANDBOX_MODE=read-only agentd config show",
            "sudo confine-service --socket /run/x.sock",
            "x=\"$(agentd sessions list)\"",
        ] {
            assert!(runs_a_program(line), "{line}");
        }
        for line in [
            "cargo install --path confine-helper      # installs the confine-helper binary",
            "cargo build --release --workspace",
            "cd fuzz",
            "echo agentd",
            "ls target/agentd-data",
        ] {
            assert!(!runs_a_program(line), "{line}");
        }
    }

    #[test]
    fn a_shell_block_that_runs_agentd_needs_a_transcript_or_a_reason() {
        let text = "```sh\nagentd run -- true\n```\n\n<!-- not run: needs a model -->\n```sh\nagentd exec hi\n```\n\n```sh\ncargo install --path confine-helper\n```\n\n<!-- not run: -->\n```bash\nls\n```\n\n<!-- not run: x -->\n```console\n$ true\n```\n";
        let found = unaccounted(&blocks("doc.md", text));
        assert_eq!(found.len(), 3, "{found:#?}");
        assert!(
            found[0].starts_with("doc.md:1: this `sh` block runs"),
            "{found:#?}"
        );
        assert!(
            found[1].starts_with("doc.md:15: `<!-- not run: -->` needs a reason"),
            "{found:#?}"
        );
        assert!(
            found[2].starts_with("doc.md:20: a `console` block always runs"),
            "{found:#?}"
        );
    }

    #[test]
    fn the_index_lists_transcripts_and_blocks_not_run_and_nothing_else() {
        let text = "# Top\n\n<!-- not run: it is the build -->\n```sh\ncargo build | tee log\n```\n\n## Run\n\n```console\n$ agentd run -- true\n$ cat <<'EOF'\n> x\n> EOF\nx\n```\n\n```toml\n[sandbox]\n```\n";
        let index = render(&blocks("rfcs/implemented/doc.md", text));
        assert_eq!(
            index,
            "| file | section | commands |\n|---|---|---|\n\
             | [doc.md](implemented/doc.md) | Top | not run (it is the build): `cargo build \\| tee log` |\n\
             | [doc.md](implemented/doc.md) | Run | `agentd run -- true`<br>`cat <<'EOF'` … |\n"
        );
        let index = render(&blocks("README.md", text));
        assert!(
            index.contains("| [README.md](../README.md) | Top | not run"),
            "{index}"
        );
    }
}
